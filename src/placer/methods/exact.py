"""The exact optimum with CP-SAT (OR-Tools): placement and scheduling together, communication
delays, the sending bus, and memory limits, for problems of up to about 40 tasks on 8 devices.

The model (times in integer ticks of ``resolution_us``; every duration rounded down, so the model
never overestimates a time the simulator computes):

* ``x[u, d]``: task u (an op, or a group of ops) runs on device d; exactly one device among those
  that can run all its ops; tasks holding ops of one colocation group share their variables.
* ``s[u]``, ``e[u] = s[u] + sum_d cost[u, d] x[u, d]``; one optional interval per (u, d) of length
  ``cost + op_gap`` (the simulator's idle gap after an op) in a NoOverlap per device.
* edge u -> v with ``same[u, v] = sum_d x[u, d] x[v, d]``: ``s[v] >= e[u]`` always and, when not
  ``same``, ``s[v] >= arrival[u]``.
* ``placeto`` communication (the simulator's default): u's tensor is sent once on the outgoing bus of
  u's device, after u ends (``b[u] >= e[u]``), taking ``dur[u] = max over remote edges of
  latency + bytes / bandwidth`` (exact when all links are alike, as in the k80 presets; else the
  fastest link, a relaxation), arriving at every remote consumer at ``b[u] + dur[u]``; the bus is
  a NoOverlap per device of intervals of length ``dur[u] + bus_gap`` present when u is on that
  device and has a remote consumer. Other communication models: an edge delay of
  ``latency + bytes / bandwidth`` and no bus (a relaxation of per-link serialisation).
* memory: the parameters placed on a device fit its capacity. The simulator's peak also counts
  activations and received copies: when every solution found overflows there, the classes live at
  the overflowing device's peak are forbidden from sharing it (one cut per device and round) and the
  model is solved again, up to ``memory_rounds`` times; the first solve's bound is the one reported.
* limits (see :func:`cp_sat`): with ``--seconds`` each solve gets a share of what is left of them
  (wall-clock; a run stopped by the clock may differ from one run to the next); without, CP-SAT's
  deterministic time ``deterministic_s`` per solve (same seed, same answer under any load). A proven
  optimum does not vary.
* objective: the makespan as the simulator defines it, the time of the last event: an op's end plus
  its gap, or a tensor's arrival plus the bus gap.

The simulator runs each device's ready ops first-come first-served; the model lets the solver pick
any order, so its optimum is a lower bound on the simulated step time of every placement, equal to
it whenever FIFO order is optimal (as in the brute-force tests). Each improving solution found is
simulated, and the best simulated one is returned. Graphs with more ops than ``max_groups`` are
first cut into ``max_groups`` contiguous slices of the topological order with equal compute (each
slice one task; ``grouping="metis"`` uses :func:`placer.grouping.metis_groups` instead); then the optimum is that of the grouped problem, not of the original, and a
task's bus time is the sum of its remote transfers (a group sends each of its ops' tensors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.grouping import components
from placer.methods.links import link_arrays, op_gap_us
from placer.methods.memory_repair import relieve_oom

def ortools_available() -> str | None:
    try:
        from ortools.sat.python import cp_model  # noqa: F401
    except Exception as e:
        return f"ortools is not importable ({type(e).__name__}); pip install 'placer[exact]'"
    return None


def contiguous_groups(problem, max_groups: int) -> np.ndarray:
    """(n,) group of each op: the topological order cut into at most ``max_groups`` consecutive
    slices, each holding about the same share of (compute on the fastest device + op count) / 2;
    where ops may run on only some devices, also cut where a slice's ops would share no device."""
    n = problem.n_ops
    if n <= max_groups:
        return np.arange(n, dtype=np.int64)
    w = np.where(np.isfinite(problem.fastest_us), problem.fastest_us, 0.0)
    w = 0.5 * (w / w.sum() if w.sum() > 0 else 0.0) + 0.5 / n
    c = np.cumsum(w) - w / 2  # an op belongs to the slice its midpoint falls in
    g = np.minimum((c * max_groups).astype(np.int64), max_groups - 1)
    _, g = np.unique(np.maximum.accumulate(g), return_inverse=True)
    if problem.restricted:  # also cut where a slice's ops would share no device (more slices then)
        ok, cut = problem.allowed, np.zeros(n, dtype=np.int64)
        common = ok[0].copy()
        for i in range(1, n):
            common = ok[i].copy() if g[i] != g[i - 1] else common & ok[i]
            if not common.any():
                cut[i], common = 1, ok[i].copy()
        g = g + np.cumsum(cut)
    return g.astype(np.int64)


