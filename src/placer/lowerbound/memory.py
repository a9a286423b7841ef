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

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()


def path_bound(relax, paths: int = 3) -> float:
    """The best memory-path bound over a few paths (0 when memory never cuts a path)."""
    from placer.sim.prepare import prepared

    g = relax.graph
    mem = np.asarray(relax.problem.memory_bytes, dtype=np.float64)
    need = np.asarray(prepared(relax.problem).out_bytes) + g.temp_bytes
    params = np.asarray(g.param_bytes, dtype=np.float64)
    fast = relax.fastest
    total_p = float(params.sum())
    best = 0.0
    weights = [fast, params + 1e-9 * fast]
    if total_p > 0:
        weights.append(fast / max(float(fast.sum()), 1e-9) + params / total_p)
    for w in weights[:paths]:
        path = longest_path(g.pred_ptr, g.pred_idx, np.asarray(w, dtype=np.float64))
        whole = params[path].sum() + need[path].max(initial=0.0)
        if (whole <= mem[np.isfinite(relax.dur[path]).all(axis=0)]).any():
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
                if need[oj] > nd:
                    nd = need[oj]
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
