"""The seeded start of the learned methods that search one graph (Post, Placeto): the best of the cheap
classical heuristics that local search starts from and the searched layer split.

Local search and annealing start from the best of :data:`placer.methods.local_search.SEEDS`; a learned
method started from the same placement begins where local search does, so what it finds beyond that
placement is its learning's. :func:`seeded_start` returns that placement; the method then cuts its
placement units along it (so that the placement is exactly expressible) and starts there (see the
methods' docstrings for the measurements).
"""

from __future__ import annotations

import numpy as np

from placer.methods.base import Evaluator
from placer.methods.layer_split import split_start
from placer.methods.local_search import SEEDS, seed_placements
from placer.sim import memory_first

# The seeding heuristics of local search whose own computation stays within seconds on 10k-op graphs:
# m-ETF under the simulator's communication model and m-SCT took 23-103 s each on NMT-2 and NMT-4
# (2-7 s for m-ETF:free). Measured for Post against all of them (seeds 0 and 1, 600 placements), the
# geometric mean over the 11 post-table1 rows moved from 0.956x to 0.962x of the earlier start.
CHEAP_SEEDS = "single-gpu,expert,m-topo,metis,heft,heft:free,m-etf:free"
SEED_SHARE = 0.25  # at most this share of the placement budget goes to simulating seeds (as local search)
SEED_MAX_OPS = 20000  # graphs with more ops skip the n^2 heuristics (as local search)


def seed_names_ok(seeds: str) -> bool:
    """Whether ``seeds`` is a comma-separated list of known seeding heuristics."""
    return all(n in SEEDS for n in seeds.split(",") if n)


SEEDS_HELP = f"a comma-separated list of {', '.join(SEEDS)}"


def seeded_start(problem, ev: Evaluator, seeds: str, split_search: int) -> tuple[np.ndarray, bool] | None:
    """The best of the classical heuristics ``seeds`` (:func:`placer.methods.local_search.seed_placements`,
    at most ``SEED_SHARE`` of the budget) and, under the simulator's objective, the layer split with
    its cuts searched (``split_search`` simulations, :func:`placer.methods.layer_split.split_start`),
    in :func:`placer.sim.memory_first` order; each seed is simulated once, in one batch, through ``ev``.
    (placement, whether it fits in memory), or None when no seed could be afforded."""
    room = ev.remaining()
    names = tuple(n for n in seeds.split(",") if n)
    cands = list(seed_placements(problem, ev, names, max_placements=None if room is None else int(SEED_SHARE * room),
                                 max_ops=SEED_MAX_OPS).values())
    if not ev.custom and (room is None or room >= 4 * split_search):
        split = split_start(problem, ev, split_search)  # its search simulated the split (counted)
        if split is not None:
            cands.append(split[0])
    left = ev.remaining()
    if left is not None:
        cands = cands[:max(left - 1, 0)]  # leave at least one placement for the method itself
    if not cands:
        return None
    got = ev.evaluate_batch(np.stack(cands))
    i = min(range(len(cands)), key=lambda i: memory_first(got.objective_us[i], not got.oom[i]))
    return cands[i], not bool(got.oom[i])
