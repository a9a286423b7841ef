"""The reproduction harness: a tiny experiment end to end, the run cache, honest empty cells, and
the transcribed paper numbers checked against the papers' own derived columns."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from conftest import run_cli
from placer.bench import columns as C
from placer.bench import experiments as E
from placer.bench import graphs as G
from placer.bench.results import run_experiment, runs_made_on
from placer.bench.report import build_report
from placer.bench.runner import decode_placement, encode_placement, make_plan, placements_to_best
from placer.bench.spec import HARNESS_VERSION, LEVELS, Agg, Experiment, Level, Method, Row, stable_hash, with_registered
from placer.cluster import preset
from placer.frontends.native import save_graph
from placer.problem import Problem
from placer.sim import simulate
from placer.zoo.synthetic import layered_training_graph


@pytest.fixture()
def tiny(tmp_path):
    """A 60-op synthetic graph on 2 GPUs, two real methods, one that does not exist, a variant whose
    parameter the method would swallow, and a graph that is not there."""
    gpath = tmp_path / "tiny.json"
    save_graph(layered_training_graph(60, seed=3, name="tiny"), gpath)
    exp = Experiment(
        name="tiny", title="Tiny test experiment", paper="none",
        rows=(Row("tiny", str(gpath), "k80x2", paper={"single": 1.0}),
              Row("absent", "no-such-zoo-model", "k80x2")),
        methods=(Method("single", "single-gpu", seeded=False),
                 Method("random", "random"),
                 Method("expert", "expert", seeded=False),  # no expert rule fits a synthetic graph
                 Method("future", "no-such-method"),
                 Method("random (transfer)", "random", params={"transfer_from": "x"})),
        budgets={"quick": Level(15, seeds=(0, 1)), "default": Level(25, seeds=(0, 1)), "paper": Level(50)},
        derived=(E.Derived("random vs single", C.reduction_vs("single", "random")),),
        differences=("it is a test",),
    )
    return exp, tmp_path / "results", gpath


def _poison_simulator(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("simulated although every run was cached")

    import placer.methods.base as base
    import placer.sim as sim

    monkeypatch.setattr(sim, "simulate", boom)
    monkeypatch.setattr(base, "simulate", boom)


def test_tiny_experiment_end_to_end_and_resume(tiny, monkeypatch):
    exp, results, gpath = tiny
    out = run_experiment(exp, "quick", results)
    d = results / "tiny"
    assert out.stats["ran"] == 4 and out.stats["cached"] == 0  # single, expert (one seed each) + random x 2
    for name in ("table.md", "results.csv", "summary.json", "env.json"):
        assert (d / name).stat().st_size > 0
    runs = sorted((d / "runs").glob("*.json"))
    assert len(runs) == 4  # "does not apply" is cached like a result
    docs = [json.loads(p.read_text()) for p in runs]
    assert [x["status"] for x in docs].count("does not apply") == 1
    runs = [p for p, x in zip(runs, docs) if x["status"] == "ok"]
    pngs = sorted(p.name for p in (d / "plots").glob("*.png"))
    assert pngs == ["tiny__k80x2__curve.png", "tiny__k80x2__timeline.png"]
    assert all((d / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)

    # a run file holds the placement, its simulation summary, the curve and the cost; re-simulating
    # its placement gives its step time exactly
    g, c = layered_training_graph(60, seed=3, name="tiny"), preset("k80x2")
    P = Problem(g, c)
    docs = [json.loads(p.read_text()) for p in runs]
    for doc in docs:
        p = decode_placement(doc["placement"])
        assert len(p) == g.n_ops
        assert simulate(P, p).makespan_us == doc["result"]["step_time_us"] == doc["sim"]["makespan_us"]
        assert doc["cost"]["placements"] >= 1 and doc["cost"]["sim_calls"] >= 1 and doc["cost"]["seconds"] >= 0
        assert doc["curve"][-1][1] == pytest.approx(doc["result"]["objective"])
    rnd = [x for x in docs if x["method"] == "random"]
    assert sorted(x["seed"] for x in rnd) == [0, 1] and all(x["cost"]["placements"] == 15 for x in rnd)
    single = next(x for x in docs if x["method"] == "single-gpu")
    assert single["result"]["step_time_us"] == simulate(P, np.zeros(g.n_ops, dtype=np.int64)).makespan_us

    # the table: our number, the paper's beside it, and honest empty cells
    md = (d / "table.md").read_text()
    assert f"{single['result']['step_time_us'] / 1e3:,.2f}" in md
    assert "| single paper (s) |" in md and "| 1.00 |" in md
    assert "not implemented [" in md and "no method 'no-such-method'" in md
    assert "does not take these parameters" in md and "transfer_from" in md  # not run as plain random
    assert "missing [" in md and "no-such-zoo-model" in md
    rows = list(csv.DictReader((d / "results.csv").open()))
    assert len(rows) == 2 * (1 + 2 + 1 + 2 + 2)  # rows x cells (single and expert have one seed)
    assert {r["status"] for r in rows} == {"ok", "not implemented", "missing", "does not apply"}
    assert "does not apply [" in md and "no expert rule applies" in md
    env = json.loads((d / "env.json").read_text())
    assert env["packages"]["numpy"] and env["seeds"] == [0, 1] and env["level"] == "quick"

    # second invocation: everything from cache, no simulation at all (plots included)
    _poison_simulator(monkeypatch)
    again = run_experiment(exp, "quick", results)
    assert again.stats["ran"] == 0 and again.stats["cached"] == 4
    assert (d / "table.md").read_text().split("## Why")[0].split("\n", 6)[-1] == md.split("## Why")[0].split("\n", 6)[-1]


def test_interrupted_experiment_resumes_only_missing_runs(tiny):
    exp, results, _ = tiny
    run_experiment(exp, "quick", results, plots=False)
    runs = sorted((results / "tiny" / "runs").glob("*.json"))
    runs[0].unlink()  # as if the process died before this run finished
    runs[1].write_text(runs[1].read_text()[:50])  # or mid-write of a file
    out = run_experiment(exp, "quick", results, plots=False)
    assert out.stats["ran"] == 2 and out.stats["cached"] == 2


def test_budget_change_reruns_and_prunes_stale_runs(tiny):
    exp, results, _ = tiny
    run_experiment(exp, "quick", results, plots=False)
    before = {p.name for p in (results / "tiny" / "runs").glob("*.json")}
    out = run_experiment(exp, "default", results, plots=False)
    after = {p.name for p in (results / "tiny" / "runs").glob("*.json")}
    assert out.stats["ran"] == 4 and out.stats["cached"] == 0  # the budget is part of every run's hash
    assert len(after) == 4 and not (before & after) and out.stats["pruned"] == 4


def test_a_filtered_run_keeps_left_out_cells_of_older_code_marked_stale(tiny, monkeypatch):
    """After a method's version is bumped, a command restricted to other methods shows that method's
    cells as they were (marked stale, counted by the report) instead of holes; a full command redoes
    them, and a run that replaces an older one of its cell removes the older file."""
    import placer.bench.runner as R
    from placer.bench.report import stale_runs

    exp, results, _ = tiny
    d = results / "tiny"

    def table():
        return {(r["method_label"], r["seed"]): r for r in csv.DictReader((d / "results.csv").open()) if r["row"] == "tiny"}

    run_experiment(exp, "quick", results, plots=False)
    before = table()
    files = {p.name for p in (d / "runs").glob("*.json")}
    import dataclasses

    from placer.methods import base

    for m in ("random", "expert"):  # both bumped on purpose
        monkeypatch.setitem(base.METHODS, m, dataclasses.replace(base.METHODS[m], version=base.METHODS[m].version + 1))
    assert stale_runs(results, "tiny")[:2] == (3, 4)  # single, expert (does not apply) and random x 2

    out = run_experiment(exp, "quick", results, only_methods={"single"}, plots=False)
    assert out.stats["ran"] == 0 and out.stats["kept_stale"] == 3 and out.stats["pruned"] == 0
    after = table()
    for seed in ("0", "1"):
        old, new = before[("random", seed)], after[("random", seed)]
        assert new["status"] == "ok" and new["step_time_us"] == old["step_time_us"]
        assert new["run_file"] == old["run_file"] and new["reason"] == R.STALE_REASON
    assert "stale [" in (d / "table.md").read_text()
    assert {p.name for p in (d / "runs").glob("*.json")} == files
    expert = after[("expert", "0")]  # a "does not apply" kept from older code says why, and that it is stale
    assert expert["status"] == "does not apply" and "no expert rule applies" in expert["reason"]
    assert R.STALE_REASON in expert["reason"] and expert["run_file"] == before[("expert", "0")]["run_file"]
    assert stale_runs(results, "tiny") == (3, 4, ["expert", "random"])

    out = run_experiment(exp, "quick", results, only_methods={"random"}, plots=False)  # redoes them
    assert out.stats["ran"] == 2 and out.stats["kept_stale"] == 1 and out.stats["pruned"] == 2
    now = {p.name for p in (d / "runs").glob("*.json")}
    assert len(now) == 4 and len(now & files) == 2  # single's and expert's stay, random's are replaced
    assert stale_runs(results, "tiny") == (1, 4, ["expert"]) and "stale [" not in (d / "table.md").read_text()


def test_a_cell_with_fewer_seeds_than_asked_says_how_many_ran(tiny):
    """A method run for seed 0 only, then left out of a command for both seeds: its cell shows
    seed 0's value and says that 1 of 2 seeds ran, the other not run (not a bare 'not run' that
    would read as if the value were missing)."""
    exp, results, _ = tiny
    run_experiment(exp, "quick", results, seeds=(0,), only_methods={"random"}, plots=False)
    out = run_experiment(exp, "quick", results, only_methods={"single"}, plots=False)
    assert out.stats["ran"] == 1  # single (one run: it takes no seed)
    rows = [r for r in csv.DictReader((results / "tiny" / "results.csv").open())
            if r["row"] == "tiny" and r["method_label"] == "random"]
    assert sorted((r["seed"], r["status"]) for r in rows) == [("0", "ok"), ("1", "not run")]
    value = float(next(r for r in rows if r["seed"] == "0")["step_time_us"]) / 1e3
    line = next(li for li in (results / "tiny" / "table.md").read_text().splitlines() if li.startswith("| tiny |"))
    cells = [c for c in line.split("|") if f"{value:,.2f}" in c]
    assert len(cells) == 1 and cells[0].strip().endswith("(1 of 2 seeds; the others not run [1])"), line


def test_a_stale_run_is_one_of_older_code_and_otherwise_the_same_spec(tmp_path):
    """Only a run that differs in the versions it was made at (and the policies those versions trained)
    stands in for a left-out cell; a run of another budget, or of the same versions with another policy,
    does not."""
    import placer.bench.runner as R

    new, old = {"method": 2, "sim": 1, "cost": 1}, {"method": 1, "sim": 1, "cost": 1}
    spec = {"method": "placeto", "seed": 0, "placements": 100, "versions": new, "policies": {"p": "h2"}}
    name = "row__k80x2__placeto-transfer__s0__" + stable_hash(spec) + ".json"

    def write(h, **change):
        doc = {"status": "ok", "hash": h, "spec": {**spec, **change}}
        (tmp_path / f"row__k80x2__placeto-transfer__s0__{h}.json").write_text(json.dumps(doc))

    write("a" * 16, placements=50, versions=old)  # another budget
    write("b" * 16, policies={"p": "h1"})  # same versions, another policy: the experiment changed
    write("c" * 16, versions=old, policies={"p": "h1"})  # an older version, which trained another policy
    (tmp_path / "row__k80x2__placeto__s0__dddddddddddddddd.json").write_text(
        json.dumps({"status": "ok", "spec": {**spec, "versions": old}}))  # another cell
    def cell_files():  # as make_plan groups the run files by cell
        return [p for p in tmp_path.glob("*.json") if R.identity(p.name) == R.identity(name)]

    assert len(cell_files()) == 3
    path, doc = R.stale_run(cell_files(), spec)
    assert path.name.endswith("c" * 16 + ".json") and doc["spec"]["versions"] == old
    path.unlink()
    assert R.stale_run(cell_files(), spec) is None


def test_parallel_jobs_give_the_same_results(tiny, tmp_path):
    exp, results, _ = tiny
    a = run_experiment(exp, "quick", results, jobs=1, plots=False)
    b = run_experiment(exp, "quick", tmp_path / "par", jobs=2, plots=False)
    assert b.stats["ran"] == 4
    key = lambda o: sorted((c.method.label, c.seed, c.doc["result"]["step_time_us"], c.doc["placement"]["devices"])
                           for c in o.plan.cells if c.doc)
    assert key(a) == key(b)


def test_report_summarises_committed_results(tiny, monkeypatch):
    exp, results, _ = tiny
    monkeypatch.setitem(E.EXPERIMENTS, "tiny", exp)
    run_experiment(exp, "quick", results, plots=False)
    text = build_report(results)
    assert "## Tiny test experiment" in text and "placer bench tiny --quick" in text
    assert "method future (not implemented" in text and "graph absent (zoo model" in text
    assert "- it is a test" in text
    assert "## Placeto Table 1" in text and "Not run yet" in text  # experiments without results say so
    assert "| yes |" in text and "**Stale:**" not in text  # every run made with today's code
    run = sorted((results / "tiny" / "runs").glob("*.json"))[0]
    doc = json.loads(run.read_text())
    doc["spec"]["versions"]["method"] = 0  # as if the method's version had been bumped since the run
    run.write_text(json.dumps(doc))
    text = build_report(results)
    assert f"**Stale:** 1 of {len(list(run.parent.glob('*.json')))} runs were made at an older version" in text
    assert f"{doc['spec']['method']})" in text


def test_a_run_that_places_with_a_policy_also_depends_on_the_policy_mode_version(monkeypatch):
    """A run of a learned method that places with a given policy carries the version of its policy
    mode beside the method's; a search-mode run does not, so bumping only the policy mode redoes only
    the runs that place with a policy. A method without a policy mode has none to carry."""
    from placer.bench.versions import versions
    from placer.methods.learned import protocol as learned

    search, placed = versions("placeto"), versions("placeto", policy=True)
    assert "policy" not in search and placed == {**search, "policy": learned.policy_version("placeto")}
    monkeypatch.setitem(learned.POLICY_VERSIONS, "placeto", 99)
    assert versions("placeto") == search and versions("placeto", policy=True)["policy"] == 99
    assert "policy" not in versions("heft", policy=True) and learned.policy_version("heft") is None


def test_a_paper_budget_table_beside_the_default_one_is_reported_with_its_command_and_machines(tiny, monkeypatch):
    exp, results, _ = tiny
    monkeypatch.setitem(E.EXPERIMENTS, "tiny", exp)
    run_experiment(exp, "quick", results, plots=False)
    out = run_experiment(exp, "default", results / "paper", seeds=(1,), plots=False)
    cmd = "placer bench tiny --seeds 1 --results " + (results / "paper").as_posix()
    md = (results / "paper" / "tiny" / "table.md").read_text()
    assert f"Regenerate: `{cmd}`" in md  # the seeds and folder it was made with, not the level's
    n = sum(c.doc is not None for c in out.plan.cells)
    assert n and f"Runs made on: {runs_made_on(out.plan)}." in md and runs_made_on(out.plan).endswith(f": {n} runs")
    assert all(c.doc["host"]["cpus"] == os.cpu_count() for c in out.plan.cells if c.doc)
    text = build_report(results)
    quick, paper = text.index("## Tiny test experiment\n"), text.index("## Tiny test experiment (budget default, ")
    assert quick < paper and f"`{cmd}`" in text[paper:] and "[tiny (default, seeds 1)](#" in text
    # run files written before the machine was recorded say so
    run = next(c.path for c in out.plan.cells if c.doc)
    doc = json.loads(run.read_text())
    del doc["host"]
    run.write_text(json.dumps(doc))
    again = run_experiment(exp, "default", results / "paper", seeds=(1,), plots=False)
    assert again.stats["ran"] == 0 and "not recorded: 1 run" in runs_made_on(again.plan)


def test_missing_shared_graphs_show_as_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(G.ENV_VAR, str(tmp_path / "nowhere"))
    plan = make_plan(E.EXPERIMENTS["real-graphs"], "quick", tmp_path / "r")
    assert plan.cells and all(c.status in ("missing", "n/a", "not implemented", "unavailable") for c in plan.cells)
    assert any("nowhere" in c.reason and G.ENV_VAR in c.reason for c in plan.cells if c.status == "missing")


def test_helpers():
    assert placements_to_best([(1, 10.0), (5, 8.0), (9, 8.0)], 12) == 5
    assert placements_to_best([], 7) == 7
    p = np.array([0, 1, 2, 11, 35, 0])
    assert np.array_equal(decode_placement(encode_placement(p, 36)), p)
    assert np.array_equal(decode_placement(encode_placement(np.array([40, 2]), 41)), [40, 2])
    blocks = np.repeat([0, 1, 0, 2], [50, 30, 15, 5])
    enc = encode_placement(blocks, 3)
    assert enc == {"encoding": "runs", "devices": [[0, 50], [1, 30], [0, 15], [2, 5]]}
    assert np.array_equal(decode_placement(enc), blocks)
    assert decode_placement(encode_placement(np.zeros(0, dtype=np.int64), 2)).shape == (0,)
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})
    a = {"x": Agg(2.0, False, 5, 10, 1, 1), "y": Agg(1.0, False, 2, 10, 1, 1), "z": Agg(0.5, True, 1, 1, 1, 1)}
    assert C.reduction_vs(("x", "z"), "y")(a) == pytest.approx(50.0)  # z is OOM: left out of the base
    assert C.reduction_vs("x", "z")(a) is None
    assert C.ratio_of_counts("x", "y")(a) == pytest.approx(2.5)


def test_experiment_specs_are_consistent():
    assert set(E.EXPERIMENTS) >= {"placeto-table1", "hp-table1", "post-table1", "mars", "classical",
                                  "generalization", "real-graphs"}
    for exp in E.EXPERIMENTS.values():
        assert set(exp.budgets) == set(LEVELS)
        labels = {m.label for m in with_registered(exp)}
        assert len(labels) == len(with_registered(exp)), exp.name
        names = labels | {d.name for d in exp.derived}
        for r in exp.rows:
            assert set(r.paper) <= names, (exp.name, r.label, set(r.paper) - names)
            assert set(r.skip) <= labels
        assert any("quick" in r.levels for r in exp.rows)


def _range_reduction(base: float, new: float) -> tuple[float, float]:
    """The reduction 100*(base-new)/base over all values that round (2 decimals) to base and new."""
    lo = 100 * ((base - 0.005) - (new + 0.005)) / (base - 0.005)
    hi = 100 * ((base + 0.005) - (new - 0.005)) / (base + 0.005)
    return min(lo, hi) - 0.05, max(lo, hi) + 0.05


@pytest.mark.parametrize("name,base_labels,new", [
    ("hp-table1", E.HP_PRIOR, "Hierarchical Planner"),
    ("post-table1", ("Policy Gradient",), "Post"),
])
def test_transcribed_paper_numbers_agree_with_the_papers_reductions(name, base_labels, new):
    """Each paper's reduction column follows from its time columns (up to their 2-decimal rounding):
    a transposed or mistyped number fails here."""
    exp = E.EXPERIMENTS[name]
    col = exp.derived[0].name
    for r in exp.rows:
        base = min(v for k, v in r.paper.items() if k in base_labels and isinstance(v, float))
        lo, hi = _range_reduction(base, r.paper[new])
        assert lo <= r.paper[col] <= hi, (r.label, r.cluster, lo, r.paper[col], hi)


def test_placeto_speedup_factor_matches_its_counts():
    for r in E.EXPERIMENTS["placeto-table1"].rows:
        if "Speedup factor" in r.paper:
            ratio = r.paper["RNN-based #placements"] / r.paper["Placeto (transfer) #placements"]
            assert round(ratio) == r.paper["Speedup factor"] or int(ratio) == r.paper["Speedup factor"]


def test_transfer_column_trains_its_policy_once_and_reuses_it(tmp_path, monkeypatch):
    """A "@policy:<name>" parameter: the policy is trained first (cost recorded beside the
    checkpoint), the run starts from it, and a second invocation trains and simulates nothing."""
    from placer.methods import METHODS

    if "placeto" not in METHODS or METHODS["placeto"].available():
        pytest.skip("placeto (torch extra) not available")
    from placer.bench.spec import PolicySpec

    gpath = tmp_path / "g.json"
    save_graph(layered_training_graph(40, seed=5, name="g"), gpath)
    exp = Experiment(
        name="transfer", title="t", paper="none", rows=(Row("g", str(gpath), "k80x2"),),
        methods=(Method("zero-shot", "placeto", params={"policy": "@policy:p", "finetune": 0, "grouping": "contiguous:6", "workers": 2}),),
        budgets={lv: Level(20) for lv in LEVELS},
        policies={"p": PolicySpec(graphs=(str(gpath),), placements={"quick": 20}, groups=6)},
    )
    out = run_experiment(exp, "quick", tmp_path / "r", plots=False)
    assert out.stats["ran"] == 1 and out.stats["errors"] == 0, [c.reason for c in out.plan.cells]
    pols = list((tmp_path / "r" / "transfer" / "policies").glob("p__*.pt"))
    assert len(pols) == 1
    record = json.loads(pols[0].with_suffix(".json").read_text())
    # the policy trains on its budget of 20 placements, never more (6 groups: 3 whole episodes)
    assert 0 < record["sim_calls"] <= 20 and record["episodes"] >= 1 and record["graphs"] == ["g"]
    doc = out.plan.cells[0].doc
    assert doc["spec"]["policies"] == {"p": record["hash"]} and "placed with" in " ".join(doc["result"]["notes"])
    md = (tmp_path / "r" / "transfer" / "table.md").read_text()
    assert f"- `p`: placeto's trainer on g (k80x2): {record['episodes']:,} episodes, {record['sim_calls']:,} simulator" in md
    _poison_simulator(monkeypatch)
    import placer.bench.policies as pol

    monkeypatch.setattr(pol, "train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    again = run_experiment(exp, "quick", tmp_path / "r", plots=False)
    assert again.stats["ran"] == 0 and again.stats["cached"] == 1


def test_a_policy_of_another_learned_method_is_trained_by_its_own_trainer_on_every_cluster(tmp_path, monkeypatch):
    """``PolicySpec.method``: GDP's trainer makes the policy, on each graph on each of ``clusters``;
    the column places with the loaded policy object, and a second invocation trains nothing."""
    from placer.methods import METHODS

    if "gdp" not in METHODS or METHODS["gdp"].available():
        pytest.skip("gdp (torch_geometric extra) not available")
    from placer.bench.spec import PolicySpec

    gpath = tmp_path / "g.json"
    save_graph(layered_training_graph(30, seed=2, name="g"), gpath)
    spec = PolicySpec(graphs=(str(gpath),), clusters=("k80x2", "k80x2"), method="gdp", placements={"quick": 16},
                      trainer={"batch": 4, "split_search": 0})
    exp = Experiment(
        name="other", title="t", paper="none", rows=(Row("g", str(gpath), "k80x2"),),
        methods=(Method("zero-shot", "gdp", params={"policy": "@policy:p", "finetune": 0}),),
        budgets={lv: Level(8) for lv in LEVELS}, policies={"p": spec},
    )
    out = run_experiment(exp, "quick", tmp_path / "r", plots=False)
    assert out.stats["ran"] == 1 and out.stats["errors"] == 0, [c.reason for c in out.plan.cells]
    pols = list((tmp_path / "r" / "other" / "policies").glob("p__*.pt"))
    assert len(pols) == 1
    record = json.loads(pols[0].with_suffix(".json").read_text())
    assert record["method"] == "gdp" and record["graphs"] == ["g", "g"] and record["clusters"] == ["k80x2"]
    assert record["placements"] == 16 and record["versions"]["method"] == METHODS["gdp"].version
    md = (tmp_path / "r" / "other" / "table.md").read_text()
    assert "- `p`: gdp's trainer on g, g (k80x2): within 16 simulated placements" in md
    import placer.bench.policies as pol

    monkeypatch.setattr(pol, "train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    again = run_experiment(exp, "quick", tmp_path / "r", plots=False)
    assert again.stats["ran"] == 0 and again.stats["cached"] == 1


def test_a_policys_trainer_overrides_key_only_that_policy_and_reach_its_training(tmp_path):
    """``PolicySpec.trainer`` sets PlacetoConfig fields for training one policy: its hash changes and
    nothing else's (a spec without overrides keeps the hash it had, so committed policies stay
    cached; so does a field that search on one graph alone reads, ``SEARCH_ONLY``), the trained
    checkpoint carries the override, and an unknown field is refused."""
    from placer.methods import METHODS

    if "placeto" not in METHODS or METHODS["placeto"].available():
        pytest.skip("placeto (torch extra) not available")
    import dataclasses

    import placer.bench.policies as pol
    from placer.bench.runner import sim_params
    from placer.bench.spec import PolicySpec
    from placer.errors import InputError
    from placer.bench.versions import versions
    from placer.methods.learned.placeto import SEARCH_ONLY, PlacetoConfig
    from placer.rl.checkpoint import load_checkpoint

    gpath = tmp_path / "g.json"
    save_graph(layered_training_graph(40, seed=5, name="g"), gpath)
    base = dict(graphs=(str(gpath),), placements={"quick": 16}, groups=6)
    exp = Experiment(name="pol", title="t", paper="none", rows=(Row("g", str(gpath), "k80x2"),), methods=(),
                     budgets={lv: Level(16) for lv in LEVELS},
                     policies={"plain": PolicySpec(**base), "low": PolicySpec(**base, trainer={"keep_bias": 0.25}),
                               "typo": PolicySpec(**base, trainer={"keep_bais": 0.25}),
                               "restart": PolicySpec(**base, trainer={"restart": "start"})})
    sim = dataclasses.asdict(sim_params(exp.sim))
    plain, low, restart = (pol.prepare(exp, n, "quick", tmp_path, exp.sim) for n in ("plain", "low", "restart"))
    assert restart.hash == plain.hash  # policy training does not read it
    assert plain.hash == stable_hash({"harness": HARNESS_VERSION, "graphs": [G.graph_fingerprint(p.graph) for p in plain.problems],
                                      "clusters": [G.cluster_fingerprint(p.cluster) for p in plain.problems],
                                      "placements": 16, "seed": 0, "sim": sim,
                                      "trainer": {k: v for k, v in {**PlacetoConfig().to_dict(), "log": None, "devices": "gpus"}.items()
                                                  if k not in SEARCH_ONLY and k != "progress"},
                                      "versions": versions("placeto")})  # devices as training resolves "auto"
    assert low.hash != plain.hash
    with pytest.raises(InputError, match="keep_bais"):
        pol.prepare(exp, "typo", "quick", tmp_path, exp.sim)
    low.path.parent.mkdir(parents=True)
    pol.train(low, exp.sim)
    state = load_checkpoint(low.path)
    assert state["policy_config"]["keep_bias"] == 0.25


def test_a_policy_with_choices_keeps_the_candidate_that_places_its_training_graphs_best(tmp_path):
    """``PolicySpec.choices``: one policy per candidate, each on the whole budget; the kept one has
    the lowest zero-shot score on the training graphs, and the record counts every candidate."""
    from placer.methods import METHODS

    if "placeto" not in METHODS or METHODS["placeto"].available():
        pytest.skip("placeto (torch extra) not available")
    import dataclasses

    import placer.bench.policies as pol
    from placer.bench.spec import PolicySpec
    from placer.rl.checkpoint import load_checkpoint

    gpaths = []
    for i in range(2):
        gpaths.append(tmp_path / f"g{i}.json")
        save_graph(layered_training_graph(40, seed=5 + i, name=f"g{i}"), gpaths[-1])
    spec = PolicySpec(graphs=tuple(map(str, gpaths)), placements={"quick": 24}, groups=6,
                      trainer={"grouping": "contiguous:6"}, choices=({"init": "single"}, {"init": "random"}))
    exp = Experiment(name="pol", title="t", paper="none", rows=(Row("g", str(gpaths[0]), "k80x2"),), methods=(),
                     budgets={lv: Level(24) for lv in LEVELS}, policies={"p": spec})
    ctx = pol.prepare(exp, "p", "quick", tmp_path, exp.sim)
    one = pol.prepare(dataclasses.replace(exp, policies={"p": dataclasses.replace(spec, choices=())}), "p", "quick",
                      tmp_path, exp.sim)
    assert ctx.hash != one.hash
    ctx.path.parent.mkdir(parents=True)
    rec = pol.train(ctx, exp.sim)
    cands = rec["candidates"]
    assert [c["trainer"]["init"] for c in cands] == ["single", "random"]
    assert all(0 < c["placements"] <= 24 and c["sim_calls"] > c["placements"] for c in cands)  # + the scoring
    assert rec["sim_calls"] == sum(c["sim_calls"] for c in cands)
    kept = min(cands, key=lambda c: c["score_us"])
    assert rec["chosen"] == kept["trainer"]
    assert load_checkpoint(ctx.path)["env_config"]["init"] == kept["trainer"]["init"]


def test_findings_name_the_winner_and_the_closest_to_the_bound():
    from placer.bench.report import findings

    st = [{"method": "a", "rows": 4, "geo_lb": 1.5, "worst_lb": 2.0, "wins": 3, "geo_cp_sat": 0.9, "placements": 200,
           "seconds": 3.0},
          {"method": "b", "rows": 4, "geo_lb": 1.2, "worst_lb": 1.3, "wins": 1, "geo_cp_sat": None, "placements": 3,
           "seconds": 0.1},
          {"method": "cp-sat", "rows": 4, "geo_lb": 1.4, "worst_lb": 1.6, "wins": 0, "geo_cp_sat": 1.0,
           "placements": 4, "seconds": 9.0}]
    text = "\n".join(findings({"method_stats": st}))
    assert "Best most often: a (3 rows" in text
    assert "Closest to the lower bound on average, among methods with a result on at least 80% of the 4 rows: b " \
           "(geometric mean 1.20x" in text
    assert "at most 20 simulated placements: b" in text
    assert "Beat CP-SAT's time-limited, coarsened result on average: a " in text


def test_agreement_lines_compare_directions_and_winners():
    from placer.bench.report import agreement_lines

    s = {"comparisons": [
        {"row": "A", "cluster": "k80x2", "column": "Reduction", "kind": "derived", "paper": 40.0, "ours": -3.0,
         "fmt": "{:.1f}%"},
        {"row": "B", "cluster": "k80x2", "column": "Reduction", "kind": "derived", "paper": 40.0, "ours": None,
         "fmt": "{:.1f}%"},
        {"row": "A", "cluster": "k80x2", "column": "X", "kind": "time", "paper": 1.0, "ours_ms": 5.0, "ours_oom": False},
        {"row": "A", "cluster": "k80x2", "column": "Y", "kind": "time", "paper": 2.0, "ours_ms": 4.0, "ours_oom": False},
        {"row": "A", "cluster": "k80x2", "column": "Z", "kind": "time", "paper": 0.5, "ours_ms": None, "ours_oom": False},
    ]}
    lines = agreement_lines(s)
    assert "A (k80x2), Reduction: paper 40.0%, ours -3.0% (OPPOSITE direction)." in lines
    assert any(t.startswith("A (k80x2), best of the 2 columns both have: paper X (1 s), ours Y (4.00 ms): differs; "
                            "the paper's overall best, Z, has no result here") for t in lines)
    assert lines[-1] == "Not comparable yet (a method in the column has no result): Reduction (1 rows)."


_cli = run_cli


def test_cli_list_report_and_bad_input(capsys, monkeypatch, tmp_path):
    code, out, _ = _cli(capsys, monkeypatch, "bench", "list")
    assert code == 0 and "placeto-table1" in out and "real-graphs" in out
    code, _, err = _cli(capsys, monkeypatch, "bench", "report", "--results", tmp_path / "none", "--out", tmp_path / "R.md")
    assert code == 2 and "does not exist" in err and not (tmp_path / "R.md").exists()  # a typo is not an empty report
    (tmp_path / "none").mkdir()
    code, _, err = _cli(capsys, monkeypatch, "bench", "report", "--results", tmp_path / "none", "--out", tmp_path / "R.md")
    assert code == 0 and "Not run yet" in (tmp_path / "R.md").read_text()
    code, _, err = _cli(capsys, monkeypatch, "bench", "classical", "--quick", "--budget", "paper",
                        "--results", tmp_path)
    assert code == 2 and "asks for two budgets" in err and not (tmp_path / "classical").exists()
    code, _, err = _cli(capsys, monkeypatch, "bench", "classical", "--seeds", "a,b", "--results", tmp_path)
    assert code == 2 and "--seeds" in err


def test_only_not_applicable_is_cached_and_errors_are_not(tmp_path, monkeypatch):
    """A bug (any exception but NotApplicable) is reported as an error and never cached as a fact."""
    from placer.bench import runner
    from placer.methods import base

    gpath = tmp_path / "g.json"
    save_graph(layered_training_graph(20, seed=1, name="g"), gpath)
    exp = Experiment(name="c", title="cache", paper="none", rows=(Row("g", str(gpath), "k80x2"),),
                     methods=(Method("random", "random", seeded=False),),
                     budgets={"quick": Level(3), "default": Level(3), "paper": Level(3)})
    info = base.METHODS["random"]
    for exc, status in ((ValueError("a bug"), "error"), (base.NotApplicable("random", "not here"), "does not apply")):
        def boom(*a, _e=exc, **k):
            raise _e

        monkeypatch.setitem(base.METHODS, "random", base.MethodInfo("random", boom, info.summary, info.family,
                                                                     info.config))
        out = run_experiment(exp, "quick", tmp_path / status.replace(" ", "_"))
        cells = [c for c in out.plan.cells if c.method.method == "random"]
        assert [c.status for c in cells] == [status]
        runs = list((tmp_path / status.replace(" ", "_") / "c" / "runs").glob("*.json"))
        assert len(runs) == (1 if status == "does not apply" else 0)


def test_a_run_records_its_versions_and_the_commit_it_was_made_at(tiny):
    """The cache keys on declared versions, not on source: every run's spec holds the versions of its
    method, the simulator and the cost model, today's; its file names the commit that made it."""
    from placer import cost, sim
    from placer.methods import METHODS

    exp, results, _ = tiny
    run_experiment(exp, "quick", results, plots=False)
    docs = [json.loads(p.read_text()) for p in (results / "tiny" / "runs").glob("*.json")]
    assert docs
    for doc in docs:
        assert doc["spec"]["versions"] == {"method": METHODS[doc["method"]].version, "sim": sim.VERSION,
                                           "cost": cost.VERSION}
        assert "code" not in doc["spec"]
        src = doc.get("source")
        assert src is None or (len(src["commit"]) == 40 and isinstance(src["dirty"], bool))


