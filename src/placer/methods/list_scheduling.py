"""List-scheduling placers: HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002) and Baechi's
memory-constrained m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC 2020, section 4).

Communication (``comm``). ``"sim"`` (the registered methods' default) schedules under the
evaluator's simulator's model (Placeto appendix A.5, :mod:`placer.sim`, ``comm_model="placeto"``):
a tensor leaves its device on that device's single outgoing bus, one transfer at a time, after its
producer ends, taking ``latency + bytes / bandwidth`` on the link (``support.link_arrays``, the
simulator's overrides applied) and reaching every remote consumer device at once; the bus then
stays busy ``bus_gap_us``. The scheduler books a tensor on its producer's bus when the first
remote consumer is placed, in the earliest idle gap of the bus after the producer ended (the
simulator's bus is a FIFO ordered by producer end time, which the gap search follows when
transfers are booked out of that order), sized by the producer's largest out-edge. Two known
differences from the simulator: a later consumer on a third device is assumed to receive the copy
at the same time (exact when the links are alike, as in the k80 presets), and each device runs
its ops in the schedule's order where the simulator runs them first-come first-served.
``"free"`` is the papers' contention-free model (an edge costs ``latency + bytes / bandwidth``
after its producer ends, with no bus), kept for the schedules worked out in the papers.

Memory (``memory``). ``"conservative"`` (Baechi section 3: memory is never freed during the step)
charges an op's device its parameters, its output buffer (as the simulator sizes it: the larger of
its output bytes and its largest out-edge), its workspace, and one received copy per (tensor,
device), none of them ever freed; a device is a candidate for an op only while the op's colocation
group still fits there. The simulator's own accounting frees an output after its last consumer and
its last transfer, and a received copy after its last local consumer; a list scheduler fixes an
op's device before its consumers are placed, so those lifetimes are not known when it decides.
Never freeing bounds the simulator's peak from above, so a placement built without the fallback
below is memory-feasible in the simulator too. When an op fits nowhere under that bound the
scheduler falls back to its parameters alone (``"params"``: what :meth:`Problem.memory_feasible`
checks) and says so in a note. Every registered method then finishes with the shared
:func:`placer.methods.support.relieve_oom` repair, which moves units off a device whose simulated
peak overflows while that helps, so a memory-feasible placement is returned when one is found.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from placer.errors import InputError
from placer.grouping import colocation_units
from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.sct_lp import favourite_children
from placer.methods.support import (bottom_level, gpu_devices, link_arrays, mean_comm_us,
                                    op_gap_us, op_memory_bytes, relieve_oom, usable_devices)

BAECHI = "Jeon et al., Baechi: Fast Device Placement of Machine Learning Graphs, SoCC 2020"
HEFT_PAPER = "Topcuoglu, Hariri, Wu, Performance-Effective and Low-Complexity Task Scheduling, IEEE TPDS 2002"


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


COMM = ("sim", "free")


class _Scheduler:
    """State shared by the list schedulers: costs, links, colocation pins, memory in use."""

    def __init__(self, problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 comm: str = "free"):
        if comm not in COMM:
            raise InputError("list scheduler", f"comm={comm!r}", "is not a communication model",
                             f"use one of {', '.join(COMM)}")
        self.problem = problem
        g = problem.graph
        self.n, self.D = g.n_ops, problem.n_devices
        self.units = colocation_units(problem)
        self.ok = usable_devices(problem, devices, self.units)
        self.cost = np.where(self.ok, problem.compute_us, np.inf)
        gap = op_gap_us(sim_params)
        self.occupy = self.cost + np.where(self.cost > 0, gap, 0.0)  # device busy time incl. the op gap
        self.bw, self.lat = link_arrays(problem, sim_params)
        # comm="sim": each device sends one tensor at a time on its outgoing bus, as the simulator does
        self.sim_comm = comm == "sim"
        self.bus: list[list[tuple[float, float]]] = [[] for _ in range(self.D)]  # booked sends, sorted
        self.bus_gap = float(getattr(sim_params, "bus_gap_us", 0.0) or 0.0)
        self.sent_at = np.full(self.n, np.nan)  # arrival time of an op's tensor once it was booked
        self.max_out = np.zeros(self.n)  # the simulator's transfer size: the largest out-edge
        if g.n_edges:
            np.maximum.at(self.max_out, g.edge_src, g.edge_bytes)
        self.unit_of = self.units.op_group
        self.umem = np.bincount(self.unit_of, weights=op_memory_bytes(problem, memory), minlength=self.units.n_groups)
        self.count_received = memory == "conservative"  # received copies are never freed either
        self._recv: dict[int, np.ndarray] = {}
        self.has_copy = set()  # (op, device): a received copy already charged there
        self.upar = self.units.param_bytes(problem.graph)
        self.udev = np.full(self.units.n_groups, -1, dtype=np.int64)
        self.cap = problem.memory_bytes.astype(np.float64)
        self.used = np.zeros(self.D)
        self.placement = np.full(self.n, -1, dtype=np.int64)
        self.start = np.full(self.n, np.nan)
        self.finish = np.full(self.n, np.nan)
        self.order: list[int] = []
        self.notes: list[str] = []
        self.cand_devices = sorted(set(np.flatnonzero(self.ok.any(axis=0)).tolist()))

    # -------------------------------------------------------------- costs
    def mean_cost(self) -> np.ndarray:
        """Each op's compute cost averaged over the devices it may use (HEFT's w-bar)."""
        c = np.where(self.ok, self.cost, 0.0)
        return c.sum(axis=1) / np.maximum(self.ok.sum(axis=1), 1)

    def mean_edge_comm(self) -> np.ndarray:
        return mean_comm_us(self.problem.graph.edge_bytes, self.bw, self.lat, self.cand_devices)

    def data_ready(self, i: int) -> np.ndarray:
        """(D,) time op i's inputs are all on each device, given its scheduled parents."""
        g = self.problem.graph
        a, b = g.pred_ptr[i], g.pred_ptr[i + 1]
        t = np.zeros(self.D)
        unsent = []
        for p, e in zip(g.pred_idx[a:b], g.pred_edge[a:b]):
            x = self.placement[p]
            if not self.sim_comm:
                arr = self.finish[p] + self.lat[x] + g.edge_bytes[e] / self.bw[x]
            elif np.isnan(self.sent_at[p]):  # not on its way yet: booked below, per device
                unsent.append(int(p))
                continue
            else:  # already on its way to every remote consumer
                arr = np.full(self.D, self.sent_at[p])
            arr[x] = self.finish[p]
            np.maximum(t, arr, out=t)
        if unsent:
            unsent.sort(key=lambda p: (self.finish[p], p))
            for d in np.flatnonzero(self.ok[i]).tolist():
                extra: dict[int, list] = {}
                for p in unsent:
                    x = int(self.placement[p])
                    if x == d:
                        t[d] = max(t[d], self.finish[p])
                        continue
                    dur = self.lat[x, d] + self.max_out[p] / self.bw[x, d]
                    t0 = self._bus_slot(x, self.finish[p], dur + self.bus_gap, extra.setdefault(x, []))
                    extra[x].append((t0, t0 + dur + self.bus_gap))
                    t[d] = max(t[d], t0 + dur)
        return t

    def waits_on_a_bus(self, i: int) -> bool:
        """comm="sim": some parent's tensor is not booked yet (op i's data-ready times move with the buses)."""
        g = self.problem.graph
        return self.sim_comm and bool(np.isnan(self.sent_at[g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]]]).any())

    def _bus_slot(self, x: int, ready: float, dur: float, extra=()) -> float:
        """Earliest start >= ready of an idle gap of length dur on device x's bus (``extra``:
        intervals booked on it in a trial, not yet committed)."""
        t = ready
        while True:
            t = _earliest_slot(self.bus[x], t, dur)
            clash = [e1 for (e0, e1) in extra if e0 < t + dur and t < e1]
            if not clash:
                return t
            t = max(clash)

    def send_inputs(self, i: int, d: int) -> None:
        """comm="sim": book the transfers op i on device d needs on its parents' buses, in the order
        the parents ended (as :meth:`data_ready` assumed)."""
        g = self.problem.graph
        ps = [int(p) for p in g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]]
              if self.placement[p] != d and np.isnan(self.sent_at[p])]
        for p in sorted(ps, key=lambda p: (self.finish[p], p)):
            x = int(self.placement[p])
            dur = self.lat[x, d] + self.max_out[p] / self.bw[x, d]
            t0 = self._bus_slot(x, self.finish[p], dur + self.bus_gap)
            bisect.insort(self.bus[x], (t0, t0 + dur + self.bus_gap))
            self.sent_at[p] = t0 + dur

    # -------------------------------------------------------------- memory and pins
    def eligible(self, ops: np.ndarray) -> np.ndarray:
        """(len(ops), D) bool: runnable, not pinned elsewhere by a colocation group, and the group
        fits the device's remaining memory (else, for an op no device would take, its parameters do)."""
        u = self.unit_of[ops]
        pinned = self.udev[u]
        dev = np.arange(self.D)[None, :]
        fresh = pinned[:, None] < 0
        recv = np.stack([self.received(int(i)) for i in ops]) if self.count_received else 0.0
        need = np.where(fresh, self.umem[u][:, None], 0.0) + recv
        fits = (self.used[None, :] + need) <= self.cap[None, :]
        el = self.ok[ops] & fits & np.where(fresh, True, dev == pinned[:, None])
        starved = ~el.any(axis=1)
        if starved.any():
            loose = (self.used[None, :] + self.upar[u][:, None]) <= self.cap[None, :]
            el2 = self.ok[ops] & np.where(fresh, loose, dev == pinned[:, None])
            el[starved] = el2[starved]
            still = ~el.any(axis=1)
            if still.any():  # nothing fits: keep the op runnable somewhere, the simulator will report OOM
                el[still] = (self.ok[ops] & np.where(fresh, True, dev == pinned[:, None]))[still]
                if "memory" not in " ".join(self.notes):
                    self.notes.append("memory: some op fit on no device; placed regardless")
        return el

    def received(self, i: int) -> np.ndarray:
        """(D,) bytes of the copies op i would add on each device: one per parent on another device
        whose tensor has no copy there yet, as large as the simulator's transfer (its largest out-edge)."""
        r = self._recv.get(i)
        if r is None:
            g = self.problem.graph
            r = np.zeros(self.D)
            for p in g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]]:
                x = self.placement[p]
                if x >= 0:
                    r += self.max_out[p]
                    r[x] -= self.max_out[p]
                    for d in range(self.D):
                        if (int(p), d) in self.has_copy:
                            r[d] -= self.max_out[p]
            self._recv[i] = r
        return r

    def assign(self, i: int, d: int, start: float) -> None:
        u = self.unit_of[i]
        if self.count_received:
            self.used[d] += self.received(i)[d]
            g = self.problem.graph
            for p in g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]]:
                if self.placement[p] != d and (int(p), d) not in self.has_copy:
                    self.has_copy.add((int(p), d))
                    for c in g.succ_idx[g.succ_ptr[p]:g.succ_ptr[p + 1]]:  # siblings share the copy now
                        self._recv.pop(int(c), None)
        if self.udev[u] < 0:
            self.udev[u] = d
            self.used[d] += self.umem[u]
        if self.sim_comm:
            self.send_inputs(i, d)
        self.placement[i] = d
        self.start[i] = start
        self.finish[i] = start + self.cost[i, d]
        self.order.append(i)

    def schedule(self) -> Schedule:
        return Schedule(self.placement.copy(), self.start.copy(), self.finish.copy(),
                        np.array(self.order, dtype=np.int64), list(self.notes))


