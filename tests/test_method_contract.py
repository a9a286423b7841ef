"""The method contract, checked clause by clause over every registered method (a new method gets
these checks by registering): a valid placement; the same seed gives the same placement, also with
the machine loaded; the budget in placements is never exceeded; the best-so-far curve never rises
(where every placement fits); the result is never worse than the best placement the method
evaluated, and fits in memory whenever a placement it evaluated did; unknown and ill-typed
parameters are refused; the reported simulation equals a fresh one; honest cost; on restricted
heterogeneous devices (ops allowed on only some of them) only allowed devices, or one clean
NotApplicable line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.errors import InputError
from placer.methods import METHODS, Budget, run_method
from placer.methods import base
from placer.problem import Problem
from placer.sim import simulate
from placer.zoo.synthetic import layered_training_graph

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/restricted.py

GiB = 2**30
BUDGET = 24  # placements: small, so that every method has to stop on it


def contract_problem() -> Problem:
    """A small training graph with colocation groups, an op only the CPU can run, on 2 GPUs + CPU."""
    g = layered_training_graph(24, seed=7)
    coloc = np.full(g.n_ops, -1)
    fwd = np.flatnonzero(g.mirror >= 0)
    coloc[fwd[:4]] = g.mirror[fwd[:4]]
    coloc[g.mirror[fwd[:4]]] = g.mirror[fwd[:4]]
    cpu_only = int(np.flatnonzero(coloc < 0)[3])
    gpu = g.compute_us["gpu"].copy()
    gpu[cpu_only] = np.inf
    # convolution op types: a CNN, so the rule-based ``expert`` applies too (the simulator ignores types)
    types = [t.replace("op", "Conv2D") for t in g.op_types]
    g = g.replace(colocation=coloc, compute_us={**g.compute_us, "gpu": gpu}, op_types=types)
    devs = [Device("gpu:0", "gpu", "k80", 12 * GiB), Device("gpu:1", "gpu", "k80", 12 * GiB),
            Device("cpu:0", "cpu", "cpu", 64 * GiB)]
    return Problem(g, make_cluster("contract", devs, 7600.0, 0.0))


NAMES = sorted(METHODS)


def _skip_unavailable(name):
    why = METHODS[name].available()
    if why:
        pytest.skip(f"{name}: {why}")


class Recorder:
    """Every objective evaluated during one run, and whether its placement fit: those the Evaluator
    recorded and those of the RL environments' own simulator (Placeto's rollouts, charged to the
    Evaluator afterwards)."""

    def __init__(self, monkeypatch):
        self.objectives: list[float] = []
        self.fits: list[bool] = []
        orig = base.Evaluator._record

        def record(ev, placement, obj, fits=True):
            self.objectives.append(float(obj))
            self.fits.append(bool(fits))
            return orig(ev, placement, obj, fits)

        monkeypatch.setattr(base.Evaluator, "_record", record)
        try:
            from placer.rl import env as rl_env
        except ImportError:  # pragma: no cover - torch / gymnasium missing: no RL method runs
            return
        make = rl_env.simulator_scorer

        def scorer(gp, params=None):
            score = make(gp, params)

            def recorded(op_placement):
                obj, step, fits = score(op_placement)
                self.objectives.append(float(obj))
                self.fits.append(bool(fits))
                return obj, step, fits
            return recorded

        monkeypatch.setattr(rl_env, "simulator_scorer", scorer)

    def best_that_fits(self) -> float:
        return min((o for o, f in zip(self.objectives, self.fits) if f), default=np.inf)


@pytest.fixture(scope="module")
def problem():
    return contract_problem()


def _run(name, problem, seed=0, placements=BUDGET):
    try:
        return run_method(name, problem, Budget(placements=placements), seed)
    except base.NotApplicable as e:  # pragma: no cover - the contract problem suits every method
        pytest.fail(f"{name} does not apply to the contract problem: {e}")


@pytest.mark.parametrize("name", NAMES)
def test_contract(name, problem, monkeypatch):
    _skip_unavailable(name)
    rec = Recorder(monkeypatch)
    r = _run(name, problem)
    # a valid placement: the right length, runnable devices, colocation kept
    problem.validate_placement(r.placement.devices)
    # placements used never above the budget, and counted honestly
    assert 1 <= r.cost.placements <= BUDGET
    assert r.cost.placements >= len(rec.objectives) - 0 or r.cost.placements == len(rec.objectives)
    assert r.cost.sim_calls >= 1 and r.cost.wall_s > 0
    # the best-so-far curve never rises, and ends at the result's objective or above it
    ys = [y for _, y in r.curve]
    xs = [x for x, _ in r.curve]
    assert all(b <= a for a, b in zip(ys, ys[1:])), ys
    assert all(b >= a for a, b in zip(xs, xs[1:])) and (not xs or xs[-1] <= BUDGET)
    # never worse than the best placement it evaluated
    if rec.objectives:
        assert r.sim.objective_us <= min(rec.objectives) * (1 + 1e-9)
        assert all(rec.fits) and not r.sim.oom  # the contract problem has memory to spare
    # the reported simulation equals a fresh one
    fresh = simulate(problem, r.placement.devices)
    assert fresh.objective_us == r.sim.objective_us and fresh.makespan_us == r.sim.makespan_us
    assert np.array_equal(fresh.peak_memory_bytes, r.sim.peak_memory_bytes)
    # params record the whole config
    assert set(r.params) >= {f for f in METHODS[name].config.__dataclass_fields__}


def tight_problem() -> Problem:
    """The contract problem with 40 MB GPUs: the whole graph on one GPU (58 MB at its peak)
    overflows, by little enough that its memory-penalised objective (Placeto's 2 s per GB over)
    still beats the CPU's; two GPUs or the CPU fit."""
    pr = contract_problem()
    devs = [Device(d.name, d.kind, d.model, 40e6 if d.kind == "gpu" else d.memory_bytes) for d in pr.cluster.devices]
    return Problem(pr.graph, make_cluster("tight", devs, 7600.0, 0.0))


@pytest.mark.parametrize("name", NAMES)
def test_contract_result_fits_whenever_an_evaluated_placement_fit(name, monkeypatch):
    _skip_unavailable(name)
    pr = tight_problem()
    rec = Recorder(monkeypatch)
    r = _run(name, pr)
    if any(rec.fits):
        assert not r.sim.oom, f"{name} returned a placement that overflows ({r.sim.objective_us:.0f} us)"
        assert r.sim.objective_us <= rec.best_that_fits() * (1 + 1e-9)


# ---------------------------------------------------------------------- restricted heterogeneous devices
RESTRICTED_BUDGET = 16  # placements
# the smallest settings of the methods whose own computation (not their simulations) dominates a short run
RESTRICTED_FAST = {
    "cp-sat": dict(deterministic_s=0.5, memory_rounds=1),
    "hierarchical": dict(warm_start=10, n_groups=8, hidden=32, grouper_hidden=16, split_search=2, start_mass=0.6),
    "mars": dict(pretrain_epochs=2, hidden=32, seq_hidden=32, split_search=2),
    "colocrl": dict(hidden=32),
}


@pytest.fixture(scope="module")
def restricted_problems():
    """Every op allowed on a random subset of 4-8 heterogeneous devices with links of their own
    (tests/restricted.py): a training graph with colocation groups, unlimited memory; a GiPH-style
    task graph, tight memory."""
    from restricted import restricted_problem

    return [restricted_problem(1), restricted_problem(3, graph="giph", tight=True)]


@pytest.mark.parametrize("name", NAMES)
def test_contract_on_restricted_heterogeneous_problems(name, restricted_problems):
    """Every method places every op only where it can run, colocation kept, or says in one line why it
    cannot (a contiguous split the restrictions make impossible): never a crash (issue 62)."""
    _skip_unavailable(name)
    for pr in restricted_problems:
        try:
            r = run_method(name, pr, Budget(placements=RESTRICTED_BUDGET), 0, **RESTRICTED_FAST.get(name, {}))
        except base.NotApplicable as e:
            msg = str(e)
            assert "\n" not in msg and msg.startswith(f"{name}: does not apply: "), msg
            continue
        p = pr.validate_placement(r.placement.devices)  # runnable devices, colocation kept
        assert pr.allowed[np.arange(pr.n_ops), p].all()
        assert 1 <= r.cost.placements <= RESTRICTED_BUDGET
        assert simulate(pr, p).objective_us == r.sim.objective_us


def test_evaluator_prefers_a_placement_that_fits():
    """A better-scored placement that overflows never displaces one that fits: hand-built case."""
    from placer.bench.runner import placements_to_best

    pr = tight_problem()
    n, cpu = pr.n_ops, pr.cluster.cpus()[0]
    gpu_ok = np.isfinite(pr.compute_us[:, 0])
    one_gpu = np.where(gpu_ok, 0, cpu)
    all_cpu = np.full(n, cpu)
    r_gpu, r_cpu = simulate(pr, one_gpu), simulate(pr, all_cpu)
    assert r_gpu.oom and not r_cpu.oom and r_gpu.objective_us < r_cpu.objective_us  # the premise
    ev = base.Evaluator(pr, limit=10)
    ev.evaluate(one_gpu)
    assert not ev.best_fits and ev.best_objective_us == r_gpu.objective_us  # nothing fits yet: the lowest
    ev.evaluate_batch(np.stack([all_cpu, one_gpu]))
    assert ev.best_fits and np.array_equal(ev.best, all_cpu)
    res = ev.result("x", one_gpu)  # a final placement that overflows is replaced by the best that fits
    assert not res.sim.oom and res.sim.objective_us == r_cpu.objective_us
    assert any("runs out of memory" in note for note in res.notes)
    # the curve rises once, where the first placement that fits came; reached there, not before
    ys = [y for _, y in res.curve]
    assert ys[0] == r_gpu.objective_us and ys[-1] == r_cpu.objective_us
    assert placements_to_best(res.curve, ev.placements) == 2
    # a charged run (an RL trainer's) that found only an overflowing best does not displace it
    ev2 = base.Evaluator(pr, limit=10)
    ev2.simulate(all_cpu)
    ev2.charge(3, [(1, r_gpu.objective_us)], one_gpu, r_gpu.objective_us)
    assert np.array_equal(ev2.best, all_cpu) and ev2.placements == 4
    # ... and a charged run on a fresh evaluator keeps its own best-so-far points (Placeto's curve)
    ev3 = base.Evaluator(pr, limit=10)
    c = r_cpu.objective_us
    ev3.charge(5, [(1, 2 * c), (4, c)], all_cpu, c)
    assert ev3.curve == [(1, 2 * c), (4, c), (5, c)] and placements_to_best(ev3.curve, 5) == 4


def degenerate_problems() -> dict[str, Problem]:
    """Edge cases a method must take without special handling by the caller: one op; more GPUs than
    ops (two independent chains on 8 GPUs); ops that cost nothing and send nothing."""
    from placer.cluster import preset
    from placer.graph import OpGraph

    one = OpGraph.build(["a"], [], name="one-op", compute_us={"gpu": [100.0], "cpu": [1000.0]}, output_bytes=[1e6])
    chains = OpGraph.build(["a", "b", "c", "d"], [("a", "b", 1e6), ("c", "d", 1e6)], name="two-chains",
                           compute_us={"gpu": [100.0, 200.0, 300.0, 50.0], "cpu": [1e3, 2e3, 3e3, 500.0]},
                           output_bytes=[1e6] * 4)
    free = OpGraph.build(["a", "b", "c"], [("a", "b", 0.0), ("b", "c", 0.0)], name="zero-cost",
                         compute_us={"gpu": [0.0] * 3, "cpu": [0.0] * 3})
    return {"one-op": Problem(one, preset("k80x2")), "two-chains": Problem(chains, preset("k80x8")),
            "zero-cost": Problem(free, preset("k80x2"))}


@pytest.mark.parametrize("name", NAMES)
def test_contract_on_degenerate_problems(name):
    _skip_unavailable(name)
    for case, pr in degenerate_problems().items():
        try:
            r = run_method(name, pr, Budget(placements=BUDGET), 0)
        except base.NotApplicable:  # e.g. the expert's rules find no layers: refused in words, not a crash
            continue
        pr.validate_placement(r.placement.devices)
        assert 1 <= r.cost.placements <= BUDGET, case
        assert simulate(pr, r.placement.devices).objective_us == r.sim.objective_us, case
        # what a method chooses: the GPU runs every op 10x faster than the CPU, so only cpu-only (told to
        # use the CPU) may place there; one GPU (650 us for the two chains) is a placement every other
        # method has among its starts or can reach, and 350 us (each chain on a GPU of its own) the optimum
        cpu = name == "cpu-only"
        if case == "one-op":
            assert r.sim.makespan_us == (1000.0 if cpu else 100.0), r.sim.makespan_us
        elif case == "zero-cost":  # nothing divides by a zero cost or a zero-byte edge on the way
            assert r.sim.makespan_us == 0.0
        else:
            assert 350.0 - 1e-9 <= r.sim.makespan_us <= (6500.0 if cpu else 650.0), r.sim.makespan_us


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_placement_under_load(name, problem):
    _skip_unavailable(name)
    a = _run(name, problem, seed=3)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        b = _run(name, problem, seed=3)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert np.array_equal(a.placement.devices, b.placement.devices)
    assert a.sim.objective_us == b.sim.objective_us
    assert a.cost.placements == b.cost.placements


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_refused(name, problem):
    _skip_unavailable(name)
    with pytest.raises(InputError, match="not parameters of this method"):
        run_method(name, problem, Budget(placements=4), 0, patince=3)


@pytest.mark.parametrize("name", NAMES)
def test_config_is_frozen_with_a_comment_per_field(name):
    import dataclasses
    import inspect

    cfg_cls = METHODS[name].config
    assert dataclasses.is_dataclass(cfg_cls) and cfg_cls.__dataclass_params__.frozen
    # each field's line in the class that declares it (a config may extend another method's)
    owners = [k for k in cfg_cls.__mro__ if dataclasses.is_dataclass(k) and k.__module__.startswith("placer.")]
    for f in dataclasses.fields(cfg_cls):
        owner = next(k for k in owners if f.name in k.__dict__.get("__annotations__", {}))
        src = inspect.getsource(owner)
        line = next((ln for ln in src.splitlines() if ln.strip().startswith(f"{f.name}:")), "")
        assert "#" in line, f"{owner.__name__}.{f.name} has no comment"
    cfg = cfg_cls()
    if dataclasses.fields(cfg_cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cfg, dataclasses.fields(cfg_cls)[0].name, None)


def test_ill_typed_parameter_refused(problem):
    with pytest.raises(InputError, match="placements"):
        run_method("random", problem, Budget(), 0, placements="many")
    with pytest.raises(InputError, match="placements"):
        run_method("random", problem, Budget(), 0, placements=0)
    r = run_method("random", problem, Budget(), 0, placements="5")  # strings from --set are parsed
    assert r.cost.placements == 5


@pytest.mark.parametrize("bad", [dict(placements=0), dict(placements=-1), dict(seconds=-1.0),
                                 dict(seconds=float("nan")), dict(placements=2.5)])
def test_bad_budget_refused(bad):
    with pytest.raises(InputError):
        Budget(**bad)


def test_bad_seed_refused(problem):
    with pytest.raises(InputError, match="seed"):
        run_method("random", problem, Budget(placements=2), -1)


def test_evaluator_never_exceeds_its_limit(problem):
    ev = base.Evaluator(problem, limit=5)
    P = np.zeros((8, problem.n_ops), dtype=np.int64)
    P[:, :] = 0
    cpu = problem.cluster.cpus()[0]
    P[:, :] = cpu
    with pytest.raises(base.BudgetSpent):
        ev.evaluate_batch(P)
    assert ev.placements == 5
    with pytest.raises(base.BudgetSpent):
        ev.evaluate(P[0])
    assert ev.placements == 5


def test_result_never_worse_than_best_evaluated(problem):
    ev = base.Evaluator(problem, limit=10)
    cpu = problem.cluster.cpus()[0]
    good = np.full(problem.n_ops, cpu)
    ev.evaluate(good)
    worse = good.copy()
    worse[np.isfinite(problem.compute_us[:, 0]) & (problem.graph.colocation < 0)] = 0
    worse[::2] = cpu
    r_good = ev.best_objective_us
    res = ev.result("x", worse)
    assert res.sim.objective_us <= r_good


@pytest.mark.parametrize("name", [n for n in NAMES if "placements" in METHODS[n].config.__dataclass_fields__])
def test_result_records_the_budget_that_ran_not_the_config_default(name, problem):
    """A result's params say how many placements the method was given (the bench's 20,000, not the
    config's default), so a committed run's record reads right."""
    _skip_unavailable(name)
    r = _run(name, problem, placements=BUDGET - 1)
    assert r.params["placements"] == BUDGET - 1 != METHODS[name].config().placements
