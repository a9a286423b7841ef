"""End-to-end CLI runs on real graphs, and every bad-input case: one line, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SHARED_GRAPHS, run_cli, shared_graph_files

INCEPTION = SHARED_GRAPHS / "pipedream" / "inception_v3.txt"
BERT = SHARED_GRAPHS / "dnn-partitioning" / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_training.json"
needs_shared = pytest.mark.skipif(not shared_graph_files(), reason="no shared graphs")


run = run_cli


@needs_shared
@pytest.mark.parametrize("path", [INCEPTION, BERT], ids=["inception", "bert"])
def test_info_on_real_graphs(capsys, monkeypatch, path):
    code, out, _ = run(capsys, monkeypatch, "info", path, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["graph"]["ops"] > 500
    p = d["problem"]
    assert 0 < p["critical_path_us"] <= p["total_work_us"]
    assert p["lower_bound_us"] == max(p["critical_path_us"], p["load_bound_us"])
    code, out, _ = run(capsys, monkeypatch, "info", path)
    assert code == 0 and "lower bound on step time" in out


@needs_shared
def test_convert_simulate_optimize_round(capsys, monkeypatch, tmp_path):
    g = tmp_path / "inc.json.gz"
    code, _, _ = run(capsys, monkeypatch, "convert", INCEPTION, g)
    assert code == 0 and g.exists()
    code, out, _ = run(capsys, monkeypatch, "optimize", g, "--method", "round-robin", "--out", tmp_path / "p.json", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["placements_sampled"] == 1 and res["sim_calls"] == 1
    code, out, _ = run(capsys, monkeypatch, "simulate", g, "--placement", tmp_path / "p.json", "--json",
                       "--trace", tmp_path / "t.json")
    assert code == 0
    sim = json.loads(out)
    assert sim["makespan_us"] == pytest.approx(res["step_time_us"])
    # both state placer.lowerbound's bound (the same: same problem and simulator) and what gave it
    assert res["lower_bound"]["source"] and sim["lower_bound"]["source"] == res["lower_bound"]["source"]
    assert sim["lower_bound_us"] == res["lower_bound_us"] == res["lower_bound"]["value_us"] <= res["step_time_us"]
    trace = json.loads((tmp_path / "t.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X") >= 652


def test_methods_and_compare(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "methods", "--json")
    names = {m["name"] for m in json.loads(out)["methods"]}
    assert {"single-gpu", "random", "round-robin", "cpu-only"} <= names
    code, out, _ = run(capsys, monkeypatch, "compare", "synthetic", "--methods", "single-gpu,random,round-robin",
                       "--budget", "5", "--json")
    assert code == 0
    d = json.loads(out)
    assert [r["method"] for r in d["rows"]] == ["single-gpu", "random", "round-robin"]
    assert d["best"] in {"single-gpu", "random", "round-robin"}
    # the bound (placer.lowerbound) holds for placements that fit; it names the bound that gave it
    assert d["lower_bound"]["source"] and d["lower_bound_us"] == d["lower_bound"]["value_us"] >= d["lower_bound"]["old_us"]
    assert all(r["step_time_us"] >= d["lower_bound_us"] * (1 - 1e-9) for r in d["rows"] if not r["oom"])
    assert all(r["vs_lower_bound"] == pytest.approx(r["step_time_us"] / d["lower_bound_us"]) for r in d["rows"]
               if not r["oom"])


def test_default_line_up_leaves_out_only_slow_and_training_methods():
    from placer.compare import SLOW, default_methods
    from placer.methods import METHODS

    names = default_methods()
    assert "post" in names and "layer-split" in names and "local-search" in names
    assert not SLOW & set(names) and "hierarchical" not in names
    assert all(m in METHODS for m in SLOW)  # a renamed method would silently come back


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def graph_doc(ops, edges):
    return json.dumps({"format": "placer", "version": 1, "kind": "graph", "name": "t", "ops": ops, "edges": edges})


OK_OPS = [{"name": "a", "compute_us": {"gpu": 1}}, {"name": "b", "compute_us": {"gpu": 2}}]


@pytest.mark.parametrize("case,args_fn,msg", [
    ("cyclic graph", lambda t: ["info", write(t, "g.json", graph_doc(OK_OPS, [["a", "b", 1], ["b", "a", 1]]))], "cycle"),
    ("edge to missing op", lambda t: ["info", write(t, "g.json", graph_doc(OK_OPS, [["a", "zz", 1]]))], "'zz' is not an op"),
    ("negative cost", lambda t: ["info", write(t, "g.json", graph_doc([{"name": "a", "compute_us": {"gpu": -3}}], []))], "invalid value"),
    ("NaN cost", lambda t: ["info", write(t, "g.json", graph_doc([{"name": "a", "compute_us": {"gpu": 1}}], []).replace('"gpu": 1', '"gpu": NaN'))], "invalid value"),
    ("truncated file", lambda t: ["info", write(t, "g.json", graph_doc(OK_OPS, [])[:40])], "not valid JSON"),
    ("unknown preset", lambda t: ["info", "synthetic", "--cluster", "tpu-pod"], "not a known cluster preset"),
    ("op fits nowhere", lambda t: ["info", write(t, "g.json", graph_doc([{"name": "a", "compute_us": {"gpu": 1}, "param_bytes": 1e15}], []))], "fits on no device"),
    ("missing file", lambda t: ["info", t / "nope.json"], "neither a file"),
    ("unknown method", lambda t: ["optimize", "synthetic", "--method", "nope", "--out", t / "out.json"], "not a known method"),
])
def test_bad_input_one_line_exit_2_nothing_written(capsys, monkeypatch, tmp_path, case, args_fn, msg):
    code, out, err = run(capsys, monkeypatch, *args_fn(tmp_path))
    assert code == 2, (case, err)
    assert msg in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("placement,msg", [
    (lambda ops: {"placement": {o: "gpu:0" for o in ops[:-1]}}, "has no device"),
    (lambda ops: {"placement": {o: "gpu:7" for o in ops}}, "not in cluster"),
    (lambda ops: {"placement": ["gpu:0"] * (len(ops) + 2)}, "entries for"),
])
def test_bad_placements(capsys, monkeypatch, tmp_path, placement, msg):
    from placer.zoo import BUILTIN

    ops = list(BUILTIN["synthetic"]().op_names)
    doc = {"format": "placer", "version": 1, "kind": "placement", **placement(ops)}
    p = write(tmp_path, "p.json", json.dumps(doc))
    code, _, err = run(capsys, monkeypatch, "simulate", "synthetic", "--placement", p, "--trace", tmp_path / "t.json")
    assert code == 2 and msg in err and not (tmp_path / "t.json").exists()


def test_console_script_exit_code(tmp_path):
    bad = write(tmp_path, "g.json", "{")
    r = subprocess.run([sys.executable, "-m", "placer", "info", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and str(bad) in r.stderr


def test_compare_says_oom_when_single_gpu_runs_out_and_gives_units(capsys, monkeypatch, tmp_path):
    gib = 2**30
    ops = [{"name": f"l{i}", "compute_us": {"gpu": 100, "cpu": 1000}, "param_bytes": 10 * gib} for i in range(2)]
    g = write(tmp_path, "g.json", graph_doc(ops, [["l0", "l1", 1024]]))
    c = write(tmp_path, "c.json", json.dumps({"format": "placer", "version": 1, "kind": "cluster", "devices": [
        {"name": "gpu:0", "kind": "gpu", "memory_bytes": 16 * gib}, {"name": "gpu:1", "kind": "gpu", "memory_bytes": 16 * gib},
        {"name": "cpu:0", "kind": "cpu", "memory_bytes": 64 * gib}]}))
    args = ["compare", g, "--cluster", c, "--methods", "single-gpu,round-robin", "--budget", "5"]
    monkeypatch.setenv("COLUMNS", "200")  # every column shown (at 80 the lower-bound column is dropped)
    code, out, err = run(capsys, monkeypatch, *args, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["single_gpu_oom"] is True and d["warmup_s"] >= 0
    code, out, err = run(capsys, monkeypatch, *args)
    assert code == 0, err
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    # the single GPU runs out of memory: the speed-up is over the best single device that fits, the CPU
    assert d["single_device"]["device"] == "cpu:0" and d["single_device"]["fits"] is True
    assert d["single_device"]["step_us"] > 0
    assert rows["round-robin"].split("│")[3].strip().endswith("x") and "cpu:0 alone" in out
    assert "x" in rows["round-robin"].split("│")[4]  # the lower-bound column carries its unit
    assert "compiling the simulator" in out


def test_one_grouping_flag_for_every_grouping_method(capsys, monkeypatch, tmp_path):
    """--grouping goes through placer.grouping's one parser and reaches the method's config."""
    from placer.cli.options import GROUPING_DEFAULT
    from placer.methods.learned.placeto import PlacetoConfig

    assert GROUPING_DEFAULT == PlacetoConfig().grouping
    code, out, err = run_cli(capsys, monkeypatch, "optimize", "synthetic", "-c", "k80x2", "--method", "post",
                             "--budget", "24", "--grouping", "metis:4", "--json")
    assert code == 0, err
    assert json.loads(out)["params"]["grouping"] == "metis:4"
    code, out, err = run_cli(capsys, monkeypatch, "optimize", "synthetic", "-c", "k80x2", "--method", "post",
                             "--grouping", "metis:x")
    assert code == 2 and "is not a grouping spec" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, monkeypatch, "optimize", "synthetic", "-c", "k80x2", "--method", "metis",
                             "--grouping", "metis:4")
    assert code == 2 and "not parameters of this method" in err


def test_json_stdout_is_not_corrupted_by_what_metis_prints(shared_graphs):
    """METIS prints "Cannot bisect a graph with 0 vertices!" on C stdout when Post's 64-part METIS
    units are built for PipeDream's ResNet-18 (142 layers); from the command line that goes to
    stderr, and stdout holds exactly the JSON."""
    r = subprocess.run([sys.executable, "-m", "placer", "optimize", str(shared_graphs / "pipedream" / "resnet18.txt"),
                        "-m", "post", "--budget", "24", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "post"
    assert "Cannot bisect" in r.stderr


def test_default_line_up_is_bounded():
    """Issue 52: compare's line-up finishes in bounded time on any input. Every default method runs
    with a bound it states: a placement count, one construction, or (the solvers, whose own
    deterministic limits bound no clock) a wall-clock cap."""
    from placer.compare import SECONDS, default_methods, method_bound
    from placer.methods import METHODS

    for name in default_methods() + sorted(SECONDS):
        budget, bound = method_bound(name, None)
        if name in SECONDS:
            assert budget.seconds == SECONDS[name] and bound == f"{SECONDS[name]:g} s wall clock"
        elif getattr(METHODS[name].config(), "placements", None) is not None:
            assert bound.endswith(" placements")
        else:
            assert bound == "one construction"
    assert "cp-sat" in default_methods() and SECONDS["cp-sat"] <= 60
    assert method_bound("local-search", 77) == (method_bound("local-search", 77)[0], "77 placements")


def test_cp_sat_in_compare_runs_under_its_wall_clock_cap():
    pytest.importorskip("ortools")
    from placer.compare import SECONDS, compare_methods
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    d = compare_methods(Problem(layered_training_graph(12, seed=1), preset("k80x2")), ["cp-sat"], None, 0, None,
                        objective="latency")
    (row,) = d["rows"]
    assert row["bound"] == f"{SECONDS['cp-sat']:g} s wall clock"
    assert any(f"{SECONDS['cp-sat']:g} s wall-clock limit" in n for n in row["notes"])
    assert row["wall_s"] < SECONDS["cp-sat"] + 30


@needs_shared
def test_compare_nothing_valid_under_the_objective(capsys, monkeypatch):
    """Issue 52: under --objective pipeline, a compare where no method finds a valid pipeline says
    so and exits 1 (not best=random with an infinite objective), and the single GPU that does not
    fit shows as OOM, never as a ratio against its repaired placement."""
    g = SHARED_GRAPHS / "dnn-partitioning" / "latency-inputs" / "LayerGraphs" / "inceptionv3_inference.json"
    args = ["compare", g, "--cluster", "auto", "--methods", "single-gpu,random", "--budget", "5", "--objective", "pipeline"]
    code, out, err = run(capsys, monkeypatch, *args, "--json")
    assert code == 1, err
    d = json.loads(out)
    assert d["best"] is None and d["valid_found"] is False and d["single_gpu_oom"] is True
    assert all(r["speedup_vs_single_gpu"] is None for r in d["rows"])
    assert "no method found a placement valid under pipeline" in err and "Traceback" not in err
    code, out, err = run(capsys, monkeypatch, *args)
    assert code == 1
    assert "best: none: no method found a placement valid under pipeline" in out and "not valid" in out
    # with a valid one (all on the CPU), it is the best; the OOM single GPU still gives no ratio
    code, out, err = run(capsys, monkeypatch, *args[:5], "single-gpu,random,cpu-only", *args[6:], "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["best"] == "cpu-only" and d["valid_found"] and all(r["speedup_vs_single_gpu"] is None for r in d["rows"])
    # under latency, single-gpu's placement is repaired off one GPU: still OOM, no ratio
    code, out, err = run(capsys, monkeypatch, *args[:8], "--objective", "latency", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["single_gpu_oom"] is True and all(r["speedup_vs_single_gpu"] is None for r in d["rows"])
