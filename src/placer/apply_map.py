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

Before anything is touched, :func:`check` validates the call and raises
:class:`~placer.errors.InputError` (one line: the item, what is wrong, the fix) for:

* a model that is not a ``torch.nn.Module`` instance, or holds weights on the ``meta`` device;
* a map that is not ``{module path (str): device}``, a key that is not a module of the model, or a
  key inside another key's module mapped to another device (a module's subtree runs on one device:
  map the parent's children one by one instead; the same device is allowed, the inner key dropped);
* a device that is not a string (or ``torch.device``) torch parses as ``cpu`` or ``TYPE:K`` (an
  integer GPU index such as ``5`` is refused: write ``'cuda:5'``), accelerate's ``disk`` offload, and
  ``meta`` (it would throw the module's weights away);
* devices this machine does not have (``cuda:K`` with ``K >= torch.cuda.device_count()``, any
  ``cuda`` on a torch without CUDA, ``mps`` / ``xpu`` / ... not available): one error naming all of
  them.

**Dry run.** ``apply(model, device_map, dry_run=True)`` rehearses a map on a machine without its
devices (a GPU map made on a laptop): the same checks except the devices' presence, then every
module of the map on the CPU behind the same hooks at the same module boundaries, so the data
movement between the map's modules runs (to the CPU) and the loss and gradients equal the unplaced
model's (tested in ``tests/test_apply_edges.py``).

Build the optimizer *after* :func:`apply`: moving weights replaces the parameter objects.
"""

from __future__ import annotations

import time
from pathlib import Path

from placer.errors import InputError, kind_of, printable


def _accelerate():
    try:
        import accelerate
    except ImportError:
        raise InputError("placer.apply", "accelerate", "is not installed", "pip install 'placer[hf]'") from None
    return accelerate


def read_device_map(device_map) -> dict:
    """A ``{module: device}`` dict from a dict, a ``placer export`` document or its file (the
    entries as given: :func:`check` validates them)."""
    if isinstance(device_map, (str, Path)):
        from placer.io import read_json

        device_map = read_json(device_map)
    if isinstance(device_map, dict) and isinstance(device_map.get("device_map"), dict):
        device_map = device_map["device_map"]
    if not isinstance(device_map, dict) or not device_map:
        raise InputError("placer.apply", "device_map", f"is {_shown(device_map)}, not a non-empty "
                         "{module path: device} map", "give a device-map export of a placement (its file, its "
                         "document or a dict)", kind="apply-map")
    return dict(device_map)


def _shown(value, limit: int = 40) -> str:
    """``value`` for a message: its kind and a short repr."""
    if value is None:
        return "None"
    r = repr(value)
    r = r if len(r) <= limit else r[: limit - 3] + "..."
    return f"{kind_of(value)} ({r})"


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_model(model) -> None:
    """InputError unless ``model`` is an ``nn.Module`` instance whose weights are real tensors."""
    import torch

    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        raise InputError("placer.apply", "model", f"is the class {model.__name__}, not a model",
                         f"pass an instance: placer.apply({model.__name__}(...), device_map)")
    if not isinstance(model, torch.nn.Module):
        raise InputError("placer.apply", "model", f"is {_shown(model)}, not a torch.nn.Module",
                         "pass the model first and the map second: placer.apply(model, device_map)")
    for n, t in list(model.named_parameters()) + list(model.named_buffers()):
        if t.device.type == "meta":
            raise InputError("placer.apply", f"model {type(model).__name__}",
                             f"holds '{n}' on the meta device (built without weights)",
                             "load or initialise its weights (e.g. load_state_dict) before placing it")


def parse_device(module: str, value) -> str:
    """The device string ``value`` (a str or ``torch.device``) in canonical form (``cpu``, ``cuda:K``,
    ``TYPE[:K]``), or InputError naming ``module``. Presence is not checked here."""
    import torch

    item = f"module '{module}'"
    if isinstance(value, torch.device):
        value = str(value)
    if isinstance(value, bool) or not isinstance(value, str):
        fix = (f"write devices as strings: 'cuda:{value}' for GPU {value}, 'cpu' for the CPU"
               if isinstance(value, int) and not isinstance(value, bool) and value >= 0
               else "write devices as strings: 'cpu', 'cuda:0', 'cuda:1', ...")
        raise InputError("placer.apply", item, f"is mapped to {_shown(value)}, not a device string", fix)
    if value == "disk":
        raise InputError("placer.apply", item, "is mapped to 'disk' (accelerate's disk offload), which "
                         "placer.apply does not do", "map it to 'cpu' or a GPU ('cuda:K')")
    shown = printable(_cut(value))
    try:
        d = torch.device(value)
    except (RuntimeError, ValueError, TypeError):
        d = None
    if d is not None and d.type == "cpu" and d.index not in (None, 0):
        raise InputError("placer.apply", item, f"is mapped to '{shown}', but torch has one CPU device",
                         "map it to 'cpu' (a cluster's cpu:K devices all run on 'cpu')")
    if d is None:
        raise InputError("placer.apply", item, f"is mapped to '{shown}', which is not a torch device",
                         "use 'cpu' or 'cuda:K' (K from 0 to the number of GPUs - 1; 'mps', 'xpu:K' where "
                         "torch has them)")
    if d.type == "meta":
        raise InputError("placer.apply", item, "is mapped to 'meta', which holds no data: the module's "
                         "weights would be thrown away", "map it to 'cpu' or a GPU; to rehearse a GPU map "
                         "without the GPUs use placer.apply(model, device_map, dry_run=True)")
    if d.type == "cpu":
        return "cpu"
    return f"cuda:{d.index or 0}" if d.type == "cuda" else str(d)


def _count(kind: str) -> int:
    """How many devices of ``kind`` torch sees here (0 where it has no backend for it)."""
    import torch

    if kind == "cpu":
        return 1
    try:
        if kind == "cuda":
            return torch.cuda.device_count() if torch.cuda.is_available() else 0
        if kind == "mps":
            return 1 if torch.backends.mps.is_available() else 0
        backend = getattr(torch, kind, None)
        return int(backend.device_count()) if backend is not None and backend.is_available() else 0
    except Exception:  # a backend that cannot even be queried is one this machine does not have
        return 0


def missing_devices(devices) -> list[str]:
    """The devices of ``devices`` (canonical strings) that torch does not see here."""
    out = []
    for d in sorted(set(devices)):
        kind, _, index = d.partition(":")
        if int(index or 0) >= _count(kind):
            out.append(d)
    return out


def _seen() -> str:
    kinds = ["cuda", "mps", "xpu"]
    seen = ["cpu"] + [f"{k}:{i}" for k in kinds for i in range(_count(k))]
    return ", ".join(seen)


def _outer(key: str, mapped) -> str | None:
    """The nearest module of ``mapped`` that holds module ``key`` (``""``, the root, holds all)."""
    parts = key.split(".") if key else []
    for j in range(len(parts) - 1, -1, -1):
        if ".".join(parts[:j]) in mapped:
            return ".".join(parts[:j])
    return None


def check(model, device_map, *, dry_run: bool = False) -> dict[str, str]:
    """Every check of :func:`apply` (see the module docstring), nothing touched: the map with
    canonical devices, an inner key on its parent's device dropped. ``dry_run`` skips presence."""
    import torch

    check_model(model)
    dm = read_device_map(device_map)
    names = dict(model.named_modules())
    for k in dm:
        if not isinstance(k, str):
            raise InputError("placer.apply", f"key {_shown(k)}", "is not a module path (a string)",
                             f"write it as a string: '{k}'")
        if k not in names:
            raise InputError("placer.apply", f"module '{_cut(k)}'", f"is not a module of {type(model).__name__}",
                             "export the map from a graph captured from this model (placer export)")
    out = {k: parse_device(k, v) for k, v in dm.items()}
    for k in out:
        o = _outer(k, out)
        if o is not None and out[o] != out[k]:
            raise InputError("placer.apply", f"modules '{o}' ({out[o]}) and '{k}' ({out[k]})",
                             f"overlap: '{k}' is inside '{o}', so the map puts it on two devices",
                             f"map the children of '{o}' one by one instead of '{o}' itself")
    out = {k: d for k, d in out.items() if _outer(k, out) is None}
    if not dry_run:
        missing = missing_devices(out.values())
        if missing:
            n = sum(1 for d in out.values() if d in missing)
            what = "a device" if len(missing) == 1 else "devices"
            cuda = "this torch is built without CUDA; " if torch.version.cuda is None and not _count("cuda") \
                and any(m.startswith("cuda") for m in missing) else ""
            raise InputError("placer.apply", "device_map", f"names {what} this machine lacks: {', '.join(missing)} "
                             f"({cuda}torch sees {_seen()}; {n} of the map's {len(out)} modules are on "
                             f"{'it' if len(missing) == 1 else 'them'})",
                             "run on the machine the map was made for, re-export it for this one "
                             "(placer export --map CLUSTER_DEVICE=REAL_DEVICE), or rehearse it on the CPU with "
                             "placer.apply(model, device_map, dry_run=True)")
    return out


def complete(model, device_map: dict[str, str]) -> dict[str, str]:
    """The map (checked by :func:`check`) completed: parameters and buffers no entry covers (modules
    the captured step never ran) go with the first module's device."""
    first = next(iter(device_map.values()))
    out = dict(device_map)
    covered = lambda n: any(k == "" or n == k or n.startswith(k + ".") for k in out)
    for n, _ in list(model.named_parameters()) + list(model.named_buffers()):
        if not covered(n):
            owner = n.rsplit(".", 1)[0] if "." in n else ""
            if owner and all(not k.startswith(owner + ".") for k in out):
                out[owner] = first
            else:  # a tensor held directly by a module whose children are mapped: the tensor itself
                out[n] = first
    return out


def apply(model, device_map, *, dry_run: bool = False):
    """Place ``model`` by ``device_map`` (``{module path: device}``, a ``placer export`` document or
    its file) with accelerate's hooks (see the module docstring); returns the model. Everything is
    checked first (:func:`check`; InputError, nothing touched). ``dry_run=True``: every module of
    the map on the CPU behind the same hooks (the split rehearsed where its devices are absent)."""
    if not isinstance(dry_run, bool):
        raise InputError("placer.apply", "dry_run", f"is {_shown(dry_run)}", "pass True or False")
    dm = check(model, device_map, dry_run=dry_run)
    if dry_run:
        dm = {k: "cpu" for k in dm}
    accelerate = _accelerate()
    from accelerate.hooks import attach_align_device_hook_on_blocks
    from accelerate.utils import find_tied_parameters, retie_parameters

    dm = complete(model, dm)
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

    from placer.build import build, recipe_of
    from placer.frontends.torch import _default_loss

    recipe = recipe_of(graph)
    if recipe is None:
        raise InputError("apply", f"graph '{graph.name}'", "has no model to rebuild", "capture it from PyTorch",
                         kind="apply")
    from placer.runtime.trust import check_code, check_recipe

    check_recipe(recipe, graph.name)  # as placer.runtime.measure.rebuild: never code in Python's installation
    check_code(recipe, graph.name, [], any_code=True)
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
