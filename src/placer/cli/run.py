"""`placer run`: execute a placement of a captured PyTorch graph on the devices torch sees.

    placer run g.json --cluster k80x2 --placement p.json --steps 10
    placer run g.json --cluster k80x2 --placement single:0 --map gpu:0=cuda:0,gpu:1=cuda:0,cpu:0=cpu
"""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli import (ClusterOpt, GraphArg, JsonOpt, SimOpt, _emit, _gib, _us, app, console, load_problem,
                        placement_arg, safe, sim_params)
from placer.cli.options import at_least
from placer.errors import InputError


@app.command()
def run(graph: str = GraphArg, cluster: str = ClusterOpt,
        placement: str = typer.Option(..., "--placement", "-p", help="placement JSON, or 'single:<device index>'"),
        map_: Optional[str] = typer.Option(None, "--map", help="cluster device -> real device, e.g. gpu:0=cuda:0,cpu:0=cpu "
                                           "(default: i-th cluster GPU -> cuda:i if present, everything else -> cpu)"),
        steps: int = typer.Option(10, help="timed steps", callback=at_least(1, 10)),
        warmup: int = typer.Option(2, help="untimed steps first (the first also counts memory)", callback=at_least(0)),
        threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: torch's)", callback=at_least(1, 4)),
        sim: str = SimOpt, as_json: bool = JsonOpt):
    """Run a placement of a captured model for real: measured step time and peak memory per device,
    beside the simulator's prediction."""
    from placer.runtime import device_map, parse_map, run_placement

    P = load_problem(graph, cluster)
    if P.graph.meta.get("source") != "torch":
        raise InputError(graph, f"graph '{P.graph.name}' (source {P.graph.meta.get('source', 'unknown')})",
                         "has no executable program to run", "run graphs captured from PyTorch (`placer capture`, the zoo, hf:NAME)")
    p = placement_arg(P, placement)
    if steps < 1 or warmup < 1:
        raise InputError("--steps/--warmup", f"{steps}/{warmup}", "must be at least 1", "e.g. --steps 10 --warmup 2")
    real = device_map(P.cluster, parse_map(map_, P.cluster))
    with console.status(f"running {safe(P.graph.name)} on {', '.join(sorted(set(real)))} ...", spinner="dots"):
        rep = run_placement(P.graph, P.cluster, p, real, steps=steps, warmup=warmup, threads=threads,
                            sim_params=sim_params(sim))
    data = rep.summary()

    def render(d):
        from rich.table import Table

        console.print(f"{safe(d['graph'])} on {safe(d['cluster'])}: measured {_us(d['measured_median_us'])} per step "
                      f"(median of {d['steps']}, min {_us(d['measured_min_us'])}, max {_us(d['measured_max_us'])}, "
                      f"{d['clock']}); simulator {_us(d['predicted_us'])} "
                      f"(predicted / measured {d['predicted_over_measured']}); loss {d['loss']:.5g}; "
                      f"{d['transfers']} transfers")
        t = Table("device", "runs on", "ops", "peak memory (counted)", "predicted peak", "cuda max allocated")
        for dv in d["devices"]:
            t.add_row(safe(dv["name"]), dv["real"], f"{dv['ops']:,}", _gib(dv["peak_bytes"]), _gib(dv["predicted_peak_bytes"]),
                      _gib(dv["cuda_peak_bytes"]) if "cuda_peak_bytes" in dv else "")
        console.print(t)

    _emit(data, as_json, render)
