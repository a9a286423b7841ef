"""Recipes: how to rebuild a captured PyTorch model, stored in the graph file (``meta['recipe']``).

A captured graph keeps its ops and costs, not the program. To run a placement for real
(:mod:`placer.runtime`) the model is built again from its recipe, traced again (seconds; the op
names must come out the same) and executed op by op. A recipe is a small JSON dict:

* ``{"kind": "factory", "target": "my_model.py:build" | "pkg.mod:build", "kwargs": {...}}``: a
  Python function returning an ``nn.Module`` or ``(module, example_inputs)``;
* ``{"kind": "hf", "name": "gpt2", "config": {...}}``: a Hugging Face ``transformers`` model built
  from its config class with random weights (:mod:`placer.frontends.hf`);
* ``{"kind": "zoo", "name": "resnet50", "config": {...}}``: a zoo model (``meta['zoo']``);

plus, for every kind, ``inputs`` (``[{"shape": [...], "dtype": "float32", "high": N}]``, batch
dimension included), ``loss`` (``auto``, ``mean``, ``sum``, ``cross-entropy`` or
``file.py:function``), ``optimizer`` and ``seed`` (weights and inputs are drawn from it).

This module holds what every kind shares (parsing, factories, inputs, losses, tracing a built
model, the capture cache's folder); :mod:`placer.build` builds any kind (it sits above the zoo).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from placer.errors import InputError

LOSSES = ("auto", "mean", "sum", "cross-entropy")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool")


# ---------------------------------------------------------------------- parsing
def parse_input_spec(text: str, batch: int) -> dict:
    """``3x224x224`` (float32), ``128:int64:30000`` (integers in [0, 30000)) -> an input dict
    with the batch dimension prepended."""
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise InputError("input", f"'{text}'", "is not SHAPE[:DTYPE[:HIGH]]", "e.g. 3x224x224 or 128:int64:30000")
    try:
        shape = [int(s) for s in parts[0].lower().replace(",", "x").split("x") if s != ""]
    except ValueError:
        raise InputError("input", f"'{text}'", f"shape '{parts[0]}' is not integers joined by 'x'", "e.g. 3x224x224") from None
    if any(s < 1 for s in shape) or batch < 1:
        raise InputError("input", f"'{text}'", "has a dimension below 1", "use positive sizes (and a batch of at least 1)")
    dtype = parts[1] if len(parts) > 1 and parts[1] else "float32"
    if dtype not in DTYPES:
        raise InputError("input", f"'{text}'", f"dtype '{dtype}' is not supported", f"use one of {', '.join(DTYPES)}")
    spec = {"shape": [batch, *shape], "dtype": dtype}
    if len(parts) == 3:
        try:
            spec["high"] = int(parts[2])
        except ValueError:
            raise InputError("input", f"'{text}'", f"HIGH '{parts[2]}' is not an integer", "e.g. 128:int64:30000") from None
    return spec


def parse_sets(items) -> dict:
    """``["n_layer=2", "act='gelu'"]`` -> ``{"n_layer": 2, "act": "gelu"}`` (values as JSON, else strings)."""
    import json

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("option", f"'{item}'", "is not KEY=VALUE", "e.g. n_layer=2")
        if key.strip() in out:
            raise InputError("option", f"'{key.strip()}'", "is given twice", "give each KEY=VALUE once")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


# ---------------------------------------------------------------------- factories
def load_callable(target: str, what: str = "factory"):
    """``path/to/file.py:name`` or ``package.module:name`` -> the callable (one-line errors)."""
    mod_part, sep, attr = target.rpartition(":")
    if not sep or not mod_part or not attr:
        raise InputError(target, what, "is not FILE.py:FUNCTION or MODULE:FUNCTION", "e.g. my_model.py:build")
    if mod_part.endswith(".py") or "/" in mod_part or Path(mod_part).exists():
        path = Path(mod_part)
        if not path.is_file():
            raise InputError(target, what, f"file '{mod_part}' does not exist", "give the path of a Python file")
        name = f"placer_user_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            sys.modules.pop(name, None)
            raise InputError(target, what, f"importing '{mod_part}' failed ({type(e).__name__}: {e})",
                             "fix the file so that it imports") from e
    else:
        try:
            module = importlib.import_module(mod_part)
        except ImportError as e:
            raise InputError(target, what, f"module '{mod_part}' cannot be imported ({e})",
                             "check the module name and PYTHONPATH") from e
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InputError(target, what, f"'{attr}' is not a function of '{mod_part}'", "name a function defined there")
    return fn


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def make_inputs(specs: list[dict], seed: int, device: str = "cpu") -> list:
    """Real tensors of the recorded shapes: floats standard normal, integers in [0, high) (default 2),
    booleans false. Drawn from ``seed`` on the CPU, then moved."""
    import torch

    gen = torch.Generator().manual_seed(int(seed) + 1)
    out = []
    for s in specs:
        dt = _torch_dtype(s["dtype"])
        shape = tuple(s["shape"])
        if dt.is_floating_point:
            t = torch.randn(shape, generator=gen).to(dt)
        elif dt == torch.bool:
            t = torch.zeros(shape, dtype=torch.bool)
        else:
            t = torch.randint(0, int(s.get("high", 2)), shape, generator=gen, dtype=dt)
        out.append(t.to(device))
    return out


def loss_function(loss: str):
    """The loss applied to the model's output (``None``: capture's default)."""
    import torch
    import torch.nn.functional as F

    from placer.frontends.torch import _default_loss

    def first(out):
        if isinstance(out, dict):
            out = next(iter(out.values()))
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise InputError("loss", loss, f"the model returned a {type(out).__name__}", "return a tensor from forward")
        return out

    if loss == "auto":
        return _default_loss
    if loss == "mean":
        return lambda out: first(out).float().mean()
    if loss == "sum":
        return lambda out: first(out).float().sum()
    if loss == "cross-entropy":
        def ce(out):  # against class 0 everywhere: the cost of the loss, not a meaningful target
            x = first(out)
            x = x.reshape(-1, x.shape[-1])
            return F.cross_entropy(x.float(), torch.zeros(x.shape[0], dtype=torch.long, device=x.device))
        return ce
    if ":" in loss:
        return load_callable(loss, "loss function")
    raise InputError("loss", f"'{loss}'", "is not a loss", f"use one of {', '.join(LOSSES)} or FILE.py:FUNCTION")


def build_factory(recipe: dict, device: str = "cpu"):
    """``(module, example_inputs)`` of a factory recipe (inputs from ``recipe['inputs']`` when given)."""
    import torch

    fn = load_callable(recipe["target"])
    torch.manual_seed(int(recipe.get("seed", 0)))
    try:
        with torch.device(device):
            made = fn(**recipe.get("kwargs", {}))
    except InputError:
        raise
    except Exception as e:
        raise InputError(recipe["target"], "factory", f"raised {type(e).__name__}: {e}",
                         "check the factory and its keyword options") from e
    inputs = None
    if isinstance(made, (tuple, list)) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, inputs = made
        inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    if not isinstance(made, torch.nn.Module):
        raise InputError(recipe["target"], "factory", f"returned a {type(made).__name__}",
                         "return an nn.Module or (module, example_inputs)")
    if recipe.get("inputs"):
        inputs = make_inputs(recipe["inputs"], recipe.get("seed", 0), device)
    elif inputs is None:
        raise InputError(recipe["target"], "inputs", "are not given", "give inputs as SHAPE[:DTYPE] or return (module, inputs) from the factory",
                         kind="inputs")
    else:
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    made.train()
    return made, inputs


def cache_root() -> Path:
    """Where captured graphs are cached (``$PLACER_CACHE_DIR``, else ``~/.cache/placer``): the zoo's
    under ``zoo/``, Hugging Face models' under ``hf/``, the generated families' under ``families/``."""
    return Path(os.environ.get("PLACER_CACHE_DIR") or Path.home() / ".cache" / "placer")


def cached_graph(path: Path | None, capture):
    """The graph cached at ``path`` when it is there and reads, else ``capture()``'s, written there
    (a truncated cache file is rebuilt; ``path`` None: no cache)."""
    from placer.frontends.native import load_graph, save_graph

    if path is not None and path.exists():
        try:
            return load_graph(path)
        except InputError:  # a truncated cache file: rebuild it
            path.unlink(missing_ok=True)
    g = capture()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_graph(g, path)
    return g


def capture_with(recipe: dict, build, name: str | None = None, device: str | None = None):
    """Build the recipe's model with ``build(recipe, device) -> (module, inputs, loss_fn)`` and trace
    its training step; the returned :class:`~placer.frontends.torch.Capture`'s graph carries the
    recipe. Hugging Face and zoo models are built on ``meta`` (shapes only, no memory); user
    factories on the CPU."""
    from placer.frontends.torch import trace_training_step

    device = device or ("cpu" if recipe.get("kind") == "factory" else "meta")
    m, xs, loss_fn = build(recipe, device)
    cap = trace_training_step(m, xs, loss_fn=loss_fn, optimizer=recipe.get("optimizer", "sgd-momentum"),
                              name=name or recipe.get("name") or Path(recipe.get("target", "model").split(":")[0]).stem)
    meta = {**cap.graph.meta, "recipe": recipe}
    cap.graph = cap.graph.replace(meta=meta)
    return cap