# ---------------------------------------------------------------------- HEFT
def heft_schedule(problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                  comm: str = "free") -> Schedule:
    """HEFT (Topcuoglu et al. 2002, section 4.2): ops by decreasing upward rank (eq. 7, mean
    compute and mean communication costs), each on the device giving its earliest finish time with
    the insertion-based policy (an op may fill an idle gap between two already scheduled ops).
    Ties (after rounding to 1e-6): lower op index first, then lower device index. ``comm="free"``
    is the paper's contention-free communication; ``"sim"`` books each tensor on its device's
    outgoing bus, one at a time, as the simulator does (module docstring)."""
    s = _Scheduler(problem, sim_params, devices, memory, comm)
    rank = bottom_level(problem, s.mean_cost(), s.mean_edge_comm())
    order = np.lexsort((np.arange(s.n), -_fuzz(rank)))
    busy: list[list[tuple[float, float]]] = [[] for _ in range(s.D)]  # per device, sorted (start, end)
    for i in order.tolist():
        drt = s.data_ready(i)
        el = s.eligible(np.array([i]))[0]
        best = (np.inf, np.inf, -1)
        for d in np.flatnonzero(el).tolist():
            t = _earliest_slot(busy[d], drt[d], s.occupy[i, d])
            eft = t + s.cost[i, d]
            if _fuzz(eft) < _fuzz(best[0]):
                best = (eft, t, d)
        _, t, d = best
        s.assign(i, d, t)
        bisect.insort(busy[d], (t, t + s.occupy[i, d]))
    return s.schedule()


