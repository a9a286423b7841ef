"""Load bounds: the work every device must do, as a linear program over device classes
(docs/bounds.md, "load" and "windows").

Devices with the same cost column and the same memory form a class (``k`` devices). Ops of one
colocation group form a unit (every valid placement puts them on one device, so this is no
restriction). The fractional assignment LP

    min T   s.t.  sum_c x[u, c] = 1,   sum_u occ[u, c] x[u, c] <= k_c T,   x >= 0,  x[u, c] = 0 where u may not run

is a relaxation of "every device's occupancy is at most the step time". With ``memory=True`` it
also asks ``sum_u param[u] x[u, c] <= k_c M_c`` and forbids a class whose memory cannot hold a
unit's parameters with what its ops hold while running (:func:`placer.lowerbound.relax.running_bytes`): then it bounds only the
placements that fit in memory (the simulator's peak counts the parameters all step, and an op's
output buffer and workspace while it runs).

Its dual gives class weights ``y`` (``sum_c k_c y_c = 1``) such that every op's weighted work
``w[o] = min_c y_c occ[o, c]`` adds up to a bound for any set of ops: :func:`window_bound` uses
that for the ops that must start after ``a`` and end ``b`` before the end of the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Classes:
    """Device classes: ``of[d]`` the class of device ``d``; ``count[c]`` its devices; ``rep[c]`` one of them."""

    of: np.ndarray
    count: np.ndarray
    rep: np.ndarray


def device_classes(relax) -> Classes:
    """Devices grouped by identical cost columns (restrictions included) and memory."""
    mem = np.asarray(relax.problem.memory_bytes, dtype=np.float64)
    keys: dict = {}
    of = np.empty(relax.D, dtype=np.int64)
    for d in range(relax.D):
        k = (relax.occ[:, d].tobytes(), float(mem[d]))
        of[d] = keys.setdefault(k, len(keys))
    rep = np.array([int(np.flatnonzero(of == c)[0]) for c in range(len(keys))], dtype=np.int64)
    return Classes(of, np.bincount(of, minlength=len(keys)), rep)


def units(problem) -> np.ndarray:
    """(n,) the unit of each op: one per colocation group, one per free op, numbered 0..U-1."""
    col = problem.graph.colocation
    key = np.where(col >= 0, col, -1 - np.arange(len(col)))
    _, unit = np.unique(key, return_inverse=True)
    return unit.astype(np.int64)


def load_lp(relax, classes: Classes, memory: bool) -> tuple[float, np.ndarray]:
    """(LP optimum in us, class weights y with sum_c k_c y_c = 1). ``inf`` with zero weights when
    (memory=True) no fractional assignment fits."""
    from ortools.linear_solver import pywraplp

    g = relax.problem.graph
    unit = units(relax.problem)
    U, C = int(unit.max()) + 1 if len(unit) else 0, len(classes.count)
    occ = relax.occ[:, classes.rep]  # (n, C)
    uocc = np.zeros((U, C))
    np.add.at(uocc, unit, occ)
    ok = np.isfinite(uocc)
    mem = np.asarray(relax.problem.memory_bytes, dtype=np.float64)[classes.rep]
    uparam = np.bincount(unit, weights=g.param_bytes, minlength=U)
    if memory:
        from placer.lowerbound.relax import running_bytes

        urun = np.zeros((U, C))
        np.maximum.at(urun, unit, running_bytes(relax.problem)[:, classes.rep])
        ok &= uparam[:, None] + urun <= mem[None, :]
        if not ok.any(axis=1).all():
            return float("inf"), np.zeros(C)
    scale = max(float(np.nanmax(np.where(ok, uocc, 0.0))), 1e-9)  # keep GLOP's numbers near 1
    s = pywraplp.Solver.CreateSolver("GLOP")
    T = s.NumVar(0, s.infinity(), "T")
    cap = [s.Constraint(-s.infinity(), 0.0) for _ in range(C)]
    pcap = [s.Constraint(-s.infinity(), float(classes.count[c] * mem[c] / max(uparam.sum(), 1.0)))
            for c in range(C)] if memory and uparam.sum() > 0 else []
    for c in range(C):
        cap[c].SetCoefficient(T, -float(classes.count[c]))
    for u in range(U):
        row = s.Constraint(1.0, 1.0)
        for c in np.flatnonzero(ok[u]).tolist():
            x = s.NumVar(0.0, 1.0, "")
            row.SetCoefficient(x, 1.0)
            cap[c].SetCoefficient(x, float(uocc[u, c] / scale))
            if pcap:
                pcap[c].SetCoefficient(x, float(uparam[u] / max(uparam.sum(), 1.0)))
    s.Minimize(T)
    status = s.Solve()
    if status == pywraplp.Solver.INFEASIBLE:
        return float("inf"), np.zeros(C)
    if status != pywraplp.Solver.OPTIMAL:  # pragma: no cover - an LP of this shape always solves
        return 0.0, np.zeros(C)
    y = np.array([max(-cap[c].dual_value(), 0.0) for c in range(C)])
    tot = float((y * classes.count).sum())
    y = y / tot if tot > 0 else np.zeros(C)
    # the LP's value can be a hair above the true optimum in floating point: report the dual's
    # own bound (sum of the units' weighted work), which is valid for any y
    dual = float(np.where(ok, y[None, :] * np.where(ok, uocc, 0.0), np.inf).min(axis=1).sum()) if not memory else None
    value = float(T.solution_value() * scale)
    return (min(value, dual) if dual is not None else value * (1 - 1e-6)), y  # GLOP's tolerance


def weighted_work(relax, classes: Classes, y: np.ndarray) -> np.ndarray:
    """(n,) w[o] = min over classes c of y_c occ[o, c] (inf never: every op runs somewhere)."""
    occ = relax.occ[:, classes.rep]
    ok = np.isfinite(occ)
    return np.where(ok, y[None, :] * np.where(ok, occ, 0.0), np.inf).min(axis=1)


def window_bound(head: np.ndarray, after: np.ndarray, w: np.ndarray, k: int = 48) -> float:
    """max over thresholds a, b of a + b + sum of w over the ops with head >= a and tail after their
    occupancy >= b: those ops occupy their devices inside [a, T - b] (docs/bounds.md, windows)."""
    if not len(w):
        return 0.0
    qs = np.linspace(0.0, 1.0, k)
    A = np.unique(np.quantile(head, qs, method="lower"))
    B = np.unique(np.quantile(after, qs, method="lower"))
    A = np.unique(np.concatenate([[0.0], A]))
    B = np.unique(np.concatenate([[0.0], B]))
    i = np.searchsorted(A, head, side="right") - 1  # the largest threshold <= the op's head
    j = np.searchsorted(B, after, side="right") - 1
    W = np.zeros((len(A), len(B)))
    N = np.zeros((len(A), len(B)))
    np.add.at(W, (i, j), w)
    np.add.at(N, (i, j), 1.0)

    def suffix(X):  # X summed over the ops with head >= A[i] and after >= B[j]
        return X[::-1, ::-1].cumsum(axis=0).cumsum(axis=1)[::-1, ::-1]

    # an empty window proves nothing: only windows that hold at least one op count
    val = np.where(suffix(N) > 0, A[:, None] + B[None, :] + suffix(W), 0.0)
    return float(val.max())


def class_min(X: np.ndarray, classes: Classes) -> np.ndarray:
    """(n, C) the least of ``X[:, d]`` (n, D) over each class's devices."""
    return np.stack([X[:, classes.of == c].min(axis=1) for c in range(len(classes.count))], axis=1)


