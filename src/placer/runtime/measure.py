"""Run a placement for real and measure it: :func:`run_placement` (``placer run``).

The graph's recipe (``meta['recipe']``, see :mod:`placer.frontends.recipe`) rebuilds the model with
seeded random weights; it is traced again (the op names must match the file's, else the graph
changed since capture) and run as a :class:`~placer.runtime.executor.PlacedStep` that issues the
ops in the order of the simulator's schedule (their predicted start times): ``warmup`` untimed
steps, then ``steps`` timed ones. A step is timed end to end on the host clock: every GPU used is
synchronised before it starts, and it ends when every thread finished and every GPU used is
synchronised again. The memory per device is counted along the issue order from the traced shapes
(:meth:`placer.runtime.plan.StepPlan.counted_peak_bytes`).
Beside the measurement: the simulator's prediction for the same placement on the graph's cluster.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from placer.errors import InputError


@dataclass
class RunReport:
    graph: str
    cluster: str
    devices: list[str]  # cluster device names
    real: list[str]  # the real device of each
    ops_per_device: list[int]
    step_us: list[float]  # every timed step
    clock: str
    peak_bytes: list[float]  # per cluster device, counted live tensor bytes
    cuda_peak_bytes: dict  # real cuda device -> torch.cuda.max_memory_allocated
    transfers: int
    transfer_bytes: float
    predicted_us: float
    predicted_peak_bytes: list[float]
    loss: float
    rebuild_s: float
    extra: dict = field(default_factory=dict)

    @property
    def median_us(self) -> float:
        return float(statistics.median(self.step_us))

    def summary(self) -> dict:
        s = self.step_us
        q = np.percentile(s, [25, 75]) if len(s) > 1 else [s[0], s[0]]
        return {"graph": self.graph, "cluster": self.cluster, "steps": len(s), "clock": self.clock,
                "measured_median_us": round(self.median_us, 1), "measured_min_us": round(min(s), 1),
                "measured_max_us": round(max(s), 1), "measured_iqr_us": round(float(q[1] - q[0]), 1),
                "measured_std_us": round(statistics.pstdev(s), 1) if len(s) > 1 else 0.0,
                "predicted_us": round(self.predicted_us, 1),
                "predicted_over_measured": round(self.predicted_us / self.median_us, 3) if self.median_us > 0 else None,
                "loss": self.loss, "transfers": self.transfers, "transfer_bytes": self.transfer_bytes,
                "rebuild_s": round(self.rebuild_s, 2),
                "devices": [{"name": n, "real": r, "ops": o, "peak_bytes": p, "predicted_peak_bytes": pp,
                             **({"cuda_peak_bytes": self.cuda_peak_bytes[r]} if r in self.cuda_peak_bytes else {})}
                            for n, r, o, p, pp in zip(self.devices, self.real, self.ops_per_device, self.peak_bytes,
                                                      self.predicted_peak_bytes)],
                **self.extra}


def rebuild(graph, where: str = "graph"):
    """``(capture, module, inputs)``: the graph's model rebuilt from its recipe (real weights on the
    CPU) and traced again; one-line error when the graph has no executable program."""
    from placer.build import build, recipe_of

    recipe = recipe_of(graph)
    if recipe is None:
        src = graph.meta.get("source", "unknown")
        raise InputError(where, f"graph '{graph.name}' (source {src})", "has no executable program to run",
                         "run graphs captured from PyTorch (a factory, the zoo, a Hugging Face model)", kind="not-executable")
    from placer.frontends.torch import trace_training_step
    from placer.runtime.trust import check_code, check_recipe

    # the Python API trusts the caller's own code, as `placer run --allow-any-code` does, but never
    # runs code in Python's installation nor a function its file does not define (placer.runtime.trust)
    check_recipe(recipe, where)
    check_code(recipe, where, [], any_code=True)
    module, inputs, loss_fn = build(recipe, "cpu")
    # the real weights, kept before tracing: functional_call over tied weights can leave the traced
    # (fake) tensors in the module afterwards
    real = ([p.detach().clone() for _, p in module.named_parameters()],
            [b.detach().clone() for _, b in module.named_buffers()])
    cap = trace_training_step(module, inputs, loss_fn=loss_fn, optimizer=recipe.get("optimizer", "sgd-momentum"),
                              name=graph.name, cost_keys=())
    if list(cap.graph.op_names) != list(graph.op_names):
        raise InputError(where, f"graph '{graph.name}'", f"rebuilt with {cap.graph.n_ops} ops, the file has {graph.n_ops} "
                         "(or their names differ)", "capture the model again with this torch / model code")
    cap.info["real_state"] = real
    return cap, module, inputs


def initial_state(cap, module, inputs):
    """Real parameters, buffers, zero optimizer state and the inputs, flat in the program's order."""
    import torch

    if "real_state" in cap.info:
        params, buffers = [p.clone() for p in cap.info["real_state"][0]], [b.clone() for b in cap.info["real_state"][1]]
    else:
        params = [p.detach().clone() for _, p in module.named_parameters()]
        buffers = [b.detach().clone() for _, b in module.named_buffers()]
    state = [[torch.zeros_like(p) for _ in range(cap.info["slots"])] for p in params]
    xs = [x for x in inputs if isinstance(x, torch.Tensor)]
    return params, buffers, state, xs


