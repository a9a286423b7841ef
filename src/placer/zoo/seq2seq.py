"""Recurrent models of the papers, unrolled over time step by step like their TensorFlow graphs:
NMT (LSTM encoder-decoder with attention; 2, 4 or 8 layers), GNMT (Wu et al. 2016) and RNNLM.

LSTM cells are written out (concat, matmul + bias, split, sigmoid / tanh gates) and called once per
time step, so a captured graph has explicit per-step cell ops, shared weights and per-step gradient
accumulation, as the papers' graphs do. Module paths are what an expert rule looks for
(Hierarchical Planner section 3, Post section 4: one LSTM layer per GPU, the embedding with the
first layer, attention and softmax with the last):
``encoder.embedding``, ``encoder.layers.<i>``, ``decoder.embedding``, ``decoder.layers.<i>``,
``decoder.attention``, ``decoder.softmax`` (NMT / GNMT) and ``embedding``, ``layers.<i>``,
``softmax`` (RNNLM).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMCell(nn.Module):
    """One LSTM layer's cell (Hochreiter & Schmidhuber 1997, with a forget gate; the gate layout of
    TensorFlow's ``BasicLSTMCell``): gates = [x, h] W + b; c' = f c + i g; h' = o tanh(c')."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight = nn.Parameter(torch.empty(4 * hidden, input_size + hidden))
        self.bias = nn.Parameter(torch.zeros(4 * hidden))
        nn.init.uniform_(self.weight, -0.1, 0.1)

    def forward(self, x, state):
        h, c = state
        gates = F.linear(torch.cat([x, h], 1), self.weight, self.bias)
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


def _zeros(x, hidden):
    z = x.new_zeros(x.shape[0], hidden)
    return z, z


