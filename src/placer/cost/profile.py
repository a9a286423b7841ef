"""Measured per-op profiles: run every op of a captured step on a real device and time it.

As Placeto's simulator does (section 4, "Simulator": profile each op on the available devices),
each aten op of a :class:`~placer.frontends.torch.Capture` is executed alone on freshly allocated
inputs of its recorded shapes, dtypes and strides: ``warmup`` untimed calls, then ``repeats``
timed calls; the median is the op's cost and the standard deviation is kept beside it. Ops with
identical signatures (same aten op, shapes, strides, dtypes and constant arguments; e.g. every time
step of an unrolled LSTM) are measured once. Integer inputs are zeros (valid indices for
embeddings, losses and gathers); floating inputs are standard normal.

On CPU a call is timed with ``perf_counter`` (wall) or, with ``clock="thread"``, the calling
thread's CPU time, which on a shared machine leaves out the time slices other processes got (a
long training step is preempted many times, a short op call rarely); on CUDA with events around
the call after a synchronize. :func:`with_measured_costs` stores the medians as ``compute_us[key]`` and the spread
in ``graph.meta['profiles'][key]``, so a graph saved after profiling is never profiled again.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class OpProfile:
    """Per-op measured times (us) of one graph on one device; NaN where an op could not be run."""

    device: str
    median_us: np.ndarray
    std_us: np.ndarray
    warmup: int
    repeats: int
    threads: int
    unique_ops: int
    failed: int
    wall_s: float
    clock: str = "wall"

    def summary(self) -> dict:
        ok = np.isfinite(self.median_us)
        return {"device": self.device, "clock": self.clock, "warmup": self.warmup, "repeats": self.repeats,
                "threads": self.threads,
                "unique_ops": self.unique_ops, "failed": self.failed, "wall_s": round(self.wall_s, 2),
                "sum_median_us": float(self.median_us[ok].sum())}


def _real_value(v, device, gen):
    import torch

    if not isinstance(v, torch.Tensor):
        return v
    storage = 1 + sum((s - 1) * st for s, st in zip(v.shape, v.stride())) if v.numel() else 0
    base = torch.empty(max(storage, 1), dtype=v.dtype, device="cpu")
    if v.dtype.is_floating_point:
        base.normal_(generator=gen)
    elif v.dtype == torch.bool:
        base.zero_()
    else:
        base.zero_()
    t = base.as_strided(tuple(v.shape), tuple(v.stride()))
    return t.to(device) if str(device) != "cpu" else t


def _signature(node) -> tuple:
    import torch
    import torch.fx as fx

    def sig(a):
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                return ("T", tuple(v.shape), tuple(v.stride()), str(v.dtype))
            return ("V", repr(v))
        if isinstance(a, (list, tuple)):
            return tuple(sig(x) for x in a)
        return repr(a)

    return (str(node.target), sig(node.args), tuple(sorted((k, sig(v)) for k, v in node.kwargs.items())))


def _args_for(node, device, gen):
    import torch
    import torch.fx as fx
    from torch.utils._pytree import tree_map

    def conv(a):
        if isinstance(a, fx.Node):
            return _real_value(a.meta.get("val"), device, gen)
        if isinstance(a, torch.device):
            return torch.device(device)
        return a

    return tree_map(conv, node.args), tree_map(conv, node.kwargs)


def _clock(clock: str):
    """``wall``: elapsed time; ``thread``: CPU time of the calling thread (with one torch thread
    every CPU kernel runs there), which leaves out time the OS gave to other processes."""
    if clock == "wall":
        return time.perf_counter_ns
    if clock == "thread":
        return time.thread_time_ns
    from placer.errors import InputError

    raise InputError("profile", f"clock '{clock}'", "is not a clock", "use 'wall' or 'thread'")


def _time_call(fn, args, kwargs, warmup, repeats, cuda, clock="wall"):
    import torch

    now = _clock(clock)
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    if cuda:
        torch.cuda.synchronize()
        for _ in range(repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*args, **kwargs)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
    else:
        for _ in range(repeats):
            t0 = now()
            fn(*args, **kwargs)
            times.append((now() - t0) / 1e3)
    return statistics.median(times), (statistics.pstdev(times) if len(times) > 1 else 0.0)


def profile_capture(capture, device: str = "cpu", warmup: int = 2, repeats: int = 5, threads: int | None = 1,
                    seed: int = 0, clock: str = "wall") -> OpProfile:
    """Measure every op of ``capture`` on ``device`` (``cpu`` or ``cuda[:i]``). ``threads`` fixes
    torch's intra-op threads for the run (restored afterwards); ``None`` keeps the current setting.
    ``clock="thread"`` times CPU ops by the thread's CPU time (see :func:`_clock`; one thread)."""
    import torch

    _clock(clock)
    cuda = str(device).startswith("cuda")
    if cuda and not torch.cuda.is_available():
        from placer.errors import InputError

        raise InputError("profile", f"device '{device}'", "is not available on this machine", "profile on cpu")
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(seed)
    n = len(capture.op_nodes)
    med = np.zeros(n)
    std = np.zeros(n)
    seen: dict[tuple, tuple[float, float]] = {}
    failed = 0
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            for i, node in enumerate(capture.op_nodes):
                if node is None:
                    continue
                key = _signature(node)
                if key not in seen:
                    try:
                        args, kwargs = _args_for(node, device, gen)
                        seen[key] = _time_call(node.target, args, kwargs, warmup, repeats, cuda, clock)
                    except Exception:  # an op that cannot run alone on synthetic inputs
                        seen[key] = (float("nan"), float("nan"))
                        failed += 1
                med[i], std[i] = seen[key]
    finally:
        torch.set_num_threads(old_threads)
    return OpProfile(str(device), med, std, warmup, repeats, threads or old_threads,
                     len(seen), failed, time.perf_counter() - t0, clock)


