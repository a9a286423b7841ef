"""SimParams (the simulator's knobs) and SimResult (one simulated training step)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

GB = 1e9


@dataclass(frozen=True)
class SimParams:
    """How a step is simulated. ``SimParams.placeto()`` reproduces the reference simulator."""

    comm_model: str = "placeto"  # "placeto": one outgoing bus per device, one transfer per output tensor;
    #                               "p2p": one transfer per destination device, links and both ends serialised
    op_gap_us: float = 0.0  # idle gap on a device after each op with non-zero cost
    bus_gap_us: float = 0.0  # gap on the sending bus after each transfer (does not delay arrival)
    bandwidth_bytes_per_us: float | None = None  # overrides every link's bandwidth when set
    latency_us: float | None = None  # overrides every link's latency when set
    memory_penalty_us_per_gb: float = 2e6  # c in R = r + c * ReLU(m - M): Placeto uses c = 2 (s per GB)
    oom_penalty_us: float = 0.0  # added to the objective when any device runs out of memory

    @classmethod
    def placeto(cls, **kw) -> "SimParams":
        """Placeto's reference constants (appendix A.5 simulator): 5.7 us op gap, 25 us bus gap,
        7600 bytes/us between any two devices, no latency."""
        base = dict(comm_model="placeto", op_gap_us=5.7, bus_gap_us=25.0, bandwidth_bytes_per_us=7600.0, latency_us=0.0)
        base.update(kw)
        return cls(**base)


@dataclass(eq=False)
class SimResult:
    makespan_us: float
    device: np.ndarray  # (n,) device of each op
    start_us: np.ndarray  # (n,)
    end_us: np.ndarray  # (n,)
    transfers: dict[str, np.ndarray]  # tensor (producing op), src, dst, start_us, end_us: arrays of equal length
    busy_us: np.ndarray  # (D,) compute time per device
    peak_memory_bytes: np.ndarray  # (D,)
    peak_ops: list[np.ndarray]  # per device: ops whose memory was live at that device's peak
    memory_bytes: np.ndarray  # (D,) capacities
    objective: float  # memory-penalised step time (us)
    oom: bool
    params: SimParams = field(default_factory=SimParams)

    @property
    def utilisation(self) -> np.ndarray:
        return self.busy_us / self.makespan_us if self.makespan_us > 0 else np.zeros_like(self.busy_us)

    def summary(self, device_names=None) -> dict:
        names = device_names or [f"d{i}" for i in range(len(self.busy_us))]
        return {
            "makespan_us": self.makespan_us, "objective": self.objective, "oom": self.oom,
            "transfers": int(len(self.transfers["tensor"])),
            "devices": [
                {"name": n, "busy_us": float(b), "utilisation": float(u), "peak_memory_bytes": float(m),
                 "memory_bytes": float(c), "oom": bool(m > c)}
                for n, b, u, m, c in zip(names, self.busy_us, self.utilisation, self.peak_memory_bytes, self.memory_bytes)
            ],
        }

    def chrome_trace(self, op_names, device_names) -> dict:
        """Chrome trace-event JSON (open in Perfetto or chrome://tracing): one row per device for
        compute and one per device for its outgoing transfers."""
        ev = []
        for d, n in enumerate(device_names):
            ev.append({"ph": "M", "name": "process_name", "pid": 0, "tid": 2 * d, "args": {"name": f"{n} compute"}})
            ev.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 2 * d, "args": {"name": f"{n} compute"}})
            ev.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 2 * d + 1, "args": {"name": f"{n} send"}})
        for i in range(len(self.start_us)):
            ev.append({"ph": "X", "name": op_names[i], "pid": 0, "tid": int(2 * self.device[i]),
                       "ts": float(self.start_us[i]), "dur": float(self.end_us[i] - self.start_us[i])})
        t = self.transfers
        for k in range(len(t["tensor"])):
            ev.append({"ph": "X", "name": f"{op_names[t['tensor'][k]]} -> {device_names[t['dst'][k]]}",
                       "pid": 0, "tid": int(2 * t["src"][k] + 1), "ts": float(t["start_us"][k]),
                       "dur": float(t["end_us"][k] - t["start_us"][k])})
        return {"traceEvents": ev, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path, op_names, device_names) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(op_names, device_names), f)
