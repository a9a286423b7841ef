"""Roofline estimate of an op's compute time on a device: max(FLOPs / peak, bytes / bandwidth) + launch."""

from __future__ import annotations

import numpy as np


def roofline_us(flops: np.ndarray, bytes_accessed: np.ndarray, peak_flops_per_us: float,
                mem_bw_bytes_per_us: float, launch_us: float, efficiency: float = 1.0) -> np.ndarray:
    """Per-op time in microseconds; ops with neither FLOPs nor bytes cost only the launch."""
    t = np.maximum(np.asarray(flops) / (peak_flops_per_us * efficiency),
                   np.asarray(bytes_accessed) / (mem_bw_bytes_per_us * efficiency))
    return t + launch_us
