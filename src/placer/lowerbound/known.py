"""A good fitting placement of a small problem, to show a bound is the optimum: the exact
relaxation's own placement and every single-device placement, each improved by moving one op (or
one colocation group) at a time while the simulated step time drops. Deterministic: every round
simulates every move and takes the best (ties: the first), at most :data:`ROUNDS` rounds."""

from __future__ import annotations

import numpy as np

from placer.lowerbound.load import units

ROUNDS = 50


def polish(problem, params, starts: list[np.ndarray]) -> tuple[np.ndarray | None, float | None]:
    """(placement, step time) of the best fitting placement reached from ``starts``, or (None, None)."""
    from placer.sim import evaluate_many

    allowed = problem.allowed
    n, D = problem.n_ops, problem.n_devices
    unit = units(problem)
    groups = [np.flatnonzero(unit == u) for u in range(int(unit.max()) + 1)]
    best_p, best_t = None, float("inf")

    def score(rows):
        r = evaluate_many(problem, rows, params)
        return np.where(r.oom, np.inf, r.makespan_us)

    for p0 in starts:
        p = np.asarray(p0, dtype=np.int64).copy()
        if not allowed[np.arange(n), p].all() or any(len(np.unique(p[m])) > 1 for m in groups):
            continue
        t = float(score(p[None])[0])
        for _ in range(ROUNDS):
            moves = []
            for m in groups:
                for d in range(D):
                    if d != p[m[0]] and allowed[m, d].all():
                        q = p.copy()
                        q[m] = d
                        moves.append(q)
            if not moves:
                break
            rows = np.stack(moves)
            s = score(rows)
            k = int(np.argmin(s))
            if not s[k] < t:
                break
            p, t = rows[k], float(s[k])
        if t < best_t:
            best_p, best_t = p, t
    return (best_p, best_t) if best_p is not None else (None, None)
