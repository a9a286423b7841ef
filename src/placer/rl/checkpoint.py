"""Safe checkpoints: plain state dicts written atomically, read back with
``torch.load(weights_only=True)`` (no pickled code runs on load)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from placer.errors import InputError


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically (a temporary file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint with ``weights_only=True``; bad files raise InputError."""
    from placer.rl.reinforce import CHECKPOINT_FORMAT

    path = str(path)
    if not os.path.exists(path):
        raise InputError(path, "policy", "does not exist", "give the file `placer train --out` wrote")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise InputError(path, "policy", f"is not a loadable checkpoint ({type(e).__name__}: {e})",
                         "give the file `placer train --out` wrote") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise InputError(path, "policy", "is not a Placeto checkpoint", "give the file `placer train --out` wrote")
    return state