class Encoder(nn.Module):
    """Stacked LSTM over the source, one step at a time; ``bidirectional_first`` runs the first
    layer both ways (GNMT), ``residual_from`` adds residual connections from that layer on."""

    def __init__(self, vocab, embed, hidden, layers, bidirectional_first=False, residual_from=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.hidden = hidden
        self.bidirectional_first = bidirectional_first
        self.residual_from = residual_from
        cells = []
        for i in range(layers):
            if i == 0:
                cells.append(LSTMCell(embed, hidden // 2 if bidirectional_first else hidden))
            else:
                cells.append(LSTMCell(hidden, hidden))
        self.layers = nn.ModuleList(cells)
        if bidirectional_first:
            self.backward_layer = LSTMCell(embed, hidden - hidden // 2)

    def forward(self, src):
        steps = [self.embedding(src[:, t]) for t in range(src.shape[1])]
        for i, cell in enumerate(self.layers):
            state = _zeros(steps[0], cell.hidden)
            outs = []
            for x in steps:
                state = cell(x, state)
                outs.append(state[0])
            if i == 0 and self.bidirectional_first:
                state = _zeros(steps[0], self.backward_layer.hidden)
                back = []
                for x in reversed(steps):
                    state = self.backward_layer(x, state)
                    back.append(state[0])
                outs = [torch.cat([f, b], 1) for f, b in zip(outs, reversed(back))]
            if self.residual_from is not None and i >= self.residual_from:
                outs = [o + x for o, x in zip(outs, steps)]
            steps = outs
        return torch.stack(steps, 1)


class Attention(nn.Module):
    """Luong et al. 2015 "general" attention: scores = h W_a enc^T, softmax over source steps,
    context = weights enc; the attentional state tanh(W_c [context; h])."""

    def __init__(self, hidden):
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)

    def forward(self, h, enc):
        q = self.query(h).unsqueeze(2)
        weights = torch.softmax(torch.bmm(enc, q), 1)
        context = torch.bmm(weights.transpose(1, 2), enc).squeeze(1)
        return context, torch.tanh(self.combine(torch.cat([context, h], 1)))


class Softmax(nn.Module):
    """Output projection and cross-entropy of one decoder step (the papers' per-step softmax)."""

    def __init__(self, hidden, vocab):
        super().__init__()
        self.proj = nn.Linear(hidden, vocab)

    def forward(self, h, target):
        return F.cross_entropy(self.proj(h), target)


class Decoder(nn.Module):
    """Stacked LSTM decoder with attention, teacher-forced, one step at a time. NMT: attention on
    the top layer's output (Luong). GNMT: attention on the bottom layer's output, the context fed
    to every upper layer, residuals from ``residual_from`` on."""

    def __init__(self, vocab, embed, hidden, layers, gnmt=False, residual_from=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.gnmt = gnmt
        self.residual_from = residual_from
        extra = hidden if gnmt else 0
        self.layers = nn.ModuleList([LSTMCell((embed if i == 0 else hidden) + (extra if i > 0 else 0), hidden)
                                     for i in range(layers)])
        self.attention = Attention(hidden)
        self.softmax = Softmax(hidden, vocab)

    def forward(self, tgt_in, tgt_out, enc):
        states = [_zeros(enc[:, 0], cell.hidden) for cell in self.layers]
        losses = []
        for t in range(tgt_in.shape[1]):
            x = self.embedding(tgt_in[:, t])
            context = None
            for i, cell in enumerate(self.layers):
                inp = x if (i == 0 or not self.gnmt) else torch.cat([x, context], 1)
                states[i] = cell(inp, states[i])
                h = states[i][0]
                if self.residual_from is not None and i >= self.residual_from:
                    h = h + x
                if self.gnmt and i == 0:
                    context, _ = self.attention(h, enc)
                x = h
            if not self.gnmt:
                _, x = self.attention(x, enc)
            losses.append(self.softmax(x, tgt_out[:, t]))
        return torch.stack(losses).mean()


class NMT(nn.Module):
    """Encoder-decoder NMT with attention (Bahdanau et al. 2015 / Luong et al. 2015; the papers' 2-,
    4- and 8-layer benchmark), or GNMT (Wu et al. 2016: 8 + 8 layers, bidirectional first encoder
    layer, residual connections from the third layer, attention from the bottom decoder layer)."""

    def __init__(self, layers: int = 2, hidden: int = 1024, vocab: int = 32000, gnmt: bool = False):
        super().__init__()
        residual = 2 if gnmt else None
        self.encoder = Encoder(vocab, hidden, hidden, layers, bidirectional_first=gnmt, residual_from=residual)
        self.decoder = Decoder(vocab, hidden, hidden, layers, gnmt=gnmt, residual_from=residual)

    def forward(self, src, tgt_in, tgt_out):
        return self.decoder(tgt_in, tgt_out, self.encoder(src))


class RNNLM(nn.Module):
    """Multi-layer LSTM language model (Zaremba et al. 2014; Jozefowicz et al. 2016), unrolled,
    with a per-step softmax over the vocabulary."""

    def __init__(self, layers: int = 4, hidden: int = 1024, vocab: int = 32000):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([LSTMCell(hidden, hidden) for _ in range(layers)])
        self.softmax = Softmax(hidden, vocab)

    def forward(self, tokens, targets):
        steps = [self.embedding(tokens[:, t]) for t in range(tokens.shape[1])]
        for cell in self.layers:
            state = _zeros(steps[0], cell.hidden)
            outs = []
            for x in steps:
                state = cell(x, state)
                outs.append(state[0])
            steps = outs
        return torch.stack([self.softmax(h, targets[:, t]) for t, h in enumerate(steps)]).mean()


def token_inputs(batch: int, length: int, vocab: int, n: int, device="meta"):
    """``n`` (batch, length) int64 token tensors (zeros on a real device: valid ids)."""
    if device == "meta":
        return tuple(torch.empty(batch, length, dtype=torch.long, device="meta") for _ in range(n))
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randint(0, vocab, (batch, length), generator=g).to(device) for _ in range(n))
