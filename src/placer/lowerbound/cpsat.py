"""Exact relaxations solved with CP-SAT (docs/bounds.md, "exact"): the relaxed problem of
:mod:`placer.lowerbound.relax` on a set ``S`` of ops, every other op dropped but kept as the
longest paths between the ops of ``S`` (each op on the way at its fastest, transfers free) and as
each op's device-aware head and tail. Dropping ops and constraints only relaxes, so CP-SAT's proven
objective bound of this model bounds every placement's step time; with ``S`` every op it is the
whole relaxed problem, and a placement whose simulated step time equals it is optimal.

Times are integers of ``res`` microseconds, every duration, delay, head and tail rounded down:
``floor(a + b) >= floor(a) + floor(b)``, so any real schedule rounded down is a schedule of the
rounded model and its optimum times ``res`` never exceeds the real one. The solver runs one worker
with a fixed seed and a deterministic time limit: the same input gives the same bound on any load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.lowerbound.load import Classes
from placer.lowerbound.relax import longest_between, running_bytes
from placer.lowerbound.transfers import add_transfers


@dataclass(frozen=True)
class ExactResult:
    bound_us: float  # CP-SAT's proven bound times res (inf: no placement of S fits)
    res_us: float  # the time unit
    optimal: bool  # CP-SAT proved its model optimal (bound == its best solution)
    placement: np.ndarray | None  # devices of S in its best solution (None when none found)
    model_us: float  # that solution's objective in the model (inf when none)


def interchangeable(relax, classes: Classes) -> list[np.ndarray]:
    """Classes whose devices any permutation maps onto each other with every cost, memory and link
    unchanged (checked for each transposition, which generate every permutation)."""
    out = []
    bw, lat = relax.bandwidth, relax.latency
    for c in range(len(classes.count)):
        devs = np.flatnonzero(classes.of == c)
        if len(devs) < 2:
            continue
        ok = True
        for i in devs[1:]:
            perm = np.arange(relax.D)
            perm[[devs[0], i]] = perm[[i, devs[0]]]
            if not (np.array_equal(bw[np.ix_(perm, perm)], bw) and np.array_equal(lat[np.ix_(perm, perm)], lat)):
                ok = False
                break
        if ok:
            out.append(devs)
    return out


def solve_subset(relax, classes: Classes, S: np.ndarray, memory: bool, det_seconds: float,
                 seed: int = 0) -> ExactResult:
    """CP-SAT on the relaxed problem restricted to the ops ``S`` (sorted)."""
    from ortools.sat.python import cp_model

    problem = relax.problem
    g = problem.graph
    S = np.asarray(S, dtype=np.int64)
    k = len(S)
    D = relax.D
    est, tail, dur, occ = relax.est[S], relax.tail[S], relax.dur[S], relax.occ[S]
    allowed = np.isfinite(dur)
    mem = np.asarray(problem.memory_bytes, dtype=np.float64)
    if memory:
        allowed &= g.param_bytes[S][:, None] + running_bytes(problem)[S] <= mem[None, :]
        if not allowed.any(axis=1).all():
            return ExactResult(float("inf"), 1.0, True, None, float("inf"))
    # a schedule of S one op at a time, each transfer between them at its slowest, fits in the horizon
    # (an upper bound on the optimum of the model: every schedule it keeps is at most this long)
    slowest = float((relax.link_latency + relax.link_us_per_byte * float(g.edge_bytes.max(initial=0.0))).max())
    horizon = float(np.where(allowed, est + tail, 0.0).max() + np.where(allowed, occ, 0.0).max(axis=1).sum()
                    + np.where(allowed, tail, 0.0).max() + g.n_edges * slowest) + 1.0
    res = horizon / 1e9
    H = int(horizon / res) + 2

    def f(x):
        return int(np.floor(x / res))

    m = cp_model.CpModel()
    T = m.NewIntVar(0, H, "T")
    start = [m.NewIntVar(f(float(est[i][allowed[i]].min())), H, f"s{i}") for i in range(k)]
    x = [{d: m.NewBoolVar(f"x{i}_{d}") for d in np.flatnonzero(allowed[i]).tolist()} for i in range(k)]
    end = []
    per_dev: list[list] = [[] for _ in range(D)]
    for i in range(k):
        m.AddExactlyOne(x[i].values())
        end.append(m.NewIntVar(0, 2 * H, f"e{i}"))
        m.Add(end[i] == start[i] + sum(f(dur[i, d]) * b for d, b in x[i].items()))
        for d, b in x[i].items():
            per_dev[d].append(m.NewOptionalFixedSizeIntervalVar(start[i], f(occ[i, d]), b, f"iv{i}_{d}"))
            m.Add(start[i] >= f(est[i, d])).OnlyEnforceIf(b)
            m.Add(T >= start[i] + f(tail[i, d])).OnlyEnforceIf(b)
    for d in range(D):
        if len(per_dev[d]) > 1:
            m.AddNoOverlap(per_dev[d])
            # redundant (the intervals are disjoint, inside [0, T]): gives CP-SAT's LP the load bound
            m.Add(sum(f(occ[i, d]) * x[i][d] for i in range(k) if d in x[i]) <= T)
    # colocation: members of one group inside S share a device
    pos = {int(o): i for i, o in enumerate(S.tolist())}
    col = g.colocation[S]
    for c in np.unique(col[col >= 0]).tolist():
        members = np.flatnonzero(col == c)
        for i in members[1:]:
            for d in set(x[members[0]]) | set(x[i]):
                a, b = x[members[0]].get(d), x[i].get(d)
                if a is None or b is None:
                    m.Add((a if a is not None else b) == 0)
                else:
                    m.Add(a == b)
    # longest paths between ops of S (transfers free), and each direct edge's transfer when split
    fastest = relax.fastest
    for i, u in enumerate(S.tolist()):
        gap = longest_between(g.succ_ptr, g.succ_idx, fastest, g.n_ops, u)[S]
        for j in np.flatnonzero(gap > -np.inf).tolist():
            if j > i:
                m.Add(start[j] >= end[i] + f(gap[j]))
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            v = int(g.succ_idx[e])
            j = pos.get(v)
            if j is None:
                continue
            nb = float(g.edge_bytes[g.succ_edge[e]])
            for a, xa in x[i].items():
                for b, xb in x[j].items():
                    if a != b:
                        t = f(relax.delay(a, b, nb))
                        if t > 0:
                            m.Add(start[j] >= end[i] + t).OnlyEnforceIf([xa, xb])
    add_transfers(m, relax, S, x, end, start, T, H, f, pos)
    if memory:  # parameters all step; while an op runs, what it holds (running_bytes) too
        params = g.param_bytes[S]
        run = running_bytes(problem)[S]
        for d in range(D):
            terms = [(int(np.floor(params[i])), x[i][d]) for i in range(k) if d in x[i] and params[i] >= 1]
            total = sum(t for t, _ in terms)
            for i in range(k):
                if d in x[i] and run[i, d] > 0 and total + run[i, d] > mem[d]:
                    m.Add(sum(t * b for t, b in terms) <= int(np.floor(mem[d] - run[i, d]))).OnlyEnforceIf(x[i][d])
            if terms and total > mem[d]:
                m.Add(sum(t * b for t, b in terms) <= int(np.floor(mem[d])))
    # interchangeable devices: the i-th op of S uses one of the first i + 1 devices of the class
    for devs in interchangeable(relax, classes):
        for i in range(min(k, len(devs))):
            for d in devs[i + 1:].tolist():
                if d in x[i]:
                    m.Add(x[i][d] == 0)
    m.Minimize(T)
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.random_seed = int(seed)
    p.max_deterministic_time = float(det_seconds)
    p.max_time_in_seconds = 20.0 * float(det_seconds) + 30.0  # a guard only: the deterministic limit ends it first
    status = solver.Solve(m)
    if status == cp_model.INFEASIBLE:
        return ExactResult(float("inf"), res, True, None, float("inf"))
    bound = float(solver.BestObjectiveBound()) * res
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        place = np.array([next(d for d, b in x[i].items() if solver.Value(b)) for i in range(k)], dtype=np.int64)
        return ExactResult(bound, res, status == cp_model.OPTIMAL, place, float(solver.ObjectiveValue()) * res)
    return ExactResult(bound, res, False, None, float("inf"))
