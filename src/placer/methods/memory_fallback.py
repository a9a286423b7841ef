"""The memory fallback of the learned methods that do not start from a classical placement (ColocRL, the
Hierarchical Planner, GDP and Mars): when nothing they evaluated up to the end of their first policy
update fits in memory, the seeded start of Post and Placeto
(:func:`placer.methods.seeding.seeded_start`: the classical heuristics local search starts from, each
made to hold its parameters, simulated once, then relieved by simulation when none fits) is
evaluated inside the budget. The Evaluator keeps its best in :func:`placer.sim.memory_first` order, so
the method then returns a placement that fits whenever one of those does. The learning is not
changed: the policy goes on from where its own update left it, and where it finds a faster placement
that fits, that one is returned.

Why (ours; none of the four papers has a memory limit its policy must learn around: ColocRL and the
Hierarchical Planner count an out-of-memory placement as a large fixed step time, Mars and GDP do not
say): with the GPUs too small for the model, the policies place on the GPUs only (``devices="gpus"``,
GDP's and Mars's "auto") and their first samples are spread over them, so every placement they sample
can overflow. Measured before the fallback (seed 0, no placement of any of the four fitting):
ResNet-50 and Inception-V3 on k80x2 with each GPU cut to 0.35 of the one-GPU peak (300 placements),
where Post fits at 787 / 2,125 ms and Placeto at 805 / 2,419 ms; a generated 120-op training graph on
k80x2 with the GPUs at 0.45 of that peak (60 placements), where Post fits at 152 ms and local search at
141 ms. After it (same runs): GDP and ColocRL 1,608.4 ms on ResNet-50 and 589.2 ms on the 120-op graph,
both fitting, mostly the host's placement: far behind Post and Placeto, whose units may go to the host
too. The learning cannot do better there while the policies' actions are the GPUs only; choosing
among every device when no seed fits on the GPUs (Placeto's ``devices="auto"``) would, but it is
decided before the network is built and so would change every run of the four methods.

What it costs: nothing where a placement of the first update fits (the check reads the Evaluator's
best; no simulation, no random draw), so on every problem where memory is not tight the four methods
give the placements they gave before (the committed post-table1 and placeto-table1 ColocRL runs and
the mars table's GDP runs, rerun: 16 of 17 bit for bit; on ResNet-200 k80x2, where one GPU overflows,
no sample of the first policy step fit, and the seeds took ColocRL from 1,645.8 to 1,468.5 ms). Where
it runs, it spends the seed share of :mod:`placer.methods.seeding` (a quarter of the placements left,
its relief within half of what the seeds leave of it; the split at equal compute,
``FALLBACK_SPLIT_SEARCH``, as the methods' own starts searched theirs already or were asked not to
start from one), then at most ``FALLBACK_RELIEVE_SHARE`` of what is left, then one placement.
"""

from __future__ import annotations

from placer.grouping import colocation_units
from placer.methods.base import Evaluator
from placer.methods.baselines import single_device_placement
from placer.methods.seeding import CHEAP_SEEDS, relieve, seeded_start

FALLBACK_SPLIT_SEARCH = 0  # simulations moving the layer split's cuts: 0, the split at equal compute (G - 1 placements)
FALLBACK_RELIEVE_SHARE = 0.5  # when the seeds' own relief left every one overflowing: this share of the placements left


def fit_in_memory(problem, ev: Evaluator) -> str | None:
    """When the best placement ``ev`` has evaluated overflows memory, evaluate through ``ev``, each step
    only while nothing fits: the seeded start (:func:`placer.methods.seeding.seeded_start`, its seeds
    relieved when none fits), the least overflowing placement evaluated relieved with
    ``FALLBACK_RELIEVE_SHARE`` of the placements left (:func:`placer.methods.seeding.relieve`), then
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
