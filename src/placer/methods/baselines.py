"""Trivial placements every paper reports: one device, random, round-robin."""

from __future__ import annotations

import numpy as np

from placer.methods.base import Budget, Evaluator, register


def feasible_devices(problem) -> np.ndarray:
    """(n_ops, D) bool: which devices each op can run on."""
    return np.isfinite(problem.compute_us)


def colocate(problem, placement: np.ndarray) -> np.ndarray:
    """Move every colocation group onto the device of its first op (the groups' one rule)."""
    p = placement.copy()
    for members in problem.graph.colocation_groups():
        p[members] = p[members[0]]
    return p


def single_device_placement(problem, d: int) -> np.ndarray | None:
    """Every op on device d, or None when some op cannot run there."""
    if not np.isfinite(problem.compute_us[:, d]).all():
        return None
    return np.full(problem.n_ops, d, dtype=np.int64)


@register("single-gpu", "every op on the best single GPU (by simulated step time)", "trivial")
def single_gpu(problem, budget: Budget, seed: int, ev: Evaluator, **_):
    gpus = problem.cluster.gpus() or list(range(problem.n_devices))
    best = None
    for d in gpus:
        p = single_device_placement(problem, d)
        if p is None:
            continue
        r = ev.simulate(p)
        if best is None or r.objective < best[1].objective:
            best = (p, r)
    if best is None:
        raise ValueError("no GPU can run every op; single-gpu does not apply")
    return ev.result("single-gpu", best[0], notes=["OOM: the model does not fit one GPU"] if best[1].oom else [])


@register("cpu-only", "every op on the CPU", "trivial")
def cpu_only(problem, budget: Budget, seed: int, ev: Evaluator, **_):
    for d in problem.cluster.cpus():
        p = single_device_placement(problem, d)
        if p is not None:
            ev.simulate(p)
            return ev.result("cpu-only", p)
    raise ValueError("the cluster has no CPU that can run every op")


@register("random", "best of k uniformly random placements (k = budget, default 100)", "trivial")
def random_placement(problem, budget: Budget, seed: int, ev: Evaluator, k: int = 100, **_):
    rng = np.random.default_rng(seed)
    ok = feasible_devices(problem)
    while not ev.out_of_budget(budget, default_placements=k):
        u = rng.random(ok.shape) * ok
        ev.evaluate(colocate(problem, u.argmax(axis=1)))
    return ev.result("random", params={"k": budget.placements or k})


@register("round-robin", "ops dealt to devices in topological order", "trivial")
def round_robin(problem, budget: Budget, seed: int, ev: Evaluator, gpus_only: bool = True, **_):
    devs = np.array(problem.cluster.gpus() if gpus_only and problem.cluster.gpus() else range(problem.n_devices))
    ok = feasible_devices(problem)
    p = np.empty(problem.n_ops, dtype=np.int64)
    for i in range(problem.n_ops):
        cand = [d for d in np.roll(devs, -i) if ok[i, d]] or list(np.flatnonzero(ok[i]))
        p[i] = cand[0]
    p = colocate(problem, p)
    ev.simulate(p)
    return ev.result("round-robin", p, params={"gpus_only": gpus_only})
