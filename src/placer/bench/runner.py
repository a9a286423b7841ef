"""Plan and run an experiment: one run per (row, method, seed), cached by a hash of its spec.

A run's hash covers everything that decides its result: the graph's and cluster's content
fingerprints, the method and its parameters, the seed, the budget, the simulator settings, the
policies it starts from, and the versions it depends on (:func:`versions`: the method's, the
simulator's, the cost model's and the objective's), not the source code: an edit that is not meant
to change a result leaves the cache current (the golden tests hold it to that), one that is bumps a
version. Each run file also records the commit it was made at (:func:`source_commit`). A
finished run is written at once as ``results/<exp>/runs/<row>__<method>__s<seed>__<hash>.json``, so
an interrupted experiment resumes where it stopped and a repeated one simulates nothing. Independent
runs go to ``--jobs N`` worker processes (:class:`placer.procpool.WorkerPool`, spawned so a
parent that has used torch or numba threads is never forked, deaf to Ctrl-C and stopped with it).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from placer.bench import graphs as G
from placer.bench import policies as pol
from placer.bench.versions import source_commit, versions
from placer.bench.spec import HARNESS_VERSION, Experiment, Method, Row, slug, stable_hash, with_registered

# cell status values
OK, NOT_IMPLEMENTED, UNAVAILABLE, MISSING, ERROR, NOT_RUN, NOT_APPLICABLE, DOES_NOT_APPLY = (
    "ok", "not implemented", "unavailable", "missing", "error", "not run", "n/a", "does not apply")
STALE_REASON = ("made at an older version of its method (or of the simulator, cost model or objective), kept from "
                "an earlier run: the command that wrote this table left it out (--methods / --rows)")


@dataclass
class RowContext:
    row: Row
    graph: Any = None
    cluster: Any = None
    spec_used: str | None = None
    path: str | None = None
    missing: str | None = None  # why the graph is not available
    graph_fp: str | None = None
    cluster_fp: str | None = None
    lower_bound_us: float | None = None  # Problem.lower_bound_us until placer.bench.rowbounds sets the engine's
    bound: dict | None = None  # placer.lowerbound's Bound.as_dict() for this row (placer.bench.rowbounds)
    sim: Any = None  # the SimParams its runs use: the experiment's sim on this row's cluster (sim_params)


@dataclass(frozen=True)
class RunTask:
    """Everything one run needs, sent to a worker process (pickled) and read by :func:`execute`: the
    row's graph and cluster, the method, its parameters (a policy as its object once trained), seed and
    budget, the experiment's simulator settings and objective, the spec whose hash names the run, and
    where its file goes, with what the run file records about its row and the code that made it."""

    graph: Any  # the row's OpGraph
    cluster: Any  # the row's Cluster
    method: str
    label: str  # the method's column label
    params: dict
    seed: int
    placements: int
    seconds: float | None
    sim: str  # the experiment's simulator settings ("default" or "placeto"; :func:`sim_params`)
    objective: str
    spec: dict
    hash: str
    out: str  # the run file's path
    experiment: str
    row: str
    graph_spec: str | None
    source: dict | None  # :func:`placer.bench.versions.source_commit` of the planning process


@dataclass
class Cell:
    row: RowContext
    method: Method
    seed: int
    status: str = NOT_RUN
    reason: str = ""
    hash: str | None = None
    path: Path | None = None
    doc: dict | None = None  # the run JSON when status is ok
    cached: bool = False
    stale: bool = False  # a left-out cell showing a run made at older versions (see make_plan)
    task: RunTask | None = field(default=None, repr=False)
    policies: list = field(default_factory=list, repr=False)  # PolicyContexts the run starts from


@dataclass
class Plan:
    experiment: Experiment
    level: str
    seeds: tuple[int, ...]
    methods: tuple[Method, ...]
    rows: list[RowContext]
    cells: list[Cell]
    runs_dir: Path
    filtered: bool = False
    policies: dict = field(default_factory=dict)  # name -> placer.bench.policies.PolicyContext

    def pending(self) -> list[Cell]:
        return [c for c in self.cells if c.task is not None and c.status == NOT_RUN]


def sim_params(name: str, cluster=None):
    """The simulator settings an experiment's ``sim`` gives on ``cluster``: :meth:`SimParams.preset`,
    the rule ``--sim`` follows on the command line too. ``default`` takes the communication model the
    cluster declares (a cluster file's ``comm_model``, GiPH's networks' ``comm``; Placeto's when it
    declares none), ``placeto`` is the reference simulator whatever the cluster declares."""
    from placer.sim import SimParams

    return SimParams.preset(name, cluster)


def _method_check(m: Method) -> tuple[str, str] | None:
    """(status, reason) when the method cannot run here, else None."""
    from placer.methods import METHODS

    info = METHODS.get(m.method)
    if info is None:
        return NOT_IMPLEMENTED, f"no method '{m.method}' in placer.methods yet"
    why = info.available()
    if why:
        return UNAVAILABLE, why
    from placer.errors import InputError

    try:  # a variant must not silently run as another: its parameters must be the method's own
        info.make_config({k: v for k, v in m.params.items()
                          if not (isinstance(v, str) and ("{" in v or v.startswith(pol.PREFIX)))})
    except InputError as e:
        return NOT_IMPLEMENTED, f"'{m.method}' does not take these parameters: {e}"
    return None


def load_row(row: Row, sim: str = "default") -> RowContext:
    """A row's graph and cluster, their fingerprints, its lower bound and the simulator settings its
    runs use (the experiment's ``sim`` on this cluster: :func:`sim_params`)."""
    from placer.problem import Problem

    ctx = RowContext(row)
    try:
        g, spec, path = G.resolve_row_graph(row.candidates)
        c = G.resolve_row_cluster(row.cluster, g, path)
    except G.GraphMissing as e:
        ctx.missing = str(e)
        return ctx
    ctx.graph, ctx.cluster, ctx.spec_used, ctx.path = g, c, spec, path
    ctx.graph_fp, ctx.cluster_fp = G.graph_fingerprint(g), G.cluster_fingerprint(c)
    ctx.sim = sim_params(sim, c)
    ctx.lower_bound_us = float(Problem(g, c).lower_bound_us)
    return ctx


def _index_runs(runs_dir: Path) -> dict[str, Path]:
    out = {}
    if runs_dir.exists():
        for p in runs_dir.glob("*.json"):
            h = p.stem.rsplit("__", 1)[-1]
            out[h] = p
    return out


def _canonical(spec: Mapping[str, Any]) -> str:
    """The spec without what another version of the method changes: the versions it depended on and
    the hashes of the policies it starts from (trained at those versions)."""
    return json.dumps({k: v for k, v in spec.items() if k not in ("versions", "policies")}, sort_keys=True,
                      separators=(",", ":"), default=str)


def identity(name: str) -> str:
    """The part of a run file's name that names its cell (row, cluster, method label, seed), without the hash."""
    return name.rsplit("__", 1)[0]


def stale_run(candidates: list[Path], spec: Mapping[str, Any]):
    """(path, run document) of the newest earlier run among ``candidates`` (the run files of one cell)
    made at other versions and otherwise the same spec (the policies it starts from may differ: those
    versions trained them): what the table showed before the versions changed; or None."""
    from placer.io import read_json

    want = _canonical(spec)
    found = []
    for p in candidates:
        try:
            doc = read_json(p)
        except Exception:
            continue
        old = doc.get("spec") if isinstance(doc, dict) else None
        if isinstance(old, dict) and doc.get("status") in (OK, DOES_NOT_APPLY) and old.get("versions") != spec.get("versions") \
                and _canonical(old) == want:
            found.append((p.stat().st_mtime, p.name, p, doc))
    return max(found, key=lambda x: x[:2])[2:] if found else None


def make_plan(exp: Experiment, level: str, results_dir: Path, seeds: tuple[int, ...] | None = None,
              only_methods: set[str] | None = None, only_rows: set[str] | None = None,
              on_row: Callable[[Row], None] | None = None) -> Plan:
    """Resolve every row's graph and cluster, and decide for every cell: cached, to run, or why not."""
    from placer.io import read_json

    lv = exp.level(level)
    seeds = tuple(seeds) if seeds else lv.seeds
    methods = with_registered(exp)
    runs_dir = Path(results_dir) / exp.name / "runs"
    index = _index_runs(runs_dir)
    by_cell: dict[str, list[Path]] = {}  # a cell's identity -> its run files (for left-out cells, stale_run)
    for p in index.values():
        by_cell.setdefault(identity(p.name), []).append(p)
    source = source_commit()
    policies: dict[str, pol.PolicyContext] = {}
    rows, cells = [], []
    for row in exp.rows:
        if level not in row.levels:
            continue
        if on_row:
            on_row(row)
        ctx = load_row(row, exp.sim)
        rows.append(ctx)
        wanted_row = not only_rows or any(s.lower() in row.key.lower() for s in only_rows)
        for m in methods:
            wanted = wanted_row and (not only_methods or m.label in only_methods or m.method in only_methods)
            for seed in (seeds if m.seeded else seeds[:1]):
                cell = Cell(ctx, m, seed)
                cells.append(cell)
                if m.label in row.skip:
                    cell.status, cell.reason = NOT_APPLICABLE, "does not apply to this row (as in the paper)"
                    continue
                if ctx.missing:
                    cell.status, cell.reason = MISSING, ctx.missing
                    continue
                bad = _method_check(m)
                if bad:
                    cell.status, cell.reason = bad
                    continue
                params = m.params_for(row)
                sim_doc = dataclasses.asdict(ctx.sim)  # this row's cluster's model (only then its runs' hashes change)
                pols = []
                for ref in pol.references(params):
                    if ref not in policies:
                        policies[ref] = pol.prepare(exp, ref, level, results_dir, exp.sim)
                    pols.append(policies[ref])
                lacking = next((p for p in pols if p.missing), None)
                if lacking:
                    cell.status, cell.reason = MISSING, lacking.missing
                    continue
                spec = {
                    "harness": HARNESS_VERSION, "graph_fp": ctx.graph_fp, "cluster_fp": ctx.cluster_fp,
                    "method": m.method, "params": params, "seed": seed,
                    "placements": m.budget_for(level, lv), "seconds": m.seconds_for(level, lv), "sim": sim_doc,
                    "policies": {p.name: p.hash for p in pols},
                }
                objective = exp.objective_for(row, m)
                if objective != "sim":  # only then: the hashes of simulator runs stay as committed
                    spec["objective"] = objective
                spec["versions"] = versions(m.method, objective, policy="policy" in params)
                cell.hash = stable_hash(spec)
                name = f"{slug(row.label)}__{slug(ctx.cluster.name)}__{slug(m.label)}__s{seed}__{cell.hash}.json"
                cell.path = runs_dir / name
                old = index.get(cell.hash)
                if old is not None:
                    try:
                        doc = read_json(old)
                    except Exception:  # a truncated file from an interrupted write: run it again
                        doc = None
                    if doc and doc.get("hash") == cell.hash and doc.get("status") in (OK, DOES_NOT_APPLY):
                        cell.status, cell.cached, cell.path = doc["status"], True, old
                        cell.doc, cell.reason = (doc, "") if doc["status"] == OK else (None, doc.get("reason", ""))
                        continue
                if not wanted:  # keep what the table showed, marked stale, rather than a hole
                    kept = stale_run(by_cell.get(identity(name), []), spec)
                    if kept is not None:
                        cell.path, doc = kept
                        cell.status, cell.cached, cell.stale = doc["status"], True, True
                        cell.doc, cell.reason = (doc, STALE_REASON) if doc["status"] == OK else (
                            None, f"{doc.get('reason', '')} ({STALE_REASON})")
                        continue
                    cell.reason = "left out (--methods / --rows) of the command that wrote this table, and not cached"
                    continue
                cell.policies = pols
                cell.task = RunTask(
                    graph=ctx.graph, cluster=ctx.cluster, method=m.method, label=m.label,
                    params=pol.substitute(params, policies),
                    seed=seed, placements=m.budget_for(level, lv), seconds=m.seconds_for(level, lv),
                    sim=exp.sim, objective=objective,
                    spec=spec, hash=cell.hash, out=str(cell.path), experiment=exp.name,
                    row=row.label, graph_spec=ctx.spec_used, source=source,
                )
    return Plan(exp, level, seeds, methods, rows, cells, runs_dir, filtered=bool(only_methods or only_rows),
                policies=policies)


# ---------------------------------------------------------------------- one run
def encode_placement(devices: np.ndarray, n_devices: int) -> dict:
    """The device of every op (topological order), as the shorter of: one base-36 character per op
    (at most 36 devices), or runs ``[[device, count], ...]`` (placements made of long blocks)."""
    devices = np.asarray(devices, dtype=np.int64)
    cut = np.flatnonzero(np.diff(devices)) + 1
    starts = np.concatenate([[0], cut]) if len(devices) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.concatenate([starts, [len(devices)]]))
    runs = [[int(devices[a]), int(k)] for a, k in zip(starts, counts)]
    if n_devices <= 36 and 8 * len(runs) > len(devices):
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"
        return {"encoding": "base36-per-op", "devices": "".join(digits[int(d)] for d in devices)}
    return {"encoding": "runs", "devices": runs}


