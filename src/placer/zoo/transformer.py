"""Transformer models: BERT (Devlin et al. 2019; base 12 x 768, large 24 x 1024) pre-training with
the masked-LM head, and a GPT-style causal decoder (Radford et al. 2019, GPT-2 small 12 x 768).

Attention is written out (linear projections, batched matmuls, softmax, dropout) rather than as one
fused ``scaled_dot_product_attention`` call, so the graph has the per-op structure of the papers'
TensorFlow BERT graph. Module paths: ``embedding``, ``encoder.layers.<i>.attention``,
``encoder.layers.<i>.ffn`` (BERT; ``layers.<i>`` for GPT), ``head`` (MLM / LM softmax).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "bert_base": dict(layers=12, hidden=768, heads=12, vocab=30522, max_len=512),
    "bert_large": dict(layers=24, hidden=1024, heads=16, vocab=30522, max_len=512),
    "gpt2_small": dict(layers=12, hidden=768, heads=12, vocab=50257, max_len=1024),
}


class Embedding(nn.Module):
    def __init__(self, vocab, hidden, max_len, segments: int, dropout: float):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_len, hidden)
        self.segment = nn.Embedding(segments, hidden) if segments else None
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.word(tokens) + self.position(pos)
        if self.segment is not None:
            x = x + self.segment(torch.zeros_like(tokens))
        return self.dropout(self.norm(x))


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017, eq. 1), written out."""

    def __init__(self, hidden, heads, dropout, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads

        def split(t):
            return t.view(b, s, h, d // h).transpose(1, 2).reshape(b * h, s, d // h)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d // h)
        if self.causal:
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.bmm(self.dropout(torch.softmax(scores, -1)), v)
        ctx = ctx.view(b, h, s, d // h).transpose(1, 2).reshape(b, s, d)
        return self.dropout(self.out(ctx))


class FeedForward(nn.Module):
    def __init__(self, hidden, dropout):
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    """A transformer layer: post-norm (BERT) or pre-norm (GPT-2) residual attention + feed-forward."""

    def __init__(self, hidden, heads, dropout, causal: bool):
        super().__init__()
        self.pre_norm = causal
        self.attention = SelfAttention(hidden, heads, dropout, causal)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12 if not causal else 1e-5)
        self.ffn = FeedForward(hidden, dropout)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12 if not causal else 1e-5)

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attention(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ffn(x))


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, dropout, causal):
        super().__init__()
        self.layers = nn.ModuleList([Block(hidden, heads, dropout, causal) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MLMHead(nn.Module):
    """BERT's masked-LM head: dense + GELU + LayerNorm, then the decoder tied to the word embedding.
    Every position is scored (no masking sub-sampling), so the softmax costs its full size."""

    def __init__(self, hidden, word: nn.Embedding):
        super().__init__()
        self.transform = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.word = word
        self.bias = nn.Parameter(torch.zeros(word.num_embeddings))

    def forward(self, x, labels):
        x = self.norm(F.gelu(self.transform(x)))
        logits = F.linear(x, self.word.weight, self.bias)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


class BERT(nn.Module):
    """BERT pre-training step (masked LM). ``layers`` overrides the depth (reduced tests)."""

    def __init__(self, variant: str = "bert_base", layers: int | None = None, vocab: int | None = None,
                 dropout: float = 0.1):
        super().__init__()
        cfg = dict(CONFIGS[variant])
        cfg.update({k: v for k, v in dict(layers=layers, vocab=vocab).items() if v})
        self.embedding = Embedding(cfg["vocab"], cfg["hidden"], cfg["max_len"], 2, dropout)
        self.encoder = Encoder(cfg["layers"], cfg["hidden"], cfg["heads"], dropout, causal=False)
        self.head = MLMHead(cfg["hidden"], self.embedding.word)

    def forward(self, tokens, labels):
        return self.head(self.encoder(self.embedding(tokens)), labels)


class LMHead(nn.Module):
    def __init__(self, hidden, word: nn.Embedding):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.word = word

    def forward(self, x, labels):
        logits = F.linear(self.norm(x), self.word.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


class GPT(nn.Module):
    """GPT-2 style causal decoder (pre-norm blocks, tied input/output embedding)."""

    def __init__(self, variant: str = "gpt2_small", layers: int | None = None, vocab: int | None = None,
                 dropout: float = 0.1):
        super().__init__()
        cfg = dict(CONFIGS[variant])
        cfg.update({k: v for k, v in dict(layers=layers, vocab=vocab).items() if v})
        self.embedding = Embedding(cfg["vocab"], cfg["hidden"], cfg["max_len"], 0, dropout)
        self.encoder = Encoder(cfg["layers"], cfg["hidden"], cfg["heads"], dropout, causal=True)
        self.head = LMHead(cfg["hidden"], self.embedding.word)

    def forward(self, tokens, labels):
        return self.head(self.encoder(self.embedding(tokens)), labels)
