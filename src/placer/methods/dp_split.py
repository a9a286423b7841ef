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
from typing import Annotated

import numpy as np
from numba import njit

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
