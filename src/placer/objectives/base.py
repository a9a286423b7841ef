"""The objective interface: what a method minimises, beside (or instead of) the event simulator.

An :class:`Objective` turns a (k, n) batch of placements of one :class:`placer.problem.Problem`
into an :class:`ObjectiveBatch`: ``objective`` (microseconds, ``inf`` where the placement breaks
the objective's constraints), ``valid`` and ``oom`` flags and the resident bytes per device. Every
objective also says whether one placement is valid (:meth:`Objective.check` gives the reason when it
is not) and how to make a placement valid (:meth:`Objective.repair`), so that every method returns
a placement that satisfies the objective it optimised.

``SimObjective`` is today's event simulator (memory-penalised step time); the published models live
in :mod:`placer.objectives.published` and :mod:`placer.objectives.pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ObjectiveBatch:
    """An objective's verdict on a batch of placements (the fields the simulator's BatchResult has,
    plus ``valid``)."""

    objective_us: np.ndarray  # (k,) us; inf where not valid
    makespan_us: np.ndarray  # (k,) the objective's time (same as objective where valid)
    peak_memory_bytes: np.ndarray  # (k, D) bytes the objective charges per device
    oom: np.ndarray  # (k,) bool: a device holds more than its capacity
    valid: np.ndarray  # (k,) bool: every constraint of the objective holds (memory included)


class Objective:
    """Base class: ``name``, ``contiguous`` (whether moves must keep each device's set contiguous),
    :meth:`evaluate_batch`, :meth:`check`, :meth:`repair`."""

    name = "objective"
    version = 1  # bumped when what the objective computes changes on purpose (the bench cache keys on it)
    is_simulator = False
    contiguous = False  # methods must keep contiguity (see placer.objectives.units)
    cpu_contiguous = False  # ... on CPU devices too
    unit_ms = False  # the published models' inputs are in milliseconds (reported as such)

    def describe(self) -> str:
        return self.name

    def evaluate_batch(self, problem, placements) -> ObjectiveBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self, problem, placement) -> float:
        p = problem.validate_placement(np.asarray(getattr(placement, "devices", placement)))
        return float(self.evaluate_batch(problem, p[None, :]).objective_us[0])

    def check(self, problem, placement) -> str | None:
        """None when ``placement`` is valid under this objective, else why not (one sentence)."""
        p = np.asarray(getattr(placement, "devices", placement), dtype=np.int64)
        b = self.evaluate_batch(problem, p[None, :])
        if b.oom[0]:
            return "a device holds more memory than it has"
        return None if b.valid[0] else "it breaks the objective's constraints"

    def is_valid(self, problem, placement) -> bool:
        return self.check(problem, placement) is None

    def repair(self, problem, placement) -> np.ndarray:
        """A valid placement close to ``placement`` (the default keeps it as it is)."""
        return np.asarray(placement, dtype=np.int64)


class SimObjective(Objective):
    """The event simulator's memory-penalised step time (:func:`placer.sim.evaluate_many`), the default."""

    name = "sim"
    is_simulator = True

    def __init__(self, sim_params=None):
        self.sim_params = sim_params

    def evaluate_batch(self, problem, placements, n_jobs: int | None = 1) -> ObjectiveBatch:
        from placer.sim import evaluate_many

        br = evaluate_many(problem, placements, self.sim_params, n_jobs=n_jobs)
        return ObjectiveBatch(br.objective_us, br.makespan_us, br.peak_memory_bytes, br.oom,
                              np.ones(len(br.objective_us), dtype=bool))

    def check(self, problem, placement) -> str | None:
        return None  # the simulator scores every placement (memory overflow is a penalty)
