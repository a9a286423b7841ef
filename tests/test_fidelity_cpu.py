"""The per-node overhead fit of benchmarks/fidelity.py cpu (placer.cost.profile): synthetic runs
with a known overhead, no timing."""

import numpy as np
import pytest

from placer.cost.profile import fit_node_overhead, leave_one_out_overhead


def synthetic(o=37.5, noise=0.0, seed=0, k=8):
    rng = np.random.default_rng(seed)
    base = rng.uniform(1e5, 5e7, k)
    nodes = rng.integers(500, 30000, k).astype(float)
    meas = (base + nodes * o) * (1 + noise * rng.standard_normal(k))
    return base, nodes, meas


def test_fit_recovers_known_overhead():
    b, n, m = synthetic()
    assert fit_node_overhead(b, n, m) == pytest.approx(37.5, rel=1e-9)


def test_fit_is_relative_least_squares():
    b, n, m = synthetic(noise=0.05, seed=3)
    o = fit_node_overhead(b, n, m)
    err = lambda x: (((b + n * x - m) / m) ** 2).sum()  # noqa: E731
    assert err(o) <= err(o * 1.01) and err(o) <= err(o * 0.99)


def test_fit_clips_at_zero_when_measured_is_faster():
    b, n, _ = synthetic()
    assert fit_node_overhead(b, n, 0.5 * b) == 0.0


def test_leave_one_out_never_sees_the_held_out_run():
    b, n, m = synthetic(k=5)
    m = m.copy()
    m[2] *= 3.0  # one outlying run: its own held-out fit must not move towards it
    loo = leave_one_out_overhead(b, n, m)
    assert len(loo) == 5
    o2, p2 = loo[2]
    assert o2 == pytest.approx(37.5, rel=1e-9)
    assert p2 == pytest.approx(b[2] + n[2] * 37.5)
    assert all(o > 37.5 for i, (o, _) in enumerate(loo) if i != 2)


def test_bad_input():
    with pytest.raises(ValueError):
        fit_node_overhead([1.0, 2.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        leave_one_out_overhead([1.0], [1.0], [1.0])


def test_two_term_fit_recovers_both_overheads():
    from placer.cost.profile import fit_overheads

    rng = np.random.default_rng(1)
    base = rng.uniform(1e6, 5e7, 10)
    X = np.column_stack([rng.integers(500, 30000, 10), rng.uniform(1, 60, 10)])  # nodes, GiB
    meas = base + X @ np.array([20.0, 9e4])
    assert fit_overheads(base, X, meas) == pytest.approx([20.0, 9e4], rel=1e-6)
    loo = leave_one_out_overhead(base, X, meas)
    assert all(o == pytest.approx([20.0, 9e4], rel=1e-6) for o, _ in loo)
    assert [p for _, p in loo] == pytest.approx(list(meas), rel=1e-9)


def test_two_term_fit_is_non_negative():
    from placer.cost.profile import fit_overheads

    b, n, m = synthetic()
    X = np.column_stack([n, -n])  # a term that could only help with a negative overhead
    o = fit_overheads(b, X, m)
    assert (o >= 0).all() and o[0] == pytest.approx(37.5, rel=1e-6)


def _fidelity_gpu():
    import importlib
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module("fidelity_gpu")


def test_gpu_summary_scores_the_mixed_placements_only(tmp_path):
    """benchmarks/fidelity_gpu.py's report: MAPE and Spearman over the placements that use both
    devices; the table's ratios to the eager step; what it writes under --out."""
    import json
    from types import SimpleNamespace

    fg = _fidelity_gpu()
    table = [{"label": "m (batch 1)", "eager_us": 100.0, "executor_us": 105.0, "executor_iqr_pct": 2.0,
              "predicted_us": 95.0, "kernel_us": 40.0, "issue_us": 90.0}]
    runs = [{"model": "m", "label": "m (batch 1)", "placement": f"p{k}", "kind": "random", "cpu_ops": k,
             "mixed": k > 0, "measured_us": 100.0 * (k + 1), "predicted_us": 110.0 * (k + 1), "iqr_pct": 1.0}
            for k in range(5)]
    runs[0]["predicted_us"] = 1e6  # a single-device run: not in the mixed score
    s = fg.summarise(table, runs)
    assert s["mixed_runs"] == 4 and s["mixed_mape"] == pytest.approx(0.1) and s["mixed_spearman"] == pytest.approx(1.0)
    assert s["executor_over_eager"] == [1.05] and s["predicted_over_eager"] == [0.95]
    settings = {"device": "X", "threads": 2, "torch": "t", "wall_s": 1.0, "date": "d", "summary": s}
    fg.save(SimpleNamespace(out=str(tmp_path / "gpu")), settings, table, runs)
    d = json.loads((tmp_path / "gpu" / "fidelity_gpu.json").read_text())
    assert d["settings"]["summary"]["mixed_runs"] == 4 and len(d["runs"]) == 5
    md = (tmp_path / "gpu" / "summary.md").read_text()
    assert "MAPE 10.0%" in md and "| m (batch 1) | 0.10 ms |" in md
