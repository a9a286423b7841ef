"""Exact models of Tarnawski et al., NeurIPS 2020 (section 5, "Integer programming"), solved with
CP-SAT (version 3; HiGHS, as in version 2, with ``solver=highs`` or without OR-Tools): the latency IP (their ``lip.py`` model with q = 1 subgraph per accelerator) and the max-load
IP (``ip.py contig``: contiguity forced on the forward part, on CPUs too). Written from the paper's
formulation; the variables are per colocation group (their ``colorClass``), which their constraints
force to share a device anyway.

Common part: x[c, m] in {0, 1} puts group c on machine m (latency: machine 0 = all CPUs together,
which run without limit; throughput: one machine per device); sum_m x[c, m] = 1; an accelerator
holds at most its capacity of ``size``. Contiguity of machine m's set S (their section 5): z[c, m]
in [0, 1], z >= x, and for every edge a -> b of the order graph z[b] <= z[a] and
z[b] <= x[b] - x[a] + 1 (so nothing leaving S comes back). Transfers: CommIn[u, m] >= x[c(v), m] -
x[c(u), m] and CommOut[u, m] >= x[c(u), m] - x[c(v), m] for every edge u -> v between groups.

* throughput: load_m = sum of the time of m's ops + sum_u cost_u (CommIn + CommOut) on an
  accelerator; minimise the max load.
* latency: Start_m >= Lat_u - (1 - CommIn[u, m]) M, Finish_m = Start_m + compute + transfers,
  Lat_v >= Lat_u + cpu_v x[c(v), 0] over edges, Lat_v >= cpu_v x[c(v), 0],
  Lat_v >= Finish_m - (1 - x[c(v), m]) M; minimise max Lat. M is the best latency known (every Lat
  is at most the optimum, so M = an upper bound on it is exact), and the objective is bounded by it.

The bound, and why it was weak (version 1 reported a 100% gap on most dnn-partitioning inputs): the
solver's bound is the best LP relaxation of the branch-and-bound tree. In the latency IP every
accelerator term enters through a big-M row (``Lat_v >= Finish_m - (1 - x) M``): with x fractional
(a group spread 1/k over k accelerators) every such row is slack and the CPU rows scale by x too,
so the relaxation's latency is about 0 and the dual bound stays at 0 until branching has fixed
most of x, which HiGHS never reaches on hundreds of groups. The max-load IP's relaxation spreads
each group over every device: its bound is about the total work over the device count. Version 2
adds valid inequalities that every integer solution meets: ``Lat_v >= head_v``, the longest path to v
at each op's fastest time (:func:`path_heads`), with the big-M of each row cut to ``ub - head_v``;
``max load >=`` the busiest group alone and the total work over the devices; the objective is
bounded below by them (:func:`static_bound`), and so is the reported bound when HiGHS gives none.
The gap is then at most (best - that bound) / best, and it is what the note reports.

Version 3 (issue 65) solves the same IP with CP-SAT (:func:`cp_sat_solve`): big-M rows as rows
enforced by their literal, times in ticks rounded down, path rows for latency, first-use symmetry
among interchangeable machines, dp-split's DP splits to start the upper bound and the best placement as
a complete hint. docs/bounds_published.md proves each keeps the optimum (the bound valid). At 60 s the
gaps on the six dnn-partitioning inputs fell from 19-88% to those measured there. Version 4 (issue 65)
replaces the latency floor from segments solved apart by segments coupled through their cut ops' device
and piece memory (:func:`placer.methods.exact_published_chain.coupled_segment_bound`, rule 9 there). Version 5
(issue 65) values those points in a relaxed segment model solved in milliseconds
(:mod:`placer.methods.exact_published_relax`, rule 10), cuts at every articulation op, counts the accelerators
the path opens, and joins the segments' placements along the path into an upper bound (rule 11). Version 6 solves
more points without a wall clock (80 per segment, a fixed deterministic limit each) and lets the join ask less in
steps before it takes every free accelerator. Version 7 joins only under a wall clock.

Identical accelerators are interchangeable: the first group of accelerator m must come after the
first group of accelerator m-1 (symmetry breaking, when the model stays small). The solution is
scored by the objective; the result notes the solver's bound and the optimality gap. Limits: with
``Budget.seconds`` the solver gets what is left of it (not reproducible); without, a node limit
(``max_nodes``, one thread: the same answer under any load).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, NotApplicable, Range, register
from placer.methods.exact_published_chain import coupled_segment_bound
from placer.methods.exact_published_cp import (MILP_STATUS, cp_sat_solve, machine_list,  # noqa: F401
                                               path_heads, segment_bound, static_bound)
from placer.objectives.model import model_for


@dataclass(frozen=True)
class ExactPublishedConfig(MethodConfig):
    """The published IPs (Tarnawski et al. 2020, section 5) with CP-SAT (or HiGHS)."""

    placements: int = 2000  # placements of the DP splits and interval search that give the IP its upper bound
    solver: Literal["auto", "cp-sat", "highs"] = "auto"  # auto: CP-SAT where OR-Tools is installed, else HiGHS
    workers: Annotated[int, Range("in [1, 64]")] = 8  # CP-SAT search workers (interleaved when no --seconds is given: reproducible)
    deterministic_s: Annotated[float, Range("> 0")] = 20.0  # CP-SAT deterministic time when no --seconds is given (reproducible)
    max_nodes: Annotated[int, Range(">= 1")] = 5000  # HiGHS branch-and-bound nodes when no --seconds is given (reproducible)
    mip_gap: Annotated[float, Range("in [0, 1)")] = 0.0  # relative gap at which HiGHS stops (their Gurobi runs used 0.01)
    max_cells: Annotated[int, Range(">= 1")] = 400000  # models with more groups x machines x edges than this are refused

    @classmethod
    def method_name(cls) -> str:
        return "exact-published"


class _Rows:
    def __init__(self):
        self.r, self.c, self.v, self.lo, self.hi = [], [], [], [], []
        self.n = 0

    def add(self, terms, lo, hi):
        for j, a in terms:
            if a != 0:
                self.r.append(self.n)
                self.c.append(j)
                self.v.append(float(a))
        self.lo.append(lo)
        self.hi.append(hi)
        self.n += 1


def build_and_solve(problem, objective, upper_us: float, max_nodes: int, seconds: float | None, mip_gap: float,
                    max_cells: int):
    """(placement or None, solver incumbent, dual bound, status text). The MIP is solved by HiGHS as
    SciPy ships it (``scipy.optimize.milp``): the ``highspy`` wheel and OR-Tools each carry their
    own HiGHS, and the two cannot be loaded into one process (undefined symbols either way)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    m = model_for(problem)
    g = problem.graph
    latency = objective.name == "latency"
    machines, acc_m = machine_list(m, latency)
    M = len(machines)
    _, cls = np.unique(m.coloc_rep, return_inverse=True)
    C = int(cls.max()) + 1
    src, dst = g.edge_src, g.edge_dst
    cross = cls[src] != cls[dst]
    if C * M * (1 + int(cross.sum())) // max(1, C) * 4 > max_cells and C * M + int(cross.sum()) * M > max_cells:
        raise NotApplicable("exact-published", f"the model would have about {C * M + int(cross.sum()) * M} "
                            f"cells (max_cells={max_cells})", "raise max_cells or use dp-split / local-search")
    t = np.where(np.isfinite(m.t_us), m.t_us, np.inf)
    ncol = 0
    lo, hi, cost, integ = [], [], [], []

    def var(lb, ub, c=0.0, integer=False):
        nonlocal ncol
        lo.append(lb)
        hi.append(ub)
        cost.append(c)
        integ.append(integer)
        ncol += 1
        return ncol - 1

    x = np.empty((C, M), dtype=np.int64)
    tc = np.zeros((C, M))
    for c in range(C):
        ops = np.flatnonzero(cls == c)
        for k, (_, ds) in enumerate(machines):
            tt = t[ops, ds[0]].sum()
            tc[c, k] = tt
            x[c, k] = var(0.0, 1.0 if np.isfinite(tt) else 0.0, 0.0, True)
    rows = _Rows()
    for c in range(C):
        rows.add([(x[c, k], 1.0) for k in range(M)], 1.0, 1.0)
    memc = np.bincount(cls, weights=m.mem_bytes, minlength=C)
    for k in acc_m:
        rows.add([(x[c, k], memc[c]) for c in range(C)], -np.inf, float(m.cap_bytes[machines[k][1][0]]))
    # contiguity on the order graph
    order_edge = cross & ((m.forward[src] & m.forward[dst]) if not latency else np.ones_like(cross))
    pairs = sorted(set(zip(cls[src[order_edge]].tolist(), cls[dst[order_edge]].tolist())))
    need = [k for k in range(M) if m.acc[machines[k][1][0]] or objective.cpu_contiguous]
    for k in need:
        z = [var(0.0, 1.0) for _ in range(C)]
        for c in range(C):
            rows.add([(z[c], 1.0), (x[c, k], -1.0)], 0.0, np.inf)
        for a, b_ in pairs:
            rows.add([(z[b_], 1.0), (z[a], -1.0)], -np.inf, 0.0)
            rows.add([(z[b_], 1.0), (x[b_, k], -1.0), (x[a, k], 1.0)], -np.inf, 1.0)
    # transfers: per op u with an edge to another group, per accelerator machine
    tgt = {}
    for u, v in zip(src[cross].tolist(), dst[cross].tolist()):
        tgt.setdefault(u, set()).add(int(cls[v]))
    cin, cout = {}, {}
    for k in acc_m:
        for u, cs in tgt.items():
            if m.cost_us[u] <= 0 and not latency:
                continue
            cin[u, k] = var(0.0, 1.0)
            cout[u, k] = var(0.0, 1.0)
            for cv in cs:
                rows.add([(cin[u, k], 1.0), (x[cv, k], -1.0), (x[cls[u], k], 1.0)], 0.0, np.inf)
                rows.add([(cout[u, k], 1.0), (x[cls[u], k], -1.0), (x[cv, k], 1.0)], 0.0, np.inf)
    ub = float(upper_us) * (1 + 1e-9) + 1e-6
    floor_us, _ = static_bound(problem, objective)  # valid for every integer solution: tightens the relaxation
    top = var(min(floor_us, ub), ub, 1.0)
    if not latency:
        for k in range(M):
            terms = [(x[c, k], tc[c, k]) for c in range(C)]
            if k in acc_m:
                terms += [(cin[u, k], m.cost_us[u]) for u in tgt if (u, k) in cin]
                terms += [(cout[u, k], m.cost_us[u]) for u in tgt if (u, k) in cout]
            rows.add(terms + [(top, -1.0)], -np.inf, 0.0)
    else:
        Mbig = ub
        head = np.minimum(path_heads(m), ub)
        lat = [var(float(head[v]), ub) for v in range(m.n)]  # Lat_v >= head_v (path_heads)
        k0 = 0 if machines and not m.acc[machines[0][1][0]] else None
        for v in range(m.n):
            rows.add([(top, 1.0), (lat[v], -1.0)], 0.0, np.inf)
            if k0 is not None:
                rows.add([(lat[v], 1.0), (x[cls[v], k0], -t[v, machines[k0][1][0]])], 0.0, np.inf)
        for u, v in zip(src.tolist(), dst.tolist()):
            terms = [(lat[v], 1.0), (lat[u], -1.0)]
            if k0 is not None:
                terms.append((x[cls[v], k0], -t[v, machines[k0][1][0]]))
            rows.add(terms, 0.0, np.inf)
        for k in acc_m:
            st, fin = var(0.0, ub), var(0.0, ub)
            for u in tgt:
                if (u, k) in cin:  # Start >= Lat_u - (1 - CommIn) M
                    rows.add([(st, 1.0), (lat[u], -1.0), (cin[u, k], -Mbig)], -Mbig, np.inf)
            terms = [(fin, 1.0), (st, -1.0)] + [(x[c, k], -tc[c, k]) for c in range(C)]
            terms += [(cin[u, k], -m.cost_us[u]) for u in tgt if (u, k) in cin]
            terms += [(cout[u, k], -m.cost_us[u]) for u in tgt if (u, k) in cout]
            rows.add(terms, 0.0, 0.0)
            for v in range(m.n):  # Lat_v >= Finish - (1 - x) M_v, M_v = ub - head_v (Finish <= ub, Lat_v >= head_v)
                mv = Mbig - float(head[v])
                rows.add([(lat[v], 1.0), (fin, -1.0), (x[cls[v], k], -mv)], -mv, np.inf)
    # symmetry: identical accelerators used in order of their first group
    same = [k for k in acc_m]
    ident = len(same) > 1 and all(np.array_equal(m.t_us[:, machines[k][1][0]], m.t_us[:, machines[same[0]][1][0]])
                                  and m.cap_bytes[machines[k][1][0]] == m.cap_bytes[machines[same[0]][1][0]]
                                  for k in same)
    if ident and len(same) * C * C // 2 <= max_cells:
        for a, b_ in zip(same, same[1:]):
            for c in range(C):
                rows.add([(x[c, b_], 1.0)] + [(x[c2, a], -1.0) for c2 in range(c)], -np.inf, 0.0)
    A = coo_matrix((rows.v, (rows.r, rows.c)), shape=(rows.n, ncol)).tocsc()
    options = {"disp": False, "mip_rel_gap": float(mip_gap)}
    if seconds is not None:
        options["time_limit"] = float(max(0.1, seconds))
    else:
        options["node_limit"] = int(max_nodes)
    res = milp(np.asarray(cost, dtype=np.float64), integrality=np.asarray(integ, dtype=np.uint8),
               bounds=Bounds(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)),
               constraints=LinearConstraint(A, np.asarray(rows.lo, dtype=np.float64),
                                            np.asarray(rows.hi, dtype=np.float64)),
               options=options)
    status = MILP_STATUS.get(res.status, res.message)
    dual = getattr(res, "mip_dual_bound", None)
    bound = max(float(dual) if dual is not None and np.isfinite(dual) else 0.0, min(floor_us, ub))
    if res.x is None:  # no feasible solution
        return None, np.inf, bound, status
    if res.status == 0:
        bound = float(res.fun)
    col = np.asarray(res.x)
    place = np.empty(m.n, dtype=np.int64)
    for c in range(C):
        k = int(np.argmax(col[x[c]]))
        ds = machines[k][1]
        place[cls == c] = ds[0]
    return place, float(res.fun), bound, status


