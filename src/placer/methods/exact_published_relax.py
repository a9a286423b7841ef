"""A relaxation of one segment's latency model that is fast to solve exactly (docs/bounds_published.md, rule 10).

A segment (:func:`placer.methods.exact_published_cp.sub_model`) has one source (the copy of the cut op before
it, or the graph's first op) and one sink (its cut op). Its pieces are named by what they hold: F, the piece
of the source; J, the piece of the sink; every other accelerator piece is merged into one machine O that runs
in parallel without limit, holds any memory, and moves data between its own ops for free; C is the CPUs. F is
closed under predecessors and J under successors (contiguity), each within its accelerator's memory. Every
placement of the segment maps onto this model with a latency no larger, so its optimum is a lower bound on
the segment's.

* :func:`fork_join_bound`: where every op other than the source and sink has one input and one output (a
  fork-join of chains, as in Inception and ResNet blocks), each chain's choice is a prefix on F, a suffix on J
  and the middle on O / C (the best middle by a two-state recurrence); the choices interact only through two
  memory sums, F's and J's sums of times and transfers, and the latest arrival, so a small multiple-choice
  model solves it exactly.
* :func:`path_split`: a segment with a few paths (nested forks, as in Inception's last blocks) becomes one by
  splitting each op shared by p paths into p copies with 1/p of its time, transfer and memory (a relaxation).
* :func:`machine_bound`: any other segment, the same relaxation as a CP-SAT model over four machines.
* :func:`path_exact`: a segment that is a path (a run of articulation ops) needs no relaxation: a dynamic
  program over where its pieces end is the published model's optimum.

Each takes ``new``, the most accelerator pieces the segment may open (the source's piece is not new unless it is
the graph's first op): exact_published_chain counts them against the accelerators along its path.
"""

from __future__ import annotations

import numpy as np

from placer.methods.exact_published_cp import cp_solver

F, J, C, O = 0, 1, 2, 3  # the relaxed model's machines
MAX_PATHS = 64  # segments with more source-to-sink paths get the four-machine model instead of the path split


def _tick(upper_us: float):
    res = max(1e-6, float(upper_us) * 1.000001 / 1e9)  # ticks rounded down, as exact_published_cp does
    return res, lambda us: int(np.floor(float(us) / res + 1e-9))


def _fastest(sm):
    acc, cpu = np.flatnonzero(sm.acc), np.flatnonzero(~sm.acc)
    t = np.where(np.isfinite(sm.t_us), sm.t_us, np.inf)
    ta = t[:, acc].min(axis=1) if len(acc) else np.full(sm.n, np.inf)
    tc = t[:, cpu].min(axis=1) if len(cpu) else np.full(sm.n, np.inf)
    return ta, tc


def chains(sm) -> list[list[int]] | None:
    """The chains from the source (op 0) to the sink (the last op) when every other op has one input and one
    output: one list of ops per out-edge of the source (empty: an edge straight to the sink). None otherwise."""
    n, t = sm.n, sm.n - 1
    pp, sp, si = sm.pred_ptr, sm.succ_ptr, sm.succ_idx
    if n < 2 or pp[1] != pp[0] or sp[t + 1] != sp[t]:
        return None
    if any(pp[v + 1] - pp[v] != 1 or sp[v + 1] - sp[v] != 1 for v in range(1, n - 1)):
        return None
    out = []
    for w in si[sp[0]:sp[1]].tolist():
        chain = []
        while w != t and len(chain) < n:
            chain.append(w)
            w = int(si[sp[w]])
        out.append(chain)
    return out if sum(len(c) for c in out) == n - 2 else None


def _middles(ta, tc, cost, chain, source) -> dict[tuple[int, int], float]:
    """(k, l) -> the earliest time after its sender's output exists that the middle chain[k:L-l] hands its last
    output on (O: its time, plus its transfer out; C: its time), each op on O or C: entering O from another
    machine costs the sender's transfer, leaving it the last O op's. Empty middle: 0."""
    L = len(chain)
    res = {}
    for k in range(L + 1):
        prev = chain[k - 1] if k else source
        on_o, on_c = np.inf, 0.0  # best ready time with the last op on O (before its transfer out) / on C or the sender
        arrive = [0.0]
        for j in range(k, L):
            v = chain[j]
            to_o = min(on_o, on_c + cost[prev]) + ta[v]
            to_c = min(on_o + cost[prev], on_c) + tc[v]
            on_o, on_c, prev = to_o, to_c, v
            arrive.append(min(on_o + cost[v], on_c))
        for end in range(k, L + 1):
            res[k, L - end] = arrive[end - k]
    return res


