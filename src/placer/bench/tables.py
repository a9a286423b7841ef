"""Turn a finished plan into the experiment's table (laid out like the paper's, the paper's numbers
beside ours), a CSV with one line per run, and the numbers the report compares."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np

from placer.bench.runner import DOES_NOT_APPLY, NOT_APPLICABLE, OK, STALE_REASON, Cell, Plan
from placer.bench.spec import Agg, Experiment, Method


def value_ms(doc: dict) -> float | None:
    """The number a run reports, in ms: the simulated step time, or, for a run under a published
    objective (its spec names one), that objective's value (None when its placement is not valid
    under it; the dnn-partitioning files' unit is ms, so this is the paper's number)."""
    if doc["spec"].get("objective"):
        v = doc["result"].get("objective")
        return None if v is None else v / 1e3
    return doc["result"]["step_time_us"] / 1e3


def repaired(doc: dict) -> bool:
    """Whether the method's own placement broke the objective and was repaired by the Evaluator."""
    return any("was not valid under" in n for n in doc["result"].get("notes", []))


def aggregate(cells: list[Cell]) -> Agg:
    """Mean over the seeds that produced a result."""
    docs = [c.doc for c in cells if c.status == OK and c.doc]
    if not docs:
        return Agg(None, False, None, None, None, 0)

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return float(np.mean(xs)) if xs else None

    objective = [bool(d["spec"].get("objective")) for d in docs]
    return Agg(step_ms=mean(value_ms(d) for d in docs),
               oom=any(d["result"]["oom"] for d, o in zip(docs, objective) if not o),
               invalid=any(o and value_ms(d) is None for d, o in zip(docs, objective)),
               placements_to_best=mean(d.get("placements_to_best") for d in docs),
               placements=mean(d["cost"]["placements"] for d in docs),
               seconds=mean(d["cost"]["seconds"] for d in docs), runs=len(docs),
               curves=tuple(tuple((int(p), math.inf if v is None else v / 1e3) for p, v in d.get("curve") or ()) for d in docs))


def grouped(plan: Plan) -> dict[tuple[int, str], list[Cell]]:
    """(row index, method label) -> its cells (one per seed)."""
    rid = {id(r): k for k, r in enumerate(plan.rows)}
    out: dict[tuple[int, str], list[Cell]] = {}
    for c in plan.cells:
        out.setdefault((rid[id(c.row)], c.method.label), []).append(c)
    return out


def aggregates(plan: Plan) -> dict[int, dict[str, Agg]]:
    out: dict[int, dict[str, Agg]] = {}
    for (k, label), cells in grouped(plan).items():
        out.setdefault(k, {})[label] = aggregate(cells)
    return out


def fmt_ms(x: float) -> str:
    return f"{x:,.2f}" if x < 1e4 else f"{x:,.0f}"


