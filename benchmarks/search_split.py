"""Where local search's and annealing's time goes: simulation, proposing moves, building the starts,
and the rest (issue 64's target: at least 60% inside the simulator on Inception-V3, NASNet and NMT-8).

For each graph (a zoo name or a graph file, with its cluster: ``inception_v3:k80x2``) and each method,
one run at ``--seed`` with the placements the default ``placer compare`` line-up gives it
(:func:`placer.compare.scaled_budgets`: 20,000 up to 2,500 ops, 50 million simulated ops beyond)
or ``--placements``, after a short run that compiles the simulator. The time of every call below is
summed, a call inside another counted once, in the innermost:

* ``sim``: the simulator itself (``placer.sim`` batch evaluation, full simulations and single
  objectives, through the method's evaluator or not);
* ``propose``: the move set's proposals and kicks (``_Search.proposals``, ``_Search.kick``: the
  critical path, the candidate moves);
* ``starts``: the seeding heuristics (``seed_placements``: HEFT, m-ETF, ... computed or taken from the
  starts shared in the process, :mod:`placer.methods.start_cache`), less the simulations they run;
* ``other``: the rest (the search loop, the evaluator's bookkeeping, building batches).

Times are CPU seconds of this process (``time.process_time``, robust to other processes on a shared
machine; ``--clock wall`` for wall-clock). Each method runs on its own Problem object, so it builds
its own starts (as the first search of a ``placer compare`` does); ``--shared`` runs them on one
Problem, so that the second takes the first's starts. The timers are patched in for this script's
run only. Run: ``python benchmarks/search_split.py [--graphs inception_v3:k80x2,nmt8:k80x8]``.

Measured (issue 64, 2 cores shared with other work, load 6-18, seed 0, the line-up's placements), the
simulator's share of local search / anneal before -> after the starts were shared and the moves
compiled (the same placements): Inception-V3 k80x2 47 / 42% -> 64 / 74% (proposing moves 33 / 49% ->
9 / 11%); NASNet-A mobile k80x2 42 / 37% -> 52 / 60% (its starts, HEFT, m-ETF and m-SCT's linear
program, 42 / 32%); NMT-8 k80x8 64 / 54% -> 86 / 84%. With ``--shared`` the second search takes the
first's starts: anneal 82% (Inception-V3) and 87% (NASNet) inside the simulator.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager

CATS = ("sim", "propose", "starts", "other")


class Split:
    """Exclusive time per category: a call's time goes to its category less its timed callees'."""

    def __init__(self, clock):
        self.clock = clock
        self.total = dict.fromkeys(CATS, 0.0)
        self.stack: list[list] = []  # [category, start, time of timed callees]

    def wrap(self, cat: str, fn):
        def timed(*a, **k):
            self.stack.append([cat, self.clock(), 0.0])
            try:
                return fn(*a, **k)
            finally:
                c, t0, inner = self.stack.pop()
                spent = self.clock() - t0
                self.total[c] += spent - inner
                if self.stack:
                    self.stack[-1][2] += spent
        timed.__wrapped__ = fn
        return timed


@contextmanager
def timers(split: Split):
    """The timers patched into the simulator, the move set and the seeding (restored after)."""
    import placer.sim as sim
    import placer.sim.fast as fast
    from placer.methods import local_search

    patches = [(sim, "evaluate_many", "sim"), (fast, "evaluate_many", "sim"), (fast.Engine, "objective", "sim"),
               (fast.Engine, "result", "sim"), (local_search._Search, "proposals", "propose"),
               (local_search._Search, "kick", "propose"), (local_search, "seed_placements", "starts")]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, cat in patches:
            setattr(obj, name, split.wrap(cat, getattr(obj, name)))
        yield
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)


def problem_of(spec: str):
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph

    graph, _, cluster = spec.rpartition(":")
    g = resolve_graph(graph)
    return Problem(g, resolve_cluster(cluster, g))


def run(spec: str, method: str, placements: int | None, seed: int, clock, problem=None) -> dict:
    from placer.compare import scaled_budgets
    from placer.methods import METHODS, Budget, run_method

    problem = problem or problem_of(spec)
    n = placements or scaled_budgets(problem, [method]).get(method, METHODS[method].config().placements)
    split = Split(clock)
    t0 = clock()
    with timers(split):
        r = run_method(method, problem, Budget(placements=n), seed)
    total = clock() - t0
    split.total["other"] += total - sum(split.total.values())
    return {"graph": spec, "ops": problem.n_ops, "method": method, "placements": r.cost.placements,
            "best_us": float(r.sim.objective_us), "total_s": total, **{k + "_s": v for k, v in split.total.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="inception_v3:k80x2,nasnet_mobile:k80x2,nmt8:k80x8",
                    help="comma-separated graph:cluster (zoo names or graph files)")
    ap.add_argument("--methods", default="local-search,anneal")
    ap.add_argument("--placements", type=int, default=None, help="placements per run (default: the line-up's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--shared", action="store_true", help="the methods of a graph on one Problem (shared starts)")
    a = ap.parse_args(argv)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    from placer.methods import Budget, run_method

    print(f"load average {os.getloadavg()[0]:.2f}; {a.clock} seconds; share of each run's time")
    print(f"{'graph':<26} {'method':<13} {'placements':>10} {'total s':>8} " + " ".join(f"{c:>8}" for c in CATS)
          + f" {'sims/s':>8}")
    for spec in a.graphs.split(","):
        shared = problem_of(spec) if a.shared else None
        warm = shared or problem_of(spec)
        run_method("local-search", warm, Budget(placements=8), a.seed, seeds="single-gpu")  # compile first
        for method in a.methods.split(","):
            d = run(spec, method, a.placements, a.seed, clock, shared)
            shares = " ".join(f"{100 * d[c + '_s'] / d['total_s']:>7.1f}%" for c in CATS)
            rate = d["placements"] / d["sim_s"] if d["sim_s"] > 0 else float("nan")
            print(f"{spec:<26} {method:<13} {d['placements']:>10,} {d['total_s']:>8.2f} {shares} {rate:>8.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
