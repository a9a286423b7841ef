"""Policies that transfer and generalization columns start from (Placeto section 3, appendix A.3;
GiPH's unseen clusters).

A method parameter ``"@policy:<name>"`` names one of the experiment's :class:`PolicySpec`. Before
the runs that need it, the policy is trained once by its method's trainer (``train`` of
:mod:`placer.methods.learned`; Placeto's :meth:`placer.methods.placeto.Placeto.train`) on its graphs
(or on the training half of a generated family), on one cluster or several, and saved as
``results/<exp>/policies/<name>__<hash>.pt``, cached by a hash of what decides it, exactly like a
run; a run then gets the loaded policy object in place of the reference (:func:`substitute`: the
run's spec keeps ``"@policy:<name>"``). Its training cost (placements, simulator calls, seconds)
is kept beside it in a JSON file so the tables can say what a transferred policy cost before it was transferred.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placer.bench import graphs as G
from placer.bench.spec import HARNESS_VERSION, Experiment, PolicySpec, slug, stable_hash

PREFIX = "@policy:"


@dataclass
class PolicyContext:
    name: str
    spec: PolicySpec
    key: dict | None = None  # what its hash covers (see prepare)
    missing: str | None = None
    problems: list | None = None
    hash: str | None = None
    path: Path | None = None
    placements: int = 0
    policy: Any = None  # the trained policy, once loaded (:meth:`load`)

    @property
    def ready(self) -> bool:
        return self.path is not None and self.path.exists() and self.path.with_suffix(".json").exists()

    def load(self):
        """The trained policy (read once from its checkpoint, labelled with its path)."""
        if self.policy is None:
            if self.spec.method == "placeto":
                from placer.rl.checkpoint import load_policy

                self.policy = load_policy(self.path)
            else:
                from placer.io import read_checkpoint
                from placer.methods.learned import learned_method

                state = read_checkpoint(str(self.path), "policy", "train it again: delete the file")
                self.policy = learned_method(self.spec.method).load_policy(state, where=str(self.path))
        return self.policy


def references(params: dict[str, Any]) -> list[str]:
    return [v[len(PREFIX):] for v in params.values() if isinstance(v, str) and v.startswith(PREFIX)]


def substitute(params: dict[str, Any], contexts: dict[str, "PolicyContext"]) -> dict[str, Any]:
    """``params`` with each ``"@policy:<name>"`` replaced by that policy, loaded (it records its
    checkpoint's path as the run's ``policy`` parameter, as before). A policy not trained yet stays
    a reference: substitute again once :func:`train` has made it."""
    def value(v):
        if not (isinstance(v, str) and v.startswith(PREFIX)):
            return v
        ctx = contexts[v[len(PREFIX):]]
        return ctx.load() if ctx.ready else v

    return {k: value(v) for k, v in params.items()}


def prepare(exp: Experiment, name: str, level: str, results_dir: Path, sim: str) -> PolicyContext:
    """Load the policy's training graphs and decide its hash and checkpoint path (trains nothing);
    ``sim``: the experiment's simulator preset, on the training clusters as :func:`training_params` says."""
    from placer.problem import Problem

    spec = exp.policies.get(name)
    if spec is None:
        return PolicyContext(name, PolicySpec(), missing=f"the experiment defines no policy '{name}'")
    ctx = PolicyContext(name, spec, placements=int(spec.placements.get(level, 2_000)))
    try:
        if spec.family:
            graphs = G.family_graphs(spec.family, "train")
            paths = [None] * len(graphs)
        else:
            found = [G.resolve_row_graph((g,)) for g in spec.graphs]
            graphs, paths = [f[0] for f in found], [f[2] for f in found]
        pairs = [(g, G.resolve_row_cluster(cl, g, p)) for cl in (spec.clusters or (spec.cluster,))
                 for g, p in zip(graphs, paths)]
    except G.GraphMissing as e:
        ctx.missing = f"policy '{name}' cannot be trained: {e}"
        return ctx
    ctx.problems = [Problem(g, c) for g, c in pairs]
    sim = dataclasses.asdict(training_params(ctx.problems, sim, name))
    if spec.method != "placeto":  # another learned method's trainer (its own config and versions)
        ctx.key = {"harness": HARNESS_VERSION, "method": spec.method,
                   "graphs": [G.graph_fingerprint(g) for g, _ in pairs],
                   "clusters": [G.cluster_fingerprint(c) for _, c in pairs], "placements": ctx.placements,
                   "seed": spec.seed, "sim": sim, "trainer": _method_config(spec.method, spec.trainer).to_dict()}
        from placer.bench.versions import versions

        ctx.key["versions"] = versions(spec.method)
        ctx.hash = stable_hash(ctx.key)
        ctx.path = Path(results_dir) / exp.name / "policies" / f"{slug(name)}__{ctx.hash}.pt"
        return ctx
    key = {"harness": HARNESS_VERSION, "graphs": [G.graph_fingerprint(g) for g, _ in pairs],
           "clusters": [G.cluster_fingerprint(c) for _, c in pairs], "placements": ctx.placements,
           "seed": spec.seed, "sim": sim, "trainer": _trainer_key(spec.trainer)}
    if spec.choices:  # (only then: a policy without choices keeps the hash it had)
        key["choices"] = [_trainer_key(o) for o in _candidates(spec)]
        key["selection"] = SELECTION
    A = _n_candidates(ctx.problems[0], spec.trainer)
    if A != 2:  # the network's keep bias grows with ln(A - 1) (PlacetoConfig.policy_config); on 2 as it was
        key["candidates"] = A
    key["versions"] = policy_versions()
    ctx.key = key
    ctx.hash = stable_hash(key)
    ctx.path = Path(results_dir) / exp.name / "policies" / f"{slug(name)}__{ctx.hash}.pt"
    return ctx


