"""The contract every placement method shares, and the evaluator that keeps its cost honest.

A method is a function ``run(problem, budget, seed, evaluator, **params) -> PlacementResult``
registered with :func:`register`. It asks the :class:`Evaluator` for every simulation it wants, so
placements sampled, simulator calls and wall-clock seconds are counted the same way for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from placer.errors import InputError
from placer.placement import Cost, Placement, PlacementResult, Stopwatch
from placer.sim import SimParams, SimResult, simulate


@dataclass(frozen=True)
class Budget:
    """How much search a method may do; None means the method's own default."""

    placements: int | None = None  # placements sampled / simulated
    seconds: float | None = None  # wall-clock limit


class Evaluator:
    """Simulates placements of one Problem, counting every call and keeping the best and the curve."""

    def __init__(self, problem, sim_params: SimParams | None = None, n_jobs: int | None = 1):
        self.problem = problem
        self.sim_params = sim_params or SimParams()
        self.n_jobs = n_jobs  # threads for evaluate_many / evaluate_batch (-1: every core)
        self.clock = Stopwatch()
        self.placements = 0
        self.sim_calls = 0
        self.best: np.ndarray | None = None
        self.best_objective = np.inf
        self.curve: list[tuple[int, float]] = []

    def simulate(self, placement) -> SimResult:
        """A full simulation (timeline, transfers, memory) of one placement."""
        self.sim_calls += 1
        self.placements += 1
        r = simulate(self.problem, placement, self.sim_params)
        self._record(r.device, r.objective)
        return r

    def evaluate(self, placement) -> float:
        """The memory-penalised objective of one placement (microseconds), from the simulator's
        objective-only fast path (no SimResult built). Counts 1 placement and 1 simulator call."""
        from placer.sim import evaluate

        p = np.asarray(getattr(placement, "devices", placement))
        obj = evaluate(self.problem, p, self.sim_params)  # validates (InputError on a bad placement)
        self.sim_calls += 1
        self.placements += 1
        self._record(p, obj)
        return obj

    def evaluate_many(self, placements) -> np.ndarray:
        return self.evaluate_batch(placements).objective

    def evaluate_batch(self, placements, n_jobs: int | None = None):
        """Objectives, makespans, peaks and OOM flags of a (k, n) batch in one simulator call
        (:func:`placer.sim.evaluate_many`, ``n_jobs`` threads, default ``self.n_jobs``); counts k
        placements and k simulator calls. The kernel checks every row (device range, cost, colocation)
        and raises the InputError of the first bad one."""
        from placer.sim import evaluate_many

        P = np.asarray(placements)
        P = P[None, :] if P.ndim == 1 else P
        if len(P) == 0:
            return evaluate_many(self.problem, np.zeros((0, self.problem.n_ops), dtype=np.int64), self.sim_params)
        br = evaluate_many(self.problem, P, self.sim_params, n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        for p, obj in zip(P, br.objective):
            self.sim_calls += 1
            self.placements += 1
            self._record(p, float(obj))
        return br

    def _record(self, placement: np.ndarray, obj: float) -> None:
        if obj < self.best_objective:
            self.best_objective = float(obj)
            self.best = np.array(placement, dtype=np.int64)
        self.curve.append((self.placements, self.best_objective))

    def out_of_budget(self, budget: Budget, default_placements: int | None = None) -> bool:
        limit = budget.placements if budget.placements is not None else default_placements
        if limit is not None and self.placements >= limit:
            return True
        return budget.seconds is not None and self.clock() >= budget.seconds

    def result(self, method: str, placement=None, params: dict | None = None, seed: int | None = None,
               notes: list[str] | None = None) -> PlacementResult:
        """The PlacementResult for ``placement`` (default: the best seen). Its final simulation is
        not counted as search cost."""
        p = self.best if placement is None else np.asarray(placement, dtype=np.int64)
        if p is None:
            raise RuntimeError(f"method {method} evaluated no placement")
        sim = simulate(self.problem, p, self.sim_params)
        curve = _thin(self.curve)
        return PlacementResult(method=method, placement=Placement(sim.device, self.problem.cluster.device_names),
                               sim=sim, curve=curve,
                               cost=Cost(placements=self.placements, sim_calls=self.sim_calls, wall_s=self.clock()),
                               params=dict(params or {}), seed=seed, notes=list(notes or []))


def _thin(curve: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Keep only the points where the best changed (and the last one)."""
    out = []
    for x, y in curve:
        if not out or y < out[-1][1]:
            out.append((x, y))
    if curve and out[-1] != curve[-1]:
        out.append(curve[-1])
    return out


@dataclass(frozen=True)
class MethodInfo:
    name: str
    run: Callable[..., PlacementResult]
    summary: str
    family: str  # "trivial", "expert", "partitioning", "list-scheduling", "search", "exact", "learned"
    paper: str = ""
    available: Callable[[], str | None] = field(default=lambda: None)  # None, or why it cannot run here


METHODS: dict[str, MethodInfo] = {}


def register(name: str, summary: str, family: str, paper: str = "", available=None):
    """Decorator: add a method to the registry under ``name``."""

    def deco(fn):
        METHODS[name] = MethodInfo(name, fn, summary, family, paper, available or (lambda: None))
        return fn

    return deco


def run_method(name: str, problem, budget: Budget | None = None, seed: int = 0,
               sim_params: SimParams | None = None, **params: Any) -> PlacementResult:
    """Run a registered method on a Problem with the common contract."""
    info = get_method(name)
    why = info.available()
    if why:
        raise InputError("--method", f"method '{name}'", f"cannot run here: {why}", "install the extra it names")
    ev = Evaluator(problem, sim_params)
    res = info.run(problem, budget or Budget(), seed, ev, **params)
    res.seed = seed
    return res


def get_method(name: str) -> MethodInfo:
    from placer import methods  # noqa: F401  (fills the registry)

    try:
        return METHODS[name]
    except KeyError:
        raise InputError("--method", f"method '{name}'", "is not a known method",
                         f"use one of {', '.join(sorted(METHODS))} (see `placer methods`)") from None
