"""Graph-partitioning placers: METIS k-way (Post's "Metis" baseline, Gao et al. section 4), the
Scotch static mapper (the Hierarchical Planner's "Scotch" baseline, Mirhoseini et al. 2018
section 3) and MinCut (the same mapper with the GPUs only as targets).

All three work on the graph of placement units (colocation groups contracted, see
:mod:`placer.methods.devices`), with a unit's compute cost as its vertex weight and the bytes
between units as edge weights, and hand the result through the same memory repair as every
classical method: units move off devices whose parameters overflow, then off devices whose
simulated peak overflows.

Scotch is the real library (``scotchpy64``, the ``scotch`` extra): the process graph is mapped onto
a decomposition-defined target architecture built from a complete target graph whose vertex
weights are the devices' relative compute speeds and whose edge weights are the relative cost of
a byte on each link (inverse bandwidth), Scotch's dual recursive bipartitioning doing the rest.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.grouping import Grouping, colocation_units
from placer.methods.start_cache import device_key, shared  # computed once per Problem, shared with the seeds
from placer.methods.devices import gpu_devices
from placer.methods.links import link_arrays
from placer.methods.memory_repair import relieve_oom


def _int_weights(x: np.ndarray, top: int) -> np.ndarray:
    """Non-negative floats scaled to integers in [1, top] (relative sizes kept)."""
    x = np.asarray(x, dtype=np.float64)
    m = x.max() if len(x) else 0.0
    if not np.isfinite(m) or m <= 0:
        return np.ones(len(x), dtype=np.int64)
    return np.maximum(1, np.round(x / m * top)).astype(np.int64)


def _unit_cost(problem, units: Grouping, devs: list[int]) -> np.ndarray:
    """A unit's compute cost on the target devices: its mean over those it can run on."""
    c = units.compute_us(problem)[:, devs]
    fin = np.isfinite(c)
    mean = np.where(fin, c, 0.0).sum(axis=1) / np.maximum(fin.sum(axis=1), 1)
    fallback = np.where(np.isfinite(units.compute_us(problem)), units.compute_us(problem), np.inf).min(axis=1)
    return np.where(fin.any(axis=1), mean, fallback)


def _runnable_targets(problem, units: Grouping, devs: list[int]) -> list[int]:
    """Target devices that can run at least half of the work (a CPU with no costs is left out)."""
    ok = np.isfinite(units.compute_us(problem))
    return [d for d in devs if ok[:, d].mean() >= 0.5] or devs


def _finish_parts(problem, units: Grouping, unit_dev: np.ndarray) -> np.ndarray:
    """Per-op placement; a unit mapped to a device it cannot run on goes to the runnable device
    with the least compute so far."""
    udev = np.asarray(unit_dev, dtype=np.int64).copy()
    comp = units.compute_us(problem)
    load = np.zeros(problem.n_devices)
    ok_now = np.isfinite(comp[np.arange(units.n_groups), udev])
    np.add.at(load, udev[ok_now], comp[np.flatnonzero(ok_now), udev[ok_now]])
    for u in np.flatnonzero(~ok_now):
        cand = np.flatnonzero(np.isfinite(comp[u]))
        d = cand[np.argmin(load[cand] + comp[u, cand])]
        udev[u] = d
        load[d] += comp[u, d]
    return units.expand(udev)


# ---------------------------------------------------------------------- METIS
def metis_placement(problem, devices: list[int], seed: int = 0, ufactor: int = 30) -> np.ndarray:
    """k-way METIS over the unit graph, k = number of devices, part k -> devices[k]."""
    import pymetis

    units = colocation_units(problem)
    devs = _runnable_targets(problem, units, list(devices))
    if len(devs) == 1 or units.n_groups <= 1:
        return _finish_parts(problem, units, np.full(units.n_groups, devs[0]))
    if units.n_groups < len(devs):
        # fewer units than parts: METIS refuses ("You are trying to partition a graph into too many
        # parts", after "Cannot bisect a graph with 0 vertices") and returns an arbitrary labelling;
        # a k-way partition into more parts than vertices is one vertex a part: unit i on devs[i]
        return _finish_parts(problem, units, np.asarray(devs[:units.n_groups], dtype=np.int64))
    xadj, adj, w = units.undirected_csr(problem.graph)
    vw = _int_weights(_unit_cost(problem, units, devs), 10**5)
    ew = _int_weights(w, 10**5) if len(w) else w.astype(np.int64)
    opts = pymetis.Options(seed=int(seed) % (2**31), ufactor=int(ufactor))
    graph = pymetis.CSRAdjacency(xadj.tolist(), adj.tolist()) if hasattr(pymetis, "CSRAdjacency") else None
    kw = {"adjacency": graph} if graph is not None else {"xadj": xadj.tolist(), "adjncy": adj.tolist()}
    with _metis_quiet():
        _, parts = pymetis.part_graph(len(devs), vweights=vw.tolist(), eweights=ew.tolist(), options=opts, **kw)
    return _finish_parts(problem, units, np.asarray(devs)[np.asarray(parts, dtype=np.int64)])


