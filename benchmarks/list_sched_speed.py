"""List schedulers' speed: HEFT, m-ETF and m-SCT side by side (issue 55's target: m-ETF and m-SCT
within 3x of HEFT's time at 1k, 10k and 20k ops).

For generated training graphs (``placer.zoo.synthetic.layered_training_graph``) of 1k, 10k and 20k
ops, and optionally zoo graphs by name (``--graph nmt8``: 20,771 ops), on the k80x8 preset with the
registered methods' settings (GPUs only, conservative memory, the simulator's communication model,
default ``SimParams``), one row per graph:

* the schedule time of HEFT, m-ETF and m-SCT (m-SCT also split into picking its favourite children,
  by the registered default, the greedy matching along the longest paths, and its ETF pass), median
  of ``--runs`` runs, and the ratios m-ETF / HEFT, m-SCT / HEFT;
* the implementation before the rewrite (commit ``OLD``, read with ``git show``, its method
  registrations left out) where feasible (graphs up to ``--old-max`` ops, one run), its placement
  checked equal to the new one (m-SCT's with ``favourites="lp"``, the LP it solved), and the
  speed-up (m-SCT's: the old LP form against the new default).

Times are CPU seconds of the process (``time.process_time``: robust to the other processes on a
shared machine); ``--wall`` uses wall-clock time. Run: ``python benchmarks/list_sched_speed.py``
(``--quick``: 1k and 10k only).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

OLD = "a5c1ab9"  # the list schedulers as they were before issue 55's rewrite
ROOT = Path(__file__).resolve().parents[1]


def _names_at_old() -> dict:
    """The modules the old code imports, under the names they had at ``OLD`` (issue 67 moved them:
    methods/sct_lp.py is list_scheduling/favourites.py, methods/support.py was split by role)."""
    from placer.methods import devices, links, memory_repair
    from placer.methods.list_scheduling import favourites, state

    support = types.ModuleType("placer.methods.support")
    for m in (links, devices, memory_repair, state):
        support.__dict__.update({k: v for k, v in vars(m).items() if not k.startswith("_")})
    return {"placer.methods.support": support, "placer.methods.sct_lp": favourites}


def old_module():
    """The old list_scheduling module from git, without its registrations (None where git has no such commit)."""
    try:
        src = subprocess.run(["git", "show", f"{OLD}:src/placer/methods/list_scheduling.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    src = src[:src.index("# ---------------------------------------------------------------------- registered methods")]
    mod = types.ModuleType("list_scheduling_old")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    names = _names_at_old()
    saved = {k: sys.modules.get(k) for k in names}
    sys.modules.update(names)
    try:
        exec(compile(src, f"{OLD}:list_scheduling.py", "exec"), mod.__dict__)  # noqa: S102 (our own code from git)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def timed(fn, clock, *args, **kw):
    t = clock()
    out = fn(*args, **kw)
    return clock() - t, out


def sct_parts(ls, pr, sp, gpus, clock):
    """m-SCT as its two parts: its favourite children (the registered default), then the ETF pass keeping them."""
    from placer.methods.list_scheduling.schedulers import SctConfig
    from placer.methods.list_scheduling.favourites import FAVOURITES

    s = ls.State(pr, sp, gpus, "conservative")
    t_lp, fav = timed(FAVOURITES[SctConfig().favourites], clock, pr, s.mean_cost(), s.mean_edge_comm())
    t_etf, sched = timed(ls.etf_schedule, clock, pr, sp, gpus, "conservative", favourite_child=fav, comm="sim")
    return t_lp, t_etf, sched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 20000])
    ap.add_argument("--graph", action="append", default=[], help="a zoo graph by name (nmt8, gnmt, ...)")
    ap.add_argument("--cluster", default="k80x8")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--old-max", type=int, default=10000, help="time the old code on graphs up to this many ops")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--wall", action="store_true")
    a = ap.parse_args()
    from placer.cluster import preset
    from placer.methods.list_scheduling import schedulers as ls
    from placer.methods.devices import gpu_devices
    from placer.problem import Problem
    from placer.sim import SimParams
    from placer.zoo.synthetic import layered_training_graph

    clock = time.perf_counter if a.wall else time.process_time
    sizes = [s for s in a.sizes if not (a.quick and s > 10000)]
    graphs = [(f"synthetic-{n}", lambda n=n: layered_training_graph(n, seed=0)) for n in sizes]
    if a.graph:
        from placer.resolve import resolve_graph

        graphs += [(name, lambda name=name: resolve_graph(name)) for name in a.graph]
    old = old_module()
    sp = SimParams()
    print(f"cluster {a.cluster}, GPUs only, conservative memory, comm=sim; {'wall' if a.wall else 'CPU'} seconds, "
          f"median of {a.runs}; old = commit {OLD} (one run, up to {a.old_max:,} ops)")
    head = (f"{'graph':<18}{'ops':>7}{'HEFT':>8}{'m-ETF':>8}{'m-SCT':>8}{'(fav':>8}{'+ETF)':>7}"
            f"{'ETF/HEFT':>10}{'SCT/HEFT':>10} | {'old HEFT':>9}{'old ETF':>9}{'old SCT':>9}  speed-up H/E/S  same")
    print(head)
    print("-" * len(head))
    for name, make in graphs:
        g = make()
        pr = Problem(g, preset(a.cluster))
        gpus = gpu_devices(pr)
        args = (pr, sp, gpus, "conservative")
        th, te, tl, tse = [], [], [], []
        for _ in range(a.runs):
            t, h = timed(ls.heft_schedule, clock, *args, comm="sim")
            th.append(t)
            t, e = timed(ls.etf_schedule, clock, *args, comm="sim")
            te.append(t)
            t_lp, t_etf, _ = sct_parts(ls, pr, sp, gpus, clock)
            tl.append(t_lp)
            tse.append(t_etf)
        mh, me = statistics.median(th), statistics.median(te)
        ml, mse = statistics.median(tl), statistics.median(tse)
        ms = statistics.median([x + y for x, y in zip(tl, tse)])
        row = (f"{name:<18}{g.n_ops:>7,}{mh:>8.2f}{me:>8.2f}{ms:>8.2f}{ml:>8.2f}{mse:>7.2f}"
               f"{me / mh:>9.2f}x{ms / mh:>9.2f}x | ")
        if old is not None and g.n_ops <= a.old_max:
            oh, h0 = timed(old.heft_schedule, clock, *args, comm="sim")
            oe, e0 = timed(old.etf_schedule, clock, *args, comm="sim")
            os_, s0 = timed(old.sct_schedule, clock, *args, comm="sim")
            lp = ls.sct_schedule(*args, comm="sim", favourites="lp")  # the form the old code had
            same = all(np.array_equal(x.placement, y.placement) for x, y in ((h0, h), (e0, e), (s0, lp)))
            row += f"{oh:>9.2f}{oe:>9.2f}{os_:>9.2f}  {oh / mh:>5.1f} {oe / me:>5.1f} {os_ / ms:>5.1f}  {same}"
        else:
            row += f"{'-':>9}{'-':>9}{'-':>9}  {'':>17}  -"
        print(row, flush=True)


if __name__ == "__main__":
    main()
