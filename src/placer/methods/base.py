"""The contract every placement method shares, and the evaluator that keeps its cost honest.

A method is a function ``run(problem, seed, ev, cfg) -> PlacementResult`` registered with
:func:`register` together with its version and its config class, a frozen :class:`MethodConfig` dataclass holding
the paper's defaults (one comment per field). :func:`run_method` is the one way in:

* parameters are declared at the boundary: unknown names are refused and every value is type- and
  range-checked when the config is built (:class:`placer.errors.InputError`);
* the budget counts placements. The :class:`Evaluator` is the only way a method sees a simulation;
  it refuses to simulate past the budget (:class:`BudgetSpent`, caught here), so a budget is never
  exceeded whatever the method does. A time limit (``Budget.seconds``, on the wall clock or, with
  ``Budget.clock="cpu"``, the CPU seconds of the method's process) is an explicit opt-in and its
  results are labelled not reproducible; without it no method may read the clock to decide
  anything, so the same seed gives the same placement under any machine load. Under a time limit a
  method stops when its placements or its time end, whichever first: its search loops test
  :meth:`Evaluator.out_of_budget`, and its work between evaluations (training steps, pretraining,
  warm starts, solver calls) calls :meth:`Evaluator.tick`, which raises :class:`TimeUp` once the time
  is spent. The result's ``cost.extra`` says what ended the run (``stopped_by``: "placements",
  "seconds" or "method", its own end) with the seconds used on each clock;
* the result is never worse than the best placement the method evaluated, and its simulation is a
  fresh one of the placement returned;
* a method that does not apply to a problem raises :class:`NotApplicable` on purpose; any other
  exception is a bug (the bench caches only ``NotApplicable``).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from placer.bounds import bound, short
from placer.errors import InputError
from placer.methods.config import MethodConfig, NoConfig, Range  # noqa: F401 (the contract's names, imported from here)
from placer.placement import Cost, Placement, PlacementResult, Stopwatch
from placer.sim import SimParams, SimResult, memory_first, simulate


class NotApplicable(InputError):
    """Raised on purpose by a method that cannot place this problem (e.g. no GPU can run every op,
    no published split exists for this graph). The bench records it as "does not apply"."""

    def __init__(self, method: str, why: str, fix: str = "choose another method for this problem"):
        super().__init__(method, "does not apply", why, fix)


class BudgetSpent(Exception):
    """The evaluator's placement budget is used up. Raised by :class:`Evaluator` and caught by
    :func:`run_method`, which returns the best placement evaluated so far."""


class TimeUp(BudgetSpent):
    """The opt-in time limit (``Budget.seconds``) has passed: raised by :meth:`Evaluator.tick` from a
    method's work between evaluations and caught by :func:`run_method`, which returns the best
    placement evaluated so far (or, when the time ended before the method evaluated any, the best
    single device's placement: :func:`_time_fallback`)."""


CLOCKS = ("wall", "cpu")  # Budget.clock: time.perf_counter, or time.process_time (the process's CPU seconds)


class Clock:
    """Seconds since creation on the wall clock (``time.perf_counter``) or as CPU seconds of this
    process, every thread counted (``time.process_time``)."""

    def __init__(self, kind: str = "wall"):
        self.kind = kind
        self._now = time.process_time if kind == "cpu" else time.perf_counter
        self.t0 = self._now()

    def __call__(self) -> float:
        return self._now() - self.t0


# ---------------------------------------------------------------------- budgets and configs
@dataclass(frozen=True)
class Budget:
    """How much search a method may do, counted in placements simulated.

    ``placements=None`` means the method's own default (its config's ``placements`` field, where it
    has one). ``seconds`` is an opt-in time limit, on the wall clock or (``clock="cpu"``) in CPU
    seconds of the method's process, which machine load changes little: a run stopped by it
    depends on the machine and is labelled not reproducible. The method stops when its placements
    or its seconds end, whichever first."""

    placements: int | None = None  # placements the method may simulate, never exceeded
    seconds: float | None = None  # optional time limit (not reproducible)
    clock: str = "wall"  # what `seconds` counts: "wall" (elapsed) or "cpu" (CPU seconds of this process)

    def __post_init__(self):
        p, s = self.placements, self.seconds
        if p is not None:  # the table's rows (placer.bounds)
            bound("budget").check(p, "budget", f"placements={short(p)}", f"give placements {bound('budget').range_text()}")
        if s is not None:
            bound("seconds").check(s, "budget", f"seconds={short(s)}",
                                   f"give seconds {bound('seconds').range_text()}, or None for no time limit")
        if self.clock not in CLOCKS:
            raise InputError("budget", f"clock={short(self.clock)}", "is not a clock placer reads",
                             f"give clock as one of {', '.join(CLOCKS)}")


# ---------------------------------------------------------------------- the evaluator
FALLBACK_NOTE = ("the time limit ran out before the method evaluated any placement: every op on the device that "
                 "runs the graph fastest is returned")
PROGRESS_EVERY_S = 0.25  # how often an Evaluator tells its ``progress`` callback, at most


class Evaluator:
    """Simulates placements of one Problem for a method, counting every call, keeping the best and the
    best-so-far curve, and refusing to go past the placement budget (``limit``).

    The best is a placement that fits in memory whenever one was evaluated: placements compare by
    (runs out of memory, objective), so an overflowing placement whose memory-penalised objective is
    lower (Placeto's penalty is 2 s per GB over: a few MB over costs a few ms) never displaces one
    that runs. While none fits, the lowest objective is kept. The methods still minimise the
    penalised objective; only the answer (and its curve) follows this order."""

    def __init__(self, problem, sim_params: SimParams | None = None, n_jobs: int | None = 1,
                 limit: int | None = None, seconds: float | None = None, objective=None, clock: str = "wall"):
        from placer.objectives import make_objective

        self.problem = problem
        self.sim_params = sim_params or SimParams.preset("default", problem.cluster)  # as simulate(): the cluster's model
        # what is minimised: the simulator (default) or a published model (placer.objectives); under
        # the latter every recorded objective, the best and the curve are that model's
        self.objective = make_objective(objective, self.sim_params)
        self.custom = not self.objective.is_simulator
        self.n_jobs = n_jobs  # threads for evaluate_batch (-1: every core); results do not depend on it
        self.limit = limit  # placements allowed in all (None: unlimited)
        self.seconds = seconds  # opt-in time limit, on the clock ``clock`` names
        self._share_limit: int | None = None  # inside share(): the phase's placement limit
        self._share_seconds: float | None = None  # ... and its end on ``clock``
        self.clock = Clock(clock)  # the clock ``seconds`` counts (and the progress callback is told)
        self.wall = Stopwatch()  # both clocks are reported in the result's cost
        self.cpu = Clock("cpu")
        self.placements = 0
        self.sim_calls = 0
        self.best: np.ndarray | None = None
        self.best_objective_us = np.inf
        self.best_fits = False  # whether the best fits in memory (always True under a published objective)
        self.curve: list[tuple[int, float]] = []
        # progress(placements, limit, best objective us, best fits, seconds on `clock`): told as the
        # method goes, at most every `progress_every` seconds (a display's clock: it decides nothing
        # the method does), and at every new best when `progress_every` is 0
        self.progress: Callable[..., None] | None = None
        self.progress_every = PROGRESS_EVERY_S
        self._told = -math.inf

    def _tell(self, force: bool = False) -> None:
        if self.progress is None:
            return
        now = self.clock()
        if force or now - self._told >= self.progress_every:
            self._told = now
            self.progress(self.placements, self.limit, self.best_objective_us, self.best_fits, now)

    # -- budget
    def remaining(self) -> int | None:
        """Placements left under the budget, or under the current :meth:`share` (None: unlimited)."""
        lim = self.limit if self._share_limit is None else \
            self._share_limit if self.limit is None else min(self.limit, self._share_limit)
        return None if lim is None else max(0, lim - self.placements)

    def out_of_budget(self) -> bool:
        """True once the placement budget (or the current :meth:`share`) is spent, or the opt-in time
        limit has passed."""
        room = self.remaining()
        if room is not None and room <= 0:
            return True
        return self.time_up()

    def time_up(self) -> bool:
        """True once the opt-in time limit (``seconds``), or the current :meth:`share` of it, has
        passed; always False without one."""
        end = self.seconds if self._share_seconds is None else \
            self._share_seconds if self.seconds is None else min(self.seconds, self._share_seconds)
        return end is not None and self.clock() >= end

    @contextlib.contextmanager
    def share(self, fraction: float):
        """Inside the block, a phase of a method gets ``fraction`` of the placements left (at least
        one) and, under a time limit, of the seconds left: :meth:`remaining`, :meth:`out_of_budget`
        and :meth:`time_up` answer for the phase, then for the whole budget again. Nothing else
        changes: every placement still counts against the budget, and the progress callback is told
        the whole budget's limit. Without a placement limit the phase has none either."""
        room = self.remaining()
        self._share_limit = None if room is None else self.placements + max(1, int(fraction * room))
        if self.seconds is not None:
            now = self.clock()
            self._share_seconds = now + fraction * max(0.0, self.seconds - now)
        try:
            yield self
        finally:
            self._share_limit = self._share_seconds = None

    def tick(self) -> None:
        """Called from a method's work between evaluations (a training step, a pretraining epoch, a
        warm-start step): raises :class:`TimeUp` once the opt-in time limit has passed, so the run
        ends within about one such step of its seconds. Nothing without a time limit."""
        if self.seconds is not None and self.clock() >= self.seconds:
            raise TimeUp()

    def stopped_by(self) -> str:
        """What ended the run: "placements" (the budget is spent), "seconds" (the time limit has
        passed) or "method" (its own end)."""
        if self.limit is not None and self.placements >= self.limit:
            return "placements"
        return "seconds" if self.time_up() else "method"

    def fraction_used(self) -> float:
        """How far through its budget the method is, in [0, 1]: placements used / limit, or, only
        under an opt-in wall-clock limit, elapsed / seconds when that is further (schedules such as
        annealing temperatures or entropy decay follow this)."""
        f = self.placements / self.limit if self.limit else 0.0
        if self.seconds:
            f = max(f, self.clock() / self.seconds)
        return min(1.0, f)

    def _take(self, k: int) -> int:
        """How many of k requested placements may be simulated; BudgetSpent when none may."""
        room = self.remaining()
        if room is not None and room <= 0:
            raise BudgetSpent()
        return k if room is None else min(k, room)

    # -- simulation
    def simulate(self, placement) -> SimResult:
        """A full simulation (timeline, transfers, memory) of one placement."""
        self._take(1)
        r = simulate(self.problem, placement, self.sim_params)
        self.sim_calls += 1
        self.placements += 1
        if self.custom:
            self._record(r.device, self.objective.evaluate(self.problem, r.device))
        else:
            self._record(r.device, r.objective_us, not r.oom)
        return r

    def evaluate(self, placement) -> float:
        """The memory-penalised objective of one placement (microseconds), from the simulator's
        objective-only fast path (no SimResult built). Counts 1 placement and 1 simulator call."""
        from placer.sim.fast import engine

        self._take(1)
        p = np.asarray(getattr(placement, "devices", placement))
        fits = True
        if self.custom:
            obj = self.objective.evaluate(self.problem, p)  # validates (InputError on a bad placement)
        else:
            e = engine(self.problem, self.sim_params)
            obj = e.objective(p)  # validates (InputError on a bad placement)
            fits = not e.oom
        self.sim_calls += 1
        self.placements += 1
        self._record(p, obj, fits)
        return obj

    def evaluate_many(self, placements) -> np.ndarray:
        return self.evaluate_batch(placements).objective_us

    def evaluate_batch(self, placements, n_jobs: int | None = None):
        """Objectives, makespans, peaks and OOM flags of a (k, n) batch in one simulator call
        (:func:`placer.sim.evaluate_many`, ``n_jobs`` threads, default ``self.n_jobs``); counts k
        placements and k simulator calls. When fewer than k placements are left in the budget, the
        first ones that fit are simulated and recorded, then :class:`BudgetSpent` is raised."""
        from placer.sim import evaluate_many

        P = np.asarray(placements)
        P = P[None, :] if P.ndim == 1 else P
        many = self.objective.evaluate_batch if self.custom else (
            lambda prob, Q, n_jobs=None: evaluate_many(prob, Q, self.sim_params, n_jobs=n_jobs))
        if len(P) == 0:
            return many(self.problem, np.zeros((0, self.problem.n_ops), dtype=np.int64))
        k = self._take(len(P))
        br = many(self.problem, P[:k], n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        for p, obj, oom in zip(P[:k], br.objective_us, br.oom):
            self.sim_calls += 1
            self.placements += 1
            self._record(p, float(obj), self.custom or not oom)
        if k < len(P):
            raise BudgetSpent()
        return br

    def charge(self, calls: int, curve: list[tuple[int, float]] = (), best_placement=None,
               best_objective_us: float = np.inf) -> None:
        """Put simulations done outside this evaluator (e.g. in an RL trainer's rollout workers, which
        simulate their own environments) on its bill: ``calls`` placements, the best-so-far points
        ``curve`` as (calls since the start of this charge, objective[, fits in memory]; without the
        flag a point is taken to fit as the best placement does), and the best placement seen.
        The caller must have kept ``calls`` within :meth:`remaining`."""
        room = self.remaining()
        if room is not None and calls > room:
            raise RuntimeError(f"charged {calls} placements with {room} left in the budget (a method bug)")
        base = self.placements
        self.sim_calls += calls
        self.placements += calls
        if best_placement is not None:
            fits = self.custom or not self._overflows(best_placement)  # re-simulated, not counted: it was
            if self._better(best_objective_us, fits):
                for point in curve:  # the charged run's own best-so-far points
                    y, f = float(point[1]), bool(point[2]) if len(point) > 2 else fits
                    if self._better(y, f):
                        self.best_objective_us, self.best_fits = y, f
                        self.curve.append((base + int(point[0]), y))
                self.best_objective_us, self.best_fits = float(best_objective_us), fits
                self.best = np.asarray(best_placement, dtype=np.int64)
        self.curve.append((self.placements, self.best_objective_us))
        self._tell()

    def _overflows(self, placement) -> bool:
        from placer.sim.fast import engine

        e = engine(self.problem, self.sim_params)
        e.objective(np.asarray(placement, dtype=np.int64))
        return e.oom

    def _better(self, obj: float, fits: bool) -> bool:
        """Whether a placement with objective ``obj`` that does (not) fit beats the best so far
        (:func:`placer.sim.memory_first`)."""
        return memory_first(obj, fits) < memory_first(self.best_objective_us, self.best_fits)

    def _record(self, placement: np.ndarray, obj: float, fits: bool = True) -> None:
        if self._better(obj, fits):
            self.best_objective_us, self.best_fits = float(obj), fits
            self.best = np.array(placement, dtype=np.int64)
        self.curve.append((self.placements, self.best_objective_us))
        self._tell()

    # -- the answer
    def result(self, method: str, placement=None, params: dict | None = None, seed: int | None = None,
               notes: list[str] | None = None) -> PlacementResult:
        """The PlacementResult for ``placement`` (default: the best seen). When ``placement`` is worse
        than the best placement evaluated, the best is returned instead (and a note says so). Its final
        simulation is not counted as search cost."""
        notes = list(notes or [])
        p = self.best if placement is None else np.asarray(getattr(placement, "devices", placement), dtype=np.int64)
        if p is None and self.custom and self.placements:  # all it evaluated broke the objective's constraints
            p = self.problem.compute_us.argmin(axis=1)
        if p is None and self.time_up():  # its time ended before its first evaluation
            _time_fallback(self.problem, self)
            p = self.best
            notes.append(FALLBACK_NOTE)
        if p is None:
            raise RuntimeError(f"method {method} evaluated no placement")
        if self.custom:
            return self._objective_result(method, p, params, seed, notes)
        sim = simulate(self.problem, p, self.sim_params)
        fits = not sim.oom
        if self.best is not None and (memory_first(sim.objective_us, fits)
                                      > memory_first(self.best_objective_us * (1 + 1e-12), self.best_fits)):
            why = ("runs out of memory; the best it evaluated fits" if self.best_fits and not fits else
                   f"({sim.objective_us:.1f} us) was worse than the best it evaluated")
            notes.append(f"its final placement {why} ({self.best_objective_us:.1f} us): the best is returned")
            sim = simulate(self.problem, self.best, self.sim_params)
        if self.seconds is not None:
            notes.append(self._time_note())
        return PlacementResult(method=method, placement=Placement(sim.device, self.problem.cluster.device_names),
                               sim=sim, curve=_thin(self.curve),
                               cost=Cost(placements=self.placements, sim_calls=self.sim_calls, wall_s=self.wall()),
                               params=dict(params or {}), seed=seed, notes=notes)


    def _time_note(self) -> str:
        what = "wall-clock" if self.clock.kind == "wall" else "CPU-time"
        if self.time_up():
            return f"stopped by a {self.seconds:g} s {what} limit: not reproducible"
        return f"ran under a {self.seconds:g} s {what} limit, not reached"

    def _objective_result(self, method, p, params, seed, notes) -> PlacementResult:
        """:meth:`result` under a published objective: a placement the objective rejects is repaired
        (:meth:`placer.objectives.Objective.repair`, not counted as search); the better of it and the
        best evaluated is returned, with the objective's value as ``objective_us`` and a simulation
        kept for the timeline."""
        obj, prob = self.objective, self.problem
        why = obj.check(prob, p)
        if why is not None:
            p = obj.repair(prob, p)
            notes.append(f"its placement was not valid under {obj.describe()} ({why}): repaired")
        value = obj.evaluate(prob, p)
        if self.best is not None and value > self.best_objective_us * (1 + 1e-12):
            if np.isfinite(value):
                notes.append(f"its final placement ({value:.1f} us) was worse than the best it evaluated "
                             f"({self.best_objective_us:.1f} us): the best is returned")
            p, value = self.best, self.best_objective_us
        if not np.isfinite(value):
            notes.append(f"no placement valid under {obj.describe()} was found: {obj.check(prob, p)}")
        if self.seconds is not None:
            notes.append(self._time_note())
        sim = simulate(prob, p, self.sim_params)
        return PlacementResult(method=method, placement=Placement(sim.device, prob.cluster.device_names),
                               sim=sim, curve=_thin(self.curve),
                               cost=Cost(placements=self.placements, sim_calls=self.sim_calls, wall_s=self.wall()),
                               params=dict(params or {}), seed=seed, notes=notes,
                               objective=obj.describe(), objective_us=float(value))


def _thin(curve: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Keep only the points where the best changed (and the last one)."""
    out = []
    for x, y in curve:
        if not out or y != out[-1][1]:
            out.append((x, y))
    if curve and out[-1] != curve[-1]:
        out.append(curve[-1])
    return out


# ---------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class MethodInfo:
    name: str
    run: Callable[..., PlacementResult]
    summary: str
    family: str  # "trivial", "expert", "partitioning", "list-scheduling", "search", "exact", "learned"
    config: type[MethodConfig] = NoConfig
    paper: str = ""
    available: Callable[[], str | None] = field(default=lambda: None)  # None, or why it cannot run here
    version: int = 1  # bumped whenever the method's behaviour changes on purpose (the bench cache keys on it)

    def make_config(self, params: dict[str, Any] | MethodConfig | None = None) -> MethodConfig:
        if isinstance(params, MethodConfig):
            if not isinstance(params, self.config):
                raise InputError(self.name, f"config {type(params).__name__}", "belongs to another method",
                                 f"use {self.config.__name__}")
            return params
        return self.config.from_params(self.name, dict(params or {}))


METHODS: dict[str, MethodInfo] = {}


def register(name: str, summary: str, family: str, config: type[MethodConfig] = NoConfig, paper: str = "",
             available=None, *, version: int):
    """Decorator: add a method ``run(problem, seed, ev, cfg)`` to the registry under ``name``.

    ``version`` is the method's behaviour as a package versions its API: bump it in the commit that
    changes on purpose what the method returns (its committed bench runs then count as stale and are
    rerun); an edit not meant to change it is checked by the golden tests instead (tests/test_golden.py)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"method {name}: version must be a whole number >= 1, got {version!r}")

    def deco(fn):
        METHODS[name] = MethodInfo(name, fn, summary, family, config, paper, available or (lambda: None), version)
        return fn

    return deco


def run_method(name: str, problem, budget: Budget | None = None, seed: int = 0,
               sim_params: SimParams | None = None, config: MethodConfig | None = None,
               n_jobs: int | None = 1, objective=None, on_progress: Callable[..., None] | None = None,
               progress_every: float = PROGRESS_EVERY_S, **params: Any) -> PlacementResult:
    """Run a registered method on a Problem under the common contract (see the module docstring).

    Parameters are given either as a config object or as keyword ``params`` (strings are parsed, as
    from ``--set key=value``). ``objective`` (a name such as ``latency`` or an
    :class:`placer.objectives.Objective`; default the simulator) is what the method minimises.
    ``on_progress(placements, limit, best_us, best_fits, seconds)`` is told as the method goes (its
    evaluator's placements so far of ``limit``, None when unbounded; at most every
    ``progress_every`` seconds, default :data:`PROGRESS_EVERY_S`; at every new best when 0; and once
    at the start and the end; ``seconds`` on the budget's clock); it changes no result.

    The result's ``cost.extra`` holds ``stopped_by`` (:meth:`Evaluator.stopped_by`), ``clock`` and
    ``cpu_s`` (CPU seconds of this process during the run) beside ``cost.wall_s``."""
    info = get_method(name)
    why = info.available()
    if why:
        raise InputError("method", f"'{name}'", f"cannot run here: {why}", "install the extra it names")
    if config is not None and params:
        raise InputError(name, "parameters", "given both as a config and as keywords", "give one of them")
    cfg = info.make_config(config if config is not None else params)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError("seed", f"{seed!r}", "is not a non-negative whole number", "give a seed of 0 or more")
    budget = budget or Budget()
    limit = budget.placements if budget.placements is not None else getattr(cfg, "placements", None)
    ev = Evaluator(problem, sim_params, n_jobs=n_jobs, limit=limit, seconds=budget.seconds, objective=objective,
                   clock=budget.clock)
    ev.progress = on_progress
    ev.progress_every = float(progress_every)
    ev._tell(force=True)
    try:
        res = info.run(problem, int(seed), ev, cfg)
    except TimeUp:
        notes = ["the time limit ran out inside a step: the best placement evaluated is returned"]
        res = ev.result(name, notes=[] if ev.best is None and not (ev.custom and ev.placements) else notes)
    except BudgetSpent:
        res = ev.result(name, notes=["the placement budget ran out inside a step: the best placement evaluated "
                                     "is returned"])
    ev._tell(force=True)
    # the contract, enforced where every method passes
    if limit is not None and ev.placements > limit:
        raise RuntimeError(f"method {name} simulated {ev.placements} placements with a budget of {limit}")
    res.method = name
    res.seed = int(seed)
    res.params = {**cfg.to_dict(), **{k: v for k, v in res.params.items() if k not in cfg.to_dict()}}
    if "placements" in res.params and limit is not None:  # the budget that ran, not the config's default
        res.params["placements"] = int(limit)
    res.cost.placements, res.cost.sim_calls, res.cost.wall_s = ev.placements, ev.sim_calls, ev.wall()
    res.cost.extra.update(stopped_by=ev.stopped_by(), clock=ev.clock.kind, cpu_s=ev.cpu())
    return res


def _time_fallback(problem, ev: Evaluator) -> None:
    """Evaluate one placement when a time limit ended a method before it had evaluated any: every op
    on the device that runs the whole graph fastest by compute alone (the ops it cannot run, and the
    whole graph when no device runs every op, on each op's fastest device; colocation groups kept
    whole). One placement of the budget."""
    from placer.methods.devices import allowed_placement

    comp = np.asarray(problem.compute_us, dtype=np.float64)
    total = np.where(np.isfinite(comp).all(axis=0), np.where(np.isfinite(comp), comp, 0).sum(axis=0), np.inf)
    p = (np.full(problem.n_ops, int(total.argmin()), dtype=np.int64) if np.isfinite(total).any()
         else comp.argmin(axis=1).astype(np.int64))
    ev.simulate(allowed_placement(problem, p))


def get_method(name: str) -> MethodInfo:
    """The registered method ``name``. (Importing this module imports its package first, whose
    ``__init__`` imports every method module: the registry is full by the time this runs.)"""
    try:
        return METHODS[name]
    except KeyError:
        raise InputError("method", f"'{name}'", "is not a known method",
                         f"use one of {', '.join(sorted(METHODS))}") from None
