"""The HTML report's numbers (placer.viz.report_data), its JSON and page, and `--html` on the CLI.
The page in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import run_cli
from placer.viz import report_data as rd


def _problem(modules=True, n=120):
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    g = layered_training_graph(n, seed=0)
    if modules:  # a module tree three deep: block.k.layer.j, a few ops with none
        mods = ["" if i % 17 == 0 else f"block{i // 40}.layer{(i // 8) % 5}.op{i % 2}" for i in range(g.n_ops)]
        g = g.replace(modules=mods)
    return Problem(g, preset("k80x2"))


def _spread(P, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=P.n_ops)  # the two GPUs


# ---------------------------------------------------------------------- memory over the step
def test_memory_timeline_peaks_are_the_simulators():
    from placer.sim import simulate

    P = _problem()
    for p in (np.zeros(P.n_ops, dtype=np.int64), _spread(P), _spread(P, 1)):
        r = simulate(P, p)
        lines = rd.memory_timeline(r, P.resident_bytes(p))
        assert len(lines) == P.n_devices
        for d, (t, level) in enumerate(lines):
            assert t[0] == 0.0 and np.all(np.diff(t) > 0)
            peak, when = rd.peak_of(t, level)
            assert peak == pytest.approx(r.peak_memory_bytes[d], rel=1e-9, abs=1.0)
            if r.peak_memory_bytes[d] > P.resident_bytes(p)[d]:  # an activation peak: the simulator's time too
                assert when == pytest.approx(r.peak_time_us[d])
            assert level[-1] == pytest.approx(P.resident_bytes(p)[d], abs=1.0)  # everything freed by the end


def test_memory_timeline_by_hand():
    """Two buffers on one device: [0, 10) of 5 bytes and [10, 20) of 7 (freed at 10 before the
    second is allocated: half-open), resident 100."""
    class Sim:
        busy_us = np.zeros(1)
        memory_intervals = {"dev": np.array([0, 0]), "alloc": np.array([0.0, 10.0]), "free": np.array([10.0, 20.0]),
                            "bytes": np.array([5.0, 7.0])}

    (t, level), = rd.memory_timeline(Sim(), [100.0])
    assert t.tolist() == [0.0, 10.0, 20.0]
    assert level.tolist() == [105.0, 107.0, 100.0]


def test_downsample_keeps_the_peak_and_bounds_the_points():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.random(20000))
    level = rng.random(20000) * 100
    level[12345] = 1000.0
    tt, ll, merged = rd.downsample_max(t, level, max_points=500)
    assert merged and len(tt) <= 500 and np.all(np.diff(tt) >= 0)
    assert ll.max() == 1000.0 and tt[np.argmax(ll)] <= t[12345]
    assert rd.downsample_max(t[:10], level[:10], 500)[2] is False


# ---------------------------------------------------------------------- merging bars
def test_merge_runs_by_hand():
    lane = np.array([0, 0, 0, 0, 1, 1])
    start = np.array([0.0, 1.0, 2.0, 10.0, 0.0, 1.0])
    end = np.array([1.0, 2.0, 3.0, 11.0, 1.0, 2.0])
    key = np.array([5, 5, 6, 6, 5, 5])
    assert rd.merge_runs(lane, start, end, key, 0.0).tolist() == [0, 0, 1, 2, 3, 3]
    assert rd.merge_runs(lane, start, end, np.zeros(6, np.int64), 7.0).tolist() == [0, 0, 0, 0, 1, 1]


def test_bars_stay_under_the_limit_and_cover_every_op():
    rng = np.random.default_rng(0)
    n = 5000
    lane = rng.integers(0, 3, n)
    start = np.sort(rng.random(n)) * 1e4
    end = start + 0.5
    key = rng.integers(0, 50, n)
    seg, tol, level = rd.bars(lane, start, end, [key, key // 10], limit=300, makespan_us=1e4)
    assert seg.max() + 1 <= 300 and tol > 0 and level == 2  # the keys alone split too finely: no key
    b = rd.summarise_bars(seg, lane, start, end, np.arange(n), end - start, key)
    assert b["n"].sum() == n and b["weight"].sum() == pytest.approx(n * 0.5)
    assert np.all(b["start"] <= b["end"])
    small, tol0, _ = rd.bars(lane[:100], start[:100], end[:100], [key[:100]], limit=300)
    assert tol0 == -1.0 and len(np.unique(small)) == 100
    # back-to-back on one lane: the finest key that fits is used, with no idle time closed
    s2 = np.arange(1000.0)
    seg2, tol2, level2 = rd.bars(np.zeros(1000, np.int64), s2, s2 + 1, [np.arange(1000), np.arange(1000) // 10,
                                                                      np.arange(1000) // 100], limit=150)
    assert (tol2, level2, seg2.max() + 1) == (0.0, 1, 100)


def test_module_levels():
    lv = rd.module_levels(["a.b.c", "a.b.d", "a.e", "", "f"])
    assert len(lv) == 3
    assert len(set(lv[0].tolist())) == 5 and lv[1][0] == lv[1][1] and lv[2][0] == lv[2][2] != lv[2][4]


# ---------------------------------------------------------------------- module tree, placements
def test_module_tree_sums_and_cut():
    mods = ["a.b.c", "a.b.d", "a.e", "", "f"]
    size = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ids, labels, parents, values, op_node, cut = rd.module_tree(mods, size)
    assert cut is None and ids[0] == ""
    assert values[0] == pytest.approx(15.0) and values[ids.index("a")] == pytest.approx(6.0)
    assert values[ids.index("a.b")] == pytest.approx(3.0)
    assert ids[op_node[3]] == "(no module)" and labels[ids.index("a.b.c")] == "c"
    assert all(parents[i] < i for i in range(1, len(ids)))
    ids2, _, _, values2, op_node2, cut2 = rd.module_tree(mods, size, max_nodes=5)
    assert cut2 == 1 and len(ids2) <= 5 and values2[0] == pytest.approx(15.0)
    assert ids2[op_node2[0]] == "a"
    share = rd.node_devices(parents, op_node, np.array([0, 1, 1, 0, 0]), size, 2)
    assert share[0].tolist() == [10.0, 5.0] and share[ids.index("a")].tolist() == [1.0, 5.0]


def test_placement_codes_and_moves():
    p = np.array([0, 1, 2, 11, 70, 0])
    assert rd.decode_placement(rd.encode_placement(p)).tolist() == p.tolist()
    m = rd.moved([0, 0, 1, 1], [0, 1, 1, 0], ["x", "y.z", "y.z", ""], np.array([1.0, 2.0, 3.0, 4.0]))
    assert m["ops"] == 2 and m["size"] == 6.0
    assert [r["module"] for r in m["modules"]] == ["(no module)", "y.z"]
    assert m["modules"][1]["moves"] == {"0->1": 1}


# ---------------------------------------------------------------------- the page
def _entries(P):
    from placer.methods import Budget, run_method
    from placer.viz.report import ReportEntry

    out = []
    for name, budget in (("single-gpu", 1), ("round-robin", 1), ("random", 40)):
        out.append(ReportEntry.from_result(run_method(name, P, Budget(placements=budget), 0, None)))
    return out


@pytest.fixture(scope="module")
def report_pages(tmp_path_factory):
    """Three pages: a graph with modules (treemap), one without (the strip), and the first with its
    timeline bars merged (a limit of 40)."""
    pytest.importorskip("plotly")
    from placer.viz.report import write_report

    d = tmp_path_factory.mktemp("report")
    pages = {}
    for kind, P, kw in (("modules", _problem(True), {}), ("flat", _problem(False), {}),
                        ("merged", _problem(True), {"max_bars": 40})):  # merged: timeline bars over the limit
        path = d / f"{kind}.html"
        info = write_report(path, P, _entries(P), command="test", **kw)
        assert info["bytes"] == path.stat().st_size
        pages[kind] = (path, P)
    return pages


def _data(path) -> dict:
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def test_report_json(report_pages):
    path, P = report_pages["modules"]
    d = _data(path)
    assert d["n_ops"] == P.n_ops and len(d["op_names"]) == P.n_ops and d["tree"] is not None
    assert [e["name"] for e in d["entries"]] == ["single-gpu", "round-robin", "random"]
    assert d["diff_pair"][1] == d["best"] and d["diff_pair"][0] != d["best"]  # the expert's or single GPU's, else another
    for e in d["entries"]:
        assert len(e["placement"]) == P.n_ops
        assert sum(e["ops"]["n"]) == int(np.count_nonzero(P.compute_us.min(axis=1) > 0)) or sum(e["ops"]["n"]) <= P.n_ops
        assert len(e["memory"]) == P.n_devices
        assert len(e["ops"]["bytes"]) == len(e["ops"]["n"])
        assert max(m["peak"] for m in e["memory"]) == pytest.approx(max(e["row"]["peak_memory_bytes"]), rel=1e-9)
    assert len(_data(report_pages["flat"][0])["entries"][2]["curve"]) >= 2
    assert _data(report_pages["flat"][0])["tree"] is None
    merged = _data(report_pages["merged"][0])["entries"]
    for e in merged:
        assert len(e["ops"]["n"]) + len(e["sends"]["n"]) <= 40
        assert any(n.startswith("timeline:") and "merged" in n for n in e["notes"])


def test_report_has_no_network_reference(report_pages):
    """Nothing outside the inlined Plotly bundle names a URL, and no element has an http(s) src or href."""
    from html.parser import HTMLParser

    from plotly.offline import get_plotlyjs

    for path, _ in report_pages.values():
        text = path.read_text(encoding="utf-8")
        assert text.count(get_plotlyjs()) == 1
        rest = text.replace(get_plotlyjs(), "")
        assert not re.search(r"https?://|//cdn|@import|url\(", rest), "the page outside Plotly names a URL"

        class Links(HTMLParser):
            found: list = []

            def handle_starttag(self, tag, attrs):
                for k, v in attrs:
                    if k in ("src", "href", "data", "poster", "srcset") and v:
                        self.found.append((tag, k, v))

        parser = Links()
        parser.feed(text)
        assert parser.found == [], parser.found


def test_report_escapes_names(tmp_path):
    """A hostile op name cannot close the data's <script>: it is escaped in the JSON and set as text."""
    pytest.importorskip("plotly")
    from placer.problem import Problem
    from placer.viz.report import write_report

    P0 = _problem(True, n=40)
    names = list(P0.graph.op_names)
    names[3] = "</script><script>alert(1)</script>"
    g = P0.graph
    from placer.graph import OpGraph

    g2 = OpGraph.build(names, zip(g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist()), name=g.name,
                       op_types=g.op_types, modules=g.modules, compute_us=dict(g.compute_us), flops=g.flops,
                       bytes_accessed=g.bytes_accessed, output_bytes=g.output_bytes, param_bytes=g.param_bytes,
                       temp_bytes=g.temp_bytes, colocation=g.colocation, role=g.role, mirror=g.mirror)
    P = Problem(g2, P0.cluster)
    write_report(tmp_path / "x.html", P, _entries(P)[:1])
    text = (tmp_path / "x.html").read_text()
    assert "alert(1)" in text and "<script>alert(1)" not in text
    assert names[3] in _data(tmp_path / "x.html")["op_names"]


