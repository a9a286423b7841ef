"""Per-device memory timeline of a simulated step (Placeto appendix: peak memory and the
penalty R = r + c * ReLU(m - M)).

Resident on device d:
* parameters / persistent bytes of every op placed on d, for the whole step;
* an op's output tensor from the op's start until its last consumer on d finished, and until its
  last outgoing transfer ended if it is sent elsewhere (an op with no consumer frees it at its end);
* a received copy from its arrival until its last consumer on that device finished;
* an op's temporary bytes while it runs.
Intervals are half-open [alloc, free): a tensor freed at t makes room for one allocated at t.
"""

from __future__ import annotations

import numpy as np


def memory_peaks(problem, placement, start_us, end_us, transfers):
    """Return (peak bytes per device, ops live at each device's peak)."""
    g = problem.graph
    n, D = g.n_ops, problem.n_devices
    p = np.asarray(placement, dtype=np.int64)
    resident = np.bincount(p, weights=g.param_bytes, minlength=D).astype(np.float64)
    src, dst, eb = g.edge_src, g.edge_dst, g.edge_bytes
    out_bytes = np.maximum(g.output_bytes, _max_by(src, eb, n))
    # last local use of each op's own output
    free_t = end_us.copy()
    local = p[src] == p[dst]
    np.maximum.at(free_t, src[local], end_us[dst[local]])
    # transfers keep the source buffer until sent; received copies live until the last local consumer
    recv = {}
    for (o, s, x, t0, t1) in _iter_transfers(transfers):
        free_t[o] = max(free_t[o], t1)
        recv.setdefault((o, x), [t1, t1])
    for e in np.flatnonzero(~local):
        key = (int(src[e]), int(p[dst[e]]))
        if key in recv:
            recv[key][1] = max(recv[key][1], end_us[dst[e]])
    # intervals: (device, alloc, free, bytes, op)
    dev = [p, p]
    allocs = [start_us, start_us]
    frees = [free_t, end_us]
    sizes = [out_bytes, g.temp_bytes]
    owners = [np.arange(n), np.arange(n)]
    if recv:
        keys = np.array(list(recv.keys()), dtype=np.int64)
        times = np.array(list(recv.values()), dtype=np.float64)
        dev.append(keys[:, 1]); allocs.append(times[:, 0]); frees.append(times[:, 1])
        sizes.append(out_bytes[keys[:, 0]]); owners.append(keys[:, 0])
    dev, allocs, frees = np.concatenate(dev), np.concatenate(allocs), np.concatenate(frees)
    sizes, owners = np.concatenate(sizes), np.concatenate(owners)
    keep = sizes > 0
    dev, allocs, frees, sizes, owners = dev[keep], allocs[keep], frees[keep], sizes[keep], owners[keep]
    peak = resident.copy()
    peak_ops = [np.flatnonzero((p == d) & (g.param_bytes > 0)) for d in range(D)]
    for d in range(D):
        m = dev == d
        if not m.any():
            continue
        a, f, s, o = allocs[m], frees[m], sizes[m], owners[m]
        times = np.concatenate([a, f])
        delta = np.concatenate([s, -s])
        kind = np.concatenate([np.ones(len(a)), np.zeros(len(f))])  # frees (0) before allocs (1) at equal times
        order = np.lexsort((kind, times))
        level = resident[d] + np.cumsum(delta[order])
        k = int(np.argmax(level))
        if level[k] > peak[d]:
            peak[d] = level[k]
            t_peak = times[order][k]
            live = (a <= t_peak) & (f > t_peak)
            peak_ops[d] = np.union1d(np.unique(o[live]), peak_ops[d])
    return peak, peak_ops


def _max_by(keys, values, n):
    out = np.zeros(n)
    if len(keys):
        np.maximum.at(out, keys, values)
    return out


def _iter_transfers(t):
    if isinstance(t, dict):
        return zip(t["tensor"].tolist(), t["src"].tolist(), t["dst"].tolist(), t["start_us"].tolist(), t["end_us"].tolist())
    return iter(t)
