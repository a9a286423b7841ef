"""`placer ...`: the command line. Thin: every command parses, calls the library, prints.

Bad input anywhere raises :class:`placer.errors.InputError`; :func:`main` prints its one line and
exits with status 2, writing nothing.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from placer.cli.options import (at_least, bounded, budget_option, grouping_spec, method_name, objective_spec, one_of,
                                output_file, seed_option)
from placer.cli.report import HtmlOpt
from placer.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find fast device placements for neural-network training graphs.")
console = Console(width=None if sys.stdout.isatty() else 150)  # piped output: don't squeeze tables to 80 columns
err_console = Console(stderr=True)

GraphArg = typer.Argument(..., help="graph file (native JSON, PipeDream graph.txt, dnn-partitioning JSON) or built-in name")
ClusterOpt = typer.Option("auto", "--cluster", "-c", help="preset name, cluster JSON file, 'here' or 'here:cpus=N' "
                          "(this machine, measured: `placer cluster detect`), or 'auto'")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON")
GROUPING_DEFAULT = "metis:64"  # PlacetoConfig's default grouping (a test keeps them equal)
GroupingOpt = typer.Option(GROUPING_DEFAULT, "--grouping", callback=grouping_spec,
                           help="op groups: ops, colocate, merge:N, metis:K or contiguous:N")
SimOpt = typer.Option("default", "--sim", help="'default' (cluster links, no gaps, the cluster's communication model), "
                      "'placeto' (reference constants), or a communication model: p2p, giph, link (docs/simulator.md)",
                      callback=one_of("default", "placeto", "p2p", "giph", "link"))
SeedOpt = typer.Option(0, help="random seed, 0 to 2**32-1 (same seed, same placement)", callback=seed_option)
BudgetOpt = typer.Option(None, help="placements the method may sample (1 to 10,000,000)", callback=budget_option)
OutOpt = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file)
ObjectiveOpt = typer.Option("sim", "--objective", help="what to minimise: 'sim' (the event simulator), 'latency' or "
                            "'throughput' (Tarnawski et al. 2020's models; latency:pieces=N|any, "
                            "throughput:contiguous=false), 'pipeline' (PipeDream 1F1B)", callback=objective_spec)


def _version(value: bool) -> None:
    if value:
        from placer import __version__

        sys.stdout.write(f"placer {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", help="print the version and exit", callback=_version,
                                     is_eager=True),
        max_input_size: Optional[str] = typer.Option(
            None, "--max-input-size", metavar="SIZE", envvar="PLACER_MAX_INPUT_BYTES", show_envvar=True,
            help="refuse input files (or what a .gz decompresses to) larger than this, e.g. 2GiB; default 256MiB")):
    """Find fast device placements for neural-network training graphs."""
    from placer.io import parse_size, set_max_input_bytes

    source = ctx.get_parameter_source("max_input_size")
    where = "$PLACER_MAX_INPUT_BYTES" if getattr(source, "name", "") == "ENVIRONMENT" else "--max-input-size"
    limit = parse_size(max_input_size, where) if max_input_size else None
    ram = _physical_memory()
    if limit is not None and ram and limit > ram:
        from placer.io import human_size

        raise InputError(where, repr(max_input_size), f"is more than this machine's memory ({human_size(ram)}), "
                         "the most placer allows (an input is held in memory whole)", "e.g. --max-input-size 2GiB")
    set_max_input_bytes(limit)


def _physical_memory() -> int | None:
    """Bytes of RAM here, or None when the system does not say."""
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _emit(data: dict, as_json: bool, render) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1, default=_jsonable) + "\n")
    else:
        render(data)


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x).__name__)


def safe(text: object, limit: int = 300) -> str:
    """A name from a file or the command line, ready for a rich table or line: control characters
    (ESC of a terminal sequence, newlines, bidi overrides) written as escapes by
    :func:`placer.errors.printable`, as the error lines do, and rich markup ("[bold]") escaped."""
    from rich.markup import escape

    from placer.errors import printable

    return escape(printable(text, limit=limit))


def _us(x: float) -> str:
    return f"{x / 1000:,.2f} ms" if np.isfinite(x) else "inf"


def _gib(x: float) -> str:
    return f"{x / 2**30:,.2f} GiB"


# ---------------------------------------------------------------------- shared loaders
def load_problem(graph: str, cluster: str):
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph

    g = resolve_graph(graph)
    c = resolve_cluster(cluster, g, graph)
    return Problem(g, c)


def sim_params(name: str, problem=None):
    """The SimParams of ``--sim``; ``default`` takes the communication model the problem's cluster declares."""
    from placer.sim import SimParams

    return SimParams.preset(name, getattr(problem, "cluster", None))


