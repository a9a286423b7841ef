"""`placer compare --jobs N` runs the line-up in worker processes with the same results as one process."""

from __future__ import annotations

import json

from conftest import run_cli


def test_compare_jobs_2_equals_jobs_1(tmp_path, capsys, monkeypatch):
    from placer.frontends.native import save_graph
    from placer.zoo.synthetic import layered_training_graph

    g = tmp_path / "g.json"
    save_graph(layered_training_graph(30, seed=2, name="g"), g)
    outs = []
    for jobs in ("1", "2"):
        code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", "k80x2", "--methods",
                                 "single-gpu,random,heft,local-search,metis", "--budget", "60", "--jobs", jobs, "--json")
        assert code == 0, err
        outs.append(json.loads(out))
    one, two = outs
    assert (one["jobs"], two["jobs"]) == (1, 2)
    drop = ("wall_s", "cpu_s")  # the only things that may differ: how long each took
    assert [{k: v for k, v in r.items() if k not in drop} for r in one["rows"]] == \
           [{k: v for k, v in r.items() if k not in drop} for r in two["rows"]]
    assert one["best"] == two["best"] and two["command_s"] > 0


def test_compare_jobs_is_bounded(tmp_path, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "compare", "--jobs", "100000")
    assert code == 2 and "4 processes per CPU core" in err and "Traceback" not in err


def test_default_line_up_skips_cp_sat_beyond_its_exact_range_and_says_why(tmp_path, capsys, monkeypatch):
    """cp-sat solves up to max_groups tasks exactly; on a larger graph the default line-up shows it
    skipped with the reason, in its place; named with --methods it runs."""
    from placer.compare import compare_methods, out_of_range
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    big = Problem(layered_training_graph(60, seed=1), preset("k80x2"))
    small = Problem(layered_training_graph(6, seed=1), preset("k80x2"))
    assert big.n_ops > 40 >= small.n_ops
    names = ["single-gpu", "cp-sat", "heft"]
    assert "cp-sat" in out_of_range(big, names) and out_of_range(small, names) == {}
    d = compare_methods(big, names, 8, 0, None, skip=out_of_range(big, names))
    assert [r["method"] for r in d["rows"]] == names
    row = d["rows"][1]
    assert row["skipped"] and "beyond the 40 tasks" in row["error"] and "--methods cp-sat" in row["error"]
    assert d["best"] in ("single-gpu", "heft")
