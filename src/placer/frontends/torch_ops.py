"""Per-op facts of a captured aten graph: which ops are views, op classes, FLOPs, tensor bytes.

Used by :mod:`placer.frontends.torch` (capture) and :mod:`placer.cost` (roofline, profiling,
calibration). FLOPs come from ``torch.utils.flop_counter``'s formulas (matrix multiplies,
convolutions, attention); every other op counts zero FLOPs and is costed by the bytes it moves,
which is how the roofline model treats it anyway (memory-bound).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten

from placer.cost.opclass import OP_CLASS_NAMES, op_class  # noqa: F401 (re-exported)


def aten_name(target: Any) -> str:
    """``aten.addmm.default`` -> ``addmm``; other callables by their name."""
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name.split("::")[-1]
    return getattr(target, "__name__", str(target))


def is_view(target: Any) -> bool:
    """Zero-cost aliasing ops that capture folds into their producer: aten views (``view``, ``t``,
    ``permute``, ``expand``, ``split``, ``select``, ``slice``, ``detach``, ...), ``_unsafe_view`` and
    tuple indexing (``getitem`` on a multi-output op)."""
    if target is operator.getitem:
        return True
    if isinstance(target, torch._ops.OpOverload):
        return bool(target.is_view) or target in (aten._unsafe_view.default, aten.lift_fresh.default)
    return False


# ---------------------------------------------------------------------- tensor facts
def tensor_bytes(t: Any) -> int:
    """Bytes of a tensor's elements as laid out (expanded dims with stride 0 count once)."""
    if not isinstance(t, torch.Tensor):
        return 0
    if t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    return int(min(span, t.numel()) * t.element_size())


def value_bytes(val: Any) -> int:
    """Bytes of every tensor in a node's value (a tensor, or a tuple / list of them)."""
    leaves, _ = tree_flatten(val)
    return sum(tensor_bytes(x) for x in leaves)


def value_dtype(val: Any) -> str:
    """The dtype of the first floating tensor of a value (else the first tensor), e.g. ``float32``."""
    leaves, _ = tree_flatten(val)
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    for x in tensors:
        if x.dtype.is_floating_point:
            return str(x.dtype).replace("torch.", "")
    return str(tensors[0].dtype).replace("torch.", "") if tensors else "none"


def describe(val: Any) -> str:
    """``f32[64,3,299,299]`` for a tensor, comma-joined for a tuple (for op metadata)."""
    leaves, _ = tree_flatten(val)
    out = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            out.append(f"{_DT.get(x.dtype, str(x.dtype))}[{','.join(map(str, x.shape))}]")
    return ";".join(out)


_DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
       torch.int64: "i64", torch.int32: "i32", torch.bool: "b8", torch.uint8: "u8", torch.int8: "i8"}


# ---------------------------------------------------------------------- FLOPs
def _cpu_sdpa_aliases() -> dict:
    """The CPU flash-attention kernels have the same arguments as the CUDA flash ones; reuse the
    flop counter's formulas for them."""
    from torch.utils.flop_counter import flop_registry

    out = {}
    pairs = [("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention"),
             ("_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_flash_attention_backward")]
    for cpu, cuda in pairs:
        a, b = getattr(aten, cpu, None), getattr(aten, cuda, None)
        if a is not None and b is not None and b in flop_registry:
            out[a] = flop_registry[b]
    return out


_FLOP_REGISTRY: dict | None = None


def node_flops(target: Any, args: tuple, kwargs: dict, out_val: Any) -> float:
    """FLOPs of one aten call from ``torch.utils.flop_counter``'s formulas (0 for ops it has none
    for: element-wise, reductions, data movement)."""
    global _FLOP_REGISTRY
    if _FLOP_REGISTRY is None:
        from torch.utils.flop_counter import flop_registry

        _FLOP_REGISTRY = {**flop_registry, **_cpu_sdpa_aliases()}
    if not isinstance(target, torch._ops.OpOverload):
        return 0.0
    if target.overloadpacket is aten.convolution_backward:
        return _conv_backward_flops(*args)
    f = _FLOP_REGISTRY.get(target.overloadpacket)
    if f is None:
        return 0.0
    try:
        return float(f(*args, **kwargs, out_val=out_val))
    except Exception:  # a formula that does not accept this overload's arguments
        return 0.0


def _conv_backward_flops(grad_out, x, w, _bias, _stride, _pad, _dil, transposed, _opad, _groups, mask) -> float:
    """Each requested gradient (input, weight) costs as many multiply-adds as the forward
    convolution. Computed here because ``flop_counter``'s grad-weight formula ignores groups
    (it counts a depthwise convolution's weight gradient ``channels / k^2`` times too high)."""
    import math

    spatial = x.shape if transposed else grad_out.shape
    per = 2.0 * spatial[0] * math.prod(spatial[2:]) * math.prod(w.shape)
    return per * (int(bool(mask[0])) + int(bool(mask[1])))


def materialize(fn_val: Any) -> Any:
    """Replace fx nodes in an argument structure by their recorded values (``node.meta['val']``)."""
    import torch.fx as fx

    return tree_map(lambda a: a.meta.get("val") if isinstance(a, fx.Node) else a, fn_val)