# Per-node overhead of executing a captured step node by node (:mod:`placer.runtime`) that timing
# each op alone misses: the Python dispatch of every fx node (the op's own and the views folded into
# it), argument handling, the hand-over between the executor's threads, freeing, the allocator. It is
# charged per executed fx node (:func:`executed_nodes`): on a CPU added to the op (the worker thread
# runs the dispatch and the op in turn); on a GPU the worker thread issues kernels asynchronously, so
# an op costs ``max(kernel, nodes * overhead)``: the GPU waits for its host thread only when kernels
# are shorter than their issue (the steady state of a host feeding a stream). Fitted by
# ``benchmarks/fidelity.py gpu --calibrate`` on the single-device runs (CPU: least squares of measured
# minus summed medians over executed nodes; GPU: the value whose simulated single-GPU steps match the
# measured ones). ``cuda`` was fitted 2026-11-23 on an H100 host (16 CPU threads; ResNet-50, BERT,
# NMT) with the serial executor and per op (not per node): stale for the threaded executor, which
# ``fidelity.py gpu --calibrate`` re-fits on every run. ``cpu`` (was 113, from that same H100-host
# fit) is the per-node fit of ``fidelity.py cpu`` on full-size zoo models, one torch thread each,
# threaded executor (results/fidelity/cpu_full.json, 2026-11-23, shared 2-core AMD EPYC): 285 us over
# the 8 models whose profile and run had the same share of their core; fitted on the other 7 the
# held-out values span 253-379 us and predict the held-out step with MAPE 7.0% (113 us: 7.2%;
# none: 8.5%; Spearman 1.0 for all three). The gain is within the noise; the value changed because it
# is measured per executed node with the executor that runs the steps.
# Issue 50 replaced that executor (now fx-generated stretches, no per-node interpreter loop or thread
# hand-over) and costs GPUs from real steps instead (placer.cost.gpu_profile: kernels and issue time
# per node, chain costs); ``cuda`` is kept for graphs costed per op, not re-fitted since. ``cpu`` was
# re-fitted for that executor by ``fidelity.py here`` (results/fidelity/here_amd-epyc/, 2026-11-28, the
# same 2-core EPYC idle, one torch thread, four models of 507-2,949 executed nodes): 18.2 us per node,
# held out 10.6-36.5 us (the op-by-op sums alone are 0.59-0.97 of the measured steps; 285 us predicted
# 1.26-5.48x the step). A real-step profile (``placer capture --profile``) needs no such term.
OP_OVERHEAD_US: dict[str, float] = {"cpu": 18.2, "cuda": 11.2}


