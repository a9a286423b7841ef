"""Blocks, linear orders and interval splits: the contiguity-keeping representation the published
objectives' methods search in.

A *block* is what must stay together for contiguity to be possible: a colocation group (with, for a
training graph, its backward ops), and groups that reach each other (a cycle of groups can never be
split contiguously; Tarnawski et al.'s greedy and DP fuse them the same way). Contiguity is judged on
the objective's *order graph*: every edge for ``latency``, forward edges for ``throughput`` and
``pipeline`` (their DP and IP force contiguity on the forward part; a backward op follows its
forward op's colorClass, an orphan backward op its mirror or neighbour).

An interval split cuts a linear extension of the block graph into consecutive segments, one device
each. An interval of a topological order is contiguous, and the graph contracted by intervals of one
order is acyclic, so every split with each accelerator on one segment is valid for ``latency`` (q =
1), and with each device on one segment for ``throughput`` / ``pipeline``, up to memory.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from placer.graph import BACKWARD
from placer.grouping import components


@dataclass(eq=False)
class Blocks:
    block_of: np.ndarray  # (n,) block of each op
    members: list  # block -> op indices
    preds: list  # block -> predecessor blocks (order graph)
    succs: list
    key: np.ndarray  # (B,) smallest op index of the block's order-graph ops (tie-break)
    acc_us: np.ndarray  # (B,) time on the fastest accelerator
    mem_bytes: np.ndarray  # (B,)

    @property
    def B(self) -> int:
        return len(self.members)


def blocks_for(problem, objective) -> Blocks:
    """The blocks of ``problem`` for ``objective`` (cached per objective kind)."""
    forward_only = objective.name != "latency"
    cache_key = f"_blocks_{'fwd' if forward_only else 'all'}"
    b = problem.__dict__.get(cache_key)
    if b is not None:
        return b
    from placer.objectives.model import model_for

    g, m = problem.graph, model_for(problem)
    n = g.n_ops
    pairs = [(i, int(m.coloc_rep[i])) for i in range(n) if m.coloc_rep[i] != i]
    if forward_only:
        is_key = g.role != BACKWARD
        bw = np.flatnonzero(~is_key & (g.mirror >= 0))  # backward ops follow a forward op
        pairs += list(zip(bw.tolist(), g.mirror[bw].tolist()))
        comp = components(n, pairs)
        keyed = np.zeros(int(comp.max()) + 1 if n else 0, dtype=bool)
        keyed[comp[is_key]] = True
        for i in np.flatnonzero(~keyed[comp]):  # orphan: join a neighbour whose unit has forward ops
            for j in list(g.predecessors(i)) + list(g.successors(i)):
                if keyed[comp[int(j)]]:
                    pairs.append((int(i), int(j)))
                    keyed[comp[i]] = True  # its whole unit now has forward ops
                    break
    else:
        is_key = np.ones(n, dtype=bool)
    unit = components(n, pairs)
    U = int(unit.max()) + 1
    src, dst = g.edge_src, g.edge_dst
    keep = is_key[src] & is_key[dst] & (unit[src] != unit[dst])
    a = coo_matrix((np.ones(int(keep.sum())), (unit[src[keep]], unit[dst[keep]])), shape=(U, U)).tocsr()
    _, comp = connected_components(a, directed=True, connection="strong")
    _, block_of = np.unique(comp[unit], return_inverse=True)
    B = int(block_of.max()) + 1
    members = [[] for _ in range(B)]
    for i in range(n):
        members[block_of[i]].append(i)
    members = [np.asarray(x, dtype=np.int64) for x in members]
    bs, bd = block_of[src[keep]], block_of[dst[keep]]
    pairs = sorted(set(zip(bs.tolist(), bd.tolist())))
    preds = [[] for _ in range(B)]
    succs = [[] for _ in range(B)]
    for x, y in pairs:
        if x != y:
            preds[y].append(x)
            succs[x].append(y)
    key = np.array([int(mb[is_key[mb]].min()) if is_key[mb].any() else n + int(mb.min()) for mb in members])
    acc_cols = np.flatnonzero(m.acc)
    t_acc = m.t_us[:, acc_cols].min(axis=1) if len(acc_cols) else m.t_us.min(axis=1)
    acc_us = np.bincount(block_of, weights=np.where(np.isfinite(t_acc), t_acc, 0.0), minlength=B)
    mem = np.bincount(block_of, weights=m.mem_bytes, minlength=B)
    b = Blocks(block_of, members, [np.asarray(p, dtype=np.int64) for p in preds],
               [np.asarray(s, dtype=np.int64) for s in succs], key, acc_us, mem)
    problem.__dict__[cache_key] = b
    return b


def linear_order(blocks: Blocks, how: str = "index", seed: int = 0, prefer=None) -> np.ndarray:
    """A linear extension of the block graph (Kahn's algorithm). ``index``: smallest op index first;
    ``depth``: the block made ready last first (follows one branch to its end, like the stack order
    of Tarnawski et al.'s greedy); ``random``: random priorities; ``prefer``: per block a label, and
    blocks with the label of the block placed last go first (keeps a given placement's runs long)."""
    B = blocks.B
    indeg = np.array([len(p) for p in blocks.preds])
    rng = np.random.default_rng(seed)
    pri = rng.random(B) if how == "random" else blocks.key.astype(np.float64)
    out = []
    if how == "depth":
        stack = sorted(np.flatnonzero(indeg == 0).tolist(), key=lambda b: -pri[b])
        while stack:
            b = stack.pop()
            out.append(b)
            ready = []
            for s in blocks.succs[b]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    ready.append(s)
            stack.extend(sorted(ready, key=lambda x: -pri[x]))
        return np.asarray(out, dtype=np.int64)
    heap = [(pri[b], b) for b in np.flatnonzero(indeg == 0)]
    heapq.heapify(heap)
    last = None
    while heap:
        if prefer is not None and last is not None:
            same = [h for h in heap if prefer[h[1]] == prefer[last]]
            if same:
                h = min(same)
                heap.remove(h)
                heapq.heapify(heap)
            else:
                h = heapq.heappop(heap)
        else:
            h = heapq.heappop(heap)
        b = h[1]
        out.append(b)
        last = b
        for s in blocks.succs[b]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (pri[s], s))
    return np.asarray(out, dtype=np.int64)


def decode(blocks: Blocks, order: np.ndarray, ends, devs, n: int) -> np.ndarray:
    """The placement of an interval split: segment s = order[ends[s-1]:ends[s]] on devs[s]."""
    bdev = np.empty(blocks.B, dtype=np.int64)
    start = 0
    for e, d in zip(ends, devs):
        bdev[order[start:e]] = d
        start = e
    return bdev[blocks.block_of]


def runs(labels: np.ndarray) -> tuple[list, list]:
    """(ends, labels) of the maximal runs of equal labels."""
    ends, devs = [], []
    for i, x in enumerate(labels):
        if devs and devs[-1] == x:
            ends[-1] = i + 1
        else:
            ends.append(i + 1)
            devs.append(int(x))
    return ends, devs


def greedy_fill(problem, objective, order: np.ndarray | None = None) -> np.ndarray:
    """Tarnawski et al.'s latency greedy (Appendix F): blocks in topological order fill one
    accelerator after another up to its memory; a block too large for an accelerator, and every
    block once the accelerators are used up, goes to the CPU."""
    from placer.objectives.model import model_for

    m = model_for(problem)
    b = blocks_for(problem, objective)
    order = linear_order(b, "depth") if order is None else order
    accs = [int(d) for d in np.flatnonzero(m.acc)]
    cpus = [int(d) for d in np.flatnonzero(~m.acc)] or accs[-1:]
    bdev = np.empty(b.B, dtype=np.int64)
    k, room = -1, -1.0
    ok = np.isfinite(m.t_us)
    for blk in order:
        size = b.mem_bytes[blk]
        if accs and not ok[b.members[blk], accs[0]].all():  # cannot run on an accelerator
            bdev[blk] = cpus[0]
            if k >= 0:
                room = -1.0
            continue
        if k >= 0 and size <= room:
            bdev[blk] = accs[k]
            room -= size
        elif k + 1 < len(accs) and size <= m.cap_bytes[accs[k + 1]]:
            k += 1
            bdev[blk] = accs[k]
            room = m.cap_bytes[accs[k]] - size
        else:
            bdev[blk] = cpus[0]
            if k >= 0:
                room = -1.0  # this accelerator's interval is closed
    return bdev[b.block_of]


def repair_contiguous(problem, objective, placement) -> np.ndarray:
    """A placement valid under ``objective`` close to ``placement``: blocks keep the device most of
    their ops have; they are ordered keeping equal devices together; where a device still has
    several runs, its heaviest run stays and the others join the run before them; memory overflow
    moves boundary blocks to a neighbouring run with room, else to a CPU. Falls back to
    :func:`greedy_fill` when that is still not valid."""
    from placer.objectives.model import model_for

    m = model_for(problem)
    p = np.asarray(getattr(placement, "devices", placement), dtype=np.int64)
    b = blocks_for(problem, objective)
    w = np.where(np.isfinite(m.t_us[np.arange(m.n), p]), m.t_us[np.arange(m.n), p], 0.0) + 1e-9
    bdev = np.empty(b.B, dtype=np.int64)
    for k, mb in enumerate(b.members):
        bdev[k] = int(np.bincount(p[mb], weights=w[mb], minlength=m.D).argmax())
    order = linear_order(b, "index", prefer=bdev)
    ends, devs = runs(bdev[order])
    must = [bool(m.acc[d]) or objective.cpu_contiguous for d in devs]
    starts = [0] + ends[:-1]
    work = [float(b.acc_us[order[s:e]].sum()) for s, e in zip(starts, ends)]
    kept = {}
    for r, d in enumerate(devs):
        if must[r] and (d not in kept or work[r] > work[kept[d]]):
            kept[d] = r
    final = list(devs)
    first_kept = min(kept.values()) if kept else 0
    for r in range(len(devs)):
        if must[r] and kept.get(devs[r]) != r:
            final[r] = final[r - 1] if r > 0 else devs[first_kept]
    ends, devs = runs(np.repeat(final, np.diff([0] + ends)))
    # memory: move boundary blocks off overflowing accelerators
    bdev[order] = np.repeat(devs, np.diff([0] + ends))
    q = bdev[b.block_of]
    if objective.is_valid(problem, q):
        return q
    cpus = [int(d) for d in np.flatnonzero(~m.acc)]
    for s in range(len(devs)):
        d = devs[s]
        if not m.acc[d]:
            continue
        lo = 0 if s == 0 else ends[s - 1]
        hi = ends[s]
        used = b.mem_bytes[order[lo:hi]].sum()
        while used > m.cap_bytes[d] and hi > lo:
            hi -= 1
            used -= b.mem_bytes[order[hi]]
            bdev[order[hi]] = cpus[0] if cpus else d
    q = bdev[b.block_of]
    if objective.is_valid(problem, q):
        return q
    return greedy_fill(problem, objective)
