"""One self-contained HTML report of placements (``placer compare / optimize / simulate --html FILE``).

:func:`report_data` turns a Problem and a few placements with their simulations into compact JSON
(timeline bars, memory lines, the module tree, placements as strings); :func:`write_report` writes
that JSON, the page's own JavaScript (``report_page.py``) and Plotly's JavaScript inlined into one
file, so the page needs no network when viewed. Large graphs are aggregated here, and the page says
how (``notes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from placer.viz import report_data as rd
from placer.viz.colours import colours


@dataclass
class ReportEntry:
    """One placement in the report: a method's answer (or a placement file) and its simulation."""

    name: str
    placement: np.ndarray  # (n_ops,) device per op
    sim: Any  # placer.sim.SimResult
    curve: Sequence[tuple[float, float]] = ()  # (placements sampled, best objective so far in us)
    row: dict = field(default_factory=dict)  # placements_sampled, sim_calls, wall_s, objective, ...

    @classmethod
    def from_result(cls, res, row: dict | None = None) -> "ReportEntry":
        """From a :class:`placer.placement.PlacementResult` (``row``: its summary line, e.g. compare's)."""
        return cls(res.method, np.asarray(res.placement.devices), res.sim, list(res.curve),
                   dict(row if row is not None else res.summary()))


