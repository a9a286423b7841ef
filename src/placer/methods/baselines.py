"""Trivial placements every paper reports: one device, random, round-robin."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, NoConfig, NotApplicable, register
from placer.methods.devices import allowed_placement, only_on


def colocate(problem, placement: np.ndarray) -> np.ndarray:
    """Every colocation group on one device its ops can all run on, the device of its first op where
    they can (:func:`placer.methods.devices.allowed_placement`)."""
    return allowed_placement(problem, placement)


def single_device_placement(problem, d: int) -> np.ndarray | None:
    """Every op on device d, or None when some op cannot run there."""
    if not np.isfinite(problem.compute_us[:, d]).all():
        return None
    return np.full(problem.n_ops, d, dtype=np.int64)


def with_fallback(problem, d: int) -> np.ndarray | None:
    """Every op on device d except those it cannot run, which go to the fastest device that can (as
    TensorFlow keeps CPU-only kernels on the host); colocation groups follow their first op. None
    when a colocation group would be split across devices that way."""
    comp = problem.compute_us
    p = np.full(problem.n_ops, d, dtype=np.int64)
    bad = ~np.isfinite(comp[:, d])
    p[bad] = np.argmin(comp[bad], axis=1)
    for members in problem.graph.colocation_groups():
        ok = np.isfinite(comp[members]).all(axis=0)
        if not ok.any():
            return None
        p[members] = d if ok[d] else int(np.argmin(np.where(ok, comp[members].sum(axis=0), np.inf)))
    return p


@register("single-gpu", "every op on the best single GPU (ops it cannot run on the fastest device that can)",
          "trivial", version=1)
def single_gpu(problem, seed: int, ev: Evaluator, cfg: NoConfig):
    gpus = problem.cluster.gpus() or list(range(problem.n_devices))
    best = None
    for d in gpus:
        p = with_fallback(problem, d)
        if p is None:
            continue
        r = ev.simulate(p)
        if best is None or r.objective_us < best[1].objective_us:
            best = (p, r)
    if best is None:
        raise NotApplicable("single-gpu", "no GPU can run the model (with CPU fallback for the ops it cannot run)")
    return ev.result("single-gpu", best[0], notes=["OOM: the model does not fit one GPU"] if best[1].oom else [])


@register("cpu-only", "every op on the CPU", "trivial", version=1)
def cpu_only(problem, seed: int, ev: Evaluator, cfg: NoConfig):
    for d in problem.cluster.cpus():
        p = single_device_placement(problem, d)
        if p is not None:
            ev.simulate(p)
            return ev.result("cpu-only", p)
    cpus = problem.cluster.cpus()
    if not cpus:
        raise NotApplicable("cpu-only", "the cluster has no CPU")
    op = int(np.flatnonzero(~problem.allowed[:, cpus].all(axis=1))[0])
    raise NotApplicable("cpu-only", f"no CPU of the cluster can run every op: {only_on(problem, op)}")


@dataclass(frozen=True)
class RandomConfig(MethodConfig):
    """Best of k uniformly random placements."""

    placements: int = 100  # k: random placements drawn (Budget.placements overrides)


@register("random", "best of k uniformly random placements (k = budget, default 100)", "trivial", RandomConfig, version=1)
def random_placement(problem, seed: int, ev: Evaluator, cfg: RandomConfig):
    rng = np.random.default_rng(seed)
    ok = problem.allowed
    while not ev.out_of_budget():
        u = rng.random(ok.shape) * ok
        ev.evaluate(colocate(problem, u.argmax(axis=1)))
    return ev.result("random")


@dataclass(frozen=True)
class RoundRobinConfig(MethodConfig):
    """Ops dealt to devices in topological order."""

    gpus_only: bool = True  # deal to the GPUs only (ops no GPU can run go to a device that can)


@register("round-robin", "ops dealt to devices in topological order", "trivial", RoundRobinConfig, version=1)
def round_robin(problem, seed: int, ev: Evaluator, cfg: RoundRobinConfig):
    devs = np.array(problem.cluster.gpus() if cfg.gpus_only and problem.cluster.gpus() else range(problem.n_devices))
    ok = problem.allowed
    p = np.empty(problem.n_ops, dtype=np.int64)
    for i in range(problem.n_ops):
        cand = [d for d in np.roll(devs, -i) if ok[i, d]] or list(np.flatnonzero(ok[i]))
        p[i] = cand[0]
    p = colocate(problem, p)
    ev.simulate(p)
    return ev.result("round-robin", p)
