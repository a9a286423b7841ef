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
:func:`placer.methods.memory_repair.relieve_oom` repair, which moves units off a device whose simulated
peak overflows while that helps, so a memory-feasible placement is returned when one is found.

Speed (issue 55). The state (:mod:`placer.methods.list_scheduling.state`) is kept incrementally: busy
intervals of every bus and device in blocked gap lists, data-ready times recomputed only when a
booking touches what they read, received bytes cached per op; m-ETF picks each step's (op, device)
in one vectorised pass over the ready set. The placements are the ones the rescanning code gave
(tests/fixtures/list_sched_placements.json); ``benchmarks/list_sched_speed.py`` times the three
against it. m-SCT picks its favourite children by a greedy matching along the longest paths
(:mod:`placer.methods.list_scheduling.favourites`; version 2), near-linear where the favourite-child LP solved by HiGHS
(version 1, ``favourites="lp"``) grew about with the square of the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.devices import gpu_devices
from placer.methods.list_scheduling.favourites import FAVOURITES
from placer.methods.list_scheduling.state import (  # noqa: F401 (COMM, Schedule: public here)
    COMM, Schedule, Slots, State, bottom_level)
from placer.methods.memory_repair import relieve_oom
from placer.methods.start_cache import device_key, shared  # computed once per Problem, shared with the seeds

BAECHI = "Jeon et al., Baechi: Fast Device Placement of Machine Learning Graphs, SoCC 2020"
HEFT_PAPER = "Topcuoglu, Hariri, Wu, Performance-Effective and Low-Complexity Task Scheduling, IEEE TPDS 2002"


# the scheduler state (costs, pins, memory, the buses kept incrementally) lives in state.py
_Scheduler = State


# ---------------------------------------------------------------------- HEFT
def heft_schedule(problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                  comm: str = "free") -> Schedule:
    """HEFT (Topcuoglu et al. 2002, section 4.2): ops by decreasing upward rank (eq. 7, mean
    compute and mean communication costs), each on the device giving its earliest finish time with
    the insertion-based policy (an op may fill an idle gap between two already scheduled ops).
    Ties (after rounding to 1e-6): lower op index first, then lower device index. ``comm="free"``
    is the paper's contention-free communication; ``"sim"`` books each tensor on its device's
    outgoing bus, one at a time, as the simulator does (module docstring)."""
    s = State(problem, sim_params, devices, memory, comm)
    rank = bottom_level(problem, s.mean_cost(), s.mean_edge_comm())
    order = np.lexsort((np.arange(s.n), -_fuzz(rank)))
    busy = [Slots() for _ in range(s.D)]  # per device, sorted (start, end)
    occupy, cost = s.occupy, s.cost
    for i in order.tolist():
        drt = s.data_ready(i).tolist()
        el = s.eligible_row(i)
        occ, ci = occupy[i].tolist(), cost[i].tolist()
        ts = [busy[d].earliest(drt[d], occ[d]) for d in el]
        eft = np.array([t + ci[d] for t, d in zip(ts, el)])
        j = int(np.argmin(_fuzz(eft)))  # the first device of the earliest finish, after rounding
        d, t = el[j], ts[j]
        s.assign(i, d, t)
        busy[d].insert((t, t + occ[d]))
    return s.schedule()


