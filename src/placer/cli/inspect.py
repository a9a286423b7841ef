"""`placer info` (a graph on a cluster: sizes, work, memory, lower bounds) and `placer methods`
(the registered placement methods)."""

from __future__ import annotations

from rich.table import Table

from placer.cli.common import console, emit, gib, load_problem, safe, us
from placer.cli.options import ClusterOpt, GraphArg, JsonOpt


def info(graph: str = GraphArg, cluster: str = ClusterOpt, as_json: bool = JsonOpt):
    """Ops, edges, total work, critical path, memory and lower bounds of a graph on a cluster."""
    from placer.compare import step_bound

    P = load_problem(graph, cluster)
    data = {"graph": P.graph.subgraph_summary(), "problem": P.summary()}
    data["lower_bound"] = step_bound(P, None)

    def render(d):
        gs, ps = d["graph"], d["problem"]
        t = Table(title=f"{safe(gs['name'])} on {safe(ps['cluster'])}", show_header=False)
        t.add_row("ops / edges", f"{gs['ops']:,} / {gs['edges']:,}")
        t.add_row("forward / backward / update", f"{gs['forward']:,} / {gs['backward']:,} / {gs['update']:,}")
        t.add_row("cost keys (per device)", ", ".join(f"{safe(n)}={safe(s)}" for n, s in zip(ps["devices"], ps["cost_sources"])))
        t.add_row("total work (fastest device)", us(ps["total_work_us"]))
        t.add_row("critical path (fastest, no comm)", us(ps["critical_path_us"]))
        t.add_row("load bound (work / devices)", us(ps["load_bound_us"]))
        t.add_row("old lower bound (max of the two)", us(ps["lower_bound_us"]))
        t.add_row("lower bound on step time (fitting)", f"{us(d['lower_bound']['value_us'])} "
                  f"({safe(d['lower_bound']['source'])}; placer bound)")
        t.add_row("parameter / persistent memory", gib(ps["param_bytes"]))
        t.add_row("sum of output tensors", gib(gs["output_bytes"]))
        t.add_row("device memory", ", ".join(gib(m) for m in ps["memory_bytes"]))
        t.add_row("colocation groups", str(gs["colocation_groups"]))
        t.add_row("fits in total memory", "yes" if ps["memory_possible"] else "NO")
        console.print(t)

    emit(data, as_json, render)


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

    emit({"methods": rows}, as_json, lambda d: render(d["methods"]))
