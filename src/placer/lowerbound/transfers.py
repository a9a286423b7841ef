"""Transfers as resources in the exact relaxation (docs/bounds.md, "exact"): what each
communication model of docs/simulator.md makes a transfer wait for, kept as a relaxation.

* ``placeto``: one transfer per op whose output has a consumer on another device, on its device's
  bus; it lasts at least ``latency + bytes / bandwidth`` to each remote consumer's device for each
  remote consumer's edge (the simulator sends the largest remote edge over the slowest remote
  link), and the bus is busy from its start to its arrival plus ``bus_gap``, one transfer at a time.
* ``p2p``: one transfer per (op, destination device) with a consumer there, as long as each of those
  consumers' edges needs; the sender is busy until the arrival plus ``bus_gap``, the receiver until
  the arrival, each one transfer at a time.
* ``link``: the same transfers, each holding its link's resource until the arrival plus ``bus_gap``.
* ``giph``: nothing waits (the per-edge delays of :mod:`placer.lowerbound.cpsat` are exact).

Every transfer starts after its op ends and its consumers start after it arrives; the step ends
after every arrival plus ``bus_gap`` (the simulator's last event). The order in which transfers use
a resource is free (the simulator's is FIFO): a relaxation. Only edges between ops of the set are
modelled; transfers to ops outside it are dropped (a relaxation too).
"""

from __future__ import annotations

import numpy as np


def add_transfers(m, relax, S, x, end, start, T, H, f, pos) -> None:
    """Add the transfer resources of ``relax.comm_model`` to the CP-SAT model ``m`` (``x[i][d]``:
    op S[i] on device d; ``H``: the horizon; ``f``: time to model units, rounded down)."""
    model = relax.comm_model
    if model == "giph" or relax.D < 2:
        return
    g = relax.graph
    gap = f(relax.bus_gap_us)
    res: dict = {}  # resource key -> intervals

    def consumers(u):
        out = []
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            j = pos.get(int(g.succ_idx[e]))
            if j is not None:
                out.append((j, float(g.edge_bytes[g.succ_edge[e]])))
        return out

    for i, u in enumerate(np.asarray(S).tolist()):
        cons = consumers(u)
        if not cons:
            continue
        if model == "placeto":
            ts, du, done = _timing(m, H)
            m.Add(ts >= end[i])
            for a, xa in x[i].items():
                t = m.NewBoolVar("")
                m.AddImplication(t, xa)
                for j, nb in cons:
                    for c, xc in x[j].items():
                        if c == a:
                            continue
                        m.AddBoolOr([t, xa.Not(), xc.Not()])
                        m.Add(du >= f(relax.delay(a, c, nb))).OnlyEnforceIf([xa, xc])
                        m.Add(start[j] >= done).OnlyEnforceIf([xa, xc])
                res.setdefault(("bus", a), []).append(m.NewOptionalIntervalVar(ts, du + gap, done + gap, t, ""))
                m.Add(T >= done + gap).OnlyEnforceIf(t)
            continue
        for b in range(relax.D):  # p2p, link: one transfer per destination device
            here = [(j, nb) for j, nb in cons if b in x[j]]
            if not here or all(a == b for a in x[i]):
                continue
            t = m.NewBoolVar("")
            ts, du, done = _timing(m, H)
            m.Add(ts >= end[i]).OnlyEnforceIf(t)
            for j, nb in here:
                on_b = [x[j][b].Not()] + ([x[i][b]] if b in x[i] else [])
                m.AddBoolOr([t] + on_b)  # a consumer on b and u elsewhere: the transfer exists
                m.Add(start[j] >= done).OnlyEnforceIf([t, x[j][b]])
                for a, xa in x[i].items():
                    if a != b:
                        m.Add(du >= f(relax.delay(a, b, nb))).OnlyEnforceIf([xa, x[j][b]])
            m.Add(T >= done + gap).OnlyEnforceIf(t)
            for a, xa in x[i].items():
                if a == b:
                    continue
                s = m.NewBoolVar("")  # the transfer leaves a
                m.AddBoolOr([s, t.Not(), xa.Not()])
                m.AddImplication(s, t)
                m.AddImplication(s, xa)
                key = ("send", a) if model == "p2p" else ("link", int(relax.resources[a, b]))
                res.setdefault(key, []).append(m.NewOptionalIntervalVar(ts, du + gap, done + gap, s, ""))
            if model == "p2p":
                res.setdefault(("recv", b), []).append(m.NewOptionalIntervalVar(ts, du, done, t, ""))
    for ivs in res.values():
        if len(ivs) > 1:
            m.AddNoOverlap(ivs)


def _timing(m, H):
    """(start, duration, arrival) of one transfer, arrival = start + duration."""
    ts, du, done = m.NewIntVar(0, H, ""), m.NewIntVar(0, H, ""), m.NewIntVar(0, 2 * H, "")
    m.Add(done == ts + du)
    return ts, du, done
