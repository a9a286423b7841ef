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
from placer.graph import FORWARD
from placer.grouping.modules import DEFAULT_DEPTH, NO_MODULES_FIX, ModuleUnits, module_units, no_module_paths
from placer.problem import Problem


def units_of(problem: Problem, depth: int, where: str = "export") -> ModuleUnits:
    """The module units a map is made of; InputError for a graph without module paths (a PipeDream
    profile's layer ids are no modules: :func:`placer.grouping.modules.no_module_paths`)."""
    why = no_module_paths(problem.graph)
    mu = None if why else module_units(problem, depth)
    if mu is None:
        raise InputError(where, f"graph '{problem.graph.name}'", f"{why or 'records no module paths'}, so a placement "
                         "of it is no module map", f"use the placement itself, or {NO_MODULES_FIX}", kind="no-module-map")
    return mu


def unit_devices(problem: Problem, placement, depth: int = DEFAULT_DEPTH,
                 where: str = "placement") -> tuple[ModuleUnits, np.ndarray]:
    """(units, device index of every unit), or InputError (kind ``module-split``) naming the first
    module the placement splits (or the first tie it breaks)."""
    mu = units_of(problem, depth, where)
    p = np.asarray(placement, dtype=np.int64)
    names = problem.cluster.device_names
    dev = np.full(mu.n_units, -1, dtype=np.int64)
    how = f"place the ops of each module at depth {depth} on one device, or export it at a shallower depth"
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
                             f"so no module -> device map at depth {depth} expresses this placement", how,
                             kind="module-split")
        dev[u] = ds[0]
    for t in np.unique(mu.tie):
        us = np.flatnonzero(mu.tie == t)
        if len(np.unique(dev[us])) > 1:
            a, b = us[0], us[np.flatnonzero(dev[us] != dev[us[0]])[0]]
            raise InputError(where, f"modules '{mu.names[a]}' and '{mu.names[b]}'",
                             f"share a parameter and are on {names[dev[a]]} and {names[dev[b]]}", how,
                             kind="module-split")
    return mu, dev


def device_map(problem: Problem, placement, real: list[str], depth: int = DEFAULT_DEPTH,
               where: str = "placement") -> dict:
    """The ``device-map`` export: ``{"device_map": {module: real device}, ...}`` with the cluster
    device of every module beside it (``real``: the real device of every cluster device)."""
    mu, dev = unit_devices(problem, placement, depth, where)
    order = dataflow_order(problem.graph, mu)
    pbytes = np.bincount(mu.op_unit, weights=problem.graph.param_bytes, minlength=mu.n_units)
    devices = []
    for d, name in enumerate(problem.cluster.device_names):
        us = [u for u in order if dev[u] == d]
        if us:
            top = [u for u in sorted(us, key=lambda u: (-pbytes[u], u))[:TOP_MODULES] if pbytes[u] > 0]
            devices.append({"cluster_device": name, "device": real[d], "modules": len(us),
                            "param_bytes": float(pbytes[us].sum()),
                            "top_modules": [[mu.names[u], float(pbytes[u])] for u in top]})
    return {"format": "device-map", "graph": problem.graph.name, "cluster": problem.cluster.name, "depth": depth,
            "device_map": {mu.names[u]: real[dev[u]] for u in order},
            "cluster_devices": {mu.names[u]: problem.cluster.device_names[dev[u]] for u in order},
            "devices": devices}


TOP_MODULES = 3  # the largest modules a device's summary names


def is_device_map(doc) -> bool:
    """Whether ``doc`` is a module -> device map: ``placer export --format device-map``'s document, or
    accelerate's plain ``{module path: device}`` (devices as strings or GPU indices)."""
    if not isinstance(doc, dict) or not doc:
        return False
    if doc.get("format") == "device-map":
        return True
    return "format" not in doc and all(isinstance(k, str) for k in doc)  # entries checked as they are read


