"""Restart a finished simulation from time T0 after some ops changed device (the progressive MDP's
fast path, Placeto section 2 "MDP formulation": one op moves per step).

Why it is exact: the events an op ``v`` influences all happen at or after the earliest time one of
its parents finishes (that op-done event is where the parent decides between a local release and a
transfer, and where ``v`` can first become runnable); an op without parents is queued at t = 0.
So with ``T0 = min over changed ops of min over their parents of end_us`` every event before T0 is
the same in the old and the new run, and the state "after every event with time < T0" can be read
back from the old run's records instead of being recomputed:

* ops started before T0 (a prefix of the dispatch list, which is ordered by start time) keep their
  times; the one running at T0 on each device gets its op-done and its wake-up back on the heap;
* ops queued before T0 but not started go back to their device FIFO in queue order;
* the missing-parent counts of the other ops count the parents that finished (or whose tensor
  arrived) before T0;
* transfers in flight at T0 get their arrival and sender wake-up back; queued ones their FIFO place;
* buffers live at T0 (outputs, temps of running ops, received copies) give each device's level and
  their remaining use counts; the peak before T0 comes from the log of peak increases.

Then the ordinary event loop replays everything from T0 on. Cost: O(n + m) cheap scans plus the
replayed suffix, against the whole event loop for a full run (see benchmarks/sim_speed.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.sim.kernel import (
    F_BUSFREE, F_DEVFREE, F_LFREE, F_TCUR, F_TMAX, P2P, S_HSIZE, S_NDIRTY, S_NLOG, S_NRUN, S_NXE, S_NXS, finish,
    gviews, key, push, run_loop, views,
)


@njit(cache=True, nogil=True)
def _first_at_or_after(times_of, idx, count, T0):
    """First position k in idx[0:count] with times_of[idx[k]] >= T0 (times nondecreasing along idx)."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) >> 1
        if times_of[idx[mid]] >= T0:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def restore(GI, GF, CF, CI, place, WI, WF, T0, vi, vf):
    n, m, D, model = CI[0], CI[1], CI[2], CI[3]
    succ_ptr, succ_idx, pred_ptr, pred_edge, edge_src, leader, pred_idx, ebytes, obytes, tbytes, pbytes, comp = (
        gviews(GI, GF, n, m, D))
    op_gap, bus_gap = CF[0], CF[1]
    missing, use_cnt, fifo, enq_seq, disp, disp_prev = vi[0], vi[1], vi[2], vi[3], vi[4], vi[5]
    copy_rep, copy_cnt, xq_next, xe_list, xs_list, xs_prev = vi[6], vi[7], vi[8], vi[10], vi[11], vi[12]
    dev_head, dev_tail, dev_act, dev_last = vi[13], vi[14], vi[15], vi[16]
    bus_head, bus_tail, bus_act, bus_last, recv = vi[17], vi[18], vi[19], vi[20], vi[21]
    is_dirty, first, log_last, hk, hp, log_prev = vi[23], vi[24], vi[25], vi[26], vi[27], vi[28]
    start, end, enq_t, out_free, xf_start, xf_arr, cbytes = vf[0], vf[1], vf[2], vf[3], vf[4], vf[5], vf[7]
    carr, cfree, level, peak, peak_t, ht, log_t, log_level = vf[8], vf[9], vf[10], vf[11], vf[12], vf[14], vf[15], vf[16]
    lfree = vf[F_LFREE]
    dev_free, bus_free = vf[F_DEVFREE], vf[F_BUSFREE]

    for d in range(D):
        dev_head[d] = -1
        dev_tail[d] = -1
        dev_act[d] = 0
        bus_head[d] = -1
        bus_tail[d] = -1
        bus_act[d] = 0
        recv[d] = 0
        is_dirty[d] = 0
        first[d] = -1
        level[d] = 0.0
    hsize = 0

    # ops: the dispatch list is ordered by start time
    k0 = _first_at_or_after(start, disp, n, T0)
    for d in range(D):
        pos = dev_last[d]
        while pos >= k0:
            pos = disp_prev[pos]
        dev_last[d] = pos
        dev_free[d] = 0.0
        if pos >= 0:
            u = disp[pos]
            e_t = end[u]
            if e_t >= T0:  # running at T0
                hsize = push(ht, hk, hp, hsize, e_t, key(0, u, 0), -1)
                level[d] += tbytes[u]
            dev_free[d] = e_t + (op_gap if comp[u * D + d] > 0 else 0.0)

    # buffers of ops that started before T0
    for k in range(k0):
        u = disp[k]
        d = place[u]
        if end[u] >= T0:
            level[d] += obytes[u]
            continue
        if lfree[u] < T0:  # every buffer of u was freed before T0
            continue
        nloc = 0
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            c = succ_idx[e]
            x = place[c]
            if x == d:
                if end[c] >= T0:
                    nloc += 1
            elif copy_rep[e] == e:
                if cfree[e] >= T0:  # the copy on x is live at T0 or not there yet
                    cnt = 0
                    for e2 in range(e, succ_ptr[u + 1]):
                        c2 = succ_idx[e2]
                        if place[c2] == x and end[c2] >= T0:
                            cnt += 1
                    copy_cnt[e] = cnt
                    if carr[e] < T0:
                        level[x] += cbytes[e]
        if out_free[u] >= T0:
            ntx = 0
            if model == P2P:
                for e in range(succ_ptr[u], succ_ptr[u + 1]):
                    if place[succ_idx[e]] != d and copy_rep[e] == e and xf_arr[e] >= T0:
                        ntx += 1
            else:
                for e in range(succ_ptr[u], succ_ptr[u + 1]):
                    if place[succ_idx[e]] != d:
                        if xf_arr[e] >= T0:
                            ntx = 1
                        break
            use_cnt[u] = nloc + ntx
            level[d] += obytes[u]

    # ops not started before T0: parents done, and the FIFO of those already runnable
    nq = 0
    qbuf = np.empty(n - k0, dtype=np.int64)
    for k in range(k0, n):
        c = disp[k]
        x = place[c]
        cnt = pred_ptr[c + 1] - pred_ptr[c]
        for j in range(pred_ptr[c], pred_ptr[c + 1]):
            e = pred_edge[j]
            w = edge_src[e]
            if end[w] < T0 and (place[w] == x or carr[copy_rep[e]] < T0):
                cnt -= 1
        missing[c] = cnt
        if enq_t[c] < T0:
            qbuf[nq] = c
            nq += 1
    if nq:
        qs = qbuf[:nq]
        order = np.argsort(enq_seq[qs])
        for j in range(nq):
            c = qs[order[j]]
            x = place[c]
            fifo[c] = -1
            if dev_tail[x] < 0:
                dev_head[x] = c
            else:
                fifo[dev_tail[x]] = c
            dev_tail[x] = c
    for d in range(D):  # a device with queued ops has its wake-up pending (at the end of its gap)
        if dev_head[d] >= 0:
            hsize = push(ht, hk, hp, hsize, dev_free[d], key(2, d, 0), -1)
            dev_act[d] = 1

    # transfers: started ones (ordered by start), queued ones (ordered by queue time)
    n_xs = WI[S_NXS]
    j_s = _first_at_or_after(xf_start, xs_list, n_xs, T0)
    for s in range(D):
        pos = bus_last[s]
        while pos >= j_s:
            pos = xs_prev[pos]
        bus_last[s] = pos
        bus_free[s] = 0.0
        if pos >= 0:
            r = xs_list[pos]
            arr = xf_arr[r]
            if arr >= T0:  # in flight
                b = 1
                if model == P2P:
                    x = place[succ_idx[r]]
                    recv[x] = 1
                    b = 1 + x
                hsize = push(ht, hk, hp, hsize, arr, key(0, edge_src[r], b), r)
            bus_free[s] = arr + bus_gap
    n_xe = WI[S_NXE]
    lo, hi = 0, n_xe
    while lo < hi:
        mid = (lo + hi) >> 1
        if end[edge_src[xe_list[mid]]] >= T0:
            hi = mid
        else:
            lo = mid + 1
    j_e = lo
    qx = np.empty(j_e, dtype=np.int64)
    nqx = 0
    closed = np.zeros(D, dtype=np.int64)
    n_closed = 0
    for j in range(j_e - 1, -1, -1):
        r = xe_list[j]
        s = place[edge_src[r]]
        if xf_start[r] >= T0:
            if closed[s] == 0:
                qx[nqx] = r
                nqx += 1
        elif model != P2P and closed[s] == 0:
            closed[s] = 1
            n_closed += 1
            if n_closed == D:
                break
    for j in range(nqx - 1, -1, -1):
        r = qx[j]
        s = place[edge_src[r]]
        xq_next[r] = -1
        if bus_tail[s] < 0:
            bus_head[s] = r
        else:
            xq_next[bus_tail[s]] = r
        bus_tail[s] = r

    for s in range(D):  # a sender with queued transfers wakes when free (a blocked p2p sender waits)
        if bus_head[s] >= 0 and bus_free[s] >= T0:
            hsize = push(ht, hk, hp, hsize, bus_free[s], key(1, s, 0), -1)
            bus_act[s] = 1

    # peaks before T0 from the log of peak increases
    n_log = WI[S_NLOG]
    lo, hi = 0, n_log
    while lo < hi:
        mid = (lo + hi) >> 1
        if log_t[mid] >= T0:
            hi = mid
        else:
            lo = mid + 1
    for d in range(D):
        pos = log_last[d]
        while pos >= lo:
            pos = log_prev[pos]
        log_last[d] = pos
        if pos >= 0:
            peak[d] = log_level[pos]
            peak_t[d] = log_t[pos]
        else:
            peak[d] = 0.0
            peak_t[d] = 0.0

    WI[S_HSIZE] = hsize
    WI[S_NRUN] = k0
    WI[S_NXS] = j_s
    WI[S_NXE] = j_e
    WI[S_NLOG] = lo
    WI[S_NDIRTY] = 0
    WF[F_TCUR] = T0
    WF[F_TMAX] = 0.0


@njit(cache=True, nogil=True)
def sim_from(GI, GF, CF, CI, place, WI, WF, T0):
    """Restore the state at T0 from the previous run in WI/WF, replay, and finish."""
    n, m, D = CI[0], CI[1], CI[2]
    vi, vf = views(WI, WF, n, m, D)
    restore(GI, GF, CF, CI, place, WI, WF, T0, vi, vf)
    run_loop(GI, GF, CF, CI, place, WI, WF, vi, vf, True)
    return finish(GF, CF, CI, place, WI, WF, vf)
