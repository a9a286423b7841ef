"""Communication forced by memory (docs/bounds.md, "memory paths"): on a path of the graph, the ops
that share a device in a row (a run) must hold their parameters together, with each one's output
buffer and workspace while it runs; when no device holds the whole path, the path is cut into runs
on different devices, and each cut costs a transfer. For a fixed path the cheapest cutting is a
dynamic program over (op, device of its run); every fitting placement's step time is at least its
value (runs that share a device, and the other ops placed there, only take more memory).

Valid only for placements that fit in memory. Which path: a few found by longest-path search
(the fastest costs; the parameter bytes; a mix), each scored by the dynamic program.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.lowerbound.relax import running_bytes
from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()


def path_bound(relax, paths: int = 3) -> float:
    """The best memory-path bound over a few paths (0 when memory never cuts a path)."""
    g = relax.graph
    mem = np.asarray(relax.problem.memory_bytes, dtype=np.float64)
    need = running_bytes(relax.problem)
    params = np.asarray(g.param_bytes, dtype=np.float64)
    fast = relax.fastest
    total_p = float(params.sum())
    best = 0.0
    weights = [fast, params + 1e-9 * fast]
    if total_p > 0:
        weights.append(fast / max(float(fast.sum()), 1e-9) + params / total_p)
    for w in weights[:paths]:
        path = longest_path(g.pred_ptr, g.pred_idx, np.asarray(w, dtype=np.float64))
        whole = params[path].sum() + need[path].max(axis=0, initial=0.0)
        if ((whole <= mem) & np.isfinite(relax.dur[path]).all(axis=0)).any():
            continue  # one device holds the whole path: memory cuts nothing (the critical path covers it)
        ebytes = _path_edge_bytes(g, path)
        v = cut_path(path, ebytes, relax.dur, relax.occ, params, need, mem, relax.link_latency, relax.link_us_per_byte)
        best = max(best, v)
    return best


def _path_edge_bytes(g, path: np.ndarray) -> np.ndarray:
    """(len(path) - 1,) bytes of each edge along the path."""
    out = np.zeros(max(len(path) - 1, 0))
    for i in range(len(path) - 1):
        u, v = int(path[i]), int(path[i + 1])
        lo, hi = g.succ_ptr[u], g.succ_ptr[u + 1]
        k = lo + int(np.searchsorted(g.succ_idx[lo:hi], v))
        out[i] = float(g.edge_bytes[g.succ_edge[k]])
    return out


@njit(cache=True, nogil=True)
def longest_path(pred_ptr, pred_idx, w):
    """The ops of a path with the largest sum of ``w``, first to last (ops in topological order)."""
    n = len(w)
    best = np.zeros(n)
    back = np.full(n, -1, dtype=np.int64)
    for v in range(n):
        b = 0.0
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            if back[v] < 0 or best[u] > b:
                b = best[u]
                back[v] = u
        best[v] = b + w[v]
    v = int(np.argmax(best)) if n else -1
    out = []
    while v >= 0:
        out.append(v)
        v = back[v]
    res = np.empty(len(out), dtype=np.int64)
    for i in range(len(out)):
        res[i] = out[len(out) - 1 - i]
    return res


@njit(cache=True, nogil=True)
def cut_path(path, ebytes, dur, occ, params, need, mem, lat, upb):
    """The least time the path takes in a fitting placement: runs of consecutive ops on one device
    (params of the run + each op's output and workspace within the device's memory; consecutive
    ops of a run separated by op gaps), a transfer of the edge's bytes between runs on different
    devices, the last op's op gap at the end. inf when no cutting fits."""
    k = len(path)
    D = dur.shape[1]
    INF = np.inf
    cost = np.full((k, D), INF)  # cost[i, d]: path[0..i] done, path[i] ends on d (its end time)
    for i in range(k):
        for d in range(D):
            o = path[i]
            if not np.isfinite(dur[o, d]):
                continue
            p = 0.0
            nd = 0.0
            inner = 0.0  # occupancies of path[j..i-1] on d
            best = INF
            for j in range(i, -1, -1):
                oj = path[j]
                if not np.isfinite(dur[oj, d]):
                    break
                p += params[oj]
                if need[oj, d] > nd:
                    nd = need[oj, d]
                if p + nd > mem[d]:
                    break
                if j < i:
                    inner += occ[oj, d]
                if j == 0:
                    before = 0.0
                else:
                    before = INF
                    for a in range(D):
                        if a != d and cost[j - 1, a] < INF:
                            t = cost[j - 1, a] + lat[a, d] + ebytes[j - 1] * upb[a, d]
                            if t < before:
                                before = t
                if before < INF and before + inner < best:
                    best = before + inner
            if best < INF:
                cost[i, d] = best + dur[o, d]
    out = INF
    for d in range(D):
        if cost[k - 1, d] < INF:
            t = cost[k - 1, d] + occ[path[k - 1], d] - dur[path[k - 1], d]
            if t < out:
                out = t
    return out