def fork_join_bound(sm, chs, kin, e, kout, x, cap, upper_us, seconds=None, deterministic_s=1.0, workers=1,
                    new=None, source_new=False):
    """The relaxed segment's optimum (see the module) on a fork-join of chains ``chs``: (value, closed, fit).
    ``new``: the most accelerator pieces it may open (J, O if used, F when ``source_new``; None: any). ``fit``
    (closed only): what the optimum holds, to tell which points asking more it still fits (:func:`fits`)."""
    ta, tc = _fastest(sm)
    mem, cost = sm.mem_bytes, sm.cost_us
    s0, t = 0, sm.n - 1
    res, tick = _tick(upper_us)
    quantum = max(1.0, cap / 1e9)  # memory in units that keep CP-SAT's sums in range, rounded down
    best, closed, fit = np.inf, True, None
    for s_on_f in ([True] if kin == "acc" else [False] if kin == "cpu" else [True, False]):
        if not np.isfinite(ta[s0] if s_on_f else tc[s0]) or (s_on_f and max(e, mem[s0]) > cap):
            continue
        room_f = cap - max(e, mem[s0])
        for t_on_j in ([True] if kout == "acc" else [False] if kout == "cpu" else [True, False]):
            if not np.isfinite(ta[t] if t_on_j else tc[t]) or (t_on_j and mem[t] + x > cap):
                continue
            room_j = cap - mem[t] - x
            for o_ok in [True] if new is None else [True, False]:
                if new is not None and int(s_on_f and source_new) + int(t_on_j) + int(o_ok) > new:
                    continue
                val, ok, use = _fork_join_case(ta if o_ok else np.full(len(ta), np.inf), tc, ta, mem, cost, chs,
                                               s_on_f, t_on_j, room_f, room_j, quantum, res, tick, upper_us, seconds,
                                               deterministic_s, workers)
                if val < best:
                    fit = None if use is None else ("two", s_on_f, t_on_j, *use)
                best, closed = min(best, val), closed and ok
    if new is None or int(source_new) <= new:  # F = J opens the source's piece only
        best, won = _with_one_piece(sm, ta, kin, e, kout, x, cap, best)
        fit = ("one", True, True, float(mem[1:].sum()), 0.0) if won else fit
    return best, closed, fit if closed else None


def fits(sm, fit, kin, e, kout, x, cap) -> bool:
    """Whether the optimum described by ``fit`` (:func:`fork_join_bound`) is also a solution of the point (``kin``,
    ``e``, ``kout``, ``x``): its devices allowed there, its pieces within memory."""
    if fit is None:
        return False
    how, s_on_f, t_on_j, use_f, use_j = fit
    if (kin is not None and (kin == "acc") != s_on_f) or (kout is not None and (kout == "acc") != t_on_j):
        return False
    mem = sm.mem_bytes
    if how == "one":
        return max(e, mem[0]) + use_f + x <= cap
    return (not s_on_f or max(e, mem[0]) + use_f <= cap) and (not t_on_j or mem[-1] + x + use_j <= cap)


