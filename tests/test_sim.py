"""Hand-computed timelines and memory of the simulator (Placeto appendix A.5), both comm models."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from placer.cluster import Cluster, Device, preset
from placer.errors import InputError
from placer.graph import OpGraph
from placer.problem import Problem
from placer.sim import Engine, SimParams, evaluate, evaluate_many, simulate, simulate_reference
from placer.zoo.synthetic import layered_training_graph

NOGAP = SimParams(memory_penalty_us_per_byte=2e-3)
PLACETO = SimParams.placeto()


def cluster(D: int, bw: float = 7600.0, lat: float = 0.0, memory=1e12) -> Cluster:
    mem = np.broadcast_to(np.asarray(memory, dtype=float), (D,))
    devs = tuple(Device(f"g{i}", "gpu", "test", float(mem[i])) for i in range(D))
    return Cluster("test", devs, np.full((D, D), float(bw)), np.full((D, D), float(lat)))


def problem(names, edges, cost, D=2, out=None, temp=None, params=None, **kw) -> Problem:
    """Ops ``names`` (already in topological order), edges (src, dst) or (src, dst, bytes) with
    bytes defaulting to the producer's output bytes."""
    out = np.zeros(len(names)) if out is None else np.asarray(out, dtype=float)
    idx = {nm: i for i, nm in enumerate(names)}
    e3 = [(a, b, (rest[0] if rest else out[idx[a]])) for a, b, *rest in edges]
    g = OpGraph.build(names, e3, compute_us={"gpu": cost}, output_bytes=out, temp_bytes=temp, param_bytes=params)
    assert g.op_names == tuple(names)
    return Problem(g, cluster(D, **kw))


def both(P, p, prm):
    """Simulate with the compiled kernel, check it against the reference, return the result."""
    r = simulate(P, p, prm)
    ref = simulate_reference(P, p, prm)
    assert r.makespan_us == ref["makespan_us"]
    np.testing.assert_array_equal(r.start_us, ref["start_us"])
    np.testing.assert_array_equal(r.end_us, ref["end_us"])
    assert evaluate(P, p, prm) == r.objective_us
    return r


# ---------------------------------------------------------------------------- timelines
def test_chain_on_one_device():
    P = problem(["a", "b", "c"], [("a", "b"), ("b", "c")], [10.0, 20.0, 30.0], out=[8, 8, 8])
    r = both(P, [0, 0, 0], NOGAP)
    assert r.start_us.tolist() == [0, 10, 30] and r.end_us.tolist() == [10, 30, 60]
    assert r.makespan_us == 60 and len(r.transfers["tensor"]) == 0
    assert r.busy_us.tolist() == [60, 0] and r.utilisation.tolist() == [1, 0]
    r = both(P, [0, 0, 0], PLACETO)  # 5.7 us after each op, the last one included
    assert r.start_us == pytest.approx([0, 15.7, 41.4]) and r.end_us == pytest.approx([10, 35.7, 71.4])
    assert r.makespan_us == pytest.approx(77.1)


def test_zero_cost_ops_add_no_gap():
    P = problem(["a", "b", "c"], [("a", "b"), ("b", "c")], [10.0, 0.0, 5.0])
    r = both(P, [0, 0, 0], PLACETO)
    assert r.start_us == pytest.approx([0, 15.7, 15.7]) and r.makespan_us == pytest.approx(15.7 + 5 + 5.7)


def test_fork_across_two_devices():
    # a (d0) feeds b (d0) and c (d1); a's 30400-byte output takes 4 us at 7600 B/us
    P = problem(["a", "b", "c"], [("a", "b"), ("a", "c")], [10.0, 20.0, 30.0], out=[30400, 0, 0])
    r = both(P, [0, 0, 1], NOGAP)
    assert r.start_us.tolist() == [0, 10, 14] and r.makespan_us == 44
    t = r.transfers
    assert (t["tensor"].tolist(), t["src"].tolist(), t["dst"].tolist()) == ([0], [0], [1])
    assert (t["start_us"].tolist(), t["end_us"].tolist()) == ([10], [14])
    r = both(P, [0, 0, 1], PLACETO)  # b waits for d0's 5.7 us gap; c's end + 5.7 is the last event
    assert r.start_us == pytest.approx([0, 15.7, 14]) and r.makespan_us == pytest.approx(49.7)


