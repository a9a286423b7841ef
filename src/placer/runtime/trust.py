"""What a graph file's recipe may make ``placer run`` do, checked before anything is imported or built.

Running a placement for real rebuilds the model from the recipe the graph file carries
(:mod:`placer.frontends.recipe`). A ``factory`` recipe names Python code, ``FILE.py:FUNCTION`` or
``MODULE:FUNCTION``, and a loss may name another: rebuilding imports that file and calls the function
with the recipe's keyword arguments. A graph file from someone else is therefore code from someone
else. :func:`check_code` refuses, before anything is imported, a recipe whose code does not lie under
a folder the user allows (``placer run --allow-code DIR``), unless the user trusts the file outright
(``--allow-any-code``). ``zoo`` and ``hf`` recipes name no code (a zoo model, a transformers config
class) and need no allowance.

:func:`check_recipe` checks the recipe's data (kind, inputs and their shapes and dtypes, seed,
optimizer) so that a malformed recipe is one line naming the file and the item, not a traceback from
deep inside torch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from placer.errors import InputError, kind_of

MAX_ELEMENTS = 2**31 - 1  # per input tensor: torch's 32-bit-indexed kernels, 8 GiB of float32
KINDS = ("factory", "hf", "zoo")
_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1}
_INT_MAX = {"int64": 2**63 - 1, "int32": 2**31 - 1}


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_inputs(specs, where: str, item: str = "recipe inputs") -> None:
    """Input specs (``[{"shape": [...], "dtype": ..., "high": N}]``, batch included): every dimension a
    positive integer, at most :data:`MAX_ELEMENTS` elements per input and, in all, at most half of
    this machine's memory (inputs are made for real on the CPU), a supported dtype, ``high`` (integer
    dtypes only) from 1 to the dtype's largest value."""
    from placer.frontends.recipe import DTYPES

    if not isinstance(specs, list):
        raise InputError(where, item, f"is {kind_of(specs)}, not a list", "capture the model again with `placer capture`")
    total = 0
    for k, s in enumerate(specs):
        at = f"{item} #{k}"
        if not isinstance(s, dict):
            raise InputError(where, at, f"is {kind_of(s)}, not an object", "capture the model again with `placer capture`")
        shape, dtype = s.get("shape"), s.get("dtype", "float32")
        if dtype not in DTYPES:
            raise InputError(where, f"{at} dtype", f"{dtype!r} is not a supported dtype", f"use one of {', '.join(DTYPES)}")
        if (not isinstance(shape, list) or not shape
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)):
            raise InputError(where, f"{at} shape", f"{str(shape)[:80]} is not a list of positive integers",
                             "e.g. [16, 3, 224, 224] (batch first)")
        n = math.prod(shape)
        if n > MAX_ELEMENTS:
            raise InputError(where, f"{at} shape {'x'.join(map(str, shape))[:80]}",
                             f"holds {n:,} elements, more than {MAX_ELEMENTS:,}, the most placer allows per input "
                             "(torch's 32-bit-indexed kernels)", "use a smaller --batch or input shape")
        total += n * _BYTES[dtype]
        if "high" in s:
            high = s["high"]
            if dtype not in _INT_MAX:
                raise InputError(where, f"{at} high", f"applies to integer inputs, not {dtype}",
                                 "give HIGH only with int64 or int32, e.g. 128:int64:30000")
            if not isinstance(high, int) or isinstance(high, bool) or not 1 <= high <= _INT_MAX[dtype]:
                raise InputError(where, f"{at} high", f"{str(high)[:40]} is not a whole number from 1 to "
                                 f"{_INT_MAX[dtype]:,} ({dtype})", "inputs are drawn from [0, HIGH): e.g. 128:int64:30000")
    ram = physical_memory()
    if ram and total > ram // 2:
        from placer.io import human_size

        raise InputError(where, item, f"take {human_size(total)}, more than half of this machine's memory "
                         f"({human_size(ram)}), the most placer allows (inputs are made for real on the CPU)",
                         "use a smaller --batch or input shape")