def decode_placement(doc: dict) -> np.ndarray:
    if doc["encoding"] == "base36-per-op":
        return np.array([int(ch, 36) for ch in doc["devices"]], dtype=np.int64)
    if doc["encoding"] == "runs":
        return np.repeat([d for d, _ in doc["devices"]], [k for _, k in doc["devices"]]).astype(np.int64)
    return np.asarray(doc["devices"], dtype=np.int64)


def placements_to_best(curve: list, total: int) -> int:
    """Placements sampled until the final best objective was reached for good (Placeto Table 1's
    "training time (# placements sampled)"): the start of the curve's last stretch at its final
    value. (The curve can rise once, where the first placement that fits in memory displaces a
    better-scored one that overflows: see :class:`placer.methods.base.Evaluator`.)"""
    if not curve:
        return int(total)
    final = curve[-1][1]
    if final is None:
        return int(total)
    at = int(total)
    for x, y in reversed(curve):
        if y is None or y > final * (1 + 1e-12) or y < final * (1 - 1e-12):
            break
        at = int(x)
    return at


def _finite(x):
    return float(x) if x is not None and math.isfinite(x) else None


def run_host() -> dict:
    """The machine a run is made on (processor, CPUs, torch), kept in the run file so that a table whose runs
    were made elsewhere (a lent many-core machine, a Ray cluster) says so; not part of the run's hash."""
    from placer.bench.envinfo import package_version
    from placer.cost.host import cpu_name

    return {"cpu": cpu_name(), "cpus": os.cpu_count(), "torch": package_version("torch")}


