"""What rebuilding a model from a graph file's recipe may run, checked before anything is imported or built.

Running a placement for real rebuilds the model from the recipe the graph file carries
(:mod:`placer.frontends.recipe`). A ``factory`` recipe names Python code, ``FILE.py:FUNCTION`` or
``MODULE:FUNCTION``, and a loss may name another: rebuilding imports that file and calls the function
with the recipe's keyword arguments. A graph file from someone else is therefore code from someone
else. :func:`check_code` refuses, before anything is imported, a recipe whose code does not lie under
a folder the caller allows (``allowed``), unless the caller trusts the graph file (``any_code``).
``zoo`` and ``hf`` recipes name no code (a zoo model, a transformers config class) and need no
allowance.

A factory is the user's own code by definition; placer's built-in models are ``zoo`` and ``hf``
recipes. So whatever is allowed, ``any_code`` included, :func:`locate` refuses a target in
Python's installation (:func:`installation_part`): the standard library, frozen and built-in
modules, any ``site-packages`` or ``dist-packages`` folder (every installed distribution: torch,
numpy, placer's dependencies), any Python's ``lib/pythonX.Y`` and placer's own package. Called with
a graph file's keyword arguments, such a function does whatever it does (``subprocess:getoutput``
runs a shell command), and no allowance could make that safe. Paths are resolved first, so relative
paths and symlinks into those folders are refused too. For the same reason the function must be one
its file defines (``def`` or ``class``; read with :mod:`ast`, nothing run): a name the file imports
(``from subprocess import run``) or assigns is refused. ``any_code`` therefore only stops asking
which of the user's folders the code lies in. A refusal that an allowance lifts (kind
``trust:code:FOLDER``) names only the folder of the user's own file; one that nothing lifts (kind
``trust:installation``) names no allowance. The errors state facts; :mod:`placer.cli.advice` words
each kind's advice for the command line.

Kinds of the errors raised here: ``trust:code:FOLDER``, ``trust:installation``, ``allowed`` (a folder
given as allowed), ``recipe`` (an unknown recipe kind), ``recipe-data`` (a recipe field that capturing
the model again rewrites), ``recipe-seed``, ``input-size`` (inputs too large), ``recipe-tokens`` (an
hf recipe's batch x sequence too large); a target that cannot be found or read carries none.

:func:`check_recipe` checks the recipe's data (kind, inputs and their shapes and dtypes, seed,
optimizer) so that a malformed recipe is one line naming the file and the item, not a traceback from
deep inside torch.
"""
from __future__ import annotations

import functools
import keyword
import math
import os
import re
import sys
from pathlib import Path

from placer.errors import InputError, kind_of

MAX_ELEMENTS = 2**31 - 1  # per input tensor: torch's 32-bit-indexed kernels, 8 GiB of float32
KINDS = ("factory", "hf", "zoo")
_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1}
_INT_MAX = {"int64": 2**63 - 1, "int32": 2**31 - 1}
MAX_TARGET_CHARS = 4096  # a recipe target FILE.py:FUNCTION: a path as long as Linux allows
MAX_SOURCE_BYTES = 16 * 2**20  # a factory's file read (not run) to see that it defines the function


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
        raise InputError(where, item, f"is {kind_of(specs)}, not a list", "capture the model again", kind="recipe-data")
    total = 0
    for k, s in enumerate(specs):
        at = f"{item} #{k}"
        if not isinstance(s, dict):
            raise InputError(where, at, f"is {kind_of(s)}, not an object", "capture the model again", kind="recipe-data")
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
                             "(torch's 32-bit-indexed kernels)", "use a smaller batch or input shape", kind="input-size")
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
                         "use a smaller batch or input shape", kind="input-size")