def test_a_version_bump_stales_only_that_methods_runs(tiny, monkeypatch):
    """Bumping one method's version makes its runs stale and no other's; a bump of the simulator's
    makes every run stale."""
    import dataclasses

    from placer import sim
    from placer.bench.runner import make_plan
    from placer.methods import base

    exp, results, _ = tiny
    run_experiment(exp, "quick", results, plots=False)

    def to_run():
        return sorted({c.method.method for c in make_plan(exp, "quick", results).pending()})

    assert to_run() == []
    monkeypatch.setitem(base.METHODS, "random", dataclasses.replace(base.METHODS["random"], version=99))
    assert to_run() == ["random"]
    monkeypatch.setattr(sim, "VERSION", sim.VERSION + 1)
    assert set(to_run()) >= {"random", "single-gpu"}


def test_methods_option_keeps_a_label_that_holds_commas_whole():
    """``--methods`` splits on commas, but a known label with commas in it is one item (the longest
    run of pieces that joins into a label), so every column of real-graphs can be selected."""
    from placer.cli.bench import _method_names, _parse_methods

    known = _method_names("real-graphs")
    assert "placeto, frozen policy (ablation)" in known
    assert _parse_methods("placeto, frozen policy (ablation),local-search", known) == {
        "placeto, frozen policy (ablation)", "local-search"}
    assert _parse_methods("placeto,local-search", known) == {"placeto", "local-search"}
    assert _parse_methods("placeto ,  frozen policy (ablation)", known) == {"placeto, frozen policy (ablation)"}
    assert _parse_methods("frozen policy (ablation)", known) == {"frozen policy (ablation)"}  # refused later
    assert _parse_methods(None, known) is None
