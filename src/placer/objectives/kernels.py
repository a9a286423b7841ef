"""Compiled kernels of the published cost models (numba). Ops are in topological order (0..n-1),
so one forward sweep computes any "longest path" quantity.

Status codes: 0 valid, 1 contracted graph has a cycle, 2 a device set is not contiguous (more pieces
than allowed), 3 an op on a device that cannot run it, 4 memory over capacity.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below: numba refuses one it cannot cache

OK, CYCLE, NONCONTIGUOUS, UNRUNNABLE, OOM = 0, 1, 2, 3, 4
STATUS_TEXT = {
    CYCLE: "the graph contracted by its device pieces has a cycle, so no piece can run atomically "
           "(Tarnawski et al. 2020, section 3: each contiguous piece runs as one call)",
    NONCONTIGUOUS: "a device's set of ops is not contiguous (some path leaves it and comes back)",
    UNRUNNABLE: "an op is on a device that cannot run it",
    OOM: "a device holds more memory than it has",
}


@njit(cache=True)
def piece_levels(p, d, pred_ptr, pred_idx, mask_nodes, level):
    """For device d: level[v] = the piece of v (1, 2, ...) when p[v] == d, else the number of pieces
    of d a path into v has passed (Tarnawski et al. 2020, Appendix A's split of a set into contiguous
    pieces: a path that leaves d's set and comes back starts a new piece). Only ops with
    mask_nodes[v] and edges between such ops count. Returns the number of pieces."""
    n = len(p)
    top = 0
    for v in range(n):
        if not mask_nodes[v]:
            level[v] = 0
            continue
        on = p[v] == d
        lv = 1 if on else 0
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[k]
            if not mask_nodes[u]:
                continue
            x = level[u]
            if on and p[u] != d and x > 0:
                x += 1
            if x > lv:
                lv = x
        level[v] = lv
        if on and lv > top:
            top = lv
    return top


@njit(cache=True)
def latency_batch(P, acc, t, cost, mem, cap, pred_ptr, pred_idx, succ_ptr, succ_idx, max_pieces, out, status, used):
    """Single-sample latency (Tarnawski et al. 2020, section 3 and Appendix A; the evaluator of their
    latency-greedy): each accelerator's set is cut into contiguous pieces; the graph contracted by the
    pieces (CPU ops stay single) must be acyclic; a piece starts when every op with an edge into it
    has finished, then pays the transfer of each such op's output, its ops' accelerator time, and the
    transfer of each of its ops with an edge out of it, all in sequence; a CPU op starts when its
    inputs are done (CPUs in parallel without limit) and pays no transfer. Latency = last finish."""
    k, n = P.shape
    D = len(acc)
    level = np.zeros(n, dtype=np.int64)
    gid = np.zeros(n, dtype=np.int64)
    slot = np.full(n + D * (n + 1), -1, dtype=np.int64)
    allmask = np.ones(n, dtype=np.bool_)
    for r in range(k):
        p = P[r]
        out[r] = np.inf
        status[r] = OK
        for d in range(D):
            used[r, d] = 0.0
        bad = False
        for v in range(n):
            if not np.isfinite(t[v, p[v]]):
                bad = True
            used[r, p[v]] += mem[v]
        if bad:
            status[r] = UNRUNNABLE
            continue
        for d in range(D):
            if acc[d] and used[r, d] > cap[d]:
                status[r] = OOM
        # pieces: group key n + d*(n+1) + level for accelerator ops, v for CPU ops
        for v in range(n):
            gid[v] = v
        for d in range(D):
            if not acc[d]:
                continue
            cnt = piece_levels(p, d, pred_ptr, pred_idx, allmask, level)
            if cnt > max_pieces:
                status[r] = NONCONTIGUOUS
            for v in range(n):
                if p[v] == d:
                    gid[v] = n + d * (n + 1) + level[v]
        if status[r] != OK:
            continue
        # compact group ids
        G = 0
        for v in range(n):
            key = gid[v]
            if slot[key] < 0:
                slot[key] = G
                G += 1
            gid[v] = slot[key]
        mptr = np.zeros(G + 1, dtype=np.int64)
        for v in range(n):
            mptr[gid[v] + 1] += 1
        for g in range(G):
            mptr[g + 1] += mptr[g]
        members = np.empty(n, dtype=np.int64)
        fill = mptr[:-1].copy()
        for v in range(n):
            members[fill[gid[v]]] = v
            fill[gid[v]] += 1
        indeg = np.zeros(G, dtype=np.int64)
        for v in range(n):
            for kk in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[kk]
                if gid[u] != gid[v]:
                    indeg[gid[v]] += 1
        stack = np.empty(G, dtype=np.int64)
        top = 0
        for g in range(G):
            if indeg[g] == 0:
                stack[top] = g
                top += 1
        finish = np.zeros(G)
        mark = np.full(n, -1, dtype=np.int64)
        done = 0
        total = 0.0
        while top > 0:
            top -= 1
            g = stack[top]
            done += 1
            first = members[mptr[g]]
            dev = p[first]
            if not acc[dev]:
                v = first
                mp = 0.0
                for kk in range(pred_ptr[v], pred_ptr[v + 1]):
                    f = finish[gid[pred_idx[kk]]]
                    if f > mp:
                        mp = f
                fin = mp + t[v, dev]
            else:
                mp = 0.0
                incost = 0.0
                work = 0.0
                outcost = 0.0
                for j in range(mptr[g], mptr[g + 1]):
                    v = members[j]
                    work += t[v, dev]
                    for kk in range(pred_ptr[v], pred_ptr[v + 1]):
                        u = pred_idx[kk]
                        if gid[u] != g:
                            if mark[u] != g:
                                mark[u] = g
                                incost += cost[u]
                            f = finish[gid[u]]
                            if f > mp:
                                mp = f
                    for kk in range(succ_ptr[v], succ_ptr[v + 1]):
                        if gid[succ_idx[kk]] != g:
                            outcost += cost[v]
                            break
                fin = mp + incost + work + outcost
            finish[g] = fin
            if fin > total:
                total = fin
            for j in range(mptr[g], mptr[g + 1]):
                v = members[j]
                for kk in range(succ_ptr[v], succ_ptr[v + 1]):
                    h = gid[succ_idx[kk]]
                    if h != g:
                        indeg[h] -= 1
                        if indeg[h] == 0:
                            stack[top] = h
                            top += 1
        # clear the slots used by this row
        for v in range(n):
            key = v
            slot[key] = -1
        for d in range(D):
            if acc[d]:
                for lv in range(n + 1):
                    slot[n + d * (n + 1) + lv] = -1
        if done < G:
            status[r] = CYCLE
            continue
        out[r] = total


@njit(cache=True)
def maxload_batch(P, acc, t, cost, mem, cap, pred_ptr, pred_idx, succ_ptr, succ_idx, forward, contiguous,
                  cpu_contiguous, out, status, used, load):
    """Max-load, i.e. time per sample in a pipeline (Tarnawski et al. 2020, section 3, "throughput";
    their throughput IP and DP): a device's load is the time of its ops, plus, on an accelerator, the
    transfer cost of every op with an edge across its boundary (an op's output is counted once per
    receiving device and once on the sending device); CPUs pay no transfers. Memory: the ``size`` of
    the ops on an accelerator is at most its capacity. With ``contiguous``, the forward ops on each
    accelerator (and CPU, with ``cpu_contiguous``) must form a contiguous set of the forward graph."""
    k, n = P.shape
    D = len(acc)
    seen = np.full(D, -1, dtype=np.int64)
    level = np.zeros(n, dtype=np.int64)
    for r in range(k):
        p = P[r]
        out[r] = np.inf
        status[r] = OK
        for d in range(D):
            used[r, d] = 0.0
            load[r, d] = 0.0
        bad = False
        for v in range(n):
            tv = t[v, p[v]]
            if not np.isfinite(tv):
                bad = True
            load[r, p[v]] += tv
            used[r, p[v]] += mem[v]
        if bad:
            status[r] = UNRUNNABLE
            continue
        for u in range(n):
            du = p[u]
            sent = False
            for kk in range(succ_ptr[u], succ_ptr[u + 1]):
                e = p[succ_idx[kk]]
                if e != du and seen[e] != u:
                    seen[e] = u
                    sent = True
                    if acc[e]:
                        load[r, e] += cost[u]
            if sent and acc[du]:
                load[r, du] += cost[u]
            for d in range(D):
                seen[d] = -1
        for d in range(D):
            if acc[d] and used[r, d] > cap[d]:
                status[r] = OOM
        if status[r] == OK and contiguous:
            for d in range(D):
                if acc[d] or cpu_contiguous:
                    if piece_levels(p, d, pred_ptr, pred_idx, forward, level) > 1:
                        status[r] = NONCONTIGUOUS
                        break
        if status[r] != OK:
            continue
        m = 0.0
        for d in range(D):
            if load[r, d] > m:
                m = load[r, d]
        out[r] = m


@njit(cache=True)
def pipeline_batch(P, t, mem, act, cap, esrc, edst, ebytes, forward, bw, lat, out, status, used, stage_time):
    """PipeDream's steady state (Narayanan et al. SOSP 2019, sections 3.1-3.3), one stage per device
    holding ops, no replication: with 1F1B scheduling the pipeline completes one minibatch every
    max(slowest stage's forward+backward time, slowest inter-stage transfer) (section 3.1's T and C
    terms; transfers overlap compute). The stages, ordered by the forward edges between them, must
    form a chain without cycles; stage s of S (0 = input stage) keeps S - s minibatches in flight
    (NOAM, section 3.2), so it stores S - s versions of its weights (weight stashing, section 3.3)
    and of its forward ops' activations."""
    k, n = P.shape
    D = cap.shape[0]
    m = len(esrc)
    for r in range(k):
        p = P[r]
        out[r] = np.inf
        status[r] = OK
        w = np.zeros(D)
        a = np.zeros(D)
        has = np.zeros(D, dtype=np.bool_)
        for d in range(D):
            stage_time[r, d] = 0.0
            used[r, d] = 0.0
        bad = False
        for v in range(n):
            d = p[v]
            has[d] = True
            tv = t[v, d]
            if not np.isfinite(tv):
                bad = True
            stage_time[r, d] += tv
            w[d] += mem[v]
            if forward[v]:
                a[d] += act[v]
        if bad:
            status[r] = UNRUNNABLE
            continue
        link = np.zeros((D, D))
        adj = np.zeros((D, D), dtype=np.bool_)
        for j in range(m):
            du = p[esrc[j]]
            dv = p[edst[j]]
            if du != dv:
                link[du, dv] += ebytes[j]
                if forward[esrc[j]] and forward[edst[j]]:
                    adj[du, dv] = True
        worst = 0.0
        for d in range(D):
            if stage_time[r, d] > worst:
                worst = stage_time[r, d]
            for e in range(D):
                if link[d, e] > 0:
                    c = lat[d, e] + link[d, e] / bw[d, e]
                    if c > worst:
                        worst = c
        # order the stages (Kahn over the forward edges between devices)
        indeg = np.zeros(D, dtype=np.int64)
        S = 0
        for d in range(D):
            if has[d]:
                S += 1
                for e in range(D):
                    if adj[e, d] and has[e]:
                        indeg[d] += 1
        pos = np.full(D, -1, dtype=np.int64)
        placed = 0
        progress = True
        while progress:
            progress = False
            for d in range(D):
                if has[d] and pos[d] < 0 and indeg[d] == 0:
                    pos[d] = placed
                    placed += 1
                    progress = True
                    for e in range(D):
                        if adj[d, e] and has[e]:
                            indeg[e] -= 1
        if placed < S:
            status[r] = CYCLE
            continue
        for d in range(D):
            if has[d]:
                inflight = S - pos[d]
                used[r, d] = inflight * (w[d] + a[d])
                if used[r, d] > cap[d]:
                    status[r] = OOM
        if status[r] != OK:
            continue
        out[r] = worst