def _cluster_device(cluster, value, module: str, path: str) -> int:
    """The cluster device a map's real device stands for: ``cuda:K`` or ``K`` -> the cluster's K-th
    GPU, ``cpu`` -> its first CPU, a cluster device name -> that device."""
    names = list(cluster.device_names)
    gpus, cpus = cluster.gpus(), cluster.cpus()
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(path, f"module '{module}'", f"is on {str(value)[:40]!r}, not a device",
                         "write a device as 'cuda:K', K (a GPU index) or 'cpu'")
    text = str(value).strip().lower() if not isinstance(value, int) else f"cuda:{value}"
    if text == "cuda":
        text = "cuda:0"
    if text.startswith("cuda:") and text[5:].isdigit():
        k = int(text[5:])
        if k < len(gpus):
            return gpus[k]
        raise InputError(path, f"module '{module}'", f"is on {text}, but cluster '{cluster.name}' has "
                         f"{len(gpus)} GPU(s)", "give a cluster with as many GPUs", kind="cluster-gpus")
    if text == "cpu":
        if cpus:
            return cpus[0]
        raise InputError(path, f"module '{module}'", f"is on the CPU, but cluster '{cluster.name}' has no CPU device",
                         "give a cluster with a CPU, or map the module to a GPU", kind="cluster-cpu")
    if isinstance(value, str) and value in names:
        return names.index(value)
    raise InputError(path, f"module '{module}'", f"is on {str(value)[:40]!r}, which names no device of cluster "
                     f"'{cluster.name}'", f"use cpu, cuda:K (K below {len(gpus)}) or one of {', '.join(names)}")


def placement_from_map(doc, problem: Problem, path: str = "device map") -> np.ndarray:
    """The placement a module -> device map describes on ``problem``: every op of a module unit (its
    forward, backward and update ops, glue joined as in :mod:`placer.grouping.modules`) on the cluster
    device of the map entry holding it. Units are taken at the map's depth (placer's ``depth``, else
    the deepest key); a unit held by no key is refused in one line. Real devices go back to cluster
    devices by placer's own ``cluster_devices`` record when present, else ``cuda:K`` (or ``K``) -> the
    cluster's K-th GPU and ``cpu`` -> its CPU. ``placer export`` then this is the identity on units."""
    from placer.grouping.modules import is_under, levels

    cluster = problem.cluster
    entries = doc.get("device_map") if doc.get("format") == "device-map" else doc
    if not isinstance(entries, dict) or not entries:
        raise InputError(path, "device_map", "is missing or empty", "give placer export's document or a {module: device} map")
    known = doc.get("cluster_devices") if doc.get("format") == "device-map" else None
    names = list(cluster.device_names)
    if isinstance(known, dict) and known and all(v in names for v in known.values()) and set(known) == set(entries):
        target = {k: names.index(v) for k, v in known.items()}
    else:
        target = {k: _cluster_device(cluster, v, k, path) for k, v in entries.items()}
    depth = doc.get("depth") if doc.get("format") == "device-map" else None
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        depth = max([1] + [len(levels(k)) for k in entries])
    mu = units_of(problem, depth, path)
    keys = sorted(target, key=lambda k: -len(levels(k)))  # the deepest key holding a unit wins
    dev = np.empty(mu.n_units, dtype=np.int64)
    for u, name in enumerate(mu.names):
        held = next((k for k in keys if k == "" or is_under(name, k)), None)
        if held is not None:
            dev[u] = target[held]
            continue
        inner = {target[k] for k in keys if k and is_under(k, name)}
        if len(inner) != 1:
            raise InputError(path, f"module '{name}'", f"of graph '{problem.graph.name}' is "
                             f"{'split over several devices' if inner else 'in no entry of the map'}",
                             "give a map from this model's modules (placer export, or accelerate's "
                             "infer_auto_device_map on the same model)")
        dev[u] = inner.pop()
    return dev[mu.op_unit]


