"""Per-device memory timeline of a simulated step (Placeto appendix A.5/A.7: peak memory and the
penalty R = r + c * ReLU(m - M)), from a step's timeline.

Resident on device d:
* parameter / persistent bytes of every op placed on d, for the whole step;
* an op's output buffer (``max(output_bytes, bytes of any out-edge)``) from the op's start until its
  last consumer on d finished and its last outgoing transfer arrived (at its end if it has neither);
* a received copy (the bytes that transfer carried) from its arrival until its last consumer on that
  device finished;
* an op's temporary bytes while it runs.
Intervals are half-open [alloc, free): a buffer freed at t makes room for one allocated at t, and a
zero-length interval holds nothing.

The compiled kernel tracks the level event by event; :func:`sweep_peaks` recomputes the peaks from
the intervals by sorting (the independent check the tests use, and the source of the live set).
"""

from __future__ import annotations

import numpy as np


def intervals_from_transfers(problem, placement, start_us, end_us, transfers) -> dict:
    """Memory intervals implied by a timeline; ``transfers`` rows are (op, src, dst, start, end,
    bytes). Returns arrays dev, alloc, free, bytes, owner (the op the bytes belong to), kind
    (0 output, 1 temp, 2 received copy)."""
    g = problem.graph
    p = np.asarray(placement, dtype=np.int64)
    n = g.n_ops
    out_bytes = g.output_bytes.astype(np.float64).copy()
    if g.n_edges:
        np.maximum.at(out_bytes, g.edge_src, g.edge_bytes)
    src, dst = g.edge_src, g.edge_dst
    local = p[src] == p[dst]
    free = end_us.copy()
    np.maximum.at(free, src[local], end_us[dst[local]])
    copies: dict[tuple[int, int], list] = {}
    for (o, s, x, t0, t1, nb) in transfers:
        free[o] = max(free[o], t1)
        copies[(o, x)] = [t1, t1, nb]
    for e in np.flatnonzero(~local):
        c = copies[(int(src[e]), int(p[dst[e]]))]
        c[1] = max(c[1], end_us[dst[e]])
    keys = np.array(list(copies.keys()), dtype=np.int64).reshape(-1, 2)
    vals = np.array(list(copies.values()), dtype=np.float64).reshape(-1, 3)
    return {
        "dev": np.concatenate([p, p, keys[:, 1]]),
        "alloc": np.concatenate([start_us, start_us, vals[:, 0]]),
        "free": np.concatenate([free, end_us, vals[:, 1]]),
        "bytes": np.concatenate([out_bytes, g.temp_bytes, vals[:, 2]]),
        "owner": np.concatenate([np.arange(n), np.arange(n), keys[:, 0]]),
        "kind": np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64), np.full(len(keys), 2, np.int64)]),
    }


def sweep_peaks(iv: dict, n_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """(peak activation bytes per device, time of that peak) by sorting the interval ends: frees
    before allocations at equal times, the first time the maximum is reached. Parameters excluded."""
    peak = np.zeros(n_devices)
    peak_t = np.zeros(n_devices)
    keep = (iv["bytes"] > 0) & (iv["free"] > iv["alloc"])
    for d in range(n_devices):
        m = keep & (iv["dev"] == d)
        if not m.any():
            continue
        a, f, s = iv["alloc"][m], iv["free"][m], iv["bytes"][m]
        times = np.concatenate([a, f])
        delta = np.concatenate([s, -s])
        is_alloc = np.concatenate([np.ones(len(a)), np.zeros(len(f))])
        order = np.lexsort((is_alloc, times))
        level = np.cumsum(delta[order])
        k = int(np.argmax(level))
        if level[k] > 0:
            peak[d], peak_t[d] = level[k], times[order][k]
    return peak, peak_t


def live_at(iv: dict, placement, param_bytes, peak_t) -> list[np.ndarray]:
    """Per device, the ops whose memory is live at that device's peak time: owners of intervals with
    alloc <= t < free, and ops whose parameters live there."""
    p = np.asarray(placement)
    out = []
    for d, t in enumerate(peak_t):
        m = (iv["dev"] == d) & (iv["bytes"] > 0) & (iv["alloc"] <= t) & (iv["free"] > t)
        params = np.flatnonzero((p == d) & (param_bytes > 0))
        out.append(np.union1d(np.unique(iv["owner"][m]), params).astype(np.int64))
    return out


def memory_counter_events(iv: dict, resident: np.ndarray, device_names, pid: int = 0) -> list[dict]:
    """Chrome-trace counter events ("C") with each device's resident bytes over time."""
    ev = []
    keep = (iv["bytes"] > 0) & (iv["free"] > iv["alloc"])
    for d, name in enumerate(device_names):
        m = keep & (iv["dev"] == d)
        a, f, s = iv["alloc"][m], iv["free"][m], iv["bytes"][m]
        times = np.concatenate([[0.0], a, f])
        delta = np.concatenate([[resident[d]], s, -s])
        order = np.argsort(times, kind="stable")
        level = np.cumsum(delta[order])
        t_sorted = times[order]
        last = np.r_[t_sorted[1:] != t_sorted[:-1], True]  # one sample per timestamp
        for t, v in zip(t_sorted[last].tolist(), level[last].tolist()):
            ev.append({"ph": "C", "name": f"{name} memory", "pid": pid, "ts": t, "args": {"bytes": v}})
    return ev
