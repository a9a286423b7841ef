"""DOPPLER's networks (Yao et al. 2026, section 4.1; the method: :mod:`placer.methods.learned.doppler`): a
node embedding by ``layers`` rounds of message passing along and against the edges
(:class:`EdgeSum`, PyG), then SEL's head (scores a schedulable node) and PLC's head (scores a
device for it). The heads' weights are also read by the rollout kernel
(:mod:`placer.methods.learned.doppler_rollout`), which evaluates them itself.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import scatter


def mlp(n_in: int, hidden: int) -> nn.Sequential:
    """Two hidden ReLU layers of ``hidden`` units, one output: a head's score."""
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class EdgeSum(MessagePassing):
    """sum_{u -> v} m_u at each target v of ``edge_index`` (PyG ``aggr="sum"``: the message gathered
    at the source, scatter-summed at the target). No weights: the messages come in transformed."""

    def __init__(self):
        super().__init__(aggr="sum")

    def forward(self, m, edge_index):
        return self.propagate(edge_index, m=m)

    def message(self, m_j):
        return m_j


class DopplerNet(nn.Module):
    """Message passing along and against the edges (gather at the source, mean at the target), then
    SEL's and PLC's scoring heads. ``n_static``: static node features; ``n_sel``: SEL's dynamic
    features; ``n_plc``: PLC's per-device features."""

    def __init__(self, H: int, layers: int, n_static: int, n_sel: int, n_plc: int):
        super().__init__()
        self.inp = nn.Linear(n_static, H)
        self.down = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])  # messages to successors
        self.up = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])  # messages to predecessors
        self.self_ = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])
        self.sel = mlp(H + n_sel, H)
        self.plc = mlp(2 * H + n_plc, H)
        self.sum = EdgeSum()

    def embed(self, x, src, dst, n_in=None, n_out=None):
        """``n_in`` / ``n_out``: (N, 1) in- and out-degrees at least 1 (counted when None): the
        means' denominators. Each round: h <- h + ReLU(S h + mean_{u -> v} D h_u + mean_{v -> w} U h_w)."""
        N = x.shape[0]
        if n_in is None:
            n_in, n_out = (scatter(torch.ones(len(i)), i, dim_size=N).clamp(min=1)[:, None] for i in (dst, src))
        along, against = torch.stack([src, dst]), torch.stack([dst, src])
        h = torch.relu(self.inp(x))
        for down, up, me in zip(self.down, self.up, self.self_):
            m_in = self.sum(down(h), along) / n_in
            m_out = self.sum(up(h), against) / n_out
            h = h + torch.relu(me(h) + m_in + m_out)
        return h
