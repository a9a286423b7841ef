"""Learned placers against local search on model / cluster pairs that no committed table uses.

The tables of REPRODUCTION.md place the papers' models on the papers' K80 clusters, and the learned
methods' defaults were measured on those and on the generated families. This script asks the question
a user with another model or cluster asks: at the same number of simulated placements, how far is each
learned method from local search (the strongest classical search), and from one GPU? Rows pair zoo
models with presets the tables leave out (A100 / H100 nodes, K80 counts other than the papers'), one
seed each, the default simulator. Per row: step time (ms) of every method, its ratio to local search,
and whether it ran out of memory; then the geometric mean and worst ratio per method.

    python benchmarks/holdout.py                    # 2,000 placements, every row (about 10 min of method time here)
    python benchmarks/holdout.py --quick            # 300 placements, three rows
    python benchmarks/holdout.py --methods post --placements 600 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from placer.bench.tables import geomean
from placer.cluster import preset
from placer.methods.base import Budget, run_method
from placer.problem import Problem
from placer.zoo import zoo_graph

ROWS = (("gpt2", "a100x8"), ("bert_base", "h100x8"), ("resnet50", "a100x8"), ("inception_v3", "h100x8"),
        ("nasnet_mobile", "k80x4"), ("rnnlm", "k80x4"), ("gnmt", "k80x8"), ("bert_large", "k80x8"))
QUICK_ROWS = ROWS[:3]
REFERENCE = "local-search"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="post,placeto", help="learned methods, comma-separated")
    ap.add_argument("--placements", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="300 placements, three rows")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    rows = QUICK_ROWS if args.quick else ROWS
    budget = Budget(placements=300 if args.quick else args.placements)
    methods = ["single-gpu", REFERENCE] + [m for m in args.methods.split(",") if m]
    print(f"{budget.placements:,} placements per searching method, seed {args.seed}, default simulator; "
          f"ms (ratio to {REFERENCE}; OOM: out of memory); seconds in brackets")
    print(f"{'model':<14} {'cluster':<8} {'ops':>6} " + " ".join(f"{m:>24}" for m in methods))
    out, ratios = [], {m: [] for m in methods}
    for graph, cluster in rows:
        problem = Problem(zoo_graph(graph), preset(cluster))
        got = {}
        for m in methods:
            t = time.perf_counter()
            r = run_method(m, problem, budget, seed=args.seed)
            got[m] = (r.step_time_us / 1e3, bool(r.sim.oom), time.perf_counter() - t)
        ref = got[REFERENCE][0]
        cells = []
        for m in methods:
            ms, oom, s = got[m]
            ratios[m].append(ms / ref)
            cells.append(f"{ms:>9,.1f} ({ms / ref:.3f}){' OOM' if oom else '    '} [{s:>4.0f}]")
        print(f"{graph:<14} {cluster:<8} {problem.n_ops:>6} " + " ".join(f"{c:>24}" for c in cells), flush=True)
        out.append({"graph": graph, "cluster": cluster, "ops": problem.n_ops,
                    **{m: {"ms": v[0], "oom": v[1], "seconds": v[2]} for m, v in got.items()}})
    print(f"\n{'method':<14} {'geo-mean x ' + REFERENCE:>26} {'worst':>8} {'rows within 5%':>15}")
    for m in methods:
        r = np.array(ratios[m])
        print(f"{m:<14} {geomean(ratios[m]):>26.3f} {r.max():>8.3f} {int((r <= 1.05).sum()):>9} of {len(r)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"placements": budget.placements, "seed": args.seed, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
