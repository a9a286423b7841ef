"""What people use today to split a model across devices, as baselines: module-level maps made without
a simulator, each turned into an op placement and simulated like every other method.

* ``accelerate-auto``: Hugging Face accelerate's ``infer_auto_device_map`` (the ``device_map=
  "sequential"`` fill of ``from_pretrained``): modules in order onto GPU 0 until its memory is used,
  then GPU 1, ..., then the CPU, sizes from the weights alone.
* ``accelerate-balanced``: accelerate's ``get_balanced_memory`` first (each GPU's budget cut to an
  equal share of the weights plus a buffer, the last GPU keeping its whole memory), then the same fill:
  what ``from_pretrained(device_map="auto" | "balanced")`` does.
* ``param-balanced``: DeepSpeed's ``PipelineModule(partition_method="parameters")``: the layer
  sequence cut into one contiguous stage per GPU so that the largest stage's trainable parameter
  count is as small as possible (DeepSpeed's documentation: "balances the number of trainable
  parameters on each pipeline stage"; written here from that description as an exact min-max
  partition of the sequence).

The units are the module subtrees of :mod:`placer.grouping.modules` at ``depth`` (2: GPT-2 / Llama /
T5 blocks, the classes transformers lists in ``_no_split_modules``), glue ops with their unit, in the
order their forward ops run. accelerate needs an ``nn.Module``; a graph is all a method gets, so it
runs on a meta-device skeleton built from the graph: one module per unit at its path (parents as
plain containers, registered in forward order), holding one parameter with the unit's weights
(the captured parameter bytes less the optimizer state the capture adds to them) and its buffers,
tied units sharing one parameter object as their tied weights do. accelerate's own memory rule is
kept: weights only (activations and optimizer state are not counted), the cluster's GPU memory as
``max_memory`` (integer keys, GPU order) and its CPU memory as ``"cpu"``; a module accelerate sends
to ``"disk"`` runs on the CPU here. A graph without module paths (PipeDream profiles, generated
graphs) has layers instead: each forward op with the backward ops mirroring it and its colocation
group, in op order (:func:`placer.grouping.mirrors.mirror_units`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from placer.graph import BACKWARD, FORWARD
from placer.grouping.modules import DEFAULT_DEPTH, module_units
from placer.methods.base import Evaluator, MethodConfig, NotApplicable, Range, register

STATE_SLOTS = {"sgd": 0, "sgd-momentum": 1, "adam": 2}  # optimizer state per parameter (frontends.torch)


def _accelerate_missing():
    try:
        import accelerate  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return "needs accelerate and torch (pip install 'placer[hf]')"
    return None


@dataclass(frozen=True)
class AccelerateConfig(MethodConfig):
    """accelerate's device map over the module units (accelerate-auto and accelerate-balanced)."""

    depth: Annotated[int, Range("in [1, 64]")] = DEFAULT_DEPTH  # module depth of the units accelerate places (2: transformer blocks)
    cpu: bool = True  # give accelerate the cluster's CPU memory as "cpu" (modules that fit no GPU run there)

    @classmethod
    def method_name(cls):
        return "accelerate"


@dataclass(frozen=True)
class ParamBalancedConfig(MethodConfig):
    """DeepSpeed's partition of the layer sequence by parameter count."""

    depth: Annotated[int, Range("in [1, 64]")] = DEFAULT_DEPTH  # module depth of the layers (2: transformer blocks)
    stages: Annotated[int, Range(">= 0")] = 0  # pipeline stages, one per GPU in GPU order (0: every GPU of the cluster)

    @classmethod
    def method_name(cls):
        return "param-balanced"


# ---------------------------------------------------------------------- the layer sequence
@dataclass
class Layers:
    op_unit: np.ndarray  # (n_ops,) unit of every op
    names: list[str]  # unit -> module path (or op name for graphs without modules)
    order: list[int]  # units in forward order
    weight_bytes: np.ndarray  # (units,) weights and buffers, optimizer state left out
    params: np.ndarray  # (units,) trainable parameter elements (DeepSpeed's count)
    tie: np.ndarray  # (units,) units sharing a parameter share an id
    source: str  # "modules" or "mirror units"


