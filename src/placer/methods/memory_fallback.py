"""The memory fallback of the learned methods that start from no classical placement (ColocRL, the
Hierarchical Planner, GDP and Mars; ours, not in their papers). After their first policy update,
when nothing evaluated fits in memory, it evaluates inside the budget the seeded start of Post and
Placeto (:func:`placer.methods.starts.seeded_start`, relieved by simulation when none fits), then
relieves the least overflowing placement (at most ``FALLBACK_RELIEVE_SHARE`` of what is left), then
the whole graph on the host; the Evaluator's memory-first order then returns a placement that fits.
Where something fits already it does nothing (no simulation, no random draw). The policy's learning
is unchanged. Why, and what it was measured to do: docs/methods/memory_fallback.md.
"""

from __future__ import annotations

from placer.grouping import colocation_units
from placer.methods.base import Evaluator
from placer.methods.baselines import single_device_placement
from placer.methods.starts import CHEAP_SEEDS, relieve, seeded_start

FALLBACK_SPLIT_SEARCH = 0  # simulations moving the layer split's cuts: 0, the split at equal compute (G - 1 placements)
FALLBACK_RELIEVE_SHARE = 0.5  # when the seeds' own relief left every one overflowing: this share of the placements left


def fit_in_memory(problem, ev: Evaluator) -> str | None:
    """When the best placement ``ev`` has evaluated overflows memory, evaluate through ``ev``, each step
    only while nothing fits: the seeded start (:func:`placer.methods.starts.seeded_start`, its seeds
    relieved when none fits), the least overflowing placement evaluated relieved with
    ``FALLBACK_RELIEVE_SHARE`` of the placements left (:func:`placer.methods.starts.relieve`), then
    every op on the first host CPU that runs them all. Returns a note for the result, or None when it
    did not run (something fits already, nothing was evaluated yet, no budget is left, or a published
    objective is minimised: those have their own memory models)."""
    if ev.custom or ev.best is None or ev.best_fits or ev.out_of_budget():
        return None
    before = ev.placements
    start = seeded_start(problem, ev, CHEAP_SEEDS, FALLBACK_SPLIT_SEARCH)
    if start is None:
        return None
    how = "relieved by simulation" if start.relieved else "made to hold their parameters"
    if not ev.best_fits and not ev.out_of_budget():  # relieve what overflows least, with more of the budget
        room = ev.remaining()
        spare = None if room is None else int(FALLBACK_RELIEVE_SHARE * room)
        relieve(problem, ev, [ev.best.copy()], ev.best_objective_us, colocation_units(problem), spare)
        how += ", then the least overflowing placement relieved by simulation"
    if not ev.best_fits and not ev.out_of_budget():  # the last resort: every op on a host CPU
        for d in problem.cluster.cpus():
            p = single_device_placement(problem, d)
            if p is not None:
                ev.evaluate_batch(p[None])
                how += ", then every op on the host"
                break
    now = "fits" if ev.best_fits else "still overflows"
    return (f"no placement of the first policy update fit in memory: the classical seeds, {how}, were evaluated "
            f"({ev.placements - before} placements); the best now {now}")
