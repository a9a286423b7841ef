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

    path = str(path)
    if not Path(path).exists():
        raise InputError(path, "file", "does not exist", "check the path")
    if pipedream.is_pipedream(path):
        return pipedream.load_pipedream(path)
    doc = native.read_json(path)
    if dnn_partitioning.is_dnn_partitioning(doc):
        return dnn_partitioning.graph_from_doc(doc, path)
    return native.graph_from_doc(doc, path)