def _fuzz(x):
    """Round away floating-point noise so that equal ranks or times (sums in another order) tie."""
    return np.round(x, 6)


def _earliest_slot(slots: list[tuple[float, float]], ready: float, dur: float) -> float:
    """Earliest start >= ready of a free gap of length dur among sorted busy intervals."""
    k = bisect.bisect_right(slots, (ready, np.inf))
    t = ready if k == 0 else max(ready, slots[k - 1][1])
    while k < len(slots):
        if t + dur <= slots[k][0]:
            return t
        t = max(t, slots[k][1])
        k += 1
    return t


# ---------------------------------------------------------------------- ETF / SCT
def etf_schedule(problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 favourite_child: np.ndarray | None = None, comm: str = "free") -> Schedule:
    """m-ETF (Baechi section 4.2; ETF of Hwang, Chow, Anger, Lee 1989): repeatedly take, over all
    ready ops and all eligible devices, the pair with the earliest start time
    ``max(device free, inputs arrived)``; ties go to the larger static level (longest path of mean
    compute costs to an exit, no communication), then the lower op index, then the lower device.

    With ``favourite_child`` (m-SCT, Baechi section 4.3, after Hanen and Munier 1995): an op whose
    favourite parent was the last op run on device d, and whose inputs are all on d by the time d
    is free, is *urgent*: it may only go to d, and wins ties on start time. ``comm``: as in HEFT
    (with ``"sim"`` the data-ready times of ready ops waiting on an unbooked tensor are recomputed
    every step, the buses having moved)."""
    s = _Scheduler(problem, sim_params, devices, memory, comm)
    g = problem.graph
    zero = np.zeros(g.n_edges)
    level = bottom_level(problem, s.mean_cost(), zero)
    fav_parent = np.full(s.n, -1, dtype=np.int64)
    if favourite_child is not None:
        has = favourite_child >= 0
        fav_parent[favourite_child[has]] = np.flatnonzero(has)
    missing = np.diff(g.pred_ptr).astype(np.int64)
    free = np.zeros(s.D)
    last = np.full(s.D, -1, dtype=np.int64)
    ready = [i for i in range(s.n) if missing[i] == 0]
    drt = {i: s.data_ready(i) for i in ready}
    while ready:
        R = np.array(ready, dtype=np.int64)
        el = s.eligible(R)
        if s.sim_comm:  # the buses moved: tensors not booked yet arrive later
            for i in ready:
                if s.waits_on_a_bus(i):
                    drt[i] = s.data_ready(i)
        D_rt = np.stack([drt[i] for i in ready])
        est = np.maximum(D_rt, free[None, :])
        urgent = np.zeros_like(el)
        if favourite_child is not None:
            fp = fav_parent[R]
            for k in np.flatnonzero(fp >= 0):
                d = s.placement[fp[k]]
                if d >= 0 and last[d] == fp[k] and el[k, d] and D_rt[k, d] <= free[d]:
                    urgent[k, d] = True
                    el[k] = False
                    el[k, d] = True
        est = np.where(el, est, np.inf)
        kk, dd = np.nonzero(np.isfinite(est))
        pick = np.lexsort((dd, R[kk], -_fuzz(level[R[kk]]), ~urgent[kk, dd], _fuzz(est[kk, dd])))[0]
        k, d = int(kk[pick]), int(dd[pick])
        i = int(R[k])
        t = float(est[k, d])
        s.assign(i, d, t)
        free[d] = t + s.occupy[i, d]
        last[d] = i
        ready.pop(k)
        del drt[i]
        for c in g.succ_idx[g.succ_ptr[i]:g.succ_ptr[i + 1]].tolist():
            missing[c] -= 1
            if missing[c] == 0:
                ready.append(c)
                drt[c] = s.data_ready(c)
    return s.schedule()


