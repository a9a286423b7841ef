"""Flat arrays the compiled simulator reads, prepared once per Problem and once per SimParams.

The graph side (adjacency, sizes, the n x D cost matrix, colocation leaders) depends only on the
Problem and is cached on it (``problem.__dict__['_sim_prepared']``); the link side (bandwidth,
latency, gaps, penalties) depends on the SimParams and costs O(D^2) to build.

Packed layouts (all C-contiguous, so one call passes a handful of arrays, not forty):

``GI`` int64   succ_ptr (n+1) | succ_idx (m) | pred_ptr (n+1) | pred_edge (m) | edge_src (m) | leader (n) | pred_idx (m)
``GF`` float64 edge_bytes (m) | out_bytes (n) | temp_bytes (n) | param_bytes (n) | compute_us (n*D, row-major)
``CF`` float64 op_gap, bus_gap, penalty_us_per_byte, oom_penalty_us | bandwidth (D*D) | latency (D*D) | capacity (D)
``CI`` int64   n, m, D, comm model (0 placeto, 1 p2p, 2 giph, 3 link), uniform links (1: every off-diagonal link alike)
              | link model only: R (link resources) | resource of each link (D*D, row-major; see :func:`link_resources`)
``PI`` int64   prio (n) | inv (n)   (``Prepared.order``; None: the identity)

Tie-break orders (``SimParams.tie_break``): ``prio[i]`` is op i's rank among simultaneous events and
``inv`` its inverse. ``"index"``: the topological index itself. ``"name"``: the rank of the op's name
in string order (Python's ``sorted``, i.e. code points), as the reference simulator's heap of
``(time, event name, (producer name, consumer name))`` tuples orders its dependency events. With
``"name"`` each op's successor list (and so the kernel's edge numbering) is sorted by the
consumers' rank, so that the consumers an event releases are queued in the reference's order;
``Prepared.edge_src`` / ``edge_dst`` / ``edge_bytes`` give the edges in that numbering.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.sim.result import SimParams

PLACETO, P2P, GIPH, LINK = 0, 1, 2, 3
COMM_MODELS = {"placeto": PLACETO, "p2p": P2P, "giph": GIPH, "link": LINK}
MAX_DEVICES = 250  # the event key keeps 8 bits for a device (+1)


@dataclass(frozen=True, eq=False)
class Prepared:
    """The Problem-only arrays (see module docstring)."""

    n: int
    m: int
    D: int
    GI: np.ndarray
    GF: np.ndarray
    leader: np.ndarray  # (n,) first op of each op's colocation group (itself if none)
    has_colocation: bool
    out_bytes: np.ndarray  # (n,) bytes of an op's output buffer: max(output_bytes, bytes on any out-edge)
    edge_src: np.ndarray | None = None  # (m,) the kernel's edge numbering (None: the graph's own)
    edge_dst: np.ndarray | None = None
    edge_bytes: np.ndarray | None = None
    order: np.ndarray | None = None  # PI: prio (n) | inv (n); None for the identity

    @property
    def PI(self) -> np.ndarray:
        if self.order is None:
            ident = np.arange(self.n, dtype=np.int64)
            object.__setattr__(self, "order", np.concatenate([ident, ident]))
        return self.order


TIE_BREAKS = ("index", "name")


def prepared(problem, tie_break: str = "index") -> Prepared:
    """The cached :class:`Prepared` arrays of ``problem`` for a tie-break order (built on first use)."""
    cache = problem.__dict__
    p = cache.get("_sim_prepared")
    if p is None:
        p = _prepare(problem)
        cache["_sim_prepared"] = p
    if tie_break == "index":
        return p
    if tie_break != "name":
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, not {tie_break!r}")
    q = cache.get("_sim_prepared_name")
    if q is None:
        q = cache["_sim_prepared_name"] = _by_name(problem, p)
    return q


def name_rank(op_names) -> np.ndarray:
    """(n,) int64: each op's position when the names are sorted as Python strings."""
    order = sorted(range(len(op_names)), key=op_names.__getitem__)
    rank = np.empty(len(op_names), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(op_names), dtype=np.int64)
    return rank


def _by_name(problem, base: Prepared) -> Prepared:
    """``base`` with name ranks as priorities and successor lists sorted by the consumer's rank."""
    g = problem.graph
    n, m = base.n, base.m
    rank = name_rank(g.op_names)
    if np.array_equal(rank, np.arange(n)):  # names sort like the indices: the same arrays
        return base
    src = g.edge_src.astype(np.int64)
    dst = g.edge_dst.astype(np.int64)
    perm = np.lexsort((rank[dst], src))  # new edge k is old edge perm[k]
    src, dst, eb = src[perm], dst[perm], np.asarray(g.edge_bytes, dtype=np.float64)[perm]
    pred_order = np.lexsort((src, dst))  # predecessors by (consumer, producer index), as the graph's
    inv = np.argsort(rank).astype(np.int64)
    GI = np.concatenate([g.succ_ptr, dst, g.pred_ptr, pred_order, src, base.leader, src[pred_order]]).astype(np.int64)
    GF = np.concatenate([eb, base.GF[m:]]).astype(np.float64)
    PI = np.concatenate([rank, inv])
    for a in (GI, GF, src, dst, eb, PI):
        a.flags.writeable = False
    return Prepared(n, m, base.D, GI, GF, base.leader, base.has_colocation, base.out_bytes, src, dst, eb, PI)


