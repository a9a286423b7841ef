"""The arrays the published cost models read from a Problem (built once per problem, cached on it).

Tarnawski et al. (NeurIPS 2020, section 3 "Computational model") describe a workload by, per node,
its time on a CPU and on an accelerator, its memory ``size`` and the time to move its output between
an accelerator and CPU DRAM (one ``cost`` per node: every out-edge of a node carries the same value);
a cluster by ``k`` accelerators with ``maxSizePerFPGA`` bytes each and ``l`` CPU cores. On a Problem:

* accelerator = every device whose kind is not ``cpu``; time = ``problem.compute_us`` of the device;
* memory = the op's ``param_bytes`` (the dnn-partitioning importer stores the file's ``size`` there),
  capacity = the device's memory;
* transfer cost = ``graph.meta['out_cost_us']`` where the importer kept the file's edge costs, else the
  op's output bytes over the slowest accelerator<->CPU link (over all links when there is no CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.graph import FORWARD


@dataclass(eq=False)
class PublishedModel:
    n: int
    D: int
    acc: np.ndarray  # (D,) bool: accelerator (not a CPU)
    t_us: np.ndarray  # (n, D) compute time, inf where the op cannot run
    cost_us: np.ndarray  # (n,) transfer time of the op's output between an accelerator and CPU DRAM
    mem_bytes: np.ndarray  # (n,)
    cap_bytes: np.ndarray  # (D,)
    forward: np.ndarray  # (n,) bool
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    coloc_rep: np.ndarray  # (n,) the first op of the op's colocation group (itself when free)
    cost_source: str


def out_cost_us(problem) -> tuple[np.ndarray, str]:
    g = problem.graph
    kept = g.meta.get("out_cost_us") if hasattr(g.meta, "get") else None
    if isinstance(kept, dict) and all(nm in kept for nm in g.op_names):
        return np.array([float(kept[nm]) for nm in g.op_names]), "the file's edge costs"
    bw = np.array(problem.bandwidth_bytes_per_us, dtype=np.float64)
    lat = np.array(problem.latency_us, dtype=np.float64)
    kinds = np.array([d.kind == "cpu" for d in problem.cluster.devices])
    pairs = [(a, b) for a in range(problem.n_devices) for b in range(problem.n_devices)
             if a != b and (kinds[a] != kinds[b] or kinds.all() or not kinds.any())]
    if not pairs:
        return np.zeros(g.n_ops), "no links (one device)"
    slow_bw = min(bw[a, b] for a, b in pairs)
    slow_lat = max(lat[a, b] for a, b in pairs)
    has_out = np.diff(g.succ_ptr) > 0
    return np.where(has_out, slow_lat + g.output_bytes / slow_bw, 0.0), "output bytes over the slowest link"


def model_for(problem) -> PublishedModel:
    """The cached :class:`PublishedModel` of ``problem``."""
    m = problem.__dict__.get("_published_model")
    if m is None:
        g = problem.graph
        cost, src = out_cost_us(problem)
        rep = np.arange(g.n_ops, dtype=np.int64)
        for members in g.colocation_groups():
            rep[members] = members[0]
        m = PublishedModel(
            n=g.n_ops, D=problem.n_devices,
            acc=np.array([d.kind != "cpu" for d in problem.cluster.devices]),
            t_us=np.ascontiguousarray(problem.compute_us, dtype=np.float64),
            cost_us=np.ascontiguousarray(cost), mem_bytes=np.ascontiguousarray(g.param_bytes, dtype=np.float64),
            cap_bytes=np.ascontiguousarray(problem.memory_bytes, dtype=np.float64),
            forward=np.ascontiguousarray(g.role == FORWARD),
            pred_ptr=np.ascontiguousarray(g.pred_ptr, dtype=np.int64), pred_idx=np.ascontiguousarray(g.pred_idx, dtype=np.int64),
            succ_ptr=np.ascontiguousarray(g.succ_ptr, dtype=np.int64), succ_idx=np.ascontiguousarray(g.succ_idx, dtype=np.int64),
            coloc_rep=rep, cost_source=src)
        problem.__dict__["_published_model"] = m
    return m


def batch_of(problem, placements) -> np.ndarray:
    """``placements`` as a (k, n) int64 array of device indices in range (InputError otherwise)."""
    P = np.asarray(placements)
    if P.ndim == 1:
        P = P[None, :]
    if P.ndim != 2 or P.shape[1] != problem.n_ops or not np.issubdtype(P.dtype, np.integer) \
            or (P.size and (P.min() < 0 or P.max() >= problem.n_devices)):
        problem.validate_placement(P[0] if P.ndim == 2 and len(P) else P)
        raise ValueError(f"placements must be a (k, {problem.n_ops}) integer array of device indices")
    return np.ascontiguousarray(P, dtype=np.int64)
