"""A placement taken out of placer as what a PyTorch user applies: a module -> device map
(``placer export --format device-map``, read by :func:`placer.apply` or accelerate's
``dispatch_model``) or pipeline stages named by their first module (``--format pipeline``:
``torch.distributed.pipelining`` split points, each stage's memory beside it).

A placement exports when it is module-level at the depth asked (:mod:`placer.grouping.modules`):
every op of a module unit, forward, backward and update, on one device, and units that share a
parameter on one device. Glue ops (recorded in a module that is the parent of units: the loss, mask
building) are not checked: in the user's eager step they run where their inputs are. Anything else
is refused with one line naming the module and how to get a module-level placement.
"""

from __future__ import annotations

import numpy as np

from placer.errors import InputError
from placer.grouping.modules import DEFAULT_DEPTH, NO_MODULES_FIX, ModuleUnits, module_units, no_module_paths
from placer.problem import Problem


def units_of(problem: Problem, depth: int, where: str = "export") -> ModuleUnits:
    """The module units a map is made of; InputError for a graph without module paths (a PipeDream
    profile's layer ids are no modules: :func:`placer.grouping.modules.no_module_paths`)."""
    why = no_module_paths(problem.graph)
    mu = None if why else module_units(problem, depth)
    if mu is None:
        raise InputError(where, f"graph '{problem.graph.name}'", f"{why or 'records no module paths'}, so a placement "
                         "of it is no module map", f"use the placement file itself (placer optimize -o), or {NO_MODULES_FIX}")
    return mu


def unit_devices(problem: Problem, placement, depth: int = DEFAULT_DEPTH, where: str = "placement",
                 graph_arg: str = "GRAPH") -> tuple[ModuleUnits, np.ndarray]:
    """(units, device index of every unit), or InputError naming the first module the placement
    splits (or the first tie it breaks)."""
    mu = units_of(problem, depth, where)
    p = np.asarray(placement, dtype=np.int64)
    names = problem.cluster.device_names
    dev = np.full(mu.n_units, -1, dtype=np.int64)
    how = (f"get a module-level placement with `placer optimize {graph_arg} --grouping module:{depth}` (or "
           f"`--method accelerate-auto` / `param-balanced`), or export it at a shallower depth (--depth)")
    own = ~mu.glue
    for u in range(mu.n_units):
        ops = np.flatnonzero((mu.op_unit == u) & own)
        if not len(ops):
            ops = np.flatnonzero(mu.op_unit == u)
        ds, counts = np.unique(p[ops], return_counts=True)
        if len(ds) > 1:
            main = int(np.argmax(counts))
            other = [names[d] for k, d in enumerate(ds) if k != main]
            raise InputError(where, f"module '{mu.names[u]}'",
                             f"is split over {names[ds[main]]} and {', '.join(other)} "
                             f"({len(ops) - int(counts[main])} of its {len(ops)} ops off {names[ds[main]]}), "
                             f"so no module -> device map at depth {depth} expresses this placement", how)
        dev[u] = ds[0]
    for t in np.unique(mu.tie):
        us = np.flatnonzero(mu.tie == t)
        if len(np.unique(dev[us])) > 1:
            a, b = us[0], us[np.flatnonzero(dev[us] != dev[us[0]])[0]]
            raise InputError(where, f"modules '{mu.names[a]}' and '{mu.names[b]}'",
                             f"share a parameter and are on {names[dev[a]]} and {names[dev[b]]}", how)
    return mu, dev


def device_map(problem: Problem, placement, real: list[str], depth: int = DEFAULT_DEPTH,
               where: str = "placement", graph_arg: str = "GRAPH") -> dict:
    """The ``device-map`` export: ``{"device_map": {module: real device}, ...}`` with the cluster
    device of every module beside it (``real``: the real device of every cluster device)."""
    mu, dev = unit_devices(problem, placement, depth, where, graph_arg)
    order = mu.forward_order(problem.graph)
    return {"format": "device-map", "graph": problem.graph.name, "cluster": problem.cluster.name, "depth": depth,
            "device_map": {mu.names[u]: real[dev[u]] for u in order},
            "cluster_devices": {mu.names[u]: problem.cluster.device_names[dev[u]] for u in order}}


def pipeline(problem: Problem, placement, real: list[str], depth: int = DEFAULT_DEPTH, sim_params=None,
             where: str = "placement", graph_arg: str = "GRAPH") -> dict:
    """The ``pipeline`` export: units in forward order cut where the device changes; each stage its
    device, modules, parameter bytes (weights and optimizer state) and its device's simulated peak
    memory; ``split_points``: the first module of every stage after the first, for
    ``torch.distributed.pipelining.pipeline(..., split_spec={name: SplitPoint.BEGINNING})``."""
    from placer.sim import simulate

    mu, dev = unit_devices(problem, placement, depth, where, graph_arg)
    order = mu.forward_order(problem.graph)
    g = problem.graph
    pbytes = np.bincount(mu.op_unit, weights=g.param_bytes, minlength=mu.n_units)
    r = simulate(problem, np.asarray(placement, dtype=np.int64), sim_params)
    stages: list[dict] = []
    for u in order:
        if not stages or stages[-1]["device_index"] != dev[u]:
            stages.append({"device_index": int(dev[u]), "modules": []})
        stages[-1]["modules"].append(mu.names[u])
        stages[-1]["param_bytes"] = stages[-1].get("param_bytes", 0.0) + float(pbytes[u])
    names = problem.cluster.device_names
    per_device = np.bincount([s["device_index"] for s in stages], minlength=problem.n_devices)
    out = []
    for k, s in enumerate(stages):
        d = s.pop("device_index")
        out.append({"stage": k, "device": real[d], "cluster_device": names[d], "first_module": s["modules"][0],
                    "modules": s["modules"], "param_bytes": s["param_bytes"],
                    "device_peak_bytes": float(r.peak_memory_bytes[d]), "device_memory_bytes": float(problem.memory_bytes[d]),
                    "stages_on_device": int(per_device[d])})
    return {"format": "pipeline", "graph": g.name, "cluster": problem.cluster.name, "depth": depth,
            "split_points": [s["first_module"] for s in out[1:]], "stages": out,
            "simulated_step_us": float(r.makespan_us), "oom": bool(r.oom)}
