"""A pure-Python oracle of the GiPH authors' evaluator, for tests (as :mod:`placer.sim.reference`
is the Placeto authors' simulator's).

Source: ``env/latency.py`` of the public repository uidmice/placement-rl (GiPH, Hu et al.,
MLSys 2023), function ``simulate``: a SimPy model of a task graph placed on a device network.
Written here from its description, not copied. What it counts:

* an op's compute time on its device (``op_compute[op] * comp_rate[dev]`` there; here the
  Problem's ``compute_us[op, dev]``);
* one transfer per *edge* ``(u, v)`` with that edge's bytes, started when ``u`` ends, taking
  ``0`` if both ops share a device, else ``comm_delay[a, b] + bytes * comm_rate[a, b]`` (here
  ``latency_us[a, b] + bytes / bandwidth[a, b]``); transfers never wait for each other (no bus,
  no link, no endpoint is a resource);
* an op waits until every input edge has arrived, then requests its device, a SimPy ``Resource``
  of capacity 1 (one op at a time, requests granted first come, first served; a device released at
  the end of an op is granted to the next waiting request before that op's outputs leave);
* the makespan is the simulation's final time (``env.now`` once no event is left), which is the
  end of the last op: every transfer arrives before its consumer starts.

Simultaneous events run in the order they were scheduled (SimPy's event queue is ordered by time,
then insertion), which fixes the order of ops that become ready on one device at once: the ops with
no inputs in op order at time 0, and the consumers one op releases in its edge order. The compiled
kernel (``SimParams(comm_model="giph")``) equals this on every instance whose remote transfers take
some time (tests/test_comm_models.py).
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import count

import numpy as np


def giph_schedule(n_ops: int, edges, compute_us, bandwidth, latency, place):
    """(start, end, makespan) of ``place`` under GiPH's evaluator. ``edges``: (src, dst, bytes) in
    edge order; ``compute_us``: (n, D), ``bandwidth`` (bytes/us) and ``latency`` (us): (D, D)."""
    place = [int(d) for d in place]
    comp = np.asarray(compute_us, dtype=float)
    out: list[list[tuple[int, float]]] = [[] for _ in range(n_ops)]
    missing = [0] * n_ops
    for u, v, b in edges:
        out[int(u)].append((int(v), float(b)))
        missing[int(v)] += 1
    D = comp.shape[1]
    busy = [False] * D
    waiting: list[deque] = [deque() for _ in range(D)]
    start = [float("nan")] * n_ops
    end = [float("nan")] * n_ops
    events: list = []
    tick = count()

    def run(op: int, t: float) -> None:
        cost = float(comp[op, place[op]])
        if not np.isfinite(cost):
            raise ValueError(f"op {op} cannot run on device {place[op]}")
        start[op] = t
        heapq.heappush(events, (t + cost, next(tick), "done", op))

    def request(op: int, t: float) -> None:
        d = place[op]
        if busy[d]:
            waiting[d].append(op)
        else:
            busy[d] = True
            run(op, t)

    for op in range(n_ops):  # the ops without inputs, in op order
        if missing[op] == 0:
            request(op, 0.0)
    now = 0.0
    while events:
        now, _, kind, x = heapq.heappop(events)
        if kind == "done":
            end[x] = now
            d = place[x]
            if waiting[d]:  # the device goes to the next waiting op first
                run(waiting[d].popleft(), now)
            else:
                busy[d] = False
            for v, b in out[x]:
                dv = place[v]
                dur = 0.0 if dv == d else float(latency[d][dv]) + b / float(bandwidth[d][dv])
                heapq.heappush(events, (now + dur, next(tick), "arrive", v))
        else:
            missing[x] -= 1
            if missing[x] == 0:
                request(x, now)
    if any(e != e for e in end):
        raise RuntimeError("an op never ran (a cycle?)")
    return np.array(start), np.array(end), now


def giph_makespan(problem, place) -> float:
    """The makespan of ``place`` on ``problem`` (a :class:`placer.problem.Problem`) under GiPH's
    evaluator, the edges in the graph's own order."""
    g = problem.graph
    edges = zip(g.edge_src.tolist(), g.edge_dst.tolist(), np.asarray(g.edge_bytes, dtype=float).tolist())
    return giph_schedule(g.n_ops, list(edges), problem.compute_us, problem.bandwidth_bytes_per_us,
                         problem.latency_us, place)[2]
