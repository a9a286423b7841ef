"""Placeto's policy network (paper section 2, Figure 1; appendix A.7 "Neural Network Architecture").

1. Raw features per group (:mod:`placer.nn.features`).
2. Two-way message passing: top-down (messages flow along the DAG edges, from the sources) and
   bottom-up (against them, from the sinks), each ``x_v <- g([raw_v, sum_{u in xi(v)} f(x_u)])`` with
   its own f and g, the same f and g in every one of the ``rounds`` (k) synchronous rounds. Written
   as gather (``h[:, src]``) and scatter (``index_add_`` on ``dst``) over the edge index arrays.
3. Pooling: for the group being placed, three summaries ``h_i(sum_{u in S_i(v)} l_i(e_u))`` over its
   ancestors, its descendants and the groups parallel to it, concatenated with its own embedding.
4. A two-layer MLP and a softmax over the devices; devices a group cannot run on are masked out.
   One learned scalar ``keep`` is added to the logit of the device the group is on now (initialised
   to ``PolicyConfig.keep_bias``; the paper has none, i.e. 0): with it the untrained policy keeps most
   groups where they are, so an episode is a walk of a few moves near its start rather than a fresh
   random placement (:class:`placer.methods.learned.placeto.PlacetoConfig`; measured in docs/methods/placeto.md).

Every operation is a per-node map or a sum over a set of nodes, so the output for a node does not
depend on how the nodes are numbered, and the weights do not depend on the number of nodes: one
set of weights serves every graph with the same number of devices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from placer.nn.features import N_STATIC, GraphTensors, pool_pairs, state_features


@dataclass(frozen=True)
class PolicyConfig:
    """The network's shape. Placeto builds it from its one config
    (:meth:`placer.methods.learned.placeto.PlacetoConfig.policy_config` sets ``n_actions``, ``rounds`` and
    ``keep_bias``); the defaults here are the paper's network (A.7)."""

    n_actions: int = 2  # devices the policy chooses between (paper: 2 K80 GPUs)
    embed_dim: int = 8  # |E|, node embedding size (A.7)
    hidden: int = 8  # hidden units of the message and aggregation MLPs, two hidden layers each (A.7)
    policy_hidden: int = 16  # hidden units of the two-layer policy MLP (A.7)
    rounds: int = 8  # k message-passing rounds per direction (A.7: k = 4 or 8 work best)
    pool: str = "sum"  # "sum" (paper) or "mean" over each pooled set
    keep_bias: float = 0.0  # initial logit bonus of the group's current device (paper: none, 0)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def n_features(self) -> int:
        return N_STATIC + self.n_actions + 2


def mlp(n_in: int, hidden: int, n_out: int, layers: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    d = n_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, n_out))
    return nn.Sequential(*mods)


class PlacetoNet(nn.Module):
    """Maps a batch of states of one group graph to logits over the devices for each state's node."""

    def __init__(self, cfg: PolicyConfig):
        super().__init__()
        self.cfg = cfg
        F, E, H = cfg.n_features, cfg.embed_dim, cfg.hidden
        self.f_down, self.g_down = mlp(E, H, E), mlp(F + E, H, E)
        self.f_up, self.g_up = mlp(E, H, E), mlp(F + E, H, E)
        node_dim = F + 2 * E
        self.l_pool = nn.ModuleList([mlp(node_dim, H, E) for _ in range(3)])  # ancestors, descendants, parallel
        self.h_pool = nn.ModuleList([mlp(E, H, E) for _ in range(3)])
        self.head = mlp(node_dim + 3 * E, cfg.policy_hidden, cfg.n_actions)
        self.keep = nn.Parameter(torch.tensor(float(cfg.keep_bias)))

    def _propagate(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, f: nn.Module, g: nn.Module) -> torch.Tensor:
        B, N, _ = x.shape
        h = x.new_zeros(B, N, self.cfg.embed_dim)
        for _ in range(self.cfg.rounds):
            msg = f(h)[:, src]  # gather: one message per edge, from its source
            agg = x.new_zeros(B, N, self.cfg.embed_dim).index_add_(1, dst, msg)  # scatter-sum at the destination
            h = g(torch.cat([x, agg], dim=-1))
        return h

    def embed(self, x: torch.Tensor, gt: GraphTensors) -> torch.Tensor:
        """(B, N, F) raw features -> (B, N, F + 2E) node embeddings after two-way message passing."""
        down = self._propagate(x, gt.src, gt.dst, self.f_down, self.g_down)
        up = self._propagate(x, gt.dst, gt.src, self.f_up, self.g_up)
        return torch.cat([x, down, up], dim=-1)

    def forward(self, gt: GraphTensors, placement: torch.Tensor, node: torch.Tensor, placed: torch.Tensor) -> torch.Tensor:
        """Logits (B, A) for states (placement (B, N) action ids, node (B,), placed (B, N) bool)."""
        x = state_features(gt, placement, node, placed)
        e = self.embed(x, gt)
        B, N, _ = e.shape
        nodes = node.cpu().numpy()
        bi = torch.arange(B)
        own = e[bi, node]
        sets = [pool_pairs(gt.anc_ptr, gt.anc_idx, nodes), pool_pairs(gt.desc_ptr, gt.desc_idx, nodes)]
        summaries = []
        for i in range(3):
            L = self.l_pool[i](e)  # (B, N, E)
            if i < 2:
                rows, members = sets[i]
                s = L.new_zeros(B, L.shape[-1]).index_add_(0, rows, L[rows, members])
                count = torch.bincount(rows, minlength=B).to(L.dtype)
            else:  # parallel = everything - ancestors - descendants - the node itself
                anc_rows, anc_m = sets[0]
                desc_rows, desc_m = sets[1]
                s = (L.sum(dim=1) - L.new_zeros(B, L.shape[-1]).index_add_(0, anc_rows, L[anc_rows, anc_m])
                     - L.new_zeros(B, L.shape[-1]).index_add_(0, desc_rows, L[desc_rows, desc_m]) - L[bi, node])
                count = (N - 1 - torch.bincount(anc_rows, minlength=B) - torch.bincount(desc_rows, minlength=B)).to(L.dtype)
            if self.cfg.pool == "mean":
                s = s / count.clamp(min=1.0).unsqueeze(-1)
            summaries.append(self.h_pool[i](s))
        logits = self.head(torch.cat([own] + summaries, dim=-1))
        logits = logits + self.keep * torch.nn.functional.one_hot(placement[bi, node], self.cfg.n_actions).to(logits.dtype)
        mask = gt.feasible[node]
        return logits.masked_fill(~mask, float("-inf"))


def entropy_of(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of each row's softmax, with masked (-inf) entries contributing 0."""
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    return -(p * torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))).sum(dim=-1)


def count_parameters(net: nn.Module) -> int:
    return int(sum(p.numel() for p in net.parameters()))

