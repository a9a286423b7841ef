"""A numba cache folder that can be written, found before the first ``@njit(cache=True)``; the simulator's
kernels keyed on all its compiled modules.

numba keeps compiled kernels next to their source (``__pycache__``), else in ``$NUMBA_CACHE_DIR``,
else in the user's cache folder. Where none of them can be written (placer installed read-only,
a home without a writable cache, ``$NUMBA_CACHE_DIR`` unwritable), numba refuses to define any
cached function and every simulating command used to end in a traceback. :func:`ensure_writable_cache`
asks numba's own locator search first; only when it finds nothing does it point numba at a fresh
temporary folder (``$NUMBA_CACHE_DIR`` too, for worker processes), removed at exit: the kernels are
then compiled once per run instead of once per install, and nothing else changes.

numba keys a cached function on its own source file only, while a compiled function's cache holds
the code of every compiled function it calls: a kernel of :mod:`placer.sim.kernel` cached before an
edit of :mod:`placer.sim.loop` would load the old loop. So the simulator's kernels
(:func:`_install_sim_stamp`) are keyed on every module of this folder that holds compiled code: an
edit of any of them compiles them all again, as an edit of the one module that held them all did.
"""

from __future__ import annotations

import functools
import hashlib
import os

_checked: str | None = None


def _probe():  # pragma: no cover - never called: numba looks up where its cache would live
    return None


_HERE = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def _sim_stamp(files: tuple) -> str:
    """A hash of the simulator's compiled modules; ``files``: their (path, mtime, size), the cache key."""
    h = hashlib.sha256()
    for path, _, _ in files:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _compiled_modules() -> tuple:
    """(path, mtime, size) of each module of placer.sim that holds numba-compiled code (read once per
    process, as numba reads a function's source stamp once, when the function is defined)."""
    out = []
    for name in sorted(os.listdir(_HERE)):
        path = os.path.join(_HERE, name)
        if name.endswith(".py") and name != "numba_cache.py":
            with open(path, "rb") as f:
                if b"njit" not in f.read():
                    continue
            st = os.stat(path)
            out.append((path, st.st_mtime, st.st_size))
    return tuple(out)


def _install_sim_stamp(caching) -> None:
    """Key the cache of every compiled function defined in placer.sim on all the folder's compiled
    modules (see the module docstring): a locator ahead of each of numba's source-file locators, for
    files of this folder only, with the same cache folder and a stamp over those modules. Where numba
    has no such list (another numba), its per-file stamp stays."""
    classes = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
    mixin = getattr(caching, "_SourceFileBackedLocatorMixin", None)
    if not isinstance(classes, list) or mixin is None:
        return
    ours = []
    for base in classes:
        if not (isinstance(base, type) and issubclass(base, mixin)) or getattr(base, "_placer_sim", False):
            continue

        def from_function(cls, py_func, py_file, _base=base):
            if os.path.dirname(os.path.abspath(py_file)) != _HERE:
                return None
            return _base.from_function.__func__(cls, py_func, py_file)  # numba's, making one of ours

        ours.append(type(f"PlacerSim{base.__name__}", (base,), {
            "_placer_sim": True, "from_function": classmethod(from_function),
            "get_source_stamp": lambda self: _sim_stamp(_compiled_modules())}))
    classes[:0] = ours


def ensure_writable_cache() -> str:
    """Where numba will cache placer's kernels: 'source', 'configured' or the temporary folder used."""
    global _checked
    if _checked is not None:
        return _checked
    from numba.core import caching, config

    _install_sim_stamp(caching)

    try:
        caching.FunctionCache(_probe)  # the same locator search numba runs for every cache=True function
        _checked = "configured" if config.CACHE_DIR else "source"
        return _checked
    except RuntimeError:
        pass
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="placer-numba-cache-")
    atexit.register(shutil.rmtree, folder, True)
    config.CACHE_DIR = folder
    os.environ["NUMBA_CACHE_DIR"] = folder
    _checked = folder
    return folder
