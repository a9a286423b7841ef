"""Every method honours a time budget (issue 66): under ``Budget(seconds=..., clock=...)`` it stops
when its placements or its time end, whichever first, and its result says which (``cost.extra``:
``stopped_by``, ``clock``, ``cpu_s``). No timing is asserted: a search method given a tiny time and
a placement budget it could not use in hours must say that the time ended it, having used far fewer
placements than allowed; a construction says it ended by itself. The fixed work of the learned
methods (the Hierarchical Planner's Grouper warm start, Mars's DGI steps) ends with the time too,
which their notes count."""

from __future__ import annotations

import pytest

from placer.errors import InputError
from placer.methods import METHODS, Budget, run_method
from placer.methods.base import FALLBACK_NOTE, NotApplicable
from placer.problem import Problem
from placer.resolve import resolve_cluster
from placer.zoo.synthetic import layered_training_graph

HUGE = 10_000_000  # placements: hours of simulation on this graph for any search
TINY_S = 0.2  # CPU seconds
HANDFUL = 64  # placements a method may evaluate before it first looks at the time (seeds, starts, one batch)

# Methods that build one placement (or a fixed handful) and end by themselves, whatever the budget (the
# only ones allowed to find this graph not theirs).
CONSTRUCTIONS = {"accelerate-auto", "accelerate-balanced", "cpu-only", "dp-split", "expert", "heft", "layer-split",
                 "m-etf", "m-sct", "m-topo", "metis", "mincut", "param-balanced", "published-greedy", "round-robin",
                 "scotch", "single-gpu"}


@pytest.fixture(scope="module")
def problem():
    return Problem(layered_training_graph(150, seed=2), resolve_cluster("k80x4"))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_stops_when_its_time_has_ended(problem, name):
    """Given a time already spent (1 ns of CPU) and a placement budget of hours, every method returns
    at once: a handful of placements (its seeds or starts, one batch), the time named as what ended
    it; one that had evaluated nothing returns the fastest single device's placement."""
    if METHODS[name].available() is not None:
        pytest.skip(METHODS[name].available())
    try:
        r = run_method(name, problem, Budget(HUGE, 1e-9, "cpu"), 0)
    except NotApplicable:
        assert name in CONSTRUCTIONS, f"{name} does not apply to a plain layered graph"
        return
    extra = r.cost.extra
    assert extra["clock"] == "cpu" and extra["stopped_by"] == "seconds", (name, r.notes)
    assert extra["cpu_s"] >= 0 and r.cost.wall_s >= 0
    assert 1 <= r.cost.placements <= HANDFUL, (name, r.cost.placements)
    assert any("1e-09 s CPU-time limit" in n for n in r.notes), r.notes
    if FALLBACK_NOTE in r.notes:
        assert r.cost.placements == 1 and len(set(r.placement.devices.tolist())) == 1


def test_a_search_that_evaluated_nothing_returns_one_device(problem):
    r = run_method("random", problem, Budget(HUGE, 1e-9, "cpu"), 0)
    assert FALLBACK_NOTE in r.notes and r.cost.placements == 1
    assert set(r.placement.devices.tolist()) == {0}  # the K80s tie on compute; the first is taken


def test_a_search_given_time_uses_it_and_says_so(problem):
    r = run_method("local-search", problem, Budget(HUGE, TINY_S, "cpu"), 0)
    assert r.cost.extra["stopped_by"] == "seconds" and r.cost.placements < HUGE


def test_the_placement_budget_ending_first_is_reported(problem):
    r = run_method("local-search", problem, Budget(30, 3600.0), 0)
    assert r.cost.placements == 30 and r.cost.extra["stopped_by"] == "placements" and r.cost.extra["clock"] == "wall"
    assert any("wall-clock limit, not reached" in n for n in r.notes)
    r = run_method("local-search", problem, Budget(30), 0)
    assert r.cost.extra["stopped_by"] == "placements"
    assert not any("limit" in n for n in r.notes)


def test_the_clock_is_checked():
    with pytest.raises(InputError, match="clock=sundial"):
        Budget(10, 1.0, "sundial")
    assert Budget(10, 1.0, "cpu").clock == "cpu" and Budget().clock == "wall"


def test_the_hierarchical_planners_warm_start_ends_with_the_time(problem):
    r = run_method("hierarchical", problem, Budget(HUGE, 1e-9, "cpu"), 0)
    (note,) = [n for n in r.notes if "Grouper warm-started" in n]
    assert "(0 of 1000 steps: the time limit ended it" in note, note
    assert r.cost.extra["stopped_by"] == "seconds"


def test_mars_pretraining_ends_with_the_time(problem):
    pytest.importorskip("torch_geometric")
    r = run_method("mars", problem, Budget(HUGE, 1e-9, "cpu"), 0)
    (note,) = [n for n in r.notes if "DGI" in n]
    assert "1 of 200 steps: the time limit ended it" in note, note  # asked after each step
    assert r.cost.extra["stopped_by"] == "seconds" and r.cost.placements <= HANDFUL


def test_progress_is_told_on_the_budgets_clock(problem):
    seen = []
    run_method("random", problem, Budget(HUGE, TINY_S, "cpu"), 0, on_progress=lambda *a: seen.append(a),
               progress_every=0.0)
    assert len(seen) > 3
    secs = [s[4] for s in seen]
    assert secs == sorted(secs)
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
