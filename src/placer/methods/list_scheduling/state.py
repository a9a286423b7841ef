"""The state the list schedulers share (:mod:`placer.methods.list_scheduling`): costs, links,
colocation pins, memory in use, and the simulator's outgoing buses, kept incrementally.

Speed without a change of answer. Every time and every comparison here is the one the schedulers
made when they rescanned everything at every step (commit a5c1ab9; the placements it gave on 108
small problems are pinned in tests/fixtures/list_sched_placements.json):

* :class:`Slots` finds the earliest idle gap of a bus or a device in sorted busy intervals kept in
  blocks of at most 2 * ``BLOCK`` with the largest gap of each block: a block whose largest gap is
  shorter than the request (with a margin for rounding) is skipped whole, which the step-by-step
  scan would have done too (each of its gaps fails the same ``t + dur <= start`` test).
* a ready op's data-ready times under ``comm="sim"`` depend on the buses of its parents whose
  tensors are not booked yet. :meth:`State.data_ready` records, per bus, the span of the gaps it
  probed; a booking on that bus that leaves the span alone cannot move the answer (the gaps before
  it still fail, the one found still fits), so only the ready ops whose span it touches, or whose
  parent it sends, are recomputed (``dirty``), where the old code recomputed every waiting op at
  every step.
* the bytes an op would receive on each device are cached per op and dropped when a sibling's
  copy lands on a device (``has_copy``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from placer.errors import InputError
from placer.grouping import colocation_units
from placer.methods.devices import usable_devices
from placer.methods.links import link_arrays, mean_comm_us, op_gap_us

COMM = ("sim", "free")


@dataclass
class Schedule:
    """A list scheduler's answer under its own cost model (not the simulator's)."""

    placement: np.ndarray
    start_us: np.ndarray
    finish_us: np.ndarray
    order: np.ndarray  # ops in the order they were scheduled
    notes: list[str] = field(default_factory=list)

    @property
    def makespan_us(self) -> float:
        return float(self.finish_us.max()) if len(self.finish_us) else 0.0

BLOCK = 48
INF = math.inf


class Slots:
    """Disjoint busy intervals ``(start, end)`` in tuple order, with the earliest fitting gap."""

    __slots__ = ("blocks", "firsts", "maxgap")

    def __init__(self):
        self.blocks: list[list[tuple[float, float]]] = []
        self.firsts: list[tuple[float, float]] = []
        self.maxgap: list[float] = []  # per block: largest start - previous end (the block's first included)

    def _gap(self, b: int) -> float:
        blk = self.blocks[b]
        prev = self.blocks[b - 1][-1][1] if b > 0 else -INF
        m = -INF
        for s, e in blk:
            m = max(m, s - prev)
            prev = e
        return m

    def insert(self, item: tuple[float, float]) -> None:
        if not self.blocks:
            self.blocks.append([item])
            self.firsts.append(item)
            self.maxgap.append(INF)
            return
        b = max(0, bisect.bisect_right(self.firsts, item) - 1)
        blk = self.blocks[b]
        bisect.insort(blk, item)
        self.firsts[b] = blk[0]
        if len(blk) > 2 * BLOCK:
            self.blocks[b:b + 1] = [blk[:BLOCK], blk[BLOCK:]]
            self.firsts[b:b + 1] = [blk[0], blk[BLOCK]]
            self.maxgap[b:b + 1] = [0.0, 0.0]
        for bb in range(b, min(b + 3, len(self.blocks))):
            self.maxgap[bb] = self._gap(bb)

    def earliest(self, ready: float, dur: float) -> float:
        """Earliest start >= ready of a free gap of length dur (the old ``_earliest_slot``)."""
        blocks = self.blocks
        if not blocks:
            return ready
        key = (ready, INF)
        b = bisect.bisect_right(self.firsts, key) - 1
        if b < 0:
            b, j, t = 0, 0, ready
        else:
            blk = blocks[b]
            j = bisect.bisect_right(blk, key)
            t = max(ready, blk[j - 1][1])
        blk = blocks[b]
        for k in range(j, len(blk)):
            s, e = blk[k]
            if t + dur <= s:
                return t
            t = max(t, e)
        maxgap = self.maxgap
        for bb in range(b + 1, len(blocks)):
            blk = blocks[bb]
            last = blk[-1][1]
            if maxgap[bb] < dur - 1e-9 * (1.0 + abs(last) + dur):  # no gap of the block fits
                t = max(t, last)
                continue
            for s, e in blk:
                if t + dur <= s:
                    return t
                t = max(t, e)
        return t


class State:
    """State shared by the list schedulers: costs, links, colocation pins, memory in use."""

    def __init__(self, problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 comm: str = "free"):
        if comm not in COMM:
            raise InputError("list scheduler", f"comm={comm!r}", "is not a communication model",
                             f"use one of {', '.join(COMM)}")
        self.problem = problem
        g = problem.graph
        self.g = g
        self.n, self.D = g.n_ops, problem.n_devices
        self.units = colocation_units(problem)
        self.ok = usable_devices(problem, devices, self.units)
        self.ok_devs = [np.flatnonzero(r).tolist() for r in self.ok] if self.n else []
        self.cost = np.where(self.ok, problem.compute_us, np.inf)
        gap = op_gap_us(sim_params)
        self.occupy = self.cost + np.where(self.cost > 0, gap, 0.0)  # device busy time incl. the op gap
        self.bw, self.lat = link_arrays(problem, sim_params)
        self.bw_l, self.lat_l = self.bw.tolist(), self.lat.tolist()
        # comm="sim": each device sends one tensor at a time on its outgoing bus, as the simulator does
        self.sim_comm = comm == "sim"
        self.bus = [Slots() for _ in range(self.D)]  # booked sends
        self.bus_gap = float(getattr(sim_params, "bus_gap_us", 0.0) or 0.0)
        self.sent_at = np.full(self.n, np.nan)  # arrival time of an op's tensor once it was booked
        self.sent = [False] * self.n
        self.max_out = np.zeros(self.n)  # the simulator's transfer size: the largest out-edge
        if g.n_edges:
            np.maximum.at(self.max_out, g.edge_src, g.edge_bytes)
        self.max_out_l = self.max_out.tolist()
        self.pred_ptr, self.pred_idx, self.pred_edge = g.pred_ptr.tolist(), g.pred_idx.tolist(), g.pred_edge.tolist()
        self.succ_ptr, self.succ_idx = g.succ_ptr.tolist(), g.succ_idx.tolist()
        self.unit_of = self.units.op_group
        self.unit_l = self.unit_of.tolist()
        self.umem = np.bincount(self.unit_of, weights=op_memory_bytes(problem, memory), minlength=self.units.n_groups)
        self.count_received = memory == "conservative"  # received copies are never freed either
        self.recv = np.zeros((self.n, self.D))
        self.recv_ok = np.zeros(self.n, dtype=bool)
        self.has_copy = np.zeros((self.n, self.D), dtype=bool)  # (op, device): a received copy already charged there
        self.upar = self.units.param_bytes(problem.graph)
        self.udev = np.full(self.units.n_groups, -1, dtype=np.int64)
        self.cap = problem.memory_bytes.astype(np.float64)
        self.used = np.zeros(self.D)
        self.placement = np.full(self.n, -1, dtype=np.int64)
        self.place_l = [-1] * self.n
        self.start = np.full(self.n, np.nan)
        self.finish = np.full(self.n, np.nan)
        self.finish_l = [0.0] * self.n
        self.order: list[int] = []
        self.notes: list[str] = []
        self.cand_devices = sorted(set(np.flatnonzero(self.ok.any(axis=0)).tolist()))
        # comm="sim": ready ops whose data-ready times read a bus, and the span of it they probed
        self.track = False
        self.waiters: list[dict[int, list[float]]] = [{} for _ in range(self.D)]
        self.waits_on: dict[int, list[int]] = {}
        self.dirty: set[int] = set()

    # -------------------------------------------------------------- costs
    def mean_cost(self) -> np.ndarray:
        """Each op's compute cost averaged over the devices it may use (HEFT's w-bar)."""
        c = np.where(self.ok, self.cost, 0.0)
        return c.sum(axis=1) / np.maximum(self.ok.sum(axis=1), 1)

    def mean_edge_comm(self) -> np.ndarray:
        return mean_comm_us(self.problem.graph.edge_bytes, self.bw, self.lat, self.cand_devices)

    def data_ready(self, i: int) -> np.ndarray:
        """(D,) time op i's inputs are all on each device, given its scheduled parents."""
        a, b = self.pred_ptr[i], self.pred_ptr[i + 1]
        t = np.zeros(self.D)
        unsent = []
        place, finish = self.place_l, self.finish
        for k in range(a, b):
            p = self.pred_idx[k]
            x = place[p]
            if not self.sim_comm:
                arr = finish[p] + self.lat[x] + self.problem.graph.edge_bytes[self.pred_edge[k]] / self.bw[x]
            elif not self.sent[p]:  # not on its way yet: booked below, per device
                unsent.append(p)
                continue
            else:  # already on its way to every remote consumer
                arr = np.full(self.D, self.sent_at[p])
            arr[x] = finish[p]
            np.maximum(t, arr, out=t)
        if unsent:
            fl = self.finish_l
            unsent.sort(key=lambda p: (fl[p], p))
            tl = t.tolist()
            span: dict[int, list[float]] = {}
            memo: dict[tuple, float] = {}  # devices behind alike links repeat the same trial bookings
            for d in self.ok_devs[i]:
                extra: dict[int, list] = {}
                for p in unsent:
                    x = place[p]
                    if x == d:
                        tl[d] = max(tl[d], fl[p])
                        continue
                    dur = self.lat_l[x][d] + self.max_out_l[p] / self.bw_l[x][d]
                    ex = extra.setdefault(x, [])
                    key = (x, p, dur, tuple(ex))
                    t0 = memo.get(key)
                    if t0 is None:
                        t0 = memo[key] = self._bus_slot(x, fl[p], dur + self.bus_gap, ex, span)
                    ex.append((t0, t0 + dur + self.bus_gap))
                    tl[d] = max(tl[d], t0 + dur)
            t = np.array(tl)
            if self.track:
                self._watch(i, span)
        elif self.track:
            self._watch(i, {})
        return t

    def _bus_slot(self, x: int, ready: float, dur: float, extra=(), span=None) -> float:
        """Earliest start >= ready of an idle gap of length dur on device x's bus (``extra``:
        intervals booked on it in a trial, not yet committed); ``span`` collects the probed span."""
        t = ready
        bus = self.bus[x]
        while True:
            t = bus.earliest(t, dur)
            if span is not None:
                sp = span.get(x)
                hi = t + dur
                if sp is None:
                    span[x] = [t, hi]
                else:
                    sp[0] = min(sp[0], t)
                    sp[1] = max(sp[1], hi)
            clash = [e1 for (e0, e1) in extra if e0 < t + dur and t < e1]
            if not clash:
                return t
            t = max(clash)

    def _watch(self, i: int, span: dict[int, list[float]]) -> None:
        for x in self.waits_on.pop(i, ()):
            self.waiters[x].pop(i, None)
        if span:
            for x, sp in span.items():
                self.waiters[x][i] = sp
            self.waits_on[i] = list(span)

    def waits_on_a_bus(self, i: int) -> bool:
        """comm="sim": some parent's tensor is not booked yet (op i's data-ready times move with the buses)."""
        sent = self.sent
        return self.sim_comm and not all(sent[p] for p in self.pred_idx[self.pred_ptr[i]:self.pred_ptr[i + 1]])

    def unwatch(self, i: int) -> None:
        self._watch(i, {})

    def _booked(self, x: int, a: float, b: float) -> None:
        """A transfer [a, b) was booked on x's bus: ready ops whose probed span it touches go stale."""
        for i, (lo, hi) in self.waiters[x].items():
            if not (hi <= a or b <= lo):
                self.dirty.add(i)

    def send_inputs(self, i: int, d: int) -> None:
        """comm="sim": book the transfers op i on device d needs on its parents' buses, in the order
        the parents ended (as :meth:`data_ready` assumed)."""
        place, fl = self.place_l, self.finish_l
        ps = [p for p in self.pred_idx[self.pred_ptr[i]:self.pred_ptr[i + 1]] if place[p] != d and not self.sent[p]]
        for p in sorted(ps, key=lambda p: (fl[p], p)):
            x = place[p]
            dur = self.lat_l[x][d] + self.max_out_l[p] / self.bw_l[x][d]
            t0 = self._bus_slot(x, fl[p], dur + self.bus_gap)
            iv = (t0, t0 + dur + self.bus_gap)
            self.bus[x].insert(iv)
            self.sent_at[p] = t0 + dur
            self.sent[p] = True
            if self.track:
                self._booked(x, iv[0], iv[1])
                for c in self.succ_idx[self.succ_ptr[p]:self.succ_ptr[p + 1]]:
                    if c in self.waits_on:
                        self.dirty.add(c)

    # -------------------------------------------------------------- memory and pins
    def eligible(self, ops: np.ndarray) -> np.ndarray:
        """(len(ops), D) bool: runnable, not pinned elsewhere by a colocation group, and the group
        fits the device's remaining memory (else, for an op no device would take, its parameters do)."""
        u = self.unit_of[ops]
        pinned = self.udev[u]
        dev = np.arange(self.D)[None, :]
        fresh = pinned[:, None] < 0
        if self.count_received:
            stale = ops[~self.recv_ok[ops]]
            for i in stale.tolist():
                self.received(i)
            recv = self.recv[ops]
        else:
            recv = 0.0
        need = np.where(fresh, self.umem[u][:, None], 0.0) + recv
        fits = (self.used[None, :] + need) <= self.cap[None, :]
        pin = np.where(fresh, True, dev == pinned[:, None])
        okr = self.ok[ops]
        el = okr & fits & pin
        starved = ~el.any(axis=1)
        if starved.any():
            loose = (self.used[None, :] + self.upar[u][:, None]) <= self.cap[None, :]
            el2 = okr & np.where(fresh, loose, dev == pinned[:, None])
            el[starved] = el2[starved]
            still = ~el.any(axis=1)
            if still.any():  # nothing fits: keep the op runnable somewhere, the simulator will report OOM
                el[still] = (okr & pin)[still]
                self._note_nothing_fits()
        return el

    def eligible_row(self, i: int) -> list[int]:
        """The devices :meth:`eligible` allows op i, in order (one op, without arrays)."""
        u = self.unit_l[i]
        pinned = int(self.udev[u])
        used, cap = self.used.tolist(), self.cap.tolist()
        devs = self.ok_devs[i]
        if pinned >= 0:
            devs = [d for d in devs if d == pinned]
        if self.count_received:
            r = self.received(i).tolist()
            if pinned < 0:
                um = float(self.umem[u])
                el = [d for d in devs if used[d] + (um + r[d]) <= cap[d]]
            else:
                el = [d for d in devs if used[d] + (0.0 + r[d]) <= cap[d]]
        else:
            um = float(self.umem[u]) if pinned < 0 else 0.0
            el = [d for d in devs if used[d] + (um + 0.0) <= cap[d]]
        if el:
            return el
        if pinned >= 0:
            if not devs:
                self._note_nothing_fits()
            return devs
        up = float(self.upar[u])
        el = [d for d in devs if used[d] + up <= cap[d]]
        if el:
            return el
        self._note_nothing_fits()
        return devs

    def _note_nothing_fits(self) -> None:
        if "memory" not in " ".join(self.notes):
            self.notes.append("memory: some op fit on no device; placed regardless")

    def received(self, i: int) -> np.ndarray:
        """(D,) bytes of the copies op i would add on each device: one per parent on another device
        whose tensor has no copy there yet, as large as the simulator's transfer (its largest out-edge)."""
        if self.recv_ok[i]:
            return self.recv[i]
        r = np.zeros(self.D)
        for p in self.pred_idx[self.pred_ptr[i]:self.pred_ptr[i + 1]]:
            x = self.place_l[p]
            if x >= 0:
                m = self.max_out_l[p]
                r += m
                r[x] -= m
                hc = self.has_copy[p]
                if hc.any():
                    r[hc] -= m
        self.recv[i] = r
        self.recv_ok[i] = True
        return r

    def assign(self, i: int, d: int, start: float) -> None:
        u = self.unit_l[i]
        if self.count_received:
            self.used[d] += self.received(i)[d]
            for p in self.pred_idx[self.pred_ptr[i]:self.pred_ptr[i + 1]]:
                if self.place_l[p] != d and not self.has_copy[p, d]:
                    self.has_copy[p, d] = True
                    self.recv_ok[self.succ_idx[self.succ_ptr[p]:self.succ_ptr[p + 1]]] = False  # siblings share the copy now
        if self.udev[u] < 0:
            self.udev[u] = d
            self.used[d] += self.umem[u]
        if self.sim_comm:
            self.send_inputs(i, d)
        self.placement[i] = d
        self.place_l[i] = d
        self.start[i] = start
        self.finish[i] = start + self.cost[i, d]
        self.finish_l[i] = float(self.finish[i])
        self.order.append(i)
        if self.track:
            self._watch(i, {})
            self.dirty.discard(i)

    def schedule(self) -> Schedule:
        return Schedule(self.placement.copy(), self.start.copy(), self.finish.copy(),
                        np.array(self.order, dtype=np.int64), list(self.notes))


