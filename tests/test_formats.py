"""File formats: every real graph imports, native JSON round trips bit-for-bit, the schema holds."""

from __future__ import annotations

import gzip
import json

import jsonschema
import numpy as np
import pytest

from conftest import SHARED_GRAPHS, shared_graph_files
from placer.cluster import preset
from placer.errors import InputError
from placer.frontends import load_any_graph
from placer.frontends import native
from placer.frontends.dnn_partitioning import cluster_for, load_expert
from placer.frontends.pipedream import load_pipedream
from placer.graph import BACKWARD, FORWARD
from placer.problem import Problem
from placer.zoo.synthetic import layered_training_graph

SCHEMA = json.loads(native.SCHEMA_PATH.read_text())
FILES = shared_graph_files()


@pytest.mark.skipif(not FILES, reason="no shared graphs")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_shared_graph_imports_and_round_trips(path, tmp_path):
    g = load_any_graph(path)
    assert g.n_ops > 50 and g.n_edges > 50
    assert (g.edge_src < g.edge_dst).all()
    assert all(np.isfinite(v[np.isfinite(v)]).all() and (v >= 0).all() for v in g.compute_us.values())
    doc = native.graph_to_doc(g)
    jsonschema.validate(doc, SCHEMA)
    out1 = tmp_path / "a.json"
    native.save_graph(g, out1)
    g2 = native.load_graph(out1)
    out2 = tmp_path / "b.json"
    native.save_graph(g2, out2)
    assert out1.read_bytes() == out2.read_bytes()
    for k in g.compute_us:
        assert np.array_equal(g.compute_us[k], g2.compute_us[k])
    for f in ("output_bytes", "param_bytes", "colocation", "role", "mirror", "edge_src", "edge_dst", "edge_bytes"):
        assert np.array_equal(getattr(g, f), getattr(g2, f)), f
    # the default cluster (or the file's own) makes a valid Problem with sensible bounds
    c = cluster_for(path) if path.suffix == ".json" else preset("k80x2")
    P = Problem(g, c)
    assert 0 < P.critical_path_us <= P.fastest_us.sum()


@pytest.mark.skipif(not FILES, reason="no shared graphs")
def test_pipedream_training_graph_structure():
    g = load_pipedream(SHARED_GRAPHS / "pipedream" / "inception_v3.txt")
    n = g.n_ops // 2
    assert (g.role == FORWARD).sum() == n and (g.role == BACKWARD).sum() == n
    fwd = g.index_of("fwd/node77")
    bwd = g.index_of("bwd/node77")
    assert g.mirror[bwd] == fwd and fwd in g.predecessors(bwd)
    # node77 -- Conv2d(64, 96, ...) -- forward 1.370 ms, backward 2.930 ms, activation 60211200, params 221184
    assert g.op_types[fwd] == "Conv2d"
    assert g.compute_us["gpu"][fwd] == pytest.approx(1370.0) and g.compute_us["gpu"][bwd] == pytest.approx(2930.0)
    assert g.output_bytes[fwd] == 60211200 and g.param_bytes[fwd] == 221184
    # node77 -> node78 forward, so bwd/node78 -> bwd/node77 carries node77's activation
    e = [k for k in range(g.n_edges) if g.op_names[g.edge_src[k]] == "bwd/node78" and g.op_names[g.edge_dst[k]] == "bwd/node77"]
    assert len(e) == 1 and g.edge_bytes[e[0]] == 60211200


@pytest.mark.skipif(not FILES, reason="no shared graphs")
def test_dnn_partitioning_fields_and_cluster():
    path = SHARED_GRAPHS / "dnn-partitioning" / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_training.json"
    raw = json.loads(path.read_text())
    g = load_any_graph(path)
    node = next(n for n in raw["nodes"] if n["cpuLatency"] > 1)
    i = g.index_of(node["name"])
    assert g.compute_us["cpu"][i] == pytest.approx(node["cpuLatency"] * 1000)
    assert g.compute_us["gpu"][i] == pytest.approx(node["fpgaLatency"] * 1000)
    assert g.param_bytes[i] == node["size"]
    assert g.role[i] == (BACKWARD if node["isBackwardNode"] else FORWARD)
    color = sum(1 for n in raw["nodes"] if "colorClass" in n)
    assert (g.colocation >= 0).sum() == color
    c = cluster_for(path)
    assert [d.kind for d in c.devices] == ["gpu"] * raw["maxFPGAs"] + ["cpu"] * raw["maxCPUs"]
    assert c.devices[0].memory_bytes == raw["maxSizePerFPGA"]
    # edge cost (ms) = size / bandwidth: 1024 bytes cost 0.000476837 ms -> 2147.5 bytes/us
    assert c.bandwidth_bytes_per_us[0, 1] == pytest.approx(1024 / (0.000476837158203125 * 1000))


