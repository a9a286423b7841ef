"""exact-published's latency bound from segments coupled through their cut ops (docs/bounds_published.md,
rules 9 and 10).

Rule 7 first (:func:`placer.methods.exact_published_cp.segment_bound`'s segments, at most ``max_ops`` ops
each, solved apart: the latency is at least the sum). Then the graph is cut at *every* articulation op, and each
cut op a_s gets a *state*: on the CPU, or on an accelerator whose piece holds A_s in [g_j, g_{j+1}] of memory in
the segments up to a_s (a grid of G intervals). The segment before a_s then keeps a_s on that kind of device
with cap - g_{j+1} more memory on it, the one after keeps the copy of a_s there taking max(g_j, its memory); a
shortest path over the cuts' states picks those giving the least sum. A point's value is a lower bound of its
segment's latency there: the relaxation of :mod:`placer.methods.exact_published_relax` (rule 10), solved
exactly in milliseconds where the segment is a fork-join of chains. Points not solved yet take the largest
bound of a solved point asking no more (the optimum only grows as more is asked). Points are solved lazily,
those on the current shortest path first, until the path is made of closed points or the time is up.
"""

from __future__ import annotations

import time

import numpy as np

from placer.methods.exact_published_cp import cp_sat_solve, segment_spans, static_bound, sub_model
from placer.methods.exact_published_relax import fits, segment_relaxed
from placer.objectives.model import model_for


PER_SOLVE = 0.02  # a first solve of a point gets at most this share of the time (a point not closed is solved
# again with twice its time once the path is made of solved points)
SUB_WORKERS = 4  # CP-SAT workers for a segment's model: small models, where more workers mostly wait (measured)
RULE7_SHARE = 0.25  # of the time: rule 7's segments of the full model, solved apart
SOLVES_PER_SEGMENT = 80  # without a wall clock: the points solved, at most, per segment (measured: 13 ms each)
POINT_DET = 0.05  # without a wall clock: CP-SAT's deterministic limit for one relaxed point
MAX_PATH_OPS = 64  # a run of articulation ops is one path segment up to this many ops (its program is quadratic)
STITCH_SHARE = 0.2  # of the time: a placement joined from the final path's segments (an upper bound)


VARIANTS = 3  # a point's variants by the accelerator pieces the segment may open: at most 0, at most 1, any
CHARGE = np.array([0, 1, 2])  # pieces counted against the accelerators for each variant (any: at least 2 of them)


class _Segment:
    """One segment's points: variant v (:data:`VARIANTS`), entry state i and exit state k
    (:func:`coupled_segment_bound`); ``lb[v, i, k]`` proven, ``done`` solved, ``spent`` the limit of the last
    solve of a point not closed (0: closed)."""

    def __init__(self, sm, n_in: int, n_out: int):
        self.sm = sm
        self.lb = np.zeros((VARIANTS, n_in, n_out))
        self.done = np.zeros((VARIANTS, n_in, n_out), dtype=bool)
        self.spent = np.zeros((VARIANTS, n_in, n_out))
        self.sols: list[tuple[int, tuple, float]] = []  # (variant, fit, value) of the optima found
        self._table = None
        # state 0: nothing asked; 1: the cut op on the CPU; 2 + j: on an accelerator, A in grid interval j. Entry
        # i' asks no more than i when i' = 0, i' = i, or both on accelerators and i' <= i (a smaller entry
        # reservation); exit k' no more than k when k' = 0, k' = k, or both on accelerators and k' >= k; variant
        # v' no more than v when v' >= v (more pieces allowed).
        ii, kk = np.arange(n_in), np.arange(n_out)
        self.in_le = (ii[:, None] == 0) | (ii[:, None] == ii[None, :]) | ((ii[:, None] >= 2) & (ii[None, :] >= 2)
                                                                           & (ii[:, None] <= ii[None, :]))
        self.out_le = (kk[:, None] == 0) | (kk[:, None] == kk[None, :]) | ((kk[:, None] >= 2) & (kk[None, :] >= 2)
                                                                             & (kk[:, None] >= kk[None, :]))

    def set(self, v: int, i: int, k: int, lb: float, closed_limit: float) -> None:
        self.lb[v, i, k] = max(self.lb[v, i, k], lb, self.table()[v, i, k])
        self.done[v, i, k] = True
        self.spent[v, i, k] = closed_limit
        self._table = None

    def table(self) -> np.ndarray:
        """Each point's largest proven bound of a point asking no more than it (the optimum only grows as more
        is asked): the three conditions are separate, so three maxima in turn."""
        if self._table is None:
            val = np.maximum.accumulate(np.where(self.done, self.lb, 0.0)[::-1], axis=0)[::-1]  # over v' >= v
            over_k = (val[:, :, :, None] * self.out_le[None, None, :, :]).max(axis=2)  # [v, i', k]
            self._table = (over_k[:, :, None, :] * self.in_le[None, :, :, None]).max(axis=1)
        return self._table


