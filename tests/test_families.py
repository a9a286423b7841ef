"""Generated families (Placeto appendix A.3): seeded specs, the fixed split, the ENAS modules, and
captured graphs that are deterministic per seed and have the ops their architecture implies."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.frontends.native import graph_to_doc
from placer.graph import BACKWARD, FORWARD, UPDATE  # noqa: E402
from placer.grouping import check_grouping, merge_and_colocate, metis_groups  # noqa: E402
from placer.zoo.families import (CONV_OPS, FAMILY_IDS, PAPER, RNN_ACTIVATIONS, family, graph_spec,  # noqa: E402
                                 load_family)

NAMES = list(FAMILY_IDS)


def graph_json(g) -> str:
    """The graph's JSON without wall-clock figures (capture time)."""
    doc = graph_to_doc(g)
    doc["meta"] = {k: v for k, v in doc.get("meta", {}).items() if not k.endswith("_s")}
    return json.dumps(doc, sort_keys=True)


@pytest.fixture(scope="module")
def tiny_graphs():
    """Graph 0 of every family at the tiny scale, captured once (no cache)."""
    return {f: graph_spec(f, 0, seed=7, scale="tiny").graph(cache=False) for f in NAMES}


# ----------------------------------------------------------------------------- specs and split
@pytest.mark.parametrize("name", NAMES)
def test_specs_follow_the_appendix_ranges(name):
    fam = family(name)
    specs = fam.specs
    assert len(specs) == 32 and len(fam.train) == 16 and len(fam.test) == 16
    assert {s.index for s in fam.train}.isdisjoint({s.index for s in fam.test})
    assert [s.index for s in specs] == list(range(32))
    lo, hi = PAPER.batch[name]
    batches = [s.batch for s in specs]
    assert all(lo <= b <= hi for b in batches) and len(set(batches)) > 8
    if name in PAPER.length:
        lo, hi = PAPER.length[name]
        assert all(lo <= s.length <= hi for s in specs) and len({s.length for s in specs}) > 4
    else:
        assert all(s.length is None for s in specs)
    if name != "nmt":  # every graph its own architecture
        assert len({json.dumps(s.arch) for s in specs}) == 32


@pytest.mark.parametrize("name", NAMES)
def test_specs_and_split_are_deterministic_per_seed(name):
    a, b, c = family(name, seed=3), family(name, seed=3), family(name, seed=4)
    assert a == b
    assert [s.to_dict() for s in a.specs] != [s.to_dict() for s in c.specs]
    # graph i depends on (family, seed, i) only
    assert family(name, seed=3, n=5).specs == a.specs[:5]
    assert graph_spec(name, 9, seed=3) == a.specs[9]


def test_split_fraction_and_bad_input():
    assert len(family("ptb", n=10, train_fraction=0.3).train) == 3
    with pytest.raises(Exception):
        family("imagenet")
    with pytest.raises(Exception):
        family("ptb").split("validation")


def test_sampled_architectures_are_valid():
    for i in range(32):
        arch = graph_spec("cifar10", i).arch
        for cell in (arch["normal"], arch["reduce"]):
            assert len(cell) == PAPER.conv_nodes
            for j, (a, op_a, b, op_b) in enumerate(cell, start=2):
                assert 0 <= a < j and 0 <= b < j and op_a in CONV_OPS and op_b in CONV_OPS
        rnn = graph_spec("ptb", i).arch
        assert len(rnn["activations"]) == PAPER.rnn_nodes and set(rnn["activations"]) <= set(RNN_ACTIVATIONS)
        assert rnn["inputs"][0] == -1 and all(0 <= x < j for j, x in enumerate(rnn["inputs"]) if j > 0)


# ----------------------------------------------------------------------------- the modules
@pytest.mark.parametrize("name", NAMES)
def test_modules_run_and_train_on_real_tensors(name):
    torch.manual_seed(0)
    m, inputs = graph_spec(name, 1, scale="tiny").module(device="cpu")
    small = tuple(x[:4] for x in inputs)  # the module works at any batch
    loss = m(*small)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in m.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)


