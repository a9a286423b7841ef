"""Issue 63, "progress misleads": compare's progress named the first queued method (``cpu-only (1/21)
0%`` for minutes), showed no progress within a method and no best so far, and an ETA off the count
of methods. Now every method's evaluator reports its placements done of its budget and its best so
far, from worker processes too, and the display shows the methods running, each with those, and a
time left only for a search with a placement budget, from its own rate."""

from __future__ import annotations

import io
import re

import pytest

from conftest import run_cli

NAMES = ["single-gpu", "random", "local-search", "heft"]


def _problem():
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    return Problem(layered_training_graph(30, seed=2), preset("k80x2"))


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_method_reports_its_placements_and_best_so_far(jobs):
    """The last report of each method is its answer: placements done of its budget and the best it found."""
    from placer.compare import compare_methods

    seen = []
    d = compare_methods(_problem(), NAMES, 200, 0, None, jobs=jobs, on_progress=seen.append)
    by = {}
    for r in seen:
        by.setdefault(r.method, []).append(r)
    assert set(by) == set(NAMES)
    for row in d["rows"]:
        reps = by[row["method"]]
        assert reps[0].placements == 0 and not reps[0].finished  # told when it starts
        last = reps[-1]
        assert last.finished and last.limit == 200
        assert last.placements == row["placements_sampled"]
        assert last.best_us == pytest.approx(row["objective"])
        assert [r.placements for r in reps] == sorted(r.placements for r in reps)


def test_same_seed_same_table_with_progress_on_or_off():
    from placer.compare import compare_methods

    drop = ("wall_s", "cpu_s")  # timings
    a = compare_methods(_problem(), NAMES, 80, 3, None, jobs=2, on_progress=lambda r: None)
    b = compare_methods(_problem(), NAMES, 80, 3, None, jobs=1)
    assert [{k: v for k, v in r.items() if k not in drop} for r in a["rows"]] == \
           [{k: v for k, v in r.items() if k not in drop} for r in b["rows"]]


def test_lineup_shows_the_running_methods_with_an_honest_eta():
    from placer.compare import progress_lineup
    from placer.bench.progress import Report

    L = progress_lineup(["single-gpu", "random", "local-search", "cp-sat"])
    L.update(Report("random", 0, 400, float("inf"), False, 0.0))
    L.update(Report("local-search", 5, 1000, 2000.0, True, 0.5))
    assert L.running() == ["random", "local-search"]  # not the first queued (single-gpu)
    assert L.head() == "0 of 4 methods done, 2 running"
    lines = L.lines()
    assert lines["random"] == "random 0/400 placements (0%)"  # nothing done yet: no best, no ETA
    assert "~" not in lines["local-search"]  # 5 of 1,000 placements: too few to read a rate off
    L.update(Report("local-search", 250, 1000, 1500.0, True, 10.0))
    assert L.lines()["local-search"] == "local-search 250/1,000 placements (25%), best 1.50 ms, ~0:00:30 left"
    L.update(Report("single-gpu", 1, 400, 900.0, False, 0.1))  # a construction: no time left shown
    assert L.lines()["single-gpu"] == "single-gpu 1/400 placements (0%), best 0.90 ms (OOM)"
    L.update(Report("cp-sat", 0, None, float("inf"), False, 1.0))
    assert L.lines()["cp-sat"] == "cp-sat 0 placements, stops by 30 s"
    L.update(Report("random", 400, 400, 1700.0, True, 3.0, finished=True))
    assert "random" not in L.running() and L.head() == "1 of 4 methods done, 3 running"


def test_compare_progress_display_names_running_methods(tmp_path, capsys, monkeypatch):
    """On a terminal, the display names each running method with its placements of its budget, and
    never the old ``method (k/n)`` of the first queued method."""
    from rich.console import Console

    import placer.cli.compare as cli

    buf = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=buf, force_terminal=True, width=120))
    code, out, err = run_cli(capsys, monkeypatch, "compare", "synthetic", "--methods", ",".join(NAMES),
                             "--budget", "150", "--jobs", "2")
    assert code == 0, err
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    for name in NAMES:
        assert re.search(rf"{name} \d+/150 placements \(\d+%\)", shown), name
    assert "methods done" in shown and "(1/4)" not in shown