def fmt_paper(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return fmt.format(v)


class Footnotes:
    def __init__(self):
        self.items: dict[str, int] = {}

    def ref(self, status: str, reason: str) -> str:
        text = f"{status}: {reason}" if reason else status
        k = self.items.setdefault(text, len(self.items) + 1)
        return f"{status} [{k}]"

    def markdown(self) -> str:
        return "\n".join(f"[{k}] {t}" for t, k in self.items.items())


def _status_cell(cells: list[Cell], notes: Footnotes) -> str:
    c = next((c for c in cells if c.status != OK), cells[0])
    if c.status == NOT_APPLICABLE:
        return "—"
    return notes.ref(c.status, c.reason)


def optimality_mark(extras: list[dict]) -> str:
    """``[opt]`` when every run proved its placement optimal for the real problem (the gap to a proven
    lower bound closed: ``optimal``, and ``proven_optimal`` where the method records both), else
    ``[opt of N groups]`` / ``[opt of its model]`` when a solver proved only its coarsened or relaxed model
    optimal (CP-SAT's ``proven_optimal_grouped``; a run cached before that key had ``optimal`` for it), else
    ``[gap X%]`` when every run records the proven gap of its objective (exact-published's ``gap``: (best -
    bound) / best), the largest over the runs, else ''."""
    if not extras:
        return ""
    real = sum(bool(e.get("optimal") and e.get("proven_optimal", True)) for e in extras)
    if real:
        return "[opt]" if real == len(extras) else f"[opt in {real} of {len(extras)} runs]"
    model = [e for e in extras if e.get("proven_optimal_grouped", e.get("optimal"))]
    if not model:
        gaps = [e["gap"] for e in extras if e.get("gap") is not None]
        return f"[gap {max(gaps):.1%}]" if len(gaps) == len(extras) else ""
    tasks = {e.get("tasks") for e in model if e.get("grouped")}
    if tasks:
        return f"[opt of {'/'.join(str(t) for t in sorted(tasks))} groups]"
    return "[opt of its model]"


def best_fitting_us(plan: Plan) -> dict[int, float]:
    """Row index -> the lowest simulated step time (us) of any run whose placement fits in memory
    (runs under a published objective left out): what the row's lower bound is compared with."""
    rid = {id(r): k for k, r in enumerate(plan.rows)}
    out: dict[int, float] = {}
    for c in plan.cells:
        d = c.doc
        if c.status != OK or not d or d["spec"].get("objective") or d["result"]["oom"]:
            continue
        k = rid[id(c.row)]
        out[k] = min(out.get(k, math.inf), float(d["result"]["step_time_us"]))
    return out


def bound_cell(ctx, best_us: float | None) -> list[str]:
    """The lower-bound cell (value and the bound that gave it) and the best-over-bound cell of a row;
    ``[opt]`` where a fitting placement's step time equals the bound (proven optimal)."""
    from placer.bench.rowbounds import proven

    if not ctx.lower_bound_us:
        return ["—", "—"]
    src = (ctx.bound or {}).get("source", "old")
    if ctx.bound and not math.isfinite(ctx.bound["value_us"]):
        src = "no placement fits; any placement"
    lb = f"{fmt_ms(ctx.lower_bound_us / 1e3)} ({src})"
    if best_us is None or not math.isfinite(best_us):
        return [lb, "—"]
    return [lb, f"{best_us / ctx.lower_bound_us:.2f}" + (" [opt]" if proven(ctx.bound, best_us) else "")]


def our_cell(exp: Experiment, cells: list[Cell], agg: Agg, lb_us: float | None, best: bool, notes: Footnotes,
             bound: dict | None = None) -> str:
    if agg.runs == 0:
        return _status_cell(cells, notes)
    if agg.step_ms is None:  # every run's placement breaks the objective's constraints
        return "invalid"
    docs = [v for v in (value_ms(c.doc) for c in cells if c.status == OK) if v is not None]
    text = fmt_ms(agg.step_ms) if not exp.uses_objectives() else f"{agg.step_ms:,.3f}"
    if len(docs) > 1:
        text += f" ± {float(np.std(docs)):,.2f}"
    if exp.lower_bound_column and lb_us and not agg.oom:  # the bound holds for placements that fit
        text += f" ({agg.step_ms * 1e3 / lb_us:.2f}x)"
    if agg.oom:
        text += " OOM"
    if agg.invalid:
        text += " (some seeds invalid)"
    if any(repaired(c.doc) for c in cells if c.status == OK):
        text += " (repaired)"
    mark = optimality_mark([c.doc["cost"].get("extra", {}) for c in cells if c.status == OK])
    if not mark.startswith("[opt]") and not agg.oom and not exp.uses_objectives():
        from placer.bench.rowbounds import proven

        if proven(bound, agg.step_ms * 1e3):  # the mean over seeds equals the bound: every seed does
            mark = "[opt]"
    if mark:
        text += f" {mark}"
    if best:
        text = f"**{text}**"
    if any(c.stale for c in cells if c.status == OK):
        text += " " + notes.ref("stale", STALE_REASON)
    if agg.runs < len(cells):  # some seeds failed or were not run: say how many ran
        text += f" ({agg.runs} of {len(cells)} seeds; the others " + _status_cell(cells, notes) + ")"
    return text


def has_paper(exp: Experiment, key: str) -> bool:
    return any(key in r.paper for r in exp.rows)


def render_table(plan: Plan) -> tuple[str, Footnotes]:
    exp, g, ag = plan.experiment, grouped(plan), aggregates(plan)
    notes = Footnotes()
    show_keys = list(dict.fromkeys(k for r in plan.rows for k in r.row.show))
    # each row's communication model, shown once any row's is not Placeto's (docs/simulator.md)
    comm = any(r.sim is not None and r.sim.comm_model != "placeto" for r in plan.rows)
    head = ["Model", *show_keys, "cluster", *(["comm model"] if comm else [])]
    if exp.lower_bound_column:
        head += ["lower bound (ms, source)", "best / bound"]
    best_us = best_fitting_us(plan) if exp.lower_bound_column else {}
    for m in plan.methods:
        head.append(f"{m.label} (ms)")
        if has_paper(exp, m.label):
            head.append(f"{m.label} paper ({exp.paper_unit})")
    for d in exp.derived:
        head.append(d.name)
        if has_paper(exp, d.name):
            head.append(f"{d.name} paper")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, ctx in enumerate(plan.rows):
        r = ctx.row
        a = ag.get(k, {})
        other = {m.label for m in plan.methods if exp.objective_for(r, m) != exp.objective_for(r, Method("", ""))}
        ok = {lab: x.step_ms for lab, x in a.items() if x.step_ms is not None and not x.oom and lab not in other}
        best = min(ok.values()) if ok else None
        cells = [r.label, *(str(r.show.get(s, "")) for s in show_keys),
                 ctx.cluster.name if ctx.cluster is not None else r.cluster]
        if comm:
            cells.append(ctx.sim.comm_model if ctx.sim is not None else "—")
        if exp.lower_bound_column:
            cells += bound_cell(ctx, best_us.get(k))
        for m in plan.methods:
            agg = a.get(m.label, Agg(None, False, None, None, None, 0))
            is_best = (best is not None and agg.step_ms is not None and not agg.oom and m.label not in other
                       and agg.step_ms <= best * (1 + 1e-9))
            cells.append(our_cell(exp, g[(k, m.label)], agg, ctx.lower_bound_us, is_best and len(ok) > 1, notes,
                                  ctx.bound))
            if has_paper(exp, m.label):
                cells.append(fmt_paper(r.paper.get(m.label)))
        for d in exp.derived:
            v = d.fn(a) if a else None
            cells.append(v if isinstance(v, str) else "—" if v is None or not math.isfinite(v) else d.fmt.format(v))
            if has_paper(exp, d.name):
                cells.append(fmt_paper(r.paper.get(d.name), d.fmt))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), notes


