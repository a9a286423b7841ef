"""`placer bench <experiment> --estimate`: the runs a command would make, priced from earlier runs of
the same cells, with nothing run or written."""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import run_cli
from placer.bench import experiments as E
from placer.bench.estimate import estimate, makespan, render, scaled_seconds
from placer.bench.results import estimate_experiment, run_experiment
from placer.bench.runner import make_plan
from placer.bench.spec import Experiment, Level, Method, Row
from placer.frontends.native import save_graph
from placer.zoo.synthetic import layered_training_graph


@pytest.fixture()
def small(tmp_path):
    """Two rows of the same generated graph family, a searching method on both, a fixed one on one."""
    rows = []
    for i in (0, 1):
        g = tmp_path / f"g{i}.json"
        save_graph(layered_training_graph(40 + 20 * i, seed=i, name=f"g{i}"), g)
        rows.append(Row(f"g{i}", str(g), "k80x2"))
    exp = Experiment(name="small", title="Small", paper="none", rows=tuple(rows),
                     methods=(Method("single", "single-gpu", seeded=False), Method("random", "random")),
                     budgets={"quick": Level(10, seeds=(0, 1)), "default": Level(30, seeds=(0, 1)),
                              "paper": Level(90, seeds=(0, 1, 2))})
    return exp, tmp_path / "results"


def _docs(results, exp, label):
    return [json.loads(p.read_text()) for p in sorted((results / exp / "runs").glob(f"*__{label}__*.json"))]


def test_a_run_prices_in_proportion_to_placements_when_it_used_its_budget():
    full = {"seconds": 10.0, "spec": {"placements": 2_000}, "cost": {"placements": 2_000}}
    assert scaled_seconds(full, 20_000, None) == pytest.approx(100.0)
    assert scaled_seconds(full, 500, None) == pytest.approx(2.5)
    short = {"seconds": 8.0, "spec": {"placements": 1_000}, "cost": {"placements": 16}}  # zero-shot: 16 of 1,000
    assert scaled_seconds(short, 20_000, None) == pytest.approx(8.0)  # the same again, not 20x
    assert scaled_seconds(short, 4, None) == pytest.approx(2.0)  # below what it used: in proportion
    assert scaled_seconds(full, None, 60.0) == 60.0  # a budget in seconds takes that long
    assert scaled_seconds({"seconds": None, "spec": {"placements": 5}, "cost": {"placements": 5}}, 9, None) is None


def test_makespan_deals_the_runs_in_order_to_the_worker_free_first():
    assert makespan([5, 4, 3, 3, 3], 2) == 10  # 5 + 3 and 4 + 3 + 3
    assert makespan([1, 1, 6], 2) == 7 and makespan([6, 1, 1], 2) == 6  # the order the runs are made in counts
    assert makespan([5, 4, 3, 3, 3], 1) == 18
    assert makespan([7, 1, 1], 8) == 7
    assert makespan([], 4) == 0


def test_an_estimate_prices_each_cell_from_its_own_runs_and_runs_nothing(small, monkeypatch):
    exp, results = small
    run_experiment(exp, "quick", results, plots=False)
    before = sorted(p.relative_to(results).as_posix() for p in results.rglob("*"))

    def boom(*a, **k):
        raise AssertionError("an estimate simulated")

    import placer.methods.base as base
    import placer.sim as sim
    monkeypatch.setattr(sim, "simulate", boom)
    monkeypatch.setattr(base, "simulate", boom)
    plan = make_plan(exp, "default", results)
    est = estimate(plan, [results], jobs=2)
    assert sorted(p.relative_to(results).as_posix() for p in results.rglob("*")) == before  # nothing written

    by = {m.label: m for m in est.methods}
    assert (by["random"].to_run, by["random"].priced, by["random"].borrowed) == (4, 4, 0)
    assert by["random"].placements == 4 * 30 and by["single"].to_run == 2
    # random used all 10 of its placements at quick: each cell costs the median of its seeds' seconds x 30 / 10
    want = [statistics.median(d["seconds"] for d in _docs(results, "small", "random") if d["row"] == r) * 3
            for r in ("g0", "g1")]
    assert by["random"].seconds == pytest.approx(2 * sum(want))  # seeds 0 and 1 of both rows
    # single GPU simulated one placement of its 10: it costs what it took, whatever the budget
    single = {d["row"]: d["seconds"] for d in _docs(results, "small", "single")}
    assert by["single"].seconds == pytest.approx(sum(single.values()))
    assert est.unpriced == 0 and est.cpu_seconds == pytest.approx(by["random"].seconds + by["single"].seconds)
    assert est.wall_seconds == pytest.approx(makespan(est.run_seconds, 2))
    text = "\n".join(render(est))
    assert "small (default)" in text and "at --jobs 2" in text and "runs priced from" not in text


