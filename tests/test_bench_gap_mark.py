"""The bench marks an exact-published cell with its proven gap when the solver did not close it."""

from placer.bench.tables import optimality_mark


def test_gap_mark_names_the_largest_proven_gap():
    runs = [{"optimal": False, "gap": 0.3928, "lower_bound_us": 806902.0},
            {"optimal": False, "gap": 0.05, "lower_bound_us": 1.0}]
    assert optimality_mark(runs) == "[gap 39.3%]"
    assert optimality_mark(runs[1:]) == "[gap 5.0%]"


def test_gap_mark_needs_every_run_to_record_a_gap():
    assert optimality_mark([{"optimal": False, "gap": 0.1}, {"optimal": False}]) == ""
    assert optimality_mark([{"optimal": False}]) == ""


def test_closed_gap_is_opt_not_gap():
    assert optimality_mark([{"optimal": True, "gap": 1e-9}]) == "[opt]"
    assert optimality_mark([{"optimal": True, "gap": 0.0}, {"optimal": False, "gap": 0.2}]) == "[opt in 1 of 2 runs]"
