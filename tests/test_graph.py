"""OpGraph construction, validation and the Problem's lower bounds on hand-built graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from placer.cluster import Device, make_cluster, preset
from placer.errors import InputError
from placer.graph import BACKWARD, OpGraph
from placer.problem import Problem


def diamond(**kw):
    # a -> b, a -> c, b -> d, c -> d ; given out of order on purpose
    return OpGraph.build(["d", "b", "a", "c"], [("a", "b", 10), ("a", "c", 20), ("b", "d", 30), ("c", "d", 40)],
                         compute_us={"gpu": [4.0, 2.0, 1.0, 3.0], "cpu": [40.0, 20.0, 10.0, 30.0]}, **kw)


def two_gpus(mem=1e9):
    devs = [Device("g0", "gpu", "gpu", mem), Device("g1", "gpu", "gpu", mem)]
    return make_cluster("two", devs, 100.0, 1.0)


def test_build_sorts_topologically_and_keeps_fields():
    g = diamond(param_bytes=[1, 2, 3, 4])
    assert g.op_names == ("a", "b", "c", "d")
    assert g.compute_us["gpu"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert g.param_bytes.tolist() == [3, 2, 4, 1]
    assert list(zip(g.edge_src.tolist(), g.edge_dst.tolist())) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert g.successors(0).tolist() == [1, 2] and g.predecessors(3).tolist() == [1, 2]
    assert g.edge_bytes.tolist() == [10, 20, 30, 40]


def test_graph_is_immutable():
    g = diamond()
    with pytest.raises(ValueError):
        g.compute_us["gpu"][0] = 5.0
    with pytest.raises(ValueError):
        g.edge_src[0] = 3
    with pytest.raises(AttributeError):
        g.name = "x"


def test_parallel_edges_merge_and_mirror_is_remapped():
    g = OpGraph.build(["y", "x"], [("x", "y", 1), ("x", "y", 2)], mirror=[1, -1], role=[BACKWARD, 0])
    assert g.n_edges == 1 and g.edge_bytes[0] == 3
    assert g.op_names == ("x", "y") and g.mirror.tolist() == [-1, 0]


@pytest.mark.parametrize("kwargs,edges,msg", [
    ({}, [("a", "b", 1), ("b", "a", 1)], "cycle"),
    ({}, [("a", "zz", 1)], "not an op"),
    ({}, [("a", "a", 1)], "self-loop"),
    ({"compute_us": {"gpu": [1.0, -1.0]}}, [], "invalid value"),
    ({"compute_us": {"gpu": [1.0, float("nan")]}}, [], "invalid value"),
    ({"output_bytes": [1.0, float("inf")]}, [], "invalid value"),
    ({"compute_us": {"gpu": [1.0]}}, [], "entries for 2 ops"),
    ({}, [("a", "b", -5)], "invalid bytes"),
])
def test_bad_graphs_raise_one_clear_error(kwargs, edges, msg):
    with pytest.raises(InputError, match=msg) as e:
        OpGraph.build(["a", "b"], edges, source="g.json", **kwargs)
    assert str(e.value).startswith("g.json: ")


def test_duplicate_names_rejected():
    with pytest.raises(InputError, match="duplicate"):
        OpGraph.build(["a", "a"], [])


def test_lower_bounds_by_hand():
    P = Problem(diamond(), two_gpus())
    # critical path a(1) -> c(3) -> d(4) = 8 ; total work 10 over 2 devices = 5
    assert P.critical_path_us == 8.0
    assert P.load_bound_us == 5.0
    assert P.lower_bound_us == 8.0
    assert P.comm_us(100, 0, 1) == pytest.approx(1.0 + 100 / 100.0)
    assert P.comm_us(100, 1, 1) == 0.0


def test_lower_bound_uses_fastest_device_per_op():
    g = OpGraph.build(["a", "b"], [], compute_us={"gpu": [10.0, float("inf")], "cpu": [20.0, 6.0]})
    devs = [Device("g", "gpu", "gpu", 1e9), Device("c", "cpu", "cpu", 1e9)]
    P = Problem(g, make_cluster("gc", devs, 1.0, 0.0))
    assert P.compute_us.tolist() == [[10.0, 20.0], [float("inf"), 6.0]]
    assert P.critical_path_us == 10.0 and P.load_bound_us == 8.0


def test_op_that_fits_nowhere_and_runs_nowhere():
    g = OpGraph.build(["a"], [], compute_us={"gpu": [1.0]}, param_bytes=[5e9])
    with pytest.raises(InputError, match="fits on no device"):
        Problem(g, two_gpus(mem=1e9))
    g = OpGraph.build(["a"], [], compute_us={"gpu": [float("inf")]})
    with pytest.raises(InputError, match="can run on no device"):
        Problem(g, two_gpus())


def test_validate_placement_errors():
    P = Problem(diamond(colocation=[7, -1, 7, -1]), two_gpus())  # d and a colocated
    assert P.validate_placement([0, 1, 0, 0]).dtype == np.int64
    for bad, msg in [([0, 1, 0], "3 entries for 4 ops"), ([0, 1, 2, 0], "not in cluster"),
                     ([0.5, 0, 0, 0], "not integer"), ([0, 0, 0, 1], "colocation group")]:
        with pytest.raises(InputError, match=msg):
            P.validate_placement(bad, "p.json")


def test_memory_feasibility():
    P = Problem(diamond(param_bytes=[6e8, 0, 6e8, 0]), two_gpus(mem=1e9))
    assert not P.memory_feasible(np.zeros(4, int))
    assert P.memory_feasible(np.array([0, 0, 0, 1]))  # a (index 0) and d (index 3) apart
    assert P.memory_possible


def test_presets_exist_and_unknown_preset_errors():
    for name in ["k80x2", "k80x4", "k80x8", "v100x8", "a100x8", "h100x8", "cpu"]:
        c = preset(name)
        assert c.n_devices >= 1 and (c.memory_bytes > 0).all()
    assert len(preset("k80x4").gpus()) == 4 and len(preset("k80x4").cpus()) == 1
    with pytest.raises(InputError, match="not a known cluster preset"):
        preset("k80x3")


@st.composite
def random_dag(draw):
    n = draw(st.integers(1, 25))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
    edges = [(min(a, b), max(a, b), 1.0) for a, b in edges if a != b]
    perm = draw(st.permutations(range(n)))
    names = [f"op{perm[i]}" for i in range(n)]
    cost = draw(st.lists(st.floats(0, 100), min_size=n, max_size=n))
    return names, [(names[a], names[b], w) for a, b, w in edges], cost


@settings(max_examples=60, deadline=None)
@given(random_dag())
def test_property_topological_order_and_csr(dag):
    names, edges, cost = dag
    g = OpGraph.build(names, edges, compute_us={"gpu": cost})
    assert (g.edge_src < g.edge_dst).all()
    assert sorted(g.op_names) == sorted(names)
    for i in range(g.n_ops):
        assert all(j > i for j in g.successors(i)) and all(j < i for j in g.predecessors(i))
    assert np.diff(g.succ_ptr).sum() == g.n_edges == np.diff(g.pred_ptr).sum()
    # costs follow their op through the reordering
    by_name = dict(zip(names, cost))
    assert [by_name[n] for n in g.op_names] == g.compute_us["gpu"].tolist()
    P = Problem(g, two_gpus())
    assert P.lower_bound_us >= P.critical_path_us >= float(g.compute_us["gpu"].max()) - 1e-9
