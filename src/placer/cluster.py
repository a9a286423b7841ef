"""Devices, the links between them, and the cluster presets.

A :class:`Cluster` is a tuple of :class:`Device` plus two dense (D x D) matrices: link bandwidth
(bytes per microsecond, one direction) and link latency (microseconds). The diagonal is unused
(a tensor needs no transfer to its own device).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from placer.cost.specs import DeviceSpec, device_spec, link_spec
from placer.errors import InputError


@dataclass(frozen=True)
class Device:
    name: str
    kind: str  # "gpu" or "cpu" (an "accelerator" of an imported graph counts as "gpu")
    model: str  # e.g. "k80"; the first compute-cost key looked up, then kind
    memory_bytes: float
    peak_flops_per_us: float = 0.0
    mem_bw_bytes_per_us: float = 0.0
    launch_us: float = 0.0

    @classmethod
    def from_spec(cls, name: str, spec: DeviceSpec, memory_bytes: float | None = None) -> "Device":
        return cls(name, spec.kind, spec.model, spec.memory_bytes if memory_bytes is None else memory_bytes,
                   spec.peak_flops_per_us, spec.mem_bw_bytes_per_us, spec.launch_us)


@dataclass(frozen=True, eq=False)
class Cluster:
    name: str
    devices: tuple[Device, ...]
    bandwidth_bytes_per_us: np.ndarray  # (D, D)
    latency_us: np.ndarray  # (D, D)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        D = len(self.devices)
        for a in (self.bandwidth_bytes_per_us, self.latency_us):
            a.flags.writeable = False
        if D == 0:
            raise InputError(self.name, "devices", "the cluster has no devices", "give at least one device")

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @property
    def memory_bytes(self) -> np.ndarray:
        return np.array([d.memory_bytes for d in self.devices], dtype=np.float64)

    def gpus(self) -> list[int]:
        return [i for i, d in enumerate(self.devices) if d.kind == "gpu"]

    def cpus(self) -> list[int]:
        return [i for i, d in enumerate(self.devices) if d.kind == "cpu"]

    def index_of(self, name: str) -> int:
        for i, d in enumerate(self.devices):
            if d.name == name:
                return i
        raise KeyError(name)

    def subset(self, indices: list[int], name: str | None = None) -> "Cluster":
        ix = np.asarray(indices)
        return Cluster(name or f"{self.name}[{','.join(map(str, indices))}]",
                       tuple(self.devices[i] for i in indices),
                       self.bandwidth_bytes_per_us[np.ix_(ix, ix)].copy(), self.latency_us[np.ix_(ix, ix)].copy(),
                       dict(self.meta))

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, devices={list(self.device_names)})"


# The simulator's communication models (placer.sim, docs/simulator.md); a cluster file's ``comm_model``
# (kept in ``Cluster.meta``) picks one, ``placeto`` when it names none.
COMM_MODELS = ("placeto", "p2p", "giph", "link")
MAX_DEVICES = 4096  # devices in one cluster: its (D x D) link matrices stay under 300 MB


def make_cluster(name: str, devices: list[Device], default_bw: float, default_lat: float,
                 pairs: dict[tuple[int, int], tuple[float, float]] | None = None,
                 meta: Mapping[str, Any] | None = None, source: str = "<cluster>") -> Cluster:
    """A cluster with one default link for every pair, overridden per ordered pair by ``pairs``."""
    D = len(devices)
    names = [d.name for d in devices]
    if len(set(names)) != D:
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(source, f"device '{dup}'", "duplicate device name", "make device names unique")
    if D > MAX_DEVICES:
        raise InputError(source, "devices", f"are {D:,}, more than {MAX_DEVICES:,}, the most placer allows "
                         "(its link matrices hold every pair of devices)", "model a smaller cluster")
    for d in devices:
        if not (np.isfinite(d.memory_bytes) and d.memory_bytes > 0):
            raise InputError(source, f"device '{d.name}' memory_bytes", f"invalid value {d.memory_bytes!r}",
                             "use a positive number of bytes")
        for key in ("peak_flops_per_us", "mem_bw_bytes_per_us", "launch_us"):
            v = getattr(d, key)
            if not (np.isfinite(v) and v >= 0):
                raise InputError(source, f"device '{d.name}' {key}", f"invalid value {v!r}",
                                 "use a finite number of 0 or more")
    bw = np.full((D, D), float(default_bw))
    lat = np.full((D, D), float(default_lat))
    for (a, b), (w, l) in (pairs or {}).items():
        bw[a, b], lat[a, b] = w, l
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    off = ~np.eye(D, dtype=bool)
    if (~(bw[off] > 0)).any() or np.isnan(bw).any():
        raise InputError(source, "links", "a link bandwidth is not positive", "use positive bytes_per_us")
    if (lat < 0).any() or np.isnan(lat).any() or np.isinf(lat).any():
        raise InputError(source, "links", "a link latency is negative or not finite", "use latency_us >= 0")
    return Cluster(name, tuple(devices), bw, lat, dict(meta or {}))


# ---------------------------------------------------------------------- presets
def _k80_machine(n_gpus: int, link: str = "placeto") -> Cluster:
    """The papers' machine: n Tesla K80 GPUs and the host CPU on PCIe (Placeto A.1, Post section 4,
    Hierarchical Planner section 3). Links use Placeto's simulator bandwidth (7.6 GB/s)."""
    ls = link_spec(link)
    devs = [Device.from_spec(f"gpu:{i}", device_spec("k80")) for i in range(n_gpus)]
    devs.append(Device.from_spec("cpu:0", device_spec("xeon-e5-2686")))
    return make_cluster(f"k80x{n_gpus}", devs, ls.bandwidth_bytes_per_us, ls.latency_us,
                        meta={"description": f"{n_gpus} x Tesla K80 + Xeon host, {link} links"})