def training_params(problems: list, sim_name: str, name: str = "policy"):
    """The SimParams a policy trains under: the experiment's ``sim`` on its training clusters, by the
    rule its runs follow (:meth:`SimParams.preset`, as :func:`placer.bench.runner.sim_params`), so a
    policy for GiPH's networks trains under the model they declare. One for all its problems: training
    clusters that declare different communication models are refused."""
    from placer.errors import InputError
    from placer.sim import SimParams

    found = list(dict.fromkeys(SimParams.preset(sim_name, P.cluster) for P in problems)) or [SimParams.preset(sim_name)]
    if len(found) > 1:
        raise InputError(f"policy '{name}'", "training clusters", "declare different communication models ("
                         + ", ".join(sorted({f.comm_model for f in found})) + ")",
                         "train one policy per communication model")
    return found[0]


def policy_versions() -> dict[str, int]:
    """The versions a trained policy depends on: the placeto method's (its trainer and network), the
    simulator's and the cost model's (:func:`placer.bench.versions.versions`)."""
    from placer.bench.versions import versions

    return versions("placeto")


SELECTION = {"episodes": 8, "greedy": False, "score": "geometric mean over the training graphs"}


def _candidates(spec: PolicySpec) -> list[dict[str, Any]]:
    """The trainer overrides of each candidate policy: ``trainer`` alone, or with each of ``choices``."""
    return [dict(spec.trainer, **c) for c in spec.choices] or [dict(spec.trainer)]


SEARCH_ONLY = ("restart", "refine", "refine_at")  # PlacetoConfig fields that training a policy does not read (search on one graph only)


def _trainer_key(overrides=None) -> dict:
    """A policy's trainer settings as its hash sees them: the config without :data:`SEARCH_ONLY`, so a
    field added for search alone keeps the trained policies cached. The ``progress`` callback stands
    as ``log``, None, the log file it replaced, so that committed policies keep their hash."""
    cfg = _placeto_config(overrides)  # devices as training reads them ("auto": the GPUs, see PlacetoConfig.candidates)
    key = {k: v for k, v in cfg.to_dict().items() if k != "progress"}
    return {k: v for k, v in {**key, "log": None, "devices": cfg.candidates()}.items() if k not in SEARCH_ONLY}


def _n_candidates(problem, overrides=None) -> int:
    """The number of devices a policy trained with these overrides places on (its actions)."""
    from placer.rl.task import candidate_devices

    return len(candidate_devices(problem, _placeto_config(overrides).candidates()))


def _placeto_config(overrides=None):
    """The placeto method's config with a policy's trainer overrides (unknown names are refused)."""
    return _method_config("placeto", overrides)


