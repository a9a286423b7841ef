"""The relaxed problem every bound of :mod:`placer.lowerbound` is a bound of (docs/bounds.md).

For any placement ``p`` the simulator's schedule (any communication model of docs/simulator.md)
satisfies, with ``dur[o, d]`` the op's cost on device ``d`` and ``occ[o, d] = dur[o, d] + op_gap``
when that cost is non-zero (``dur`` otherwise):

* an op runs on ``p[o]`` for ``dur[o, p[o]]``; a device's occupancies ``[start, start + occ)`` never
  overlap (one op at a time, the op gap idles the device);
* ``start[v] >= end[u] + delay(u -> v)`` for every edge, ``delay = 0`` on one device, else at least
  ``latency[a, b] + bytes(u, v) / bandwidth[a, b]``: every model's transfer carries at least that
  edge's bytes over that link (placeto: the largest remote edge, over the slowest remote link;
  p2p / link: the largest edge to that device; giph: the edge itself) and queueing only delays it;
* the step time is at least every op's ``start + occ`` (the simulator's makespan is its last event,
  the op gap's wake-up included).

:class:`Relaxation` holds that problem's arrays (links after the SimParams overrides) and the
device-aware heads and tails (:func:`heads_tails`), the earliest start of an op on each device
and the least time from its start there to the end of the step, each a longest path with every
other op free to take its best device for that path alone (a relaxation: an op may "be" on
different devices for different paths). :func:`heads_tails_fan` adds, at every fork and join,
that the inputs (outputs) sharing the op's device run there one at a time and the others pay a
transfer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numba import njit

from placer.lowerbound.fan import (ancestors_per_op, edge_delays, heads_tails_anc, local_or_remote, remote_finish,
                                   symmetric_rep)
from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below


@dataclass(frozen=True, eq=False)
class Relaxation:
    """The arrays of the relaxed problem of ``problem`` under ``params`` (see module docstring)."""

    problem: object
    dur: np.ndarray  # (n, D) us, inf where the op may not run
    occ: np.ndarray  # (n, D) us, dur + op gap after a non-zero cost
    op_gap_us: float
    bandwidth: np.ndarray  # (D, D) bytes/us after the SimParams overrides
    latency: np.ndarray  # (D, D) us
    comm_model: str = "placeto"
    bus_gap_us: float = 0.0
    resources: np.ndarray | None = None  # (D, D) the link model's resource of each link

    @classmethod
    def of(cls, problem, params, fit: bool = False) -> "Relaxation | None":
        """The relaxed problem; ``fit``: of the placements that fit in memory only, where an op may
        not run on a device that cannot hold its parameters, output buffer and workspace at once
        (None when some op fits on no device: no placement fits)."""
        from placer.sim.prepare import link_matrices

        dur = np.asarray(problem.compute_us, dtype=np.float64)
        if fit:
            dur = np.where(op_fits(problem), dur, np.inf)
            if not np.isfinite(dur).any(axis=1).all():
                return None
        occ = dur + np.where(dur > 0, params.op_gap_us, 0.0)
        bw, lat = link_matrices(problem, params)
        res = None
        if params.comm_model == "link":
            from placer.sim.prepare import link_resources

            res = link_resources(problem.cluster)
        return cls(problem, dur, occ, float(params.op_gap_us), bw, lat, params.comm_model, float(params.bus_gap_us), res)

    @property
    def n(self) -> int:
        return self.dur.shape[0]

    @property
    def D(self) -> int:
        return self.dur.shape[1]

    @cached_property
    def graph(self):
        return self.problem.graph

    @cached_property
    def fastest(self) -> np.ndarray:
        """(n,) each op's least cost over its devices."""
        return self.dur.min(axis=1)

    @cached_property
    def min_occ(self) -> np.ndarray:
        return self.occ.min(axis=1)

    def delay(self, a: int, b: int, nbytes: float) -> float:
        """The least time a tensor of ``nbytes`` takes from device ``a`` to ``b`` (0 on one device)."""
        return 0.0 if a == b else float(self.latency[a, b] + nbytes / self.bandwidth[a, b])

    @cached_property
    def link_us_per_byte(self) -> np.ndarray:
        """(D, D) 1 / bandwidth, 0 on the diagonal."""
        inv = 1.0 / self.bandwidth
        np.fill_diagonal(inv, 0.0)
        return inv

    @cached_property
    def link_latency(self) -> np.ndarray:
        lat = self.latency.copy()
        np.fill_diagonal(lat, 0.0)
        return lat

    @cached_property
    def est(self) -> np.ndarray:
        """(n, D) the earliest start of each op on each device (inf where it may not run)."""
        return self._ht[0]

    @cached_property
    def tail(self) -> np.ndarray:
        """(n, D) the least time from each op's start on each device to the end of the step."""
        return self._ht[1]

    @cached_property
    def _ht(self):
        g = self.graph
        eb = np.asarray(g.edge_bytes, dtype=np.float64)
        est, tail = heads_tails_fan(g.pred_ptr, g.pred_idx, g.pred_edge, g.succ_ptr, g.succ_idx, g.succ_edge,
                                    eb, self.dur, self.occ, self.link_latency, self.link_us_per_byte)
        if self.D < 2 or self.n == 0:
            return est, tail
        rep = symmetric_rep(self)
        return heads_tails_anc(g.pred_ptr, g.pred_idx, g.pred_edge, g.succ_ptr, g.succ_idx, g.succ_edge, eb,
                               edge_delays(self), self.dur, self.occ, self.link_latency, self.link_us_per_byte,
                               est, tail, ancestors_per_op(self.n, len(np.unique(rep))), rep)

    @cached_property
    def head(self) -> np.ndarray:
        """(n,) the earliest start of each op on any device."""
        return self.est.min(axis=1)

    @cached_property
    def tail_after_end(self) -> np.ndarray:
        """(n,) the least time from each op's end to the end of the step less the op gap (what
        follows an op's occupancy of its device), over its devices."""
        ok = np.isfinite(self.dur)
        after = np.where(ok, np.where(ok, self.tail, 0.0) - np.where(ok, self.dur, 0.0) - self.op_gap_us, np.inf)
        return np.maximum(after.min(axis=1), 0.0)

    @cached_property
    def path_us(self) -> float:
        """The device-aware critical path: max over ops of min over devices of head + tail."""
        return float((self.est + self.tail).min(axis=1).max()) if self.n else 0.0


