"""`placer export`: a module-level placement as a module -> device map or as pipeline stages.

    placer export g.json --cluster k80x2 --placement p.json --format device-map -o map.json
    placer export g.json --cluster k80x4 --placement p.json --format pipeline -o stages.json --map gpu:0=cuda:0

A placement that splits a module below ``--depth`` is refused with one line (exit 2) naming the
module and how to get a module-level placement (:mod:`placer.export`).
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from placer.cli import app
from placer.cli.advice import module_split
from placer.cli.common import console, emit, err_console, load_problem, placement_arg, safe, sim_params
from placer.cli.options import ClusterOpt, GraphArg, JsonOpt, SimOpt, at_least, one_of, output_file
from placer.errors import InputError


@app.command()
def export(graph: str = GraphArg, cluster: str = ClusterOpt,
           placement: str = typer.Option(..., "--placement", "-p", help="placement JSON, a module -> device map "
                                           "(placer export's or accelerate's), or 'single:<device index>'"),
           fmt: str = typer.Option("device-map", "--format", help="'device-map' (module -> torch device, for "
                                   "placer.apply / accelerate.dispatch_model) or 'pipeline' (stages named by their "
                                   "first module: torch.distributed.pipelining split points)",
                                   callback=one_of("device-map", "pipeline")),
           depth: int = typer.Option(2, "--depth", help="module depth of the map (as --grouping module:DEPTH)",
                                     callback=at_least(1, 2, 64, "module paths are not deeper")),
           map_: Optional[str] = typer.Option(None, "--map", help="cluster device -> device name on the machine "
                                              "that will run it, e.g. gpu:0=cuda:1,cpu:0=cpu (default: the i-th "
                                              "cluster GPU -> cuda:i, the CPU -> cpu, whatever this machine has; "
                                              "presence is checked where the map runs: placer.apply, placer run)"),
           out: Optional[str] = typer.Option(None, "--out", "-o", help="write the JSON here", callback=output_file),
           verbose: bool = typer.Option(False, "--verbose", "-v", help="list every module (default: a summary "
                                        "per device; --json has them all)"),
           sim: str = SimOpt, as_json: bool = JsonOpt):
    """Write a module-level placement as a module -> device map or as pipeline split points."""
    from placer import export as ex
    from placer.io import check_outputs_spare_inputs, write_text_atomic
    from placer.runtime.devices import parse_map, target_devices

    check_outputs_spare_inputs({"--out": out}, {"the graph": graph, "--cluster": cluster, "--placement": placement})
    P = load_problem(graph, cluster)
    p = placement_arg(P, placement)
    real = target_devices(P.cluster, parse_map(map_, P.cluster, present=False))
    try:
        if fmt == "device-map":
            data = ex.device_map(P, p, real, depth, where=placement)
        else:
            data = ex.pipeline(P, p, real, depth, sim_params(sim, P), where=placement)
    except InputError as e:
        raise module_split(e, graph, depth) from None
    if out is not None:
        write_text_atomic(out, json.dumps(data, indent=1) + "\n")

    def render(d):
        if d["format"] == "device-map":
            devs = sorted(set(d["device_map"].values()))
            console.print(f"{len(d['device_map'])} modules at depth {d['depth']} on {', '.join(devs)}")
            if verbose:
                for m, dv in d["device_map"].items():
                    console.print(f"  {safe(m)} -> {dv} ({safe(d['cluster_devices'][m])})")
            else:
                for s in d["devices"]:
                    top = ", ".join(f"{safe(m)} {b / 2**20:,.1f} MiB" for m, b in s["top_modules"])
                    console.print(f"  {safe(s['cluster_device'])} -> {s['device']}: {s['modules']} modules, "
                                  f"weights + optimizer state {s['param_bytes'] / 2**20:,.1f} MiB" + (f"; largest: {top}" if top else ""))
                console.print("  (--verbose lists every module)")
        else:
            console.print(f"{len(d['stages'])} stages, split points: {', '.join(safe(s) for s in d['split_points']) or 'none'}"
                          f"{'  OOM' if d['oom'] else ''}")
            for s in d["stages"]:
                console.print(f"  stage {s['stage']} on {s['device']} ({safe(s['cluster_device'])}): from {safe(s['first_module'])}, "
                              f"{len(s['modules'])} modules, parameters + optimizer state {s['param_bytes'] / 2**30:.2f} GiB, "
                              f"device peak {s['device_peak_bytes'] / 2**30:.2f} of {s['device_memory_bytes'] / 2**30:.2f} GiB")
        if out is not None:
            err_console.print(f"wrote {safe(out)}")

    emit(data, as_json, render)
