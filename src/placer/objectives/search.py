"""Local search and simulated annealing over interval splits (:mod:`placer.objectives.units`), the
moves `local-search` and `anneal` make under an objective that demands contiguity.

A state is a linear extension of the block graph cut into segments, one device each (each
accelerator, and under ``throughput`` / ``pipeline`` each CPU, on at most one segment). Every move
keeps that form, so every proposal is contiguous and its contraction acyclic; memory is the only
constraint left to the objective. Moves (Tarnawski et al. 2020 search the same space exactly with
their DP and IP; these are local steps in it):

* shift a boundary between two segments by a few blocks;
* carry a block across a boundary: a block of segment s+1 whose predecessors all lie before it
  moves to the end of segment s, or a block of segment s whose successors all lie after it moves to
  the start of segment s+1 (the order changes, it stays a linear extension);
* split a segment, giving its tail (or head) to an unused accelerator or a CPU;
* merge two neighbouring segments; give a segment to another (unused) device.

Hill climbing takes the best of a batch of proposals when it improves and restarts from the best
with a few random moves after ``patience`` batches without improvement (iterated local search);
annealing accepts a worse best-of-batch with probability exp(-delta / T), T geometric from ``t0``
to ``t1`` times the start value over the budget.
"""

from __future__ import annotations

import math

import numpy as np

from placer.objectives.units import blocks_for, decode, greedy_fill, linear_order, repair_contiguous, runs


class _State:
    __slots__ = ("order", "ends", "devs")

    def __init__(self, order, ends, devs):
        self.order, self.ends, self.devs = np.asarray(order, dtype=np.int64), list(ends), list(devs)

    def copy(self):
        return _State(self.order.copy(), list(self.ends), list(self.devs))


def state_of(blocks, placement, order) -> _State:
    bdev = np.asarray(placement)[np.array([mb[0] for mb in blocks.members])]
    ends, devs = runs(bdev[order])
    return _State(order, ends, devs)


