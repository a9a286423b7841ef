"""Profile the whole line-up of ``placer compare`` (issue 64): where the main job's time goes.

Runs what ``placer compare GRAPH --cluster CLUSTER --jobs 1`` runs, in this process, each step timed
(wall and process CPU seconds) and profiled with cProfile: graph load, problem build, the simulator's
warm-up (compilation), every method of the default line-up (or ``--methods``), the single-device
baseline and the table's ratios. For each step it prints the simulator's share: the calls into the
compiled kernel's entry points (``kernel.sim_full`` from an Engine, ``kernel.sim_batch`` from
``evaluate_many``), their count and the seconds spent inside them, and the top cProfile entries
outside the simulator (by own time; ``placer/sim`` and the timing wrappers left out).

    python benchmarks/profile_lineup.py                                  # the README's main job
    python benchmarks/profile_lineup.py nmt8 --cluster k80x8 --top 8
    python benchmarks/profile_lineup.py --methods dp-split,heft --top 15

The kernel is timed through a wrapper installed on ``placer.sim.fast``'s reference to the kernel
module (the compiled code itself is untouched, so the same results); each call pays about a
microsecond for it. Methods with kernels of their own (doppler's rollout, the published objectives)
count as outside the simulator.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import types

import numpy as np

SIM_DIR = os.sep + os.path.join("placer", "sim") + os.sep


class KernelClock:
    """Counts and times the calls into the simulator's compiled entry points."""

    ENTRIES = ("sim_full", "sim_batch")

    def __init__(self):
        self.calls = {k: 0 for k in self.ENTRIES}
        self.seconds = {k: 0.0 for k in self.ENTRIES}
        self.cpu = {k: 0.0 for k in self.ENTRIES}  # thread CPU seconds of the calling thread
        self.sims = 0  # simulations: one per sim_full call, hi - lo per sim_batch call

    def install(self):
        import placer.sim.fast as fast

        kernel = fast.K
        proxy = types.SimpleNamespace(**{k: getattr(kernel, k) for k in dir(kernel) if not k.startswith("__")})
        for name in self.ENTRIES:
            setattr(proxy, name, self._wrap(name, getattr(kernel, name)))
        fast.K = proxy

    def _wrap(self, name, fn):
        clock = time.perf_counter
        calls, seconds, cpu, thread_clock = self.calls, self.seconds, self.cpu, time.thread_time

        def timed_kernel(*args):
            t, c = clock(), thread_clock()
            try:
                return fn(*args)
            finally:
                seconds[name] += clock() - t
                cpu[name] += thread_clock() - c
                calls[name] += 1
                self.sims += 1 if name == "sim_full" else int(args[7]) - int(args[6])

        return timed_kernel

    def snapshot(self):
        return sum(self.calls.values()), self.sims, sum(self.seconds.values()), sum(self.cpu.values())