def check_recipe(recipe, where: str) -> None:
    """The recipe's data, before anything is built (see the module docstring)."""
    from placer.frontends.torch import OPTIMIZERS

    if not isinstance(recipe, dict):
        raise InputError(where, "meta.recipe", f"is {kind_of(recipe)}, not an object", "capture the model again")
    kind = recipe.get("kind")
    if kind not in KINDS:
        raise InputError(where, "recipe kind", f"{str(kind)[:40]!r} is not a known recipe kind ({', '.join(KINDS)})",
                         f"use one of {', '.join(KINDS)} (capture the model again)", kind="recipe")
    opt = recipe.get("optimizer", "sgd-momentum")
    if opt not in OPTIMIZERS:
        raise InputError(where, "recipe optimizer", f"{str(opt)[:40]!r} is not supported", f"use one of {', '.join(OPTIMIZERS)}")
    seed = recipe.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2**32 - 1:
        raise InputError(where, "recipe seed", f"{str(seed)[:40]} is not a whole number from 0 to 2**32-1",
                         "capture the model again with a seed in that range", kind="recipe-seed")
    if kind == "factory":
        if not isinstance(recipe.get("target"), str):
            raise InputError(where, "recipe target", "is not a string", "capture the model again", kind="recipe-data")
        if not isinstance(recipe.get("kwargs", {}), dict):
            raise InputError(where, "recipe kwargs", "is not an object", "capture the model again", kind="recipe-data")
        if not isinstance(recipe.get("loss", "auto"), str):
            raise InputError(where, "recipe loss", "is not a string", "capture the model again", kind="recipe-data")
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
                             "placer allows", "capture the model again with a smaller batch or sequence length",
                             kind="recipe-tokens")


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


# ---------------------------------------------------------------------- where Python itself lives
_PY_LIB = re.compile(r"python\d+(\.\d+)?[a-z]?", re.IGNORECASE)  # lib/python3.11, lib64/python3.12t, Lib/Python311
_LIB = {"lib", "lib64", "lib32", "libx32"}
_PACKAGES = {"site-packages", "dist-packages"}


def _real(p: str | os.PathLike) -> Path | None:
    try:
        return Path(p).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        return None


@functools.lru_cache(maxsize=1)
def _installation_roots() -> tuple[tuple[Path, str], ...]:
    """``(folder, what)`` of this interpreter's standard library, its site-packages folders and
    placer's own package, resolved."""
    import site
    import sysconfig

    roots: list[tuple[str, str]] = []
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        if paths.get(key):
            roots.append((paths[key], "Python's standard library"))
    if getattr(sys, "_stdlib_dir", None):
        roots.append((sys._stdlib_dir, "Python's standard library"))
    roots.append((os.path.dirname(os.__file__), "Python's standard library"))
    for key in ("purelib", "platlib"):
        if paths.get(key):
            roots.append((paths[key], "site-packages (an installed distribution)"))
    try:
        found = list(site.getsitepackages()) + [site.getusersitepackages()]
    except AttributeError:  # an embedded or virtualenv-patched site module
        found = []
    roots += [(f, "site-packages (an installed distribution)") for f in found]
    roots.append((str(Path(__file__).resolve().parents[1]), "placer's own code"))  # src/placer
    out = []
    for folder, what in roots:
        r = _real(folder)
        if r is not None and (r, what) not in out:
            out.append((r, what))
    # the most specific first: site-packages lies inside the standard library's folder
    return tuple(sorted(out, key=lambda rw: -len(rw[0].parts)))


def installation_part(path: Path) -> str | None:
    """What of a Python installation ``path`` (resolved) lies in: this interpreter's standard library
    or site-packages, placer's own package, any ``site-packages`` / ``dist-packages`` folder, or any
    Python's ``lib/pythonX.Y``; None for anything else (the user's own code)."""
    for root, what in _installation_roots():
        if path == root or root in path.parents:
            return what
    parts = path.parts
    if any(part.lower() in _PACKAGES for part in parts):
        return "site-packages (an installed distribution)"
    for up, part in zip(parts, parts[1:]):
        if up.lower() in _LIB and _PY_LIB.fullmatch(part):
            return "a Python installation's library"
    return None


