"""Mars's network (Lan et al. 2021; the method, its pre-training and notes: :mod:`placer.methods.learned.mars`):
a GCN encoder (PyG ``GCNConv``, :class:`placer.nn.encoder.GraphEncoder`) and the segment-level
seq2seq placer (:mod:`placer.nn.seq2seq`): the node sequence in topological order is placed segment
by segment, each starting from the recurrent state (encoder, decoder, last device) the previous one
ended with, attention over the current segment. PPO's ratio is taken per segment, length-normalised:
r = exp((log pi - log pi_old) / L_segment). It reads a graph context with ``data``, ``n``, ``feasible`` and ``prior``
(:class:`placer.methods.learned.graph_ppo.GraphCtx`).
"""

from __future__ import annotations

import torch
from torch import nn

from placer.nn.encoder import EncoderConfig, GraphEncoder, segments
from placer.nn.seq2seq import Seq2SeqConfig, Seq2SeqPlacer, teacher_forced


class MarsNet(nn.Module):
    """GCN encoder -> segment-by-segment seq2seq placer (the paper's segment-level sequence
    processing). ``cfg``: the method's config (``hidden``, ``gnn_layers``, ``seq_hidden``,
    ``segment``, ``finetune_encoder``)."""

    def __init__(self, cfg, n_actions: int):
        super().__init__()
        self.cfg, self.n_actions = cfg, n_actions
        self.encoder = GraphEncoder(EncoderConfig("gcn", cfg.hidden, cfg.gnn_layers))
        self.placer = Seq2SeqPlacer(Seq2SeqConfig(n_features=cfg.hidden, n_devices=n_actions, hidden=cfg.seq_hidden))
        self.notes: list[str] = []

    def embed(self, g):
        z = self.encoder(g.data.x, g.data.edge_index)
        return z if self.cfg.finetune_encoder else z.detach()

    def _decode(self, g, B: int, *, actions=None, greedy=False, gen=None):
        """Per segment: devices (B, L_s), mean log-prob per op (B,), mean entropy per op (B,)."""
        z = self.embed(g)
        state, devs, lps, ents = None, [], [], []
        for s, e in segments(g.n, self.cfg.segment):
            prior = None if g.prior is None else g.prior[s:e]  # the anchor's logit prior
            if actions is not None:  # re-scoring a sampled batch: all positions at once
                out = teacher_forced(self.placer, z[s:e].unsqueeze(0), actions[:, s:e], g.feasible[s:e], state,
                                     prior)
            else:
                out = self.placer(z[s:e].unsqueeze(0), g.feasible[s:e], samples=B if state is None else None,
                                  greedy=greedy, generator=gen, state=state, prior=prior)
            state = out.state
            devs.append(out.devices)
            lps.append(out.log_prob / (e - s))
            ents.append(out.entropy / (e - s))
        return torch.cat(devs, dim=1), torch.stack(lps, dim=1), torch.stack(ents, dim=1)

    def sample(self, g, B: int, gen):
        a, lp, _ = self._decode(g, B, gen=gen)
        return a, lp

    def evaluate(self, g, actions):
        _, lp, ent = self._decode(g, actions.shape[0], actions=actions)
        return lp, ent

    def greedy(self, g):
        return self._decode(g, 1, greedy=True)[0][0]
