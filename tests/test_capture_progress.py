"""Issue 63: capture spent tens of seconds importing torch and transformers silently and did not echo
the shapes it chose. It now says what it is loading as it goes (a transient line on a terminal's
stderr, never in --json's stdout) and prints the input shapes once captured."""

from __future__ import annotations

import io
import json
import re

import pytest

from conftest import run_cli

MODEL = """
import torch.nn as nn


def build(width=16):
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 2))
"""


def _terminal(monkeypatch):
    from rich.console import Console

    import placer.cli.capture as cap

    buf = io.StringIO()
    monkeypatch.setattr(cap, "err_console", Console(file=buf, force_terminal=True, width=160))
    return buf


def _said(buf) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())


def test_capture_says_what_it_loads_and_echoes_the_shapes(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "m.py").write_text(MODEL)
    buf = _terminal(monkeypatch)
    code, out, err = run_cli(capsys, monkeypatch, "capture", f"{tmp_path / 'm.py'}:build", "--input", "8",
                             "--batch", "4", "-o", tmp_path / "g.json", "--json")
    assert code == 0, err
    assert json.loads(out)["ops"] > 0  # stdout is the JSON alone
    said = _said(buf)
    for step in ("importing torch ...", "building the model", "on cpu", "tracing the training step"):
        assert step in said, said
    assert "inputs: 4x8 float32" in said


def test_capture_hf_echoes_batch_and_sequence(tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers")
    buf = _terminal(monkeypatch)
    code, out, err = run_cli(capsys, monkeypatch, "capture", "hf:gpt2", "--set", "n_layer=1", "--set", "n_embd=32",
                             "--set", "n_head=2", "--set", "vocab_size=100", "--batch", "2", "--seq", "16",
                             "-o", tmp_path / "g.json")
    assert code == 0, err
    said = _said(buf)
    assert "importing transformers ..." in said and "on meta" in said
    assert "inputs: batch 2, sequence 16 (2x16 int64" in said


def test_bad_input_still_gets_one_line(tmp_path, capsys, monkeypatch):
    """Piped stderr sees no progress line: a bad factory is still one line."""
    (tmp_path / "m.py").write_text(MODEL)
    code, out, err = run_cli(capsys, monkeypatch, "capture", f"{tmp_path / 'm.py'}:nope", "--input", "8",
                             "-o", tmp_path / "g.json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nope" in err
