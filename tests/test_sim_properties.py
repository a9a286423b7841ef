"""Hypothesis properties of the simulator on random DAGs, op names and placements: the compiled
kernel equals the pure-Python reference (both comm models, ties by index and by name) and the
published simulator's rules, dependencies and device exclusivity hold, the makespan respects the
lower bounds, batch and incremental paths equal full runs."""

from __future__ import annotations

import heapq

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.cluster import Cluster, preset
from placer.graph import OpGraph
from placer.problem import Problem
from placer.sim import Engine, SimParams, evaluate, evaluate_many, simulate, simulate_reference
from placer.sim.memory import intervals_from_transfers, sweep_peaks
from placer.zoo.synthetic import layered_training_graph
from test_sim import cluster

PARAMS = {
    "placeto-nogap": SimParams(),
    "placeto-preset": SimParams.placeto(),
    "p2p-nogap": SimParams(comm_model="p2p"),
    "p2p-gaps-latency": SimParams(comm_model="p2p", op_gap_us=2.5, bus_gap_us=4.0, latency_us=1.5,
                                  bandwidth_bytes_per_us=5000.0),
    "placeto-nogap-name": SimParams(tie_break="name"),
    "p2p-preset-name": SimParams.placeto(comm_model="p2p"),
    "p2p-gaps-latency-name": SimParams(comm_model="p2p", op_gap_us=2.5, bus_gap_us=4.0, latency_us=1.5,
                                       bandwidth_bytes_per_us=5000.0, tie_break="name"),
}
# short names over a small alphabet: prefixes, case and digits make string order differ from the
# topological order (and from any numbering) in most graphs
NAMES = st.text(alphabet="abAB01_", min_size=1, max_size=4)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw, max_ops=24, same_bytes=False):
    """(Problem, placement): a random DAG in topological order with random op names (half the time
    names that sort like the order), integer costs (some zero), output / edge / temp / parameter
    bytes, 1-4 devices and a random placement."""
    n = draw(st.integers(1, max_ops))
    if draw(st.booleans()):
        names = draw(st.lists(NAMES, min_size=n, max_size=n, unique=True))
    else:
        names = [f"op{i:05d}" for i in range(n)]
    D = draw(st.integers(1, 4))
    edges = []
    for v in range(1, n):
        k = draw(st.integers(0, min(3, v)))
        for u in sorted(set(draw(st.lists(st.integers(0, v - 1), min_size=k, max_size=k)))):
            edges.append((u, v))
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=n, max_size=n)  # noqa: E731
    cost = np.array(draw(ints(0, 30)), dtype=float)
    out = np.array(draw(ints(0, 200_000)), dtype=float)
    eb = [out[u] if same_bytes else float(draw(st.integers(0, 200_000))) for u, _ in edges]
    g = OpGraph.build(names, [(names[u], names[v], b) for (u, v), b in zip(edges, eb)],
                      compute_us={"gpu": cost}, output_bytes=out, temp_bytes=np.array(draw(ints(0, 5000)), float),
                      param_bytes=np.array(draw(ints(0, 5000)), float))
    mem = draw(st.sampled_from([1e12, 300_000.0]))
    P = Problem(g, cluster(D, bw=draw(st.sampled_from([7600.0, 2000.0])), memory=mem))
    p = np.array(draw(st.lists(st.integers(0, D - 1), min_size=n, max_size=n)), dtype=np.int64)
    return P, p


def check_against_reference(P, p, prm):
    r = simulate(P, p, prm)
    ref = simulate_reference(P, p, prm)
    assert r.makespan_us == ref["makespan_us"]
    np.testing.assert_array_equal(r.start_us, ref["start_us"])
    np.testing.assert_array_equal(r.end_us, ref["end_us"])
    rows = list(zip(*(r.transfers[k].tolist() for k in ("tensor", "src", "dst", "start_us", "end_us", "bytes"))))
    assert rows == [tuple(x) for x in ref["transfers"]]
    # memory: the kernel's running level against a sort of the reference's intervals
    iv = intervals_from_transfers(P, p, ref["start_us"], ref["end_us"], ref["transfers"])
    peak, peak_t = sweep_peaks(iv, P.n_devices)
    np.testing.assert_array_equal(r.peak_memory_bytes, peak + P.resident_bytes(p))
    np.testing.assert_array_equal(r.peak_time_us, peak_t)
    return r


@SETTINGS
@given(cases(), st.sampled_from(sorted(PARAMS)))
def test_compiled_equals_reference(case, name):
    P, p = case
    check_against_reference(P, p, PARAMS[name])


