"""Starts computed once per Problem and shared (:mod:`placer.methods.start_cache`), and local search's
compiled critical path (:func:`placer.methods.local_search.critical_path`): the same placements as
the computations they replace."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli

from placer.cluster import preset
from placer.grouping import colocation_units
from placer.methods import Budget, run_method
from placer.methods.list_scheduling import schedulers as ls
from placer.methods.base import Evaluator
from placer.methods.local_search import critical_path
from placer.methods.partitioning import metis_placement
from placer.methods.starts import seed_placements
from placer.methods.list_scheduling.schedulers import shared_schedule
from placer.methods.start_cache import computed, shared
from placer.methods.devices import gpu_devices
from placer.problem import Problem
from placer.sim import simulate
from placer.zoo.synthetic import layered_training_graph


def _problem(layers=40, seed=2, cluster="k80x2"):
    return Problem(layered_training_graph(layers, seed=seed, name="g"), preset(cluster))


def _own(problem, sim_params):
    """Each seed as its own function computes it, nothing shared."""
    gpus = gpu_devices(problem)
    out = {"m-topo": ls.topo_placement(problem, gpus), "metis": metis_placement(problem, gpus)}
    for kind, fn in (("heft", ls.heft_schedule), ("m-etf", ls.etf_schedule), ("m-sct", ls.sct_schedule)):
        for comm in ("sim", "free"):
            out[kind + ("" if comm == "sim" else ":free")] = fn(problem, sim_params, gpus, comm=comm).placement
    return out


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_the_shared_seeds_are_each_heuristic_s_own_placement(cluster):
    """Every seed local search and annealing start from is the placement its own function computes;
    a seed left out is one equal to an earlier seed (as before sharing)."""
    problem = _problem(cluster=cluster)
    ev = Evaluator(problem)
    names = ["m-topo", "metis", "heft", "m-etf", "heft:free", "m-etf:free", "m-sct"]
    got = seed_placements(problem, ev, names)
    own = _own(problem, ev.sim_params)
    seen = []
    for name in names:
        if name in got:
            assert np.array_equal(got[name], own[name]), name
            seen.append(got[name])
        else:
            assert any(np.array_equal(own[name], q) for q in seen), name
    again = seed_placements(problem, ev, names)  # from the shared starts now: the same
    assert list(again) == list(got) and all(np.array_equal(again[k], got[k]) for k in got)


@pytest.mark.parametrize("name, settings, kind", [("heft", {}, "heft"), ("m-etf", {}, "m-etf"),
                                                  ("m-sct", {"favourites": "lp"}, "m-sct")])
def test_the_list_scheduler_rows_and_the_shared_starts_are_one_computation(name, settings, kind, monkeypatch):
    """HEFT, m-ETF and m-SCT run as methods return the placement of the seed local search starts
    from, and a Problem runs each scheduler once however many methods ask (one more for a new
    Problem object). The scheduler is the real one, counted."""
    fn_name = {"heft": "heft_schedule", "m-etf": "etf_schedule", "m-sct": "sct_schedule"}[kind]
    real, calls = getattr(ls, fn_name), []

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    problem = _problem(layers=30, seed=5)
    own = real(problem, Evaluator(problem).sim_params, gpu_devices(problem), comm="sim").placement
    monkeypatch.setattr(ls, fn_name, counted)
    row = run_method(name, problem, Budget(placements=10), 0, **settings)
    assert not row.sim.oom and np.array_equal(row.placement.devices, own)  # nothing relieved: the schedule itself
    ev = Evaluator(problem)
    seeds = seed_placements(problem, ev, [kind])
    assert np.array_equal(seeds[kind], own)
    for method in ("local-search", "anneal"):
        run_method(method, problem, Budget(placements=30), 0, seeds=kind)
    assert len(calls) == 1
    other = _problem(layers=30, seed=5)  # another Problem object: its own starts
    assert np.array_equal(seed_placements(other, Evaluator(other), [kind])[kind], own)
    assert len(calls) == 2
    key = next(k for k in computed(problem) if k[0] == kind)
    assert key[2] == tuple(gpu_devices(problem)) and key[4] == "sim"


def test_a_shared_start_is_a_copy_each_time():
    problem = _problem(layers=10)
    made = []
    first = shared(problem, ("test", 1), lambda: made.append(1) or np.arange(5))
    first[:] = -1  # the caller's own copy
    second = shared(problem, ("test", 1), lambda: made.append(1) or np.arange(5))
    assert made == [1] and np.array_equal(second, np.arange(5))
    s = shared_schedule("heft", problem, None, gpu_devices(problem))
    s.placement[:] = 0
    s.notes.append("changed")
    t = shared_schedule("heft", problem, None, gpu_devices(problem))
    assert np.array_equal(t.placement, ls.heft_schedule(problem, None, gpu_devices(problem)).placement)
    assert "changed" not in t.notes


def test_a_failed_start_is_not_remembered():
    problem = _problem(layers=10)
    with pytest.raises(ValueError):
        shared(problem, ("fails",), lambda: (_ for _ in ()).throw(ValueError("no")))
    assert shared(problem, ("fails",), lambda: 7) == 7


# ---------------------------------------------------------------------- the critical path
def _python_critical_path(graph, start, end, dev):
    """Local search's critical path as it was written in Python (the reference)."""
    order = np.lexsort((start, dev))
    prev = np.full(graph.n_ops, -1, dtype=np.int64)
    same = dev[order[1:]] == dev[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    i = int(np.argmax(end))
    path = [i]
    for _ in range(graph.n_ops):
        cands = list(graph.predecessors(i))
        if prev[i] >= 0:
            cands.append(prev[i])
        if not cands or start[i] <= 0:
            break
        cands = np.asarray(cands)
        i = int(cands[np.argmax(end[cands])])
        path.append(i)
    return np.asarray(path, dtype=np.int64)


@pytest.mark.parametrize("graph_seed", range(6))
def test_the_compiled_critical_path_is_the_python_one_on_simulated_steps(graph_seed):
    rng = np.random.default_rng(graph_seed)
    problem = _problem(layers=int(rng.integers(5, 60)), seed=graph_seed, cluster=["k80x2", "k80x4"][graph_seed % 2])
    from placer.methods.local_search import _Search

    units = colocation_units(problem)
    search = _Search(problem, Evaluator(problem), np.random.default_rng(0))
    ok = np.isfinite(units.compute_us(problem))
    for _ in range(4):
        choice = rng.integers(0, problem.n_devices, units.n_groups)
        unit_dev = np.array([d if ok[u, d] else int(np.flatnonzero(ok[u])[0]) for u, d in enumerate(choice)])
        r = simulate(problem, unit_dev[units.op_group])
        want = _python_critical_path(problem.graph, r.start_us, r.end_us, r.device)
        assert np.array_equal(critical_path(problem.graph, r.start_us, r.end_us, r.device), want)
        assert np.array_equal(search.critical_units(r), np.unique(units.op_group[want]))  # as local search had it


@pytest.mark.parametrize("seed", range(20))
def test_the_compiled_critical_path_is_the_python_one_with_ties(seed):
    """Arbitrary times on few values (ties everywhere: the first maximum must win, parents before
    the device's previous op), zero starts, and now and then an infinite end."""
    rng = np.random.default_rng(100 + seed)
    g = layered_training_graph(int(rng.integers(1, 30)), seed=seed)
    n = g.n_ops
    start = rng.integers(0, 4, n).astype(np.float64)
    end = start + rng.integers(0, 3, n)
    if seed % 5 == 0:
        end[rng.integers(n)] = np.inf
    dev = rng.integers(0, int(rng.integers(1, 4)), n)
    assert np.array_equal(critical_path(g, start, end, dev), _python_critical_path(g, start, end, dev))


class _PythonMoves:
    """Local search's moves as they were written in Python (the reference), on a search's own arrays."""

    def __init__(self, s):
        self.s = s

    def segment(self, u):
        s, g = self.s, self.s.problem.graph
        L = int(s.rng.geometric(1.0 / s.seg_mean))
        a = int(s.first[u])
        ops = np.arange(a, min(g.n_ops, a + L))
        mir = g.mirror[ops]
        back = np.flatnonzero(np.isin(g.mirror, ops))
        ops = np.unique(np.concatenate([ops, mir[mir >= 0], back]))
        return np.unique(s.units.op_group[ops])

    def propose(self, p, critical):
        s = self.s
        rng = s.rng
        u = int(rng.choice(critical)) if len(critical) and rng.random() < 0.5 else int(rng.integers(s.U))
        us = self.segment(u) if rng.random() < s.seg_prob else np.array([u])
        here = p[s.first[u]]
        ok = s.ok[us].all(axis=0)
        devs = np.flatnonzero(ok)
        devs = devs[devs != here]
        if len(devs) == 0:
            return None
        nb = s.adj[s.xadj[u]:s.xadj[u + 1]]
        nbd = np.unique(p[s.first[nb]]) if len(nb) else np.empty(0, dtype=np.int64)
        nbd = nbd[(nbd != here) & ok[nbd]]
        d = int(rng.choice(nbd)) if len(nbd) and rng.random() < 0.5 else int(rng.choice(devs))
        q = p.copy()
        for v in us:
            q[s.units.groups[v]] = d
        return q


@pytest.mark.parametrize("graph_seed", range(5))
def test_the_compiled_moves_are_the_python_ones_draw_for_draw(graph_seed):
    """Same seed, same proposals, and the random stream left in the same state after each, on
    placements and critical paths of simulated steps (the golden problem's ops that some devices
    cannot run and colocation groups included)."""
    from placer.methods.local_search import _Search
    from test_method_contract import contract_problem

    problem = contract_problem() if graph_seed == 4 else \
        _problem(layers=20 + 10 * graph_seed, seed=graph_seed, cluster=["k80x2", "k80x4"][graph_seed % 2])
    fast = _Search(problem, Evaluator(problem), np.random.default_rng(graph_seed))
    slow = _PythonMoves(_Search(problem, Evaluator(problem), np.random.default_rng(graph_seed)))
    draw = np.random.default_rng(50 + graph_seed)
    units = colocation_units(problem)
    ok = np.isfinite(units.compute_us(problem))
    for _ in range(30):
        choice = draw.integers(0, problem.n_devices, units.n_groups)
        p = np.array([d if ok[u, d] else int(np.flatnonzero(ok[u])[0]) for u, d in enumerate(choice)])[units.op_group]
        crit = fast.critical_units(simulate(problem, p))
        if draw.random() < 0.2:
            crit = crit[:0]  # no critical path: every draw uniform
        for _ in range(10):
            a, b = fast.propose(p, crit), slow.propose(p, crit)
            assert (a is None) == (b is None)
            assert a is None or np.array_equal(a, b)
            assert fast.rng.bit_generator.state == slow.s.rng.bit_generator.state


# ---------------------------------------------------------------------- the line-up
METHODS = "heft,m-etf,m-sct,m-topo,metis,local-search,anneal"


def test_compare_gives_the_same_table_with_jobs_1_and_2(tmp_path, capsys, monkeypatch):
    """End to end: ``placer compare --jobs 1`` and ``--jobs 2`` give the same rows (step times,
    objectives, device counts, notes naming each search's start), all but the seconds."""
    from placer.frontends.native import save_graph

    g = tmp_path / "g.json"
    save_graph(layered_training_graph(40, seed=2, name="g"), g)
    outs = []
    for jobs in ("1", "2"):
        code, out, err = run_cli(capsys, monkeypatch, "compare", g, "-c", "k80x2", "--methods", METHODS,
                                 "--budget", "80", "--jobs", jobs, "--json")
        assert code == 0, err
        outs.append(json.loads(out))
    one, two = outs
    timing = ("wall_s", "cpu_s")  # how long each took: the only thing that may differ
    rows = [[{k: v for k, v in r.items() if k not in timing} for r in d["rows"]] for d in outs]
    assert [r["method"] for r in rows[0]] == METHODS.split(",")
    assert rows[0] == rows[1] and one["best"] == two["best"]
    assert all("error" not in r for r in rows[0])


def test_compare_returns_the_same_placements_with_jobs_1_and_2():
    from placer.compare import compare_methods

    problem = _problem(layers=40, seed=3)
    got = []
    for jobs in (1, 2):
        seen = {}
        compare_methods(problem, METHODS.split(","), 80, 0, None, jobs=jobs,
                        on_result=lambda name, r, seen=seen: seen.__setitem__(name, (r.placement.devices.copy(),
                                                                                      r.step_time_us)))
        got.append(seen)
    assert list(got[0]) == METHODS.split(",")
    for name in got[0]:
        assert np.array_equal(got[0][name][0], got[1][name][0]) and got[0][name][1] == got[1][name][1], name
