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

import numpy as np
import pytest

pytest.importorskip("ortools")

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