def _prepare(problem) -> Prepared:
    g = problem.graph
    n, m, D = g.n_ops, g.n_edges, problem.n_devices
    if D > MAX_DEVICES:
        raise ValueError(f"the simulator handles at most {MAX_DEVICES} devices, not {D}")
    src = g.edge_src.astype(np.int64)
    out_bytes = g.output_bytes.astype(np.float64).copy()
    if m:
        np.maximum.at(out_bytes, src, g.edge_bytes)
    leader = np.arange(n, dtype=np.int64)
    coloc = g.colocation
    has_coloc = bool((coloc >= 0).any())
    if has_coloc:
        idx = np.flatnonzero(coloc >= 0)
        _, first = np.unique(coloc[idx], return_index=True)
        lead_of = dict(zip(coloc[idx][first].tolist(), idx[first].tolist()))
        leader[idx] = np.array([lead_of[c] for c in coloc[idx].tolist()], dtype=np.int64)
    GI = np.concatenate([g.succ_ptr, g.succ_idx, g.pred_ptr, g.pred_edge, src, leader, g.pred_idx]).astype(np.int64)
    GF = np.concatenate([g.edge_bytes, out_bytes, g.temp_bytes, g.param_bytes,
                         np.ascontiguousarray(problem.compute_us, dtype=np.float64).ravel()]).astype(np.float64)
    for a in (GI, GF, leader, out_bytes):
        a.flags.writeable = False
    dst = g.edge_dst.astype(np.int64)
    eb = np.asarray(g.edge_bytes, dtype=np.float64)
    return Prepared(n, m, D, GI, GF, leader, has_coloc, out_bytes, src, dst, eb)


def link_matrices(problem, params: SimParams) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth bytes/us, latency us), D x D, with the SimParams overrides applied."""
    bw = np.array(problem.bandwidth_bytes_per_us, dtype=np.float64)
    lat = np.array(problem.latency_us, dtype=np.float64)
    if params.bandwidth_bytes_per_us is not None:
        bw[:] = params.bandwidth_bytes_per_us
    if params.latency_us is not None:
        lat[:] = params.latency_us
    off = ~np.eye(len(bw), dtype=bool)
    if (bw[off] <= 0).any() or not np.isfinite(lat[off]).all() or (lat[off] < 0).any():
        raise ValueError("every link needs a positive bandwidth and a finite non-negative latency")
    return bw, lat


def config(problem, params: SimParams) -> tuple[np.ndarray, np.ndarray]:
    """(CF, CI) for ``params`` on ``problem`` (see module docstring)."""
    bw, lat = link_matrices(problem, params)
    D = problem.n_devices
    CF = np.concatenate([
        [params.op_gap_us, params.bus_gap_us, params.memory_penalty_us_per_byte, params.oom_penalty_us],
        bw.ravel(), lat.ravel(), np.asarray(problem.memory_bytes, dtype=np.float64),
    ]).astype(np.float64)
    prep = prepared(problem)
    off = ~np.eye(D, dtype=bool)
    uniform = D < 2 or (bool((bw[off] == bw[off][0]).all()) and bool((lat[off] == lat[off][0]).all()))
    CI = np.array([prep.n, prep.m, prep.D, COMM_MODELS[params.comm_model], int(uniform)], dtype=np.int64)
    if params.comm_model == "link":
        res = link_resources(problem.cluster)
        CI = np.concatenate([CI, [int(res.max()) + 1], res.ravel()]).astype(np.int64)
    return CF, CI


def link_resources(cluster) -> np.ndarray:
    """(D, D) int64: the resource each directed link (s, x) queues on in the ``link`` model. Every
    link is its own resource, except the links of a shared group (the cluster's ``shared_links``:
    ``{group name: [[from device, to device], ...]}``), which share one. The diagonal is unused."""
    D = cluster.n_devices
    res = np.arange(D * D, dtype=np.int64).reshape(D, D)
    groups = shared_links(cluster)
    if groups:
        index = {name: i for i, name in enumerate(cluster.device_names)}
        for k, pairs in enumerate(groups.values()):
            for a, b in pairs:
                if a in index and b in index:  # a subset of the cluster keeps the links it still has
                    res[index[a], index[b]] = D * D + k
    _, dense = np.unique(res, return_inverse=True)  # number the resources 0..R-1
    return dense.reshape(D, D).astype(np.int64)


def shared_links(cluster) -> dict:
    """The cluster's shared link groups (``meta["shared_links"]``), or {}."""
    return dict(getattr(cluster, "meta", {}).get("shared_links") or {})
