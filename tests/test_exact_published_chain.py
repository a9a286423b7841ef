"""exact-published's segments coupled through their cut ops (docs/bounds_published.md, rules 9 and 10): the bound
never exceeds the optimum found by enumerating every placement, is never below rule 7's plain sum, is exact on a
path whose pieces the accelerators never limit, and the placement joined from the path is valid and no better than
the bound. The relaxed segment model's two solvers (fork-join choices, four machines) agree, and splitting ops
shared by several paths only lowers it."""

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
from test_exact_published_gaps import random_costs_problem  # noqa: E402

GiB = 2**30


def _chain_problem(n: int = 6, share: float = 0.3, cpu_factor: float = 20.0, accelerators: int = 2):
    """A chain of ``n`` ops, each holding ``share`` of an accelerator's memory, on ``accelerators`` accelerators
    and a CPU ``cpu_factor`` times slower: every op is an articulation op, any two ops fit on one accelerator, the
    whole chain does not (so a piece must end somewhere, or ops run on the CPU)."""
    names = [f"op{i}" for i in range(n)]
    gpu = ([2.0, 3.0, 1.0, 4.0, 2.0, 3.0, 1.0, 2.0] * (n // 8 + 1))[:n]
    cost = ([1.5, 2.0, 1.0, 2.5, 1.5, 2.0, 1.0, 0.5] * (n // 8 + 1))[:n - 1] + [0.0]
    cap = 10 * GiB
    g = OpGraph.build(names, [(names[i], names[i + 1], 1.0) for i in range(n - 1)], name="chain",
                      compute_us={"gpu": gpu, "cpu": [cpu_factor * t for t in gpu]},
                      param_bytes=[share * cap] * n, meta={"out_cost_us": dict(zip(names, cost))})
    devs = [Device(f"acc:{i}", "gpu", "accelerator", cap) for i in range(accelerators)]
    return Problem(g, make_cluster("small", devs + [Device("cpu:0", "cpu", "cpu", 1024 * GiB)], 1.0, 0.0))


def _fork_join_problem(seed: int, blocks: int = 2, accelerators: int = 2):
    """Fork-join blocks in series: a fork op, 1-3 chains of 1-2 ops, a join op (the next block's fork); memory,
    times and transfers random, the accelerators holding 45% of all memory each."""
    rng = np.random.default_rng(seed)
    names, edges, fork = ["op0"], [], 0
    for _ in range(blocks):
        ends = []
        for _ in range(int(rng.integers(1, 4))):
            prev = fork
            for _ in range(int(rng.integers(1, 3))):
                names.append(f"op{len(names)}")
                edges.append((prev, len(names) - 1))
                prev = len(names) - 1
            ends.append(prev)
        names.append(f"op{len(names)}")
        edges += [(e, len(names) - 1) for e in ends]
        fork = len(names) - 1
    return random_costs_problem(rng, names, edges, f"forkjoin{seed}", cpu_factor=(2.0, 20.0), cost_max=4.0,
                                accelerators=accelerators)


def _bounds(P, best, grid=4, keep=None):
    from placer.methods.exact_published_chain import coupled_segment_bound
    from placer.objectives import make_objective

    return coupled_segment_bound(P, make_objective("latency"), best, None, 10.0, 1, 0, max_ops=2, grid=grid,
                                 keep=keep)


def test_a_path_is_solved_exactly_where_accelerators_do_not_limit_it():
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _chain_problem(6, 0.3, 20.0, accelerators=4)
    best, n_valid = brute_force(P, make_objective("latency"))
    assert np.isfinite(best) and n_valid > 1
    lb, plain, segs, _ = _bounds(P, best)
    assert segs == 1  # every op is an articulation op: one path, by the run-length program
    # rule 7's 2-op segments each fit one accelerator: compute times only; the path pays for the cuts memory forces
    assert plain == pytest.approx(sum([2.0, 3.0, 1.0, 4.0, 2.0, 3.0]), rel=1e-6)
    assert plain < lb
    assert lb == pytest.approx(best, rel=1e-9)


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
    binding): the bound is at least rule 7's and at most the optimum; the joined placement is valid and no
    better than the bound."""
    from placer.objectives import make_objective
    from test_exact_published_gaps import _series_problem
    from test_objectives_exact import brute_force

    P = _series_problem(seed)
    obj = make_objective("latency")
    best, _ = brute_force(P, obj)
    lb, plain, segs, _ = _bounds(P, best)
    assert segs >= 2
    assert 0 < plain <= lb <= best * (1 + 1e-9), (plain, lb, best)
    # the join runs under a wall clock only: a generous one (an 8-op graph needs well under a second)
    from placer.methods.exact_published_chain import coupled_segment_bound

    keep = {}
    lb_t, _, _, _ = coupled_segment_bound(P, obj, best, 60.0, 10.0, 1, 0, max_ops=2, grid=4, keep=keep)
    assert lb_t <= best * (1 + 1e-9)
    joined = keep.get("placement")  # best effort: None where the join runs out of accelerators (seed 4 here)
    if joined is not None:
        assert obj.check(P, joined) is None
        assert obj.evaluate(P, joined) >= lb_t * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("accelerators", [1, 2])
def test_coupled_bound_never_exceeds_brute_force_on_fork_joins(seed, accelerators):
    """Chains between forks and joins (the fork-join choice model), one or two accelerators (the count of
    pieces opened binds)."""
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _fork_join_problem(seed, accelerators=accelerators)
    obj = make_objective("latency")
    best, _ = brute_force(P, obj)
    if not np.isfinite(best):
        pytest.skip("nothing fits")
    for grid in (2, 8):
        lb, plain, _, _ = _bounds(P, best, grid)
        assert plain <= lb <= best * (1 + 1e-9), (grid, plain, lb, best)


def _segment_points(seed):
    from placer.methods.exact_published_cp import sub_model
    from placer.objectives.model import model_for

    P = _fork_join_problem(seed, blocks=1)
    m = model_for(P)
    sm = sub_model(m, np.arange(m.n))
    rng = np.random.default_rng(100 + seed)
    cap = float(m.cap_bytes[0])
    for _ in range(6):
        kin, kout = (None, "acc", "cpu")[rng.integers(3)], (None, "acc", "cpu")[rng.integers(3)]
        new = (None, 0, 1, 2)[rng.integers(4)]
        yield sm, kin, float(rng.uniform(0, cap)), kout, float(rng.uniform(0, cap)), cap, new


@pytest.mark.parametrize("seed", range(10))
def test_fork_join_choices_equal_the_four_machine_model(seed):
    """Both solve the same relaxation (docs/bounds_published.md, rule 10): equal values at random points (up to
    the ticks each rounds its terms down to, 1e-9 of the upper bound each)."""
    from placer.methods.exact_published_relax import chains, fork_join_bound, machine_bound

    for sm, kin, e, kout, x, cap, new in _segment_points(seed):
        chs = chains(sm)
        assert chs is not None
        a, closed_a, _ = fork_join_bound(sm, chs, kin, e, kout, x, cap, 1e6, None, 10.0, 1, new, True)
        b, closed_b, _ = machine_bound(sm, kin, e, kout, x, cap, 1e6, None, 10.0, 1, new, True)
        assert closed_a and closed_b
        assert a == pytest.approx(b, rel=1e-5, abs=0.05) or (np.isinf(a) and b >= 1e6 * 0.999), (kin, kout, new, a, b)


def test_path_split_is_below_the_four_machine_model():
    """A diamond inside a chain (two paths share ops): splitting the shared ops per path is a relaxation."""
    from placer.methods.exact_published_cp import sub_model
    from placer.methods.exact_published_relax import fork_join_bound, machine_bound, path_split
    from placer.objectives.model import model_for

    names = [f"op{i}" for i in range(7)]
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (0, 5), (4, 6), (5, 6)]
    rng = np.random.default_rng(3)
    gpu, size = rng.uniform(1, 5, 7).round(2), rng.uniform(0.2, 1.0, 7).round(3) * GiB
    g = OpGraph.build(names, [(names[a], names[b], 1.0) for a, b in edges], name="diamond",
                      compute_us={"gpu": list(gpu), "cpu": list(gpu * 8)}, param_bytes=list(size),
                      meta={"out_cost_us": dict(zip(names, rng.uniform(0.5, 3, 7).round(2).tolist()))})
    devs = [Device("acc:0", "gpu", "accelerator", 0.5 * size.sum()), Device("acc:1", "gpu", "accelerator", 0.5 * size.sum()),
            Device("cpu:0", "cpu", "cpu", 1024 * GiB)]
    m = model_for(Problem(g, make_cluster("small", devs, 1.0, 0.0)))
    sm = sub_model(m, np.arange(m.n))
    split = path_split(sm)
    assert split is not None and len(split[1]) == 3  # three source-to-sink paths
    cap = float(m.cap_bytes[0])
    for kin, kout in ((None, None), ("acc", "acc"), ("cpu", "acc"), ("acc", "cpu")):
        a = fork_join_bound(*split, kin, 0.1 * cap, kout, 0.2 * cap, cap, 1e6, None, 10.0, 1)[0]
        b = machine_bound(sm, kin, 0.1 * cap, kout, 0.2 * cap, cap, 1e6, None, 10.0, 1)[0]
        assert a <= b * (1 + 1e-6) + 1e-6, (kin, kout, a, b)


def test_method_without_a_time_limit_uses_the_coupled_bound_and_repeats_itself():
    """exact-published under a placement budget only (CP-SAT by deterministic time) on a 45-op chain: rule 7 cuts
    it in two, rules 9-10 solve it as one path; the bound is below the placement found, and a second run returns
    the same placement and bound."""
    from placer.methods import Budget, run_method

    P = _chain_problem(45, 0.1, 5.0)
    runs = [run_method("exact-published", P, Budget(placements=60), 0, objective="latency") for _ in range(2)]
    r = runs[0]
    assert any("segments between articulation ops" in n and "coupled" in n for n in r.notes), r.notes
    assert r.cost.extra["lower_bound_us"] <= r.objective_us * (1 + 1e-9)
    assert np.array_equal(runs[1].placement.devices, r.placement.devices)
    assert runs[1].cost.extra["lower_bound_us"] == r.cost.extra["lower_bound_us"]
