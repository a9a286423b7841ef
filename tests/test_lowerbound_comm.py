"""Heads and tails over an op's nearby ancestors and descendants (placer.lowerbound.fan,
docs/bounds.md "Ancestors on one device"): the communication-bound case, where running parallel
branches on different devices costs transfers. On random multi-level fork-joins under every
communication model no bound exceeds the best step time found by simulating every placement; a
hand-computed two-level fork-join where only the ancestors prove the optimum; interchangeable
devices get their values by symmetry, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.graph import OpGraph
from placer.lowerbound import lower_bound
from placer.lowerbound.fan import ancestors_per_op, symmetric_rep
from placer.lowerbound.relax import Relaxation, heads_tails_fan
from placer.problem import Problem
from placer.sim import SimParams
from tests.lowerbound_instances import MODELS, random_cluster
from tests.test_lowerbound import optimum


def cells_instance(seed: int) -> tuple[Problem, SimParams]:
    """Two or three cells in series, each a fork into 2-3 branches of 1-2 ops and a join, with heavy
    edges, per-device costs, restrictions and op gaps (at most 9 ops: every placement is simulated)."""
    rng = np.random.default_rng(5000 + seed)
    names, edges, nxt = ["o0"], [], 1
    src = 0
    while nxt < 7:
        ends = []
        for _ in range(int(rng.integers(2, 4))):
            prev = src
            for _ in range(int(rng.integers(1, 3))):
                if nxt >= 8:
                    break
                edges.append((prev, nxt, float(rng.uniform(0, 400))))
                names.append(f"o{nxt}")
                prev, nxt = nxt, nxt + 1
            ends.append(prev)
        names.append(f"o{nxt}")
        edges += [(e, nxt, float(rng.uniform(0, 400))) for e in sorted(set(ends))]
        src, nxt = nxt, nxt + 1
    n = nxt
    D = int(rng.integers(2, 4))
    cost = {}
    for d in range(D):
        c = rng.uniform(1, 30, n) * (1 + rng.random())
        c[rng.random(n) < 0.1] = 0.0
        if d > 0:
            c[rng.random(n) < 0.1] = np.inf
        cost[f"m{d}"] = c
    g = OpGraph.build(names, edges, compute_us=cost)
    model = MODELS[seed % len(MODELS)]
    cluster = random_cluster(rng, D, model, f"cells{seed}")
    sp = SimParams(comm_model=model, op_gap_us=float(rng.choice([0.0, 2.0])), bus_gap_us=float(rng.choice([0.0, 1.0])))
    try:
        return Problem(g, cluster), sp
    except Exception:  # an op with no device
        return cells_instance(seed + 10_000)


@pytest.mark.parametrize("seed", range(48))
def test_ancestor_bounds_never_exceed_the_enumerated_optimum(seed):
    P, sp = cells_instance(seed)
    assert P.n_ops <= 9
    best_fit, best_any = optimum(P, sp)
    b = lower_bound(P, sp, seconds=0)
    for c in b.candidates:
        assert c.value_us <= min(best_fit, best_any) * (1 + 1e-9) + 1e-6, (c, best_fit, best_any)


def _two_level(comm: str, D: int = 2) -> tuple[Problem, SimParams]:
    """s -> a1 -> a2 -> t and s -> b1 -> b2 -> t; s, t cost 1 us, the others 10 us; every edge 1000
    bytes over 10 bytes/us: 100 us per transfer."""
    g = OpGraph.build(["s", "a1", "a2", "b1", "b2", "t"],
                      [(0, 1, 1000.0), (1, 2, 1000.0), (2, 5, 1000.0), (0, 3, 1000.0), (3, 4, 1000.0), (4, 5, 1000.0)],
                      compute_us={"gpu": np.array([1.0, 10.0, 10.0, 10.0, 10.0, 1.0])})
    devs = [Device(f"d{d}", "gpu", "k", 1e12) for d in range(D)]
    return Problem(g, make_cluster("c", devs, 10.0, 0.0, meta={"comm_model": comm})), SimParams(comm_model=comm)


@pytest.mark.parametrize("comm", MODELS)
def test_two_level_fork_join_by_hand(comm):
    """Splitting the branches costs two transfers (1 + 10 + 100 + 10 + 100 + 1 at best), so the
    optimum runs everything on one device: 1 + 4 x 10 + 1 = 42. Counting only t's direct inputs
    on t's device proves 1 + 10 + 10 + 10 + 1 = 32 (a2 and b2 each after its own predecessor, which
    the recursion lets share s's device for free); counting every ancestor proves 42."""
    P, sp = _two_level(comm)
    best_fit, _ = optimum(P, sp)
    assert best_fit == pytest.approx(42.0)
    r = Relaxation.of(P, sp)
    g = P.graph
    est_fan, tail_fan = heads_tails_fan(g.pred_ptr, g.pred_idx, g.pred_edge, g.succ_ptr, g.succ_idx, g.succ_edge,
                                        np.asarray(g.edge_bytes, dtype=np.float64), r.dur, r.occ, r.link_latency,
                                        r.link_us_per_byte)
    assert float((est_fan + tail_fan).min(axis=1).max()) == pytest.approx(32.0)
    assert r.path_us == pytest.approx(42.0)
    b = lower_bound(P, sp, seconds=0)
    assert {c.name: c.value_us for c in b.candidates}["critical path"] == pytest.approx(42.0)


