"""List-scheduling placers: HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002) and Baechi's
memory-constrained m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC 2020, section 4).

Each builds a schedule with its own communication model, by default the one the papers assume
(``comm="free"``): a tensor from op a on device x to op b on device y arrives
``latency[x, y] + bytes / bandwidth[x, y]`` after a finishes (no link contention), with the links
the evaluator's simulator uses; ``comm="bus"`` books every tensor on its device's single outgoing
bus, one at a time, as the simulator's placeto model does (an extension, not in the papers). The
placement is then judged by the simulator like every other method's. All four are memory-aware:
a device is a candidate for an op only while the op's colocation group still fits there
(``memory='conservative'``: parameters + outputs + workspace, and the tensors received from other
devices, are never freed, as Baechi assumes;
falling back to parameters alone for an op nothing else would take), and the final placement's
simulated peak is relieved by moving units off an overflowing device when that helps.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from placer.methods.base import Budget, Evaluator, register
from placer.methods.sct_lp import favourite_children
from placer.methods.support import (bottom_level, gpu_devices, link_arrays, make_units, mean_comm_us,
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


class _Scheduler:
    """State shared by the list schedulers: costs, links, colocation pins, memory in use."""

    def __init__(self, problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 comm: str = "free"):
        if comm not in ("free", "bus"):
            raise ValueError(f"comm must be 'free' or 'bus', not {comm!r}")
        self.problem = problem
        g = problem.graph
        self.n, self.D = g.n_ops, problem.n_devices
        self.units = make_units(problem)
        self.ok = usable_devices(problem, devices, self.units)
        self.cost = np.where(self.ok, problem.compute_us, np.inf)
        gap = op_gap_us(sim_params)
        self.occupy = self.cost + np.where(self.cost > 0, gap, 0.0)  # device busy time incl. the op gap
        self.bw, self.lat = link_arrays(problem, sim_params)
        # comm="bus": each device sends one tensor at a time, as the simulator's placeto bus does
        self.bus = comm == "bus"
        self.bus_free = np.zeros(self.D)
        self.bus_gap = float(getattr(sim_params, "bus_gap_us", 0.0) or 0.0)
        self.sent_at = np.full(self.n, np.nan)  # arrival time of an op's tensor once it was sent
        self.max_out = np.zeros(self.n)
        if g.n_edges:
            np.maximum.at(self.max_out, g.edge_src, g.edge_bytes)
        self.unit_of = self.units.unit_of
        self.umem = np.bincount(self.unit_of, weights=op_memory_bytes(problem, memory), minlength=self.units.n_units)
        self.count_received = memory == "conservative"  # received copies are never freed either
        self._recv: dict[int, np.ndarray] = {}
        self.upar = self.units.param_bytes
        self.udev = np.full(self.units.n_units, -1, dtype=np.int64)
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
        for p, e in zip(g.pred_idx[a:b], g.pred_edge[a:b]):
            x = self.placement[p]
            if not self.bus:
                arr = self.finish[p] + self.lat[x] + g.edge_bytes[e] / self.bw[x]
            elif np.isnan(self.sent_at[p]):  # would be sent when both the op and the bus are done
                arr = max(self.finish[p], self.bus_free[x]) + self.lat[x] + self.max_out[p] / self.bw[x]
            else:  # already on its way to every remote consumer
                arr = np.full(self.D, self.sent_at[p])
            arr[x] = self.finish[p]
            np.maximum(t, arr, out=t)
        return t

    def send_inputs(self, i: int, d: int) -> None:
        """comm="bus": book the transfers op i on device d needs on its parents' buses."""
        g = self.problem.graph
        for p in g.pred_idx[g.pred_ptr[i]:g.pred_ptr[i + 1]]:
            x = self.placement[p]
            if x != d and np.isnan(self.sent_at[p]):
                t0 = max(self.finish[p], self.bus_free[x])
                self.sent_at[p] = t0 + self.lat[x, d] + self.max_out[p] / self.bw[x, d]
                self.bus_free[x] = self.sent_at[p] + self.bus_gap

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
        """(D,) bytes op i would receive from parents on other devices (its parents are placed)."""
        r = self._recv.get(i)
        if r is None:
            g = self.problem.graph
            a, b = g.pred_ptr[i], g.pred_ptr[i + 1]
            r = np.zeros(self.D)
            for p, e in zip(g.pred_idx[a:b], g.pred_edge[a:b]):
                x = self.placement[p]
                if x >= 0:
                    r += g.edge_bytes[e]
                    r[x] -= g.edge_bytes[e]
            self._recv[i] = r
        return r

    def assign(self, i: int, d: int, start: float) -> None:
        u = self.unit_of[i]
        if self.count_received:
            self.used[d] += self.received(i)[d]
        if self.udev[u] < 0:
            self.udev[u] = d
            self.used[d] += self.umem[u]
        if self.bus:
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
    is the paper's contention-free communication; ``"bus"`` books each tensor on its device's
    outgoing bus, one at a time, as the simulator does."""
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
    (with ``"bus"`` the ready ops' data-ready times are recomputed every step, the buses having moved)."""
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
        if s.bus:
            for i in ready:
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
def _device_list(problem, devices: str) -> list[int] | None:
    if devices == "all":
        return None
    if devices == "gpus":
        return gpu_devices(problem)
    raise ValueError(f"devices must be 'all' or 'gpus', not {devices!r}")