# ---------------------------------------------------------------------------- series
def series_points(g) -> np.ndarray:
    """Ops every source-to-sink path passes through, in order: no edge jumps over the op, no op
    before it is a sink and no op after it is a source (then every earlier op is its ancestor and
    every later op its descendant)."""
    n = g.n_ops
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    src, dst = g.edge_src, g.edge_dst
    cover = np.zeros(n + 1, dtype=np.int64)  # edges (u, w) with u < v < w
    long = dst > src + 1
    np.add.at(cover, src[long] + 1, 1)
    np.add.at(cover, dst[long], -1)
    jumped = np.cumsum(cover)[:n] > 0
    sink = np.diff(g.succ_ptr) == 0
    source = np.diff(g.pred_ptr) == 0
    sink_before = np.concatenate([[False], np.cumsum(sink)[:-1] > 0])
    source_after = np.concatenate([np.cumsum(source[::-1])[::-1][1:] > 0, [False]])
    return np.flatnonzero(~jumped & ~sink_before & ~source_after).astype(np.int64)


def series_bound(relax) -> float:
    """The series dynamic program (docs/bounds.md, "memory series"): the graph is a sequence of
    elements, each the ops after one series point up to the next; an element either sits whole on
    one device, in a run of such elements whose parameters fit that device, or is split (its own
    critical path); a run after a whole element on another device waits for a transfer out of
    that element's series point. 0 when the graph has no series points."""
    g = relax.graph
    pts = series_points(g)
    if len(pts) == 0:
        return 0.0
    n = g.n_ops
    ends = pts if pts[-1] == n - 1 else np.concatenate([pts, [n - 1]])
    need = running_bytes(relax.problem)
    minb = np.full(n, np.inf)
    if g.n_edges:
        np.minimum.at(minb, g.edge_src, np.asarray(g.edge_bytes, dtype=np.float64))
    off = ~np.eye(relax.D, dtype=bool)
    eb = np.asarray(g.edge_bytes, dtype=np.float64)
    edelay = (relax.link_latency[off][None, :] + eb[:, None] * relax.link_us_per_byte[off][None, :]).min(axis=1) \
        if relax.D > 1 else np.full(g.n_edges, np.inf)
    return float(series_dp(ends, bool(pts[-1] == n - 1), g.pred_ptr, g.pred_idx, g.pred_edge, edelay, relax.dur,
                           relax.occ, relax.fastest,
                           np.asarray(g.param_bytes, dtype=np.float64), need,
                           np.asarray(relax.problem.memory_bytes, dtype=np.float64), minb,
                           relax.link_latency, relax.link_us_per_byte))