def execute(task: RunTask) -> dict:
    """Run one cell and write its JSON; returns the run document (status ok or error). Runs in a
    worker process, so everything it needs travels in ``task``."""
    from placer.methods import Budget, run_method
    from placer.methods.base import NotApplicable
    from placer.problem import Problem

    t0 = time.perf_counter()
    P = Problem(task.graph, task.cluster)
    sp = sim_params(task.sim, P.cluster)
    base = {"harness": HARNESS_VERSION, "hash": task.hash, "spec": task.spec, "experiment": task.experiment,
            "row": task.row, "method_label": task.label, "method": task.method, "seed": task.seed,
            "graph": {"name": P.graph.name, "spec": task.graph_spec, "ops": P.n_ops, "edges": P.graph.n_edges,
                      "fingerprint": task.spec["graph_fp"]},
            "cluster": {"name": P.cluster.name, "devices": list(P.cluster.device_names)},
            "lower_bound_us": float(P.lower_bound_us), "host": run_host(), "source": task.source}
    try:
        res = run_method(task.method, P, Budget(task.placements, task.seconds), task.seed, sp,
                         objective=task.objective, **task.params)
    except Exception as e:  # a method that fails on one problem must not sink the experiment
        # only NotApplicable, raised on purpose (e.g. cpu-only on a graph with no CPU costs), is a
        # fact about the problem and cached; anything else is a failure worth reading, never cached
        status = DOES_NOT_APPLY if isinstance(e, NotApplicable) else ERROR
        reason = str(e) if status == DOES_NOT_APPLY else f"{type(e).__name__}: {e}"
        doc = {**base, "status": status, "reason": reason.strip(), "seconds": time.perf_counter() - t0}
        if status == DOES_NOT_APPLY:  # as deterministic as a result: cached like one (errors are not)
            _write(task.out, doc)
        return doc
    curve = [[int(x), _finite(y)] for x, y in res.curve]
    summary = res.summary()
    doc = {**base, "status": OK,
           "result": {k: summary[k] for k in ("step_time_us", "objective", "objective_name", "oom",
                                              "peak_memory_bytes", "device_counts", "params", "notes")},
           "cost": {"placements": res.cost.placements, "sim_calls": res.cost.sim_calls,
                    "seconds": res.cost.wall_s, "extra": res.cost.extra},
           "placements_to_best": placements_to_best(res.curve, res.cost.placements),
           "curve": curve,
           "sim": res.sim.summary(list(P.cluster.device_names)),
           "placement": encode_placement(res.placement.devices, P.n_devices),
           "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": time.perf_counter() - t0}
    doc["result"]["objective"] = _finite(doc["result"]["objective"])
    _write(task.out, doc)
    return doc


