"""multilevel: a coarse phase on module units within its share of the budget, then local search on
ops from the best of the seeds and the coarse result; on a graph without module paths, local search."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from placer.errors import InputError
from placer.methods import Budget, Evaluator, run_method
from placer.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_method_contract import contract_problem  # noqa: E402


def with_modules(problem: Problem, k: int = 4) -> Problem:
    """The contract problem with module paths: the ops in topological order cut into ``k`` layers,
    each backward op in its forward op's layer."""
    g = problem.graph
    layer = np.arange(g.n_ops) * k // g.n_ops
    fwd = np.flatnonzero(g.mirror >= 0)
    layer[g.mirror[fwd]] = layer[fwd]
    return Problem(g.replace(modules=[f"net.layers.{int(x)}.fc" for x in layer]), problem.cluster)


@pytest.fixture(scope="module")
def modular():
    return with_modules(contract_problem())


def _count_objectives(monkeypatch):
    """Wrap Evaluator.evaluate_batch / simulate to record how many placements each phase asked for."""
    seen = []
    orig_batch, orig_sim = Evaluator.evaluate_batch, Evaluator.simulate

    def batch(self, placements, n_jobs=None):
        seen.append((self._share_limit, self.placements))
        return orig_batch(self, placements, n_jobs)

    def sim(self, placement):
        seen.append((self._share_limit, self.placements))
        return orig_sim(self, placement)

    monkeypatch.setattr(Evaluator, "evaluate_batch", batch)
    monkeypatch.setattr(Evaluator, "simulate", sim)
    return seen


def test_coarse_phase_runs_on_module_units_within_its_share(modular, monkeypatch):
    seen = _count_objectives(monkeypatch)
    r = run_method("multilevel", modular, Budget(placements=200), seed=1)
    assert r.cost.placements == 200
    coarse = [p for cap, p in seen if cap is not None]
    assert coarse and max(coarse) < 50  # 0.25 of 200 placements: every coarse call starts below its cap
    assert any(p >= 50 for cap, p in seen if cap is None)  # the fine phase runs after it
    assert any(n.startswith("coarse phase on module:") for n in r.notes), r.notes
    assert any(n.startswith("fine phase: ") for n in r.notes), r.notes


def test_same_seed_same_placement(modular):
    a = run_method("multilevel", modular, Budget(placements=150), seed=4)
    b = run_method("multilevel", modular, Budget(placements=150), seed=4)
    assert np.array_equal(a.placement.devices, b.placement.devices)
    assert a.sim.objective_us == b.sim.objective_us


def test_without_module_paths_it_is_local_search():
    p = contract_problem()
    a = run_method("multilevel", p, Budget(placements=120), seed=2)
    b = run_method("local-search", p, Budget(placements=120), seed=2)
    assert np.array_equal(a.placement.devices, b.placement.devices)
    assert any("no coarse phase" in n for n in a.notes), a.notes


def test_a_coarse_grouping_can_be_forced_on_a_graph_without_paths():
    p = contract_problem()
    r = run_method("multilevel", p, Budget(placements=120), seed=2, fallback="contiguous:4")
    assert any(n.startswith("coarse phase on contiguous:4") for n in r.notes), r.notes


def test_bad_groupings_are_refused_before_work():
    p = contract_problem()
    for bad in ({"coarse": "modules"}, {"fallback": "merge:x"}, {"coarse_share": 1.0}):
        with pytest.raises(InputError):
            run_method("multilevel", p, Budget(placements=10), seed=0, **bad)


def test_share_caps_and_restores_the_budget():
    p = contract_problem()
    ev = Evaluator(p, limit=100)
    one = np.where(np.isinf(p.graph.compute_us["gpu"]), 2, 0)  # the CPU-only op on the CPU, the rest on gpu:0
    ev.evaluate(one)
    with ev.share(0.5):
        assert ev.remaining() == 49 and not ev.out_of_budget()
        ev.evaluate_batch(np.stack([one] * 49))
        assert ev.remaining() == 0 and ev.out_of_budget()
    assert ev.remaining() == 50 and not ev.out_of_budget() and ev.placements == 50
    unlimited = Evaluator(p)
    with unlimited.share(0.25):
        assert unlimited.remaining() is None


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_tiny_budgets_still_answer(modular, budget):
    r = run_method("multilevel", modular, Budget(placements=budget), seed=0)
    assert r.cost.placements <= budget and np.isfinite(r.sim.objective_us)


def test_a_stalled_coarse_phase_ends_before_its_share(modular, monkeypatch):
    """Four module units on three devices: the coarse search has nothing left to find long before a
    quarter of 4,000 placements; after coarse_give_up restarts without a new best it hands over."""
    seen = _count_objectives(monkeypatch)
    r = run_method("multilevel", modular, Budget(placements=4000), seed=0, coarse_give_up=2)
    coarse = [p for cap, p in seen if cap is not None]
    assert coarse and max(coarse) < 900, max(coarse)
    assert r.cost.placements == 4000
