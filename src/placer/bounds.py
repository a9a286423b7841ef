"""The bounds of every number a user gives placer, in one table (:data:`BOUNDS`).

A setting arrives in many ways: a command-line flag (``--epochs``), a method's ``--set``, a spec
string (``hf:gpt2:n_layer=2``, ``giph:tasks=50``, ``latency:pieces=2``), a graph file's recipe, a
call of the Python API. Every one of them checks it here, with :meth:`Bound.check`, before any
work starts: the same bound, and the same one-line refusal naming where the value came from, the
bound and the reason for it. Each row says what the setting is (integer or real), its least and
its most value, and why the most is what it is (what this machine has to do with the value).

Sizes whose cost is a product of several settings (a model's weights and activations) are bounded
by this machine's memory as well: :func:`check_memory` refuses an estimate above it, before
anything is built.

Spec strings (``KEY=VALUE,KEY=VALUE``) are split by :func:`parse_items` alone: an empty item, an
empty key or value, and a key given twice are refused, in one line naming the spec and the fix.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from placer.errors import InputError, printable

INT64_MAX = 2**63 - 1  # the compiled kernels, numpy and torch take 64-bit integers
INT32_MAX = 2**31 - 1  # torch's 32-bit-indexed kernels; one input tensor's elements


@dataclass(frozen=True)
class Bound:
    """One numeric setting: ``kind`` int or float, from ``lo`` to ``hi`` (``lo`` excluded when
    ``lo_open``), ``why`` the reason for the bound, ``example`` a good value."""

    name: str
    kind: type
    lo: float
    hi: float
    why: str
    example: float
    lo_open: bool = False

    def range_text(self) -> str:
        span = f"above {_num(self.lo)} and at most" if self.lo_open else f"from {_num(self.lo)} to"
        return f"{'a whole number' if self.kind is int else 'a number'} {span} {_num(self.hi)}"

    def check(self, value, where: str, item: str | None = None, fix: str | None = None):
        """``value`` as :attr:`kind` when it is in range, else :class:`InputError` (``item``: how the
        user wrote the setting, default ``name=value``; ``fix``: the advice, default the range)."""
        item = item or f"{self.name.rpartition('.')[2]}={short(value)}"
        fix = fix or f"give {self.name.rpartition('.')[2]} {self.range_text()}, e.g. {_num(self.example)}"
        if self.kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool) or _np_int(value)
            if not ok:
                raise InputError(where, item, "is not a whole number", fix)
            value = int(value)
        else:
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or _np_real(value)):
                raise InputError(where, item, "is not a number", fix)
            value = float(value)
            if not math.isfinite(value):
                raise InputError(where, item, "is not finite", fix)
        if value < self.lo or (self.lo_open and value == self.lo):
            raise InputError(where, item, f"is not above {_num(self.lo)}" if self.lo_open
                             else f"is not from {_num(self.lo)} to {_num(self.hi)}", fix)
        if value > self.hi:
            raise InputError(where, item, f"is more than {_num(self.hi)}, the most placer allows ({self.why})", fix)
        return value

    def parse(self, text: str, where: str, item: str | None = None, fix: str | None = None):
        """A value written as text (a spec string, a ``--set``) checked as :meth:`check` does."""
        t = text.strip()
        item = item or f"{self.name.rpartition('.')[2]}={short(t)}"
        try:
            if self.kind is int:
                if len(t) > 40 or not t.lstrip("+-").isdigit():
                    raise ValueError
                v = int(t)
            else:
                v = float(t) if len(t) <= 40 else float("nan")
        except ValueError:
            fix = fix or f"give {self.name.rpartition('.')[2]} {self.range_text()}, e.g. {_num(self.example)}"
            raise InputError(where, item, f"is not {'a whole number' if self.kind is int else 'a number'}", fix) from None
        return self.check(v, where, item, fix)


def _np_int(v) -> bool:
    return type(v).__module__ == "numpy" and hasattr(v, "dtype") and v.dtype.kind in "iu"


def _np_real(v) -> bool:
    return type(v).__module__ == "numpy" and hasattr(v, "dtype") and v.dtype.kind in "iuf"


def _num(v) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:g}"
    return f"{int(v):,}"


def short(value, limit: int = 40) -> str:
    """A value as its first characters (a 10,000-digit number must not flood the error line)."""
    s = str(value)
    if isinstance(value, int) and len(s) > 24:
        return f"{s[:12]}... ({len(s):,} digits)"
    return printable(s, limit)


def _b(name, kind, lo, hi, why, example, lo_open=False) -> tuple[str, Bound]:
    return name, Bound(name, kind, lo, hi, why, example, lo_open)


BOUNDS: dict[str, Bound] = dict([
    # ---- everywhere
    _b("seed", int, 0, 2**32 - 1, "numpy and torch take seeds below 2**32", 0),
    _b("budget", int, 1, 10_000_000, "50x the papers' largest budget; hours of simulation on large graphs", 1000),
    _b("seconds", float, 0, 86_400.0, "a day: a longer run is better a `placer bench` experiment that resumes", 60,
       lo_open=True),
    _b("anytime.seconds", float, 0, 600.0, "CPU seconds per (method, graph) run: the full line-up at 600 s is about "
       "4 CPU days", 100, lo_open=True),
    _b("bound.seconds", float, 0, 3_600.0, "CP-SAT's deterministic time for `placer bound` (about a second each on one "
       "core): past an hour its proven bound on these models barely moves; 0 runs no solver", 2),
    # ---- placer pretrain (and its library: EncoderConfig, PretrainConfig)
    _b("pretrain.epochs", int, 0, 100_000, "each epoch is one Adam step per graph: 500x Mars's 200 is days on a CPU; "
       "0 keeps the encoder as initialised", 50),
    _b("encoder.hidden", int, 1, 4096, "a 4096-wide layer is 16M weights per matrix, trained on this CPU", 128),
    _b("encoder.layers", int, 1, 64, "message passing past 64 hops sees the whole of any graph placer reads", 3),
    _b("encoder.nodes", int, 1, 2**20, "more nodes than any graph placer reads has ops", 1024),
    # ---- a method's network: --set on every method whose config has such a field (MethodConfig checks
    #      it, by the field's name: METHOD_FIELDS); the least is 0 here, each method states its own
    _b("method.width", int, 0, 4096, "a 4096-wide layer is 16M weights per matrix, trained on this CPU", 128),
    _b("method.layers", int, 0, 64, "past 64 layers or message-passing steps a policy sees the whole of any graph", 3),
    _b("method.epochs", int, 0, 100_000, "500x Mars's 200 pre-training epochs is days on a CPU", 4),
    # ---- Hugging Face configs (hf:NAME:KEY=VALUE, capture --set, a graph file's hf recipe)
    _b("hf.layers", int, 1, 1_000, "capture time grows with the layers; GPT-3 has 96", 2),
    _b("hf.size", int, 1, 2**20, "hidden sizes, heads, vocabularies and positions of the largest models are ~2**18", 128),
    _b("hf.integer", int, -INT32_MAX - 1, INT32_MAX, "transformers' configs take 32-bit integers", 0),
    _b("hf.probability", float, 0.0, 1.0, "a dropout rate is a probability", 0.1),
    _b("hf.real", float, -1e12, 1e12, "transformers' configs take float32-sized reals", 1.0),
    _b("batch", int, 1, 2**20, "samples per step: inputs are made for real when the model runs", 8),
    _b("hf.seq", int, 1, 2**20, "2**20 tokens per sequence, past any model's positions", 128),
    _b("hf.tokens", int, 1, INT32_MAX, "batch x seq is one input tensor: torch's 32-bit-indexed kernels", 1024),
    # ---- GiPH's generated workloads (giph:..., giph-net:..., placer.zoo.giph's functions)
    _b("giph.tasks", int, 1, 20_000, "the op graph's arrays and the policy's gpNet stay small", 50),
    _b("giph.degree", int, 1, 64, "children per task; more is a dense graph no generator in the paper makes", 3),
    _b("giph.jump", int, 1, 64, "levels a child may skip; past 64 every level is reachable", 2),
    _b("giph.alpha", float, 0.05, 20.0, "levels are sqrt(tasks) / alpha: past these a graph is one chain or one level",
       1.0),
    _b("giph.ccr", float, 0.0, 100.0, "communication-to-computation ratio; the paper sweeps 0.1 to 10", 0.5),
    _b("giph-net.devices", int, 1, 256, "a network's (D x D) links and GiPH's gpNet grow with D squared", 8),
    _b("giph-net.spread", float, 1.0, 1000.0, "fastest over slowest device is spread squared", 3.0),
    _b("giph-net.join", int, 0, 256, "devices after joining are at most 256", 0),
    _b("giph-net.leave", int, 0, 255, "at least one device stays", 0),
    # ---- objectives (--objective latency:pieces=N)
    _b("objective.pieces", int, 1, INT32_MAX, "the compiled latency kernel's integers are 32-bit", 2),
])


def bound(name: str) -> Bound:
    return BOUNDS[name]


def check(name: str, value, where: str, item: str | None = None, fix: str | None = None):
    """``BOUNDS[name].check(...)``."""
    return BOUNDS[name].check(value, where, item, fix)


# ---------------------------------------------------------------------- method configs
METHOD_FIELDS = (("budget", ("placements",), ()),  # a method's default budget is a budget
                 ("method.width", ("hidden", "attention"), ("_hidden", "_embed")),
                 ("method.layers", ("layers", "mp_steps"), ("_layers",)),
                 ("method.epochs", ("epochs",), ("_epochs",)))


def method_field_bound(field: str) -> Bound | None:
    """The table's bound on a method config's integer field of this name (``placements``,
    ``hidden``, ``seq_hidden``, ``gnn_layers``, ``ppo_epochs``, ...), or None."""
    for row, names, ends in METHOD_FIELDS:
        if field in names or field.endswith(ends):
            return BOUNDS[row]
    return None


# ---------------------------------------------------------------------- memory
def physical_memory() -> int | None:
    """Bytes of RAM on this machine, or None when the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_memory(need_bytes: float, where: str, item: str, what: str, fix: str, memory: int | None = None) -> None:
    """Refuse ``item`` when ``need_bytes`` (an estimate of ``what``) exceeds this machine's memory."""
    ram = memory if memory is not None else physical_memory()
    if ram and need_bytes > ram:
        raise InputError(where, item, f"needs about {human_bytes(need_bytes)} ({what}), more than this machine's "
                         f"{human_bytes(ram)} of memory, the most placer allows", fix)


