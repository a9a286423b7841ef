"""The one place placer reads and writes files: bounded reads, atomic writes, safe checkpoints.

Every input goes through :func:`read_input_bytes` (a regular file only, never more than
:func:`max_input_bytes` of it or of what it gunzips to); every output through :func:`atomic_writer`
(a temporary file renamed into place, with the user's umask), each output of a command checked
first against its inputs (:func:`check_outputs_spare_inputs`: never overwrite one); every checkpoint through
:func:`read_checkpoint` (``torch.load(weights_only=True)`` on bytes read as above, the only
``torch.load`` in the package) and :func:`write_checkpoint`; every JSON-lines log through
:class:`JsonLines`. Bad files raise :class:`placer.errors.InputError` naming the file, the item and
the fix. The CLI and the bench use this module; methods never do (they take and return objects).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import stat
import tempfile
import warnings
import zlib
from pathlib import Path
from typing import Any, Mapping

from placer.errors import InputError, first_sentence

MAX_INPUT_ENV = "PLACER_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 256 * 2**20  # an input file, or what a .gz holds, larger than this is refused
_max_input_override: int | None = None  # set by `placer --max-input-size`
_SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20,
               "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40}


def parse_size(text: str, where: str) -> int:
    """``'512MiB'``, ``'2G'``, ``'1000000'`` -> bytes; anything else raises InputError naming ``where``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS or float(m.group(1)) * _SIZE_UNITS[unit] < 1:
        raise InputError(where, repr(str(text)), "is not a size", "give bytes or a size like 512MiB or 2GiB")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def set_max_input_bytes(n: int | None) -> None:
    """Raise (or lower) the input size limit for this process; None: back to $PLACER_MAX_INPUT_BYTES or the default."""
    global _max_input_override
    _max_input_override = n


def max_input_bytes() -> int:
    if _max_input_override is not None:
        return _max_input_override
    env = os.environ.get(MAX_INPUT_ENV)
    return parse_size(env, f"${MAX_INPUT_ENV}") if env else DEFAULT_MAX_INPUT_BYTES


def human_size(n: float) -> str:
    """Bytes as people read them: '512 bytes', '3.5 KiB', '256 MiB', '2 GiB' (never '0 MiB')."""
    if n < 1024:
        return f"{n:,.0f} byte{'' if n == 1 else 's'}"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}".replace(".0 ", " ")
    return f"{n:,.1f} PiB"  # pragma: no cover


def _too_big(path: str, what: str, limit: int) -> InputError:
    return InputError(path, "file", f"{what} more than the input limit of {human_size(limit)}",
                      f"raise the limit (set_max_input_bytes, or ${MAX_INPUT_ENV}) if the file is genuine",
                      kind="input-limit")


def read_input_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of an input file, gunzipped when gzip'd, read safely: only a regular file (a FIFO,
    device or socket could block or never end), never more than :func:`max_input_bytes` of it or
    of what it decompresses to. Anything wrong raises InputError naming the file."""
    path = os.fspath(path)
    if not path:
        raise InputError("''", "path", "is empty", "give a file path")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    except FileNotFoundError:
        raise InputError(path, "file", "does not exist", "check the path") from None
    except IsADirectoryError:
        raise InputError(path, "file", "is a directory", "give a file") from None
    except NotADirectoryError:
        raise InputError(path, "file", "is under something that is not a folder", "check the path") from None
    except OSError as e:
        raise InputError(path, "file", f"cannot be read ({e.strerror})", "check its permissions") from None
    limit = max_input_bytes()
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(path, "file", "is a directory", "give a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, "file", "is not a regular file (a pipe, device or socket)",
                             "save the input to a file and give its path")
        if st.st_size > limit:
            raise _too_big(path, f"is {human_size(st.st_size)},", limit)
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(limit + 1)
    except OSError as e:
        raise InputError(path, "file", f"cannot be read ({e.strerror})", "check the file") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise _too_big(path, "is", limit)
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, path, limit)
    return raw


def _gunzip(raw: bytes, path: str, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes; a stream that does not start like JSON is refused at once."""
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as z:
            while True:
                chunk = z.read(1 << 20)
                if not chunk:
                    break
                out += chunk
                head = bytes(out[:4096]).lstrip()
                if head and head[:1] not in (b"{", b"["):
                    raise InputError(path, "file", "is gzip'd but does not hold JSON",
                                     "give a gzip'd native JSON graph, cluster or placement")
                if len(out) > limit:
                    raise _too_big(path, "decompresses to", limit)
    except (OSError, EOFError, zlib.error):
        raise InputError(path, "file", "is a truncated or corrupt gzip file", "re-create or re-download it") from None
    return bytes(out)