# ---------------------------------------------------------------------- what the schedulers charge and rank
def op_memory_bytes(problem, model: str = "conservative") -> np.ndarray:
    """Bytes an op is charged on its device by the memory-aware list schedulers.

    ``conservative`` (Baechi, Jeon et al. 2020, section 3: memory is never freed during the step):
    parameters + output buffer as the simulator sizes it (the larger of the output bytes and the
    largest out-edge) + workspace; ``params``: the persistent bytes only (what
    :meth:`Problem.memory_feasible` checks)."""
    g = problem.graph
    if model == "params":
        return np.asarray(g.param_bytes, dtype=np.float64)
    if model == "conservative":
        out = np.asarray(g.output_bytes, dtype=np.float64).copy()
        if g.n_edges:
            np.maximum.at(out, g.edge_src, g.edge_bytes)
        return np.asarray(g.param_bytes + out + g.temp_bytes, dtype=np.float64)
    raise InputError("list scheduler", f"memory={model!r}", "is not a memory model", "use conservative or params")


def bottom_level(problem, cost_us: np.ndarray, edge_comm_us: np.ndarray) -> np.ndarray:
    """Longest path from each op to an exit, op costs ``cost_us`` and edge costs ``edge_comm_us``
    included (HEFT's upward rank, Topcuoglu et al. 2002 eq. 7; ETF's static level with zero comm)."""
    g = problem.graph
    rank = np.zeros(g.n_ops)
    sp, si, se = g.succ_ptr, g.succ_idx, g.succ_edge
    for i in range(g.n_ops - 1, -1, -1):
        a, b = sp[i], sp[i + 1]
        tail = (edge_comm_us[se[a:b]] + rank[si[a:b]]).max() if b > a else 0.0
        rank[i] = cost_us[i] + tail
    return rank
