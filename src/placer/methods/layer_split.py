"""The layer-wise split a person draws for a deep network, as a placement and as a start for the
learned placers.

GPipe (Huang et al., NeurIPS 2019, section 2.2) partitions a network's sequence of layers into K
cells of about equal compute and puts cell k on accelerator k; the human experts of the Hierarchical
Planner and ColocRL (an LSTM layer per GPU) place the same way. On an op graph of a training step,
"layers" are not marked, and a cut of the topological order is a poor stand-in: the backward pass
comes after the whole forward pass in that order, so its ops would land on the last devices, far
from the activations they read (NMT 8-layer on 8 K80s: 894 ms, against the expert's 808 ms). Here:

* the units are the colocation groups with every backward op merged into the forward op it mirrors
  (:func:`placer.grouping.mirrors.mirror_units`), numbered by first op;
* the *anchors*, units holding a forward op, are cut in their order into ``k`` contiguous pieces of
  about equal compute (each unit at its fastest runnable time, backward ops included), piece j on
  device j;
* every other unit (backward ops with no mirror, optimizer updates) takes the device it exchanges
  the most bytes with among its already placed neighbours, sweep after sweep until all are placed
  (a unit with no placed neighbour after that goes to piece 0).

Measured on the zoo, K80 presets, best over k (``placer optimize -m layer-split``; ms): NMT 8-layer
739 (expert 808, single GPU 1,920, the topological cut 894), NMT 4-layer 712 (801), NMT 2-layer
1,673 (1,714), GNMT 2,162 (expert 1,467, single GPU 3,189), RNNLM 632 (585, 747), Inception-V3 b32
on 2 GPUs 539 (554), BERT-base on 4 GPUs 1,010 (single GPU 1,017), ResNet-50: single GPU (419).
It is also the start the Hierarchical Planner's Placer is pulled toward (:mod:`placer.methods.hierarchical`).
"""

from __future__ import annotations

import numpy as np

from placer.graph import FORWARD
from placer.grouping.mirrors import mirror_units
from placer.methods.base import Budget, Evaluator, NoConfig, NotApplicable, register


def layer_split(problem, unit_of: np.ndarray, k: int) -> np.ndarray:
    """(U,) piece in [0, k) of each unit of ``unit_of`` (op -> unit, units numbered by first op,
    each inside one :func:`~placer.grouping.mirrors.mirror_units` unit or a union of them): the split of the module
    docstring."""
    g = problem.graph
    unit_of = np.asarray(unit_of, dtype=np.int64)
    U = int(unit_of.max()) + 1 if len(unit_of) else 0
    piece = np.full(U, -1, dtype=np.int64)
    if U == 0:
        return piece
    anchor = np.bincount(unit_of, weights=(g.role == FORWARD).astype(np.float64), minlength=U) > 0
    if not anchor.any():  # no roles (an inference graph): every unit is an anchor
        anchor[:] = True
    w = np.bincount(unit_of, weights=problem.fastest_us, minlength=U)
    wa = np.where(anchor, w, 0.0)
    total = wa.sum()
    mid = (np.cumsum(wa) - wa / 2) / (total if total > 0 else 1.0)
    if total <= 0:
        mid = np.cumsum(anchor) / max(int(anchor.sum()), 1)
    piece[anchor] = np.minimum((k * mid[anchor]).astype(np.int64), k - 1)
    # the rest follow the bytes: W[u, v] = bytes on edges between units u and v
    s, d = unit_of[g.edge_src], unit_of[g.edge_dst]
    keep = s != d
    import scipy.sparse as sp

    b = np.asarray(g.edge_bytes, dtype=np.float64)[keep] + 1.0  # + 1: a zero-byte edge still ties
    W = sp.csr_matrix((np.concatenate([b, b]), (np.concatenate([s[keep], d[keep]]), np.concatenate([d[keep], s[keep]]))),
                      shape=(U, U))
    while (piece < 0).any():
        todo = np.flatnonzero(piece < 0)
        placed = piece >= 0
        onehot = sp.csr_matrix((np.ones(int(placed.sum())), (np.flatnonzero(placed), piece[placed])), shape=(U, k))
        score = (W[todo] @ onehot).toarray()  # (T, k) bytes to each piece
        has = score.max(axis=1) > 0
        if not has.any():
            piece[todo] = 0
            break
        piece[todo[has]] = np.argmax(score[has], axis=1)
    return piece


def split_placement(problem, devices: list[int], unit_of: np.ndarray | None = None) -> np.ndarray:
    """(n_ops,) device per op: the split over ``devices`` in order (piece j on ``devices[j]``); a unit
    that piece's device cannot run goes to the fastest device that runs all its ops."""
    unit_of = mirror_units(problem) if unit_of is None else unit_of
    piece = layer_split(problem, unit_of, len(devices))
    U = len(piece)
    comp = problem.compute_us
    runnable = np.isfinite(comp)
    ok = np.ones((U, problem.n_devices), dtype=bool)
    np.logical_and.at(ok, unit_of, runnable)
    cost = np.zeros((U, problem.n_devices))
    np.add.at(cost, unit_of, np.where(runnable, comp, 0.0))
    dev = np.asarray(devices, dtype=np.int64)[piece]
    bad = ~ok[np.arange(U), dev]
    if bad.any():
        if not ok[bad].any(axis=1).all():
            raise NotApplicable("layer-split", "a colocation group has ops that share no device")
        dev[bad] = np.argmin(np.where(ok[bad], cost[bad], np.inf), axis=1)
    return dev[unit_of]


def gpus_by_speed(problem) -> list[int]:
    """The GPUs (every device when there are none), fastest first for the whole graph."""
    gpus = problem.cluster.gpus() or list(range(problem.n_devices))
    comp = problem.compute_us
    total = [float(np.where(np.isfinite(comp[:, d]), comp[:, d], problem.fastest_us).sum()) for d in gpus]
    return [gpus[i] for i in np.argsort(total, kind="stable")]


@register("layer-split", "the layer-wise split: forward units cut into k pieces of equal compute, backward ops with "
          "their forward op, best over k = 1..#GPUs", "partitioning",
          paper="Huang et al., GPipe, NeurIPS 2019, section 2.2 (layers cut into cells of equal compute)")
def layer_split_method(problem, budget: Budget, seed: int, ev: Evaluator, cfg: NoConfig):
    gpus = gpus_by_speed(problem)
    units = mirror_units(problem)
    tried = []
    for k in range(1, len(gpus) + 1):
        if ev.out_of_budget():
            break
        r = ev.simulate(split_placement(problem, gpus[:k], units))
        tried.append(f"{k}: {r.objective_us / 1e3:,.1f} ms{' OOM' if r.oom else ''}")
    return ev.result("layer-split", notes=["pieces " + "; ".join(tried)])
