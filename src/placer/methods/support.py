"""Helpers the classical placers share: link costs as the evaluator's simulator sees them, where an
op may run (a placement repaired to the devices its ops can run on, and the words naming them),
per-op memory footprints and memory repair.

A *unit* is what a classical method moves as one piece: a colocation group or a single free op,
the groups of :func:`placer.grouping.colocation_units` (a :class:`placer.grouping.Grouping`: its
``op_group``, ``groups``, ``compute_us(problem)``, ``edges(graph)``, ``expand``). Every method here
places units, so a placement it returns never splits a colocation group.
"""

from __future__ import annotations

import numpy as np

from placer.errors import InputError

from placer.grouping import Grouping, colocation_units


# ---------------------------------------------------------------------- links as simulated
def link_arrays(problem, sim_params=None) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth_bytes_per_us, latency_us) as the simulator uses them (SimParams overrides applied)."""
    bw = np.array(problem.bandwidth_bytes_per_us, dtype=np.float64)
    lat = np.array(problem.latency_us, dtype=np.float64)
    if sim_params is not None:
        if getattr(sim_params, "bandwidth_bytes_per_us", None) is not None:
            bw[:] = sim_params.bandwidth_bytes_per_us
        if getattr(sim_params, "latency_us", None) is not None:
            lat[:] = sim_params.latency_us
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    return bw, lat


def op_gap_us(sim_params) -> float:
    return float(getattr(sim_params, "op_gap_us", 0.0) or 0.0)


def mean_comm_us(nbytes: np.ndarray, bw: np.ndarray, lat: np.ndarray, devices: list[int]) -> np.ndarray:
    """Average transfer time of each size over ordered pairs of distinct ``devices`` (HEFT's c-bar)."""
    nbytes = np.asarray(nbytes, dtype=np.float64)
    if len(devices) < 2:
        return np.zeros_like(nbytes)
    ix = np.asarray(devices)
    sub_bw = bw[np.ix_(ix, ix)]
    sub_lat = lat[np.ix_(ix, ix)]
    off = ~np.eye(len(ix), dtype=bool)
    inv_bw = (1.0 / sub_bw[off]).mean()
    return sub_lat[off].mean() + nbytes * inv_bw


# ---------------------------------------------------------------------- where ops may run
def group_allowed(problem) -> np.ndarray:
    """(n_ops, D) bool: the devices an op may go to with its colocation group, those every op of the
    group can run on (:attr:`placer.problem.Problem.allowed` for an op in no group)."""
    ok = np.array(problem.allowed)
    for members in problem.graph.colocation_groups():
        ok[members] = ok[members].all(axis=0)
    return ok


def allowed_placement(problem, placement) -> np.ndarray:
    """``placement`` with every op on a device it can run on and every colocation group on one device.

    A colocation group goes where its first op is when all its ops can run there (the groups' one
    rule), else to the device most of its ops are on among those they can all run on, else to the
    one of those where the group costs least; a free op on a device it cannot run on goes to its
    fastest device. A placement already valid comes back unchanged (as a new int64 array)."""
    orig = np.asarray(placement, dtype=np.int64)
    p = orig.copy()
    comp, ok = problem.compute_us, problem.allowed
    n = len(p)
    bad = ~ok[np.arange(n), p]
    if bad.any():
        p[bad] = np.argmin(comp[bad], axis=1)  # the fastest device that can (inf elsewhere)
    for members in problem.graph.colocation_groups():
        share = ok[members].all(axis=0)
        d = int(orig[members[0]])
        if not share[d]:
            votes = np.bincount(orig[members], minlength=problem.n_devices) * share
            d = int(np.argmax(votes)) if votes.any() else int(np.argmin(np.where(share, comp[members].sum(axis=0), np.inf)))
        p[members] = d
    return p


def device_list(problem, devices) -> str:
    """``gpu:0, cpu:0``: the names of ``devices`` (indices or a bool mask), for a message."""
    ix = np.flatnonzero(devices) if np.asarray(devices).dtype == bool else np.asarray(devices)
    return ", ".join(problem.cluster.devices[int(d)].name for d in ix)


def only_on(problem, op: int) -> str:
    """``op 'x' can run only on gpu:2, cpu:0``: where one op may go, for a NotApplicable line."""
    return f"op '{problem.graph.op_names[op]}' can run only on {device_list(problem, problem.allowed[op])}"


# ---------------------------------------------------------------------- memory
def op_memory_bytes(problem, model: str = "conservative") -> np.ndarray:
    """Bytes an op is charged on its device by the memory-aware list schedulers.

    ``conservative`` (Baechi, Jeon et al. 2020, section 3: memory is never freed during the step):
    parameters + output buffer as the simulator sizes it (the larger of the output bytes and the
    largest out-edge) + workspace; ``params``: the persistent bytes only (what
    :meth:`Problem.memory_feasible` checks)."""
    g = problem.graph
    if model == "params":
        return np.asarray(g.param_bytes, dtype=np.float64)
    if model == "conservative":
        out = np.asarray(g.output_bytes, dtype=np.float64).copy()
        if g.n_edges:
            np.maximum.at(out, g.edge_src, g.edge_bytes)
        return np.asarray(g.param_bytes + out + g.temp_bytes, dtype=np.float64)
    raise InputError("list scheduler", f"memory={model!r}", "is not a memory model", "use conservative or params")


def gpu_devices(problem) -> list[int]:
    """The cluster's GPUs (all devices when it has none)."""
    return problem.cluster.gpus() or list(range(problem.n_devices))


def usable_devices(problem, devices: list[int] | None, units: Grouping | None = None) -> np.ndarray:
    """(n, D) bool: devices an op may go to, the same for every op of a colocation group: those of
    ``devices`` that can run all the group's ops, or, when there are none (e.g. a CPU-only op
    while the method places on GPUs), any device that can."""
    units = units or colocation_units(problem)
    uok = np.isfinite(units.compute_us(problem))
    if devices is not None:
        allow = np.zeros(problem.n_devices, dtype=bool)
        allow[list(devices)] = True
        inside = uok & allow[None, :]
        none = ~inside.any(axis=1)
        inside[none] = uok[none]
        uok = inside
    return uok[units.op_group]


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


# ---------------------------------------------------------------------- graph levels
def bottom_level(problem, cost_us: np.ndarray, edge_comm_us: np.ndarray) -> np.ndarray:
    """Longest path from each op to an exit, op costs ``cost_us`` and edge costs ``edge_comm_us``
    included (HEFT's upward rank, Topcuoglu et al. 2002 eq. 7; ETF's static level with zero comm)."""
    g = problem.graph
    rank = np.zeros(g.n_ops)
    sp, si, se = g.succ_ptr, g.succ_idx, g.succ_edge
    for i in range(g.n_ops - 1, -1, -1):
        a, b = sp[i], sp[i + 1]
        tail = (edge_comm_us[se[a:b]] + rank[si[a:b]]).max() if b > a else 0.0
        rank[i] = cost_us[i] + tail
    return rank


# ---------------------------------------------------------------------- units (the learned methods' prologue)
def grouping_ok(spec: str) -> bool:
    """Whether ``spec`` is a grouping :func:`placer.grouping.parse_grouping` reads (a config check)."""
    from placer.grouping import parse_grouping

    try:
        parse_grouping(spec)
    except InputError:
        return False
    return True


def cut_along(units: Grouping, placement: np.ndarray, graph) -> Grouping:
    """``units`` cut where the op placement ``placement`` changes device, so that it is exactly a
    placement of the units (Post and Placeto start from a seeded placement this way)."""
    from placer.grouping.parts import common_refinement

    return common_refinement(units, Grouping.partition(placement, "start").units(graph), graph)
