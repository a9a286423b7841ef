"""CP-SAT against brute force over every placement, simulated.

The model's makespan semantics are the simulator's (placeto bus, op and bus gaps, uniform links)
except that the solver may order a device's ready ops freely while the simulator serves them first
come first served. So for every graph: model optimum <= best simulated placement <= simulated CP-SAT
answer, and on graphs where FIFO order is optimal all three are equal.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

pytest.importorskip("ortools")

from placer.cluster import Device, make_cluster  # noqa: E402
from placer.graph import OpGraph  # noqa: E402
from placer.methods import Budget, run_method  # noqa: E402
from placer.methods.exact import contiguous_groups, grouped_problem, solve  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.sim import SimParams, simulate  # noqa: E402

GiB = 2**30


def cluster(D, bw=1.0, lat=0.0, memory=64 * GiB):
    return make_cluster("t", [Device(f"gpu:{i}", "gpu", "g", memory) for i in range(D)], bw, lat)


def brute_force(pr, sp):
    best = None
    for p in itertools.product(range(pr.n_devices), repeat=pr.n_ops):
        r = simulate(pr, np.array(p), sp)
        key = (r.oom, r.makespan_us)
        best = key if best is None or key < best else best
    return best


# (name, ops with costs, edges with bytes, devices)
CASES = [
    # two independent chains: the optimum runs them side by side
    ("two chains", [3, 4, 2, 5], [(0, 1, 1.0), (2, 3, 1.0)], 2),
    # a fork-join where the branches are worth splitting despite a 1 us transfer each way
    ("diamond", [1, 6, 6, 1], [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 1.0), (2, 3, 1.0)], 2),
    # the same diamond with heavy tensors: one device is best
    ("heavy diamond", [1, 6, 6, 1], [(0, 1, 20.0), (0, 2, 20.0), (1, 3, 20.0), (2, 3, 20.0)], 2),
    # a fan-out to three devices
    ("fan-out", [2, 5, 5, 5, 1], [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (1, 4, 1.0), (2, 4, 1.0), (3, 4, 1.0)], 3),
]


@pytest.mark.parametrize("sp", [SimParams(), SimParams(op_gap_us=1.0, bus_gap_us=2.0)], ids=["plain", "gaps"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cp_sat_finds_the_brute_force_optimum(case, sp):
    _, costs, edges, D = case
    g = OpGraph.build([f"o{i}" for i in range(len(costs))], edges, compute_us={"gpu": costs})
    pr = Problem(g, cluster(D))
    oom, best = brute_force(pr, sp)
    res = run_method("cp-sat", pr, Budget(seconds=20), 0, sp)
    assert res.cost.extra["optimal"]
    assert res.cost.extra["model_makespan_us"] == pytest.approx(best)
    assert res.cost.extra["lower_bound_us"] == pytest.approx(best)
    assert res.step_time_us == pytest.approx(best)


def test_cp_sat_bounds_random_graphs():
    rng = np.random.default_rng(7)
    equal = 0
    for _ in range(12):
        n, D = int(rng.integers(3, 7)), int(rng.integers(2, 4))
        edges = [(i, j, float(rng.integers(0, 6))) for j in range(n) for i in range(j) if rng.random() < 0.4]
        g = OpGraph.build([f"o{i}" for i in range(n)], edges, compute_us={"gpu": rng.integers(1, 10, n).astype(float)})
        pr = Problem(g, cluster(D))
        _, best = brute_force(pr, SimParams())
        res = run_method("cp-sat", pr, Budget(seconds=20), 0)
        model = res.cost.extra["model_makespan_us"]
        assert model <= best + 1e-6 <= res.step_time_us + 2e-6
        equal += abs(model - best) < 1e-6 and abs(res.step_time_us - best) < 1e-6
    assert equal >= 8  # FIFO is optimal on most small graphs


def test_cp_sat_memory_limit():
    # 4 ops of 6 GiB on two 16 GiB devices: at most two per device, even though one device is fastest
    g = OpGraph.build([f"o{i}" for i in range(4)], [(i, i + 1, 100.0) for i in range(3)],
                      compute_us={"gpu": [5.0] * 4}, param_bytes=[6 * GiB] * 4)
    pr = Problem(g, cluster(2, memory=16 * GiB))
    res = run_method("cp-sat", pr, Budget(seconds=20), 0)
    assert pr.memory_feasible(res.placement.devices) and not res.sim.oom
    assert np.bincount(res.placement.devices, minlength=2).tolist() == [2, 2]
    assert res.cost.extra["optimal"]
    _, best = brute_force(pr, SimParams())
    assert res.step_time_us == pytest.approx(best)


def test_grouping_and_grouped_problem():
    from placer.cluster import preset
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(200, seed=1), preset("k80x4"))
    go = contiguous_groups(pr, 30)
    assert go.max() + 1 <= 30 and np.all(np.diff(go) >= 0) and go[0] == 0
    gp = grouped_problem(pr, 12)
    assert gp.n_ops == 12
    assert gp.graph.compute_us["gpu"].sum() == pytest.approx(pr.graph.compute_us["gpu"].sum())
    res = run_method("cp-sat", gp, Budget(seconds=20), 0)
    assert res.cost.extra["grouped"] is False
    assert res.cost.extra["lower_bound_us"] <= res.step_time_us + 1e-6
    big = run_method("cp-sat", pr, Budget(), 0, max_groups=16, deterministic_s=0.2)
    assert big.cost.extra["grouped"] and big.cost.extra["tasks"] <= 16
    pr.validate_placement(big.placement.devices)
    again = run_method("cp-sat", pr, Budget(), 0, max_groups=16, deterministic_s=0.2)
    assert again.placement == big.placement


def test_solve_respects_colocation():
    coloc = [0, -1, -1, 0]
    g = OpGraph.build([f"o{i}" for i in range(4)], [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 1.0), (2, 3, 1.0)],
                      compute_us={"gpu": [1, 6, 6, 1]}, colocation=coloc)
    pr = Problem(g, cluster(2))
    out = solve(pr, SimParams(), np.arange(4), 10)
    assert out.placement[0] == out.placement[3]



def test_solve_returns_a_typed_solution():
    """build, solve_model and decode behind solve: a frozen Solution whose placement is the last (best)
    of the improving solutions, each decoded to a device per op."""
    from placer.methods.exact import Solution

    g = OpGraph.build([f"o{i}" for i in range(4)], [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 1.0), (2, 3, 1.0)],
                      compute_us={"gpu": [1, 6, 6, 1]})
    out = solve(Problem(g, cluster(2)), SimParams(), np.arange(4), 10)
    assert isinstance(out, Solution) and out.status == "OPTIMAL" and out.tasks == 4
    assert out.placement is out.solutions[-1] and all(len(p) == 4 for p in out.solutions)
    assert list(out.values_us) == sorted(out.values_us, reverse=True)
    assert out.model_makespan_us == pytest.approx(out.values_us[-1])
    assert out.lower_bound_us <= out.model_makespan_us + 1e-9
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.status = "UNKNOWN"

def _recording_solve(monkeypatch, replace=None):
    """Record every solve's (time limit, deterministic) and optionally replace its answer."""
    from placer.methods import exact

    calls, real = [], exact.solve

    def solve(problem, sim_params, group_of, time_limit_s, *a, **k):
        calls.append((float(time_limit_s), bool(k.get("deterministic"))))
        out = real(problem, sim_params, group_of, time_limit_s, *a, **k)
        return replace(problem, out) if replace else out

    monkeypatch.setattr(exact, "solve", solve)
    return calls


