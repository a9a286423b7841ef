"""Post's Table 1 and Figure 2 on our simulator: Post versus its ablations (CE, PPO, PG) at the same
number of sampled placements (mean over seeds), and versus single GPU, expert and METIS.

    python benchmarks/post.py            # the paper's 2,400 placements, 3 seeds, every row available
    python benchmarks/post.py --quick    # 240 placements, 1 seed, three rows
    python benchmarks/post.py --rows inception_v3-2,nmt2-2 --placements 1200 --seeds 0,1 --json out.json
    python benchmarks/post.py --grouping metis:16    # the learned methods place 16 METIS groups

Each row uses the zoo model when ``placer.zoo.BUILTIN`` has it and otherwise a real profiled graph
from ../shared/graphs standing in for it (named in the ``graph`` column); a row with neither is
listed as missing. Times are simulated per-step seconds of the best placement found; OOM marks a
placement whose peak memory exceeds a device. "Reduction" is (PG - Post) / PG, as in the paper.
The learning-curve table (Figure 2) gives the median step time of each iteration's 12 sampled
placements (out-of-memory ones counted at Post's 100 s penalty) at fractions of the run; the
per-iteration mean, median and best are in the --json output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from placer.cluster import preset
from placer.methods import METHODS, Budget, run_method
from placer.problem import Problem

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"

# key, label, GPUs, zoo names, stand-in real graph, paper: single GPU, expert, METIS, PG, Post, reduction %
ROWS = (
    ("rnnlm-2", "RNNLM", 2, ("rnnlm",), None, 0.44, 0.89, 1.81, 0.66, 0.44, 33.3),
    ("resnet50-2", "ResNet-50", 2, ("resnet50", "resnet_50"), "pipedream/resnet50.txt", 0.86, 0.86, 4.47, 1.49, 0.86, 42.3),
    ("resnet200-2", "ResNet-200", 2, ("resnet200", "resnet_200"), None, 2.75, 2.75, 11.63, 3.62, 2.75, 24.0),
    ("resnet50-4", "ResNet-50", 4, ("resnet50", "resnet_50"), "pipedream/resnet50.txt", 0.86, 0.86, 4.21, 2.37, 0.86, 63.7),
    ("resnet101-8", "ResNet-101", 8, ("resnet101", "resnet_101"), None, 1.59, 1.59, 7.31, 2.90, 1.59, 45.2),
    ("inception_v3-2", "Inception-V3", 2, ("inception_v3",), "pipedream/inception_v3.txt", 1.79, 1.79, 6.76, 2.15, 1.30, 39.5),
    ("inception_v3-4", "Inception-V3", 4, ("inception_v3",), "pipedream/inception_v3.txt", 1.75, 1.75, 6.07, 1.82, 1.19, 34.6),
    ("inception_v3-8", "Inception-V3", 8, ("inception_v3",), "pipedream/inception_v3.txt", 1.78, 1.78, 7.35, 2.67, 1.29, 51.7),
    ("nmt2-2", "NMT (2-layer)", 2, ("nmt_2", "nmt2"), "pipedream/gnmt.txt", "OOM", 2.05, 7.47, 2.30, 1.22, 47.0),
    ("nmt4-4", "NMT (4-layer)", 4, ("nmt_4", "nmt4"), "pipedream/gnmt.txt", "OOM", 3.43, 11.04, 4.08, 2.13, 47.8),
    ("nmt8-8", "NMT (8-layer)", 8, ("nmt_8", "nmt8"), "pipedream/gnmt.txt", "OOM", 5.11, 12.74, 5.35, 2.20, 58.9),
)
QUICK_ROWS = ("resnet50-2", "inception_v3-2", "nmt2-2")
BASELINES = (("Single GPU", "single-gpu", False), ("Expert", "expert", False), ("Metis", "metis", True))
LEARNED = (("PG", "pg"), ("PPO", "ppo"), ("CE", "ce"), ("Post", "post"))
CURVE_AT = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)

_GRAPHS: dict = {}


def load_graph(zoo_names, stand_in):
    """(graph, where it came from) or (None, why it is missing)."""
    from placer.zoo import BUILTIN

    for name in zoo_names:
        if name in BUILTIN:
            if name not in _GRAPHS:
                _GRAPHS[name] = BUILTIN[name]()
            return _GRAPHS[name], f"zoo:{name}"
    if stand_in and (SHARED / stand_in).exists():
        if stand_in not in _GRAPHS:
            from placer.frontends import load_any_graph
            _GRAPHS[stand_in] = load_any_graph(SHARED / stand_in)
        return _GRAPHS[stand_in], f"shared:{stand_in}"
    return None, f"not in the zoo ({', '.join(zoo_names)}) and no stand-in graph"


def run_row(row, placements: int, seeds, log, params: dict):
    key, label, gpus, zoo_names, stand_in, *paper = row
    graph, source = load_graph(zoo_names, stand_in)
    out = {"key": key, "label": label, "gpus": gpus, "source": source, "paper": dict(zip(
        ("Single GPU", "Expert", "Metis", "PG", "Post", "Reduction"), paper)), "ours": {}, "curves": {}}
    if graph is None:
        return out
    problem = Problem(graph, preset(f"k80x{gpus}"))
    out["ops"] = graph.n_ops
    for name, method, seeded in BASELINES:
        if method not in METHODS:
            out["ours"][name] = {"error": "not implemented"}
            continue
        runs = []
        for s in (seeds if seeded else seeds[:1]):
            try:
                runs.append(run_method(method, problem, Budget(), seed=s))
            except Exception as e:  # a baseline that does not apply (e.g. no GPU holds the model)
                out["ours"][name] = {"error": f"{type(e).__name__}: {e}"[:80]}
                break
        else:
            out["ours"][name] = summarise(runs)
    for name, method in LEARNED:
        t0 = time.perf_counter()
        runs = [run_method(method, problem, Budget(placements=placements), seed=s, **params) for s in seeds]
        out["ours"][name] = summarise(runs)
        curves = np.array([r.cost.extra["iterations"]["median_us"] for r in runs]) / 1e6
        out["curves"][name] = curves.mean(axis=0).tolist()
        log(f"  {label} x{gpus} {name}: {out['ours'][name]['step_s']:.3f} s ({time.perf_counter() - t0:.1f} s wall)")
    pg, post = out["ours"]["PG"]["step_s"], out["ours"]["Post"]["step_s"]
    out["ours"]["Reduction"] = 100.0 * (pg - post) / pg
    return out


def summarise(runs) -> dict:
    steps = np.array([r.step_time_us for r in runs]) / 1e6
    return {"step_s": float(steps.mean()), "std_s": float(steps.std()), "oom": any(r.sim.oom for r in runs),
            "objective_s": float(np.mean([r.sim.objective_us for r in runs]) / 1e6),
            "wall_s": float(np.mean([r.cost.wall_s for r in runs])), "seeds": [r.seed for r in runs]}


def cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        if "error" in v:
            return "n/a"
        return f"{v['step_s']:.3f}" + (" OOM" if v["oom"] else "")
    return f"{v:.2f}"


def print_table(results, placements, seeds, params):
    cols = ["Single GPU", "Expert", "Metis", "PG", "PPO", "CE", "Post", "Reduction"]
    print(f"\nTable 1 (per-step seconds; ours: simulated K80s, best of {placements} placements, mean of seeds "
          f"{','.join(map(str, seeds))}, learned methods with {params}; paper: measured)")
    head = f"{'Model':<15}{'GPUs':>4}  {'':<6}" + "".join(f"{c:>12}" for c in cols)
    print(head)
    print("-" * len(head))
    for r in results:
        if not r["ours"]:
            print(f"{r['label']:<15}{r['gpus']:>4}  missing: {r['source']}")
            continue
        ours = [cell(r["ours"].get(c)) if c != "Reduction" else f"{r['ours']['Reduction']:.1f}%" for c in cols]
        paper = [cell(r["paper"].get(c)) if c != "Reduction" else f"{r['paper']['Reduction']:.1f}%" for c in cols]
        print(f"{r['label']:<15}{r['gpus']:>4}  {'ours':<6}" + "".join(f"{c:>12}" for c in ours))
        print(f"{'':<15}{'':>4}  {'paper':<6}" + "".join(f"{c:>12}" for c in paper)
              + f"   [{r['source']}, {r['ops']} ops]")
    errs = [(r["label"], r["gpus"], c, v["error"]) for r in results for c, v in r["ours"].items()
            if isinstance(v, dict) and "error" in v]
    for label, gpus, c, e in errs:
        print(f"  n/a: {label} x{gpus} {c}: {e}")


def print_curves(results):
    print("\nFigure 2 (median step seconds of each iteration's 12 sampled placements, mean of seeds, at a fraction "
          "of the run; the median keeps a rare out-of-memory sample's 100 s from hiding the trend)")
    head = f"{'Model':<15}{'GPUs':>4}  {'method':<6}" + "".join(f"{int(100 * f):>9}%" for f in CURVE_AT)
    print(head)
    print("-" * len(head))
    for r in results:
        for name, _ in LEARNED:
            c = r["curves"].get(name)
            if not c:
                continue
            idx = [min(len(c) - 1, int(round(f * (len(c) - 1)))) for f in CURVE_AT]
            print(f"{r['label']:<15}{r['gpus']:>4}  {name:<6}" + "".join(f"{c[i]:>10.3f}" for i in idx))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="240 placements, seed 0, three rows")
    ap.add_argument("--placements", type=int, default=None, help="placements per learned run (default 2400)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2)")
    ap.add_argument("--rows", default=None, help=f"comma-separated row keys of {[r[0] for r in ROWS]}")
    ap.add_argument("--grouping", default=None, help="units the learned methods place: colocate, merge:N or "
                    "metis:K (placer.grouping); default one softmax per op and colocation group, as the paper")
    ap.add_argument("--advantage", default="relative", choices=("relative", "seconds"),
                    help="reward b - T in units of b (default) or in seconds (the paper's units)")
    ap.add_argument("--json", default=None, help="write every figure and curve to this file")
    a = ap.parse_args(argv)
    placements = a.placements or (240 if a.quick else 2400)
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else ([0] if a.quick else [0, 1, 2])
    keys = a.rows.split(",") if a.rows else (QUICK_ROWS if a.quick else [r[0] for r in ROWS])
    unknown = set(keys) - {r[0] for r in ROWS}
    if unknown:
        ap.error(f"unknown rows {sorted(unknown)}")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    params = {"advantage": a.advantage} | ({"grouping": a.grouping} if a.grouping else {})
    results = [run_row(r, placements, seeds, log, params) for r in ROWS if r[0] in keys]
    print_table(results, placements, seeds, params)
    print_curves(results)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
