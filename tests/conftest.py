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


def tight_problem(gpu_bytes=280e6, graph_seed=0):
    """A 120-op training graph on k80x2 with its GPUs cut to ``gpu_bytes`` (one device peaks at 440 MB)."""
    from placer.cluster import Device, make_cluster, preset
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    k80 = preset("k80x2")
    tight = make_cluster("tight", [Device(d.name, d.kind, d.model, gpu_bytes if d.kind == "gpu" else d.memory_bytes)
                                   for d in k80.devices], 7600.0, 0.0)
    return Problem(layered_training_graph(120, seed=graph_seed), tight)


@pytest.fixture(autouse=True)
def _input_size_limit_reset():
    """`--max-input-size` sets a process-wide limit (placer.io): a test that lowers it must not leave it
    lowered for the next test in the same worker."""
    yield
    from placer.io import set_max_input_bytes

    set_max_input_bytes(None)