def _sync(real):
    import torch

    for r in sorted(set(real)):
        if r.startswith("cuda"):
            torch.cuda.synchronize(r)


def run_placement(graph, cluster, placement, real: list[str], *, steps: int = 10, warmup: int = 2,
                  threads: int | None = None, sim_params=None, rebuilt=None, keep_outputs: bool = False,
                  annotate: bool = False) -> RunReport:
    """Execute ``placement`` of ``graph`` on the real devices ``real`` (one per cluster device) and
    measure it; see the module docstring. ``annotate``: every node in a ``record_function`` range
    (for :mod:`placer.cost.gpu_profile`; it costs host time)."""
    import torch

    from placer.problem import Problem
    from placer.runtime.executor import PlacedStep
    from placer.sim import simulate

    if steps < 1 or warmup < 1:
        raise InputError("run", f"steps={steps}, warmup={warmup}", "need at least one of each", "use steps=1, warmup=1 or more")
    t0 = time.perf_counter()
    cap, module, inputs = rebuilt or rebuild(graph)
    rebuild_s = time.perf_counter() - t0
    P = Problem(graph, cluster)
    placement = P.validate_placement(np.asarray(placement), "placement")
    sim = simulate(P, placement, sim_params)
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    cuda_devs = sorted({r for r in real if r.startswith("cuda")})
    try:
        step = PlacedStep(cap, placement, real, priority=sim.start_us, annotate=annotate)
        params, buffers, state, xs = initial_state(cap, module, inputs)
        flat = step.place_state(params, buffers, state, xs)
        n_p, n_b = step.n_p, step.n_b
        for r in cuda_devs:
            torch.cuda.reset_peak_memory_stats(r)
        first = None
        peak = None
        transfers, tbytes = 0, 0.0
        for w in range(warmup):
            out = step.run(flat)
            if w == 0:
                first, peak, transfers, tbytes = out, out.peak_bytes, out.transfers, out.transfer_bytes
                loss = float(out.loss.detach().cpu())
            flat = [*out.params, *flat[n_p:n_p + n_b], *[s for per in out.state for s in per], *flat[len(flat) - step.n_in:]]
        _sync(real)
        times = []
        for _ in range(steps):
            _sync(real)
            s0 = time.perf_counter_ns()
            out = step.run(flat)
            _sync(real)
            times.append((time.perf_counter_ns() - s0) / 1e3)
            flat = [*out.params, *flat[n_p:n_p + n_b], *[s for per in out.state for s in per], *flat[len(flat) - step.n_in:]]
        cuda_peak = {r: float(torch.cuda.max_memory_allocated(r)) for r in cuda_devs}
    finally:
        torch.set_num_threads(old_threads)
    counts = np.bincount(placement, minlength=cluster.n_devices)
    rep = RunReport(graph.name, cluster.name, list(cluster.device_names), list(real), counts.tolist(), times,
                    "wall, end to end" + (" (GPUs synchronised)" if cuda_devs else ""), [float(x) for x in peak], cuda_peak, transfers, tbytes,
                    float(sim.makespan_us), [float(x) for x in np.asarray(sim.peak_memory_bytes)], loss, rebuild_s)
    rep.extra["lanes"] = step.n_lanes
    rep.extra["stretches"] = sum(len(s) for s in step.plan.lanes)
    if keep_outputs:
        rep.extra["_first_step"] = first
    return rep