def _finish(name, problem, ev: Evaluator, placement, params, notes):
    p, r = relieve_oom(problem, placement, ev)
    if r.oom:
        notes.append("OOM: no memory-feasible placement found by this method")
    elif not np.array_equal(p, placement):
        notes.append("moved ops off a device whose simulated peak memory overflowed")
    return ev.result(name, p, params=params, notes=notes)


@register("heft", "HEFT: upward-rank order, earliest-finish device with insertion (memory-aware)",
          "list-scheduling", HEFT_PAPER)
def heft(problem, budget: Budget, seed: int, ev: Evaluator, devices: str = "gpus", memory: str = "conservative",
         comm: str = "free", **_):
    s = heft_schedule(problem, ev.sim_params, _device_list(problem, devices), memory, comm)
    return _finish("heft", problem, ev, s.placement, {"devices": devices, "memory": memory, "comm": comm},
                   s.notes + [f"HEFT model makespan {s.makespan_us:.1f} us"])


@register("m-etf", "Baechi m-ETF: earliest-start (op, device) pair first, memory-constrained",
          "list-scheduling", BAECHI)
def m_etf(problem, budget: Budget, seed: int, ev: Evaluator, devices: str = "gpus", memory: str = "conservative",
          comm: str = "free", **_):
    s = etf_schedule(problem, ev.sim_params, _device_list(problem, devices), memory, comm=comm)
    return _finish("m-etf", problem, ev, s.placement, {"devices": devices, "memory": memory, "comm": comm},
                   s.notes + [f"ETF model makespan {s.makespan_us:.1f} us"])


@register("m-sct", "Baechi m-SCT: ETF keeping LP favourite children with their parents, memory-constrained",
          "list-scheduling", BAECHI)
def m_sct(problem, budget: Budget, seed: int, ev: Evaluator, devices: str = "gpus", memory: str = "conservative",
          comm: str = "free", **_):
    s = sct_schedule(problem, ev.sim_params, _device_list(problem, devices), memory, comm)
    return _finish("m-sct", problem, ev, s.placement, {"devices": devices, "memory": memory, "comm": comm},
                   s.notes + [f"SCT model makespan {s.makespan_us:.1f} us"])


@register("m-topo", "Baechi m-TOPO: topological order, fill each device to its compute share or memory",
          "list-scheduling", BAECHI)
def m_topo(problem, budget: Budget, seed: int, ev: Evaluator, devices: str = "gpus", memory: str = "conservative", **_):
    p = topo_placement(problem, _device_list(problem, devices), memory)
    return _finish("m-topo", problem, ev, p, {"devices": devices, "memory": memory}, [])
