"""A placement repaired to fit in memory: units moved off devices whose parameters overflow
(:func:`repair_memory`, no simulation), then off devices whose simulated peak overflows
(:func:`relieve_oom`, by simulation through the evaluator).

A *unit* is what a classical method moves as one piece: a colocation group or a single free op,
the groups of :func:`placer.grouping.colocation_units` (a :class:`placer.grouping.Grouping`: its
``op_group``, ``groups``, ``compute_us(problem)``, ``edges(graph)``, ``expand``). Every method here
places units, so a placement it returns never splits a colocation group.
"""

from __future__ import annotations

import numpy as np

from placer.grouping import Grouping, colocation_units


def repair_memory(problem, placement: np.ndarray, units: Grouping | None = None,
                  allowed: np.ndarray | None = None) -> np.ndarray:
    """Move units off devices whose persistent bytes exceed capacity, largest first, each to the
    allowed device (runnable for all its ops) that has room and holds most of its neighbours'
    traffic, else the one with most room. Returns the placement unchanged when it already fits or
    when no move helps."""
    p = np.asarray(placement, dtype=np.int64).copy()
    units = units or colocation_units(problem)
    cap = problem.memory_bytes
    uok = np.isfinite(units.compute_us(problem))
    if allowed is not None:
        uallowed = np.ones((units.n_groups, problem.n_devices), dtype=bool)
        np.logical_and.at(uallowed, units.op_group, allowed)
        uok &= uallowed
    udev = p[units.first]
    upar = units.param_bytes(problem.graph)
    used = np.bincount(udev, weights=upar, minlength=problem.n_devices)
    if (used <= cap).all():
        return p
    xadj, adj, w = units.undirected_csr(problem.graph)
    for d in np.argsort(-(used - cap)):
        if used[d] <= cap[d]:
            continue
        on_d = np.flatnonzero(udev == d)
        for u in on_d[np.argsort(-upar[on_d], kind="stable")]:
            if used[d] <= cap[d]:
                break
            if upar[u] <= 0:
                continue
            room = cap - used
            cand = np.flatnonzero(uok[u] & (room >= upar[u]))
            cand = cand[cand != d]
            if len(cand) == 0:
                continue
            nb = adj[xadj[u]:xadj[u + 1]]
            pull = np.bincount(udev[nb], weights=w[xadj[u]:xadj[u + 1]], minlength=problem.n_devices)
            best = cand[np.lexsort((-room[cand], -pull[cand]))[0]]
            udev[u] = best
            used[d] -= upar[u]
            used[best] += upar[u]
    return units.expand(udev)


def relieve_oom(problem, placement: np.ndarray, ev, units: Grouping | None = None, max_rounds: int = 48,
                allowed: np.ndarray | None = None, top_units: int = 6) -> tuple[np.ndarray, object]:
    """If the simulated peak memory overflows a device, move units off it until it fits: each round
    tries the ``top_units`` units holding most memory there (parameters + outputs + workspace) on
    every other device that can run them, simulates all those candidates in one batch through the
    evaluator, and keeps the best by (OOM, objective). Returns (placement, its SimResult)."""
    units = units or colocation_units(problem)
    p = repair_memory(problem, placement, units, allowed)
    r = ev.simulate(p)
    if not r.oom:
        return p, r
    g = problem.graph
    umem = units.total(g.param_bytes + g.output_bytes + g.temp_bytes)
    uok = np.isfinite(units.compute_us(problem))
    if allowed is not None:
        ua = np.ones_like(uok)
        np.logical_and.at(ua, units.op_group, allowed)
        uok &= ua
    first = units.first
    key = (bool(r.oom), float(r.objective_us))
    for _ in range(max_rounds):
        over = r.peak_memory_bytes - problem.memory_bytes
        d = int(np.argmax(over))
        if over[d] <= 0:
            break
        udev = p[first]
        on_d = np.flatnonzero(udev == d)
        if len(on_d) <= 1:
            break
        cands = []
        for u in on_d[np.argsort(-umem[on_d], kind="stable")][:top_units]:
            for x in np.flatnonzero(uok[u]):
                if x != d:
                    q = p.copy()
                    q[units.groups[u]] = x
                    cands.append(q)
        if not cands:
            break
        br = ev.evaluate_batch(np.stack(cands))
        k = min(range(len(cands)), key=lambda j: (bool(br.oom[j]), float(br.objective_us[j])))
        if (bool(br.oom[k]), float(br.objective_us[k])) >= key and bool(br.oom[k]):
            break  # no single move reduces the overflow any more
        p = cands[k]
        r = ev.simulate(p)
        key = (bool(r.oom), float(r.objective_us))
        if not r.oom:
            break
    return p, r
