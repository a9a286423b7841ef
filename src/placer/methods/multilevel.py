"""Multilevel local search: coarse to fine, the multilevel scheme of graph partitioning (Hendrickson
and Leland 1995; Karypis and Kumar 1998, METIS) applied to placement search over the simulator.

Local search moves one op or colocation group (or a short run of ops) at a time. On graphs whose
good placements move whole layers (a recurrent model cut into a pipeline of LSTM layers, each with
its backward and optimizer ops), one op moved alone only adds transfers, so the search stays near
its seed. Coarsening first lets a move carry a whole layer:

1. **Coarse** (at most ``coarse_share`` of the budget, placements and, under a time limit, seconds;
   less when ``coarse_give_up`` restarts in a row find nothing better):
   :mod:`local search <placer.methods.local_search>` on the same problem with every unit of the
   ``coarse`` grouping made one colocation group (default ``module:auto``: the model's module subtrees,
   each with its backward and optimizer ops, at the depth :func:`placer.grouping.modules.auto_depth`
   chooses). A graph that records no module paths is coarsened with ``fallback`` instead; by default
   (``ops``) it has no coarse phase and the method is local search. Measured at 2,000 placements, seed
   0, against local search: Merge-and-Colocate, METIS or contiguous chunks of 32-512 groups as the
   coarse level gave 118-127 ms against 121.6 on the 400-op synthetic graph, 422-459 against 410 on
   PipeDream NASNet-A mobile (k80x4), equal on PipeDream ResNet-50: no general gain, so none by
   default. Its seeds are the usual ones, built on the coarse problem. (Measurements:
   docs/methods/multilevel.md.)
2. **Fine**: local search over the ops and colocation groups of the problem itself, from the best of
   its usual seeds and the coarse phase's best placement, with what is left of the budget.

Every placement of either phase is simulated through the one Evaluator and counts against the one
budget; the result is the best placement evaluated. A coarse placement is a placement of the problem
(colocation changes no cost), so the fine phase never starts worse than the coarse one ended. Under a
published objective (placer.objectives) the coarse phase is skipped: the interval search of
``local-search`` already moves whole contiguous pieces. Deterministic: the grouping depends on the
inputs only and both phases count placements, never the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from placer.errors import InputError
from placer.grouping import GROUPING_HELP, grouping_ok
from placer.methods.base import BudgetSpent, Evaluator, Range, register
from placer.methods.local_search import LocalSearchConfig, search


@dataclass(frozen=True)
class MultilevelConfig(LocalSearchConfig):
    """Local search on a coarsened problem, then on the problem itself."""

    coarse: str = "module:auto"  # the coarse level's units (a grouping spec); module:auto picks the module depth
    fallback: str = "ops"  # the coarse units of a graph without module paths ("ops": none, the fine phase alone)
    coarse_share: Annotated[float, Range("in [0, 1)")] = 0.25  # share of the budget the coarse phase may use
    coarse_give_up: Annotated[int, Range(">= 1")] = 3  # the coarse phase ends early after this many restarts in a row without a new best

    @classmethod
    def method_name(cls):
        return "multilevel"

    def checks(self):
        return super().checks() + [(grouping_ok(self.coarse), "coarse", GROUPING_HELP),
                                   (grouping_ok(self.fallback), "fallback", GROUPING_HELP)]


def coarse_problem(problem, cfg: MultilevelConfig):
    """(the coarse problem, its grouping spec) or (None, why there is none)."""
    from placer.grouping import make_grouping
    from placer.grouping.modules import no_module_paths, units_problem
    from placer.methods.grouped import apply_grouping

    spec = cfg.coarse
    if spec.startswith("module") and no_module_paths(problem.graph):
        spec = cfg.fallback
    if spec == "ops":
        return None, f"no coarse phase (the graph {no_module_paths(problem.graph)}; fallback=ops)"
    try:
        if spec.startswith("module"):
            got = apply_grouping("multilevel", problem, spec)  # no grouping field: module units as colocation groups
            return got.problem, got.grouping
        return units_problem(problem, make_grouping(problem, spec), coarse=spec), spec
    except InputError as e:  # a grouping this graph cannot have (too few ops for N groups, ...)
        return None, f"no coarse phase ({spec}: {e.problem})"


def multilevel_search(problem, seed: int, ev: Evaluator, cfg: MultilevelConfig):
    """The two phases (module docstring); returns (best placement, notes)."""
    import numpy as np

    notes, more = [], {}
    coarse, spec = (None, "no coarse phase (a published objective)") if ev.custom or cfg.coarse_share == 0 \
        else coarse_problem(problem, cfg)
    if coarse is None:
        notes.append(spec)
    else:
        before = ev.placements
        with ev.share(cfg.coarse_share):
            try:
                p, coarse_notes = search(coarse, seed, ev, cfg, anneal=False, give_up=cfg.coarse_give_up)
                more[f"coarse ({spec})"] = np.asarray(p, dtype=np.int64)
            except BudgetSpent:
                coarse_notes = ["the coarse phase's share ended before it had a placement"]
        col = np.asarray(coarse.graph.colocation)
        units = len(np.unique(col[col >= 0]))
        notes.append(f"coarse phase on {spec} ({units:,} colocation groups): {ev.placements - before:,} placements; "
                     + "; ".join(coarse_notes))
    if more and ev.out_of_budget():  # the coarse phase used the whole budget (a budget of one placement)
        return next(iter(more.values())), notes + ["no fine phase: the budget is spent"]
    p, fine_notes = search(problem, seed, ev, cfg, anneal=False, more_starts=more)
    return p, notes + ["fine phase: " + "; ".join(fine_notes)]


@register("multilevel", "local search on module units (or merged groups) first, then on ops from the best of that "
          "and the usual seeds", "search", MultilevelConfig,
          paper="the multilevel scheme of graph partitioning (Hendrickson & Leland 1995; Karypis & Kumar 1998) "
                "over the simulator (ours)", version=3)
def multilevel(problem, seed: int, ev: Evaluator, cfg: MultilevelConfig):
    p, notes = multilevel_search(problem, seed, ev, cfg)
    return ev.result("multilevel", p, notes=notes)