def _fork_join_case(ta_mid, tc, ta, mem, cost, chs, s_on_f, t_on_j, room_f, room_j, quantum, res, tick, upper_us,
                    seconds, deterministic_s, workers) -> tuple[float, bool]:
    """One case of :func:`fork_join_bound`: the source on F or C, the sink on J or C, the middles' times on O
    ``ta_mid`` (inf: O not used)."""
    from ortools.sat.python import cp_model

    s0, t = 0, len(ta) - 1
    if len(chs) == 1:  # one chain: every choice enumerated
        val, fit = _one_chain(ta, ta_mid, tc, mem, cost, chs[0], s_on_f, t_on_j, room_f, room_j)
        return val, True, fit
    mdl = cp_model.CpModel()
    used = []  # (literal, memory on F, memory on J) of every choice
    out_s0, in_s0 = mdl.NewBoolVar("out"), mdl.NewBoolVar("in")  # F sends the source's output / J receives it
    at_least = {}  # order encoding of the latest arrival: at_least[v] = the latest arrival is >= v
    terms, mem_f, mem_j = [], [], []
    feasible = True
    for ch in chs:
        L = len(ch)
        mid = _middles(ta_mid, tc, cost, ch, s0)
        pick = []
        for k in range(L + 1) if s_on_f else [0]:
            if not np.isfinite(ta[ch[:k]]).all():
                break
            for l in range(L - k + 1) if t_on_j else [0]:
                if not np.isfinite(ta[ch[L - l:]]).all() or not np.isfinite(mid[k, l]):
                    continue
                y = mdl.NewBoolVar("")
                pick.append(y)
                a = ta[ch[:k]].sum() + (cost[ch[k - 1]] if k else 0.0)  # F: the prefix, its transfer out
                b = (ta[ch[L - l:]].sum() + (cost[ch[L - l - 1]] if L - l else 0.0)) if t_on_j else 0.0
                terms.append((tick(a) + tick(b), y))
                arrive = tick(mid[k, l])
                if arrive > 0:
                    if arrive not in at_least:
                        at_least[arrive] = mdl.NewBoolVar("")
                    mdl.AddImplication(y, at_least[arrive])
                if s_on_f and not k:
                    mdl.AddImplication(y, out_s0)
                if t_on_j and L - l == 0:
                    mdl.AddImplication(y, in_s0)
                mem_f.append((int(np.floor(mem[ch[:k]].sum() / quantum)), y))
                mem_j.append((int(np.floor(mem[ch[L - l:]].sum() / quantum)), y))
                used.append((y, mem[ch[:k]].sum(), mem[ch[L - l:]].sum()))
        if not pick:
            feasible = False
            break
        mdl.AddExactlyOne(pick)
    if not feasible:
        return np.inf, True, None
    if s_on_f:
        mdl.Add(sum(w * y for w, y in mem_f if w) <= int(np.floor(room_f / quantum)))
    if t_on_j:
        mdl.Add(sum(w * y for w, y in mem_j if w) <= int(np.floor(room_j / quantum)))
    base = (tick(ta[s0]) if s_on_f else tick(tc[s0])) + (tick(ta[t]) if t_on_j else tick(tc[t]))
    steps = sorted(at_least)
    for lo, hi in zip(steps, steps[1:]):
        mdl.AddImplication(at_least[hi], at_least[lo])
    late = sum((hi - lo) * at_least[hi] for lo, hi in zip([0] + steps, steps))
    mdl.Minimize(base + late + sum(w * y for w, y in terms if w)
                 + tick(cost[s0]) * out_s0 * int(s_on_f) + tick(cost[s0]) * in_s0 * int(t_on_j))
    val, ok, solver = _solve(mdl, res, seconds, deterministic_s, workers, small=True)
    if not ok or not np.isfinite(val):
        return val, ok, None
    return val, ok, (sum(f for y, f, _ in used if solver.Value(y)), sum(j for y, _, j in used if solver.Value(y)))


def _one_chain(ta, ta_mid, tc, mem, cost, ch, s_on_f, t_on_j, room_f, room_j) -> tuple[float, tuple | None]:
    """:func:`fork_join_bound`'s model with a single chain, every (prefix, suffix) tried (no rounding)."""
    s0, t, L = 0, len(ta) - 1, len(ch)
    mid = _middles(ta_mid, tc, cost, ch, s0)
    best, fit = np.inf, None
    for k in range(L + 1) if s_on_f else [0]:
        if not np.isfinite(ta[ch[:k]]).all() or mem[ch[:k]].sum() > room_f:
            break
        a = (ta[s0] + ta[ch[:k]].sum() + (cost[ch[k - 1]] if k else cost[s0])) if s_on_f else tc[s0]
        for l in range(L - k + 1) if t_on_j else [0]:
            if not np.isfinite(ta[ch[L - l:]]).all() or mem[ch[L - l:]].sum() > room_j:
                continue
            b = (ta[t] + ta[ch[L - l:]].sum() + cost[ch[L - l - 1] if L - l else s0]) if t_on_j else tc[t]
            if a + mid[k, l] + b < best:
                best, fit = a + mid[k, l] + b, (mem[ch[:k]].sum(), mem[ch[L - l:]].sum())
    return float(best), fit


