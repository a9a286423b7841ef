"""`placer run`: execute a placement of a captured PyTorch graph on the devices torch sees.

    placer run g.json --cluster k80x2 --placement p.json --steps 10
    placer run g.json --cluster k80x2 --placement single:0 --map gpu:0=cuda:0,gpu:1=cuda:0,cpu:0=cpu
    placer run g.json --placement p.json --allow-code ./models      # the recipe imports ./models/net.py

A graph captured from a Python file is rebuilt by importing that file: running a graph file runs the
code its recipe names. That code must lie under a folder given with ``--allow-code`` (or
``--allow-any-code``), checked by :mod:`placer.runtime.trust` before anything is imported; code in
the standard library or an installed package is refused whatever the flags.
"""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, emit, gib, load_problem, placement_arg, safe, sim_params, us
from placer.cli.options import ClusterOpt, GraphArg, JsonOpt, SimOpt, at_least
from placer.errors import InputError


MAX_STEPS = 10_000  # timed steps: a median needs tens; 10,000 steps of a large model run for hours
MAX_WARMUP = 1_000
MAX_THREADS_PER_CORE = 4  # torch threads beyond this only slow it down; a million exhausted the machine's thread limit


def _threads(ctx: typer.Context, param: typer.CallbackParam, value):
    import os

    cores = os.cpu_count() or 1
    return at_least(1, cores, MAX_THREADS_PER_CORE * cores,
                    f"{MAX_THREADS_PER_CORE} per CPU core, {cores} cores here")(ctx, param, value)


@app.command(epilog="Trust: a graph captured from your own Python file (`placer capture my_model.py:build`) is "
             "rebuilt by importing that file and calling its factory, so running a graph file runs the code its "
             "recipe names. `placer run` refuses unless that code lies under a folder you allow with --allow-code "
             "DIR (or you pass --allow-any-code for a graph file you trust). Code in the standard library or an installed "
             "package (site-packages) is never run from a recipe, whatever the flags. Zoo and hf: graphs name no code.")
def run(graph: str = GraphArg, cluster: str = ClusterOpt,
        placement: str = typer.Option(..., "--placement", "-p", help="placement JSON, a module -> device map "
                                           "(placer export's or accelerate's), or 'single:<device index>'"),
        map_: Optional[str] = typer.Option(None, "--map", help="cluster device -> real device, e.g. gpu:0=cuda:0,cpu:0=cpu "
                                           "(default: i-th cluster GPU -> cuda:i if present, everything else -> cpu)"),
        steps: int = typer.Option(10, help=f"timed steps (1 to {MAX_STEPS:,})",
                                  callback=at_least(1, 10, MAX_STEPS, "a median needs tens")),
        warmup: int = typer.Option(2, help=f"untimed steps first, the first also counts memory (1 to {MAX_WARMUP:,})",
                                   callback=at_least(1, 2, MAX_WARMUP, "a few steps warm caches and allocators")),
        threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: the cluster's, for a detected one, else torch's; "
                                                   "at most 4 per CPU core)",
                                              callback=_threads),
        allow_code: list[str] = typer.Option([], "--allow-code", metavar="DIR",
                                             help="a folder whose Python files the graph's recipe may import and run "
                                                  "(repeatable; see Trust below)"),
        allow_any_code: bool = typer.Option(False, "--allow-any-code",
                                            help="import and run whatever code the graph's recipe names: only for "
                                                 "graph files you trust"),
        apply_: bool = typer.Option(False, "--apply", help="also time the plain eager step (forward, backward, "
                                    "optimizer step) of the model with the placement applied as a module -> device "
                                    "map (placer.apply; the placement must be module-level at depth 2)"),
        sim: str = SimOpt, as_json: bool = JsonOpt):
    """Run a placement of a captured model for real: measured step time and peak memory per device,
    beside the simulator's prediction. Rebuilding the model runs the Python code its recipe names:
    see Trust below."""
    from placer.cli.guard import user_code
    from placer.build import recipe_of
    from placer.runtime import device_map, parse_map, run_placement
    from placer.runtime.trust import check_allowed, check_code, check_recipe

    allowed = check_allowed(allow_code)  # folders only: not empty, not inside Python's installation
    P = load_problem(graph, cluster)
    if threads is None:  # a detected cluster (here:cpus=N: one thread per CPU device) holds for its thread count
        from placer.runtime.detect import cluster_threads
        threads = cluster_threads(P.cluster)
    if P.graph.meta.get("source") != "torch":
        raise InputError(graph, f"graph '{P.graph.name}' (source {P.graph.meta.get('source', 'unknown')})",
                         "has no executable program to run", "run graphs captured from PyTorch (`placer capture`, the zoo, hf:NAME)")
    p = placement_arg(P, placement)
    real = device_map(P.cluster, parse_map(map_, P.cluster))
    recipe = recipe_of(P.graph)
    if recipe is not None:  # checked before anything is imported or built
        check_recipe(recipe, graph)
        check_code(recipe, graph, allowed, allow_any_code)
    applied = None
    if apply_:  # refused before anything runs when the placement is not module-level
        from placer.cli.advice import module_split
        from placer.export import device_map as module_map
        from placer.grouping.modules import DEFAULT_DEPTH

        try:
            applied = module_map(P, p, real, DEFAULT_DEPTH, where=placement)["device_map"]
        except InputError as e:
            raise module_split(e, graph, DEFAULT_DEPTH) from None
    with console.status(f"running {safe(P.graph.name)} on {', '.join(sorted(set(real)))} ...", spinner="dots"), \
            user_code(graph, "recipe factory"):
        rep = run_placement(P.graph, P.cluster, p, real, steps=steps, warmup=warmup, threads=threads,
                            sim_params=sim_params(sim, P))
    data = rep.summary()
    if applied is not None:
        from placer.apply_map import time_applied

        with console.status("timing the eager step with the map applied ...", spinner="dots"), \
                user_code(graph, "recipe factory"):
            data.update(time_applied(P.graph, applied, steps=steps, warmup=warmup))

    def render(d):
        from rich.table import Table

        console.print(f"{safe(d['graph'])} on {safe(d['cluster'])}: measured {us(d['measured_median_us'])} per step "
                      f"(median of {d['steps']}, min {us(d['measured_min_us'])}, max {us(d['measured_max_us'])}, "
                      f"{d['clock']}); simulator {us(d['predicted_us'])} "
                      f"(predicted / measured {d['predicted_over_measured']}); loss {d['loss']:.5g}; "
                      f"{d['transfers']} transfers")
        t = Table("device", "runs on", "ops", "peak memory (counted)", "predicted peak", "cuda max allocated")
        for dv in d["devices"]:
            t.add_row(safe(dv["name"]), dv["real"], f"{dv['ops']:,}", gib(dv["peak_bytes"]), gib(dv["predicted_peak_bytes"]),
                      gib(dv["cuda_peak_bytes"]) if "cuda_peak_bytes" in dv else "")
        console.print(t)
        if "applied_median_us" in d:
            console.print(f"eager step with the module map applied (placer.apply): {us(d['applied_median_us'])} "
                          f"(median of {d['applied_steps']}), loss {d['applied_loss']:.5g}")

    emit(data, as_json, render)
