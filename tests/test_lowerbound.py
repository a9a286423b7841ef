"""The bound engine (placer.lowerbound, docs/bounds.md): on random small instances (3-8 ops, 2-3
devices, per-op per-device costs with restrictions, per-pair links, op gaps, tight memory,
colocation, every communication model) no bound exceeds the best step time found by simulating
every placement; it equals it where the instance is trivially tight; the same input gives the same
value."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.graph import OpGraph
from placer.lowerbound import lower_bound
from placer.lowerbound.load import window_bound
from placer.problem import Problem
from placer.sim import SimParams, evaluate_many
from tests.lowerbound_instances import MODELS, random_cluster



def random_instance(seed: int) -> tuple[Problem, SimParams]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    D = int(rng.integers(2, 4))
    names = [f"op{i}" for i in range(n)]
    edges = [(i, j, float(rng.choice([0.0, rng.uniform(1, 400)])))
             for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4]
    cost = {}
    for d in range(D):
        c = rng.uniform(1, 50, n) * (1 + 2 * rng.random())
        c[rng.random(n) < 0.1] = 0.0  # zero-cost ops skip the op gap
        if d > 0:
            c[rng.random(n) < 0.15] = np.inf  # ops that may not run there
        cost[f"m{d}"] = c
    params = rng.uniform(0, 100, n) * (rng.random(n) < 0.5)
    colocation = None
    if n >= 4 and rng.random() < 0.3:
        colocation = [-1] * n
        colocation[0] = colocation[1 + int(rng.integers(n - 1))] = 7
    g = OpGraph.build(names, edges, compute_us=cost, param_bytes=params, output_bytes=rng.uniform(0, 20, n),
                      temp_bytes=rng.uniform(0, 10, n), colocation=colocation)
    tight = rng.random() < 0.4
    model = MODELS[seed % len(MODELS)]
    cluster = random_cluster(rng, D, model, f"c{seed}", memory=float(params.sum() * (0.6 if tight else 10) + 1500),
                             bw_low=1.0)
    sp = SimParams(comm_model=model, op_gap_us=float(rng.choice([0.0, rng.uniform(0, 3)])),
                   bus_gap_us=float(rng.choice([0.0, rng.uniform(0, 3)])))
    try:
        return Problem(g, cluster), sp
    except Exception:  # an op that fits nowhere, a colocation group with no common device
        return random_instance(seed + 10_000)


def chain_instance(seed: int) -> tuple[Problem, SimParams]:
    """A chain of blocks (series points between them) whose parameters need two or more devices, with
    heavy edges: what the memory bounds (fitting relaxation, memory paths, memory series) reason about."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(4, 9))
    D = int(rng.integers(2, 4))
    edges = [(i, i + 1, float(rng.uniform(10, 300))) for i in range(n - 1)]
    edges += [(i, i + 2, float(rng.uniform(10, 300))) for i in range(n - 2) if rng.random() < 0.3]
    cost = {f"m{d}": rng.uniform(1, 30, n) * (1 + 3 * d * rng.random()) for d in range(D)}
    params = rng.uniform(200, 1000, n)
    g = OpGraph.build([f"o{i}" for i in range(n)], edges, compute_us=cost, param_bytes=params,
                      output_bytes=rng.uniform(0, 5, n))
    cap = float(params.sum() * rng.uniform(0.5, 0.9) + 1200)
    devs = [Device(f"d{d}", "gpu", f"m{d}", cap) for d in range(D)]
    model = MODELS[seed % len(MODELS)]
    cluster = make_cluster(f"chain{seed}", devs, float(rng.uniform(2, 20)), float(rng.uniform(0, 3)),
                           meta={"comm_model": model})
    return Problem(g, cluster), SimParams(comm_model=model)