def placement_arg(P, placement: str) -> np.ndarray:
    """The validated placement named by ``--placement``: a placement file, a module -> device map
    (placer export's or accelerate's, on a graph that records module paths), or ``single:<device>``."""

    if placement.startswith("single:"):
        try:
            d = int(placement.split(":", 1)[1])
        except ValueError:
            raise InputError("--placement", placement, "is not single:<device index>", "e.g. single:0") from None
        p = np.full(P.n_ops, d)
    else:
        from placer.export import is_device_map, placement_from_map
        from placer.frontends.native import placement_from_doc
        from placer.io import read_json

        doc = read_json(placement)
        p = placement_from_map(doc, P, placement) if is_device_map(doc) else \
            placement_from_doc(doc, P.graph, P.cluster, placement)
    p = P.validate_placement(p, placement)
    return p


def _cores() -> int:
    """The CPU cores this process may run on (its affinity where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def method_params(items: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` items as a dict of strings; the method's config parses and checks them."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise InputError("--set", repr(item)[:80], "is not KEY=VALUE", "e.g. --set patience=40 (see `placer methods --json`)")
        out[key.strip()] = value
    return out


def step_bound(problem, sim_params, known_us=None) -> dict:
    from placer.compare import step_bound as f

    return f(problem, sim_params, known_us)


def lb_us(bound: dict) -> float:
    from placer.compare import lb_us as f

    return f(bound)


def _bound_text(d: dict) -> str:
    """A command's lower bound as printed: the value, the bound that gave it, and whether it proves
    the best fitting step time optimal."""
    b = d.get("lower_bound")
    if not b:
        return _us(d["lower_bound_us"])
    if not np.isfinite(b["value_us"]):
        return f"{_us(b['any_placement_us'])}; no placement fits in memory"
    return f"{_us(b['value_us'])} ({safe(b['source'])}{', proven optimal' if b['proven_optimal'] else ''})"


# ---------------------------------------------------------------------- commands
@app.command()
def info(graph: str = GraphArg, cluster: str = ClusterOpt, as_json: bool = JsonOpt):
    """Ops, edges, total work, critical path, memory and lower bounds of a graph on a cluster."""
    P = load_problem(graph, cluster)
    data = {"graph": P.graph.subgraph_summary(), "problem": P.summary()}
    data["lower_bound"] = step_bound(P, None)

    def render(d):
        gs, ps = d["graph"], d["problem"]
        t = Table(title=f"{safe(gs['name'])} on {safe(ps['cluster'])}", show_header=False)
        t.add_row("ops / edges", f"{gs['ops']:,} / {gs['edges']:,}")
        t.add_row("forward / backward / update", f"{gs['forward']:,} / {gs['backward']:,} / {gs['update']:,}")
        t.add_row("cost keys (per device)", ", ".join(f"{safe(n)}={safe(s)}" for n, s in zip(ps["devices"], ps["cost_sources"])))
        t.add_row("total work (fastest device)", _us(ps["total_work_us"]))
        t.add_row("critical path (fastest, no comm)", _us(ps["critical_path_us"]))
        t.add_row("load bound (work / devices)", _us(ps["load_bound_us"]))
        t.add_row("old lower bound (max of the two)", _us(ps["lower_bound_us"]))
        t.add_row("lower bound on step time (fitting)", f"{_us(d['lower_bound']['value_us'])} "
                  f"({safe(d['lower_bound']['source'])}; placer bound)")
        t.add_row("parameter / persistent memory", _gib(ps["param_bytes"]))
        t.add_row("sum of output tensors", _gib(gs["output_bytes"]))
        t.add_row("device memory", ", ".join(_gib(m) for m in ps["memory_bytes"]))
        t.add_row("colocation groups", str(gs["colocation_groups"]))
        t.add_row("fits in total memory", "yes" if ps["memory_possible"] else "NO")
        console.print(t)

    _emit(data, as_json, render)


@app.command()
def convert(src: str = typer.Argument(..., help="graph in any supported format, or a module -> device map "
                                      "(with --graph and --cluster)"),
            out: str = typer.Argument(..., help="native JSON output (.json or .json.gz)", callback=output_file),
            cluster_out: Optional[str] = typer.Option(None, help="also write the cluster a dnn-partitioning file describes",
                                                      callback=output_file),
            graph: Optional[str] = typer.Option(None, "--graph", "-g", help="SRC is a device map (placer export's "
                                                "or accelerate's {module: device}) of this graph: write a placement"),
            cluster: Optional[str] = typer.Option(None, "--cluster", "-c", help="the cluster of the placement "
                                                  "(with --graph; cuda:K is its K-th GPU, cpu its CPU)")):
    """Convert a graph to the native JSON format, or a device map to a placement (--graph, --cluster).

    placer convert map.json p.json --graph gpt2.json --cluster k80x4"""
    from placer.frontends.native import save_cluster, save_graph
    from placer.io import check_outputs_spare_inputs
    from placer.resolve import resolve_graph

    if graph is not None or cluster is not None:
        if graph is None or cluster is None:
            raise InputError("placer convert", "--graph / --cluster", "are needed together to read a device map",
                             "e.g. placer convert map.json p.json --graph gpt2.json --cluster k80x4")
        if cluster_out is not None:
            raise InputError("placer convert", "--cluster-out", "is for graph files, not device maps", "leave it out")
        _convert_map(src, out, graph, cluster)
        return
    check_outputs_spare_inputs({"out": out, "--cluster-out": cluster_out}, {"the graph": src})
    g = resolve_graph(src)
    c = None
    if cluster_out is not None:
        from placer.resolve import resolve_cluster
        c = resolve_cluster("auto", g, src)
    save_graph(g, out)
    if c is not None:
        save_cluster(c, cluster_out)
    err_console.print(f"wrote {safe(out)} ({g.n_ops:,} ops, {g.n_edges:,} edges)")


def _convert_map(src: str, out: str, graph: str, cluster: str) -> None:
    """``placer convert MAP OUT --graph G --cluster C``: the placement a device map describes."""
    from placer.export import is_device_map, placement_from_map
    from placer.frontends.native import save_placement
    from placer.io import check_outputs_spare_inputs, read_json

    check_outputs_spare_inputs({"out": out}, {"the map": src, "--graph": graph, "--cluster": cluster})
    doc = read_json(src)
    if not is_device_map(doc):
        raise InputError(src, "top level", "is not a module -> device map", "give placer export's device-map "
                         "document or accelerate's {module: device}; a graph converts without --graph")
    P = load_problem(graph, cluster)
    p = P.validate_placement(placement_from_map(doc, P, src), src)
    save_placement(out, P.graph, P.cluster, p)
    err_console.print(f"wrote {safe(out)} ({P.n_ops:,} ops on {len(set(p.tolist()))} of {P.n_devices} devices)")


@app.command()
def simulate(graph: str = GraphArg, cluster: str = ClusterOpt,
             placement: str = typer.Option(..., "--placement", "-p", help="placement JSON, a module -> device map "
                                           "(placer export's or accelerate's), or 'single:<device index>'"),
             trace: Optional[str] = typer.Option(None, help="write a Chrome trace (Perfetto, chrome://tracing)",
                                                 callback=output_file),
             sim: str = SimOpt, as_json: bool = JsonOpt, html: Optional[str] = HtmlOpt):
    """Simulate one training step of a placement: makespan, utilisation, peak memory."""
    from placer.io import check_outputs_spare_inputs, write_text_atomic
    from placer.sim import simulate as run_sim
    from placer.sim.single import over_single
    from placer.sim.single import said as said_single

    check_outputs_spare_inputs({"--trace": trace, "--html": html},
                               {"the graph": graph, "--cluster": cluster, "--placement": placement})
    P = load_problem(graph, cluster)
    p = placement_arg(P, placement)
    sp = sim_params(sim, P)
    r = run_sim(P, p, sp)
    data = r.summary(list(P.cluster.device_names))
    data["lower_bound"] = step_bound(P, sp, None if r.oom else r.makespan_us)
    data["lower_bound_us"] = lb_us(data["lower_bound"])
    data.update(over_single(P, sp, r.makespan_us, r.oom))
    if trace is not None:
        write_text_atomic(trace, json.dumps(r.chrome_trace(P.graph.op_names, P.cluster.device_names)))
    if html is not None:
        from placer.cli import report

        data["html"] = report.for_simulate(html, P, placement, p, r, sp, data["lower_bound"])

    def render(d):
        console.print(f"step time {_us(d['makespan_us'])}  (lower bound {_bound_text(d)}, "
                      f"objective {_us(d['objective'])}{', OOM' if d['oom'] else ''}, {d['transfers']:,} transfers)")
        console.print(safe(said_single(d)))
        t = Table("device", "busy", "utilisation", "peak memory", "capacity", "OOM")
        for dv in d["devices"]:
            t.add_row(safe(dv["name"]), _us(dv["busy_us"]), f"{dv['utilisation']:.1%}", _gib(dv["peak_memory_bytes"]),
                      _gib(dv["memory_bytes"]), "OOM" if dv["oom"] else "")
        console.print(t)
        if trace is not None:
            err_console.print(f"wrote trace {safe(trace)}")
        _said_html(d)

    _emit(data, as_json, render)


@app.command()
def optimize(graph: str = GraphArg, cluster: str = ClusterOpt,
             method: str = typer.Option("local-search", "--method", "-m", help="see `placer methods`",
                                        callback=method_name),
             budget: Optional[int] = BudgetOpt,
             seconds: Optional[float] = typer.Option(None, help="time limit in seconds (above 0, at most a day): the "
                                                     "method stops when its placements or its seconds end",
                                                     callback=bounded("seconds", 60)),
             clock: str = typer.Option("wall", "--clock", help="what --seconds counts: 'wall' (elapsed) or 'cpu' "
                                       "(CPU seconds of this process, which machine load changes little)",
                                       callback=one_of("wall", "cpu")),
             seed: int = SeedOpt,
             out: Optional[str] = OutOpt,
             sim: str = SimOpt, as_json: bool = JsonOpt,
             params: list[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE (repeatable), e.g. "
                                              "--set patience=40; `placer methods --json` lists them"),
             grouping: Optional[str] = typer.Option(None, "--grouping", callback=grouping_spec,
                                                    help="op groups for a method that groups (post, placeto, ...): "
                                                         "ops, colocate, merge:N, metis:K or contiguous:N; "
                                                         "module[:DEPTH] for any method (module-level placement); "
                                                         "module:auto chooses DEPTH: the shallowest whose largest "
                                                         "unit fits the smallest device and holds at most 1/n of the "
                                                         "work (n devices), e.g. GPT-2 on k80x4: depth 1 leaves "
                                                         "'transformer' one unit with most of the work, so depth 2 "
                                                         "(its blocks)"),
             objective: str = ObjectiveOpt, html: Optional[str] = HtmlOpt):
    """Find a placement with one method."""
    from placer.frontends.native import save_placement
    from placer.methods import Budget, run_method
    from placer.sim.single import over_single
    from placer.sim.single import said as said_single

    from placer.cli.learned_files import open_learned_params, set_files
    from placer.io import check_outputs_spare_inputs

    given, logs = set_files(params)
    check_outputs_spare_inputs({"--out": out, "--html": html, **logs},
                               {"the graph": graph, "--cluster": cluster, **given})
    kw = open_learned_params(method, method_params(params))
    P = load_problem(graph, cluster)
    chose = None
    if grouping == "module:auto":  # the depth chosen from the model and the cluster, said before the run
        from placer.grouping.modules import auto_depth

        depth, chose = auto_depth(P)
        err_console.print(safe(chose))
        grouping = f"module:{depth}"
    if grouping is not None and grouping.startswith("module") and not _groups(method):
        from placer.grouping.modules import DEFAULT_DEPTH, module_problem

        P = module_problem(P, int(grouping.partition(":")[2] or DEFAULT_DEPTH))  # module units made colocation groups
    elif grouping is not None:
        kw["grouping"] = grouping
    sp = sim_params(sim, P)
    with console.status(f"{method} on {safe(P.graph.name)} / {safe(P.cluster.name)} ...", spinner="dots"):
        res = run_method(method, P, Budget(budget, seconds, clock), seed, sp, objective=objective, **kw)
    data = res.summary()
    data["lower_bound"] = step_bound(P, sp, None if res.sim.oom else res.step_time_us)
    data["lower_bound_us"] = lb_us(data["lower_bound"])
    if chose is not None:
        data["grouping"], data["grouping_chosen"] = grouping, chose
    data.update(over_single(P, sp, res.step_time_us, res.sim.oom))
    if out is not None:
        save_placement(out, P.graph, P.cluster, res.placement.devices, result=data)
    if html is not None:
        from placer.cli import report

        data["html"] = report.for_optimize(html, P, res, sp, data["lower_bound"])

    def render(d):
        console.print(f"{d['method']}: step time {_us(d['step_time_us'])} (lower bound {_bound_text(d)})"
                      f"{'  OOM' if d['oom'] else ''}; {d['placements_sampled']:,} placements, "
                      f"{d['sim_calls']:,} simulator calls, {d['wall_s']:.2f} s")
        if d["objective_name"] != "sim":
            console.print(f"{d['objective_name']}: {_us(d['objective'])} (the objective it minimised)")
        console.print(safe(said_single(d)))
        console.print("ops per device: " + ", ".join(f"{safe(k)}={v}" for k, v in d["device_counts"].items()))
        if out is not None:
            err_console.print(f"wrote {safe(out)}")
        _said_html(d)

    _emit(data, as_json, render)


def _said_html(d: dict) -> None:
    if "html" in d:
        from placer.cli.report import said

        err_console.print(safe(said(d["html"])))


def _groups(method: str) -> bool:
    """Whether a method takes a ``grouping`` parameter (the others place module units as colocation groups)."""
    from dataclasses import fields

    from placer.methods import METHODS

    return any(f.name == "grouping" for f in fields(METHODS[method].config))


@app.command()
def methods(as_json: bool = JsonOpt):
    """List the placement methods."""
    from placer.methods import METHODS

    rows = [{"name": m.name, "family": m.family, "summary": m.summary, "paper": m.paper,
             "unavailable": m.available(), "parameters": m.config().to_dict()}
            for m in sorted(METHODS.values(), key=lambda m: (m.family, m.name))]

    def render(rs):
        t = Table("method", "family", "what it does", "availability")
        for r in rs:
            t.add_row(r["name"], r["family"], r["summary"], r["unavailable"] or "ok")
        console.print(t)

    _emit({"methods": rows}, as_json, lambda d: render(d["methods"]))


@app.command()
def compare(graph: str = typer.Argument("default", help="graph file or built-in name ('default': inception_v3 with the torch extra, else synthetic)"),
            cluster: str = ClusterOpt,
            methods: str = typer.Option("default", help="comma-separated method names, or 'default' / 'all'"),
            budget: Optional[int] = typer.Option(None, help="placements per search method (1 to 10,000,000)",
                                                 callback=budget_option),
            seed: int = SeedOpt, sim: str = SimOpt, as_json: bool = JsonOpt, objective: str = ObjectiveOpt,
            html: Optional[str] = HtmlOpt,
            jobs: Optional[int] = typer.Option(None, help=f"methods run side by side in worker processes (default: "
                                               f"the CPU cores this process may use; 1 to {4 * _cores()}, 4 per core)",
                                               callback=at_least(1, 2, 4 * _cores(), "4 processes per CPU core"))):
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
    from placer.resolve import default_graph_name

    from placer.io import check_outputs_spare_inputs

    check_outputs_spare_inputs({"--html": html}, {"the graph": graph, "--cluster": cluster})
    t0 = time.perf_counter()
    jobs = jobs or _cores()
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
        warmup_s = _warm_up_simulator(P, sp)
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
            value = ([_us(r["objective"]) if np.isfinite(r["objective"]) else "not valid"] if custom else [])
            rows.append([r["method"] + best, *value, _us(r["step_time_us"]), vs_single,
                         "n/a" if r.get("vs_lower_bound") is None else f"{r['vs_lower_bound']:.2f}x",
                         "OOM" if r["oom"] else "",
                         f"{r['placements_sampled']:,}", f"{r['sim_calls']:,}", f"{r['wall_s']:.2f}", r["bound"]])
        w = width(console)
        t, left_out = fitted(cols, rows, w, title=f"{safe(d['graph'])} ({d['ops']:,} ops) on {safe(d['cluster'])}; "
                                                  f"lower bound {_bound_text(d)}; "
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
                          f"({_us(sd['step_us'])})")
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
        _said_html(d)

    _emit(data, as_json, render)
    if custom and data["best"] is None:  # the table is the answer, but there is no placement to use
        err_console.print(f"placer compare: no method found a placement valid under {safe(objective)}",
                          markup=False, highlight=False)
        raise typer.Exit(1)


def _warm_up_simulator(P, params) -> float:
    """Compile the simulator's kernels (numba) before any method is timed; return the seconds it took."""
    import time

    from placer.sim import evaluate_many, simulate

    t0 = time.perf_counter()
    p = np.tile(np.argmin(P.compute_us, axis=1).astype(np.int64), (2, 1))  # each op where it can run
    simulate(P, p[0], params)
    evaluate_many(P, p, params)
    return time.perf_counter() - t0


