"""SimParams (the simulator's knobs) and SimResult (one simulated training step)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from placer.cluster import COMM_MODELS  # the kernel's numbering: placer.sim.prepare.COMM_MODELS


def memory_first(objective_us: float, fits: bool) -> tuple[bool, float]:
    """The order in which every best placement is kept (the Evaluator's, the RL trainers', the
    layer split's search): a placement that fits in memory before one that overflows a device, then
    the lower objective. The memory-penalised objective alone ranks a placement a few MB over a
    device (Placeto's penalty: 2 s per GB) a few ms above one that runs, so it can win; this order
    never returns an overflowing placement when one that fits was evaluated. Compare the tuples."""
    return (not fits, float(objective_us))


def cluster_comm_model(cluster) -> str:
    """The communication model a cluster declares (``meta["comm_model"]``, from its file's
    ``comm_model`` field), ``"placeto"`` when it declares none (or for no cluster)."""
    meta = getattr(cluster, "meta", None) or {}
    return str(meta.get("comm_model") or "placeto")


@dataclass(frozen=True)
class SimParams:
    """How a step is simulated. ``SimParams.placeto()`` reproduces the reference simulator."""

    comm_model: str = "placeto"  # "placeto": one outgoing bus per device, one transfer per output tensor;
    #                               "p2p": one transfer per destination device, links and both ends serialised;
    #                               "giph": one transfer per edge, no contention (GiPH's env/latency.py);
    #                               "link": one transfer per destination device, FIFO on each link resource
    #                               (see docs/simulator.md; COMM_MODELS)
    op_gap_us: float = 0.0  # idle gap on a device after each op with non-zero cost
    bus_gap_us: float = 0.0  # gap on the sending bus after each transfer (does not delay arrival)
    bandwidth_bytes_per_us: float | None = None  # overrides every link's bandwidth when set
    latency_us: float | None = None  # overrides every link's latency when set
    memory_penalty_us_per_byte: float = 2e-3  # c in R = r + c * ReLU(m - M), per byte over capacity: Placeto's 2 s per GB (1e9 bytes)
    oom_penalty_us: float = 0.0  # added to the objective when any device runs out of memory
    tie_break: str = "index"  # order of simultaneous events: "index" (topological index, placer's own) or
    #                           "name" (op-name rank, as the reference simulator's heap of name tuples)

    def __post_init__(self):
        if self.comm_model not in COMM_MODELS:
            raise ValueError(f"comm_model must be one of {', '.join(COMM_MODELS)}, not {self.comm_model!r}")
        if self.tie_break not in ("index", "name"):
            raise ValueError(f"tie_break must be 'index' or 'name', not {self.tie_break!r}")
        for name in ("op_gap_us", "bus_gap_us", "memory_penalty_us_per_byte", "oom_penalty_us"):
            v = getattr(self, name)
            if not (v >= 0 and v < float("inf")):
                raise ValueError(f"{name} must be a finite non-negative number, not {v!r}")
        if self.bandwidth_bytes_per_us is not None and not self.bandwidth_bytes_per_us > 0:
            raise ValueError("bandwidth_bytes_per_us must be positive")
        if self.latency_us is not None and not self.latency_us >= 0:
            raise ValueError("latency_us must be non-negative")

    PRESETS = ("default", "placeto", "p2p", "giph", "link")  # names accepted by preset(), --sim and experiments

    @classmethod
    def preset(cls, name: str, cluster=None) -> "SimParams":
        """The simulator settings called ``name``: ``default`` (the cluster's own links, no gaps,
        the communication model the cluster declares: :func:`cluster_comm_model`), ``placeto``
        (the reference simulator's constants), or a communication model (``p2p``, ``giph``,
        ``link``) with the cluster's links and no gaps. The one lookup the CLI and the bench use."""
        if name == "default":
            return cls(comm_model=cluster_comm_model(cluster))
        if name == "placeto":
            return cls.placeto()
        if name in COMM_MODELS:
            return cls(comm_model=name)
        from placer.errors import InputError

        raise InputError("sim", repr(name)[:80], "is not a simulator preset", f"use one of {', '.join(cls.PRESETS)}",
                         kind="sim")

    @classmethod
    def placeto(cls, **kw) -> "SimParams":
        """The published reference simulator (Placeto appendix A.5; the authors' ``tf_sim``
        defaults "optimized for p2.8xlarge"): 5.7 us idle gap after each op with non-zero cost,
        25 us bus gap after each transfer, 7600 bytes/us between any two devices, no latency, first
        ops start at t = 0, one outgoing bus per device, and simultaneous events ordered by op name
        (``tie_break="name"``) as its heap of ``(time, event, (producer, consumer) names)`` does.

        Zero-cost ops: the reference skips the 5.7 us gap only when an op's cost is the integer
        ``0`` (``cost is 0``; a float ``0.0`` still gets the gap). Its costs come from TensorFlow
        step stats in integer microseconds, so every zero it sees is the integer 0. placer stores
        costs as float64 microseconds and treats every exact zero as that integer 0: no gap after
        an op whose cost is 0, whatever the input file spelled. (Feeding the reference simulator
        float costs with 0.0 entries is the one case where the two differ.)"""
        base = dict(comm_model="placeto", op_gap_us=5.7, bus_gap_us=25.0, bandwidth_bytes_per_us=7600.0, latency_us=0.0,
                    tie_break="name")
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
    objective_us: float  # memory-penalised step time (us)
    oom: bool
    params: SimParams = field(default_factory=SimParams)
    peak_time_us: np.ndarray | None = None  # (D,) when each device's peak was first reached
    memory_intervals: dict | None = None  # dev, alloc, free, bytes, owner, kind (see placer.sim.memory)

    @property
    def utilisation(self) -> np.ndarray:
        return self.busy_us / self.makespan_us if self.makespan_us > 0 else np.zeros_like(self.busy_us)

    def summary(self, device_names=None) -> dict:
        names = device_names or [f"d{i}" for i in range(len(self.busy_us))]
        return {
            "makespan_us": self.makespan_us, "objective": self.objective_us, "oom": self.oom,
            "transfers": int(len(self.transfers["tensor"])),
            "devices": [
                {"name": n, "busy_us": float(b), "utilisation": float(u), "peak_memory_bytes": float(m),
                 "memory_bytes": float(c), "oom": bool(m > c)}
                for n, b, u, m, c in zip(names, self.busy_us, self.utilisation, self.peak_memory_bytes, self.memory_bytes)
            ],
        }

    def chrome_trace(self, op_names, device_names, memory: bool = True) -> dict:
        """Chrome trace-event JSON (open in Perfetto or chrome://tracing): one row per device for
        compute and one per device for its outgoing transfers, plus (``memory``) a counter track of
        each device's resident bytes. Timestamps are microseconds, the format's unit."""
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
        if memory and self.memory_intervals is not None:
            from placer.sim.memory import memory_counter_events

            resident = self.peak_memory_bytes - _dynamic_peak(self)
            ev.extend(memory_counter_events(self.memory_intervals, resident, device_names))
        return {"traceEvents": ev, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path, op_names, device_names) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(op_names, device_names), f)


def _dynamic_peak(r: SimResult) -> np.ndarray:
    """Peak activation bytes per device (the peak less the parameters held all step)."""
    from placer.sim.memory import sweep_peaks

    return sweep_peaks(r.memory_intervals, len(r.busy_us))[0]
