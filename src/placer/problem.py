"""Problem: an OpGraph on a Cluster, turned into the dense arrays every method and the simulator use.

* ``compute_us`` (n_ops x n_devices): the op's cost on that device; ``inf`` where it cannot run there
  (``allowed``: the same as a bool mask, what a method places by).
  Looked up per device by the device's model key (e.g. ``k80``), then its kind (``gpu``/``cpu``),
  then a roofline estimate from the op's FLOPs and bytes accessed and the device's speed; a device
  with none of these gets ``inf`` for every op (the graph says nothing about it, so nothing goes there).
* link matrices from the cluster; ``comm_us(bytes, a, b) = latency + bytes / bandwidth``.
* memory: parameter / persistent bytes per op and device capacities.
* lower bounds on the step time: the critical path with every op on its fastest device and no
  communication, and the total work (each op at its fastest) spread evenly over all devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from placer.cluster import Cluster
from placer.cost.roofline import roofline_us
from placer.errors import InputError
from placer.graph import OpGraph


@dataclass(eq=False)
class Problem:
    graph: OpGraph
    cluster: Cluster
    compute_us: np.ndarray = field(init=False, repr=False)
    cost_sources: tuple[str, ...] = field(init=False)  # per device: which cost key or "roofline"

    def __post_init__(self):
        g, c = self.graph, self.cluster
        cols, sources = [], []
        for dev in c.devices:
            for key in (dev.model.lower(), dev.kind.lower()):
                if key in g.compute_us:
                    cols.append(np.asarray(g.compute_us[key], dtype=np.float64))
                    sources.append(key)
                    break
            else:
                if dev.peak_flops_per_us > 0 and (g.flops.any() or g.bytes_accessed.any()):
                    cols.append(roofline_us(g.flops, g.bytes_accessed, dev.peak_flops_per_us,
                                            dev.mem_bw_bytes_per_us, dev.launch_us))
                    sources.append("roofline")
                else:  # no cost data for this device: nothing can be placed there
                    cols.append(np.full(g.n_ops, np.inf))
                    sources.append("none")
        if all(s == "none" for s in sources):
            raise InputError(g.name, f"cluster '{c.name}'",
                             f"the graph has no compute costs for any of its devices (it has {list(g.compute_us) or 'none'})",
                             "add costs for a device model or kind of the cluster, or give the ops FLOPs and bytes")
        t = np.stack(cols, axis=1) if cols else np.zeros((g.n_ops, 0))
        t.flags.writeable = False
        self.compute_us = t
        self.cost_sources = tuple(sources)
        runnable = np.isfinite(t)
        nowhere = ~runnable.any(axis=1)
        if nowhere.any():
            i = int(np.flatnonzero(nowhere)[0])
            raise InputError(g.name, f"op '{g.op_names[i]}'", f"can run on no device of cluster '{c.name}'",
                             "use a cluster with a device kind the op supports")
        own = g.param_bytes + g.temp_bytes + g.output_bytes
        fits = runnable & (own[:, None] <= c.memory_bytes[None, :])
        bad = ~fits.any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(g.name, f"op '{g.op_names[i]}'",
                             f"needs {own[i] / 2**30:.2f} GiB and fits on no device of cluster '{c.name}'",
                             "use devices with more memory or split the op")
        for members in g.colocation_groups():
            if not runnable[members].all(axis=0).any():
                raise InputError(g.name, f"colocation group of '{g.op_names[members[0]]}'",
                                 "its ops share no device they can all run on", "fix the colocation groups")

    # ------------------------------------------------------------------ shapes
    @property
    def n_ops(self) -> int:
        return self.graph.n_ops

    @property
    def n_devices(self) -> int:
        return self.cluster.n_devices

    @property
    def bandwidth_bytes_per_us(self) -> np.ndarray:
        return self.cluster.bandwidth_bytes_per_us

    @property
    def latency_us(self) -> np.ndarray:
        return self.cluster.latency_us

    @property
    def memory_bytes(self) -> np.ndarray:
        return self.cluster.memory_bytes

    @cached_property
    def allowed(self) -> np.ndarray:
        """(n_ops, n_devices) bool, read-only: where each op can run (a finite cost; ``null`` in a graph
        file is ``inf`` here). Every op has at least one such device and every colocation group one its
        ops share (checked when the Problem is built)."""
        a = np.isfinite(self.compute_us)
        a.flags.writeable = False
        return a

    @cached_property
    def restricted(self) -> bool:
        """Whether some op cannot run on some device."""
        return not bool(self.allowed.all())

    def comm_us(self, nbytes: float, src: int, dst: int) -> float:
        if src == dst:
            return 0.0
        return float(self.latency_us[src, dst] + nbytes / self.bandwidth_bytes_per_us[src, dst])

    # ------------------------------------------------------------------ bounds
    @cached_property
    def fastest_us(self) -> np.ndarray:
        """Each op's cost on its fastest device."""
        return self.compute_us.min(axis=1)

    @cached_property
    def critical_path_us(self) -> float:
        """Longest path with every op on its fastest device and free communication."""
        g = self.graph
        finish = np.zeros(g.n_ops)
        fast = self.fastest_us
        pp, pi = g.pred_ptr, g.pred_idx
        for i in range(g.n_ops):
            s = pp[i]
            e = pp[i + 1]
            start = finish[pi[s:e]].max() if e > s else 0.0
            finish[i] = start + fast[i]
        return float(finish.max())

    @cached_property
    def load_bound_us(self) -> float:
        """Total work at the fastest device, spread evenly over every device."""
        return float(self.fastest_us.sum() / self.n_devices)

    @property
    def lower_bound_us(self) -> float:
        return max(self.critical_path_us, self.load_bound_us)

    # ------------------------------------------------------------------ memory
    def resident_bytes(self, placement: np.ndarray) -> np.ndarray:
        """Parameter / persistent bytes per device for a placement (held for the whole step)."""
        return np.bincount(np.asarray(placement), weights=self.graph.param_bytes, minlength=self.n_devices)

    def memory_feasible(self, placement: np.ndarray) -> bool:
        """Whether the persistent bytes of every device fit its capacity (the simulator reports the
        full peak, activations included)."""
        return bool((self.resident_bytes(placement) <= self.memory_bytes).all())

    @cached_property
    def memory_possible(self) -> bool:
        """A necessary condition: all persistent bytes fit in the cluster's total memory."""
        return bool(self.graph.param_bytes.sum() <= self.memory_bytes.sum())

    # ------------------------------------------------------------------ placements
    def validate_placement(self, placement, source: str = "placement") -> np.ndarray:
        """Return the placement as an int64 array, or raise InputError naming the bad entry."""
        g = self.graph
        try:
            p = np.asarray(placement)
        except Exception:  # pragma: no cover - numpy accepts nearly anything
            raise InputError(source, "placement", "is not an array of device indices", "give one device per op") from None
        if p.ndim != 1 or len(p) != g.n_ops:
            raise InputError(source, "placement", f"has {p.size} entries for {g.n_ops} ops", "give one device per op")
        if not np.issubdtype(p.dtype, np.integer):
            raise InputError(source, "placement", "entries are not integer device indices", "use device indices")
        p = p.astype(np.int64)
        bad = (p < 0) | (p >= self.n_devices)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(source, f"op '{g.op_names[i]}'", f"device index {p[i]} is not in cluster '{self.cluster.name}'",
                             f"use 0..{self.n_devices - 1}")
        cannot = ~np.isfinite(self.compute_us[np.arange(g.n_ops), p])
        if cannot.any():
            i = int(np.flatnonzero(cannot)[0])
            raise InputError(source, f"op '{g.op_names[i]}'", f"cannot run on device '{self.cluster.devices[p[i]].name}'",
                             "place it on a device that supports it")
        for members in g.colocation_groups():
            if len(np.unique(p[members])) > 1:
                raise InputError(source, f"op '{g.op_names[members[0]]}'", "its colocation group is split across devices",
                                 "put every op of a colocation group on one device")
        return p

    def summary(self) -> dict:
        return {
            "graph": self.graph.name, "cluster": self.cluster.name, "ops": self.n_ops, "edges": self.graph.n_edges,
            "devices": list(self.cluster.device_names), "cost_sources": list(self.cost_sources),
            "total_work_us": float(self.fastest_us.sum()), "critical_path_us": self.critical_path_us,
            "load_bound_us": self.load_bound_us, "lower_bound_us": self.lower_bound_us,
            "param_bytes": float(self.graph.param_bytes.sum()), "memory_bytes": self.memory_bytes.tolist(),
            "memory_possible": self.memory_possible,
        }
