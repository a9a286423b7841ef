"""The tables' lower-bound column: each row's bound is placer.lowerbound's under the row's simulator
settings, cached in results/<experiment>/bounds.json and read back instead of recomputed."""

from __future__ import annotations

import json

import pytest

from placer.bench.results import run_experiment
from placer.bench.rowbounds import CACHE, bound_key, proven
from placer.bench.spec import Experiment, Level, Method, Row
from placer.bench.tables import fmt_ms
from placer.cluster import preset
from placer.frontends.native import save_graph
from placer.lowerbound import lower_bound
from placer.problem import Problem
from placer.sim import SimParams
from placer.zoo.synthetic import layered_training_graph


@pytest.fixture()
def bounded(tmp_path):
    gpath = tmp_path / "small.json"
    save_graph(layered_training_graph(60, seed=5, name="small"), gpath)
    exp = Experiment(name="lb", title="bound column", paper="none",
                     rows=(Row("small", str(gpath), "k80x2"),),
                     methods=(Method("single", "single-gpu", seeded=False), Method("rr", "round-robin", seeded=False)),
                     budgets={"quick": Level(5, seeds=(0,)), "default": Level(5, seeds=(0,)), "paper": Level(5)},
                     lower_bound_column=True)
    return exp, tmp_path / "results"


def test_the_bound_cell_is_the_engines_bound_and_the_cache_is_read_back(bounded):
    exp, results = bounded
    out = run_experiment(exp, "quick", results, plots=False)
    assert out.bound_counts == {"cached": 0, "computed": 1}
    P = Problem(layered_training_graph(60, seed=5, name="small"), preset("k80x2"))
    b = lower_bound(P, SimParams.preset("default", P.cluster))
    ctx = out.plan.rows[0]
    assert ctx.lower_bound_us == b.value_us and ctx.bound["source"] == b.source
    md = (results / "lb" / "table.md").read_text()
    best = min(c.doc["result"]["step_time_us"] for c in out.plan.cells if c.doc and not c.doc["result"]["oom"])
    assert f"| {fmt_ms(b.value_us / 1e3)} ({b.source}) | {best / b.value_us:.2f}" in md
    csv_text = (results / "lb" / "results.csv").read_text()
    assert f",{b.value_us}," in csv_text and csv_text.rstrip().endswith(b.source)

    # the cache: one entry under the row's key, holding the engine's bound
    cache = json.loads((results / "lb" / CACHE).read_text())["bounds"]
    assert list(cache) == [bound_key(ctx)] and cache[bound_key(ctx)]["bound"]["value_us"] == b.value_us

    # a second rendering reads the cache: a value written there (here doubled) is the one shown
    doc = json.loads((results / "lb" / CACHE).read_text())
    doc["bounds"][bound_key(ctx)]["bound"]["value_us"] = 2 * b.value_us
    (results / "lb" / CACHE).write_text(json.dumps(doc))
    again = run_experiment(exp, "quick", results, plots=False)
    assert again.bound_counts == {"cached": 1, "computed": 0} and again.stats["ran"] == 0
    assert f"| {fmt_ms(2 * b.value_us / 1e3)} ({b.source}) |" in (results / "lb" / "table.md").read_text()

    # a cache of another bound engine or simulator version (another key) is recomputed, not read
    doc["bounds"] = {"0" * 16: doc["bounds"][bound_key(ctx)]}
    (results / "lb" / CACHE).write_text(json.dumps(doc))
    third = run_experiment(exp, "quick", results, plots=False)
    assert third.bound_counts == {"cached": 0, "computed": 1}
    assert list(json.loads((results / "lb" / CACHE).read_text())["bounds"]) == [bound_key(ctx)]


def test_opt_only_where_a_fitting_step_time_meets_the_bound():
    assert proven({"value_us": 100.0}, 100.0) and proven({"value_us": 100.0}, 100.00001)
    assert not proven({"value_us": 100.0}, 101.0) and not proven(None, 100.0)
    assert not proven({"value_us": float("inf")}, 100.0) and not proven({"value_us": 100.0}, None)


def test_a_row_where_nothing_fits_shows_the_bound_on_every_placement_and_no_ratio():
    from types import SimpleNamespace

    from placer.bench.tables import bound_cell

    ctx = SimpleNamespace(lower_bound_us=2000.0, bound={"value_us": float("inf"), "source": "memory",
                                                        "any_placement_us": 2000.0})
    assert bound_cell(ctx, None) == ["2.00 (no placement fits; any placement)", "—"]
    ctx = SimpleNamespace(lower_bound_us=2000.0, bound={"value_us": 2000.0, "source": "load"})
    assert bound_cell(ctx, 2000.0) == ["2.00 (load)", "1.00 [opt]"] and bound_cell(ctx, 3000.0)[1] == "1.50"
