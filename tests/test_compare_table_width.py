"""Issue 63: at 80 columns compare's table cut its step times (``1,088…``). The table fits the width
(``COLUMNS``) by leaving out whole columns, lowest priority first, and wrapping text only: every
number printed is whole."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_compare_table_fits_the_width_without_cutting_a_number(columns, tmp_path, capsys, monkeypatch):
    from placer.frontends.native import save_graph
    from placer.zoo.synthetic import layered_training_graph

    g = tmp_path / "g.json"
    save_graph(layered_training_graph(60, seed=3, name="a-graph-with-a-longish-name"), g)
    args = ["compare", g, "-c", "k80x2", "--methods", "single-gpu,random,round-robin,heft,local-search",
            "--budget", "30", "--jobs", "1"]
    code, out, err = run_cli(capsys, monkeypatch, *args, "--json")
    assert code == 0, err
    d = json.loads(out)
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert code == 0, err
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and all(len(line) <= columns for line in table), "\n".join(table)
    assert "…" not in out
    cells = {line.split("│")[1].strip().rstrip(" *"): line for line in table if line.startswith("│")}
    for r in d["rows"]:  # every row's step time, in full, on its row
        assert f"{r['step_time_us'] / 1000:,.2f} ms" in cells[r["method"]], cells[r["method"]]
        assert f"{r['speedup_over_single']:.2f}x" in cells[r["method"]]
    if columns >= 120:
        assert "left out" not in out and "placements" in table[1]
    else:
        assert f"left out to fit {columns} columns" in out