def sct_schedule(problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 comm: str = "free") -> Schedule:
    """m-SCT: favourite children from the relaxed SCT linear program (solved by HiGHS), then the
    ETF list scheduler that keeps a favourite child on its parent's device (Baechi section 4.3)."""
    s = _Scheduler(problem, sim_params, devices, memory)
    fav = favourite_children(problem, s.mean_cost(), s.mean_edge_comm())
    sched = etf_schedule(problem, sim_params, devices, memory, favourite_child=fav, comm=comm)
    kept = int(np.sum((fav >= 0) & (sched.placement == np.where(fav >= 0, sched.placement[np.maximum(fav, 0)], -2))))
    sched.notes.append(f"favourite children: {int((fav >= 0).sum())}, kept on their parent's device: {kept}")
    return sched


# ---------------------------------------------------------------------- m-TOPO
def topo_placement(problem, devices: list[int] | None = None, memory: str = "conservative") -> np.ndarray:
    """m-TOPO (Baechi section 4.1): walk the ops in topological order, filling one device after the
    other; move on when the device holds its share of the total compute (total / devices) or the
    next op's colocation group would overflow its memory. A colocation group goes where its first
    op went; an op the current device cannot run goes to the least loaded device that can."""
    devs = list(devices) if devices is not None else gpu_devices(problem)
    s = _Scheduler(problem, None, devs, memory)
    fastest = np.where(s.ok, s.cost, np.inf).min(axis=1)
    target = fastest.sum() / len(devs)
    load = np.zeros(s.D)
    k = 0
    for i in range(s.n):
        u = s.unit_of[i]
        if s.udev[u] >= 0:
            d = int(s.udev[u])
        else:
            el = s.eligible(np.array([i]))[0]
            # the current device is full once it holds its compute share, or when the op could run
            # there but its group no longer fits; an op it cannot run at all does not end it
            while k < len(devs) - 1 and (load[devs[k]] >= target or (s.ok[i, devs[k]] and not el[devs[k]])):
                k += 1
            if el[devs[k]]:
                d = devs[k]
            else:
                cand = np.flatnonzero(el)
                d = int(cand[np.argmin(load[cand])])
        s.assign(i, d, 0.0)
        load[d] += s.cost[i, d]
    return s.placement


