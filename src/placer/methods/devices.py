"""Where an op may run, for the classical placers: the cluster's GPUs, the devices a colocation group
can share, a placement repaired to the devices its ops can run on, and the words naming them.

A *unit* is what a classical method moves as one piece: a colocation group or a single free op,
the groups of :func:`placer.grouping.colocation_units` (a :class:`placer.grouping.Grouping`: its
``op_group``, ``groups``, ``compute_us(problem)``, ``edges(graph)``, ``expand``). Every method here
places units, so a placement it returns never splits a colocation group.
"""

from __future__ import annotations

import numpy as np

from placer.grouping import Grouping, colocation_units


def gpu_devices(problem) -> list[int]:
    """The cluster's GPUs (all devices when it has none)."""
    return problem.cluster.gpus() or list(range(problem.n_devices))


def group_allowed(problem) -> np.ndarray:
    """(n_ops, D) bool: the devices an op may go to with its colocation group, those every op of the
    group can run on (:attr:`placer.problem.Problem.allowed` for an op in no group)."""
    ok = np.array(problem.allowed)
    for members in problem.graph.colocation_groups():
        ok[members] = ok[members].all(axis=0)
    return ok


def usable_devices(problem, devices: list[int] | None, units: Grouping | None = None) -> np.ndarray:
    """(n, D) bool: devices an op may go to, the same for every op of a colocation group: those of
    ``devices`` that can run all the group's ops, or, when there are none (e.g. a CPU-only op
    while the method places on GPUs), any device that can."""
    units = units or colocation_units(problem)
    uok = np.isfinite(units.compute_us(problem))
    if devices is not None:
        allow = np.zeros(problem.n_devices, dtype=bool)
        allow[list(devices)] = True
        inside = uok & allow[None, :]
        none = ~inside.any(axis=1)
        inside[none] = uok[none]
        uok = inside
    return uok[units.op_group]


def allowed_placement(problem, placement) -> np.ndarray:
    """``placement`` with every op on a device it can run on and every colocation group on one device.

    A colocation group goes where its first op is when all its ops can run there (the groups' one
    rule), else to the device most of its ops are on among those they can all run on, else to the
    one of those where the group costs least; a free op on a device it cannot run on goes to its
    fastest device. A placement already valid comes back unchanged (as a new int64 array)."""
    orig = np.asarray(placement, dtype=np.int64)
    p = orig.copy()
    comp, ok = problem.compute_us, problem.allowed
    n = len(p)
    bad = ~ok[np.arange(n), p]
    if bad.any():
        p[bad] = np.argmin(comp[bad], axis=1)  # the fastest device that can (inf elsewhere)
    for members in problem.graph.colocation_groups():
        share = ok[members].all(axis=0)
        d = int(orig[members[0]])
        if not share[d]:
            votes = np.bincount(orig[members], minlength=problem.n_devices) * share
            d = int(np.argmax(votes)) if votes.any() else int(np.argmin(np.where(share, comp[members].sum(axis=0), np.inf)))
        p[members] = d
    return p


def device_list(problem, devices) -> str:
    """``gpu:0, cpu:0``: the names of ``devices`` (indices or a bool mask), for a message."""
    ix = np.flatnonzero(devices) if np.asarray(devices).dtype == bool else np.asarray(devices)
    return ", ".join(problem.cluster.devices[int(d)].name for d in ix)


def only_on(problem, op: int) -> str:
    """``op 'x' can run only on gpu:2, cpu:0``: where one op may go, for a NotApplicable line."""
    return f"op '{problem.graph.op_names[op]}' can run only on {device_list(problem, problem.allowed[op])}"
