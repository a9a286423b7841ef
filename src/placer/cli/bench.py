"""`placer bench ...`: run the named experiments that reproduce the papers' tables, and the report.

    placer bench list
    placer bench <experiment> [--quick | --budget paper] [--jobs N] [--seeds 0,1,2]
    placer bench report
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, err_console
from placer.cli.options import MAX_SEED, at_least, bounded, existing_folder, output_file, output_folder
from placer.errors import InputError

bench_app = typer.Typer(no_args_is_help=True, help="Reproduce the papers' tables (results/<experiment>/, REPRODUCTION.md).")
app.add_typer(bench_app, name="bench")

ResultsOpt = typer.Option("results", "--results", help="results folder (one sub-folder per experiment)",
                          callback=output_folder)


@bench_app.command("list")
def list_experiments():
    """The experiments, their rows, methods and budgets."""
    from rich.table import Table

    from placer.bench.experiments import EXPERIMENTS
    from placer.bench.spec import with_registered

    t = Table("experiment", "rows", "methods", "budgets (placements per method)", "what it reproduces")
    for e in EXPERIMENTS.values():
        t.add_row(e.name, str(len(e.rows)), ", ".join(m.label for m in with_registered(e)),
                  ", ".join(f"{k} {v.placements:,}" for k, v in e.budgets.items()), e.title)
    console.print(t)


@bench_app.command("report")
def report(results: str = typer.Option("results", "--results", help="results folder `placer bench` wrote",
                                       callback=existing_folder),
           out: str = typer.Option("REPRODUCTION.md", "--out", "-o", help="where to write the report",
                                   callback=output_file)):
    """Regenerate REPRODUCTION.md from the committed results (runs nothing)."""
    from placer.bench.report import write_report
    from placer.io import check_outputs_spare_inputs

    check_outputs_spare_inputs({"--out": out}, {"--results": results})
    _check_tables_are_text(Path(results))
    try:
        write_report(results, out)
    except UnicodeDecodeError as e:  # a file the check above does not know of
        raise InputError(str(results), "a results file", f"is not UTF-8 text ({e.reason} at byte {e.start})",
                         "restore the results folder (git checkout results) or run the experiments again") from None
    err_console.print(f"wrote {out}")


def _check_tables_are_text(results: Path) -> None:
    """Every ``results.csv`` the report reads must be UTF-8 text: one line naming the file, not a traceback."""
    from placer.io import read_input_bytes

    for table in sorted([*results.glob("*/results.csv"), *results.glob("paper/*/results.csv")]):
        raw = read_input_bytes(table)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(str(table), "file", f"is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
                             "restore it (git checkout) or run the experiment again to rewrite it") from None


MAX_SEEDS = 100  # seeds per experiment: the papers report 1 to 10
MAX_JOBS = 4096  # parallel runs at most (a Ray cluster); local processes: at most 4 per CPU core


def _parse_seeds(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError("--seeds", f"'{text}'", "is not a comma-separated list of integers", "e.g. --seeds 0,1,2") from None
    if not seeds:
        raise InputError("--seeds", f"'{text}'", "names no seed", "e.g. --seeds 0,1,2")
    if any(s < 0 for s in seeds):
        raise InputError("--seeds", f"'{text}'", "has a negative seed", "use seeds of 0 or more")
    if any(s > MAX_SEED for s in seeds):
        raise InputError("--seeds", f"'{text[:60]}'", f"has a seed above {MAX_SEED:,}, the most placer allows "
                         "(numpy and torch take seeds below 2**32)", "e.g. --seeds 0,1,2")
    if len(seeds) > MAX_SEEDS:
        raise InputError("--seeds", f"'{text[:60]}'", f"names {len(seeds):,} seeds, more than {MAX_SEEDS}, the most "
                         "placer allows (each seed repeats every run of the experiment)", "e.g. --seeds 0,1,2")
    return seeds


def _parse_list(option: str, text: str | None) -> set[str] | None:
    if text is None:
        return None
    items = {s.strip() for s in text.split(",") if s.strip()}
    if not items:
        raise InputError(option, f"'{text}'", "names nothing", "give comma-separated names, or leave the option out")
    return items


def _method_names(name: str) -> set[str]:
    """The labels and method names ``--methods`` may give for experiment ``name``."""
    from placer.bench.experiments import EXPERIMENTS
    from placer.bench.spec import with_registered

    exp = EXPERIMENTS[name]
    return {m.label for m in with_registered(exp)} | {m.method for m in with_registered(exp)}


def _parse_methods(text: str | None, known: set[str]) -> set[str] | None:
    """``--methods``: comma-separated labels or names, where a label may hold commas itself
    ("placeto, frozen policy (ablation)"): the longest run of pieces that joins into a known label is
    one item."""
    items = _parse_list("--methods", text)
    if items is None:
        return None
    parts = [s.strip() for s in text.split(",")]
    out, i = set(), 0
    while i < len(parts):
        j = next((j for j in range(len(parts), i + 1, -1) if ", ".join(parts[i:j]) in known), i + 1)
        out.add(", ".join(parts[i:j]))
        i = j
    return {s for s in out if s}


def _check_filters(name: str, known: set[str], methods: set[str] | None, rows: set[str] | None) -> None:
    """--methods and --rows must each select something of the experiment (``known``: its
    :func:`_method_names`): a typo runs nothing."""
    from placer.bench.experiments import EXPERIMENTS

    exp = EXPERIMENTS[name]
    for m in sorted(methods or ()):
        if m not in known:
            raise InputError("--methods", f"'{m}'", f"is not a method of {name}",
                             f"use labels or names from `placer bench list`: {', '.join(sorted(known))}")
    keys = [r.key for r in exp.rows]
    for r in sorted(rows or ()):
        if not any(r.lower() in k.lower() for k in keys):
            raise InputError("--rows", f"'{r}'", f"matches no row of {name}",
                             f"give part of a 'label / cluster' row name, e.g. '{keys[0]}'")


def _run(name: str, quick: bool, budget: str, jobs: int, seeds: str | None, methods: str | None, rows: str | None,
         results: Path, plots: bool, backend: str = "process", address: str | None = None,
         estimate: bool = False) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from placer.bench.results import estimate_experiment, run_experiment

    level = "quick" if quick else budget
    if quick and budget not in ("default", "quick"):
        raise InputError("--quick", f"with --budget {budget}", "asks for two budgets", "give one of them")
    if jobs < 1:
        raise InputError("--jobs", str(jobs), "must be at least 1", "e.g. --jobs 2")
    if backend not in ("process", "ray"):
        raise InputError("--backend", f"'{backend}'", "is not a backend", "use 'process' or 'ray'")
    local_max = 4 * (os.cpu_count() or 1)
    if (backend == "process" or address is None) and jobs > local_max:
        raise InputError("--jobs", str(jobs), f"is more than {local_max}, the most this machine runs at once "
                         f"(4 per CPU core, {os.cpu_count() or 1} cores)", f"e.g. --jobs {os.cpu_count() or 1}")
    known = _method_names(name)
    seed_list, method_set, row_set = _parse_seeds(seeds), _parse_methods(methods, known), _parse_list("--rows", rows)
    _check_filters(name, known, method_set, row_set)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True, disable=not err_console.is_terminal) as prog:
        task = prog.add_task(f"{name}: loading graphs", total=None)

        def on_row(row):
            prog.update(task, description=f"{name}: loading {row.label} / {row.cluster}")

        if estimate:
            from placer.bench.estimate import render

            est = estimate_experiment(name, level, results, jobs, seed_list, method_set, row_set, on_row=on_row)
            prog.stop()
            console.print("\n".join(render(est)), markup=False, highlight=False)
            return

        def on_done(cell, done, total):
            tag = "" if cell.status == "ok" else f" ({cell.status})"
            prog.update(task, total=total, completed=done,
                        description=f"{name}: {cell.row.row.label} / {cell.method.label} s{cell.seed}{tag}")

        from placer.cli.guard import keep_on_interrupt

        keep_on_interrupt(f"every finished run is kept in {results / name / 'runs'} (run the same command again "
                          "to resume from them)")
        out = run_experiment(name, level, results, jobs, seed_list, method_set, row_set,
                             plots, on_row=on_row, on_done=on_done, backend=backend, address=address)
    s = out.stats
    console.print(f"{name} ({level}): {s['ran']} runs made, {s['cached']} from cache, {s['errors']} errors"
                  + (f", {s['kept_stale']} left-out cells kept from runs of older code (marked stale)"
                     if s.get("kept_stale") else "")
                  + (f", {s['pruned']} superseded run files removed" if s.get("pruned") else ""))
    console.print(f"wrote {out.out_dir}/table.md, results.csv, summary.json, env.json, runs/, plots/")
    if out.plot_note:
        err_console.print(out.plot_note)


def _command_for(name: str, title: str):
    def command(quick: bool = typer.Option(False, "--quick", help="CI-sized budget (seconds to minutes)"),
                budget: str = typer.Option("default", "--budget", help="'default' (minutes here) or 'paper' "
                                           "(the papers' sample counts)"),
                jobs: int = typer.Option(1, "--jobs", "-j", help="runs in parallel processes (at most 4 per CPU core "
                                         "here; 4096 on a Ray cluster)",
                                         callback=at_least(1, 2, MAX_JOBS, "a Ray cluster's worth; 4 per core here")),
                seeds: Optional[str] = typer.Option(None, help="comma-separated seeds (default: the budget's)"),
                methods: Optional[str] = typer.Option(None, help="only run these method labels or names"),
                rows: Optional[str] = typer.Option(None, help="only run rows whose 'label / cluster' contains one "
                                                   "of these comma-separated strings"),
                results: str = ResultsOpt,
                plots: bool = typer.Option(True, "--plots/--no-plots", help="draw the PNG plots"),
                backend: str = typer.Option("process", "--backend", help="'process' (local worker processes) or 'ray' "
                                            "(Ray tasks: a local runtime of --jobs CPUs, or the cluster at --address)"),
                address: Optional[str] = typer.Option(None, "--address", help="Ray cluster to join (HOST:PORT, or 'auto')"),
                estimate: bool = typer.Option(False, "--estimate", help="run nothing: print the runs and policies this "
                                              "command would make and their CPU hours, priced from earlier runs of "
                                              "the same cells (results/, results/paper/)")):
        _run(name, quick, budget, jobs, seeds, methods, rows, results, plots, backend, address, estimate)

    command.__doc__ = f"{title}."
    return command


def _register_experiments() -> None:
    from placer.bench.experiments import EXPERIMENTS

    for exp in EXPERIMENTS.values():
        bench_app.command(exp.name)(_command_for(exp.name, exp.title))


_register_experiments()


@bench_app.command("anytime")
def anytime(max_seconds: float = typer.Option(100.0, "--max-seconds", help="CPU seconds each (method, graph) run may "
                                              "use (the last checkpoint; above 0, at most 600)",
                                              callback=bounded("anytime.seconds", 100)),
            methods: Optional[str] = typer.Option(None, "--methods", help="comma-separated methods (default: "
                                                  "`placer compare`'s line-up and every learned method)"),
            graphs: Optional[str] = typer.Option(None, "--graphs", help="';'-separated GRAPH@CLUSTER items, or parts "
                                                 "of the default graphs' names (default: inception_v3@k80x2, "
                                                 "resnet50@k80x4, nmt8@k80x8, a GiPH workload)"),
            jobs: int = typer.Option(1, "--jobs", "-j", help="runs in parallel processes (each counts its own CPU "
                                     "seconds; at most 4 per CPU core)",
                                     callback=at_least(1, 2, 4 * (os.cpu_count() or 1), "4 per CPU core here")),
            seed: int = typer.Option(0, "--seed", callback=at_least(0, 0, MAX_SEED, "numpy and torch take seeds below 2**32")),
            out: str = typer.Option("results/anytime", "--out", help="folder for table.md, results.csv, README.md, "
                                    "plots/", callback=output_folder),
            plots: bool = typer.Option(True, "--plots/--no-plots", help="draw one PNG per graph")):
    """Best step time by 1, 3, 10, 30 and 100 CPU seconds (and by placements) per method and graph, with
    the Pareto front of quality against time (results/anytime/)."""
    import shlex
    import sys

    from placer.bench import anytime as A
    from placer.resolve import check_method

    names = A.default_methods() if methods is None else [check_method(m.strip(), "--methods")
                                                          for m in methods.split(",") if m.strip()]
    if not names:
        raise InputError("--methods", f"'{methods}'", "names no method", "e.g. --methods local-search,post")
    todo = A.parse_graphs(graphs)
    load, t0 = A.load_average(), time.perf_counter()
    console.print(f"anytime: {len(names)} methods x {len(todo)} graphs, {max_seconds:g} CPU s each, {jobs} job(s): "
                  f"at most {A.estimate_s(len(names), len(todo), max_seconds, jobs) / 60:.1f} min")

    def on_done(tr, k, n):
        what = tr.error or f"{tr.placements:,} placements, {tr.seconds:.1f} CPU s, ended by {tr.stopped_by}"
        console.print(f"[{k}/{n}] {tr.method} on {tr.graph}: {what}", markup=False, highlight=False, soft_wrap=True)

    runs = A.run_anytime(names, todo, max_seconds, jobs, seed, on_done=on_done)
    info = A.write_outputs(runs, Path(out), max_seconds, "placer " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                           jobs, time.perf_counter() - t0, load, plots)
    console.print(f"wrote {out}/table.md, results.csv, README.md, trajectories.json, plots/")
    if info["plot_note"]:
        err_console.print(info["plot_note"])