def geomean(xs: list[float]) -> float | None:
    """Geometric mean of the positive finite values of ``xs`` (None if there is none)."""
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


REFERENCE = "cp-sat"  # the method method_stats compares every column with (its "geo-mean x CP-SAT" column)


def method_stats(plan: Plan) -> list[dict]:
    """Per method over all rows: rows with a memory-feasible result, geometric-mean and worst ratio
    to the lower bound, rows where it was best, geometric-mean ratio to CP-SAT's result (rows where
    CP-SAT produced one), mean placements and seconds."""
    ag = aggregates(plan)
    cp = next((m.label for m in plan.methods if m.method == REFERENCE), None)
    out = []
    for m in plan.methods:
        lb, vs_cp, wins, pl, sec = [], [], 0, [], []
        for k, ctx in enumerate(plan.rows):
            a = ag.get(k, {})
            x = a.get(m.label)
            if x is None or x.step_ms is None or x.oom:
                continue
            if ctx.lower_bound_us:
                lb.append(x.step_ms * 1e3 / ctx.lower_bound_us)
            ok = [y.step_ms for y in a.values() if y.step_ms is not None and not y.oom]
            wins += x.step_ms <= min(ok) * (1 + 1e-9)
            if cp and cp in a and a[cp].step_ms is not None and not a[cp].oom:
                vs_cp.append(x.step_ms / a[cp].step_ms)
            pl.append(x.placements or 0)
            sec.append(x.seconds or 0)
        out.append({"method": m.label, "rows": len(lb), "geo_lb": geomean(lb), "worst_lb": max(lb) if lb else None,
                    "wins": wins, "geo_cp_sat": geomean(vs_cp), "placements": float(np.mean(pl)) if pl else None,
                    "seconds": float(np.mean(sec)) if sec else None})
    return out


