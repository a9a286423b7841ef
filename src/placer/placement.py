"""Placement (an op -> device map) and PlacementResult (what every method returns)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Placement:
    """A device index per op (in the graph's topological order) plus the device names it refers to."""

    devices: np.ndarray  # (n_ops,) int64
    device_names: tuple[str, ...]

    def __post_init__(self):
        a = np.ascontiguousarray(self.devices, dtype=np.int64)
        a.flags.writeable = False
        object.__setattr__(self, "devices", a)

    def __len__(self) -> int:
        return len(self.devices)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Placement) and self.device_names == other.device_names
                and np.array_equal(self.devices, other.devices))

    def counts(self) -> dict[str, int]:
        c = np.bincount(self.devices, minlength=len(self.device_names))
        return {n: int(k) for n, k in zip(self.device_names, c)}


@dataclass
class Cost:
    """What a method spent: placements it sampled, simulator calls, wall-clock seconds."""

    placements: int = 0
    sim_calls: int = 0
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlacementResult:
    """A method's answer: the placement, its simulation, the best-so-far curve and the cost."""

    method: str
    placement: Placement
    sim: Any  # placer.sim.SimResult
    curve: list[tuple[int, float]] = field(default_factory=list)  # (placements sampled, best objective so far)
    cost: Cost = field(default_factory=Cost)
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    notes: list[str] = field(default_factory=list)
    objective: str = "sim"  # what the method minimised (placer.objectives)
    objective_us: float | None = None  # its value for this placement; None: the simulator's objective

    @property
    def step_time_us(self) -> float:
        return float(self.sim.makespan_us)

    @property
    def value_us(self) -> float:
        """The value of the objective the method minimised (the simulator's by default)."""
        return float(self.sim.objective_us) if self.objective_us is None else float(self.objective_us)

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method, "seed": self.seed, "step_time_us": self.step_time_us,
            "objective": self.value_us, "objective_name": self.objective, "oom": bool(self.sim.oom),
            "peak_memory_bytes": [float(x) for x in self.sim.peak_memory_bytes],
            "placements_sampled": self.cost.placements, "sim_calls": self.cost.sim_calls,
            "wall_s": self.cost.wall_s, "cpu_s": self.cost.extra.get("cpu_s"),
            "stopped_by": self.cost.extra.get("stopped_by"),  # placements, seconds or method (its own end)
            "device_counts": self.placement.counts(),
            "params": self.params, "notes": self.notes,
        }


class Stopwatch:
    """Wall-clock seconds since creation (``time.perf_counter``)."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0
