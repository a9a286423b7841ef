"""The quotient graph behind every grouping: groups of ops of a DAG under merges that keep the
group graph acyclic, runnable and within memory.

The one rule (:meth:`Quotient.try_merge`): merging groups a and b (a before b in the current
topological order) is refused when a path leads from a to b through some third group, since
contracting them would close a cycle. It is free when a's only successor is b or b's only
predecessor is a. Otherwise two depth-first searches run in turn, one edge each: forward from a's
other successors among the groups positioned up to b, backward from b's other predecessors among
the groups positioned from a; meeting (or reaching the other end) means a cycle. The first search
to finish without one gives the set to move: a's descendants behind the merged group (which takes
b's position) or b's ancestors in front of it (it takes a's position). Positions are floats that
increase along every group edge, so moving a set is a respacing between its neighbours' positions
(with a renumbering when floating point runs out of room). The cost of a merge is about twice the
smaller side of the window between a and b.

Merges are also refused when the two groups share no device (a Problem) or cost key (an OpGraph)
on which all their ops can run, when their colocation families would share none, or, given a
Problem, when the merged group's parameter, workspace and outgoing bytes would fit no device.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from placer.graph import OpGraph
from placer.grouping import separate as _kernel
from placer.problem import Problem

_search = _kernel.separate

# ----------------------------------------------------------------------------- the quotient graph
def _op_masks_and_work(source) -> tuple[OpGraph, list[int], np.ndarray, Any]:
    """Per op: bitmask of where it can run (devices of a Problem, else cost keys), its work (fastest
    compute, else FLOPs) and, for a Problem, a function mask -> largest device memory there."""
    if isinstance(source, Problem):
        g, t = source.graph, source.compute_us
        bits = _bitmasks(np.isfinite(t))
        mem = source.memory_bytes
        cache: dict[int, float] = {}

        def cap(mask: int) -> float:
            if mask not in cache:
                cache[mask] = max(float(mem[d]) for d in range(len(mem)) if mask >> d & 1)
            return cache[mask]

        return g, bits, source.fastest_us.copy(), cap
    g = source
    if g.compute_us:
        t = np.stack([g.compute_us[k] for k in g.cost_keys], axis=1)
        fin = np.isfinite(t)
        bits = _bitmasks(fin)
        work = np.where(fin, t, np.inf).min(axis=1)
        work[~np.isfinite(work)] = 0.0
    else:
        bits, work = [1] * g.n_ops, g.flops.astype(np.float64)
    return g, bits, work, None


def _bitmasks(ok: np.ndarray) -> list[int]:
    """Row i of a boolean (n, k) matrix as the integer with bit j set where ok[i, j]."""
    if ok.shape[1] <= 62:
        return (ok.astype(np.int64) @ (np.int64(1) << np.arange(ok.shape[1], dtype=np.int64))).tolist()
    return [sum(1 << int(j) for j in np.flatnonzero(row)) for row in ok]


class Quotient:
    """Groups of a DAG under merges that keep the group graph acyclic (see the module docstring).
    Groups are named by a representative op; ``pos`` (floats) increases along every group edge."""

    def __init__(self, source):
        g, masks, work, cap = _op_masks_and_work(source)
        n = g.n_ops
        self.graph, self.n, self.cap = g, n, cap
        src, dst, eb = g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist()
        self.succ: list[dict | None] = [dict() for _ in range(n)]
        self.pred: list[dict | None] = [dict() for _ in range(n)]
        self.osucc: list[list[int]] = [[] for _ in range(n)]
        self.opred: list[list[int]] = [[] for _ in range(n)]
        tb = [0.0] * n
        for s, d, b in zip(src, dst, eb):
            self.succ[s][d] = b
            self.pred[d][s] = b
            self.osucc[s].append(d)
            self.opred[d].append(s)
            if b > tb[s]:
                tb[s] = b
        self.tensor_bytes = tb  # one output tensor per op, its size the largest edge it feeds
        self.ext = [len(x) for x in self.osucc]  # consumers outside the op's group
        self.out = [tb[i] if self.ext[i] else 0.0 for i in range(n)]  # bytes leaving the group
        self.held = (g.param_bytes + g.temp_bytes).tolist()
        self.work = [float(w) for w in work]
        self.mask = list(masks)
        self.grp = list(range(n))
        self.members: list[list[int] | None] = [[i] for i in range(n)]
        self.alive = [True] * n
        self.n_alive = n
        self.fam = list(range(n))  # colocation family (union-find), its mask = where all can run
        self.fmask = list(masks)
        self.pos = [float(i) for i in range(n)]
        self.untied = 0
        # the compiled search's view (placer.grouping.separate): op edges, the op -> group map, each
        # group's members as a linked list, group degrees (len of succ/pred) and positions
        self._sptr, self._sidx = np.asarray(g.succ_ptr, np.int64), np.asarray(g.succ_idx, np.int64)
        self._pptr, self._pidx = np.asarray(g.pred_ptr, np.int64), np.asarray(g.pred_idx, np.int64)
        self._grp = np.arange(n, dtype=np.int64)
        self._head, self._tail = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
        self._nxt = np.full(n, -1, dtype=np.int64)
        self._outdeg = np.array([len(x) for x in self.succ], dtype=np.int64)
        self._indeg = np.array([len(x) for x in self.pred], dtype=np.int64)
        self._pos = np.arange(n, dtype=np.float64)
        self._fmark, self._bmark = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self._fstack, self._bstack = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self._stamp = 0
        self._bind()

    def _bind(self) -> None:
        """The compiled search's arguments after the stamp (arrays updated in place)."""
        self._kargs = (self._pos, self._grp, self._head, self._nxt, self._sptr, self._sidx, self._pptr, self._pidx,
                       self._outdeg, self._indeg, self._fmark, self._bmark, self._fstack, self._bstack)

    def clone(self) -> "Quotient":
        """An independent copy in the same state (the same dict orders, so it merges as this one would)."""
        q = object.__new__(type(self))
        q.__dict__.update(self.__dict__)
        q.succ = [None if d is None else dict(d) for d in self.succ]
        q.pred = [None if d is None else dict(d) for d in self.pred]
        q.members = [None if m is None else list(m) for m in self.members]
        for name in ("tensor_bytes", "ext", "out", "held", "work", "mask", "grp", "alive", "fam", "fmask", "pos"):
            setattr(q, name, list(getattr(self, name)))
        for name in ("_grp", "_head", "_tail", "_nxt", "_outdeg", "_indeg", "_pos", "_fmark", "_bmark", "_fstack", "_bstack"):
            setattr(q, name, getattr(self, name).copy())
        q._bind()
        return q

    # --------------------------------------------------------------- families (colocation)
    def family(self, r: int) -> int:
        f = self.fam
        while f[r] != r:
            f[r] = f[f[r]]
            r = f[r]
        return r

    def tie(self, a: int, b: int) -> bool:
        """Put groups a and b in one colocation family; False when they share no device."""
        fa, fb = self.family(a), self.family(b)
        if fa == fb:
            return True
        m = self.fmask[fa] & self.fmask[fb]
        if not m:
            return False
        lo, hi = min(fa, fb), max(fa, fb)
        self.fam[hi] = lo
        self.fmask[lo] = m
        return True

    # --------------------------------------------------------------- merging
    def try_merge(self, a: int, b: int) -> int:
        """Merge groups a and b when that keeps the group graph acyclic and runnable; return the
        merged group's name, or -1 (nothing changed)."""
        if a == b:
            return a
        pos = self.pos
        if pos[a] > pos[b]:
            a, b = b, a
        mk = self.mask[a] & self.mask[b]
        if not mk:
            return -1
        fa, fb = self.family(a), self.family(b)
        if fa != fb and not (self.fmask[fa] & self.fmask[fb] & mk):
            return -1
        if self.cap is not None and self.held[a] + self.held[b] + self.out[a] + self.out[b] > self.cap(mk):
            return -1
        found = self._separate_fast(a, b)
        if found is None:
            return -1
        side, moved = found
        pa, pb = pos[a], pos[b]
        r, o = (a, b) if len(self.members[a]) >= len(self.members[b]) else (b, a)
        self._absorb(r, o, mk)
        if side == "after":  # merged group takes b's place; a's descendants before b move behind it
            pos[r] = pb
            self._pos[r] = pb
            if moved:
                bound = min((pos[y] for x in moved for y in self.succ[x] if y not in moved), default=pb + len(moved) + 1)
                self._respace(self._in_order(moved), pb, bound)
        else:  # merged group takes a's place; b's ancestors after a move in front of it
            pos[r] = pa
            self._pos[r] = pa
            if moved:
                bound = max((pos[y] for x in moved for y in self.pred[x] if y not in moved), default=pa - len(moved) - 1)
                self._respace(self._in_order(moved), bound, pa)
        return r

    def _separate_fast(self, a: int, b: int):
        """:meth:`_separate`'s answer from the compiled search (:mod:`placer.grouping.separate`):
        None, or the side and the moved groups as a set (positions unique: any order sorts alike)
        or, where two moved groups share a position, :meth:`_separate`'s own set, whose insertion
        order decides how they sort."""
        self._stamp += 1
        code, k = _search(a, b, self._stamp, *self._kargs)
        if code < 0:  # a cycle
            return None
        side = "after" if code == _kernel.AFTER else "before"
        if k == 0:
            return side, set()
        moved = (self._fstack if code == _kernel.AFTER else self._bstack)[:k].tolist()
        if k > 1 and len({self.pos[x] for x in moved}) < k:
            return self._separate(a, b)
        return side, set(moved)

    def _in_order(self, moved: set[int]) -> list[int]:
        return sorted(moved, key=self.pos.__getitem__)

    def _separate(self, a: int, b: int):
        """None when a path leads from a to b other than the edge a -> b. Otherwise ("after", the
        descendants of a positioned before b) or ("before", the ancestors of b positioned after a):
        two depth-first searches advance one edge each in turn and the first to finish answers, so
        the cost is about twice the smaller side."""
        pos, succ, pred = self.pos, self.succ, self.pred
        lo, hi = pos[a], pos[b]
        fset: set[int] = set()
        bset: set[int] = set()
        fstack = [(a, iter(succ[a]))]
        bstack = [(b, iter(pred[b]))]
        while True:
            while fstack:  # one forward edge
                x, it = fstack[-1]
                y = next(it, -1)
                if y < 0:
                    fstack.pop()
                    continue
                if y == b:
                    if x != a:
                        return None
                elif pos[y] <= hi and y not in fset:
                    if y in bset:
                        return None
                    fset.add(y)
                    fstack.append((y, iter(succ[y])))
                break
            else:
                return "after", fset
            while bstack:  # one backward edge
                x, it = bstack[-1]
                y = next(it, -1)
                if y < 0:
                    bstack.pop()
                    continue
                if y == a:
                    if x != b:
                        return None
                elif pos[y] >= lo and y not in bset:
                    if y in fset:
                        return None
                    bset.add(y)
                    bstack.append((y, iter(pred[y])))
                break
            else:
                return "before", bset

    def _respace(self, nodes: list[int], lo: float, hi: float) -> None:
        """Give ``nodes`` (in order) positions strictly between lo and hi; renumber every live group
        first when floating point has no room left between them."""
        k = len(nodes)
        step = (hi - lo) / (k + 1)
        if step <= 1e-9 * max(1.0, abs(lo), abs(hi)):
            skip = set(nodes)
            order = sorted((x for x in range(self.n) if self.alive[x] and x not in skip), key=self.pos.__getitem__)
            # renumber with gaps wide enough for the nodes to go between their neighbours
            for i, x in enumerate(order):
                self.pos[x] = float(i) * (k + 2)
            if order:
                self._pos[order] = [self.pos[x] for x in order]
            # recompute the bounds in the new numbering
            succ_pos = [self.pos[y] for x in nodes for y in self.succ[x] if y not in nodes]
            pred_pos = [self.pos[y] for x in nodes for y in self.pred[x] if y not in nodes]
            lo = max(pred_pos, default=-1.0)
            hi = min(succ_pos, default=lo + k + 1)
            step = (hi - lo) / (k + 1)
        for i, x in enumerate(nodes):
            self.pos[x] = lo + step * (i + 1)
        if nodes:
            self._pos[nodes] = [self.pos[x] for x in nodes]

    def _absorb(self, r: int, o: int, mask: int) -> None:
        grp, ext, tb = self.grp, self.ext, self.tensor_bytes
        dropped = 0.0
        for x in self.members[o]:
            for c in self.osucc[x]:
                if grp[c] == r:
                    ext[x] -= 1
                    if ext[x] == 0:
                        dropped += tb[x]
            for y in self.opred[x]:
                if grp[y] == r:
                    ext[y] -= 1
                    if ext[y] == 0:
                        dropped += tb[y]
        for x in self.members[o]:
            grp[x] = r
        self._grp[self.members[o]] = r
        self._nxt[self._tail[r]] = self._head[o]
        self._tail[r] = self._tail[o]
        succ, pred = self.succ, self.pred
        outdeg, indeg = self._outdeg, self._indeg
        for y, w in succ[o].items():
            if y != r:
                del pred[y][o]
                succ[r][y] = succ[r].get(y, 0.0) + w
                pred[y][r] = pred[y].get(r, 0.0) + w
                indeg[y] = len(pred[y])
        for y, w in pred[o].items():
            if y != r:
                del succ[y][o]
                pred[r][y] = pred[r].get(y, 0.0) + w
                succ[y][r] = succ[y].get(r, 0.0) + w
                outdeg[y] = len(succ[y])
        succ[r].pop(o, None)
        pred[r].pop(o, None)
        outdeg[r], indeg[r] = len(succ[r]), len(pred[r])
        succ[o] = pred[o] = None
        self.members[r].extend(self.members[o])
        self.members[o] = None
        self.out[r] = max(0.0, self.out[r] + self.out[o] - dropped)
        self.held[r] += self.held[o]
        self.work[r] += self.work[o]
        self.mask[r] = mask
        fr, fo = self.family(r), self.family(o)
        fm = self.fmask[fr] & self.fmask[fo] & mask  # both families' devices, as in tie()
        if fr != fo:
            self.fam[max(fr, fo)] = min(fr, fo)
        self.fmask[self.family(r)] = fm
        self.alive[o] = False
        self.n_alive -= 1

    def live(self) -> list[int]:
        """Live groups in the current topological order."""
        return sorted((x for x in range(self.n) if self.alive[x]), key=lambda x: (self.pos[x], x))

    # --------------------------------------------------------------- building blocks
    def merge_sets(self, sets) -> None:
        """Colocation: tie each set into one family, then merge its groups as far as acyclicity
        allows (in topological order, so a convex set always becomes one group). A member that
        shares no device with the rest is left out and counted in ``untied`` (a Problem has already
        refused such user colocation groups, so only the rules' sets can get here)."""
        for s in sets:
            reps = sorted({self.grp[int(x)] for x in s}, key=self.pos.__getitem__)
            pending = reps[:1] + [x for x in reps[1:] if self.tie(reps[0], x)]
            self.untied += len(reps) - len(pending)  # a rule asked for a tie no device can host
            while len(pending) > 1:
                cur, rest = pending[0], []
                for x in pending[1:]:
                    m = self.try_merge(cur, x)
                    if m >= 0:
                        cur = m
                    else:
                        rest.append(x)
                pending = rest

    def greedy(self, cost: dict[int, float], combine, n_target: int | None, below: float | None,
               neighbours: str) -> None:
        """Merge the cheapest group into a neighbour until ``n_target`` groups are left or none costs
        less than ``below``; the merged group costs ``combine(cost of the node, cost of the
        neighbour)``. ``neighbours='successor'`` (Placeto A.6): successors first, by bytes sent to
        them, then predecessors; ``'any'``: every neighbour by bytes exchanged. A group that can
        merge with none of its neighbours is left as it is."""
        heap = [(cost[r], r) for r in self.live()]
        heapq.heapify(heap)
        n_target = 1 if n_target is None else max(1, n_target)
        pos = self.pos
        while heap and self.n_alive > n_target:
            c, r = heapq.heappop(heap)
            if not self.alive[r] or c != cost[r]:
                continue
            if below is not None and c >= below:
                break
            sx, px = self.succ[r], self.pred[r]
            if neighbours == "successor":
                cands = sorted(sx, key=lambda y: (-sx[y], pos[y])) + sorted(px, key=lambda y: (-px[y], pos[y]))
            else:
                both = {y: sx.get(y, 0.0) + px.get(y, 0.0) for y in set(sx) | set(px)}
                cands = sorted(both, key=lambda y: (-both[y], pos[y]))
            for y in cands:
                cy = cost[y]
                m = self.try_merge(r, y)
                if m >= 0:
                    cost[m] = combine(c, cy)
                    heapq.heappush(heap, (cost[m], m))
                    break

    def merge_labels(self, labels: np.ndarray, recent: int = 8) -> None:
        """Make every label as few groups as acyclicity allows: merge along edges inside a label
        (ops in topological order), then merge pieces of a label that no edge joins (each piece
        tried against the ``recent`` last pieces of its label)."""
        lab = np.asarray(labels).tolist()
        grp = self.grp
        for x in range(self.n):
            for c in self.osucc[x]:
                if lab[c] == lab[x] and grp[c] != grp[x]:
                    self.try_merge(grp[x], grp[c])
        pieces: dict[Any, list[int]] = {}
        for r in self.live():
            key = lab[self.members[r][0]]
            lst = pieces.setdefault(key, [])
            for k in range(len(lst) - 1, max(-1, len(lst) - 1 - recent), -1):
                m = self.try_merge(lst[k], r)
                if m >= 0:
                    lst[k] = m
                    break
            else:
                lst.append(r)

    def result(self) -> tuple[np.ndarray, int, np.ndarray]:
        """(op -> group numbered in topological order, number of groups, group colocation ids)."""
        live = self.live()
        gid = np.full(self.n, -1, dtype=np.int64)
        gid[live] = np.arange(len(live))
        op_group = gid[np.asarray(self.grp, dtype=np.int64)]
        fams = [self.family(r) for r in live]
        count: dict[int, int] = {}
        for f in fams:
            count[f] = count.get(f, 0) + 1
        ids: dict[int, int] = {}
        coloc = np.array([ids.setdefault(f, len(ids)) if count[f] > 1 else -1 for f in fams], dtype=np.int64)
        return op_group, len(live), coloc
