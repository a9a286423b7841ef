"""The simulator's general event loop (numba, ``cache=True``): Placeto appendix A.5 over flat
arrays, every communication model, with or without records. :mod:`placer.sim.kernel` compiles
:func:`run_loop` once per model (a template, ``MODEL`` a constant) and calls it after :func:`init_state`.

State lives in two workspace arrays (``WI`` int64, ``WF`` float64, laid out by
:func:`placer.sim.state.views`) so that a call passes a handful of arrays and allocates nothing.

Events are popped from a binary heap in the order of the key ``(time, kind, a, b)``:

* kind 0, b = 0: op ``a`` done (frees its temp bytes and the inputs it was the last user of,
  releases its local children, queues its output on the bus);
* kind 0, b > 0: the transfer of op ``a``'s output arrived (``placeto``: at every remote consumer
  device; ``p2p``, ``link``: at device ``b - 1``; ``giph``: ``a`` is the edge, whose consumer it reached);
* kind 1: sender ``a`` (the bus of device ``a``) wakes up and starts the next queued transfer;
* kind 2: device ``a`` wakes up and starts the next queued op.

``a`` of an op event is the op's priority ``prio[op]`` (``PI``, see :mod:`placer.sim.prepare`):
its topological index, or with ``tie_break="name"`` the rank of its name. That is the order the
published reference simulator gets from its heap of ``(time, event name, payload)`` tuples
(dependency events sort before bus events before device events, then by producer and consumer
name; devices by index here). An op's successors are visited in priority order (the CSR of
:mod:`placer.sim.prepare` is sorted that way), so the ops one event releases are queued in the
reference's order. Runnable ops and queued transfers are FIFO in the order they were queued, which
is the reference's ``(time queued, insertion counter)`` priority.

Memory: ``level[d]`` is device d's resident activation bytes (parameters are added at the end: they
are constant over the step). An op's output and temp bytes are allocated when it starts; temp is
freed when it ends; the output when its last local consumer ended and its last transfer arrived (at
its end if it has neither); a received copy from its arrival until its last consumer on that device
ended. The peak is sampled after all events of a timestamp ran, so a buffer freed at t makes room
for one allocated at t (half-open intervals [alloc, free)).

Objective-only runs of the ``placeto`` model (``record=False``, at most 63 devices, every transfer
taking some time, at least half the ops sending one) go through :func:`placer.sim.placeto_loop.prepass`
and :func:`placer.sim.placeto_loop.run_placeto` instead (:func:`placer.sim.kernel.sim_full` decides):
the same events in the same order and the same floating-point operations, with fewer data-dependent
branches. Recorded runs and the other models use :func:`run_loop`. ``giph`` and ``link`` schedule a
transfer's arrival when it is sent (``giph``: nothing delays it; ``link``: its start is
``max(now, when its link resource is free)``, a FIFO with known service times), so they need no sender
wake-ups; their heap holds up to m more events.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.core.cpu import CPUTargetOptions

from placer.sim.state import (
    GIPH, LINK, P2P, PLACETO, A_MASK, A_SHIFT, KIND_SHIFT, NS, NSF, S_HSIZE, S_SEQ, S_NRUN, S_NXE, S_NXS, S_NLOG,
    S_NDIRTY, F_TCUR, F_TMAX, F_LFREE, F_DEVFREE, F_BUSFREE, F_ENQT, F_LEVEL, F_PEAK, F_PEAKT, F_HT, I_MISSING,
    I_FIFO, I_ENQSEQ, I_DEVHEAD, I_DEVTAIL, I_DEVACT, I_DEVLAST, I_BUSHEAD, I_BUSTAIL, I_BUSACT, I_BUSLAST, I_RECV,
    I_ISDIRTY, I_FIRST, I_LOGLAST, I_HK, I_HP, gviews, heap_extra, key, link_slots, pop, push, ws_sizes,
)


# The event loops allocate nothing, so they are compiled without numba's reference counting
# (``_nrt=False``, a CPUTargetOptions flag): with it, every slice and every array handed to an inlined
# helper costs an atomic incref/decref pair in the hot loop. Measured on random placements of the
# 1k / 10k-op synthetic training graphs (k80x4, benchmarks/sim_speed.py, medians of thread CPU time,
# same run): 137 -> 66 us and 1.93 -> 1.43 ms per simulation, bit for bit the same results. A numba
# without the flag compiles the same code with reference counting.
HOT = dict(cache=True, nogil=True, **({"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}))
# The loops index with unsigned integers (``U(i)``, ``U = np.uint64``) wherever an index is read from an
# array or computed: numba adds a negative-index wrap-around (``if i < 0: i += len``) to every access
# through a signed integer, and every index here is >= 0 (a -1 sentinel is tested before it is used).
# Logic stays in int64 (numba types int64 op uint64 as float64). Same bits; 10k-op random placements
# (run_placeto) 1,497 -> 1,290 us, one GPU / contiguous blocks (run_loop) 568 -> 455 / 892 -> 685 us,
# the heap of :mod:`placer.sim.state` included (thread CPU medians, same machine).
U = np.uint64
MODEL = -1  # run_loop's placeholder: placer.sim.kernel.entry compiles a copy per model with its own


# ---------------------------------------------------------------------------- queues
@njit(**HOT)
def enqueue_op(c, x, t, seq, hsize, enq_t, enq_seq, fifo, dev_head, dev_tail, dev_act, ht, hk, hp):
    enq_t[c] = t
    enq_seq[c] = seq
    fifo[c] = -1
    if dev_tail[x] < 0:
        dev_head[x] = c
    else:
        fifo[dev_tail[x]] = c
    dev_tail[x] = c
    if dev_act[x] == 0:
        dev_act[x] = 1
        hsize = push(ht, hk, hp, hsize, t, key(2, x, 0), np.int64(-1))
    return hsize


# ---------------------------------------------------------------------------- init
@njit(**HOT)
def init_state(GI, GF, CI, place, WI, WF, vi, vf):
    """Fresh state at t = 0: every op without parents queued on its device (in index order)."""
    n, m, D = CI[0], CI[1], CI[2]
    succ_ptr, succ_idx, pred_ptr, pred_edge, edge_src, leader, pred_idx, ebytes, obytes, tbytes, pbytes, comp = (
        gviews(GI, GF, n, m, D))
    missing = vi[I_MISSING]
    for i in range(n):
        missing[i] = pred_ptr[i + 1] - pred_ptr[i]
    for d in range(D):
        vi[I_DEVHEAD][d] = -1
        vi[I_DEVTAIL][d] = -1
        vi[I_DEVACT][d] = 0
        vi[I_DEVLAST][d] = -1
        vi[I_BUSHEAD][d] = -1
        vi[I_BUSTAIL][d] = -1
        vi[I_BUSACT][d] = 0
        vi[I_BUSLAST][d] = -1
        vi[I_RECV][d] = 0
        vi[I_ISDIRTY][d] = 0
        vi[I_FIRST][d] = -1
        vi[I_LOGLAST][d] = -1
        vf[F_LEVEL][d] = 0.0
        vf[F_PEAK][d] = 0.0
        vf[F_PEAKT][d] = 0.0
        vf[F_DEVFREE][d] = 0.0
        vf[F_BUSFREE][d] = 0.0
    for k in range(NS):
        WI[k] = 0
    for k in range(NSF):
        WF[k] = 0.0
    nl = link_slots(CI)
    if nl > 0:  # link model: every link resource free at t = 0
        o = ws_sizes(n, m, D, heap_extra(CI))[1]
        for k in range(o, o + nl):
            WF[k] = 0.0
    hsize = np.int64(0)  # typed values, not literals: one compiled enqueue_op (ONE_SPEC)
    seq = np.int64(0)
    for i in range(n):
        if missing[i] == 0:
            hsize = enqueue_op(i, place[i], 0.0, seq, hsize, vf[F_ENQT], vi[I_ENQSEQ], vi[I_FIFO], vi[I_DEVHEAD],
                               vi[I_DEVTAIL], vi[I_DEVACT], vf[F_HT], vi[I_HK], vi[I_HP])
            seq += 1
    WI[S_HSIZE] = hsize
    WI[S_SEQ] = seq


# ---------------------------------------------------------------------------- event loop
def run_loop(GI, GF, CF, CI, PI, place, WI, WF, vi, vf, record):
    """Process events until none is left; the state in WI/WF may be fresh or restored. ``record``:
    keep the per-op / per-transfer records (SimResult, restarts); off for the objective alone.
    A template: compiled once per communication model (``MODEL`` a constant, see PER_MODEL)."""
    n, m, D = CI[0], CI[1], CI[2]
    model = MODEL
    succ_ptr, succ_idx, pred_ptr, pred_edge, edge_src, leader, pred_idx, ebytes, obytes, tbytes, pbytes, comp = (
        gviews(GI, GF, n, m, D))
    prio = PI[0:n]  # an op's rank among simultaneous events; inv: the op of a rank
    inv = PI[n:2 * n]
    op_gap = CF[0]
    bus_gap = CF[1]
    bw = CF[4:4 + D * D]
    lat = CF[4 + D * D:4 + 2 * D * D]
    missing, use_cnt, fifo, enq_seq, disp, disp_prev = vi[0], vi[1], vi[2], vi[3], vi[4], vi[5]
    copy_rep, copy_cnt, xq_next, xf_seq, xe_list, xs_list, xs_prev = vi[6], vi[7], vi[8], vi[9], vi[10], vi[11], vi[12]
    dev_head, dev_tail, dev_act, dev_last = vi[13], vi[14], vi[15], vi[16]
    bus_head, bus_tail, bus_act, bus_last, recv = vi[17], vi[18], vi[19], vi[20], vi[21]
    dirty, is_dirty, first, log_last, hk, hp, log_prev, log_dev = vi[22], vi[23], vi[24], vi[25], vi[26], vi[27], vi[28], vi[29]
    start, end, enq_t, out_free, xf_start, xf_arr, xdur, cbytes = vf[0], vf[1], vf[2], vf[3], vf[4], vf[5], vf[6], vf[7]
    carr, cfree, level, peak, peak_t, ht, log_t, log_level = vf[8], vf[9], vf[10], vf[11], vf[12], vf[14], vf[15], vf[16]
    lfree = vf[F_LFREE]  # when the last buffer of an op (output or a received copy) was freed
    dev_free, bus_free = vf[F_DEVFREE], vf[F_BUSFREE]  # when a device / sender is free again
    # link model: CI[5] link resources, CI[6 + s * D + x] the resource of link (s, x); when each is free
    nres = link_slots(CI)
    link_of = CI[6:6 + (D * D if nres > 0 else 0)]
    lo_res = ws_sizes(n, m, D, heap_extra(CI))[1]
    res_free = WF[lo_res:lo_res + nres]

    hsize, seq, n_run, n_xe, n_xs = WI[S_HSIZE], WI[S_SEQ], WI[S_NRUN], WI[S_NXE], WI[S_NXS]
    n_log, n_dirty = WI[S_NLOG], WI[S_NDIRTY]
    t_cur, tmax = WF[F_TCUR], WF[F_TMAX]

    while hsize > 0:
        t = ht[0]
        k = hk[0]
        pay = hp[0]
        hsize = pop(ht, hk, hp, hsize)
        if t > t_cur:  # every event of t_cur ran: sample the memory peaks
            for j in range(n_dirty):
                d = dirty[U(j)]
                is_dirty[U(d)] = 0
                if level[U(d)] > peak[U(d)]:
                    peak[U(d)] = level[U(d)]
                    peak_t[U(d)] = t_cur
                    if record:
                        log_t[U(n_log)] = t_cur
                        log_level[U(n_log)] = level[U(d)]
                        log_dev[U(n_log)] = d
                        log_prev[U(n_log)] = log_last[U(d)]
                        log_last[U(d)] = n_log
                        n_log += 1
            n_dirty = 0
            t_cur = t
        tmax = t
        kind = k >> KIND_SHIFT
        a = (k >> A_SHIFT) & A_MASK
        if kind == 2:  # ---------------------------------------------- device a wakes up
            d = a
            c = dev_head[U(d)]
            if c < 0:
                dev_act[U(d)] = 0
                continue
            dev_head[U(d)] = fifo[U(c)]
            if fifo[U(c)] < 0:
                dev_tail[U(d)] = -1
            cost = comp[U(c * D + d)]
            e_t = t + cost
            if record:
                start[U(c)] = t
                end[U(c)] = e_t
                disp[U(n_run)] = c
                disp_prev[U(n_run)] = dev_last[U(d)]
                dev_last[U(d)] = n_run
            n_run += 1
            level[U(d)] += obytes[U(c)] + tbytes[U(c)]
            if is_dirty[U(d)] == 0:
                is_dirty[U(d)] = 1
                dirty[U(n_dirty)] = d
                n_dirty += 1
            hsize = push(ht, hk, hp, hsize, e_t, key(0, prio[U(c)], 0), np.int64(-1))
            w = e_t + (op_gap if cost > 0 else 0.0)
            dev_free[U(d)] = w
            # wake-ups are scheduled only for work: now if more ops wait, else when one is queued
            if dev_head[U(d)] >= 0:
                hsize = push(ht, hk, hp, hsize, w, key(2, d, 0), np.int64(-1))
            else:
                dev_act[U(d)] = 0
        elif kind == 0 and (k & 255) == 0:  # ----------------------- op inv[a] done
            u = inv[U(a)]
            d = place[U(u)]
            level[U(d)] -= tbytes[U(u)]
            for j in range(pred_ptr[U(u)], pred_ptr[U(u + 1)]):
                w = pred_idx[U(j)]
                if place[U(w)] == d:
                    use_cnt[U(w)] -= 1
                    if use_cnt[U(w)] == 0:
                        level[U(d)] -= obytes[U(w)]
                        if record:
                            out_free[U(w)] = t
                            lfree[U(w)] = t
                else:
                    r = copy_rep[U(pred_edge[U(j)])]
                    copy_cnt[U(r)] -= 1
                    if copy_cnt[U(r)] == 0:
                        level[U(d)] -= cbytes[U(r)]
                        if record:
                            cfree[U(r)] = t
                            lfree[U(edge_src[U(r)])] = t
            nloc = 0
            ndev = 0
            first_rem = -1
            maxb = 0.0
            for e in range(succ_ptr[U(u)], succ_ptr[U(u + 1)]):
                c = succ_idx[U(e)]
                x = place[U(c)]
                if x == d:
                    nloc += 1
                    missing[U(c)] -= 1
                    if missing[U(c)] == 0:
                        if record:
                            enq_t[U(c)] = t
                            enq_seq[U(c)] = seq
                        seq += 1
                        fifo[U(c)] = -1
                        if dev_tail[U(d)] < 0:
                            dev_head[U(d)] = c
                        else:
                            fifo[U(dev_tail[U(d)])] = c
                        dev_tail[U(d)] = c
                        if dev_act[U(d)] == 0:
                            dev_act[U(d)] = 1
                            hsize = push(ht, hk, hp, hsize, max(t, dev_free[U(d)]), key(2, d, 0), np.int64(-1))
                elif model == GIPH:  # one transfer per edge, sent now, no contention
                    copy_rep[U(e)] = e
                    copy_cnt[U(e)] = 1
                    eb = ebytes[U(e)]
                    cbytes[U(e)] = eb
                    ndev += 1
                    v = lat[U(d * D + x)] + eb / bw[U(d * D + x)]
                    xdur[U(e)] = v
                    if record:
                        xf_start[U(e)] = t
                        xf_arr[U(e)] = t + v
                    hsize = push(ht, hk, hp, hsize, t + v, key(0, e, 1), e)
                else:
                    f = first[U(x)]
                    if f < 0:
                        f = e
                        first[U(x)] = e
                        copy_cnt[U(e)] = 0
                        cbytes[U(e)] = 0.0
                        ndev += 1
                        if first_rem < 0:
                            first_rem = e
                    copy_rep[U(e)] = f
                    copy_cnt[U(f)] += 1
                    eb = ebytes[U(e)]
                    if eb > cbytes[U(f)]:
                        cbytes[U(f)] = eb
                    if eb > maxb:
                        maxb = eb
            ntx = min(ndev, 1) if model == PLACETO else ndev
            use_cnt[U(u)] = nloc + ntx
            if nloc + ntx == 0:
                level[U(d)] -= obytes[U(u)]
                if record:
                    out_free[U(u)] = t
                    lfree[U(u)] = t
            if ndev > 0:
                if model == PLACETO:
                    dur = 0.0
                    for x in range(D):
                        f = first[U(x)]
                        if f >= 0:
                            cbytes[U(f)] = maxb
                            v = lat[U(d * D + x)] + maxb / bw[U(d * D + x)]
                            if v > dur:
                                dur = v
                            first[U(x)] = -1
                    xdur[U(first_rem)] = dur
                    seq += 1
                    if record:
                        xf_seq[U(first_rem)] = seq - 1
                        xe_list[U(n_xe)] = first_rem
                        n_xe += 1
                    xq_next[U(first_rem)] = -1
                    if bus_tail[U(d)] < 0:
                        bus_head[U(d)] = first_rem
                    else:
                        xq_next[U(bus_tail[U(d)])] = first_rem
                    bus_tail[U(d)] = first_rem
                    if bus_act[U(d)] == 0:
                        bus_act[U(d)] = 1
                        hsize = push(ht, hk, hp, hsize, max(t, bus_free[U(d)]), key(1, d, 0), np.int64(-1))
                elif model == LINK:  # one transfer per destination, FIFO on its link resource
                    for x in range(D):
                        f = first[U(x)]
                        if f >= 0:
                            v = lat[U(d * D + x)] + cbytes[U(f)] / bw[U(d * D + x)]
                            xdur[U(f)] = v
                            rs = link_of[U(d * D + x)]
                            st = max(t, res_free[U(rs)])
                            arr = st + v
                            res_free[U(rs)] = arr + bus_gap
                            if record:
                                xf_start[U(f)] = st
                                xf_arr[U(f)] = arr
                            hsize = push(ht, hk, hp, hsize, arr, key(0, prio[U(u)], 1 + x), f)
                            first[U(x)] = -1
                elif model == P2P:
                    for x in range(D):
                        f = first[U(x)]
                        if f >= 0:
                            xdur[U(f)] = lat[U(d * D + x)] + cbytes[U(f)] / bw[U(d * D + x)]
                            seq += 1
                            if record:
                                xf_seq[U(f)] = seq - 1
                                xe_list[U(n_xe)] = f
                                n_xe += 1
                            xq_next[U(f)] = -1
                            if bus_tail[U(d)] < 0:
                                bus_head[U(d)] = f
                            else:
                                xq_next[U(bus_tail[U(d)])] = f
                            bus_tail[U(d)] = f
                            if bus_act[U(d)] == 0:
                                bus_act[U(d)] = 1
                                hsize = push(ht, hk, hp, hsize, max(t, bus_free[U(d)]), key(1, d, 0), np.int64(-1))
                            first[U(x)] = -1
        elif kind == 0:  # ------------------------------------------ transfer pay of op inv[a] arrived
            r = pay
            u = edge_src[U(r)] if model == GIPH else inv[U(a)]  # giph: a is the edge (pay)
            s = place[U(u)]
            use_cnt[U(u)] -= 1
            if use_cnt[U(u)] == 0:
                level[U(s)] -= obytes[U(u)]
                if record:
                    out_free[U(u)] = t
                    lfree[U(u)] = t
            if model == PLACETO:
                st = xf_start[U(r)] if record else 0.0
                for e in range(succ_ptr[U(u)], succ_ptr[U(u + 1)]):
                    c = succ_idx[U(e)]
                    x = place[U(c)]
                    if x != s:
                        if copy_rep[U(e)] == e:
                            level[U(x)] += cbytes[U(e)]
                            if record:
                                carr[U(e)] = t
                                xf_start[U(e)] = st
                                xf_arr[U(e)] = t
                            if is_dirty[U(x)] == 0:
                                is_dirty[U(x)] = 1
                                dirty[U(n_dirty)] = x
                                n_dirty += 1
                        missing[U(c)] -= 1
                        if missing[U(c)] == 0:
                            if record:
                                enq_t[U(c)] = t
                                enq_seq[U(c)] = seq
                            seq += 1
                            fifo[U(c)] = -1
                            if dev_tail[U(x)] < 0:
                                dev_head[U(x)] = c
                            else:
                                fifo[U(dev_tail[U(x)])] = c
                            dev_tail[U(x)] = c
                            if dev_act[U(x)] == 0:
                                dev_act[U(x)] = 1
                                hsize = push(ht, hk, hp, hsize, max(t, dev_free[U(x)]), key(2, x, 0), np.int64(-1))
            else:
                x = place[U(succ_idx[U(r)])] if model == GIPH else (k & 255) - 1
                if model == P2P:
                    recv[U(x)] = 0
                level[U(x)] += cbytes[U(r)]
                if record:
                    carr[U(r)] = t
                if is_dirty[U(x)] == 0:
                    is_dirty[U(x)] = 1
                    dirty[U(n_dirty)] = x
                    n_dirty += 1
                # giph: the one consumer of edge r; p2p, link: every consumer on x
                e_lo = r if model == GIPH else succ_ptr[U(u)]
                e_hi = r + 1 if model == GIPH else succ_ptr[U(u + 1)]
                for e in range(e_lo, e_hi):
                    c = succ_idx[U(e)]
                    if place[U(c)] == x:
                        missing[U(c)] -= 1
                        if missing[U(c)] == 0:
                            if record:
                                enq_t[U(c)] = t
                                enq_seq[U(c)] = seq
                            seq += 1
                            fifo[U(c)] = -1
                            if dev_tail[U(x)] < 0:
                                dev_head[U(x)] = c
                            else:
                                fifo[U(dev_tail[U(x)])] = c
                            dev_tail[U(x)] = c
                            if dev_act[U(x)] == 0:
                                dev_act[U(x)] = 1
                                hsize = push(ht, hk, hp, hsize, max(t, dev_free[U(x)]), key(2, x, 0), np.int64(-1))
                for s2 in range(D if model == P2P else 0):  # the freed receiver may unblock an idle sender
                    if bus_act[U(s2)] == 0 and bus_head[U(s2)] >= 0:
                        bus_act[U(s2)] = 1
                        hsize = push(ht, hk, hp, hsize, max(t, bus_free[U(s2)]), key(1, s2, 0), np.int64(-1))
        else:  # ------------------------------------------------------ sender a wakes up
            s = a
            if model == PLACETO:
                r = bus_head[U(s)]
                if r < 0:
                    bus_act[U(s)] = 0
                    continue
                bus_head[U(s)] = xq_next[U(r)]
                if xq_next[U(r)] < 0:
                    bus_tail[U(s)] = -1
                b = 1
            else:
                bus_act[U(s)] = 0
                prev = -1
                r = bus_head[U(s)]
                while r >= 0:
                    if recv[place[U(succ_idx[U(r)])]] == 0:
                        break
                    prev = r
                    r = xq_next[U(r)]
                if r < 0:
                    continue
                if prev < 0:
                    bus_head[U(s)] = xq_next[U(r)]
                else:
                    xq_next[U(prev)] = xq_next[U(r)]
                if xq_next[U(r)] < 0:
                    bus_tail[U(s)] = prev
                x = place[U(succ_idx[U(r)])]
                recv[U(x)] = 1
                bus_act[U(s)] = 1
                b = 1 + x
            arr = t + xdur[U(r)]
            if record:
                xf_start[U(r)] = t
                xf_arr[U(r)] = arr
                xs_list[U(n_xs)] = r
                xs_prev[U(n_xs)] = bus_last[U(s)]
                bus_last[U(s)] = n_xs
                n_xs += 1
            hsize = push(ht, hk, hp, hsize, arr, key(0, prio[U(edge_src[U(r)])], b), r)
            bus_free[U(s)] = arr + bus_gap
            if bus_head[U(s)] >= 0:
                hsize = push(ht, hk, hp, hsize, arr + bus_gap, key(1, s, 0), np.int64(-1))
                bus_act[U(s)] = 1
            else:
                bus_act[U(s)] = 0

    for j in range(n_dirty):
        d = dirty[j]
        is_dirty[d] = 0
        if level[d] > peak[d]:
            peak[d] = level[d]
            peak_t[d] = t_cur
            if record:
                log_t[n_log] = t_cur
                log_level[n_log] = level[d]
                log_dev[n_log] = d
                log_prev[n_log] = log_last[d]
                log_last[d] = n_log
                n_log += 1
    WI[S_HSIZE], WI[S_SEQ], WI[S_NRUN], WI[S_NXE], WI[S_NXS] = hsize, seq, n_run, n_xe, n_xs
    WI[S_NLOG], WI[S_NDIRTY] = n_log, 0
    for d in range(D):  # the reference's run time also counts the last (idle) wake-ups
        tmax = max(tmax, dev_free[d], bus_free[d])
    for j in range(nres):  # link model: a link's last transfer (+ bus gap)
        tmax = max(tmax, res_free[j])
    WF[F_TCUR], WF[F_TMAX] = t_cur, tmax

