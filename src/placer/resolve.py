"""Turn command-line names into graphs and clusters: a file path or a built-in name."""

from __future__ import annotations

from pathlib import Path

from placer.cluster import DEFAULT_PRESET, PRESETS, Cluster, preset
from placer.errors import InputError
from placer.graph import OpGraph



def default_graph_name() -> str:
    """The graph the README's main job places: the zoo's Inception-V3 training step (captured here
    from the project's own model, no download) when the torch extra is installed, else the
    synthetic demo graph."""
    import importlib.util

    return "inception_v3" if importlib.util.find_spec("torch") is not None else "synthetic"


def resolve_graph(spec: str) -> OpGraph:
    """A graph file in any supported format, or the name of a built-in graph (``placer zoo list``)."""
    from placer.frontends import load_any_graph
    from placer.zoo import BUILTIN

    if Path(spec).exists():
        return load_any_graph(spec)
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if spec.startswith("hf:"):  # a Hugging Face model from its config (placer.frontends.hf)
        from placer.frontends.hf import hf_graph
        return hf_graph(spec)
    if spec.startswith("giph:"):  # a GiPH random task graph (placer.zoo.giph)
        from placer.zoo.giph import graph_from_spec
        return graph_from_spec(spec)
    raise InputError(spec, "graph", "is neither a file nor a built-in graph",
                     did_you_mean(spec, BUILTIN) + f"give a path, hf:NAME or one of {', '.join(BUILTIN)}")


def check_method(name: str, where: str = "method") -> str:
    """``name`` when it is a registered method; else the one-line error, naming the method it most
    likely mistypes."""
    from placer.methods import METHODS

    if name not in METHODS:
        raise InputError(where, f"method '{name}'", "is not a known method",
                         did_you_mean(name, METHODS) + f"use one of {', '.join(sorted(METHODS))}", kind="method")
    return name


def did_you_mean(name: str, choices) -> str:
    """The start of an error's advice: "did you mean X? " for the choice ``name`` most likely
    mistypes (:func:`closest`), else nothing."""
    near = closest(name, choices)
    return f"did you mean {near}? " if near else ""


def closest(name: str, choices) -> str | None:
    """The choice ``name`` most likely mistypes: the one equal to it but for case, '-' and '_', else
    the one spelled most alike (difflib's ratio at least 0.75, no tie), else None."""
    import difflib

    key = {c.lower().replace("-", "").replace("_", ""): c for c in choices}
    typed = name.lower().replace("-", "").replace("_", "")
    if typed in key:
        return key[typed]
    score = {k: difflib.SequenceMatcher(None, typed, k).ratio() for k in key}
    best = max(score.values(), default=0.0)
    top = [k for k, v in score.items() if v == best]
    return key[top[0]] if best >= 0.75 and len(top) == 1 else None  # a tie suggests nothing


def resolve_cluster(spec: str, graph: OpGraph | None = None, graph_spec: str | None = None) -> Cluster:
    """A preset name, a cluster JSON file, ``here`` / ``here:cpus=N`` (this machine, measured once per
    process: :mod:`placer.runtime.detect`), or ``auto``: the cluster a dnn-partitioning graph file
    describes, else the default preset."""
    if spec == "auto":
        if graph is not None and graph.meta.get("source") == "dnn-partitioning" and graph_spec and Path(graph_spec).exists():
            from placer.frontends.dnn_partitioning import cluster_for
            return cluster_for(graph_spec)
        return preset(DEFAULT_PRESET)
    if spec.lower() in PRESETS:
        return preset(spec)
    if spec == "here" or spec.startswith("here:"):
        return here_cluster(spec)
    if spec.startswith("giph-net:"):  # a GiPH random device network (placer.zoo.giph)
        from placer.zoo.giph import network_from_spec
        return network_from_spec(spec)
    if Path(spec).exists():
        from placer.frontends.native import load_cluster
        return load_cluster(spec)
    raise InputError("cluster", f"preset '{spec}'", "is not a known cluster preset or file",
                     did_you_mean(spec, PRESETS) + f"use one of {', '.join(PRESETS)}, here, here:cpus=N "
                     "or a cluster JSON file", kind="cluster")


def here_cluster(spec: str) -> Cluster:
    """``here`` (this machine, the CPU as one device) or ``here:cpus=N`` (N single-thread CPU
    devices): the spec checked first, then detected once per process (needs the torch extra)."""
    import importlib.util

    from placer.runtime.detect import detected, parse_here

    cpus = parse_here(spec)
    if importlib.util.find_spec("torch") is None:
        raise InputError("cluster", f"'{spec}'", "measures this machine with torch, which is not installed",
                         "pip install 'placer[torch]', or give a preset or a cluster file", kind="cluster")
    return detected(cpus)
