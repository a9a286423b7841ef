"""The files a learned method's ``--set`` parameters name, read and opened here for the method,
which takes objects only (methods know no files): ``policy=FILE`` (a checkpoint ``placer policy
train`` or the bench wrote, validated by the method's ``load_policy``), ``encoder=FILE`` (Mars: a
checkpoint ``placer pretrain`` wrote) and ``log=FILE`` (one JSON line per training update, as
the method's ``progress`` callback)."""

from __future__ import annotations

from placer.errors import InputError


def open_learned_params(method: str, params: dict[str, str]) -> dict:
    """``params`` with the file parameters above replaced by what the method takes."""
    from placer.io import check_output_path, read_checkpoint
    from placer.methods import METHODS
    from placer.methods.learned.protocol import LEARNED

    out = dict(params)
    fields = set(METHODS[method].config.__dataclass_fields__) if method in METHODS else set()
    if "policy" in out and "policy" in fields:
        where = out["policy"]
        state = read_checkpoint(where, "policy", f"give a checkpoint that `placer policy train -m {method}` wrote")
        out["policy"] = LEARNED[method].load_policy(state, where=where) if method in LEARNED else state
    if "encoder" in out and "encoder" in fields:
        out["encoder"] = read_checkpoint(out["encoder"], "pre-trained encoder", "give the file `placer pretrain --out` wrote")
    if "log" in out:
        if "progress" not in fields:
            raise InputError("--set", "log", f"is not a parameter of {method} (it logs no training)",
                             "leave it out")
        check_output_path(out["log"], "--set log")
        out["progress"] = progress_log(out.pop("log"))[1]
    return out


def progress_log(path):
    """(the JSON-lines log at ``path``, or None; the progress callback that writes one record a line,
    numbers that are not finite as null); the log is kept when the command is interrupted."""
    import math

    from placer.cli.guard import keep_on_interrupt
    from placer.io import JsonLines

    if path is None:
        return None, None
    lines = JsonLines(path)
    keep_on_interrupt(f"the log {path} (one line per finished episode)")

    def write(record: dict) -> None:
        lines.write({k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()})

    return lines, write


def set_files(items: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The files ``--set KEY=VALUE`` items name, before any is opened: (inputs, outputs), each
    ``{"--set KEY": FILE}`` (inputs: policy, encoder; output: log), for
    :func:`placer.io.check_outputs_spare_inputs`."""
    inputs, outputs = {}, {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if sep and key in ("policy", "encoder"):
            inputs[f"--set {key}"] = value
        elif sep and key == "log":
            outputs[f"--set {key}"] = value
    return inputs, outputs
