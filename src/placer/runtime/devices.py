"""Which real device (``cpu``, ``cuda:k``) each cluster device runs on.

The stated rule, unless ``--map`` says otherwise: the i-th GPU of the cluster (in the cluster's
device order) runs on ``cuda:i`` when torch sees that many GPUs, otherwise on the CPU; every CPU of
the cluster runs on ``cpu``. On a machine without GPUs every device therefore maps to the CPU.
``--map gpu:0=cuda:0,cpu:0=cpu`` overrides single entries; the rest follow the rule.
"""

from __future__ import annotations

from placer.errors import InputError


def visible_devices() -> list[str]:
    """The devices torch sees here: ``cpu`` and ``cuda:0`` ... ``cuda:n-1``."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu"] + [f"cuda:{k}" for k in range(n)]


def parse_map(text: str | None, cluster, present: bool = True) -> dict[str, str]:
    """``gpu:0=cuda:0,cpu:0=cpu`` -> {cluster device: real device}; checked against the cluster and
    the devices torch sees (``present=False``, as ``placer export`` plans for another machine: any
    device name torch parses, its presence checked where the map runs)."""
    out: dict[str, str] = {}
    if not text:
        return out
    names = list(cluster.device_names)
    seen = visible_devices() if present else None
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        src, sep, dst = item.partition("=")
        src, dst = src.strip(), dst.strip()
        if not sep or not src or not dst:
            raise InputError("map", f"'{item}'", "is not CLUSTER_DEVICE=REAL_DEVICE", "e.g. gpu:0=cuda:0,cpu:0=cpu", kind="map")
        if src not in names:
            raise InputError("map", f"'{src}'", f"is not a device of cluster '{cluster.name}'",
                             f"use one of {', '.join(names)}", kind="map")
        if dst == "cuda":
            dst = "cuda:0"
        if seen is None:
            dst = _parsed(dst)
        elif dst not in seen:
            raise InputError("map", f"'{dst}'", "is not a device torch sees here", f"use one of {', '.join(seen)}",
                             kind="map")
        out[src] = dst
    return out


def _parsed(dst: str) -> str:
    """``dst`` in canonical form (``cpu``, ``cuda:K``, ``TYPE:K``) when torch parses it as a device
    that holds data, else InputError; presence not checked."""
    import torch

    try:
        d = torch.device(dst)
    except (RuntimeError, ValueError, TypeError):
        d = None
    if d is None or d.type == "meta" or (d.type == "cpu" and d.index not in (None, 0)):
        raise InputError("map", f"'{dst}'", "is not a device name torch parses (or holds no data)",
                         "use cpu, cuda:K, mps or xpu:K", kind="map")
    return "cpu" if d.type == "cpu" else f"{d.type}:{d.index or 0}" if d.type in ("cuda", "xpu") else str(d)


def target_devices(cluster, overrides: dict[str, str] | None = None) -> list[str]:
    """The device each cluster device is planned to run on, whatever this machine has: the i-th GPU
    of the cluster (in its device order) on ``cuda:i``, every CPU on ``cpu``; ``overrides`` (from
    ``parse_map(..., present=False)``) replace single entries. ``placer export`` writes these; the
    presence check happens where the map runs (``placer.apply``, ``placer run``)."""
    return _by_rule(cluster, [f"cuda:{k}" for k in range(len(cluster.gpus()))], overrides)


def device_map(cluster, overrides: dict[str, str] | None = None) -> list[str]:
    """The real device of every cluster device (see the module docstring for the rule)."""
    return _by_rule(cluster, [d for d in visible_devices() if d.startswith("cuda")], overrides)


def _by_rule(cluster, gpus: list[str], overrides: dict[str, str] | None) -> list[str]:
    """The i-th cluster GPU on ``gpus[i]`` (the CPU past the last), every CPU on ``cpu``, then ``overrides``."""
    out, k = [], 0
    for d in cluster.devices:
        if d.kind == "gpu":
            out.append(gpus[k] if k < len(gpus) else "cpu")
            k += 1
        else:
            out.append("cpu")
    for name, real in (overrides or {}).items():
        out[cluster.index_of(name)] = real
    return out
