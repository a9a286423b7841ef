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

import numpy as np
from numba import njit

from placer.methods.base import Evaluator, MethodConfig, register
from placer.objectives.model import model_for
from placer.objectives.units import blocks_for, linear_order


@njit(cache=True)
def segment_comm(order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B):
    """comm[i, j]: transfer cost of the set of blocks order[i:j] (every op with an edge out of it,
    and every outside op with an edge into it, once each)."""
    n = len(block_of)
    comm = np.zeros((B + 1, B + 1))
    pos = np.empty(B, dtype=np.int64)
    for x in range(B):
        pos[order[x]] = x
    mark = np.full(n, -1, dtype=np.int64)
    for i in range(B):
        for j in range(i + 1, B + 1):
            c = 0.0
            stamp = i * (B + 1) + j
            for x in range(i, j):
                b = order[x]
                for k in range(bptr[b], bptr[b + 1]):
                    v = bops[k]
                    for q in range(succ_ptr[v], succ_ptr[v + 1]):
                        px = pos[block_of[succ_idx[q]]]
                        if px < i or px >= j:
                            c += cost[v]
                            break
                    for q in range(pred_ptr[v], pred_ptr[v + 1]):
                        u = pred_idx[q]
                        pu = pos[block_of[u]]
                        if (pu < i or pu >= j) and mark[u] != stamp:
                            mark[u] = stamp
                            c += cost[u]
            comm[i, j] = c
    return comm


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
                    for i in range(j - 1, -1, -1):
                        if mem[a - 1, j] - mem[a - 1, i] > cap[a - 1]:
                            break
                        if not allowed_acc[a - 1, i, j]:
                            continue
                        v = max(dp[a - 1, c, i], work_acc[a - 1, j] - work_acc[a - 1, i] + comm[i, j])
                        if v < best:
                            best = v
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
                for i in range(j - 1, -1, -1):
                    if mem[a - 1, j] - mem[a - 1, i] > cap[a - 1]:
                        break
                    if not allowed_acc[a - 1, i, j]:
                        continue
                    v = dp[a - 1, i] + work_acc[a - 1, j] - work_acc[a - 1, i] + comm[i, j]
                    if v < best:
                        best = v
                        kind[a, j] = 2
                        arg[a, j] = i
            dp[a, j] = best
    return dp, arg, kind


@dataclass(frozen=True)
class DpSplitConfig(MethodConfig):
    """Interval-split DPs (Tarnawski et al. 2020 section 4; PipeDream section 3.1)."""

    orders: int = 4  # linear orders of the blocks tried (index, depth-first, then random)
    max_blocks: int = 1500  # graphs with more blocks than this are not split (the DP is quadratic in blocks)

    @classmethod
    def method_name(cls) -> str:
        return "dp-split"

    def checks(self):
        return [(self.orders >= 1, "orders", ">= 1"), (self.max_blocks >= 1, "max_blocks", ">= 1")]


def _prefix(order, members, col):
    per = np.array([col[mb].sum() for mb in members])[order]
    return np.concatenate([[0.0], np.cumsum(per)])


def dp_candidates(problem, objective, order) -> list[np.ndarray]:
    """The max-load and sum DP splits of ``order`` (placements), for ``objective``'s contiguity."""
    m = model_for(problem)
    b = blocks_for(problem, objective)
    B = b.B
    accs = [int(d) for d in np.flatnonzero(m.acc)]
    cpus = [int(d) for d in np.flatnonzero(~m.acc)]
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
        return work, mem, m.cap_bytes[devs], allowed

    wa, ma, ca, aa = cols(accs)
    wc, _, _, ac = cols(cpus)
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
    for k, order in enumerate(orders[:cfg.orders]):
        for j, p in enumerate(dp_candidates(problem, contiguity, order)):
            if not any(np.array_equal(p, q) for q in cands):
                cands.append(p)
                names.append(f"order {k} {'max-load' if j == 0 else 'sum'}")
    if not cands:
        raise NotApplicable("dp-split", "no interval split fits the devices' memory", "use more or larger devices")
    room = ev.remaining()
    P = np.stack(cands[:room] if room is not None else cands)
    vals = ev.evaluate_batch(P).objective_us
    k = int(np.argmin(vals))
    return ev.result("dp-split", P[k], notes=[f"{len(P)} DP splits scored; best: {names[k]}"])


class _ThroughputOrder:
    """Contiguity on the forward graph (the order the DPs use under the simulator)."""

    name = "throughput"
    cpu_contiguous = True


@register("published-greedy", "Tarnawski et al.'s latency greedy: blocks in depth-first topological order fill "
          "one accelerator after another up to its memory, the rest on a CPU (one placement)", "partitioning",
          paper="Tarnawski et al., NeurIPS 2020, Appendix F (their latency-greedy baseline)", version=1)
def published_greedy(problem, seed: int, ev: Evaluator, cfg):
    """Their greedy (:func:`placer.objectives.units.greedy_fill`) over the blocks of the objective's
    order graph (under the simulator: the forward graph, as dp-split), in the depth-first order of
    their stack; one placement, scored by the evaluator (the seed is not used)."""
    from placer.objectives.units import greedy_fill

    obj = ev.objective
    contiguity = obj if not obj.is_simulator else _ThroughputOrder()
    p = greedy_fill(problem, contiguity, linear_order(blocks_for(problem, contiguity), "depth"))
    ev.evaluate(p)
    return ev.result("published-greedy", p, notes=["Tarnawski et al.'s greedy (Appendix F), depth-first block order"])