def test_transfer_queues_behind_another_on_the_bus():
    # a and b both on d0 send to d1; b's tensor is ready at 12 but the bus is busy until 20
    P = problem(["a", "b", "c", "d"], [("a", "c"), ("b", "d")], [10.0, 2.0, 5.0, 5.0], out=[76000, 7600, 0, 0])
    r = both(P, [0, 0, 1, 1], NOGAP)
    t = r.transfers
    assert t["tensor"].tolist() == [0, 1]
    assert t["start_us"].tolist() == [10, 20] and t["end_us"].tolist() == [20, 21]
    assert r.start_us.tolist() == [0, 10, 20, 25]  # d waits for c (one op at a time on d1)
    assert r.makespan_us == 30


def test_placeto_gaps_on_device_and_bus():
    # with the preset: b starts after a's 5.7 us gap; b's tensor waits for the 25 us bus gap after a's
    P = problem(["a", "b", "c", "d"], [("a", "c"), ("b", "d")], [10.0, 10.0, 5.0, 5.0], out=[76000, 7600, 0, 0])
    r = both(P, [0, 0, 1, 1], PLACETO)
    t = r.transfers
    assert t["start_us"] == pytest.approx([10, 45]) and t["end_us"] == pytest.approx([20, 46])
    assert r.start_us == pytest.approx([0, 15.7, 20, 46])
    # the last event is the bus waking 25 us after the second arrival (46 + 25), not d's end + 5.7
    assert r.makespan_us == pytest.approx(71.0)


def test_p2p_sends_once_per_destination_and_serialises_receivers():
    # a (d0) feeds b (d1) and c (d2): placeto sends one tensor to both, p2p one per device
    P = problem(["a", "b", "c"], [("a", "b"), ("a", "c")], [10.0, 1.0, 1.0], D=3, out=[76000, 0, 0])
    r = both(P, [0, 1, 2], NOGAP)
    assert r.start_us.tolist() == [0, 20, 20] and len(r.transfers["tensor"]) == 2
    r = both(P, [0, 1, 2], SimParams(comm_model="p2p"))
    assert r.start_us.tolist() == [0, 20, 30]
    assert r.transfers["dst"].tolist() == [1, 2] and r.transfers["start_us"].tolist() == [10, 20]
    # two senders to one receiver: the lower sender index goes first, the other waits
    P = problem(["a", "b", "c", "d"], [("a", "c"), ("b", "d")], [10.0, 10.0, 1.0, 1.0], D=3, out=[76000, 76000, 0, 0])
    assert both(P, [0, 1, 2, 2], NOGAP).transfers["start_us"].tolist() == [10, 10]
    r = both(P, [0, 1, 2, 2], SimParams(comm_model="p2p"))
    assert r.transfers["src"].tolist() == [0, 1] and r.transfers["start_us"].tolist() == [10, 20]


def test_p2p_sender_skips_a_transfer_to_a_busy_receiver():
    # b (d1) keeps receiver d2 busy 10..110; a1's tensor for d2 waits, a2's for d1 goes first
    P = problem(["b", "a1", "a2", "z", "c2", "c1"], [("b", "z"), ("a1", "c2"), ("a2", "c1")],
                [10.0, 20.0, 1.0, 1.0, 1.0, 1.0], D=3, out=[760000, 7600, 7600, 0, 0, 0])
    r = both(P, [1, 0, 0, 2, 2, 1], SimParams(comm_model="p2p"))
    rows = list(zip(r.transfers["tensor"].tolist(), r.transfers["dst"].tolist(), r.transfers["start_us"].tolist(),
                    r.transfers["end_us"].tolist()))
    assert rows == [(0, 2, 10.0, 110.0), (2, 1, 21.0, 22.0), (1, 2, 110.0, 111.0)]