def _method_config(method: str, overrides=None):
    """``method``'s config with a policy's trainer overrides (unknown names are refused)."""
    from placer.methods import METHODS

    return METHODS[method].make_config(dict(overrides or {}))


def _train_other(ctx: PolicyContext, prm, t0: float) -> dict:
    """Train a policy with a learned method other than Placeto (one trainer, no ``choices``), save
    its state and its cost record."""
    from placer.bench.versions import source_commit
    from placer.io import dumps, write_checkpoint, write_text_atomic
    from placer.methods.learned import learned_method

    method = learned_method(ctx.spec.method)
    cfg = _method_config(ctx.spec.method, ctx.spec.trainer)
    counted: list[dict] = []
    policy = method.train(ctx.problems, cfg, ctx.spec.seed, prm, placements=ctx.placements, progress=counted.append)
    write_checkpoint(method.policy_state(policy), ctx.path)
    record = {"policy": ctx.name, "method": ctx.spec.method, "hash": ctx.hash, "spec": dataclasses.asdict(ctx.spec),
              "versions": ctx.key["versions"], "source": source_commit(),
              "graphs": [P.graph.name for P in ctx.problems],
              "clusters": sorted({P.cluster.name for P in ctx.problems}),
              "progress_records": len(counted),  # one per update (or episode) the trainer reported
              "placements": ctx.placements,  # the budget it trained within, in simulated placements
              "seconds": time.perf_counter() - t0}
    write_text_atomic(ctx.path.with_suffix(".json"), dumps(record))
    return record


def train(ctx: PolicyContext, sim_name: str) -> dict:
    """Train the policy within its simulator-call budget (each candidate of ``PolicySpec.choices``
    on the whole budget, the one placing its training graphs best kept), save the checkpoint and
    its cost record (every candidate's training and scoring counted)."""
    import numpy as np

    from placer.bench.versions import source_commit
    from placer.io import dumps, write_checkpoint, write_text_atomic
    from placer.methods.placeto import PLACETO
    from placer.rl.policy import place

    t0 = time.perf_counter()
    prm = training_params(ctx.problems, sim_name, ctx.name)
    if ctx.spec.method != "placeto":
        return _train_other(ctx, prm, t0)
    runs = []
    for overrides in _candidates(ctx.spec):
        cfg = _placeto_config(overrides)  # the method's settings, with the policy's trainer overrides
        policy = PLACETO.train(ctx.problems, cfg, ctx.spec.seed, prm, placements=ctx.placements)
        state = PLACETO.policy_state(policy)
        run = {"trainer": overrides, "episodes": state["episode"], "placements": state["placements"],
               "sim_calls": state["sim_calls"], "best": state["best"], "policy": policy}
        if len(ctx.spec.choices) > 1:  # score: zero-shot on the training graphs, as the tables place
            gps = [cfg.task(P, ctx.spec.seed) for P in ctx.problems]
            outs = [place(policy, gp, greedy=SELECTION["greedy"], episodes=SELECTION["episodes"], seed=ctx.spec.seed,
                          sim_params=prm) for gp in gps]
            run["sim_calls"] += sum(o.sim_calls for o in outs)
            run["score_us"] = float(np.exp(np.mean(np.log([o.objective_us for o in outs]))))
        runs.append(run)
    best = min(runs, key=lambda r: r.get("score_us", 0.0))
    write_checkpoint(PLACETO.policy_state(best["policy"]), ctx.path)
    record = {"policy": ctx.name, "hash": ctx.hash, "spec": dataclasses.asdict(ctx.spec),
              "versions": ctx.key["versions"], "source": source_commit(),
              "graphs": [P.graph.name for P in ctx.problems], "episodes": sum(r["episodes"] for r in runs),
              "placements": sum(r["placements"] for r in runs), "sim_calls": sum(r["sim_calls"] for r in runs),
              "seconds": time.perf_counter() - t0,
              # per training graph; None for a graph no episode has visited yet
              "best_objective_us": [b["objective_us"] if math.isfinite(b["objective_us"]) else None
                                    for b in best["best"]]}
    if len(runs) > 1:
        record["chosen"] = best["trainer"]
        record["candidates"] = [{k: r[k] for k in ("trainer", "episodes", "placements", "sim_calls", "score_us")}
                                for r in runs]
    write_text_atomic(ctx.path.with_suffix(".json"), dumps(record))
    return record