def pipeline(problem: Problem, placement, real: list[str], depth: int = DEFAULT_DEPTH, sim_params=None,
             where: str = "placement") -> dict:
    """The ``pipeline`` export: units in forward order cut where the device changes; each stage its
    device, modules, parameter bytes (weights and optimizer state) and its device's simulated peak
    memory; ``split_points``: the first module of every stage after the first, for
    ``torch.distributed.pipelining.pipeline(..., split_spec={name: SplitPoint.BEGINNING})``."""
    from placer.sim import simulate

    mu, dev = unit_devices(problem, placement, depth, where)
    g = problem.graph
    order = dataflow_order(g, mu)
    _check_stages(g, mu, dev, order, problem.cluster.device_names, where)
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


def dataflow_order(g, mu: ModuleUnits) -> list[int]:
    """Units in the order their first computing forward op runs (an op fed by another op: not a
    parameter, buffer or input, which a capture records before any computation), the order a
    traced forward calls them and so the order split points cut; units without one last."""
    n = g.n_ops
    fed = np.diff(g.pred_ptr) > 0
    first = np.full(mu.n_units, n, dtype=np.int64)
    ops = np.flatnonzero((g.role == FORWARD) & ~mu.glue & fed)
    np.minimum.at(first, mu.op_unit[ops], ops)
    rest = mu.forward_order(g)
    rank = np.empty(mu.n_units, dtype=np.int64)
    rank[rest] = np.arange(mu.n_units)
    return [int(u) for u in np.lexsort((rank, first))]


def _check_stages(g, mu: ModuleUnits, dev: np.ndarray, order: list[int], names, where: str) -> None:
    """InputError unless split points express the placement: every device's modules one contiguous
    run in data-flow order (a stage per device, as a pipeline schedule gives each rank one stage), and
    no module feeding one of an earlier stage."""
    stage = np.empty(mu.n_units, dtype=np.int64)
    runs: list[int] = []
    for u in order:
        if not runs or dev[runs[-1]] != dev[u]:
            runs.append(u)
        stage[u] = len(runs) - 1
    fix = "export it as a device map (placer.apply runs any module-level placement), or place contiguous " \
          "stages (param-balanced, or the pipeline objective)"
    seen: dict[int, int] = {}
    for k, u in enumerate(runs):
        d = int(dev[u])
        if d in seen:
            between = runs[seen[d] + 1]
            before = [v for v in order if dev[v] == d and stage[v] < k]
            after = [v for v in order if stage[v] == k]
            tied = [(a, b) for a in before for b in after if mu.tie[a] == mu.tie[b]]
            if tied:
                a, b = tied[0]
                raise InputError(where, f"modules '{mu.names[a]}' and '{mu.names[b]}'", "share a parameter, so "
                                 f"{names[d]} holds both and the modules between them run elsewhere: split points "
                                 "give a pipeline stage one contiguous run of modules", "export it as a device map "
                                 "(placer.apply runs any module-level placement)", kind="pipeline-tie")
            raise InputError(where, f"device {names[d]}", f"holds modules before and after '{mu.names[between]}' "
                             f"(on {names[dev[between]]}): its modules are not contiguous in data-flow order, "
                             "so no split point makes them one pipeline stage", fix, kind="pipeline-order")
        seen[d] = k
    fwd = (g.role[g.edge_src] == FORWARD) & (g.role[g.edge_dst] == FORWARD) & ~mu.glue[g.edge_src] & ~mu.glue[g.edge_dst]
    su, du = mu.op_unit[g.edge_src[fwd]], mu.op_unit[g.edge_dst[fwd]]
    back = np.flatnonzero(stage[su] > stage[du])
    if len(back):
        a, b = int(su[back[0]]), int(du[back[0]])
        raise InputError(where, f"module '{mu.names[a]}'", f"(stage {stage[a]}) feeds '{mu.names[b]}' of an "
                         f"earlier stage ({stage[b]}), so split points cannot express this placement", fix,
                         kind="pipeline-order")