def encoder_bytes(hidden: int, layers: int, nodes: int, in_features: int = 64) -> float:
    """Memory of training a graph encoder with Deep Graph Infomax on a graph of ``nodes`` nodes:
    float32 weights, gradients and Adam's two moments (16 bytes a weight), and per layer the
    real and corrupted embeddings with their pre-activations and gradients (4 x 2 x nodes x hidden)."""
    h, n = float(hidden), float(nodes)
    weights = in_features * h + (layers - 1) * h * h + h * h + layers * h
    return 16 * weights + 4 * 2 * 4 * n * h * (layers + 1)


# ---------------------------------------------------------------------- spec strings
def parse_items(spec: str, body: str, form: str, allow_empty: bool = False) -> dict[str, str]:
    """``KEY=VALUE,KEY=VALUE`` (the part of ``spec`` after its name) -> ``{key: value}`` as text.
    Refused, naming ``spec`` and ``form`` (how to write it): an empty body (unless ``allow_empty``),
    an empty item (``a=1,,b=2``), an item without ``=``, an empty key or value, a key given twice."""
    out: dict[str, str] = {}
    spec = spec if spec[:1] in "'\"" else f"'{spec}'"
    if not body.strip():
        if allow_empty:
            return out
        raise InputError(printable(spec, 80), "settings", "are empty", f"write {form}")
    for part in body.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not part.strip():
            raise InputError(printable(spec, 80), "settings", "hold an empty item (two commas, or one at an end)",
                             f"write {form}")
        if not eq:
            raise InputError(printable(spec, 80), f"'{printable(part.strip(), 40)}'", "is not KEY=VALUE", f"write {form}")
        if not key:
            raise InputError(printable(spec, 80), f"'{printable(part.strip(), 40)}'", "has an empty key", f"write {form}")
        if not value:
            raise InputError(printable(spec, 80), f"'{printable(part.strip(), 40)}'", "has an empty value",
                             f"give {printable(key, 40)} a value: write {form}")
        if key in out:
            raise InputError(printable(spec, 80), f"{printable(key, 40)}", "is given twice",
                             f"give each setting once: write {form}")
        out[key] = value
    return out
