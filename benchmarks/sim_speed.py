"""Simulator speed: compiled kernel vs placer's own pure-Python oracle (a straightforward heapq simulator).

The ratio this script reports is against that oracle (:func:`python_sim`, written here to check the
kernel's results), not against the Placeto authors' simulator: measured against the authors' code the
oracle is 1.5-2.3x slower than theirs, so the kernel is 54-69x faster than the authors' simulator
(CPU time), where this script's column reads 64-167x (issue 52). The column is named "vs oracle".

For generated training graphs of 1k / 10k / 80k ops (``placer.zoo.synthetic``; the Hierarchical
Planner's largest graph has 83,712 ops) and for every real graph in ../shared/graphs, on the
k80x4 preset with ``SimParams.placeto()`` (the reference simulator's constants and its tie-break by
op name), for three placements over the 4 GPUs (all on one GPU; contiguous topological blocks;
uniformly random: 16 different placements timed in turn, as a search meets them; one placement
simulated over and over lets the CPU's branch predictors learn it, 2x faster at 1k ops), one row each:

* the compiled objective-only path (``Engine.objective``: makespan + peak memory, no SimResult):
  microseconds per simulation and events per second (events counted by the pure-Python model);
* the pure-Python implementation below (same semantics, also tracking peak memory), checked to give
  the same makespan and peaks, and the speed ratio;
* the p2p model, the full SimResult, and the batch API (``evaluate_many``) on 1 and 2 threads;

and after them, per size, where a random placement's objective run spends its time (the compiled
phases timed one by one: state set-up, the placement's prepass, the event loop, the objective), and
batch throughput against threads (``--threads``, wall-clock: on a shared machine it shows the cores
the process got), and the floor: the kernel against one compiled pass over the same ops and edges with
no event queue and no memory (:func:`one_pass`), the least work a simulator of the model does, so
the ratio says how much of the kernel's time the event order and the memory accounting take.

A move of one op is a full run on a kept Engine (the incremental path was measured and removed:
see :mod:`placer.sim.fast`), so it has no column of its own.

Times are medians of per-call CPU time of the calling thread (``time.thread_time``: the time one
core spent, robust to the other processes on a shared machine); ``--wall`` uses wall-clock time.
Batch rates are wall-clock (and, for 2 threads, per process-CPU second: on a loaded machine the
wall rate shows the cores it got, the CPU rate the work). Run: ``python benchmarks/sim_speed.py``
(``--quick`` for 1k/10k only, ``--no-real`` to skip the real graphs).
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
from numba import njit

from placer.cluster import preset
from placer.problem import Problem
from placer.sim import Engine, SimParams, evaluate_many, simulate
from placer.sim import kernel as K
from placer.sim import loop, placeto_loop, state
from placer.sim.prepare import link_matrices, name_rank, prepared
from placer.zoo.synthetic import layered_training_graph

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"


# ---------------------------------------------------------------------------- pure Python
def python_sim(problem, placement, params):
    """A straightforward heapq simulation of the ``placeto`` model (Placeto appendix A.5): per-device
    FIFOs of runnable ops, one outgoing bus FIFO per device, op-done / transfer-done / wake-up events
    ordered (time, kind, priority) with the op-name rank as priority when ``params.tie_break`` is
    "name"; peak memory tracked as in placer.sim.memory. Returns (makespan_us, peak bytes per device
    incl. parameters, events processed)."""
    g = problem.graph
    n, D = g.n_ops, problem.n_devices
    rank = (name_rank(g.op_names) if params.tie_break == "name" else np.arange(n)).tolist()
    inv = [0] * n
    for i, r in enumerate(rank):
        inv[r] = i
    p = placement.tolist()
    cost = problem.compute_us[np.arange(n), placement].tolist()
    bw, lat = (a.tolist() for a in link_matrices(problem, params))
    succ, ebytes = [], []
    for i in range(n):
        pairs = sorted(zip(g.succ_idx[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist(),
                           g.edge_bytes[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist()), key=lambda cb: rank[cb[0]])
        succ.append([c for c, _ in pairs])
        ebytes.append([b for _, b in pairs])
    preds = [g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]].tolist() for i in range(n)]
    out_b = np.maximum(g.output_bytes, [max(b, default=0.0) for b in ebytes]).tolist()
    temp = g.temp_bytes.tolist()
    missing = [len(x) for x in preds]
    uses = [0] * n
    copies = {}  # (op, device) -> [bytes, consumers left]
    level, peak, dirty = [0.0] * D, [0.0] * D, set()
    dev_q, bus_q = [deque() for _ in range(D)], [deque() for _ in range(D)]
    dev_on, bus_on = [False] * D, [False] * D
    ev = []
    gap, bus_gap = params.op_gap_us, params.bus_gap_us

    def ready(c, t):
        d = p[c]
        dev_q[d].append(c)
        if not dev_on[d]:
            dev_on[d] = True
            heapq.heappush(ev, (t, 2, d, 0))

    for i in range(n):
        if missing[i] == 0:
            ready(i, 0.0)
    t_cur = last = 0.0
    n_ev = 0
    while ev:
        t, kind, a, b = heapq.heappop(ev)
        n_ev += 1
        if kind == 0:
            a = inv[a]
        if t > t_cur:
            for d in dirty:
                peak[d] = max(peak[d], level[d])
            dirty.clear()
            t_cur = t
        last = t
        if kind == 2:  # device a wakes up
            if not dev_q[a]:
                dev_on[a] = False
                continue
            c = dev_q[a].popleft()
            level[a] += out_b[c] + temp[c]
            dirty.add(a)
            end = t + cost[c]
            heapq.heappush(ev, (end, 0, rank[c], 0))
            heapq.heappush(ev, (end + (gap if cost[c] > 0 else 0.0), 2, a, 0))
        elif kind == 0 and b == 0:  # op a done on device d
            d = p[a]
            level[d] -= temp[a]
            for w in preds[a]:
                if p[w] == d:
                    uses[w] -= 1
                    if uses[w] == 0:
                        level[d] -= out_b[w]
                else:
                    cp = copies[(w, d)]
                    cp[1] -= 1
                    if cp[1] == 0:
                        level[d] -= cp[0]
            remote = {}
            for c, nb in zip(succ[a], ebytes[a]):
                if p[c] == d:
                    uses[a] += 1
                    missing[c] -= 1
                    if missing[c] == 0:
                        ready(c, t)
                else:
                    remote[p[c]] = max(remote.get(p[c], 0.0), nb)
            if remote:
                uses[a] += 1
                nb = max(remote.values())
                for x in remote:
                    copies[(a, x)] = [nb, sum(1 for c in succ[a] if p[c] == x)]
                bus_q[d].append((a, max(lat[d][x] + nb / bw[d][x] for x in remote)))
                if not bus_on[d]:
                    bus_on[d] = True
                    heapq.heappush(ev, (t, 1, d, 0))
            if uses[a] == 0:
                level[d] -= out_b[a]
        elif kind == 0:  # the tensor of op a reached every remote consumer device
            s = p[a]
            uses[a] -= 1
            if uses[a] == 0:
                level[s] -= out_b[a]
            for x in sorted({p[c] for c in succ[a] if p[c] != s}):
                level[x] += copies[(a, x)][0]
                dirty.add(x)
            for c in succ[a]:
                if p[c] != s:
                    missing[c] -= 1
                    if missing[c] == 0:
                        ready(c, t)
        else:  # bus a wakes up
            if not bus_q[a]:
                bus_on[a] = False
                continue
            u, dur = bus_q[a].popleft()
            heapq.heappush(ev, (t + dur, 0, rank[u], 1))
            heapq.heappush(ev, (t + dur + bus_gap, 1, a, 0))
    for d in dirty:
        peak[d] = max(peak[d], level[d])
    return last, np.array(peak) + problem.resident_bytes(placement), n_ev


# ---------------------------------------------------------------------------- timing
CLOCK = time.thread_time  # CPU time of this thread: what one core spends (see --wall)
RANDOM = 16  # different random placements timed in turn


def median_time(fn, repeat: int, min_total_s: float = 0.0, args=(None,), clock=None) -> float:
    """Median seconds per call of ``fn(a)`` on ``clock`` (default :data:`CLOCK`), ``a`` cycling
    through ``args`` (after one warm-up call on each)."""
    clock = clock or CLOCK
    for a in args:
        fn(a)
    ts = []
    t_start = time.perf_counter()
    while len(ts) < repeat or time.perf_counter() - t_start < min_total_s:
        a = args[len(ts) % len(args)]
        t = clock()
        fn(a)
        ts.append(clock() - t)
        if len(ts) >= 10 * repeat:
            break
    return float(np.median(ts))


def feasible(problem, p):
    """``p`` made valid: each colocation group on its first op's device, and ops (groups) that
    cannot run there moved to the first device every member can run on (the CPU for GPU-less ops)."""
    lead = prepared(problem).leader
    ok = np.isfinite(problem.compute_us)
    group_ok = np.ones_like(ok)
    np.logical_and.at(group_ok, lead, ok)
    p = np.asarray(p, dtype=np.int64)[lead]
    bad = ~group_ok[lead, p]
    p[bad] = np.argmax(group_ok[lead[bad]], axis=1)
    return problem.validate_placement(p)


def placements(problem, rng, n_random: int = RANDOM):
    """Per kind, the placements timed in turn: one for single and blocks, ``n_random`` different
    uniformly random ones (a search simulates a new placement every call: timing one placement
    over and over lets the CPU's branch predictors learn it, 2x faster at 1k ops)."""
    gpus = np.array([d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "gpu"])
    n = problem.n_ops
    return {
        "single": [feasible(problem, np.full(n, gpus[0]))],
        "blocks": [feasible(problem, gpus[np.arange(n) * len(gpus) // n])],
        "random": [feasible(problem, rng.choice(gpus, n)) for _ in range(n_random)],
    }


def batch_rate(problem, prm, p, jobs, k=32, reps=3):
    """Simulations per second of ``evaluate_many`` on k perturbations of ``p`` (1% of ops moved), with
    ``jobs`` threads: (wall-clock rate, rate per process-CPU second), medians of ``reps`` calls."""
    rng = np.random.default_rng(1)
    gpus = np.array([d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "gpu"])
    P = np.repeat(p[None, :], k, axis=0)
    for row in P:
        idx = rng.choice(len(p), max(1, len(p) // 100), replace=False)
        row[idx] = rng.choice(gpus, len(idx))
    P = np.array([feasible(problem, q) for q in P])
    evaluate_many(problem, P[:2], prm, n_jobs=jobs)  # warm-up (threads, compiled code)
    walls, cpus = [], []
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        evaluate_many(problem, P, prm, n_jobs=jobs)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return k / float(np.median(walls)), k / float(np.median(cpus))


HEADER = (f"{'graph':<26} {'ops':>6} {'place':<7} {'us/sim':>9} {'Mevents/s':>9} {'oracle ms':>9} {'vs oracle':>9} "
          f"{'same':>4} {'p2p us':>9} {'full ms':>8} {'batch1/s':>9} {'batch2/s':>9} {'b2 cpu/s':>9}")


def bench_graph(name, problem, args, rows, extras=True):
    prm = SimParams.placeto()
    rng = np.random.default_rng(0)
    n = problem.n_ops
    for pname, ps in placements(problem, rng).items():
        ps = [q.astype(np.int64) for q in ps]
        p = ps[0]
        eng = Engine(problem, prm)
        t_c = median_time(eng.objective, args.repeat, 0.2, ps)
        py = ps[:1 if n > 20000 else 3]  # the pure-Python simulator on some of them, each checked
        # up to a second of the pure-Python simulator below 20k ops (at most 30 calls): a median of 3 calls
        # (60 ms in all at 1k ops) rests on one call
        t_py = median_time(lambda q: python_sim(problem, q, prm), len(py), 1.0 if n <= 20000 else 0.0, py)
        same, n_ev = True, []
        for q in py:
            mk_py, peak_py, ne = python_sim(problem, q, prm)
            eng.objective(q)
            n_ev.append(ne)
            same = mk_py == eng.makespan_us and np.allclose(peak_py, eng.peak_memory_bytes, rtol=1e-12, atol=0)
            if not same:  # report the first placement that differs
                mk_c, peak_c = eng.makespan_us, eng.peak_memory_bytes.copy()
                break
        n_ev = float(np.mean(n_ev))
        eng_p2p = Engine(problem, SimParams.placeto(comm_model="p2p"))
        t_p2p = median_time(eng_p2p.objective, args.repeat, 0.1, ps)
        t_full = median_time(lambda q: simulate(problem, q, prm), max(3, args.repeat // 10), 0.0, ps[:4])
        b1, b2, b2c = float("nan"), float("nan"), float("nan")
        if extras:
            b1, _ = batch_rate(problem, prm, p, 1, k=8 if n > 20000 else 32)
            b2, b2c = batch_rate(problem, prm, p, 2, k=8 if n > 20000 else 32)
        rows.append((name, n, pname, t_c, t_py, same))
        print(f"{name:<26} {n:>6} {pname:<7} {t_c * 1e6:>9.1f} {n_ev / t_c / 1e6:>9.1f} {t_py * 1e3:>9.1f} "
              f"{t_py / t_c:>8.0f}x {'yes' if same else 'NO':>4} {t_p2p * 1e6:>9.1f} {t_full * 1e3:>8.2f} "
              f"{b1:>9.0f} {b2:>9.0f} {b2c:>9.0f}", flush=True)
        if not same:
            print(f"  MISMATCH makespan {mk_c} vs {mk_py}, peaks {peak_c} vs {peak_py}", file=sys.stderr)


def predictor_rows(problems, args):
    """Branch prediction's share: the same random placement simulated over and over (the predictor
    learns its branches) against the 16 placements in turn, per size. What the learned run saves is
    about what mispredicted branches cost; at 10k ops and more the predictor cannot learn a run's
    ~30k events, so the two agree there."""
    print(f"\n{'graph':<26} {'ops':>6} {'16 in turn us':>14} {'one repeated us':>16} {'ratio':>6}")
    for n, problem in problems.items():
        ps = [q.astype(np.int64) for q in placements(problem, np.random.default_rng(0))["random"]]
        eng = Engine(problem, SimParams.placeto())
        t_many = median_time(eng.objective, args.repeat, 0.2, ps)
        t_one = median_time(eng.objective, args.repeat, 0.2, ps[:1])
        print(f"{'synthetic-' + str(n):<26} {n:>6} {t_many * 1e6:>14.1f} {t_one * 1e6:>16.1f} {t_many / t_one:>5.2f}x")


def phase_rows(problems, args):
    """Where a random placement's objective run spends its time, per size: the compiled phases of
    ``kernel.sim_full`` timed one by one on the same 16 placements (medians of thread CPU time):
    ``init_state`` (fresh state, the ops without parents queued), ``prepass`` (the placement's
    per-op arrays), ``run_placeto`` (the event loop) and ``finish`` (objective), their sum against
    ``sim_full`` called directly (the sum also pays four calls from Python, some microseconds each:
    visible at 1k ops), and ``Engine.objective`` (the Python call around it). Each placement must take
    the path ``sim_full`` takes for it (the prepass finds every transfer taking some time and at least
    half the ops sending one) and give its objective bit for bit."""
    print(f"\n{'graph':<26} {'ops':>6} {'init us':>8} {'prepass us':>10} {'loop us':>9} {'finish us':>9} "
          f"{'sum us':>8} {'sim_full us':>11} {'objective us':>12} {'loop share':>10}")
    for n, problem in problems.items():
        ps = [q.astype(np.int64) for q in placements(problem, np.random.default_rng(0))["random"]]
        eng = Engine(problem, SimParams.placeto())
        pr, CF, CI, PI, WI, WF, vi, vf = eng.prep, eng.CF, eng.CI, eng.PI, eng.WI, eng.WF, eng.vi, eng.vf
        GI, GF = pr.GI, pr.GF
        o = state.ccnt_start(pr.n, pr.m, pr.D, 0)
        t = {k: [] for k in ("init", "prepass", "loop", "finish", "full", "objective")}
        for i in range(max(args.repeat, 2 * len(ps))):
            q = ps[i % len(ps)]
            eng.place[:] = q
            c0 = CLOCK()
            loop.init_state(GI, GF, CI, eng.place, WI, WF, vi, vf)
            c1 = CLOCK()
            sends = placeto_loop.prepass(GI, GF, CF, CI, eng.place, WI, WF)
            c2 = CLOCK()
            placeto_loop.run_placeto(GI, GF, CF, CI, PI, eng.place, WI, WF, vi, vf)
            c3 = CLOCK()
            K.finish(GF, CF, CI, eng.place, WI, WF, vf)
            c4 = CLOCK()
            assert 2 * sends >= pr.n, "sim_full would not take the event loop timed here"
            for k, dt in (("init", c1 - c0), ("prepass", c2 - c1), ("loop", c3 - c2), ("finish", c4 - c3)):
                t[k].append(dt)
            if WI[state.S_NRUN] != pr.n:  # a run in which some op never ran leaves consumer counts behind
                WI[o:o + pr.n * pr.D] = 0
            parts_obj = float(WF[state.F_OBJ])
            c = CLOCK()
            K.sim_full(GI, GF, CF, CI, PI, eng.place, WI, WF, False)
            t["full"].append(CLOCK() - c)
            assert parts_obj == WF[state.F_OBJ], "the phases run one by one must give sim_full's objective"
            c = CLOCK()
            eng.objective(q)
            t["objective"].append(CLOCK() - c)
        med = {k: float(np.median(v)) * 1e6 for k, v in t.items()}
        parts = med["init"] + med["prepass"] + med["loop"] + med["finish"]
        print(f"{'synthetic-' + str(n):<26} {n:>6} {med['init']:>8.1f} {med['prepass']:>10.1f} {med['loop']:>9.1f} "
              f"{med['finish']:>9.1f} {parts:>8.1f} {med['full']:>11.1f} {med['objective']:>12.1f} "
              f"{med['loop'] / parts:>9.0%}", flush=True)


def scaling_rows(problems, threads):
    """Batch throughput against threads: ``evaluate_many`` on 16 random placements per thread of the
    largest count (2 at 80k; different ones, as a search batch), wall-clock sims per second (median
    of 3 calls) and the speed-up over 1 thread."""
    print(f"\n{'graph':<26} {'ops':>6} {'threads':>7} {'batch':>5} {'sims/s':>9} {'x 1 thread':>10}")
    for n, problem in problems.items():
        prm = SimParams.placeto()
        rng = np.random.default_rng(2)
        k = 16 * max(threads) if n <= 20000 else 2 * max(threads)
        P = np.array([q.astype(np.int64) for q in placements(problem, rng, k)["random"]])
        ref = evaluate_many(problem, P, prm, n_jobs=1).objective_us
        base = None
        for j in threads:
            assert np.array_equal(evaluate_many(problem, P, prm, n_jobs=j).objective_us, ref)
            rate = k / median_time(lambda _: evaluate_many(problem, P, prm, n_jobs=j), 3, 0.0, [None],
                                   clock=time.perf_counter)
            base = base or rate
            print(f"{'synthetic-' + str(n):<26} {n:>6} {j:>7} {k:>5} {rate:>9.0f} {rate / base:>9.2f}x",
                  flush=True)


# ---------------------------------------------------------------------------- the floor
U = loop.U


@njit(**loop.HOT)
def one_pass(succ_ptr, succ_idx, ebytes, comp, place, D, bw, lat, op_gap, bus_gap, ready, free, bfree):
    """Step time by list scheduling in the ops' index (topological) order: one pass, no event queue,
    no memory. Each op starts when its inputs are in and its device is free; its one transfer (the
    largest remote edge, over the slowest link to a consumer's device, as in the ``placeto`` model)
    leaves when it ends and its bus is free; then it pushes its end (local consumers) or its
    arrival (remote ones) into its consumers' ready times. Not the ``placeto`` model (a device runs
    its ops in index order, not in the order they became runnable, and nothing is ordered by time):
    the least work a simulator of it does, every op read once and every edge's consumer twice,
    compiled as the kernel is. Pushing along the successor lists measured 20% faster than pulling
    from the predecessors' ends (10k ops: 480 against 590-610 us, the same makespans)."""
    for d in range(D):
        free[d] = 0.0
        bfree[d] = 0.0
    n = U(len(place))
    for u in range(n):
        ready[u] = 0.0
    mk = 0.0
    for u in range(n):
        di = place[u]
        d = U(di)
        r = ready[u]
        s = r if r > free[d] else free[d]
        c = comp[u * U(D) + d]
        e = s + c
        free[d] = e + (op_gap if c > 0 else 0.0)
        mk = e if e > mk else mk
        mb = 0.0
        mask = 0
        lo, hi = U(succ_ptr[u]), U(succ_ptr[u + U(1)])
        for j in range(lo, hi):
            x = place[U(succ_idx[j])]
            b = 0.0 if x == di else ebytes[j]
            mb = b if b > mb else mb
            mask |= np.int64(x != di) << x
        a = e
        if mask != 0:
            dur = 0.0
            for x in range(U(D)):  # branch-free: a select per device
                v = lat[d * U(D) + x] + mb / bw[d * U(D) + x]
                dur = v if (v > dur) & ((mask >> np.int64(x)) & 1 == 1) else dur
            a = (e if e > bfree[d] else bfree[d]) + dur
            bfree[d] = a + bus_gap
            mk = a if a > mk else mk
        for j in range(lo, hi):
            cj = U(succ_idx[j])
            v = e if place[cj] == di else a
            ready[cj] = v if v > ready[cj] else ready[cj]
    return mk


def floor_rows(problems, args):
    """The kernel against the floor (:func:`one_pass`) on the same 16 random placements, per size:
    how far an exact event simulation is from the least work any simulator does. Returns the floor's
    seconds per size."""
    print(f"\n{'graph':<26} {'ops':>6} {'edges':>6} {'floor us':>9} {'kernel us':>10} {'kernel / floor':>14}")
    prm = SimParams.placeto()
    out = {}
    for n, problem in problems.items():
        g = problem.graph
        i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)
        succ_ptr, succ_idx = i64(g.succ_ptr), i64(g.succ_idx)
        assert all((succ_idx[succ_ptr[i]:succ_ptr[i + 1]] > i).all() for i in range(0, n, max(1, n // 200)))
        ebytes = np.ascontiguousarray(g.edge_bytes, dtype=np.float64)
        comp = np.ascontiguousarray(problem.compute_us, dtype=np.float64).ravel()
        bw, lat = (np.ascontiguousarray(a).ravel() for a in link_matrices(problem, prm))
        D = problem.n_devices
        ready, free, bfree = np.zeros(n), np.zeros(D), np.zeros(D)
        ps = [q.astype(np.int64) for q in placements(problem, np.random.default_rng(0))["random"]]
        eng = Engine(problem, prm)
        op_gap, bus_gap = float(eng.CF[0]), float(eng.CF[1])
        t_floor = median_time(lambda q: one_pass(succ_ptr, succ_idx, ebytes, comp, q, D, bw, lat, op_gap, bus_gap,
                                                 ready, free, bfree), args.repeat, 0.2, ps)
        t_k = median_time(eng.objective, args.repeat, 0.2, ps)
        print(f"{'synthetic-' + str(n):<26} {n:>6} {len(succ_idx):>6} {t_floor * 1e6:>9.1f} {t_k * 1e6:>10.1f} "
              f"{t_k / t_floor:>13.2f}x", flush=True)
        out[n] = t_floor
    return out


def real_graphs():
    from placer.frontends import load_any_graph

    files = sorted(p for p in (SHARED / "pipedream").glob("*.txt") if p.name != "LICENSE.txt")
    files += sorted((SHARED / "dnn-partitioning").glob("*-inputs/*/*.json"))
    for f in files:
        yield f"{f.parent.name}/{f.stem}", load_any_graph(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 80000])
    ap.add_argument("--quick", action="store_true", help="1k and 10k only")
    ap.add_argument("--no-real", action="store_true", help="skip ../shared/graphs")
    ap.add_argument("--repeat", type=int, default=50, help="timed repeats of the compiled kernel (median)")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2],
                    help="thread counts of the batch scaling table (on a many-core machine: 1 2 4 8 14)")
    ap.add_argument("--wall", action="store_true", help="time with wall-clock time instead of thread CPU time")
    args = ap.parse_args(argv)
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    sizes = [s for s in args.sizes if not args.quick or s <= 10000]
    cluster = preset("k80x4")
    print(f"k80x4 preset, SimParams.placeto() (ties by op name); medians of {'wall' if args.wall else 'thread CPU'} "
          f"time per simulation ('random': {RANDOM} different placements in turn); events: those of the pure-Python event model; "
          f"batch1/batch2: evaluate_many sims per wall second on 1 / 2 threads, b2 cpu/s: per "
          f"process-CPU second on 2 threads")
    print(HEADER)
    rows = []
    synthetic = {n: Problem(layered_training_graph(n, seed=0), cluster) for n in sizes}
    for n, problem in synthetic.items():
        bench_graph(f"synthetic-{n}", problem, args, rows)
    if not args.no_real and SHARED.exists():
        for name, g in real_graphs():
            bench_graph(name, Problem(g, cluster), args, rows, extras=False)
    predictor_rows(synthetic, args)
    phase_rows(synthetic, args)
    floor = floor_rows(synthetic, args)
    scaling_rows(synthetic, sorted(set(args.threads)))
    ratios = [r[4] / r[3] for r in rows]
    rnd = {r[1]: r for r in rows if r[2] == "random" and r[0].startswith("synthetic")}
    print(f"\nspeed-up over placer's own pure-Python oracle (not the Placeto authors' simulator, which is 1.5-2.3x "
          f"faster than the oracle): median {np.median(ratios):.0f}x, min {min(ratios):.0f}x, "
          f"max {max(ratios):.0f}x; all results equal: {all(r[5] for r in rows)}")
    for n, r in sorted(rnd.items()):
        print(f"random placement, {n} ops: {r[3] * 1e6:.0f} us per simulation, {r[4] / r[3]:.0f}x placer's pure-Python "
              f"oracle (target 100x{', and under 1 ms' if n == 10000 else ''}); the floor {floor[n] * 1e6:.0f} us")


if __name__ == "__main__":
    main()
