"""Do GDP and Mars learn past their start? Each runs in search mode from its start (the searched
layer split or the whole graph on the fastest device, simulated first) on graphs no table tunes
them on, and this prints the start, the mean step time of the first and of the last five PPO
batches, how often the anchor moved to a better sample, what the method returned and its gap to the
start, and the CPU seconds it took (process time, this process only).

    python benchmarks/learns_past_start.py                      # GPT-2 6 layers, ViT 6 layers, T5-small; k80x4; 600 placements
    python benchmarks/learns_past_start.py --quick              # one small zoo graph, 120 placements
    python benchmarks/learns_past_start.py --graph hf:gpt2:n_layer=6 --method mars --placements 2000 --seed 1

A method that returns its start exactly learned nothing the start did not already hold
(docs/methods/gdp.md and docs/methods/mars.md keep the measurements, before and after the anchor).
Step times are the simulator's memory-penalised objective, in ms.
"""

from __future__ import annotations

import argparse
import time

from placer.methods import Budget, run_method
from placer.problem import Problem
from placer.resolve import resolve_cluster, resolve_graph

GRAPHS = ("hf:gpt2:n_layer=6", "hf:vit:num_hidden_layers=6", "hf:t5")
QUICK = ("resnet50",)


def start_ms(notes: list[str]) -> float | None:
    """The start's step time as the method's note states it ("start: the split placement (...,
    best 219.9 ms)"), or None when no start was simulated."""
    line = next((n for n in notes if n.startswith("start: the ")), None)
    return None if line is None else float(line.rsplit("best ", 1)[1].split(" ms")[0].replace(",", ""))


def measure(problem, method: str, placements: int, seed: int) -> dict:
    lines: list[dict] = []  # one per PPO update
    cpu = time.process_time()
    r = run_method(method, problem, Budget(placements=placements), seed=seed, progress=lines.append)
    cpu = time.process_time() - cpu
    means = [ln["batch_mean_us"][0] / 1e3 for ln in lines]
    moves = next((int(n.split(" times")[0].rsplit(" ", 1)[1]) for n in r.notes if n.startswith("the anchor followed")),
                 0)
    return {"start": start_ms(r.notes), "first": means[0] if means else None,
            "last": sum(means[-5:]) / len(means[-5:]) if means else None, "moves": moves,
            "returned": r.sim.objective_us / 1e3, "cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", action="append", help="a graph spec (repeatable; default: three HF models)")
    ap.add_argument("--cluster", default="k80x4")
    ap.add_argument("--method", action="append", choices=("gdp", "mars"), help="default: both")
    ap.add_argument("--placements", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="one small zoo graph, 120 placements")
    a = ap.parse_args()
    if not 1 <= a.placements <= 100_000:
        ap.error("--placements must be in 1..100,000")
    graphs = a.graph or (QUICK if a.quick else GRAPHS)
    placements = 120 if a.quick and a.placements == 600 else a.placements
    print(f"{a.cluster}, seed {a.seed}, {placements:,} placements; ms, CPU s")
    print(f"{'graph':28} {'method':6} {'start':>9} {'first':>9} {'last 5':>9} {'moves':>6} {'returned':>9} "
          f"{'vs start':>9} {'CPU s':>7}")
    for spec in graphs:
        g = resolve_graph(spec)
        problem = Problem(g, resolve_cluster(a.cluster, g))
        for method in a.method or ("gdp", "mars"):
            m = measure(problem, method, placements, a.seed)
            fmt = lambda x: "-" if x is None else f"{x:,.1f}"  # noqa: E731
            gap = "-" if m["start"] is None else f"{100 * (m['returned'] / m['start'] - 1):+.1f}%"
            print(f"{spec:28} {method:6} {fmt(m['start']):>9} {fmt(m['first']):>9} {fmt(m['last']):>9} "
                  f"{m['moves']:>6} {m['returned']:>9,.1f} {gap:>9} {m['cpu']:>7.1f}")


if __name__ == "__main__":
    main()
