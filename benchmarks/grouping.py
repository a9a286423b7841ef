"""Grouping figures: groups left, tied groups, wall time (median of repeats) of each grouping, and
the simulated step time of one two-GPU placement on the group graph against the same placement
expanded onto the full graph.

    python benchmarks/grouping.py [--quick] [--repeats 3] [GRAPH ...]

GRAPH: a file or a built-in name (default: the shared real graphs, synthetic-10k, synthetic-80k
and the zoo's inception_v3 and nmt2, captured on first use). The placement splits the groups in
topological order into two halves of equal compute, one per GPU (colocation ties respected).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from placer.cluster import preset
from placer.grouping import colocate, group_problem, merge_and_colocate, metis_groups
from placer.methods.baselines import colocate as tie
from placer.problem import Problem
from placer.resolve import resolve_graph

SHARED = ["../shared/graphs/pipedream/inception_v3.txt", "../shared/graphs/pipedream/nasnetamobile.txt",
          "../shared/graphs/dnn-partitioning/throughput-inputs/OperatorGraphs/resnet50_training.json",
          "../shared/graphs/dnn-partitioning/throughput-inputs/OperatorGraphs/bert_l-3_training.json"]


def groupings(n_ops: int):
    return {
        "colocate": lambda P: colocate(P),
        "colocate+mirrors": lambda P: colocate(P, mirrors=True),
        "merge-and-colocate N=n/20": lambda P: merge_and_colocate(P, n_groups=max(2, n_ops // 20)),
        "merge-and-colocate C=1MB": lambda P: merge_and_colocate(P, max_cost_bytes=1e6),
        "metis k=256": lambda P: metis_groups(P, 256),
        "metis k=64": lambda P: metis_groups(P, 64),
    }


def two_gpu_split(gp) -> np.ndarray:
    P = gp.problem
    work = np.where(np.isfinite(P.compute_us[:, 0]), P.compute_us[:, 0], 0.0)
    half = np.searchsorted(np.cumsum(work), work.sum() / 2)
    p = (np.arange(P.n_ops) > half).astype(np.int64)
    return tie(P, p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graphs", nargs="*")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shared graphs and synthetic-10k only")
    a = ap.parse_args()
    specs = a.graphs or (SHARED + ["synthetic-10k"] + ([] if a.quick else ["synthetic-80k", "inception_v3", "nmt2"]))
    cluster = preset("k80x2")
    print(f"{'graph':<28} {'ops':>6} {'grouping':<26} {'groups':>6} {'tied':>5} {'time_s':>7} "
          f"{'grouped_us':>11} {'full_us':>11} {'ratio':>6}")
    for spec in specs:
        g = resolve_graph(spec)
        P = Problem(g, cluster)
        for name, fn in groupings(g.n_ops).items():
            times = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                gr = fn(P)
                times.append(time.perf_counter() - t)
            gp = group_problem(P, gr)
            p = two_gpu_split(gp)
            sg = gp.simulate(p).makespan_us
            sf = gp.simulate_full(p).makespan_us
            print(f"{g.name[:28]:<28} {g.n_ops:>6} {name:<26} {gr.n_groups:>6} {int((gr.group_colocation >= 0).sum()):>5} "
                  f"{statistics.median(times):>7.2f} {sg:>11.0f} {sf:>11.0f} {sg / sf:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