def series_instance(seed: int) -> tuple[Problem, SimParams]:
    """Chains with skip edges, zero-cost ops, ops without parameters, heavy edges, one device with
    more memory: where the memory series bound is the best (one instance in twenty)."""
    rng = np.random.default_rng(5000 + seed)
    n, D = int(rng.integers(4, 9)), int(rng.integers(2, 4))
    edges = [(i, i + 1, float(rng.uniform(10, 600))) for i in range(n - 1)]
    edges += [(i, i + 2, float(rng.uniform(10, 600))) for i in range(n - 2) if rng.random() < 0.4]
    edges += [(i, i + 3, float(rng.uniform(10, 600))) for i in range(n - 3) if rng.random() < 0.2]
    cost = {f"m{d}": rng.uniform(0, 30, n) * (1 + 3 * d * rng.random()) * (rng.random(n) > 0.1) for d in range(D)}
    params = rng.uniform(200, 1500, n) * (rng.random(n) < 0.8)
    g = OpGraph.build([f"o{i}" for i in range(n)], edges, compute_us=cost, param_bytes=params,
                      output_bytes=rng.uniform(0, 50, n), temp_bytes=rng.uniform(0, 50, n))
    cap = float(params.sum() * rng.uniform(0.3, 0.9) + rng.uniform(800, 2000))
    devs = [Device(f"d{d}", "gpu", f"m{d}", cap * (1 + (d == 0) * rng.random())) for d in range(D)]
    model = MODELS[seed % len(MODELS)]
    cluster = make_cluster(f"s{seed}", devs, float(rng.uniform(2, 20)), float(rng.uniform(0, 3)),
                           meta={"comm_model": model})
    return Problem(g, cluster), SimParams(comm_model=model, op_gap_us=float(rng.choice([0, 1.5])),
                                          bus_gap_us=float(rng.choice([0, 2.0])))


def all_placements(P: Problem) -> np.ndarray:
    """Every valid placement (allowed devices, colocation groups together)."""
    rows = np.array(list(itertools.product(range(P.n_devices), repeat=P.n_ops)), dtype=np.int64)
    ok = P.allowed[np.arange(P.n_ops)[None, :], rows].all(axis=1)
    for members in P.graph.colocation_groups():
        ok &= (rows[:, members] == rows[:, members[:1]]).all(axis=1)
    return rows[ok]


def optimum(P: Problem, sp: SimParams) -> tuple[float, float]:
    """(best step time over the placements that fit, best objective over every placement)."""
    r = evaluate_many(P, all_placements(P), sp)
    fit = r.makespan_us[~r.oom]
    return (float(fit.min()) if len(fit) else float("inf")), float(r.objective_us.min())


def assert_bounds_hold(P: Problem, sp: SimParams, seconds: float = 0.0):
    """Every candidate of the bound, not only the best, at most the enumerated optimum: of the
    placements that fit for a memory candidate, of any placement otherwise. Returns the bound and
    the two optima (of the placements that fit, of any placement)."""
    best_fit, best_any = optimum(P, sp)
    b = lower_bound(P, sp, seconds=seconds)
    for c in b.candidates:
        limit = best_fit if c.memory else min(best_fit, best_any)
        assert c.value_us <= limit * (1 + 1e-9) + 1e-6, (c, best_fit, best_any)
    return b, best_fit, best_any


@pytest.mark.parametrize("seed", range(48))
def test_bound_never_exceeds_the_enumerated_optimum(seed):
    P, sp = random_instance(seed)
    b, best_fit, best_any = assert_bounds_hold(P, sp, seconds=1.0)
    assert b.any_placement_us <= best_any * (1 + 1e-9) + 1e-6
    assert b.value_us >= b.any_placement_us >= P.critical_path_us * (1 - 1e-12)
    if b.proven_optimal:  # the engine's own placement has that step time and fits
        assert b.best_known_us == pytest.approx(best_fit, rel=1e-9)


@pytest.mark.parametrize("seed", range(80))
def test_memory_bounds_never_exceed_the_enumerated_optimum(seed):
    P, sp = chain_instance(seed) if seed < 40 else series_instance(seed - 40)
    assert_bounds_hold(P, sp)  # the cheap bounds only: each must hold on its own