def test_placeto_preset_breaks_ties_by_op_name():
    # the issue-18 reproducer: r releases b and a at t=1; the reference queues a before b (name
    # order), so a's tensor leaves early and c (on d1) overlaps b
    def make(names):
        r, b, a, c = names
        return problem(names, [(r, b), (r, a), (a, c)], [1.0, 100.0, 1.0, 100.0], out=[7600.0] * 4)

    P = make(["r", "b", "a", "c"])
    r = both(P, [0, 0, 0, 1], PLACETO)
    assert r.makespan_us == pytest.approx(119.1)
    assert r.start_us == pytest.approx([0, 13.4, 6.7, 8.7])
    assert simulate_reference(P, [0, 0, 0, 1], PLACETO)["makespan_us"] == r.makespan_us
    # renamed so that names sort like the topological order: b first, as the reference does too
    assert both(make(["n0", "n1", "n2", "n3"]), [0, 0, 0, 1], PLACETO).makespan_us == pytest.approx(220.1)
    # placer's own order (the default) keeps ties by topological index whatever the names
    assert both(P, [0, 0, 0, 1], SimParams.placeto(tie_break="index")).makespan_us == pytest.approx(220.1)
    assert both(P, [0, 0, 0, 1], SimParams(op_gap_us=5.7, bus_gap_us=25.0)).makespan_us == pytest.approx(220.1)
    assert evaluate_many(P, [[0, 0, 0, 1]], PLACETO).makespan_us.tolist() == [r.makespan_us]
    # the kernel's successor lists are re-sorted by name: transfers still name the graph's ops
    assert r.transfers["tensor"].tolist() == [2] and r.transfers["dst"].tolist() == [1]


def test_latency_and_per_link_bandwidth():
    P = problem(["a", "b"], [("a", "b")], [1.0, 1.0], out=[1000, 0], bw=100.0, lat=3.0)
    assert both(P, [0, 1], NOGAP).start_us.tolist() == [0, 14]  # 1 + 3 + 1000 / 100
    assert both(P, [0, 1], SimParams(latency_us=0.0, bandwidth_bytes_per_us=1000.0)).start_us.tolist() == [0, 2]


# ---------------------------------------------------------------------------- memory
def diamond():
    # a -> b, a -> c, b -> d, c -> d on one device; outputs 100/50/30/10, b has 7 temp bytes, a 1000 params
    return problem(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], [1.0] * 4,
                   out=[100, 50, 30, 10], temp=[0, 7, 0, 0], params=[1000, 0, 0, 0], memory=[1100, 1e12])


def test_memory_peak_by_hand():
    # t=0: a 100 | t=1: +b 50 +temp 7 = 157 | t=2: -7 +c 30 = 180 (peak) | t=3: -a 100 +d 10 = 90 | t=4: 0
    r = both(diamond(), [0, 0, 0, 0], NOGAP)
    assert r.peak_memory_bytes.tolist() == [1180, 0]
    assert r.peak_time_us.tolist() == [2, 0]
    assert r.peak_ops[0].tolist() == [0, 1, 2] and r.peak_ops[1].tolist() == []


def test_memory_of_a_received_copy():
    # a (d0, 100 bytes) -> b (d1, 20 bytes out, 5 temp); 100 B/us: a's buffer lives until the
    # transfer arrives (t=2), the copy on d1 while b runs (2..3)
    P = problem(["a", "b"], [("a", "b")], [1.0, 1.0], out=[100, 20], temp=[0, 5], bw=100.0)
    r = both(P, [0, 1], NOGAP)
    assert r.peak_memory_bytes.tolist() == [100, 125] and r.peak_time_us.tolist() == [0, 2]
    assert [x.tolist() for x in r.peak_ops] == [[0], [0, 1]]


