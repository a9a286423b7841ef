"""Policy files for the callers that read and write them (the CLI, the bench): plain state dicts
written atomically and read back with :func:`placer.io.read_checkpoint` (weights only: no pickled
code runs on load). Methods take the objects, never the files."""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError
from placer.rl.policy import PlacetoPolicy


def load_policy(path: str | Path) -> PlacetoPolicy:
    """The Placeto policy in the file ``path`` (:func:`placer.io.read_checkpoint`), labelled with the
    path; bad files raise InputError."""
    from placer.io import read_checkpoint

    path = str(path)
    try:
        state = read_checkpoint(path, "policy", "give a policy file Placeto's trainer wrote")
    except InputError as e:
        raise e.at(e.where, kind="policy:placeto") from None
    return PlacetoPolicy.from_state(state, where=path, label=path)


def load_checkpoint(path: str | Path) -> dict:
    """The state dict of a Placeto checkpoint file, checked (:func:`load_policy`)."""
    return load_policy(path).state
