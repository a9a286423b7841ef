"""Heads and tails over an op's nearby ancestors (descendants), not only its direct inputs
(outputs) (docs/bounds.md, "Ancestors on one device").

The one-device split (:func:`local_or_remote`, used by :func:`placer.lowerbound.relax.heads_tails_fan` too)
splits the direct inputs of ``v`` on ``d`` into
those on ``d`` (run there one at a time before ``v``) and the others (each pays a transfer). The
same holds for any set of ancestors of ``v``: an ancestor ``u`` on ``d`` occupies ``d`` after its
head ``est[u, d]`` and before ``v`` starts (``v`` starts after ``u`` ends, and the occupancies of
one device are disjoint); an ancestor ``u`` on another device ``a`` reaches ``v`` through every path
``u -> w1 -> ... -> v``, and each crosses a link at least once, so ``start[v] >= est[u, a] + dur[u,
a] + sum of dur[wi] (at their fastest) + the least delay of any of the path's edges`` (any one
path). :func:`heads_tails_anc` takes, for each op, up to ``K`` ancestors found breadth first
(the direct inputs first) and the one-device split of :func:`local_or_remote` over them; the
tails the same way over descendants. Heads and tails are one pass each of :func:`_anc_pass`, and
:func:`remote_finish` (a remote neighbour's time) serves relax.py's direct-neighbour passes too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below

K_MAX, K_MIN = 128, 16  # ancestors (descendants) per op
WORK = 1.5e8  # about n * D * K^2 steps of the one-device split (D: devices not interchangeable): K shrinks on large graphs


def ancestors_per_op(n: int, D: int) -> int:
    """K for a graph of ``n`` ops on ``D`` distinct devices: K_MAX, less where n * D * K^2 would pass WORK."""
    return int(min(K_MAX, max(K_MIN, (WORK / max(n * D, 1)) ** 0.5)))


def symmetric_rep(relax) -> np.ndarray:
    """(D,) for each device the first device interchangeable with it (same cost column, and the link
    matrices unchanged by swapping the two), else itself."""
    D = relax.D
    rep = np.arange(D, dtype=np.int64)
    bw, lat = relax.bandwidth, relax.latency
    for d in range(1, D):
        for e in range(d):
            if rep[e] != e or not np.array_equal(relax.occ[:, d], relax.occ[:, e]) \
                    or not np.array_equal(relax.dur[:, d], relax.dur[:, e]):
                continue
            perm = np.arange(D)
            perm[[d, e]] = perm[[e, d]]
            if np.array_equal(bw[np.ix_(perm, perm)], bw) and np.array_equal(lat[np.ix_(perm, perm)], lat):
                rep[d] = e
                break
    return rep


@njit(cache=True, nogil=True)
def local_or_remote(rel, work, remote, floor):
    """min over splits of the neighbours into remote ones (the largest ``remote`` time among them) and
    local ones (one device, one at a time: max over r of r + the work of the local ones with ``rel >=
    r``) of the larger of the two; the remote ones are the cheapest first (a larger set only costs more).
    ``floor``: a value the caller already has; once a split is at or below it the minimum is too, and
    that split's value is returned (the caller's max with ``floor`` is then the same)."""
    k = len(rel)
    order_r = np.argsort(remote)
    order_l = np.argsort(-rel)  # local ones by release, latest first
    is_remote = np.zeros(k, dtype=np.bool_)
    best = np.inf
    for step in range(k + 1):
        theta = 0.0
        if step > 0:
            u = order_r[step - 1]
            is_remote[u] = True
            theta = remote[u]
        if theta >= best:
            break
        c = 0.0
        acc = 0.0
        for i in range(k):
            u = order_l[i]
            if is_remote[u]:
                continue
            acc += work[u]
            if rel[u] + acc > c:
                c = rel[u] + acc
        v = max(theta, c)
        if v <= floor:
            return v
        if v < best:
            best = v
    return best


@njit(cache=True, nogil=True)
def _near(ptr, idx, eidx, ebytes, edelay, fast, v, K, seen, where, stamp):
    """Up to K distinct ops reachable from ``v`` through ``ptr``/``idx`` (preds or succs), breadth
    first: (ops, bytes of the direct edge or -1, path work between, least edge delay on the path)."""
    nb = np.empty(K, dtype=np.int64)
    direct = np.full(K, -1.0)
    between = np.zeros(K)
    mind = np.full(K, np.inf)
    c = 0
    for j in range(ptr[v], ptr[v + 1]):
        u = idx[j]
        b = ebytes[eidx[j]]
        if seen[u] == stamp:
            i = where[u]
            if b > direct[i]:
                direct[i] = b
                mind[i] = edelay[eidx[j]]
            continue
        if c == K:
            return nb[:0], direct[:0], between[:0], mind[:0]  # too many direct neighbours: none
        seen[u] = stamp
        where[u] = c
        nb[c] = u
        direct[c] = b
        mind[c] = edelay[eidx[j]]
        c += 1
    h = 0
    while h < c and c < K:
        w = nb[h]
        for j in range(ptr[w], ptr[w + 1]):
            u = idx[j]
            L = between[h] + fast[w]
            m = min(mind[h], edelay[eidx[j]])
            if seen[u] == stamp:
                i = where[u]
                if direct[i] < 0 and L + m > between[i] + mind[i]:
                    between[i] = L
                    mind[i] = m
                continue
            if c == K:
                break
            seen[u] = stamp
            where[u] = c
            nb[c] = u
            between[c] = L
            mind[c] = m
            c += 1
        h += 1
    return nb[:c], direct[:c], between[:c], mind[:c]


@njit(cache=True, nogil=True)
def remote_finish(X, dur, lat, upb, u, v, d, nbytes, between, mind, forward):
    """The least, over the devices ``a != d`` that neighbour ``u`` may run on, of what ``u`` there
    costs ``v`` on ``d``. ``forward`` (heads; ``u`` an ancestor, ``X`` the heads): ``u``'s output
    reaches ``v``'s device at ``X[u, a] + dur[u, a] + delay``. Backward (tails; ``u`` a descendant,
    ``X`` the tails): ``v``'s start on ``d`` is at least ``dur[v, d] + delay + X[u, a]`` before the
    end of the step (``v``'s own duration, not ``u``'s: the tail runs from ``v``'s start). ``delay``:
    a direct edge of ``nbytes >= 0`` over the link between ``a`` and ``d``; else (``nbytes < 0``) the
    path's work ``between`` and its least edge delay ``mind``."""
    r = np.inf
    for a in range(dur.shape[1]):
        if a == d or not np.isfinite(dur[u, a]):
            continue
        if forward:
            f = X[u, a] + dur[u, a]
            if nbytes >= 0:
                f += lat[a, d] + nbytes * upb[a, d]
            else:
                f += between + mind
        elif nbytes >= 0:
            f = dur[v, d] + lat[d, a] + nbytes * upb[d, a] + X[u, a]
        else:
            f = dur[v, d] + between + mind + X[u, a]
        if f < r:
            r = f
    return r


@njit(cache=True, nogil=True)
def _anc_pass(ptr, idx, eidx, ebytes, edelay, fast, dur, occ, lat, upb, X, K, rep, forward):
    """One direction of :func:`heads_tails_anc`, raising ``X`` in place: forward, the heads over
    ancestors in topological order; backward, the tails over descendants in reverse order. Measured
    from ``v``'s start, a tail first spends ``v``'s own occupancy ``own = occ[v, d]`` (0 for heads):
    the local neighbours run after it (release ``tail - occ``: what follows their occupancy) and the
    remote times are taken less it, then added back."""
    n, D = dur.shape
    seen = np.full(n, -1, dtype=np.int64)
    where = np.zeros(n, dtype=np.int64)  # an op's index in the current neighbourhood (valid where seen == v)
    for step in range(n):
        v = step if forward else n - 1 - step
        nb, direct, between, mind = _near(ptr, idx, eidx, ebytes, edelay, fast, v, K, seen, where, v)
        k = len(nb)
        if k == 0:
            continue
        rel = np.empty(k)
        work = np.empty(k)
        rem = np.empty(k)
        for d in range(D):
            if not np.isfinite(dur[v, d]):
                continue
            if rep[d] != d:
                X[v, d] = X[v, rep[d]]
                continue
            own = 0.0 if forward else occ[v, d]
            for i in range(k):
                u = nb[i]
                rem[i] = remote_finish(X, dur, lat, upb, u, v, d, direct[i], between[i], mind[i], forward) - own
                if np.isfinite(dur[u, d]):
                    rel[i] = X[u, d] if forward else X[u, d] - occ[u, d]
                    work[i] = occ[u, d]
                else:
                    rel[i] = np.inf
                    work[i] = 0.0
            val = own + local_or_remote(rel, work, rem, X[v, d] - own)
            if val > X[v, d]:
                X[v, d] = val


@njit(cache=True, nogil=True)
def heads_tails_anc(pred_ptr, pred_idx, pred_edge, succ_ptr, succ_idx, succ_edge, ebytes, edelay, dur, occ,
                    lat, upb, est0, tail0, K, rep):
    """(est, tail) at least ``est0``, ``tail0`` (heads and tails proven already), raised by the
    one-device split over up to ``K`` ancestors (descendants) of each op; recomputed in topological
    order so that each op's raised values feed the later ones. ``rep[d]``: the first device that
    ``d`` is interchangeable with (every cost and link unchanged by swapping them; ``d`` itself if
    none): its values are ``d``'s, exactly (the recursion is the same up to that swap)."""
    n, D = dur.shape
    fast = np.empty(n)
    for o in range(n):
        m = np.inf
        for d in range(D):
            if dur[o, d] < m:
                m = dur[o, d]
        fast[o] = m
    est = est0.copy()
    tail = tail0.copy()
    _anc_pass(pred_ptr, pred_idx, pred_edge, ebytes, edelay, fast, dur, occ, lat, upb, est, K, rep, True)
    _anc_pass(succ_ptr, succ_idx, succ_edge, ebytes, edelay, fast, dur, occ, lat, upb, tail, K, rep, False)
    return est, tail


def edge_delays(relax) -> np.ndarray:
    """(m,) the least time any edge's bytes take between two different devices (0 with one device)."""
    g = relax.graph
    nb = np.asarray(g.edge_bytes, dtype=np.float64)
    out = np.full(len(nb), np.inf)
    for a in range(relax.D):
        for b in range(relax.D):
            if a != b:
                out = np.minimum(out, relax.latency[a, b] + nb / relax.bandwidth[a, b])
    return np.where(np.isfinite(out), out, 0.0)
