"""The bound engine: the best of several lower bounds on the step time, each measured
(docs/bounds.md gives each one's proof).

    from placer.lowerbound import lower_bound
    b = lower_bound(problem, sim_params, seconds=2.0)
    b.value_us, b.source, b.candidates, b.proven_optimal

``value_us`` bounds the step time of every placement that fits in memory (the placements a table's
"best" is taken from); ``any_placement_us`` bounds every placement the simulator scores, fitting or
not (it uses no memory constraint: the memory-penalised objective is never below the makespan).
The value is deterministic: the linear programs are exact, CP-SAT runs one worker with a fixed seed
and ``seconds`` is its *deterministic* time (CP-SAT's work units, about a second each on one core),
so the same input gives the same bound under any machine load. ``seconds`` only reports wall time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from placer.lowerbound.cpsat import solve_subset
from placer.lowerbound.known import polish
from placer.lowerbound.memory import path_bound, series_bound
from placer.lowerbound.load import device_classes, energetic_bound, load_lp, weighted_work, window_bound
from placer.lowerbound.relax import Relaxation, running_bytes

DEFAULT_SECONDS = 2.0  # CP-SAT's deterministic time by default
EXACT_OPS = 40  # CP-SAT on the whole relaxed problem up to this many ops
SUBSET_OPS = 24  # the ops of an exact sub-problem on larger graphs
SUBSETS = 4  # exact sub-problems on larger graphs
TOLERANCE = 1e-6  # relative: a known step time this close to the bound is optimal (rounding, LP tolerance)


@dataclass(frozen=True)
class Candidate:
    name: str
    value_us: float
    seconds: float  # wall time it took (reported only: the value does not depend on it)
    memory: bool  # uses memory capacities: valid only for placements that fit
    note: str = ""


@dataclass(frozen=True)
class Bound:
    value_us: float  # the best bound on the step time of every placement that fits in memory
    source: str  # the candidate that gave it
    any_placement_us: float  # the best bound that holds for every placement, fitting or not
    candidates: tuple[Candidate, ...]
    old_us: float  # Problem.lower_bound_us: critical path and total work over the devices
    best_known_us: float | None = None  # the best fitting step time the engine saw or was given
    proven_optimal: bool = False  # best_known_us equals value_us (within TOLERANCE)
    placement: np.ndarray | None = field(default=None, compare=False)  # one with best_known_us, when the engine found it
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"value_us": self.value_us, "source": self.source, "any_placement_us": self.any_placement_us,
                "old_us": self.old_us, "best_known_us": self.best_known_us, "proven_optimal": self.proven_optimal,
                "seconds": self.seconds,
                "candidates": [{"name": c.name, "value_us": c.value_us, "seconds": c.seconds, "memory": c.memory,
                                "note": c.note} for c in self.candidates]}


def lower_bound(problem, sim_params=None, seconds: float | None = None, known_us: float | None = None) -> Bound:
    """The best lower bound on ``problem``'s step time under ``sim_params`` (default: the cluster's
    own model, as :func:`placer.sim.simulate`). ``seconds``: CP-SAT's deterministic time (default
    :data:`DEFAULT_SECONDS`); ``known_us``: a fitting placement's step time, to say whether the
    bound proves it optimal."""
    from placer.sim import SimParams

    params = sim_params or SimParams.preset("default", problem.cluster)
    det = DEFAULT_SECONDS if seconds is None else float(seconds)
    t_all = time.perf_counter()
    cands: list[Candidate] = []

    def measure(name, memory, fn, note=""):
        t0 = time.perf_counter()
        v = fn()
        cands.append(Candidate(name, float(v), time.perf_counter() - t0, memory, note))
        return v

    memory = _memory_may_bind(problem)
    relax = Relaxation.of(problem, params)
    classes = device_classes(relax)
    _cheap(relax, classes, False, "", measure)
    fit = Relaxation.of(problem, params, fit=True) if memory else relax
    if fit is None:  # some op fits on no device: no placement fits, every one is out of memory
        cands.append(Candidate("memory", float("inf"), 0.0, True, "an op fits on no device: no placement fits"))
        return _done(cands, problem, None, None, t_all)
    if memory:
        fclasses = device_classes(fit)
        if not np.array_equal(np.isfinite(fit.dur), np.isfinite(relax.dur)):  # memory keeps ops off devices
            _cheap(fit, fclasses, True, " (fitting)", measure)
        measure("load + memory", True, lambda: load_lp(fit, fclasses, memory=True)[0],
                "the load LP with each class's memory holding the parameters placed there")
        measure("memory paths", True, lambda: path_bound(fit),
                "a path cut into runs that fit a device's memory, a transfer at each cut")
        measure("memory series", True, lambda: series_bound(fit),
                "series of blocks: runs of whole blocks that fit one device, a transfer between runs")
        relax, classes = fit, fclasses  # the exact relaxations below bound the fitting placements
    placement, known = None, known_us
    if det > 0:
        if problem.n_ops <= EXACT_OPS:
            S = np.arange(problem.n_ops)
            t0 = time.perf_counter()
            r = solve_subset(relax, classes, S, memory, det)
            cands.append(Candidate("exact", r.bound_us, time.perf_counter() - t0, memory,
                                   "CP-SAT on the whole relaxed problem" + (" (optimal)" if r.optimal else "")))
            starts = [np.full(problem.n_ops, d, dtype=np.int64) for d in range(problem.n_devices)]
            if r.placement is not None:
                starts.insert(0, r.placement)
            if r.bound_us < float("inf"):  # a fitting placement may exist: find a good one to compare
                placement, step = polish(problem, params, starts)
                if step is not None and (known is None or step < known):
                    known = step
                else:
                    placement = None
        elif seconds is not None:  # sub-problems only on request: they rarely beat the cheap bounds (docs/bounds.md)
            t0 = time.perf_counter()
            subsets = _subsets(relax, SUBSET_OPS, SUBSETS)
            best = max((solve_subset(relax, classes, S, memory, det / len(subsets)).bound_us for S in subsets),
                       default=0.0)
            cands.append(Candidate("exact subsets", best, time.perf_counter() - t0, memory,
                                   f"CP-SAT on {len(subsets)} sets of {SUBSET_OPS} consecutive ops with their heads, "
                                   "tails and the longest paths between them"))
    return _done(cands, problem, known, placement, t_all)


def _cheap(relax, classes, memory: bool, suffix: str, measure) -> np.ndarray:
    """The critical-path, load and window bounds of ``relax``; returns the load LP's class weights."""
    measure("critical path" + suffix, memory, lambda: relax.path_us,
            "device-aware longest path: per-op costs, transfers between devices, op gaps")
    lp: list = []
    measure("load" + suffix, memory, lambda: max(lp.append(load_lp(relax, classes, memory=False)) or lp[0][0],
                                                 float(relax.min_occ.max(initial=0.0))),
            "fractional assignment of every op's work to device classes")
    w = weighted_work(relax, classes, lp[0][1])
    vals = [measure("windows" + suffix, memory, lambda: window_bound(relax.head, relax.tail_after_end, w),
                    "work that must run after a head and before a tail"),
            relax.path_us, lp[0][0], float(relax.min_occ.max(initial=0.0))]
    measure("energy" + suffix, memory, lambda: energetic_bound(relax, classes, lp[0][1], max(vals)),
            "each device class's share of every op's occupancy of a window, heads and tails per class")
    return lp[0][1]