def fit_node_overhead(base_us, nodes, measured_us) -> float:
    """The per-node overhead ``o >= 0`` for which ``base + nodes * o`` best matches ``measured``
    in relative terms (least squares of ``(base + nodes * o - measured) / measured``):
    ``o = sum(n/m * (m - b)/m) / sum((n/m)^2)``, clipped at 0. ``base_us``: per run, the predicted
    step without the overhead; ``nodes``: per run, the predicted step's growth per us of overhead
    (on one CPU, the executed fx nodes); ``measured_us``: the measured step medians."""
    return float(fit_overheads(base_us, np.asarray(nodes, dtype=float)[:, None], measured_us)[0])


def fit_overheads(base_us, counts, measured_us) -> np.ndarray:
    """Non-negative per-unit overheads ``o`` (one per column of ``counts``, runs x terms: executed
    nodes, GiB allocated, ...) for which ``base + counts @ o`` best matches ``measured`` in relative
    terms: non-negative least squares of ``(base + counts @ o - measured) / measured``. One column:
    :func:`fit_node_overhead`'s closed form."""
    from scipy.optimize import nnls

    b, m = np.asarray(base_us, dtype=float), np.asarray(measured_us, dtype=float)
    X = np.asarray(counts, dtype=float)
    if b.ndim != 1 or not len(b) or m.shape != b.shape or X.ndim != 2 or X.shape[0] != len(b):
        raise ValueError("fit_overheads needs base and measured of one length n >= 1 and counts of shape (n, k)")
    A, y = X / m[:, None], (m - b) / m
    if not (A != 0).any():
        return np.zeros(X.shape[1])
    if X.shape[1] == 1:  # the closed form (exact, no solver tolerance)
        w = A[:, 0]
        return np.array([max(0.0, float((w * y).sum() / (w * w).sum()))])
    return nnls(A, y)[0]


def leave_one_out_overhead(base_us, nodes, measured_us) -> list[tuple]:
    """Per run ``i``: ``(o_i, predicted_i)``, the overhead fitted (:func:`fit_node_overhead`, or
    :func:`fit_overheads` when ``nodes`` is a runs x terms array; ``o_i`` is then an array) on all
    the other runs and the prediction ``base_i + nodes_i * o_i`` it gives for the held-out run, the
    honest check of a calibrated overhead (it never sees the run it predicts)."""
    b, m = np.asarray(base_us, dtype=float), np.asarray(measured_us, dtype=float)
    X = np.asarray(nodes, dtype=float)
    one = X.ndim == 1
    X = X[:, None] if one else X
    if len(b) < 2:
        raise ValueError("leave_one_out_overhead needs at least two runs")
    out = []
    for i in range(len(b)):
        keep = np.arange(len(b)) != i
        o = fit_overheads(b[keep], X[keep], m[keep])
        out.append((float(o[0]) if one else o, float(b[i] + X[i] @ o)))
    return out


def op_overhead_us(device: str) -> float:
    """The calibrated per-node overhead for a device (``cpu``, ``cuda:k``)."""
    return OP_OVERHEAD_US["cuda" if str(device).startswith("cuda") else "cpu"]


