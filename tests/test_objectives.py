"""The published objectives (placer.objectives): hand-computed latency, max-load and pipeline values
on small graphs, contiguity and cyclic contraction rejected with a clear message, their greedy on a
real input, and the interface through the Evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.errors import InputError
from placer.graph import BACKWARD, FORWARD, OpGraph
from placer.methods import Budget, run_method
from placer.methods.base import Evaluator
from placer.objectives import make_objective
from placer.problem import Problem

GiB = 2**30
SHARED = Path(__file__).resolve().parents[2] / "shared" / "graphs" / "dnn-partitioning"


def small_problem(edges, gpu, cpu, cost, size=None, cap=GiB, names="abcd"):
    """Ops ``names`` (times in us), 2 accelerators then 1 CPU; ``cost`` = transfer time per op."""
    names = list(names)[: len(gpu)]
    g = OpGraph.build(names, [(a, b, 1.0) for a, b in edges], name="small", compute_us={"gpu": gpu, "cpu": cpu},
                      param_bytes=size or [0.0] * len(names),
                      meta={"out_cost_us": dict(zip(names, cost))})
    devs = [Device("acc:0", "gpu", "accelerator", cap), Device("acc:1", "gpu", "accelerator", cap),
            Device("cpu:0", "cpu", "cpu", 1024 * GiB)]
    return Problem(g, make_cluster("small", devs, 1.0, 0.0))


def place(P, **where):
    p = np.empty(P.n_ops, dtype=np.int64)
    for name, dev in where.items():
        p[P.graph.index_of(name)] = dev
    return p


@pytest.fixture(scope="module")
def diamond():
    # a -> b -> d, a -> c -> d
    return small_problem([("a", "b"), ("b", "d"), ("a", "c"), ("c", "d")],
                         gpu=[1, 2, 3, 4], cpu=[10, 20, 30, 40], cost=[0.5, 0.25, 0.75, 0.0])


def test_latency_contiguous_by_hand(diamond):
    P = diamond
    p = place(P, a=0, b=0, c=2, d=1)
    # piece {a,b}: compute 3 + out a (0.5) + out b (0.25) = 3.75; c on CPU: 3.75 + 30 = 33.75;
    # piece {d}: waits for c (33.75), pays in b + in c (1.0) + compute 4 = 38.75
    assert make_objective("latency").evaluate(P, p) == pytest.approx(38.75)
    assert make_objective("latency").check(P, p) is None


def test_latency_non_contiguous_by_hand(diamond):
    P = diamond
    p = place(P, a=0, d=0, b=2, c=2)  # acc:0 holds {a, d}: the path a -> b -> d leaves and comes back
    lat = make_objective("latency")
    assert lat.evaluate(P, p) == np.inf
    assert "not contiguous" in lat.check(P, p)
    # their evaluator cuts it into pieces {a} (1 + 0.5) and {d}: b, c on CPU end at 21.5 and 31.5;
    # {d} starts at 31.5, pays in b + in c (1.0) and 4: 36.5
    assert make_objective("latency:pieces=any").evaluate(P, p) == pytest.approx(36.5)
    assert make_objective("latency:pieces=2").evaluate(P, p) == pytest.approx(36.5)


def test_cyclic_contraction_rejected_with_a_clear_message():
    # a -> d and c -> b: {a, b} and {c, d} are each contiguous, but each needs the other first
    P = small_problem([("a", "d"), ("c", "b")], gpu=[1, 1, 1, 1], cpu=[5, 5, 5, 5], cost=[1, 0, 1, 0])
    p = place(P, a=0, b=0, c=1, d=1)
    for spec in ("latency", "latency:pieces=any"):
        obj = make_objective(spec)
        assert obj.evaluate(P, p) == np.inf
        why = obj.check(P, p)
        assert "cycle" in why and "atomically" in why
    assert not make_objective("latency").is_valid(P, p)


def test_throughput_by_hand(diamond):
    P = diamond
    thr = make_objective("throughput")
    p = place(P, a=0, b=0, c=2, d=1)
    # acc:0: 3 + a's output out (0.5) + b's out (0.25) = 3.75; acc:1: 4 + in b (0.25) + in c (0.75) = 5;
    # cpu: 30 (CPUs pay no transfers)
    assert thr.loads_us(P, p) == pytest.approx([3.75, 5.0, 30.0])
    assert thr.evaluate(P, p) == pytest.approx(30.0)
    q = place(P, a=0, d=0, b=2, c=2)
    assert thr.evaluate(P, q) == np.inf and "not contiguous" in thr.check(P, q)
    # non-contiguous allowed: acc:0 = 5 + out a (0.5) + in b, c (1.0) = 6.5, cpu = 50
    assert make_objective("throughput:contiguous=false").evaluate(P, q) == pytest.approx(50.0)


def test_memory_rule_is_the_sum_of_sizes():
    P = small_problem([("a", "b"), ("b", "c")], gpu=[1, 1, 1], cpu=[9, 9, 9], cost=[0, 0, 0],
                      size=[40.0, 40.0, 30.0], cap=100.0, names="abc")
    for spec in ("latency", "throughput"):
        obj = make_objective(spec)
        assert np.isfinite(obj.evaluate(P, place(P, a=0, b=0, c=1)))  # 80 <= 100
        b = obj.evaluate_batch(P, place(P, a=0, b=0, c=0)[None, :])  # 110 > 100
        assert b.oom[0] and not b.valid[0] and b.objective_us[0] == np.inf
        assert "memory" in obj.check(P, place(P, a=0, b=0, c=0))


def test_pipeline_by_hand():
    # two layers, forward and backward, 1F1B on two devices (PipeDream section 3)
    names = ["f1", "f2", "b2", "b1"]
    g = OpGraph.build(names, [("f1", "f2", 100.0), ("f2", "b2", 50.0), ("b2", "b1", 100.0), ("f1", "b1", 100.0)],
                      name="pipe", compute_us={"gpu": [3.0, 4.0, 6.0, 5.0]}, param_bytes=[10.0, 20.0, 0.0, 0.0],
                      output_bytes=[100.0, 50.0, 100.0, 0.0], role=[FORWARD, FORWARD, BACKWARD, BACKWARD],
                      mirror=[-1, -1, 1, 0])
    devs = [Device("gpu:0", "gpu", "v100", 1000.0), Device("gpu:1", "gpu", "v100", 1000.0)]
    P = Problem(g, make_cluster("two", devs, 10.0, 1.0))
    pipe = make_objective("pipeline")
    p = np.array([0, 1, 1, 0])[[g.index_of(n) for n in names]]
    p = np.empty(4, dtype=np.int64)
    for n, d in zip(names, [0, 1, 1, 0]):
        p[g.index_of(n)] = d
    # stage 0 = {f1, b1}: 3 + 5 = 8; stage 1 = {f2, b2}: 10; links: 0->1 100 B (1 + 10 us), 1->0 100 B (11 us)
    assert pipe.evaluate(P, p) == pytest.approx(11.0)
    b = pipe.evaluate_batch(P, p[None, :])
    # memory: stage 0 keeps 2 minibatches in flight: 2 x (10 + 100); stage 1 one: 20 + 50
    assert b.peak_memory_bytes[0].tolist() == pytest.approx([220.0, 70.0])
    q = p.copy()
    q[g.index_of("b1")] = 1
    assert pipe.evaluate(P, q) == np.inf and "backward" in pipe.check(P, q)


def test_objective_names_parsed_and_refused():
    assert make_objective("latency:pieces=any").pieces is None
    assert make_objective("throughput:contiguous=false").contiguous is False
    for bad in ("latncy", "latency:pieces=0", "latency:q=2", "throughput:contiguous=maybe", "latency:pieces"):
        with pytest.raises(InputError):
            make_objective(bad)


def test_evaluator_reports_the_objective(diamond):
    P = diamond
    ev = Evaluator(P, limit=5, objective="latency")
    p = place(P, a=0, b=0, c=2, d=1)
    assert ev.evaluate(p) == pytest.approx(38.75)
    assert ev.evaluate_batch(np.stack([p, place(P, a=0, d=0, b=2, c=2)])).valid.tolist() == [True, False]
    r = ev.result("x", p)
    assert r.objective == "latency" and r.objective_us == pytest.approx(38.75)
    assert r.summary()["objective"] == pytest.approx(38.75) and r.sim.makespan_us > 0  # timeline kept
    # a placement the objective rejects is repaired, never returned as it is
    r2 = Evaluator(P, limit=5, objective="latency").result("x", place(P, a=0, d=0, b=2, c=2))
    assert make_objective("latency").is_valid(P, r2.placement.devices) and "repaired" in r2.notes[0]


def _dnnp(rel):
    from placer.frontends.dnn_partitioning import cluster_for, load_dnn_partitioning

    f = SHARED / rel
    if not f.exists():
        pytest.skip(f"{f} is not here")
    return Problem(load_dnn_partitioning(f), cluster_for(f))


def test_their_greedy_on_bert3_latency_is_their_figure():
    """Tarnawski et al.'s latency greedy (Appendix F) on bert_l-3: 416.2 by their evaluator."""
    from placer.objectives.units import blocks_for, greedy_fill, linear_order

    P = _dnnp("latency-inputs/OperatorGraphs/bert_l-3_inference.json")
    lat = make_objective("latency")
    p = greedy_fill(P, lat, linear_order(blocks_for(P, lat), "depth"))
    assert lat.evaluate(P, p) / 1000 == pytest.approx(416.2, abs=0.05)
    r = run_method("local-search", P, Budget(placements=600), 0, objective="latency")
    assert r.value_us <= lat.evaluate(P, p) and lat.is_valid(P, r.placement.devices)