def outside_sim(stats: pstats.Stats, top: int) -> list[tuple[float, float, int, str]]:
    """The ``top`` entries by own time whose code is not the simulator's."""
    rows = []
    for (file, line, func), (cc, nc, tt, ct, _) in stats.stats.items():
        if SIM_DIR in file or func == "timed_kernel":
            continue
        short = file
        k = file.rfind(os.sep + "placer" + os.sep)
        if k >= 0:
            short = file[k + 1:]
        elif file.startswith("~"):
            short = "~"
        else:
            short = os.path.basename(file)
        rows.append((tt, ct, nc, f"{short}:{line}({func})"))
    rows.sort(reverse=True)
    return rows[:top]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph", nargs="?", default="default", help="graph (default: the README's main job's)")
    ap.add_argument("--cluster", default="auto")
    ap.add_argument("--methods", default="default", help="comma-separated, or 'default'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=6, help="cProfile entries outside the simulator per step")
    args = ap.parse_args(argv)

    clock = KernelClock()
    steps = []  # (name, wall, cpu, kernel calls, sims, kernel s, kernel cpu s, top rows, note)

    def step(name, fn, note=""):
        prof = cProfile.Profile()
        s0 = clock.snapshot()
        w, c = time.perf_counter(), time.process_time()
        prof.enable()
        try:
            out = fn()
        finally:
            prof.disable()
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        s1 = clock.snapshot()
        rows = outside_sim(pstats.Stats(prof), args.top)
        steps.append((name, wall, cpu, s1[0] - s0[0], s1[1] - s0[1], s1[2] - s0[2], s1[3] - s0[3], rows, note))
        return out

    t_all = time.perf_counter()
    from placer.compare import compare_methods, default_methods, out_of_range, scaled_budgets  # noqa: F401
    from placer.compare import _run_one
    from placer.cli.common import sim_params
    from placer.problem import Problem
    from placer.resolve import default_graph_name, resolve_cluster, resolve_graph
    from placer.sim import warm_up
    from placer.sim.single import over_single, single_device

    t_import = time.perf_counter() - t_all
    clock.install()
    spec = default_graph_name() if args.graph == "default" else args.graph
    g = step("load graph", lambda: resolve_graph(spec))
    c = resolve_cluster(args.cluster, g, spec)
    P = step("build problem", lambda: Problem(g, c))
    _ = step("problem lower bound", lambda: P.lower_bound_us)
    names = default_methods() if args.methods == "default" else args.methods.split(",")
    skip = out_of_range(P, names) if args.methods == "default" else {}
    scaled = scaled_budgets(P, names) if args.methods == "default" else {}
    sp = sim_params("default", P)
    step("simulator warm-up", lambda: warm_up(P, sp), "numba compile or cache load")
    results = {}
    for name in names:
        if name in skip:
            steps.append((name, 0.0, 0.0, 0, 0, 0.0, 0.0, [], skip[name][:70]))
            continue
        budget = scaled.get(name)
        _, r, _ = step(name, lambda: _run_one(P, name, budget, args.seed, sp, None, name in scaled),
                       f"{budget:,} placements (scaled)" if budget else "")
        results[name] = r

    def table():
        for r in results.values():
            if not isinstance(r, str):
                over_single(P, sp, r.step_time_us, bool(r.sim.oom))
        return single_device(P, sp)

    step("single device + table ratios", table)
    total = time.perf_counter() - t_all

    print(f"{g.name} ({P.n_ops:,} ops) on {P.cluster.name}; seed {args.seed}; jobs 1 (in this process); "
          f"load average {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    print(f"imports {t_import:.2f} s; whole run {total:.1f} s wall")
    print(f"\n{'step':<30} {'wall s':>8} {'cpu s':>8} {'kcalls':>7} {'sims':>7} {'kernel s':>9} {'kern cpu':>9} "
          f"{'in sim':>7} {'sims/cpu s':>10} {'best':>10}  note")
    print(f"{'':<30} {'':>8} {'':>8} {'':>7} {'':>7} {'(wall)':>9} {'s':>9} {'(cpu)':>7}")
    tot = np.zeros(5)
    for name, wall, cpu, kc, sims, ks, kcpu, _, note in steps:
        r = results.get(name)
        best = "" if r is None else ("n/a" if isinstance(r, str) else f"{r.value_us / 1e3:.1f} ms")
        rate = f"{sims / cpu:>10.0f}" if sims and cpu > 0 else f"{'':>10}"
        share = f"{kcpu / cpu:>6.0%}" if cpu > 0 else f"{'':>6}"
        print(f"{name:<30} {wall:>8.2f} {cpu:>8.2f} {kc:>7} {sims:>7} {ks:>9.2f} {kcpu:>9.2f} {share} {rate} "
              f"{best:>10}  {note}")
        tot += (wall, cpu, sims, ks, kcpu)
    print(f"{'total':<30} {tot[0]:>8.2f} {tot[1]:>8.2f} {'':>7} {int(tot[2]):>7} {tot[3]:>9.2f} {tot[4]:>9.2f} "
          f"{tot[4] / tot[1]:>6.0%}")
    print("in sim: the kernel's thread CPU seconds over the step's process CPU seconds (a share that load "
          "does not skew as it skews wall time)")
    print(f"\ntop {args.top} cProfile entries outside the simulator per step (own s, cumulative s, calls):")
    for name, wall, *_, rows, note in steps:
        if not rows or wall < 0.05:
            continue
        print(f"-- {name} ({wall:.2f} s)")
        for tt, ct, nc, where in rows:
            print(f"   {tt:>7.2f} {ct:>8.2f} {nc:>8}  {where}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