@pytest.mark.skipif(not FILES, reason="no shared graphs")
@pytest.mark.parametrize("expert,graph", [
    ("gnmt_training_expert.json", "throughput-inputs/LayerGraphs/gnmt_training.json"),
    ("inceptionv3_inference_expert.json", "latency-inputs/LayerGraphs/inceptionv3_inference.json"),
])
def test_expert_splits_load_and_simulate(expert, graph):
    from placer.sim import simulate

    root = SHARED_GRAPHS / "dnn-partitioning"
    g = load_any_graph(root / graph)
    c = cluster_for(root / graph)
    p = load_expert(root / "human-experts" / expert, g, c)
    raw = json.loads((root / "human-experts" / expert).read_text())
    assert len(np.unique(p)) == sum(1 for grp in raw["fpgas"] + raw["cpus"] if grp["nodes"])
    P = Problem(g, c)
    r = simulate(P, p)
    assert r.makespan_us >= P.lower_bound_us - 1e-6


def test_round_trip_of_all_fields_and_gzip(tmp_path):
    g = layered_training_graph(60, seed=3)
    g = g.replace(compute_us={**g.compute_us, "k80": np.where(np.arange(g.n_ops) % 7 == 0, np.inf, 5.0)},
                  colocation=np.where(np.arange(g.n_ops) % 5 == 0, 1, -1), temp_bytes=np.full(g.n_ops, 3.0),
                  modules=tuple(f"layer.{i % 4}" for i in range(g.n_ops)), flops=np.arange(g.n_ops) * 1.5)
    p = tmp_path / "g.json.gz"
    native.save_graph(g, p)
    assert p.read_bytes()[:2] == b"\x1f\x8b"
    text = gzip.decompress(p.read_bytes()).decode()
    g2 = native.load_graph(p)
    assert native.dumps(native.graph_to_doc(g2)) == text
    assert np.array_equal(g.compute_us["k80"], g2.compute_us["k80"])
    assert g2.modules == g.modules and np.array_equal(g2.flops, g.flops)
    assert np.array_equal(g2.mirror, g.mirror) and np.array_equal(g2.temp_bytes, g.temp_bytes)


def test_cluster_and_placement_round_trip(tmp_path):
    for name in ["k80x4", "v100x8"]:
        c = preset(name)
        doc = native.cluster_to_doc(c)
        jsonschema.validate(doc, SCHEMA)
        native.save_cluster(c, tmp_path / "c.json")
        c2 = native.load_cluster(tmp_path / "c.json")
        assert c2.devices == c.devices
        assert np.array_equal(c2.bandwidth_bytes_per_us, c.bandwidth_bytes_per_us)
        assert np.array_equal(c2.latency_us, c.latency_us)
    g = layered_training_graph(40, seed=1)
    c = preset("k80x2")
    p = np.arange(g.n_ops) % 3
    native.save_placement(tmp_path / "p.json", g, c, p, result={"step_time_us": 1.0})
    jsonschema.validate(json.loads((tmp_path / "p.json").read_text()), SCHEMA)
    assert np.array_equal(native.load_placement(tmp_path / "p.json", g, c), p)