def executed_nodes(capture) -> np.ndarray:
    """Per op of ``capture.graph``: how many fx nodes the runtime executes for it (the op's own call
    or constant, plus every view folded into it); 0 for parameters, buffers and inputs."""
    out = np.zeros(capture.graph.n_ops, dtype=np.int64)
    for node, op in capture.node_op.items():
        if node.op in ("call_function", "get_attr"):
            out[op] += 1
    return out


def with_measured_costs(graph, profile: OpProfile, key: str = "cpu", overhead_us: float | str = 0.0,
                        nodes: np.ndarray | None = None):
    """A copy of ``graph`` whose ``compute_us[key]`` is the measured median per op (ops that could
    not be measured keep the graph's roofline estimate for that key), with the profile's spread
    and settings in ``meta['profiles'][key]``.

    ``overhead_us`` (a number, or ``"calibrated"`` for :data:`OP_OVERHEAD_US` of the profile's device)
    is the per-node cost of running the step node by node that the isolated timings miss, charged
    ``nodes[i]`` times to op ``i`` (:func:`executed_nodes`; by default once per executed op). On a
    CPU it adds to the op (the host runs the op and its overhead in turn); on a GPU the host issues
    kernels asynchronously, so an op costs ``max(kernel, nodes * overhead)``: the GPU waits for the
    host only when kernels are shorter than their issue."""
    from placer.cost.roofline import roofline_costs

    med = profile.median_us.copy()
    bad = ~np.isfinite(med)
    if bad.any():
        est = graph.compute_us[key] if key in graph.compute_us else roofline_costs(graph, key)
        med[bad] = est[bad]
    if overhead_us == "calibrated":
        overhead_us = op_overhead_us(profile.device)
    overhead_us = float(overhead_us)
    if overhead_us:
        if nodes is None:
            nodes = np.asarray([t not in ("parameter", "buffer", "input", "constant") for t in graph.op_types], dtype=float)
        host = overhead_us * np.asarray(nodes, dtype=float)
        ran = host > 0
        if str(profile.device).startswith("cuda"):
            med[ran] = np.maximum(med[ran], host[ran])
        else:
            med[ran] = med[ran] + host[ran]
    costs = dict(graph.compute_us)
    costs[key] = np.round(med, 3)
    meta = dict(graph.meta)
    profiles = dict(meta.get("profiles") or {})
    profiles[key] = {**profile.summary(), "overhead_us": overhead_us, "std_us": [round(float(x), 3) if np.isfinite(x) else None
                                                     for x in profile.std_us],
                     "estimated_ops": int(bad.sum())}
    meta["profiles"] = profiles
    return graph.replace(compute_us=costs, meta=meta)


def measure_training_step_us(module, inputs, optimizer: str = "sgd-momentum", warmup: int = 2, repeats: int = 5,
                             threads: int | None = 1, lr: float = 0.1, clock: str = "wall") -> tuple[float, float]:
    """The real wall time (median, std in us) of one eager training step of ``module`` on CPU:
    forward, ``backward()``, ``optimizer.step()`` (``torch.optim.SGD`` with momentum 0.9 or
    ``Adam``), ``zero_grad``. The module computes its own loss (zoo models do). ``clock`` as in
    :func:`profile_capture` (``thread`` needs ``threads=1``: backward runs in the calling thread)."""
    import torch

    now = _clock(clock)
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    if optimizer == "adam":
        opt = torch.optim.Adam(module.parameters(), lr=lr, foreach=False)
    else:
        opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=0.9 if optimizer == "sgd-momentum" else 0.0,
                              foreach=False)

    def step():
        loss = module(*inputs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    try:
        times = []
        for _ in range(warmup):
            step()
        for _ in range(repeats):
            t0 = now()
            step()
            times.append((now() - t0) / 1e3)
    finally:
        torch.set_num_threads(old)
    return statistics.median(times), statistics.pstdev(times)