def test_cp_sat_honours_seconds(monkeypatch):
    """Every solve's wall-clock limit together stays within --seconds (memory-cut rounds included),
    and without --seconds every solve is limited in CP-SAT's deterministic time."""
    from placer.cluster import preset
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(60, seed=2), preset("k80x2"))
    calls = _recording_solve(monkeypatch)
    run_method("cp-sat", pr, Budget(seconds=2.0), 0, max_groups=12)
    assert calls and sum(t for t, _ in calls) <= 2.0 and not any(d for _, d in calls)
    calls.clear()
    run_method("cp-sat", pr, Budget(), 0, max_groups=12, deterministic_s=0.3)
    assert calls and all(d and t == 0.3 for t, d in calls)


def test_cp_sat_never_worse_than_its_warm_start(monkeypatch):
    """A model answer that simulates far worse than the warm start (every op on the CPU) is not
    returned: the warm start went through the evaluator."""
    from placer.cluster import preset
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(8, seed=3), preset("k80x2"))
    cpu = pr.cluster.cpus()[0]

    def worst(problem, out):
        bad = np.full(problem.n_ops, cpu, dtype=np.int64)
        return dataclasses.replace(out, solutions=(bad,))

    _recording_solve(monkeypatch, worst)
    res = run_method("cp-sat", pr, Budget(), 0, max_groups=40, deterministic_s=0.2)
    on_cpu = simulate(pr, np.full(pr.n_ops, cpu)).objective_us
    gpu0 = simulate(pr, np.zeros(pr.n_ops, dtype=np.int64)).objective_us
    assert res.sim.objective_us <= gpu0 < on_cpu


def test_cp_sat_without_a_solution_returns_the_warm_start(monkeypatch):
    """A solver that finds nothing in its limit (a loaded machine) yields the best warm start, not an error."""
    from placer.cluster import preset
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(20, seed=4), preset("k80x2"))

    def nothing(problem, out):
        return dataclasses.replace(out, status="UNKNOWN", solutions=(), values_us=(), model_makespan_us=None)

    _recording_solve(monkeypatch, nothing)
    res = run_method("cp-sat", pr, Budget(), 0, deterministic_s=0.2)
    pr.validate_placement(res.placement.devices)
    assert any("found no solution" in n for n in res.notes), res.notes


def test_cp_sat_returns_a_warm_start_when_its_seconds_ran_out_before_any(monkeypatch):
    """Building the warm starts can use up a --seconds limit on a large graph on a loaded machine
    (NASNet and NMT-4 in `placer bench classical`: HEFT and m-ETF took the 30 s). The first warm
    start is still simulated, so when the solver then finds nothing the run returns it (it raised
    "no warm start was evaluated" before)."""
    from placer.cluster import preset
    from placer.methods.list_scheduling.schedulers import heft_schedule
    from placer.methods.devices import gpu_devices
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(40, seed=4), preset("k80x2"))
    _recording_solve(monkeypatch, lambda problem, out: dataclasses.replace(out, solutions=(), status="UNKNOWN"))
    res = run_method("cp-sat", pr, Budget(seconds=1e-9), 0, max_groups=12)
    heft = heft_schedule(pr, SimParams(), gpu_devices(pr), comm="sim").placement
    assert res.cost.placements == 1 and any("no solution" in n for n in res.notes)
    assert np.array_equal(res.placement.devices, heft)
