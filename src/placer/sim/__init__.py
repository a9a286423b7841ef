"""The execution simulator: Problem x placement -> SimResult (Placeto appendix A.5).

Semantics
---------
* Event-driven. Per device, a FIFO of runnable ops in the order they became runnable (ties: the
  order the releasing events ran, i.e. by producer then consumer priority, see below).
  An op is runnable on its device once every parent finished and the parent's tensor arrived there.
  One op at a time per device; communication overlaps compute.
* After an op with non-zero cost the device idles ``op_gap_us``; ops with zero cost add no gap.
* Transfer time of a tensor of ``b`` bytes on link (s, x) = ``latency[s, x] + b / bandwidth[s, x]``.
  ``comm_model="placeto"``: one outgoing bus per device, a FIFO of output tensors; one transfer per
  tensor (the largest edge to a remote consumer) that reaches every remote consumer device at once,
  taking the slowest of those links; the bus then stays busy ``bus_gap_us`` (arrival not delayed).
  ``comm_model="p2p"``: one transfer per (tensor, destination device) carrying the largest edge to a
  consumer there; a device sends one and receives one transfer at a time (so each directed link is
  serialised too); a free sender starts the oldest queued transfer whose receiver is free; a
  receiver becoming free wakes idle senders; ``bus_gap_us`` follows every send on the sender.
  ``comm_model="giph"`` (the GiPH authors' evaluator, ``env/latency.py``; oracle
  :mod:`placer.sim.reference_giph`): one transfer per edge with that edge's bytes, sent when its
  producer ends, never waiting (no bus, link or endpoint is a resource).
  ``comm_model="link"``: one transfer per (tensor, destination device) as in ``p2p``, FIFO on its
  link's resource (each directed link its own, or a group of the cluster's ``shared_links``), which
  stays busy ``bus_gap_us`` after each. A cluster names its model in ``meta["comm_model"]`` (its
  file's ``comm_model``): the one used when no SimParams is given and by ``SimParams.preset("default",
  cluster)``. docs/simulator.md describes the four with their sources.
* Simultaneous events run in the order (time, kind, priority): op done / tensor arrived, then
  senders waking, then devices waking; within a kind by the producer op's priority (then
  destination device), or by device index. An op's priority is its topological index
  (``SimParams.tie_break="index"``, the default: placer's own deterministic order) or the rank of
  its name in string order (``"name"``, what ``SimParams.placeto()`` uses). The makespan is the
  time of the last event: last op end (+ its op gap) or last arrival (+ bus gap). With
  ``SimParams.placeto()`` this is the published reference simulator
  (aravic/generalizable-device-placement, ``sim/tf_placement_sim``) on any op names: it returns the
  last event time of a heap ordered by (time, event name, (producer name, consumer name)), and its
  per-edge dependency events, bus queue keyed by the producer's end time, and insertion-counter
  FIFOs give the same schedule. Its zero-cost rule skips the op gap only for the integer cost 0;
  placer treats every exact 0 as that integer (see ``SimParams.placeto``). Deliberate differences:
  devices tie by index where it uses device names (equal for names like /GPU:0../GPU:9); ops with
  no parents start in index order (it uses its graph_def order); an op has one output buffer (the
  reference sends one transfer per output slot; here one per op, sized by its largest remote edge);
  links may have latency and per-pair bandwidth.
* Every op runs exactly once, or a RuntimeError names an op that never ran. Nothing survives
  between calls except caches of the Problem's arrays.
* Memory (see :mod:`placer.sim.memory`): parameters for the whole step, outputs from start to the
  last local use / last transfer, received copies from arrival to the last local consumer, temp
  while running; peak per device, the ops live at the peak, OOM when a peak exceeds capacity.
  Objective ``R = r + c * ReLU(max_d(m_d - M_d))`` (Placeto appendix A.7; c =
  ``memory_penalty_us_per_byte``, 2 s per GB (1e9 bytes) by default) plus ``oom_penalty_us`` when out of memory.

Entry points
------------
``simulate`` (full SimResult), ``evaluate`` (objective only, fastest single call),
``evaluate_many`` (a (k, n) batch, ``n_jobs`` threads), ``Engine`` (one (Problem, SimParams) with
a kept workspace: what a search that moves a few ops at a time calls), ``simulate_reference`` (pure
Python, for tests). ``memory_first``: the order in which every best placement is kept.
"""

from __future__ import annotations

import numpy as np

from placer.sim.fast import BatchResult, Engine, engine, evaluate, evaluate_many
from placer.sim.reference import simulate_reference
from placer.sim.result import SimParams, SimResult, memory_first

# The simulator's behaviour as a version (the bench cache keys on it): bumped when the event model
# changes what it computes on purpose. ``placer.sim.reference`` is its specification; the compiled
# kernel equals it bit for bit (tests/test_sim_properties.py), so a faster kernel keeps the version.
VERSION = 1

__all__ = ["VERSION", "SimParams", "SimResult", "simulate", "objective", "evaluate", "evaluate_many", "BatchResult",
           "Engine", "memory_first", "engine", "simulate_reference", "warm_up"]


def objective(makespan_us: float, peak: np.ndarray, capacity: np.ndarray, params: SimParams) -> tuple[float, bool]:
    """R = r + c * ReLU(m - M) with m - M the largest overshoot of any device (Placeto appendix),
    plus ``oom_penalty_us`` when a device overflows. Returns (R, oom)."""
    over = float(np.max(np.asarray(peak) - np.asarray(capacity))) if len(peak) else 0.0
    oom = over > 0
    r = makespan_us + params.memory_penalty_us_per_byte * max(over, 0.0)
    if oom:
        r += params.oom_penalty_us
    return r, oom


def simulate(problem, placement, params: SimParams | None = None) -> SimResult:
    """Simulate one training step of ``problem.graph`` placed by ``placement`` (an int array or a
    Placement) on ``problem.cluster``. Raises InputError for an invalid placement."""
    return engine(problem, params).result(placement)


def warm_up(problem, params: SimParams | None = None) -> float:
    """Compile the simulator's kernels (numba), or load them from its cache, by simulating one
    placement alone and in a batch (each op on the device that runs it fastest); return the
    seconds it took, so that callers can keep them out of any method's time."""
    import time

    t0 = time.perf_counter()
    p = np.tile(np.argmin(problem.compute_us, axis=1).astype(np.int64), (2, 1))  # each op where it can run
    simulate(problem, p[0], params)
    evaluate_many(problem, p, params)
    return time.perf_counter() - t0
