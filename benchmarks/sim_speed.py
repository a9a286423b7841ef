"""Simulator speed: compiled kernel vs a straightforward pure-Python heapq simulator.

For generated training graphs of 1k / 10k / 80k ops (``placer.zoo.synthetic``; the Hierarchical
Planner's largest graph has 83,712 ops) and for every real graph in ../shared/graphs, on the
k80x4 preset with ``SimParams.placeto()`` (the reference simulator's constants), for three
placements over the 4 GPUs (all on one GPU; contiguous topological blocks; uniformly random):

* compiled objective-only path (``Engine.objective``: makespan + peak memory, no SimResult),
  median wall time per simulation, simulations per second, ns per op;
* the pure-Python implementation below (same semantics, also tracking peak memory), checked to give
  the same makespan and peaks, and the speed ratio;
* the p2p model, the full SimResult, the batch API (``evaluate_many``, 1 and 2 threads) and the
  incremental path (``IncrementalSim``: a Placeto-style sweep moving one op per step).

Times are medians of per-call CPU time of the calling thread (``time.thread_time``: the time one
core spent, robust to the other processes on a shared machine); ``--wall`` uses wall-clock time.
Run: ``python benchmarks/sim_speed.py`` (``--quick`` for 1k/10k only, ``--no-real`` to skip the
real graphs).
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

from placer.cluster import preset
from placer.problem import Problem
from placer.sim import Engine, IncrementalSim, SimParams, evaluate, evaluate_many, simulate
from placer.sim.prepare import link_matrices, prepared
from placer.zoo.synthetic import layered_training_graph

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"


# ---------------------------------------------------------------------------- pure Python
def python_sim(problem, placement, params):
    """A straightforward heapq simulation of the ``placeto`` model (Placeto appendix A.5): per-device
    FIFOs of runnable ops, one outgoing bus FIFO per device, op-done / transfer-done / wake-up events
    ordered (time, kind, index); peak memory tracked as in placer.sim.memory. Returns
    (makespan_us, peak bytes per device incl. parameters)."""
    g = problem.graph
    n, D = g.n_ops, problem.n_devices
    p = placement.tolist()
    cost = problem.compute_us[np.arange(n), placement].tolist()
    bw, lat = (a.tolist() for a in link_matrices(problem, params))
    succ = [g.succ_idx[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist() for i in range(n)]
    ebytes = [g.edge_bytes[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist() for i in range(n)]
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
    while ev:
        t, kind, a, b = heapq.heappop(ev)
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
            heapq.heappush(ev, (end, 0, c, 0))
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
            heapq.heappush(ev, (t + dur, 0, u, 1))
            heapq.heappush(ev, (t + dur + bus_gap, 1, a, 0))
    for d in dirty:
        peak[d] = max(peak[d], level[d])
    return last, np.array(peak) + problem.resident_bytes(placement)


# ---------------------------------------------------------------------------- timing
CLOCK = time.thread_time  # CPU time of this thread: what one core spends (see --wall)


def median_time(fn, repeat: int, min_total_s: float = 0.0) -> float:
    """Median seconds per call of ``fn`` (after one warm-up call) on :data:`CLOCK`."""
    fn()
    ts = []
    t_start = time.perf_counter()
    while len(ts) < repeat or time.perf_counter() - t_start < min_total_s:
        t = CLOCK()
        fn()
        ts.append(CLOCK() - t)
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


def placements(problem, rng):
    gpus = np.array([d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "gpu"])
    n = problem.n_ops
    return {
        "single": feasible(problem, np.full(n, gpus[0])),
        "blocks": feasible(problem, gpus[np.arange(n) * len(gpus) // n]),
        "random": feasible(problem, rng.choice(gpus, n)),
    }


def bench_graph(name, problem, args, rows):
    prm = SimParams.placeto()
    rng = np.random.default_rng(0)
    n = problem.n_ops
    for pname, p in placements(problem, rng).items():
        p = p.astype(np.int64)
        eng = Engine(problem, prm)
        t_c = median_time(lambda: eng.objective(p), args.repeat, 0.2)
        mk_c, peak_c = eng.makespan_us, eng.peak_memory_bytes.copy()
        py_rep = 1 if n > 20000 else 3
        t_py = median_time(lambda: python_sim(problem, p, prm), py_rep)
        mk_py, peak_py = python_sim(problem, p, prm)
        same = mk_py == mk_c and np.allclose(peak_py, peak_c, rtol=1e-12, atol=0)
        eng_p2p = Engine(problem, SimParams.placeto(comm_model="p2p"))
        t_p2p = median_time(lambda: eng_p2p.objective(p), args.repeat, 0.1)
        t_full = median_time(lambda: simulate(problem, p, prm), max(3, args.repeat // 10))
        rows.append((name, n, pname, t_c, t_py, same, t_p2p, t_full))
        print(f"{name:<28} {n:>6} {pname:<7} {t_c * 1e3:>9.3f} {1 / t_c:>9.0f} {t_c / n * 1e9:>7.1f} "
              f"{t_py * 1e3:>9.1f} {t_py / t_c:>7.0f}x {'yes' if same else 'NO':>5} {t_p2p * 1e3:>9.3f} "
              f"{t_full * 1e3:>9.2f}", flush=True)
        if not same:
            print(f"  MISMATCH makespan {mk_c} vs {mk_py}, peaks {peak_c} vs {peak_py}", file=sys.stderr)


def bench_batch(problem, k=64):
    prm = SimParams.placeto()
    rng = np.random.default_rng(1)
    gpus = np.array([d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "gpu"])
    P = np.array([feasible(problem, q) for q in rng.choice(gpus, (k, problem.n_ops))])
    ref = np.array([evaluate(problem, q, prm) for q in P])
    for jobs in (1, 2):
        walls, cpus = [], []
        for _ in range(5):
            w, c = time.perf_counter(), time.process_time()
            out = evaluate_many(problem, P, prm, n_jobs=jobs)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        ok = np.array_equal(out.objective, ref)
        w, c = float(np.median(walls)), float(np.median(cpus))
        print(f"  {problem.n_ops} ops, batch of {k} random placements, n_jobs={jobs}: wall {w * 1e3:.1f} ms "
              f"({k / w:.0f} sims/s), process CPU {c * 1e3:.1f} ms ({k / c:.0f} sims per CPU-second)"
              f"{'' if ok else '  MISMATCH'}")


def bench_incremental(name, problem, steps=200):
    """A Placeto-style sweep: visit ops in topological order (evenly spaced), move each (with its
    colocation group) to a random GPU it can run on; time IncrementalSim against a full objective
    evaluation of the same placement (thread CPU time; the Python bookkeeping of both included)."""
    prm = SimParams.placeto()
    rng = np.random.default_rng(2)
    gpus = [d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "gpu"]
    n = problem.n_ops
    lead = prepared(problem).leader
    ok = np.isfinite(problem.compute_us)
    p0 = feasible(problem, np.asarray(gpus)[np.arange(n) * len(gpus) // n])
    inc = IncrementalSim(problem, prm, p0)
    eng = Engine(problem, prm)
    q = p0.copy()  # warm up: load the compiled full run and restart from numba's cache
    q[-1] = gpus[(gpus.index(int(p0[-1])) + 1) % len(gpus)] if p0[-1] in gpus else p0[-1]
    inc.full_below, full_below = -1.0, inc.full_below
    inc.update(feasible(problem, q))
    inc.update(p0)
    inc.full_below = full_below
    eng.objective(p0)
    inc.stats.update(full=1, restarts=0, replayed_fraction_sum=0.0)
    t_inc, t_full, bad = [], [], 0
    for v in np.linspace(0, n - 1, steps).astype(int).tolist():
        members = np.flatnonzero(lead == lead[v])
        choices = [d for d in gpus if d != inc.placement[v] and ok[members, d].all()]
        if not choices:
            continue
        d = int(rng.choice(choices))
        if len(members) == 1:
            t = CLOCK()
            o = inc.move(v, d)
            t_inc.append(CLOCK() - t)
        else:
            q = inc.placement
            q[members] = d
            t = CLOCK()
            o = inc.update(q)
            t_inc.append(CLOCK() - t)
        q = inc.placement
        t = CLOCK()
        o2 = eng.objective(q)
        t_full.append(CLOCK() - t)
        bad += o != o2
    st = inc.stats
    frac = st["replayed_fraction_sum"] / max(st["restarts"], 1)
    print(f"  {name:<34} {n:>6} {len(t_inc):>6} {np.mean(t_inc) * 1e6:>10.0f} {np.mean(t_full) * 1e6:>10.0f} "
          f"{np.mean(t_full) / np.mean(t_inc):>7.2f}x {frac:>9.2f} {st['full'] - 1:>5} {bad:>5}")


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
    ap.add_argument("--wall", action="store_true", help="time with wall-clock time instead of thread CPU time")
    args = ap.parse_args(argv)
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    sizes = [s for s in args.sizes if not args.quick or s <= 10000]
    cluster = preset("k80x4")
    print(f"k80x4 preset, SimParams.placeto(); medians of {'wall' if args.wall else 'thread CPU'} time")
    print(f"{'graph':<28} {'ops':>6} {'place':<7} {'comp ms':>9} {'sims/s':>9} {'ns/op':>7} {'python ms':>9} "
          f"{'ratio':>8} {'same':>5} {'p2p ms':>9} {'full ms':>9}")
    rows = []
    problems = {}
    for n in sizes:
        P = Problem(layered_training_graph(n, seed=0), cluster)
        problems[n] = P
        bench_graph(f"synthetic-{n}", P, args, rows)
    if not args.no_real and SHARED.exists():
        for name, g in real_graphs():
            bench_graph(name, Problem(g, cluster), args, rows)
    print("\nbatch API (placer.sim.evaluate_many)")
    for n in sizes:
        if n <= 10000:
            bench_batch(problems[n])
    print("\nincremental path (placer.sim.IncrementalSim) vs full objective, Placeto-style sweep (means, us)")
    print(f"  {'graph':<34} {'ops':>6} {'moves':>6} {'incr':>10} {'full':>10} {'speedup':>8} {'replayed':>9} "
          f"{'fulls':>5} {'wrong':>5}")
    for n in sizes:
        if n <= 10000:
            bench_incremental(f"synthetic-{n}", problems[n])
    if not args.no_real and SHARED.exists():
        for name, g in real_graphs():
            if any(k in name for k in ("nasnet", "inference", "resnet50_training")):
                bench_incremental(name, Problem(g, cluster))
    ratios = [r[4] / r[3] for r in rows]
    print(f"\nspeed-up over pure Python: median {np.median(ratios):.0f}x, min {min(ratios):.0f}x, "
          f"max {max(ratios):.0f}x; all results equal: {all(r[5] for r in rows)}")


if __name__ == "__main__":
    main()
