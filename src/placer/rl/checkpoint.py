"""Safe checkpoints: plain state dicts written atomically, read back with
:func:`placer.io.read_checkpoint` (weights only: no pickled code runs on load)."""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError, first_sentence


REQUIRED = {"policy_config": dict, "env_config": dict, "rl_config": dict, "model": dict}


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically (:func:`placer.io.write_checkpoint`)."""
    from placer.io import write_checkpoint

    write_checkpoint(state, path)


def load_checkpoint(path: str | Path) -> dict:
    """Read a Placeto checkpoint (:func:`placer.io.read_checkpoint`, ``weights_only=True``); bad files raise InputError."""
    from placer.io import read_checkpoint
    from placer.rl.reinforce import CHECKPOINT_FORMAT

    path = str(path)
    state = read_checkpoint(path, "policy", "give the file `placer train --out` wrote")
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
