"""exact-published's latency bound from segments coupled through their cut ops (docs/bounds_published.md, rule 9).

The graph is cut at articulation ops into segments, as :func:`placer.methods.exact_published_cp.segment_bound`
does (rule 7: the latency is at least the sum of the segments' latencies). Solved apart, each segment may use
every accelerator's whole memory and put its end of a cut op where it likes. Here each cut op a_s has a
*state*: on the CPU, or on an accelerator whose piece holds A_s in [g_j, g_{j+1}] of memory in the segments up
to a_s (a grid of G intervals). The segment before a_s then keeps a_s on that kind of device with
cap - g_{j+1} more memory on it, the one after keeps the copy of a_s there taking max(g_j, its memory); a
shortest path over the cuts' states picks those giving the least sum. Every point's value is a proven CP-SAT
bound of its segment; points not solved yet take the largest bound of a solved point asking no more (the
optimum only grows as more is asked). Points are solved lazily, those on the current shortest path first,
until the path is made of known points or the time is up.
"""

from __future__ import annotations

import time

import numpy as np

from placer.methods.exact_published_cp import cp_sat_solve, segment_spans, static_bound, sub_model
from placer.objectives.model import model_for


PER_SOLVE = 0.01  # a first solve of a point gets at most this share of the time (measured: many quick solves, each
# point not closed solved again with twice the time once the path is made of solved points, beat fewer long ones)
SUB_WORKERS = 4  # CP-SAT workers for a segment's model: small models, where more workers mostly wait (measured)


class _Segment:
    """One segment's points: entry state i and exit state k (:func:`coupled_segment_bound`), ``lb[i, k]``
    proven, ``done`` solved or known; ``sols`` the placements found (of the segment's own model) and their values."""

    def __init__(self, sm, n_in: int, n_out: int):
        self.sm = sm
        self.lb = np.zeros((n_in, n_out))
        self.done = np.zeros((n_in, n_out), dtype=bool)
        self.spent = np.zeros((n_in, n_out))  # the wall-clock limit of the last solve of a point not closed (0: closed)
        self.sols: list[tuple[np.ndarray, float]] = []
        # state 0: nothing asked (rule 7's point); 1: the cut op on the CPU; 2 + j: on an accelerator, A in grid
        # interval j. Entry i' asks no more than i when i' = 0, i' = i, or both on accelerators and i' <= i (a
        # smaller entry reservation); exit k' no more than k when k' = 0, k' = k, or both on accelerators, k' >= k.
        ii, kk = np.arange(n_in), np.arange(n_out)
        self.in_le = (ii[:, None] == 0) | (ii[:, None] == ii[None, :]) | ((ii[:, None] >= 2) & (ii[None, :] >= 2)
                                                                           & (ii[:, None] <= ii[None, :]))
        self.out_le = (kk[:, None] == 0) | (kk[:, None] == kk[None, :]) | ((kk[:, None] >= 2) & (kk[None, :] >= 2)
                                                                             & (kk[:, None] >= kk[None, :]))

    def closure(self, i: int, k: int) -> float:
        """The largest proven bound of a point asking no more than (i, k): the optimum only grows as more is asked."""
        sub = np.where(self.done & self.in_le[:, i][:, None] & self.out_le[:, k][None, :], self.lb, 0.0)
        return float(sub.max()) if sub.size else 0.0

    def table(self) -> np.ndarray:
        return np.array([[self.closure(i, k) for k in range(self.lb.shape[1])] for i in range(self.lb.shape[0])])


