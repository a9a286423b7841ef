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
    drop = ("wall_s",)  # the only thing that may differ: how long each took
    assert [{k: v for k, v in r.items() if k not in drop} for r in one["rows"]] == \
           [{k: v for k, v in r.items() if k not in drop} for r in two["rows"]]
    assert one["best"] == two["best"] and two["command_s"] > 0


def test_compare_jobs_is_bounded(tmp_path, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "compare", "--jobs", "100000")
    assert code == 2 and "4 processes per CPU core" in err and "Traceback" not in err
