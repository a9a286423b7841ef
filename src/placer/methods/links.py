"""Link costs as the evaluator's simulator sees them (SimParams overrides applied), for the classical
placers that estimate transfers (the list schedulers, METIS's edge weights, the exact model)."""

from __future__ import annotations

import numpy as np


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
