"""Take a placement away (issue 51): module-level placements against what users pick today.

Three Hugging Face models built from their configs (random weights, nothing downloaded), captured as
training steps (SGD with momentum), on 2, 4 and 8 K80s (11 GiB each) plus the host CPU: the simulated
step time and the peak memory per device of

* accelerate-auto, accelerate-balanced (Hugging Face accelerate's device maps, weights only counted),
* param-balanced (DeepSpeed's partition of the module sequence by parameter count),
* module-level local search (local search on the module:2 units: GPT-2 / Llama / T5 blocks, the
  embeddings and the head; every placement it returns exports as a module -> device map),
* op-level local search (local search on single ops: what placer finds without the module constraint).

    python benchmarks/take_away.py [--budget 1500] [--out results/take-away]

writes ``table.md`` and ``table.csv`` there. Each search gets the same placement budget, seed 0.
"""

from __future__ import annotations

import argparse
import csv
import platform
import time
from pathlib import Path

import numpy as np

MODELS = {
    "GPT-2 medium (24 x 1024)": "hf:gpt2:n_layer=24,n_embd=1024,n_head=16,batch=8,seq=512",
    "Llama-style (24 x 1024, GQA)": "hf:llama:hidden_size=1024,intermediate_size=2816,num_hidden_layers=24,"
                                    "num_attention_heads=16,num_key_value_heads=4,vocab_size=32000,batch=8,seq=512",
    "T5 (12 + 12 x 1024)": "hf:t5:d_model=1024,d_ff=4096,num_layers=12,num_decoder_layers=12,num_heads=16,d_kv=64,"
                           "batch=8,seq=256",
}
CLUSTERS = ("k80x2", "k80x4", "k80x8")
METHODS = ("accelerate-auto", "accelerate-balanced", "param-balanced", "module local search", "op local search")


def run_cell(P, method: str, budget: int):
    from placer.grouping.modules import module_problem
    from placer.methods import Budget, run_method

    t0 = time.perf_counter()
    if method == "module local search":
        r = run_method("local-search", module_problem(P, 2), Budget(placements=budget), 0)
    elif method == "op local search":
        r = run_method("local-search", P, Budget(placements=budget), 0)
    else:
        r = run_method(method, P, Budget(placements=budget), 0)
    return r, time.perf_counter() - t0


def main():
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.resolve import resolve_graph

    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--out", default="results/take-away")
    ap.add_argument("--models", default=",".join(str(i) for i in range(len(MODELS))), help="indices into MODELS, e.g. 0,2")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    t_all = time.perf_counter()
    for k, (label, spec) in enumerate(MODELS.items()):
        if str(k) not in a.models.split(","):
            continue
        g = resolve_graph(spec)
        for cl in CLUSTERS:
            P = Problem(g, preset(cl))
            for m in METHODS:
                r, wall = run_cell(P, m, a.budget)
                sim = r.sim
                peaks = [float(x) for x in sim.peak_memory_bytes]
                row = {"model": label, "spec": spec, "ops": g.n_ops, "cluster": cl, "method": m,
                       "step_ms": sim.makespan_us / 1e3, "oom": bool(sim.oom),
                       "peaks_gib": " ".join(f"{x / 2**30:.1f}" for x in peaks),
                       "max_gpu_gib": max(peaks[d] for d in P.cluster.gpus()) / 2**30,
                       "placements": int(r.cost.placements), "wall_s": wall}
                rows.append(row)
                print(f"{label:30s} {cl:6s} {m:20s} {row['step_ms']:9.1f} ms {'OOM' if row['oom'] else '   '} "
                      f"[{row['peaks_gib']}] {wall:6.1f} s", flush=True)
    total = time.perf_counter() - t_all
    with open(out / "table.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "table.md").write_text(render(rows, a.budget, total))


def render(rows, budget: int, total_s: float) -> str:
    lines = ["# Take a placement away: module-level placements against the incumbents", "",
             f"Simulated training step (SGD with momentum) in ms, `OOM` where a device's peak exceeds its memory; "
             f"peak memory per device in GiB (GPUs in order, then the host CPU). Searches: local search, seed 0, "
             f"{budget:,} placements each (seeding included); the incumbents evaluate one placement. "
             f"K80 GPUs have 11 GiB. Made with `python benchmarks/take_away.py --budget {budget}` on "
             f"{platform.machine()} ({total_s / 60:.1f} min in all).", ""]
    models = list(dict.fromkeys(r["model"] for r in rows))
    for model in models:
        sub = [r for r in rows if r["model"] == model]
        lines += [f"## {model}", "", f"`{sub[0]['spec']}`, {sub[0]['ops']:,} ops", "",
                  "| cluster | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
        for cl in CLUSTERS:
            cells = []
            for m in METHODS:
                r = next((x for x in sub if x["cluster"] == cl and x["method"] == m), None)
                cells.append("" if r is None else f"{r['step_ms']:,.0f}{' OOM' if r['oom'] else ''}")
            lines.append(f"| {cl} | " + " | ".join(cells) + " |")
        lines += ["", "Peak memory per device (GiB):", "", "| cluster | method | peaks |", "|---|---|---|"]
        for r in sub:
            lines.append(f"| {r['cluster']} | {r['method']} | {r['peaks_gib']} |")
        lines.append("")
    lines += verdict(rows)
    return "\n".join(lines) + "\n"


def verdict(rows) -> list[str]:
    """The goal, checked cell by cell: module-level never slower than an incumbent, never OOM where
    one of them fits; and what module granularity costs against op-level."""
    inc = ("accelerate-auto", "accelerate-balanced", "param-balanced")
    out = ["## Against the goal", ""]
    slower, ooms, cost = [], [], []
    for key in dict.fromkeys((r["model"], r["cluster"]) for r in rows):
        cell = {r["method"]: r for r in rows if (r["model"], r["cluster"]) == key}
        mod, op = cell.get("module local search"), cell.get("op local search")
        if mod is None:
            continue
        fit = [cell[m] for m in inc if m in cell and not cell[m]["oom"]]
        if mod["oom"] and fit:
            ooms.append(f"{key[0]} on {key[1]}")
        for m in inc:
            c = cell.get(m)
            if c is not None and not c["oom"] and not mod["oom"] and mod["step_ms"] > c["step_ms"] * (1 + 1e-9):
                slower.append(f"{key[0]} on {key[1]}: {mod['step_ms']:,.0f} ms against {m} {c['step_ms']:,.0f} ms")
        if op is not None and not op["oom"] and not mod["oom"]:
            cost.append(mod["step_ms"] / op["step_ms"] - 1)
    out.append(f"* Module-level slower than an incumbent that fits: {len(slower)} cells" + (": " + "; ".join(slower) if slower else "."))
    out.append(f"* Module-level out of memory where an incumbent fits: {len(ooms)} cells" + (": " + "; ".join(ooms) if ooms else "."))
    if cost:
        out.append(f"* Module granularity against op-level local search at the same budget: "
                   f"{100 * float(np.median(cost)):+.1f}% median step time ({100 * min(cost):+.1f}% to {100 * max(cost):+.1f}%, "
                   f"{len(cost)} cells where both fit; negative: the module-level search found the faster step).")
    out.append("* Op-level placements split modules (a block's ops over several GPUs), so `placer export` refuses "
               "them: no module -> device map, no `placer.apply`. The module-level column is the fastest step "
               "found that a user can apply to their own model in one call.")
    return out


if __name__ == "__main__":
    main()