def layers(problem, depth: int) -> Layers:
    g = problem.graph
    mu = module_units(problem, depth)
    if mu is not None:
        op_unit, names, tie, order = mu.op_unit, list(mu.names), mu.tie, mu.forward_order(g)
        source = "modules"
    else:
        from placer.grouping.mirrors import mirror_units

        op_unit = mirror_units(g)
        n = int(op_unit.max()) + 1 if len(op_unit) else 0
        first = np.full(n, g.n_ops, dtype=np.int64)
        np.minimum.at(first, op_unit, np.arange(g.n_ops))
        names = [g.op_names[i] for i in first]
        order, tie, source = [int(u) for u in np.argsort(first, kind="stable")], np.arange(n), "mirror units"
    n_units = len(names)
    slots = STATE_SLOTS.get(str((g.meta or {}).get("optimizer") or "sgd"), 0)
    is_param = np.array([t == "parameter" for t in g.op_types], dtype=bool)
    weights = np.where(is_param, g.param_bytes / (1 + slots), g.param_bytes)
    wb = np.bincount(op_unit, weights=weights, minlength=n_units)
    elem = np.bincount(op_unit, weights=np.where(is_param, weights, 0.0) / 4.0, minlength=n_units)
    return Layers(op_unit, names, order, wb, elem, np.asarray(tie), source)


def _placement(problem, L: Layers, unit_device: np.ndarray) -> np.ndarray:
    """Every op on its unit's device; an op that cannot run there on the fastest device that can (as
    TensorFlow keeps CPU-only kernels on the host), a colocation group on its first op's device when
    all its ops can run there, else on the device where they run fastest together."""
    comp = problem.compute_us
    p = unit_device[L.op_unit].astype(np.int64)
    bad = ~np.isfinite(comp[np.arange(len(p)), p])
    p[bad] = np.argmin(comp[bad], axis=1)
    for members in problem.graph.colocation_groups():
        ok = np.isfinite(comp[members]).all(axis=0)
        d = int(p[members[0]])
        p[members] = d if ok[d] else int(np.argmin(np.where(ok, comp[members].sum(axis=0), np.inf)))
    return p


# ---------------------------------------------------------------------- accelerate
def skeleton(L: Layers):
    """A meta-device module tree with one module per unit (see the module docstring)."""
    import torch
    from torch import nn

    class Unit(nn.Module):
        pass

    root = nn.Module()
    owner = {}
    for u in L.order:
        parts = L.names[u].split(".") if L.source == "modules" else [f"layer{u}"]
        mod = root
        for k, part in enumerate(parts):
            child = mod._modules.get(part)
            if child is None:
                child = Unit() if k == len(parts) - 1 else nn.Module()
                mod.add_module(part, child)
            mod = child
        owner.setdefault(int(L.tie[u]), [])
        numel = int(round(L.weight_bytes[u] / 4.0))
        if numel > 0:
            mod.register_parameter("weight", nn.Parameter(torch.empty(numel, device="meta")))
        owner[int(L.tie[u])].append(mod)
    for mods in owner.values():  # tied units hold their heaviest member's parameter, once
        held = [m for m in mods if "weight" in m._parameters]
        if len(mods) > 1 and held:
            big = max(held, key=lambda m: m.weight.numel())
            for m in mods:
                m._parameters["weight"] = big.weight
    return root, Unit.__name__


def accelerate_map(problem, L: Layers, cfg: AccelerateConfig, balanced: bool) -> tuple[np.ndarray, list[str]]:
    """(unit -> cluster device, notes) from accelerate's device map of the skeleton."""
    import logging

    from accelerate.utils import get_balanced_memory, infer_auto_device_map

    cl = problem.cluster
    gpus, cpus = cl.gpus(), cl.cpus()
    if not gpus:
        raise NotApplicable(cfg.method_name(), "the cluster has no GPU for accelerate to fill")
    max_memory: dict = {k: int(cl.devices[d].memory_bytes) for k, d in enumerate(gpus)}
    if cfg.cpu and cpus:
        max_memory["cpu"] = int(cl.devices[cpus[0]].memory_bytes)
    model, unit_class = skeleton(L)
    logging.getLogger("accelerate").setLevel(logging.ERROR)
    if balanced:
        max_memory = get_balanced_memory(model, max_memory=dict(max_memory), no_split_module_classes=[unit_class])
    dm = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=[unit_class])
    fallback = cpus[0] if cpus else gpus[-1]
    where = {k: (gpus[v] if isinstance(v, int) else fallback) for k, v in dm.items()}
    dev = np.full(len(L.names), gpus[0], dtype=np.int64)
    for u in L.order:
        path = L.names[u] if L.source == "modules" else f"layer{u}"
        keys = [k for k in where if k == "" or path == k or path.startswith(k + ".")]
        if keys:
            dev[u] = where[max(keys, key=len)]
    notes = [f"{len(dm)} map entries over {len(L.names)} {L.source}"]
    if any(v == "disk" for v in dm.values()):
        notes.append("accelerate sent modules to disk: run on the CPU here")
    return dev, notes