# ---------------------------------------------------------------------- where a target's code lies
def _refuse_outright(where: str, item: str, what: str, at: str | None = None) -> InputError:
    """The refusal of a target in Python's installation: no allowance lifts it, and none is named."""
    return InputError(where, item, f"is in {what}{f' ({at})' if at else ''}, not your own code; placer never calls "
                      "library code from a graph file's recipe, whatever is allowed",
                      "capture your own model from a Python file of yours; placer's built-in models are zoo and hf "
                      "recipes", kind="trust:installation")


def _module_file(mod: str, where: str, item: str) -> tuple[Path, Path]:
    """``(root, file)`` of ``MODULE``, found without importing anything: ``root`` is its top-level
    package's folder (or its file), ``file`` the source file holding the function. The lookup is
    the one the import system makes (the top-level name on ``sys.path`` by ``find_spec``, then each
    submodule in its parent's folder: a package, then an extension module, then source, then bytecode)."""
    import importlib.machinery as machinery
    import importlib.util

    parts = mod.split(".")
    if not all(p.isidentifier() for p in parts):
        raise InputError(where, item, f"'{mod[:80]}' is not a module name", "give FILE.py:FUNCTION or MODULE:FUNCTION")
    if parts[0] in sys.builtin_module_names or parts[0] in getattr(sys, "stdlib_module_names", ()):
        raise _refuse_outright(where, item, "Python's standard library")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):  # __main__ without a spec, a broken finder
        spec = None
    if spec is None:
        raise InputError(where, item, f"module '{parts[0]}' cannot be found (nothing is imported to look)",
                         "give the model's file as FILE.py:FUNCTION, or capture the model again")
    if spec.origin in ("built-in", "frozen"):
        raise _refuse_outright(where, item, f"Python's {spec.origin} modules")
    locs = list(spec.submodule_search_locations or [])
    if spec.submodule_search_locations is not None and len(locs) != 1:
        raise InputError(where, item, f"'{parts[0]}' is a namespace package over {len(locs)} folders",
                         "give the model's file as FILE.py:FUNCTION")
    if not locs and not (spec.has_location and spec.origin and os.path.isabs(spec.origin)):
        raise InputError(where, item, f"module '{parts[0]}' has no file placer can check",
                         "give the model's file as FILE.py:FUNCTION")
    root = _real(locs[0] if locs else spec.origin)
    if root is None:
        raise InputError(where, item, "cannot be resolved to a file", "give the model's file as FILE.py:FUNCTION")
    part = installation_part(root)
    if part:
        raise _refuse_outright(where, item, part, str(root))
    file = Path(spec.origin) if spec.has_location and spec.origin else root  # a namespace package: its folder
    folder = root if locs else None
    compiled = tuple(machinery.EXTENSION_SUFFIXES)
    for name in parts[1:]:
        if folder is None:
            raise InputError(where, item, f"module '{mod[:80]}' cannot be found", "give the model's file as FILE.py:FUNCTION")
        sub, nxt = folder / name, None
        if _is(sub, "is_dir"):
            for suffix in compiled + (".py", ".pyc"):
                if _is(sub / f"__init__{suffix}", "is_file"):
                    nxt = (sub / f"__init__{suffix}", sub)
                    break
        if nxt is None:
            for suffix in compiled + (".py", ".pyc"):
                if _is(folder / f"{name}{suffix}", "is_file"):
                    nxt = (folder / f"{name}{suffix}", None)
                    break
        if nxt is None and _is(sub, "is_dir"):
            nxt = (sub, sub)  # a namespace portion: no file of its own
        if nxt is None:
            raise InputError(where, item, f"module '{mod[:80]}' cannot be found under {root}", "capture the model again")
        file, folder = nxt
    return root, file


