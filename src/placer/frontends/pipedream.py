"""Importer for PipeDream profiler output (``graph.txt``, msr-fiddle/pipedream).

Each line ``nodeN -- <layer> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
activation_size=<bytes>, parameter_size=<bytes>`` is one layer measured on one GPU; tab-indented
``nodeA -- nodeB`` lines are the forward edges. A training step is built from it:

* a forward op ``fwd/nodeN`` (forward time, output = activation bytes, parameters owned);
* a backward op ``bwd/nodeN`` mirroring it (backward time, output = gradient of the layer's input);
* forward edges ``fwd/a -> fwd/b`` carrying a's activation; backward edges ``bwd/b -> bwd/a``
  (the gradient of a's output, same size) and ``fwd/a -> bwd/a`` (the activation stashed for backward).

Times become microseconds under the cost key ``gpu`` (the profile is of one GPU; which GPU is not in
the file). ``activation_size`` given as a list (``[a; b; c]``, several outputs) is summed.
"""

from __future__ import annotations

import re
from pathlib import Path

from placer.errors import InputError
from placer.graph import BACKWARD, FORWARD, OpGraph

_NODE = re.compile(r"^(node\d+) -- (.*) -- (forward_compute_time=.*)$")
_EDGE = re.compile(r"^\s+(node\d+) -- (node\d+)\s*$")


def _size(text: str, path: str, item: str) -> float:
    text = text.strip()
    try:
        if text.startswith("["):
            return float(sum(float(x) for x in text.strip("[]").split(";") if x.strip()))
        return float(text)
    except ValueError:
        raise InputError(path, item, f"size {text!r} is not a number", "fix the profile line") from None


def is_pipedream_line(line: str) -> bool:
    """Whether the first line of a file is a PipeDream node line."""
    return bool(_NODE.match(line.rstrip("\r\n")))


def load_pipedream(path, name: str | None = None) -> OpGraph:
    path = str(path)
    from placer.io import read_input_bytes

    try:
        lines = read_input_bytes(path).decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(path, "file", "is not UTF-8 text", "give a PipeDream graph.txt") from None
    nodes: dict[str, dict] = {}
    edges: list[tuple[str, str]] = []
    for ln, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = _EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
            continue
        m = _NODE.match(line)
        if not m:
            raise InputError(path, f"line {ln}", "is neither a node nor an edge line", "give a PipeDream graph.txt")
        nid, desc, attrs = m.groups()
        kv = {}
        for part in re.split(r",\s*(?=\w+=)", attrs):
            k, _, v = part.partition("=")
            kv[k.strip()] = v
        try:
            fwd, bwd = float(kv["forward_compute_time"]), float(kv["backward_compute_time"])
        except (KeyError, ValueError):
            raise InputError(path, f"line {ln} ({nid})", "has no valid forward/backward_compute_time", "fix the profile line") from None
        nodes[nid] = dict(desc=desc.strip(), fwd=fwd, bwd=bwd,
                          act=_size(kv.get("activation_size", "0"), path, f"line {ln} ({nid})"),
                          param=_size(kv.get("parameter_size", "0"), path, f"line {ln} ({nid})"))
    if not nodes:
        raise InputError(path, "file", "has no node lines", "give a PipeDream graph.txt")
    for a, b in edges:
        for x in (a, b):
            if x not in nodes:
                raise InputError(path, f"edge {a} -- {b}", f"{x} is not a node of the profile", "add the node or drop the edge")
    ids = list(nodes)
    names, types, modules, cost, out, par, role, mirror, gedges = [], [], [], [], [], [], [], [], []
    for nid in ids:
        nd = nodes[nid]
        names.append(f"fwd/{nid}"); types.append(nd["desc"].split("(")[0].strip() or "layer"); modules.append(nid)
        cost.append(nd["fwd"] * 1000.0); out.append(nd["act"]); par.append(nd["param"]); role.append(FORWARD); mirror.append(-1)
    inputs_of: dict[str, list[str]] = {nid: [] for nid in ids}
    for a, b in edges:
        inputs_of[b].append(a)
    for k, nid in enumerate(ids):
        nd = nodes[nid]
        grad_in = sum(nodes[a]["act"] for a in inputs_of[nid])
        names.append(f"bwd/{nid}"); types.append(types[k] + "Backward"); modules.append(nid)
        cost.append(nd["bwd"] * 1000.0); out.append(grad_in); par.append(0.0); role.append(BACKWARD); mirror.append(k)
    for a, b in edges:
        gedges.append((f"fwd/{a}", f"fwd/{b}", nodes[a]["act"]))
        gedges.append((f"bwd/{b}", f"bwd/{a}", nodes[a]["act"]))
    for nid in ids:
        gedges.append((f"fwd/{nid}", f"bwd/{nid}", nodes[nid]["act"]))
    return OpGraph.build(names, gedges, name=name or Path(path).stem, op_types=types, modules=modules,
                         compute_us={"gpu": cost}, output_bytes=out, param_bytes=par, role=role, mirror=mirror,
                         meta={"source": "pipedream", "file": Path(path).name,
                               "costs": "gpu: measured on one GPU by the PipeDream profiler (ms -> us)"},
                         source=path)
