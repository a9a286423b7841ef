"""The HTML report in a real headless browser (Chromium; skipped with the reason when none is
installed: `.ci/run` installs Debian's chromium where apt is available). The page loads with no
console error, every figure draws something, the table sorts on a header click, picking another
placement redraws, the page fetches nothing, and a screenshot is kept as a test artefact."""

from __future__ import annotations

import re

import pytest

import headless
from test_report import _problem, report_pages  # noqa: F401  (the fixture: two written reports)


@pytest.fixture(scope="module")
def probed(report_pages, tmp_path_factory):  # noqa: F811
    headless.browser()
    d = tmp_path_factory.mktemp("browser")
    return {k: (headless.probe(path, d), path) for k, (path, _) in report_pages.items()}


def test_page_loads_without_console_errors(probed):
    for kind, ((found, console), _) in probed.items():
        assert found["ready"], kind
        assert found["errors"] == [], (kind, found["errors"])
        bad = [line for line in console.splitlines() if re.search(r"Uncaught|Error|error", line)]
        assert bad == [], (kind, bad)


def test_every_figure_renders(probed):
    for kind, ((found, _), _) in probed.items():
        figs = found["figures"]
        assert set(figs) == {"fig-timeline", "fig-memory", "fig-tree", "fig-curves", "fig-diff"}, kind
        for name, f in figs.items():
            assert f["plot"] and f["svg"] > 20, (kind, name, f)
        assert figs["fig-timeline"]["bars"] > 10
        assert figs["fig-memory"]["lines"] >= 2 * 3  # a line and a capacity per device (k80x2: 3 devices)
        assert figs["fig-curves"]["lines"] >= 2  # random search's curve and the lower bound
        assert figs["fig-diff"]["bars"] >= 1
        if kind != "flat":
            assert figs["fig-tree"]["slices"] > 5  # the treemap's boxes
        else:
            assert figs["fig-tree"]["images"] + figs["fig-tree"]["canvas"] >= 1  # the strip is a heatmap image


def test_table_sorts_and_picking_redraws(probed):
    (found, _), _ = probed["modules"]
    s = found["sort"]
    up = [float(x) for x in s["step_up"] if x]
    assert up == sorted(up) and len(up) == 3
    assert [float(x) for x in s["step_down"] if x] == sorted(up, reverse=True)
    assert s["name_up"] == sorted(s["name_up"]) and s["aria"] == "ascending"
    assert found["picked"] and found["picked_after"].startswith(found["picked"] + ":")
    assert found["picked_before"] != found["picked_after"]


def test_what_changed_matches_python(probed, report_pages):  # noqa: F811
    import json

    import numpy as np

    from placer.viz import report_data as rd

    (found, _), path = probed["modules"]
    text = path.read_text(encoding="utf-8")
    d = json.loads(re.search(r'id="report-data">(.*?)</script>', text, re.S).group(1))
    by = {e["name"]: e for e in d["entries"]}
    a, b = (rd.decode_placement(by[n]["placement"]) for n in d["diff_pair"])
    assert int(found["diff_moved"]) == rd.moved(a, b, [""] * len(a), np.ones(len(a)))["ops"]


def test_page_fetches_nothing(probed):
    for kind, ((found, _), _) in probed.items():
        assert [r for r in found["resources"] if not r.startswith(("data:", "blob:"))] == [], kind


def test_screenshot(report_pages, tmp_path):  # noqa: F811
    headless.browser()
    path, _ = report_pages["modules"]
    png = headless.screenshot(path, tmp_path / "report.png", tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    print(f"\nscreenshot of the report: {png}")