def locate(target: str, where: str, what: str = "factory") -> tuple[Path, Path]:
    """``(root, file)`` of a recipe target, found without importing or running anything: ``file`` is
    the Python source the function is read from, ``root`` what must lie under an allowed folder (the
    file itself, or a module's top-level package). Refuses, in one line, a malformed target, one
    naming code in Python's installation (:func:`installation_part`; no allowance lifts it), a missing
    or compiled file, and a function the file does not define itself (:func:`check_defined`).

    Which form a target takes follows :func:`placer.frontends.recipe.load_callable`: a path when it
    ends in ``.py``, holds a ``/`` or names an existing file, else a module."""
    item = f"recipe {what} '{target[:200]}'"
    if len(target) > MAX_TARGET_CHARS:
        raise InputError(where, f"recipe {what}", f"is {len(target):,} characters long, more than "
                         f"{MAX_TARGET_CHARS:,}, the most placer allows", "capture the model again", kind="recipe-data")
    if not target.isprintable():
        raise InputError(where, item, "holds a control character (a NUL byte, a newline, a terminal escape)",
                         "capture the model again", kind="recipe-data")
    mod, sep, attr = target.rpartition(":")
    if not sep or not mod or not attr.isidentifier() or keyword.iskeyword(attr):
        raise InputError(where, item, "is not FILE.py:FUNCTION or MODULE:FUNCTION", "capture the model again",
                         kind="recipe-data")
    if mod.endswith(".py") or "/" in mod or os.sep in mod or _exists(mod):
        root = _real(mod)
        if root is None:
            raise InputError(where, item, "cannot be resolved to a file (a symlink loop?)", "give the model's file")
        part = installation_part(root)
        if part:
            raise _refuse_outright(where, item, part, str(root))
        if root.suffix != ".py":
            raise InputError(where, item, f"'{mod[:80]}' is not a Python source file (.py)", "give the model's .py file")
        if not _is(root, "is_file"):
            raise InputError(where, item, f"file '{mod[:80]}' does not exist", "give the path of your model's Python file")
        file = root
    else:
        root, file = _module_file(mod, where, item)
    real = _real(file)
    part = installation_part(real) if real is not None else "an unresolvable place"
    if part:
        raise _refuse_outright(where, item, part, str(real))
    if real.suffix != ".py" or not _is(real, "is_file"):
        raise InputError(where, item, f"'{real}' is not Python source placer can read", "give the model's .py file")
    check_defined(real, attr, where, item)
    return root, real


def _exists(p: str) -> bool:
    return _is(p, "exists")


def _is(p, test: str) -> bool:
    """``Path(p).exists()`` / ``is_file()`` / ``is_dir()``, False where the OS cannot say (a name too
    long, a NUL byte, no permission) instead of an exception."""
    try:
        return getattr(Path(p), test)()
    except (OSError, ValueError):
        return False


def check_defined(file: Path, name: str, where: str, item: str) -> None:
    """``name`` is a function or class ``file`` defines itself: every top-level binding of it (inside
    top-level ``if`` / ``try`` / ``with`` blocks too) is a ``def`` or ``class``. Read from the source
    with :mod:`ast`, nothing run. A name the file imports (``from subprocess import run``) or assigns
    (``run = os.system``) would make the recipe call that library function, so it is refused."""
    import ast

    try:
        size = file.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise InputError(where, item, f"'{file.name}' is {size:,} bytes, more than {MAX_SOURCE_BYTES:,}, the "
                             "most placer reads to check a factory", "give a smaller Python file")
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except InputError:
        raise
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise InputError(where, item, f"'{file.name}' cannot be read as Python source ({type(e).__name__})",
                         "fix the file so that it parses") from None
    kinds = _bindings(tree, name)
    imported = [k[7:] for _, k in kinds if k.startswith("import ")]
    defs = [line for line, k in kinds if k == "def"]
    if imported:
        raise InputError(where, item, f"'{name}' is imported by {file.name} from {imported[0]}, not defined there: "
                         f"calling it runs {imported[0]}'s code", "name the file that defines the function with def")
    if not defs or any(k == "assign" for _, k in kinds):
        raise InputError(where, item, f"'{name}' is not a function or class {file.name} defines with def or class",
                         "name a function your file defines with def")
    if any(k == "*" and line > min(defs) for line, k in kinds):
        raise InputError(where, item, f"'{name}' may be replaced by a later `from ... import *` in {file.name}",
                         "import names explicitly, or define the function after the import")