def _load_plugins() -> None:
    """Sub-command groups of other layers (zoo, bench, rl) register themselves on ``app``."""
    import importlib

    for mod in ("placer.cli.zoo", "placer.cli.bench", "placer.cli.learn", "placer.cli.capture", "placer.cli.run",
                "placer.cli.pretrain", "placer.cli.export", "placer.cli.policy", "placer.cli.cluster",
                "placer.cli.bound"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def main(args: Optional[list[str]] = None) -> None:
    """The ``placer`` entry point: every failure ends as one stderr line and a status (see cli/guard.py).
    From the command line (``args`` None, stdout not captured), native libraries' stdout goes to
    stderr (see :func:`_native_stdout_to_stderr`)."""
    from placer.cli.guard import run_guarded

    if args is None and sys.stdout is sys.__stdout__:  # a process's own command line (not a test's capture)
        _native_stdout_to_stderr()
    sys.exit(run_guarded(app, args, setup=_load_plugins, leave_on_interrupt=args is None))


def _native_stdout_to_stderr() -> None:
    """Keep stdout for placer's own output (tables, ``--json``): file descriptor 1 becomes a copy of
    stderr, so what compiled libraries print there goes to stderr (METIS prints "Cannot bisect a
    graph with 0 vertices!" on C stdout when a k-way partition of a small graph fails to bisect a
    part, and it used to land before the JSON of ``placer optimize --json``), while Python's
    ``sys.stdout`` writes to a duplicate of the original descriptor. Child processes (bench workers)
    inherit the swapped descriptor; they print nothing to stdout."""
    import os

    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no usable descriptors (an embedding host): leave them alone
        return
    old = sys.stdout
    sys.stdout = os.fdopen(real, "w", buffering=1 if os.isatty(real) else -1,
                           encoding=getattr(old, "encoding", None) or "utf-8", errors=getattr(old, "errors", None))
