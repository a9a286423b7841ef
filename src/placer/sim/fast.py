"""Python entry points of the compiled simulator.

* :class:`Engine`: one (Problem, SimParams) with its flat arrays and a reusable workspace;
  ``objective(p)`` is the fast path (makespan and peak memory, no SimResult), ``result(p)`` the
  full :class:`SimResult`.
* :func:`evaluate` / :func:`evaluate_many`: the objective of one placement / of a (k, n) batch, the
  batch optionally split over threads (``n_jobs``; the kernel releases the GIL).

A move of a few ops (Placeto's progressive MDP) is a full objective run on a kept Engine. An
incremental path (restart the event loop at the earliest end of a moved op's parent, from state read
back from the previous run's records) was built, measured and removed: on training graphs a backward
op's forward mirror feeds it, so that time falls in the forward pass and a Placeto-style sweep
replayed on average 65% of the timeline (10k-op generated training graph), which bounds any restart
at 1 / 0.65 = 1.5x even if reading the state back were free; measured, reading it back (O(n + m))
and keeping the records a restart needs made a move 0.87-0.95x of a full run, and the wrapper that
remained cost 0.99-1.06x of a full run.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from placer.sim import kernel as K
from placer.sim import state as S
from placer.sim.memory import live_at
from placer.sim.prepare import config, prepared
from placer.sim.result import SimParams, SimResult


def default_params(problem) -> SimParams:
    """The SimParams used when none is given: the defaults, with the communication model the
    problem's cluster declares (``placeto`` when it declares none)."""
    return SimParams.preset("default", problem.cluster)


class Engine:
    """The compiled simulator bound to one Problem and SimParams. Not thread-safe (one workspace);
    :func:`engine` hands out one per thread."""

    def __init__(self, problem, params: SimParams | None = None):
        self.problem = problem
        self.params = params or default_params(problem)
        self.prep = prepared(problem, self.params.tie_break)
        self.PI = self.prep.PI
        self.CF, self.CI = config(problem, self.params)
        n, m, D = self.prep.n, self.prep.m, self.prep.D
        x = S.heap_extra(self.CI)
        ni, nf = S.ws_sizes(n, m, D, x)
        self.WI = np.zeros(ni, dtype=np.int64)
        self.WF = np.zeros(nf + S.link_slots(self.CI), dtype=np.float64)
        self.vi, self.vf = S.views(self.WI, self.WF, n, m, D, x)
        self.place = np.zeros(n, dtype=np.int64)  # the placement of the last run
        self.recorded = False  # whether the last run kept its records

    # ------------------------------------------------------------------ runs
    def _as_array(self, placement) -> np.ndarray:
        p = np.asarray(getattr(placement, "devices", placement))
        if p.shape != (self.prep.n,) or not np.issubdtype(p.dtype, np.integer):
            self.problem.validate_placement(p)  # raises the InputError that names the problem
        return p.astype(np.int64, copy=False)

    def run(self, placement, record: bool = True) -> None:
        """Simulate ``placement`` into the workspace (raises on a bad placement). ``record=False``
        keeps only what the objective needs (faster; :meth:`result` then re-runs)."""
        self.place[:] = self._as_array(placement)
        st = self._sim(record)
        self.recorded = record
        self.check(st)

    def _sim(self, record: bool) -> int:
        p = self.prep
        return K.sim_full(p.GI, p.GF, self.CF, self.CI, self.PI, self.place, self.WI, self.WF, record)

    def check(self, status: int) -> None:
        if status == S.OK:
            return
        if status == S.BAD_PLACEMENT:
            self.problem.validate_placement(self.place)
            raise ValueError(f"placement rejected at op {int(self.WI[S.S_BAD])}")  # pragma: no cover
        if not self.recorded:  # find the op from a recorded run
            self.recorded = True
            self.check(self._sim(True))
        ran = np.zeros(self.prep.n, dtype=bool)
        ran[self.vi[S.I_DISP][:int(self.WI[S.S_NRUN])]] = True
        i = int(np.flatnonzero(~ran)[0])
        raise RuntimeError(f"op '{self.problem.graph.op_names[i]}' (and {int((~ran).sum()) - 1} more) never ran: "
                           "the graph has a cycle or a parent never finished")

    def objective(self, placement) -> float:
        """The memory-penalised objective R (us) of ``placement``: the fast path."""
        self.run(placement, record=False)
        return float(self.WF[S.F_OBJ])

    @property
    def makespan_us(self) -> float:
        return float(self.WF[S.F_TMAX])

    @property
    def oom(self) -> bool:
        """Whether a device overflowed its memory in the last run (as :class:`BatchResult`'s flag)."""
        return bool(self.WF[S.F_OVER] > 0)

    @property
    def last_objective(self) -> float:
        return float(self.WF[S.F_OBJ])

    @property
    def peak_memory_bytes(self) -> np.ndarray:
        """Peak bytes per device of the last run, parameters included."""
        return self.vf[S.F_PEAK] + self.vf[S.F_RESIDENT]

    def result(self, placement=None) -> SimResult:
        """The full SimResult of ``placement`` (or of the last run when None)."""
        if placement is not None or not self.recorded:
            self.run(self.place.copy() if placement is None else placement)
        g, p, vi, vf = self.problem.graph, self.place.copy(), self.vi, self.vf
        start, end = vf[S.F_START].copy(), vf[S.F_END].copy()
        src = g.edge_src if self.prep.edge_src is None else self.prep.edge_src  # the kernel's edge numbering
        dst = g.edge_dst if self.prep.edge_dst is None else self.prep.edge_dst
        reps = np.flatnonzero((p[src] != p[dst]) & (vi[S.I_COPYREP] == np.arange(len(src))))
        u, x = src[reps], p[dst[reps]]
        t0, t1, nb = vf[S.F_XFSTART][reps], vf[S.F_XFARR][reps], vf[S.F_CBYTES][reps]
        order = np.lexsort((x, u, t0))
        transfers = {"tensor": u[order], "src": p[u[order]], "dst": x[order], "start_us": t0[order],
                     "end_us": t1[order], "bytes": nb[order]}
        n = g.n_ops
        iv = {
            "dev": np.concatenate([p, p, x]),
            "alloc": np.concatenate([start, start, t1]),
            "free": np.concatenate([vf[S.F_OUTFREE], end, vf[S.F_CFREE][reps]]),
            "bytes": np.concatenate([self.prep.out_bytes, g.temp_bytes, nb]),
            "owner": np.concatenate([np.arange(n), np.arange(n), u]),
            "kind": np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64), np.full(len(u), 2, np.int64)]),
        }
        peak_t = vf[S.F_PEAKT].copy()
        busy = np.bincount(p, weights=end - start, minlength=self.prep.D)
        return SimResult(
            makespan_us=self.makespan_us, device=p, start_us=start, end_us=end, transfers=transfers,
            busy_us=busy, peak_memory_bytes=self.peak_memory_bytes.copy(),
            peak_ops=live_at(iv, p, g.param_bytes, peak_t), memory_bytes=np.asarray(self.problem.memory_bytes),
            objective_us=self.last_objective, oom=bool(self.WF[S.F_OVER] > 0), params=self.params,
            peak_time_us=peak_t, memory_intervals=iv,
        )