def _with_one_piece(sm, ta, kin, e, kout, x, cap, best):
    """F = J: the source's piece holds the sink, so (contiguity) the whole segment, with no transfer inside.
    (the smaller of it and ``best``, whether it is smaller)."""
    if kin != "cpu" and kout != "cpu" and np.isfinite(ta).all():
        if max(e, sm.mem_bytes[0]) + sm.mem_bytes[1:].sum() + x <= cap and float(ta.sum()) < best:
            return float(ta.sum()), True
    return best, False


def _solve(mdl, res, seconds, deterministic_s, workers, small=False):
    from ortools.sat.python import cp_model

    solver = cp_solver(seconds, deterministic_s, workers, least_s=0.01)
    if small:  # a few hundred booleans: presolve and probing cost more than they save (measured: 3x)
        solver.parameters.cp_model_presolve = False
        solver.parameters.cp_model_probing_level = 0
    st = solver.Solve(mdl)
    if st == cp_model.INFEASIBLE:
        return np.inf, True, solver
    if st == cp_model.OPTIMAL:
        return float(solver.ObjectiveValue()) * res, True, solver
    return float(solver.BestObjectiveBound()) * res, False, solver


def machine_bound(sm, kin, e, kout, x, cap, upper_us, seconds=None, deterministic_s=1.0, workers=1, new=None,
                  source_new=False):
    """The relaxed segment's optimum (see the module) on any segment, as a CP-SAT model: (bound, closed)."""
    from ortools.sat.python import cp_model

    n, first, last = sm.n, 0, sm.n - 1
    ta, tc = _fastest(sm)
    mem, cost = sm.mem_bytes, sm.cost_us
    preds = [sm.pred_idx[sm.pred_ptr[v]:sm.pred_ptr[v + 1]].tolist() for v in range(n)]
    succs = [sm.succ_idx[sm.succ_ptr[v]:sm.succ_ptr[v + 1]].tolist() for v in range(n)]
    below = np.zeros(n, dtype=bool)  # descendants of the first op: F needs it to be the only source
    below[first] = True
    for v in range(n):
        below[v] |= any(below[u] for u in preds[v])
    above = np.zeros(n, dtype=bool)  # ancestors of the last op: J needs it to be the only sink
    above[last] = True
    for v in range(n - 1, -1, -1):
        above[v] |= any(above[w] for w in succs[v])
    f_ok, j_ok = bool(below.all()), bool(above.all())
    res, tick = _tick(upper_us)
    top_ub = tick(upper_us) + 1
    mdl = cp_model.CpModel()
    y = [[mdl.NewBoolVar("") for _ in range(4)] for _ in range(n)]
    for v in range(n):
        can = {F: f_ok and np.isfinite(ta[v]), J: j_ok and np.isfinite(ta[v]), C: np.isfinite(tc[v]),
               O: np.isfinite(ta[v])}
        if v == first and f_ok:  # the first op on an accelerator is F's by its name (J holding it: F = J, below)
            can[O] = can[J] = False
            can[C] = can[C] and kin != "acc"
            can[F] = can[F] and kin != "cpu" and max(e, mem[first]) <= cap
        if v == last and j_ok:
            can[O] = can[F] = False
            can[C] = can[C] and kout != "acc"
            can[J] = can[J] and kout != "cpu"
        for k in range(4):
            if not can[k]:
                mdl.Add(y[v][k] == 0)
        mdl.AddExactlyOne(y[v])
    if new is not None:  # pieces opened: J (holding the sink when it has any op), O if used, F if the source is new
        used_o = mdl.NewBoolVar("")
        for v in range(n):
            mdl.AddImplication(y[v][O], used_o)
        mdl.Add(used_o + (y[last][J] if j_ok else 0) + (y[first][F] if source_new and f_ok else 0) <= new)
    for v in range(n):
        for u in preds[v]:
            mdl.AddImplication(y[v][F], y[u][F])  # F closed under predecessors
            mdl.AddImplication(y[u][J], y[v][J])  # J under successors
    if f_ok:
        mdl.Add(sum(int(np.floor(mem[v])) * y[v][F] for v in range(1, n) if mem[v] > 0)
                <= int(np.floor(cap - max(e, mem[first]))))
    mdl.Add(sum(int(np.floor(mem[v])) * y[v][J] for v in range(n) if mem[v] > 0)
            <= int(np.floor(cap - (x if j_ok else 0.0))))
    out_f, in_j = {}, {}
    for u in range(n):
        if succs[u]:
            out_f[u], in_j[u] = mdl.NewBoolVar(""), mdl.NewBoolVar("")
            for w in succs[u]:
                mdl.AddBoolOr([out_f[u], y[u][F].Not(), y[w][F]])
                mdl.AddBoolOr([in_j[u], y[w][J].Not(), y[u][J]])
    fin_f, start_j, fin_j = (mdl.NewIntVar(0, top_ub, nm) for nm in ("finF", "startJ", "finJ"))
    fin_ta = [v for v in range(n) if np.isfinite(ta[v])]
    mdl.Add(fin_f == sum(tick(ta[v]) * y[v][F] for v in fin_ta) + sum(tick(cost[u]) * out_f[u] for u in out_f))
    mdl.Add(fin_j == start_j + sum(tick(ta[v]) * y[v][J] for v in fin_ta) + sum(tick(cost[u]) * in_j[u] for u in in_j))
    ready = [mdl.NewIntVar(0, top_ub, "") for _ in range(n)]  # on O: a path's time in its piece, transfer out not yet
    done = [mdl.NewIntVar(0, top_ub, "") for _ in range(n)]  # the time the op's output is there for another machine
    top = mdl.NewIntVar(0, top_ub, "top")
    for v in range(n):
        mdl.Add(done[v] >= fin_f).OnlyEnforceIf(y[v][F])
        mdl.Add(done[v] >= fin_j).OnlyEnforceIf(y[v][J])
        if np.isfinite(tc[v]):
            mdl.Add(done[v] >= tick(tc[v])).OnlyEnforceIf(y[v][C])
        if np.isfinite(ta[v]):
            mdl.Add(ready[v] >= tick(ta[v])).OnlyEnforceIf(y[v][O])
            mdl.Add(done[v] >= ready[v] + tick(cost[v])).OnlyEnforceIf(y[v][O])
        for u in preds[v]:
            if np.isfinite(tc[v]):
                mdl.Add(done[v] >= done[u] + tick(tc[v])).OnlyEnforceIf(y[v][C])
            if np.isfinite(ta[v]):
                mdl.Add(ready[v] >= ready[u] + tick(ta[v])).OnlyEnforceIf([y[v][O], y[u][O]])
                mdl.Add(ready[v] >= done[u] + tick(cost[u]) + tick(ta[v])).OnlyEnforceIf([y[v][O], y[u][O].Not()])
        if v in in_j:
            mdl.Add(start_j >= done[v]).OnlyEnforceIf(in_j[v])
        mdl.Add(top >= done[v]).OnlyEnforceIf(y[v][O].Not())
        mdl.Add(top >= ready[v]).OnlyEnforceIf(y[v][O])
    mdl.Minimize(top)
    val, ok, _ = _solve(mdl, res, seconds, deterministic_s, workers)  # (no usage kept: solved once per point)
    if new is None or int(source_new) <= new:
        val = _with_one_piece(sm, ta, kin, e, kout, x, cap, val)[0]
    return val, ok, None