@njit(cache=True, nogil=True)
def series_dp(ends, last_is_series, pred_ptr, pred_idx, pred_edge, edelay, dur, occ, fastest, params, need, mem, minb,
              lat, upb):
    """Element i is the ops (ends[i-1], ends[i]]; see :func:`series_bound`. A split element has an
    op off its last op's device: some path from that op to the last crosses a link, so it takes at
    least min over its ops o of (longest path through o) + (cheapest transfer on a path from o to
    the last op)."""
    K = len(ends)
    n, D = dur.shape
    INF = np.inf
    # per element: whole-on-d time (every op's occupancy, the last op's cost), params, need, critical path
    whole = np.zeros((K, D))
    gapless = np.zeros((K, D))  # occupancy of the last op less its cost (its op gap)
    par = np.zeros(K)
    nd = np.zeros((K, D))
    cp = np.zeros(K)
    lowsplit = np.zeros(K)  # a split element: the longest path through an op off its last op's device, crossing
    dist = np.zeros(n)
    lo = 0
    for i in range(K):
        hi = ends[i]
        best = 0.0
        for o in range(lo, hi + 1):
            par[i] += params[o]
            for d in range(D):
                whole[i, d] += occ[o, d]
                if need[o, d] > nd[i, d]:
                    nd[i, d] = need[o, d]
            s = 0.0
            for j in range(pred_ptr[o], pred_ptr[o + 1]):
                u = pred_idx[j]
                if u >= lo and dist[u] > s:
                    s = dist[u]
            dist[o] = s + fastest[o]
            if dist[o] > best:
                best = dist[o]
        cp[i] = best
        # split: the longest path through o within the element plus the cheapest crossing after o
        if hi > lo and (i < K - 1 or last_is_series):  # every op of the element reaches its last op
            after = np.zeros(hi - lo + 1)  # longest path from o's end to the element's last op's end
            cross = np.full(hi - lo + 1, np.inf)  # cheapest transfer on a path from o to the last op
            for o in range(hi, lo - 1, -1):
                k = o - lo
                for j in range(pred_ptr[o], pred_ptr[o + 1]):
                    u = pred_idx[j]
                    if u >= lo:
                        a = after[k] + fastest[o]
                        if a > after[u - lo]:
                            after[u - lo] = a
                        c = min(edelay[pred_edge[j]], cross[k])
                        if c < cross[u - lo]:
                            cross[u - lo] = c
            low = np.inf
            for o in range(lo, hi):
                t = dist[o] + after[o - lo] + cross[o - lo]
                if t < low:
                    low = t
            if np.isfinite(low):
                lowsplit[i] = low
        for d in range(D):
            gapless[i, d] = occ[hi, d] - dur[hi, d] if np.isfinite(dur[hi, d]) else 0.0
            whole[i, d] -= gapless[i, d]
        lo = hi + 1
    # crossmin[i]: the cheapest transfer on an edge into element i (every path from the previous
    # series point to this one crosses a link when the two sit on different devices)
    crossmin = np.full(K, INF)
    lo = 0
    for i in range(K):
        for o in range(lo, ends[i] + 1):
            for j in range(pred_ptr[o], pred_ptr[o + 1]):
                if edelay[pred_edge[j]] < crossmin[i]:
                    crossmin[i] = edelay[pred_edge[j]]
        lo = ends[i] + 1
    W = np.full((K, D), INF)  # element i whole on d, the last of a run there: the end of its last op
    Sp = np.full((K, D), INF)  # element i split, its last op on d (any d for the last element)
    for i in range(K):
        s_i = ends[i]
        series = i < K - 1 or last_is_series
        # split: from any state of element i - 1 (or the start); an element of one op cannot split
        lo_i = ends[i - 1] + 1 if i > 0 else 0
        for a in range(D if s_i > lo_i else 0):
            if series and not np.isfinite(dur[s_i, a]):
                continue
            shift = dur[s_i, a] - fastest[s_i] if series else 0.0
            cpa = cp[i] + shift
            lowa = lowsplit[i] + shift if series else 0.0
            if i == 0:
                Sp[i, a] = max(cpa, lowa)
                continue
            best = INF
            for b in range(D):
                prev = min(W[i - 1, b], Sp[i - 1, b])
                if prev == INF:
                    continue
                # the longest path crosses a link when the series points sit apart; some path
                # through an op off the last op's device does in any case (not both on one path)
                t = prev + max(cpa + (crossmin[i] if (b != a and series and crossmin[i] < INF) else 0.0), lowa)
                if t < best:
                    best = t
            Sp[i, a] = best
        # whole: a run of elements j..i on d
        for d in range(D):
            t = 0.0
            p = 0.0
            m = 0.0
            best = INF
            for j in range(i, -1, -1):
                if not np.isfinite(whole[j, d]):
                    break
                p += par[j]
                if nd[j, d] > m:
                    m = nd[j, d]
                if p + m > mem[d]:
                    break
                t += whole[j, d] + (gapless[j, d] if j < i else 0.0)
                if j == 0:
                    start = 0.0
                else:
                    start = INF
                    sp = ends[j - 1]
                    for b in range(D):
                        if b == d:  # only after a split element whose last op sits on d: its parameters too
                            if Sp[j - 1, d] < start and p + params[sp] + m <= mem[d]:
                                start = Sp[j - 1, d]
                            continue
                        prev = min(W[j - 1, b], Sp[j - 1, b])
                        if prev < INF:
                            x = prev + lat[b, d] + minb[sp] * upb[b, d]
                            if x < start:
                                start = x
                if start + t < best:
                    best = start + t
            W[i, d] = best
    out = INF
    for d in range(D):
        if W[K - 1, d] + gapless[K - 1, d] < out:
            out = W[K - 1, d] + gapless[K - 1, d]
        if Sp[K - 1, d] < out:
            out = Sp[K - 1, d]
    return out
