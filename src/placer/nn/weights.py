"""The one check of a loaded policy's weights, used by every learned method's policy loader (Placeto's
:meth:`placer.rl.policy.PlacetoPolicy.from_state` and :meth:`placer.methods.learned.driver.
StatePolicyMethod.load_policy` for the others): every weight is a tensor of finite values, and, given
the network the policy's stored settings describe, the weights are exactly that network's (the same
names, the same shapes). Anything else is refused in one line naming the file (``where``) and the
tensor, before any work starts."""

from __future__ import annotations

from typing import Any, Mapping

from placer.errors import InputError


def flat(weights: Mapping, prefix: str = "") -> dict[str, Any]:
    """A state dict, or a dict of them (a trainer's modules), as one dict of dotted names."""
    out: dict[str, Any] = {}
    for k, v in weights.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flat(v, f"{name}."))
        else:
            out[name] = v
    return out


def check_weights(weights, where: str, fix: str, want: Mapping | None = None, kind: str | None = None) -> None:
    """``weights`` (a state dict, nested dicts flattened to dotted names) holds tensors of finite
    values only; with ``want`` (the state dict of the network its settings describe, nested alike),
    exactly its names with its shapes. InputError naming ``where`` and the first bad tensor otherwise
    (of ``kind``, e.g. ``policy:placeto``)."""
    import torch

    if not isinstance(weights, Mapping):
        raise InputError(where, "policy weights", "are not a dict of tensors (a damaged or foreign file)", fix, kind=kind)
    got = flat(weights)
    for k, v in got.items():
        if not torch.is_tensor(v):
            raise InputError(where, f"policy weight '{k}'", f"is not a tensor (a {type(v).__name__})", fix, kind=kind)
        if (v.is_floating_point() or v.is_complex()) and not bool(torch.isfinite(v).all()):
            raise InputError(where, f"policy weight '{k}'", "holds NaN or infinite values", fix, kind=kind)
    if want is None:
        return
    need = flat(want)
    missing, extra = [k for k in need if k not in got], [k for k in got if k not in need]
    if missing or extra:
        why = f"missing weight '{missing[0]}'" if missing else f"unexpected weight '{extra[0]}'"
        raise InputError(where, "policy", f"weights do not fit its network ({why})", fix, kind=kind)
    for k, v in need.items():
        if tuple(got[k].shape) != tuple(v.shape):
            raise InputError(where, "policy", f"weights do not fit its network (weight '{k}' has shape "
                             f"{tuple(got[k].shape)}, the network's is {tuple(v.shape)})", fix, kind=kind)
