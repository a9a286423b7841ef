"""The expert rules: one LSTM layer per GPU with embedding first and softmax/attention last,
CNNs on one GPU, the published dnn-partitioning splits, and a clear refusal otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SHARED_GRAPHS
from placer.cluster import preset
from placer.graph import BACKWARD, FORWARD, OpGraph
from placer.methods import Budget, run_method
from placer.problem import Problem


def nmt_graph(layers: int = 2):
    """A tiny seq2seq training graph: embedding -> encoder layers -> decoder layers (with attention)
    -> softmax, each forward op mirrored by a backward op with the same module path."""
    fwd = [("src_embed", "embedding")]
    fwd += [(f"enc{k}", f"encoder.layers.{k}") for k in range(layers)]
    fwd += [("tgt_embed", "decoder.embedding")]
    fwd += [(f"dec{k}", f"decoder.layers.{k}") for k in range(layers)]
    fwd += [("attn", "decoder.attention"), ("proj", "softmax")]
    names = [n for n, _ in fwd] + [f"grad_{n}" for n, _ in fwd]
    mods = [m for _, m in fwd] * 2
    chain = ["src_embed"] + [f"enc{k}" for k in range(layers)]
    dchain = ["tgt_embed"] + [f"dec{k}" for k in range(layers)] + ["attn", "proj"]
    edges = [(a, b, 1e6) for a, b in zip(chain, chain[1:])] + [(a, b, 1e6) for a, b in zip(dchain, dchain[1:])]
    edges += [(f"enc{layers - 1}", "attn", 1e6), ("proj", "grad_proj", 1e6)]
    fnames = [n for n, _ in fwd]
    for a, b, _ in list(edges):
        if not a.startswith("grad") and not b.startswith("grad"):
            edges.append((f"grad_{b}", f"grad_{a}", 1e6))
    n = len(names)
    role = [FORWARD] * len(fwd) + [BACKWARD] * len(fwd)
    mirror = [-1] * len(fwd) + list(range(len(fwd)))
    return OpGraph.build(names, edges, compute_us={"gpu": [100.0] * n}, op_types=["LSTM" if "layers" in m else "op" for m in mods],
                         modules=mods, role=role, mirror=mirror, param_bytes=[1e6] * n, output_bytes=[1e6] * n), fnames


def test_nmt_layers_one_gpu_each():
    g, _ = nmt_graph(2)
    pr = Problem(g, preset("k80x2"))
    p = run_method("expert", pr, Budget(), 0).placement.devices
    dev = {nm: int(p[g.index_of(nm)]) for nm in g.op_names}
    # depth 0 of both stacks on gpu:0, depth 1 on gpu:1 (GNMT's layer i on GPU i)
    assert dev["enc0"] == dev["dec0"] == 0 and dev["enc1"] == dev["dec1"] == 1
    # embeddings with the first layer, attention and softmax with the last
    assert dev["src_embed"] == dev["tgt_embed"] == 0
    assert dev["attn"] == dev["proj"] == 1
    # backward ops follow the forward op they mirror
    for nm in ("enc0", "enc1", "dec0", "dec1", "attn", "proj", "src_embed"):
        assert dev[f"grad_{nm}"] == dev[nm]


def test_nmt_four_depths_on_four_and_two_gpus():
    g, _ = nmt_graph(4)
    p4 = run_method("expert", Problem(g, preset("k80x4")), Budget(), 0).placement.devices
    p2 = run_method("expert", Problem(g, preset("k80x2")), Budget(), 0).placement.devices
    for k in range(4):
        assert p4[g.index_of(f"enc{k}")] == p4[g.index_of(f"dec{k}")] == k
        assert p2[g.index_of(f"enc{k}")] == k // 2  # consecutive depths share a GPU when GPUs are fewer
    assert p4[g.index_of("proj")] == 3 and p4[g.index_of("src_embed")] == 0


def test_cnn_on_one_gpu_and_no_rule_refused():
    n = 6
    g = OpGraph.build([f"c{i}" for i in range(n)], [(i, i + 1, 1e5) for i in range(n - 1)],
                      op_types=["Conv2d"] * n, compute_us={"gpu": [50.0] * n})
    r = run_method("expert", Problem(g, preset("k80x4")), Budget(), 0)
    assert len(set(r.placement.devices.tolist())) == 1
    g2 = g.replace(op_types=["Linear"] * n)
    with pytest.raises(ValueError, match="no expert rule"):
        run_method("expert", Problem(g2, preset("k80x4")), Budget(), 0)


def test_dnn_partitioning_expert_split(shared_graphs):
    from placer.frontends import load_any_graph
    from placer.frontends.dnn_partitioning import cluster_for, load_expert

    path = shared_graphs / "dnn-partitioning" / "throughput-inputs" / "LayerGraphs" / "gnmt_training.json"
    g = load_any_graph(path)
    c = cluster_for(path)
    r = run_method("expert", Problem(g, c), Budget(), 0)
    want = load_expert(shared_graphs / "dnn-partitioning" / "human-experts" / "gnmt_training_expert.json", g, c)
    assert np.array_equal(r.placement.devices, want)
    with pytest.raises(ValueError, match="does not fit this cluster"):
        run_method("expert", Problem(g, preset("k80x2")), Budget(), 0)


def test_pipedream_gnmt_lstm_types(shared_graphs):
    from placer.frontends import load_any_graph

    g = load_any_graph(shared_graphs / "pipedream" / "gnmt.txt")
    r = run_method("expert", Problem(g, preset("k80x4")), Budget(), 0)
    lstm = [i for i in range(g.n_ops) if "LSTM" in g.op_types[i] and g.role[i] == FORWARD]
    devs = r.placement.devices[lstm]
    assert devs[0] == 0 and devs[-1] == 3 and np.all(np.diff(devs) >= 0)  # layers spread in order
    assert not r.sim.oom


def test_methods_read_no_file_format(shared_graphs):
    """The published split comes with the graph (the importer attaches it to ``meta``); no module
    under placer.methods imports a frontend."""
    import ast
    from pathlib import Path

    import placer.methods as pm
    from placer.frontends import load_any_graph

    for f in Path(pm.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            assert not any(m.startswith("placer.frontends") for m in mods), f.name
    path = shared_graphs / "dnn-partitioning" / "throughput-inputs" / "LayerGraphs" / "gnmt_training.json"
    g = load_any_graph(path)
    split = g.meta["expert_split"]
    assert split["file"] == "gnmt_training_expert.json"
    assert sorted(i for grp in split["accelerators"] + split["cpus"] for i in grp) == list(range(g.n_ops))