def check_recipe(recipe, where: str) -> None:
    """The recipe's data, before anything is built (see the module docstring)."""
    from placer.frontends.torch import OPTIMIZERS

    if not isinstance(recipe, dict):
        raise InputError(where, "meta.recipe", f"is {kind_of(recipe)}, not an object", "capture the model again")
    kind = recipe.get("kind")
    if kind not in KINDS:
        raise InputError(where, "recipe kind", f"{str(kind)[:40]!r} is not a known recipe kind",
                         f"use one of {', '.join(KINDS)} (capture the model with `placer capture`)")
    opt = recipe.get("optimizer", "sgd-momentum")
    if opt not in OPTIMIZERS:
        raise InputError(where, "recipe optimizer", f"{str(opt)[:40]!r} is not supported", f"use one of {', '.join(OPTIMIZERS)}")
    seed = recipe.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2**32 - 1:
        raise InputError(where, "recipe seed", f"{str(seed)[:40]} is not a whole number from 0 to 2**32-1",
                         "capture the model again with `placer capture --seed N`")
    if kind == "factory":
        if not isinstance(recipe.get("target"), str):
            raise InputError(where, "recipe target", "is not a string", "capture the model again with `placer capture`")
        if not isinstance(recipe.get("kwargs", {}), dict):
            raise InputError(where, "recipe kwargs", "is not an object", "capture the model again with `placer capture`")
        if not isinstance(recipe.get("loss", "auto"), str):
            raise InputError(where, "recipe loss", "is not a string", "capture the model again with `placer capture`")
    elif not isinstance(recipe.get("name"), str):
        raise InputError(where, f"{kind} recipe name", "is not a string", "capture the model again")
    if kind == "factory" and recipe.get("inputs"):
        check_inputs(recipe["inputs"], where)
    if kind == "hf":
        for key in ("batch", "seq"):
            v = recipe.get(key, 1)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(where, f"hf recipe {key}", f"{str(v)[:40]} is not a positive integer", "capture the model again")
        n = int(recipe.get("batch", 8)) * int(recipe.get("seq", 128))
        if n > MAX_ELEMENTS:
            raise InputError(where, "hf recipe batch x seq", f"is {n:,} tokens, more than {MAX_ELEMENTS:,}, the most "
                             "placer allows", "capture the model again with a smaller --batch or --seq")


def code_targets(recipe: dict) -> list[tuple[str, str]]:
    """``(what, target)`` of every piece of code rebuilding ``recipe`` would import: a factory and a
    loss given as ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION``."""
    from placer.frontends.recipe import LOSSES

    if recipe.get("kind") != "factory":
        return []
    out = [("factory", recipe["target"])]
    loss = recipe.get("loss", "auto")
    if loss not in LOSSES and ":" in loss:
        out.append(("loss function", loss))
    return out


def code_file(target: str) -> Path | None:
    """The file ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` would be imported from, found without
    importing anything (a module's top-level package decides); None when there is none (a built-in
    or missing module, a malformed target)."""
    import importlib.util

    mod, sep, _ = target.rpartition(":")
    if not sep or not mod:
        return None
    if mod.endswith(".py") or "/" in mod or os.sep in mod:
        return Path(mod).resolve()
    top = mod.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: where its folder is
        locs = list(spec.submodule_search_locations)
        return Path(locs[0]).resolve() if len(locs) == 1 else None
    return Path(spec.origin).resolve() if spec.origin and os.path.isabs(spec.origin) else None


def check_code(recipe: dict, where: str, allowed: list[str | os.PathLike], any_code: bool = False) -> None:
    """Refuse, before anything is imported, a recipe naming code outside the folders ``allowed``
    (see the module docstring); ``any_code`` allows all."""
    if any_code:
        return
    roots = [Path(a).resolve() for a in allowed]
    for what, target in code_targets(recipe):
        f = code_file(target)
        if f is not None and any(f == r or r in f.parents for r in roots):
            continue
        place = f"{f.parent}" if f is not None else "a folder you name"
        raise InputError(where, f"recipe {what} '{target}'",
                         "is Python code that `placer run` would import and run, and it is not under a folder you "
                         "allow", f"if you trust this graph file, add --allow-code {place} (or --allow-any-code)")