def _rule7(problem, objective, m, upper_us, seconds, deterministic_s, workers, seed, max_ops) -> float:
    """Rule 7: the coarse segments of the full model solved apart (the copy of each cut op taking its memory),
    a first pass at half each one's share, the rest to those not closed. The sum of their bounds."""
    segs = segment_spans(m, max_ops)
    S, t0 = len(segs), time.monotonic()
    lbs, open_ = [0.0] * S, []

    def left():
        return None if seconds is None else seconds - (time.monotonic() - t0)

    def solve(s, secs):
        a, b = segs[s]
        sm = sub_model(m, np.arange(max(0, a - 1), b + 1), free_first=a > 0)
        if a > 0:
            sm.mem_bytes[0] = m.mem_bytes[a - 1]  # on an accelerator the copy's piece holds the cut op
        _, _, lb, status = cp_sat_solve(problem, objective, upper_us, secs, deterministic_s / S,
                                        min(workers, SUB_WORKERS), seed, model=sm)
        lbs[s] = max(lbs[s], lb if status != "Infeasible" else max(float(upper_us), static_bound(problem, objective, sm)[0]))
        return status

    for s in range(S):
        rest = left()
        if solve(s, None if rest is None else max(0.05, 0.5 * rest / (S - s))) != "Optimal":
            open_.append(s)
    for n, s in enumerate(open_ if seconds is not None else []):
        rest = left()
        if rest <= 0.05:
            break
        solve(s, max(0.05, rest / (len(open_) - n)))
    return float(sum(lbs))