def test_small_instances_are_closed():
    """CP-SAT on the whole relaxed problem (transfers as resources): on most random small instances
    the bound is the enumerated optimum and the engine's own placement proves it. The rest differ by
    what the relaxation leaves out: the simulator's first-in-first-out order and the activation
    memory of every moment but the ops' runs."""
    closed = finite = 0
    for seed in range(24):
        P, sp = random_instance(seed)
        best_fit, _ = optimum(P, sp)
        if not np.isfinite(best_fit):
            continue
        finite += 1
        b = lower_bound(P, sp, seconds=2.0)
        tight = b.value_us >= best_fit * (1 - 1e-6)
        closed += tight
        assert b.proven_optimal == (tight and b.best_known_us <= best_fit * (1 + 1e-9))
    assert finite >= 18 and closed >= 0.7 * finite


def _chain(n: int, free_comm: bool, comm: str) -> tuple[Problem, SimParams]:
    names = [f"op{i}" for i in range(n)]
    g = OpGraph.build(names, [(i, i + 1, 0.0 if free_comm else 100.0) for i in range(n - 1)],
                      compute_us={"gpu": np.arange(1.0, n + 1)})
    devs = [Device(f"d{d}", "gpu", "k", 1e12) for d in range(3)]
    return Problem(g, make_cluster("c", devs, 10.0, 0.0, meta={"comm_model": comm})), SimParams(comm_model=comm)


@pytest.mark.parametrize("comm", MODELS)
def test_trivially_tight(comm):
    for n in (1, 5):  # one op; a chain on one device class with free communication
        P, sp = _chain(n, True, comm)
        b = lower_bound(P, sp, seconds=0.5)
        assert b.value_us == pytest.approx(n * (n + 1) / 2)
        assert b.proven_optimal and b.best_known_us == pytest.approx(b.value_us)


def test_zero_seconds_runs_no_solver_and_the_value_is_deterministic():
    P, sp = random_instance(3)
    b0 = lower_bound(P, sp, seconds=0)
    assert "exact" not in {c.name for c in b0.candidates}
    a, b = lower_bound(P, sp, seconds=1.0), lower_bound(P, sp, seconds=1.0)
    assert [(c.name, c.value_us) for c in a.candidates] == [(c.name, c.value_us) for c in b.candidates]
    assert a.value_us >= b0.value_us


def test_window_bound_by_hand():
    # three ops of work 1, 2, 3: the last two start after 10 and end 5 before the step ends
    head = np.array([0.0, 10.0, 10.0])
    after = np.array([0.0, 5.0, 5.0])
    assert window_bound(head, after, np.array([1.0, 2.0, 3.0])) == 10 + 5 + 5
    # an empty window proves nothing: a head of 10 on one op and a tail of 5 on another
    assert window_bound(np.array([10.0, 0.0]), np.array([0.0, 5.0]), np.array([1.0, 1.0])) == 11


def test_memory_bound_only_for_fitting_placements():
    """Two heavy ops whose parameters cannot share a device: the memory-aware bound counts the
    transfer between them; the bound on every placement does not."""
    g = OpGraph.build(["a", "b"], [(0, 1, 1000.0)], compute_us={"gpu": np.array([10.0, 10.0])},
                      param_bytes=[6000.0, 6000.0])
    devs = [Device(f"d{d}", "gpu", "k", 10_000.0) for d in range(2)]
    P = Problem(g, make_cluster("c", devs, 10.0, 0.0))
    sp = SimParams()
    best_fit, best_any = optimum(P, sp)
    assert best_fit == pytest.approx(10 + 100 + 10)  # split: the transfer of 1000 bytes at 10 bytes/us
    b = lower_bound(P, sp, seconds=1.0)
    assert b.value_us == pytest.approx(best_fit, rel=1e-6) and b.proven_optimal
    assert b.any_placement_us == pytest.approx(20.0)  # both on one device, out of memory
    assert next(c for c in b.candidates if c.name == "exact").memory


