"""Issue 63, "nothing says what the split buys": every placement result (optimize, simulate, compare,
the HTML report) names the best single device that fits and the speed-up over it; says plainly when
splitting buys under 2%; and when no single device fits says so, with no speed-up number."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli

GIB = 2**30


def write(tmp_path, name, doc) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def cluster(tmp_path, fast_gib=2, slow_gib=12, cpu_gib=64):
    """The issue's cluster: a small fast GPU, a big slow GPU and the CPU."""
    return write(tmp_path, "c.json", {"format": "placer", "version": 1, "kind": "cluster", "name": "mixed", "devices": [
        {"name": "gpu:0", "kind": "gpu", "model": "fast", "memory_bytes": fast_gib * GIB},
        {"name": "gpu:1", "kind": "gpu", "model": "slow", "memory_bytes": slow_gib * GIB},
        {"name": "cpu:0", "kind": "cpu", "memory_bytes": cpu_gib * GIB}]})


def two_towers(tmp_path, param_gib=3):
    """Two independent towers of 3 ops; each op holds ``param_gib`` / 3 of parameters."""
    ops, edges = [], []
    for t in "ab":
        for i in range(3):
            ops.append({"name": f"{t}{i}", "compute_us": {"fast": 100, "slow": 300, "cpu": 3000},
                        "param_bytes": int(param_gib * GIB / 3)})
            if i:
                edges.append([f"{t}{i - 1}", f"{t}{i}", 1024])
    return write(tmp_path, "g.json", {"format": "placer", "version": 1, "kind": "graph", "name": "towers",
                                      "ops": ops, "edges": edges})


def test_optimize_names_the_best_single_device_that_fits_and_the_speedup(tmp_path, capsys, monkeypatch):
    """3 GiB of parameters: the fast 2 GiB GPU cannot hold it alone; the slow 12 GiB one can (1,800 us
    alone). Splitting the towers over both GPUs runs faster than the slow GPU alone."""
    g, c = two_towers(tmp_path), cluster(tmp_path)
    args = ["optimize", g, "-c", c, "-m", "local-search", "--budget", "200"]
    code, out, err = run_cli(capsys, monkeypatch, *args, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["single_device"] == {"device": "gpu:1", "step_us": pytest.approx(d["single_device"]["step_us"]), "fits": True}
    assert d["single_device"]["step_us"] == pytest.approx(1800)  # six ops of 300 us on the slow GPU
    assert d["speedup_over_single"] == pytest.approx(d["single_device"]["step_us"] / d["step_time_us"])
    assert d["speedup_over_single"] > 1.02
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert code == 0, err
    assert re.search(r"\d\.\d\dx faster than the best single device, gpu:1 alone", out), out


def test_no_single_device_fits_says_so_and_gives_no_number(tmp_path, capsys, monkeypatch):
    """Every device is smaller than the model: no single-device baseline fits."""
    g, c = two_towers(tmp_path, param_gib=3), cluster(tmp_path, fast_gib=2, slow_gib=2, cpu_gib=2)
    code, out, err = run_cli(capsys, monkeypatch, "simulate", g, "-c", c, "-p", "single:0", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["single_device"]["fits"] is False and d["speedup_over_single"] is None
    code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", c, "--methods", "single-gpu,round-robin",
                             "--budget", "5", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["single_device"]["fits"] is False
    assert all(r["speedup_over_single"] is None for r in d["rows"])
    code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", c, "--methods", "single-gpu,round-robin",
                             "--budget", "5")
    assert code == 0, err
    assert "no single device fits" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert rows and all("n/a" in r for r in rows)


def test_a_split_that_buys_under_2_percent_is_said_plainly(tmp_path, capsys, monkeypatch):
    """Two independent ops, 1,000 us and 10 us, on two equal GPUs: the split saves 10 us of 1,010 (1.0%)."""
    g = write(tmp_path, "g.json", {"format": "placer", "version": 1, "kind": "graph", "name": "pair", "ops": [
        {"name": "big", "compute_us": {"gpu": 1000}}, {"name": "small", "compute_us": {"gpu": 10}}], "edges": []})
    c = write(tmp_path, "c.json", {"format": "placer", "version": 1, "kind": "cluster", "name": "two", "devices": [
        {"name": "gpu:0", "kind": "gpu", "memory_bytes": GIB}, {"name": "gpu:1", "kind": "gpu", "memory_bytes": GIB}]})
    p = write(tmp_path, "p.json", {"format": "placer", "version": 1, "kind": "placement", "graph": "pair",
                                   "cluster": "two", "placement": {"big": "gpu:0", "small": "gpu:1"}})
    code, out, err = run_cli(capsys, monkeypatch, "simulate", g, "-c", c, "-p", p, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["speedup_over_single"] == pytest.approx(1010 / 1000)
    code, out, err = run_cli(capsys, monkeypatch, "simulate", g, "-c", c, "-p", p)
    assert code == 0, err
    assert "splitting buys 1.0% over gpu:0 alone" in out and "under 2%" in out


def test_html_report_states_a_baseline_that_does_not_fit(tmp_path, capsys, monkeypatch):
    """The report's data carries the single-device baseline; with none fitting, no row has a speed-up,
    and the page says no single device fits rather than leaving the column blank or comparing against it."""
    pytest.importorskip("plotly")
    g, c = two_towers(tmp_path, param_gib=3), cluster(tmp_path, fast_gib=2, slow_gib=2, cpu_gib=2)
    html = tmp_path / "r.html"
    code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", c, "--methods", "single-gpu,round-robin",
                             "--budget", "5", "--html", html)
    assert code == 0, err
    text = html.read_text()
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S).group(1))
    assert data["single_device"]["fits"] is False
    assert all(e["row"]["speedup_over_single"] is None for e in data["entries"])
    assert "none fits alone" in text and "not compared: " in text


def test_html_report_speedup_over_a_fitting_baseline(tmp_path, capsys, monkeypatch):
    pytest.importorskip("plotly")
    g, c = two_towers(tmp_path), cluster(tmp_path)
    html = tmp_path / "r.html"
    code, out, err = run_cli(capsys, monkeypatch, "optimize", g, "-c", c, "-m", "local-search", "--budget", "200",
                             "--html", html, "--json")
    assert code == 0, err
    d = json.loads(out)
    text = html.read_text()
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S).group(1))
    assert data["single_device"]["device"] == "gpu:1" and data["single_device"]["fits"]
    first = data["entries"][0]["row"]["speedup_over_single"]
    assert first == pytest.approx(d["speedup_over_single"])


def test_report_line_colours_are_pairwise_distinct_for_the_default_line_up():
    """Two pairs of search curves shared a colour (ten colours cycled over 20-odd methods)."""
    import itertools
    import math

    from placer.compare import default_methods
    from placer.viz.colours import colours

    n = max(len(default_methods()), 24)
    cs = colours(n)

    def rgb(h):
        return [int(h[i:i + 2], 16) for i in (1, 3, 5)]

    assert len(set(cs)) == n
    assert min(math.dist(rgb(a), rgb(b)) for a, b in itertools.combinations(cs, 2)) > 40  # visibly apart
