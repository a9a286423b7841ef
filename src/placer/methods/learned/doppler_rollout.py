"""DOPPLER's episode as one compiled kernel (:mod:`placer.methods.learned.doppler`): SEL picks among the
schedulable nodes, PLC the device, with ready times, device availability and per-device embedding
sums kept as running arrays, so one rollout is O(steps x (candidates + devices)) with no Python per
step. The heads' affine layers run row by row in the kernel (a BLAS call per step would spawn
threads that fight over shared cores). Modes: greedy, sampled (epsilon-greedy), a forced
(order, devices) replay of the Stage I teacher, or anchored: the nodes in an anchor placement's order,
each on the anchor's device except, with probability ``dev``, on a device PLC samples among the others
(epsilon-greedy), so an episode explores a few device changes from the best placement so far.

Compiling the kernel costs seconds to a minute, once per install (numba caches it; the arrays it
takes are normalised by the caller so that one compiled signature serves every graph). A run whose
rollouts are small work runs :data:`rollout_py` instead: the same code as plain Python (its helpers'
Python versions; ``math.exp`` / ``math.log``, which call the C library as the compiled code does),
whose results equal the kernel's bit for bit (tests/test_budget_fixed_costs.py); :func:`pick`
chooses, so that a tiny budget is not charged the compile."""

from __future__ import annotations

import math
import types

import numpy as np
from numba import njit

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True kernel below

GREEDY, SAMPLE, FORCED, ANCHOR = 0, 1, 2, 3  # rollout modes


@njit(cache=True, nogil=True)
def _affine(h, W, b):
    """h @ W + b, row by row (numpy's matmul would call a BLAS whose threads fight over shared cores)."""
    out = np.zeros((h.shape[0], W.shape[1]))
    for n in range(h.shape[0]):
        for i in range(h.shape[1]):
            for o in range(W.shape[1]):
                out[n, o] += h[n, i] * W[i, o]
        out[n] += b
    return out


@njit(cache=True, nogil=True)
def _rest(pre, W2, b2, w3, b3):
    """An MLP head's score from its first layer's pre-activation: ReLU, Linear, ReLU, Linear."""
    y = np.zeros(W2.shape[1])
    for i in range(len(pre)):
        if pre[i] > 0.0:  # ReLU: a zero input adds nothing
            for o in range(len(y)):
                y[o] += pre[i] * W2[i, o]
    s = 0.0
    for o in range(len(y)):
        s += max(y[o] + b2[o], 0.0) * w3[o]
    return s + b3


@njit(cache=True, nogil=True)
def _choose(z, ok, mode, rng, eps):
    """argmax over the feasible choices when greedy, else with probability eps a uniform feasible
    choice, else a softmax sample."""
    n, best = len(z), -1
    for i in range(n):
        if ok[i] and (best < 0 or z[i] > z[best]):
            best = i
    if mode != SAMPLE:
        return best
    if eps > 0 and rng.random() < eps:
        r, k = rng.integers(0, ok.sum()), 0
        while not ok[k] or r > 0:
            r -= ok[k]
            k += 1
        return k
    tot, cum = 0.0, np.zeros(n)
    for i in range(n):
        tot += math.exp(z[i] - z[best]) if ok[i] else 0.0
        cum[i] = tot
    u, k = rng.random() * tot, 0
    while k < n - 1 and cum[k] <= u:  # the first k whose cumulative weight passes u
        k += 1
    return k


@njit(cache=True, nogil=True)
def _log_softmax(z, ok, k):
    """log softmax of z over the feasible choices, at k."""
    m = -np.inf
    for i in range(len(z)):
        if ok[i]:
            m = max(m, z[i])
    tot = 0.0
    for i in range(len(z)):
        if ok[i]:
            tot += math.exp(z[i] - m)
    return z[k] - m - math.log(tot)


@njit(cache=True, nogil=True)
def _grow(a, n):
    """``a`` with room for n rows, its rows kept."""
    out = np.empty((n,) + a.shape[1:], a.dtype)
    out[:len(a)] = a
    return out


