"""`placer bench anytime` (issue 66): the Pareto front of step time against time as a pure function,
the table read off best-so-far trajectories at the checkpoints, and a small end-to-end run."""

from __future__ import annotations

import csv
import io
import math

from conftest import run_cli
from placer.bench import anytime as A

GIPH = ("giph:tasks=20,seed=1", "giph-net:devices=4,seed=2")


def test_pareto_front_on_handmade_points():
    pts = [(0.0, 5.0), (1.0, 4.0), (1.0, 3.0), (2.0, 3.0), (0.5, 6.0), (3.0, 1.0), (3.0, 1.0), (4.0, math.inf)]
    assert A.pareto_front(pts) == [True, False, True, False, False, True, True, False]
    assert A.pareto_front([]) == []
    assert A.pareto_front([(2.0, 1.0), (1.0, 2.0)]) == [True, True]  # neither beats the other on both
    assert A.pareto_front([(1.0, 1.0), (2.0, 2.0)]) == [True, False]


def test_front_text_joins_a_methods_runs():
    front = [(0.1, 5e3, "a"), (0.2, 4e3, "a"), (0.3, 3e3, "b")]
    assert A.front_text(front) == "a 5.00 -> 4.00 ms (0.10-0.20 s), b 3.00 ms at 0.30 s"
    assert A.front_text([]) == "none"


def _traj(method, points, **kw):
    return A.Trajectory(method, "g", "c", [(s, n, us, True) for s, n, us in points], **kw)


def test_table_reads_the_best_at_each_checkpoint_and_marks_the_best_of_all():
    fast = _traj("fast", [(0.01, 1, 9000.0)], placements=1, seconds=0.01, stopped_by="method")
    slow = _traj("slow", [(0.5, 10, 9500.0), (2.0, 400, 8000.0), (20.0, 5000, 7000.0)], placements=9000,
                 seconds=100.0, stopped_by="seconds")
    t = A.graph_table([fast, slow], 100.0)
    assert t["checkpoints"] == [1.0, 3.0, 10.0, 30.0, 100.0]
    f, s = t["rows"]
    assert [f["time"][c]["us"] for c in t["checkpoints"]] == [9000.0] * 5
    assert [s["time"][c]["us"] for c in t["checkpoints"]] == [9500.0, 8000.0, 8000.0, 7000.0, 7000.0]
    assert [f["time"][c]["front"] for c in t["checkpoints"]] == [True, False, False, False, False]
    assert [s["time"][c]["front"] for c in t["checkpoints"]] == [False, True, True, True, True]
    assert s["count"][10]["us"] == 9500.0 and s["count"][1000]["us"] == 8000.0 and s["count"][100_000]["us"] == 7000.0
    assert f["count"][10]["us"] == 9000.0
    # the whole front: fast's answer first, then each of slow's improvements that beat it
    assert [(x[0], x[2]) for x in t["front"]] == [(0.01, "fast"), (2.0, "slow"), (20.0, "slow")]
    md = A.markdown([t])
    assert "| 1 s | 3 s | 10 s | 30 s | 100 s |" in md and "**9.00**" in md and "| 9.50 |" in md


def test_checkpoints_end_at_the_limit():
    assert A.checkpoints(100.0) == [1.0, 3.0, 10.0, 30.0, 100.0]
    assert A.checkpoints(5.0) == [1.0, 3.0, 5.0]
    assert A.checkpoints(0.5) == [0.5]


def test_small_run_end_to_end(tmp_path):
    runs = A.run_anytime(["heft", "random"], [GIPH], 0.4)
    heft, rnd = runs
    assert heft.stopped_by == "method" and heft.placements == 1 and len(heft.points) == 1
    assert rnd.stopped_by == "seconds" and rnd.placements > 10
    assert all(p[0] <= 0.6 for p in rnd.points[:-1])  # points are CPU seconds within the run
    info = A.write_outputs(runs, tmp_path, 0.4, "placer bench anytime ...", 1, 1.0, None, plots=False)
    md = (tmp_path / "table.md").read_text()
    assert "| method | 0.4 s |" in md and "| heft |" in md and "| random |" in md
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results.csv").read_text())))
    assert {(r["method"], r["budget"], r["value"]) for r in rows} >= {("heft", "cpu_s", "0.4"), ("random", "cpu_s", "0.4")}
    readme = (tmp_path / "README.md").read_text()
    assert "time.process_time" in readme and "CPU hours" in readme
    assert info["tables"][0]["front"]


def test_cli_refuses_a_limit_past_its_bound(capsys, monkeypatch, tmp_path):
    code, out, err = run_cli(capsys, monkeypatch, "bench", "anytime", "--max-seconds", "5000", "--out", tmp_path / "o")
    assert code == 2 and "--max-seconds" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "o" / "table.md").exists()
    code, out, err = run_cli(capsys, monkeypatch, "bench", "anytime", "--graphs", "nope", "--out", tmp_path / "o")
    assert code == 2 and "--graphs" in err


def test_graphs_option():
    assert A.parse_graphs("giph:tasks=20,seed=1@giph-net:devices=4,seed=2") == [GIPH]
    assert A.parse_graphs("tasks=80") == [A.DEFAULT_GRAPHS[3]]  # part of a default graph's name
