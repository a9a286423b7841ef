"""Record real training steps of a captured model on one device and cost its ops from them
(:mod:`placer.cost.gpu_profile`): the GPU profile of ``benchmarks/fidelity.py gpu``.

:func:`record_step` runs the captured step with every op on ``device`` as
:class:`~placer.runtime.executor.PlacedStep` does for a single-device placement: first ``timed``
plain steps (their wall times, and the host's issue time of each: from the step's start until the
calling thread has queued its last kernel), then ``steps`` steps (after one warm-up step of the
profiler, not recorded) with every fx node in a ``record_function`` range under ``torch.profiler`` (CPU and, on a GPU, CUDA activities). The trace
gives each node its kernels and its share of the issue time (:func:`placer.cost.gpu_profile.attribute`),
scaled to the unprofiled issue time, and the chain costs of :func:`placer.cost.gpu_profile.chain_costs`
per op. On the CPU the same run gives each node its host time, which is its compute.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from placer.cost.gpu_profile import NodeProfile, attribute, chain_costs, per_op, scale_issue


@dataclass
class StepProfile:
    device: str
    nodes: NodeProfile
    issue_us: np.ndarray  # per fx node, scaled to the unprofiled issue time
    order: list  # the node indices in issue order
    op_cost_us: np.ndarray  # per op of the graph: chain costs summed per op
    step_us: list  # unprofiled steps (wall, synchronised)
    issue_step_us: float  # median host issue time of an unprofiled step
    wall_s: float

    @property
    def median_us(self) -> float:
        return float(statistics.median(self.step_us))

    def summary(self) -> dict:
        return {"device": self.device, "step_us": round(self.median_us, 1), "issue_us": round(self.issue_step_us, 1),
                "kernel_us": round(float(self.nodes.kernel_us.sum()), 1),
                "predicted_one_device_us": round(float(self.op_cost_us.sum()), 1),
                "profiled_steps": self.nodes.steps, "wall_s": round(self.wall_s, 2)}


def _sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def record_step(capture, module, inputs, device: str = "cuda:0", *, steps: int = 2, warmup: int = 3, timed: int = 10,
                trace_path: str | None = None) -> StepProfile:
    """Profile the captured step on ``device`` (module docstring). ``trace_path`` keeps the Chrome trace."""
    from torch.profiler import ProfilerActivity, profile, schedule

    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state

    t_start = time.perf_counter()
    z = np.zeros(capture.graph.n_ops, dtype=np.int64)
    params, buffers, state, xs = initial_state(capture, module, inputs)
    plain = PlacedStep(capture, z, [device])
    flat = plain.place_state(params, buffers, state, xs)
    n_p, n_b = plain.n_p, plain.n_b

    def advance(step, flat):
        out = step.run(flat)
        return [*out.params, *flat[n_p:n_p + n_b], *[s for per in out.state for s in per], *flat[len(flat) - step.n_in:]]

    for _ in range(warmup):
        flat = advance(plain, flat)
    times, issues = [], []
    for _ in range(timed):
        _sync(device)
        t0 = time.perf_counter_ns()
        flat = advance(plain, flat)
        _sync(device)
        times.append((time.perf_counter_ns() - t0) / 1e3)
        issues.append(plain.last_issue_us)
    annotated = PlacedStep(capture, z, [device], annotate=True)
    flat = advance(annotated, flat)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if str(device).startswith("cuda") else [])
    with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
        for _ in range(steps + 1):  # the first under the profiler is its warm-up, not recorded
            flat = advance(annotated, flat)
            _sync(device)
            prof.step()
    own = trace_path is None
    path = trace_path or tempfile.mkstemp(suffix=".json", prefix="placer-trace-")[1]
    try:
        prof.export_chrome_trace(path)
        nodes = attribute(path, len(annotated.plan.nodes))
    finally:
        if own and os.path.exists(path):
            os.unlink(path)
    issue_step = float(statistics.median(issues))
    issue = scale_issue(nodes.issue_us, issue_step)
    order = annotated.plan.order
    index = {n: i for i, n in enumerate(annotated.plan.nodes)}
    node_op = {index[n]: op for n, op in capture.node_op.items() if n.op == "call_function"}
    cost = per_op(chain_costs(issue, nodes.kernel_us, order), node_op, capture.graph.n_ops)
    return StepProfile(str(device), nodes, issue, list(order), cost, times, issue_step, time.perf_counter() - t_start)
