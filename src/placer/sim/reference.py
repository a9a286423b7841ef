"""A plain-Python event simulator of Placeto's execution model (appendix A.5), kept as the
readable reference the compiled kernel is tested against.

Per device: a FIFO queue of runnable ops ordered by (time it became runnable, topological index)
and, for the ``placeto`` communication model, one outgoing bus with a FIFO queue of output tensors.
An op is runnable on its device once every parent has finished and the parent's tensor has arrived.
One op at a time per device; transfers overlap compute. All events with the same timestamp are
handled before any device or bus picks its next item, so the order of simultaneous events never
matters.
"""

from __future__ import annotations

import heapq

import numpy as np

from placer.sim.result import SimParams


def link_matrices(problem, params: SimParams) -> tuple[np.ndarray, np.ndarray]:
    bw = problem.bandwidth_bytes_per_us.copy()
    lat = problem.latency_us.copy()
    if params.bandwidth_bytes_per_us is not None:
        bw[:] = params.bandwidth_bytes_per_us
    if params.latency_us is not None:
        lat[:] = params.latency_us
    return bw, lat


def simulate_timeline(problem, placement: np.ndarray, params: SimParams):
    """Return (start_us, end_us, transfers) for the ``placeto`` communication model.

    transfers: list of (tensor op, src device, dst device, start_us, end_us); in the placeto model a
    tensor crosses the bus once and reaches every remote consumer device at the same time.
    """
    if params.comm_model != "placeto":
        raise ValueError(f"the reference simulator implements comm_model='placeto', not {params.comm_model!r}")
    g = problem.graph
    n, D = g.n_ops, problem.n_devices
    p = np.asarray(placement, dtype=np.int64)
    cost = problem.compute_us[np.arange(n), p]
    bw, lat = link_matrices(problem, params)
    succ_ptr, succ_idx, succ_edge = g.succ_ptr, g.succ_idx, g.succ_edge
    missing = np.diff(g.pred_ptr).astype(np.int64)  # parents not yet arrived, per op

    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    ready = [[] for _ in range(D)]  # heaps of (ready time, op)
    bus_q = [[] for _ in range(D)]  # heaps of (enqueue time, op)
    dev_free = [True] * D
    bus_free = [True] * D
    transfers = []
    events: list[tuple[float, int, int, int]] = []  # (time, kind, a, b): 0 op done, 1 transfer done, 2 dev wake, 3 bus wake

    for i in range(n):
        if missing[i] == 0:
            heapq.heappush(ready[p[i]], (0.0, i))

    def dispatch(t):
        for d in range(D):
            if dev_free[d] and ready[d]:
                _, i = heapq.heappop(ready[d])
                start[i], end[i] = t, t + cost[i]
                dev_free[d] = False
                heapq.heappush(events, (end[i], 0, i, d))
            if bus_free[d] and bus_q[d]:
                _, i = heapq.heappop(bus_q[d])
                dsts = sorted({int(p[c]) for c in succ_idx[succ_ptr[i]:succ_ptr[i + 1]] if p[c] != d})
                nbytes = max(g.edge_bytes[e] for e in succ_edge[succ_ptr[i]:succ_ptr[i + 1]] if p[succ_idx[e]] != d)
                dur = max(lat[d, x] + nbytes / bw[d, x] for x in dsts)
                for x in dsts:
                    transfers.append((i, d, x, t, t + dur))
                bus_free[d] = False
                heapq.heappush(events, (t + dur, 1, i, d))

    def arrive(c, t):
        missing[c] -= 1
        if missing[c] == 0:
            heapq.heappush(ready[p[c]], (t, c))

    dispatch(0.0)
    while events:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, a, d = heapq.heappop(events)
            if kind == 0:  # op a done on device d
                remote = False
                for c in succ_idx[succ_ptr[a]:succ_ptr[a + 1]]:
                    if p[c] == d:
                        arrive(c, t)
                    else:
                        remote = True
                if remote:
                    heapq.heappush(bus_q[d], (t, a))
                if params.op_gap_us > 0 and cost[a] > 0:
                    heapq.heappush(events, (t + params.op_gap_us, 2, -1, d))
                else:
                    dev_free[d] = True
            elif kind == 1:  # tensor of op a arrived at every remote consumer
                for c in succ_idx[succ_ptr[a]:succ_ptr[a + 1]]:
                    if p[c] != d:
                        arrive(c, t)
                if params.bus_gap_us > 0:
                    heapq.heappush(events, (t + params.bus_gap_us, 3, -1, d))
                else:
                    bus_free[d] = True
            elif kind == 2:
                dev_free[d] = True
            else:
                bus_free[d] = True
        dispatch(t)

    if np.isnan(end).any():
        i = int(np.flatnonzero(np.isnan(end))[0])
        raise RuntimeError(f"op '{g.op_names[i]}' never ran: the graph has a cycle or a parent never finished")
    return start, end, transfers
