"""What Placeto's network reads about a graph (paper section 2, "Computing per-group attributes").

Per group, the static raw features are

* ``compute``: the group's total compute time on its fastest candidate device, divided by the mean
  over the graph's groups;
* ``output``: the group's total output-tensor bytes, divided by the mean over the graph's groups;
* ``memory`` (beyond the paper's list; the reward penalises memory, appendix A.7): the group's
  parameter + output bytes as a fraction of the smallest candidate device's memory.

Dividing by the graph mean makes a graph with ten times the batch size, or in other units, or with
twice as many groups, look the same to the network; the memory fraction is kept absolute on
purpose, since fitting a device is an absolute matter. The dynamic features (one-hot current
placement, is-current flag, is-placed flag) are added per state by :func:`state_features`.

Reachability (the ancestors, descendants and parallel groups of section 2's pooling step) is
computed once per graph, as CSR index arrays over the group DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

N_STATIC = 3


def reachability(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(anc_ptr, anc_idx, desc_ptr, desc_idx): for every node, the nodes that reach it and the
    nodes it reaches, in increasing index order. ``src -> dst`` must be a DAG."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    succ = [[] for _ in range(n)]
    pred = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for s, d in zip(src.tolist(), dst.tolist()):
        succ[s].append(d)
        pred[d].append(s)
        indeg[d] += 1
    order, stack = [], [i for i in range(n) if indeg[i] == 0]
    while stack:
        v = stack.pop()
        order.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    if len(order) != n:
        raise ValueError("reachability needs a DAG; the edges have a cycle")
    desc = [0] * n
    for v in reversed(order):
        b = 0
        for w in succ[v]:
            b |= desc[w] | (1 << w)
        desc[v] = b
    anc = [0] * n
    for v in order:
        b = 0
        for u in pred[v]:
            b |= anc[u] | (1 << u)
        anc[v] = b
    return (*_bits_to_csr(anc, n), *_bits_to_csr(desc, n))


def _bits_to_csr(bits: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
    nbytes = (n + 7) // 8
    rows = [np.flatnonzero(np.unpackbits(np.frombuffer(b.to_bytes(nbytes, "little"), dtype=np.uint8),
                                         bitorder="little")[:n]) for b in bits]
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    idx = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, dtype=np.int64)
    return ptr, idx


def static_features(compute_us: np.ndarray, output_bytes: np.ndarray, memory_bytes: np.ndarray,
                    device_memory_bytes: float) -> np.ndarray:
    """(N, 3) float32 static features, normalised as the module docstring says."""
    c = np.where(np.isfinite(compute_us), compute_us, np.inf).min(axis=1)
    c = np.where(np.isfinite(c), c, 0.0)
    out = np.asarray(output_bytes, dtype=np.float64)
    feats = np.stack([c / max(c.mean(), 1e-12), out / max(out.mean(), 1e-12),
                      np.asarray(memory_bytes, dtype=np.float64) / float(device_memory_bytes)], axis=1)
    return feats.astype(np.float32)


@dataclass(eq=False)
class GraphTensors:
    """Everything static the network needs about one group graph (built once per graph)."""

    static: torch.Tensor  # (N, N_STATIC) float32
    src: torch.Tensor  # (E,) int64, DAG edges
    dst: torch.Tensor  # (E,) int64
    anc_ptr: np.ndarray  # CSR of ancestors (numpy: indexing happens per state batch)
    anc_idx: np.ndarray
    desc_ptr: np.ndarray
    desc_idx: np.ndarray
    feasible: torch.Tensor  # (N, A) bool

    @property
    def n(self) -> int:
        return int(self.static.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.feasible.shape[1])

    @classmethod
    def build(cls, static: np.ndarray, src: np.ndarray, dst: np.ndarray, feasible: np.ndarray) -> "GraphTensors":
        n = len(static)
        ap, ai, dp, di = reachability(n, src, dst)
        return cls(torch.as_tensor(np.asarray(static, dtype=np.float32)),
                   torch.as_tensor(np.asarray(src, dtype=np.int64)), torch.as_tensor(np.asarray(dst, dtype=np.int64)),
                   ap, ai, dp, di, torch.as_tensor(np.asarray(feasible, dtype=bool)))

    @classmethod
    def from_grouped(cls, gp) -> "GraphTensors":
        """From a :class:`placer.rl.task.PlacementTask`."""
        cap = float(gp.problem.memory_bytes[gp.devices].min())
        static = static_features(gp.compute_us, gp.output_bytes, gp.memory_bytes, cap)
        return cls.build(static, gp.dag_src, gp.dag_dst, gp.feasible)


def state_features(gt: GraphTensors, placement: torch.Tensor, node: torch.Tensor, placed: torch.Tensor) -> torch.Tensor:
    """(B, N, N_STATIC + A + 2) raw features of a batch of states of one graph: static features,
    one-hot current placement, is-current flag, is-placed flag (paper section 2)."""
    B, N = placement.shape
    onehot = torch.nn.functional.one_hot(placement, gt.n_actions).to(torch.float32)
    current = torch.zeros(B, N)
    current[torch.arange(B), node] = 1.0
    return torch.cat([gt.static.expand(B, N, -1), onehot, current.unsqueeze(-1), placed.to(torch.float32).unsqueeze(-1)], dim=-1)


def pool_pairs(ptr: np.ndarray, idx: np.ndarray, nodes: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(state, member) index pairs: for state b, every member of the set of ``nodes[b]``."""
    nodes = np.asarray(nodes, dtype=np.int64)
    lens = ptr[nodes + 1] - ptr[nodes]
    rows = np.repeat(np.arange(len(nodes)), lens)
    starts = np.repeat(ptr[nodes], lens)
    offs = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return torch.as_tensor(rows), torch.as_tensor(idx[starts + offs])
