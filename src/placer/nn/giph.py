"""GiPH's network (Hu et al. 2023, sections 4.3-4.4; the gpNet it reads and the method:
:mod:`placer.methods.learned.giph`): ``mp_steps`` rounds of PyG message passing (:class:`EdgeMP`) along the
task graph's direction and as many against it over the gpNet's (task, device) pairs, then one logit
per pair from the pair's two embeddings, their mean over the pair's task and over its gpNet.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import scatter


class EdgeMP(MessagePassing):
    """One round: m_uv = ReLU(W h_u + U e_uv) gathered along edge_index (W h computed per pair, not
    per edge), mean over a pair's in-edges, h_v <- h_v + MLP([h_v, mean])."""

    def __init__(self, H: int, edge_features: int):
        super().__init__(aggr="mean")
        self.lin_h, self.lin_e = nn.Linear(H, H), nn.Linear(edge_features, H, bias=False)
        self.upd = nn.Sequential(nn.Linear(2 * H, H), nn.ReLU())

    def forward(self, h, edge_index, e):
        """``e``: this round's edge term U e_uv (:meth:`edge_term`, computed once per pass)."""
        return h + self.upd(torch.cat([h, self.propagate(edge_index, hw=self.lin_h(h), e=e)], dim=1))

    def edge_term(self, edge_attr):
        return self.lin_e(edge_attr)

    def message(self, hw_j, e):
        return torch.relu(hw_j + e)


class GiPHNet(nn.Module):
    """Pair features -> embeddings along and against the task graph's direction -> one logit per
    pair (with the task's and the gpNet's mean embeddings beside it). ``node_features`` and
    ``edge_features``: the gpNet's pair and edge feature sizes."""

    def __init__(self, hidden: int, mp_steps: int, node_features: int, edge_features: int):
        super().__init__()
        H = hidden
        self.steps = mp_steps
        self.embed = nn.Sequential(nn.Linear(node_features, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU())
        self.fwd, self.bwd = EdgeMP(H, edge_features), EdgeMP(H, edge_features)
        self.score = nn.Sequential(nn.Linear(6 * H, H), nn.ReLU(), nn.Linear(H, 1))

    def forward(self, x, edge_index, edge_attr, task, batch, n_tasks: int, n_graphs: int):
        h0 = self.embed(x)
        hf, hb = h0, h0
        back = edge_index.flip(0)
        ef, eb = self.fwd.edge_term(edge_attr), self.bwd.edge_term(edge_attr)
        for _ in range(self.steps):
            hf = self.fwd(hf, edge_index, ef)
            hb = self.bwd(hb, back, eb)
        z = torch.cat([hf, hb], dim=1)
        per_task = scatter(z, task, dim=0, dim_size=n_tasks, reduce="mean")
        per_graph = scatter(z, batch, dim=0, dim_size=n_graphs, reduce="mean")
        return self.score(torch.cat([z, per_task[task], per_graph[batch]], dim=1)).squeeze(1)
