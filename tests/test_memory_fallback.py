"""The memory fallback of ColocRL, the Hierarchical Planner, GDP and Mars
(placer.methods.memory_fallback): when nothing of their first policy update fits in memory, the
classical seeds (relieved), then the host, are evaluated, so they return a placement that fits."""

import numpy as np
import pytest

from placer.methods import Budget, run_method
from placer.methods.base import Evaluator
from placer.methods.memory_fallback import fit_in_memory
from placer.sim import simulate

from conftest import tight_problem

pytest.importorskip("torch")

# small networks and few placements: what is tested is the fallback, not the learning
SMALL = {
    "colocrl": {"hidden": 32, "max_groups": 32},
    "hierarchical": {"hidden": 32, "n_groups": 16, "warm_start": 20, "start_mass": 0.9},
    "gdp": {"hidden": 32},
    "mars": {"hidden": 32, "seq_hidden": 32, "pretrain_epochs": 10},
}


@pytest.mark.parametrize("method", sorted(SMALL))
def test_a_learned_method_returns_a_placement_that_fits_when_its_policy_finds_none(method):
    """GPUs cut to 200 MB (the graph peaks at 440 MB on one device): no placement the small policies
    sample in 60 fits; with ``fit_in_memory`` switched off, all four returned one that overflows
    here (checked when the fallback was added). Now the result fits, within the budget, and says why."""
    P = tight_problem(200e6, 0)
    res = run_method(method, P, Budget(placements=60), seed=0, **SMALL[method])
    assert res.cost.placements <= 60
    assert not simulate(P, res.placement).oom
    assert any("first policy update fit in memory" in n for n in res.notes)


def test_the_fallback_does_nothing_when_a_placement_evaluated_fits():
    """No simulation and no note when the best placement evaluated fits (so the four methods give
    the placements they gave before on every problem where memory is not tight), nor before anything
    was evaluated."""
    P = tight_problem(2e9, 0)
    ev = Evaluator(P, None, limit=100)
    assert fit_in_memory(P, ev) is None and ev.placements == 0
    ev.evaluate(np.zeros(P.n_ops, dtype=np.int64))
    assert ev.best_fits
    assert fit_in_memory(P, ev) is None and ev.placements == 1


def test_the_fallback_relieves_within_the_budget_and_keeps_the_best_that_fits():
    """An overflowing placement evaluated first (everything on one 280 MB GPU): the fallback finds one
    that fits, counted in the budget it was given, and the Evaluator returns it."""
    P = tight_problem(280e6, 0)
    ev = Evaluator(P, None, limit=200)
    ev.evaluate(np.zeros(P.n_ops, dtype=np.int64))
    assert not ev.best_fits
    note = fit_in_memory(P, ev)
    assert note and "fits" in note and ev.best_fits and ev.placements <= 200
    assert not simulate(P, ev.best).oom
