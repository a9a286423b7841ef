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
* the *anchors*, units holding a forward op, are cut in their order into ``k`` contiguous pieces,
  piece j on device j. Each anchor weighs its compute at its fastest runnable time, backward ops
  included, and sits at the middle of its span of the cumulative weight; a cut is a point of that
  axis. The start is equal compute (cuts at j/k);
* every other unit (backward ops with no mirror, optimizer updates) takes the device it exchanges
  the most bytes with among its already placed neighbours, sweep after sweep until all are placed
  (a unit with no placed neighbour after that goes to piece 0).

Equal compute is not the best cut of a recurrent network: its layers run as a wavefront across
devices only when the cut falls between layers, and a large output layer (a softmax over 32k words)
draws the cut into the middle of the LSTM stack (RNNLM on 2 K80s: 631 ms at equal compute, against
the expert's 585 ms, which puts two of the four layers on each GPU). :func:`tune_split` therefore
moves the cuts by a pattern search on simulated step time (GPipe and PipeDream choose their stage
boundaries with a cost model; here the simulator is the model): each cut in turn steps by half a
piece's share of the compute either way, snapped to a *scope boundary* (two consecutive anchors
whose first forward ops sit in different modules, the op name up to its last ``/``; every position
when the names carry no scopes), and the step halves when no move helps, down to 1/16 of a share
or the given number of simulations.