def _fuzz(x):
    """Round away floating-point noise so that equal ranks or times (sums in another order) tie."""
    return np.round(x, 6)


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
    (with ``"sim"`` the data-ready times of ready ops waiting on an unbooked tensor move with the
    buses: they are recomputed when a booking touches the part of a bus they probed).

    Each step is one vectorised pass over the ready ops and devices (start times, memory
    eligibility); data-ready times and received bytes are kept per op and recomputed only when
    what they read changed (:mod:`placer.methods.list_scheduling.state`)."""
    s = State(problem, sim_params, devices, memory, comm)
    s.track = s.sim_comm
    g = problem.graph
    zero = np.zeros(g.n_edges)
    flevel = _fuzz(bottom_level(problem, s.mean_cost(), zero))
    fav_parent = np.full(s.n, -1, dtype=np.int64)
    if favourite_child is not None:
        has = favourite_child >= 0
        fav_parent[favourite_child[has]] = np.flatnonzero(has)
        fav_child = favourite_child.tolist()
        fav_parent_l = fav_parent.tolist()
    missing = np.diff(g.pred_ptr).astype(np.int64).tolist()
    succ_ptr, succ_idx = s.succ_ptr, s.succ_idx
    D = s.D
    free = np.zeros(D)
    last = [-1] * D
    ready = [i for i in range(s.n) if missing[i] == 0]
    pos = {i: k for k, i in enumerate(ready)}
    drt = np.zeros((s.n, D))
    for i in ready:
        drt[i] = s.data_ready(i)
    while ready:
        R = np.array(ready, dtype=np.int64)
        el = s.eligible(R)
        if s.dirty:  # the buses moved: tensors not booked yet arrive later
            for i in sorted(s.dirty):
                if s.waits_on_a_bus(i):
                    drt[i] = s.data_ready(i)
                else:  # as before the rewrite: once all its inputs are booked an op keeps the times last computed
                    s.unwatch(i)
            s.dirty.clear()
        D_rt = drt[R]
        est = np.maximum(D_rt, free[None, :])
        urgent = None
        if favourite_child is not None:
            for d in range(D):
                p = last[d]
                c = fav_child[p] if p >= 0 else -1
                if c >= 0 and fav_parent_l[c] == p and c in pos:
                    k = pos[c]
                    if el[k, d] and D_rt[k, d] <= free[d]:
                        if urgent is None:
                            urgent = np.zeros_like(el)
                        urgent[k, d] = True
                        el[k] = False
                        el[k, d] = True
        valid = el & np.isfinite(est)
        F = np.where(valid, _fuzz(est), np.inf)
        mask = F == F.min()
        if urgent is not None and (mask & urgent).any():
            mask &= urgent
        rows = np.flatnonzero(mask.any(axis=1))
        if len(rows) > 1:
            lv = flevel[R[rows]]
            rows = rows[lv == lv.max()]
            rows = rows[[int(np.argmin(R[rows]))]]
        k = int(rows[0])
        d = int(np.argmax(mask[k]))
        i = ready[k]
        t = float(est[k, d])
        s.assign(i, d, t)
        free[d] = t + s.occupy[i, d]
        last[d] = i
        tail = ready.pop()  # swap-remove: the order of the ready list decides nothing
        del pos[i]
        if tail != i:
            ready[k] = tail
            pos[tail] = k
        for c in succ_idx[succ_ptr[i]:succ_ptr[i + 1]]:
            missing[c] -= 1
            if missing[c] == 0:
                pos[c] = len(ready)
                ready.append(c)
                drt[c] = s.data_ready(c)
    return s.schedule()


def sct_schedule(problem, sim_params=None, devices: list[int] | None = None, memory: str = "conservative",
                 comm: str = "free", favourites: str = "lp") -> Schedule:
    """m-SCT: favourite children (at most one per op and one favourite parent per op), then the ETF
    list scheduler that keeps a favourite child on its parent's device (Baechi section 4.3).
    ``favourites``: ``"lp"``, the rounded relaxed SCT linear program solved by HiGHS, as the paper
    (and the search methods' ``m-sct`` seed) has it, or ``"critical-path"``, the greedy matching
    along the longest paths the registered method uses by default (:mod:`placer.methods.list_scheduling.favourites`)."""
    s = State(problem, sim_params, devices, memory)
    fav = FAVOURITES[favourites](problem, s.mean_cost(), s.mean_edge_comm())
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
    s = State(problem, None, devs, memory)
    fastest = np.where(s.ok, s.cost, np.inf).min(axis=1)
    target = fastest.sum() / len(devs)
    load = np.zeros(s.D)
    k = 0
    for i in range(s.n):
        u = s.unit_of[i]
        if s.udev[u] >= 0:
            d = int(s.udev[u])
        else:
            el = np.zeros(s.D, dtype=bool)
            el[s.eligible_row(i)] = True
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
Favourites = Literal["critical-path", "lp"]


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
    favourites: Favourites = "critical-path"  # Baechi's rounded SCT LP ("lp", HiGHS: ~n^2, 51 s at 20k ops) or, a departure for speed, a greedy matching along the longest paths

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



def shared_schedule(kind: str, problem, sim_params=None, devices=None, memory: str = "conservative",
                    comm: str = "free", favourites: str = "lp"):
    """The list scheduler ``kind`` (``heft``, ``m-etf`` or ``m-sct``) of
    :mod:`placer.methods.list_scheduling` with these settings (its own defaults when not given), its
    :class:`Schedule` computed once per Problem (:func:`shared`). ``favourites`` is m-SCT's only."""
    key = (kind, sim_params, device_key(devices), memory, comm, favourites if kind == "m-sct" else None)
    if kind == "heft":
        return shared(problem, key, lambda: heft_schedule(problem, sim_params, devices, memory, comm))
    if kind == "m-etf":
        return shared(problem, key, lambda: etf_schedule(problem, sim_params, devices, memory, comm=comm))
    if kind == "m-sct":
        return shared(problem, key, lambda: sct_schedule(problem, sim_params, devices, memory, comm, favourites))
    raise ValueError(f"no list scheduler '{kind}' (heft, m-etf, m-sct)")


def shared_topo(problem, devices=None, memory: str = "conservative"):
    """m-TOPO's placement (:func:`placer.methods.list_scheduling.schedulers.topo_placement`), once per Problem."""
    return shared(problem, ("m-topo", device_key(devices), memory), lambda: topo_placement(problem, devices, memory))


@register("heft", "HEFT: upward-rank order, earliest-finish device with insertion (memory-aware)",
          "list-scheduling", HeftConfig, paper=HEFT_PAPER, version=1)
def heft(problem, seed: int, ev: Evaluator, cfg: HeftConfig):
    s = shared_schedule("heft", problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, cfg.comm)
    return _finish("heft", problem, ev, s.placement, s.notes + [f"HEFT model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-etf", "Baechi m-ETF: earliest-start (op, device) pair first, memory-constrained",
          "list-scheduling", EtfConfig, paper=BAECHI, version=1)
def m_etf(problem, seed: int, ev: Evaluator, cfg: EtfConfig):
    s = shared_schedule("m-etf", problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, cfg.comm)
    return _finish("m-etf", problem, ev, s.placement, s.notes + [f"ETF model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-sct", "Baechi m-SCT: ETF keeping LP favourite children with their parents, memory-constrained",
          "list-scheduling", SctConfig, paper=BAECHI, version=2)
def m_sct(problem, seed: int, ev: Evaluator, cfg: SctConfig):
    s = shared_schedule("m-sct", problem, ev.sim_params, _device_list(problem, cfg.devices), cfg.memory, cfg.comm,
                        cfg.favourites)
    return _finish("m-sct", problem, ev, s.placement, s.notes + [f"SCT model makespan {s.makespan_us:.1f} us"],
                   s.makespan_us)


@register("m-topo", "Baechi m-TOPO: topological order, fill each device to its compute share or memory",
          "list-scheduling", TopoConfig, paper=BAECHI, version=1)
def m_topo(problem, seed: int, ev: Evaluator, cfg: TopoConfig):
    p = shared_topo(problem, _device_list(problem, cfg.devices), cfg.memory)
    return _finish("m-topo", problem, ev, p, [])
