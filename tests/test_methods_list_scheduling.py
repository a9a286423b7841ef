"""HEFT, m-ETF, m-SCT and m-TOPO: schedules worked out by hand, memory limits, colocation."""

from __future__ import annotations

import numpy as np
import pytest

from placer.cluster import Device, make_cluster
from placer.graph import OpGraph
from placer.methods import Budget, run_method
from placer.methods.list_scheduling.schedulers import (
    etf_schedule,
    heft_schedule,
    sct_schedule,
    topo_placement,
)
from placer.methods.list_scheduling.favourites import favourite_children
from placer.problem import Problem
from placer.sim import simulate

GiB = 2**30


def cluster(models, bw=1.0, lat=0.0, memory=None):
    mem = memory or [64 * GiB] * len(models)
    return make_cluster("t", [Device(f"gpu:{i}", "gpu", m, mem[i]) for i, m in enumerate(models)], bw, lat)


# Topcuoglu, Hariri, Wu 2002, figure 2: ten tasks on three processors, communication cost on edges.
TOPCUOGLU_COSTS = {  # task: (P1, P2, P3)
    1: (14, 16, 9), 2: (13, 19, 18), 3: (11, 13, 19), 4: (13, 8, 17), 5: (12, 13, 10),
    6: (13, 16, 9), 7: (7, 15, 11), 8: (5, 11, 14), 9: (18, 12, 20), 10: (21, 7, 16),
}
TOPCUOGLU_EDGES = [(1, 2, 18), (1, 3, 12), (1, 4, 9), (1, 5, 11), (1, 6, 14), (2, 8, 19), (2, 9, 16), (3, 7, 23),
                   (4, 8, 27), (4, 9, 23), (5, 9, 13), (6, 8, 15), (7, 10, 17), (8, 10, 11), (9, 10, 13)]


def topcuoglu_problem():
    names = [f"n{k}" for k in range(1, 11)]
    costs = {f"p{j + 1}": [TOPCUOGLU_COSTS[k][j] for k in range(1, 11)] for j in range(3)}
    edges = [(f"n{a}", f"n{b}", float(c)) for a, b, c in TOPCUOGLU_EDGES]  # 1 byte/us: bytes = cost
    g = OpGraph.build(names, edges, compute_us=costs)
    return Problem(g, cluster(["p1", "p2", "p3"]))


def test_heft_reproduces_the_papers_schedule():
    # Upward ranks (mean cost + mean communication, eq. 7): n1 108, n3 80, n4 80, n2 77, n5 69,
    # n6 63.3, n9 44.3, n7 42.7, n8 35.7, n10 14.7 -> order n1 n3 n4 n2 n5 n6 n9 n7 n8 n10.
    # Earliest finish with insertion, worked by hand (P = processor index 0..2):
    #   n1: EFT 14/16/9          -> P3 [0, 9]
    #   n3: ready 21/21/9        -> P1 32, P2 34, P3 9+19=28      -> P3 [9, 28]
    #   n4: ready 18/18/9        -> P1 31, P2 26, P3 28+17=45     -> P2 [18, 26]
    #   n2: ready 27/27/9        -> P1 40, P2 46, P3 28+18=46     -> P1 [27, 40]
    #   n5: ready 20/20/9        -> P1 52 (20+12 > 27, no gap), P2 39, P3 28+10=38 -> P3 [28, 38]
    #   n6: ready 23/23/9        -> P1 53, P2 26+16=42, P3 47     -> P2 [26, 42]
    #   n9: ready 51/56/56       -> P1 69, P2 68, P3 76           -> P2 [56, 68]
    #   n7: ready 51/51/28       -> P1 58, P2 83 (gap 42-56 too short), P3 38+11=49 -> P3 [38, 49]
    #   n8: ready 57/59/59       -> P1 62, P2 79, P3 73           -> P1 [57, 62]
    #   n10: ready 81/73/81      -> P1 102, P2 80, P3 97          -> P2 [73, 80]; makespan 80 as in the paper.
    pr = topcuoglu_problem()
    s = heft_schedule(pr)
    want = {1: (2, 0, 9), 3: (2, 9, 28), 4: (1, 18, 26), 2: (0, 27, 40), 5: (2, 28, 38), 6: (1, 26, 42),
            9: (1, 56, 68), 7: (2, 38, 49), 8: (0, 57, 62), 10: (1, 73, 80)}
    g = pr.graph
    for k, (d, t0, t1) in want.items():
        i = g.index_of(f"n{k}")
        assert (s.placement[i], s.start_us[i], s.finish_us[i]) == (d, t0, t1), f"n{k}"
    assert s.makespan_us == 80
    assert [g.op_names[i] for i in s.order][:2] == ["n1", "n3"]


