"""What Placeto's policy places: one Problem, its placement units and the candidate devices.

Placeto places op groups (paper section 2: "we partition ops into predetermined groups and place
ops from the same group on the same device"); the groups come from :mod:`placer.grouping` (the
default is appendix A.6's Merge-and-Colocate), and groups tied by colocation are one unit
(:meth:`placer.grouping.Grouping.units`), so every step of an episode decides one unit.
:class:`PlacementTask` adds the action space (the candidate devices: the paper places on the GPUs)
and the unit-level arrays the network reads, all taken from the :class:`~placer.grouping.Grouping`.

Units are numbered by their first op (the graph's ops are in topological order). A unit graph may
have cycles (a forward op and its backward op in one unit, or tied groups merged); the network
reads the DAG of the edges that agree with the numbering (``dag_src`` -> ``dag_dst``), which for a
training graph is the structure of the forward model.

A unit that no candidate device can run (e.g. an op only the CPU implements, while the policy
places on the GPUs) is *fixed* on the fastest device that runs all its ops, as TensorFlow leaves
CPU-only ops on the CPU: its only action is the first candidate and it is expanded to its fixed
device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.errors import InputError
from placer.grouping import Grouping, make_grouping
from placer.problem import Problem


@dataclass(eq=False)
class PlacementTask:
    """An op-level Problem seen as a graph of placement units with a fixed set of candidate devices."""

    problem: Problem
    grouping: Grouping  # any grouping of the problem's ops; its units (ties merged) are placed
    devices: np.ndarray  # (A,) device index of each action
    name: str = ""
    # unit level, filled in __post_init__
    units: Grouping = field(init=False, repr=False)
    n_groups: int = field(init=False)
    compute_us: np.ndarray = field(init=False, repr=False)  # (N, A) summed over the unit's ops
    output_bytes: np.ndarray = field(init=False, repr=False)  # (N,)
    memory_bytes: np.ndarray = field(init=False, repr=False)  # (N,) parameter + output bytes
    feasible: np.ndarray = field(init=False, repr=False)  # (N, A) every op of the unit can run there
    fixed: np.ndarray = field(init=False, repr=False)  # (N,) device of a unit no candidate runs, else -1
    edge_src: np.ndarray = field(init=False, repr=False)  # all unit edges (may contain cycles)
    edge_dst: np.ndarray = field(init=False, repr=False)
    edge_bytes: np.ndarray = field(init=False, repr=False)
    dag_src: np.ndarray = field(init=False, repr=False)  # edges with src < dst: the DAG the network reads
    dag_dst: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        P, g = self.problem, self.problem.graph
        if self.grouping.n_ops != g.n_ops:
            raise InputError(g.name, "grouping", f"has {self.grouping.n_ops} ops for {g.n_ops}", "group this graph")
        self.units = self.grouping.units(g)
        self.devices = np.asarray(self.devices, dtype=np.int64)
        self.name = self.name or g.name
        self.n_groups = N = self.units.n_groups
        every = self.units.compute_us(P)
        self.compute_us = every[:, self.devices]
        self.feasible = np.isfinite(self.compute_us)
        self.fixed = np.full(N, -1, dtype=np.int64)
        for v in np.flatnonzero(~self.feasible.any(axis=1)):
            runs = np.isfinite(every[v])
            if not runs.any():
                op = g.op_names[int(self.units.first[v])]
                raise InputError(g.name, f"group of op '{op}'", "no device can run all its ops",
                                 "group differently")
            self.fixed[v] = int(np.argmin(np.where(runs, every[v], np.inf)))
            self.feasible[v] = False
            self.feasible[v, 0] = True
        self.output_bytes = self.units.total(g.output_bytes)
        self.memory_bytes = self.units.total(g.param_bytes + g.output_bytes)
        self.edge_src, self.edge_dst, self.edge_bytes = self.units.edges(g)
        fwd = self.edge_src < self.edge_dst
        self.dag_src, self.dag_dst = self.edge_src[fwd], self.edge_dst[fwd]

    @property
    def n_actions(self) -> int:
        return len(self.devices)

    @property
    def group_of(self) -> np.ndarray:
        """(n_ops,) the unit of every op."""
        return self.units.op_group

    def expand(self, actions: np.ndarray) -> np.ndarray:
        """Unit placement (action index per unit) -> op placement (device index per op)."""
        dev = self.devices[np.asarray(actions, dtype=np.int64)]
        return np.where(self.fixed >= 0, self.fixed, dev)[self.units.op_group]

    def contract(self, op_placement: np.ndarray) -> np.ndarray:
        """Op placement -> action index per unit (the device of each unit's first op)."""
        p = np.asarray(op_placement, dtype=np.int64)[self.units.first]
        lookup = {int(d): a for a, d in enumerate(self.devices)}
        out = []
        for v, d in enumerate(p.tolist()):
            if self.fixed[v] >= 0:
                out.append(0)
            elif d in lookup:
                out.append(lookup[d])
            else:
                raise InputError(self.name, "initial placement", f"uses device {d} that is not a candidate",
                                 f"use devices {self.devices.tolist()}")
        return np.asarray(out, dtype=np.int64)


def candidate_devices(problem: Problem, devices: str | list[int] = "gpus") -> np.ndarray:
    """The action space: 'gpus' (the paper places on the GPUs), 'all', or explicit indices."""
    if isinstance(devices, str):
        if devices == "gpus":
            idx = problem.cluster.gpus() or list(range(problem.n_devices))
        elif devices == "all":
            idx = list(range(problem.n_devices))
        else:
            raise InputError("devices", f"'{devices}'", "is not a device selection", "use 'gpus', 'all' or a list of indices")
    else:
        idx = [int(d) for d in devices]
    if not idx or any(d < 0 or d >= problem.n_devices for d in idx):
        raise InputError("devices", str(devices), "selects no valid device", f"use indices 0..{problem.n_devices - 1}")
    return np.asarray(idx, dtype=np.int64)


def make_task(problem: Problem, grouping="merge:64", devices: str | list[int] = "gpus", seed: int = 0) -> PlacementTask:
    """The task of placing ``problem``'s units of ``grouping`` (a spec of
    :func:`placer.grouping.parse_grouping`, or a Grouping) on the candidate ``devices``."""
    return PlacementTask(problem, make_grouping(problem, grouping, seed), candidate_devices(problem, devices))