def test_oom_and_the_memory_penalty():
    P = diamond()  # device 0 holds 1180 bytes at its peak but has 1100
    r = both(P, [0, 0, 0, 0], NOGAP)
    assert r.oom and r.summary()["devices"][0]["oom"]
    assert r.objective_us == pytest.approx(4 + 2e6 * 80 / 1e9)  # R = r + c * ReLU(m - M), c = 2 s per GB
    r2 = simulate(P, [0, 0, 0, 0], SimParams(oom_penalty_us=1000.0))
    assert r2.objective_us == pytest.approx(4 + 0.16 + 1000)
    r3 = simulate(P, [1, 1, 1, 1], NOGAP)
    assert not r3.oom and r3.objective_us == r3.makespan_us == 4


# ---------------------------------------------------------------------------- API
def test_batch_and_a_kept_engine_agree_with_simulate():
    P = problem(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], [3.0, 5.0, 7.0, 2.0],
                out=[7600, 7600, 7600, 0])
    ps = np.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1]])
    for prm in (NOGAP, PLACETO, SimParams(comm_model="p2p")):
        want = [simulate(P, p, prm) for p in ps]
        for jobs in (1, 2):
            b = evaluate_many(P, ps, prm, n_jobs=jobs)
            assert b.objective_us.tolist() == [w.objective_us for w in want]
            assert b.makespan_us.tolist() == [w.makespan_us for w in want]
            assert b.peak_memory_bytes.tolist() == [w.peak_memory_bytes.tolist() for w in want]
        e = Engine(P, prm)  # one workspace, reused as a search that moves a few ops at a time does
        for p, w in zip(ps[[0, 1, 2, 3, 1]], [want[i] for i in (0, 1, 2, 3, 1)]):
            assert e.objective(p) == w.objective_us and e.makespan_us == w.makespan_us and e.oom == w.oom
            assert e.peak_memory_bytes.tolist() == w.peak_memory_bytes.tolist()


def test_batches_split_over_threads_agree_from_any_caller_and_nested():
    from concurrent.futures import ThreadPoolExecutor

    g = layered_training_graph(300, seed=3)
    P = Problem(g, preset("k80x4"))
    rng = np.random.default_rng(0)
    ps = rng.integers(0, 4, size=(9, g.n_ops))
    want = evaluate_many(P, ps, PLACETO, n_jobs=1)
    for jobs in (2, 3, 4):
        assert evaluate_many(P, ps, PLACETO, n_jobs=jobs).objective_us.tolist() == want.objective_us.tolist()
    # batches evaluated from inside helper threads (a method's own pool) split again: no deadlock, same bits
    with ThreadPoolExecutor(2) as outer:
        got = list(outer.map(lambda q: evaluate_many(P, q, PLACETO, n_jobs=2).objective_us.tolist(), [ps, ps[::-1]]))
    assert got == [want.objective_us.tolist(), want.objective_us[::-1].tolist()]


def test_bad_placements_raise_input_errors():
    g = OpGraph.build(["a", "b"], [("a", "b", 0.0)], compute_us={"gpu": [1.0, np.inf], "cpu": [1.0, 1.0]})
    devs = (Device("g0", "gpu", "test", 1e12), Device("c0", "cpu", "test", 1e12))
    P = Problem(g, Cluster("mixed", devs, np.full((2, 2), 7600.0), np.zeros((2, 2))))
    for bad in ([0, 2], [0, 1, 1], [0.5, 1.0], [-1, 1]):
        with pytest.raises(InputError):
            simulate(P, bad)
    with pytest.raises(InputError, match="cannot run"):
        simulate(P, [0, 0])  # b cannot run on the gpu
    with pytest.raises(InputError, match="cannot run"):
        evaluate_many(P, [[0, 1], [0, 0]])
    e = Engine(P, NOGAP)
    e.objective([0, 1])
    with pytest.raises(InputError, match="cannot run"):
        e.objective([0, 0])
    assert e.objective([1, 1]) == simulate(P, [1, 1]).objective_us