def test_a_cell_without_runs_borrows_its_methods_other_rows_and_a_method_without_runs_is_counted_apart(small):
    exp, results = small
    run_experiment(exp, "quick", results, plots=False, only_rows={"g0"})
    for p in (results / "small" / "runs").glob("*__single__*.json"):
        p.unlink()  # single has no run anywhere now
    est = estimate(make_plan(exp, "paper", results), [results])
    by = {m.label: m for m in est.methods}
    assert (by["random"].to_run, by["random"].priced, by["random"].borrowed) == (6, 3, 3)  # g1 priced from g0
    g0 = statistics.median(d["seconds"] for d in _docs(results, "small", "random")) * 9
    assert by["random"].seconds == pytest.approx(6 * g0)
    assert (by["single"].to_run, by["single"].priced, by["single"].borrowed) == (2, 0, 0)
    assert est.unpriced == 2
    text = "\n".join(render(est))
    assert "~ 3 runs priced from the method's runs on other rows" in text
    assert "+ 2 runs with no earlier run of their method" in text


def test_the_cli_estimates_and_writes_nothing(small, capsys, monkeypatch, tmp_path):
    from placer.cli.bench import _command_for, bench_app

    exp, results = small
    monkeypatch.setitem(E.EXPERIMENTS, "small", exp)
    monkeypatch.setattr(bench_app, "registered_commands", list(bench_app.registered_commands))
    bench_app.command("small")(_command_for("small", "Small"))
    run_experiment(exp, "quick", results, plots=False)
    n = len(list(results.rglob("*")))
    code, out, err = run_cli(capsys, monkeypatch, "bench", "small", "--budget", "paper", "--estimate",
                             "--jobs", "3", "--results", results)
    assert code == 0, err
    assert "small (paper)" in out and "at --jobs 3" in out and "CPU hours" in out
    assert len(list(results.rglob("*"))) == n
    est = estimate_experiment(exp, "paper", results, jobs=3, sources=[results])
    assert f"{est.cpu_seconds / 3600:,.2f} CPU hours" in out
    code, _, err = run_cli(capsys, monkeypatch, "bench", "small", "--budget", "papr", "--estimate",
                           "--results", results)
    assert code == 2 and "is not a budget level" in err


def test_a_policy_is_priced_from_its_record_at_another_level_per_candidate(tmp_path):
    from placer.bench.estimate import policy_seconds

    d = tmp_path / "exp" / "policies"
    d.mkdir(parents=True)
    # two candidates of 20,000 placements each, 180 s in all (as the generalization records keep them)
    (d / "cifar10__0123456789abcdef.json").write_text(json.dumps(
        {"policy": "cifar10", "placements": 40_000, "seconds": 180.0, "candidates": [{}, {}]}))
    (d / "nmt__0123456789abcdef.json").write_text(json.dumps({"policy": "nmt", "placements": 2_000, "seconds": 14.0}))
    assert policy_seconds("exp", [tmp_path], "cifar10", 200_000) == pytest.approx(1_800.0)
    assert policy_seconds("exp", [tmp_path], "nmt", 100_000) == pytest.approx(700.0)
    assert policy_seconds("exp", [tmp_path], "ptb", 100_000) is None
