"""Tarnawski et al.'s latency greedy (NeurIPS 2020, Appendix F; their repository's latency-greedy), as their
code runs it: blocks visited in their depth-first topological order (:func:`published_order`, which follows
the iteration order of their ``std::unordered_map``, :func:`unordered_map_order`) fill one accelerator after
another up to its memory, the rest on a CPU. The blocks and the contiguity rule are dp-split's
(:mod:`placer.methods.dp_split`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from placer.graph import BACKWARD
from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.dp_split import _ThroughputOrder
from placer.objectives.model import model_for
from placer.objectives.units import blocks_for, linear_order


# ------------------------------------------------------------------ their greedy's visit order
# libstdc++'s bucket counts (hashtable-aux.cc's __prime_list, up to 4,026,031 buckets) and its small-count table
_PRIMES = (
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109,
    113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409,
    439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741,
    1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949,
    7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281,
    26267, 28411, 30727, 33223, 35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779,
    85229, 92203, 99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971,
    236897, 256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903,
    658753, 712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153, 1565659,
    1693859, 1832561, 1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303, 3439651, 3721303, 4026031)
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)


def unordered_map_order(keys) -> list[int]:
    """The iteration order of a C++ ``std::unordered_map<int, T>`` into which ``keys`` were inserted
    in this order (repeats ignored), as GNU libstdc++ (GCC 5 to 14) lays it out: ``std::hash<int>`` is
    the value itself (a negative one sign-extended to 64 bits), the bucket count starts at 13 and grows
    to the next listed prime at least twice as large when the elements would outnumber the buckets,
    a key into an empty bucket goes to the front of the one list every bucket points into (after the
    bucket's first node otherwise), and a rehash relinks that list front to back the same way. This
    is the order in which Tarnawski et al.'s greedy (msr-fiddle/dnn-partitioning, latency-greedy,
    compiled with g++) seeds its start blocks."""
    BB = "before-begin"
    nxt: dict = {BB: None}
    buckets: list = [None]
    state = {"nb": 1, "next_resize": 0}

    def next_bkt(n: int) -> int:
        if n < len(_FAST_BUCKETS):
            state["next_resize"] = _FAST_BUCKETS[n]
            return _FAST_BUCKETS[n]
        k = int(np.searchsorted(_PRIMES, n)) if n <= _PRIMES[-1] else None
        if k is None:
            raise ValueError(f"more than {_PRIMES[-1]} keys: beyond the bucket counts listed here")
        state["next_resize"] = _PRIMES[k]
        return _PRIMES[k]

    def rehash(nb: int) -> None:
        new = [None] * nb
        p, nxt[BB], bbegin = nxt[BB], None, 0
        while p is not None:
            after, b = nxt[p], (p % 2**64) % nb
            if new[b] is None:
                nxt[p], nxt[BB], new[b] = nxt[BB], p, BB
                if nxt[p] is not None:
                    new[bbegin] = p
                bbegin = b
            else:
                nxt[p], nxt[new[b]] = nxt[new[b]], p
            p = after
        buckets[:] = new
        state["nb"] = nb

    count = 0
    for k in keys:
        k = int(k)
        if k in nxt:
            continue
        if count + 1 > state["next_resize"]:  # _Prime_rehash_policy::_M_need_rehash, max load factor 1
            least = max(count + 1, 0 if state["next_resize"] else 11)
            if least >= state["nb"]:
                rehash(next_bkt(max(least + 1, state["nb"] * 2)))
            else:
                state["next_resize"] = state["nb"]
        b = (k % 2**64) % state["nb"]
        if buckets[b] is not None:
            nxt[k], nxt[buckets[b]] = nxt[buckets[b]], k
        else:
            nxt[k], nxt[BB] = nxt[BB], k
            if nxt[k] is not None:
                buckets[(nxt[k] % 2**64) % state["nb"]] = k
            buckets[b] = BB
        count += 1
    out, p = [], nxt[BB]
    while p is not None:
        out.append(p)
        p = nxt[p]
    return out


def _listing(graph) -> tuple[list[int], list[tuple[int, int]]]:
    """The ops and edges in the order the input file listed them: a dnn-partitioning file's node
    and edge order (``meta['node_ids']``, ``meta['edges_listed']``), else the graph's own order
    (ops by index, edges by source then destination)."""
    index = {nm: i for i, nm in enumerate(graph.op_names)}
    ids, listed = graph.meta.get("node_ids"), graph.meta.get("edges_listed")
    if isinstance(ids, dict) and len(ids) == graph.n_ops and all(nm in index for nm in ids) and isinstance(listed, list):
        op_of = {int(nid): index[nm] for nm, nid in ids.items()}
        try:
            edges = [(op_of[int(s)], op_of[int(d)]) for s, d in listed]
        except (KeyError, TypeError, ValueError):
            edges = None
        if edges is not None and len(set(edges)) == graph.n_edges:
            return [index[nm] for nm in ids], edges
    return list(range(graph.n_ops)), list(zip(graph.edge_src.tolist(), graph.edge_dst.tolist()))


def published_order(problem, objective, blocks) -> np.ndarray:
    """The order in which Tarnawski et al.'s greedy visits ``blocks`` (their ``getTopologicalSort``):
    each op's colorClass is its colocation group, or a fresh number counting up from -2**31 + 1 in
    listing order for an op without one; a block is named by the union-find root their ``makeBlocks``
    reaches over its colorClasses (unions in their hash-map order); the blocks with no predecessor
    seed a stack in the iteration order of their ``std::unordered_map`` (:func:`unordered_map_order`,
    keys inserted at each block's first op in listing order), and the block popped last-in first-out
    pushes each successor that becomes ready, in the order the file lists the edges (so the last
    listed is visited first). Edges counted are those of the objective's order graph. On a latency
    input our blocks are theirs and this is their order; where ours are coarser (forward-only
    contiguity) the same rules run on ours."""
    g = problem.graph
    nodes, edges = _listing(g)
    forward_only = objective.name != "latency"
    is_key = (g.role != BACKWARD) if forward_only else np.ones(g.n_ops, dtype=bool)
    fresh, cc = -(2**31), np.empty(g.n_ops, dtype=np.int64)
    for i in nodes:
        if g.colocation[i] >= 0:
            cc[i] = int(g.colocation[i])
        else:
            fresh += 1
            cc[i] = fresh
    class_order = unordered_map_order(cc[i] for i in nodes)  # their colorClasses map
    block_of_class = {int(cc[i]): int(blocks.block_of[i]) for i in nodes}
    in_block: dict[int, list[int]] = {}
    for c in class_order:
        in_block.setdefault(block_of_class[c], []).append(c)
    uf = {c: c for c in class_order}

    def find(a):
        while uf[a] != a:
            a = uf[a]
        return a

    for c in class_order:  # their union of mutually reachable classes: every pair in one block
        for d in in_block[block_of_class[c]]:
            uf[find(c)] = find(d)
    root = {b: find(cs[0]) for b, cs in in_block.items()}
    block_of_root = {r: b for b, r in root.items()}
    seen, keys = set(), []
    for i in nodes:
        b = int(blocks.block_of[i])
        if b not in seen:
            seen.add(b)
            keys.append(root[b])
    succ: dict[int, list[int]] = {}
    indeg = dict.fromkeys(keys, 0)
    for s, d in edges:
        if not (is_key[s] and is_key[d]):
            continue
        a, b = root[int(blocks.block_of[s])], root[int(blocks.block_of[d])]
        succ.setdefault(a, []).append(b)
        if a != b:
            indeg[b] += 1
    stack = [k for k in unordered_map_order(keys) if indeg[k] == 0]
    out = []
    while stack:
        v = stack.pop()
        out.append(block_of_root[v])
        for w in succ.get(v, ()):
            if w != v:
                indeg[w] -= 1
                if indeg[w] == 0:
                    stack.append(w)
    if len(out) != blocks.B:  # not a linear extension of our blocks: cannot happen for an acyclic block graph
        raise ValueError("the block graph is not acyclic")
    return np.asarray(out, dtype=np.int64)


@dataclass(frozen=True)
class PublishedGreedyConfig(MethodConfig):
    """Tarnawski et al.'s latency greedy (Appendix F)."""

    order: Literal["published", "depth"] = "published"  # 'published': their code's visit order; 'depth': ours (smallest block index first)

    @classmethod
    def method_name(cls) -> str:
        return "published-greedy"


@register("published-greedy", "Tarnawski et al.'s latency greedy: blocks in their code's depth-first topological "
          "order fill one accelerator after another up to its memory, the rest on a CPU (one placement)",
          "partitioning", PublishedGreedyConfig,
          paper="Tarnawski et al., NeurIPS 2020, Appendix F (their latency-greedy baseline)", version=2)
def published_greedy(problem, seed: int, ev: Evaluator, cfg: PublishedGreedyConfig):
    """Their greedy (:func:`placer.objectives.units.greedy_fill`) over the blocks of the objective's
    order graph (under the simulator: the forward graph, as dp-split). ``order='published'`` (the
    default) visits the blocks as their code does (:func:`published_order`: successors in reverse
    listed order, start blocks in their hash map's order), which reproduces their split;
    ``order='depth'`` is our depth-first order (version 1: successors and start blocks by smallest op
    index). One placement, scored by the evaluator (the seed is not used). One departure kept: a
    block that cannot run on an accelerator goes to the CPU (their code ignores supportedOnFpga); where
    accelerators differ in which ops they can run, :func:`greedy_fill_allowed` (the same split
    wherever the published one places every op where it can run)."""
    from placer.objectives.units import greedy_fill

    obj = ev.objective
    contiguity = obj if not obj.is_simulator else _ThroughputOrder()
    b = blocks_for(problem, contiguity)
    order = published_order(problem, contiguity, b) if cfg.order == "published" else linear_order(b, "depth")
    p = greedy_fill(problem, contiguity, order)
    notes = [f"Tarnawski et al.'s greedy (Appendix F), "
             f"{'their code' if cfg.order == 'published' else 'our depth-first'} block order"]
    if not problem.allowed[np.arange(problem.n_ops), p].all():  # accelerators that differ in what they run
        p = greedy_fill_allowed(problem, contiguity, order)
        notes.append("ops restricted to some accelerators: a block the current accelerator cannot run went to the "
                     "next one that can")
    ev.evaluate(p)
    return ev.result("published-greedy", p, notes=notes)


def greedy_fill_allowed(problem, objective, order) -> np.ndarray:
    """:func:`placer.objectives.units.greedy_fill` where accelerators differ in which ops they can run
    (the published greedy checks the first accelerator only: on such a cluster it places ops where
    they cannot run). The same rules otherwise: blocks in ``order`` fill one accelerator after
    another up to its memory, a block no accelerator can run goes to a CPU (the first that can; the
    last accelerator on a cluster without CPUs, as there); a block the current accelerator cannot
    run, or that does not fit it, opens the first accelerator not yet used that can run it (the next
    one, on a cluster whose accelerators run the same ops) when it fits there, else goes to a CPU
    that can. NotApplicable, naming the op and the devices it can run on, when
    no device is left for a block."""
    from placer.methods.base import NotApplicable
    from placer.methods.search import stuck_message

    m = model_for(problem)
    b = blocks_for(problem, objective)
    accs = [int(d) for d in np.flatnonzero(m.acc)]
    cpus = [int(d) for d in np.flatnonzero(~m.acc)] or accs[-1:]
    ok = np.array([problem.allowed[mb].all(axis=0) for mb in b.members])  # (B, D)
    bdev = np.empty(b.B, dtype=np.int64)
    used = np.zeros(len(accs), dtype=bool)  # accelerators that have held an interval
    k, room = -1, -1.0
    for blk in order:
        size = b.mem_bytes[blk]
        cpu = next((d for d in cpus if ok[blk, d]), None)
        if k >= 0 and size <= room and ok[blk, accs[k]]:
            bdev[blk] = accs[k]
            room -= size
            continue
        nxt = next((j for j in range(len(accs)) if not used[j] and ok[blk, accs[j]]), None)
        if nxt is not None and size <= m.cap_bytes[accs[nxt]]:
            k = nxt
            used[k] = True
            bdev[blk] = accs[k]
            room = m.cap_bytes[accs[k]] - size
        elif cpu is not None:
            bdev[blk] = cpu
            if k >= 0:
                room = -1.0  # this accelerator's interval is closed
        else:
            avail = [accs[j] for j in np.flatnonzero(~used)] + cpus
            raise NotApplicable("published-greedy", stuck_message(
                problem, b.members[blk], ok[blk], avail, "each already holding an earlier interval of the "
                "greedy's split (one interval per accelerator, the rest on a CPU) or without room for it"),
                "use a method not bound to contiguous splits (local-search, cp-sat)")
    return bdev[b.block_of]
