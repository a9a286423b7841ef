"""Quality per second (issue 66): the best step time each method reaches by 1, 3, 10, 30 and 100 s
of one core, and by 10 ... 100,000 placements, on a few graphs, with the Pareto front of quality
against time marked.

One run per (method, graph): the method under ``Budget(placements=<the bound's most>,
seconds=max_seconds, clock="cpu")`` (it stops when its CPU seconds end: every method honours the
time limit, :mod:`placer.methods.base`), its evaluator telling every new best with the CPU seconds
and placements so far (``run_method(on_progress=..., progress_every=0)``); the checkpoints are read
off that best-so-far trajectory. Time is the CPU seconds of the method's process
(``time.process_time``) from the method's start, with one thread for torch and the simulator, so
the machine's load changes it little; an untimed warm-up run of the method on a 40-op graph first
loads its imports and compiled kernels (:func:`warm_up`).
A method whose schedule follows its time (annealing temperatures, entropy decay) plans for the whole
``max_seconds``: its 1 s value is what it had reached 1 s into a ``max_seconds`` run, not a 1 s run.

:func:`pareto_front` is a pure function: the points (seconds, step time) no other point beats on
both. A cell of the table is on the front when the trajectory point it shows is.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CHECKPOINTS_S = (1.0, 3.0, 10.0, 30.0, 100.0)  # CPU seconds the table reads the best at
CHECKPOINT_PLACEMENTS = (10, 100, 1_000, 10_000, 100_000)  # and the placements
# (graph spec, cluster spec): two graphs of 1-2k ops, one of ~20k, one heterogeneous GiPH network
DEFAULT_GRAPHS = (("inception_v3", "k80x2"), ("resnet50", "k80x4"), ("nmt8", "k80x8"),
                  ("giph:tasks=80,seed=103", "giph-net:devices=12,seed=13"))


@dataclass
class Trajectory:
    """One (method, graph) run: every new best as (CPU seconds, placements, objective us, fits), and
    how the run ended."""

    method: str
    graph: str
    cluster: str
    points: list[tuple[float, int, float, bool]] = field(default_factory=list)
    placements: int = 0
    seconds: float = 0.0
    stopped_by: str = ""
    error: str | None = None

    def best_by(self, seconds: float | None = None, placements: int | None = None):
        """The last trajectory point within ``seconds`` (CPU) or ``placements``; None before any."""
        got = None
        for p in self.points:
            if (seconds is not None and p[0] > seconds) or (placements is not None and p[1] > placements):
                break
            got = p
        return got


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (time, value) point, whether no other point is at least as good on both and better
    on one (lower time, lower value). Ties (the same point twice) are both on the front."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    on = [False] * len(points)
    best = math.inf
    k = 0
    while k < len(order):  # points of equal time together: only the lowest value(s) among them can be on it
        t = points[order[k]][0]
        same = []
        while k < len(order) and points[order[k]][0] == t:
            same.append(order[k])
            k += 1
        low = min(points[i][1] for i in same)
        if low < best:
            for i in same:
                on[i] = points[i][1] == low
            best = low
    return on


# ---------------------------------------------------------------------- one run (in a worker process)
def _one_thread() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


WARM_UP_S = 1.0  # CPU seconds of the untimed warm-up run


def warm_up(method: str) -> None:
    """Run ``method`` briefly on a 40-op graph first, untimed, so that the imports (torch, PyG,
    OR-Tools) and the compiled kernels it uses are loaded before its clock starts; a method that
    does not apply there is simply not warmed."""
    from placer.methods import Budget, run_method
    from placer.problem import Problem
    from placer.resolve import resolve_cluster
    from placer.zoo.synthetic import layered_training_graph

    try:
        run_method(method, Problem(layered_training_graph(40, seed=1), resolve_cluster("k80x2")),
                   Budget(64, WARM_UP_S, "cpu"), 0, n_jobs=1)
    except (ValueError, RuntimeError):
        pass


def run_one(method: str, graph: str, cluster: str, max_seconds: float, seed: int = 0) -> Trajectory:
    """``method`` on ``graph`` / ``cluster`` under a ``max_seconds`` CPU-time limit (a module-level
    function: a worker process runs it)."""
    _one_thread()
    from placer.bounds import bound
    from placer.methods import Budget, run_method
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph
    from placer.sim.fast import engine

    g = resolve_graph(graph)
    P = Problem(g, resolve_cluster(cluster, g, graph))
    tr = Trajectory(method, graph, cluster)
    import numpy as np

    e = engine(P, None)  # compile (or load) the kernels before the clock starts
    e.objective(np.asarray(P.compute_us.argmin(axis=1), dtype=np.int64))
    warm_up(method)

    def told(placements, limit, best_us, fits, seconds):
        if math.isfinite(best_us) and (not tr.points or (best_us, fits) != tr.points[-1][2:]):
            tr.points.append((float(seconds), int(placements), float(best_us), bool(fits)))

    try:
        res = run_method(method, P, Budget(int(bound("budget").hi), float(max_seconds), "cpu"), seed,
                         n_jobs=1, on_progress=told, progress_every=0.0)
    except (ValueError, RuntimeError) as e:  # InputError / NotApplicable are ValueErrors
        tr.error = str(e).splitlines()[0][:200]
        return tr
    tr.placements = int(res.cost.placements)
    tr.seconds = float(res.cost.extra.get("cpu_s", 0.0))
    tr.stopped_by = str(res.cost.extra.get("stopped_by", ""))
    return tr


# ---------------------------------------------------------------------- the experiment
def default_methods() -> list[str]:
    """The default line-up of ``placer compare`` and every available learned method."""
    from placer.compare import default_methods as lineup
    from placer.methods import METHODS

    out = lineup()
    out += [m.name for m in sorted(METHODS.values(), key=lambda m: m.name)
            if m.family == "learned" and m.available() is None and m.name not in out]
    return out


def run_anytime(methods: Sequence[str], graphs: Sequence[tuple[str, str]], max_seconds: float, jobs: int = 1,
                seed: int = 0, on_done: Callable[[Trajectory, int, int], None] | None = None) -> list[Trajectory]:
    """Every (method, graph) run, in ``jobs`` worker processes (:class:`placer.procpool.WorkerPool`),
    in (graph, method) order."""
    todo = [(m, g, c) for g, c in graphs for m in methods]
    out: list[Trajectory] = []
    if jobs <= 1:
        for k, (m, g, c) in enumerate(todo, 1):
            out.append(run_one(m, g, c, max_seconds, seed))
            if on_done:
                on_done(out[-1], k, len(todo))
        return out
    from placer.procpool import WorkerPool

    with WorkerPool(min(jobs, len(todo))) as pool:
        futures = [pool.submit(run_one, m, g, c, max_seconds, seed) for m, g, c in todo]
        for k, f in enumerate(futures, 1):
            out.append(f.result())
            if on_done:
                on_done(out[-1], k, len(todo))
    return out


def parse_graphs(text: str | None) -> list[tuple[str, str]]:
    """``--graphs``: ';'-separated ``GRAPH@CLUSTER`` items (graph specs hold commas), or a name that
    picks default graphs containing it (``inception_v3``); every graph and cluster resolved here,
    so that a bad one is refused before any run starts."""
    from placer.errors import InputError
    from placer.resolve import resolve_cluster, resolve_graph

    out = list(DEFAULT_GRAPHS) if text is None else []
    for item in ([] if text is None else (x.strip() for x in text.split(";"))):
        if not item:
            raise InputError("--graphs", f"'{text[:80]}'", "has an empty item",
                             "give ';'-separated GRAPH@CLUSTER items, e.g. 'inception_v3@k80x2;nmt8@k80x8'")
        if "@" in item:
            g, _, c = item.rpartition("@")
            if not g or not c:
                raise InputError("--graphs", f"'{item[:80]}'", "is not GRAPH@CLUSTER", "e.g. inception_v3@k80x2")
            out.append((g, c))
            continue
        hit = [gc for gc in DEFAULT_GRAPHS if item in gc[0]]
        if not hit:
            raise InputError("--graphs", f"'{item[:80]}'", "is neither GRAPH@CLUSTER nor part of a default graph's "
                             "name", f"give GRAPH@CLUSTER, or one of {', '.join(g for g, _ in DEFAULT_GRAPHS)}")
        out += hit
    for g, c in dict.fromkeys(out):
        resolve_cluster(c, resolve_graph(g), g)
    return list(dict.fromkeys(out))


def checkpoints(max_seconds: float) -> list[float]:
    """The checkpoints within ``max_seconds`` (and ``max_seconds`` itself when it is none of them)."""
    cs = [c for c in CHECKPOINTS_S if c <= max_seconds]
    return cs if cs and cs[-1] == max_seconds else cs + [float(max_seconds)]


def graph_table(runs: Sequence[Trajectory], max_seconds: float) -> dict:
    """One graph's rows: per method the best (us, fits, the trajectory point's seconds) at each
    checkpoint of time and of placements; ``best``: no method had a lower step time (that fits) by
    that checkpoint, i.e. the Pareto front of step time against CPU seconds read at the checkpoints.
    ``front``: the whole front, (seconds, us, method) of every trajectory point no other method's
    point beats on both time and step time."""
    cs = checkpoints(max_seconds)
    pts, owners = [], []
    for r in runs:
        for p in r.points:
            if p[0] <= max_seconds:
                pts.append((p[0], p[2] if p[3] else math.inf))  # an overflowing best is no answer
                owners.append((r.method, p))
    front = pareto_front(pts)
    on = {(m, p) for (m, p), f in zip(owners, front) if f and math.isfinite(p[2] if p[3] else math.inf)}
    rows = []
    for r in runs:
        row = {"method": r.method, "error": r.error, "placements": r.placements, "seconds": r.seconds,
               "stopped_by": r.stopped_by, "time": {}, "count": {}}
        for c in cs:
            p = r.best_by(seconds=c)
            row["time"][c] = None if p is None else {"us": p[2], "fits": p[3], "at_s": p[0],
                                                     "on_front": (r.method, p) in on}
        for n in CHECKPOINT_PLACEMENTS:
            p = r.best_by(seconds=max_seconds, placements=n)
            row["count"][n] = None if p is None else {"us": p[2], "fits": p[3]}
        rows.append(row)
    for c in cs:  # the best answer any method gives within c CPU seconds
        vals = [r["time"][c]["us"] for r in rows if r["time"].get(c) and r["time"][c]["fits"]]
        for r in rows:
            cell = r["time"].get(c)
            if cell is not None:
                cell["front"] = bool(vals) and cell["fits"] and cell["us"] == min(vals)
    fr = sorted(((p[0], p[2], m) for (m, p) in on), key=lambda x: (x[0], x[1]))
    return {"graph": runs[0].graph, "cluster": runs[0].cluster, "checkpoints": cs, "rows": rows, "front": fr}


def _cell(c) -> str:
    if c is None:
        return "—"
    s = f"{c['us'] / 1e3:,.2f}" + ("" if c["fits"] else " OOM")
    return f"**{s}**" if c.get("front") else s


def markdown(tables: Sequence[dict]) -> str:
    out = []
    for t in tables:
        cs = t["checkpoints"]
        out.append(f"### {t['graph']} on {t['cluster']}\n")
        out.append("Best step time (ms) by CPU seconds of one core, and by placements; **bold**: the best of "
                   "every method by that many CPU seconds (the Pareto front of step time against time, read at "
                   "the checkpoints).\n")
        head = ["method"] + [f"{c:g} s" for c in cs] + [f"{n:,} pl." for n in CHECKPOINT_PLACEMENTS] + [
            "placements", "CPU s", "ended by"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for r in t["rows"]:
            if r["error"]:
                out.append(f"| {r['method']} | " + " | ".join(["—"] * (len(head) - 2)) + f" | {r['error']} |")
                continue
            cells = [_cell(r["time"][c]) for c in cs] + [_cell(r["count"][n]) for n in CHECKPOINT_PLACEMENTS]
            out.append(f"| {r['method']} | " + " | ".join(cells)
                       + f" | {r['placements']:,} | {r['seconds']:.1f} | {r['stopped_by']} |")
        out.append("\nPareto front (every point no other method beat on both time and step time): "
                   + front_text(t["front"]) + "\n")
    return "\n".join(out)


def front_text(front: Sequence[tuple[float, float, str]]) -> str:
    """The front as runs of one method: ``post 9.86 -> 9.83 ms (0.14-0.17 s)``."""
    runs: list[list] = []
    for s, us, m in front:
        if runs and runs[-1][0] == m:
            runs[-1][2:] = [s, us]
        else:
            runs.append([m, (s, us), s, us])
    parts = []
    for m, (s0, us0), s1, us1 in runs:
        parts.append(f"{m} {us0 / 1e3:,.2f} ms at {s0:.2f} s" if s0 == s1 and us0 == us1 else
                     f"{m} {us0 / 1e3:,.2f} -> {us1 / 1e3:,.2f} ms ({s0:.2f}-{s1:.2f} s)")
    return ", ".join(parts) or "none"


def csv_text(tables: Sequence[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["graph", "cluster", "method", "budget", "value", "best_ms", "fits", "on_front", "placements",
                "cpu_s", "stopped_by", "error"])
    for t in tables:
        for r in t["rows"]:
            base = [r["placements"], f"{r['seconds']:.3f}", r["stopped_by"], r["error"] or ""]
            for kind, d in (("cpu_s", r["time"]), ("placements", r["count"])):
                for k, c in d.items():
                    w.writerow([t["graph"], t["cluster"], r["method"], kind, k,
                                "" if c is None else f"{c['us'] / 1e3:.4f}", "" if c is None else int(c["fits"]),
                                "" if c is None else int(bool(c.get("front"))), *base])
    return buf.getvalue()


def plot(t: dict, runs: Sequence[Trajectory], path: Path, max_seconds: float) -> Path:
    """Best step time against CPU seconds, one step line per method, the Pareto front's points ringed."""
    from placer.viz.backend import pyplot
    from placer.viz.colours import colour

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=80)
    for k, r in enumerate(runs):
        pts = [(max(p[0], 1e-3), p[2] / 1e3) for p in r.points if p[3] and p[0] <= max_seconds]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.step(list(xs) + [max_seconds], list(ys) + [ys[-1]], where="post", color=colour(k), lw=1.2, label=r.method)
    if t["front"]:
        ax.plot([max(s, 1e-3) for s, _, _ in t["front"]], [us / 1e3 for _, us, _ in t["front"]], "o", mfc="none",
                mec="k", ms=7, label="Pareto front")
    for c in t["checkpoints"]:
        ax.axvline(c, color="0.6", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("CPU seconds of one core")
    ax.set_ylabel("best step time found (ms)")
    ax.set_title(f"{t['graph']} on {t['cluster']}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _slug(graph: str, cluster: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in f"{graph}__{cluster}")


def estimate_s(methods: int, graphs: int, max_seconds: float, jobs: int) -> float:
    """Wall seconds of a run where every method uses its whole time (an upper bound: the
    constructions end in well under a second), with ``jobs`` processes on at least as many cores."""
    return methods * graphs * max_seconds / max(1, jobs)


def write_outputs(runs: Sequence[Trajectory], out: Path, max_seconds: float, command: str, jobs: int,
                  wall_s: float, load: tuple[float, float, float] | None, plots: bool = True) -> dict:
    """table.md, results.csv, trajectories.json, README.md and plots/<graph>.png under ``out``."""
    from placer.bench.envinfo import environment
    from placer.io import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    graphs = list(dict.fromkeys((r.graph, r.cluster) for r in runs))
    tables, plot_note = [], ""
    for g, c in graphs:
        mine = [r for r in runs if (r.graph, r.cluster) == (g, c)]
        tables.append(graph_table(mine, max_seconds))
        if plots:
            try:
                plot(tables[-1], mine, out / "plots" / f"{_slug(g, c)}.png", max_seconds)
            except ValueError as e:  # InputError: matplotlib not installed
                plot_note = f"plots skipped: {e}"
    env = environment(Path(__file__).resolve().parents[3])
    methods = list(dict.fromkeys(r.method for r in runs))
    learned_front = _learned_on_front(tables)
    readme = "\n".join([
        "# Anytime: best step time by CPU seconds", "",
        f"Command: `{command}`", "",
        "Each (method, graph) ran once, under a time limit of "
        f"{max_seconds:g} CPU seconds and a placement budget it cannot reach (`Budget(placements=10,000,000, "
        f"seconds={max_seconds:g}, clock='cpu')`); every method stops when its time ends. Time is the CPU "
        "seconds of the method's own process (`time.process_time`, from the method's start; torch and the "
        "simulator on one thread; imports and compiled kernels loaded first by an untimed 1 s warm-up run of "
        "the method on a 40-op graph), so the machine's "
        "load changes it little. The checkpoints are read off each run's best-so-far trajectory (every new "
        "best, told by the method's evaluator with the CPU seconds and placements so far). A method whose "
        "schedule follows its time (annealing, entropy decay) planned for the whole limit: its 1 s value is "
        "1 s into that run, not a 1 s run. Bold cells are on the Pareto front of step time against CPU "
        "seconds (per graph, over every method's trajectory). Placeto's rollouts are simulated in its own "
        "environment and charged to its evaluator after each update, so its trajectory moves once per update.",
        "",
        f"Machine: {env['machine']['cpu']} ({env['machine']['cpus']} CPUs), {env['platform']}, Python "
        f"{env['python']}, commit {env['git']['commit']}; {jobs} worker process(es); load average at the start "
        f"{'n/a' if load is None else ', '.join(f'{x:.2f}' for x in load)} (1, 5, 15 min), at the end "
        f"{'n/a' if load_average() is None else ', '.join(f'{x:.2f}' for x in load_average())}; "
        f"{wall_s / 60:.1f} min of wall time.",
        "",
        f"Methods ({len(methods)}): {', '.join(methods)}. Graphs: "
        + "; ".join(f"{g} on {c}" for g, c in graphs) + ".",
        "",
        f"The full run (`placer bench anytime`, {len(default_methods())} methods x {len(DEFAULT_GRAPHS)} graphs x "
        f"{CHECKPOINTS_S[-1]:g} s) takes at most "
        f"{estimate_s(len(default_methods()), len(DEFAULT_GRAPHS), CHECKPOINTS_S[-1], 1) / 3600:.1f} CPU hours, "
        "when every method used its whole limit; about 2 in practice (14 of the 32 search until their time "
        "ends; the constructions end within seconds; building the graph and an untimed warm-up add about 15 s "
        "per run): about 35 minutes with `--jobs 4` on four free cores.",
        "",
        f"In this run {sum(r.stopped_by == 'seconds' for r in runs)} of {len(runs)} runs used their whole limit; "
        f"{sum(r.stopped_by == 'method' for r in runs)} ended by themselves, {sum(bool(r.error) for r in runs)} did "
        "not apply. A run's CPU seconds may pass the limit by the step it was in when the time ended (the "
        "'CPU s' column).",
        "",
        f"Learned methods on the Pareto front: {learned_front or 'none'}.",
        "", "Files: table.md, results.csv, trajectories.json, plots/." + (f" ({plot_note})" if plot_note else ""), ""])
    files = {"table.md": markdown(tables), "results.csv": csv_text(tables), "README.md": readme,
             "trajectories.json": json.dumps([r.__dict__ for r in runs], indent=0) + "\n"}
    for name, text in files.items():
        write_text_atomic(out / name, text)
    return {"tables": tables, "learned_front": learned_front, "plot_note": plot_note}


def _learned_on_front(tables: Sequence[dict]) -> str:
    """Per graph, the learned methods that are the best of all at some checkpoint, and those with a
    point on the whole front."""
    from placer.methods import METHODS

    def learned(m):
        return m in METHODS and METHODS[m].family == "learned"

    per = []
    for t in tables:
        best = sorted({f"{r['method']} ({c:g} s)" for r in t["rows"] if learned(r["method"])
                       for c, cell in r["time"].items() if cell and cell.get("front")})
        anywhere = sorted({m for _, _, m in t["front"] if learned(m)})
        if best or anywhere:
            per.append(f"{t['graph']}: best at a checkpoint: {', '.join(best) or 'none'}; on the whole front: "
                       f"{', '.join(anywhere) or 'none'}")
    return "; ".join(per)


def load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None

