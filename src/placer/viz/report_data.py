"""The numbers behind the HTML report (``placer ... --html``), without any plotting library.

Everything here is plain numpy on a :class:`placer.sim.SimResult` and the graph: the memory level
of each device over one step, the timeline's bars merged where a graph is too large to draw op by
op, the module tree, and compact encodings of placements for the page's JavaScript.
"""

from __future__ import annotations

import numpy as np

# The most bars one timeline draws (compute and sends together) before ops are merged, and the most
# points one device's memory line keeps: above these a browser's SVG gets slow.
MAX_BARS = 3000
MAX_MEMORY_POINTS = 1500
MAX_TREE_NODES = 4000


# ---------------------------------------------------------------------- memory over the step
def memory_timeline(sim, resident_bytes) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per device, the bytes held over the step as a step function ``(t_us, level)``: ``level[k]``
    holds from ``t_us[k]`` until ``t_us[k + 1]``. The level is the device's resident (parameter)
    bytes plus every memory interval of the simulation live at that time (half-open
    ``[alloc, free)``, so a buffer freed at t makes room for one allocated at t; one point per
    distinct time, the level after every event at that time). Its maximum equals the simulator's
    peak. Starts at t = 0."""
    iv = sim.memory_intervals
    n_dev = len(sim.busy_us)
    resident = np.asarray(resident_bytes, dtype=np.float64)
    out = []
    if iv is None:
        return [(np.zeros(1), resident[d:d + 1].copy()) for d in range(n_dev)]
    keep = (iv["bytes"] > 0) & (iv["free"] > iv["alloc"])
    for d in range(n_dev):
        m = keep & (iv["dev"] == d)
        a, f, s = iv["alloc"][m], iv["free"][m], iv["bytes"][m].astype(np.float64)
        times = np.concatenate([[0.0], a, f])
        delta = np.concatenate([[resident[d]], s, -s])
        order = np.argsort(times, kind="stable")
        level = np.cumsum(delta[order])
        t = times[order]
        last = np.r_[t[1:] != t[:-1], True]  # the level once every event at that time ran
        out.append((t[last], level[last]))
    return out


def peak_of(t: np.ndarray, level: np.ndarray) -> tuple[float, float]:
    """(peak bytes, first time reached) of one device's memory line."""
    k = int(np.argmax(level))
    return float(level[k]), float(t[k])