@pytest.mark.parametrize("content,msg", [
    (b'{"format": "placer", "version": 1, "kind": "graph", "ops": [{"na', "not valid JSON"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
    (b'{"format": "placer", "version": 7, "kind": "graph"}', "version"),
    (b'{"format": "other"}', "format"),
    (b'[1, 2]', "not a JSON object"),
    (b'{"format": "placer", "version": 1, "kind": "graph", "ops": [{"name": "a", "compute_us": {"gpu": -1}}], "edges": []}',
     "invalid value"),
    (b'{"format": "placer", "version": 1, "kind": "graph", "ops": [{"name": "a"}], "edges": [["a", "b", 1]]}',
     "not an op"),
])
def test_malformed_files_raise_input_error(tmp_path, content, msg):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(InputError, match=msg) as e:
        native.load_graph(p)
    assert str(p) in str(e.value)


def test_placement_file_errors(tmp_path):
    g = layered_training_graph(20, seed=0)
    c = preset("k80x2")
    doc = native.placement_to_doc(g, c, np.zeros(g.n_ops, int))
    doc["placement"][g.op_names[3]] = "gpu:9"
    with pytest.raises(InputError, match="not in cluster"):
        native.placement_from_doc(doc, g, c, "p.json")
    doc["placement"] = [0] * (g.n_ops - 1)
    with pytest.raises(InputError, match="entries for"):
        native.placement_from_doc(doc, g, c, "p.json")


def _dp_doc(n: int, max_fpgas: int = 2) -> dict:
    """A small dnn-partitioning input: a chain of ``n`` nodes with ids 10, 11, ..."""
    nodes = [{"id": 10 + k, "name": f"n{k}", "supportedOnFpga": True, "cpuLatency": 2.0, "fpgaLatency": 1.0,
              "isBackwardNode": False, "size": 10.0} for k in range(n)]
    edges = [{"sourceId": 10 + k, "destId": 11 + k, "cost": 0.01, "size": 100.0} for k in range(n - 1)]
    return {"maxSizePerFPGA": 1e6, "maxFPGAs": max_fpgas, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def test_expert_split_paired_by_content_not_name(tmp_path, monkeypatch):
    """Issue 52: an operator graph sharing its stem with a layer graph got the layer graph's split
    ("op #0: is not assigned by the split"). A split pairs with the graph whose node ids it assigns
    exactly once; the same-named split of another graph is passed over; no match means no expert."""
    monkeypatch.delenv("PLACER_SHARED_GRAPHS", raising=False)
    ops, layers = tmp_path / "latency-inputs" / "OperatorGraphs", tmp_path / "latency-inputs" / "LayerGraphs"
    experts = tmp_path / "human-experts"
    for d in (ops, layers, experts):
        d.mkdir(parents=True)
    (ops / "m.json").write_text(json.dumps(_dp_doc(6)))
    (layers / "m.json").write_text(json.dumps(_dp_doc(3)))
    # named after both, splits the layer graph (ids 10..12) only
    (experts / "m_expert.json").write_text(json.dumps({"fpgas": [{"nodes": [10, 11]}, {"nodes": [12]}], "cpus": [{"nodes": []}]}))
    g_layer = load_any_graph(layers / "m.json")
    assert g_layer.meta["expert_split"] == {"file": "m_expert.json", "accelerators": [[0, 1], [2]], "cpus": [[]]}
    g_op = load_any_graph(ops / "m.json")
    assert "expert_split" not in g_op.meta  # no split of the operator graph: none attached, the graph loads
    from placer.methods import Budget, run_method

    r = run_method("local-search", Problem(g_op, cluster_for(ops / "m.json")), Budget(placements=20), 0)
    assert r.placement.devices.shape == (6,)
    # a split of the operator graph under another name is found by its content
    (experts / "zz_other_name.json").write_text(json.dumps({"fpgas": [{"nodes": [10, 11, 12]}, {"nodes": [13, 14, 15]}]}))
    (experts / "broken.json").write_text("{ not json")
    (experts / "too_many_accelerators.json").write_text(
        json.dumps({"fpgas": [{"nodes": [10, 11]}, {"nodes": [12, 13]}, {"nodes": [14, 15]}]}))
    g_op = load_any_graph(ops / "m.json")
    assert g_op.meta["expert_split"] == {"file": "zz_other_name.json", "accelerators": [[0, 1, 2], [3, 4, 5]], "cpus": []}
    assert load_any_graph(layers / "m.json").meta["expert_split"]["file"] == "m_expert.json"  # the named file first