def is_path(sm) -> bool:
    """Op v feeds op v + 1 and nothing else (ops are stored in a topological order)."""
    n = sm.n
    return bool(np.array_equal(np.diff(sm.pred_ptr), np.r_[0, np.ones(n - 1, dtype=np.int64)]) and
                np.array_equal(sm.pred_idx, np.arange(n - 1)))


def path_exact(sm, kin, e, kout, x, cap, new=None, source_new=False) -> float:
    """The segment's exact optimum (the published model, no relaxation) when it is a path: pieces are runs of
    consecutive ops and run one after another, so the latency is the sum over runs of an accelerator run's time
    plus its transfer in (from the op before it) and out (to the op after it, inside the segment), and each CPU
    op's time; a run holding the source adds ``e`` (at least the source's own memory) to its memory, the run
    holding the sink ``x``. A dynamic program over where runs end, counting the runs opened (capped at 2)."""
    n = sm.n
    ta, tc = _fastest(sm)
    mem, cost = sm.mem_bytes, sm.cost_us
    cta, cmem = np.r_[0.0, np.cumsum(ta)], np.r_[0.0, np.cumsum(mem)]
    best = np.full((n + 1, 3), np.inf)  # [ops done, runs opened (capped)]
    best[0, 0] = 0.0
    for i in range(n):  # the next run starts at op i
        for c in range(3):
            here = best[i, c]
            if not np.isfinite(here):
                continue
            if np.isfinite(tc[i]) and not (i == 0 and kin == "acc") and not (i == n - 1 and kout == "acc"):
                best[i + 1, c] = min(best[i + 1, c], here + tc[i])
            if i == 0 and kin == "cpu":
                continue
            c2 = min(2, c + (1 if i > 0 or source_new else 0))
            if new is not None and c2 > new:
                continue
            base = max(e, mem[0]) - mem[0] if i == 0 else 0.0  # the source's run holds e before the segment
            for j in range(i, n):  # the run is ops i..j
                if not np.isfinite(ta[j]):
                    break
                used = base + cmem[j + 1] - cmem[i] + (x if j == n - 1 else 0.0)
                if used > cap:
                    if j < n - 1 or base + cmem[j + 1] - cmem[i] > cap:
                        break
                    continue
                if j == n - 1 and kout == "cpu":
                    continue
                val = here + cta[j + 1] - cta[i] + (cost[i - 1] if i else 0.0) + (cost[j] if j < n - 1 else 0.0)
                best[j + 1, c2] = min(best[j + 1, c2], val)
    return float(best[n].min())


