"""`placer compare`, the main job: a graph placed by the best available methods, printed beside
the baselines."""

from __future__ import annotations

from typing import Optional

import numpy as np
import typer

from placer.cli.common import bound_text, console, emit, err_console, load_problem, safe, said_html, sim_params, us
from placer.cli.options import ClusterOpt, JsonOpt, ObjectiveOpt, SeedOpt, SimOpt, at_least, budget_option
from placer.cli.report import HtmlOpt
from placer.runtime.detect import usable_cores

_CORES = max(1, usable_cores())  # the CPU cores this process may run on: --jobs' default and bound (4 per core)


def compare(graph: str = typer.Argument("default", help="graph file or built-in name ('default': inception_v3 with the torch extra, else synthetic)"),
            cluster: str = ClusterOpt,
            methods: str = typer.Option("default", help="comma-separated method names, or 'default' / 'all'"),
            budget: Optional[int] = typer.Option(None, help="placements per search method (1 to 10,000,000)",
                                                 callback=budget_option),
            seed: int = SeedOpt, sim: str = SimOpt, as_json: bool = JsonOpt, objective: str = ObjectiveOpt,
            html: Optional[str] = HtmlOpt,
            jobs: Optional[int] = typer.Option(None, help=f"methods run side by side in worker processes (default: "
                                               f"the CPU cores this process may use; 1 to {4 * _CORES}, 4 per core)",
                                               callback=at_least(1, 2, 4 * _CORES, "4 processes per CPU core"))):
    """The main job: place a graph with the best available methods and print it beside the baselines.

    Every method runs within a bound it states (the table's last column): its placements, one
    construction, or a wall-clock cap for the solvers (cp-sat 30 s, exact-published 60 s); the default
    line-up skips cp-sat on a graph beyond the tasks it solves exactly, and scales anneal's and
    local-search's placements to the graph (at most 50 million simulated ops each: 2,407 placements
    on 20,771 ops), and says so; --budget or --methods turns that off. Exit status
    0 with a best placement; 1 when, under a published --objective, no method found a placement valid
    under it (the table is still printed; --json gives best: null, valid_found: false)."""
    import time

    from rich.progress import Progress, SpinnerColumn, TextColumn

    from placer.compare import (
        compare_methods,
        default_methods,
        out_of_range,
        progress_lineup,
        scaled_budgets,
    )
    from placer.io import check_outputs_spare_inputs
    from placer.resolve import default_graph_name
    from placer.sim import warm_up

    check_outputs_spare_inputs({"--html": html}, {"the graph": graph, "--cluster": cluster})
    t0 = time.perf_counter()
    jobs = jobs or max(1, usable_cores())
    P = load_problem(default_graph_name() if graph == "default" else graph, cluster)
    names = default_methods() if methods == "default" else None if methods == "all" else methods.split(",")
    results: dict = {}  # the answers, kept for --html
    skip = out_of_range(P, names) if methods == "default" else None
    lineup = progress_lineup(names, skip)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=err_console, transient=True,
                  disable=not err_console.is_terminal) as prog:
        task = prog.add_task("compiling the simulator", total=None)
        rows: dict = {}  # method -> its progress line's task

        def show(report) -> None:  # the running methods, each with its placements, best so far and honest ETA
            lineup.update(report)
            prog.update(task, description=safe(lineup.head()))
            now = lineup.lines()
            for m in [m for m in rows if m not in now]:
                prog.remove_task(rows.pop(m))
            for m, text in now.items():
                if m not in rows:
                    rows[m] = prog.add_task("", total=None)
                prog.update(rows[m], description="  " + safe(text))
            prog.refresh()

        sp = sim_params(sim, P)
        warmup_s = warm_up(P, sp)
        data = compare_methods(P, names, budget, seed, sp, objective=objective, jobs=jobs, skip=skip,
                               scaled=scaled_budgets(P, names) if methods == "default" and budget is None else None,
                               on_progress=show if err_console.is_terminal else None,
                               on_result=results.__setitem__ if html is not None else None)
    if html is not None and results:
        from placer.cli import report

        data["html"] = report.for_compare(html, P, data, results)
    data["warmup_s"] = warmup_s  # numba compile time, kept out of every method's seconds
    data["command_s"] = time.perf_counter() - t0  # the whole command: loading, compiling, every method
    custom = objective not in (None, "sim")

    def render(d):
        from placer.cli.tables import Col, fitted, width
        from placer.sim.single import said as said_single

        cols = ([Col("method", keep=100)] + ([Col(safe(objective), keep=90)] if custom else [])
                + [Col("step time", keep=100), Col("vs 1 device", keep=95), Col("vs lower bound", keep=40),
                   Col("OOM", keep=80), Col("placements", keep=60), Col("sim calls", keep=20),
                   Col("seconds", keep=50), Col("bound", whole=False, keep=30)])
        rows = []
        for r in d["rows"]:
            if "error" in r:
                rows.append([r["method"], *([""] if custom else []), "n/a", "", "", "", "", "", "", r["bound"]])
                continue
            best = " *" if r["method"] == d["best"] else ""
            x = r.get("speedup_over_single")
            vs_single = f"{x:.2f}x" if x is not None else "n/a"
            value = ([us(r["objective"]) if np.isfinite(r["objective"]) else "not valid"] if custom else [])
            rows.append([r["method"] + best, *value, us(r["step_time_us"]), vs_single,
                         "n/a" if r.get("vs_lower_bound") is None else f"{r['vs_lower_bound']:.2f}x",
                         "OOM" if r["oom"] else "",
                         f"{r['placements_sampled']:,}", f"{r['sim_calls']:,}", f"{r['wall_s']:.2f}", r["bound"]])
        w = width(console)
        t, left_out = fitted(cols, rows, w, title=f"{safe(d['graph'])} ({d['ops']:,} ops) on {safe(d['cluster'])}; "
                                                  f"lower bound {bound_text(d)}; "
                                                  f"{d['comm_model']} communication model")
        console.print(t, width=w)
        if left_out:
            console.print(f"[dim]left out to fit {w} columns: {', '.join(left_out)} (--json has every column)[/dim]")
        sd = d["single_device"]
        if sd["device"] is not None and not sd["fits"]:
            console.print(f"vs 1 device: n/a: no single device fits (the fastest, {safe(sd['device'])} alone, runs out "
                          f"of memory)")
        elif sd["device"] is not None:
            console.print(f"vs 1 device: speed-up over the best single device that fits, {safe(sd['device'])} alone "
                          f"({us(sd['step_us'])})")
        top = next((r for r in d["rows"] if r["method"] == d["best"]), None)
        if top is not None:
            console.print(f"{d['best']}: {safe(said_single(top))}")
        for r in d["rows"]:
            if "error" in r:
                console.print(f"[dim]{r['method']}: {safe(r['error'], 2000)}[/dim]")
            elif r.get("scaled"):
                console.print(f"[dim]{r['method']}: {r['bound']}[/dim]")
        if d["best"] is None:
            console.print(f"best: none: no method found a placement valid under {safe(objective)} (exit status 1)")
        else:
            console.print(f"best: {d['best']} (* above{f', by its {safe(objective)} value' if custom else ''}); "
                          f"'vs' columns are ratios of simulated step times (x); seconds exclude "
                          f"{d['warmup_s']:.1f} s compiling the simulator first")
        console.print(f"the whole command took {d['command_s']:.1f} s wall clock ({d['jobs']} worker process"
                      f"{'es' if d['jobs'] > 1 else ''}; the methods' seconds add up to "
                      f"{sum(r.get('wall_s', 0.0) for r in d['rows']):.1f} s)")
        said_html(d)

    emit(data, as_json, render)
    if custom and data["best"] is None:  # the table is the answer, but there is no placement to use
        err_console.print(f"placer compare: no method found a placement valid under {safe(objective)}",
                          markup=False, highlight=False)
        raise typer.Exit(1)