class IntervalSearch:
    def __init__(self, problem, objective, ev, rng):
        from placer.objectives.model import model_for

        self.problem, self.obj, self.ev, self.rng = problem, objective, ev, rng
        self.m = model_for(problem)
        self.b = blocks_for(problem, objective)
        self.accs = [int(d) for d in np.flatnonzero(self.m.acc)]
        self.cpus = [int(d) for d in np.flatnonzero(~self.m.acc)]
        ok = np.isfinite(self.m.t_us)
        self.block_ok = np.array([ok[mb].all(axis=0) for mb in self.b.members])  # (B, D)

    def place(self, s: _State) -> np.ndarray:
        return decode(self.b, s.order, s.ends, s.devs, self.m.n)

    def _unique(self, d) -> bool:
        return bool(self.m.acc[d]) or self.obj.cpu_contiguous

    def free_devices(self, s: _State, exclude=()) -> list[int]:
        used = set(s.devs)
        out = [d for d in self.accs if d not in used]
        out += [d for d in self.cpus if not self.obj.cpu_contiguous or d not in used]
        return [d for d in out if d not in exclude]

    def _normalise(self, s: _State) -> _State | None:
        ends, devs = [], []
        start = 0
        for e, d in zip(s.ends, s.devs):
            if e <= start:
                continue
            if devs and devs[-1] == d:
                ends[-1] = e
            else:
                ends.append(e)
                devs.append(d)
            start = e
        seen = set()
        for d in devs:
            if self._unique(d):
                if d in seen:
                    return None
                seen.add(d)
        s.ends, s.devs = ends, devs
        return s

    def propose(self, s: _State) -> _State | None:
        rng, b = self.rng, self.b
        S = len(s.devs)
        q = s.copy()
        r = rng.random()
        starts = [0] + q.ends[:-1]
        if S > 1 and r < 0.35:  # shift a boundary
            i = int(rng.integers(S - 1))
            step = int(rng.geometric(0.4)) * (1 if rng.random() < 0.5 else -1)
            lo, hi = starts[i] + 1 - 1, q.ends[i + 1] - 1 + 1
            q.ends[i] = int(min(max(q.ends[i] + step, lo), hi))
        elif S > 1 and r < 0.6:  # carry a block across a boundary
            i = int(rng.integers(S - 1))
            pos = np.empty(b.B, dtype=np.int64)
            pos[q.order] = np.arange(b.B)
            cut = q.ends[i]
            if rng.random() < 0.5:  # from segment i+1 back to the end of segment i
                cand = [x for x in range(cut, q.ends[i + 1])
                        if all(pos[pp] < cut for pp in b.preds[q.order[x]])]
                if not cand:
                    return None
                x = int(rng.choice(cand))
                blk = q.order[x]
                q.order = np.insert(np.delete(q.order, x), cut, blk)
                q.ends[i] += 1
            else:  # from segment i to the start of segment i+1
                cand = [x for x in range(starts[i], cut)
                        if all(pos[ss] >= cut for ss in b.succs[q.order[x]])]
                if not cand:
                    return None
                x = int(rng.choice(cand))
                blk = q.order[x]
                q.order = np.insert(np.delete(q.order, x), cut - 1, blk)
                q.ends[i] -= 1
        elif r < 0.8:  # split a segment, the new part to a free device
            i = int(rng.integers(S))
            size = q.ends[i] - starts[i]
            if size < 2:
                return None
            free = self.free_devices(q)
            if not free:
                return None
            d = int(rng.choice(free))
            cut = starts[i] + int(rng.integers(1, size))
            if rng.random() < 0.5:  # tail to d
                q.ends.insert(i, cut)
                q.devs.insert(i + 1, d)
            else:  # head to d
                q.ends.insert(i, cut)
                q.devs.insert(i, d)
        elif S > 1 and r < 0.9:  # merge neighbours
            i = int(rng.integers(S - 1))
            keep = q.devs[i] if rng.random() < 0.5 else q.devs[i + 1]
            del q.ends[i]
            del q.devs[i]
            q.devs[i] = keep
        else:  # another device for a segment
            i = int(rng.integers(S))
            free = self.free_devices(q, exclude=(q.devs[i],))
            if not free:
                return None
            q.devs[i] = int(rng.choice(free))
        q = self._normalise(q)
        if q is None:
            return None
        # every block must be runnable on its segment's device
        start = 0
        for e, d in zip(q.ends, q.devs):
            if not self.block_ok[q.order[start:e], d].all():
                return None
            start = e
        return q

    def starts(self, given=None) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Starting splits: their greedy on a few orders, and a given placement repaired."""
        out = []
        b = self.b
        for how, sd in (("depth", 0), ("index", 0), ("random", 1)):
            order = linear_order(b, how, sd)
            out.append((f"greedy:{how}", order, greedy_fill(self.problem, self.obj, order)))
        if given is not None:
            p = repair_contiguous(self.problem, self.obj, given)
            out.insert(0, ("given", linear_order(b, "index", prefer=p[[mb[0] for mb in b.members]]), p))
        return out


def interval_search(problem, objective, ev, seed: int, anneal: bool, batch: int = 8, patience: int = 20,
                    kick: int = 4, t0: float = 0.02, t1: float = 1e-4, start=None,
                    limit: int | None = None) -> tuple[np.ndarray, list[str]]:
    """The loop of ``local-search`` / ``anneal`` under a contiguity-demanding objective; returns
    (best placement, notes). Stops when the evaluator's budget is spent (or ``limit`` placements)."""
    rng = np.random.default_rng(seed)
    S = IntervalSearch(problem, objective, ev, rng)
    cap = ev.limit if limit is None else min(limit, ev.limit or limit)

    def room():
        left = ev.remaining()
        own = None if cap is None else cap - ev.placements
        vals = [x for x in (left, own) if x is not None]
        return min(vals) if vals else batch

    cur = best = None
    origin = None
    runnable = np.isfinite(S.m.t_us)
    for name, order, p in S.starts(start):
        if room() <= 0 or ev.out_of_budget():
            break
        if not runnable[np.arange(S.m.n), p].all():
            continue
        v = float(ev.evaluate_batch(p[None, :]).objective_us[0])
        st = state_of(S.b, p, order)
        if S._normalise(st) is None:
            continue
        if cur is None or v < cur[0]:
            cur, origin = (v, st), name
        if best is None or v < best[0]:
            best = (v, st)
    if cur is None:
        raise RuntimeError("no starting split could be evaluated within the budget")
    f0 = cur[0] if np.isfinite(cur[0]) else 1.0
    stale = moves = accepted = 0
    while not ev.out_of_budget():
        k = min(batch, room())
        if k <= 0:
            break
        props = []
        for _ in range(8 * k):
            q = S.propose(cur[1])
            if q is not None:
                props.append(q)
                if len(props) == k:
                    break
        if not props:
            break
        vals = ev.evaluate_batch(np.stack([S.place(q) for q in props])).objective_us
        moves += len(props)
        j = int(np.argmin(vals))
        top = float(vals[j])
        if anneal:
            T = f0 * t0 * (t1 / t0) ** ev.fraction_used()
            take = top < cur[0] or (np.isfinite(top) and T > 0 and rng.random() < math.exp(-(top - cur[0]) / T))
        else:
            take = top < cur[0]
        improved = top < best[0]
        if take:
            cur = (top, props[j])
            accepted += 1
        if improved:
            best = (top, props[j])
        stale = 0 if improved else stale + 1
        if not anneal and stale >= patience:
            q = best[1]
            for _ in range(kick):
                q2 = S.propose(q)
                q = q2 if q2 is not None else q
            if room() > 0 and not ev.out_of_budget():
                cur = (float(ev.evaluate_batch(S.place(q)[None, :]).objective_us[0]), q)
                if cur[0] < best[0]:
                    best = cur
            stale = 0
    notes = [f"interval search under {objective.describe()}: started from {origin} ({cur and f0 / 1000:.3f} ms)",
             f"{moves} moves evaluated, {accepted} accepted"]
    return S.place(best[1]), notes
