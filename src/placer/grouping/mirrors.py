"""Units that keep a backward op with the forward op it mirrors, and those units cut in op order
into chunks of about equal work (the ``contiguous:N`` grouping, Mars's and GDP's nodes)."""

from __future__ import annotations

import numpy as np

from placer.graph import BACKWARD
from placer.grouping.grouping import _by_first, components
from placer.problem import Problem


def mirror_units(source) -> np.ndarray:
    """(n_ops,) unit of each op: colocation groups and backward ops with the forward op they mirror
    merged, as TensorFlow's ``colocate_gradients_with_ops`` places them (components numbered in the
    order of their first op). ``source``: a Problem or an OpGraph; of a Problem whose ops may run on
    only some devices, a backward op joins its forward op's unit only where all their ops share a
    device (:attr:`placer.problem.Problem.allowed`)."""
    g = source.graph if isinstance(source, Problem) else source
    pairs: list[tuple[int, int]] = []
    for members in g.colocation_groups():
        pairs += [(int(members[0]), int(m)) for m in members[1:]]
    bw = np.flatnonzero((g.role == BACKWARD) & (g.mirror >= 0))
    if isinstance(source, Problem) and source.restricted:
        return _runnable_units(source, components(g.n_ops, pairs), bw)
    pairs += list(zip(bw.tolist(), g.mirror[bw].tolist()))
    return components(g.n_ops, pairs).astype(np.int64)


def _runnable_units(problem, coloc: np.ndarray, bw: np.ndarray) -> np.ndarray:
    """The colocation components ``coloc`` joined along the mirror pairs of the backward ops ``bw``
    (in op order) where the joined unit still has a device all its ops can run on."""
    g = problem.graph
    root = np.arange(int(coloc.max()) + 1)
    ok = np.ones((len(root), problem.n_devices), dtype=bool)
    np.logical_and.at(ok, coloc, problem.allowed)

    def find(a):
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    for b in bw.tolist():
        x, y = find(coloc[b]), find(coloc[g.mirror[b]])
        if x != y and (ok[x] & ok[y]).any():
            root[y] = x
            ok[x] &= ok[y]
    return _by_first(np.array([find(c) for c in range(len(root))])[coloc]).astype(np.int64)


def mirror_chunks(source, work_us: np.ndarray, n_chunks: int) -> np.ndarray:
    """(n_ops,) chunk of each op: the :func:`mirror_units`, in the order of their first op, cut into
    ``n_chunks`` contiguous chunks of about equal ``work_us`` (per op), every chunk keeping at least
    one unit (all units, each its own chunk, when there are no more than ``n_chunks``). Chunks are
    numbered by their first op. Of a Problem whose ops may run on only some devices, a chunk is also
    cut where its ops would share no device (more than ``n_chunks`` chunks then)."""
    unit = mirror_units(source)
    c = int(unit.max()) + 1 if len(unit) else 0
    k = max(1, min(int(n_chunks), c))
    if k == c:
        return unit
    # k - 1 cuts where the cumulative work crosses j/k of the total, moved so that every chunk
    # keeps at least one unit
    cum = np.cumsum(np.bincount(unit, weights=work_us, minlength=c))
    cuts = np.searchsorted(cum, np.arange(1, k) * cum[-1] / k, side="right").astype(np.int64)
    for j in range(k - 1):  # cut j is the first unit of chunk j + 1
        lo = cuts[j - 1] + 1 if j else 1
        cuts[j] = min(max(cuts[j], lo), c - (k - 1 - j))
    chunk = np.zeros(c, dtype=np.int64)
    chunk[cuts] = 1
    if isinstance(source, Problem) and source.restricted:  # also cut where a chunk's ops would share no device
        ok = np.ones((c, source.n_devices), dtype=bool)
        np.logical_and.at(ok, unit, source.allowed)
        common = ok[0].copy()
        for u in range(1, c):
            common = ok[u].copy() if chunk[u] else common & ok[u]
            if not common.any():
                chunk[u], common = 1, ok[u].copy()
    return np.cumsum(chunk)[unit].astype(np.int64)
