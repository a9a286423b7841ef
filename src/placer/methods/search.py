"""The one local search: iterated hill climbing and simulated annealing over a move set
(:func:`climb`), and the move set of the objectives that demand contiguity (:class:`IntervalSearch`).

:func:`climb` is the loop of ``local-search`` and ``anneal`` (and of ``exact-published``'s upper
bound): propose a batch of moves from the current state, evaluate them in one batch through the
evaluator, take the best of them when it improves (hill climbing) or with probability
exp(-delta / T) when it does not (annealing, T geometric from ``t0`` to ``t1`` times the start
value as the placement budget is used), and, hill climbing, restart from the best with ``kick``
random moves after ``patience`` batches without a new best (iterated local search). What a state
is, how moves are proposed and scored, and what taking one costs, is the move set's:
``methods/local_search.py`` moves ops and colocation groups under the simulator, and
:class:`IntervalSearch` moves interval splits (:mod:`placer.objectives.units`).

Under an objective that demands contiguity a state is a linear extension of the block graph cut
into segments, one device each (each accelerator, and under ``throughput`` / ``pipeline`` each CPU,
on at most one segment). Every move keeps that form, so every proposal is contiguous and its
contraction acyclic; memory is the only constraint left to the objective. Moves (Tarnawski et al.
2020 search the same space exactly with their DP and IP; these are local steps in it):

* shift a boundary between two segments by a few blocks;
* carry a block across a boundary: a block of segment s+1 whose predecessors all lie before it
  moves to the end of segment s, or a block of segment s whose successors all lie after it moves to
  the start of segment s+1 (the order changes, it stays a linear extension);
* split a segment, giving its tail (or head) to an unused accelerator or a CPU;
* merge two neighbouring segments; give a segment to another (unused) device.
"""

from __future__ import annotations

import math
from typing import Iterable, Protocol

import numpy as np

from placer.objectives.units import blocks_for, decode, greedy_fill, linear_order, repair_contiguous, runs


# ---------------------------------------------------------------------- the loop
Key = tuple  # what a move set ranks states by, lowest best; its second item is the value annealing compares
Entry = tuple  # (key, state, ...): a state with its key (a move set may keep more after them)


class Moves(Protocol):
    """What :func:`climb` needs of a move set."""

    def batch_size(self, batch: int) -> int:
        """Proposals to evaluate in the next batch (0: stop)."""

    def proposals(self, cur: Entry, k: int) -> list:
        """Up to ``k`` states a move away from the current one (none: stop)."""

    def evaluate(self, states: list) -> tuple[list[Key], int]:
        """Their keys, from one batch through the evaluator, and the index of the best."""

    def accept(self, state, key: Key) -> Entry | None:
        """The entry of a proposal taken as the current state (None: the budget is spent)."""

    def restart(self, state, kick: int) -> Entry | None:
        """The entry of ``state`` kicked by ``kick`` random moves, evaluated (None: the budget is spent)."""

    def may_worsen(self, top: Key, cur: Key) -> bool:
        """Whether annealing may take ``top`` over ``cur`` when it is worse."""


def best_start(entries: Iterable[tuple[str, Entry]]) -> tuple[Entry | None, str | None]:
    """The first lowest of the named starting entries (evaluated lazily, as the caller yields them)
    and its name."""
    cur = origin = None
    for name, entry in entries:
        if cur is None or entry[0] < cur[0]:
            cur, origin = entry, name
    return cur, origin


