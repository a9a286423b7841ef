"""Dynamic programs over contiguous splits of a layer graph (under any objective).

The graph's blocks (:mod:`placer.objectives.units`: colocation groups with their backward ops, groups
that reach each other fused) are put in a linear order; a split cuts that order into consecutive
segments, one device each, so every segment is contiguous and the contracted graph acyclic. For a
chain of layers every contiguous split is such an interval split and the DP is exact; for a DAG it
is exact over the splits of each order tried (``orders``: the index order, the depth-first order of
Tarnawski et al.'s greedy, then random linear extensions).

Two DPs, both over (blocks covered, accelerators used, CPUs used), devices taken in index order:

* max-load (Tarnawski et al. 2020, section 4's DP over ideals, restricted to the ideals that are
  prefixes of one order; PipeDream's partitioning DP, Narayanan et al. 2019 section 3.1, without
  replication): minimise the largest segment load, an accelerator segment paying its compute, the
  transfer of every op with an edge across its boundary and at most its memory; a CPU segment its
  compute. This is the ``throughput`` objective itself on those splits.
* sum (for ``latency``): minimise the sum of segment times with every block off an accelerator on a
  CPU by itself: the latency when the pieces run one after another (Tarnawski et al. 2020, Appendix
  F, also evaluate the max-load DP's split under latency; both candidates are scored).

Every candidate is scored by the evaluator under the method's objective; the best is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from numba import njit

from placer.graph import BACKWARD
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.objectives.model import model_for
from placer.objectives.units import blocks_for, linear_order
from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below: numba refuses one it cannot cache


@njit(cache=True)
def segment_comm(order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B):
    """comm[i, j]: transfer cost of the set of blocks order[i:j] (every op with an edge out of it,
    and every outside op with an edge into it, once each).

    The terms of comm[i, j] are summed in one fixed order: blocks order[i], order[i+1], ..., each
    block's ops in turn, an op's own cost (when a successor lies outside) before those of its outside
    parents (each parent once, where it is first met). For a fixed ``i`` that sequence only grows
    with ``j``, and a term, once in, stays until ``j`` passes the furthest block it points to (an op's
    last successor block, a parent's own block) and never returns. So the terms are kept in that order
    with their running sums; each ``j`` appends block order[j-1]'s terms, drops those whose block it
    reached, and re-adds only from the first dropped one: the same additions in the same order as
    summing the whole set again, so the same bits, in about O(B * edges) instead of O(B^2 * edges)
    (Inception-V3, 913 blocks: 2.9 s -> 0.05 s per order)."""
    n = len(block_of)
    comm = np.zeros((B + 1, B + 1))
    pos = np.empty(B, dtype=np.int64)
    for x in range(B):
        pos[order[x]] = x
    lo_s = np.empty(n, dtype=np.int64)
    hi_s = np.empty(n, dtype=np.int64)
    for v in range(n):
        lo, hi = B, -1
        for q in range(succ_ptr[v], succ_ptr[v + 1]):
            p = pos[block_of[succ_idx[q]]]
            lo = min(lo, p)
            hi = max(hi, p)
        lo_s[v] = lo
        hi_s[v] = hi
    cap = n + len(pred_idx)
    tcost = np.empty(cap)
    pre = np.empty(cap)
    alive = np.empty(cap, dtype=np.bool_)
    nxt = np.empty(cap, dtype=np.int64)
    head = np.empty(B + 1, dtype=np.int64)
    mark = np.full(n, -1, dtype=np.int64)
    for i in range(B):
        for x in range(B + 1):
            head[x] = -1
        L = 0
        for j in range(i + 1, B + 1):
            x = j - 1
            t0 = L
            k = head[x]
            while k >= 0:
                alive[k] = False
                if k < t0:
                    t0 = k
                k = nxt[k]
            b = order[x]
            for kk in range(bptr[b], bptr[b + 1]):
                v = bops[kk]
                if succ_ptr[v + 1] > succ_ptr[v] and (lo_s[v] < i or hi_s[v] >= j):
                    tcost[L] = cost[v]
                    alive[L] = True
                    if lo_s[v] >= i:
                        lim = hi_s[v]
                        nxt[L] = head[lim]
                        head[lim] = L
                    L += 1
                for q in range(pred_ptr[v], pred_ptr[v + 1]):
                    u = pred_idx[q]
                    if mark[u] == i:
                        continue
                    mark[u] = i
                    pu = pos[block_of[u]]
                    if pu < i or pu >= j:
                        tcost[L] = cost[u]
                        alive[L] = True
                        if pu >= i:
                            nxt[L] = head[pu]
                            head[pu] = L
                        L += 1
            c = pre[t0 - 1] if t0 > 0 else 0.0
            for k in range(t0, L):
                if alive[k]:
                    c += tcost[k]
                pre[k] = c
            comm[i, j] = c
    return comm


@njit(cache=True)
def _last_segment(prev, best, d, j, work_acc, mem, cap, comm, allowed_acc, summed):
    """The best last segment on accelerator ``d`` ending before block ``j``: blocks ``i..j-1``, ``i``
    from ``j - 1`` down while they fit in its memory (and are allowed there), each worth ``prev[i]``
    and the segment's time (``summed``: their sum, for :func:`dp_sum`; else their max, for
    :func:`dp_maxload`). Returns (value, i) of the last ``i`` that beat ``best``, else (best, -1)."""
    arg = -1
    for i in range(j - 1, -1, -1):
        if mem[d, j] - mem[d, i] > cap[d]:
            break
        if not allowed_acc[d, i, j]:
            continue
        if summed:
            v = prev[i] + work_acc[d, j] - work_acc[d, i] + comm[i, j]
        else:
            v = max(prev[i], work_acc[d, j] - work_acc[d, i] + comm[i, j])
        if v < best:
            best = v
            arg = i
    return best, arg


@njit(cache=True)
def dp_maxload(work_acc, work_cpu, mem, cap, comm, allowed_acc, allowed_cpu):
    """dp over (j blocks, a accelerators, c CPUs): min max segment load. work_* are prefix sums
    (devices x B+1); returns (value, choice arrays) for backtracking."""
    A, Bp1 = work_acc.shape
    C = work_cpu.shape[0]
    B = Bp1 - 1
    INF = np.inf
    dp = np.full((A + 1, C + 1, B + 1), INF)
    arg = np.full((A + 1, C + 1, B + 1), -1, dtype=np.int64)
    kind = np.zeros((A + 1, C + 1, B + 1), dtype=np.int64)  # 0 skip acc, 1 skip cpu, 2 acc seg, 3 cpu seg
    for a in range(A + 1):
        for c in range(C + 1):
            dp[a, c, 0] = 0.0
            for j in range(1, B + 1):
                best = INF
                if a > 0 and dp[a - 1, c, j] < best:
                    best = dp[a - 1, c, j]
                    kind[a, c, j] = 0
                if c > 0 and dp[a, c - 1, j] < best:
                    best = dp[a, c - 1, j]
                    kind[a, c, j] = 1
                if a > 0:
                    best, i = _last_segment(dp[a - 1, c], best, a - 1, j, work_acc, mem, cap, comm, allowed_acc, False)
                    if i >= 0:
                        kind[a, c, j] = 2
                        arg[a, c, j] = i
                if c > 0:
                    for i in range(j - 1, -1, -1):
                        if not allowed_cpu[c - 1, i, j]:
                            continue
                        v = max(dp[a, c - 1, i], work_cpu[c - 1, j] - work_cpu[c - 1, i])
                        if v < best:
                            best = v
                            kind[a, c, j] = 3
                            arg[a, c, j] = i
                dp[a, c, j] = best
    return dp, arg, kind


@njit(cache=True)
def dp_sum(work_acc, cpu_block, mem, cap, comm, allowed_acc):
    """dp over (j blocks, a accelerators): min sum of segment times, each block off an accelerator
    alone on a CPU (cpu_block[x] = its CPU time)."""
    A, Bp1 = work_acc.shape
    B = Bp1 - 1
    INF = np.inf
    dp = np.full((A + 1, B + 1), INF)
    arg = np.full((A + 1, B + 1), -1, dtype=np.int64)
    kind = np.zeros((A + 1, B + 1), dtype=np.int64)  # 0 skip acc, 1 block j-1 on cpu, 2 acc segment
    for a in range(A + 1):
        dp[a, 0] = 0.0
        for j in range(1, B + 1):
            best = dp[a, j - 1] + cpu_block[j - 1]
            kind[a, j] = 1
            if a > 0 and dp[a - 1, j] < best:
                best = dp[a - 1, j]
                kind[a, j] = 0
            if a > 0:
                best, i = _last_segment(dp[a - 1], best, a - 1, j, work_acc, mem, cap, comm, allowed_acc, True)
                if i >= 0:
                    kind[a, j] = 2
                    arg[a, j] = i
            dp[a, j] = best
    return dp, arg, kind


@dataclass(frozen=True)
class DpSplitConfig(MethodConfig):
    """Interval-split DPs (Tarnawski et al. 2020 section 4; PipeDream section 3.1)."""

    orders: Annotated[int, Range(">= 1")] = 4  # linear orders of the blocks tried (index, depth-first, then random)
    max_blocks: Annotated[int, Range(">= 1")] = 1500  # graphs with more blocks than this are not split (the DP is quadratic in blocks)

    @classmethod
    def method_name(cls) -> str:
        return "dp-split"


def _prefix(order, members, col):
    per = np.array([col[mb].sum() for mb in members])[order]
    return np.concatenate([[0.0], np.cumsum(per)])


def _dp_inputs(problem, objective, order, unlimited: bool = False, by_restrictions: bool = False):
    """What both DPs read for ``order``: (model, blocks, accelerators, CPUs, segment transfer costs,
    op times (1e30 where an op cannot run), and per device kind: prefix work, prefix memory,
    capacities (``unlimited``: inf) and [device, i, j] whether every op of order[i:j] runs there).
    Devices in index order, or (``by_restrictions``) in :func:`restriction_order`."""
    m = model_for(problem)
    b = blocks_for(problem, objective)
    B = b.B
    accs = [int(d) for d in np.flatnonzero(m.acc)]
    cpus = [int(d) for d in np.flatnonzero(~m.acc)]
    if by_restrictions:
        accs, cpus = restriction_order(problem, b, order, accs), restriction_order(problem, b, order, cpus)
    bptr = np.concatenate([[0], np.cumsum([len(x) for x in b.members])]).astype(np.int64)
    bops = np.concatenate(b.members).astype(np.int64)
    comm = segment_comm(order, bptr, bops, b.block_of.astype(np.int64), m.succ_ptr, m.succ_idx, m.pred_ptr,
                        m.pred_idx, m.cost_us, B)
    t = np.where(np.isfinite(m.t_us), m.t_us, 1e30)
    runnable = np.isfinite(m.t_us)

    def cols(devs):
        if not devs:
            return np.zeros((0, B + 1)), np.zeros((0, B + 1)), np.zeros(0), np.zeros((0, B + 1, B + 1), dtype=np.bool_)
        work = np.stack([_prefix(order, b.members, t[:, d]) for d in devs])
        mem = np.stack([_prefix(order, b.members, m.mem_bytes) for _ in devs])
        bad = np.stack([_prefix(order, b.members, (~runnable[:, d]).astype(float)) for d in devs])
        allowed = (bad[:, None, :] - bad[:, :, None]) < 0.5  # [dev, i, j]: no unrunnable op in order[i:j]
        return work, mem, np.full(len(devs), np.inf) if unlimited else m.cap_bytes[devs], allowed

    return m, b, accs, cpus, comm, t, cols(accs), cols(cpus)


def restriction_order(problem, b, order, devs: list[int]) -> list[int]:
    """``devs`` ordered by where in the block ``order`` the blocks that can run on them lie (each block
    weighing 1 / the number of devices it can run on, so the blocks only one device can run pull
    hardest): the order in which a contiguous split is likely to use them when ops may run on only
    some devices (in index order, a split that must start on gpu:1 and end on gpu:0 does not exist)."""
    if len(devs) < 2:
        return list(devs)
    ok = np.array([problem.allowed[mb].all(axis=0) for mb in b.members])[np.asarray(order)][:, devs]  # (B, k)
    w = ok / np.maximum(ok.sum(axis=1, keepdims=True), 1)
    pos = np.arange(len(order), dtype=np.float64)[:, None]
    key = np.where(w.sum(axis=0) > 0, (w * pos).sum(axis=0) / np.maximum(w.sum(axis=0), 1e-300), np.inf)
    return [devs[i] for i in np.argsort(key, kind="stable")]


def runs_differ(problem) -> bool:
    """Whether two accelerators, or two CPUs, differ in which ops they can run."""
    m = model_for(problem)
    ok = problem.allowed
    return any(len(ds) > 1 and (ok[:, ds] != ok[:, ds[:1]]).any()
               for ds in (np.flatnonzero(m.acc), np.flatnonzero(~m.acc)))


def dp_candidates(problem, objective, order, by_restrictions: bool = False) -> list[np.ndarray]:
    """The max-load and sum DP splits of ``order`` (placements), for ``objective``'s contiguity;
    devices taken in index order or (``by_restrictions``) in :func:`restriction_order`."""
    m, b, accs, cpus, comm, t, (wa, ma, ca, aa), (wc, _, _, ac) = _dp_inputs(problem, objective, order,
                                                                             by_restrictions=by_restrictions)
    B = b.B
    out = []
    dp, arg, kind = dp_maxload(wa, wc, ma, ca, comm, aa, ac)
    a, c, j = len(accs), len(cpus), B
    if np.isfinite(dp[a, c, j]):
        bdev = np.empty(B, dtype=np.int64)
        while j > 0:
            k = kind[a, c, j]
            if k == 0:
                a -= 1
            elif k == 1:
                c -= 1
            else:
                i = arg[a, c, j]
                d = accs[a - 1] if k == 2 else cpus[c - 1]
                bdev[order[i:j]] = d
                j = i
                if k == 2:
                    a -= 1
                else:
                    c -= 1
        out.append(bdev[b.block_of])
    if cpus:
        cpu_block = np.array([t[mb, cpus[0]].sum() for mb in b.members])[order]
        dp2, arg2, kind2 = dp_sum(wa, cpu_block, ma, ca, comm, aa)
        a, j = len(accs), B
        if np.isfinite(dp2[a, j]) and dp2[a, j] < 1e29:
            bdev = np.empty(B, dtype=np.int64)
            while j > 0:
                k = kind2[a, j]
                if k == 0:
                    a -= 1
                elif k == 1:
                    bdev[order[j - 1]] = cpus[0]
                    j -= 1
                else:
                    i = arg2[a, j]
                    bdev[order[i:j]] = accs[a - 1]
                    j = i
                    a -= 1
            out.append(bdev[b.block_of])
    return out


def reach_unlimited(problem, objective, order, by_restrictions: bool = False) -> int:
    """How many blocks of ``order`` the max-load DP covers with every device's memory unlimited (the
    whole order, B, when a split exists; less when ops that cannot run on every device stop it)."""
    _, b, accs, cpus, comm, _, (wa, ma, ca, aa), (wc, _, _, ac) = _dp_inputs(problem, objective, order, True,
                                                                             by_restrictions)
    dp, _, _ = dp_maxload(wa, wc, ma, ca, comm, aa, ac)
    return int(np.flatnonzero(np.isfinite(dp[len(accs), len(cpus)]))[-1])


@register("dp-split", "dynamic programs over contiguous interval splits of the layer order (max-load and "
          "sequential-latency), best under the objective", "partitioning", DpSplitConfig,
          paper="Tarnawski et al., NeurIPS 2020, section 4 and Appendix F; PipeDream (Narayanan et al., SOSP 2019), section 3.1", version=1)
def dp_split(problem, seed: int, ev: Evaluator, cfg: DpSplitConfig):
    from placer.methods.base import NotApplicable

    obj = ev.objective
    contiguity = obj if not obj.is_simulator else _ThroughputOrder()
    b = blocks_for(problem, contiguity)
    if b.B > cfg.max_blocks:
        raise NotApplicable("dp-split", f"{b.B} blocks (more than max_blocks={cfg.max_blocks})",
                            "raise max_blocks or group the graph first")
    orders = [linear_order(b, "index"), linear_order(b, "depth")]
    orders += [linear_order(b, "random", seed * 1000 + k) for k in range(max(0, cfg.orders - 2))]
    cands, names = [], []
    devs = [False, True] if runs_differ(problem) else [False]  # device orders: index, and by restrictions
    for k, order in enumerate(orders[:cfg.orders]):
        if cands and ev.time_up():  # an opt-in time limit ends the DPs (the splits so far are scored)
            break
        for by in devs:
            for j, p in enumerate(dp_candidates(problem, contiguity, order, by)):
                if not any(np.array_equal(p, q) for q in cands):
                    cands.append(p)
                    names.append(f"order {k} {'max-load' if j == 0 else 'sum'}"
                                 + (", devices by restrictions" if by else ""))
    if not cands:
        raise NotApplicable("dp-split", *_why_no_split(problem, contiguity, b, orders[:cfg.orders], devs))
    room = ev.remaining()
    P = np.stack(cands[:room] if room is not None else cands)
    vals = ev.evaluate_batch(P).objective_us
    k = int(np.argmin(vals))
    return ev.result("dp-split", P[k], notes=[f"{len(P)} DP splits scored; best: {names[k]}"])


def _why_no_split(problem, contiguity, b, orders, devs) -> tuple[str, str]:
    """(why, fix) when no order has an interval split: the devices' memory when one exists with
    memory unlimited, else the op restrictions: an op of the first block that the order reaching
    furthest cannot cover, and the devices it can run on."""
    from placer.methods.search import stuck_message

    reach = [(reach_unlimited(problem, contiguity, order, by), k) for k, order in enumerate(orders) for by in devs]
    if max(reach)[0] >= b.B:
        return "no interval split fits the devices' memory", "use more or larger devices"
    j, k = max(reach)
    blk = int(orders[k][j])
    ok = np.logical_and.reduce(problem.allowed[b.members[blk]], axis=0)
    taken = "in index order" + (" or as the restrictions suggest" if len(devs) > 1 else "")
    why = stuck_message(problem, b.members[blk], ok, [], f"which no contiguous split of the {len(orders)} block "
                        f"order(s) tried (one interval per device, devices {taken}) reaches after the "
                        "blocks before it, whatever the memory")
    return why, "use a method not bound to contiguous splits (local-search, cp-sat)"


class _ThroughputOrder:
    """Contiguity on the forward graph (the order the DPs use under the simulator)."""

    name = "throughput"
    cpu_contiguous = True


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
