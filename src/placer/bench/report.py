"""``REPRODUCTION.md``: every experiment's latest committed results against its paper, regenerated
from ``results/<experiment>/summary.json`` (written by each run) and nothing else, so the numbers in
the report are the numbers in the result files. It also says, per experiment, whether every run was
made with today's code of its method (the code fingerprint in each run file against today's,
:func:`stale_runs`), so a table that older code produced is marked as such."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from placer.bench.experiments import EXPERIMENTS
from placer.bench.results import command_line

INTRO = """# Reproduction report

Regenerate with `placer bench report` (reads `results/*/summary.json`; runs nothing). Each section
comes from one experiment's committed results (`results/<experiment>/`: `table.md`, `results.csv`,
one JSON per run, plots, `env.json`) and names the command that regenerates them.

How to read it. Every paper measured TensorFlow graphs on real K80/K40 GPUs; we simulate our own
PyTorch captures of the same models on K80-like presets, usually with far fewer sampled placements.
So absolute times (their seconds, our simulated milliseconds) are not comparable; what should carry
over is the shape of each table: which method wins, and by roughly how much. Below each table we
say plainly where ours agree and where they do not. A method that does not exist yet in `placer`,
or a graph that is not available, is shown as such; no cell is ever filled with a number we did
not produce.

