"""Grouping: hand-checked small cases, the acyclicity rule, Merge-and-Colocate (Placeto A.6) by hand,
METIS coarsening, and invariants on random DAGs and the real graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.cluster import Cluster, Device, preset
from placer.frontends import load_any_graph
from placer.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from placer.grouping import (Grouping, check_grouping, colocate, colocation_sets, from_labels, group_graph,
                             group_problem, merge_and_colocate, metis_groups)
from placer.problem import Problem
from placer.sim import simulate
from placer.zoo.synthetic import layered_training_graph

from conftest import shared_graph_files


def chain(out_bytes, name="chain"):
    """a -> b -> c -> ... with op i sending out_bytes[i] to op i+1."""
    n = len(out_bytes)
    names = [chr(ord("a") + i) for i in range(n)]
    edges = [(names[i], names[i + 1], out_bytes[i]) for i in range(n - 1)]
    return OpGraph.build(names, edges, name=name, compute_us={"gpu": np.arange(1.0, n + 1)},
                         output_bytes=out_bytes)


def groups_of(gr: Grouping, g: OpGraph) -> set[frozenset[str]]:
    return {frozenset(g.op_names[i] for i in gr.members(k)) for k in range(gr.n_groups)}


# ----------------------------------------------------------------------------- hand-checked
def test_group_graph_by_hand():
    # a -> b, a -> c (the same tensor of a, 10 bytes), b -> d (5), c -> d (7); group {b, c}
    g = OpGraph.build(["a", "b", "c", "d"], [("a", "b", 10), ("a", "c", 10), ("b", "d", 5), ("c", "d", 7)],
                      compute_us={"gpu": [1, 2, 3, 4], "cpu": [10, 20, np.inf, 40]}, flops=[1, 2, 3, 4],
                      param_bytes=[100, 0, 50, 0], temp_bytes=[0, 8, 8, 0], output_bytes=[10, 5, 7, 1],
                      role=[FORWARD, FORWARD, BACKWARD, BACKWARD])
    gr = from_labels(g, np.array([0, 1, 1, 2]))
    assert gr.n_groups == 3 and gr.op_group.tolist() == [0, 1, 1, 2]
    gg = group_graph(g, gr)
    assert gg.compute_us["gpu"].tolist() == [1, 5, 4]
    assert gg.compute_us["cpu"][[0, 2]].tolist() == [10, 40] and np.isinf(gg.compute_us["cpu"][1])
    assert gg.flops.tolist() == [1, 5, 4]
    assert gg.param_bytes.tolist() == [100, 50, 0] and gg.temp_bytes.tolist() == [0, 16, 0]
    # a's tensor enters {b, c} once; {b, c} sends 5 + 7 to d; d sends nothing
    assert list(zip(gg.edge_src.tolist(), gg.edge_dst.tolist(), gg.edge_bytes.tolist())) == [(0, 1, 10.0), (1, 2, 12.0)]
    assert gg.output_bytes.tolist() == [10, 12, 0]
    assert gg.role.tolist() == [FORWARD, FORWARD, BACKWARD]  # a tie goes to the lower role
    assert Grouping.identity(g).expand(np.array([0, 1, 1, 0])).tolist() == [0, 1, 1, 0]
    assert gr.expand(np.array([3, 4, 5])).tolist() == [3, 4, 4, 5]
    assert gr.restrict(np.array([3, 4, 4, 5])).tolist() == [3, 4, 5]


def test_merge_refused_when_it_closes_a_cycle():
    # a -> b -> c and a -> c: {a, c} would be a cycle through b; the colocation survives as a tie
    g = OpGraph.build(["a", "b", "c"], [("a", "b", 1), ("b", "c", 1), ("a", "c", 1)],
                      compute_us={"gpu": [1, 1, 1]}, colocation=[0, -1, 0])
    gr = colocate(g)
    check_grouping(g, gr)
    assert gr.n_groups == 3
    assert gr.group_colocation.tolist() == [0, -1, 0]
    # with b in the set too it is one group
    g2 = g.replace(colocation=np.array([0, 0, 0]))
    assert colocate(g2).n_groups == 1
    # labels {a, c} and {b}: a and c cannot share a group
    gr3 = from_labels(g, np.array([0, 1, 0]), user=False)
    assert groups_of(gr3, g) == {frozenset("a"), frozenset("b"), frozenset("c")}


def test_merge_moves_descendants_behind_the_merged_group():
    # order a, x, c, b, y, z: merging a and b is legal (x, y do not reach b) but x must then come
    # after {a, b}... it need not, yet the numbering must stay topological either way
    names = ["a", "x", "c", "b", "y", "z"]
    edges = [("a", "x", 1), ("x", "y", 1), ("a", "b", 1), ("c", "b", 1), ("b", "z", 1), ("y", "z", 1), ("c", "x", 1)]
    g = OpGraph.build(names, edges, compute_us={"gpu": np.ones(6)})
    labels = np.array([0 if n in "ab" else i + 1 for i, n in enumerate(g.op_names)])
    gr = from_labels(g, labels)
    check_grouping(g, gr)
    assert frozenset("ab") in groups_of(gr, g) and gr.n_groups == 5


def test_merge_and_colocate_by_hand():
    # chain a(100) -> b(1) -> c(50) -> d (sink, 0): d merges into c first (no successor), the merged
    # node keeps c's cost 50; then b (1) merges into {c, d}; then {b, c, d} (50) into a.
    g = chain([100.0, 1.0, 50.0, 0.0])
    assert groups_of(merge_and_colocate(g, n_groups=3), g) == {frozenset("a"), frozenset("b"), frozenset("cd")}
    assert groups_of(merge_and_colocate(g, n_groups=2), g) == {frozenset("a"), frozenset("bcd")}
    assert groups_of(merge_and_colocate(g, max_cost_bytes=40), g) == {frozenset("a"), frozenset("bcd")}
    assert merge_and_colocate(g, max_cost_bytes=60).n_groups == 1
    assert merge_and_colocate(g, max_cost_bytes=0.5).n_groups == 3  # only d costs less than 0.5
    with pytest.raises(ValueError):
        merge_and_colocate(g)


def test_colocation_rules():
    # w (parameter) -> mm (forward) -> loss -> dmm (backward, mirrors mm) -> upd (update of w)
    names = ["w", "x", "mm", "loss", "dmm", "upd"]
    edges = [("w", "mm", 4), ("x", "mm", 4), ("mm", "loss", 4), ("loss", "dmm", 4), ("x", "dmm", 4),
             ("dmm", "upd", 4), ("w", "upd", 4)]
    g = OpGraph.build(names, edges, op_types=["parameter", "input", "mm", "loss", "mm_grad", "sgd"],
                      compute_us={"gpu": [0, 0, 5, 1, 9, 1]}, param_bytes=[4, 0, 0, 0, 0, 8],
                      role=[FORWARD, FORWARD, FORWARD, FORWARD, BACKWARD, UPDATE], mirror=[-1, -1, -1, -1, 2, -1])
    sets = [frozenset(g.op_names[i] for i in s) for s in colocation_sets(g)]
    assert sets == [frozenset({"w", "mm", "upd"})]
    named = lambda **kw: sorted(sorted(g.op_names[i] for i in s) for s in colocation_sets(g, **kw))
    assert named(parameters=False) == [["upd", "w"]]
    assert named(parameters=False, updates=False, mirrors=True) == [["dmm", "mm"]]
    assert named(parameters=False, mirrors=True) == [["dmm", "mm"], ["upd", "w"]]
    assert named(parameters=False, updates=False) == []
    gr = colocate(g)
    check_grouping(g, gr)
    # {w, mm, upd} is not convex (mm -> loss -> dmm -> upd), so it is two groups tied together
    gw, gm, gu = (gr.op_group[g.index_of(n)] for n in ("w", "mm", "upd"))
    assert gw == gm and gu != gw and gr.group_colocation[gw] == gr.group_colocation[gu] >= 0
    # the grouped Problem forces them onto one device
    P = Problem(g, preset("k80x2"))
    gp = group_problem(P, gr)
    split = np.zeros(gr.n_groups, dtype=np.int64)
    split[gu] = 1
    with pytest.raises(Exception):
        gp.expand(split)


def test_runnable_devices_and_memory_respected():
    # a chain of gpu-only ops then cpu-only ops: no group may mix them
    n = 12
    gpu = np.where(np.arange(n) < 6, 1.0, np.inf)
    cpu = np.where(np.arange(n) < 6, np.inf, 5.0)
    g = OpGraph.build([f"o{i}" for i in range(n)], [(i, i + 1, 10) for i in range(n - 1)],
                      compute_us={"gpu": gpu, "cpu": cpu}, param_bytes=np.full(n, 1e9))
    gr = merge_and_colocate(g, n_groups=1)
    assert gr.n_groups == 2 and set(gr.op_group[:6]) == {0} and set(gr.op_group[6:]) == {1}
    # where every op can also run on the cpu, everything may merge
    assert merge_and_colocate(g.replace(compute_us={"gpu": gpu, "cpu": np.full(n, 5.0)}), n_groups=1).n_groups == 1
    # a device of 3.5 GB: a group holds at most 3 ops of 1 GB parameters (plus its output bytes)
    dev = Device("d0", "gpu", "gpu", 3.5e9, 1.0, 1.0, 0.0)
    cl = Cluster("small", (dev, Device("c0", "cpu", "cpu", 100e9, 1.0, 1.0, 0.0)), np.full((2, 2), 1e3), np.zeros((2, 2)))
    P = Problem(g, cl)
    for gr in (merge_and_colocate(P, n_groups=1), metis_groups(P, 2)):
        gp = group_problem(P, gr)
        on_gpu = np.isfinite(gp.problem.compute_us[:, 0])
        assert (gp.problem.graph.param_bytes[on_gpu] <= 3e9).all()


def test_rule_ties_no_device_can_host_are_dropped():
    # a parameter read by a gpu-only op and a cpu-only op: it can follow only one of them
    g = OpGraph.build(["w", "a", "b"], [("w", "a", 4), ("w", "b", 4)], op_types=["parameter", "mm", "mm"],
                      compute_us={"gpu": [0, 1, np.inf], "cpu": [0, np.inf, 1]}, param_bytes=[4, 0, 0])
    gr = colocate(g)
    check_grouping(g, gr)
    assert gr.meta["untied"] == 1 and gr.n_groups == 2 and (gr.group_colocation == -1).all()
    assert gr.op_group[0] == gr.op_group[1] != gr.op_group[2]


def test_bitmasks_beyond_62_columns():
    from placer.grouping.quotient import _bitmasks

    ok = np.zeros((2, 70), dtype=bool)
    ok[0, [0, 65]] = True
    ok[1, 69] = True
    assert _bitmasks(ok) == [1 + (1 << 65), 1 << 69]
    assert _bitmasks(ok[:, :3]) == [1, 0]


def test_grouped_costs_match_problem_including_roofline():
    # a graph with FLOPs and bytes only: every device is costed by the roofline
    g = layered_training_graph(120, seed=3)
    g = g.replace(compute_us={}, flops=np.linspace(1e6, 1e9, g.n_ops), bytes_accessed=np.full(g.n_ops, 1e6))
    P = Problem(g, preset("k80x2"))
    assert "roofline" in P.cost_sources
    gr = metis_groups(P, 10)
    gp = group_problem(P, gr)
    expect = np.stack([np.bincount(gr.op_group, weights=P.compute_us[:, d], minlength=gr.n_groups)
                       for d in range(P.n_devices)], axis=1)
    np.testing.assert_allclose(gp.problem.compute_us, expect, rtol=1e-12)


# ----------------------------------------------------------------------------- invariants
def check_invariants(g: OpGraph, gr: Grouping, problem: Problem | None = None, rules=None):
    check_grouping(g, gr)
    og = gr.op_group
    assert og.shape == (g.n_ops,) and set(og.tolist()) == set(range(gr.n_groups))
    gg = group_graph(g, gr, problem)
    # acyclic: every edge between groups goes forward in the group numbering
    assert (gg.edge_src < gg.edge_dst).all()
    assert gg.op_names and len(gg.op_names) == gr.n_groups
    for k, v in g.compute_us.items():
        fin = np.isfinite(v)
        np.testing.assert_allclose(gg.compute_us[k][np.isfinite(gg.compute_us[k])].sum(),
                                   np.bincount(og, weights=np.where(fin, v, 0), minlength=gr.n_groups)[
                                       np.isfinite(gg.compute_us[k])].sum())
        infs = np.zeros(gr.n_groups, bool)
        infs[og[~fin]] = True
        assert (np.isinf(gg.compute_us[k]) == infs).all()
    for f in ("flops", "bytes_accessed", "param_bytes", "temp_bytes"):
        np.testing.assert_allclose(getattr(gg, f).sum(), getattr(g, f).sum())
    # bytes crossing groups, counted independently: each (tensor, destination group) once
    tb = np.zeros(g.n_ops)
    np.maximum.at(tb, g.edge_src, g.edge_bytes)
    crossing = {(int(s), int(og[d])) for s, d in zip(g.edge_src, g.edge_dst) if og[s] != og[d]}
    np.testing.assert_allclose(gg.edge_bytes.sum(), sum(tb[s] for s, _ in crossing))
    leaving = {s for s, _ in crossing}
    np.testing.assert_allclose(gg.output_bytes.sum(), sum(tb[s] for s in leaving))
    # colocation: every set is one group or groups tied together
    gc = gr.group_colocation
    for s in colocation_sets(g, **(rules or {})):
        groups = set(og[s].tolist())
        assert len(groups) == 1 or (len({gc[x] for x in groups}) == 1 and gc[next(iter(groups))] >= 0)
    # expand round trip
    rng = np.random.default_rng(0)
    gp = rng.integers(0, 4, gr.n_groups)
    for c in np.unique(gc[gc >= 0]):
        gp[gc == c] = gp[np.flatnonzero(gc == c)[0]]
    op_p = gr.expand(gp)
    assert (op_p == gp[og]).all() and (gr.restrict(op_p) == gp).all()
    for s in colocation_sets(g, **(rules or {})):
        assert len(set(op_p[s].tolist())) == 1
    return gg


@st.composite
def random_dags(draw):
    n = draw(st.integers(2, 40))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    p = draw(st.floats(0.05, 0.5))
    a = np.triu(rng.random((n, n)) < p, 1)
    src, dst = np.nonzero(a)
    edges = [(int(s), int(d), float(rng.integers(0, 100))) for s, d in zip(src, dst)]
    gpu = rng.uniform(0, 10, n)
    cpu = np.where(rng.random(n) < 0.15, np.inf, rng.uniform(0, 50, n))
    coloc = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), -1)
    role = rng.integers(0, 3, n)
    mirror = np.where((role == BACKWARD) & (rng.random(n) < 0.7), rng.integers(0, n, n), -1)
    perm = rng.permutation(n)  # names in shuffled order, so build() must sort them
    g = OpGraph.build([f"op{i}" for i in perm], [(f"op{perm[s]}", f"op{perm[d]}", b) for s, d, b in edges],
                      compute_us={"gpu": gpu, "cpu": cpu}, flops=rng.uniform(0, 1e6, n),
                      param_bytes=rng.integers(0, 1000, n), temp_bytes=rng.integers(0, 100, n),
                      output_bytes=rng.integers(0, 100, n), colocation=coloc, role=role, mirror=mirror)
    return g, seed


@settings(max_examples=60, deadline=None)
@given(random_dags(), st.integers(1, 12), st.booleans())
def test_invariants_on_random_dags(dag, k, mirrors):
    g, seed = dag
    rules = dict(mirrors=mirrors)
    for gr in (colocate(g, **rules), merge_and_colocate(g, n_groups=k, **rules),
               merge_and_colocate(g, max_cost_bytes=50, **rules), metis_groups(g, k, seed=seed % 7, **rules),
               from_labels(g, np.random.default_rng(seed).integers(0, k, g.n_ops), **rules)):
        check_invariants(g, gr, rules=rules)


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 400), st.integers(0, 10**6), st.integers(2, 40))
def test_invariants_on_synthetic_training_graphs(n, seed, k):
    g = layered_training_graph(n, seed=seed)
    P = Problem(g, preset("k80x2"))
    for gr in (merge_and_colocate(P, n_groups=k, mirrors=True), metis_groups(P, k, seed=seed)):
        check_invariants(g, gr, P, rules=dict(mirrors=gr.meta["mirrors"]))
    # Merge-and-Colocate stops at k unless colocation alone left fewer groups
    assert merge_and_colocate(P, n_groups=k).n_groups >= min(k, colocate(P).n_groups)


def test_targets_reached_and_deterministic():
    g = layered_training_graph(600, seed=5)
    P = Problem(g, preset("k80x4"))
    mac = merge_and_colocate(P, n_groups=40)
    assert mac.n_groups == 40
    m1, m2 = metis_groups(P, 30, seed=1), metis_groups(P, 30, seed=1)
    assert m1.n_groups == 30 and (m1.op_group == m2.op_group).all()
    assert (merge_and_colocate(P, n_groups=40).op_group == mac.op_group).all()


def test_coarsening_a_base_grouping_keeps_its_groups():
    g = layered_training_graph(500, seed=4)
    P = Problem(g, preset("k80x2"))
    base = colocate(P, mirrors=True)
    for gr in (merge_and_colocate(P, n_groups=30, base=base), metis_groups(P, 20, base=base)):
        check_invariants(g, gr, P, rules=dict(mirrors=True))
        # every base group lies inside one group
        assert all(len(set(gr.op_group[base.op_group == k].tolist())) == 1 for k in range(base.n_groups))
    with pytest.raises(ValueError):  # a grouping whose group graph has a cycle is refused
        merge_and_colocate(chain([1.0, 1.0, 1.0]), n_groups=1,
                           base=Grouping(np.array([0, 1, 0]), 2, np.array([-1, -1]), "bad"))


def test_single_device_step_time_is_the_same_grouped_or_not():
    g = layered_training_graph(300, seed=2)
    P = Problem(g, preset("k80x2"))
    for gr in (merge_and_colocate(P, n_groups=20), metis_groups(P, 12)):
        gp = group_problem(P, gr)
        on0 = np.zeros(gr.n_groups, dtype=np.int64)
        full = gp.simulate_full(on0).makespan_us
        assert full == pytest.approx(P.compute_us[:, 0].sum(), rel=1e-9)
        assert gp.simulate(on0).makespan_us == pytest.approx(full, rel=1e-9)
        # two devices: both simulations run and stay near each other
        two = np.arange(gr.n_groups) % 2
        assert gp.simulate_full(two).makespan_us > 0 and gp.simulate(two).makespan_us > 0
        assert (gp.expand(two) == two[gr.op_group]).all()
        prob, grouping = gp
        assert prob is gp.problem and grouping is gr


# ----------------------------------------------------------------------------- the real graphs
@pytest.mark.parametrize("path", shared_graph_files(), ids=lambda p: p.name)
def test_invariants_on_real_graphs(path):
    g = load_any_graph(path)
    P = Problem(g, preset("k80x2"))
    base = colocate(P)
    check_invariants(g, base, P)
    for gr in (merge_and_colocate(P, n_groups=max(2, g.n_ops // 8)), metis_groups(P, max(2, g.n_ops // 20))):
        check_invariants(g, gr, P)
        assert gr.n_groups <= max(base.n_groups, max(2, g.n_ops // 8))
        gp = group_problem(P, gr)
        on0 = np.zeros(gr.n_groups, dtype=np.int64)
        assert gp.simulate(on0).makespan_us == pytest.approx(gp.simulate_full(on0).makespan_us, rel=1e-9)
        assert simulate(P, gp.expand(on0)).makespan_us == pytest.approx(P.compute_us[:, 0].sum(), rel=1e-9)