@SETTINGS
@given(cases(), st.sampled_from(sorted(PARAMS)))
def test_schedule_invariants(case, name):
    P, p = case
    prm = PARAMS[name]
    r = simulate(P, p, prm)
    g = P.graph
    cost = P.compute_us[np.arange(g.n_ops), p]
    assert np.allclose(r.end_us - r.start_us, cost)
    assert r.makespan_us >= P.lower_bound_us - 1e-9 and r.makespan_us >= r.end_us.max()
    t = r.transfers
    arrival = {(a, x): e for a, x, e in zip(t["tensor"].tolist(), t["dst"].tolist(), t["end_us"].tolist())}
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):  # dependencies respected
        assert r.start_us[v] >= r.end_us[u]
        if p[u] != p[v]:
            assert r.start_us[v] >= arrival[(u, p[v])] >= r.end_us[u]
    for d in range(P.n_devices):  # one op at a time, op gap after ops with non-zero cost
        ops = np.flatnonzero(p == d)
        ops = ops[np.lexsort((r.end_us[ops], r.start_us[ops]))]
        gap = np.where(cost[ops[:-1]] > 0, prm.op_gap_us, 0.0)
        assert (r.start_us[ops[1:]] >= r.end_us[ops[:-1]] + gap - 1e-9).all()
    # senders send one tensor at a time (+ bus gap); p2p receivers receive one at a time
    sends = sorted({(s, t0, t1, a) for s, a, t0, t1 in zip(t["src"].tolist(), t["tensor"].tolist(),
                                                           t["start_us"].tolist(), t["end_us"].tolist())})
    for (s1, _, e1, _), (s2, b2, _, _) in zip(sends, sends[1:]):
        if s1 == s2:
            assert b2 >= e1 + prm.bus_gap_us - 1e-9
    if prm.comm_model == "p2p":
        recv = sorted(zip(t["dst"].tolist(), t["start_us"].tolist(), t["end_us"].tolist()))
        for (x1, _, e1), (x2, b2, _) in zip(recv, recv[1:]):
            assert x1 != x2 or b2 >= e1
    assert r.busy_us.sum() == pytest.approx(cost.sum())
    assert r.oom == bool((r.peak_memory_bytes > P.memory_bytes).any())


@SETTINGS
@given(cases(), st.sampled_from(sorted(PARAMS)))
def test_single_device_makespan_is_the_sum_of_costs_and_gaps(case, name):
    P, p = case
    prm = PARAMS[name]
    cost = P.compute_us[:, 0]
    r = simulate(P, np.zeros(P.n_ops, dtype=np.int64), prm)
    assert len(r.transfers["tensor"]) == 0
    assert r.makespan_us == pytest.approx(cost.sum() + prm.op_gap_us * (cost > 0).sum())


def published_makespan(P, p, gap=5.7, bus_gap=25.0, speed=7600.0) -> float:
    """The event rules of the authors' published simulator (aravic/generalizable-device-placement,
    sim/tf_placement_sim), restated: a heap of (time, event name, payload) events, dependency
    events per edge named by (producer, consumer), device and bus queues keyed by (time queued,
    insertion counter), a bus item queued when its producer STARTS with the producer's end time as
    priority (the bus defers it until then), one transfer of the producer's output reaching every
    remote consumer after bytes / speed, and the run time = the largest event time seen."""
    g = P.graph
    n = g.n_ops
    names = list(g.op_names)  # the events compare these names, as the published simulator's do
    dev = [f"/dev:{int(d):03d}" for d in p]
    cost = P.compute_us[np.arange(n), p].tolist()
    children = [g.succ_idx[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist() for i in range(n)]
    waiting = [set(g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]].tolist()) for i in range(n)]
    events, queues, active, counter = [], {}, {}, [0]

    def add(t, kind, q, item):
        counter[0] += 1
        heapq.heappush(queues.setdefault(q, []), ((t, counter[0]), item))
        if not active.get(q):
            active[q] = True
            heapq.heappush(events, (t, kind, q))

    for i in range(n):  # in the graph's order (the reference iterates its graph_def)
        if not waiting[i]:
            add(0.0, "run_dev", dev[i], i)
    last = 0.0
    while events:
        t, kind, x = heapq.heappop(events)
        last = max(last, t)
        if kind in ("run_dev", "run_bus") and not queues[x]:
            active[x] = False
        elif kind == "run_dev":
            _, i = heapq.heappop(queues[x])
            end = t + cost[i]
            heapq.heappush(events, (end + (0.0 if cost[i] == 0 else gap), "run_dev", x))
            remote = [c for c in children[i] if dev[c] != x]
            for c in children[i]:
                if dev[c] == x:
                    heapq.heappush(events, (end, "remove_dependency", (names[i], names[c])))
            if remote:
                add(end, "run_bus", "/bus" + x, (i, float(g.output_bytes[i]) / speed, remote))
        elif kind == "run_bus":
            prio, (i, delay, remote) = heapq.heappop(queues[x])
            if prio[0] > t:
                heapq.heappush(queues[x], (prio, (i, delay, remote)))
                heapq.heappush(events, (prio[0], "run_bus", x))
                continue
            for c in remote:
                heapq.heappush(events, (t + delay, "remove_dependency", (names[i], names[c])))
            heapq.heappush(events, (t + delay + bus_gap, "run_bus", x))
        else:
            u, c = names.index(x[0]), names.index(x[1])
            waiting[c].discard(u)
            if not waiting[c]:
                add(t, "run_dev", dev[c], c)
    return last