Running the experiments: `placer bench list` names them; `placer bench <experiment>` runs one at
the default budget (minutes on a 2-core machine for the classical ones, longer where learned
methods train), `--quick` at a CI-sized budget, `--budget paper` at the papers' sample counts;
`--jobs N` runs independent runs in N processes; `--seeds 0,1,2` overrides the seeds. Runs are
cached by a hash of everything that decides them (graph and cluster content, method, parameters,
seed, budget, simulator settings, and the source of the method, the simulator and the cost model),
so an interrupted experiment resumes and an unchanged one reruns nothing; `--estimate` runs nothing
and prices what a command would make (CPU hours, and wall time at `--jobs N`) from earlier runs of
the same cells. The real graphs are read from `$PLACER_SHARED_GRAPHS` (default `../shared/graphs`
beside the repository); without them those rows show as missing. Placeto Table 1 and the
generalization experiment have no table at the papers' budget: `placer bench placeto-table1 --budget
paper --estimate --jobs 14` (and the same for `generalization`) prints why (README: Reproducing the
papers).
"""


def _load(results_dir: Path, name: str) -> dict | None:
    from placer.io import read_json

    p = results_dir / name / "summary.json"
    if not p.exists():
        return None
    try:
        return read_json(p)
    except Exception:
        return None


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def agreement_lines(s: dict) -> list[str]:
    """Plain sentences: derived columns (ours vs the paper's) and, per row, which method each says
    wins among the columns both have."""
    out, pending = [], {}
    for c in s["comparisons"]:
        if c["kind"] != "derived":
            continue
        p, o = _num(c["paper"]), c.get("ours")
        fmt = c.get("fmt", "{:.1f}")
        if p is None:
            continue
        if o is None:
            pending[c["column"]] = pending.get(c["column"], 0) + 1
            continue
        where = f"{c['row']} ({c['cluster']}), {c['column']}"
        verdict = ""
        if "%" in fmt:
            same = (p > 0) == (o > 0) or (abs(p) < 1 and abs(o) < 1)
            verdict = " (same direction)" if same else " (OPPOSITE direction)"
        elif fmt.endswith("x"):
            verdict = " (same side of 1)" if (p > 1) == (o > 1) else " (OPPOSITE side of 1)"
        out.append(f"{where}: paper {fmt.format(p)}, ours {fmt.format(o)}{verdict}.")
    rows: dict[tuple[str, str], list[dict]] = {}
    for c in s["comparisons"]:
        if c["kind"] == "time":
            rows.setdefault((c["row"], c["cluster"]), []).append(c)
    for (row, cl), cs in rows.items():
        paper = {c["column"]: _num(c["paper"]) for c in cs if _num(c["paper"]) is not None}
        ours = {c["column"]: c["ours_ms"] for c in cs if c["ours_ms"] is not None and not c["ours_oom"]}
        common = [k for k in paper if k in ours]
        if len(common) < 2:
            continue
        pb, ob = min(paper[k] for k in common), min(ours[k] for k in common)
        pw = [k for k in common if paper[k] <= pb * (1 + 1e-9)]
        ow = [k for k in common if ours[k] <= ob * (1 + 1e-9)]
        note = "agrees" if set(pw) & set(ow) else "differs"
        overall = min(paper.values())
        lacking = [k for k, v in paper.items() if v <= overall * (1 + 1e-9) and k not in ours]
        extra = f"; the paper's overall best, {' = '.join(lacking)}, has no result here" if lacking else ""
        out.append(f"{row} ({cl}), best of the {len(common)} columns both have: paper {' = '.join(pw)} ({pb:g} s), "
                   f"ours {' = '.join(ow)} ({ob:,.2f} ms): {note}{extra}.")
    if pending:
        out.append("Not comparable yet (a method in the column has no result): "
                   + ", ".join(f"{k} ({n} rows)" for k, n in pending.items()) + ".")
    return out


def findings(s: dict) -> list[str]:
    """Plain sentences from the per-method statistics of our own comparisons."""
    st = [r for r in s.get("method_stats", []) if r["rows"]]
    if not st:
        return []
    n_rows = max(r["rows"] for r in st)
    out = []
    top = max(st, key=lambda r: r["wins"])
    out.append(f"Best most often: {top['method']} ({top['wins']} rows; ties count for each method tied).")
    # methods with a memory-feasible result on (nearly) every row: averages over a few easy rows mislead
    broad = [r for r in st if r["rows"] >= 0.8 * n_rows]
    close = min(broad, key=lambda r: r["geo_lb"])
    out.append(f"Closest to the lower bound on average, among methods with a result on at least 80% of the "
               f"{n_rows} rows: {close['method']} (geometric mean {close['geo_lb']:.2f}x over {close['rows']} rows).")
    cheap = [r for r in broad if (r["placements"] or 0) <= 20]
    if cheap:
        c = min(cheap, key=lambda r: r["geo_lb"])
        out.append(f"Best heuristic with at most 20 simulated placements: {c['method']} ({c['geo_lb']:.2f}x the "
                   f"lower bound, {c['seconds']:.2f} s per run).")
    cp = next((r for r in st if r["method"] == "cp-sat"), None)
    if cp:
        beat = [r["method"] for r in st if r["geo_cp_sat"] is not None and r["geo_cp_sat"] < 0.99 and r is not cp]
        if beat:
            out.append("Beat CP-SAT's time-limited, coarsened result on average: " + ", ".join(beat)
                       + " (CP-SAT solves a grouped model; see the [opt of N groups] marks).")
    return out


def stale_runs(results_dir: Path, name: str) -> tuple[int, int, list[str]]:
    """(runs made at versions that have changed since, runs, the methods concerned) among the runs the
    experiment's ``results.csv`` shows (every run file when there is none): a run's versions
    (``spec["versions"]``) against today's :func:`placer.bench.versions.versions` of its method,
    objective and whether it places with a policy. Such a run's cell in the committed table is what the older version gave;
    ``placer bench <experiment>`` would redo it."""
    from placer.bench.versions import versions
    from placer.methods import METHODS

    now: dict[tuple, dict | None] = {}
    stale, total, methods = 0, 0, set()
    files = sorted((results_dir / name / "runs").glob("*.json"))
    table = results_dir / name / "results.csv"
    if table.exists():  # the runs the table shows (a superseded or unused file in runs/ counts for nothing)
        with table.open(newline="") as fh:
            shown = {r.get("run_file") for r in csv.DictReader(fh)}
        files = [f for f in files if f"runs/{f.name}" in shown]
    for f in files:
        try:
            spec = json.loads(f.read_text())["spec"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        m, made = spec.get("method"), spec.get("versions")
        if not isinstance(m, str) or made is None:
            continue
        key = (m, spec.get("objective"), "policy" in (spec.get("params") or {}))
        if key not in now:
            now[key] = versions(*key) if m in METHODS else None
        total += 1
        if made != now[key]:
            stale += 1
            methods.add(m)
    return stale, total, sorted(methods)


def _currency(stale: tuple[int, int, list[str]]) -> str:
    n, total, methods = stale
    if not total:
        return "—"
    return "yes" if n == 0 else f"{n} of {total} runs stale ({', '.join(methods)})"


def section_title(name: str, s: dict | None, folder: str = "results") -> str:
    """An experiment's heading in the report; a table outside ``results/`` names its budget and folder."""
    title = EXPERIMENTS[name].title
    return title + (f" (budget {s['level']}, {folder}/)" if s and folder != "results" else "")


def experiment_section(name: str, s: dict | None, stale: tuple[int, int, list[str]] = (0, 0, []),
                       folder: str = "results") -> str:
    exp = EXPERIMENTS[name]
    lines = [f"## {section_title(name, s, folder)}", ""]
    if s is None:
        lines += [f"Not run yet. Run `{command_line(exp, 'quick')}` (or without `--quick`) and commit "
                  f"`results/{name}/`.", ""]
        return "\n".join(lines)
    counts = s["counts"]
    lines += [
        f"Paper: {s['paper']}.  ",
        f"Command: `{s['command']}` (budget `{s['level']}`: {s['placements']:,} placements per searching method, "
        f"seeds {', '.join(map(str, s['seeds']))}), generated {s['generated']} at commit "
        f"`{(s.get('commit') or 'unknown')[:10]}`. Files: [{folder}/{name}/]({folder}/{name}/table.md).  ",
        "Runs: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "."
        + (f" Made on: {s['runs_made_on']}." if s.get("runs_made_on") else ""), "",
    ]
    if stale[0]:
        lines += [f"**Stale:** {stale[0]} of {stale[1]} runs were made at an older version of their method, "
                  f"the simulator or the cost model ({', '.join(stale[2])}); their cells are what that version gave. `{s['command']}` redoes "
                  "them.", ""]
    lines += [s["table"], ""]
    if s.get("footnotes"):
        lines += [s["footnotes"].replace("\n", "  \n"), ""]
    if s.get("method_summary"):
        lines += ["Per method over all rows:", "", s["method_summary"], ""]
    found = findings(s)
    if found:
        lines += ["**Findings.**", ""] + [f"- {t}" for t in found] + [""]
    agree = agreement_lines(s)
    if agree:
        lines += ["**Against the paper.**", ""] + [f"- {t}" for t in agree] + [""]
    un = s.get("unavailable", {})
    if un.get("methods") or un.get("graphs"):
        lines += ["**Not run.**", ""]
        lines += [f"- method {t}" for t in un.get("methods", [])]
        lines += [f"- graph {t}" for t in un.get("graphs", [])]
        lines.append("")
    if s.get("paper_notes"):
        lines += ["**The paper's other claims.**", ""] + [f"- {t}" for t in s["paper_notes"]] + [""]
    lines += ["**Why ours differ.**", ""] + [f"- {t}" for t in s["differences"]] + [""]
    return "\n".join(lines)


PAPER_DIR = "paper"  # results/paper/<experiment>/: a table at the papers' budget, beside the default one


def build_report(results_dir: str | Path = "results") -> str:
    """Every experiment's committed table, and after it its paper-budget table where one is committed
    (``results/paper/<experiment>/``, made with ``--results results/paper``, often on a lent many-core machine)."""
    results_dir = Path(results_dir)
    summaries = {name: _load(results_dir, name) for name in EXPERIMENTS}
    stale = {name: stale_runs(results_dir, name) for name in EXPERIMENTS}
    paper = {name: s for name in EXPERIMENTS if (s := _load(results_dir / PAPER_DIR, name)) is not None}
    index = ["| experiment | budget | runs with a result | cells: method not implemented / unavailable | "
             "cells: graph missing | generated | made with today's code |",
             "|---|---|---|---|---|---|---|"]
    for name, s in summaries.items():
        if s is None:
            index.append(f"| {name} | not run | — | — | — | — | — |")
            continue
        c = s["counts"]
        index.append(f"| [{name}](#{_anchor(EXPERIMENTS[name].title)}) | {s['level']} | {c.get('ok', 0)} | "
                     f"{c.get('not implemented', 0) + c.get('unavailable', 0)} | {c.get('missing', 0)} | "
                     f"{s['generated'][:10]} | {_currency(stale[name])} |")
    paper_stale = {name: stale_runs(results_dir / PAPER_DIR, name) for name in paper}
    for name, s in paper.items():
        c = s["counts"]
        heading = section_title(name, s, f"{results_dir.name}/{PAPER_DIR}")
        index.append(f"| [{name} ({s['level']}, seeds {','.join(map(str, s['seeds']))})](#{_anchor(heading)}) | "
                     f"{s['level']} | {c.get('ok', 0)} | {c.get('not implemented', 0) + c.get('unavailable', 0)} | "
                     f"{c.get('missing', 0)} | {s['generated'][:10]} | {_currency(paper_stale[name])} |")
    parts = [INTRO, "\n".join(index), ""]
    for name, s in summaries.items():
        parts.append(experiment_section(name, s, stale[name]))
        if name in paper:
            parts.append(experiment_section(name, paper[name], paper_stale[name],
                                            folder=f"{results_dir.name}/{PAPER_DIR}"))
    return "\n".join(parts).rstrip() + "\n"


def _anchor(title: str) -> str:
    keep = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -")
    return keep.replace(" ", "-")


def write_report(results_dir: str | Path = "results", out: str | Path = "REPRODUCTION.md") -> Path:
    from placer.io import write_text_atomic

    write_text_atomic(out, build_report(results_dir))
    return Path(out)
