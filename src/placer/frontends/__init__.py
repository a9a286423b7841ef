"""Ways into an OpGraph: the native JSON format, PipeDream profiles, dnn-partitioning inputs
(and, with the ``torch`` extra, PyTorch capture in :mod:`placer.frontends.torch`)."""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError
from placer.graph import OpGraph


def load_any_graph(path) -> OpGraph:
    """Load a graph in any supported format, recognised by content: native JSON (``format: placer``),
    a dnn-partitioning JSON, or a PipeDream ``graph.txt``."""
    from placer.frontends import dnn_partitioning, native, pipedream
    from placer.io import parse_json, read_input_bytes

    path = str(path)
    if not Path(path).exists():
        raise InputError(path, "file", "does not exist", "check the path")
    raw = read_input_bytes(path)  # only a regular file, never more than the input limit
    if pipedream.is_pipedream_line(raw[:4096].split(b"\n", 1)[0].decode("utf-8", "replace")):
        return pipedream.load_pipedream(path)
    doc = parse_json(raw, path)
    if dnn_partitioning.is_dnn_partitioning(doc):
        return dnn_partitioning.graph_from_doc(doc, path)
    return native.graph_from_doc(doc, path)