# ----------------------------------------------------------------------------- captured graphs
@pytest.mark.parametrize("name", NAMES)
def test_capture_is_deterministic_per_seed(name, tiny_graphs):
    again = graph_spec(name, 0, seed=7, scale="tiny").graph(cache=False)
    assert graph_json(again) == graph_json(tiny_graphs[name])
    g = tiny_graphs[name]
    assert g.name == f"{name}-s7-00-tiny" and g.meta["family"]["batch"] == graph_spec(name, 0, seed=7, scale="tiny").batch
    assert {FORWARD, BACKWARD, UPDATE} <= set(g.role.tolist())
    assert g.flops.sum() > 0 and "k80" in g.compute_us


def _count(g, op_type, role=FORWARD):
    return int(sum(1 for t, r in zip(g.op_types, g.role) if t == op_type and r == role))


def test_ptb_graph_has_the_cells_ops(tiny_graphs):
    spec = graph_spec("ptb", 0, seed=7, scale="tiny")
    g, acts, steps = tiny_graphs["ptb"], spec.arch["activations"], spec.length
    # per step: one sigmoid gate per node, plus the nodes whose activation is a sigmoid
    assert _count(g, "aten.sigmoid.default") == steps * (len(acts) + acts.count("sigmoid"))
    assert _count(g, "aten.tanh.default") == steps * acts.count("tanh")
    assert _count(g, "aten.relu.default") == steps * acts.count("relu")
    assert _count(g, "aten.sigmoid_backward.default", BACKWARD) == _count(g, "aten.sigmoid.default")
    assert _count(g, "aten.embedding.default") == steps


def test_cifar10_graph_has_the_cells_ops(tiny_graphs):
    spec = graph_spec("cifar10", 0, seed=7, scale="tiny")
    g, normal, reduce = tiny_graphs["cifar10"], spec.arch["normal"], spec.arch["reduce"]
    n_normal, n_reduce = 3 * 1, 2  # tiny: one normal cell per stage, reductions before stages 2 and 3
    ops = lambda cell, name: sum((op_a == name) + (op_b == name) for _, op_a, _, op_b in cell)
    assert _count(g, "aten.max_pool2d_with_indices.default") == n_normal * ops(normal, "max_pool_3x3") + \
        n_reduce * ops(reduce, "max_pool_3x3")
    assert _count(g, "aten.avg_pool2d.default") == n_normal * ops(normal, "avg_pool_3x3") + \
        n_reduce * ops(reduce, "avg_pool_3x3")
    # convolutions: stem; per cell one preprocessing conv per input a node reads (two for input 0
    # after a reduction: factorized reduce), two per separable conv, two per identity on a cell
    # input of a reduction cell (factorized reduce)
    seps = lambda cell: sum(op.startswith("sep_conv") for node in cell for op in (node[1], node[3]))
    reads = lambda cell, k: any(node[0] == k or node[2] == k for node in cell)
    fr = sum((a < 2 and op_a == "identity") + (b < 2 and op_b == "identity") for a, op_a, b, op_b in reduce)
    per_normal = reads(normal, 0) + reads(normal, 1) + 2 * seps(normal)
    per_reduce = reads(reduce, 0) + reads(reduce, 1) + 2 * seps(reduce) + 2 * fr
    convs = 1 + n_normal * per_normal + (n_normal - 1) * reads(normal, 0) + n_reduce * per_reduce
    assert _count(g, "aten.convolution.default") == convs


def test_nmt_graph_is_unrolled(tiny_graphs):
    spec = graph_spec("nmt", 0, seed=7, scale="tiny")
    g = tiny_graphs["nmt"]
    # 2 encoder + 2 decoder LSTM layers, one cell per layer and step: 3 gate sigmoids each
    assert _count(g, "aten.sigmoid.default") == 3 * 4 * spec.length


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACER_CACHE_DIR", str(tmp_path))
    spec = graph_spec("ptb", 2, scale="tiny")
    g1 = spec.graph()
    assert spec.cache_path().exists() and str(spec.cache_path()).startswith(str(tmp_path))
    g2 = spec.graph()
    assert graph_json(g1) == graph_json(g2)
    graphs = load_family("ptb", split="test", n=4, scale="tiny")
    assert [g.name for g in graphs] == [s.name for s in family("ptb", n=4, scale="tiny").test]


def test_family_graphs_group(tiny_graphs):
    from placer.cluster import preset
    from placer.problem import Problem

    for g in tiny_graphs.values():
        P = Problem(g, preset("k80x2"))
        for gr in (merge_and_colocate(P, n_groups=max(2, g.n_ops // 10)), metis_groups(P, 8)):
            check_grouping(g, gr)
            assert gr.n_groups < g.n_ops
