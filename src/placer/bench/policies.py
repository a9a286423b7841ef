"""Policies that transfer and generalization columns start from (Placeto section 3, appendix A.3).

A method parameter ``"@policy:<name>"`` names one of the experiment's :class:`PolicySpec`. Before
the runs that need it, the policy is trained once with REINFORCE (:mod:`placer.rl`) on its graphs
(or on the training half of a generated family) and saved as
``results/<exp>/policies/<name>__<hash>.pt``, cached by a hash of what decides it, exactly like a
run. Its training cost (placements, simulator calls, seconds) is kept beside it in a JSON file so
the tables can say what a transferred policy cost before it was transferred.
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

    @property
    def ready(self) -> bool:
        return self.path is not None and self.path.exists() and self.path.with_suffix(".json").exists()


def references(params: dict[str, Any]) -> list[str]:
    return [v[len(PREFIX):] for v in params.values() if isinstance(v, str) and v.startswith(PREFIX)]


def substitute(params: dict[str, Any], contexts: dict[str, "PolicyContext"]) -> dict[str, Any]:
    """``params`` with each ``"@policy:<name>"`` replaced by that policy's checkpoint path."""
    return {k: (str(contexts[v[len(PREFIX):]].path) if isinstance(v, str) and v.startswith(PREFIX) else v)
            for k, v in params.items()}


def prepare(exp: Experiment, name: str, level: str, results_dir: Path, sim: dict) -> PolicyContext:
    """Load the policy's training graphs and decide its hash and checkpoint path (trains nothing)."""
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
        clusters = [G.resolve_row_cluster(spec.cluster, g, p) for g, p in zip(graphs, paths)]
    except G.GraphMissing as e:
        ctx.missing = f"policy '{name}' cannot be trained: {e}"
        return ctx
    ctx.problems = [Problem(g, c) for g, c in zip(graphs, clusters)]
    key = {"harness": HARNESS_VERSION, "graphs": [G.graph_fingerprint(g) for g in graphs],
           "clusters": [G.cluster_fingerprint(c) for c in clusters], "placements": ctx.placements,
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
    field added for search alone keeps the trained policies cached."""
    cfg = _placeto_config(overrides)  # devices as training reads them ("auto": the GPUs, see PlacetoConfig.candidates)
    return {k: v for k, v in {**cfg.to_dict(), "devices": cfg.candidates()}.items() if k not in SEARCH_ONLY}


def _n_candidates(problem, overrides=None) -> int:
    """The number of devices a policy trained with these overrides places on (its actions)."""
    from placer.rl.task import candidate_devices

    return len(candidate_devices(problem, _placeto_config(overrides).candidates()))


def _placeto_config(overrides=None):
    """The placeto method's config with a policy's trainer overrides (unknown names are refused)."""
    from placer.methods import METHODS

    return METHODS["placeto"].make_config(dict(overrides or {}))


def train(ctx: PolicyContext, sim_name: str) -> dict:
    """Train the policy within its simulator-call budget (each candidate of ``PolicySpec.choices``
    on the whole budget, the one placing its training graphs best kept), save the checkpoint and
    its cost record (every candidate's training and scoring counted)."""
    import numpy as np

    from placer.bench.versions import source_commit
    from placer.sim import SimParams
    from placer.io import dumps, write_text_atomic
    from placer.rl.policy import place
    from placer.rl.reinforce import Trainer

    t0 = time.perf_counter()
    prm = SimParams.preset(sim_name)
    runs = []
    for overrides in _candidates(ctx.spec):
        cfg = _placeto_config(overrides)  # the method's settings, with the policy's trainer overrides
        gps = [cfg.task(P, ctx.spec.seed) for P in ctx.problems]
        tr = Trainer(gps, cfg.policy_config(gps[0].n_actions), cfg.env(), cfg.reinforce(ctx.spec.seed), sim_params=prm)
        try:
            tr.train(max_placements=ctx.placements)
        finally:
            tr.close()
        run = {"trainer": overrides, "episodes": tr.episode, "placements": tr.placements, "sim_calls": tr.sim_calls,
               "best": tr.best, "trainer_obj": tr}
        if len(ctx.spec.choices) > 1:  # score: zero-shot on the training graphs, as the tables place
            state = tr.state_dict()
            outs = [place(state, gp, greedy=SELECTION["greedy"], episodes=SELECTION["episodes"], seed=ctx.spec.seed,
                          sim_params=prm) for gp in gps]
            run["sim_calls"] += sum(o.sim_calls for o in outs)
            run["score_us"] = float(np.exp(np.mean(np.log([o.objective_us for o in outs]))))
        runs.append(run)
    best = min(runs, key=lambda r: r.get("score_us", 0.0))
    best["trainer_obj"].save(ctx.path)
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
