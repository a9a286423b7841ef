"""`placer bound` end to end: the bound, its source and each candidate (text and --json), the same
value as the library, and bad input as one line with exit status 2."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from placer.cli.common import load_problem
from placer.lowerbound import lower_bound
from placer.sim import SimParams


def test_bound_json_matches_the_library(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "bound", "giph:tasks=12,seed=3", "--cluster",
                             "giph-net:devices=3,seed=1", "--seconds", "1", "--json")
    assert code == 0, err
    d = json.loads(out)
    P = load_problem("giph:tasks=12,seed=3", "giph-net:devices=3,seed=1")
    b = lower_bound(P, SimParams.preset("default", P.cluster), seconds=1)
    assert d["value_us"] == b.value_us and d["source"] == b.source
    assert [c["name"] for c in d["candidates"]] == [c.name for c in b.candidates]
    assert d["value_us"] >= d["old_us"] and d["value_us"] == max(c["value_us"] for c in d["candidates"])
    assert d["best_known_us"] >= d["value_us"] * (1 - 1e-6)  # 12 ops: the engine also simulates a placement
    assert d["ops"] == 12 and d["comm_model"] == SimParams.preset("default", P.cluster).comm_model


def test_bound_text(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "bound", "resnet50", "--cluster", "k80x4", "--seconds", "0")
    assert code == 0, err
    assert "lower bound" in out and "critical path" in out and "load" in out and "windows" in out
    assert "exact" not in out  # --seconds 0 runs no solver


def test_small_graph_proven_optimal_text(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "bound", "giph:tasks=12,seed=3", "--cluster",
                             "giph-net:devices=3,seed=1", "--seconds", "1")
    assert code == 0 and "proven optimal" in out and "exact" in out


@pytest.mark.parametrize("args, msg", [
    (["--seconds", "-1"], "--seconds"),
    (["--seconds", "100000"], "the most placer allows"),
    (["--seconds", "nan"], "--seconds"),
    (["--sim", "nope"], "--sim"),
])
def test_bad_input_one_line_exit_2(capsys, monkeypatch, args, msg):
    code, out, err = run_cli(capsys, monkeypatch, "bound", "resnet50", "--cluster", "k80x2", *args)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_unknown_graph_one_line(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "bound", "no-such-graph", "--cluster", "k80x2")
    assert code == 2 and "no-such-graph" in err and len(err.strip().splitlines()) == 1
