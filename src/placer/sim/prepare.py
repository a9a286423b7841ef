"""Flat arrays the compiled simulator reads, prepared once per Problem and once per SimParams.

The graph side (adjacency, sizes, the n x D cost matrix, colocation leaders) depends only on the
Problem and is cached on it (``problem.__dict__['_sim_prepared']``); the link side (bandwidth,
latency, gaps, penalties) depends on the SimParams and costs O(D^2) to build.

Packed layouts (all C-contiguous, so one call passes a handful of arrays, not forty):

``GI`` int64   succ_ptr (n+1) | succ_idx (m) | pred_ptr (n+1) | pred_edge (m) | edge_src (m) | leader (n) | pred_idx (m)
``GF`` float64 edge_bytes (m) | out_bytes (n) | temp_bytes (n) | param_bytes (n) | compute_us (n*D, row-major)
``CF`` float64 op_gap, bus_gap, penalty_us_per_gb, oom_penalty_us, GB | bandwidth (D*D) | latency (D*D) | capacity (D)
``CI`` int64   n, m, D, comm model (0 placeto, 1 p2p)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.sim.result import GB, SimParams

PLACETO, P2P = 0, 1
COMM_MODELS = {"placeto": PLACETO, "p2p": P2P}
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


def prepared(problem) -> Prepared:
    """The cached :class:`Prepared` arrays of ``problem`` (built on first use)."""
    cache = problem.__dict__
    p = cache.get("_sim_prepared")
    if p is None:
        p = _prepare(problem)
        cache["_sim_prepared"] = p
    return p


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
    return Prepared(n, m, D, GI, GF, leader, has_coloc, out_bytes)


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
        [params.op_gap_us, params.bus_gap_us, params.memory_penalty_us_per_gb, params.oom_penalty_us, GB],
        bw.ravel(), lat.ravel(), np.asarray(problem.memory_bytes, dtype=np.float64),
    ]).astype(np.float64)
    prep = prepared(problem)
    CI = np.array([prep.n, prep.m, prep.D, COMM_MODELS[params.comm_model]], dtype=np.int64)
    return CF, CI