@SETTINGS
@given(cases(same_bytes=True))
def test_placeto_preset_matches_the_published_simulator(case):
    P, p = case
    assert simulate(P, p, SimParams.placeto()).makespan_us == published_makespan(P, p)
    assert evaluate_many(P, p[None, :], SimParams.placeto()).makespan_us[0] == published_makespan(P, p)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["placeto", "p2p"]))
def test_ties_by_name_kernel_equals_the_oracle(case, comm):
    """Random names: the compiled kernel against the pure-Python oracle, ties broken by name rank,
    for both comm models; and by index, which ignores the names."""
    P, p = case
    check_against_reference(P, p, SimParams.placeto(comm_model=comm))
    check_against_reference(P, p, SimParams(comm_model=comm, tie_break="name"))
    by_index = SimParams.placeto(comm_model=comm, tie_break="index")
    r = check_against_reference(P, p, by_index)
    g = P.graph
    names = [f"z{i:05d}" for i in range(g.n_ops)]
    edges = [(names[u], names[v], b) for u, v, b in zip(g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist())]
    renamed = OpGraph.build(names, edges, compute_us=dict(g.compute_us), output_bytes=g.output_bytes,
                            temp_bytes=g.temp_bytes, param_bytes=g.param_bytes)
    assert renamed.op_names == tuple(names)  # same order: topological already
    assert simulate(Problem(renamed, P.cluster), p, by_index).makespan_us == r.makespan_us


@SETTINGS
@given(cases(), st.sampled_from(sorted(PARAMS)), st.data())
def test_a_kept_engine_and_batch_equal_full_runs(case, name, data):
    P, p = case
    prm = PARAMS[name]
    e = Engine(P, prm)  # one workspace across moves, as a search uses it
    e.objective(p)
    seen = [p.copy()]
    for _ in range(data.draw(st.integers(1, 8))):
        k = data.draw(st.integers(1, min(3, P.n_ops)))
        ops = data.draw(st.lists(st.integers(0, P.n_ops - 1), min_size=k, max_size=k))
        q = seen[-1].copy()
        q[ops] = data.draw(st.lists(st.integers(0, P.n_devices - 1), min_size=k, max_size=k))
        got = e.objective(q)
        want = simulate(P, q, prm)
        assert got == want.objective_us and e.makespan_us == want.makespan_us and e.oom == want.oom
        np.testing.assert_array_equal(e.peak_memory_bytes, want.peak_memory_bytes)
        seen.append(q)
    b = evaluate_many(P, np.array(seen), prm, n_jobs=2)
    assert b.objective_us.tolist() == [evaluate(P, q, prm) for q in seen]


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_generated_training_graph_against_reference(name):
    g = layered_training_graph(300, seed=3)
    P = Problem(g, preset("k80x4"))
    rng = np.random.default_rng(7)
    gpus = [d for d, dev in enumerate(P.cluster.devices) if dev.kind == "gpu"]
    for p in (rng.choice(gpus, g.n_ops), np.repeat(gpus, -(-g.n_ops // len(gpus)))[:g.n_ops]):
        check_against_reference(P, p, PARAMS[name])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["placeto-nogap", "placeto-preset", "placeto-nogap-name", "gaps-latency"]),
       st.booleans())
def test_objective_path_equals_recorded_run(case, name, skewed):
    """The objective-only placeto loop (prepass, no sender wake-ups, sorted ring; zero-time transfers
    fall back to the general loop) against the recorded run the oracle checks: same makespan, peaks
    and objective, bit for bit, with uniform and per-pair links."""
    P, p = case
    prm = PARAMS.get(name) or SimParams(op_gap_us=2.5, bus_gap_us=4.0, latency_us=1.5, bandwidth_bytes_per_us=5000.0)
    if skewed and P.n_devices > 1:  # per-pair links: the non-uniform transfer-duration branch
        D = P.n_devices
        c = cluster(D, memory=float(P.memory_bytes[0]))
        bw = 2000.0 + 1000.0 * np.add.outer(np.arange(D), 2 * np.arange(D))
        lat = 0.5 * np.abs(np.subtract.outer(np.arange(D), np.arange(D)))
        P = Problem(P.graph, Cluster(c.name, c.devices, bw, lat))
        prm = SimParams(op_gap_us=prm.op_gap_us, bus_gap_us=prm.bus_gap_us, tie_break=prm.tie_break)
    want = simulate(P, p, prm)
    b = evaluate_many(P, p[None, :], prm)
    assert evaluate(P, p, prm) == want.objective_us
    assert b.objective_us[0] == want.objective_us and b.makespan_us[0] == want.makespan_us
    np.testing.assert_array_equal(b.peak_memory_bytes[0], want.peak_memory_bytes)