def _ortools_missing() -> str | None:
    try:
        from ortools.sat.python import cp_model  # noqa: F401
    except Exception as e:
        return f"ortools is not importable ({type(e).__name__})"
    return None


def check_size(problem, objective, max_cells: int) -> None:
    """NotApplicable when the model would have more than ``max_cells`` cells (either solver)."""
    m = model_for(problem)
    g = problem.graph
    latency = objective.name == "latency"
    M = int(m.acc.sum()) + (int((~m.acc).any()) if latency else int((~m.acc).sum()))
    _, cls = np.unique(m.coloc_rep, return_inverse=True)
    C = int(cls.max()) + 1
    ncross = int((cls[g.edge_src] != cls[g.edge_dst]).sum())
    if C * M * (1 + ncross) // max(1, C) * 4 > max_cells and C * M + ncross * M > max_cells:
        raise NotApplicable("exact-published", f"the model would have about {C * M + ncross * M} "
                            f"cells (max_cells={max_cells})", "raise max_cells or use dp-split / local-search")


def dp_start(problem, objective, ev: Evaluator, limit: int) -> tuple[np.ndarray | None, str | None]:
    """The best of dp-split's interval-split DPs (placer.methods.dp_split, its default orders), evaluated
    through ``ev`` up to ``limit`` placements in all: the interval search starts from it. (None, None)
    when the graph has too many blocks for the DP or no split is feasible."""
    from placer.methods.dp_split import DpSplitConfig, dp_candidates, runs_differ
    from placer.objectives.units import blocks_for, linear_order

    d = DpSplitConfig()
    b = blocks_for(problem, objective)
    room = limit - ev.placements
    if b.B > d.max_blocks or room < 2:
        return None, None
    orders = [linear_order(b, "index"), linear_order(b, "depth")]
    cands = []
    for order in orders:
        for by in ([False, True] if runs_differ(problem) else [False]):
            for p in dp_candidates(problem, objective, order, by):
                if not any(np.array_equal(p, q) for q in cands):
                    cands.append(p)
    cands = cands[:room - 1]
    if not cands:
        return None, None
    vals = ev.evaluate_batch(np.stack(cands)).objective_us
    k = int(np.argmin(vals))
    return cands[k], f"{len(cands)} DP interval splits (dp-split's) scored; the best ({vals[k] / 1000:.4f} ms) starts the search"


