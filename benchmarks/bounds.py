"""Old and new step-time lower bounds on the committed tables' rows (issue 65), as a markdown table.

    python benchmarks/bounds.py [--seconds S] [--experiments classical,real-graphs,...] > bounds.md

For each (graph, cluster) of the named experiments' ``results/<exp>/results.csv``: the old bound
(``Problem.lower_bound_us``), the new one (:func:`placer.lowerbound.lower_bound` under the default
simulator), its source, the best fitting step time any committed run reached, and best over each
bound; then the geometric mean and the largest ratio. Deterministic (see docs/bounds.md).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("classical", "real-graphs", "learned-since", "learned-unseen")


def committed_rows(experiments) -> dict:
    """(graph, cluster) -> [ops, best fitting step time in us]."""
    rows: dict = {}
    for exp in experiments:
        path = ROOT / "results" / exp / "results.csv"
        if not path.exists():
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                k = (r["graph"], r["cluster"])
                row = rows.setdefault(k, [int(r["graph_ops"] or 0), math.inf])
                if r["status"] == "ok" and r["oom"] != "True" and r["step_time_us"]:
                    row[1] = min(row[1], float(r["step_time_us"]))
    return rows


def load(graph: str, cluster: str):
    from placer.bench.graphs import shared_path
    from placer.cli import load_problem

    spec = str(shared_path(graph)) if graph.startswith("shared:") else graph
    return load_problem(spec, "auto" if cluster.endswith("-cluster") else cluster)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=None, help="CP-SAT's deterministic time (default: the engine's)")
    ap.add_argument("--experiments", default=",".join(TABLES))
    a = ap.parse_args(argv)
    from placer.lowerbound import lower_bound
    from placer.sim import SimParams

    print("| graph | cluster | ops | old bound (ms) | new bound (ms) | source | best (ms) | best / old | best / new | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    old_r, new_r = [], []
    for (graph, cluster), (ops, best) in sorted(committed_rows(a.experiments.split(",")).items(),
                                               key=lambda t: t[1][0]):
        P = load(graph, cluster)
        t0 = time.perf_counter()
        b = lower_bound(P, SimParams.preset("default", P.cluster), seconds=a.seconds)
        s = time.perf_counter() - t0
        ok = math.isfinite(best)
        if ok:
            old_r.append(best / b.old_us)
            new_r.append(best / b.value_us)
        name = graph.rpartition("/")[2] if graph.startswith("shared:") else graph
        ratio = (f"{best / b.old_us:.2f} | {best / b.value_us:.2f}" if ok else "— | —")
        print(f"| {name} | {cluster} | {ops:,} | {b.old_us / 1e3:,.2f} | {b.value_us / 1e3:,.2f} | {b.source} | "
              f"{best / 1e3 if ok else float('nan'):,.2f} | {ratio} | {s:.2f} |", flush=True)

    def gm(x):
        return math.exp(sum(map(math.log, x)) / len(x)) if x else float("nan")

    print(f"\n{len(new_r)} rows with a fitting best: geometric mean best / bound {gm(old_r):.3f} (old) -> "
          f"{gm(new_r):.3f} (new); largest {max(old_r, default=0):.2f} -> {max(new_r, default=0):.2f}")


if __name__ == "__main__":
    main()
