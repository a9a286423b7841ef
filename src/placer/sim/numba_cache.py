"""A numba cache folder that can be written, found before the first ``@njit(cache=True)``.

numba keeps compiled kernels next to their source (``__pycache__``), else in ``$NUMBA_CACHE_DIR``,
else in the user's cache folder. Where none of them can be written (placer installed read-only,
a home without a writable cache, ``$NUMBA_CACHE_DIR`` unwritable), numba refuses to define any
cached function and every simulating command used to end in a traceback. :func:`ensure_writable_cache`
asks numba's own locator search first; only when it finds nothing does it point numba at a fresh
temporary folder (``$NUMBA_CACHE_DIR`` too, for worker processes), removed at exit: the kernels are
then compiled once per run instead of once per install, and nothing else changes.
"""

from __future__ import annotations

import os

_checked: str | None = None


def _probe():  # pragma: no cover - never called: numba looks up where its cache would live
    return None


def ensure_writable_cache() -> str:
    """Where numba will cache placer's kernels: 'source', 'configured' or the temporary folder used."""
    global _checked
    if _checked is not None:
        return _checked
    from numba.core import caching, config

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