def coupled_segment_bound(problem, objective, upper_us: float, seconds: float | None, deterministic_s: float,
                          workers: int, seed: int, max_ops: int = 40, grid: int = 8,
                          max_solves: int | None = None) -> tuple[float, float, int, int]:
    """Rule 7's sum of segment bounds, then rule 9's coupling through the cut ops' device and the memory of
    their pieces. Returns (coupled bound, plain sum of the segments' bounds, segments, sub-problems solved);
    (0, 0, 0, 0) when the graph has fewer than two segments. ``seconds``: wall-clock for all of it (None:
    each solve under a share of ``deterministic_s``, reproducible); ``max_solves``: a cap on the solves after
    rule 7's (default without ``seconds``: 4 per segment)."""
    m = model_for(problem)
    if objective.name != "latency" or m.n == 0:
        return 0.0, 0.0, 0, 0
    segs = segment_spans(m, max_ops)
    S = len(segs)
    if S < 2:
        return 0.0, 0.0, 0, 0
    acc, cpu = np.flatnonzero(m.acc), np.flatnonzero(~m.acc)
    caps = m.cap_bytes[acc]
    cap = float(caps.max()) if len(acc) else 0.0
    G = max(1, int(grid)) if len(acc) and np.all(caps == caps[0]) else 1  # one interval unless one capacity
    pts = np.linspace(0.0, cap, G + 1)  # on an accelerator, A lies in [pts[j], pts[j + 1]] for some j
    cut_states = ([1] if len(cpu) else []) + ([2 + j for j in range(G)] if len(acc) else [])
    t0 = time.monotonic()
    solves = 0
    cap_solves = max_solves if max_solves is not None else (None if seconds is not None else 4 * S)
    base_det = 0.5 * deterministic_s / S  # without a wall clock: half for the segments alone, half for the grid
    grid_det = 0.5 * deterministic_s / max(1, cap_solves or 4 * S)

    def left():
        return None if seconds is None else seconds - (time.monotonic() - t0)

    segments = []
    for s, (a, b) in enumerate(segs):
        sm = sub_model(m, np.arange(max(0, a - 1), b + 1), free_first=a > 0)
        segments.append(_Segment(sm, 2 + G if s > 0 else 1, 2 + G if s < S - 1 else 1))

    def ask(s, i, k):
        """What point (i, k) asks of segment s's copy (first op, s > 0) and last op: (memory the copy takes,
        memory the last op takes beyond its own, copy's device kind, last op's) with kind None (either),
        "cpu" or "acc"."""
        own = float(m.mem_bytes[segs[s][0] - 1]) if s > 0 else 0.0
        e, x, ke, kx = own, 0.0, None, None  # the copy takes at least the cut op's memory (A >= it on an accelerator)
        if i == 1:
            ke = "cpu"
        elif i >= 2:
            e, ke = max(own, float(pts[i - 2])), "acc"
        if k == 1:
            kx = "cpu"
        elif k >= 2:
            x, kx = float(cap - pts[k - 1]), "acc"
        return e, x, ke, kx

    def reserve(s, i, k):
        from dataclasses import replace

        e, x, ke, kx = ask(s, i, k)
        sm = segments[s].sm
        mem, t = sm.mem_bytes.copy(), sm.t_us.copy()
        if s > 0:
            mem[0] = e
        mem[-1] += x
        for op, kind in ((0, ke), (sm.n - 1, kx)):
            if kind is not None:
                t[op, cpu if kind == "acc" else acc] = np.inf  # the other kind cannot run it
        return replace(sm, mem_bytes=mem, t_us=t)

    def fits(s, i, k, place) -> bool:
        """``place`` (a placement of segment s's model) meets point (i, k)'s devices and memory."""
        e, x, ke, kx = ask(s, i, k)
        for op, kind in ((0, ke), (len(place) - 1, kx)):
            if kind is not None and bool(m.acc[place[op]]) != (kind == "acc"):
                return False
        used = np.zeros(m.D)
        np.add.at(used, place, segments[s].sm.mem_bytes)
        if s > 0:
            used[place[0]] += e
        used[place[-1]] += x
        return bool(np.all(used[acc] <= m.cap_bytes[acc]))

    def known(s, i, k) -> bool:
        """A solved point's placement fits this point at no more than its closure: the optimum here is at most
        that value, so solving cannot raise the bound (the point is done)."""
        seg = segments[s]
        lo = seg.closure(i, k)
        return any(val <= lo * (1 + 1e-9) + 1e-9 and fits(s, i, k, place) for place, val in seg.sols)

    def frontier(s, i, k):
        """The point asking least, below (i, k) along the memory grid, that the segment's first placement does
        not fit: its bound holds at (i, k) and at every point between."""
        q = segments[s].sols[0][0] if segments[s].sols else None
        if q is None:
            return i, k
        moved = True
        while moved:
            moved = False
            if i > 2 and not fits(s, i - 1, k, q):
                i, moved = i - 1, True
            if 2 <= k < segments[s].lb.shape[1] - 1 and not fits(s, i, k + 1, q):
                k, moved = k + 1, True
        return i, k

    def solve(s, i, k, secs, det):
        nonlocal solves
        seg = segments[s]
        sm = reserve(s, i, k)
        hint = seg.sols[-1][0] if seg.sols else None  # the last placement found for the segment: a warm start
        place, inc, lb, status = cp_sat_solve(problem, objective, upper_us, secs, det, min(workers, SUB_WORKERS), seed,
                                              hint=hint, model=sm)
        solves += 1
        if status == "Infeasible":  # no placement of the segment at most upper_us: it is a bound on it
            lb = max(float(upper_us), static_bound(problem, objective, sm)[0])
        seg.lb[i, k] = max(seg.lb[i, k], lb, seg.closure(i, k))
        seg.done[i, k] = True
        seg.spent[i, k] = 0.0 if status in ("Optimal", "Infeasible") or secs is None else secs
        if place is not None:
            seg.sols.append((place, float(inc)))
        return status

    # rule 7: every segment alone (state 0 at both ends); a first pass at half each one's share
    open_ = []
    for s in range(S):
        rest = left()
        each = None if rest is None else max(0.05, 0.5 * rest / (S - s) / 2)
        if solve(s, 0, 0, each, base_det) != "Optimal":
            open_.append(s)
    for n, s in enumerate(open_ if seconds is not None else []):  # the time left by those closed, to the others
        rest = left()
        if rest <= 0.05 + 0.5 * seconds:
            break
        solve(s, 0, 0, max(0.05, (rest - 0.5 * seconds) / (len(open_) - n)), base_det)
    plain = float(sum(seg.lb[0, 0] for seg in segments))

    # on an accelerator, A at cut s is at least the cut op's memory: the intervals below it are no states
    bar = [np.array([np.inf if st >= 2 and m.mem_bytes[segs[s][1]] > pts[st - 1] else 0.0 for st in cut_states])
           for s in range(S - 1)]

    def path():
        """The least sum over the cuts' states (every point at its closure) and the points on it."""
        st = np.array(cut_states)
        val = segments[0].table()[0, st] + bar[0]
        back = []
        for s in range(1, S):
            T = segments[s].table()[st][:, st if s < S - 1 else [0]]
            tot = val[:, None] + T + (bar[s][None, :] if s < S - 1 else 0.0)
            back.append(np.argmin(tot, axis=0))
            val = tot.min(axis=0)
        best, j, cut = float(val[0]), 0, []
        for bk in reversed(back):  # back[s - 1][state of cut s] = the best state of cut s - 1
            j = int(bk[j])
            cut.append(int(st[j]))
        cut = cut[::-1]  # the state of cut s, s = 0 .. S - 2
        return best, [(s, cut[s - 1] if s > 0 else 0, cut[s] if s < S - 1 else 0) for s in range(S)]

    # each segment's least asking point of every pair of kinds at its two cuts (the rest of a kind's points ask
    # more, so its bound holds there): CPU-CPU, CPU-accelerator, accelerator-CPU (accelerator-accelerator asking
    # least is mostly rule 7's own placement, known)
    ins = [[0]] + [([1] if len(cpu) else []) + ([2] if len(acc) else []) for _ in range(S - 1)]
    outs = [([1] if len(cpu) else []) + ([G + 1] if len(acc) else []) for _ in range(S - 1)] + [[0]]
    corners = [(s, i, k) for s in range(S) for i in ins[s] for k in outs[s]]
    for n, (s, i, k) in enumerate(corners):
        rest = left()
        if (rest is not None and rest <= 0.05) or (cap_solves is not None and solves - S >= cap_solves):
            return max(path()[0], plain), plain, S, solves
        if not known(s, i, k):
            first = None if rest is None else max(0.05, min(2 * rest / (len(corners) - n), PER_SOLVE * seconds))
            solve(s, i, k, first, grid_det)
    best, on_path = path()
    while best < upper_us:  # solve the least path's points not known yet, until it is made of known ones
        todo = []
        for s, i, k in on_path:
            if segments[s].done[i, k]:
                continue
            if known(s, i, k):
                segments[s].lb[i, k] = segments[s].closure(i, k)
                segments[s].done[i, k] = True
            else:
                todo.append((s, i, k))
        if not todo:  # the path is made of solved points: those not closed again, with twice the time
            again = [(s, i, k) for s, i, k in on_path if segments[s].spent[i, k] > 0]
            for n, (s, i, k) in enumerate(again):
                rest = left()
                if rest <= 0.05:
                    return max(path()[0], plain), plain, S, solves
                solve(s, i, k, max(0.05, min(rest / (len(again) - n), 2 * segments[s].spent[i, k])), grid_det)
            if not again:
                break
            best, on_path = path()
            continue
        for n, (s, i, k) in enumerate(todo):
            rest = left()
            if (rest is not None and rest <= 0.05) or (cap_solves is not None and solves - S >= cap_solves):
                return max(path()[0], plain), plain, S, solves
            i2, k2 = frontier(s, i, k)
            if segments[s].done[i2, k2] or known(s, i2, k2):
                i2, k2 = i, k
            solve(s, i2, k2, None if rest is None else max(0.05, min(rest / (len(todo) - n), PER_SOLVE * seconds)),
                  grid_det)
        best, on_path = path()
    return max(best, plain), plain, S, solves
