"""Importer for the NeurIPS 2020 dnn-partitioning inputs (Tarnawski et al., msr-fiddle/dnn-partitioning).

A graph file holds ``maxSizePerFPGA`` (bytes per accelerator), ``maxFPGAs``, ``maxCPUs``, ``nodes``
(id, name, supportedOnFpga, cpuLatency, fpgaLatency, isBackwardNode, optional colorClass, size) and
``edges`` (sourceId, destId, cost, size). Latencies and edge costs are milliseconds (edge cost =
size / 2 MiB per ms, i.e. a 2.1 GB/s accelerator<->CPU link); they become microseconds under the
cost keys ``gpu`` ("FPGA" there means any accelerator) and ``cpu``. A node's ``size`` (bytes of
memory it needs) becomes its persistent ``param_bytes``; colorClass becomes the colocation group;
an op not supportedOnFpga gets ``inf`` on accelerators.

The file's semantics are kept for the published objectives (:mod:`placer.objectives`, docs/format.md):
a node's ``size`` is its whole footprint, so an accelerator's memory use is the sum of ``size`` of
its ops (no activation buffers on top); ``maxFPGAs`` is a limit (a split may use fewer); each node's
edge ``cost`` (one per source node) is kept as ``meta['out_cost_us']``, the transfer time the
latency and throughput models charge. ``meta['node_ids']`` (in the file's node order) and
``meta['edges_listed']`` (node-id pairs in the file's edge order) keep the listing order, which their
greedy's visit order depends on (``published-greedy``). The event simulator (``--objective sim``) still holds each
output buffer and received copy on top of ``size``.

:func:`cluster_for` builds the matching cluster (maxFPGAs accelerators then maxCPUs CPUs, the link
bandwidth implied by the edge costs) and :func:`load_expert` reads a human-expert split file.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import median

import numpy as np

from placer.cluster import Cluster, Device, make_cluster
from placer.errors import InputError
from placer.io import read_json
from placer.graph import BACKWARD, FORWARD, OpGraph

CPU_MEMORY_BYTES = float(2**40)  # the inputs give no CPU limit: 1 TiB, effectively unbounded


def is_dnn_partitioning(doc) -> bool:
    return isinstance(doc, dict) and "nodes" in doc and "maxFPGAs" in doc


def _check(doc, path):
    if not is_dnn_partitioning(doc):
        raise InputError(path, "top level", "is not a dnn-partitioning graph (no nodes / maxFPGAs)",
                         "give a file from dnn-partitioning's *-inputs folders")
    for key in ("nodes", "edges"):
        items = doc.get(key, [])
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise InputError(path, key, "is not a list of objects", "give a file from dnn-partitioning's *-inputs folders")


def graph_from_doc(doc, path: str, name: str | None = None) -> OpGraph:
    _check(doc, path)
    nodes, edges = doc["nodes"], doc.get("edges", [])
    names_raw = [str(n.get("name", n.get("id"))) for n in nodes]
    unique = len(set(names_raw)) == len(names_raw)
    names, gpu, cpu, size, role, coloc, mods = [], [], [], [], [], [], []
    id_to_name = {}
    for k, n in enumerate(nodes):
        try:
            nid = int(n["id"])
            cl, fl = float(n["cpuLatency"]), float(n["fpgaLatency"])
        except (KeyError, TypeError, ValueError):
            raise InputError(path, f"node #{k}", "lacks a numeric id, cpuLatency or fpgaLatency", "fix the node") from None
        nm = names_raw[k] if unique else f"{names_raw[k]}#{nid}"
        if nid in id_to_name:
            raise InputError(path, f"node id {nid}", "is duplicated", "make node ids unique")
        id_to_name[nid] = nm
        names.append(nm)
        mods.append(names_raw[k])
        cpu.append(cl * 1000.0)
        gpu.append(fl * 1000.0 if n.get("supportedOnFpga", True) else math.inf)
        size.append(float(n.get("size", 0.0)))
        role.append(BACKWARD if n.get("isBackwardNode") else FORWARD)
        coloc.append(int(n["colorClass"]) if n.get("colorClass") is not None else -1)
    gedges, out_cost = [], {}
    for k, e in enumerate(edges):
        try:
            s, d = int(e["sourceId"]), int(e["destId"])
        except (KeyError, TypeError, ValueError):
            raise InputError(path, f"edge #{k}", "lacks sourceId / destId", "fix the edge") from None
        if s not in id_to_name or d not in id_to_name:
            raise InputError(path, f"edge #{k} ({s} -> {d})", "names a node id that does not exist", "fix the edge")
        gedges.append((id_to_name[s], id_to_name[d], float(e.get("size", 0.0))))
        try:
            c = float(e.get("cost", 0.0))
        except (TypeError, ValueError):
            raise InputError(path, f"edge #{k} ({s} -> {d})", "has a cost that is not a number", "fix the edge") from None
        if not math.isfinite(c) or c < 0:
            raise InputError(path, f"edge #{k} ({s} -> {d})", f"has cost {c}", "give a finite cost >= 0")
        out_cost[id_to_name[s]] = max(out_cost.get(id_to_name[s], 0.0), c * 1000.0)
    out = np.zeros(len(names))
    idx = {nm: i for i, nm in enumerate(names)}
    for s, d, b in gedges:
        out[idx[s]] = max(out[idx[s]], b)
    meta_split = {}
    id_to_op = {int(n["id"]): k for k, n in enumerate(nodes)}
    split = expert_split_for(path, id_to_op, int(doc["maxFPGAs"]), int(doc.get("maxCPUs", 0)))
    if split is not None:  # the published human-expert split, for the ``expert`` method
        meta_split["expert_split"] = split
    return OpGraph.build(names, gedges, name=name or Path(path).stem, op_types=["op"] * len(names), modules=mods,
                         compute_us={"gpu": gpu, "cpu": cpu}, param_bytes=size, output_bytes=out, role=role,
                         colocation=coloc,
                         meta={"source": "dnn-partitioning", "file": Path(path).name,
                               "costs": "gpu = fpgaLatency (accelerator), cpu = cpuLatency; ms -> us",
                               "node_ids": {nm: int(n["id"]) for nm, n in zip(names, nodes)},
                               "edges_listed": [[int(e["sourceId"]), int(e["destId"])] for e in edges],
                               "out_cost_us": {nm: out_cost.get(nm, 0.0) for nm in names},
                               "memory": "size = the node's whole footprint; per accelerator at most maxSizePerFPGA",
                               "max_fpgas": int(doc["maxFPGAs"]), "max_cpus": int(doc.get("maxCPUs", 0)),
                               "max_size_per_fpga": float(doc.get("maxSizePerFPGA", 0.0)), **meta_split},
                         source=path)


def cluster_from_doc(doc, path: str) -> Cluster:
    _check(doc, path)
    rates = [float(e["size"]) / (float(e["cost"]) * 1000.0) for e in doc.get("edges", [])
             if float(e.get("cost", 0)) > 0 and float(e.get("size", 0)) > 0]
    bw = median(rates) if rates else 2**21 / 1000.0
    mem = float(doc["maxSizePerFPGA"])
    devs = [Device(f"acc:{i}", "gpu", "accelerator", mem) for i in range(int(doc["maxFPGAs"]))]
    devs += [Device(f"cpu:{i}", "cpu", "cpu", CPU_MEMORY_BYTES) for i in range(int(doc.get("maxCPUs", 0)))]
    return make_cluster(f"{Path(path).stem}-cluster", devs, bw, 0.0,
                        meta={"source": "dnn-partitioning", "bandwidth": "median size/cost over the file's edges"},
                        source=path)


def load_dnn_partitioning(path, name: str | None = None) -> OpGraph:
    return graph_from_doc(read_json(path), str(path), name)


def cluster_for(path) -> Cluster:
    """The cluster a dnn-partitioning input describes."""
    return cluster_from_doc(read_json(path), str(path))


def _expert_folders(path) -> list[Path]:
    """``human-experts`` beside the ``*-inputs`` folder holding ``path`` (the repository's layout),
    then ``$PLACER_SHARED_GRAPHS/dnn-partitioning/human-experts``."""
    import os

    p = Path(str(path)).resolve()
    where = [p.parents[k] / "human-experts" for k in (1, 2) if len(p.parents) > k]
    env = os.environ.get("PLACER_SHARED_GRAPHS")
    if env:
        where.append(Path(env) / "dnn-partitioning" / "human-experts")
    return [d for d in where if d.is_dir()]


def expert_split_file(path) -> Path | None:
    """The file named like the input's published human-expert split (``human-experts/<stem>_expert.json``),
    if there is one. A name is no proof of a match: the repository's operator and layer graphs of
    one model share a stem (``OperatorGraphs/gnmt_training.json``, ``LayerGraphs/gnmt_training.json``)
    while ``gnmt_training_expert.json`` splits the layer graph only; :func:`expert_split_for` pairs
    by content."""
    for d in _expert_folders(path):
        f = d / f"{Path(str(path)).stem}_expert.json"
        if f.is_file():
            return f
    return None


def _split_ids(doc) -> list[int] | None:
    """Every node id a split document names (each group's ``nodes``), or None if it is not a split."""
    if not isinstance(doc, dict) or not isinstance(doc.get("fpgas"), list):
        return None
    ids = []
    for kind in ("fpgas", "cpus"):
        groups = doc.get(kind, [])
        if not isinstance(groups, list):
            return None
        for grp in groups:
            nodes = grp.get("nodes", []) if isinstance(grp, dict) else None
            if not isinstance(nodes, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in nodes):
                return None
            ids.extend(nodes)
    return ids


def expert_split_for(path, id_to_op: dict[int, int], max_fpgas: int, max_cpus: int) -> dict | None:
    """The published human-expert split of a dnn-partitioning input, paired by content: the first
    split in the ``human-experts`` folders (the file named after the input first, then the others
    in name order) that assigns every node id of the graph exactly once, names no other id and uses
    at most the input's ``maxFPGAs`` accelerators and ``maxCPUs`` CPUs. None when no split matches
    (the ``expert`` method then falls back to its rules), so a split of another graph sharing the
    file's stem is never attached. A file that is not a readable split is skipped."""
    files, seen = [], set()
    named = expert_split_file(path)
    for f in ([named] if named else []) + [f for d in _expert_folders(path) for f in sorted(d.glob("*.json"))]:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            files.append(f)
    want = sorted(id_to_op)
    for f in files:
        try:
            doc = read_json(f)
        except (InputError, OSError):
            continue
        ids = _split_ids(doc)
        if ids is None or sorted(ids) != want:
            continue
        if (sum(1 for g in doc["fpgas"] if g.get("nodes")) > max_fpgas
                or sum(1 for g in doc.get("cpus", []) if g.get("nodes")) > max_cpus):
            continue
        return read_expert_split(f, id_to_op)
    return None


def read_expert_split(path, id_to_op: dict[int, int]) -> dict:
    """A human-expert split file (``{"fpgas": [{"nodes": [ids]}, ...], "cpus": [...]}``) as op
    indices per accelerator and per CPU: ``{"file", "accelerators": [[ops]...], "cpus": [[ops]...]}``
    (what the importer attaches to ``graph.meta['expert_split']``; the ``expert`` method maps the
    k-th accelerator to the cluster's k-th GPU)."""
    path = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or "fpgas" not in doc:
        raise InputError(path, "top level", "is not an expert split (no 'fpgas')", "give a human-experts/*.json file")
    out = {"file": Path(path).name, "accelerators": [], "cpus": []}
    seen = set()
    for kind, key in (("fpgas", "accelerators"), ("cpus", "cpus")):
        for k, grp in enumerate(doc.get(kind, [])):
            ops = []
            for nid in grp.get("nodes", []):
                if int(nid) not in id_to_op:
                    raise InputError(path, f"node {nid}", "is not in the graph", "pair the split with its graph file")
                ops.append(int(id_to_op[int(nid)]))
            seen.update(ops)
            out[key].append(sorted(ops))
    if len(seen) != len(id_to_op):
        missing = sorted(set(id_to_op.values()) - seen)[0]
        raise InputError(path, f"op #{missing}", "is not assigned by the split", "pair the split with its graph")
    return out


def load_expert(path, graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """A human-expert split (``{"fpgas": [{"nodes": [ids]}, ...], "cpus": [...]}``) as device indices
    on ``cluster`` (accelerators first, then CPUs, as :func:`cluster_from_doc` orders them)."""
    path = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or "fpgas" not in doc:
        raise InputError(path, "top level", "is not an expert split (no 'fpgas')", "give a human-experts/*.json file")
    ids = graph.meta.get("node_ids")
    if ids is None:
        raise InputError(path, "graph", "was not imported from a dnn-partitioning file", "import the matching graph")
    n_acc = sum(1 for d in cluster.devices if d.kind == "gpu")
    index = {nm: i for i, nm in enumerate(graph.op_names)}
    pos = {int(nid): index[nm] for nm, nid in ids.items()}  # node id -> op index
    out = np.full(graph.n_ops, -1, dtype=np.int64)
    for kind, base in (("fpgas", 0), ("cpus", n_acc)):
        for k, grp in enumerate(doc.get(kind, [])):
            dev = base + k
            if dev >= cluster.n_devices or (kind == "fpgas" and k >= n_acc):
                raise InputError(path, f"{kind}[{k}]", f"needs device {dev} but the cluster has {cluster.n_devices}",
                                 "use the cluster of the matching graph")
            for nid in grp.get("nodes", []):
                if int(nid) not in pos:
                    raise InputError(path, f"node {nid}", "is not in the graph", "pair the split with its graph file")
                out[pos[int(nid)]] = dev
    if (out < 0).any():
        i = int(np.flatnonzero(out < 0)[0])
        raise InputError(path, f"op '{graph.op_names[i]}'", "is not assigned by the split", "pair the split with its graph")
    return out
