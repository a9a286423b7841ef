"""The native file format: versioned JSON (optionally gzip) for graphs, clusters and placements.

Documented in ``docs/format.md`` and described by ``src/placer/schema/placer.schema.json``. Every
file is an object with ``"format": "placer"``, ``"version": 1`` and ``"kind"`` one of ``graph``,
``cluster``, ``placement``. Loading never executes anything (no pickle); writing is deterministic,
so graph -> JSON -> graph -> JSON is bit-for-bit identical.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from placer.cluster import COMM_MODELS, Cluster, Device, make_cluster
from placer.errors import InputError, kind_of
from placer.io import dumps, read_json, write_text_atomic
from placer.graph import MAX_VALUE, ROLE_NAMES, OpGraph

FORMAT, VERSION = "placer", 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "placer.schema.json"


def _header(doc: Any, path: str, kind: str) -> None:
    if not isinstance(doc, dict):
        raise InputError(path, "top level", "is not a JSON object", f"give a placer {kind} file")
    if doc.get("format") == "device-map" or (kind == "placement" and "format" not in doc and doc):
        raise InputError(path, "top level", f"is a module -> device map, not a placer {kind} file",
                         "read it with the graph and cluster it maps (placer.export.placement_from_map)",
                         kind="device-map")
    if doc.get("format") != FORMAT:
        raise InputError(path, "format", f"is {doc.get('format')!r}, not 'placer'",
                         "convert it first with `placer convert` (PipeDream and dnn-partitioning files are imported)")
    if doc.get("version") != VERSION:
        raise InputError(path, "version", f"{doc.get('version')!r} is not supported", f"use version {VERSION}")
    if doc.get("kind") != kind:
        raise InputError(path, "kind", f"is {doc.get('kind')!r}, expected {kind!r}", f"give a {kind} file")


def _num(x: float) -> Any:
    """Integral floats as JSON integers (bytes, FLOPs), others as the shortest round-trip repr."""
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


# ---------------------------------------------------------------------- graphs
def graph_to_doc(g: OpGraph) -> dict:
    ops = []
    for i in range(g.n_ops):
        op: dict[str, Any] = {"name": g.op_names[i], "type": g.op_types[i]}
        if g.modules[i]:
            op["module"] = g.modules[i]
        op["role"] = ROLE_NAMES[g.role[i]]
        if g.compute_us:
            op["compute_us"] = {k: (None if math.isinf(v[i]) else _num(v[i])) for k, v in g.compute_us.items()}
        for key in ("flops", "bytes_accessed", "output_bytes", "param_bytes", "temp_bytes"):
            v = getattr(g, key)[i]
            if v:
                op[key] = _num(v)
        if g.colocation[i] >= 0:
            op["colocation"] = int(g.colocation[i])
        if g.mirror[i] >= 0:
            op["mirror"] = g.op_names[g.mirror[i]]
        ops.append(op)
    edges = [[g.op_names[s], g.op_names[d], _num(b)] for s, d, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)]
    return {"format": FORMAT, "version": VERSION, "kind": "graph", "name": g.name, "meta": dict(g.meta),
            "ops": ops, "edges": edges}


def graph_from_doc(doc: Any, path: str = "<graph>") -> OpGraph:
    _header(doc, path, "graph")
    ops = doc.get("ops")
    if not isinstance(ops, list):
        raise InputError(path, "ops", "is missing or not a list", "give a list of op objects")
    meta = doc.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise InputError(path, "meta", f"is {kind_of(meta)}, not an object", "give an object (or leave it out)")
    if doc.get("name") is not None and not isinstance(doc.get("name"), str):
        raise InputError(path, "name", "is not a string", "give the graph a string name")
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or not isinstance(op.get("name"), str):
            raise InputError(path, f"op #{i}", "is not an object with a string 'name'", "give every op a name")
        for key, kinds, want in (("compute_us", dict, "an object mapping device kinds to microseconds"),
                                 ("mirror", str, "the name of the forward op it mirrors"),
                                 ("type", str, "a string"), ("module", str, "a string"), ("role", str, "a string")):
            v = op.get(key)
            if v is not None and not isinstance(v, kinds):
                raise InputError(path, f"op '{op['name']}' {key}", f"is {kind_of(v)}", f"give {want}")
    names, types, modules, roles, mirrors, coloc = [], [], [], [], [], []
    fields = {k: [] for k in ("flops", "bytes_accessed", "output_bytes", "param_bytes", "temp_bytes")}
    keys = sorted({k for op in ops if isinstance(op, dict) for k in (op.get("compute_us") or {})})
    costs = {k: [] for k in keys}
    for op in ops:
        nm = op["name"]
        names.append(nm)
        types.append(str(op.get("type", "op")))
        modules.append(str(op.get("module", "")))
        role = op.get("role", "forward")
        if role not in ROLE_NAMES:
            raise InputError(path, f"op '{nm}' role", f"is {role!r}", f"use one of {', '.join(ROLE_NAMES)}")
        roles.append(ROLE_NAMES.index(role))
        mirrors.append(op.get("mirror"))
        c = op.get("colocation", -1)
        if not isinstance(c, int) or isinstance(c, bool):
            raise InputError(path, f"op '{nm}' colocation", f"is {c!r}", "use an integer group id")
        coloc.append(c)
        for k in fields:
            fields[k].append(_float(op.get(k, 0), path, f"op '{nm}' {k}"))
        cu = op.get("compute_us") or {}
        for k in keys:
            v = cu.get(k, None)
            costs[k].append(math.inf if v is None else _float(v, path, f"op '{nm}' compute_us[{k}]"))
    index = {nm: i for i, nm in enumerate(names)}
    mir = []
    for nm, m in zip(names, mirrors):
        if m is None:
            mir.append(-1)
        elif m in index:
            mir.append(index[m])
        else:
            raise InputError(path, f"op '{nm}' mirror", f"names unknown op {m!r}", "point it at an op of the graph")
    edges = doc.get("edges", [])
    if not isinstance(edges, list):
        raise InputError(path, "edges", "is not a list", "give a list of [src, dst, bytes]")
    for k, e in enumerate(edges):
        if not (isinstance(e, list) and len(e) == 3):
            raise InputError(path, f"edge #{k}", "is not [src, dst, bytes]", "give src and dst op names and bytes")
        if not all(isinstance(x, str) for x in e[:2]):
            raise InputError(path, f"edge #{k}", "does not name its ops with strings", "give src and dst op names")
        _float(e[2], path, f"edge #{k} ({e[0]} -> {e[1]}) bytes")
    return OpGraph.build(names, edges, name=str(doc.get("name", Path(path).stem)), op_types=types, modules=modules,
                         compute_us=costs, role=roles, mirror=mir, colocation=coloc,
                         meta=meta or {}, source=path, **fields)


def _float(v: Any, path: str, item: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(path, item, f"is {v!r}, not a number", "use a non-negative number")
    try:
        x = float(v)
    except OverflowError:
        x = math.inf
    if abs(x) > MAX_VALUE:
        shown = f"{str(v)[:12]}... ({len(str(v))} digits)" if isinstance(v, int) else repr(v)
        raise InputError(path, item, f"is {shown}, larger than {MAX_VALUE:.0e}", "use a realistic number (units are in the name)")
    return x


# ---------------------------------------------------------------------- clusters
def cluster_to_doc(c: Cluster) -> dict:
    D = c.n_devices
    off = [(a, b) for a in range(D) for b in range(D) if a != b]
    pairs_bw = [(c.bandwidth_bytes_per_us[a, b], c.latency_us[a, b]) for a, b in off]
    default = max(set(pairs_bw), key=pairs_bw.count) if pairs_bw else (1.0, 0.0)
    pairs = [{"src": c.devices[a].name, "dst": c.devices[b].name, "bandwidth_bytes_per_us": _num(w), "latency_us": _num(l)}
             for (a, b), (w, l) in zip(off, pairs_bw) if (w, l) != default]
    meta = dict(c.meta)
    comm = meta.pop("comm_model", None)  # the simulator fields are top-level in the file
    shared = meta.pop("shared_links", None)
    links = {"default": {"bandwidth_bytes_per_us": _num(default[0]), "latency_us": _num(default[1])}, "pairs": pairs}
    if shared:
        links["shared"] = {str(k): [list(p) for p in v] for k, v in shared.items()}
    doc = {
        "format": FORMAT, "version": VERSION, "kind": "cluster", "name": c.name, "meta": meta,
        "devices": [{"name": d.name, "kind": d.kind, "model": d.model, "memory_bytes": _num(d.memory_bytes),
                     "peak_flops_per_us": _num(d.peak_flops_per_us), "mem_bw_bytes_per_us": _num(d.mem_bw_bytes_per_us),
                     "launch_us": _num(d.launch_us)} for d in c.devices],
        "links": links,
    }
    if comm is not None:
        doc["comm_model"] = comm
    return doc


def cluster_from_doc(doc: Any, path: str = "<cluster>") -> Cluster:
    _header(doc, path, "cluster")
    devs = doc.get("devices")
    if not isinstance(devs, list) or not devs:
        raise InputError(path, "devices", "is missing or empty", "list at least one device")
    devices = []
    for i, d in enumerate(devs):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise InputError(path, f"device #{i}", "is not an object with a string 'name'", "name every device")
        kind = d.get("kind", "gpu")
        if kind not in ("gpu", "cpu"):
            raise InputError(path, f"device '{d['name']}' kind", f"is {kind!r}", "use 'gpu' or 'cpu'")
        if "memory_bytes" not in d:
            raise InputError(path, f"device '{d['name']}'", "has no memory_bytes", "give its memory capacity in bytes")
        devices.append(Device(d["name"], kind, str(d.get("model", kind)).lower(),
                              _float(d["memory_bytes"], path, f"device '{d['name']}' memory_bytes"),
                              *(_float(d.get(k, 0), path, f"device '{d['name']}' {k}")
                                for k in ("peak_flops_per_us", "mem_bw_bytes_per_us", "launch_us"))))
    links = doc.get("links") or {}
    if not isinstance(links, dict):
        raise InputError(path, "links", f"is {kind_of(links)}, not an object", 'give {"default": {...}, "pairs": [...]}')
    default = links.get("default") or {}
    if not isinstance(default, dict):
        raise InputError(path, "links.default", "is not an object", "give bandwidth_bytes_per_us and latency_us")
    if not isinstance(links.get("pairs") or [], list):
        raise InputError(path, "links.pairs", "is not a list", "give a list of {src, dst, bandwidth_bytes_per_us, latency_us}")
    meta = doc.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise InputError(path, "meta", f"is {kind_of(meta)}, not an object", "give an object (or leave it out)")
    names = [d.name for d in devices]
    pairs = {}
    for k, pr in enumerate(links.get("pairs") or []):
        if not isinstance(pr, dict):
            raise InputError(path, f"link #{k}", "is not an object", "give src, dst, bandwidth_bytes_per_us, latency_us")
        try:
            a, b = names.index(pr["src"]), names.index(pr["dst"])
        except (KeyError, ValueError, TypeError):
            raise InputError(path, f"link #{k}", "names a device the cluster does not have", "use device names") from None
        pairs[(a, b)] = (_float(pr.get("bandwidth_bytes_per_us", default.get("bandwidth_bytes_per_us", 0)), path, f"link #{k}"),
                         _float(pr.get("latency_us", default.get("latency_us", 0)), path, f"link #{k}"))
    bw = _float(default.get("bandwidth_bytes_per_us", 1e4), path, "links.default.bandwidth_bytes_per_us")
    lat = _float(default.get("latency_us", 0.0), path, "links.default.latency_us")
    meta = dict(doc.get("meta") or {})
    meta.update(_sim_fields(doc, links, names, path))
    return make_cluster(str(doc.get("name", Path(path).stem)), devices, bw, lat, pairs, meta, source=path)


def _sim_fields(doc: dict, links: dict, names: list[str], path: str) -> dict:
    """The cluster's simulator fields, checked: ``comm_model`` (top level) and ``links.shared``
    (named groups of directed links that share one resource in the ``link`` model)."""
    out: dict = {}
    comm = doc.get("comm_model", (doc.get("meta") or {}).get("comm_model"))
    if comm is not None:
        if comm not in COMM_MODELS:
            raise InputError(path, "comm_model", f"is {str(comm)[:40]!r}", f"use one of {', '.join(COMM_MODELS)}")
        out["comm_model"] = comm
    shared = links.get("shared")
    if shared is None:
        return out
    if not isinstance(shared, dict):
        raise InputError(path, "links.shared", f"is {kind_of(shared)}, not an object",
                         'give {"group name": [["src device", "dst device"], ...]}')
    seen: dict = {}
    groups = {}
    for name, pairs in shared.items():
        if not isinstance(pairs, list) or not pairs:
            raise InputError(path, f"links.shared.{str(name)[:40]}", "is not a non-empty list of [src, dst] pairs",
                             'give [["src device", "dst device"], ...]')
        for k, pr in enumerate(pairs):
            ok = isinstance(pr, list) and len(pr) == 2 and all(isinstance(x, str) and x in names for x in pr)
            if not ok or pr[0] == pr[1]:
                raise InputError(path, f"links.shared.{str(name)[:40]} #{k}", "is not a [src, dst] pair of two devices "
                                 "of the cluster", "name two different devices of the cluster")
            if tuple(pr) in seen:
                raise InputError(path, f"links.shared.{str(name)[:40]} #{k}", f"link {pr[0]} -> {pr[1]} is already in "
                                 f"group {seen[tuple(pr)]!r}", "put each link in at most one group")
            seen[tuple(pr)] = str(name)
        groups[str(name)] = [list(p) for p in pairs]
    out["shared_links"] = groups
    return out


# ---------------------------------------------------------------------- placements
def placement_to_doc(graph: OpGraph, cluster: Cluster, devices: np.ndarray, result: dict | None = None) -> dict:
    doc = {"format": FORMAT, "version": VERSION, "kind": "placement", "graph": graph.name, "cluster": cluster.name,
           "devices": list(cluster.device_names),
           "placement": {graph.op_names[i]: cluster.device_names[int(d)] for i, d in enumerate(devices)}}
    if result is not None:
        doc["result"] = result
    return doc


def placement_from_doc(doc: Any, graph: OpGraph, cluster: Cluster, path: str = "<placement>") -> np.ndarray:
    """Device indices per op; the placement maps op names to device names (or indices)."""
    _header(doc, path, "placement")
    mapping = doc.get("placement")
    names = list(cluster.device_names)
    if isinstance(mapping, list):
        if len(mapping) != graph.n_ops:
            raise InputError(path, "placement", f"has {len(mapping)} entries for {graph.n_ops} ops",
                             "give one device per op (or map op names to devices)")
        items = list(zip(graph.op_names, mapping))
    elif isinstance(mapping, dict):
        missing = [nm for nm in graph.op_names if nm not in mapping]
        if missing:
            raise InputError(path, f"op '{missing[0]}'", f"has no device ({len(missing)} ops missing)", "place every op")
        extra = [nm for nm in mapping if nm not in set(graph.op_names)]
        if extra:
            raise InputError(path, f"op '{extra[0]}'", "is not in the graph", "use the op names of the graph")
        items = [(nm, mapping[nm]) for nm in graph.op_names]
    else:
        raise InputError(path, "placement", "is missing", "map op names to device names")
    out = np.empty(graph.n_ops, dtype=np.int64)
    for i, (nm, d) in enumerate(items):
        if isinstance(d, str) and d in names:
            out[i] = names.index(d)
        elif isinstance(d, int) and not isinstance(d, bool) and 0 <= d < len(names):
            out[i] = d
        else:
            raise InputError(path, f"op '{nm}'", f"device {d!r} is not in cluster '{cluster.name}'",
                             f"use one of {', '.join(names)}")
    return out


# ---------------------------------------------------------------------- convenience
def load_graph(path) -> OpGraph:
    return graph_from_doc(read_json(path), str(path))


def save_graph(g: OpGraph, path) -> None:
    write_text_atomic(path, dumps(graph_to_doc(g)))


def load_cluster(path) -> Cluster:
    return cluster_from_doc(read_json(path), str(path))


def save_cluster(c: Cluster, path) -> None:
    write_text_atomic(path, dumps(cluster_to_doc(c)))


def load_placement(path, graph: OpGraph, cluster: Cluster) -> np.ndarray:
    return placement_from_doc(read_json(path), graph, cluster, str(path))


def save_placement(path, graph: OpGraph, cluster: Cluster, devices, result: dict | None = None) -> None:
    write_text_atomic(path, dumps(placement_to_doc(graph, cluster, np.asarray(devices), result)))