# ---------------------------------------------------------------------- registered methods
Devices = Literal["gpus", "all"]
Memory = Literal["conservative", "params"]
Comm = Literal["sim", "free"]


def _device_list(problem, devices: str) -> list[int] | None:
    return None if devices == "all" else gpu_devices(problem)


def _finish(name, problem, ev: Evaluator, placement, notes, model_makespan_us=None):
    p, r = relieve_oom(problem, placement, ev)
    if r.oom:
        notes.append("OOM: no memory-feasible placement found by this method")
    elif not np.array_equal(p, placement):
        notes.append("moved ops off a device whose simulated peak memory overflowed")
    res = ev.result(name, p, notes=notes)
    if model_makespan_us is not None:
        res.cost.extra["model_makespan_us"] = float(model_makespan_us)  # the schedule's own prediction
    return res


@dataclass(frozen=True)
class HeftConfig(MethodConfig):
    """HEFT (Topcuoglu et al. 2002) with Baechi's memory constraint."""

    devices: Devices = "gpus"  # place on the GPUs only (ops no GPU can run go where they can) or on all devices
    memory: Memory = "conservative"  # what a device is charged: never-freed outputs too, or parameters only
    comm: Comm = "sim"  # communication model of the schedule: the simulator's bus, or the paper's contention-free

    @classmethod
    def method_name(cls):
        return "heft"


