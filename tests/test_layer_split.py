"""The layer-wise split (placer.methods.layer_split): hand-computed pieces on a small training chain,
and the method against single GPU."""

from __future__ import annotations

import numpy as np

from placer.cluster import preset
from placer.graph import BACKWARD, FORWARD, OpGraph
from placer.grouping.mirrors import mirror_units
from placer.methods import Budget, run_method
from placer.methods.layer_split import layer_split, split_placement
from placer.problem import Problem
from placer.zoo.synthetic import layered_training_graph


def training_chain() -> Problem:
    """f0 -> f1 -> f2 -> f3 (1 ms each) -> b3 -> b2 -> b1 -> b0 (2 ms each, b_i mirrors f_i), and
    ``acc``, a backward op with no mirror, reading 1 MB from b0 and 10 bytes from b3."""
    names = ["f0", "f1", "f2", "f3", "b3", "b2", "b1", "b0", "acc"]
    edges = [("f0", "f1", 1e3), ("f1", "f2", 1e3), ("f2", "f3", 1e3), ("f3", "b3", 1e3), ("b3", "b2", 1e3),
             ("b2", "b1", 1e3), ("b1", "b0", 1e3), ("b0", "acc", 1e6), ("b3", "acc", 10.0)]
    c = np.array([1, 1, 1, 1, 2, 2, 2, 2, 1], dtype=float) * 1e3
    role = [FORWARD] * 4 + [BACKWARD] * 5
    mirror = [-1, -1, -1, -1, 3, 2, 1, 0, -1]
    g = OpGraph.build(names, edges, name="chain", compute_us={"gpu": c, "cpu": 10 * c}, role=role, mirror=mirror)
    return Problem(g, preset("k80x2"))


def test_backward_ops_follow_their_forward_op_and_the_rest_follow_the_bytes():
    P = training_chain()
    g = P.graph
    units = mirror_units(P)
    idx = {n: i for i, n in enumerate(g.op_names)}
    for f, b in (("f0", "b0"), ("f1", "b1"), ("f2", "b2"), ("f3", "b3")):
        assert units[idx[f]] == units[idx[b]]
    piece = layer_split(P, units, 2)[units]
    # the four units weigh 3 ms each: middles at 1.5, 4.5, 7.5, 10.5 of 12 ms -> pieces 0, 0, 1, 1
    got = {n: int(piece[idx[n]]) for n in g.op_names}
    assert got == {"f0": 0, "b0": 0, "f1": 0, "b1": 0, "f2": 1, "b2": 1, "f3": 1, "b3": 1, "acc": 0}
    p = split_placement(P, [1, 0], units)  # piece 0 on gpu 1
    assert p[idx["f0"]] == 1 and p[idx["f3"]] == 0 and p[idx["acc"]] == 1


def test_the_split_of_one_piece_is_single_device():
    P = training_chain()
    assert set(split_placement(P, [0]).tolist()) == {0}


def test_method_is_no_worse_than_single_gpu_and_pays_one_placement_per_piece_count():
    P = Problem(layered_training_graph(80, seed=3), preset("k80x4"))
    r = run_method("layer-split", P, Budget(), seed=0)
    single = run_method("single-gpu", P, Budget(), seed=0)
    assert r.cost.placements == 4
    assert r.step_time_us <= single.step_time_us * (1 + 1e-12)
    P.validate_placement(r.placement.devices)
