"""Method configs declare what each field takes in its annotation (issue 67): ``Literal[...]`` for a
choice of names, ``Annotated[T, Range(...)]`` for a numeric range. Over every registered config:
each declared value is accepted and each value just outside is refused in one line naming the
method, the parameter, the bad value and what it must be; from the command line too."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from conftest import run_cli
from placer.errors import InputError
from placer.methods import METHODS
from placer.methods.base import Range

CONFIGS = sorted({info.config for info in METHODS.values()}, key=lambda c: c.__name__)


def _declared(cls):
    """(field, Literal values or None, Range or None, may be None) of every declaring field of ``cls``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        h, rng = hints[f.name], None
        if typing.get_origin(h) is typing.Annotated:
            rng = next((m for m in h.__metadata__ if isinstance(m, Range)), None)
            h = h.__origin__
        args = typing.get_args(h)
        lit = typing.get_args(h) if typing.get_origin(h) is typing.Literal else None
        if lit or rng:
            yield f.name, lit, rng, type(None) in args, next(a for a in args or (h,) if a is not type(None))


def _refused(cls, name, value, *needles):
    """``cls(name=value)`` refused in one line naming the parameter and its value; each needle is a
    text the line holds (alternatives split by "|": a field named as a size is held first to its
    row of placer.bounds, whose line says "is not from" or "is more than")."""
    with pytest.raises(InputError) as e:
        cls(**{name: value})
    msg = str(e.value)
    assert "\n" not in msg and f"parameter {name}=" in msg and repr(value)[:8] in msg, msg
    for n in needles:
        assert any(alt in msg for alt in n.split("|")), (n, msg)


def test_the_configs_declare_their_fields():
    """The declarations are in use: most configs have some."""
    declaring = [c for c in CONFIGS if list(_declared(c))]
    assert len(declaring) >= 20, [c.__name__ for c in declaring]


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_literal_fields_take_their_names_and_refuse_others(cls):
    for name, lit, _, _, _ in _declared(cls):
        if not lit:
            continue
        for v in lit:
            assert getattr(cls(**{name: v}), name) == v
        _refused(cls, name, "no-such-choice", "is not one of", *(repr(v) for v in lit))


def _inside_outside(rng: Range, kind):
    """Values of ``kind`` at the edges of ``rng`` (accepted) and just past them (refused)."""
    step = 1 if kind is int else 1e-6
    inside, outside = [], []
    for end, is_open, sign in ((rng.lo, rng.lo_open, -1), (rng.hi, rng.hi_open, 1)):
        if abs(end) == float("inf"):
            continue
        if is_open:  # the end itself is refused, a step inside is taken
            outside.append(kind(end))
            inside.append(kind(end) - sign * step)
        else:  # the end is taken, a step past it refused
            inside.append(kind(end))
            outside.append(kind(end) + sign * step)
    return inside, outside


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_range_fields_take_their_edges_and_refuse_past_them(cls):
    for name, _, rng, optional, kind in _declared(cls):
        if rng is None:
            continue
        inside, outside = _inside_outside(rng, kind)
        for v in inside:
            try:
                cls(**{name: v})
            except InputError as e:  # another rule of the same field (hidden even, a table row) may refuse an edge
                assert name in str(e) and "must be " + rng.text() not in str(e), str(e)
        for v in outside:
            _refused(cls, name, v, f"must be {rng.text()}|is not from|is more than")
        if optional:
            assert getattr(cls(**{name: None}), name) is None


def test_range_rules_parse_and_malformed_ones_are_refused():
    r = Range("in (0, 1]")
    assert (r.lo, r.hi, r.lo_open, r.hi_open) == (0.0, 1.0, True, False)
    assert r.holds(1.0) and not r.holds(0.0) and not r.holds(1.5)
    r = Range(">= -2")
    assert r.holds(-2) and not r.holds(-3) and r.holds(1e300)
    assert Range("> 0", "0: never").text() == "> 0 (0: never)"
    for bad in ("=> 1", "in [0, 1", "in 0, 1]", "between 0 and 1", "in [a, b]"):
        with pytest.raises(ValueError):
            Range(bad)


def test_a_bad_choice_from_the_command_line_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, monkeypatch, "optimize", "giph:tasks=6,seed=1", "-m", "published-greedy",
                             "--set", "order=sideways")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    assert "order='sideways'" in err and "'published', 'depth'" in err, err
    code, out, err = run_cli(capsys, monkeypatch, "optimize", "giph:tasks=6,seed=1", "-m", "anneal",
                             "--set", "t0=0")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "t0=0.0" in err and "must be > 0" in err, err