def running_bytes(problem) -> np.ndarray:
    """(n, D) bytes resident on a device, beside its parameters, while the op runs there: its output
    buffer, its workspace and a buffer of at least each input edge's bytes (a local producer's
    output or a received copy, both held until the op ends). 0 where the op's cost there is 0: a
    zero-length interval holds nothing (docs/simulator.md, memory)."""
    from placer.sim.prepare import prepared

    g = problem.graph
    run = np.asarray(prepared(problem).out_bytes) + g.temp_bytes
    if g.n_edges:
        run = run + np.bincount(g.edge_dst, weights=g.edge_bytes, minlength=g.n_ops)
    return np.where(np.asarray(problem.compute_us) > 0, run[:, None], 0.0)


def op_fits(problem) -> np.ndarray:
    """(n, D) bool: the device's memory holds the op's parameters with what it needs while running
    (:func:`running_bytes`)."""
    own = problem.graph.param_bytes[:, None] + running_bytes(problem)
    return own <= np.asarray(problem.memory_bytes, dtype=np.float64)[None, :]


@njit(cache=True, nogil=True)
def heads_tails(pred_ptr, pred_idx, pred_edge, succ_ptr, succ_idx, succ_edge, ebytes, dur, occ, lat, upb):
    """(est, tail), each (n, D): est[v, d] = max over inputs u of min over d' of est[u, d'] +
    (occ[u, d] when d' = d, else dur[u, d'] + delay(d', d)); tail[v, d] = max(occ[v, d], max over
    outputs w of min over d' of (occ[v, d] when d' = d, else dur[v, d] + delay(d, d')) + tail[w, d']).
    Ops are in topological order."""
    n, D = dur.shape
    est = np.zeros((n, D))
    tail = np.zeros((n, D))
    for v in range(n):
        for d in range(D):
            if not np.isfinite(dur[v, d]):
                est[v, d] = np.inf
                continue
            best = 0.0
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                b = ebytes[pred_edge[j]]
                m = np.inf
                for a in range(D):
                    if a == d:
                        f = est[u, a] + occ[u, a]  # the device is busy until u's op gap is over
                    else:
                        f = est[u, a] + dur[u, a] + lat[a, d] + b * upb[a, d]
                    if f < m:
                        m = f
                if m > best:
                    best = m
            est[v, d] = best
    for v in range(n - 1, -1, -1):
        for d in range(D):
            if not np.isfinite(dur[v, d]):
                tail[v, d] = np.inf
                continue
            best = occ[v, d]
            for j in range(succ_ptr[v], succ_ptr[v + 1]):
                w = succ_idx[j]
                b = ebytes[succ_edge[j]]
                m = np.inf
                for a in range(D):
                    if a == d:
                        f = occ[v, d] + tail[w, a]
                    else:
                        f = dur[v, d] + lat[d, a] + b * upb[d, a] + tail[w, a]
                    if f < m:
                        m = f
                if m > best:
                    best = m
            tail[v, d] = best
    return est, tail


