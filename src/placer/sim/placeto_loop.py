"""The ``placeto`` model's objective-only event loop (numba, ``cache=True``): :func:`run_placeto` runs
the events of :func:`placer.sim.loop.run_loop` under ``comm_model="placeto"`` without records, in the
same order with the same floating-point operations (the same bits), with fewer data-dependent branches:
:func:`prepass` fixes what a placement decides before any event runs, and the pending events sit in a
sorted ring (:func:`qpush`). :func:`placer.sim.kernel.sim_full` takes this path for objective-only
``placeto`` runs on at most :data:`FAST_MAX_DEVICES` devices where every transfer takes some time and
most ops send one; tests/test_sim_properties.py holds it bit-identical to the general loop and the
oracle.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.sim.loop import HOT, U
from placer.sim.state import (
    A_MASK, A_SHIFT, KIND_SHIFT, S_HSIZE, S_NRUN, S_NDIRTY, F_TCUR, F_TMAX, F_LEVEL, F_PEAK, F_PEAKT, F_HT, F_DEVFREE,
    F_BUSFREE, I_MISSING, I_FIFO, I_DEVHEAD, I_DEVTAIL, I_DEVACT, I_BUSHEAD, I_BUSTAIL, I_BUSACT, I_HK, key, xviews,
)

FAST_MAX_DEVICES = 63  # a remote-device set is one int64 bit mask


@njit(**HOT)
def prepass(GI, GF, CF, CI, place, WI, WF):
    """What a placement fixes before any event runs, in one flat pass over the edges and one over the
    ops, without data-dependent branches, per-op loop trip counts included (the event loop's cost
    under random placements is branch mispredictions, see :func:`run_placeto`; the flat edge pass
    against a loop over each op's edges, same process: 10k-op random placements 1,290 -> 1,220 us per
    simulation): per op its cost on its device, its consumers split into local ones (in
    priority order at the front of ``osucc``) and remote ones (in reverse priority order at the back),
    the consumer counts of its buffers per device (``ccnt``), its remote devices (``mask``), the
    bytes and the duration of its one ``placeto`` transfer (the largest remote edge; the slowest of
    the links to the remote devices, ``latency + bytes / bandwidth`` computed as in
    :func:`run_loop`). Returns the number of ops that send a transfer, or -1 if some transfer takes
    no time (then :func:`run_placeto` does not apply)."""
    n, m, D, uniform = CI[0], CI[1], CI[2], CI[4]
    succ_ptr = GI[0:n + 1]
    succ_idx = GI[n + 1:n + 1 + m]
    ebytes = GF[0:m]
    comp = GF[m + 3 * n:m + 3 * n + n * D]
    bw = CF[4:4 + D * D]
    lat = CF[4 + D * D:4 + 2 * D * D]
    osucc, ccnt, nloc, mask, cost, xdur, cb = xviews(WI, WF, n, m, D, np.int64(0))
    lat0 = lat[1] if D > 1 else 0.0
    bw0 = bw[1] if D > 1 else 1.0
    zero = False
    ntx = 0
    edge_src = GI[2 * n + 2 + 2 * m:2 * n + 2 + 3 * m]
    one, UD = U(1), U(D)
    for u in range(U(n)):
        nloc[u] = 0
        mask[u] = 0
        cb[u] = 0.0
    for e in range(U(m)):  # one flat pass over the edges (grouped by producer): no per-op trip counts
        u = U(edge_src[e])
        c = succ_idx[e]
        x = place[U(c)]
        ccnt[u * UD + U(x)] += 1
        nl = nloc[u]
        loc = x == place[u]
        # locals at the front of u's list in priority order, remotes at the back in reverse order
        osucc[U(succ_ptr[u] + nl if loc else succ_ptr[u + one] - 1 - (np.int64(e) - succ_ptr[u] - nl))] = c
        nloc[u] = nl + np.int64(loc)
        mask[u] |= np.int64(1) << x
        v = 0.0 if loc else ebytes[e]
        cb[u] = v if v > cb[u] else cb[u]
    for u in range(U(n)):
        d = U(place[u])
        base = u * UD
        cost[u] = comp[base + d]
        mk = mask[u] & ~(np.int64(1) << np.int64(d))
        mask[u] = mk
        ccnt[base + d] = nloc[u] + np.int64(mk != 0)
        maxb = cb[u]
        sends = mk != 0
        if uniform:  # every link alike: one duration, selected without a branch
            v = lat0 + maxb / bw0
            dur = v if (v > 0.0) & sends else 0.0
        else:
            dur = 0.0
            if sends:
                for x in range(UD):
                    if (mk >> np.int64(x)) & 1:
                        v = lat[d * UD + x] + maxb / bw[d * UD + x]
                        if v > dur:
                            dur = v
        xdur[u] = dur
        zero |= sends & (dur <= 0.0)
        ntx += sends
    return -1 if zero else ntx


@njit(**HOT)
def qpush(ht, hk, head, size, H, t, k):
    """Insert event (t, k) into the sorted ring ``ht``/``hk`` (capacity H, ``size`` events from
    ``head``) by walking back from the tail: new events are mostly the latest, so the walk is short
    and its exit the only data-dependent branch (a binary heap's sift-down takes two per level)."""
    i = head + size
    if i >= H:
        i -= H
    j = size
    while j > 0:
        b = i - 1
        if b < 0:
            b += H
        ub = U(b)
        tb = ht[ub]
        if t < tb or (t == tb and k < hk[ub]):
            ht[U(i)] = tb
            hk[U(i)] = hk[ub]
            i = b
            j -= 1
        else:
            break
    ht[U(i)] = t
    hk[U(i)] = k
    return size + 1


@njit(**HOT)
def ready(c, x, t, fifo, dev_head, dev_tail, dev_act, dev_free, ht, hk, head, H, hsize):
    """Queue op ``c`` on device ``x`` at ``t``; a wake-up if the device was idle."""
    uc, ux = U(c), U(x)
    fifo[uc] = -1
    tl = dev_tail[ux]
    if tl < 0:
        dev_head[ux] = c
    else:
        fifo[U(tl)] = c
    dev_tail[ux] = c
    if dev_act[ux] == 0:
        dev_act[ux] = 1
        hsize = qpush(ht, hk, head, hsize, H, max(t, dev_free[ux]), key(2, x, 0))
    return hsize


@njit(**HOT)
def run_placeto(GI, GF, CF, CI, PI, place, WI, WF, vi, vf):
    """:func:`run_loop` for the ``placeto`` model without records (the objective: makespan and
    peaks), on a fresh state from :func:`init_state` and the arrays of :func:`prepass` (which found
    every transfer taking some time).

    The same schedule and the same floating-point operations on every memory level in the same
    order, so the same bits. What differs is how. Profiled on random placements of 10k-op training
    graphs (thread CPU time, variants timed in one process), :func:`run_loop` spends its time in
    branch mispredictions, not cache misses (a 1k-op run repeated on one placement ran 2x faster per
    op than when placements alternate, the predictor learning it; flushing the caches between runs
    changed nothing): about 28% in the binary heap, 18% in the memory frees (is the parent local?
    its last user?), the rest in the edge loops (is the consumer local? the first on its device?
    the largest edge?) and the dispatch. Here:

    * the placement-dependent choices are made once, without branches, by :func:`prepass`; an
      op-done event walks only its local consumers, an arrival only its remote ones; a consumer
      count per (buffer, device) replaces the per-edge copy bookkeeping; frees and level changes are
      selects and products (``x - 0.0`` is ``x`` bit for bit), and at each new time every device's
      level is sampled, branch-free, instead of a list of the changed ones (an unchanged level is not
      above its peak: the same peaks; against the dirty list, same process, random 10k-op placements
      of benchmarks/sim_speed.py: 1,667 -> 1,506 us per simulation with the ``ccnt`` change below);
    * no sender wake-ups: a bus is a FIFO with known service times, so a transfer's start is fixed
      when it reaches the head (``max(queued, bus free)``); only the head's arrival is an event, and
      the next transfer is scheduled when it fires. Its arrival then enters the queue earlier than
      :func:`run_loop` would push it, which cannot reorder events because it lies strictly later
      (the reason zero-time transfers go to :func:`run_loop`); the last wake-up time still counts
      in the makespan through ``bus_free``;
    * pending events sit in a ring sorted by (time, kind, a, b) (:func:`qpush`), at most one
      op-done and one wake-up per device and one arrival per bus; the bus FIFO links ops through
      ``fifo`` (an op has left its device's FIFO before it can enter its bus's).

    Where a 10k-op random placement's time goes (benchmarks/sim_speed.py's phase table, thread CPU
    medians): this loop about 80%, :func:`prepass` about 16%, :func:`init_state` and :func:`finish`
    the rest. Sampled with ``perf`` (cpu-clock; the machine code mapped back by hand) the loop's time
    is spread over its handlers, no block above 8%. Measured and not adopted (the same bits, the 16
    random placements of the 10k-op graph, both kernels in one process): one slot per device (its
    running op's end or its next wake-up, the two alternate) and one per bus, with a tournament tree
    over the slots instead of the sorted ring, 1,752 -> 2,194 us per simulation (each update walks
    log2(2 D) levels through memory, where the ring's insertion is a short walk from its tail); the
    memory frees and the prepass's largest-remote-edge select written as products with 0/1
    (``x * (r == 0)``) instead of selects, which LLVM had compiled into branches around the loads,
    2,126 -> 2,078 us (2%, within the machine's noise); no device wake-ups (an op's start decided
    when its device's previous op ends or when it becomes runnable on an idle device, its done event
    pushed then and its bytes added to the level once every event of its start time ran, a wake-up
    kept only for an op that ends as it starts: a third fewer ring events, the same bits over 3,000
    hypothesis cases), 1,735 -> 1,744 and 1,723 -> 1,744 us (two runs; 1k ops 206 -> 209 us): the
    saved pop and short tail insertion cost about what the deferred level updates and the start
    decision at each op's end add back."""
    n, m, D = CI[0], CI[1], CI[2]
    succ_ptr = GI[0:n + 1]
    o = n + 1 + m
    pred_ptr = GI[o:o + n + 1]
    pred_idx = GI[o + n + 1 + 2 * m + n:o + n + 1 + 3 * m + n]
    obytes = GF[m:m + n]
    tbytes = GF[m + n:m + 2 * n]
    prio = PI[0:n]
    inv = PI[n:2 * n]
    op_gap = CF[0]
    bus_gap = CF[1]
    osucc, ccnt, nloc, mask, cost, xdur, cb = xviews(WI, WF, n, m, D, np.int64(0))
    missing, fifo = vi[I_MISSING], vi[I_FIFO]
    dev_head, dev_tail, dev_act = vi[I_DEVHEAD], vi[I_DEVTAIL], vi[I_DEVACT]
    bus_head, bus_tail, bus_act = vi[I_BUSHEAD], vi[I_BUSTAIL], vi[I_BUSACT]
    hk = vi[I_HK]
    level, peak, peak_t, ht = vf[F_LEVEL], vf[F_PEAK], vf[F_PEAKT], vf[F_HT]
    dev_free, bus_free = vf[F_DEVFREE], vf[F_BUSFREE]
    H = len(ht)

    one, UD = U(1), U(D)
    hsize, n_run = WI[S_HSIZE], WI[S_NRUN]
    for i in range(1, hsize):  # init_state's wake-ups (a heap) sorted into the ring
        ti, ki = ht[i], hk[i]
        j = i
        while j > 0 and (ti < ht[j - 1] or (ti == ht[j - 1] and ki < hk[j - 1])):
            ht[j], hk[j] = ht[j - 1], hk[j - 1]
            j -= 1
        ht[j], hk[j] = ti, ki
    head = 0
    t_cur, tmax = WF[F_TCUR], WF[F_TMAX]

    while hsize > 0:
        t = ht[U(head)]
        k = hk[U(head)]
        head += 1
        if head == H:
            head = 0
        hsize -= 1
        if t > t_cur:  # every event of t_cur ran: sample the memory peaks
            for d in range(D):  # every device, branch-free: one that did not change stays below its peak
                lv = level[d]
                up = lv > peak[d]
                peak[d] = lv if up else peak[d]
                peak_t[d] = t_cur if up else peak_t[d]
            t_cur = t
        tmax = t
        kind = k >> KIND_SHIFT
        a = (k >> A_SHIFT) & A_MASK
        if kind == 2:  # ---------------------------------------------- device a wakes up
            d = U(a)
            ci = dev_head[d]
            if ci < 0:  # pragma: no cover - a wake-up is scheduled only for queued work
                dev_act[d] = 0
                continue
            c = U(ci)
            nx = fifo[c]
            dev_head[d] = nx
            if nx < 0:
                dev_tail[d] = -1
            cc = cost[c]
            e_t = t + cc
            n_run += 1
            level[d] += obytes[c] + tbytes[c]
            hsize = qpush(ht, hk, head, hsize, H, e_t, key(0, prio[c], 0))
            w = e_t + (op_gap if cc > 0 else 0.0)
            dev_free[d] = w
            if nx >= 0:
                hsize = qpush(ht, hk, head, hsize, H, w, key(2, a, 0))
            else:
                dev_act[d] = 0
        elif (k & 255) == 0:  # ------------------------------------- op inv[a] done
            u = U(inv[U(a)])
            di = place[u]
            d = U(di)
            lv = level[d] - tbytes[u]
            for j in range(U(pred_ptr[u]), U(pred_ptr[u + one])):
                w = U(pred_idx[j])
                ci = w * UD + d
                r = ccnt[ci] - 1
                ccnt[ci] = r
                nb = obytes[w] if place[w] == di else cb[w]
                lv -= nb if r == 0 else 0.0
            lo = U(succ_ptr[u])
            for e in range(lo, lo + U(nloc[u])):
                c = osucc[e]
                uc = U(c)
                mc = missing[uc] - 1
                missing[uc] = mc
                if mc == 0:
                    hsize = ready(c, di, t, fifo, dev_head, dev_tail, dev_act, dev_free, ht, hk, head, H, hsize)
            lv -= obytes[u] if ccnt[u * UD + d] == 0 else 0.0
            level[d] = lv
            if mask[u] != 0:  # its transfer: sent now if the bus is idle, else queued
                if bus_act[d] == 0:
                    bus_act[d] = 1
                    arr = max(t, bus_free[d]) + xdur[u]
                    bus_free[d] = arr + bus_gap
                    hsize = qpush(ht, hk, head, hsize, H, arr, key(0, a, 1))
                else:
                    fifo[u] = -1
                    tl = bus_tail[d]
                    if tl < 0:
                        bus_head[d] = np.int64(u)
                    else:
                        fifo[U(tl)] = np.int64(u)
                    bus_tail[d] = np.int64(u)
        else:  # ------------------------------------------------------ the transfer of op inv[a] arrived
            u = U(inv[U(a)])
            s = U(place[u])
            r = bus_head[s]  # the next transfer starts when the bus is free again
            if r >= 0:
                ur = U(r)
                nx = fifo[ur]
                bus_head[s] = nx
                if nx < 0:
                    bus_tail[s] = -1
                arr = bus_free[s] + xdur[ur]
                bus_free[s] = arr + bus_gap
                hsize = qpush(ht, hk, head, hsize, H, arr, key(0, prio[ur], 1))
            else:
                bus_act[s] = 0
            ci = u * UD + s
            r = ccnt[ci] - 1
            ccnt[ci] = r
            level[s] -= obytes[u] if r == 0 else 0.0
            mk = mask[u]
            b = cb[u]
            for x in range(D):  # b * 0 = 0.0 and level + 0.0 is level, bit for bit (no level is -0.0)
                level[x] += b * ((mk >> x) & 1)
            for e in range(succ_ptr[u + one] - 1, succ_ptr[u] + nloc[u] - 1, -1):
                c = osucc[U(e)]
                uc = U(c)
                mc = missing[uc] - 1
                missing[uc] = mc
                if mc == 0:
                    hsize = ready(c, place[uc], t, fifo, dev_head, dev_tail, dev_act, dev_free, ht, hk, head, H,
                                  hsize)

    for d in range(D):
        if level[d] > peak[d]:
            peak[d] = level[d]
            peak_t[d] = t_cur
    WI[S_HSIZE], WI[S_NRUN], WI[S_NDIRTY] = 0, n_run, 0
    for d in range(D):  # the reference's run time also counts the last (idle) wake-ups
        tmax = max(tmax, dev_free[d], bus_free[d])
    WF[F_TCUR], WF[F_TMAX] = t_cur, tmax