def _run_accelerate(name, problem, ev: Evaluator, cfg: AccelerateConfig, balanced: bool):
    L = layers(problem, cfg.depth)
    dev, notes = accelerate_map(problem, L, cfg, balanced)
    p = _placement(problem, L, dev)
    ev.simulate(p)
    return ev.result(name, p, notes=notes)


@register("accelerate-auto", "Hugging Face accelerate's infer_auto_device_map: modules in order onto each GPU "
          "until its memory (weights only) is used", "incumbent", AccelerateConfig,
          paper="Hugging Face accelerate, big model inference (infer_auto_device_map)", available=_accelerate_missing,
          version=1)
def accelerate_auto(problem, seed: int, ev: Evaluator, cfg: AccelerateConfig):
    return _run_accelerate("accelerate-auto", problem, ev, cfg, balanced=False)


@register("accelerate-balanced", "Hugging Face accelerate's get_balanced_memory + infer_auto_device_map "
          "(from_pretrained's device_map='auto'): weights spread evenly over the GPUs", "incumbent",
          AccelerateConfig, paper="Hugging Face accelerate / transformers device_map='balanced'",
          available=_accelerate_missing, version=1)
def accelerate_balanced(problem, seed: int, ev: Evaluator, cfg: AccelerateConfig):
    return _run_accelerate("accelerate-balanced", problem, ev, cfg, balanced=True)


# ---------------------------------------------------------------------- DeepSpeed
def min_max_partition(weights, parts: int) -> list[int]:
    """Start index of each of ``parts`` contiguous parts of ``weights`` (fewer only when there are
    fewer items) minimising the largest part's sum: the bottleneck found by bisection, the greedy cut
    that meets it, then parts split until there are ``parts``."""
    w = np.asarray(weights, dtype=np.float64)
    k = max(1, int(parts))

    def cuts_for(cap: float) -> list[int] | None:
        starts, total = [0], 0.0
        for i, x in enumerate(w):
            if total + x > cap and total > 0:
                if len(starts) == k:
                    return None
                starts.append(i)
                total = 0.0
            total += x
        return starts

    if not len(w):
        return [0]
    lo, hi = float(w.max()), float(w.sum())
    for _ in range(100):
        if hi - lo <= 1e-9 * max(hi, 1.0):
            break
        mid = (lo + hi) / 2
        if cuts_for(mid) is None:
            lo = mid
        else:
            hi = mid
    starts = cuts_for(hi) or [0]
    # one part per stage as DeepSpeed makes them: while parts are missing, split the heaviest part of
    # two or more items where its halves are most even (the bottleneck cannot grow)
    while len(starts) < min(k, len(w)):
        ends = starts[1:] + [len(w)]
        sums = [w[a:b].sum() if b - a > 1 else -1.0 for a, b in zip(starts, ends)]
        j = int(np.argmax(sums))
        a, b = starts[j], ends[j]
        left = np.cumsum(w[a:b])[:-1]
        cut = a + 1 + int(np.argmin(np.maximum(left, left[-1] + w[b - 1] - left)))
        starts = sorted(starts + [cut])
    return starts


@register("param-balanced", "DeepSpeed's pipeline partition by parameter count: the module sequence cut into one "
          "contiguous stage per GPU with the most even trainable parameters", "incumbent", ParamBalancedConfig,
          paper="DeepSpeed PipelineModule(partition_method='parameters')", version=1)
def param_balanced(problem, seed: int, ev: Evaluator, cfg: ParamBalancedConfig):
    L = layers(problem, cfg.depth)
    gpus = problem.cluster.gpus() or list(range(problem.n_devices))
    k = min(cfg.stages or len(gpus), len(gpus))
    seq = np.asarray(L.order, dtype=np.int64)
    starts = min_max_partition(L.params[seq], k)
    stage = np.zeros(len(seq), dtype=np.int64)
    stage[np.asarray(starts[1:], dtype=np.int64)] = 1
    dev = np.empty(len(L.names), dtype=np.int64)
    dev[seq] = np.asarray(gpus, dtype=np.int64)[np.cumsum(stage)]
    p = _placement(problem, L, dev)
    ev.simulate(p)
    shares = np.bincount(np.cumsum(stage), weights=L.params[seq], minlength=len(starts))
    return ev.result("param-balanced", p, notes=[f"{len(starts)} stages over {len(seq)} {L.source}, parameters per "
                                                 f"stage {', '.join(f'{x / 1e6:.2f}M' for x in shares)}"])