@njit(cache=True, nogil=True)
def longest_between(succ_ptr, succ_idx, fastest, n, src):
    """(n,) the longest path from the end of op ``src`` to the start of every later op, each op on
    the way at its fastest cost and every transfer free; -inf where no path leads."""
    out = np.full(n, -np.inf)
    for j in range(succ_ptr[src], succ_ptr[src + 1]):
        out[succ_idx[j]] = 0.0
    for v in range(src + 1, n):
        if out[v] == -np.inf:
            continue
        t = out[v] + fastest[v]
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[j]
            if t > out[w]:
                out[w] = t
    return out


MAX_FAN = 64  # heads and tails: the one-device reasoning over at most this many distinct inputs / outputs


@njit(cache=True, nogil=True)
def _distinct(ptr, idx, eidx, ebytes, v):
    """The distinct neighbours of ``v`` in a CSR list, each with its largest edge's bytes."""
    k = ptr[v + 1] - ptr[v]
    nb = np.empty(k, dtype=np.int64)
    by = np.empty(k)
    c = 0
    for j in range(ptr[v], ptr[v + 1]):
        u = idx[j]
        b = ebytes[eidx[j]]
        found = False
        for i in range(c):
            if nb[i] == u:
                if b > by[i]:
                    by[i] = b
                found = True
                break
        if not found:
            nb[c] = u
            by[c] = b
            c += 1
    return nb[:c], by[:c]


@njit(cache=True, nogil=True)
def _fan_pass(ptr, idx, eidx, ebytes, dur, occ, lat, upb, X, forward):
    """One direction of :func:`heads_tails_fan`, filling ``X``: forward, the heads over the direct
    inputs in topological order; backward, the tails over the direct outputs in reverse order, where
    a tail first spends the op's own occupancy ``own = occ[v, d]`` (0 for heads) and never falls
    below it (see :func:`placer.lowerbound.fan.remote_finish` for the remote times)."""
    n, D = dur.shape
    for step in range(n):
        v = step if forward else n - 1 - step
        nb, by = _distinct(ptr, idx, eidx, ebytes, v)
        k = len(nb)
        rel = np.empty(k)
        work = np.empty(k)
        rem = np.empty(k)
        for d in range(D):
            if not np.isfinite(dur[v, d]):
                X[v, d] = np.inf
                continue
            own = 0.0 if forward else occ[v, d]
            path = 0.0
            for i in range(k):
                u = nb[i]
                r = remote_finish(X, dur, lat, upb, u, v, d, by[i], 0.0, 0.0, forward)
                if np.isfinite(dur[u, d]):
                    rel[i] = X[u, d] if forward else X[u, d] - occ[u, d]  # tails: what follows u's occupancy
                    work[i] = occ[u, d]
                else:
                    rel[i] = np.inf
                    work[i] = 0.0
                m = min(own + rel[i] + work[i], r)
                if m > path:
                    path = m
                rem[i] = r - own  # local neighbours run after the op's own occupancy (tails)
            best = path
            if 0 < k <= MAX_FAN:
                best = max(best, own + local_or_remote(rel, work, rem, best - own))
            X[v, d] = max(own, best)


@njit(cache=True, nogil=True)
def heads_tails_fan(pred_ptr, pred_idx, pred_edge, succ_ptr, succ_idx, succ_edge, ebytes, dur, occ, lat, upb):
    """Heads and tails (as :func:`heads_tails`) that also count one device's serialisation: the inputs
    of ``v`` placed on ``v``'s device ``d`` run there one at a time before ``v`` starts (each after its
    own head on ``d``), the others arrive over a link; ``est[v, d]`` is the least, over which inputs
    are local, of the larger of the two. Tails the same way with the outputs run after ``v``'s
    occupancy. Ops with more than MAX_FAN distinct inputs (outputs) keep the path recursion."""
    n, D = dur.shape
    est = np.zeros((n, D))
    tail = np.zeros((n, D))
    _fan_pass(pred_ptr, pred_idx, pred_edge, ebytes, dur, occ, lat, upb, est, True)
    _fan_pass(succ_ptr, succ_idx, succ_edge, ebytes, dur, occ, lat, upb, tail, False)
    return est, tail