def downsample_max(t: np.ndarray, level: np.ndarray, max_points: int = MAX_MEMORY_POINTS):
    """At most ``max_points`` points of a step function: the step is cut into ``max_points // 2``
    time bins and each bin keeps its highest level (at the bin's first time, so no peak is lost and
    the drawn line is an upper envelope) and the level it ends on (at its last time). Returns
    ``(t, level, merged)``, ``merged`` telling whether points were dropped."""
    if len(t) <= max_points:
        return t, level, False
    n_bins = max(1, max_points // 2)
    span = float(t[-1] - t[0]) or 1.0
    bins = np.minimum(((t - t[0]) / span * n_bins).astype(np.int64), n_bins - 1)
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    ends = np.r_[starts[1:] - 1, len(t) - 1]
    top = np.maximum.reduceat(level, starts)
    tt = np.stack([t[starts], t[ends]], axis=1).ravel()
    ll = np.stack([top, level[ends]], axis=1).ravel()
    single = np.stack([np.zeros(len(starts), bool), starts == ends], axis=1).ravel()
    return tt[~single], ll[~single], True


# ---------------------------------------------------------------------- timeline bars
def merge_runs(lane, start, end, key, tol: float) -> np.ndarray:
    """Segment ids of runs to draw as one bar: items on one lane, sorted by start, with the same
    ``key`` and at most ``tol`` us idle between one's end and the next's start. Returns for each
    item (in the input order) its run's id; runs are numbered in (lane, start) order."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((start, lane))
    ln, s, e, k = lane[order], start[order], end[order], key[order]
    reach = np.maximum.accumulate(e)  # within a lane items do not overlap, but sends can
    lane_change = ln[1:] != ln[:-1]
    # the running reach must restart at each lane: recompute per lane where a lane starts
    if lane_change.any():
        reach = e.copy()
        bounds = np.r_[0, np.flatnonzero(lane_change) + 1, n]
        for a, b in zip(bounds[:-1], bounds[1:]):
            reach[a:b] = np.maximum.accumulate(e[a:b])
    new = np.r_[True, lane_change | (k[1:] != k[:-1]) | (s[1:] - reach[:-1] > tol)]
    seg = np.cumsum(new) - 1
    out = np.empty(n, dtype=np.int64)
    out[order] = seg
    return out


def bars(lane, start, end, keys, limit: int = MAX_BARS, makespan_us: float = 0.0):
    """Merge items into at most ``limit`` bars. Each item its own bar when they are few; else runs
    of back-to-back items (no idle time between them) with one key, trying ``keys`` from the finest
    (e.g. the module and role) to the coarsest (e.g. the role alone); while even the coarsest leaves
    too many bars, runs of that key with idle gaps up to a tolerance doubling from makespan/limit/8,
    and if the key alone still splits them too finely, runs of any key the same way. Returns
    ``(seg, tol, level)``: each item's bar id, the idle time closed (us; 0 when only back-to-back
    runs were merged, -1 when nothing was merged) and the index of the key used (-1: none;
    ``len(keys)``: no key)."""
    n = len(start)
    if n <= limit:
        return np.arange(n, dtype=np.int64), -1.0, -1
    for level, key in enumerate(keys):
        seg = merge_runs(lane, start, end, key, 0.0)
        if seg.max(initial=-1) + 1 <= limit:
            return seg, 0.0, level
    span = max(makespan_us, float(end.max(initial=0.0))) or 1.0
    for level, key in ((len(keys) - 1, keys[-1]), (len(keys), np.zeros(n, dtype=np.int64))):
        tol = span / limit / 8
        while True:
            seg = merge_runs(lane, start, end, key, tol)
            if seg.max(initial=-1) + 1 <= limit or tol > span:
                break
            tol *= 2
        if seg.max(initial=-1) + 1 <= limit:
            break
    return seg, tol, level


def module_levels(modules, max_levels: int = 32) -> list[np.ndarray]:
    """Per op, an id of its module cut to depth D, D from the deepest recorded down to 1 (at most
    ``max_levels`` of them, the deepest kept): the keys :func:`bars` merges by, finest first."""
    uniq, inv = np.unique(np.asarray([m or "" for m in modules], dtype=object), return_inverse=True)
    deepest = max((u.count(".") + 1 for u in uniq if u), default=1)
    out = []
    for depth in range(deepest, max(0, deepest - max_levels), -1):
        cut = [".".join(u.split(".")[:depth]) for u in uniq]
        _, ids = np.unique(np.asarray(cut, dtype=object), return_inverse=True)
        out.append(ids.astype(np.int64)[inv])
    return out


def summarise_bars(seg, lane, start, end, first_key, weight, key) -> dict:
    """Per bar: lane, start, end, number of items, summed ``weight`` (busy us or bytes), the item
    that starts it (``first_key``: an op index) and the ``key`` value carrying the most weight."""
    nb = int(seg.max(initial=-1)) + 1
    order = np.lexsort((start, seg))
    s_sorted = seg[order]
    firsts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])
    count = np.diff(np.r_[firsts, len(seg)])
    bar_start = np.minimum.reduceat(start[order], firsts) if nb else np.zeros(0)
    bar_end = np.maximum.reduceat(end[order], firsts) if nb else np.zeros(0)
    total = np.add.reduceat(weight[order], firsts) if nb else np.zeros(0)
    # dominant key per bar: the key of the (bar, key) pair carrying the most weight
    dom = np.zeros(nb, dtype=np.int64)
    if nb:
        span = int(key.max(initial=0)) + 1
        uniq, inv = np.unique(seg.astype(np.int64) * span + key, return_inverse=True)
        w = np.bincount(inv, weights=np.asarray(weight, dtype=np.float64) + 1e-12)
        ub, uk = uniq // span, uniq % span
        o = np.lexsort((w, ub))  # per bar, the heaviest last
        last = np.flatnonzero(np.r_[ub[o][1:] != ub[o][:-1], True])
        dom[ub[o][last]] = uk[o][last]
    return {"lane": lane[order][firsts].astype(np.int64) if nb else np.zeros(0, np.int64),
            "start": bar_start, "end": bar_end, "n": count.astype(np.int64), "weight": total,
            "first": first_key[order][firsts].astype(np.int64) if nb else np.zeros(0, np.int64), "key": dom}


# ---------------------------------------------------------------------- module tree
def module_tree(modules, size, max_nodes: int = MAX_TREE_NODES):
    """The module tree of the graph's ops for a treemap: node ids (dotted paths; "" the root, shown as
    the graph), labels, parent index (-1 for the root), and each op's node (its module, cut to the
    deepest level that keeps at most ``max_nodes`` nodes; ops with no module go to a node of their
    own, "(no module)"). ``size`` (per op, e.g. compute us) is summed up the tree. Returns
    ``(ids, labels, parents, values, op_node, depth_cut)``; ``depth_cut`` is None when the whole
    tree is kept."""
    mods = ["(no module)" if not m else m for m in modules]
    uniq, inv = np.unique(np.asarray(mods, dtype=object), return_inverse=True)
    max_depth = max((u.count(".") + 1 for u in uniq), default=1)
    depth_cut = None
    for depth in range(max_depth, 0, -1):
        nodes = _prefixes(uniq, depth)
        if len(nodes) + 1 <= max_nodes:
            if depth < max_depth:
                depth_cut = depth
            break
    else:
        depth = 1
        nodes = _prefixes(uniq, 1)
        depth_cut = 1
    ids = [""] + sorted(nodes)
    index = {p: i for i, p in enumerate(ids)}
    parents = [-1] + [index[p.rpartition(".")[0]] if "." in p else 0 for p in ids[1:]]
    labels = ["(graph)"] + [p.rpartition(".")[2] for p in ids[1:]]
    leaf_of_uniq = np.array([index[".".join(u.split(".")[:depth])] for u in uniq], dtype=np.int64)
    op_node = leaf_of_uniq[inv]
    values = np.zeros(len(ids))
    np.add.at(values, op_node, np.asarray(size, dtype=np.float64))
    for i in range(len(ids) - 1, 0, -1):  # children sort after their parent (a prefix sorts first)
        values[parents[i]] += values[i] if i != 0 else 0.0
    return ids, labels, np.asarray(parents, dtype=np.int64), values, op_node, depth_cut


def _prefixes(uniq, depth: int) -> set[str]:
    out = set()
    for u in uniq:
        parts = u.split(".")[:depth]
        for k in range(1, len(parts) + 1):
            out.add(".".join(parts[:k]))
    return out


def node_devices(parents, op_node, placement, size, n_devices: int) -> np.ndarray:
    """(nodes, devices) size placed on each device under each node of the module tree."""
    n_nodes = len(parents)
    share = np.zeros((n_nodes, n_devices))
    np.add.at(share, (op_node, np.asarray(placement, dtype=np.int64)), np.asarray(size, dtype=np.float64))
    for i in range(n_nodes - 1, 0, -1):
        share[parents[i]] += share[i]
    return share


# ---------------------------------------------------------------------- placements
def encode_placement(p) -> str:
    """A placement as one character per op (0-9 a-z A-Z, then the next code points): compact JSON."""
    p = np.asarray(p, dtype=np.int64)
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    chars = [alphabet[d] if d < len(alphabet) else chr(0x100 + d) for d in range(int(p.max(initial=0)) + 1)]
    return "".join(chars[d] for d in p.tolist())


def decode_placement(s: str) -> np.ndarray:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return np.array([alphabet.index(c) if c in alphabet else ord(c) - 0x100 for c in s], dtype=np.int64)


def moved(p_a, p_b, modules, size) -> dict:
    """What changed from placement A to B: ops moved, their summed ``size`` and, per module (largest
    moved size first), how many of its ops moved and where from and to."""
    a, b = np.asarray(p_a), np.asarray(p_b)
    m = np.flatnonzero(a != b)
    per: dict[str, dict] = {}
    for i in m.tolist():
        key = modules[i] or "(no module)"
        e = per.setdefault(key, {"module": key, "ops": 0, "size": 0.0, "moves": {}})
        e["ops"] += 1
        e["size"] += float(size[i])
        mv = f"{int(a[i])}->{int(b[i])}"
        e["moves"][mv] = e["moves"].get(mv, 0) + 1
    rows = sorted(per.values(), key=lambda e: (-e["size"], e["module"]))
    return {"ops": int(len(m)), "size": float(np.asarray(size)[m].sum()), "modules": rows}
