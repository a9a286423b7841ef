"""GDP's network (Zhou et al. 2019; the method: :mod:`placer.methods.learned.gdp`):

* graph embedding (3.1): GraphSAGE with the max-pooling aggregator, h_v <- f(h_v, max_u sigma(W h_u +
  b)) (PyG ``SAGEConv(aggr="max", project=True)``, :class:`placer.nn.encoder.GraphEncoder`);
* placement network (3.2): the node sequence in topological order cut into segments; attention
  layers over the segment and the cached states of the previous segment (Transformer-XL's
  segment-level recurrence, :class:`XLLayer`) with a relative-position bias per head; every node's
  device in one pass, pi(a | G) = prod_v pi(a_v | G);
* superposition (3.3): the graph's mean node embedding c gates each layer's feed-forward output
  by sigma(W_l c).

It reads a graph context with
``data`` (:class:`placer.nn.encoder.GraphData`), ``n``, ``feasible`` ((N, A) bool) and ``prior``
((N, A) logit prior or None): :class:`placer.methods.learned.graph_ppo.GraphCtx`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from placer.errors import InputError
from placer.nn.encoder import EncoderConfig, GraphEncoder, segments


def masked_logits(logits: torch.Tensor, feasible: torch.Tensor) -> torch.Tensor:
    """``logits`` with the infeasible (node, device) entries at -1e9."""
    return logits.masked_fill(~feasible, -1e9)


class XLLayer(nn.Module):
    """Section 3.2: pre-norm attention over [memory; segment] with a learned relative-position
    bias, then a feed-forward block whose output the superposition gate scales (section 3.3)."""

    def __init__(self, d: int, heads: int, max_rel: int):
        super().__init__()
        self.h, self.dk, self.max_rel = heads, d // heads, max_rel
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.rel = nn.Parameter(torch.zeros(2 * max_rel + 1, heads))
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

    def forward(self, h, mem, gate):
        L, d = h.shape
        x = self.ln1(h)
        ctx = x if mem is None else torch.cat([self.ln1(mem), x], dim=0)
        M = ctx.shape[0] - L
        q = self.q(x).view(L, self.h, self.dk).transpose(0, 1)  # (h, L, dk)
        k, v = self.kv(ctx).view(M + L, 2, self.h, self.dk).permute(1, 2, 0, 3)  # (h, M+L, dk) each
        pos_q = torch.arange(L)[:, None]
        pos_k = torch.arange(-M, L)[None, :]
        rel = (pos_k - pos_q).clamp(-self.max_rel, self.max_rel) + self.max_rel
        bias = self.rel[rel].permute(2, 0, 1)  # (h, L, M+L)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.dk) + bias, dim=-1)
        h = h + self.o((att @ v).transpose(0, 1).reshape(L, d))
        return h + self.ff(self.ln2(h)) * gate


class GDPNet(nn.Module):
    """GraphSAGE embedding (3.1) -> segment-recurrent attention placer (3.2) with graph-conditioned
    gates (3.3) -> one device distribution per node: pi(a | G) = prod_v pi(a_v | G). ``cfg``: the
    method's config (``hidden``, ``gnn_layers``, ``attn_layers``, ``heads``, ``segment``,
    ``superposition``)."""

    def __init__(self, cfg, n_actions: int):
        super().__init__()
        H = cfg.hidden
        if H % cfg.heads:
            raise InputError("gdp", f"parameter hidden={H}", f"is not a multiple of heads={cfg.heads}",
                             "choose hidden divisible by heads")
        self.cfg, self.n_actions = cfg, n_actions
        self.encoder = GraphEncoder(EncoderConfig("sage", H, cfg.gnn_layers))
        self.layers = nn.ModuleList([XLLayer(H, cfg.heads, cfg.segment) for _ in range(cfg.attn_layers)])
        self.cond = nn.Linear(H, H * cfg.attn_layers) if cfg.superposition else None
        self.out_ln = nn.LayerNorm(H)
        self.head = nn.Linear(H, n_actions)

    def logits(self, g):
        z = self.encoder(g.data.x, g.data.edge_index)
        L, H = len(self.layers), z.shape[1]
        gates = (torch.sigmoid(self.cond(z.mean(dim=0))).view(L, H) if self.cond is not None
                 else torch.ones(L, H))
        mems: list = [None] * L
        outs = []
        for s, e in segments(g.n, self.cfg.segment):
            h = z[s:e]
            new = []
            for i, layer in enumerate(self.layers):
                new.append(h.detach())  # Transformer-XL: the cache is not back-propagated through
                h = layer(h, mems[i], gates[i])
            mems = new
            outs.append(h)
        u = self.head(self.out_ln(torch.cat(outs, dim=0)))
        return masked_logits(u if g.prior is None else u + g.prior, g.feasible)

    def sample(self, g, B: int, gen):
        logp_all = torch.log_softmax(self.logits(g), dim=-1)
        a = torch.multinomial(logp_all.exp(), B, replacement=True, generator=gen).T  # (B, N)
        return a, logp_all.gather(1, a.T).T

    def evaluate(self, g, actions):
        logp_all = torch.log_softmax(self.logits(g), dim=-1)
        ent = -(logp_all.exp() * logp_all).sum(dim=-1)  # (N,)
        return logp_all.gather(1, actions.T).T, ent.expand(actions.shape[0], -1)

    def greedy(self, g):
        return self.logits(g).argmax(dim=-1)
