"""Every dnn-partitioning input (../shared/graphs/dnn-partitioning) under its own objective (Tarnawski
et al., NeurIPS 2020): latency inputs under ``latency``, throughput inputs under ``throughput``, with
the human-expert splits, their latency greedy, and placer's methods. Values are in the files' unit
(milliseconds). Writes a Markdown table to stdout (and --out).

    python benchmarks/published.py [--seconds 60] [--placements 5000] [--out results/published.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from placer.frontends.dnn_partitioning import cluster_for, load_dnn_partitioning, load_expert
from placer.methods import Budget, run_method
from placer.objectives import make_objective
from placer.objectives.units import blocks_for, greedy_fill, linear_order
from placer.problem import Problem

ROOT = Path(__file__).resolve().parents[2] / "shared" / "graphs" / "dnn-partitioning"
INPUTS = [
    ("bert_l-3 inference", "latency-inputs/OperatorGraphs/bert_l-3_inference.json", "latency", None),
    ("inception-v3 inference", "latency-inputs/LayerGraphs/inceptionv3_inference.json", "latency",
     "human-experts/inceptionv3_inference_expert.json"),
    ("bert_l-3 training", "throughput-inputs/OperatorGraphs/bert_l-3_training.json", "throughput", None),
    ("resnet-50 training", "throughput-inputs/OperatorGraphs/resnet50_training.json", "throughput", None),
    ("inception-v3 training", "throughput-inputs/LayerGraphs/inceptionv3_training.json", "throughput", None),
    ("gnmt training", "throughput-inputs/LayerGraphs/gnmt_training.json", "throughput",
     "human-experts/gnmt_training_expert.json"),
]
METHODS = ("dp-split", "local-search", "anneal", "metis", "exact-published")


def ms(v):
    return "invalid" if v is None or not np.isfinite(v) else f"{v / 1000:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="HiGHS time for exact-published")
    ap.add_argument("--placements", type=int, default=5000, help="placements for local-search / anneal")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = ["| graph | objective | expert | their greedy | " + " | ".join(METHODS) + " | best | exact gap | wall-clock (s) |",
             "|" + "---|" * (len(METHODS) + 7)]
    for label, rel, objname, expert in INPUTS:
        f = ROOT / rel
        P = Problem(load_dnn_partitioning(f), cluster_for(f))
        obj = make_objective(objname)
        cells, walls = {}, []
        ex = "—"
        if expert:
            e = load_expert(ROOT / expert, P.graph, P.cluster)
            v = obj.evaluate(P, e)
            if not np.isfinite(v):
                alt = make_objective("latency:pieces=any" if objname == "latency" else "throughput:contiguous=false")
                ex = f"{ms(alt.evaluate(P, e))} ({obj.check(P, e).split(' (')[0]}; any pieces: {alt.check(P, e) or 'valid'})"
            else:
                ex = ms(v)
        g = greedy_fill(P, obj, linear_order(blocks_for(P, obj), "depth"))
        greedy = obj.evaluate(P, g)
        gap = "—"
        for m in METHODS:
            t = time.perf_counter()
            try:
                if m == "exact-published":
                    r = run_method(m, P, Budget(placements=2000, seconds=a.seconds), 0, objective=obj)
                    gap = f"{100 * r.cost.extra.get('gap', float('nan')):.2f}% ({r.cost.extra.get('solver_status')})"
                elif m in ("local-search", "anneal"):
                    r = run_method(m, P, Budget(placements=a.placements), 0, objective=obj)
                else:
                    r = run_method(m, P, Budget(), 0, objective=obj)
                assert obj.is_valid(P, r.placement.devices), (m, obj.check(P, r.placement.devices))
                cells[m] = r.value_us
            except Exception as err:  # noqa: BLE001 - a method that fails is shown, not hidden
                cells[m] = None
                print(f"{label} {m}: {type(err).__name__}: {err}")
            walls.append(f"{m} {time.perf_counter() - t:.1f}")
        vals = [v for v in cells.values() if v is not None]
        best = min(vals) if vals else None
        lines.append(f"| {label} | {objname} | {ex} | {ms(greedy)} | " + " | ".join(ms(cells[m]) for m in METHODS)
                     + f" | {ms(best)} | {gap} | {'; '.join(walls)} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
