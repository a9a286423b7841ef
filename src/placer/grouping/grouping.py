"""The one op -> group map, :class:`Grouping`, and :func:`components`, the one routine that joins
items into connected components. Every way of building a grouping is in :mod:`placer.grouping`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from placer.graph import OpGraph
from placer.problem import Problem


# ----------------------------------------------------------------------------- components
def components(n: int, pairs) -> np.ndarray:
    """(n,) label of each of n items, items joined by the (k, 2) ``pairs`` in one label: the
    connected components (scipy.sparse.csgraph), numbered in the order of their first item."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    adj = coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, lab = connected_components(adj, directed=False)
    return _by_first(lab)


def _by_first(labels: np.ndarray) -> np.ndarray:
    """Relabel 0..k-1 in the order of each label's first occurrence."""
    _, first, inv = np.unique(np.asarray(labels), return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inv.reshape(-1)]


# ----------------------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False)
class Grouping:
    """An op -> group map. Groups built by this module's acyclic builders are numbered in a
    topological order of the group graph; :meth:`partition` numbers them by their first op. Groups
    sharing a ``group_colocation`` value >= 0 must be placed on one device.

    Besides the map it offers what a method placing groups needs: the members of every group
    (:attr:`groups`), the group edges (:meth:`edges`, :meth:`undirected_csr`), per-group sums
    (:meth:`compute_us` per device, :meth:`total` of any per-op quantity), :meth:`expand` and
    :meth:`restrict`, and :meth:`units` (ties merged: one decision per unit)."""

    op_group: np.ndarray  # (n_ops,) int64
    n_groups: int
    group_colocation: np.ndarray  # (n_groups,) int64, -1 = free
    method: str = "identity"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_ops(self) -> int:
        return len(self.op_group)

    def sizes(self) -> np.ndarray:
        return np.bincount(self.op_group, minlength=self.n_groups)

    def members(self, g: int) -> np.ndarray:
        return self.groups[g]

    @cached_property
    def groups(self) -> list[np.ndarray]:
        """Per group, its ops in ascending order."""
        order = np.argsort(self.op_group, kind="stable")
        return np.split(order, np.cumsum(self.sizes())[:-1])

    @cached_property
    def first(self) -> np.ndarray:
        """(n_groups,) the first (lowest-numbered) op of every group."""
        first = np.full(self.n_groups, -1, dtype=np.int64)
        first[self.op_group[::-1]] = np.arange(self.n_ops)[::-1]
        return first

    def expand(self, group_placement) -> np.ndarray:
        """The op placement that puts every op on its group's device."""
        gp = np.asarray(getattr(group_placement, "devices", group_placement), dtype=np.int64)
        if gp.shape != (self.n_groups,):
            raise ValueError(f"group placement has {gp.size} entries for {self.n_groups} groups")
        return gp[self.op_group]

    def restrict(self, op_placement) -> np.ndarray:
        """A group placement from an op placement: each group takes its first op's device."""
        return np.asarray(op_placement, dtype=np.int64)[self.first]

    # -- per-group sums and edges
    def total(self, per_op) -> np.ndarray:
        """(n_groups,) the sum of a per-op quantity over each group's ops."""
        return np.bincount(self.op_group, weights=np.asarray(per_op, dtype=np.float64), minlength=self.n_groups)

    def compute_us(self, problem: Problem) -> np.ndarray:
        """(n_groups, devices) summed compute time of a group's ops per device of ``problem``; inf
        where one of them cannot run."""
        key = ("compute_us", id(problem))
        hit = self._cache.get(key)
        if hit is None or hit[0] is not problem:
            t = problem.compute_us
            hit = (problem, np.stack([self.total(t[:, d]) for d in range(t.shape[1])], axis=1)
                   if t.shape[1] else np.zeros((self.n_groups, 0)))
            self._cache[key] = hit
        return hit[1]

    def param_bytes(self, graph: OpGraph) -> np.ndarray:
        return self.total(graph.param_bytes)

    def edges(self, graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Edges between distinct groups (src group, dst group, summed edge bytes), sorted, merged."""
        G = self.n_groups
        a, b = self.op_group[graph.edge_src], self.op_group[graph.edge_dst]
        keep = a != b
        key = a[keep] * G + b[keep]
        uk, inv = np.unique(key, return_inverse=True)
        w = np.bincount(inv, weights=graph.edge_bytes[keep], minlength=len(uk))
        return uk // G, uk % G, w

    def undirected_csr(self, graph: OpGraph, edge_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Symmetric adjacency (xadj, adjncy, weights) of the group graph, both directions merged."""
        s, d, w = self.edges(graph)
        if edge_weight is not None:
            w = edge_weight
        G = self.n_groups
        a, b = np.concatenate([s, d]), np.concatenate([d, s])
        key = a * G + b
        uk, inv = np.unique(key, return_inverse=True)
        wsum = np.bincount(inv, weights=np.concatenate([w, w]), minlength=len(uk))
        a, b = uk // G, uk % G
        xadj = np.zeros(G + 1, dtype=np.int64)
        np.add.at(xadj, a + 1, 1)
        return np.cumsum(xadj), b.astype(np.int64), wsum

    # -- building
    @classmethod
    def partition(cls, labels, method: str = "labels", group_colocation=None, meta: dict | None = None) -> "Grouping":
        """The grouping whose groups are the distinct values of an op -> label map, numbered by
        their first op (no acyclicity is promised; :func:`from_labels` repairs a map into an
        acyclic grouping)."""
        og = _by_first(labels)
        G = int(og.max()) + 1 if len(og) else 0
        coloc = np.full(G, -1, dtype=np.int64) if group_colocation is None else np.asarray(group_colocation, np.int64)
        return cls(og.astype(np.int64), G, coloc, method, dict(meta or {}))

    @classmethod
    def identity(cls, graph: OpGraph) -> "Grouping":
        return cls(np.arange(graph.n_ops, dtype=np.int64), graph.n_ops, graph.colocation.copy(), "identity")

    def units(self, graph: OpGraph | None = None) -> "Grouping":
        """The placement units: groups tied by a colocation id merged into one group (and, given
        the graph, its colocation groups too), numbered by first op. Each unit is one decision;
        the unit graph may have cycles."""
        n, G = self.n_ops, self.n_groups
        pairs = [np.stack([np.arange(n), n + self.op_group], axis=1)]
        c = np.asarray(self.group_colocation, dtype=np.int64)
        tied = np.flatnonzero(c >= 0)
        pairs.append(np.stack([n + tied, n + G + c[tied]], axis=1))
        extra = 0 if not len(tied) else int(c.max()) + 1
        if graph is not None:
            oc = np.asarray(graph.colocation, dtype=np.int64)
            ops = np.flatnonzero(oc >= 0)
            pairs.append(np.stack([ops, n + G + extra + oc[ops]], axis=1))
            extra += 0 if not len(ops) else int(oc.max()) + 1
        lab = components(n + G + extra, np.concatenate(pairs))[:n]
        return Grouping.partition(lab, f"{self.method}/units", meta={**self.meta, "groups": G})

    def _renamed(self, method: str) -> "Grouping":
        return Grouping(self.op_group, self.n_groups, self.group_colocation, method, self.meta)

    def __post_init__(self):
        object.__setattr__(self, "_cache", {})
