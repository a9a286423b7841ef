"""A module -> device map applied to a user's own ``nn.Module`` (``placer.apply``), and the eager
training step of a model so placed, timed (``placer run --apply``).

:func:`apply` uses Hugging Face accelerate's dispatch: every module of the map gets accelerate's
``AlignDevicesHook`` (its weights moved to its device once; its inputs moved there when it is
called), the root a hook that brings outputs back to the device the inputs came from. Activations
therefore cross devices at module boundaries only, and autograd carries gradients back the same
way, so an ordinary loop (forward, ``loss.backward()``, ``optimizer.step()``) trains across devices.

* Where the map's devices are accelerators only (or the CPU only), :func:`accelerate.dispatch_model`
  does all of it (``force_hooks=True``, so that the hooks are attached even when every module is on
  one device, as in the CPU tests).
* Where the map mixes the CPU with accelerators, ``dispatch_model`` is not used: it reads ``"cpu"``
  as *offload* (weights kept in host memory and copied to the main accelerator at every call, the
  module run there), while a placement that puts a module on the cluster's CPU means running it on
  the CPU. The same hooks are then attached directly
  (``accelerate.hooks.attach_align_device_hook_on_blocks`` with no offload), which runs it there.

Build the optimizer *after* :func:`apply`: moving weights replaces the parameter objects.
"""

from __future__ import annotations

import time
from pathlib import Path

from placer.errors import InputError


def _accelerate():
    try:
        import accelerate
    except ImportError as e:
        raise InputError("apply", "accelerate", "is not installed", "pip install 'placer[hf]'") from e
    return accelerate


def read_device_map(device_map) -> dict[str, str]:
    """A ``{module: device}`` dict from a dict, a ``placer export`` document or its file."""
    if isinstance(device_map, (str, Path)):
        from placer.io import read_json

        device_map = read_json(device_map)
    if isinstance(device_map, dict) and isinstance(device_map.get("device_map"), dict):
        device_map = device_map["device_map"]
    if not isinstance(device_map, dict) or not device_map:
        raise InputError("apply", "device_map", "is not a non-empty {module path: device} map",
                         "give the output of `placer export --format device-map`")
    return {str(k): str(v) for k, v in device_map.items()}


def complete(model, device_map: dict[str, str]) -> dict[str, str]:
    """The map checked against ``model`` (every key one of its modules) and completed: parameters and
    buffers no entry covers (modules the captured step never ran) go with the first module's device."""
    import torch

    names = dict(model.named_modules())
    for k in device_map:
        if k not in names:
            raise InputError("apply", f"module '{k}'", f"is not a module of {type(model).__name__}",
                             "export the map from a graph captured from this model (placer export)")
        torch.device(device_map[k])  # a malformed device raises here
    first = next(iter(device_map.values()))
    out = dict(device_map)
    covered = lambda n: any(n == k or n.startswith(k + ".") for k in out)
    for n, _ in list(model.named_parameters()) + list(model.named_buffers()):
        if not covered(n):
            owner = n.rsplit(".", 1)[0] if "." in n else ""
            if owner and all(not k.startswith(owner + ".") for k in out):
                out[owner] = first
            else:  # a tensor held directly by a module whose children are mapped: the tensor itself
                out[n] = first
    return out


def apply(model, device_map):
    """Place ``model`` by ``device_map`` (``{module path: device}``, a ``placer export`` document or
    its file) with accelerate's hooks (see the module docstring); returns the model."""
    accelerate = _accelerate()
    from accelerate.hooks import attach_align_device_hook_on_blocks
    from accelerate.utils import find_tied_parameters, retie_parameters

    dm = complete(model, read_device_map(device_map))
    devices = set(dm.values())
    main = next(iter(dm.values()))
    if "cpu" not in devices or devices == {"cpu"}:
        import logging

        log = logging.getLogger("accelerate.big_modeling")  # its "offloaded to the cpu" warning: nothing is offloaded
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            return accelerate.dispatch_model(model, dm, main_device=main, force_hooks=True)
        finally:
            log.setLevel(level)
    tied = find_tied_parameters(model)
    execution = {**dm, "": main}
    attach_align_device_hook_on_blocks(model, execution_device=execution, offload={k: False for k in execution})
    retie_parameters(model, tied)
    model.hf_device_map = dict(dm)
    return model


def release(model) -> None:
    """Remove the hooks :func:`apply` attached (the weights stay where they are)."""
    from accelerate.hooks import remove_hook_from_submodules

    remove_hook_from_submodules(model)


# ---------------------------------------------------------------------- placer run --apply
def user_model(graph, module):
    """The model a user holds inside the module a recipe builds: the Hugging Face adapter's
    ``model`` (the module paths of :mod:`placer.grouping.modules` are relative to it), else itself."""
    from placer.grouping.modules import module_root

    root = module_root(graph)
    return module.get_submodule(root) if root else module


def optimizer_for(recipe: dict, params, lr: float = 0.1):
    """The torch optimizer the captured step's update follows (placer.frontends.torch._update)."""
    import torch

    kind = recipe.get("optimizer", "sgd-momentum")
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr, momentum=0.9 if kind == "sgd-momentum" else 0.0)


def time_applied(graph, device_map: dict[str, str], *, steps: int = 10, warmup: int = 2) -> dict:
    """The eager training step of ``graph``'s model (rebuilt from its recipe) with ``device_map``
    applied: forward, ``loss.backward()``, ``optimizer.step()``, ``zero_grad``, timed end to end
    (CUDA devices synchronised); median, min, max, first loss, and per device the CUDA peak."""
    import numpy as np
    import torch

    from placer.recipes import build, recipe_of
    from placer.frontends.torch import _default_loss

    recipe = recipe_of(graph)
    if recipe is None:
        raise InputError("--apply", f"graph '{graph.name}'", "has no model to rebuild", "capture it from PyTorch")
    module, inputs, loss_fn = build(recipe, "cpu")
    apply(user_model(graph, module), device_map)
    opt = optimizer_for(recipe, [p for p in module.parameters() if p.requires_grad])
    loss_fn = loss_fn or _default_loss
    cuda = sorted({d for d in device_map.values() if d.startswith("cuda")})
    sync = lambda: [torch.cuda.synchronize(d) for d in cuda]
    for d in cuda:
        torch.cuda.reset_peak_memory_stats(d)

    def step():
        loss = loss_fn(module(*inputs))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    first = float(step().detach().cpu())
    for _ in range(warmup - 1):
        step()
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter_ns()
        step()
        sync()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return {"applied_median_us": float(np.median(times)), "applied_min_us": float(min(times)),
            "applied_max_us": float(max(times)), "applied_steps": steps, "applied_loss": first,
            "applied_modules": len(device_map),
            "applied_cuda_peak_bytes": {d: float(torch.cuda.max_memory_allocated(d)) for d in cuda}}
