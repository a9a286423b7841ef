"""Classical placers on the real graphs: step time, ratio to the lower bound, search wall-clock;
and, on small grouped problems, the CP-SAT optimum and every method's gap to it.

    python benchmarks/classical.py                      # a few minutes: PipeDream graphs on k80x2/4/8
    python benchmarks/classical.py --all                # + dnn-partitioning graphs on their clusters, zoo models
    python benchmarks/classical.py --graphs gnmt,vgg16 --presets k80x4 --ls-budget 20000 --cp-seconds 60

Real graphs are read from ../shared/graphs (or $PLACER_SHARED_GRAPHS); zoo models are added when
``placer.zoo.BUILTIN`` has them (names other than the synthetic ones). Each method runs once with
seed 0 through ``run_method`` (so its simulations are counted by the Evaluator); ``wall s`` is the
method's own wall-clock, search and simulations included.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from placer.cluster import preset
from placer.methods import METHODS, Budget, run_method
from placer.problem import Problem

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PLACER_SHARED_GRAPHS", REPO.parent / "shared" / "graphs"))
PIPEDREAM = ["gnmt", "vgg16", "resnet18", "resnet50", "inception_v3", "nasnetamobile"]
DNN = ["throughput-inputs/LayerGraphs/gnmt_training.json", "throughput-inputs/LayerGraphs/inceptionv3_training.json",
       "throughput-inputs/OperatorGraphs/bert_l-3_training.json", "throughput-inputs/OperatorGraphs/resnet50_training.json"]
METHOD_ORDER = ["single-gpu", "expert", "metis", "scotch", "mincut", "heft", "heft:free", "m-topo", "m-etf",
                "m-etf:free", "m-sct", "m-sct:free", "local-search", "anneal", "cp-sat"]  # NAME:free = comm="free"


def graphs(args):
    """(label, OpGraph, cluster presets or 'auto' with the file) to run."""
    from placer.frontends import load_any_graph
    from placer.frontends.dnn_partitioning import cluster_for

    want = set(args.graphs.split(",")) if args.graphs else None
    out = []
    for name in PIPEDREAM:
        f = SHARED / "pipedream" / f"{name}.txt"
        if f.exists() and (want is None or name in want):
            out.append((name, load_any_graph(f), [preset(p) for p in args.presets]))
    if args.all or want:
        for rel in DNN:
            f = SHARED / "dnn-partitioning" / rel
            if f.exists() and (want is None or f.stem in want):
                out.append((f.stem, load_any_graph(f), [cluster_for(f)]))
        from placer.zoo import BUILTIN
        for name, make in BUILTIN.items():
            if not name.startswith("synthetic") and (want is None or name in want):
                out.append((name, make(), [preset(p) for p in args.presets]))
    return out


def budget_for(name, args):
    if name in ("local-search", "anneal"):
        return Budget(placements=args.ls_budget)
    if name == "cp-sat":
        return Budget(seconds=args.cp_seconds)
    return Budget()


def run_all(pr, methods, args):
    rows = {}
    for name in methods:
        base, _, comm = name.partition(":")
        if METHODS[base].available():
            rows[name] = {"error": METHODS[base].available()}
            continue
        t = time.perf_counter()
        try:
            r = run_method(base, pr, budget_for(base, args), 0, **({"comm": comm} if comm else {}))
        except (ValueError, RuntimeError) as e:
            rows[name] = {"error": str(e).split(":")[0][:60]}
            continue
        rows[name] = {"step_us": r.step_time_us, "oom": bool(r.sim.oom), "wall_s": time.perf_counter() - t,
                      "placements": r.cost.placements, "extra": r.cost.extra}
    return rows


def fmt_table(title, pr, rows, ref_us=None, ref_name="LB"):
    lb = pr.lower_bound_us
    print(f"\n{title}: {pr.n_ops} ops, {pr.cluster.name}, lower bound {lb / 1e3:.2f} ms"
          + (f", CP-SAT answer {ref_us / 1e3:.3f} ms (gap = step / that - 1)" if ref_us else ""))
    head = f"  {'method':<13}{'step ms':>11}{'/ LB':>8}" + (f"{'gap':>9}" if ref_us else "") + f"{'wall s':>9}{'sims':>8}  note"
    print(head)
    for name, r in rows.items():
        if "error" in r:
            print(f"  {name:<13}{'n/a':>11}{'':>8}" + ("" if not ref_us else f"{'':>9}") + f"{'':>9}{'':>8}  {r['error']}")
            continue
        gap = f"{(r['step_us'] / ref_us - 1) * 100:>8.1f}%" if ref_us else ""
        note = "OOM" if r["oom"] else ""
        if r["extra"].get("status"):
            note += f" {r['extra']['status'].lower()}"
        print(f"  {name:<13}{r['step_us'] / 1e3:>11.2f}{r['step_us'] / lb:>8.2f}{gap}{r['wall_s']:>9.2f}"
              f"{r['placements']:>8}  {note.strip()}")


def _warm_up():
    """Compile the simulator's kernels before anything is timed."""
    from placer.methods.exact import grouped_problem  # noqa: F401
    from placer.sim import evaluate_many, simulate
    from placer.zoo.synthetic import layered_training_graph

    pr = Problem(layered_training_graph(20, seed=0), preset("k80x2"))
    simulate(pr, np.zeros(pr.n_ops, dtype=np.int64))
    evaluate_many(pr, np.zeros((2, pr.n_ops), dtype=np.int64))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", help="comma-separated graph names (default: the PipeDream graphs)")
    ap.add_argument("--presets", default="k80x2,k80x4,k80x8", type=lambda s: s.split(","))
    ap.add_argument("--methods", default=",".join(METHOD_ORDER), type=lambda s: s.split(","))
    ap.add_argument("--all", action="store_true", help="also the dnn-partitioning graphs and zoo models")
    ap.add_argument("--ls-budget", type=int, default=2000, help="placements for local-search / anneal")
    ap.add_argument("--cp-seconds", type=float, default=5.0, help="CP-SAT time limit on full graphs")
    ap.add_argument("--groups", type=int, default=16, help="tasks in each small grouped problem")
    ap.add_argument("--grouped-graphs", default="gnmt,resnet50,inception_v3")
    ap.add_argument("--grouped-presets", default="k80x2,k80x4,v100x8", type=lambda s: s.split(","))
    ap.add_argument("--exact-seconds", type=float, default=30.0, help="CP-SAT time limit on grouped problems")
    ap.add_argument("--skip-full", action="store_true", help="only the grouped problems")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods if m.partition(":")[0] in METHODS]
    _warm_up()
    t0 = time.perf_counter()
    print("== classical placers on real graphs (seed 0; step time = simulated, placeto comm model) ==")
    if not args.skip_full:
        for label, g, clusters in graphs(args):
            for c in clusters:
                pr = Problem(g, c)
                fmt_table(label, pr, run_all(pr, methods, args))
    # small grouped problems: CP-SAT's optimum (or best + bound) and each method's gap to it
    from placer.methods.exact import grouped_problem
    from placer.frontends import load_any_graph

    print(f"\n== small grouped problems ({args.groups} contiguous topological groups): gap to CP-SAT ==")
    for name in args.grouped_graphs.split(","):
        f = SHARED / "pipedream" / f"{name}.txt"
        if not f.exists():
            continue
        for pname in args.grouped_presets:
            gp = grouped_problem(Problem(load_any_graph(f), preset(pname)), args.groups)
            exact_args = argparse.Namespace(**{**vars(args), "cp_seconds": args.exact_seconds})
            cp = run_all(gp, ["cp-sat"], exact_args)["cp-sat"]
            rows = run_all(gp, [m for m in methods if m != "cp-sat"], args)
            rows["cp-sat"] = cp
            ref = cp.get("step_us")
            fmt_table(f"{name}-g{args.groups}", gp, rows, ref)
            if "extra" in cp:
                e = cp["extra"]
                print(f"  CP-SAT: model {e['status']}, model makespan {e['model_makespan_us'] / 1e3:.3f} ms, proven "
                      f"lower bound {e['lower_bound_us'] / 1e3:.3f} ms, simulated answer = bound: "
                      f"{e.get('proven_optimal', False)}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