Measured on the zoo, K80 presets, best over k (``placer optimize -m layer-split``, default
``search``; ms, equal compute in brackets): NMT 8-layer 721 (739; expert 808, single GPU 1,920, the
topological cut 894; 162 simulations), NMT 4-layer 688 (712; expert 801), NMT 2-layer 1,641 (1,673;
expert 1,714), GNMT 2,015 (2,162; expert 1,467, single GPU 3,189), RNNLM 575 (631; expert 585, single
GPU 747), Inception-V3 b32 on 2 GPUs 534 (539; expert 554), BERT-base on 4 GPUs 942 (1,010; single
GPU 1,017), ResNet-50 on 2 GPUs 415 (single GPU 419). Under 3 s per graph. It is also the start the Hierarchical Planner's Placer is pulled toward
(:mod:`placer.methods.learned.hierarchical`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from placer.graph import FORWARD
from placer.grouping.mirrors import mirror_units
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.devices import allowed_placement
from placer.sim import memory_first

PAPER = "Huang et al., GPipe, NeurIPS 2019, section 2.2 (layers cut into cells of equal compute)"


@dataclass(frozen=True)
class LayerSplitConfig(MethodConfig):
    """The layer-wise split's one knob (ours: GPipe cuts at equal compute, which is ``search=0``)."""

    search: Annotated[int, Range(">= 0")] = 24  # simulations per piece count spent moving the cuts (pattern search, see module docstring)


class Axis:
    """The anchors of ``unit_of`` on the cumulative-compute axis: ``mid`` (U,) each anchor's middle
    in [0, 1] (NaN for the other units) and ``bounds``, the sorted points where a cut may fall."""

    def __init__(self, problem, unit_of: np.ndarray):
        g = problem.graph
        self.unit_of = unit_of = np.asarray(unit_of, dtype=np.int64)
        self.U = U = int(unit_of.max()) + 1 if len(unit_of) else 0
        fwd = g.role == FORWARD
        anchor = np.bincount(unit_of, weights=fwd.astype(np.float64), minlength=U) > 0
        if not anchor.any():  # no roles (an inference graph): every unit is an anchor
            anchor[:] = True
            fwd = np.ones(len(unit_of), dtype=bool)
        self.anchor = anchor
        w = np.where(anchor, np.bincount(unit_of, weights=problem.fastest_us, minlength=U), 0.0)
        total = w.sum()
        mid = (np.cumsum(w) - w / 2) / total if total > 0 else np.cumsum(anchor) / max(int(anchor.sum()), 1)
        self.mid = np.where(anchor, mid, np.nan)
        am = self.mid[anchor]
        # scope of each anchor: the module of its first forward op
        ops = np.flatnonzero(fwd)
        first = np.full(U, -1, dtype=np.int64)
        first[unit_of[ops[::-1]]] = ops[::-1]
        names = [g.op_names[i] for i in first[anchor]]
        scope = [n.rsplit("/", 1)[0] for n in names]
        between = (am[:-1] + am[1:]) / 2
        change = np.array([a != b for a, b in zip(scope[:-1], scope[1:])], dtype=bool)
        self.bounds = np.unique(between[change]) if change.sum() >= 1 else np.unique(between)
        if len(self.bounds) == 0:
            self.bounds = np.unique(between)

    def snap(self, c: float) -> float:
        """The boundary nearest to ``c`` (``c`` itself when there is none)."""
        if len(self.bounds) == 0:
            return float(c)
        return float(self.bounds[int(np.argmin(np.abs(self.bounds - c)))])

    def step(self, c: float, direction: int) -> float | None:
        """The next boundary strictly beyond ``c`` in ``direction`` (+1 / -1), or None."""
        if direction > 0:
            i = int(np.searchsorted(self.bounds, c, side="right"))
            return float(self.bounds[i]) if i < len(self.bounds) else None
        i = int(np.searchsorted(self.bounds, c, side="left")) - 1
        return float(self.bounds[i]) if i >= 0 else None


def layer_split(problem, unit_of: np.ndarray, k: int, cuts=None, axis: Axis | None = None) -> np.ndarray:
    """(U,) piece in [0, k) of each unit of ``unit_of`` (op -> unit, units numbered by first op, each
    inside one :func:`~placer.grouping.mirrors.mirror_units` unit or a union of them): anchors cut at
    ``cuts`` (k - 1 increasing points of the compute axis; default j/k, equal compute), the rest
    following the bytes, as the module docstring says."""
    g = problem.graph
    axis = axis or Axis(problem, unit_of)
    unit_of, U = axis.unit_of, axis.U
    piece = np.full(U, -1, dtype=np.int64)
    if U == 0:
        return piece
    cuts = np.arange(1, k) / k if cuts is None else np.sort(np.asarray(cuts, dtype=np.float64))
    piece[axis.anchor] = np.minimum(np.searchsorted(cuts, axis.mid[axis.anchor], side="right"), k - 1)
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


def unit_devices(problem, unit_of: np.ndarray, piece: np.ndarray, devices) -> np.ndarray:
    """(n_ops,) device per op: piece j on ``devices[j]``; a unit that piece's device cannot run goes
    to the fastest device that runs all its ops. A unit whose ops share no device (a forward op and
    its backward op restricted to different devices) is split: each op (with its colocation group)
    stays on the piece's device where it can run there, else goes to its fastest device
    (:func:`placer.methods.devices.allowed_placement`)."""
    U = len(piece)
    comp = problem.compute_us
    runnable = problem.allowed
    ok = np.ones((U, problem.n_devices), dtype=bool)
    np.logical_and.at(ok, unit_of, runnable)
    dev = np.asarray(devices, dtype=np.int64)[piece]
    bad = ~ok[np.arange(U), dev]
    shared = ok.any(axis=1)
    fix = bad & shared
    if fix.any():
        cost = np.zeros((U, problem.n_devices))
        np.add.at(cost, unit_of, np.where(runnable, comp, 0.0))
        dev[fix] = np.argmin(np.where(ok[fix], cost[fix], np.inf), axis=1)
    if shared.all():
        return dev[unit_of]
    return allowed_placement(problem, dev[unit_of])


def split_placement(problem, devices: list[int], unit_of: np.ndarray | None = None, cuts=None) -> np.ndarray:
    """(n_ops,) device per op: the split (at ``cuts``, default equal compute) over ``devices`` in order."""
    unit_of = mirror_units(problem) if unit_of is None else np.asarray(unit_of, dtype=np.int64)
    return unit_devices(problem, unit_of, layer_split(problem, unit_of, len(devices), cuts), devices)


def tune_split(problem, unit_of: np.ndarray, devices, ev: Evaluator, search: int) -> tuple[np.ndarray, float, bool, int]:
    """Pattern search over the cuts of the split over ``devices`` (module docstring), at most
    ``1 + search`` simulations through ``ev`` (each one a placement of its budget; fewer when the
    budget runs out). Splits compare in :func:`placer.sim.memory_first` order (one that fits before
    one that overflows a device, then the step time). Returns (piece per unit (U,), its objective in
    us (inf when none was simulated), whether it fits in memory, simulations)."""
    unit_of = np.asarray(unit_of, dtype=np.int64)
    k = len(devices)
    axis = Axis(problem, unit_of)
    seen: dict[tuple, tuple[bool, float]] = {}
    unseen = memory_first(np.inf, False)

    def cost(cuts) -> tuple[bool, float]:
        key = tuple(np.round(cuts, 12))
        if key not in seen:
            if ev.out_of_budget() or len(seen) >= 1 + search:
                return unseen
            piece = layer_split(problem, unit_of, k, cuts, axis)
            r = ev.simulate(unit_devices(problem, unit_of, piece, devices))
            seen[key] = memory_first(r.objective_us, not r.oom)
        return seen[key]

    best = np.arange(1, k) / k
    best_t = cost(best)
    if k > 1 and search > 0 and best_t != unseen:
        snapped = np.array([axis.snap(c) for c in best])
        if cost(snapped) < best_t:
            best, best_t = snapped, cost(snapped)
        step = 0.5 / k
        while step >= 1 / (16 * k) and len(seen) < 1 + search and not ev.out_of_budget():
            moved = False
            for j in range(k - 1):
                for direction in (-1, 1):
                    lo = best[j - 1] if j > 0 else 0.0
                    hi = best[j + 1] if j < k - 2 else 1.0
                    c = axis.snap(min(max(best[j] + direction * step, lo), hi))
                    if c == best[j]:
                        c = axis.step(best[j], direction)
                    if c is None or not lo <= c <= hi:
                        continue
                    trial = best.copy()
                    trial[j] = c
                    t = cost(trial)
                    if t < best_t:
                        best, best_t, moved = trial, t, True
                        break
            if not moved:
                step /= 2
    return layer_split(problem, unit_of, k, best, axis), best_t[1], not best_t[0], len(seen)


def gpus_by_speed(problem) -> list[int]:
    """The GPUs (every device when there are none), fastest first for the whole graph."""
    gpus = problem.cluster.gpus() or list(range(problem.n_devices))
    comp = problem.compute_us
    total = [float(np.where(np.isfinite(comp[:, d]), comp[:, d], problem.fastest_us).sum()) for d in gpus]
    return [gpus[i] for i in np.argsort(total, kind="stable")]


def split_start(problem, ev: Evaluator, search: int) -> tuple[np.ndarray, float, bool] | None:
    """The best layer-wise split over 2..G pieces (G GPUs, fastest first), ``search`` simulations in
    all through ``ev`` shared evenly between the piece counts, best in :func:`placer.sim.memory_first`
    order: (device per op, its objective, whether it fits in memory), or None with fewer than 2 GPUs.
    The start Post, Mars and GDP search before they learn (see their docstrings)."""
    gpus = gpus_by_speed(problem)
    if len(gpus) < 2:
        return None
    units = mirror_units(problem)
    per_k = max(1, search // (len(gpus) - 1)) - 1
    best, best_key = None, memory_first(np.inf, False)
    for k in range(2, len(gpus) + 1):
        if ev.out_of_budget():
            break
        piece, t, fits, _ = tune_split(problem, units, gpus[:k], ev, per_k)
        if memory_first(t, fits) < best_key:
            best, best_key = unit_devices(problem, units, piece, gpus[:k]), memory_first(t, fits)
    return None if best is None else (best, best_key[1], not best_key[0])


def fastest_device(problem) -> int | None:
    """The device that runs every op in the least total compute time (None if none runs them all):
    where the whole graph on one device is fastest."""
    t = np.asarray(problem.compute_us, dtype=np.float64)
    tot = np.where(np.isfinite(t).all(axis=0), t.sum(axis=0, where=np.isfinite(t)), np.inf)
    return int(np.argmin(tot)) if np.isfinite(tot).any() else None


@register("layer-split", "the layer-wise split: forward units cut into k pieces (equal compute, then the cuts moved "
          "by a pattern search on step time), backward ops with their forward op, best over k = 1..#GPUs",
          "partitioning", LayerSplitConfig, paper=PAPER, version=1)
def layer_split_method(problem, seed: int, ev: Evaluator, cfg: LayerSplitConfig):
    gpus = gpus_by_speed(problem)
    units = mirror_units(problem)
    tried = []
    for k in range(1, len(gpus) + 1):
        if ev.out_of_budget():
            break
        _, t, fits, n = tune_split(problem, units, gpus[:k], ev, cfg.search if k > 1 else 0)
        tried.append(f"{k}: {t / 1e3:,.1f} ms{'' if fits else ', out of memory'} ({n} sims)")
    return ev.result("layer-split", notes=["best per piece count " + "; ".join(tried)])