@register("exact-published", "the published latency / max-load integer programs (Tarnawski et al. 2020) "
          "solved with CP-SAT (or HiGHS), upper bound from DP splits and interval search; optimality gap "
          "reported", "exact", ExactPublishedConfig, paper="Tarnawski et al., NeurIPS 2020, section 5 (IP)", version=7)
def exact_published(problem, seed: int, ev: Evaluator, cfg: ExactPublishedConfig):
    from placer.objectives.published import LatencyObjective, ThroughputObjective
    from placer.methods.search import interval_search

    obj = ev.objective
    if obj.is_simulator:  # under the simulator: the max-load IP's split, scored by the simulator
        obj = ThroughputObjective()
    if not isinstance(obj, (LatencyObjective, ThroughputObjective)) or (
            isinstance(obj, LatencyObjective) and obj.pieces != 1):
        raise NotApplicable("exact-published", f"the objective is {obj.describe()}",
                            "give the latency or throughput objective (the models the published IPs solve)")
    check_size(problem, obj, cfg.max_cells)
    use_cp = cfg.solver == "cp-sat" or (cfg.solver == "auto" and _ortools_missing() is None)
    if use_cp and _ortools_missing():
        raise NotApplicable("exact-published", _ortools_missing(), "pip install 'placer[exact]' or set solver=highs")
    room = ev.remaining()
    latency = obj.name == "latency"
    heur = max(ev.placements + 1, ev.limit - 1 - latency) if room is not None else cfg.placements  # 1 kept: the joined split
    start, dp_note = dp_start(problem, obj, ev, heur - 1)
    p0, notes = interval_search(problem, obj, ev, seed, anneal=False, limit=heur, start=start, method="exact-published")
    notes = ([dp_note] if dp_note else []) + notes
    upper = ev.best_objective_us if ev.custom and np.isfinite(ev.best_objective_us) else obj.evaluate(problem, p0)
    if not np.isfinite(upper):
        m = model_for(problem)
        upper = float(np.where(np.isfinite(m.t_us), m.t_us, 0).max(axis=1).sum() + 2 * m.cost_us.sum())
    secs = None if ev.seconds is None else max(0.1, ev.seconds - ev.clock())
    t0 = ev.clock()
    if use_cp:
        hint = ev.best if ev.custom and ev.best is not None else p0
        seg_us, nseg = 0.0, 0
        if obj.name == "latency":  # sub-problems first: their bounds add up to one on the whole (bounds_published.md)
            keep = {}
            seg_us, plain_us, nseg, nsolve = coupled_segment_bound(
                problem, obj, upper, None if secs is None else 0.5 * secs, 0.5 * cfg.deterministic_s, cfg.workers, seed,
                hint=hint, keep=keep)
            if nseg:
                notes.append(f"segments between articulation ops solved first: their bounds add up to "
                             f"{plain_us / 1000:.4f} ms; {nseg} segments coupled through the cut ops' device, piece "
                             f"memory and accelerators opened ({nsolve} relaxed sub-problems solved), "
                             f"{seg_us / 1000:.4f} ms, a lower bound on the whole given to the IP")
            joined = keep.get("placement")
            if joined is not None and (ev.remaining() is None or ev.remaining() > 1):
                v = ev.evaluate(joined)
                notes.append(f"the segments' placements along that bound's path, joined: {v / 1000:.4f} ms")
                if v < upper:
                    upper, hint = float(v), joined
        left = None if secs is None else max(0.1, ev.seconds - ev.clock())
        place, inc, bound, status = cp_sat_solve(problem, obj, upper, left,
                                                 cfg.deterministic_s * (0.5 if nseg else 1.0), cfg.workers, seed,
                                                 hint, floor_us=min(seg_us, upper))
    else:
        place, inc, bound, status = build_and_solve(problem, obj, upper, cfg.max_nodes, secs, cfg.mip_gap,
                                                    cfg.max_cells)
    solver_name = "CP-SAT" if use_cp else "HiGHS"
    solve_s = ev.clock() - t0
    floor_us, floor_what = static_bound(problem, obj)
    best = ev.best if ev.custom and ev.best is not None else p0  # the interval search's, or the joined split
    if place is not None and (ev.remaining() is None or ev.remaining() > 0):
        v = ev.evaluate(place)
        if v <= ev.best_objective_us:
            best = place
    elif place is not None and not ev.custom:
        best = p0
    val = min(ev.best_objective_us, upper) if ev.custom else min(upper, inc)
    gap = max(0.0, (val - bound) / val) if val > 0 and np.isfinite(val) else 0.0
    notes = notes + [f"{solver_name} on the {obj.describe()} IP: {status} after {solve_s:.1f} s; solver bound "
                     f"{bound / 1000:.4f} ms (never below the {floor_what}, {min(floor_us, upper) / 1000:.4f} ms), "
                     f"best {val / 1000:.4f} ms, optimality gap {100 * gap:.2f}%"
                     + ("" if ev.custom else " (of that model; the result is scored by the simulator)")]
    res = ev.result("exact-published", best, notes=notes)
    if ev.seconds is not None and status == MILP_STATUS[0]:  # the wall-clock limit was given, not reached
        def within(n):  # the Evaluator's time note (stopped by / ran under a limit): the solver ended first
            if not (n.startswith((f"stopped by a {ev.seconds:g} s ", f"ran under a {ev.seconds:g} s ")) and "limit" in n):
                return n
            what = "CPU-time" if "CPU-time" in n else "wall-clock"
            return f"a {ev.seconds:g} s {what} limit was given; {solver_name} proved optimality in {solve_s:.1f} s, within it"
        res.notes = [within(n) for n in res.notes]
    res.cost.extra.update({"lower_bound_us": bound, "gap": gap, "solver_status": status,
                           # proven optimal under the objective it optimised (the bench's [opt] mark)
                           "optimal": bool(ev.custom and gap <= 1e-6 and np.isfinite(val)
                                           and res.objective_us is not None and res.objective_us <= val * (1 + 1e-9))})
    return res
