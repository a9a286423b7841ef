"""Method configs: every method's hyperparameters as a frozen dataclass of the paper's defaults
(:class:`MethodConfig`), each field's type and numeric :class:`Range` declared on it and checked when the config
is built, unknown names refused (:meth:`MethodConfig.from_params`); command-line strings are parsed to the
declared type (:func:`_coerce`). :mod:`placer.methods.base` registers methods with them."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.bounds import method_field_bound, short
from placer.errors import InputError


@dataclass(frozen=True)
class Range:
    """The values a numeric config field may take, declared on the field:
    ``lr: Annotated[float, Range("> 0")] = 1e-3``. ``rule`` is ``>= A``, ``> A`` or an interval
    ``in [A, B]`` whose ends may be open (``(A, B]``, ``[A, B)``, ``(A, B)``); ``note`` follows the rule
    in the refusal. :class:`MethodConfig` checks it when the config is built; None passes where the
    field may be None."""

    rule: str
    note: str = ""  # what a special value means, e.g. "0: as many as nodes"
    lo: float = field(init=False, default=-math.inf)
    hi: float = field(init=False, default=math.inf)
    lo_open: bool = field(init=False, default=False)
    hi_open: bool = field(init=False, default=False)

    def __post_init__(self):
        r = self.rule.strip()
        if r.startswith((">=", ">")):
            lo, lo_open, hi, hi_open = float(r.lstrip(">=")), not r.startswith(">="), math.inf, False
        elif r.startswith("in ") and r[3:4] in "[(" and r[-1:] in "])" and r.count(",") == 1:
            a, b = r[4:-1].split(",")
            lo, lo_open, hi, hi_open = float(a), r[3] == "(", float(b), r[-1] == ")"
        else:
            raise ValueError(f"Range rule {self.rule!r} is not '>= A', '> A' or 'in [A, B]' (ends may be open)")
        for name, v in (("lo", lo), ("hi", hi), ("lo_open", lo_open), ("hi_open", hi_open)):
            object.__setattr__(self, name, v)

    def holds(self, v) -> bool:
        return ((v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else v <= self.hi))

    def text(self) -> str:
        return f"{self.rule} ({self.note})" if self.note else self.rule


@dataclass(frozen=True)
class MethodConfig:
    """Base of every method's hyperparameters: a frozen dataclass whose fields carry the paper's
    defaults. Each field declares what it takes in its annotation: its type, ``Literal[...]`` for a
    choice among names, ``Annotated[T, Range(...)]`` for a numeric range (a field named as a size,
    ``placements``, a width, layers or epochs, is also held to its row of :mod:`placer.bounds`, which
    for ``placements`` is from 1); :meth:`checks` lists only the rules that tie fields together or
    that no declaration states."""

    def __post_init__(self):
        hints = typing.get_type_hints(type(self), include_extras=True)
        for f in dataclasses.fields(self):
            hint, ranges = hints[f.name], ()
            if typing.get_origin(hint) is typing.Annotated:
                hint, ranges = hint.__origin__, [r for r in hint.__metadata__ if isinstance(r, Range)]
            v = _coerce(self.method_name(), f.name, getattr(self, f.name), hint)
            object.__setattr__(self, f.name, v)
            size = method_field_bound(f.name)  # network widths, layers, epochs: the table's rows (placer.bounds)
            if size is not None and isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                size.check(v, self.method_name(), f"parameter {f.name}={short(v)}",
                           f"set {f.name} at most {int(size.hi):,}" if v > size.hi else f"set {f.name} {size.range_text()}")
            for r in ranges:
                if v is not None and not r.holds(v):
                    self._refuse(f.name, r.text() + (" or None" if type(None) in typing.get_args(hint) else ""))
        for ok, name, want in self.checks():
            if not ok:
                self._refuse(name, want)

    def _refuse(self, name: str, want: str):
        raise InputError(self.method_name(), f"parameter {name}={getattr(self, name, '?')!r}",
                         f"must be {want}", f"set {name} {want}")

    @classmethod
    def method_name(cls) -> str:
        return cls.__name__.removesuffix("Config").lower() or "method"

    def checks(self) -> list[tuple[bool, str, str]]:
        """(condition, field, what it must be) for each rule a field's annotation cannot declare
        (one that ties fields together, a list of names, a callable)."""
        return []

    @classmethod
    def from_params(cls, method: str, params: dict[str, Any]) -> "MethodConfig":
        """The config for keyword parameters; unknown names are refused with the known ones listed."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise InputError(method, f"parameter(s) {', '.join(unknown)}", "are not parameters of this method",
                             f"use some of: {', '.join(names) or '(none: it takes no parameters)'}")
        return cls(**params)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class NoConfig(MethodConfig):
    """A method without hyperparameters."""


def _coerce(method: str, name: str, value, hint):
    """``value`` as the annotated type (strings from the command line are parsed), or InputError."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if value is None:
        if optional or hint is type(None) or hint is Any:
            return None
        raise InputError(method, f"parameter {name}", "may not be None", "give a value")
    is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kinds = [a for a in args if a is not type(None)] if is_union else [hint]
    if any(k is Any for k in kinds):
        return value
    for k in kinds:
        if typing.get_origin(k) is typing.Literal:
            if value in typing.get_args(k):
                return value
            continue
        try:
            if k is bool:
                if isinstance(value, (bool, np.bool_)):
                    return bool(value)
                if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                    return value.lower() in ("true", "1", "yes")
            elif k is int:
                if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
                    return int(value)
                if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) < 20:
                    return int(value)
                if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                    return int(value)
            elif k is float:
                if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
                    v = float(value)
                elif isinstance(value, str) and len(value) < 40:
                    v = float(value)
                else:
                    continue
                if math.isnan(v):
                    raise InputError(method, f"parameter {name}", "is NaN", "give a number")
                return v
            elif k is str:
                if isinstance(value, str):
                    return value
            elif isinstance(k, type) and isinstance(value, k):
                return value
        except (ValueError, OverflowError):
            continue
    want = " or ".join(_kind_text(k) for k in kinds) + (" or None" if optional else "")
    raise InputError(method, f"parameter {name}={value!r}"[:120], f"is not {want}", f"give {name} as {want}")


def _kind_text(kind) -> str:
    """A type as a refusal names it: ``int``, or for a ``Literal`` its values (``one of 'a', 'b'``)."""
    if typing.get_origin(kind) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(kind))
    return getattr(kind, "__name__", str(kind))
