"""The simulator's communication models (docs/simulator.md): a hand-computed timeline per model on
one graph where they all differ, the ``giph`` model against a Python reference of the GiPH authors'
evaluator (:mod:`placer.sim.reference_giph`) on 1,000 random restricted instances, the cluster file's
``comm_model`` and ``links.shared`` fields, and ``--sim``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from test_sim_properties import cases
from placer.cluster import Cluster, Device, make_cluster, preset
from placer.errors import InputError
from placer.frontends.native import cluster_from_doc, cluster_to_doc, save_cluster, save_graph
from placer.graph import OpGraph
from placer.problem import Problem
from placer.sim import Engine, SimParams, evaluate, evaluate_many, simulate
from placer.sim.prepare import link_resources
from placer.sim.reference_giph import giph_makespan, giph_schedule

# ---------------------------------------------------------------------------- hand-computed timelines
# Three devices, every link 1 byte/us and no latency. Ops (index: name, device, cost):
#   0 A d0 10, 1 F d2 10, 2 B d1 5, 3 E d1 1, 4 C d2 5, 5 G d1 2
# Edges (bytes): A->B 20, A->E 4, A->C 10, F->G 10. A and F end at 10.
NAMES = ["A", "F", "B", "E", "C", "G"]
PLACE = np.array([0, 2, 1, 1, 2, 1])
COST = {"A": 10, "F": 10, "B": 5, "E": 1, "C": 5, "G": 2}
EDGES = [("A", "B", 20.0), ("A", "E", 4.0), ("A", "C", 10.0), ("F", "G", 10.0)]

TIMELINES = {
    # one transfer per output tensor (its largest remote edge, 20 bytes) on one bus per device, reaching
    # d1 and d2 together at 10 + 20; F's 10 bytes reach d1 at 20
    "placeto": ({"A": 0, "F": 0, "B": 30, "E": 35, "C": 30, "G": 20}, 36),
    # one transfer per destination (d1: 20 bytes, d2: 10), a sender and a receiver busy with one at a time:
    # d0 -> d1 10..30 holds d1's receiver, so F's transfer to d1 waits until 30 (30..40), d0 -> d2 30..40
    "p2p": ({"A": 0, "F": 0, "B": 30, "E": 35, "C": 40, "G": 40}, 45),
    # one transfer per edge, no contention: A->E arrives at 14, A->C and F->G at 20, A->B at 30
    "giph": ({"A": 0, "F": 0, "B": 30, "E": 14, "C": 20, "G": 20}, 35),
    # one transfer per destination, each directed link its own FIFO: d0 -> d1 10..30, d0 -> d2 10..20,
    # d2 -> d1 10..20 (the links are independent, as on an NVLink mesh)
    "link": ({"A": 0, "F": 0, "B": 30, "E": 35, "C": 20, "G": 20}, 36),
    # the same three links on one shared resource (a PCIe switch), FIFO in the order sent:
    # d0 -> d1 10..30, d0 -> d2 30..40, d2 -> d1 40..50
    "link-shared": ({"A": 0, "F": 0, "B": 30, "E": 35, "C": 40, "G": 50}, 52),
}


def hand_problem(shared=None, comm=None) -> Problem:
    g = OpGraph.build(NAMES, EDGES, compute_us={"gpu": np.array([COST[n] for n in NAMES], dtype=float)})
    devs = [Device(f"d{i}", "gpu", "test", 1e12) for i in range(3)]
    meta = {}
    if shared:
        meta["shared_links"] = shared
    if comm:
        meta["comm_model"] = comm
    return Problem(g, make_cluster("hand", devs, 1.0, 0.0, meta=meta))


SHARED = {"pcie": [["d0", "d1"], ["d0", "d2"], ["d2", "d1"]]}


@pytest.mark.parametrize("case", list(TIMELINES))
def test_hand_timeline(case):
    model = case.split("-")[0]
    P = hand_problem(SHARED if case == "link-shared" else None)
    starts, makespan = TIMELINES[case]
    r = simulate(P, PLACE, SimParams(comm_model=model))
    assert r.start_us.tolist() == [starts[n] for n in NAMES]
    assert r.end_us.tolist() == [starts[n] + COST[n] for n in NAMES]
    assert r.makespan_us == makespan
    assert evaluate(P, PLACE, SimParams(comm_model=model)) == makespan  # the objective-only path agrees
    assert evaluate_many(P, PLACE[None], SimParams(comm_model=model)).makespan_us[0] == makespan  # and the batch
    if model == "giph":
        start, end, mk = giph_schedule(6, [(NAMES.index(a), NAMES.index(b), x) for a, b, x in EDGES],
                                       P.compute_us, P.bandwidth_bytes_per_us, P.latency_us, PLACE)
        assert start.tolist() == r.start_us.tolist() and mk == makespan


def test_transfers_recorded_per_model():
    """The SimResult lists the transfers each model sends: giph one per remote edge, link one per
    (tensor, destination), with the start and arrival of the hand timelines."""
    P = hand_problem()
    t = simulate(P, PLACE, SimParams(comm_model="giph")).transfers
    rows = sorted(zip(t["tensor"].tolist(), t["dst"].tolist(), t["start_us"].tolist(), t["end_us"].tolist(),
                      t["bytes"].tolist()))
    assert rows == [(0, 1, 10, 14, 4), (0, 1, 10, 30, 20), (0, 2, 10, 20, 10), (1, 1, 10, 20, 10)]
    t = simulate(hand_problem(SHARED), PLACE, SimParams(comm_model="link")).transfers
    rows = sorted(zip(t["tensor"].tolist(), t["dst"].tolist(), t["start_us"].tolist(), t["end_us"].tolist()))
    assert rows == [(0, 1, 10, 30), (0, 2, 30, 40), (1, 1, 40, 50)]


def test_link_bus_gap_and_latency():
    """The link model adds a link's latency to each transfer and keeps its resource busy ``bus_gap_us``
    after each (the next one in its FIFO waits; the arrival does not)."""
    P = hand_problem(SHARED)
    r = simulate(P, PLACE, SimParams(comm_model="link", bus_gap_us=3.0, latency_us=1.0))
    # d0 -> d1: 10..31 (1 + 20), gap to 34; d0 -> d2: 34..45, gap to 48; d2 -> d1: 48..59, gap to 62
    assert r.start_us.tolist() == [0, 0, 31, 36, 45, 59]
    assert r.makespan_us == 62  # the last transfer's bus gap counts, as in placeto and p2p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(max_ops=16), st.sampled_from([SimParams(comm_model="p2p"),
                                           SimParams(comm_model="p2p", op_gap_us=2.5, bus_gap_us=4.0, latency_us=1.5)]))
def test_link_on_two_devices_is_p2p(case, prm):
    """On two devices each direction has one sender, one receiver and one link, so the link model's
    FIFO per link is p2p's serialised sender and receiver: the same schedule and memory, bit for bit
    (p2p itself equals the pure-Python reference, tests/test_sim_properties.py)."""
    P, p = case
    assume(P.n_devices <= 2)
    a = simulate(P, p, prm)
    b = simulate(P, p, SimParams(**{**prm.__dict__, "comm_model": "link"}))
    assert a.makespan_us == b.makespan_us
    np.testing.assert_array_equal(a.start_us, b.start_us)
    np.testing.assert_array_equal(a.peak_memory_bytes, b.peak_memory_bytes)
    for k in ("tensor", "dst", "start_us", "end_us", "bytes"):
        np.testing.assert_array_equal(a.transfers[k], b.transfers[k])


def test_unknown_model_refused():
    with pytest.raises(ValueError, match="giph"):
        SimParams(comm_model="nccl")


# ---------------------------------------------------------------------------- giph against the reference
def restricted_instance(rng, n, D, tie_bytes=False):
    """A random DAG of ``n`` ops on ``D`` devices, each op allowed on a random non-empty subset of
    devices (infinite cost elsewhere: the file's null), per-pair bandwidth and latency; with
    ``tie_bytes`` every out-edge of an op carries the same bytes (arrivals at one device tie)."""
    names = [f"t{i}" for i in range(n)]
    edges = []
    for v in range(1, n):
        k = int(rng.integers(0, min(3, v) + 1))
        for u in sorted(set(rng.integers(0, v, size=k).tolist())):
            edges.append((u, v))
    out = rng.uniform(0, 5e4, size=n)
    eb = [float(out[u]) if tie_bytes else float(rng.uniform(0, 5e4)) for u, _ in edges]
    comp = rng.uniform(1.0, 100.0, size=(n, D))
    allowed = rng.random((n, D)) < 0.5
    allowed[np.arange(n), rng.integers(0, D, size=n)] = True
    comp[~allowed] = np.inf
    g = OpGraph.build(names, [(names[u], names[v], b) for (u, v), b in zip(edges, eb)],
                      compute_us={f"m{j}": comp[:, j] for j in range(D)})
    devs = tuple(Device(f"d{j}", "gpu", f"m{j}", 1e12) for j in range(D))
    bw = rng.uniform(100.0, 1e4, size=(D, D))
    lat = rng.uniform(10.0, 100.0, size=(D, D))
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    return Problem(g, Cluster("random", devs, bw, lat)), allowed


def test_giph_equals_reference_on_1000_restricted_instances():
    """200 random restricted (graph, network) pairs x 5 placements, each op only where it may run."""
    rng = np.random.default_rng(62)
    prm = SimParams(comm_model="giph")
    worst, count = 0.0, 0
    for k in range(200):
        P, allowed = restricted_instance(rng, int(rng.integers(2, 13)), int(rng.integers(1, 5)), tie_bytes=k % 4 == 0)
        places = np.array([[rng.choice(np.flatnonzero(allowed[i])) for i in range(P.n_ops)] for _ in range(5)])
        got = evaluate_many(P, places, prm).makespan_us
        for p, mk in zip(places, got):
            ref = giph_makespan(P, p)
            worst = max(worst, abs(mk - ref) / ref)
            count += 1
    assert count == 1000
    assert worst <= 1e-6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 16), st.integers(1, 4), st.booleans())
def test_giph_property(seed, n, D, tie):
    """Full runs (with records) equal the reference op by op, not only in makespan."""
    rng = np.random.default_rng(seed)
    P, allowed = restricted_instance(rng, n, D, tie)
    p = np.array([rng.choice(np.flatnonzero(allowed[i])) for i in range(n)])
    r = simulate(P, p, SimParams(comm_model="giph"))
    g = P.graph
    start, end, mk = giph_schedule(n, list(zip(g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist())),
                                   P.compute_us, P.bandwidth_bytes_per_us, P.latency_us, p)
    np.testing.assert_allclose(r.start_us, start, rtol=1e-9)
    np.testing.assert_allclose(r.end_us, end, rtol=1e-9)
    assert r.makespan_us == pytest.approx(mk, rel=1e-9)


def test_restricted_placement_refused():
    """An op placed where its cost is null (infinite) is refused, whatever the model."""
    rng = np.random.default_rng(1)
    P, allowed = restricted_instance(rng, 6, 3)
    i = int(np.flatnonzero(~allowed.all(axis=1))[0])
    p = np.array([int(np.flatnonzero(allowed[j])[0]) for j in range(6)])
    p[i] = int(np.flatnonzero(~allowed[i])[0])
    with pytest.raises(InputError):
        simulate(P, p, SimParams(comm_model="giph"))


def test_default_model_unchanged_by_the_new_ones():
    """placeto and p2p give what they gave: the same hand timelines as with the default SimParams()."""
    P = hand_problem()
    assert simulate(P, PLACE).makespan_us == TIMELINES["placeto"][1]
    assert SimParams() == SimParams(comm_model="placeto")


# ---------------------------------------------------------------------------- the cluster's choice
def test_cluster_declares_its_model():
    P = hand_problem(comm="giph")
    assert simulate(P, PLACE).makespan_us == TIMELINES["giph"][1]  # no SimParams: the cluster's model
    assert Engine(P).params.comm_model == "giph"
    assert SimParams.preset("default", P.cluster).comm_model == "giph"
    assert SimParams.preset("link", P.cluster).comm_model == "link"  # --sim overrides
    assert SimParams.preset("placeto", P.cluster) == SimParams.placeto()
    assert SimParams.preset("default") == SimParams()  # no cluster: today's default


def test_cluster_file_round_trips_the_fields(tmp_path):
    c = make_cluster("pcie", [Device(f"d{i}", "gpu", "test", 1e12) for i in range(3)], 1.0, 0.0,
                     meta={"comm_model": "link", "shared_links": SHARED, "description": "x"})
    doc = cluster_to_doc(c)
    assert doc["comm_model"] == "link" and doc["links"]["shared"] == SHARED
    assert "comm_model" not in doc["meta"] and "shared_links" not in doc["meta"]
    back = cluster_from_doc(json.loads(json.dumps(doc)))
    assert back.meta == c.meta
    np.testing.assert_array_equal(link_resources(back), link_resources(c))
    res = link_resources(back)
    assert res[0, 1] == res[0, 2] == res[2, 1] and len({res[1, 0], res[1, 2], res[2, 0], res[0, 1]}) == 4
    assert cluster_to_doc(preset("k80x2")).get("comm_model") is None  # nothing declared, nothing written


@pytest.mark.parametrize("patch, item", [
    ({"comm_model": "nccl"}, "comm_model"),
    ({"links": {"shared": {"pcie": [["d0", "d9"]]}}}, "links.shared.pcie #0"),
    ({"links": {"shared": {"pcie": [["d0", "d0"]]}}}, "links.shared.pcie #0"),
    ({"links": {"shared": {"a": [["d0", "d1"]], "b": [["d0", "d1"]]}}}, "links.shared.b #0"),
    ({"links": {"shared": {"pcie": []}}}, "links.shared.pcie"),
    ({"links": {"shared": [["d0", "d1"]]}}, "links.shared"),
])
def test_cluster_file_bad_fields(patch, item):
    doc = cluster_to_doc(make_cluster("c", [Device(f"d{i}", "gpu", "test", 1e12) for i in range(2)], 1.0, 0.0))
    for k, v in patch.items():
        doc[k] = {**doc[k], **v} if isinstance(doc.get(k), dict) else v
    with pytest.raises(InputError) as e:
        cluster_from_doc(doc, "c.json")
    assert item in str(e.value) and "c.json" in str(e.value)


def test_subset_keeps_the_shared_links_it_has():
    c = hand_problem(SHARED).cluster.subset([0, 1])
    res = link_resources(c)
    assert res[0, 1] != res[1, 0]  # d0 -> d1 alone in its group now, d1 -> d0 its own link


# ---------------------------------------------------------------------------- --sim
def test_cli_sim_choices(capsys, monkeypatch, tmp_path):
    P = hand_problem()
    save_graph(P.graph, tmp_path / "g.json")
    save_cluster(P.cluster, tmp_path / "c.json")
    (tmp_path / "p.json").write_text(json.dumps({"format": "placer", "version": 1, "kind": "placement",
                                                 "placement": {n: f"d{d}" for n, d in zip(NAMES, PLACE)}}))
    got = {}
    for sim in ("default", "giph", "link", "p2p"):
        code, out, err = run_cli(capsys, monkeypatch, "simulate", tmp_path / "g.json", "--cluster", tmp_path / "c.json",
                                 "--placement", tmp_path / "p.json", "--sim", sim, "--json")
        assert code == 0, err
        got[sim] = json.loads(out)["makespan_us"]
    assert got == {"default": 36, "giph": 35, "link": 36, "p2p": 45}
    # a cluster file that declares giph: --sim default follows it
    doc = cluster_to_doc(P.cluster)
    doc["comm_model"] = "giph"
    (tmp_path / "c2.json").write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, monkeypatch, "simulate", tmp_path / "g.json", "--cluster", tmp_path / "c2.json",
                             "--placement", tmp_path / "p.json", "--json")
    assert code == 0, err
    assert json.loads(out)["makespan_us"] == 35
    code, out, err = run_cli(capsys, monkeypatch, "simulate", tmp_path / "g.json", "--cluster", tmp_path / "c.json",
                             "--placement", tmp_path / "p.json", "--sim", "nccl")
    assert code == 2 and "--sim" in err and "giph" in err and "Traceback" not in err