def _r(a, digits: int = 2) -> list:
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def _entry_data(P, e: ReportEntry, op_module: np.ndarray, levels: list, max_bars: int) -> dict:
    g, sim = P.graph, e.sim
    n_dev = P.n_devices
    notes = []
    # compute bars: ops that take time, merged per (module, role) run when the graph is large
    start, end = np.asarray(sim.start_us, dtype=np.float64), np.asarray(sim.end_us, dtype=np.float64)
    dev = np.asarray(sim.device, dtype=np.int64)
    take = np.flatnonzero(end > start)
    t = sim.transfers
    n_send = len(t["tensor"])
    share = max_bars * len(take) // max(1, len(take) + n_send) if n_send else max_bars
    role = np.asarray(g.role, dtype=np.int64)
    key = op_module[take] * 3 + role[take]
    keys = [lv[take] * 3 + role[take] for lv in levels] + [role[take]]
    seg, tol, level = rd.bars(dev[take], start[take], end[take], keys, limit=max(share, 1), makespan_us=sim.makespan_us)
    b = rd.summarise_bars(seg, dev[take], start[take], end[take], take, end[take] - start[take], key)
    if tol >= 0:
        how = (f"of one module (cut to depth {len(levels) - level}) and role" if level < len(levels)
               else "of one role" if level == len(levels) else "of any module and role")
        notes.append(f"timeline: {len(take):,} ops drawn as {len(b['n']):,} bars: back-to-back ops {how} merged"
                     + (f", then across idle gaps under {tol:,.1f} us" if tol > 0 else ""))
    if len(take) < g.n_ops:
        notes.append(f"timeline: {g.n_ops - len(take):,} ops that take no time are not drawn")
    ops = {"lane": b["lane"].tolist(), "start": _r(b["start"]), "end": _r(b["end"]), "n": b["n"].tolist(),
           "busy": _r(b["weight"]), "first": b["first"].tolist(), "module": (b["key"] // 3).tolist(),
           "role": (b["key"] % 3).tolist(),
           "bytes": _r(np.bincount(seg, weights=np.asarray(g.output_bytes, dtype=np.float64)[take], minlength=len(b["n"])), 0)}
    # sends: one lane per source device, merged per destination
    sends = {"lane": [], "start": [], "end": [], "n": [], "bytes": [], "first": [], "dst": []}
    if n_send:
        src, dst = np.asarray(t["src"], dtype=np.int64), np.asarray(t["dst"], dtype=np.int64)
        ts, te = np.asarray(t["start_us"], dtype=np.float64), np.asarray(t["end_us"], dtype=np.float64)
        nb = np.asarray(t.get("bytes", np.zeros(n_send)), dtype=np.float64)
        seg, tol, _ = rd.bars(src, ts, te, [dst], limit=max(max_bars - len(b["n"]), 1), makespan_us=sim.makespan_us)
        s = rd.summarise_bars(seg, src, ts, te, np.asarray(t["tensor"], dtype=np.int64), nb, dst)
        if tol >= 0:
            notes.append(f"timeline: {n_send:,} transfers drawn as {len(s['n']):,} bars: overlapping or back-to-back "
                         "sends to one device merged" + (f", then across idle gaps under {tol:,.1f} us" if tol > 0 else ""))
        sends = {"lane": s["lane"].tolist(), "start": _r(s["start"]), "end": _r(s["end"]), "n": s["n"].tolist(),
                 "bytes": _r(s["weight"], 0), "first": s["first"].tolist(), "dst": s["key"].tolist()}
    # memory over the step against capacity
    lines = rd.memory_timeline(sim, P.resident_bytes(dev))
    memory = []
    thinned = False
    for d, (tt, lv) in enumerate(lines):
        peak, peak_t = rd.peak_of(tt, lv)
        tt, lv, merged = rd.downsample_max(tt, lv)
        thinned |= merged
        memory.append({"t": _r(tt), "bytes": _r(lv, 0), "peak": peak, "peak_t": round(peak_t, 2),
                       "capacity": float(P.memory_bytes[d])})
    if thinned:
        notes.append(f"memory: lines with more than {rd.MAX_MEMORY_POINTS:,} points keep each time bin's highest "
                     "level (an upper envelope; the peak is exact)")
    row = {k: v for k, v in e.row.items() if k in ("step_time_us", "objective", "oom", "placements_sampled", "sim_calls",
                                                   "wall_s", "speedup_vs_single_gpu", "speedup_over_single",
                                                   "error")}
    row.setdefault("step_time_us", float(sim.makespan_us))
    row.setdefault("objective", float(sim.objective_us))
    row.setdefault("oom", bool(sim.oom))
    if "speedup_over_single" not in row:  # a row from optimize or simulate: over the best single device that fits
        from placer.sim.single import over_single

        row["speedup_over_single"] = over_single(P, sim.params, row["step_time_us"], row["oom"])["speedup_over_single"]
    row["peak_memory_bytes"] = [float(x) for x in sim.peak_memory_bytes]
    curve = [[float(x), float(y)] for x, y in (e.curve or []) if y is not None and np.isfinite(y)]
    return {"name": e.name, "row": row, "placement": rd.encode_placement(dev), "ops": ops, "sends": sends,
            "memory": memory, "curve": curve, "notes": notes}


def report_data(problem, entries: Sequence[ReportEntry], title: str = "", command: str = "", best: str | None = None,
                errors: Sequence[dict] = (), max_bars: int = rd.MAX_BARS, bound: dict | None = None) -> dict:
    """The report's JSON: the graph and cluster once, then one block per placement. ``best``: the
    entry shown first (default: the lowest objective that fits in memory). ``bound``: the command's
    lower bound (:meth:`placer.lowerbound.Bound.as_dict`), computed here when not given. ``errors``: rows of
    methods that did not apply (``{"method", "error"}``), listed in the table."""
    from placer.lowerbound import lower_bound
    from placer.sim.single import single_device

    P, g = problem, problem.graph
    if not entries:
        raise ValueError("a report needs at least one placement")
    names = [e.name for e in entries]
    if best is None or best not in names:
        best = min(entries, key=lambda e: (bool(e.sim.oom), float(e.sim.objective_us))).name
    mod_names, op_module = np.unique(np.asarray([m or "" for m in g.modules], dtype=object), return_inverse=True)
    op_module = op_module.astype(np.int64)
    levels = rd.module_levels(g.modules) if any(g.modules) else []
    size = np.asarray(P.fastest_us, dtype=np.float64)
    size = np.where(np.isfinite(size), size, 0.0)
    notes = []
    has_modules = any(m for m in g.modules)
    tree = None
    if has_modules:
        ids, labels, parents, values, op_node, cut = rd.module_tree(list(g.modules), size)
        tree = {"ids": ids, "labels": labels, "parents": parents.tolist(), "values": _r(values), "op_node": op_node.tolist()}
        if cut is not None:
            notes.append(f"module tree: cut at depth {cut} to keep at most {rd.MAX_TREE_NODES:,} boxes "
                         "(deeper modules counted in their ancestor)")
    if bound is None:  # the command's own bound (Bound.as_dict()) when it has one, else computed here
        fits = [float(e.sim.makespan_us) for e in entries if not e.sim.oom]
        bound = lower_bound(P, entries[0].sim.params, known_us=min(fits) if fits else None).as_dict()
    # the bound on fitting placements; when none fits, the bound on every placement (placer.lowerbound)
    lb = bound["value_us"] if np.isfinite(bound["value_us"]) else bound["any_placement_us"]
    data = {
        "title": title or f"{g.name} on {P.cluster.name}", "command": command, "graph": g.name, "cluster": P.cluster.name,
        "n_ops": g.n_ops, "n_edges": g.n_edges, "lower_bound_us": float(lb),
        "lower_bound_source": bound["source"] + (", proven optimal" if bound.get("proven_optimal") else ""),
        "devices": list(P.cluster.device_names), "capacity": [float(x) for x in P.memory_bytes],
        "op_names": [n[:120] for n in g.op_names], "op_module": op_module.tolist(),
        "modules": [str(m) for m in mod_names], "op_role": np.asarray(g.role, dtype=np.int64).tolist(),
        "op_size": _r(size), "op_bytes": _r(g.output_bytes, 0), "tree": tree, "best": best,
        "entries": [dict(_entry_data(P, e, op_module, levels, max_bars), colour=c)
                    for e, c in zip(entries, colours(len(entries)))],
        "single_device": single_device(P, entries[0].sim.params),
        "errors": [{"method": str(r.get("method", "")), "error": str(r.get("error", ""))[:500]} for r in errors],
        "notes": notes,
    }
    data["diff_pair"] = _default_pair(names, best)
    return data


def _default_pair(names: list[str], best: str) -> list[str]:
    """The two placements the page compares first: the expert's (else the single GPU's, else the
    first other) against the best."""
    for ref in ("expert", "single-gpu"):
        if ref in names and ref != best:
            return [ref, best]
    other = next((n for n in names if n != best), best)
    return [other, best]


def render_html(data: dict) -> str:
    """The page: Plotly's JavaScript inlined (no network at view time), the data as JSON, the page's script."""
    import json

    from placer.viz.report_page import page

    blob = json.dumps(data, separators=(",", ":"), allow_nan=False, default=_plain)
    return page(_plotly_js(), blob.replace("<", "\\u003c"), data["title"])  # no "</script>" nor "<!--" inside


def _plain(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(type(x).__name__)


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ModuleNotFoundError:
        from placer.errors import InputError

        raise InputError("html", "plotly", "is not installed", "pip install 'placer[plot]'", kind="html") from None
    return get_plotlyjs()


def write_report(path, problem, entries: Sequence[ReportEntry], **kw) -> dict:
    """Write the HTML report to ``path`` (atomically). Returns ``{"path", "bytes", "seconds"}``."""
    import time

    from placer.io import write_text_atomic

    t0 = time.perf_counter()
    html = render_html(report_data(problem, entries, **kw))
    write_text_atomic(path, html)
    return {"path": str(path), "bytes": len(html.encode("utf-8")), "seconds": time.perf_counter() - t0}