def test_an_op_that_never_runs_is_named():
    from placer.sim.prepare import Prepared, prepared

    P = problem(["a", "b"], [("a", "b")], [1.0, 1.0])
    good = prepared(P)
    # a corrupted graph where a and b wait for each other (OpGraph itself refuses cycles)
    GI = np.array([0, 1, 2, 1, 0, 0, 1, 2, 1, 0, 0, 1, 0, 1, 1, 0], dtype=np.int64)
    P.__dict__["_sim_prepared"] = Prepared(2, 2, 2, GI, np.concatenate([good.GF[:1], good.GF]), good.leader, False,
                                           good.out_bytes)
    P.__dict__.pop("_sim_engines", None)
    with pytest.raises(RuntimeError, match="'a' .* never ran"):
        simulate(P, [0, 0])


def test_sim_params_are_validated():
    with pytest.raises(ValueError):
        SimParams(comm_model="bus")
    with pytest.raises(ValueError):
        SimParams(op_gap_us=-1)
    with pytest.raises(ValueError):
        SimParams(tie_break="random")
    p = SimParams.placeto()
    assert (p.op_gap_us, p.bus_gap_us, p.bandwidth_bytes_per_us, p.latency_us) == (5.7, 25.0, 7600.0, 0.0)
    assert p.tie_break == "name" and SimParams().tie_break == "index"


def test_chrome_trace(tmp_path):
    P = problem(["a", "b"], [("a", "b")], [1.0, 1.0], out=[100, 20], temp=[0, 5], bw=100.0)
    r = simulate(P, [0, 1], NOGAP)
    r.write_chrome_trace(tmp_path / "t.json", P.graph.op_names, P.cluster.device_names)
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in xs] == [("a", 0, 1), ("b", 2, 1), ("a -> g1", 1, 1)]
    mem = {(e["name"], e["ts"]): e["args"]["bytes"] for e in ev if e["ph"] == "C"}
    assert mem[("g0 memory", 0.0)] == 100 and mem[("g1 memory", 2.0)] == 125 and mem[("g1 memory", 3.0)] == 0


def test_cli_simulate_prints_and_writes_trace(capsys, monkeypatch, tmp_path):
    from placer.cli import main

    monkeypatch.setattr(sys, "argv", ["placer", "simulate", "synthetic", "--placement", "single:0", "--sim", "placeto",
                                      "--trace", str(tmp_path / "t.json")])
    try:
        main()
    except SystemExit as ex:
        assert ex.code in (0, None)
    out = capsys.readouterr().out
    assert "step time" in out and "utilisation" in out and "peak memory" in out
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_evaluator_uses_the_fast_paths_and_counts_every_placement():
    from placer.methods.base import Evaluator

    P = diamond()
    ps = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]])
    want = [simulate(P, p, NOGAP).objective_us for p in ps]
    ev = Evaluator(P, NOGAP, n_jobs=2)
    assert ev.evaluate(ps[0]) == want[0] and (ev.placements, ev.sim_calls) == (1, 1)
    assert ev.evaluate_many(ps).tolist() == want and (ev.placements, ev.sim_calls) == (4, 4)
    # [0, 1, 0, 1] scores best (3.07 us) but overflows device 0 (1,130 of 1,100 bytes), as does
    # [0, 0, 0, 0]: the best is the one that fits, [1, 1, 1, 1] (4.0 us)
    assert [simulate(P, p, NOGAP).oom for p in ps] == [True, False, True]
    assert ev.best_objective_us == want[1] and ev.best.tolist() == ps[1].tolist() and ev.best_fits
    assert [x for x, _ in ev.curve] == [1, 2, 3, 4]
    with pytest.raises(InputError):
        ev.evaluate([0, 0, 0, 5])
    assert ev.placements == 4
