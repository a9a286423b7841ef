"""`placer zoo ...`: the benchmark models, captured from PyTorch as training-step graphs.

    placer zoo list
    placer zoo export NAME --out graph.json [--batch N] [--no-cache] [--profile-cpu]
"""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, err_console
from placer.cli.options import at_least, output_file
from placer.errors import InputError

zoo_app = typer.Typer(no_args_is_help=True, help="The papers' models as captured training-step graphs.")
app.add_typer(zoo_app, name="zoo")


@zoo_app.command("list")
def list_models(as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON")):
    """The zoo models, their family, configuration and whether a built graph is cached."""
    import json
    import sys

    from rich.table import Table

    from placer.zoo.models import ZOO, cached_path

    rows = []
    for z in ZOO.values():
        try:
            cached = cached_path(z.name).exists()
        except ModuleNotFoundError:  # no torch: the cache key needs its version
            cached = False
        rows.append({"name": z.name, "family": z.family, "description": z.description,
                     "config": z.config, "cached": cached})
    if as_json:
        sys.stdout.write(json.dumps({"models": rows}, indent=1) + "\n")
        return
    t = Table("name", "family", "model", "cached")
    for r in rows:
        t.add_row(r["name"], r["family"], r["description"], "yes" if r["cached"] else "")
    console.print(t)


@zoo_app.command("export")
def export(name: str = typer.Argument(..., help="zoo model name (see `placer zoo list`)"),
           out: str = typer.Option(..., "--out", "-o", help="native JSON output (.json or .json.gz)",
                                   callback=output_file),
           batch: Optional[int] = typer.Option(None, help="batch size (default: the papers')", callback=at_least(1, 32, 2**20, "a million samples per step")),
           optimizer: str = typer.Option("sgd-momentum", help="sgd, sgd-momentum or adam"),
           config: list[str] = typer.Option([], "--set", help="override a model option, KEY=VALUE (JSON value), "
                                                            "e.g. --set layers=4 --set blocks=[1,1,1,1]"),
           no_cache: bool = typer.Option(False, "--no-cache", help="capture again even if a cached graph exists"),
           profile_cpu: bool = typer.Option(False, "--profile-cpu",
                                            help="also measure every op on this CPU, one torch thread, thread CPU time "
                                                 "(compute_us['cpu'] = measured medians)")):
    """Capture a zoo model's training step (forward, backward, update) and write it as a graph file."""
    import json

    from placer.frontends.native import save_graph
    from placer.zoo.models import zoo_capture, zoo_graph, zoo_model

    zoo_model(name)
    if batch is not None and batch < 1:
        raise InputError("--batch", str(batch), "is not a positive batch size", "use --batch 1 or more")
    over = {"batch": batch} if batch is not None else {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("--set", item, "is not KEY=VALUE", "e.g. --set layers=4")
        try:
            over[key] = json.loads(value)
        except json.JSONDecodeError:
            over[key] = value
    with console.status(f"capturing {name} ...", spinner="dots"):
        if profile_cpu:
            from placer.cost.profile import profile_capture, with_measured_costs

            cap = zoo_capture(name, optimizer=optimizer, **over)
            g = with_measured_costs(cap.graph, profile_capture(cap, "cpu", clock="thread"), "cpu")
        else:
            g = zoo_graph(name, cache=not no_cache, optimizer=optimizer, **over)
    save_graph(g, out)
    err_console.print(f"wrote {out} ({g.n_ops:,} ops, {g.n_edges:,} edges, {g.flops.sum() / 1e12:,.2f} TFLOP, "
                      f"cost keys {', '.join(g.cost_keys)})")