def _done(cands, problem, known, placement, t_all) -> Bound:
    value_c = max(cands, key=lambda c: c.value_us)
    free = [c for c in cands if not c.memory]
    any_us = max(c.value_us for c in free) if free else 0.0
    value = value_c.value_us
    proven = known is not None and np.isfinite(value) and known <= value * (1 + TOLERANCE) + 1e-9
    return Bound(value, value_c.name, any_us, tuple(cands), float(problem.lower_bound_us), known,
                 bool(proven), placement, time.perf_counter() - t_all)


def _memory_may_bind(problem) -> bool:
    """Whether some device cannot hold every op's parameters and the most any op holds while running
    (else the memory constraints are slack and the memory-free bounds are the same)."""
    g = problem.graph
    need = float(g.param_bytes.sum()) + running_bytes(problem).max(initial=0.0)
    return bool((np.asarray(problem.memory_bytes) < need).any())


def _subsets(relax, k: int, count: int) -> list[np.ndarray]:
    """Up to ``count`` disjoint windows of ``k`` consecutive ops (topological order) with the most
    work beyond their own longest path (the work that must overlap it, on its device or across a
    link): where the exact sub-problem can prove more than the critical path."""
    n = relax.n
    if n == 0:
        return []
    g = relax.graph
    fast = relax.min_occ
    step = max(k // 2, 1)
    scored = []
    for s0 in range(0, max(n - k, 0) + 1, step):
        S = np.arange(s0, min(s0 + k, n))
        finish = np.zeros(len(S))
        for i, o in enumerate(S.tolist()):
            preds = g.pred_idx[g.pred_ptr[o]:g.pred_ptr[o + 1]]
            inside = preds[preds >= s0] - s0
            finish[i] = (finish[inside].max() if len(inside) else 0.0) + fast[o]
        scored.append((float(fast[S].sum() - finish.max()), s0))
    scored.sort(key=lambda t: (-t[0], t[1]))
    out, used = [], set()
    for _, s0 in scored:
        if len(out) == count:
            break
        if any(abs(s0 - u) < k for u in used):
            continue
        used.add(s0)
        out.append(np.arange(s0, min(s0 + k, n)))
    return out