def energetic_bound(relax, classes: Classes, y: np.ndarray, lb: float, k: int = 24, rounds: int = 6) -> float:
    """Energetic reasoning per device class (docs/bounds.md, "energy"): for thresholds ``a``, ``b``
    with ``a + b <= lb`` (``lb`` a proven bound, so the window ``[a, T - b]`` has length ``L >= lb - a
    - b >= 0``), an op on a device of class ``c`` occupies at least ``min(occ, est + occ - a, tail - b,
    L)`` of that window (it starts at or after ``est[o, c]`` and at or before ``T - tail[o, c]``, the
    least head and tail over the class's devices: one class may have devices with different links), so
    ``T >= a + b + sum_o min_c y_c min(occ, est + occ - a, tail - b, lb - a - b)^+``. Repeated with
    the better bound as ``lb`` (each round is valid on its own); returns the best, never below ``lb``."""
    n = relax.n
    if n == 0 or not np.isfinite(lb) or lb <= 0:
        return lb
    occ = relax.occ[:, classes.rep]
    ok = np.isfinite(occ)
    occ0 = np.where(ok, occ, 0.0)
    # a class's head (tail) is the least over its devices: they share costs and memory, not links
    est = np.where(ok, class_min(relax.est, classes), 0.0)
    tail = np.where(ok, class_min(relax.tail, classes), 0.0)
    yc = np.asarray(y, dtype=np.float64)
    if not (yc > 0).any():
        return lb
    qs = np.linspace(0.0, 1.0, k)
    A = np.unique(np.concatenate([[0.0], np.quantile(relax.head, qs, method="lower")]))
    B = np.unique(np.concatenate([[0.0], np.quantile(relax.tail_after_end, qs, method="lower")]))
    left = est + occ0  # est + occ - a: the least occupancy after a
    best = lb
    for _ in range(rounds):
        cur = best
        for a in A.tolist():
            Bs = B[B <= cur - a]
            if not len(Bs):
                continue
            L = cur - a - Bs  # (nb,)
            x = np.minimum(np.minimum(occ0, left - a)[None, :, :], tail[None, :, :] - Bs[:, None, None])
            x = np.minimum(x, L[:, None, None])
            x = np.maximum(x, 0.0) * yc[None, None, :]
            w = np.where(ok[None, :, :], x, np.inf).min(axis=2).sum(axis=1)  # (nb,)
            v = float((a + Bs + w).max())
            if v > best:
                best = v
        if best <= cur * (1 + 1e-9):
            break
    return best