def _write(path: str, doc: dict) -> None:
    from placer.io import write_text_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(doc, separators=(",", ":")) + "\n")  # compact: many are committed


def run_plan(plan: Plan, jobs: int = 1, on_done: Callable[[Cell, int, int], None] | None = None,
             on_policy: Callable | None = None, backend: str = "process", address: str | None = None) -> dict:
    """Run every pending cell (``jobs`` processes in parallel, or Ray tasks with ``backend="ray"``,
    see :mod:`placer.bench.ray_backend`). Returns counts: ran, cached, kept_stale (left-out cells showing an older run), errors."""
    todo = plan.pending()
    total, done = len(todo), 0
    for ctx in {id(p): p for c in todo for p in c.policies}.values():  # train the policies runs start from
        if not ctx.ready:
            if on_policy:
                on_policy(ctx)
            try:
                pol.train(ctx, plan.experiment.sim)
            except Exception as e:
                ctx.missing = f"training policy '{ctx.name}' failed: {type(e).__name__}: {e}"
    for cell in todo:
        bad = next((p for p in cell.policies if p.missing), None)
        if bad:
            cell.status, cell.reason, cell.task = ERROR, bad.missing, None
    todo = plan.pending()
    total = len(todo)
    for cell in todo:  # the policies exist now: hand each run its policy object, not the reference
        if cell.policies:
            cell.task = dataclasses.replace(cell.task, params=pol.substitute(cell.task.params,
                                                                            {p.name: p for p in cell.policies}))

    def finish(cell: Cell, doc: dict) -> None:
        nonlocal done
        done += 1
        if doc["status"] == OK:
            cell.status, cell.doc = OK, doc
        else:
            cell.status, cell.reason = doc["status"], doc.get("reason", "")
        cell.task = None
        if on_done:
            on_done(cell, done, total)

    if backend == "ray" and total:
        from placer.bench.ray_backend import run_cells_ray

        run_cells_ray(todo, jobs, address, finish, execute)
    elif jobs <= 1 or total <= 1:
        for cell in todo:
            finish(cell, execute(cell.task))
    else:
        from concurrent.futures import as_completed

        from placer.procpool import WorkerPool

        with WorkerPool(min(jobs, total)) as pool:  # left by Ctrl-C: every worker gone first (placer.procpool)
            futures = {pool.submit(execute, c.task): c for c in todo}
            for fut in as_completed(futures):
                finish(futures[fut], fut.result())
    return {"ran": total, "cached": sum(c.cached and not c.stale for c in plan.cells),
            "kept_stale": sum(c.stale for c in plan.cells),
            "errors": sum(c.status == ERROR for c in plan.cells)}


def prune(plan: Plan) -> list[Path]:
    """Delete run files no cell of the plan refers to: every such file after a complete plan; after a
    filtered one (--methods / --rows), only the earlier runs of cells that now refer to another file
    (superseded versions), so that a run made for a cell left out stays."""
    if not plan.runs_dir.exists():
        return []
    keep = {c.path.name for c in plan.cells if c.path is not None and c.status in (OK, DOES_NOT_APPLY)}
    held = {identity(k) for k in keep}
    gone = [p for p in plan.runs_dir.glob("*.json")
            if p.name not in keep and (not plan.filtered or identity(p.name) in held)]
    for p in gone:
        p.unlink()
    return gone
