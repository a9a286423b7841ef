"""Option validation at the boundary: one typer callback per kind of value, so every command refuses
a zero budget, a negative seed, a NaN time limit, an unknown backend or an unwritable output path
the same way (an :class:`~placer.errors.InputError` naming the option, before any work is done).

    budget: Optional[int] = typer.Option(None, callback=at_least(1))
    out: Optional[str] = typer.Option(None, "--out", callback=output_file)

The options several commands share (GraphArg, ClusterOpt, SimOpt, ...) are declared here once.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import typer

from placer import bounds as _bounds
from placer.errors import InputError


def _name(param: Any) -> str:
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else str(getattr(param, "name", None) or "value")


def _example(name: str, value: Any) -> str:
    return f"e.g. {name} {value}" if name.startswith("-") else f"e.g. {value}"


# the bounds themselves live in one table, placer.bounds.BOUNDS (reasons there); these names are its rows
INT64_MAX = _bounds.INT64_MAX  # the compiled kernels, numpy and torch take 64-bit integers: no option may exceed it
MAX_SEED = int(_bounds.bound("seed").hi)


def bounded(setting: str, example=None) -> Callable:
    """An option checked against the row ``setting`` of :data:`placer.bounds.BOUNDS` (None passes:
    the option was not given): the same bound the library enforces however the value arrives."""
    b = _bounds.bound(setting)

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        name = _name(param)
        ex = example if example is not None else b.example
        for v in value if isinstance(value, (list, tuple)) else [value]:
            b.check(v, name, _bounds.short(v), f"{_example(name, ex)} ({b.range_text()})")
        return value

    return check


def at_least(lo: int, example: int | None = None, most: int | None = None, why: str = "") -> Callable:
    """An integer option that must be >= ``lo`` and <= ``most`` (None passes: the option was not
    given). ``why`` says where the upper bound comes from; every integer option is at most
    :data:`INT64_MAX` even without ``most``."""
    hi = INT64_MAX if most is None else most
    reason = why or ("integers are 64-bit" if most is None else "")

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v < lo:
                name = _name(param)
                what = "is negative" if v < 0 and lo == 0 else f"must be at least {lo}"
                raise InputError(name, str(v), what, _example(name, example if example is not None else lo))
            if v > hi:
                name = _name(param)
                raise InputError(name, _short_int(v), f"is more than {hi:,}, the most placer allows"
                                 + (f" ({reason})" if reason else ""), _example(name, example if example is not None else lo))
        return value

    return check


def _short_int(v: int) -> str:
    """A huge integer as its first digits and length (a 10,000-digit flag must not flood the error line)."""
    s = str(v)
    return s if len(s) <= 24 else f"{s[:12]}... ({len(s):,} digits)"


def seed_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """A random seed: 0 to 2**32 - 1 (the table's ``seed``)."""
    return bounded("seed", 0)(ctx, param, value)


def budget_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Placements a method may sample: 1 to the bounds table's ``budget`` row."""
    return bounded("budget", 1000)(ctx, param, value)


def positive_finite(example: float, most: float | None = None, why: str = "") -> Callable:
    """A float option that must be finite and > 0 (seconds, learning rates), and <= ``most`` when given."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        if not math.isfinite(value) or value <= 0:
            name = _name(param)
            raise InputError(name, str(value), "must be a finite number above 0", _example(name, example))
        if most is not None and value > most:
            name = _name(param)
            raise InputError(name, str(value), f"is more than {most:,g}, the most placer allows"
                             + (f" ({why})" if why else ""), _example(name, example))
        return value

    return check


def finite_at_least_zero(ctx: typer.Context, param: typer.CallbackParam, value):
    if value is None or ctx.resilient_parsing:
        return value
    if not math.isfinite(value) or value < 0:
        name = _name(param)
        raise InputError(name, str(value), "must be a finite number of 0 or more", _example(name, 0))
    return value


def fraction(ctx: typer.Context, param: typer.CallbackParam, value):
    """A float in [0, 1] (a discount)."""
    if value is None or ctx.resilient_parsing:
        return value
    if not (0.0 <= value <= 1.0):
        name = _name(param)
        raise InputError(name, str(value), "must be between 0 and 1", _example(name, 0.9))
    return value


def grouping_spec(ctx: typer.Context, param: typer.CallbackParam, value):
    """A grouping spec (placer.grouping's one parser), refused before any work."""
    if value is None or ctx.resilient_parsing:
        return value
    from placer.grouping import parse_grouping

    return str(parse_grouping(value, _name(param)))


def method_name(ctx: typer.Context, param: typer.CallbackParam, value):
    """A registered method's name, refused before any work, with the name it most likely mistypes."""
    if value is None or ctx.resilient_parsing:
        return value
    from placer.resolve import check_method

    return check_method(value, _name(param))


def one_of(*allowed: str) -> Callable:
    """A string option that must be one of ``allowed``."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        if value not in allowed:
            raise InputError(_name(param), repr(value), "is not a choice", f"use one of {', '.join(allowed)}")
        return value

    return check


def _check_out(name: str, value: str | os.PathLike) -> Path:
    from placer.io import check_output_path

    return check_output_path(value, name)


def output_file(ctx: typer.Context, param: typer.CallbackParam, value):
    """A file the command will write: refused now (empty, a folder, under a file, not writable), not
    after minutes of work. Declare the option as ``str``; the command receives a Path."""
    if value is None or ctx.resilient_parsing:
        return value
    return _check_out(_name(param), value)


def output_folder(ctx: typer.Context, param: typer.CallbackParam, value):
    """A folder the command will write into (created if missing): not a file, not under a file, writable."""
    if value is None or ctx.resilient_parsing:
        return value
    name, text = _name(param), os.fspath(value)
    if not text.strip():
        raise InputError(name, "''", "is an empty path", "give a folder, e.g. results")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise InputError(name, text, "is a file, not a folder", "give a folder")
    from placer.io import probe_writable_below

    probe_writable_below(p.absolute(), name, text)
    return p


def existing_folder(ctx: typer.Context, param: typer.CallbackParam, value):
    """A folder the command reads: it must exist."""
    if value is None or ctx.resilient_parsing:
        return value
    name, p = _name(param), Path(os.fspath(value))
    if not p.exists():
        raise InputError(name, str(p), "does not exist", "give the folder `placer bench` wrote (default: results)")
    if not p.is_dir():
        raise InputError(name, str(p), "is not a folder", "give the folder `placer bench` wrote (default: results)")
    return p


def objective_spec(ctx: typer.Context, param: typer.CallbackParam, value):
    """``--objective``: parsed by :func:`placer.objectives.make_objective` now, so an unknown objective
    or option, an empty or duplicate one, or a number out of its bound is refused before any work
    (``compare`` used to run every method and print n/a)."""
    if value is None or ctx.resilient_parsing or value == "sim":
        return value
    from placer.objectives import make_objective

    try:
        make_objective(value)
    except InputError as e:  # the library names its parameter; here it is the option
        raise e.at(_name(param)) from None
    return value


# ---------------------------------------------------------------------- options several commands share
GraphArg = typer.Argument(..., help="graph file (native JSON, PipeDream graph.txt, dnn-partitioning JSON) or built-in name")
ClusterOpt = typer.Option("auto", "--cluster", "-c", help="preset name, cluster JSON file, 'here' or 'here:cpus=N' "
                          "(this machine, measured: `placer cluster detect`), or 'auto'")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON")
GROUPING_DEFAULT = "metis:64"  # PlacetoConfig's default grouping (a test keeps them equal)
GroupingOpt = typer.Option(GROUPING_DEFAULT, "--grouping", callback=grouping_spec,
                           help="op groups: ops, colocate, merge:N, metis:K or contiguous:N")
SimOpt = typer.Option("default", "--sim", help="'default' (cluster links, no gaps, the cluster's communication model), "
                      "'placeto' (reference constants), or a communication model: p2p, giph, link (docs/simulator.md)",
                      callback=one_of("default", "placeto", "p2p", "giph", "link"))
SeedOpt = typer.Option(0, help="random seed, 0 to 2**32-1 (same seed, same placement)", callback=seed_option)
BudgetOpt = typer.Option(None, help="placements the method may sample (1 to 10,000,000)", callback=budget_option)
OutOpt = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file)
ObjectiveOpt = typer.Option("sim", "--objective", help="what to minimise: 'sim' (the event simulator), 'latency' or "
                            "'throughput' (Tarnawski et al. 2020's models; latency:pieces=N|any, "
                            "throughput:contiguous=false), 'pipeline' (PipeDream 1F1B)", callback=objective_spec)
