"""Units that keep a backward op with the forward op it mirrors."""

from __future__ import annotations

import numpy as np

from placer.graph import BACKWARD
from placer.grouping import components


def mirror_units(problem) -> np.ndarray:
    """(n_ops,) unit of each op: colocation groups and backward ops with the forward op they mirror
    merged, as TensorFlow's ``colocate_gradients_with_ops`` places them (components numbered in the
    order of their first op)."""
    g = problem.graph
    pairs: list[tuple[int, int]] = []
    for members in g.colocation_groups():
        pairs += [(int(members[0]), int(m)) for m in members[1:]]
    bw = np.flatnonzero((g.role == BACKWARD) & (g.mirror >= 0))
    pairs += list(zip(bw.tolist(), g.mirror[bw].tolist()))
    return components(g.n_ops, pairs).astype(np.int64)