@njit(cache=True, nogil=True)
def rollout(cost, ok, coloc, n_pred, succ_ptr, succ_idx, succ_bytes, lat, inv_bw, bl, lsum, in_bytes, cp, work,
             h, S1, s1, S2, s2, s3, t3, P1, p1, P2, p2, p3, q3, mode, rng, eps, f_order, f_act, dev):
    """The MDP's steps (section 3) on a contention-free list schedule: SEL's features and scores for
    the schedulable nodes, PLC's for the devices, the choices, the transition; the Record's fields.
    The heads' first layers are split: the per-node parts once per episode, the rest per step.
    ``f_order`` / ``f_act``: the forced or anchor trajectory (node per step, device per node);
    ``dev``: in ANCHOR mode, the probability that a node leaves its anchor device."""
    N, A = cost.shape
    H = h.shape[1]
    hs, hp, pd = _affine(h, S1[:H], s1), _affine(h, P1[:H], p1), _affine(h, P1[H:2 * H], np.zeros(H))
    Ws, Wp = S1[H:], P1[2 * H:]
    avail, load, dev_cnt, dev_sum = np.zeros(A), np.zeros(A), np.zeros(A), np.zeros((A, H))
    drt, on = np.zeros((N, A)), np.zeros((N, A))  # when a node's inputs reach each device; bytes already there
    missing = n_pred.copy()
    ready, nr = np.empty(N, np.int64), 0
    for i in range(N):
        if missing[i] == 0:
            ready[nr] = i
            nr += 1
    pin = np.full(max(coloc.max() + 1, 1), -1)
    place = np.full(N, -1)
    cap, U = 4 * N + 16, 0
    cands, cand_row, cand_ptr = np.empty(cap, np.int64), np.empty(cap, np.int64), np.zeros(N + 1, np.int64)
    row_node, row_x, row_s, last = np.empty(cap, np.int64), np.empty((cap, 4)), np.empty(cap), np.full(N, -1)
    order, sel_k, act, logp = np.empty(N, np.int64), np.empty(N, np.int64), np.empty(N, np.int64), np.empty(N)
    plc_x, plc_ok = np.zeros((N, A, 7)), np.zeros((N, A), np.bool_)
    okC, est, eft, s = np.empty((N, A), np.bool_), np.empty((N, A)), np.empty((N, A)), np.empty(N)
    pre, z = np.empty(H), np.empty(A)
    rank = np.zeros(N, np.int64)  # ANCHOR: each node's step in the anchor's order
    if mode == ANCHOR:
        for t in range(N):
            rank[f_order[t]] = t
    for t in range(N):
        base = cand_ptr[t]
        if base + nr > cap:  # grow the per-candidate and per-row arrays
            cap = max(2 * cap, base + nr)
            cands, cand_row, row_node, row_s, row_x = (_grow(cands, cap), _grow(cand_row, cap), _grow(row_node, cap),
                                                       _grow(row_s, cap), _grow(row_x, cap))
        now = np.inf
        for j in range(nr):
            v = ready[j]
            cands[base + j] = v
            g = coloc[v]
            for d in range(A):
                okC[j, d] = (d == pin[g]) if g >= 0 and pin[g] >= 0 else ok[v, d]
                est[j, d] = max(avail[d], drt[v, d])
                eft[j, d] = est[j, d] + cost[v, d] if okC[j, d] else np.inf
                if okC[j, d]:
                    now = min(now, est[j, d])
        k = 0
        for j in range(nr):
            v = ready[j]
            e0, e1 = np.inf, np.inf
            for d in range(A):
                e0 = min(e0, est[j, d] if okC[j, d] else np.inf)
                e1 = min(e1, eft[j, d])
            x0, x1, q = (e0 - now) / cp, (e1 - now) / cp, last[v]
            if q < 0 or row_x[q, 0] != x0 or row_x[q, 1] != x1:  # a new row: SEL scores it
                q, U, x = U, U + 1, row_x[U]
                x[0], x[1], x[2], x[3] = x0, x1, bl[v] / cp, lsum[v]
                for o in range(H):
                    pre[o] = hs[v, o] + (x[0] * Ws[0, o] + x[1] * Ws[1, o] + x[2] * Ws[2, o] + x[3] * Ws[3, o])
                row_node[q], row_s[q], last[v] = v, _rest(pre, S2, s2, s3, t3), q
            cand_row[base + j], s[j] = q, row_s[q]
            if mode == FORCED and v == f_order[t]:
                k = j
        every = np.ones(nr, np.bool_)
        if mode == ANCHOR:  # the schedulable node first in the anchor's order
            for j in range(nr):
                if rank[ready[j]] < rank[ready[k]]:
                    k = j
        elif mode != FORCED:
            k = _choose(s[:nr], every, mode, rng, eps)
        v = ready[k]
        okv, px = okC[k], plc_x[t]
        emin = np.inf
        for d in range(A):
            if okv[d]:
                emin = min(emin, eft[k, d])
        for d in range(A):
            px[d, 0], px[d, 1] = (avail[d] - now) / cp, (drt[v, d] - now) / cp
            px[d, 2], px[d, 3] = (cost[v, d] / cp, (eft[k, d] - emin) / cp) if okv[d] else (0.0, 0.0)
            px[d, 4], px[d, 5] = load[d] / max(work, 1e-9), on[v, d] / max(in_bytes[v], 1.0)
            px[d, 6] = 1.0 if okv[d] else 0.0
            for o in range(H):
                pre[o] = hp[v, o] + dev_sum[d, o] / max(dev_cnt[d], 1.0) + (
                    px[d, 0] * Wp[0, o] + px[d, 1] * Wp[1, o] + px[d, 2] * Wp[2, o] + px[d, 3] * Wp[3, o]
                    + px[d, 4] * Wp[4, o] + px[d, 5] * Wp[5, o] + px[d, 6] * Wp[6, o])
            z[d] = _rest(pre, P2, p2, p3, q3)
        if mode == FORCED:
            a = f_act[v]
        elif mode == ANCHOR:
            a = f_act[v]
            if not okv[a] or rng.random() < dev:  # leave the anchor's device: PLC samples among the others
                alt = okv.copy()
                if okv[a] and alt.sum() > 1:
                    alt[a] = False
                a = _choose(z, alt, SAMPLE, rng, eps)
        else:
            a = _choose(z, okv, mode, rng, eps)
        order[t], sel_k[t], act[t], cand_ptr[t + 1] = v, k, a, base + nr
        logp[t] = _log_softmax(s[:nr], every, k) + _log_softmax(z, okv, a)
        plc_ok[t] = okv
        # the transition: v runs on a after its inputs and the device's earlier nodes
        place[v] = a
        if coloc[v] >= 0 and pin[coloc[v]] < 0:
            pin[coloc[v]] = a
        fin = max(avail[a], drt[v, a]) + cost[v, a]
        avail[a] = fin
        load[a] += cost[v, a]
        dev_sum[a] += pd[v]
        dev_cnt[a] += 1
        ready[k:nr - 1] = ready[k + 1:nr].copy()
        nr -= 1
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            u, b = succ_idx[e], succ_bytes[e]
            for d in range(A):
                drt[u, d] = max(drt[u, d], fin + lat[a, d] + b * inv_bw[a, d])
            on[u, a] += b
            missing[u] -= 1
            if missing[u] == 0:
                ready[nr] = u
                nr += 1
    M = cand_ptr[N]
    return (order, cand_ptr, cands[:M].copy(), cand_row[:M].copy(), row_node[:U].copy(), row_x[:U].copy(), sel_k,
            plc_x, plc_ok, act, logp, place)


# the rollout as plain Python: the same code object, its helpers' Python functions in its globals
rollout_py = types.FunctionType(rollout.py_func.__code__, {
    **globals(), **{f.__name__: f.py_func for f in (_affine, _rest, _choose, _log_softmax, _grow)}}, "rollout_py")
PYTHON_WORK = 1_000_000  # most steps x hidden^2 run as plain Python (a second or two) rather than compiled


def pick(steps: int, hidden: int):
    """The rollout for a run of ``steps`` MDP steps in all with embeddings ``hidden`` wide: the compiled
    kernel once it is compiled in this process or when the work is larger than :data:`PYTHON_WORK`,
    else :data:`rollout_py` (same results, no compile)."""
    return rollout if rollout.signatures or steps * hidden * hidden > PYTHON_WORK else rollout_py