class _Tasks:
    """The problem seen by the model: tasks (groups of ops), their costs, edges and classes."""

    def __init__(self, problem, group_of: np.ndarray, sim_params, memory: str = "params"):
        g = problem.graph
        self.group_of = group_of
        K = int(group_of.max()) + 1
        self.K, self.D = K, problem.n_devices
        cost = np.zeros((K, self.D))
        np.add.at(cost, group_of, problem.compute_us)
        self.cost = cost
        gap = op_gap_us(sim_params)
        nonzero = np.zeros((K, self.D))
        np.add.at(nonzero, group_of, (problem.compute_us > 0).astype(float))
        self.occupy = cost + gap * nonzero  # every op with non-zero cost leaves a gap after it
        held = g.param_bytes if memory == "params" else g.param_bytes + g.output_bytes + g.temp_bytes
        self.param = np.bincount(group_of, weights=held, minlength=K)
        a, b = group_of[g.edge_src], group_of[g.edge_dst]
        keep = a != b
        key = a[keep] * K + b[keep]
        uk, inv = np.unique(key, return_inverse=True)
        self.esrc, self.edst = uk // K, uk % K
        self.ebytes = np.bincount(inv, weights=g.edge_bytes[keep], minlength=len(uk))
        # placement classes: tasks linked by a colocation group share one device
        pairs = [np.stack(np.broadcast_arrays(group_of[m[0]], group_of[m[1:]]), axis=1)
                 for m in g.colocation_groups()]
        self.cls = components(K, np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64))
        self.C = int(self.cls.max()) + 1
        ok = np.ones((self.C, self.D), dtype=bool)
        np.logical_and.at(ok, self.cls, np.isfinite(cost))
        self.ok = ok
        self.cparam = np.bincount(self.cls, weights=self.param, minlength=self.C)
        bw, lat = link_arrays(problem, sim_params)
        off = ~np.eye(self.D, dtype=bool)
        self.uniform = self.D < 2 or (np.ptp(bw[off]) == 0 and np.ptp(lat[off]) == 0)
        self.comm = (lat[off].min() if self.D > 1 else 0.0) + self.ebytes / (bw[off].max() if self.D > 1 else np.inf)


def _interchangeable(problem, T: _Tasks, sim_params) -> list[list[int]]:
    """Classes of devices that are exact copies (same costs, memory, and links to every device)."""
    bw, lat = link_arrays(problem, sim_params)
    D = T.D
    out, seen = [], set()
    for a in range(D):
        if a in seen:
            continue
        cls = [a]
        for b in range(a + 1, D):
            if b in seen:
                continue
            same = (np.array_equal(T.cost[:, a], T.cost[:, b]) and problem.memory_bytes[a] == problem.memory_bytes[b]
                    and np.array_equal(T.ok[:, a], T.ok[:, b]))
            others = [o for o in range(D) if o not in (a, b)]
            same = same and bw[a, b] == bw[b, a] and lat[a, b] == lat[b, a] and all(
                bw[a, o] == bw[b, o] and bw[o, a] == bw[o, b] and lat[a, o] == lat[b, o] and lat[o, a] == lat[o, b]
                for o in others)
            if same:
                cls.append(b)
        seen.update(cls)
        if len(cls) > 1:
            out.append(cls)
    return out


@dataclass(frozen=True, eq=False)
class Model:
    """A built CP-SAT model of one grouped problem (:func:`build`) and what decoding its solutions needs."""

    cp: Any  # the ortools.sat.python.cp_model.CpModel
    x: list  # x[c][d]: placement class c on device d (a constant 0 where d cannot run all of c)
    tasks: _Tasks  # the problem as the model sees it
    resolution_us: float  # microseconds per tick of the model's integer times


