"""Per-op device restrictions (a ``null`` cost: the op cannot run on that device; issue 62): the
Problem's mask, the shared repair, and the methods that build contiguous splits, which place only
where an op can run or say in one line which op and devices stop them. (Every registered method on
restricted heterogeneous instances: tests/test_method_contract.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.graph import OpGraph
from placer.methods import Budget, run_method
from placer.methods.base import NotApplicable
from placer.methods.devices import allowed_placement, group_allowed, only_on
from placer.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from restricted import restricted_problem  # noqa: E402

INF = float("inf")


def chain_problem(allowed: list[list[int]], memory: float = 64e9, coloc=None, cpu: bool = True) -> Problem:
    """A chain of ops on gpu:0, gpu:1 and (``cpu``) cpu:0, one cost key per device, op i allowed on the
    devices ``allowed[i]`` (100 us on a GPU, 300 us on the CPU), 1 MB of parameters and output per op."""
    n = len(allowed)
    names = [f"op{i}" for i in range(n)]
    keys = ("g0", "g1", "c")[:3 if cpu else 2]
    costs = {m: [(300.0 if m == "c" else 100.0) if d in allowed[i] else INF for i in range(n)]
             for d, m in enumerate(keys)}
    g = OpGraph.build(names, [(names[i], names[i + 1], 1e6) for i in range(n - 1)], name="chain",
                      compute_us=costs, output_bytes=[1e6] * n, param_bytes=[1e6] * n, colocation=coloc)
    devs = [Device("gpu:0", "gpu", "g0", memory), Device("gpu:1", "gpu", "g1", memory),
            Device("cpu:0", "cpu", "c", 64e9)][:len(keys)]
    return Problem(g, make_cluster("trio", devs, 1000.0, 5.0))


# ---------------------------------------------------------------------- the mask and the repair
def test_allowed_mask_is_the_finite_costs_read_only():
    pr = restricted_problem(1)
    assert pr.allowed.shape == (pr.n_ops, pr.n_devices) and pr.allowed.dtype == bool
    assert np.array_equal(pr.allowed, np.isfinite(pr.compute_us)) and pr.restricted
    assert not pr.allowed.flags.writeable
    free = chain_problem([[0, 1, 2]] * 3)
    assert free.allowed.all() and not free.restricted


def test_allowed_placement_moves_ops_and_groups_to_devices_they_can_run_on():
    # op0 only on gpu:1; op1 and op2 a colocation group that only gpu:0 can take together
    pr = chain_problem([[1], [0, 1], [0, 2]], coloc=[-1, 5, 5])
    assert np.array_equal(allowed_placement(pr, [1, 0, 0]), [1, 0, 0])  # valid: unchanged
    assert np.array_equal(allowed_placement(pr, [2, 1, 2]), [1, 0, 0])  # op0 to its fastest; the group to gpu:0
    assert np.array_equal(group_allowed(pr), [[0, 1, 0], [1, 0, 0], [1, 0, 0]])
    rng = np.random.default_rng(0)
    big = restricted_problem(2)
    for _ in range(50):
        pr_p = allowed_placement(big, rng.integers(0, big.n_devices, big.n_ops))
        big.validate_placement(pr_p)  # every op where it can run, colocation kept
    assert only_on(pr, 2) == "op 'op2' can run only on gpu:0, cpu:0"


def test_mirror_units_join_a_backward_op_only_where_they_share_a_device():
    from placer.grouping.mirrors import mirror_chunks, mirror_units

    pr = restricted_problem(1)
    for lab in (mirror_units(pr), mirror_chunks(pr, pr.fastest_us, 3)):
        ok = np.ones((lab.max() + 1, pr.n_devices), dtype=bool)
        np.logical_and.at(ok, lab, pr.allowed)
        assert ok.any(axis=1).all()
    g = pr.graph  # some forward/backward pair of this instance shares no device, and stays apart
    apart = [i for i in np.flatnonzero(g.mirror >= 0) if not (pr.allowed[i] & pr.allowed[g.mirror[i]]).any()]
    assert apart and all(mirror_units(pr)[i] != mirror_units(pr)[g.mirror[i]] for i in apart)
    # unrestricted: every backward op with its forward op, as TensorFlow colocates gradients
    free = Problem(g.replace(compute_us={k: np.where(np.isfinite(v), v, 1.0) for k, v in g.compute_us.items()}),
                   pr.cluster)
    u = mirror_units(free)
    assert all(u[i] == u[g.mirror[i]] for i in np.flatnonzero(g.mirror >= 0))


# ---------------------------------------------------------------------- contiguous splits
def test_dp_split_names_the_op_and_devices_when_restrictions_leave_no_split():
    """gpu:0 would need two intervals of the chain (op0 and op2): no contiguous split exists, whatever the
    memory (here unlimited); the message says so, not that memory is short."""
    pr = chain_problem([[0], [1], [0]])
    with pytest.raises(NotApplicable) as e:
        run_method("dp-split", pr, Budget(placements=8))
    msg = str(e.value)
    assert "\n" not in msg and "memory" not in msg.replace("whatever the memory", "")
    assert "op 'op2' can run only on gpu:0" in msg and "contiguous split" in msg


def test_dp_split_still_blames_memory_when_memory_is_the_cause():
    pr = chain_problem([[0, 1]] * 5, memory=2.5e6, cpu=False)  # 5 MB of parameters, two GPUs holding 2 MB each
    with pytest.raises(NotApplicable, match="no interval split fits the devices' memory"):
        run_method("dp-split", pr, Budget(placements=8))


def test_dp_split_places_only_where_ops_can_run():
    pr = chain_problem([[1], [1], [0, 1], [0]])  # a split exists: gpu:1 then gpu:0 (devices in index order fail)
    r = run_method("dp-split", pr, Budget(placements=8))
    pr.validate_placement(r.placement.devices)


def test_published_greedy_respects_restrictions():
    """The published greedy fills the first accelerator first: with op0 and op1 only on gpu:1 it put them
    on gpu:0 (a placement that cannot run); now they open gpu:1, the rest follows where it can run."""
    from placer.objectives.units import greedy_fill
    from placer.methods.dp_split import _ThroughputOrder

    pr = chain_problem([[1], [1, 2], [0, 1], [0, 1, 2]])
    old = greedy_fill(pr, _ThroughputOrder())
    assert not pr.allowed[np.arange(pr.n_ops), old].all()  # what the issue found
    r = run_method("published-greedy", pr, Budget(placements=2))
    pr.validate_placement(r.placement.devices)
    assert list(r.placement.devices) == [1, 1, 1, 1]
    # and where no device is left for an op, one line naming it
    stuck = chain_problem([[0], [1], [0]])
    with pytest.raises(NotApplicable) as e:
        run_method("published-greedy", stuck, Budget(placements=2))
    assert "\n" not in str(e.value) and "op 'op2' can run only on gpu:0" in str(e.value)
    # unrestricted: the published split as it was
    free = chain_problem([[0, 1, 2]] * 4)
    r = run_method("published-greedy", free, Budget(placements=2))
    assert np.array_equal(r.placement.devices, greedy_fill(free, _ThroughputOrder()))


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_interval_search_starts_from_a_split_the_restrictions_allow(objective):
    """Under a published objective local search moves interval splits; its published starts put op0 on
    gpu:0, which cannot run it: it starts from a split made for the restrictions instead."""
    pr = chain_problem([[1], [1, 2], [0, 1], [0, 1, 2]])
    r = run_method("local-search", pr, Budget(placements=12), objective=objective)
    pr.validate_placement(r.placement.devices)
    stuck = chain_problem([[0], [1], [0]])
    with pytest.raises(NotApplicable) as e:
        run_method("exact-published", stuck, Budget(placements=12))
    assert "\n" not in str(e.value) and "op 'op2' can run only on gpu:0" in str(e.value)


def test_layer_split_splits_a_unit_whose_ops_share_no_device():
    pr = restricted_problem(1)  # some forward op and its backward op share no device
    r = run_method("layer-split", pr, Budget(placements=12))
    pr.validate_placement(r.placement.devices)


def test_groupings_never_join_ops_that_share_no_device():
    """Every grouping's placement units (groups with their colocation ties) keep a device all their ops
    can run on: a tied family's devices narrow as its groups absorb ops (Placeto's metis:64 units on a
    90-op restricted graph had a unit no device could run)."""
    from placer.grouping import colocate, merge_and_colocate, metis_groups

    pr = restricted_problem(0, n_ops=90)
    for gr in (metis_groups(pr, 64, seed=0), metis_groups(pr, 64, seed=0, mirrors=True),
               merge_and_colocate(pr, 16), colocate(pr, mirrors=True)):
        for G in (gr, gr.units(pr.graph)):
            ok = np.ones((G.n_groups, pr.n_devices), dtype=bool)
            np.logical_and.at(ok, G.op_group, pr.allowed)
            assert ok.any(axis=1).all(), gr.method