def etf_problem():
    # a(2) -> b(3) [1 B], a -> c(3) [4 B], b -> d(1) [2 B], c -> d [1 B]; e(2) alone; two equal devices, 1 B/us
    g = OpGraph.build(["a", "b", "c", "d", "e"], [("a", "b", 1.0), ("a", "c", 4.0), ("b", "d", 2.0), ("c", "d", 1.0)],
                      compute_us={"gpu": [2, 3, 3, 1, 2]})
    return Problem(g, cluster(["x", "x"]))


def test_m_etf_schedule_by_hand():
    # static levels (mean cost, no communication): a 6, b 4, c 4, d 1, e 2.
    # step 1: ready a, e; all start at 0; a has the larger level, device 0 first -> a on d0 [0, 2]
    # step 2: ready e (0 on d1), b (2 on d0, 3 on d1), c (2 on d0, 6 on d1) -> e on d1 [0, 2]
    # step 3: b and c both start at 2 on d0, equal levels -> lower index b on d0 [2, 5]
    # step 4: c: d0 max(5, 2) = 5, d1 max(2, 2 + 4) = 6 -> c on d0 [5, 8]
    # step 5: d: d0 max(8, 5, 8) = 8, d1 max(2, 5 + 2, 8 + 1) = 9 -> d on d0 [8, 9]; makespan 9
    pr = etf_problem()
    s = etf_schedule(pr)
    g = pr.graph
    want = {"a": (0, 0, 2), "e": (1, 0, 2), "b": (0, 2, 5), "c": (0, 5, 8), "d": (0, 8, 9)}
    for nm, (d, t0, t1) in want.items():
        i = g.index_of(nm)
        assert (s.placement[i], s.start_us[i], s.finish_us[i]) == (d, t0, t1), nm
    assert [g.op_names[i] for i in s.order] == ["a", "e", "b", "c", "d"]
    # the simulator runs this placement the same way
    r = simulate(pr, s.placement)
    assert r.makespan_us == 9 and np.array_equal(r.start_us, s.start_us)


def test_sct_lp_picks_one_favourite_child_per_op():
    # a fork-join where a -> c is the expensive edge: the LP keeps c with a (x = 0 on that edge)
    g = OpGraph.build(["a", "b", "c", "d"], [("a", "b", 1.0), ("a", "c", 10.0), ("b", "d", 1.0), ("c", "d", 1.0)],
                      compute_us={"gpu": [1, 5, 5, 1]})
    pr = Problem(g, cluster(["x", "x"]))
    c = np.array([1.0, 10.0, 1.0, 1.0])  # edges sorted (a,b), (a,c), (b,d), (c,d)
    fav = favourite_children(pr, np.array([1.0, 5, 5, 1]), c)
    assert fav[g.index_of("a")] == g.index_of("c")
    children = fav[fav >= 0]
    assert len(children) == len(set(children.tolist()))  # at most one favourite parent each
    s = sct_schedule(pr)
    assert s.placement[g.index_of("a")] == s.placement[g.index_of("c")]


