"""published-greedy (issue 52): Tarnawski et al.'s greedy visits blocks in their code's order, which
differs from ours: their getTopologicalSort seeds a stack with the start blocks in the iteration order
of a libstdc++ ``std::unordered_map<int, ...>`` keyed by colorClass, and pushes each ready successor in
the order the file lists the edges (the last listed is popped first)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from placer.frontends import load_any_graph
from placer.frontends.dnn_partitioning import cluster_for
from placer.methods import Budget, run_method
from placer.methods.published_greedy import published_order, unordered_map_order
from placer.objectives import make_objective
from placer.objectives.units import blocks_for
from placer.problem import Problem


def test_unordered_map_order_by_hand():
    # 13 buckets: a key into an empty bucket goes to the front of the list
    assert unordered_map_order([5, 3, 7, 9, 2]) == [2, 9, 7, 3, 5]
    # 18 shares bucket 5 with 5; 1's arrival made it bucket 5's node before: 18 goes after 1
    assert unordered_map_order([5, 1, 18, 5]) == [1, 18, 5]
    # the 14th key rehashes to 29 buckets, relinking 12, 11, ..., 0 front to back, then 13 in front
    assert unordered_map_order(range(14)) == [13] + list(range(13))
    # std::hash<int>(-1) is 2**64 - 1, bucket 2 of 13: after 2's bucket head (before-begin)
    assert unordered_map_order([2, -1]) == [-1, 2]


def _doc() -> dict:
    """Two start nodes S1 (id 0, colorClass 5) and S2 (id 1, class 3); S1 -> a (id 2, class 7) and
    S1 -> b (id 3, class 9), listed in that order; a, b and S2 -> c (id 4, class 2)."""
    sizes = {0: 4.0, 1: 2.0, 2: 3.0, 3: 5.0, 4: 6.0}
    cls = {0: 5, 1: 3, 2: 7, 3: 9, 4: 2}
    nodes = [{"id": i, "name": nm, "supportedOnFpga": True, "cpuLatency": 2.0, "fpgaLatency": 1.0,
              "isBackwardNode": False, "colorClass": cls[i], "size": sizes[i]}
             for i, nm in enumerate(["S1", "S2", "a", "b", "c"])]
    edges = [{"sourceId": s, "destId": d, "cost": 0.5, "size": 1000.0} for s, d in [(0, 2), (0, 3), (2, 4), (3, 4), (1, 4)]]
    return {"maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def test_their_split_on_a_small_graph_by_hand(tmp_path):
    """By hand, their code: colorClasses enter the block map in node order 5, 3, 7, 9, 2 (13 buckets,
    each key alone in its bucket), so it iterates 2, 9, 7, 3, 5; the start blocks seed the stack as
    [3, 5] and 5 (S1) is popped first; S1 pushes a then b, so b is popped before a; then S2, then c:
    S1, b, a, S2, c. Filling 10 bytes per accelerator: S1 + b (4 + 5) on the first, a + S2 (3 + 2) on
    the second, c (6) left for the CPU once both are used. Our depth-first order (smallest op first)
    visits a before b and splits S1 + a | b + S2 | c."""
    path = tmp_path / "small.json"
    path.write_text(json.dumps(_doc()))
    g, c = load_any_graph(path), cluster_for(path)
    P = Problem(g, c)
    op = {nm: i for i, nm in enumerate(g.op_names)}
    b = blocks_for(P, make_objective("latency"))
    visit = [g.op_names[int(b.members[k][0])] for k in published_order(P, make_objective("latency"), b)]
    assert visit == ["S1", "b", "a", "S2", "c"]
    acc0, acc1 = [d for d in range(c.n_devices) if c.devices[d].kind == "gpu"]
    cpu = next(d for d in range(c.n_devices) if c.devices[d].kind == "cpu")

    def placed(r):
        return {nm: int(r.placement.devices[op[nm]]) for nm in op}

    theirs = run_method("published-greedy", P, Budget(), 0, objective="latency")
    assert placed(theirs) == {"S1": acc0, "b": acc0, "a": acc1, "S2": acc1, "c": cpu}
    ours = run_method("published-greedy", P, Budget(), 0, objective="latency", order="depth")
    assert placed(ours) == {"S1": acc0, "a": acc0, "b": acc1, "S2": acc1, "c": cpu}
    with pytest.raises(Exception, match="order"):
        run_method("published-greedy", P, Budget(), 0, order="bogus")


def test_listing_order_matters(tmp_path):
    """The same graph with b's edge listed before a's: S1 pushes b then a, so a is visited first."""
    doc = _doc()
    doc["edges"][0], doc["edges"][1] = doc["edges"][1], doc["edges"][0]
    path = tmp_path / "swapped.json"
    path.write_text(json.dumps(doc))
    g = load_any_graph(path)
    P = Problem(g, cluster_for(path))
    b = blocks_for(P, make_objective("latency"))
    visit = [g.op_names[int(b.members[k][0])] for k in published_order(P, make_objective("latency"), b)]
    assert visit == ["S1", "a", "b", "S2", "c"]


def test_published_bert_latency_greedy(shared_graphs):
    """The one number their evaluator gave us: 416.2 ms on the bert_l-3 latency input (64 start nodes)."""
    path = shared_graphs / "dnn-partitioning" / "latency-inputs" / "OperatorGraphs" / "bert_l-3_inference.json"
    r = run_method("published-greedy", Problem(load_any_graph(path), cluster_for(path)), Budget(), 0, objective="latency")
    assert r.objective_us / 1000 == pytest.approx(416.2, abs=0.05)
    assert np.isfinite(r.objective_us)
