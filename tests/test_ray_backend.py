"""bench/ray_backend without Ray: a stand-in ``ray`` module runs the remote calls in this process,
so the driver's side (the run file written as the node wrote it, only where it wrote one) is
checked where the ``ray`` extra is absent (tests/test_ray.py runs the real thing)."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from placer.bench.ray_backend import run_cells_ray


class _Ref:
    def __init__(self, value):
        self.value = value


def _fake_ray():
    ray = types.ModuleType("ray")
    ray.is_initialized = lambda: False
    ray.init = lambda **kw: None
    ray.shutdown = lambda: None
    ray.remote = lambda **kw: (lambda fn: types.SimpleNamespace(remote=lambda *a: _Ref(fn(*a))))
    ray.wait = lambda refs, num_returns: (refs[:num_returns], refs[num_returns:])
    ray.get = lambda ref: ref.value
    return ray


@dataclass(frozen=True)
class _Task:  # the fields of the runner's RunTask this stand-in reads: where the file goes, and the outcome
    out: str
    status: str


@dataclass
class _Cell:
    task: _Task


def _execute(task: _Task) -> dict:
    doc = {"status": task.status, "name": Path(task.out).name}
    if task.status != "error":  # as the runner: a run file for ok and does-not-apply only
        Path(task.out).parent.mkdir(parents=True, exist_ok=True)
        Path(task.out).write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return doc


def test_run_files_written_by_the_driver(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "node"))  # the node's scratch folder
    cells = [_Cell(_Task(str(tmp_path / "runs" / f"{s}.json"), s)) for s in ("ok", "does not apply", "error")]
    seen = []
    run_cells_ray(cells, 1, None, lambda cell, doc: seen.append(doc["status"]), execute=_execute)
    assert seen == ["ok", "does not apply", "error"]
    for s in ("ok", "does not apply"):
        assert json.loads((tmp_path / "runs" / f"{s}.json").read_text()) == {"status": s, "name": f"{s}.json"}
    assert not (tmp_path / "runs" / "error.json").exists()
    assert (tmp_path / "node" / "placer-ray-runs" / "ok.json").exists()  # the node's scratch copy
