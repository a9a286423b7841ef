"""The execution simulator: Problem x placement -> SimResult (Placeto appendix A.5)."""

from __future__ import annotations

import numpy as np

from placer.sim.memory import memory_peaks
from placer.sim.reference import simulate_timeline
from placer.sim.result import GB, SimParams, SimResult

__all__ = ["SimParams", "SimResult", "simulate", "objective"]


def objective(makespan_us: float, peak: np.ndarray, capacity: np.ndarray, params: SimParams) -> tuple[float, bool]:
    """R = r + c * ReLU(m - M) with m - M the largest overshoot of any device (Placeto appendix),
    plus ``oom_penalty_us`` when a device overflows."""
    over = float(np.max(peak - capacity)) if len(peak) else 0.0
    oom = over > 0
    r = makespan_us + params.memory_penalty_us_per_gb * max(over, 0.0) / GB
    if oom:
        r += params.oom_penalty_us
    return r, oom


def simulate(problem, placement, params: SimParams | None = None) -> SimResult:
    """Simulate one training step of ``problem.graph`` placed by ``placement`` on ``problem.cluster``."""
    params = params or SimParams()
    p = problem.validate_placement(np.asarray(getattr(placement, "devices", placement)))
    start, end, tr = simulate_timeline(problem, p, params)
    cols = list(zip(*tr)) if tr else [[]] * 5
    transfers = {
        "tensor": np.asarray(cols[0], dtype=np.int64), "src": np.asarray(cols[1], dtype=np.int64),
        "dst": np.asarray(cols[2], dtype=np.int64), "start_us": np.asarray(cols[3], dtype=np.float64),
        "end_us": np.asarray(cols[4], dtype=np.float64),
    }
    peak, peak_ops = memory_peaks(problem, p, start, end, transfers)
    makespan = float(end.max())
    busy = np.bincount(p, weights=end - start, minlength=problem.n_devices)
    obj, oom = objective(makespan, peak, problem.memory_bytes, params)
    return SimResult(makespan, p, start, end, transfers, busy, peak, peak_ops, problem.memory_bytes, obj, oom, params)