class _metis_quiet:
    """METIS prints its complaints with C's printf (to file descriptor 1, which the CLI points at
    stderr): with enough units it still reaches a recursive bisection with nothing to bisect when one
    unit outweighs a part ("***Cannot bisect a graph with 0 vertices!", "***You are trying to
    partition a graph into too many parts!") and returns a partition all the same. Such lines
    written during the call are dropped; anything else written to descriptor 1 meanwhile is passed
    on. The C buffers are flushed before the descriptor is restored, so no line leaks out later."""

    def __enter__(self):
        import tempfile

        sys.stdout.flush()
        self._tmp = tempfile.TemporaryFile()
        self._saved = os.dup(1)
        os.dup2(self._tmp.fileno(), 1)
        return self

    def __exit__(self, *exc):
        _flush_c_stdio()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._tmp.seek(0)
        text = self._tmp.read()
        self._tmp.close()
        rest = b"".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith(b"***"))
        if rest:
            os.write(1, rest)
        return False


def _flush_c_stdio() -> None:
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to reach: nothing buffered there that we could flush
        pass


# ---------------------------------------------------------------------- Scotch
SCOTCH_OPTIONNUMDETERMINISTIC = 0  # scotch.h (Scotch 7): deterministic behaviour of the threaded algorithms
SCOTCH_OPTIONNUMRANDOMFIXEDSEED = 1  # scotch.h: the random generator starts from the context's fixed seed


def scotch_available() -> str | None:
    try:
        import scotchpy  # noqa: F401
    except Exception as e:  # ImportError, or the bundled libscotch failing to load
        return f"scotchpy64 is not importable ({type(e).__name__}); pip install 'placer[scotch]'"
    return None


def scotch_placement(problem, devices: list[int], seed: int = 0, sim_params=None,
                     balance: float = 0.05) -> np.ndarray:
    """Scotch static mapping of the unit graph onto the devices (target graph: device speeds as
    vertex weights, inverse link bandwidths as edge weights)."""
    import scotchpy

    units = colocation_units(problem)
    devs = _runnable_targets(problem, units, list(devices))
    if len(devs) == 1 or units.n_groups <= 1:
        return _finish_parts(problem, units, np.full(units.n_groups, devs[0]))
    # Scotch draws random numbers (coarsening matchings, initial bipartitions) and, when built with
    # threads, splits work between them: a context with a fixed seed, the deterministic option and a
    # single thread gives the same mapping for the same seed under any load (Scotch 7 user's guide,
    # SCOTCH_contextRandomSeed / SCOTCH_contextOptionSetNum(SCOTCH_OPTIONNUMDETERMINISTIC)).
    scotchpy.common.random_seed(int(seed) % (2**31))  # the process-wide generator (used by Arch.build)
    scotchpy.common.random_reset()
    ctx = scotchpy.Context()
    ctx.option_set_num(SCOTCH_OPTIONNUMDETERMINISTIC, 1)
    ctx.option_set_num(SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1)
    ctx.random_clone()  # the context's own generator, not the process-wide one
    # SCOTCH_contextRandomSeed returns void in libscotch 7 (scotchpy reads its return value as an
    # error code), so it is called directly
    scotchpy.common.libscotch.SCOTCH_contextRandomSeed(ctx._contextptr, scotchpy.common.proper_int(int(seed) % (2**31)))
    ctx.thread_spawn(1, None)
    # process graph
    xadj, adj, w = units.undirected_csr(problem.graph)
    proc = scotchpy.Graph()
    proc.build(baseval=0, verttab=xadj.astype(np.int64), edgetab=adj.astype(np.int64),
               velotab=_int_weights(_unit_cost(problem, units, devs), 10**5),
               edlotab=_int_weights(w, 10**5) if len(w) else np.ones(0, dtype=np.int64))
    # target architecture: complete graph over the devices
    comp = units.compute_us(problem)
    fast = np.where(np.isfinite(comp), comp, np.inf).min(axis=1)
    speed = []
    for d in devs:
        ok = np.isfinite(comp[:, d])
        speed.append(fast[ok].sum() / max(comp[ok, d].sum(), 1e-12) if ok.any() else 1e-3)
    bw, _ = link_arrays(problem, sim_params)
    k = len(devs)
    txadj = np.arange(0, k * (k - 1) + 1, k - 1, dtype=np.int64)
    tadj = np.array([b for a in range(k) for b in range(k) if b != a], dtype=np.int64)
    inv = np.array([1.0 / bw[devs[a], devs[b]] for a in range(k) for b in range(k) if b != a])
    tgt = scotchpy.Graph()
    tgt.build(baseval=0, verttab=txadj, edgetab=tadj, velotab=_int_weights(np.array(speed), 1000),
              edlotab=_int_weights(inv, 1000))
    arch = scotchpy.Arch()
    arch.build(tgt, np.arange(k, dtype=np.int64), scotchpy.Strat())
    parts = np.zeros(units.n_groups, dtype=np.int64)
    bound = scotchpy.Graph()
    ctx.bind_graph(proc, bound)
    bound._data(store=True)  # the Python side's vertex count, read back from the bound C graph
    strat = scotchpy.Strat()
    strat.graph_map_build(scotchpy.STRATQUALITY, k, float(balance))
    bound.map(arch, strat=strat, parttab=parts)
    bound.exit()
    ctx.exit()
    return _finish_parts(problem, units, np.asarray(devs)[parts])