def _bindings(tree, name: str) -> list[tuple[int, str]]:
    """``(line, how)`` of every module-level binding of ``name`` in ``tree``: ``def`` (a def or class),
    ``import MODULE``, ``*`` (a star import, which may bind it) or ``assign`` (anything else: an
    assignment, a loop or ``with`` target, ``del``, an except or match name, ``global`` in a function)."""
    import ast

    out: list[tuple[int, str]] = []
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def visit(node):
        for c in ast.iter_child_nodes(node):
            line = getattr(c, "lineno", getattr(node, "lineno", 0))
            if isinstance(c, scopes):
                if c.name == name:
                    out.append((line, "def"))
                continue  # its body binds names of its own
            if isinstance(c, ast.Lambda):
                continue
            if isinstance(c, (ast.Import, ast.ImportFrom)):
                for a in c.names:
                    if a.name == "*":
                        out.append((line, "*"))
                    elif (a.asname or a.name.split(".")[0]) == name:
                        out.append((line, f"import {getattr(c, 'module', None) or a.name}"))
                continue
            if ((isinstance(c, ast.Name) and c.id == name and not isinstance(c.ctx, ast.Load))
                    or (isinstance(c, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and c.name == name)
                    or (isinstance(c, ast.MatchMapping) and c.rest == name)):
                out.append((line, "assign"))
            visit(c)

    visit(tree)
    out += [(n.lineno, "assign") for n in ast.walk(tree) if isinstance(n, ast.Global) and name in n.names]
    return out


def check_allowed(folders) -> list[Path]:
    """The folders a caller allows a recipe's code in (:func:`check_code`'s ``allowed``), resolved:
    each a real folder (an empty path is refused, not taken as the working folder) outside Python's
    installation, where no recipe's code may lie. Errors name the parameter ``allowed`` (kind ``allowed``)."""
    out = []
    for d in folders:
        item = f"'{d}'"
        if not str(d).strip():
            raise InputError("allowed", item, "is an empty path", "e.g. . for the working folder", kind="allowed")
        if not str(d).isprintable():
            raise InputError("allowed", item, "holds a control character", "name a folder", kind="allowed")
        r = _real(d)
        if r is None or not _is(r, "is_dir"):
            raise InputError("allowed", item, "is not a folder", "give a folder holding the model's Python file",
                             kind="allowed")
        part = installation_part(r)
        if part:
            raise InputError("allowed", item, f"is in {part} ({r}), where placer never runs a recipe's code",
                             "give the folder of your own model's Python file", kind="allowed")
        out.append(r)
    return out


def check_code(recipe: dict, where: str, allowed, any_code: bool = False) -> None:
    """Refuse, before anything is imported, a recipe naming code outside the folders ``allowed``
    (``any_code``: any folder of the user's own), and, whatever is allowed, code in Python's
    installation or a function its file does not define (see the module docstring). A target outside
    the allowed folders is refused with kind ``trust:code:FOLDER``, FOLDER the one to allow."""
    roots = check_allowed(allowed)
    for what, target in code_targets(recipe):
        root, file = locate(target, where, what)
        if any_code or all(any(p == r or r in p.parents for r in roots) for p in (root, file)):
            continue
        folder = root if _is(root, "is_dir") else root.parent
        raise InputError(where, f"recipe {what} '{target}'",
                         "is Python code that rebuilding the model would import and run, and it does not lie "
                         "under an allowed folder", f"if you trust this graph file, allow its folder {folder}",
                         kind=f"trust:code:{folder}")