@dataclass(frozen=True, eq=False)
class Solution:
    """What one solve of a :class:`Model` found (:func:`solve_model`); compared by identity (it holds arrays)."""

    status: str  # CP-SAT's status name: OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN or MODEL_INVALID
    solutions: tuple  # per-op placements (np.ndarray), in the order found: each better than the last
    values_us: tuple  # the model's makespan of each, in microseconds
    model_makespan_us: float | None  # the model's best makespan (None: no solution found)
    lower_bound_us: float  # CP-SAT's proven bound on the model's makespan
    resolution_us: float  # microseconds per tick of the model's integer times
    tasks: int  # tasks (op groups) of the model
    classes: int  # placement classes: tasks tied by a colocation group share one device
    uniform_links: bool  # every link alike (else the model takes the fastest link: a relaxation)

    @property
    def placement(self) -> np.ndarray | None:
        """The best solution found (per op), or None."""
        return self.solutions[-1] if self.solutions else None


def build(problem, sim_params, group_of: np.ndarray, hint=None, resolution_us: float | None = None,
          memory: str = "params", cuts=()) -> Model:
    """The model of the module docstring for ``problem`` with its ops grouped by ``group_of``;
    ``hint``: a device per placement class for the solver to start from; ``cuts``: (classes,
    devices) pairs, the classes never all on one of those devices (:func:`placer.methods.exact.cp_sat`)."""
    from ortools.sat.python import cp_model

    T = _Tasks(problem, group_of, sim_params, memory)
    K, D, C = T.K, T.D, T.C
    grouped = K < problem.n_ops
    if resolution_us is None:
        finite = np.where(np.isfinite(T.occupy), T.occupy, 0.0)
        horizon_us = finite.max(axis=1).sum() + T.comm.sum() + 1.0
        resolution_us = max(1e-3, horizon_us / 2e8)
    tick = lambda us: int(np.floor(us / resolution_us + 1e-9))  # noqa: E731
    bus_gap = tick(getattr(sim_params, "bus_gap_us", 0.0) or 0.0)
    placeto = getattr(sim_params, "comm_model", "placeto") == "placeto"
    occ = [[tick(T.occupy[u, d]) if T.ok[T.cls[u], d] else 0 for d in range(D)] for u in range(K)]
    cst = [[tick(T.cost[u, d]) if T.ok[T.cls[u], d] else 0 for d in range(D)] for u in range(K)]
    comm = [tick(c) for c in T.comm]
    H = sum(max(r) for r in occ) + sum(comm) + bus_gap * K + 1

    m = cp_model.CpModel()
    x = [[m.NewBoolVar(f"x{c}_{d}") if T.ok[c, d] else m.NewConstant(0) for d in range(D)] for c in range(C)]
    for c in range(C):
        m.AddExactlyOne([x[c][d] for d in range(D) if T.ok[c, d]])
    s = [m.NewIntVar(0, H, f"s{u}") for u in range(K)]
    e = [m.NewIntVar(0, H, f"e{u}") for u in range(K)]
    dev_iv = [[] for _ in range(D)]
    for u in range(K):
        c = T.cls[u]
        m.Add(e[u] == s[u] + sum(cst[u][d] * x[c][d] for d in range(D) if T.ok[c, d]))
        for d in range(D):
            if T.ok[c, d]:
                dev_iv[d].append(m.NewOptionalFixedSizeIntervalVar(s[u], occ[u][d], x[c][d], f"i{u}_{d}"))
    for d in range(D):
        m.AddNoOverlap(dev_iv[d])
    # same device per edge
    same = []
    for k in range(len(T.esrc)):
        a, b = T.cls[T.esrc[k]], T.cls[T.edst[k]]
        if a == b:
            same.append(m.NewConstant(1))
            continue
        ys = []
        for d in range(D):
            if T.ok[a, d] and T.ok[b, d]:
                y = m.NewBoolVar("")
                m.AddImplication(y, x[a][d])
                m.AddImplication(y, x[b][d])
                m.AddBoolOr([y, x[a][d].Not(), x[b][d].Not()])
                ys.append(y)
        sv = m.NewBoolVar(f"same{k}")
        m.Add(sv == sum(ys)) if ys else m.Add(sv == 0)
        same.append(sv)
    out_edges = [[] for _ in range(K)]
    for k in range(len(T.esrc)):
        out_edges[T.esrc[k]].append(k)
    arrival = [None] * K
    last_event = []  # (task, (arrival time, present)): the makespan is at least arrival + bus gap
    bus_iv = [[] for _ in range(D)]
    for u in range(K):
        ks = out_edges[u]
        if not ks:
            continue
        if placeto:
            if grouped:  # a group sends each of its ops' tensors: the remote transfers add up
                dur = m.NewIntVar(0, sum(comm[k] for k in ks), f"dur{u}")
                m.Add(dur == sum(comm[k] - comm[k] * same[k] for k in ks))
            else:
                dur = m.NewIntVar(0, max(comm[k] for k in ks), f"dur{u}")
                m.AddMaxEquality(dur, [comm[k] - comm[k] * same[k] for k in ks] + [0])
            rem = m.NewBoolVar(f"rem{u}")
            for k in ks:
                m.AddImplication(same[k].Not(), rem)
            m.AddBoolOr([same[k].Not() for k in ks]).OnlyEnforceIf(rem)
            b = m.NewIntVar(0, H, f"b{u}")
            m.Add(b >= e[u])
            c = T.cls[u]
            for d in range(D):
                if T.ok[c, d]:
                    z = m.NewBoolVar("")
                    m.AddBoolAnd([x[c][d], rem]).OnlyEnforceIf(z)
                    m.AddBoolOr([x[c][d].Not(), rem.Not()]).OnlyEnforceIf(z.Not())
                    end = m.NewIntVar(0, 2 * H, "")
                    m.Add(end == b + dur + bus_gap)
                    bus_iv[d].append(m.NewOptionalIntervalVar(b, dur + bus_gap, end, z, f"bus{u}_{d}"))
            arrival[u] = b + dur
            last_event.append((u, (b + dur, rem)))
        for k in ks:
            v = T.edst[k]
            m.Add(s[v] >= e[u])
            if placeto:
                m.Add(s[v] >= arrival[u]).OnlyEnforceIf(same[k].Not())
            else:
                m.Add(s[v] >= e[u] + comm[k]).OnlyEnforceIf(same[k].Not())
                last_event.append((u, (e[u] + comm[k], same[k].Not())))
    for d in range(D):
        if bus_iv[d]:
            m.AddNoOverlap(bus_iv[d])
    # memory: parameters placed on a device fit it
    scale = max(1.0, T.cparam.max() / 1e9) if C else 1.0
    for d in range(D):
        terms = [(int(np.floor(T.cparam[c] / scale)), x[c][d]) for c in range(C) if T.ok[c, d] and T.cparam[c] > 0]
        if terms:
            m.Add(sum(w * v for w, v in terms) <= int(np.ceil(problem.memory_bytes[d] / scale)))
    # memory cuts: these classes overflowed device d together in a simulation (see cp_sat)
    for classes, devs in cuts:
        for d in devs:
            lits = [x[c][d] for c in classes if T.ok[c, d]]
            if len(lits) == len(classes):
                m.Add(sum(lits) <= len(lits) - 1)
    # symmetry: among interchangeable devices, device k+1 is used only after device k (by class order)
    for grp in _interchangeable(problem, T, sim_params):
        for j in range(1, len(grp)):
            for c in range(C):
                m.Add(x[c][grp[j]] <= sum(x[c2][grp[j - 1]] for c2 in range(c)))
    # the makespan is the simulator's last event: an op's end plus its gap, or an arrival plus the bus gap
    M = m.NewIntVar(0, 2 * H, "makespan")
    for u in range(K):
        c = T.cls[u]
        m.Add(M >= s[u] + sum(occ[u][d] * x[c][d] for d in range(D) if T.ok[c, d]))
    for u, lastv in last_event:
        m.Add(M >= lastv[0] + bus_gap).OnlyEnforceIf(lastv[1])
    m.Minimize(M)
    if hint is not None:
        for c in range(C):
            hd = int(hint[c])
            for d in range(D):
                if T.ok[c, d]:
                    m.AddHint(x[c][d], int(d == hd))
    return Model(m, x, T, resolution_us)