def segment_relaxed(sm, kin, e, kout, x, cap, upper_us, seconds=None, deterministic_s=1.0, workers=1, new=None,
                    source_new=False):
    """A lower bound on segment ``sm``'s latency with its source on ``kin`` and sink on ``kout`` (None: either,
    "acc", "cpu"), the source's piece holding ``e`` memory before the segment's ops and the sink's keeping
    ``x`` free (both capacity ``cap``), opening at most ``new`` accelerator pieces besides the source's (None: any;
    ``source_new``: the source's piece counts too): (bound, closed, fit: see :func:`fits`). inf where nothing
    fits."""
    if is_path(sm):
        return path_exact(sm, kin, e, kout, x, cap, new, source_new), True, None
    chs = chains(sm)
    if chs is not None:
        return fork_join_bound(sm, chs, kin, e, kout, x, cap, upper_us, seconds, deterministic_s, 1, new, source_new)
    split = path_split(sm)
    if split is not None:
        return fork_join_bound(*split, kin, e, kout, x, cap, upper_us, seconds, deterministic_s, 1, new, source_new)
    return machine_bound(sm, kin, e, kout, x, cap, upper_us, seconds, deterministic_s, workers, new, source_new)


def path_split(sm, max_paths: int = MAX_PATHS):
    """The segment with each op v lying on p(v) > 1 source-to-sink paths split into p(v) copies, one on each
    path, each with 1/p(v) of v's times, transfer cost and memory: a fork-join of chains (the paths) whose
    relaxed optimum is at most the segment's (a placement puts every copy where v is: sums over a piece or a
    machine are unchanged or smaller, each path's time no larger). (model, chains), or None when the first op is
    not the only source, the last not the only sink, or there are more than ``max_paths`` paths."""
    from dataclasses import replace

    n, t = sm.n, sm.n - 1
    succs = [sm.succ_idx[sm.succ_ptr[v]:sm.succ_ptr[v + 1]].tolist() for v in range(n)]
    to_sink = np.zeros(n)  # paths from each op to the sink
    to_sink[t] = 1.0
    for v in range(n - 2, -1, -1):
        if not succs[v]:
            return None  # another sink
        to_sink[v] = sum(to_sink[w] for w in succs[v])
    if to_sink[0] > max_paths or sm.pred_ptr[1] != sm.pred_ptr[0] or any(
            sm.pred_ptr[v + 1] == sm.pred_ptr[v] for v in range(1, n)):
        return None
    paths, stack = [], [(0, [])]
    while stack:
        v, trail = stack.pop()
        for w in reversed(succs[v]):
            if w == t:
                paths.append(trail)
            else:
                stack.append((w, trail + [w]))
    share = np.zeros(n)
    for p in paths:
        share[p] += 1
    ops = [0] + [v for p in paths for v in p] + [t]
    scale = np.array([1.0] + [1.0 / share[v] for p in paths for v in p] + [1.0])
    chs, at = [], 1
    for p in paths:
        chs.append(list(range(at, at + len(p))))
        at += len(p)
    t_us = sm.t_us[ops] * np.where(np.isfinite(sm.t_us[ops]), scale[:, None], 1.0)
    return replace(sm, n=len(ops), t_us=t_us, cost_us=sm.cost_us[ops] * scale,
                   mem_bytes=sm.mem_bytes[ops] * scale), chs