ACCEPTED_GRAPHS = ("give a native placer JSON (.json or .json.gz), a dnn-partitioning JSON, a PipeDream graph.txt "
                   "or a built-in name (`placer zoo list`)")


def read_json(path: str | os.PathLike) -> Any:
    """Read JSON or gzip'd JSON; a missing, truncated, malformed, hostile or non-JSON file raises InputError."""
    path = os.fspath(path)
    return parse_json(read_input_bytes(path), path)


def parse_json(raw: bytes, path: str) -> Any:
    """JSON from the bytes of ``path``; text that is not JSON at all is named as such, with the formats accepted."""
    head = raw[:4096].lstrip()
    if head[:1] not in (b"{", b"["):
        suffix = Path(path).suffix.lower()
        what = "is empty" if not head else f"is not JSON{f' (a {suffix} file)' if suffix not in ('', '.json', '.gz') else ''}"
        raise InputError(path, "file", what, ACCEPTED_GRAPHS)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(path, "file", "is not UTF-8 text", "give a JSON file") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"line {e.lineno} column {e.colno}", f"is not valid JSON ({e.msg})",
                         "fix the file or re-create it (it may be truncated)") from None
    except RecursionError:
        raise InputError(path, "file", "is nested too deeply to be a placer file", "give a graph, cluster or placement file") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        why = "an integer of thousands of digits" if "digits" in str(e) else first_sentence(e)
        raise InputError(path, "file", f"holds a value that cannot be read ({why})", "fix the file") from None


def _mode_for_new_file(path: Path) -> int:
    """An existing file keeps its mode; a new one gets 0666 less the umask, as open() would give it."""
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    mask = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    mask = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    if mask is None:  # no /proc: read the umask by setting it (and back)
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def check_output_path(path: str | os.PathLike, option: str = "output") -> Path:
    """Refuse, before any work is done, an output path that cannot be written: empty, a folder, not a
    regular file, under a file, or in a folder that is not writable. Returns it as a Path."""
    text = os.fspath(path)
    if not text.strip():
        raise InputError(option, "''", "is an empty path", "give a file name, e.g. out.json")
    p = Path(text)
    if text.endswith(os.sep) or p.is_dir():
        raise InputError(option, text, "is a folder", "give a file name (inside it, if you like)")
    if p.exists() and not p.is_file():
        raise InputError(option, text, "exists and is not a regular file", "give a file name")
    probe_writable_below(p.absolute().parent, option, text)
    return p


def _stat(path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):  # missing, unreadable, or a name no file can have (a NUL byte)
        return None


