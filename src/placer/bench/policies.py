"""Policies that transfer and generalization columns start from (Placeto section 3, appendix A.3;
GiPH's unseen clusters).

A method parameter ``"@policy:<name>"`` names one of the experiment's :class:`PolicySpec`. Before
the runs that need it, the policy is trained once by its method's trainer (``train`` of
:mod:`placer.methods.learned.protocol`, the same path for every learned method) on its graphs
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
        """The trained policy (read once from its checkpoint by its method, labelled with its path)."""
        if self.policy is None:
            from placer.io import read_checkpoint
            from placer.methods.learned.protocol import learned_method

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
    ``sim``: the experiment's simulator preset, on the training clusters as :func:`training_params` says;
    what its method adds to the key: :meth:`placer.methods.learned.LearnedMethod.policy_key`."""
    from placer.bench.versions import versions
    from placer.methods.learned.protocol import learned_method
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
    method = learned_method(spec.method)
    key = {"harness": HARNESS_VERSION, "graphs": [G.graph_fingerprint(g) for g, _ in pairs],
           "clusters": [G.cluster_fingerprint(c) for _, c in pairs], "placements": ctx.placements,
           "seed": spec.seed, "sim": sim, **method.policy_key(_method_config(spec.method, spec.trainer), ctx.problems)}
    if spec.choices:  # (only then: a policy without choices keeps the hash it had)
        key["choices"] = [method.policy_key(_method_config(spec.method, o), ctx.problems)["trainer"]
                          for o in _candidates(spec)]
        key["selection"] = SELECTION
    key["versions"] = versions(spec.method)
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


COUNTS = ("progress_records", "episodes", "placements", "sim_calls")  # a record's counts, summed over candidates
SELECTION = {"episodes": 8, "greedy": False, "score": "geometric mean over the training graphs"}


def _candidates(spec: PolicySpec) -> list[dict[str, Any]]:
    """The trainer overrides of each candidate policy: ``trainer`` alone, or with each of ``choices``."""
    return [dict(spec.trainer, **c) for c in spec.choices] or [dict(spec.trainer)]


def _method_config(method: str, overrides=None):
    """``method``'s config with a policy's trainer overrides (unknown names are refused)."""
    from placer.methods import METHODS

    return METHODS[method].make_config(dict(overrides or {}))


def train(ctx: PolicyContext, sim_name: str) -> dict:
    """Train the policy with its method's trainer within its placement budget (each candidate of
    ``PolicySpec.choices`` on the whole budget, the one placing its training graphs best kept: the
    best of :data:`SELECTION`'s sampled episodes, ``place_episodes`` and ``greedy`` of the method's
    config), save the checkpoint and its cost record (every candidate's training and scoring
    counted, what the policy keeps of its training: :meth:`LearnedMethod.trained`)."""
    import numpy as np

    from placer.bench.versions import source_commit
    from placer.io import dumps, write_checkpoint, write_text_atomic
    from placer.methods.base import Evaluator
    from placer.methods.learned.protocol import learned_method

    t0 = time.perf_counter()
    prm = training_params(ctx.problems, sim_name, ctx.name)
    method = learned_method(ctx.spec.method)
    runs = []
    for overrides in _candidates(ctx.spec):
        cfg = _method_config(ctx.spec.method, overrides)  # the method's settings, with the policy's trainer overrides
        counted: list[dict] = []
        policy = method.train(ctx.problems, cfg, ctx.spec.seed, prm, placements=ctx.placements, progress=counted.append)
        run = {"trainer": overrides, "progress_records": len(counted), **method.trained(policy), "policy": policy}
        if len(ctx.spec.choices) > 1:  # score: zero-shot on the training graphs, as the tables place
            scored = dataclasses.replace(cfg, place_episodes=SELECTION["episodes"], greedy=SELECTION["greedy"])
            evs = [Evaluator(P, prm) for P in ctx.problems]
            for P, ev in zip(ctx.problems, evs):
                method.place(P, policy, ctx.spec.seed, ev, scored)
            run["sim_calls"] = run.get("sim_calls", 0) + sum(ev.sim_calls for ev in evs)
            run["score_us"] = float(np.exp(np.mean(np.log([ev.best_objective_us for ev in evs]))))
        runs.append(run)
    best = min(runs, key=lambda r: r.get("score_us", 0.0))
    write_checkpoint(method.policy_state(best["policy"]), ctx.path)
    counts = {k: sum(r[k] for r in runs) for k in COUNTS if k in best}
    record = {"policy": ctx.name, "method": ctx.spec.method, "hash": ctx.hash, "spec": dataclasses.asdict(ctx.spec),
              "versions": ctx.key["versions"], "source": source_commit(),
              "graphs": [P.graph.name for P in ctx.problems],
              "clusters": sorted({P.cluster.name for P in ctx.problems}),
              "placements": ctx.placements,  # the budget each candidate trained within (or what it used, when it says)
              **{k: v for k, v in best.items() if k not in ("trainer", "policy", "score_us")},
              **counts,  # what it keeps of its training, summed over the candidates
              "seconds": time.perf_counter() - t0}
    if len(runs) > 1:
        record["chosen"] = best["trainer"]
        record["candidates"] = [{k: r.get(k) for k in ("trainer", "episodes", "placements", "sim_calls", "score_us")}
                                for r in runs]
    write_text_atomic(ctx.path.with_suffix(".json"), dumps(record))
    return record
