"""What the exact methods claim to have proven (issue 65).

* CP-SAT says ``[opt]`` (``optimal`` / ``proven_optimal``) only when the gap is closed on the real
  problem: no ops grouped and the returned placement's simulated time equal to the proven bound. When it
  coarsened the graph, a proven optimum is one of the grouped model (``proven_optimal_grouped``) and the
  tables say ``[opt of N groups]``.
* exact-published's added bounds (docs/bounds_published.md) are valid: on small instances its reported
  lower bound never exceeds the optimum found by enumerating every placement.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ortools")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from placer.bench.tables import optimality_mark  # noqa: E402
from placer.cluster import Device, make_cluster  # noqa: E402
from placer.graph import OpGraph  # noqa: E402
from placer.methods import Budget, run_method  # noqa: E402
from placer.problem import Problem  # noqa: E402

GiB = 2**30


def _cluster(D):
    return make_cluster("t", [Device(f"gpu:{i}", "gpu", "g", 64 * GiB) for i in range(D)], 1.0, 0.0)


def _diamond():
    # a fork-join worth splitting despite a 1 us transfer each way (tests/test_methods_exact.py's "diamond")
    return OpGraph.build([f"o{i}" for i in range(4)], [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 1.0), (2, 3, 1.0)],
                         compute_us={"gpu": [1.0, 6.0, 6.0, 1.0]})


def test_cp_sat_claims_the_real_optimum_when_nothing_is_grouped():
    pr = Problem(_diamond(), _cluster(2))
    res = run_method("cp-sat", pr, Budget(seconds=20), 0)
    ex = res.cost.extra
    assert not ex["grouped"] and ex["proven_optimal_grouped"]
    assert ex["optimal"] and ex["proven_optimal"]
    assert res.step_time_us == pytest.approx(ex["lower_bound_us"], abs=1e-3)
    assert optimality_mark([ex]) == "[opt]"
    assert any("optimal for the real problem" in n for n in res.notes)


def test_cp_sat_grouped_optimum_gets_the_weaker_label():
    pr = Problem(_diamond(), _cluster(2))
    res = run_method("cp-sat", pr, Budget(seconds=20), 0, max_groups=2)  # 4 ops into 2 groups
    ex = res.cost.extra
    assert ex["grouped"] and ex["tasks"] == 2
    assert ex["proven_optimal_grouped"]  # 2 tasks on 2 devices: CP-SAT closes its model at once
    assert not ex["optimal"] and not ex["proven_optimal"]
    assert optimality_mark([ex]) == "[opt of 2 groups]"
    assert any("optimal for the grouped model (2 groups)" in n for n in res.notes)


def test_optimality_mark_reads_runs_cached_before_the_rename():
    # a cached CP-SAT run of version 1 had "optimal" for its model's status and "proven_optimal" beside it
    old_grouped = {"optimal": True, "proven_optimal": False, "grouped": True, "tasks": 40}
    assert optimality_mark([old_grouped]) == "[opt of 40 groups]"
    # exact-published records only "optimal": the published IP's optimum is the objective's
    assert optimality_mark([{"optimal": True}]) == "[opt]"
    assert optimality_mark([{"optimal": True}, {"optimal": False}]) == "[opt in 1 of 2 runs]"
    ungrouped_model = {"optimal": False, "proven_optimal": False, "proven_optimal_grouped": True, "grouped": False}
    assert optimality_mark([ungrouped_model]) == "[opt of its model]"
    assert optimality_mark([{"optimal": False}]) == ""
    assert optimality_mark([]) == ""


# ---------------------------------------------------------------------- exact-published's CP-SAT model
def _published_problem(n: int, seed: int, accelerators: int):
    """tests/test_objectives_exact.py's random problem on ``accelerators`` identical accelerators + a CPU
    (so the symmetry rule among them is exercised; memory binds on odd seeds)."""
    from test_objectives_exact import random_problem

    base = random_problem(n, seed)
    cap = base.memory_bytes[0]
    devs = [Device(f"acc:{i}", "gpu", "accelerator", cap) for i in range(accelerators)]
    devs.append(Device("cpu:0", "cpu", "cpu", 1024 * GiB))
    return Problem(base.graph, make_cluster("small", devs, 1.0, 0.0))


@pytest.mark.parametrize("objective", ["latency", "throughput"])
@pytest.mark.parametrize("n,seed,acc", [(6, 0, 3), (6, 1, 3), (7, 1, 2), (7, 2, 3), (5, 3, 4)])
def test_cp_sat_model_equals_brute_force(objective, n, seed, acc):
    """The CP-SAT model (big-M rows as enforced rows, ticks rounded down, path rows, first-use symmetry)
    has brute force's optimum: nothing it adds cuts off the best placement (docs/bounds_published.md),
    and its proven bound is never above it; with the best placement as hint, the same."""
    from placer.methods.exact_published import cp_sat_solve
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _published_problem(n, seed, acc)
    obj = make_objective(objective)
    best, n_valid = brute_force(P, obj)
    assert np.isfinite(best) and n_valid > 1
    loose = float(np.where(np.isfinite(P.compute_us), P.compute_us, 0).max(axis=1).sum()
                  + 2 * sum(P.graph.meta["out_cost_us"].values()) + 1.0)
    place, inc, bound, status = cp_sat_solve(P, obj, loose, None, 30.0, 1, 0)
    assert status == "Optimal"
    assert obj.check(P, place) is None and obj.evaluate(P, place) == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert bound <= best * (1 + 1e-9) and bound == pytest.approx(best, rel=1e-5, abs=1e-5)
    # hinted with a placement of its optimum where the interchangeable accelerators are listed in reverse
    P_all = np.array(list(itertools.product(range(P.n_devices), repeat=P.n_ops)), dtype=np.int64)
    vals = obj.evaluate_batch(P, P_all).objective_us
    hint = P_all[int(np.argmin(vals))]
    hint = np.where(hint < acc, acc - 1 - hint, hint)
    place, inc, bound, status = cp_sat_solve(P, obj, best, None, 30.0, 1, 0, hint=hint)
    assert status == "Optimal" and bound <= best * (1 + 1e-9)
    assert obj.evaluate(P, place) == pytest.approx(best, rel=1e-6, abs=1e-6)


def test_long_paths_are_paths():
    from placer.methods.exact_published_cp import long_paths
    from placer.objectives.model import model_for

    P = _published_problem(8, 2, 2)
    m = model_for(P)
    paths = long_paths(m)
    assert paths and len(paths) == len({tuple(p) for p in paths})
    for path in paths:
        for u, v in zip(path, path[1:]):
            assert u in m.pred_idx[m.pred_ptr[v]:m.pred_ptr[v + 1]]


@pytest.mark.parametrize("solver", ["cp-sat", "highs"])
def test_method_either_solver_proves_the_optimum(solver):
    from placer.objectives import make_objective
    from test_objectives_exact import brute_force

    P = _published_problem(6, 1, 2)
    obj = make_objective("latency")
    best, _ = brute_force(P, obj)
    r = run_method("exact-published", P, Budget(placements=50), 0, objective=obj, solver=solver)
    assert r.objective_us == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert r.cost.extra["optimal"] and r.cost.extra["lower_bound_us"] <= best * (1 + 1e-9)
    assert any(("CP-SAT" if solver == "cp-sat" else "HiGHS") + " on the latency IP" in n for n in r.notes)


def _series_problem(seed: int):
    """Blocks of 1-3 parallel ops between joins, in series: articulation ops at every join (8 ops,
    2 accelerators + a CPU, memory binding, transfers 0-3 us: tests/test_objectives_exact.py's ranges)."""
    rng = np.random.default_rng(seed)
    names, edges, prev = ["op0"], [], 0
    while len(names) < 7:
        width = int(rng.integers(1, 4))
        mids = list(range(len(names), len(names) + width))
        names += [f"op{i}" for i in mids]
        join = len(names)
        names.append(f"op{join}")
        edges += [(prev, i) for i in mids] + [(i, join) for i in mids]
        prev = join
    return random_costs_problem(rng, names, edges, f"series{seed}", cpu_factor=(3.0, 30.0), cost_max=3.0)


def random_costs_problem(rng, names, edges, name, cpu_factor=(3.0, 30.0), cost_max=3.0, accelerators=2):
    """The graph ``names`` / ``edges`` (index pairs) with random accelerator times (1-10 us), CPU times
    ``cpu_factor`` times those, transfers (0 to ``cost_max`` us) and memory, on ``accelerators`` accelerators each
    holding 45% of all the memory, and a CPU."""
    n = len(names)
    gpu = rng.uniform(1.0, 10.0, n).round(2)
    cpu = (gpu * rng.uniform(*cpu_factor, n)).round(2)
    cost = rng.uniform(0.0, cost_max, n).round(2)
    size = rng.uniform(0.1, 1.0, n).round(3) * GiB
    g = OpGraph.build(names, [(names[a], names[b], 1.0) for a, b in edges], name=name,
                      compute_us={"gpu": list(gpu), "cpu": list(cpu)}, param_bytes=list(size),
                      meta={"out_cost_us": dict(zip(names, cost.tolist()))})
    devs = [Device(f"acc:{i}", "gpu", "accelerator", 0.45 * size.sum()) for i in range(accelerators)]
    return Problem(g, make_cluster("small", devs + [Device("cpu:0", "cpu", "cpu", 1024 * GiB)], 1.0, 0.0))


@pytest.mark.parametrize("seed", range(8))
def test_segment_bound_never_exceeds_the_optimum(seed):
    """The sum of the segments' bounds (cut at articulation ops, each segment after the first with the
    op closing the one before, free: docs/bounds_published.md item 7) is at most brute force's optimum."""
    from placer.methods.exact_published_cp import articulation_ops, segment_bound
    from placer.objectives import make_objective
    from placer.objectives.model import model_for
    from test_objectives_exact import brute_force

    P = _series_problem(seed)
    obj = make_objective("latency")
    best, _ = brute_force(P, obj)
    m = model_for(P)
    arts = articulation_ops(m)
    assert 0 in arts and len(arts) >= 3  # the source and every join
    lb, segs = segment_bound(P, obj, best, None, 10.0, 1, 0, max_ops=2)
    assert segs >= 2
    assert 0 < lb <= best * (1 + 1e-9), (lb, best)