@dataclass(frozen=True)
class EtfConfig(MethodConfig):
    """Baechi's m-ETF."""

    devices: Devices = "gpus"  # place on the GPUs only (ops no GPU can run go where they can) or on all devices
    memory: Memory = "conservative"  # what a device is charged: never-freed outputs too, or parameters only
    comm: Comm = "sim"  # communication model of the schedule: the simulator's bus, or the paper's contention-free

    @classmethod
    def method_name(cls):
        return "m-etf"


@dataclass(frozen=True)
class SctConfig(MethodConfig):
    """Baechi's m-SCT."""

    devices: Devices = "gpus"  # place on the GPUs only (ops no GPU can run go where they can) or on all devices
    memory: Memory = "conservative"  # what a device is charged: never-freed outputs too, or parameters only
    comm: Comm = "sim"  # communication model of the schedule: the simulator's bus, or the paper's contention-free

    @classmethod
    def method_name(cls):
        return "m-sct"


@dataclass(frozen=True)
class TopoConfig(MethodConfig):
    """Baechi's m-TOPO."""

    devices: Devices = "gpus"  # place on the GPUs only (ops no GPU can run go where they can) or on all devices
    memory: Memory = "conservative"  # what a device is charged: never-freed outputs too, or parameters only

    @classmethod
    def method_name(cls):
        return "m-topo"


@register("heft", "HEFT: upward-rank order, earliest-finish device with insertion (memory-aware)",
          "list-scheduling", HeftConfig, paper=HEFT_PAPER, version=1)
def heft(problem, seed: int, ev: Evaluator, cfg: HeftConfig):
    s = heft_schedule(problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, cfg.comm)
    return _finish("heft", problem, ev, s.placement, s.notes + [f"HEFT model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-etf", "Baechi m-ETF: earliest-start (op, device) pair first, memory-constrained",
          "list-scheduling", EtfConfig, paper=BAECHI, version=1)
def m_etf(problem, seed: int, ev: Evaluator, cfg: EtfConfig):
    s = etf_schedule(problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, comm=cfg.comm)
    return _finish("m-etf", problem, ev, s.placement, s.notes + [f"ETF model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-sct", "Baechi m-SCT: ETF keeping LP favourite children with their parents, memory-constrained",
          "list-scheduling", SctConfig, paper=BAECHI, version=1)
def m_sct(problem, seed: int, ev: Evaluator, cfg: SctConfig):
    s = sct_schedule(problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, cfg.comm)
    return _finish("m-sct", problem, ev, s.placement, s.notes + [f"SCT model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-topo", "Baechi m-TOPO: topological order, fill each device to its compute share or memory",
          "list-scheduling", TopoConfig, paper=BAECHI, version=1)
def m_topo(problem, seed: int, ev: Evaluator, cfg: TopoConfig):
    p = topo_placement(problem, _device_list(problem, cfg.devices), cfg.memory)
    return _finish("m-topo", problem, ev, p, [])
