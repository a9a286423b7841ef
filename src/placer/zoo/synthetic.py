"""Seeded synthetic training graphs: a random layered forward DAG mirrored by its backward pass.

Not a model anyone trains; a graph with the shape of one (branches and joins, forward ops whose
activations are stashed for a mirrored backward pass, parameters on some ops) for speed benchmarks,
property tests and the default demo until a zoo model is available. Costs are given for ``gpu``
(log-normal, median 200 us) and ``cpu`` (8-15x slower).
"""

from __future__ import annotations

import numpy as np

from placer.graph import BACKWARD, FORWARD, OpGraph


def layered_training_graph(n_ops: int, seed: int = 0, width: int = 8, name: str | None = None) -> OpGraph:
    """About ``n_ops`` ops (half forward, half backward) in layers of up to ``width`` ops."""
    rng = np.random.default_rng(seed)
    nf = max(1, n_ops // 2)
    # forward ops in layers; each op takes 1-3 inputs from the previous two layers
    layers, i = [], 0
    while i < nf:
        w = int(rng.integers(1, width + 1))
        layers.append(list(range(i, min(nf, i + w))))
        i += w
    gpu_f = rng.lognormal(np.log(200.0), 0.8, nf)
    out = rng.lognormal(np.log(4e6), 1.0, nf).round()
    par = np.where(rng.random(nf) < 0.3, rng.lognormal(np.log(2e6), 1.0, nf), 0.0).round()
    edges = []
    for li in range(1, len(layers)):
        pool = layers[li - 1] + (layers[li - 2] if li >= 2 else [])
        fed = set()
        for v in layers[li]:
            k = int(rng.integers(1, min(3, len(pool)) + 1))
            for u in rng.choice(pool, size=k, replace=False):
                edges.append((int(u), int(v)))
                fed.add(int(u))
        for u in layers[li - 1]:  # every op of the previous layer feeds something
            if u not in fed:
                edges.append((u, int(rng.choice(layers[li]))))
    names = [f"f{i}" for i in range(nf)] + [f"b{i}" for i in range(nf)]
    gedges = [(f"f{u}", f"f{v}", out[u]) for u, v in edges]
    gedges += [(f"b{v}", f"b{u}", out[u]) for u, v in edges]
    gedges += [(f"f{u}", f"b{u}", out[u]) for u in range(nf)]
    gpu = np.concatenate([gpu_f, gpu_f * rng.uniform(1.5, 2.5, nf)])
    cpu = gpu * rng.uniform(8, 15, 2 * nf)
    grad_out = np.zeros(nf)
    for u, v in edges:
        grad_out[v] += out[u]
    return OpGraph.build(
        names, gedges, name=name or f"synthetic-{n_ops}-s{seed}",
        op_types=["op"] * nf + ["op_grad"] * nf, compute_us={"gpu": gpu, "cpu": cpu},
        output_bytes=np.concatenate([out, grad_out]), param_bytes=np.concatenate([par, np.zeros(nf)]),
        role=[FORWARD] * nf + [BACKWARD] * nf, mirror=[-1] * nf + list(range(nf)),
        meta={"source": "synthetic", "seed": seed, "width": width},
    )