def decode(model: Model, value) -> np.ndarray:
    """The per-op placement of a solution, ``value(var)`` its value of a model variable."""
    T = model.tasks
    cls_dev = np.array([next(d for d in range(T.D) if T.ok[c, d] and value(model.x[c][d])) for c in range(T.C)])
    return cls_dev[T.cls][T.group_of]


def solve_model(model: Model, time_limit_s: float, seed: int = 0, workers: int = 1,
                deterministic: bool = False) -> Solution:
    """Solve ``model`` within ``time_limit_s`` seconds (``deterministic``: of CP-SAT's deterministic
    time, reproducible), every improving solution decoded as it is found."""
    from ortools.sat.python import cp_model

    T, resolution_us = model.tasks, model.resolution_us
    solver = cp_model.CpSolver()
    if deterministic:  # CP-SAT's deterministic time: reproducible, but far slower than wall-clock here
        solver.parameters.max_deterministic_time = float(time_limit_s)
    else:
        solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.random_seed = int(seed) % (2**31)
    solver.parameters.num_workers = int(workers)
    solver.parameters.catch_sigint_signal = False  # Ctrl-C reaches the CLI (exit 130), not a silent early stop
    if deterministic and workers > 1:  # parallel workers in a fixed interleaving: reproducible
        solver.parameters.interleave_search = True
    found, values = [], []

    class _Cb(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            found.append(decode(model, self.Value))
            values.append(self.ObjectiveValue() * resolution_us)

    status = solver.Solve(model.cp, _Cb())
    return Solution(status=solver.StatusName(status), solutions=tuple(found), values_us=tuple(values),
                    model_makespan_us=float(solver.ObjectiveValue() * resolution_us) if found else None,
                    lower_bound_us=float(solver.BestObjectiveBound() * resolution_us),
                    resolution_us=resolution_us, tasks=T.K, classes=T.C, uniform_links=bool(T.uniform))


def solve(problem, sim_params, group_of: np.ndarray, time_limit_s: float, seed: int = 0, hint=None,
          workers: int = 1, resolution_us: float | None = None, memory: str = "params", cuts=(),
          deterministic: bool = False) -> Solution:
    """:func:`build` the model, then :func:`solve_model` it."""
    return solve_model(build(problem, sim_params, group_of, hint, resolution_us, memory, cuts), time_limit_s, seed,
                       workers, deterministic)


def class_hint(problem, group_of: np.ndarray, placement: np.ndarray, sim_params) -> np.ndarray:
    """A per-class device for the solver's hint: where most of the class's compute sits."""
    T = _Tasks(problem, group_of, sim_params)
    w = np.where(np.isfinite(problem.compute_us[np.arange(problem.n_ops), placement]),
                 problem.compute_us[np.arange(problem.n_ops), placement], 0.0) + 1e-9
    acc = np.zeros((T.C, T.D))
    np.add.at(acc, (T.cls[group_of], placement), w)
    acc[~T.ok] = -1.0
    return acc.argmax(axis=1)


@dataclass(frozen=True)
class CpSatConfig(MethodConfig):
    """The CP-SAT model of this module and how long it may search."""

    max_groups: Annotated[int, Range(">= 1")] = 40  # tasks of the model: larger graphs are coarsened into this many groups first
    deterministic_s: Annotated[float, Range("> 0")] = 10.0  # CP-SAT deterministic time per solve when Budget.seconds is not given
    workers: Annotated[int, Range(">= 1")] = 1  # CP-SAT search workers (more than one: interleaved, so still reproducible without --seconds)
    hint: bool = True  # give the best warm start (HEFT, m-ETF, METIS, single GPU) to the solver as a hint
    solutions: Annotated[int, Range(">= 1")] = 8  # the last improving solutions of each solve simulated (the best simulated is kept)
    memory_rounds: Annotated[int, Range(">= 0")] = 6  # re-solves with memory cuts when the model's best overflows in the simulator
    grouping: Literal["contiguous", "metis"] = "contiguous"  # how a graph larger than max_groups is coarsened

    @classmethod
    def method_name(cls):
        return "cp-sat"


def _warm_starts(problem, ev: Evaluator, seed: int) -> list[np.ndarray]:
    """The placements CP-SAT starts from: HEFT and m-ETF (simulator's communication), METIS, and
    every op on the first GPU when it can run them all."""
    from placer.methods.list_scheduling import schedulers as ls
    from placer.methods.partitioning import metis_placement
    from placer.methods.devices import gpu_devices

    gpus = gpu_devices(problem)
    starts = [ls.heft_schedule(problem, ev.sim_params, gpus, comm="sim").placement,
              ls.etf_schedule(problem, ev.sim_params, gpus, comm="sim").placement, metis_placement(problem, gpus, seed)]
    starts += [np.full(problem.n_ops, d, dtype=np.int64) for d in gpus[:1]
               if np.isfinite(problem.compute_us[:, d]).all()]
    out = []
    for p in starts:
        if not any(np.array_equal(p, q) for q in out):
            out.append(p)
    return out


@register("cp-sat", "CP-SAT optimum of placement + scheduling with communication and memory "
          "(<= max_groups tasks; larger graphs coarsened first)", "exact", CpSatConfig,
          paper="OR-Tools CP-SAT (Perron and Didier); the joint model of Tarnawski et al. 2020", available=ortools_available, version=1)
def cp_sat(problem, seed: int, ev: Evaluator, cfg: CpSatConfig):
    """Limits: with ``Budget.seconds`` every solve gets what is left of it (the first solve at most
    60 %, each memory-cut round half of what is then left), so the run ends within the asked
    seconds plus the simulation of the solutions found; without it every solve gets
    ``deterministic_s`` of CP-SAT's deterministic time and interleaved workers, so the same seed
    gives the same placement under any machine load. The warm starts are simulated through the
    evaluator first, so the result is never worse than the best of them, and when the solver finds
    no solution in its limit the best warm start is returned (with a note) instead of an error."""
    max_groups, grouping = cfg.max_groups, cfg.grouping
    wall = ev.seconds is not None  # an opt-in wall-clock limit: not reproducible

    def limit(share: float) -> float:
        if wall:
            return max(0.05, share * (ev.seconds - ev.clock()))
        return cfg.deterministic_s

    if grouping == "contiguous" or problem.n_ops <= max_groups:
        group_of = contiguous_groups(problem, max_groups)
    else:  # placer.grouping's METIS coarsening (acyclic group graph)
        from placer.grouping import metis_groups
        group_of = np.asarray(metis_groups(problem, max_groups, seed=seed).op_group, dtype=np.int64)
    grouped = int(group_of.max()) + 1 < problem.n_ops
    notes = []
    # the warm starts, simulated through the evaluator: the result is never worse than they are;
    # the first is simulated even when building them used up a --seconds limit (on a 5k-op graph
    # on a loaded machine HEFT and m-ETF alone can), so the run always has a placement to return
    best = None
    for p in _warm_starts(problem, ev, seed):
        if ev.out_of_budget() and best is not None:
            break
        r = ev.simulate(p)
        if best is None or (r.oom, r.objective_us) < best[0]:
            best = ((bool(r.oom), float(r.objective_us)), p)
    h = class_hint(problem, group_of, best[1], ev.sim_params) if cfg.hint and best is not None else None
    out = solve(problem, ev.sim_params, group_of, limit(0.6), seed, h, cfg.workers, deterministic=not wall)
    if out.placement is None:
        notes.append(f"CP-SAT found no solution in its limit (status {out.status}): the best warm start "
                     "is returned")
        return _cp_result(problem, ev, best[1], out, notes, grouped, grouping)

    def judge(sols, best, oom_seen):
        for p in sols[-cfg.solutions:]:  # the last improving solutions, judged by the simulator
            if ev.out_of_budget():
                break
            r = ev.simulate(p)
            if r.oom:
                oom_seen.append((p, r))
            if best is None or (r.oom, r.objective_us) < best[0]:
                best = ((bool(r.oom), float(r.objective_us)), p)
        return best

    overflowed: list = []
    best = judge(out.solutions, best, overflowed)

    simulate_oom = bool(overflowed) and overflowed[-1][0] is out.solutions[-1]
    cuts, rounds, T = [], 0, _Tasks(problem, group_of, ev.sim_params)
    while simulate_oom and rounds < cfg.memory_rounds and not ev.out_of_budget():
        # the model's best overflows in the simulator (activations, received copies): forbid the
        # classes live at each overflowing device's peak from sharing it again, and solve again
        # (logic-based Benders cuts; the first solve's bound stays the valid one)
        for p, r in overflowed:
            for d in np.flatnonzero(r.peak_memory_bytes > problem.memory_bytes):
                live = r.peak_ops[d] if len(r.peak_ops[d]) else np.flatnonzero(p == d)
                classes = np.unique(T.cls[group_of[live]])
                same = [e for e in range(problem.n_devices) if problem.memory_bytes[e] <= problem.memory_bytes[d]]
                cuts.append((classes, same))
        rounds += 1
        overflowed = []
        again = solve(problem, ev.sim_params, group_of, limit(0.5), seed,
                      class_hint(problem, group_of, best[1], ev.sim_params), cfg.workers, cuts=cuts,
                      deterministic=not wall)
        if not again.solutions:
            break
        best = judge(again.solutions, best, overflowed)
        simulate_oom = bool(overflowed) and overflowed[-1][0] is again.solutions[-1]
    if rounds:
        notes.append(f"{rounds} memory-cut rounds ({len(cuts)} cuts) after simulated overflow")
    if best[0][0] and not ev.out_of_budget():
        q, r = relieve_oom(problem, best[1], ev)
        if not r.oom:
            best = ((r.oom, r.objective_us), q)
            notes.append("moved ops off a device whose simulated peak memory overflowed")
        else:
            notes.append("OOM: no memory-feasible placement found")
    return _cp_result(problem, ev, best[1], out, notes, grouped, grouping, best[0])


def _cp_result(problem, ev: Evaluator, placement, out: Solution, notes, grouped, grouping, key=None):
    found = out.model_makespan_us is not None
    slack_us = out.resolution_us * (out.tasks + 1)  # durations were rounded down to whole ticks
    proven = (found and key is not None and out.status == "OPTIMAL" and not grouped and not key[0]
              and key[1] <= out.lower_bound_us + slack_us)
    if found:
        model_opt = out.status == "OPTIMAL"
        what = (f"optimal for the grouped model ({out.tasks} groups), not necessarily for the graph" if grouped and model_opt
                else "optimal for the real problem (simulated time equals the proven bound)" if proven
                else "optimal for the model (a relaxation: the simulated time is above its bound)" if model_opt
                else "not proven optimal")
        notes.append(f"status {out.status}: {what}; model makespan {out.model_makespan_us:.1f} us, proven lower "
                     f"bound {out.lower_bound_us:.1f} us" + (" (of the grouped problem)" if grouped else ""))
    if grouped:
        notes.append(f"coarsened {problem.n_ops} ops into {out.tasks} groups ({grouping})")
    if not out.uniform_links:
        notes.append("links differ: the model uses the fastest link (a relaxation)")
    res = ev.result("cp-sat", placement, notes=notes)
    res.cost.extra.update({k: getattr(out, k) for k in ("status", "model_makespan_us", "lower_bound_us", "tasks", "classes")})
    res.cost.extra["grouped"] = grouped
    # what was proven, and of what (the bench's marks, placer.bench.tables.optimality_mark): "optimal" and
    # "proven_optimal" only when the gap is closed on the real problem, the returned placement's simulated time
    # equal to the model's proven bound, which is one on the real problem only when no ops were grouped (merging
    # ops restricts the problem, so a grouped model's optimum bounds nothing below); "proven_optimal_grouped"
    # when CP-SAT proved its own model optimal (of the coarsened graph when grouped)
    res.cost.extra["optimal"] = bool(proven)
    res.cost.extra["proven_optimal"] = bool(proven)
    res.cost.extra["proven_optimal_grouped"] = out.status == "OPTIMAL"
    return res


def grouped_problem(problem, n_groups: int):
    """A standalone Problem whose ops are ``n_groups`` contiguous topological slices of
    ``problem``'s graph (costs, FLOPs, bytes and parameters summed; edge bytes between two slices
    summed), on the same cluster: a small problem CP-SAT solves exactly."""
    from placer.graph import OpGraph
    from placer.problem import Problem

    g = problem.graph
    go = contiguous_groups(problem, n_groups)
    K = int(go.max()) + 1
    T = _Tasks(problem, go, None)

    def add(a):
        return np.bincount(go, weights=a, minlength=K)

    costs = {k: add(np.where(np.isfinite(v), v, 0.0)) + np.where(np.bincount(go, weights=~np.isfinite(v), minlength=K) > 0,
                                                                  np.inf, 0.0) for k, v in g.compute_us.items()}
    out_b = np.zeros(K)
    np.maximum.at(out_b, T.esrc, T.ebytes)
    role = np.array([np.bincount(g.role[go == k], minlength=3).argmax() for k in range(K)])
    coloc = np.where(np.bincount(T.cls, minlength=T.C)[T.cls] > 1, T.cls, -1)
    names = [f"{g.name}/g{k}" for k in range(K)]
    mods = [g.modules[int(np.flatnonzero(go == k)[0])] for k in range(K)]
    cg = OpGraph.build(names, list(zip(T.esrc.tolist(), T.edst.tolist(), T.ebytes.tolist())),
                       name=f"{g.name}-g{K}", compute_us=costs, flops=add(g.flops), bytes_accessed=add(g.bytes_accessed),
                       output_bytes=out_b, param_bytes=add(g.param_bytes), temp_bytes=add(g.temp_bytes),
                       role=role, colocation=coloc, modules=mods,
                       meta={"grouped_from": g.name, "groups": K})
    return Problem(cg, problem.cluster)
