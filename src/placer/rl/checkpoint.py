"""Safe checkpoints: plain state dicts written atomically, read back with
``torch.load(weights_only=True)`` (no pickled code runs on load)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import torch

from placer.errors import InputError, first_sentence


REQUIRED = {"policy_config": dict, "env_config": dict, "rl_config": dict, "model": dict}


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically (a temporary file in the same folder, then rename; the
    file gets the user's umask)."""
    from placer.frontends.native import atomic_writer

    with atomic_writer(path) as f:
        torch.save(state, f)


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint with ``weights_only=True``; bad files raise InputError."""
    from placer.rl.reinforce import CHECKPOINT_FORMAT

    from placer.frontends.native import read_input_bytes

    path = str(path)
    if not os.path.exists(path):
        raise InputError(path, "policy", "does not exist", "give the file `placer train --out` wrote")
    raw = read_input_bytes(path)  # a regular file within the input limit (a FIFO would block torch.load)
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # torch's message runs over many lines, with colour codes: keep its gist
        why = ("it holds pickled objects, which weights_only loading refuses" if type(e).__name__ == "UnpicklingError"
               else f"{type(e).__name__}: {first_sentence(e)}")
        raise InputError(path, "policy", f"is not a loadable checkpoint ({why})",
                         "give the file `placer train --out` wrote") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise InputError(path, "policy", "is not a Placeto checkpoint", "give the file `placer train --out` wrote")
    for key, kind in REQUIRED.items():
        if not isinstance(state.get(key), kind):
            raise InputError(path, f"policy '{key}'", "is missing or of the wrong type (a damaged or foreign checkpoint)",
                             "give the file `placer train --out` wrote, or train again")
    try:
        from placer.rl.policy import env_config, policy_config

        policy_config(state), env_config(state)
    except (TypeError, ValueError) as e:
        raise InputError(path, "policy configuration", f"cannot be read ({first_sentence(e)})",
                         "give the file `placer train --out` wrote, or train again") from None
    return state
