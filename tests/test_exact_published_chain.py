"""exact-published's segments coupled through memory (docs/bounds_published.md, rule 9): the bound never
exceeds the optimum found by enumerating every placement, is never below rule 7's plain sum, and rises
above it where memory forces a piece to end between segments that each fit alone."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ortools")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from placer.cluster import Device, make_cluster  # noqa: E402
from placer.graph import OpGraph  # noqa: E402
from placer.problem import Problem  # noqa: E402

GiB = 2**30


def _chain_problem(n: int = 6, share: float = 0.3, cpu_factor: float = 20.0):
    """A chain of ``n`` ops, each holding ``share`` of an accelerator's memory, on 2 accelerators and a
    CPU ``cpu_factor`` times slower: every op is an articulation op, any two ops fit on one accelerator,
    the whole chain does not (so a piece must end somewhere, or ops run on the CPU)."""
    names = [f"op{i}" for i in range(n)]
    gpu = ([2.0, 3.0, 1.0, 4.0, 2.0, 3.0, 1.0, 2.0] * (n // 8 + 1))[:n]
    cost = ([1.5, 2.0, 1.0, 2.5, 1.5, 2.0, 1.0, 0.5] * (n // 8 + 1))[:n - 1] + [0.0]
    cap = 10 * GiB
    g = OpGraph.build(names, [(names[i], names[i + 1], 1.0) for i in range(n - 1)], name="chain",
                      compute_us={"gpu": gpu, "cpu": [cpu_factor * t for t in gpu]},
                      param_bytes=[share * cap] * n, meta={"out_cost_us": dict(zip(names, cost))})
    devs = [Device("acc:0", "gpu", "accelerator", cap), Device("acc:1", "gpu", "accelerator", cap),
            Device("cpu:0", "cpu", "cpu", 1024 * GiB)]
    return Problem(g, make_cluster("small", devs, 1.0, 0.0))


def _bounds(P, best, grid=4):
    from placer.methods.exact_published_chain import coupled_segment_bound
    from placer.objectives import make_objective

    return coupled_segment_bound(P, make_objective("latency"), best, None, 10.0, 1, 0, max_ops=2, grid=grid)


def test_memory_coupling_rises_above_the_plain_sum_and_stays_below_the_optimum():
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _chain_problem()
    best, n_valid = brute_force(P, make_objective("latency"))
    assert np.isfinite(best) and n_valid > 1
    lb, plain, segs, solves = _bounds(P, best)
    assert segs == 3 and solves > segs  # three 2-op segments, and grid points solved beyond them
    # each 2-op segment fits one accelerator: rule 7 adds up compute times only
    assert plain == pytest.approx(sum([2.0, 3.0, 1.0, 4.0, 2.0, 3.0]), rel=1e-6)
    assert plain < lb <= best * (1 + 1e-9), (plain, lb, best)


@pytest.mark.parametrize("share,cpu_factor", [(0.3, 20.0), (0.45, 3.0), (0.2, 5.0), (0.6, 1.5)])
def test_coupled_bound_never_exceeds_brute_force_on_chains(share, cpu_factor):
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _chain_problem(6, share, cpu_factor)
    best, _ = brute_force(P, make_objective("latency"))
    for grid in (2, 4):
        lb, plain, _, _ = _bounds(P, best, grid)
        assert plain <= lb <= best * (1 + 1e-9), (grid, plain, lb, best)


@pytest.mark.parametrize("seed", range(6))
def test_coupled_bound_never_exceeds_brute_force_on_series_graphs(seed):
    """tests/test_exact_published_gaps.py's series graphs (blocks of parallel ops between joins, memory
    binding): rule 9 is at least rule 7 and at most the optimum."""
    from placer.objectives import make_objective
    from test_exact_published_gaps import _series_problem
    from test_objectives_exact import brute_force

    P = _series_problem(seed)
    best, _ = brute_force(P, make_objective("latency"))
    lb, plain, segs, _ = _bounds(P, best)
    assert segs >= 2
    assert 0 < plain <= lb <= best * (1 + 1e-9), (plain, lb, best)


def test_method_without_a_time_limit_uses_the_coupled_bound_and_repeats_itself():
    """exact-published under a placement budget only (CP-SAT by deterministic time): a 45-op chain is two
    segments (rule 7 cuts at most every 40 ops), rule 9 runs, its bound is below the placement found, and a
    second run returns the same placement and bound."""
    from placer.methods import Budget, run_method

    P = _chain_problem(45, 0.1, 5.0)
    runs = [run_method("exact-published", P, Budget(placements=60), 0, objective="latency") for _ in range(2)]
    r = runs[0]
    assert any("2 segments between articulation ops" in n and "coupled" in n for n in r.notes), r.notes
    assert r.cost.extra["lower_bound_us"] <= r.objective_us * (1 + 1e-9)
    assert np.array_equal(runs[1].placement.devices, r.placement.devices)
    assert runs[1].cost.extra["lower_bound_us"] == r.cost.extra["lower_bound_us"]
