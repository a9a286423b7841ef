"""The tables' derived columns (placer.bench.columns) on hand-made aggregated cells."""

from __future__ import annotations

import pytest

from placer.bench import columns as C
from placer.bench.spec import Agg


def test_placements_to_reach_another_columns_result_read_off_the_runs_mean_curve():
    """The generalization table's fine-tuning columns: the first placement count at which the mean of
    the runs' best-so-far curves is no slower than the target column's mean step time ("not reached"
    when it never is); the saving divides the count at which the target's own mean curve reached its
    result by that count."""
    target = Agg(250.0, False, 500, 1000, 1, 2, curves=(((1, 300.0), (400, 260.0)), ((1, 290.0), (600, 240.0))))
    tuned = Agg(240.0, False, 80, 1000, 1, 2, curves=(((1, 300.0), (40, 250.0), (90, 240.0)),
                                                      ((1, 280.0), (60, 249.0))))
    a = {"scratch": target, "tuned": tuned}
    # mean curve: 290 at 1, (250 + 280) / 2 at 40, (250 + 249) / 2 = 249.5 at 60
    assert C.mean_curve(tuned.curves) == [(1, 290.0), (40, 265.0), (60, 249.5), (90, 244.5)]
    assert C.to_reach("tuned", "scratch")(a) == pytest.approx(60.0)
    # the target's mean curve: 295 at 1, 275 at 400, 250 at 600 (its runs' own bests: 400 and 600, mean 500)
    assert C.to_reach("scratch", "scratch")(a) == pytest.approx(600.0)
    assert C.saving_to_reach("tuned", "scratch")(a) == pytest.approx(10.0)  # 600 / 60
    late = Agg(255.0, False, 1, 1000, 1, 1, curves=(((1, 255.0),),))
    assert C.to_reach("late", "scratch")({"scratch": target, "late": late}) == "not reached"
    assert C.saving_to_reach("late", "scratch")({"scratch": target, "late": late}) is None
    assert C.to_reach("tuned", "gone")(a) is None  # no target column: nothing to reach


def test_reduction_with_fewer_placements_reads_each_curve_at_a_fifth_of_the_targets_count():
    """The graded fine-tuning column: each run's best-so-far after a fifth of the target's placements
    to reach its result on its own mean curve (here 600 / 5 = 120), averaged, against the target's
    step time; None when a run had no placement by then or there is no target."""
    target = Agg(250.0, False, 600, 1000, 1, 1, curves=(((1, 300.0), (600, 250.0)),))
    tuned = Agg(240.0, False, 80, 1000, 1, 2, curves=(((1, 300.0), (40, 255.0), (121, 240.0)),
                                                      ((1, 280.0), (120, 245.0))))
    a = {"scratch": target, "tuned": tuned}
    assert C.reduction_with_fewer("tuned", "scratch")(a) == pytest.approx(0.0)  # (255 + 245) / 2 = 250 at 120
    assert C.reduction_with_fewer("tuned", "scratch", k=600)(a) == pytest.approx(-16.0)  # (300 + 280) / 2 at 1
    fast = Agg(200.0, False, 1, 1000, 1, 1, curves=(((1, 200.0),),))
    assert C.reduction_with_fewer("fast", "scratch")({"scratch": target, "fast": fast}) == pytest.approx(20.0)
    late = Agg(240.0, False, 300, 1000, 1, 1, curves=(((300, 240.0),),))
    assert C.reduction_with_fewer("late", "scratch")({"scratch": target, "late": late}) is None
    assert C.reduction_with_fewer("tuned", "gone")(a) is None


def test_runs_that_end_where_the_targets_runs_do_reach_its_mean_result():
    """The generalization table's nmt #2: fine-tuning ends on scratch's placement seed by seed (511.26
    and 506.70 ms, mean 508.98). Its mean curve reaches that mean when both runs are there (30
    placements), though the slower run alone never reaches the mean; a run with no placement yet at a
    count leaves that count out of the mean curve."""
    curves = (((1, 600.0), (30, 511.26)), ((2, 600.0), (10, 506.70)))
    target = Agg(508.98, False, 20.0, 1000, 1, 2, curves=curves)
    tuned = Agg(508.98, False, 20.0, 1000, 1, 2, curves=curves)
    a = {"scratch": target, "tuned": tuned}
    assert C.mean_curve(tuned.curves) == [(2, 600.0), (10, 553.35), (30, 508.98)]
    assert C.to_reach("tuned", "scratch")(a) == pytest.approx(30.0)
    # like for like: the same runs need the same placements, though each run's own best came at 20 on average
    assert C.saving_to_reach("tuned", "scratch")(a) == pytest.approx(1.0)
    assert C.reduction_with_fewer("tuned", "scratch", k=1)(a) == pytest.approx(0.0)
