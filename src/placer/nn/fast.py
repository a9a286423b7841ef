"""The Placeto network's forward pass for one state in numpy, for rollouts.

A rollout asks the policy for one action per step, one state at a time, with no gradient; torch's
per-call overhead dominates there (hundreds of tiny layers per step). :class:`NumpyPolicy` takes a
snapshot of a :class:`~placer.nn.placeto.PlacetoNet`'s weights and computes the same logits (to
float rounding) with numpy: the same gather / scatter message passing, written as a sparse
(scipy CSR) product of the edge incidence with the node messages. The gradient is still computed by
torch, on the whole episode in one batch (:mod:`placer.rl.workers`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from placer.nn.features import GraphTensors
from placer.nn.placeto import PlacetoNet


def _layers(seq) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for m in seq:
        if hasattr(m, "weight"):
            out.append((m.weight.detach().numpy().astype(np.float64).T.copy(), m.bias.detach().numpy().astype(np.float64)))
    return out


def _mlp(layers, x: np.ndarray) -> np.ndarray:
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            np.maximum(x, 0.0, out=x)
    return x


class NumpyPolicy:
    """Logits of one state of one graph, from a weight snapshot of a PlacetoNet."""

    def __init__(self, net: PlacetoNet):
        self.cfg = net.cfg
        self.f_down, self.g_down = _layers(net.f_down), _layers(net.g_down)
        self.f_up, self.g_up = _layers(net.f_up), _layers(net.g_up)
        self.l_pool = [_layers(m) for m in net.l_pool]
        self.h_pool = [_layers(m) for m in net.h_pool]
        self.head = _layers(net.head)
        self.keep = float(net.keep.detach())

    @staticmethod
    def graph_cache(gt: GraphTensors) -> dict:
        n = gt.n
        src, dst = gt.src.numpy(), gt.dst.numpy()
        down = sp.csr_matrix((np.ones(len(src)), (dst, src)), shape=(n, n))  # row v sums its parents' messages
        return {"down": down, "up": down.T.tocsr(), "static": gt.static.numpy().astype(np.float64),
                "feasible": gt.feasible.numpy()}

    def _propagate(self, x, adj, f, g):
        # g's first layer on [x, agg] is x @ Wx + agg @ Wa + b; x @ Wx + b is the same every round
        (w1, b1), rest = g[0], g[1:]
        F = x.shape[1]
        fixed = x @ w1[:F] + b1
        wa = w1[F:]
        h = np.zeros((x.shape[0], self.cfg.embed_dim))
        for _ in range(self.cfg.rounds):
            z = fixed + (adj @ _mlp(f, h)) @ wa
            np.maximum(z, 0.0, out=z)
            h = _mlp(rest, z)
        return h

    def logits(self, gt: GraphTensors, cache: dict, placement: np.ndarray, node: int, placed: np.ndarray) -> np.ndarray:
        n, A = gt.n, self.cfg.n_actions
        x = np.zeros((n, cache["static"].shape[1] + A + 2))
        x[:, :cache["static"].shape[1]] = cache["static"]
        x[np.arange(n), cache["static"].shape[1] + placement] = 1.0
        x[node, -2] = 1.0
        x[:, -1] = placed
        e = np.concatenate([x, self._propagate(x, cache["down"], self.f_down, self.g_down),
                            self._propagate(x, cache["up"], self.f_up, self.g_up)], axis=1)
        anc = gt.anc_idx[gt.anc_ptr[node]:gt.anc_ptr[node + 1]]
        desc = gt.desc_idx[gt.desc_ptr[node]:gt.desc_ptr[node + 1]]
        parts = [e[node]]
        for i in range(3):
            L = _mlp(self.l_pool[i], e)
            if i == 0:
                s, count = L[anc].sum(axis=0), len(anc)
            elif i == 1:
                s, count = L[desc].sum(axis=0), len(desc)
            else:
                s, count = L.sum(axis=0) - L[anc].sum(axis=0) - L[desc].sum(axis=0) - L[node], n - 1 - len(anc) - len(desc)
            if self.cfg.pool == "mean":
                s = s / max(count, 1)
            parts.append(_mlp(self.h_pool[i], s[None, :])[0])
        out = _mlp(self.head, np.concatenate(parts)[None, :])[0]
        out[int(placement[node])] += self.keep
        return np.where(cache["feasible"][node], out, -np.inf)


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()