def test_critical_path_favourites_follow_the_longest_paths():
    """m-SCT's default favourites: edges taken from the longest path through them down, each op at
    most one favourite child, each op at most one favourite parent."""
    from placer.cluster import preset
    from placer.methods.list_scheduling.favourites import critical_path_favourites
    from placer.zoo.synthetic import layered_training_graph

    # the fork-join above: a -> c (10) is on the longest path (1 + 10 + 5 + 1 + 1 = 18); then c -> d
    # (through 18 too, the transfer 1) goes before b -> d (1 + 1 + 5 + 1 + 1 = 9); b's only child d
    # already has its favourite parent, so b gets none
    g = OpGraph.build(["a", "b", "c", "d"], [("a", "b", 1.0), ("a", "c", 10.0), ("b", "d", 1.0), ("c", "d", 1.0)],
                      compute_us={"gpu": [1, 5, 5, 1]})
    pr = Problem(g, cluster(["x", "x"]))
    fav = critical_path_favourites(pr, np.array([1.0, 5, 5, 1]), np.array([1.0, 10.0, 1.0, 1.0]))
    want = {"a": "c", "b": None, "c": "d", "d": None}
    assert {k: (g.op_names[fav[g.index_of(k)]] if fav[g.index_of(k)] >= 0 else None) for k in want} == want
    pr = Problem(layered_training_graph(300, seed=4), preset("k80x4"))
    rng = np.random.default_rng(0)
    fav = critical_path_favourites(pr, rng.uniform(1, 9, pr.n_ops), rng.uniform(0, 5, pr.graph.n_edges))
    g = pr.graph
    kids = fav[fav >= 0]
    assert len(kids) == len(set(kids.tolist()))  # at most one favourite parent each
    edges = set(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    assert all((i, int(j)) in edges for i, j in enumerate(fav) if j >= 0)  # a favourite is a child
    # maximal: no edge left whose parent has no favourite child and whose child no favourite parent
    taken = set(kids.tolist())
    assert not any(fav[i] < 0 and j not in taken for i, j in edges)


def test_m_sct_favourites_option():
    """m-SCT version 2 picks its favourites by the greedy matching; favourites="lp" is the LP
    form (version 1's placements, pinned below); both keep a favourite child with its parent here."""
    from placer.methods.list_scheduling.schedulers import SctConfig

    assert SctConfig().favourites == "critical-path"
    g = OpGraph.build(["a", "b", "c", "d"], [("a", "b", 1.0), ("a", "c", 10.0), ("b", "d", 1.0), ("c", "d", 1.0)],
                      compute_us={"gpu": [1, 5, 5, 1]})
    pr = Problem(g, cluster(["x", "x"]))
    for fv in ("critical-path", "lp"):
        r = run_method("m-sct", pr, Budget(), 0, favourites=fv)
        assert r.params["favourites"] == fv
        p = r.placement.devices
        assert p[g.index_of("a")] == p[g.index_of("c")], fv


def test_memory_limit_splits_the_model():
    # 8 ops of 3 GiB parameters in a chain on two 16 GiB devices: 24 GiB needs both devices
    n = 8
    g = OpGraph.build([f"o{i}" for i in range(n)], [(i, i + 1, 1e3) for i in range(n - 1)],
                      compute_us={"gpu": [10.0] * n}, param_bytes=[3 * GiB] * n, output_bytes=[1e3] * n)
    pr = Problem(g, cluster(["x", "x"], bw=1e4, memory=[16 * GiB, 16 * GiB]))
    for fn in (heft_schedule, etf_schedule, sct_schedule):
        p = fn(pr).placement
        assert pr.memory_feasible(p), fn.__name__
    assert pr.memory_feasible(topo_placement(pr))
    for name in ("heft", "m-etf", "m-sct", "m-topo"):
        r = run_method(name, pr, Budget(), 0)
        assert not r.sim.oom, name


def test_colocation_and_unrunnable_ops_respected():
    n = 10
    edges = [(i, i + 1, 10.0) for i in range(n - 1)] + [(0, 5, 10.0), (2, 7, 10.0)]
    gpu = [5.0] * n
    gpu[4] = np.inf  # op 4 runs on the CPU only
    coloc = [-1] * n
    coloc[1] = coloc[8] = 3  # ops 1 and 8 share a device
    g = OpGraph.build([f"o{i}" for i in range(n)], edges, compute_us={"gpu": gpu, "cpu": [20.0] * n}, colocation=coloc)
    devs = [Device("gpu:0", "gpu", "g", 8 * GiB), Device("gpu:1", "gpu", "g", 8 * GiB), Device("cpu:0", "cpu", "c", 8 * GiB)]
    pr = Problem(g, make_cluster("t", devs, 100.0, 0.0))
    for name in ("heft", "m-etf", "m-sct", "m-topo"):
        r = run_method(name, pr, Budget(), 0)
        p = r.placement.devices
        assert p[1] == p[8], name
        assert p[4] == 2, name
        pr.validate_placement(p)


@pytest.mark.parametrize("name", ["heft", "m-etf", "m-sct", "m-topo"])
def test_deterministic(name):
    from placer.cluster import preset
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(80, seed=3), preset("k80x4"))
    a = run_method(name, pr, Budget(), 0).placement
    b = run_method(name, pr, Budget(), 1).placement
    assert a == b


def fork_join_problem():
    # s -> a0..a7 -> t on two devices; 5 us compute per branch, 200-byte tensors at 10 B/us (20 us):
    # the branches' results queue on their device's outgoing bus in the simulator
    names = ["s"] + [f"a{i}" for i in range(8)] + ["t"]
    edges = [("s", f"a{i}", 200.0) for i in range(8)] + [(f"a{i}", "t", 200.0) for i in range(8)]
    g = OpGraph.build(names, edges, compute_us={"gpu": [1.0] + [5.0] * 8 + [1.0]})
    return Problem(g, cluster(["x", "x"], bw=10.0))