# ---------------------------------------------------------------------- the CLI
def test_cli_html_on_compare_optimize_simulate(tmp_path, capsys, monkeypatch):
    pytest.importorskip("plotly")
    from placer.frontends.native import save_graph

    P = _problem(True, n=60)
    gfile = tmp_path / "g.json"
    save_graph(P.graph, gfile)
    code, out, err = run_cli(capsys, monkeypatch, "compare", gfile, "--cluster", "k80x2", "--methods",
                             "single-gpu,round-robin,random", "--budget", "30", "--html", tmp_path / "c.html")
    assert code == 0 and "wrote report" in err and (tmp_path / "c.html").stat().st_size > 1e6
    assert [e["name"] for e in _data(tmp_path / "c.html")["entries"]] == ["single-gpu", "round-robin", "random"]
    code, out, err = run_cli(capsys, monkeypatch, "optimize", gfile, "--cluster", "k80x2", "--method", "random", "--budget", "20",
                             "--out", tmp_path / "p.json", "--html", tmp_path / "o.html", "--json")
    assert code == 0 and json.loads(out)["html"]["bytes"] == (tmp_path / "o.html").stat().st_size
    assert [e["name"] for e in _data(tmp_path / "o.html")["entries"]] == ["random", "single-gpu"]
    code, out, err = run_cli(capsys, monkeypatch, "simulate", gfile, "--cluster", "k80x2", "--placement",
                             tmp_path / "p.json", "--html", tmp_path / "s.html")
    assert code == 0 and _data(tmp_path / "s.html")["best"] == str(tmp_path / "p.json")


def test_cli_html_path_checked_before_work(tmp_path, capsys, monkeypatch):
    (tmp_path / "dir.html").mkdir()
    code, out, err = run_cli(capsys, monkeypatch, "simulate", "nonexistent.json", "--placement", "single:0",
                             "--html", tmp_path / "dir.html")
    assert code == 2 and "--html" in err and len(err.strip().splitlines()) == 1
