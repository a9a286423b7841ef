"""A plain-Python event simulator of Placeto's execution model (appendix A.5), kept as the readable
reference the compiled kernel (:mod:`placer.sim.kernel`) is tested against. Slow; never used by
methods.

Semantics (shared with the kernel, see :mod:`placer.sim` for the full statement):

* Per device, a FIFO of runnable ops in the order they became runnable. An op becomes runnable on
  its device once every parent finished and the parent's tensor arrived there. One op at a time.
* A device that finishes an op with non-zero cost idles for ``op_gap_us`` before starting the next.
* ``placeto`` communication: when an op with consumers on other devices finishes, its output joins
  the FIFO of its device's single outgoing bus. The bus sends one tensor at a time: it reaches every
  remote consumer device ``max_x(latency[s,x] + bytes / bandwidth[s,x])`` later, ``bytes`` being
  the largest edge to a remote consumer; the bus then stays busy ``bus_gap_us`` more.
* ``p2p`` communication: one transfer per (tensor, destination device), ``bytes`` the largest edge
  to a consumer on that device, taking ``latency + bytes / bandwidth`` of that link. A device sends
  one transfer at a time and receives one at a time. A free sender starts the oldest transfer in its
  FIFO whose receiver is free (skipping, not waiting behind, transfers to busy receivers); a
  receiver that becomes free wakes the idle senders. ``bus_gap_us`` follows every send on the sender.
* Simultaneous events run in the order (time, kind, producer priority / device index, destination)
  with kind: op done / tensor arrived (0) < sender wakes (1) < device wakes (2). An op's priority is
  its topological index (``tie_break="index"``) or the rank of its name in string order
  (``tie_break="name"``, the published reference simulator's order: its heap holds
  ``(time, event, (producer name, consumer name))``). An event releases its consumers in priority
  order too, so ops that become runnable together are queued in that order.
* The makespan is the time of the last event: the last op's end plus its op gap, or the last
  arrival plus the bus gap, whichever is later (what the published reference simulator returns).
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from placer.sim.prepare import link_matrices
from placer.sim.result import SimParams

OP_DONE_OR_ARRIVAL, SENDER_WAKE, DEVICE_WAKE = 0, 1, 2


def simulate_reference(problem, placement, params: SimParams) -> dict:
    """Run one step. Returns a dict: makespan_us, start_us, end_us (n,), transfers (list of
    (tensor op, src, dst, start_us, end_us, bytes)), sorted by (start, tensor, dst)."""
    g = problem.graph
    n, D = g.n_ops, problem.n_devices
    p = [int(x) for x in placement]
    cost = [float(problem.compute_us[i, p[i]]) for i in range(n)]
    bw, lat = link_matrices(problem, params)
    bw, lat = bw.tolist(), lat.tolist()
    if params.tie_break == "name":
        order = sorted(range(n), key=g.op_names.__getitem__)
        prio = [0] * n
        for r, i in enumerate(order):
            prio[i] = r
    else:
        prio = list(range(n))
    children = [sorted(((int(g.succ_idx[e]), float(g.edge_bytes[e])) for e in range(g.succ_ptr[i], g.succ_ptr[i + 1])),
                       key=lambda ce: prio[ce[0]]) for i in range(n)]
    missing = np.diff(g.pred_ptr).tolist()
    p2p = params.comm_model == "p2p"
    if params.comm_model not in ("placeto", "p2p"):
        raise ValueError(f"unknown comm_model {params.comm_model!r}")

    start = [None] * n
    end = [None] * n
    transfers = []
    events: list = []  # (time, kind, a, b, payload): a = priority of the op (kind 0) or a device
    dev_q = [deque() for _ in range(D)]
    dev_on = [False] * D  # running, idling in its gap, or a wake-up is pending
    send_q = [[] for _ in range(D)]  # FIFO of (tensor op, destinations, bytes)
    send_on = [False] * D
    recv_busy = [False] * D

    def runnable(c, t):
        d = p[c]
        dev_q[d].append(c)
        if not dev_on[d]:
            dev_on[d] = True
            heapq.heappush(events, (t, DEVICE_WAKE, d, 0, None))

    def queue_send(s, item, t):
        send_q[s].append(item)
        if not send_on[s]:
            send_on[s] = True
            heapq.heappush(events, (t, SENDER_WAKE, s, 0, None))

    for i in range(n):
        if missing[i] == 0:
            runnable(i, 0.0)

    last = 0.0
    while events:
        t, kind, a, b, item = heapq.heappop(events)
        last = t
        if kind == OP_DONE_OR_ARRIVAL:
            a, item = item  # the op, and the destinations of an arrival
        if kind == DEVICE_WAKE:
            if not dev_q[a]:
                dev_on[a] = False
                continue
            c = dev_q[a].popleft()
            start[c], end[c] = t, t + cost[c]
            heapq.heappush(events, (end[c], OP_DONE_OR_ARRIVAL, prio[c], 0, (c, None)))
            heapq.heappush(events, (end[c] + (params.op_gap_us if cost[c] > 0 else 0.0), DEVICE_WAKE, a, 0, None))
        elif kind == OP_DONE_OR_ARRIVAL and b == 0:  # op a finished
            s = p[a]
            remote: dict[int, float] = {}
            for c, nb in children[a]:
                if p[c] == s:
                    missing[c] -= 1
                    if missing[c] == 0:
                        runnable(c, t)
                else:
                    remote[p[c]] = max(remote.get(p[c], 0.0), nb)
            if remote and not p2p:
                nb = max(remote.values())
                queue_send(s, (a, sorted(remote), nb), t)
            for x in sorted(remote) if p2p else ():
                queue_send(s, (a, [x], remote[x]), t)
        elif kind == OP_DONE_OR_ARRIVAL:  # tensor of op a arrived at its destination(s)
            dsts = item
            for c, _ in children[a]:
                if p[c] in dsts:
                    missing[c] -= 1
                    if missing[c] == 0:
                        runnable(c, t)
            if p2p:
                recv_busy[dsts[0]] = False
                for s2 in range(D):
                    if not send_on[s2] and send_q[s2]:
                        send_on[s2] = True
                        heapq.heappush(events, (t, SENDER_WAKE, s2, 0, None))
        else:  # sender a wakes up
            q = send_q[a]
            pick = next((k for k, it in enumerate(q) if not (p2p and recv_busy[it[1][0]])), None)
            if pick is None:
                send_on[a] = False
                continue
            u, dsts, nb = q.pop(pick)
            dur = max(lat[a][x] + nb / bw[a][x] for x in dsts)
            arr = t + dur
            for x in dsts:
                transfers.append((u, a, x, t, arr, nb))
            if p2p:
                recv_busy[dsts[0]] = True
            heapq.heappush(events, (arr, OP_DONE_OR_ARRIVAL, prio[u], 1 + (dsts[0] if p2p else 0), (u, dsts)))
            heapq.heappush(events, (arr + params.bus_gap_us, SENDER_WAKE, a, 0, None))

    never = [i for i in range(n) if end[i] is None]
    if never:
        raise RuntimeError(f"op '{g.op_names[never[0]]}' (and {len(never) - 1} more) never ran: "
                           "the graph has a cycle or a parent never finished")
    transfers.sort(key=lambda r: (r[3], r[0], r[2]))
    return {"makespan_us": last, "start_us": np.array(start, dtype=np.float64),
            "end_us": np.array(end, dtype=np.float64), "transfers": transfers}
