"""Old and new step-time lower bounds on the committed tables' rows (issue 65), as a markdown table.

    python benchmarks/bounds.py [--seconds S] [--experiments classical,real-graphs,...] [--out results/bounds/README.md]

For each row of the named experiments (resolved as the table resolves it: placer.bench.runner.load_row,
under the experiment's simulator settings on the row's cluster), from ``results/<exp>/results.csv``:
the old bound (``Problem.lower_bound_us``), the new one (:func:`placer.lowerbound.lower_bound`), the
bound that gave it, the best fitting step time any committed run reached, and best over each bound;
then the geometric mean and the largest ratio. Placements kept in ``results/bounds/known/*.json``
(made by ``benchmarks/known_placements.py``, each naming the command that made it) are re-simulated on
their row and, where they fit and beat the table's best, listed below the table with their ratio to
the bound (evidence of how far the optimum can be from a row's best). Writes ``--out`` (default results/bounds/README.md)
and prints it. Deterministic (see docs/bounds.md): only the seconds column varies between runs.
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("classical", "real-graphs", "learned-since", "learned-unseen")
KNOWN = ROOT / "results" / "bounds" / "known"


def known_placements() -> dict:
    """{(experiment, row label, cluster name): [doc, ...]} of the kept placements."""
    import json

    out: dict = {}
    for f in sorted(KNOWN.glob("*.json")) if KNOWN.is_dir() else []:
        d = json.loads(f.read_text(encoding="utf-8"))
        d["file"] = f.relative_to(ROOT).as_posix()
        out.setdefault((d["experiment"], d["row"], d["cluster"]), []).append(d)
    return out


def committed(exp: str) -> tuple[str | None, dict]:
    """(the table's budget level, {(row label, cluster name): best fitting step time in us})."""
    path = ROOT / "results" / exp / "results.csv"
    if not path.exists():
        return None, {}
    best: dict = {}
    level = None
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            level = level or r["level"]
            k = (r["row"], r["cluster"])
            best.setdefault(k, math.inf)
            if r["status"] == "ok" and r["oom"] != "True" and r["step_time_us"]:
                best[k] = min(best[k], float(r["step_time_us"]))
    return level, best


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=None, help="CP-SAT's deterministic time (default: the engine's)")
    ap.add_argument("--experiments", default=",".join(TABLES))
    ap.add_argument("--out", default=str(ROOT / "results" / "bounds" / "README.md"))
    a = ap.parse_args(argv)
    from placer.bench.experiments import EXPERIMENTS
    from placer.bench.rowbounds import bound_key, proven
    from placer.bench.runner import load_row
    from placer.lowerbound import VERSION as LB_VERSION
    from placer.lowerbound import lower_bound
    from placer.bench.runner import decode_placement
    from placer.problem import Problem
    from placer.sim import VERSION as SIM_VERSION
    from placer.sim import simulate

    kept, known_lines, known_r = known_placements(), [], []

    lines = ["| experiment | graph | cluster | ops | old bound (ms) | new bound (ms) | source | best (ms) | "
             "best / old | best / new | s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    old_r, new_r, memo, total = [], [], {}, 0.0
    for exp in a.experiments.split(","):
        level, best = committed(exp)
        if level is None or exp not in EXPERIMENTS:
            continue
        E = EXPERIMENTS[exp]
        for row in E.rows:
            if level not in row.levels:
                continue
            ctx = load_row(row, E.sim)
            if ctx.graph is None:
                continue
            key = bound_key(ctx, a.seconds)
            t0 = time.perf_counter()
            if key not in memo:  # the same graph, cluster and simulator in two tables: one bound
                memo[key] = lower_bound(Problem(ctx.graph, ctx.cluster), ctx.sim, seconds=a.seconds)
            b, s = memo[key], time.perf_counter() - t0
            total += s
            bst = best.get((row.label, ctx.cluster.name), math.inf)
            ok = math.isfinite(bst)
            if ok:
                old_r.append(bst / b.old_us)
                new_r.append(bst / b.value_us)
            better = bst
            for d in kept.get((exp, row.label, ctx.cluster.name), []):
                p = decode_placement(d["placement"])
                r = simulate(Problem(ctx.graph, ctx.cluster), p, ctx.sim) if len(p) == ctx.graph.n_ops else None
                if r is not None and not r.oom and r.makespan_us < better:
                    better = r.makespan_us
                    known_lines.append(f"| {exp} | {row.label} | {ctx.cluster.name} | {bst / 1e3:,.2f} | "
                                       f"{better / 1e3:,.2f} | {b.value_us / 1e3:,.2f} | {bst / b.value_us:.2f} | "
                                       f"{better / b.value_us:.2f} | `{d['file']}`: {d['how']} (`{d['made_by']}`) |")
            if math.isfinite(better):
                known_r.append(better / b.value_us)
            opt = " [opt]" if ok and proven({"value_us": b.value_us}, bst) else ""
            ratio = f"{bst / b.old_us:.2f} | {bst / b.value_us:.2f}{opt}" if ok else "— | —"
            lines.append(f"| {exp} | {row.label} | {ctx.cluster.name} | {ctx.graph.n_ops:,} | {b.old_us / 1e3:,.2f} | "
                         f"{b.value_us / 1e3:,.2f} | {b.source} | {f'{bst / 1e3:,.2f}' if ok else '—'} | {ratio} | "
                         f"{s:.2f} |")
            print(lines[-1], file=sys.stderr, flush=True)

    def gm(x):
        return math.exp(sum(map(math.log, x)) / len(x)) if x else float("nan")

    cmd = "python benchmarks/bounds.py" + ("" if a.seconds is None else f" --seconds {a.seconds:g}") + \
        ("" if a.experiments == ",".join(TABLES) else f" --experiments {a.experiments}")
    head = [
        "# Step-time lower bounds on the committed tables' rows: old against new (issue 65)", "",
        f"Regenerate: `{cmd}` (writes this file; seconds to a minute on one core).  ",
        f"Code: commit `{commit()}`, placer.lowerbound VERSION {LB_VERSION}, simulator VERSION {SIM_VERSION}; "
        f"Python {platform.python_version()}.", "",
        "Per row of each table (the row's graph and cluster under the experiment's simulator settings, as the table "
        "resolves them): the old bound (`Problem.lower_bound_us`: the larger of the critical path and the total work "
        "over the devices), the new one (`placer.lowerbound.lower_bound`, default effort: the bound on every "
        "placement that fits in memory; docs/bounds.md proves each candidate) and the candidate that gave it, the "
        "best fitting step time any committed run of that table reached (`results/<exp>/results.csv`), and best over "
        "each bound. [opt] = the best equals the new bound: proven optimal. The bound values are deterministic; "
        "only the seconds column (the wall time of the bound; near 0 where an earlier row had the same graph, cluster and simulator) depends on the machine.", "",
    ]
    foot = ["", f"{len(new_r)} rows with a fitting best: geometric mean of best / bound {gm(old_r):.3f} (old) -> "
                f"{gm(new_r):.3f} (new); largest {max(old_r, default=0):.2f} (old) -> {max(new_r, default=0):.2f} (new); "
                f"{sum(1 for x in new_r if x <= 1 + 1e-6)} rows proven optimal; bounds took {total:.1f} s in all.", ""]
    if known_lines:
        foot += ["## Better placements found outside the tables", "",
                 "Kept in `results/bounds/known/` and re-simulated here on the row's graph, cluster and simulator "
                 "settings (only fitting ones count). The optimum of such a row is at most the known placement's "
                 "step time, so the bound is at most that far from optimal, whatever the table's best.", "",
                 "| experiment | graph | cluster | table best (ms) | known (ms) | bound (ms) | table best / bound | "
                 "known / bound | placement and how it was made |", "|---|---|---|---|---|---|---|---|---|",
                 *known_lines, "",
                 f"With these, best known over bound on the {len(known_r)} rows: geometric mean {gm(known_r):.3f}, "
                 f"largest {max(known_r, default=0):.2f}.", ""]
    text = "\n".join(head + lines + foot)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
