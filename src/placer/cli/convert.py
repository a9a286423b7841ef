"""`placer convert`: a graph in any supported format to the native JSON, or a module -> device map
to a placement file."""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli.common import err_console, load_problem, safe
from placer.cli.options import output_file
from placer.errors import InputError


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