def climb(moves: Moves, ev, rng: np.random.Generator, start: Entry, f0: float, anneal: bool, batch: int,
          patience: int | None = None, kick: int | None = None, t0: float | None = None,
          t1: float | None = None, give_up: int | None = None) -> tuple[Entry, int, int]:
    """Hill climbing (``anneal=False``: a proposal is taken when it improves; after ``patience``
    batches without a new best, restart from the best with ``kick`` random moves) or annealing (a
    worse proposal taken with probability exp(-delta / T), T = ``f0`` * ``t0`` * (``t1`` / ``t0``)
    ** the budget's used fraction) from ``start`` until the evaluator's budget is spent, or, with
    ``give_up``, hill climbing's ``give_up``-th restart in a row that follows no new best. Returns
    (the best entry, proposals evaluated, proposals taken). Nothing here reads the clock."""
    cur = best = start
    stale = n_moves = accepted = 0
    fruitless, best_at_restart = 0, start[0]
    while not ev.out_of_budget():
        k = moves.batch_size(batch)
        if k <= 0:
            break
        props = moves.proposals(cur, k)
        if not props:
            break
        keys, j = moves.evaluate(props)
        n_moves += len(props)
        top = keys[j]
        if anneal:
            T = f0 * t0 * (t1 / t0) ** ev.fraction_used()
            take = top < cur[0] or (moves.may_worsen(top, cur[0]) and T > 0
                                    and rng.random() < math.exp(-(top[1] - cur[0][1]) / T))
        else:
            take = top < cur[0]
        improved = top < best[0]
        taken = moves.accept(props[j], top) if take else None
        if taken is not None:
            cur = taken
            accepted += 1
            if cur[0] < best[0]:
                best = cur
        elif improved:
            best = (top, props[j])
        stale = 0 if improved else stale + 1
        if not anneal and stale >= patience:
            if give_up is not None:
                fruitless = fruitless + 1 if not best[0] < best_at_restart else 0
                best_at_restart = best[0]
                if fruitless >= give_up:
                    break
            kicked = moves.restart(best[1], kick)
            if kicked is not None:
                cur = kicked
                if cur[0] < best[0]:
                    best = cur
            stale = 0
    return best, n_moves, accepted