def _nvlink_machine(model: str, n: int, gpu_link: str, host_link: str) -> Cluster:
    """n GPUs all-to-all over NVLink (NVSwitch or, for V100, DGX-1 style uniform links) plus the
    host CPU over PCIe."""
    g, h = link_spec(gpu_link), link_spec(host_link)
    devs = [Device.from_spec(f"gpu:{i}", device_spec(model)) for i in range(n)]
    devs.append(Device.from_spec("cpu:0", device_spec("xeon-e5-2686"), memory_bytes=512 * 2**30))
    pairs = {(a, b): (g.bandwidth_bytes_per_us, g.latency_us) for a in range(n) for b in range(n) if a != b}
    return make_cluster(f"{model}x{n}", devs, h.bandwidth_bytes_per_us, h.latency_us, pairs,
                        meta={"description": f"{n} x {model.upper()} on {gpu_link}, host on {host_link}"})


def _cpu_only() -> Cluster:
    return make_cluster("cpu", [Device.from_spec("cpu:0", device_spec("xeon-e5-2686"))], 1.0, 0.0,
                        meta={"description": "one CPU"})


PRESETS = {
    "k80x1": lambda: _k80_machine(1),
    "k80x2": lambda: _k80_machine(2),
    "k80x4": lambda: _k80_machine(4),
    "k80x8": lambda: _k80_machine(8),
    "v100x8": lambda: _nvlink_machine("v100", 8, "nvlink2", "pcie3"),
    "a100x8": lambda: _nvlink_machine("a100", 8, "nvlink3", "pcie4"),
    "h100x8": lambda: _nvlink_machine("h100", 8, "nvlink4", "pcie5"),
    "cpu": _cpu_only,
}
DEFAULT_PRESET = "k80x2"


def preset(name: str) -> Cluster:
    """A named cluster preset (see :data:`PRESETS`)."""
    try:
        return PRESETS[name.lower()]()
    except KeyError:
        raise InputError("cluster", f"preset '{name}'", "is not a known cluster preset",
                         f"use one of {', '.join(PRESETS)} or a cluster JSON file", kind="cluster") from None
