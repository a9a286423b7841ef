"""Restricted heterogeneous instances for the tests (issue 62): every op may run on only a random
subset of the devices (a ``null`` cost elsewhere), on 4-8 devices of different speeds with a link of
its own per pair, colocation groups kept feasible (a group's ops share at least one device they can
all run on), memory unlimited or tight.

The graph is a training graph (forward and backward ops, parameters, Conv2D types so the rule-based
``expert`` applies) or a GiPH-style task graph; every device has a model key of its own
(``m0``, ``m1``, ...) under which the graph carries its costs, ``inf`` (``null`` in a file) where
the op cannot run.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Device, make_cluster
from placer.problem import Problem
from placer.zoo.giph import task_graph
from placer.zoo.synthetic import layered_training_graph

GiB = 2**30


def restricted_problem(seed: int = 0, *, graph: str = "training", tight: bool = False,
                       n_ops: int | None = None, n_devices: int | None = None) -> Problem:
    """A restricted heterogeneous Problem, a pure function of its arguments.

    ``graph``: ``training`` (about 16-40 ops with colocation groups: forward op with its backward)
    or ``giph`` (a GiPH task graph of 16-40 tasks, no colocation). ``tight``: device memory cut so
    that no device holds every parameter (but every op fits on one of its allowed devices)."""
    rng = np.random.default_rng([int(seed), 0x52E5])
    n = int(n_ops if n_ops is not None else rng.integers(16, 41))
    D = int(n_devices if n_devices is not None else rng.integers(4, 9))
    if graph == "training":
        g = layered_training_graph(n, seed=int(seed) + 11)
        base_us = np.asarray(g.compute_us["gpu"], dtype=np.float64)
        # colocation: about a third of the forward ops with their backward ops
        coloc = np.full(g.n_ops, -1)
        fwd = np.flatnonzero(g.mirror >= 0)
        for f in rng.choice(fwd, size=max(1, len(fwd) // 3), replace=False):
            coloc[f] = coloc[g.mirror[f]] = f
        g = g.replace(colocation=coloc, op_types=[t.replace("op", "Conv2D") for t in g.op_types])
    elif graph == "giph":
        g = task_graph(n, seed=int(seed))
        base_us = g.flops / 1e4
    else:  # pragma: no cover - a test's typo
        raise ValueError(graph)
    n = g.n_ops
    # which devices each op may run on: a random non-empty subset, one shared device per colocation group
    allowed = rng.random((n, D)) < rng.uniform(0.25, 0.75)
    for i in range(n):
        if not allowed[i].any():
            allowed[i, rng.integers(D)] = True
    for members in g.colocation_groups():
        allowed[members, rng.integers(D)] = True
    # heterogeneous speeds: device j runs everything `speed[j]` times slower than the reference, with
    # a per-op jitter (a device good at one op type is not at every other)
    speed = np.exp(rng.uniform(np.log(0.5), np.log(4.0), D))
    jitter = rng.uniform(0.7, 1.4, (n, D))
    cost = base_us[:, None] * speed[None, :] * jitter
    cost[~allowed] = np.inf
    kinds = ["cpu" if j == D - 1 else "gpu" for j in range(D)]
    names = [f"{k}:{j}" for j, k in enumerate(kinds)]
    models = [f"m{j}" for j in range(D)]
    g = g.replace(compute_us={m: cost[:, j] for j, m in enumerate(models)})
    if tight:
        own = g.param_bytes + g.temp_bytes + g.output_bytes
        total = max(float(g.param_bytes.sum()), 1.0)
        need = np.array([own[allowed[:, j]].max(initial=0.0) for j in range(D)])
        mem = np.maximum(need * 1.05, 0.45 * total) + 1e6  # every op fits on its devices; no device holds all
    else:
        mem = np.full(D, 64.0 * GiB)
    devs = [Device(names[j], kinds[j], models[j], float(mem[j])) for j in range(D)]
    pairs = {}
    for a in range(D):
        for b in range(a + 1, D):
            w, l = float(rng.uniform(500.0, 12000.0)), float(rng.uniform(0.0, 30.0))
            pairs[(a, b)] = pairs[(b, a)] = (w, l)
    cl = make_cluster(f"restricted-d{D}-s{seed}" + ("-tight" if tight else ""), devs, 7600.0, 0.0, pairs)
    return Problem(g.replace(name=f"restricted-{graph}-n{n}-s{seed}"), cl)
