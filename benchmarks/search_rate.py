"""Placements per second of each search method beside the simulator's raw batched rate (issue 64).

For each graph (three sizes: the 400-op synthetic demo graph, Inception-V3's 2,042 ops, NMT-8's
20,771 ops) every search method of ``placer compare``'s default line-up (random, anneal,
local-search, post) runs with ``--placements`` placements (seed 0, one thread). Every placement it
hands the simulator is kept (a wrapper on ``placer.sim.fast``'s reference to the kernel; the
compiled code is untouched), and the same placements are then simulated again in one batch
(``evaluate_many``, one thread) in the same run: the raw rate the search would reach if simulating
were all it did. Rates are per CPU second of this process (load on a shared machine stretches wall
time, not CPU time); ``ratio`` is the search's rate over the raw rate (1.0: nothing but simulation),
``in sim`` the kernel's share of the search's CPU time. The methods run one after another on one
Problem, as in ``placer compare``, so starting placements the searches share (kept with the
Problem) are paid by the first search that needs them.

    python benchmarks/search_rate.py                        # 300 placements per method and graph
    python benchmarks/search_rate.py --placements 2000 --graphs inception_v3:k80x2
    python benchmarks/search_rate.py --methods anneal,local-search
"""

from __future__ import annotations

import argparse
import os
import time
import types

import numpy as np

GRAPHS = ("synthetic:k80x2", "inception_v3:k80x2", "nmt8:k80x8")
SEARCHES = ("random", "anneal", "local-search", "post")


class Recorder:
    """Keeps the placements handed to the kernel's entry points and their thread CPU seconds."""

    def __init__(self, cap: int):
        self.cap = cap
        self.reset()

    def reset(self):
        self.kept: list[np.ndarray] = []
        self.sims = 0
        self.cpu = 0.0

    def install(self):
        import placer.sim.fast as fast

        kernel = fast.K
        proxy = types.SimpleNamespace(**{k: getattr(kernel, k) for k in dir(kernel) if not k.startswith("__")})
        full, batch = kernel.sim_full, kernel.sim_batch

        def sim_full(*a):
            c = time.thread_time()
            try:
                return full(*a)
            finally:
                self.cpu += time.thread_time() - c
                self.sims += 1
                if len(self.kept) < self.cap:
                    self.kept.append(np.array(a[5], dtype=np.int64))

        def sim_batch(*a):
            c = time.thread_time()
            try:
                return batch(*a)
            finally:
                self.cpu += time.thread_time() - c
                lo, hi = int(a[6]), int(a[7])
                self.sims += hi - lo
                for row in a[5][lo:hi][:max(0, self.cap - len(self.kept))]:
                    self.kept.append(np.array(row, dtype=np.int64))

        proxy.sim_full, proxy.sim_batch = sim_full, sim_batch
        fast.K = proxy


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--placements", type=int, default=300, help="budget of each search (1 to 100,000)")
    ap.add_argument("--graphs", default=",".join(GRAPHS), help="comma-separated GRAPH:CLUSTER")
    ap.add_argument("--methods", default=",".join(SEARCHES))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not 1 <= args.placements <= 100_000:
        ap.error("--placements: 1 to 100,000")

    from placer.cli.common import load_problem
    from placer.methods import Budget, run_method
    from placer.sim import SimParams, evaluate_many

    rec = Recorder(cap=args.placements + 200)  # a search's starts can add a few to its budget's placements
    rec.install()
    warm = load_problem("synthetic", "k80x2")  # imports and first calls (torch for post) kept out of the timings,
    for name in args.methods.split(","):  # on a problem of its own (a search's starts are kept with its problem)
        run_method(name, warm, Budget(placements=2), args.seed)
    print(f"seed {args.seed}, --placements {args.placements}, one thread; load average {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} cores); rates per CPU second")
    print(f"{'graph':<14} {'ops':>6} {'method':<13} {'placements':>10} {'sims':>6} {'cpu s':>7} {'wall s':>7} "
          f"{'search/s':>9} {'raw/s':>8} {'ratio':>6} {'in sim':>6}")
    for spec in args.graphs.split(","):
        graph, _, cluster = spec.partition(":")
        P = load_problem(graph, cluster or "auto")
        sp = SimParams.preset("default", P.cluster)
        evaluate_many(P, np.zeros((2, P.n_ops), dtype=np.int64), sp)  # compiled (or loaded) before any timing
        for name in args.methods.split(","):
            rec.reset()
            w, c = time.perf_counter(), time.process_time()
            r = run_method(name, P, Budget(placements=args.placements), args.seed, sp)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            n_placed, kernel_cpu, sims = r.cost.placements, rec.cpu, rec.sims
            X = np.stack(rec.kept) if rec.kept else np.zeros((0, P.n_ops), dtype=np.int64)
            raw = float("nan")
            if len(X):
                c = time.process_time()
                evaluate_many(P, X, sp, n_jobs=1)
                raw = len(X) / max(time.process_time() - c, 1e-9)
            rate = n_placed / max(cpu, 1e-9)
            print(f"{graph:<14} {P.n_ops:>6} {name:<13} {n_placed:>10,} {sims:>6} {cpu:>7.2f} {wall:>7.2f} "
                  f"{rate:>9.0f} {raw:>8.0f} {rate / raw:>6.2f} {kernel_cpu / max(cpu, 1e-9):>6.0%}", flush=True)


if __name__ == "__main__":
    main()