def test_importer_keeps_the_files_semantics():
    P = _dnnp("throughput-inputs/LayerGraphs/gnmt_training.json")
    import json

    doc = json.loads((SHARED / "throughput-inputs/LayerGraphs/gnmt_training.json").read_text())
    sizes = {str(n.get("name", n["id"])): float(n.get("size", 0)) for n in doc["nodes"]}
    assert P.graph.param_bytes.sum() == pytest.approx(sum(sizes.values()))
    assert sum(d.kind == "gpu" for d in P.cluster.devices) == doc["maxFPGAs"]
    costs = P.graph.meta["out_cost_us"]
    e = doc["edges"][0]
    src = next(n for n in doc["nodes"] if n["id"] == e["sourceId"])
    assert costs[str(src.get("name", src["id"]))] == pytest.approx(e["cost"] * 1000)


def test_make_objective_bounds_pieces():
    """Issue 52: latency:pieces=10**30 reached the compiled kernel (an integer too large for it):
    make_objective itself refuses more than 2**31 - 1 pieces, naming the bound."""
    from placer.errors import InputError
    from placer.objectives import MAX_PIECES, make_objective

    assert make_objective(f"latency:pieces={MAX_PIECES}").pieces == MAX_PIECES
    assert make_objective("latency:pieces=any").pieces is None
    for bad in (MAX_PIECES + 1, 10**30, 0):
        with pytest.raises(InputError, match="2,147,483,647"):
            make_objective(f"latency:pieces={bad}")


def test_every_cached_kernel_module_finds_a_writable_cache_first():
    """Issue 52: numba refuses to define a cache=True function it cannot cache; each module that
    defines one calls placer.sim.numba_cache.ensure_writable_cache() before its first one."""
    from pathlib import Path

    import placer

    root = Path(placer.__file__).parent
    for f in sorted(root.rglob("*.py")):
        text = f.read_text()
        first = text.find("@njit(cache=True")
        if first < 0 or f.name == "numba_cache.py":
            continue
        if f.parent.name == "sim" and f.name != "kernel.py":  # placer.sim's __init__ imports sim.kernel (which calls it) first
            continue
        call = text.find("ensure_writable_cache()")
        assert 0 <= call < first, f"{f.relative_to(root)}: ensure_writable_cache() before the first cached kernel"
