"""`placer compare`'s default line-up scales the search methods' placements to the graph (issue 55):
a count from the graph's size, stated in the table; --budget and --methods turn it off."""

from __future__ import annotations

import json

from conftest import run_cli


def test_scaled_budgets_shrink_with_the_graph_and_follow_only_its_size():
    from placer import compare
    from placer.cluster import preset
    from placer.methods import METHODS
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    names = ["single-gpu", "random", "heft", "anneal", "local-search", "post"]
    small = Problem(layered_training_graph(40, seed=1), preset("k80x2"))
    big = Problem(layered_training_graph(400, seed=1), preset("k80x4"))
    # the rule as shipped: graphs up to SIM_OPS / 20,000 ops keep the configs' budgets
    assert compare.scaled_budgets(small, names) == {} == compare.scaled_budgets(big, names)
    nmt8_ops = 20_771
    assert compare.SIM_OPS // nmt8_ops < METHODS["local-search"].config().placements
    lowered = 20_000 * 100  # as if SIM_OPS were 2 million: a 400-op graph gets 5,000 placements
    old = compare.SIM_OPS
    try:
        compare.SIM_OPS = lowered
        got = compare.scaled_budgets(big, names)
        assert got == {"anneal": lowered // big.n_ops, "local-search": lowered // big.n_ops}
        assert compare.scaled_budgets(small, names) == {}  # 40 ops: 50,000 > the configs' 20,000
        # only the op count decides: another graph and cluster of the same size, the same answer
        twin = Problem(layered_training_graph(400, seed=7), preset("k80x8"))
        assert twin.n_ops == big.n_ops and compare.scaled_budgets(twin, names) == got
        assert "budget scaled to 400 ops; --budget N to override" in compare.scaled_bound(big, got["anneal"])
    finally:
        compare.SIM_OPS = old


def _compare(capsys, monkeypatch, g, *extra):
    code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", "k80x2", "--jobs", "1", *extra)
    assert code == 0, err
    return out


def test_default_line_up_states_its_scaled_budget_and_an_explicit_one_wins(tmp_path, capsys, monkeypatch):
    from placer import compare
    from placer.frontends.native import save_graph
    from placer.zoo.synthetic import layered_training_graph

    g = tmp_path / "g.json"
    graph = layered_training_graph(30, seed=2, name="g")
    save_graph(graph, g)
    n = graph.n_ops
    monkeypatch.setattr(compare, "default_methods", lambda: ["single-gpu", "heft", "local-search"])
    monkeypatch.setattr(compare, "SIM_OPS", 24 * n)  # local-search gets 24 placements on this graph

    d = json.loads(_compare(capsys, monkeypatch, g, "--json"))
    ls = next(r for r in d["rows"] if r["method"] == "local-search")
    assert ls["scaled"] and ls["placements_sampled"] <= 24
    assert ls["bound"] == f"24 placements (budget scaled to {n:,} ops; --budget N to override)"
    assert not any(r.get("scaled") for r in d["rows"] if r["method"] != "local-search")
    # the same command, the same rows (the scaled count reads no clock)
    again = json.loads(_compare(capsys, monkeypatch, g, "--json"))
    strip = [[{k: v for k, v in r.items() if k not in ("wall_s", "cpu_s")} for r in x["rows"]] for x in (d, again)]
    assert strip[0] == strip[1]

    text = _compare(capsys, monkeypatch, g)  # the table says it below, in full
    assert f"local-search: 24 placements (budget scaled to {n:,} ops; --budget N to override)" in " ".join(text.split())

    d = json.loads(_compare(capsys, monkeypatch, g, "--json", "--budget", "40"))  # --budget: no scaling
    ls = next(r for r in d["rows"] if r["method"] == "local-search")
    assert "scaled" not in ls and ls["bound"] == "40 placements" and 24 < ls["placements_sampled"] <= 40

    d = json.loads(_compare(capsys, monkeypatch, g, "--json", "--methods", "single-gpu,local-search"))
    ls = next(r for r in d["rows"] if r["method"] == "local-search")  # --methods: its own budget
    assert "scaled" not in ls and ls["bound"] == "20,000 placements"
