"""HEFT, m-ETF and m-SCT on the PipeDream CNNs: the step time each schedule predicts against the
simulator's, under the simulator's communication model (``comm=sim``, the default) and the papers'
contention-free one (``comm=free``), and whether the returned placement fits memory.

    python benchmarks/list_scheduling_model.py [--graphs DIR] [--clusters k80x2,k80x4] [--comm sim,free]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from placer.cluster import preset
from placer.methods import Budget, run_method
from placer.problem import Problem
from placer.resolve import resolve_graph

CNNS = ("resnet18", "resnet50", "vgg16", "inception_v3", "nasnetamobile")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=str(Path(__file__).resolve().parents[2] / "shared" / "graphs" / "pipedream"))
    ap.add_argument("--clusters", default="k80x2,k80x4")
    ap.add_argument("--comm", default="sim,free")
    ap.add_argument("--models", default=",".join(CNNS))
    a = ap.parse_args()
    print("| graph | cluster | comm | method | predicted ms | simulated ms | sim/pred | OOM |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for name in a.models.split(","):
        g = resolve_graph(str(Path(a.graphs) / f"{name}.txt"))
        for cl in a.clusters.split(","):
            pr = Problem(g, preset(cl))
            for comm in a.comm.split(","):
                for m in ("heft", "m-etf", "m-sct"):
                    r = run_method(m, pr, Budget(), 0, comm=comm)
                    pred = r.cost.extra["model_makespan_us"] / 1e3
                    sim = r.sim.makespan_us / 1e3
                    print(f"| {name} | {cl} | {comm} | {m} | {pred:.0f} | {sim:.0f} | {sim / pred:.2f} | "
                          f"{'yes' if r.sim.oom else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
