"""`placer simulate` (one training step of a given placement) and `placer optimize` (a placement
found by one method)."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.table import Table

from placer.cli.common import (bound_text, console, emit, err_console, gib, load_problem, method_params, placement_arg,
                               safe, said_html, sim_params, us)
from placer.cli.options import (BudgetOpt, ClusterOpt, GraphArg, JsonOpt, ObjectiveOpt, OutOpt, SeedOpt, SimOpt,
                                bounded, grouping_spec, method_name, one_of, output_file)
from placer.cli.report import HtmlOpt


def simulate(graph: str = GraphArg, cluster: str = ClusterOpt,
             placement: str = typer.Option(..., "--placement", "-p", help="placement JSON, a module -> device map "
                                           "(placer export's or accelerate's), or 'single:<device index>'"),
             trace: Optional[str] = typer.Option(None, help="write a Chrome trace (Perfetto, chrome://tracing)",
                                                 callback=output_file),
             sim: str = SimOpt, as_json: bool = JsonOpt, html: Optional[str] = HtmlOpt):
    """Simulate one training step of a placement: makespan, utilisation, peak memory."""
    from placer.compare import lb_us, step_bound
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
        console.print(f"step time {us(d['makespan_us'])}  (lower bound {bound_text(d)}, "
                      f"objective {us(d['objective'])}{', OOM' if d['oom'] else ''}, {d['transfers']:,} transfers)")
        console.print(safe(said_single(d)))
        t = Table("device", "busy", "utilisation", "peak memory", "capacity", "OOM")
        for dv in d["devices"]:
            t.add_row(safe(dv["name"]), us(dv["busy_us"]), f"{dv['utilisation']:.1%}", gib(dv["peak_memory_bytes"]),
                      gib(dv["memory_bytes"]), "OOM" if dv["oom"] else "")
        console.print(t)
        if trace is not None:
            err_console.print(f"wrote trace {safe(trace)}")
        said_html(d)

    emit(data, as_json, render)


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
    from placer.compare import lb_us, step_bound
    from placer.frontends.native import save_placement
    from placer.methods import Budget, run_method
    from placer.methods.grouped import apply_grouping
    from placer.sim.single import over_single
    from placer.sim.single import said as said_single

    from placer.cli.learned_files import open_learned_params, set_files
    from placer.io import check_outputs_spare_inputs

    given, logs = set_files(params)
    check_outputs_spare_inputs({"--out": out, "--html": html, **logs},
                               {"the graph": graph, "--cluster": cluster, **given})
    kw = open_learned_params(method, method_params(params))
    grouped = apply_grouping(method, load_problem(graph, cluster), grouping, kw)
    P, kw = grouped.problem, grouped.params
    if grouped.chose is not None:  # module:auto's depth and why, said before the run
        err_console.print(safe(grouped.chose))
    sp = sim_params(sim, P)
    with console.status(f"{method} on {safe(P.graph.name)} / {safe(P.cluster.name)} ...", spinner="dots"):
        res = run_method(method, P, Budget(budget, seconds, clock), seed, sp, objective=objective, **kw)
    data = res.summary()
    data["lower_bound"] = step_bound(P, sp, None if res.sim.oom else res.step_time_us)
    data["lower_bound_us"] = lb_us(data["lower_bound"])
    if grouped.chose is not None:
        data["grouping"], data["grouping_chosen"] = grouped.grouping, grouped.chose
    data.update(over_single(P, sp, res.step_time_us, res.sim.oom))
    if out is not None:
        save_placement(out, P.graph, P.cluster, res.placement.devices, result=data)
    if html is not None:
        from placer.cli import report

        data["html"] = report.for_optimize(html, P, res, sp, data["lower_bound"])

    def render(d):
        console.print(f"{d['method']}: step time {us(d['step_time_us'])} (lower bound {bound_text(d)})"
                      f"{'  OOM' if d['oom'] else ''}; {d['placements_sampled']:,} placements, "
                      f"{d['sim_calls']:,} simulator calls, {d['wall_s']:.2f} s")
        if d["objective_name"] != "sim":
            console.print(f"{d['objective_name']}: {us(d['objective'])} (the objective it minimised)")
        console.print(safe(said_single(d)))
        console.print("ops per device: " + ", ".join(f"{safe(k)}={v}" for k, v in d["device_counts"].items()))
        if out is not None:
            err_console.print(f"wrote {safe(out)}")
        said_html(d)

    emit(data, as_json, render)