# ---------------------------------------------------------------------- interval splits
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
    """The interval-split move set (see the module docstring); keys are ``(False, objective)``."""

    def __init__(self, problem, objective, ev, rng, cap: int | None = None, method: str = "interval search"):
        from placer.objectives.model import model_for

        self.problem, self.obj, self.ev, self.rng = problem, objective, ev, rng
        self.method = method  # who searches (named when the restrictions leave no contiguous split)
        self.cap = cap  # placements this search may reach (None: the evaluator's budget)
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

    # -- what climb() asks of a move set
    def room(self, batch: int) -> int:
        left = self.ev.remaining()
        own = None if self.cap is None else self.cap - self.ev.placements
        vals = [x for x in (left, own) if x is not None]
        return min(vals) if vals else batch

    def batch_size(self, batch: int) -> int:
        return min(batch, self.room(batch))

    def proposals(self, cur, k: int) -> list:
        props = []
        for _ in range(8 * k):
            q = self.propose(cur[1])
            if q is not None:
                props.append(q)
                if len(props) == k:
                    break
        return props

    def value(self, s: _State) -> float:
        return float(self.ev.evaluate_batch(self.place(s)[None, :]).objective_us[0])

    def evaluate(self, states: list):
        vals = self.ev.evaluate_batch(np.stack([self.place(q) for q in states])).objective_us
        return [(False, float(v)) for v in vals], int(np.argmin(vals))

    def accept(self, state, key):
        return (key, state)

    def restart(self, state, kick: int):
        q = state
        for _ in range(kick):
            q2 = self.propose(q)
            q = q2 if q2 is not None else q
        if self.room(1) > 0 and not self.ev.out_of_budget():
            return ((False, self.value(q)), q)
        return None

    def may_worsen(self, top, cur) -> bool:
        return bool(np.isfinite(top[1]))

    def start_entries(self, given=None):
        """The evaluated starting splits (:meth:`starts`) that are runnable and of the search's form;
        when none of them is (ops that only some accelerators can run: the published greedy fills
        accelerators in order), the split of :meth:`allowed_start`."""
        runnable = np.isfinite(self.m.t_us)
        found = False
        for name, order, p in self.starts(given):
            if self.room(1) <= 0 or (self.ev.out_of_budget() and (found or not self.ev.time_up())):
                return  # (when only a time limit has ended, the first runnable start is still evaluated)
            if not runnable[np.arange(self.m.n), p].all():
                continue
            entry = self._entry(order, p)
            if entry is not None:
                found = True
                yield name, entry
        if not found and self.room(1) > 0 and (not self.ev.out_of_budget() or self.ev.time_up()):
            entry = self._entry(*self.allowed_start())
            if entry is not None:
                yield "greedy:allowed", entry

    def _entry(self, order, p):
        """The evaluated entry of a starting split, or None when it is not of the search's form."""
        v = float(self.ev.evaluate_batch(p[None, :]).objective_us[0])
        st = state_of(self.b, p, order)
        return None if self._normalise(st) is None else ((False, v), st)

    def allowed_start(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, placement): blocks in depth order, each on the current interval's device where it
        can run there (and fits, on an accelerator), else opening an interval on the first device not
        yet holding one (accelerators first, then CPUs) that can run it and has room. NotApplicable,
        naming the op and the devices it can run on, when no such device is left."""
        from placer.methods.base import NotApplicable

        b, m = self.b, self.m
        order = linear_order(b, "depth")
        bdev = np.empty(b.B, dtype=np.int64)
        used: set[int] = set()
        cur, room = -1, 0.0
        for blk in order:
            size = float(b.mem_bytes[blk])
            if cur >= 0 and self.block_ok[blk, cur] and (not m.acc[cur] or size <= room):
                bdev[blk] = cur
                room -= size
                continue
            avail = [d for d in self.accs + self.cpus if (d not in used or not self._unique(d))
                     and (not m.acc[d] or size <= m.cap_bytes[d])]
            free = [d for d in avail if self.block_ok[blk, d]]
            if not free:
                why = stuck_message(self.problem, b.members[blk], self.block_ok[blk], avail,
                                    "each already holding an earlier interval of the contiguous split built in "
                                    "depth order (one interval per device) or without room for it")
                raise NotApplicable(self.method, why, "use a method not bound to contiguous splits (local-search, cp-sat)")
            cur = free[0]
            used.add(cur)
            room = float(m.cap_bytes[cur]) - size if m.acc[cur] else 0.0
            bdev[blk] = cur
        return order, bdev[b.block_of]


def stuck_message(problem, members, block_ok, avail, reason: str) -> str:
    """Why a block (its ops ``members``) has no device in a contiguous split, naming an op and the
    devices it can run on: the block's ops share no device at all (a pair of them named), else the
    most restricted of its ops that can run on none of ``avail`` (the devices still free to take it),
    followed by ``reason`` (``which no contiguous split ... reaches``)."""
    from placer.methods.devices import device_list, only_on

    ops = [int(i) for i in members]
    ok = problem.allowed
    a = ops[0]
    if not np.asarray(block_ok).any():  # the block's ops share no device at all
        b = next((j for j in ops[1:] if not (ok[a] & ok[j]).any()), ops[-1])
        names = problem.graph.op_names
        return (f"op '{names[a]}' can run only on {device_list(problem, ok[a])} and op '{names[b]}' only on "
                f"{device_list(problem, ok[b])}, which a contiguous split keeps on one device (one block: "
                "a colocation group with its backward ops, or ops that reach each other)")
    alone = sorted((int(ok[i].sum()), i) for i in ops if not ok[i, list(avail)].any())
    if alone:
        return f"{only_on(problem, alone[0][1])}, {reason}"
    return (f"the ops of the block of op '{problem.graph.op_names[a]}' can all run only on "
            f"{device_list(problem, block_ok)}, {reason}")


def interval_search(problem, objective, ev, seed: int, anneal: bool, batch: int = 8, patience: int = 20,
                    kick: int = 4, t0: float = 0.02, t1: float = 1e-4, start=None,
                    limit: int | None = None, method: str = "interval search") -> tuple[np.ndarray, list[str]]:
    """``local-search`` / ``anneal`` (:func:`climb`) over interval splits, under a
    contiguity-demanding objective; returns (best placement, notes). Stops when the evaluator's
    budget is spent (or ``limit`` placements). ``method`` names the caller in a NotApplicable."""
    rng = np.random.default_rng(seed)
    S = IntervalSearch(problem, objective, ev, rng, cap=ev.limit if limit is None else min(limit, ev.limit or limit),
                       method=method)
    cur, origin = best_start(S.start_entries(start))
    if cur is None:
        raise RuntimeError("no starting split could be evaluated within the budget")
    f0 = cur[0][1] if np.isfinite(cur[0][1]) else 1.0
    best, moves, accepted = climb(S, ev, rng, cur, f0, anneal, batch, patience, kick, t0, t1)
    notes = [f"interval search under {objective.describe()}: started from {origin} ({f0 / 1000:.3f} ms)",
             f"{moves} moves evaluated, {accepted} accepted"]
    return S.place(best[1]), notes
