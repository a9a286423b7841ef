"""Better placements found outside the committed tables, kept as evidence of how far a row's best is
from optimal (issue 65): each is re-simulated by ``benchmarks/bounds.py``, never trusted.

    python benchmarks/known_placements.py [--placements N]

NMT 4-layer on k80x4 (the classical table's row, its simulator settings): the table's best is 525.81
ms, 2.06x the proven bound, and the bound cannot be raised much (docs/bounds.md). This script builds a
*hand* placement by module (written here, not searched): the encoder embedding on the CPU, which runs
the lookups faster than a K80; the decoder embedding with decoder layers 0-1 on one GPU; encoder layers
0-1 with decoder layers 2-3 on another; encoder layers 2-3 with the attention on a third; the softmax
projection alone on the fourth; colocation groups follow their first op. Then local search from it
(``start=``, seed 0, ``--placements`` simulated), and writes the result to
``results/bounds/known/nmt-4-layer__k80x4.json`` with this command as its provenance. It is one
graph's hand seed, so it is evidence about that row, not a method: no table column uses it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bounds" / "known"

NMT4_RULES = (  # module path prefix (regular expression) -> device index on k80x4 (gpu:0-3, cpu:0 = 4)
    (r"encoder\.embedding", 4), (r"decoder\.embedding", 3), (r"encoder\.layers\.[01]", 0),
    (r"encoder\.layers\.[23]", 2), (r"decoder\.layers\.[01]", 3), (r"decoder\.layers\.[23]", 0),
    (r"decoder\.softmax", 1), (r"decoder\.attention", 2))


def by_module(graph, rules, default: int = 0) -> np.ndarray:
    """One device per op from its module path (``graph.modules``; a later rule that matches
    overrides an earlier one), the rest on ``default``; each colocation group on its first op's
    device."""
    p = np.full(graph.n_ops, default, dtype=np.int64)
    for pat, d in rules:
        hit = np.array([re.match(pat, m or "") is not None for m in graph.modules])
        p[hit] = d
    col = np.asarray(graph.colocation)
    for c in np.unique(col[col >= 0]):
        idx = np.flatnonzero(col == c)
        p[idx] = p[idx[0]]
    return p


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placements", type=int, default=20_000)
    a = ap.parse_args(argv)
    from placer.bench.experiments import EXPERIMENTS
    from placer.bench.runner import encode_placement, load_row
    from placer.methods import Budget, run_method
    from placer.problem import Problem
    from placer.sim import simulate

    E = EXPERIMENTS["classical"]
    row = next(r for r in E.rows if r.label == "NMT (4-layer)")
    ctx = load_row(row, E.sim)
    problem = Problem(ctx.graph, ctx.cluster)
    p0 = by_module(ctx.graph, NMT4_RULES)
    t0 = simulate(problem, p0, ctx.sim).makespan_us
    res = run_method("local-search", problem, Budget(placements=a.placements), seed=0, sim_params=ctx.sim,
                     start=tuple(int(x) for x in p0))
    p = np.asarray(res.placement.devices, dtype=np.int64)
    r = simulate(problem, p, ctx.sim)
    doc = {"experiment": "classical", "row": row.label, "cluster": ctx.cluster.name, "n_ops": ctx.graph.n_ops,
           "made_by": f"python benchmarks/known_placements.py --placements {a.placements}",
           "how": "hand placement by module (benchmarks/known_placements.py NMT4_RULES), then local-search "
                  f"start= it, seed 0, {a.placements:,} placements",
           "start_step_time_us": float(t0), "step_time_us": float(r.makespan_us), "oom": bool(r.oom),
           "placement": encode_placement(p, problem.n_devices)}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "nmt-4-layer__k80x4.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{row.label} / {ctx.cluster.name}: hand placement {t0 / 1e3:,.2f} ms -> local search {r.makespan_us / 1e3:,.2f} ms"
          f"{' OOM' if r.oom else ''}; wrote {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
