"""Mars's pre-training effect (Lan et al., ICPP 2021: "reduced its training time by an average of
13.2% via self-supervised pre-training"): Mars with and without DGI pre-training of its encoder,
same seeds and budget, and how many placements and how much wall-clock each needs to reach a fixed
step time.

    python benchmarks/mars_pretrain.py                       # Inception-V3, GNMT, BERT; 2,000 placements; seeds 0,1
    python benchmarks/mars_pretrain.py --quick               # BERT only, 200 placements, seed 0
    python benchmarks/mars_pretrain.py --graphs bert_base --placements 800 --seeds 0,1,2 --json out.json
    python benchmarks/mars_pretrain.py --pretrained enc.pt   # the encoder `placer pretrain` wrote instead
    python benchmarks/mars_pretrain.py --start none          # the paper's start (no layer-split warm start)

The fixed step time of a graph is the worse of the two variants' mean final bests (so both reach it);
"to reach" is the first PPO update whose best-so-far is at or below it, in placements and in seconds
since the run started (the pre-training's seconds included). Cells are means over seeds. Times are
the simulator's memory-penalised objective (the quantity Mars minimises), in ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from placer.cluster import preset
from placer.io import read_checkpoint
from placer.methods import Budget, run_method
from placer.problem import Problem


def run(problem, placements: int, seed: int, params: dict) -> dict:
    lines: list[dict] = []  # one per PPO update
    t0 = time.perf_counter()
    r = run_method("mars", problem, Budget(placements=placements), seed=seed, progress=lines.append, **params)
    wall = time.perf_counter() - t0
    trace = [(ln["placements"], min(ln["best_us"]), ln["wall_s"]) for ln in lines]
    return {"seed": seed, "best_us": float(r.sim.objective_us), "wall_s": wall, "trace": trace, "notes": r.notes}


def reach(trace, target_us: float):
    for placements, best, wall in trace:
        if best <= target_us * (1 + 1e-12):
            return placements, wall
    return None, None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="inception_v3,gnmt,bert_base")
    ap.add_argument("--cluster", default="k80x4")
    ap.add_argument("--placements", type=int, default=2_000)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--pretrained", default=None, help="encoder checkpoint for the pre-trained variant")
    ap.add_argument("--start", default="best", choices=("best", "none"),
                    help="Mars's start: best (ours, its default) or none (the paper's; learning from scratch)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.quick:
        a.graphs, a.placements, a.seeds = "bert_base", 200, "0"
    seeds = [int(s) for s in a.seeds.split(",")]
    from placer.resolve import resolve_graph

    variants = {"no pre-training": {"pretrain": False, "start": a.start},
                "pre-trained": {**({"encoder": read_checkpoint(a.pretrained, "pre-trained encoder")}
                                   if a.pretrained else {"pretrain": True}),
                                "start": a.start}}
    rows = []
    for name in a.graphs.split(","):
        P = Problem(resolve_graph(name), preset(a.cluster))
        single = run_method("single-gpu", P, Budget(), 0).sim.objective_us
        runs = {v: [run(P, a.placements, s, p) for s in seeds] for v, p in variants.items()}
        target = max(np.mean([r["best_us"] for r in rs]) for rs in runs.values())
        row = {"graph": name, "ops": P.n_ops, "single_gpu_ms": single / 1e3, "target_ms": target / 1e3}
        for v, rs in runs.items():
            got = [reach(r["trace"], target) for r in rs]
            ok = [g for g in got if g[0] is not None]
            row[v] = {"best_ms": float(np.mean([r["best_us"] for r in rs]) / 1e3),
                      "wall_s": float(np.mean([r["wall_s"] for r in rs])),
                      "placements_to_target": float(np.mean([g[0] for g in ok])) if ok else None,
                      "seconds_to_target": float(np.mean([g[1] for g in ok])) if ok else None,
                      "reached": f"{len(ok)}/{len(rs)}", "runs": rs}
            print(f"{name} {v}: best {row[v]['best_ms']:.1f} ms, to {target / 1e3:.1f} ms: "
                  f"{row[v]['placements_to_target']} placements, {row[v]['seconds_to_target']} s "
                  f"(reached {row[v]['reached']}), {row[v]['wall_s']:.0f} s in all", file=sys.stderr, flush=True)
        rows.append(row)
    print(f"\nMars pre-training effect ({a.cluster}, {a.placements} placements, seeds {a.seeds}, start {a.start})")
    head = f"{'graph':<14}{'single GPU':>11}{'target':>9}  {'variant':<16}{'best':>9}{'placements':>11}{'seconds':>9}"
    print(head + "\n" + "-" * len(head))
    for row in rows:
        for v in variants:
            c = row[v]
            fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
            print(f"{row['graph']:<14}{row['single_gpu_ms']:>11.1f}{row['target_ms']:>9.1f}  {v:<16}{c['best_ms']:>9.1f}"
                  f"{fmt(c['placements_to_target'], '>11.0f')}{fmt(c['seconds_to_target'], '>9.1f')}")
        a_, b_ = row["no pre-training"], row["pre-trained"]
        if a_["placements_to_target"] and b_["placements_to_target"]:
            print(f"{'':<14}pre-training saves {100 * (1 - b_['placements_to_target'] / a_['placements_to_target']):.1f}% "
                  f"of the placements, {100 * (1 - b_['seconds_to_target'] / a_['seconds_to_target']):.1f}% of the seconds")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