def test_interchangeable_devices_share_their_values_exactly():
    """Identical devices with identical links are one representative; a device with its own link is not;
    the heads and tails computed with the shortcut equal those computed device by device."""
    P, sp = _two_level("placeto", D=3)
    r = Relaxation.of(P, sp)
    assert symmetric_rep(r).tolist() == [0, 0, 0]
    devs = [Device(f"d{d}", "gpu", "k", 1e12) for d in range(3)]
    lopsided = make_cluster("c", devs, 10.0, 0.0, pairs={(0, 2): (1.0, 0.0)}, meta={"comm_model": "placeto"})
    r2 = Relaxation.of(Problem(P.graph, lopsided), sp)
    assert symmetric_rep(r2).tolist() == [0, 1, 2]  # swapping any two changes the (0, 2) link
    from placer.lowerbound.fan import edge_delays, heads_tails_anc

    g = P.graph
    eb = np.asarray(g.edge_bytes, dtype=np.float64)
    base = heads_tails_fan(g.pred_ptr, g.pred_idx, g.pred_edge, g.succ_ptr, g.succ_idx, g.succ_edge, eb, r.dur,
                           r.occ, r.link_latency, r.link_us_per_byte)
    args = (g.pred_ptr, g.pred_idx, g.pred_edge, g.succ_ptr, g.succ_idx, g.succ_edge, eb, edge_delays(r), r.dur,
            r.occ, r.link_latency, r.link_us_per_byte, base[0], base[1], 8)
    short = heads_tails_anc(*args, symmetric_rep(r))
    full = heads_tails_anc(*args, np.arange(3, dtype=np.int64))
    assert np.array_equal(short[0], full[0]) and np.array_equal(short[1], full[1])


def test_ancestors_per_op_shrinks_on_large_graphs():
    assert ancestors_per_op(100, 2) == 128
    assert ancestors_per_op(20_771, 2) < 128
    assert ancestors_per_op(10**7, 9) == 16


def test_one_device_split_is_the_minimum_over_every_split():
    """local_or_remote against every one of the 2^k splits into local and remote neighbours (the claim
    that the cheapest-by-remote prefixes suffice), with ops that may not run locally (release inf) and
    ops that may not be remote (remote inf); with a floor, max(floor, value) is unchanged."""
    import itertools

    from placer.lowerbound.fan import local_or_remote

    rng = np.random.default_rng(3)
    for _ in range(400):
        k = int(rng.integers(1, 8))
        rel = np.round(rng.uniform(0, 50, k))
        work = rng.uniform(0, 10, k) * (rng.random(k) < 0.9)
        rem = rng.uniform(0, 100, k)
        rel[rng.random(k) < 0.1] = np.inf
        work[~np.isfinite(rel)] = 0.0
        rem[rng.random(k) < 0.1] = np.inf
        best = np.inf
        for split in itertools.product([False, True], repeat=k):
            R = [u for u in range(k) if split[u]]
            L = [u for u in range(k) if not split[u]]
            theta = max([rem[u] for u in R], default=0.0)
            c = max([0.0] + [rel[u] + sum(work[w] for w in L if rel[w] >= rel[u]) for u in L])
            best = min(best, max(theta, c))
        got = local_or_remote(rel, work, rem, -np.inf)
        assert got == pytest.approx(best, rel=1e-12, abs=1e-12) or got == best
        floor = float(rng.uniform(0, 80))
        assert max(floor, local_or_remote(rel, work, rem, floor)) == pytest.approx(max(floor, best), rel=1e-12)