def _named_files(value) -> list[str]:
    """What an input argument names on disk: the path itself (a file or a folder), and for
    ``FILE.py:FACTORY`` or ``FILE:ITEM`` forms the file before a colon, where they exist (a preset or
    built-in name names nothing)."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not text:
        return []
    parts = [text[:i] for i, ch in enumerate(text) if ch == ":" and i]  # files only: `hf:gpt2` names no folder hf
    return ([text] if _stat(text) is not None else []) + [c for c in dict.fromkeys(parts) if os.path.isfile(c)]


def check_outputs_spare_inputs(outputs: Mapping[str, Any], inputs: Mapping[str, Any]) -> None:
    """Refuse, before any work, an output that would overwrite one of the same command's inputs or
    another of its outputs. ``outputs`` maps each output option (``--out``) to its path (None: not
    given); ``inputs`` maps each input (``graph``, ``--policy``) to what the user gave: a path, a
    list of them (a repeated option), or a name that is no file (a preset, ``hf:gpt2``), which
    counts for nothing. ``FILE.py:FACTORY`` counts its file; a folder counts every file under it.
    The same file by any name is caught: relative or absolute, through a symbolic link, or a hard
    link (the same device and inode). One InputError naming the output and the input."""
    seen: dict[Any, str] = {}
    for option, out in outputs.items():
        if out is None or not os.fspath(out):
            continue
        text = os.fspath(out)
        st = _stat(text)
        if st is not None:
            for name, given in inputs.items():
                for value in given if isinstance(given, (list, tuple)) else [given]:
                    for path in _named_files(value):
                        ist = _stat(path)
                        if ist is None:
                            continue
                        if stat.S_ISDIR(ist.st_mode):
                            inside = Path(os.path.realpath(path)) in Path(os.path.realpath(text)).parents
                        else:
                            inside = (ist.st_dev, ist.st_ino) == (st.st_dev, st.st_ino)
                        if inside:
                            what = (f"is a file in {name} {path}, which this command reads" if stat.S_ISDIR(ist.st_mode)
                                    else f"is {name} {path}" + ("" if path == text else " (the same file)"))
                            raise InputError(option, text, f"{what}: writing it would overwrite an input",
                                             "give another output path")
        key = (st.st_dev, st.st_ino) if st is not None else os.path.normcase(os.path.realpath(text))
        if key in seen:
            raise InputError(option, text, f"is also the {seen[key]} output: one would overwrite the other",
                             "give each output its own path")
        seen[key] = option


def probe_writable_below(folder: Path, option: str, text: str) -> None:
    """:func:`probe_writable` on the nearest existing folder at or above ``folder`` (where the
    missing folders would be made); InputError when that is a file."""
    anc = folder
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise InputError(option, text, f"is under {anc}, which is a file, not a folder", "choose another path")
    probe_writable(anc, option, text)


def probe_writable(folder: Path, option: str, text: str) -> None:
    """Create and remove a temporary file in ``folder``: the only test that holds for root, read-only
    mounts and pseudo file systems alike."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".placer-probe.", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise InputError(option, text, f"cannot be written in {folder} ({e.strerror or e})",
                         "choose a writable location") from None


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike):
    """A binary file object for ``path``, written to a temporary file beside it and renamed into
    place at the end, so a failure or an interrupt leaves no partial file. The file gets the mode
    the user's umask gives (not the temporary file's 0600). Errors writing raise InputError."""
    path = check_output_path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _mode_for_new_file(path))
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise InputError(str(path), "output", f"cannot be written ({e.strerror or e})",
                         "choose a writable location with free space") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (gzip'd when the name ends in .gz) so that a failure leaves no partial file."""
    data = text.encode("utf-8")
    if Path(path).suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    write_bytes_atomic(path, data)


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


# ---------------------------------------------------------------------- checkpoints
def write_checkpoint(state: dict, path: str | os.PathLike) -> None:
    """Write a plain state dict (tensors, numbers, strings, lists, dicts) atomically with ``torch.save``."""
    import torch

    with atomic_writer(path) as f:
        torch.save(state, f)


def read_checkpoint(path: str | os.PathLike, what: str = "checkpoint",
                    fix: str = "give a checkpoint file placer wrote") -> dict:
    """A state dict written by :func:`write_checkpoint`, read safely: the bytes through
    :func:`read_input_bytes` (size cap, regular files only), then ``torch.load(weights_only=True)``,
    which runs no pickled code. Anything else raises InputError naming ``what`` and ``fix``."""
    import torch

    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(path, what, "does not exist", fix)
    raw = read_input_bytes(path)
    try:
        with warnings.catch_warnings():  # torch warns about a foreign pickle before refusing it: the refusal says it
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # torch's message runs over many lines, with colour codes: keep its gist
        why = ("it holds pickled objects, which weights_only loading refuses" if type(e).__name__ == "UnpicklingError"
               else f"{type(e).__name__}: {first_sentence(e)}")
        raise InputError(path, what, f"is not a loadable checkpoint ({why})", fix) from None
    if not isinstance(state, dict):
        raise InputError(path, what, "does not hold a state dict", fix)
    return state


# ---------------------------------------------------------------------- logs
class JsonLines:
    """An append-only log of one JSON object per line (training progress), flushed line by line so
    that an interrupted run keeps what it logged. ``None`` as the path logs nothing."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = None if path is None else check_output_path(path, "log")
        self._f = None

    def write(self, record: dict) -> None:
        if self.path is None:
            return
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(json.dumps(record, allow_nan=False, default=float) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