_local = threading.local()


def engine(problem, params: SimParams | None = None) -> Engine:
    """The cached Engine of (problem, params) for the calling thread."""
    params = params or default_params(problem)
    cache = problem.__dict__.setdefault("_sim_engines", {})
    k = (params, threading.get_ident())
    e = cache.get(k)
    if e is None:
        e = cache[k] = Engine(problem, params)
    return e


def evaluate(problem, placement, params: SimParams | None = None) -> float:
    """Objective R (us) of one placement without building a SimResult."""
    return engine(problem, params).objective(placement)


@dataclass
class BatchResult:
    objective_us: np.ndarray  # (k,) memory-penalised step time, us
    makespan_us: np.ndarray  # (k,)
    peak_memory_bytes: np.ndarray  # (k, D), parameters included
    oom: np.ndarray  # (k,) bool


def evaluate_many(problem, placements, params: SimParams | None = None, n_jobs: int | None = 1) -> BatchResult:
    """Simulate a (k, n) array of placements in one call. ``n_jobs``: threads (None or 1: the
    calling thread; -1: one per core); rows are split into contiguous chunks, one per thread, each
    with its own workspace (the kernel releases the GIL). Results do not depend on ``n_jobs``."""
    params = params or default_params(problem)
    prep = prepared(problem, params.tie_break)
    PI = prep.PI
    P = np.asarray(placements)
    if P.ndim == 1:
        P = P[None, :]
    if P.ndim != 2 or P.shape[1] != prep.n or not np.issubdtype(P.dtype, np.integer):
        problem.validate_placement(P[0] if P.ndim == 2 and len(P) else P)
        raise ValueError(f"placements must be a (k, {prep.n}) integer array, got shape {P.shape}")
    P = np.ascontiguousarray(P, dtype=np.int64)
    k = len(P)
    CF, CI = config(problem, params)
    obj, mk = np.empty(k), np.empty(k)
    peak = np.empty((k, prep.D))
    status = np.zeros(k, dtype=np.int64)
    jobs = (os.cpu_count() or 1) if n_jobs == -1 else max(1, int(n_jobs or 1))
    jobs = min(jobs, k)
    if jobs <= 1:
        K.sim_batch(prep.GI, prep.GF, CF, CI, PI, P, 0, k, obj, mk, peak, status)
    else:
        bounds = np.linspace(0, k, jobs + 1).astype(int)
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(lambda j: K.sim_batch(prep.GI, prep.GF, CF, CI, PI, P, bounds[j], bounds[j + 1], obj, mk,
                                                peak, status), range(jobs)))
    if status.any():
        engine(problem, params).run(P[int(np.flatnonzero(status)[0])])  # raises the precise error
    return BatchResult(obj, mk, peak, (peak > np.asarray(problem.memory_bytes)).any(axis=1))