def test_energy_bound_by_hand():
    """Two identical devices, free transfers: a source of 10 us feeds three ops of 10 that feed a sink
    of 10, beside an independent op of 14. The window [10, T - 10] holds the three middle ops (the
    windows bound: 10 + 10 + 30 / 2 = 35) and at least 4 us of the independent op, which cannot end
    before 14 nor start after T - 14 (energy: 10 + 10 + 34 / 2 = 37); the optimum is 40."""
    from placer.lowerbound.load import device_classes, energetic_bound, load_lp
    from placer.lowerbound.relax import Relaxation

    g = OpGraph.build([f"o{i}" for i in range(6)], [(0, 1, 0.0), (0, 2, 0.0), (0, 3, 0.0), (1, 4, 0.0),
                                                    (2, 4, 0.0), (3, 4, 0.0)],
                      compute_us={"gpu": np.array([10.0, 10.0, 10.0, 10.0, 10.0, 14.0])})
    devs = [Device(f"d{d}", "gpu", "k", 1e12) for d in range(2)]
    P = Problem(g, make_cluster("c", devs, 10.0, 0.0))
    sp = SimParams()
    best_fit, _ = optimum(P, sp)
    assert best_fit == pytest.approx(40.0)
    b = lower_bound(P, sp, seconds=0)
    c = {x.name: x.value_us for x in b.candidates}
    assert c["windows"] == pytest.approx(35.0) and c["energy"] == pytest.approx(37.0)
    r = Relaxation.of(P, sp)
    cl = device_classes(r)
    lb, y = load_lp(r, cl, memory=False)
    assert energetic_bound(r, cl, y, 35.0) == pytest.approx(37.0)
    assert energetic_bound(r, cl, y, 0.0) == 0.0  # no proven bound, no window: nothing claimed


def test_heads_count_inputs_on_one_device():
    """A fork-join s -> a, b -> t with transfers of 100 us: a and b either share t's device (one at a
    time: 1 + 10 + 10 + 1) or one of them pays a transfer (1 + 10 + 100 + 1). The path recursion alone
    says 1 + 10 + 1; the heads that count the inputs on one device prove the optimum, 22."""
    g = OpGraph.build(["s", "a", "b", "t"], [(0, 1, 1000.0), (0, 2, 1000.0), (1, 3, 1000.0), (2, 3, 1000.0)],
                      compute_us={"gpu": np.array([1.0, 10.0, 10.0, 1.0])})
    devs = [Device(f"d{d}", "gpu", "k", 1e12) for d in range(2)]
    for comm in MODELS:
        P = Problem(g, make_cluster("c", devs, 10.0, 0.0, meta={"comm_model": comm}))
        sp = SimParams(comm_model=comm)
        best_fit, _ = optimum(P, sp)
        assert best_fit == pytest.approx(22.0)
        b = lower_bound(P, sp, seconds=0)
        assert {c.name: c.value_us for c in b.candidates}["critical path"] == pytest.approx(22.0)


def fan_instance(seed: int) -> tuple[Problem, SimParams]:
    """Fork-joins with heavy edges, per-device costs, restrictions and op gaps: where the heads and
    tails that count one device's inputs and outputs (and the energy bound) reason."""
    rng = np.random.default_rng(9000 + seed)
    k = int(rng.integers(2, 6))  # the middle ops
    n, D = k + 2 + int(rng.integers(0, 2)), int(rng.integers(2, 4))
    edges = [(0, i, float(rng.uniform(0, 400))) for i in range(1, k + 1)]
    edges += [(i, k + 1, float(rng.uniform(0, 400))) for i in range(1, k + 1)]
    edges += [(k + 1, j, float(rng.uniform(0, 400))) for j in range(k + 2, n)]
    cost = {}
    for d in range(D):
        c = rng.uniform(1, 30, n) * (1 + rng.random())
        if d > 0:
            c[rng.random(n) < 0.1] = np.inf
        cost[f"m{d}"] = c
    g = OpGraph.build([f"o{i}" for i in range(n)], edges, compute_us=cost)
    model = MODELS[seed % len(MODELS)]
    cluster = random_cluster(rng, D, model, f"f{seed}", shared_links=False)
    sp = SimParams(comm_model=model, op_gap_us=float(rng.choice([0.0, 2.0])), bus_gap_us=float(rng.choice([0.0, 1.0])))
    try:
        return Problem(g, cluster), sp
    except Exception:  # an op with no device
        return fan_instance(seed + 10_000)


@pytest.mark.parametrize("seed", range(40))
def test_fan_bounds_never_exceed_the_enumerated_optimum(seed):
    assert_bounds_hold(*fan_instance(seed))