@pytest.mark.parametrize("fn", [heft_schedule, etf_schedule, sct_schedule])
def test_schedule_under_the_simulators_communication(fn):
    """With comm="sim" a tensor waits for its device's outgoing bus, as in the simulator, so the
    schedule's step time is the simulated one; the papers' contention-free model underestimates it."""
    pr = fork_join_problem()
    s = fn(pr, comm="sim")
    r = simulate(pr, s.placement)
    assert len(set(s.placement.tolist())) == 2  # the branches are split, so transfers matter
    assert s.makespan_us == pytest.approx(r.makespan_us)
    free = fn(pr, comm="free")
    assert free.makespan_us < simulate(pr, free.placement).makespan_us


def test_registered_list_schedulers_default_to_the_simulators_model():
    pr = fork_join_problem()
    for name in ("heft", "m-etf", "m-sct"):
        r = run_method(name, pr, Budget(), 0)
        assert r.params["comm"] == "sim"
        assert r.cost.extra["model_makespan_us"] == pytest.approx(r.sim.makespan_us), name


def test_pipedream_resnet50_fits_memory(shared_graphs):
    """ResNet-50 (PipeDream profile) on two K80s: the memory-aware list schedulers return a
    placement the simulator finds within memory (they overflowed under the contention-free model)."""
    from placer.cluster import preset
    from placer.resolve import resolve_graph

    pr = Problem(resolve_graph(str(shared_graphs / "pipedream" / "resnet50.txt")), preset("k80x2"))
    for name in ("heft", "m-etf", "m-sct"):
        r = run_method(name, pr, Budget(), 0)
        assert not r.sim.oom, (name, r.notes)


def _pinned_cases():
    import json
    import sys
    from pathlib import Path

    here = Path(__file__).parent / "fixtures"
    sys.path.insert(0, str(here))
    try:
        import list_sched_cases
    finally:
        sys.path.remove(str(here))
    rows = json.loads(list_sched_cases.FIXTURE.read_text())["cases"]
    return list_sched_cases, rows


def test_placements_pinned_from_the_old_schedulers():
    """The list schedulers give the placements (and model step times) the code before their
    rewrite for speed gave, on 124 problems: layered graphs of 40-160 ops on k80x2,
    k80x4 and v100x8, GPU memory as preset, tight and too small, both memory and comm models, the
    default, Placeto's and a p2p simulator's settings, GPUs only or all devices; and 16 of 400 and
    700 ops on v100x8 (links of two speeds) with tight or too little memory."""
    mod, rows = _pinned_cases()
    assert len(rows) == len(mod.cases()) == 124
    for row, case in zip(rows, mod.cases()):
        assert {k: row[k] for k in case} == case
        got = mod.schedules(case)
        for name in mod.METHODS:
            p, ms = got[name]
            assert mod.encode(p) == row[name], (name, case)
            if ms is not None:
                assert round(ms, 3) == pytest.approx(row[name + " us"], abs=2e-3), (name, case)


def _earliest_slot_scan(slots, ready, dur):
    """The step-by-step scan the list schedulers used before Slots (reference)."""
    import bisect

    k = bisect.bisect_right(slots, (ready, np.inf))
    t = ready if k == 0 else max(ready, slots[k - 1][1])
    while k < len(slots):
        if t + dur <= slots[k][0]:
            return t
        t = max(t, slots[k][1])
        k += 1
    return t


def test_slots_find_the_gap_the_step_by_step_scan_finds():
    """Slots (blocks of busy intervals, whole blocks skipped by their largest gap) answers every
    earliest-gap query as the linear scan does, zero-length intervals and gaps included."""
    import bisect

    from placer.methods.list_scheduling.state import BLOCK, Slots

    rng = np.random.default_rng(0)
    for trial in range(4):
        slots, ref = Slots(), []
        for step in range(6 * BLOCK):
            dur = float(rng.choice([0.0, 0.5, 1.0, 3.0, rng.uniform(0, 8)]))
            ready = float(np.round(rng.uniform(0, 4 * step + 10), 1 if trial % 2 else 3))
            t = _earliest_slot_scan(ref, ready, dur)
            assert slots.earliest(ready, dur) == t
            for q in rng.uniform(0, 4 * step + 10, 4).tolist() + [0.0, ready, t]:
                for qd in (0.0, 0.25, dur, 2.0, 7.5):
                    assert slots.earliest(q, qd) == _earliest_slot_scan(ref, q, qd)
            slots.insert((t, t + dur))
            bisect.insort(ref, (t, t + dur))
        assert [iv for b in slots.blocks for iv in b] == ref
