"""The compiled event loop (numba, ``cache=True``): Placeto appendix A.5 over flat arrays.

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
taking some time, at least half the ops sending one) go through :func:`prepass` and :func:`run_placeto` instead of :func:`run_loop`:
the same events in the same order and the same floating-point operations, with fewer
data-dependent branches (see :func:`run_placeto` for the profile behind it). Recorded runs and the
other models use :func:`run_loop`. ``giph`` and ``link`` schedule a transfer's arrival when it is
sent (``giph``: nothing delays it; ``link``: its start is ``max(now, when its link resource is free)``,
a FIFO with known service times), so they need no sender wake-ups; their heap holds up to m more events.
"""

from __future__ import annotations

import threading
import types

import numpy as np
from numba import njit
from numba.core.cpu import CPUTargetOptions

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below (and in placer.sim.state)

from placer.sim.state import (  # noqa: E402, F401  (re-exported: placer.sim.fast and .restore use them)
    PLACETO, P2P, GIPH, LINK, heap_extra, link_slots, KIND_SHIFT, A_SHIFT, A_MASK, NS, NSF, S_HSIZE, S_SEQ, S_NRUN, S_NXE, S_NXS, S_NLOG, S_NDIRTY, S_BAD, F_TCUR,
    F_TMAX, F_OBJ, F_OVER, OK, BAD_PLACEMENT, NOT_ALL_RAN, heap_cap, ws_sizes, views, push, pop, key, gviews,
    check_placement, I_MISSING, I_USE, I_FIFO, I_ENQSEQ, I_DISP, I_DISPPREV, I_COPYREP, I_COPYCNT, I_XQNEXT, I_XFSEQ,
    I_XELIST, I_XSLIST, I_XSPREV, I_DEVHEAD, I_DEVTAIL, I_DEVACT, I_DEVLAST, I_BUSHEAD, I_BUSTAIL, I_BUSACT,
    I_BUSLAST, I_RECV, I_DIRTY, I_ISDIRTY, I_FIRST, I_LOGLAST, I_HK, I_HP, I_LOGPREV, I_LOGDEV, F_START, F_END,
    F_ENQT, F_OUTFREE, F_XFSTART, F_XFARR, F_XDUR, F_CBYTES, F_CARR, F_CFREE, F_LEVEL, F_PEAK, F_PEAKT, F_RESIDENT,
    F_HT, F_LOGT, F_LOGLEVEL, F_LFREE, F_DEVFREE, F_BUSFREE, xviews, ccnt_start,
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
# ONE_SPEC: numba compiles a kernel once per distinct tuple of argument types, and a constant argument
# (``False``, ``0``) is typed as a literal, so calling a kernel with a constant where another caller
# passes a variable compiles it, and everything it calls, a second time: sim_batch's literal ``False``
# cost a second sim_full and run_loop, 37% of the first run's compilation. Constants passed to a kernel
# are typed values here (``np.int64(0)``, a bool expression); tests/test_compile_signatures.py checks
# that each kernel has one signature after the simulator's entry points have run. The queue helpers
# (push, pop, enqueue_op, qpush, ready) are compiled once and called, not inlined into the numba IR at
# each of their 25 call sites (``inline="always"``, which types and lowers every copy again): LLVM
# inlines the calls all the same. Cold compile of sim_full + sim_batch (fresh NUMBA_CACHE_DIR, process
# CPU, loaded 2-core machine): 34.2 s -> 19.8 s (one specialisation) -> 16.6 s (helpers called); the
# objective on 1k / 10k-op random placements 1.00x / 1.02-1.04x (thread CPU medians of 5 interleaved
# runs, noise about 5%).


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


# ---------------------------------------------------------------------------- objective-only placeto loop
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


@njit(**HOT)
def finish(GF, CF, CI, place, WI, WF, vf):
    """Status, and the objective R = r + c * ReLU(max_d(peak_d - M_d)) (+ OOM penalty) in WF."""
    n, m, D = CI[0], CI[1], CI[2]
    if WI[S_NRUN] != n:
        WI[S_BAD] = WI[S_NRUN]
        return NOT_ALL_RAN
    resident = vf[F_RESIDENT]
    peak = vf[F_PEAK]
    pbytes = GF[m + 2 * n:m + 3 * n]
    for d in range(D):
        resident[d] = 0.0
    for i in range(n):
        resident[place[i]] += pbytes[i]
    cap = CF[4 + 2 * D * D:4 + 2 * D * D + D]
    over = -np.inf
    for d in range(D):
        v = (resident[d] + peak[d]) - cap[d]
        if v > over:
            over = v
    obj = WF[F_TMAX] + CF[2] * max(over, 0.0)
    if over > 0:
        obj += CF[3]
    WF[F_OBJ] = obj
    WF[F_OVER] = over
    return OK


def sim_full(GI, GF, CF, CI, PI, place, WI, WF, record):
    """One whole simulation into WI/WF. Returns OK, BAD_PLACEMENT (WI[S_BAD] = op) or NOT_ALL_RAN."""
    n, m, D = CI[0], CI[1], CI[2]
    comp = GF[m + 3 * n:m + 3 * n + n * D]
    leader = GI[2 * n + 2 + 3 * m:3 * n + 2 + 3 * m]
    bad = check_placement(place, comp, leader, n, D)
    if bad >= 0:
        WI[S_BAD] = bad
        return BAD_PLACEMENT
    vi, vf = views(WI, WF, n, m, D, heap_extra(CI))
    init_state(GI, GF, CI, place, WI, WF, vi, vf)
    # run_placeto pays off when most ops send a transfer (random-like placements: 1.2-1.35x); on
    # mostly-local placements (one device, contiguous blocks) it measured 2x slower than run_loop
    # (a sample of every 16th edge decides before paying for the prepass)
    fast = False
    if MODEL == PLACETO:  # (a constant: the other models compile none of this)
        fast = not record and D <= FAST_MAX_DEVICES and n > 0
        prepared = False  # whether prepass filled ccnt (the consumer counts that run_placeto counts down to zero)
        if fast:
            succ_idx = GI[n + 1:n + 1 + m]
            edge_src = GI[2 * n + 2 + 2 * m:2 * n + 2 + 3 * m]
            rem = 0
            for e in range(0, m, 16):
                rem += place[edge_src[e]] != place[succ_idx[e]]
            prepared = 5 * rem >= 2 * ((m + 15) // 16)
            fast = prepared and 2 * prepass(GI, GF, CF, CI, place, WI, WF) >= n
        if fast:
            run_placeto(GI, GF, CF, CI, PI, place, WI, WF, vi, vf)
        if fast and WI[S_NRUN] != n or prepared and not fast:  # ccnt is all zero after a run in which every op ran
            o = ccnt_start(n, m, D, np.int64(0))  # (not through xviews: its tuple of views, made here, corrupted the heap)
            for k in range(o, o + n * D):
                WI[k] = 0
    if not fast:
        run_loop(GI, GF, CF, CI, PI, place, WI, WF, vi, vf, record)
    return finish(GF, CF, CI, place, WI, WF, vf)


def sim_rows(GI, GF, CF, CI, PI, places, lo, hi, WI, WF, record, out_obj, out_mk, out_peak, out_status):
    """Rows lo..hi-1 of ``places``, one after the other in the workspace WI/WF (the last row's state is
    left there); with ``out_status`` not empty, each row's objective, makespan, peak bytes per device
    (params included) and status into the outputs. Returns the last row's status. The one compiled
    entry point of a model (see PER_MODEL): :func:`sim_full` is one row, :func:`sim_batch` many."""
    n, m, D = CI[0], CI[1], CI[2]
    o = NSF + 4 * n + 6 * m
    st = OK
    for row in range(lo, hi):
        st = sim_full(GI, GF, CF, CI, PI, places[row], WI, WF, record)
        if len(out_status) > 0:
            out_status[row] = st if st == OK else -1 - WI[S_BAD]
            out_obj[row] = WF[F_OBJ]
            out_mk[row] = WF[F_TMAX]
            for d in range(D):
                out_peak[row, d] = WF[o + D + d] + WF[o + 3 * D + d]
    return st

# ---------------------------------------------------------------------------- one loop per model, compiled when used
# PER_MODEL: numba types, lowers and optimises every branch of a function, so one loop carrying the
# four communication models' transfer code compiled all four for a command that uses one. run_loop,
# sim_full and sim_rows above are templates (plain Python): :func:`entry` binds a model's number to
# the global ``MODEL`` in a copy of this module's globals and compiles them from the same code on the
# first call with that model (numba's branch pruning drops the other models' code: ``MODEL == GIPH``
# compares two constants). One compiled entry point per model, ``sim_rows_<model>``, with sim_full
# inlined into it (numba IR): numba re-optimises everything an entry point links in (the event loops
# included), so a second entry point (a compiled sim_full beside sim_batch) paid for that twice. Each
# is cached under its own name (``run_loop_placeto``, ...: numba names a cache file after the
# function's qualified name) and holds one signature (ONE_SPEC). ``sim_full`` and ``sim_batch`` below
# keep the entry points' signatures and pick the model's by ``CI[3]``.
MODEL = -1  # the templates' placeholder; every compiled copy binds its own
MODEL_NAMES = {PLACETO: "placeto", P2P: "p2p", GIPH: "giph", LINK: "link"}
_TEMPLATES = {"run_loop": (run_loop, HOT), "sim_full": (sim_full, dict(inline="always")),
              "sim_rows": (sim_rows, dict(cache=True, nogil=True))}
_ENTRIES: dict = {}
_MAKING = threading.Lock()  # evaluate_many's threads: one compiled copy per model
_NO_OUT = (np.empty(0), np.empty(0), np.empty((0, 0)), np.empty(0, dtype=np.int64))  # never written


def entry(model: int):
    """The compiled ``sim_rows`` of communication model ``model`` (made on first use)."""
    got = _ENTRIES.get(model)
    if got is not None:
        return got
    with _MAKING:
        got = _ENTRIES.get(model)
        if got is not None:
            return got
        name = MODEL_NAMES[model]
        g = dict(globals(), MODEL=model)  # each finds the model's copy of its callee here
        for base in ("run_loop", "sim_full", "sim_rows"):  # each one's callee first
            fn, opts = _TEMPLATES[base]
            f = types.FunctionType(fn.__code__, g, f"{base}_{name}", fn.__defaults__)
            f.__qualname__ = f.__name__
            f.__doc__ = fn.__doc__
            g[base] = globals()[f.__name__] = njit(**opts)(f)
        got = _ENTRIES[model] = g["sim_rows"]
        return got


def sim_full(GI, GF, CF, CI, PI, place, WI, WF, record):  # noqa: F811 (the template is in _TEMPLATES)
    """One whole simulation into WI/WF under model ``CI[3]``. Returns OK, BAD_PLACEMENT (WI[S_BAD] =
    op) or NOT_ALL_RAN."""
    return entry(int(CI[3]))(GI, GF, CF, CI, PI, place.reshape(1, -1), 0, 1, WI, WF, bool(record), *_NO_OUT)


def sim_batch(GI, GF, CF, CI, PI, places, lo, hi, out_obj, out_mk, out_peak, out_status):
    """Rows lo..hi-1 of ``places`` under model ``CI[3]``: objective, makespan, peak bytes per device
    (params included), status (OK or -1 - the bad op) into the outputs."""
    n, m, D = int(CI[0]), int(CI[1]), int(CI[2])
    ni, nf = ws_sizes(n, m, D, heap_extra(CI))
    WI = np.zeros(ni, dtype=np.int64)  # zeros: sim_full keeps xviews' ccnt zero between runs
    WF = np.empty(nf + link_slots(CI), dtype=np.float64)
    entry(int(CI[3]))(GI, GF, CF, CI, PI, places, int(lo), int(hi), WI, WF, False, out_obj, out_mk, out_peak,
                      out_status)