def coupled_segment_bound(problem, objective, upper_us: float, seconds: float | None, deterministic_s: float,
                          workers: int, seed: int, max_ops: int = 40, grid: int = 32,
                          max_solves: int | None = None, hint: np.ndarray | None = None,
                          keep: dict | None = None) -> tuple[float, float, int, int]:
    """Rule 7's sum of segment bounds, then rule 10's segments at every articulation op coupled through the cut
    ops' device and the memory of their pieces. Returns (bound, rule 7's sum, segments, points solved); (0, 0,
    0, 0) when the graph has fewer than two segments. ``seconds``: wall-clock for all of it (None: each solve
    under a fixed deterministic limit, reproducible); ``max_solves``: a cap on the points solved (default
    without ``seconds``: ``SOLVES_PER_SEGMENT`` per segment). ``keep`` (under a wall clock): a dict that receives
    ``placement``, the segments' placements
    along the final path joined into one (:func:`_stitch`; None if none fits), built with ``STITCH_SHARE`` of the
    time, each segment's model hinted with ``hint`` where given."""
    m = model_for(problem)
    if objective.name != "latency" or m.n == 0:
        return 0.0, 0.0, 0, 0
    if len(segment_spans(m, max_ops)) < 2:
        return 0.0, 0.0, 0, 0
    t0 = time.monotonic()
    plain = _rule7(problem, objective, m, upper_us, None if seconds is None else RULE7_SHARE * seconds,
                   RULE7_SHARE * deterministic_s, workers, seed, max_ops)
    segs = []
    for a, b in segment_spans(m, 1):  # every articulation op cuts, except inside a run of them (a path, solved exactly)
        if segs and a == b and segs[-1][2] and b - segs[-1][0] < MAX_PATH_OPS:
            segs[-1][1] = b
        else:
            segs.append([a, b, a == b])
    segs = [(a, b) for a, b, _ in segs]
    S = len(segs)
    acc, cpu = np.flatnonzero(m.acc), np.flatnonzero(~m.acc)
    caps = m.cap_bytes[acc]
    cap = float(caps.max()) if len(acc) else 0.0
    finest = max(1, int(grid)) if len(acc) and np.all(caps == caps[0]) else 1  # one interval unless one capacity
    A = len(acc)  # accelerators: the pieces the path opens, counted per variant, add up to at most these
    solves = 0
    cap_solves = max_solves if max_solves is not None else (None if seconds is not None else SOLVES_PER_SEGMENT * S)
    det = POINT_DET  # the relaxed models are small: a fixed deterministic limit each (reproducible)
    stop = None if seconds is None else (1 - STITCH_SHARE * (keep is not None)) * seconds

    def left():
        return None if seconds is None else seconds - (time.monotonic() - t0)

    def out_of_time():
        rest = None if stop is None else stop - (time.monotonic() - t0)
        return (rest is not None and rest <= 0.05) or (cap_solves is not None and solves >= cap_solves)

    def limit(count):
        rest = left()
        return None if rest is None else max(0.02, min(rest / max(1, count), PER_SOLVE * seconds))

    def level(G, before):
        """The bound on a grid of G intervals, starting from the points solved on the grid of G / 2 (``before``;
        each of its intervals is two of these, so its points are points here asking the same). Returns (bound,
        path, whether the path is made of closed points, ask, segments)."""
        pts = np.linspace(0.0, cap, G + 1)  # on an accelerator, A lies in [pts[j], pts[j + 1]] for some j
        cut_states = ([1] if len(cpu) else []) + ([2 + j for j in range(G)] if len(acc) else [])
        segments = [_Segment(before[s].sm if before else sub_model(m, np.arange(max(0, a - 1), b + 1), free_first=a > 0),
                             2 + G if s > 0 else 1, 2 + G if s < S - 1 else 1) for s, (a, b) in enumerate(segs)]
        if before:  # entry interval j of G / 2 is entry 2j here (same bottom), exit j is exit 2j + 1 (same top)
            for seg, old in zip(segments, before):
                ii = np.array([q if q < 2 else 2 + 2 * (q - 2) for q in range(old.lb.shape[1])])
                kk = np.array([q if q < 2 else 2 + 2 * (q - 2) + 1 for q in range(old.lb.shape[2])])
                if seg.lb.shape[1] == 1:
                    ii = np.array([0])
                if seg.lb.shape[2] == 1:
                    kk = np.array([0])
                for arr, src in ((seg.lb, old.lb), (seg.done, old.done), (seg.spent, old.spent)):
                    arr[np.ix_(np.arange(VARIANTS), ii, kk)] = src
                seg.sols = list(old.sols)

        def ask(s, i, k):
            """Point (i, k) of segment s: (memory the copy's piece holds before the segment, memory the last op's
            piece keeps free, the copy's kind, the last op's) with kind None (either), "cpu" or "acc"."""
            own = float(m.mem_bytes[segs[s][0] - 1]) if s > 0 else 0.0
            e, x, ke, kx = own, 0.0, None, None  # the copy's piece holds the cut op (A >= its memory)
            if i == 1:
                ke = "cpu"
            elif i >= 2:
                e, ke = max(own, float(pts[i - 2])), "acc"
            if k == 1:
                kx = "cpu"
            elif k >= 2:
                x, kx = float(cap - pts[k - 1]), "acc"
            return e, x, ke, kx

        def solve(s, v, i, k, secs):
            nonlocal solves
            e, x, ke, kx = ask(s, i, k)
            lb, closed, fit = segment_relaxed(segments[s].sm, ke, e, kx, x, cap, upper_us, secs, det,
                                              min(workers, SUB_WORKERS), None if v == VARIANTS - 1 else v, s == 0)
            solves += 1
            segments[s].set(v, i, k, min(lb, float(upper_us)), 0.0 if closed or secs is None else secs)
            if fit is not None:
                segments[s].sols.append((v, fit, lb))

        def known(s, v, i, k) -> bool:
            """An optimum found at a point allowing no more pieces still fits this point at no more than its table
            value: that is this point's optimum (it asks more), so it is done without solving."""
            seg = segments[s]
            lo = seg.table()[v, i, k]
            e, x, ke, kx = ask(s, i, k)
            if any(v2 <= v and val <= lo * (1 + 1e-9) + 1e-9 and fits(seg.sm, fit, ke, e, kx, x, cap)
                   for v2, fit, val in seg.sols):
                seg.set(v, i, k, lo, 0.0)
                return True
            return False

        # on an accelerator, A at cut s is at least the cut op's memory: the intervals below it are no states
        bar = [np.array([np.inf if st >= 2 and m.mem_bytes[segs[s][1]] > pts[st - 1] else 0.0 for st in cut_states])
               for s in range(S - 1)]

        def path():
            """The least sum over the cuts' states and the accelerators opened so far (every point at its table
            value), and the points (segment, variant, entry state, exit state) on it."""
            st = np.array(cut_states)
            val = np.full((1, A + 1), np.inf)  # [entry state, pieces opened so far]
            val[0, 0] = 0.0
            back = []
            for s in range(S):
                T = segments[s].table()[:, st if s > 0 else [0]][:, :, st if s < S - 1 else [0]]  # [v, i, k]
                extra = bar[s][None, :] if s < S - 1 else 0.0
                new = np.full((T.shape[2], A + 1), np.inf)
                arg = np.zeros((T.shape[2], A + 1, 2), dtype=np.int64)
                for v in range(VARIANTS):
                    ch = int(CHARGE[v])
                    if ch > A:
                        continue
                    tot = val[:, :A + 1 - ch, None] + T[v][:, None, :] + extra  # [i, c, k] -> count c + ch
                    i_best = np.argmin(tot, axis=0)  # [c, k]
                    cand = np.take_along_axis(tot, i_best[None], axis=0)[0].T  # [k, c]
                    better = cand < new[:, ch:]
                    new[:, ch:] = np.where(better, cand, new[:, ch:])
                    arg[:, ch:, 0] = np.where(better, i_best.T, arg[:, ch:, 0])
                    arg[:, ch:, 1] = np.where(better, v, arg[:, ch:, 1])
                back.append(arg)
                val = new
            c = int(np.argmin(val[0]))
            best, k, out = float(val[0, c]), 0, []
            for s in range(S - 1, -1, -1):
                i, v = (int(q) for q in back[s][k, c])
                out.append((s, v, int(st[i]) if s > 0 else 0, int(st[k]) if s < S - 1 else 0))
                k, c = i, c - int(CHARGE[v])
            return best, out[::-1]

        # each segment's least asking point of every pair of kinds at its two cuts
        ins = [[0]] + [([1] if len(cpu) else []) + ([2] if len(acc) else []) for _ in range(S - 1)]
        outs = [([1] if len(cpu) else []) + ([G + 1] if len(acc) else []) for _ in range(S - 1)] + [[0]]
        corners = [(s, VARIANTS - 1, i, k) for s in range(S) for i in ins[s] for k in outs[s]
                   if not segments[s].done[VARIANTS - 1, i, k]]
        for n, (s, v, i, k) in enumerate(corners):
            if out_of_time():
                return (*path(), False, ask, segments)
            solve(s, v, i, k, limit(len(corners) - n))
        best, on_path = path()
        while best < upper_us:  # solve the least path's points not solved yet, until it is made of closed ones
            todo = [q for q in on_path if not segments[q[0]].done[q[1:]] and not known(*q)]
            if not todo:  # the path is made of solved points: those not closed again, with twice the time
                todo = [q for q in on_path if segments[q[0]].spent[q[1:]] > 0]
                if not todo:
                    break
            for n, (s, v, i, k) in enumerate(todo):
                if out_of_time():
                    return (*path(), False, ask, segments)
                again = segments[s].spent[v, i, k]
                secs = limit(len(todo) - n)
                solve(s, v, i, k, secs if not again or secs is None else max(secs, min(left(), 2 * again)))
            best, on_path = path()
        return best, on_path, True, ask, segments

    # grids of 4, 8, 16, ... intervals in turn (each starting from the one before), while time is left: every
    # grid's path value is a lower bound, the finer ones tighter
    bound, G, before, last = 0.0, min(4, finest), None, None
    while True:
        best, on_path, closed, ask, before = level(G, before)
        bound = max(bound, best)
        if closed or last is None:
            last = (on_path, ask)
        if not closed or G >= finest or out_of_time():
            break
        G = min(finest, 2 * G)
    if keep is not None and seconds is not None:  # under a wall clock only: without one, CP-SAT's descent on a
        # segment's full model can take one tick per solution for minutes before its deterministic limit (measured)
        keep["placement"] = _stitch(problem, objective, m, segs, last[0], last[1], upper_us, left(),
                                    STITCH_SHARE * deterministic_s, workers, seed, hint)
    return max(bound, plain), plain, S, solves