def method_summary(stats: list[dict]) -> str:
    head = ["method", "rows with a result (no OOM)", "geo-mean x lower bound", "worst x lower bound", "best in row",
            "geo-mean x CP-SAT", "mean placements", "mean seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in stats:
        if not r["rows"]:
            lines.append(f"| {r['method']} | 0 | — | — | — | — | — | — |")
            continue
        cp = "—" if r["geo_cp_sat"] is None else f"{r['geo_cp_sat']:.3f}"
        lines.append(f"| {r['method']} | {r['rows']} | {r['geo_lb']:.3f} | {r['worst_lb']:.3f} | {r['wins']} | {cp} | "
                     f"{r['placements']:,.0f} | {r['seconds']:.2f} |")
    return "\n".join(lines)


CSV_FIELDS = ("experiment", "level", "row", "cluster", "graph", "graph_ops", "method_label", "method", "seed",
              "status", "step_time_us", "objective_us", "oom", "lower_bound_us", "placements_sampled",
              "placements_to_best", "sim_calls", "seconds", "paper_value", "reason", "run_file",
              "lower_bound_source")


def csv_text(plan: Plan) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for c in plan.cells:
        r, d = c.row.row, c.doc
        w.writerow({
            "experiment": plan.experiment.name, "level": plan.level, "row": r.label,
            "cluster": c.row.cluster.name if c.row.cluster is not None else r.cluster,
            "graph": c.row.spec_used or "|".join(r.candidates),
            "graph_ops": c.row.graph.n_ops if c.row.graph is not None else "",
            "method_label": c.method.label, "method": c.method.method, "seed": c.seed, "status": c.status,
            "step_time_us": d["result"]["step_time_us"] if d else "",
            "objective_us": d["result"]["objective"] if d else "",
            "oom": d["result"]["oom"] if d else "",
            "lower_bound_us": c.row.lower_bound_us or "",
            "placements_sampled": d["cost"]["placements"] if d else "",
            "placements_to_best": d.get("placements_to_best", "") if d else "",
            "sim_calls": d["cost"]["sim_calls"] if d else "",
            "seconds": f"{d['cost']['seconds']:.4f}" if d else "",
            "paper_value": r.paper.get(c.method.label, ""),
            "reason": c.reason, "run_file": f"runs/{c.path.name}" if c.path and c.status in (OK, DOES_NOT_APPLY) else "",
            "lower_bound_source": (c.row.bound or {}).get("source", "old" if c.row.lower_bound_us else ""),
        })
    return buf.getvalue()


def comparisons(plan: Plan) -> list[dict]:
    """Every place where the paper gives a number and we have one: method times and derived columns."""
    exp, ag = plan.experiment, aggregates(plan)
    out = []
    for k, ctx in enumerate(plan.rows):
        a, r = ag.get(k, {}), ctx.row
        for m in plan.methods:
            if m.label in r.paper:
                x = a.get(m.label)
                out.append({"row": r.label, "cluster": r.cluster, "column": m.label, "kind": "time",
                            "paper": r.paper[m.label], "ours_ms": None if x is None else x.step_ms,
                            "ours_oom": bool(x and x.oom)})
        for d in exp.derived:
            if d.name in r.paper:
                v = d.fn(a) if a else None
                out.append({"row": r.label, "cluster": r.cluster, "column": d.name, "kind": "derived",
                            "paper": r.paper[d.name],
                            "ours": v if v is None or (not isinstance(v, str) and math.isfinite(v)) else None,
                            "fmt": d.fmt})
    return out


def status_counts(plan: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in plan.cells:
        out[c.status] = out.get(c.status, 0) + 1
    return out


def unavailable(plan: Plan) -> dict[str, list[str]]:
    """Methods and graphs that could not run, with the reason (for the report)."""
    methods: dict[str, str] = {}
    graphs: dict[str, str] = {}
    for c in plan.cells:
        if c.status in ("not implemented", "unavailable"):
            methods.setdefault(c.method.label, f"{c.status}: {c.reason}")
        elif c.status == "missing":
            graphs.setdefault(c.row.row.label, c.reason)
    return {"methods": [f"{k} ({v})" for k, v in methods.items()],
            "graphs": [f"{k} ({v})" for k, v in graphs.items()]}

