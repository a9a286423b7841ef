"""Shared fixtures: where the real graphs live (../shared/graphs, or $PLACER_SHARED_GRAPHS)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_GRAPHS = Path(os.environ.get("PLACER_SHARED_GRAPHS", REPO.parent / "shared" / "graphs"))


def shared_graph_files() -> list[Path]:
    """Every graph file in the shared folder (PipeDream txt and dnn-partitioning inputs)."""
    if not SHARED_GRAPHS.exists():
        return []
    pd = sorted(p for p in (SHARED_GRAPHS / "pipedream").glob("*.txt") if p.name != "LICENSE.txt")
    dp = sorted((SHARED_GRAPHS / "dnn-partitioning").glob("*-inputs/*/*.json"))
    return pd + dp


@pytest.fixture(scope="session")
def shared_graphs() -> Path:
    if not SHARED_GRAPHS.exists():
        pytest.skip(f"real graphs not found at {SHARED_GRAPHS} (set PLACER_SHARED_GRAPHS)")
    return SHARED_GRAPHS


def run_cli(capsys, monkeypatch, *args):
    """Run ``placer ARGS`` in-process; return (exit status, stdout, stderr)."""
    from placer.cli import main

    monkeypatch.setattr(sys, "argv", ["placer", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err