def _stitch(problem, objective, m, segs, on_path, ask, upper_us, seconds, deterministic_s, workers, seed, hint):
    """A placement of the whole graph from the final path, segment by segment: each segment's full model solved
    (briefly) with the kinds of its path point, the exit's memory kept free as there, and the copy's piece
    holding what the cut op's piece holds so far; the copy's accelerator is the cut op's, every other accelerator
    a fresh one. None when a segment has no placement or the accelerators run out."""
    from dataclasses import replace

    acc, cpu = np.flatnonzero(m.acc), np.flatnonzero(~m.acc)
    t0, out, free, S = time.monotonic(), np.full(m.n, -1, dtype=np.int64), list(acc), len(segs)
    held = np.zeros(m.D)  # memory of each accelerator's piece so far
    later = np.cumsum([int(CHARGE[q[1]]) for q in on_path][::-1])[::-1]  # pieces the path opens from each segment on
    for n, (s, v, i, k) in enumerate(on_path):
        a, b = segs[s]
        ops = np.arange(max(0, a - 1), b + 1)
        sm = sub_model(m, ops, free_first=a > 0)
        e, x, ke, kx = ask(s, i, k)
        before = held[out[a - 1]] if a > 0 and m.acc[out[a - 1]] else 0.0
        x = max(0.0, x - max(0.0, before - e))  # the piece holds more than the path's state says: it keeps less free
        spare = len(free) - (later[n + 1] if n + 1 < S else 0)  # accelerators the path does not open after this
        opens = v if v < VARIANTS - 1 else max(v, spare)
        place = None
        for x, opens in ((x, opens), (0.0, opens), (0.0, max(opens, spare)), (0.0, len(free))):  # then asking less
            mem, t = sm.mem_bytes.copy(), sm.t_us.copy()
            if a > 0:
                mem[0] = before
            mem[-1] += x
            for op, kind in ((0, ke), (sm.n - 1, kx)):
                if kind is not None:
                    t[op, cpu if kind == "acc" else acc] = np.inf
            t[:, acc[int(a > 0 and ke != "cpu") + opens:]] = np.inf  # the copy's accelerator and those it may open
            secs = None if seconds is None else max(0.05, (seconds - (time.monotonic() - t0)) / (S - n))
            place, _, _, _ = cp_sat_solve(problem, objective, upper_us, secs, max(0.5, deterministic_s / S),
                                          min(workers, SUB_WORKERS), seed, hint=None if hint is None else hint[ops],
                                          model=replace(sm, mem_bytes=mem, t_us=t))
            if place is not None:
                break
        if place is None:
            return None
        local = {int(place[0]): int(out[a - 1])} if a > 0 else {}
        for d in place.tolist():
            if d not in local:
                if m.acc[d] and not free:
                    return None
                local[d] = int(free.pop(0)) if m.acc[d] else int(cpu[0])
        for j in range(1 if a > 0 else 0, len(ops)):
            out[ops[j]] = local[int(place[j])]
            held[out[ops[j]]] += m.mem_bytes[ops[j]]
    return out
