"""An experiment's results folder: run the experiment end to end (:mod:`placer.bench.runner` plans and
runs its runs) and write ``results/<experiment>/``: ``table.md``,
``results.csv``, ``summary.json`` (what ``placer bench report`` reads), ``env.json``, one JSON per run
under ``runs/`` and PNG plots under ``plots/`` (learning curves per row, timeline of each row's best
placement)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from placer.bench import tables
from placer.bench.envinfo import environment
from placer.bench.experiments import EXPERIMENTS
from placer.bench.graphs import repo_root
from placer.bench.runner import OK, Cell, Plan, decode_placement, make_plan, prune, run_plan
from placer.bench.spec import Experiment, slug, stable_hash
from placer.errors import InputError

PLOT_VERSION = 3  # bump when the plots change, so committed PNGs are redrawn


@dataclass
class Outcome:
    plan: Plan
    stats: dict
    out_dir: Path
    files: list[Path] = field(default_factory=list)
    plot_note: str = ""
    bound_counts: dict = field(default_factory=dict)  # rows whose bound was {"cached": n, "computed": n}


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise InputError("placer bench", f"experiment '{name}'", "is not a known experiment",
                         f"use one of {', '.join(EXPERIMENTS)} (see `placer bench list`)")
    return EXPERIMENTS[name]


def command_line(exp: Experiment, level: str, seeds: tuple[int, ...] | None = None,
                 results_dir: str | Path = "results") -> str:
    """The command that regenerates a table: its level, and its seeds and results folder where they are
    not the level's and the default's."""
    flag = {"quick": " --quick", "default": "", "paper": " --budget paper"}[level]
    if seeds is not None and tuple(seeds) != exp.level(level).seeds:
        flag += " --seeds " + ",".join(map(str, seeds))
    if Path(results_dir) != Path("results"):
        flag += f" --results {Path(results_dir).as_posix()}"
    return f"placer bench {exp.name}{flag}"


def runs_made_on(plan: Plan) -> str:
    """Where the table's runs were made, from each run file's ``host`` (runs written before it was recorded
    count as 'not recorded'): 'Intel Xeon (16 CPUs, torch 2.11.0): 99 runs'."""
    hosts: dict[str, int] = {}
    for c in plan.cells:
        if c.doc is None:
            continue
        h = c.doc.get("host")
        key = f"{h['cpu']} ({h['cpus']} CPUs, torch {h['torch']})" if isinstance(h, dict) else "not recorded"
        hosts[key] = hosts.get(key, 0) + 1
    return "; ".join(f"{k}: {n} run{'s' * (n != 1)}" for k, n in hosts.items())


def run_experiment(exp: Experiment | str, level: str = "default", results_dir: str | Path = "results",
                   jobs: int = 1, seeds: tuple[int, ...] | None = None, only_methods: set[str] | None = None,
                   only_rows: set[str] | None = None, plots: bool = True,
                   on_row: Callable | None = None, on_done: Callable[[Cell, int, int], None] | None = None,
                   backend: str = "process", address: str | None = None) -> Outcome:
    """Plan (resolve graphs, check the cache), run what is missing, write every output."""
    exp = _with_level(exp, level)
    plan = make_plan(exp, level, Path(results_dir), seeds, only_methods, only_rows, on_row=on_row)
    stats = run_plan(plan, jobs, on_done, backend=backend, address=address)
    out = Outcome(plan, stats, Path(results_dir) / exp.name)
    write_outputs(out, plots=plots)
    stats["pruned"] = len(prune(plan))
    return out


def _with_level(exp: Experiment | str, level: str) -> Experiment:
    """The experiment (by name or itself), refusing a budget level it does not have."""
    exp = get_experiment(exp) if isinstance(exp, str) else exp
    try:
        exp.level(level)
    except KeyError:
        raise InputError("--budget", f"'{level}'", f"is not a budget level of {exp.name}",
                         f"use one of {', '.join(exp.budgets)}") from None
    return exp


def estimate_experiment(exp: Experiment | str, level: str = "default", results_dir: str | Path = "results",
                        jobs: int = 1, seeds: tuple[int, ...] | None = None, only_methods: set[str] | None = None,
                        only_rows: set[str] | None = None, sources: list[Path] | None = None,
                        on_row: Callable | None = None):
    """What :func:`run_experiment` with these arguments would make and train, priced from earlier runs
    (:mod:`placer.bench.estimate`; ``sources``: results folders to price from, by default ``results_dir``,
    ``results`` and ``results/paper``); runs and writes nothing."""
    from placer.bench.estimate import estimate

    exp = _with_level(exp, level)
    plan = make_plan(exp, level, Path(results_dir), seeds, only_methods, only_rows, on_row=on_row)
    if sources is None:
        root = repo_root()
        sources = list(dict.fromkeys([Path(results_dir), root / "results", root / "results" / "paper"]))
    return estimate(plan, sources, jobs)


def write_outputs(out: Outcome, plots: bool = True) -> None:
    from placer.io import write_text_atomic

    plan, exp, d = out.plan, out.plan.experiment, out.out_dir
    d.mkdir(parents=True, exist_ok=True)
    env = environment(repo_root())
    lv = exp.level(plan.level)
    env.update({"experiment": exp.name, "level": plan.level, "seeds": list(plan.seeds),
                "placements": lv.placements, "seconds": lv.seconds, "sim": exp.sim,
                "command": command_line(exp, plan.level, plan.seeds, d.parent),
                "runs_made_on": runs_made_on(plan)})
    if exp.lower_bound_column:  # each row's bound from placer.lowerbound, cached in <out>/bounds.json
        from placer.bench.rowbounds import attach_bounds

        out.bound_counts = attach_bounds(plan, d, tables.best_fitting_us(plan))
    plot_files: dict[int, list[str]] = {}
    if plots:
        try:
            plot_files = write_plots(plan, d / "plots")
        except InputError as e:  # matplotlib (the plot extra) not installed
            out.plot_note = f"plots skipped: {e}"
    table, notes = tables.render_table(plan)
    stats = tables.method_stats(plan) if exp.method_summary else []
    summary_md = tables.method_summary(stats) if stats else ""
    md = render_markdown(plan, env, table, notes.markdown(), summary_md, plot_files)
    files = {
        "table.md": md, "results.csv": tables.csv_text(plan), "env.json": json.dumps(env, indent=1) + "\n",
        "summary.json": json.dumps({
            "experiment": exp.name, "title": exp.title, "paper": exp.paper, "level": plan.level,
            "seeds": list(plan.seeds), "placements": lv.placements, "budget_note": lv.note, "sim": exp.sim,
            "command": env["command"], "runs_made_on": env["runs_made_on"], "generated": env["generated"], "commit": env["git"]["commit"],
            "counts": tables.status_counts(plan), "comparisons": tables.comparisons(plan),
            "unavailable": tables.unavailable(plan), "differences": list(exp.differences),
            "paper_notes": list(exp.paper_notes), "table": table, "footnotes": notes.markdown(),
            "method_summary": summary_md, "method_stats": stats, "filtered": plan.filtered,
        }, indent=1, default=str) + "\n",
    }
    for name, text in files.items():
        write_text_atomic(d / name, text)
        out.files.append(d / name)


LOWER_BOUND_LEGEND = (
    "lower bound = a proven lower bound on the step time of every placement that fits in memory, the best of "
    "placer.lowerbound's bounds under the row's simulator settings (`placer bound`; docs/bounds.md proves each), "
    "named in brackets by the bound that gave it (critical path, load LP, windows, memory, exact = CP-SAT on the "
    "relaxed problem); best / bound = the best fitting step time in the row over it; ")

OBJECTIVE_LEGEND = (
    "Our cells: the value of the objective each row names (placer.objectives; the `objective` column) for the "
    "best placement found, in the input's own unit (ms for the dnn-partitioning files and PipeDream profiles), "
    "not the simulated step time; mean ± sd over seeds when there are several. **bold** = best in the row among "
    "the columns scored by the row's objective; invalid = the placement breaks the objective's constraints "
    "(contiguity, acyclic contraction, memory); (repaired) = the method's own placement broke them and the "
    "Evaluator repaired it, the value is the repaired one's; [opt] = the solver (CP-SAT or HiGHS) proved the published IP optimal "
    "(of that IP, whose optimum is the objective's); [gap X%] = it did not, and X is (value - its proven lower bound) / value. A method or graph that does not exist yet is marked, never "
    "filled in.")


def render_markdown(plan: Plan, env: dict, table: str, footnotes: str, summary_md: str,
                    plot_files: dict[int, list[str]]) -> str:
    exp, lv = plan.experiment, plan.experiment.level(plan.level)
    sim = "Placeto's reference simulator constants" if exp.sim == "placeto" else \
        "the default simulator, each row under its cluster's communication model (docs/simulator.md)"
    lines = [
        f"# {exp.title}", "",
        f"Paper: {exp.paper}.  ",
        f"Regenerate: `{env['command']}` (cached runs are reused; delete `runs/` to start over).  ",
        f"Budget `{plan.level}`: {lv.placements:,} placements per searching method"
        + (f" ({lv.note})" if lv.note else "") + f", seeds {', '.join(map(str, plan.seeds))}; {sim}.  ",
        f"Generated {env['generated']} at commit `{(env['git']['commit'] or 'unknown')[:10]}` "
        f"on {env['machine']['cpu']} ({env['machine']['cpus']} CPUs); full record in `env.json`. "
        f"Runs made on: {env['runs_made_on'] or 'none'}.", "",
        (OBJECTIVE_LEGEND if exp.uses_objectives() else
         "Our cells: simulated step time of the best placement found, in ms (mean ± sd over seeds when there are "
         "several)" + (", and, where it fits in memory, its ratio to the step-time lower bound" if exp.lower_bound_column else "")
         + "; **bold** = best in the row; OOM = the placement overflows a device's memory (left out of "
         "\"best\"); [opt] = proven optimal for the real problem (the simulated time equals a proven lower bound); "
         + (LOWER_BOUND_LEGEND if exp.lower_bound_column else "") + "[opt of N groups] = CP-SAT proved its model of the graph coarsened into N groups optimal, which is "
         "not an optimum of the full graph. Paper cells are copied from the paper (seconds on real GPUs). "
         "A method or graph that does not exist yet is marked, never filled in."), "",
        table, "",
    ]
    if plan.filtered:
        lines += ["*This table came from a filtered run (--methods/--rows): the cells it left out show their cached "
                  "runs, or an earlier run footnoted stale where the method's code has changed since, or 'not run'.*", ""]
    if footnotes:
        lines += [footnotes.replace("\n", "  \n"), ""]
    if summary_md:
        lines += ["## Per method, over all rows", "", summary_md, ""]
    pols = policy_lines(plan)
    if pols:
        lines += ["## Policies the transfer columns start from", "",
                  "Their training is not counted in the columns' placements (as in the paper).", ""] + pols + [""]
    if exp.paper_notes:
        lines += ["## What the paper says beyond the table", ""] + [f"- {t}" for t in exp.paper_notes] + [""]
    lines += ["## Why our numbers differ from the paper's", ""] + [f"- {t}" for t in exp.differences] + [""]
    if plot_files:
        lines += ["## Plots", ""]
        for k, names in plot_files.items():
            ctx = plan.rows[k]
            lines.append(f"- {ctx.row.label} / {ctx.cluster.name}: " + ", ".join(f"[{n.split('__')[-1][:-4]}](plots/{n})"
                                                                              for n in names))
        lines.append("")
    return "\n".join(lines)


def policy_lines(plan: Plan) -> list[str]:
    from placer.io import read_json

    out = []
    for name, ctx in sorted(plan.policies.items()):
        if ctx.missing:
            out.append(f"- `{name}`: {ctx.missing}")
            continue
        rec = ctx.path.with_suffix(".json") if ctx.path else None
        if rec is None or not rec.exists():
            out.append(f"- `{name}`: not trained (no run needed it)")
            continue
        r = read_json(rec)
        graphs = ", ".join(r["graphs"][:4]) + (f" and {len(r['graphs']) - 4} more" if len(r["graphs"]) > 4 else "")
        method = r.get("method", "placeto")  # records from before every learned method trained here were Placeto's
        clusters = ", ".join(r.get("clusters") or [ctx.spec.cluster])
        what = (f"{r['episodes']:,} episodes, {r['sim_calls']:,} simulator calls" if "episodes" in r and "sim_calls" in r
                else f"within {r['placements']:,} simulated placements")
        line = f"- `{name}`: {method}'s trainer on {graphs} ({clusters}): {what}, {r['seconds']:.1f} s; record `policies/{rec.name}`"
        if r.get("candidates"):  # PolicySpec.choices: every candidate's cost is in the totals above
            line += ("; kept " + _overrides(r["chosen"]) + " of " + ", ".join(
                f"{_overrides(c['trainer'])} (zero-shot on its training graphs {c['score_us'] / 1e3:,.2f} ms)"
                for c in r["candidates"]))
        out.append(line)
    return out


def _overrides(d: dict) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(d.items())) + "}" if d else "the defaults"


# ---------------------------------------------------------------------- plots
def _best_doc(docs: list[dict]) -> dict | None:
    if docs and docs[0]["spec"].get("objective"):  # under a published objective: its best valid value
        from placer.bench.tables import value_ms

        ok = [d for d in docs if value_ms(d) is not None]
        return min(ok, key=value_ms) if ok else docs[0]
    ok = [d for d in docs if not d["result"]["oom"]] or docs
    return min(ok, key=lambda d: d["result"]["step_time_us"]) if ok else None


def write_plots(plan: Plan, plot_dir: Path) -> dict[int, list[str]]:
    """A learning-curve PNG and a timeline PNG (best placement) per row with results. A plot whose
    inputs (run hashes) have not changed since it was drawn is kept as is, so a repeated experiment
    neither re-simulates nor redraws."""
    from placer.io import read_json, write_text_atomic
    from placer.problem import Problem
    from placer.sim import simulate
    from placer.viz import plot_learning_curves, plot_timeline

    manifest_path = plot_dir / "manifest.json"
    try:
        manifest = read_json(manifest_path) if manifest_path.exists() else {}
    except Exception:
        manifest = {}
    new_manifest: dict[str, str] = {}
    out: dict[int, list[str]] = {}
    by_row: dict[int, list[Cell]] = {}
    rid = {id(r): k for k, r in enumerate(plan.rows)}
    for c in plan.cells:
        if c.status == OK and c.doc:
            by_row.setdefault(rid[id(c.row)], []).append(c)
    for k, cells in sorted(by_row.items()):
        ctx = plan.rows[k]
        base = f"{slug(ctx.row.label)}__{slug(ctx.cluster.name)}"
        title = f"{ctx.row.label} ({ctx.graph.n_ops:,} ops) on {ctx.cluster.name}"
        # learning curves: the lowest seed of each method
        series, hashes = [], []
        for m in plan.methods:
            mc = sorted((c for c in cells if c.method.label == m.label), key=lambda c: c.seed)
            if mc:
                series.append((m.label, mc[0].doc["curve"]))
                hashes.append(mc[0].hash)
        curve_name, curve_key = f"{base}__curve.png", stable_hash({"runs": hashes, "lb": ctx.lower_bound_us,
                                                                   "v": PLOT_VERSION})
        if manifest.get(curve_name) != curve_key or not (plot_dir / curve_name).exists():
            plot_learning_curves(series, plot_dir / curve_name, title=title, lower_bound_us=ctx.lower_bound_us)
        new_manifest[curve_name] = curve_key
        # timeline of the best placement in the row
        best = _best_doc([c.doc for c in cells])
        tl_name, tl_key = f"{base}__timeline.png", f"{best['hash']}-v{PLOT_VERSION}"
        if manifest.get(tl_name) != tl_key or not (plot_dir / tl_name).exists():
            P = Problem(ctx.graph, ctx.cluster)
            sim = simulate(P, decode_placement(best["placement"]), ctx.sim)  # the row's cluster's model
            plot_timeline(sim, P.cluster.device_names, plot_dir / tl_name, roles=ctx.graph.role,
                          title=f"{title}: best = {best['method_label']} (seed {best['seed']}), "
                                f"step {sim.makespan_us / 1e3:,.2f} ms", lower_bound_us=ctx.lower_bound_us)
        new_manifest[tl_name] = tl_key
        out[k] = [curve_name, tl_name]
    if not plan.filtered:  # drop plots of rows that no longer exist
        for p in plot_dir.glob("*.png") if plot_dir.exists() else []:
            if p.name not in new_manifest:
                p.unlink()
    else:
        new_manifest = {**manifest, **new_manifest}
    plot_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(manifest_path, json.dumps(new_manifest, indent=1, sort_keys=True) + "\n")
    return out