# ---------------------------------------------------------------------- registered methods
def _finish(name, problem, ev: Evaluator, placement):
    p, r = relieve_oom(problem, placement, ev)
    notes = []
    if r.oom:
        notes.append("OOM: no memory-feasible placement found by this method")
    elif not np.array_equal(p, placement):
        notes.append("moved ops off a device whose memory overflowed")
    return ev.result(name, p, notes=notes)


@dataclass(frozen=True)
class MetisConfig(MethodConfig):
    """METIS k-way partitioning (Karypis and Kumar 1998) of the unit graph."""

    ufactor: Annotated[int, Range("in [1, 1000]")] = 30  # METIS load imbalance allowed, in thousandths (30: parts up to 1.03 x the mean)


@dataclass(frozen=True)
class ScotchConfig(MethodConfig):
    """Scotch static mapping (Pellegrini and Roman 1996) onto the devices."""

    balance: Annotated[float, Range("in [0, 1]")] = 0.05  # Scotch's load imbalance ratio allowed between target devices


@dataclass(frozen=True)
class MinCutConfig(MethodConfig):
    """Scotch static mapping onto the GPUs only (the Hierarchical Planner's MinCut)."""

    balance: Annotated[float, Range("in [0, 1]")] = 0.05  # Scotch's load imbalance ratio allowed between target GPUs



def shared_metis(problem, devices, seed: int = 0, ufactor: int | None = None):
    """METIS's placement (:func:`placer.methods.partitioning.metis_placement`; ``ufactor`` None: its
    default), once per Problem."""
    import inspect

    if ufactor is None:
        ufactor = inspect.signature(metis_placement).parameters["ufactor"].default
    return shared(problem, ("metis", device_key(devices), int(seed), int(ufactor)),
                  lambda: metis_placement(problem, devices, seed, ufactor))


@register("metis", "METIS k-way partition (compute as vertex weights, bytes as edge weights), one part per GPU",
          "partitioning", MetisConfig, paper="Karypis and Kumar 1998; Post baseline (Gao et al. 2018, section 4)", version=1)
def metis(problem, seed: int, ev: Evaluator, cfg: MetisConfig):
    p = shared_metis(problem, gpu_devices(problem), seed, cfg.ufactor)
    return _finish("metis", problem, ev, p)


@register("scotch", "Scotch static mapping onto every device (compute and link capacities)", "partitioning",
          ScotchConfig, paper="Pellegrini and Roman 1996; Hierarchical Planner baseline (Mirhoseini et al. 2018)",
          available=scotch_available, version=1)
def scotch(problem, seed: int, ev: Evaluator, cfg: ScotchConfig):
    p = scotch_placement(problem, list(range(problem.n_devices)), seed, ev.sim_params, cfg.balance)
    return _finish("scotch", problem, ev, p)


@register("mincut", "Scotch static mapping onto the GPUs only", "partitioning", MinCutConfig,
          paper="Hierarchical Planner baseline (Mirhoseini et al. 2018, section 3)", available=scotch_available, version=1)
def mincut(problem, seed: int, ev: Evaluator, cfg: MinCutConfig):
    p = scotch_placement(problem, gpu_devices(problem), seed, ev.sim_params, cfg.balance)
    return _finish("mincut", problem, ev, p)
