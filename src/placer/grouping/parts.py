"""Placement units cut by a k-way partition, for methods that place units independently (Post).

:func:`placer.grouping.metis_groups` builds *groups* that a grouped graph can schedule: its METIS
parts are repaired into acyclic pieces and merged back, and on a training graph that repair leaves
few, large groups (the forward and backward ops of a part together; on NMT 8-layer ``metis:16``
leaves 2 units). A method that only draws one device per unit and simulates the full op graph does
not need acyclic units, so here the METIS parts are kept as they are:

* :func:`metis_parts`: pymetis k-way partition of the undirected graph of colocation families
  (vertex weight = compute at the op's fastest device, capped at 1/k of the total; edge weight =
  bytes; both scaled to 1..1000, as :func:`placer.grouping.metis_groups`), one unit per part;
* :func:`common_refinement`: the units two groupings agree on (ops share a unit when they share one
  in both), so that a coarse grouping gains the cut lines of another.

Both keep every colocation tie (each input does), so their units are valid placement units.
"""

from __future__ import annotations

import numpy as np

from placer.grouping import Grouping, colocate
from placer.problem import Problem


def _scaled(a: np.ndarray) -> list[int]:
    """Weights as integers 1..1000 (pymetis takes integers)."""
    if not len(a) or a.max() <= 0:
        return [1] * len(a)
    return (1 + np.round(999 * a / a.max())).astype(np.int64).tolist()


def metis_parts(problem: Problem, k: int, seed: int = 0) -> Grouping:
    """The units of a k-way METIS partition of the colocation families (see the module docstring);
    the families themselves when there are fewer than 2 k of them (as :func:`placer.grouping.metis_groups`:
    METIS then fails to bisect and says so on stdout)."""
    import pymetis

    fam = colocate(problem).units(problem.graph)
    if fam.n_groups < 2 * k or k <= 1:
        return fam if k > 1 else Grouping.partition(np.zeros(problem.n_ops, dtype=np.int64), "metis-parts").units(problem.graph)
    xadj, adj, w = fam.undirected_csr(problem.graph)
    work = fam.total(problem.fastest_us)
    work = np.minimum(work, work.sum() / k)  # no vertex heavier than one part's share (METIS's bisection)
    _, parts = pymetis.part_graph(k, pymetis.CSRAdjacency(xadj.tolist(), adj.tolist()), vweights=_scaled(work),
                                  eweights=_scaled(w) if len(w) else None, options=pymetis.Options(seed=int(seed)))
    return Grouping.partition(np.asarray(parts, dtype=np.int64)[fam.op_group], "metis-parts").units(problem.graph)


def common_refinement(a: Grouping, b: Grouping, graph) -> Grouping:
    """Ops share a unit when they share a group in ``a`` and in ``b`` (then colocation ties merged)."""
    if a.n_ops != b.n_ops:
        raise ValueError(f"groupings of {a.n_ops} and {b.n_ops} ops")
    labels = a.op_group.astype(np.int64) * (int(b.op_group.max()) + 1) + b.op_group
    return Grouping.partition(labels, f"{a.method}&{b.method}").units(graph)


def cut_along(units: Grouping, placement: np.ndarray, graph) -> Grouping:
    """``units`` cut where the op placement ``placement`` changes device, so that it is exactly a
    placement of the units (Post and Placeto start from a seeded placement this way)."""
    return common_refinement(units, Grouping.partition(placement, "start").units(graph), graph)
