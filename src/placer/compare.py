"""Run several methods on one Problem and line them up: the README's main job."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import numpy as np

from placer.methods import METHODS, Budget, run_method
from placer.resolve import check_method

# Left out of the default line-up for their cost on the bundled model, not their quality; `--methods all`
# or a name runs them. exact-published: its max-load integer program on Inception-V3 (2,042 ops, 3
# devices) ran HiGHS for 386 s of the README command's 9 min on a quiet 2-core machine, and over
# 20 min under load, before its node limit; under the simulator it only solves a surrogate (max load).
SLOW = frozenset({"exact-published"})


def default_methods() -> list[str]:
    """Every available method except the learned ones that need long training (Post is quick) and
    the ones in :data:`SLOW`."""
    out = []
    for m in sorted(METHODS.values(), key=lambda m: (_FAMILY_ORDER.get(m.family, 9), m.name)):
        if m.available() is None and (m.family != "learned" or m.name == "post") and m.name not in SLOW:
            out.append(m.name)
    return out


def out_of_range(problem, names: Sequence[str]) -> dict[str, str]:
    """The methods of a default line-up that cannot prove or improve anything on ``problem`` within
    the bound they state, each with the reason the table shows: cp-sat beyond its exact range (more
    ops than ``max_groups`` tasks: it solves a coarsened model, whose optimum is no optimum of the
    graph, and on such graphs it was measured returning its warm start after minutes). A method named
    with ``--methods`` runs whatever its range."""
    out = {}
    if "cp-sat" in names:
        top = METHODS["cp-sat"].config().max_groups
        if problem.n_ops > top:
            out["cp-sat"] = (f"skipped: {problem.n_ops:,} ops, beyond the {top} tasks cp-sat solves exactly (it would "
                             f"solve a coarsened model); --methods cp-sat runs it anyway")
    return out


# The default line-up scales each search method's budget to the graph (issue 55): at most SIM_OPS
# simulated ops in all (placements x ops; a simulation costs about linearly in the ops), so graphs up
# to SIM_OPS / 20,000 = 2,500 ops keep the configs' 20,000 placements and NMT-8 (20,771 ops) gets
# 2,407. A count derived from the graph's size, never from the clock: the same seed gives the same
# table under any load. Post (2,400 placements, about 19 CPU s on NMT-8) is left whole: it gives the
# line-up's best on the large graphs. --budget or --methods turns the scaling off.
SIM_OPS = 50_000_000
SCALED = ("anneal", "local-search", "multilevel")


def scaled_budgets(problem, names: Sequence[str]) -> dict[str, int]:
    """The placements of the default line-up's search methods on ``problem``: each of :data:`SCALED`
    in ``names`` whose configured placements would simulate more than :data:`SIM_OPS` ops gets
    ``SIM_OPS // ops`` (at least 1). The others are left out (their own budget applies)."""
    out = {}
    for name in names:
        if name in SCALED:
            n = max(1, SIM_OPS // max(1, problem.n_ops))
            if n < METHODS[name].config().placements:
                out[name] = int(n)
    return out


def scaled_bound(problem, placements: int) -> str:
    """The bound column of a method whose budget :func:`scaled_budgets` chose."""
    return f"{placements:,} placements (budget scaled to {problem.n_ops:,} ops; --budget N to override)"


_FAMILY_ORDER = {"trivial": 0, "expert": 1, "partitioning": 2, "list-scheduling": 3, "search": 4, "exact": 5, "learned": 6}


# Wall-clock caps for the methods whose work is bounded by neither a placement count nor a single
# construction: CP-SAT and HiGHS search until their limits, and a solver's own deterministic limit is
# no bound on the clock (cp-sat under `--objective latency` on a 2-device dnn-partitioning input ran
# over 150 s on its deterministic limits). The caps are the bench's default levels for them
# (placer.bench.experiments): a run stopped by one is not reproducible, and its notes say so.
SECONDS = {"cp-sat": 30.0, "exact-published": 60.0}


def method_bound(name: str, budget: int | None) -> tuple[Budget, str]:
    """The budget :func:`compare_methods` runs ``name`` with, and the bound it states: a wall-clock
    cap (:data:`SECONDS`), else the placements it may simulate (``--budget`` or its config's
    ``placements``), else its one construction (no search loop: work polynomial in the graph's size)."""
    if name in SECONDS:
        return Budget(placements=budget, seconds=SECONDS[name]), f"{SECONDS[name]:g} s wall clock"
    n = budget if budget is not None else getattr(METHODS[name].config(), "placements", None)
    if n is not None:
        return Budget(placements=budget), f"{n:,} placements"
    return Budget(placements=budget), "one construction"


_REPORTS = None  # in a worker process: the queue its methods' progress reports go to (:func:`_worker_init`)
_PROBLEM = None  # in a worker process: the line-up's Problem, sent once (:func:`_worker_init`)


def _worker_init(queue, problem=None) -> None:
    """A worker's start: where its progress reports go, and the Problem every method it runs gets,
    one object, so that the starts its methods share (:mod:`placer.methods.start_cache`, keyed by the
    Problem object) are computed once per worker, not once per method."""
    global _REPORTS, _PROBLEM
    _REPORTS, _PROBLEM = queue, problem


def _run_one(problem, name: str, budget: int | None, seed: int, sim_params, objective, scaled: bool = False,
             tell: Callable | None = None):
    """One row of the line-up: (name, PlacementResult or the error's text, the bound it ran under).
    ``scaled``: ``budget`` is the line-up's scaled one (:func:`scaled_budgets`). ``tell`` gets the
    method's :class:`placer.bench.progress.Report` as it goes (in a worker process they go to the
    parent's queue). A module-level function, so a worker process can run it."""
    from placer.bench.progress import Report

    problem = _PROBLEM if problem is None else problem  # None: the worker's own (:func:`_worker_init`)
    tell = tell or (_REPORTS.put if _REPORTS is not None else None)
    last = [Report(name, 0, None, np.inf, False, 0.0)]

    def told(placements, limit, best_us, best_fits, seconds):
        last[0] = Report(name, int(placements), limit, float(best_us), bool(best_fits), float(seconds))
        tell(last[0])

    run_budget, bound = method_bound(name, budget)
    if scaled:
        bound = scaled_bound(problem, budget)
    try:
        return name, run_method(name, problem, run_budget, seed, sim_params, objective=objective,
                                on_progress=told if tell else None), bound
    except (ValueError, RuntimeError) as e:  # a method that does not apply to this problem
        return name, str(e), bound
    finally:
        if tell:
            from dataclasses import replace

            tell(replace(last[0], finished=True))


def progress_lineup(names: Sequence[str] | None, skip: dict[str, str] | None = None):
    """The :class:`placer.bench.progress.Lineup` of a compare run: the methods it runs, the
    wall-clock-capped ones (:data:`SECONDS`) and the searches (a ``placements`` budget in their config)."""
    from placer.bench.progress import Lineup

    run = [n for n in line_up(names) if n not in (skip or {})]
    return Lineup(run, capped={n: s for n, s in SECONDS.items() if n in run},
                  searches=[n for n in run if n in METHODS  # an unknown name is refused by compare_methods
                            and getattr(METHODS[n].config(), "placements", None) is not None])


def line_up(names: Sequence[str] | None) -> list[str]:
    """The methods :func:`compare_methods` runs for ``names``: those given, else every available method."""
    return list(names) if names is not None else [m for m in sorted(METHODS) if METHODS[m].available() is None]


def compare_methods(problem, names: Sequence[str] | None, budget: int | None, seed: int, sim_params,
                    on_start: Callable[[str, int, int], None] | None = None, objective=None,
                    on_result: Callable[[str, object], None] | None = None, jobs: int = 1,
                    skip: dict[str, str] | None = None, scaled: dict[str, int] | None = None,
                    on_progress: Callable | None = None) -> dict:
    """Run ``names`` (every available method when None) on ``problem`` and line them up. Each row
    carries the ``bound`` its run had (:func:`method_bound`). ``best`` is the method with the lowest
    objective among those with a valid answer (under the simulator: fitting in memory first; under a
    published objective: a finite value), None when no method found a valid placement
    (``valid_found`` False). ``single_gpu_oom``: the single-GPU reference does not fit (it runs out
    of memory, or the objective rejects it, so its placement was repaired off one GPU); the
    ``speedup_vs_single_gpu`` ratios are then None, never a ratio against a repaired placement.
    ``single_device``: the best single device that fits (:func:`placer.sim.single.single_device`);
    each row's ``speedup_over_single`` is over it (None when none fits or the row runs out of memory).
    ``on_result(name, PlacementResult)`` sees each answer (the HTML report keeps them). ``jobs``
    worker processes run the methods side by side (spawned, one method each at a time); every
    method is deterministic for its seed and budget, so the rows are those of ``jobs=1`` but for
    their wall-clock seconds (and a wall-clock-capped solver's answer, which its notes mark).
    ``skip`` maps a method to why it is not run (:func:`out_of_range`): its row says so. ``scaled``
    maps a method to the placements it runs with in place of ``budget`` (:func:`scaled_budgets`),
    its bound saying so. ``on_progress`` gets every method's
    :class:`placer.bench.progress.Report` as it runs (a few a second each, from the worker
    processes too): what a progress display shows; it decides nothing."""
    names = line_up(names)
    for n in names:
        check_method(n, "methods")
    skip, scaled = dict(skip or {}), dict(scaled or {})
    todo = [(n, scaled.get(n, budget), n in scaled) for n in names if n not in skip]
    rows = []
    # left by any exception (Ctrl-C): workers gone first
    with _pool(jobs, len(todo), on_progress, problem) as (pool, reports):
        ran = _run_all(problem, todo, seed, sim_params, objective, pool, on_start, on_progress, reports)
        for name in names:  # the table keeps the line-up's order, skipped methods in their place
            if name in skip:
                rows.append({"method": name, "error": skip[name], "bound": method_bound(name, budget)[1],
                             "skipped": True})
                continue
            _, r, bound = next(ran)
            if isinstance(r, str):
                rows.append({"method": name, "error": r, "bound": bound})
                continue
            rows.append({**r.summary(), "bound": bound, **({"scaled": True} if name in scaled else {})})
            if on_result:
                on_result(name, r)
    ok = [r for r in rows if "error" not in r]
    custom = objective not in (None, "sim")  # a published objective: its value decides (invalid = inf)
    ref = next((r for r in ok if r["method"] == "single-gpu"), None)
    single_oom = ref is not None and (ref["oom"] or sum(1 for c in ref["device_counts"].values() if c) > 1
                                      or not np.isfinite(ref["objective"]))
    single = ref["step_time_us"] if ref is not None and not single_oom else None
    from placer.sim.result import cluster_comm_model
    from placer.sim.single import over_single, single_device

    for r in ok:
        r["speedup_vs_single_gpu"] = single / r["step_time_us"] if single else None
        r.update(over_single(problem, sim_params, r["step_time_us"], r["oom"]))
    valid = [r for r in ok if np.isfinite(r["objective"]) and (custom or not r["oom"])]
    if custom:
        best = min(valid, key=lambda r: r["objective"])["method"] if valid else None
    else:  # under the simulator an OOM placement still ranks, after every one that fits
        best = min(ok, key=lambda r: (r["oom"], r["objective"]))["method"] if ok else None
    fitting = [r["step_time_us"] for r in ok if not r["oom"]]
    lb = step_bound(problem, sim_params, min(fitting) if fitting else None)
    for r in ok:  # the bound holds for the placements that fit: a gap only for those
        r["vs_lower_bound"] = r["step_time_us"] / lb["value_us"] if not r["oom"] and lb["value_us"] > 0 \
            and np.isfinite(lb["value_us"]) else None
    return {"graph": problem.graph.name, "ops": problem.n_ops, "cluster": problem.cluster.name, "jobs": int(jobs),
            "lower_bound_us": lb_us(lb), "lower_bound": lb, "best": best, "valid_found": bool(valid),
            # the simulator's communication model (docs/simulator.md); None: the cluster's, as the Evaluator's
            "comm_model": sim_params.comm_model if sim_params is not None else cluster_comm_model(problem.cluster),
            "single_gpu_oom": bool(single_oom), "rows": rows,
            "single_device": single_device(problem, sim_params)}


def step_bound(problem, sim_params, known_us: float | None = None, seconds: float | None = None) -> dict:
    """:func:`placer.lowerbound.lower_bound` of ``problem`` under ``sim_params`` as a dict
    (:meth:`Bound.as_dict`): ``value_us`` bounds every placement that fits in memory, ``source``
    names the bound that gave it, ``proven_optimal`` says whether ``known_us`` (a fitting step time)
    or a placement the engine found meets it."""
    from placer.lowerbound import lower_bound

    return lower_bound(problem, sim_params, seconds=seconds, known_us=known_us).as_dict()


def lb_us(bound: dict) -> float:
    """The number a ``lower_bound_us`` field carries: the bound on fitting placements, or, when no
    placement fits (that bound is infinite), the bound on every placement."""
    v = bound["value_us"]
    return float(v) if np.isfinite(v) else float(bound["any_placement_us"])


@contextlib.contextmanager
def _pool(jobs: int, tasks: int, on_progress=None, problem=None):
    """The worker processes of :func:`_run_all` and the queue of their progress reports (None without
    ``on_progress``): a :class:`placer.procpool.WorkerPool` of ``jobs`` (at most ``tasks``) when
    that is more than one, each given ``problem`` once, else none (the methods run in this process)."""
    if jobs <= 1 or tasks <= 1:
        yield None, None
        return
    import multiprocessing

    from placer.procpool import WorkerPool

    reports = multiprocessing.get_context("spawn").Queue() if on_progress is not None else None
    try:
        with WorkerPool(min(jobs, tasks), initializer=_worker_init, initargs=(reports, problem)) as pool:
            yield pool, reports
    finally:
        if reports is not None:
            reports.close()
            reports.cancel_join_thread()


def _drain(reports, on_progress, finished: set, wait_s: float = 0.0) -> None:
    """Pass on every progress report the workers have queued (waiting up to ``wait_s`` for the next
    one when none is), noting the methods that have finished in ``finished``."""
    import queue

    while True:
        try:
            r = reports.get(timeout=wait_s) if wait_s > 0 else reports.get_nowait()
        except queue.Empty:
            return
        if r.finished:
            finished.add(r.method)
        on_progress(r)


def _run_all(problem, todo, seed, sim_params, objective, pool, on_start, on_progress=None, reports=None):
    """The rows of :func:`compare_methods` in ``todo``'s order ((name, budget, scaled) each), run in
    this process or, given a ``pool`` (:func:`_pool`), in its worker processes, which take the
    methods with the most simulated ops first (placements x ops; a construction counts one
    placement) so that a long search does not start last; the order decides no result. The caller
    holds the pool, so that an exception anywhere in its loop stops the workers."""
    names = [t[0] for t in todo]
    if pool is None:
        for k, (name, budget, scaled) in enumerate(todo, 1):
            if on_start:
                on_start(name, k, len(todo))
            yield _run_one(problem, name, budget, seed, sim_params, objective, scaled, tell=on_progress)
        return

    def work(t):
        n = t[1] if t[1] is not None else getattr(METHODS[t[0]].config(), "placements", 1)
        return -(n if t[0] not in SECONDS else 10**9)  # a wall-clock-capped solver: the longest

    first = sorted(range(len(todo)), key=lambda k: (work(todo[k]), k))
    # the worker's own Problem (None here: sent once, with the pool), so that its methods share their starts
    futures = {k: pool.submit(_run_one, None, *todo[k][:2], seed, sim_params, objective, todo[k][2])
               for k in first}
    finished: set = set()
    for k, name in enumerate(names):
        if on_start:
            on_start(name, k + 1, len(names))
        if reports is not None:  # wait for the row in short steps, passing on the workers' reports meanwhile
            from concurrent.futures import wait

            while not wait([futures[k]], timeout=0.2).done:
                _drain(reports, on_progress, finished)
            _drain(reports, on_progress, finished)
            if k == len(names) - 1:  # every method's last report was queued before its row came back
                import time

                end = time.monotonic() + 10.0
                while len(finished) < len(set(names)) and time.monotonic() < end:
                    _drain(reports, on_progress, finished, wait_s=0.1)
        yield futures[k].result()
