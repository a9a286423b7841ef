"""The sequence-to-sequence placer of ColocRL and the Hierarchical Planner: an LSTM encoder reads one
embedding per input (an op group), an LSTM decoder with content-based attention emits one device per
input, in the order of the inputs.

Papers: Mirhoseini et al., "Device Placement Optimization with Reinforcement Learning", ICML 2017
(ColocRL), section 2 and Figure 2; Mirhoseini et al., "A Hierarchical Model for Device Placement",
ICLR 2018, section 2 ("The Placer's RNN encoder reads the group embeddings one at a time and produces
M hidden states ... The Placer's decoder RNN predicts one device per time step. The devices are
returned in the same order as the input group embeddings ... Each device has its own trainable
embedding, which is then fed as input to the next decoder time step") and section 3 (logits with a
tanh constant C = 5 and a temperature T = 10).

The network, for a batch of B sequences of length L with F features and D devices:

* encoder: ``e_1..e_L = LSTM_enc(W_in x_1 .. W_in x_L)`` (hidden size H);
* decoder step t (t = 1..L): input ``[emb(d_{t-1}); e_t]`` where ``emb`` is a trainable embedding per
  device (plus one start token for t = 1); ``h_t = LSTMCell_dec(input, h_{t-1})`` with ``h_0`` the
  encoder's final state;
* attention (Bahdanau et al. 2015, additive / content-based): ``a_tj = softmax_j(v . tanh(W_e e_j +
  W_h h_t))``, context ``c_t = sum_j a_tj e_j``;
* logits ``u_t = W_o [h_t; c_t]``, then ``C tanh(u_t / T)`` (HP section 3: tanh constant and
  temperature), plus a caller's per-position logit ``prior`` when given (Mars holds its samples near
  an anchor placement this way, :class:`placer.methods.learned.graph_ppo.Anchor`), devices an input cannot
  run on set to -inf, and ``d_t`` drawn from the softmax (or its argmax when greedy).

Where the papers are silent and we chose:

* the decoder also reads ``e_t``, the encoder state aligned with step t (``feed_aligned``): the
  output sequence is aligned with the input one, and content-based attention has no notion of
  position to find it by;
* the order of temperature and tanh: ``C tanh(u / T)``;
* one LSTM layer each for encoder and decoder; the encoder bidirectional on request (Placeto's appendix
  A.7 ran the RNN-based baseline with "a bi-directional RNN with a hidden size of 512 units").

Segments: a caller can decode a long sequence piece by piece (as Mars's segment-level placer does):
pass the :class:`Seq2SeqState` returned for one segment as ``state`` of the next. The encoder and the
decoder then continue from their states and the previous segment's last device; attention covers
the current segment only.

Sampling is deterministic given the ``torch.Generator`` passed in (inverse-CDF on uniform draws, in
float64), whatever the number of torch threads.

Scoring given devices (teacher forcing, as PPO's K epochs re-score the batch they sampled) has two
paths with the same results up to float32 rounding: ``forward(..., actions=...)``, the step loop
above, and :func:`teacher_forced`, parallel over positions. The decoder's input at step t,
``[emb(d_{t-1}); e_t]``, is then known for every t in advance and its recurrence does not read the
attention (the context enters only the logits), so the decoder is one fused LSTM call over the whole
sequence and the attention one (B, L, L, A) tensor expression, in blocks of decoder steps to bound
memory. Mars scores with :func:`teacher_forced`; ColocRL and the Hierarchical Planner with the step
loop (switching them would change their float32 rounding, hence their results).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
from torch import nn

BLOCK_ELEMENTS = 1 << 24  # most elements of one block of teacher_forced's (B, L_t, L, A) attention tensor

@dataclass(frozen=True)
class Seq2SeqConfig:
    """Shape of the network (the method configs map their fields onto this)."""

    n_features: int  # F: features per input position
    n_devices: int  # D: devices to choose between
    hidden: int = 256  # H: LSTM hidden size of encoder and decoder (our choice; the papers give none we could confirm)
    device_embed: int = 32  # size of each device's trainable embedding (our choice)
    attention: int = 64  # size of the additive-attention layer (our choice)
    tanh_c: float = 5.0  # C: logits are C tanh(u / T) (HP section 3: C = 5.0)
    temperature: float = 10.0  # T (HP section 3: T = 10.0)
    feed_aligned: bool = True  # decoder input also carries e_t, the encoder state aligned with step t (our choice)
    bidirectional: bool = False  # encoder reads both ways, H/2 units per direction (Placeto A.7's RNN-based baseline)

    def to_dict(self) -> dict:
        return asdict(self)


class Seq2SeqState(NamedTuple):
    """Recurrent state carried from one segment to the next."""

    enc: tuple[torch.Tensor, torch.Tensor]  # encoder (h, c), each (B, H)
    dec: tuple[torch.Tensor, torch.Tensor]  # decoder (h, c), each (B, H)
    last: torch.Tensor  # (B,) int64, the device decoded last (D = the start token)


class Seq2SeqOutput(NamedTuple):
    devices: torch.Tensor  # (B, L) int64, the device of each input, in input order
    log_prob: torch.Tensor  # (B,) sum over positions of log p(d_t | d_<t, x)
    entropy: torch.Tensor  # (B,) sum over positions of the entropy of each step's distribution
    state: Seq2SeqState  # final recurrent state (pass to the next segment)
    attention: torch.Tensor | None  # (B, L, L) attention weights per decoder step, when asked for


def sample_categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row of ``probs`` (B, D), by inverse CDF in float64 from the generator's uniform
    draws. An entry with probability 0 is never drawn."""
    p = probs.detach().to(torch.float64)
    cdf = torch.cumsum(p, dim=1)
    r = torch.rand(p.shape[0], 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
    idx = (cdf <= r).sum(dim=1)  # first index whose cdf exceeds r: it has positive mass
    last_pos = (p > 0).to(torch.int64).cumsum(dim=1).argmax(dim=1)  # guard against r == total by rounding
    return torch.minimum(idx, last_pos)


def batch_mask(mask, B: int, L: int, D: int) -> torch.Tensor:
    """``mask`` ((L, D) or (B, L, D)) as a (B, L, D) bool tensor; ValueError when its shape is wrong or
    an input has no allowed device."""
    mask = torch.as_tensor(mask, dtype=torch.bool)
    if mask.dim() == 2:
        mask = mask.unsqueeze(0).expand(B, L, D)
    if mask.shape != (B, L, D):
        raise ValueError(f"mask must be ({L}, {D}) or ({B}, {L}, {D})")
    if not bool(mask.any(dim=2).all()):
        raise ValueError("every input needs at least one allowed device")
    return mask


def batch_prior(prior, B: int, L: int, D: int) -> torch.Tensor:
    """A logit ``prior`` ((L, D) or (B, L, D)) as a (B, L, D) float tensor; ValueError when its shape is wrong."""
    prior = torch.as_tensor(prior, dtype=torch.float32)
    if prior.dim() == 2:
        prior = prior.unsqueeze(0)
    if prior.dim() != 3 or prior.shape[1:] != (L, D) or prior.shape[0] not in (1, B):
        raise ValueError(f"prior must be ({L}, {D}) or ({B}, {L}, {D}), got {tuple(prior.shape)}")
    return prior.expand(B, L, D)


class Seq2SeqPlacer(nn.Module):
    """LSTM encoder-decoder with content-based attention over the inputs, one device per input."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        if cfg.n_devices < 1 or cfg.n_features < 1:
            raise ValueError("a seq2seq placer needs at least one feature and one device")
        self.cfg = cfg
        H = cfg.hidden
        self.inp = nn.Linear(cfg.n_features, H)
        self.n_dir = 2 if cfg.bidirectional else 1
        if H % self.n_dir:
            raise ValueError("a bidirectional encoder needs an even hidden size")
        self.encoder = nn.LSTM(H, H // self.n_dir, batch_first=True, bidirectional=cfg.bidirectional)
        self.device_emb = nn.Embedding(cfg.n_devices + 1, cfg.device_embed)  # index D: the start token
        self.decoder = nn.LSTMCell(cfg.device_embed + (H if cfg.feed_aligned else 0), H)
        self.att_e = nn.Linear(H, cfg.attention, bias=False)
        self.att_h = nn.Linear(H, cfg.attention)
        self.att_v = nn.Linear(cfg.attention, 1, bias=False)
        self.out = nn.Linear(2 * H, cfg.n_devices)

    # ------------------------------------------------------------------ pieces
    def initial_state(self, batch: int) -> Seq2SeqState:
        z = torch.zeros(batch, self.cfg.hidden)
        return Seq2SeqState((z, z), (z, z), torch.full((batch,), self.cfg.n_devices, dtype=torch.int64))

    def encode(self, x: torch.Tensor, state: Seq2SeqState | None = None):
        """Encoder outputs (B, L, H) and its final (h, c), each (B, H) (both directions side by side
        when bidirectional; a later segment's backward direction then starts from the previous
        segment's backward state, a carry with no meaning in time order)."""
        B = x.shape[0]
        st = state if state is not None else self.initial_state(B)
        nd, H = self.n_dir, self.cfg.hidden
        split = lambda t: t.reshape(B, nd, H // nd).transpose(0, 1).contiguous()  # noqa: E731
        join = lambda t: t.transpose(0, 1).reshape(B, H)  # noqa: E731
        e, (h, c) = self.encoder(torch.tanh(self.inp(x)), (split(st.enc[0]), split(st.enc[1])))
        return e, (join(h), join(c))

    @staticmethod
    def _expand_state(st: Seq2SeqState, n: int) -> Seq2SeqState:
        rep = lambda t: t.expand(n, *t.shape[1:]).contiguous()  # noqa: E731
        return Seq2SeqState((rep(st.enc[0]), rep(st.enc[1])), (rep(st.dec[0]), rep(st.dec[1])), rep(st.last))

    # ------------------------------------------------------------------ the forward pass
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, samples: int | None = None,
                greedy: bool = False, actions: torch.Tensor | None = None, generator: torch.Generator | None = None,
                state: Seq2SeqState | None = None, return_attention: bool = False,
                prior: torch.Tensor | None = None) -> Seq2SeqOutput:
        """Decode one device per input position.

        ``x``: (B, L, F) float features (or (L, F), read as B = 1). ``mask``: (L, D) or (B, L, D)
        bool, True where the input may go on the device (every row needs one True); None allows
        all. ``samples``: with B = 1, encode once and decode this many placements from it (batched
        sampling in one pass). ``greedy``: argmax instead of sampling. ``actions``: (B, L) devices to
        score instead of choosing (teacher forcing: log-probs and entropy of given placements).
        ``state``: the :class:`Seq2SeqState` a previous segment returned. ``prior``: (L, D) or
        (B, L, D) float added to each position's logits after the tanh (None: nothing). Gradients flow to
        ``log_prob`` and ``entropy``; the devices are integers."""
        cfg = self.cfg
        if x.dim() == 2:
            x = x.unsqueeze(0)
        if x.dim() != 3 or x.shape[2] != cfg.n_features:
            raise ValueError(f"x must be (B, L, {cfg.n_features}), got {tuple(x.shape)}")
        B, L, _ = x.shape
        if state is not None and state.last.shape[0] != B:  # a later segment of a batch of samples
            if B != 1:
                raise ValueError(f"state has batch {state.last.shape[0]}, x has {B}")
            B = state.last.shape[0]
            x = x.expand(B, L, x.shape[2])
        e, enc_final = self.encode(x, state)
        pre = self.att_e(e)  # (B, L, A): the encoder side of the attention, once per sequence
        st = state if state is not None else self.initial_state(B)
        if samples is not None and samples != B:
            if B != 1:
                raise ValueError("samples= needs a batch of one input sequence")
            e = e.expand(samples, L, e.shape[2])
            pre = pre.expand(samples, L, pre.shape[2])
            enc_final = (enc_final[0].expand(samples, -1), enc_final[1].expand(samples, -1))
            st = self._expand_state(st, samples)
            B = samples
        if actions is not None:
            actions = torch.as_tensor(actions, dtype=torch.int64)
            if actions.shape != (B, L):
                raise ValueError(f"actions must be ({B}, {L}), got {tuple(actions.shape)}")
        if mask is not None:
            mask = batch_mask(mask, B, L, cfg.n_devices)
        if prior is not None:
            prior = batch_prior(prior, B, L, cfg.n_devices)
        # the decoder starts from the encoder's final state (first segment) or its own (later ones)
        h, c = (enc_final if state is None else st.dec)
        prev = st.last
        # LSTMCell arithmetic written out so that the input-side products are taken once, outside
        # the loop: gates = W_ih [emb(d_{t-1}); e_t] + b + W_hh h (gate order i, f, g, o as nn.LSTMCell)
        E = cfg.device_embed
        W_ih, W_hh = self.decoder.weight_ih, self.decoder.weight_hh
        emb_gates = self.device_emb.weight @ W_ih[:, :E].t()  # (D + 1, 4H)
        bias = self.decoder.bias_ih + self.decoder.bias_hh
        pos_gates = (e @ W_ih[:, E:].t() + bias) if cfg.feed_aligned else bias.expand(B, L, bias.shape[0])
        devices, logps, ents, atts = [], [], [], []
        for t in range(L):
            gates = pos_gates[:, t] + emb_gates[prev] + h @ W_hh.t()
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            score = self.att_v(torch.tanh(pre + self.att_h(h).unsqueeze(1))).squeeze(2)  # (B, L)
            a = torch.softmax(score, dim=1)
            ctx = torch.bmm(a.unsqueeze(1), e).squeeze(1)
            u = cfg.tanh_c * torch.tanh(self.out(torch.cat([h, ctx], dim=1)) / cfg.temperature)
            if prior is not None:
                u = u + prior[:, t]
            if mask is not None:
                u = u.masked_fill(~mask[:, t], float("-inf"))
            logp = torch.log_softmax(u, dim=1)
            p = logp.exp()
            if actions is not None:
                d = actions[:, t]
            elif greedy:
                d = torch.argmax(logp.detach(), dim=1)
            else:
                d = sample_categorical(p, generator)
            logps.append(logp.gather(1, d.unsqueeze(1)).squeeze(1))
            ents.append(-(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(dim=1))
            devices.append(d)
            if return_attention:
                atts.append(a)
            prev = d
        dev = torch.stack(devices, dim=1) if L else torch.zeros(B, 0, dtype=torch.int64)
        lp = torch.stack(logps, dim=1).sum(dim=1) if L else torch.zeros(B)
        ent = torch.stack(ents, dim=1).sum(dim=1) if L else torch.zeros(B)
        final = Seq2SeqState(enc_final, (h, c), prev)
        return Seq2SeqOutput(dev, lp, ent, final, torch.stack(atts, dim=1) if return_attention and L else None)


def teacher_forced(net: Seq2SeqPlacer, x: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None,
                   state: Seq2SeqState | None = None, prior: torch.Tensor | None = None) -> Seq2SeqOutput:
    """Log-probabilities and entropies of the given devices ``actions`` (B, L) for inputs ``x``
    ((L, F), (1, L, F) or (B, L, F)), with ``mask``, ``state`` and ``prior`` as in
    :meth:`Seq2SeqPlacer.forward`, in one pass over positions (see the module docstring). Returns the
    :class:`Seq2SeqOutput` of ``forward(x, mask, actions=actions, state=state, prior=prior)`` up to float32
    rounding, without attention weights."""
    cfg = net.cfg
    actions = torch.as_tensor(actions, dtype=torch.int64)
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if actions.dim() != 2 or x.dim() != 3 or x.shape[1] != actions.shape[1] or x.shape[2] != cfg.n_features:
        raise ValueError(f"x must be (B, L, {cfg.n_features}) and actions (B, L), got {tuple(x.shape)}, "
                         f"{tuple(actions.shape)}")
    B, L = actions.shape
    if x.shape[0] not in (1, B):
        raise ValueError(f"x has batch {x.shape[0]}, actions {B}")
    if state is not None and state.last.shape[0] != B:
        if state.last.shape[0] != 1:
            raise ValueError(f"state has batch {state.last.shape[0]}, actions {B}")
        state = net._expand_state(state, B)
    if mask is not None:
        mask = batch_mask(mask, B, L, cfg.n_devices)
    st = state if state is not None else net.initial_state(B)
    # the encoder does not read the devices: one input sequence and one encoder state (every row
    # equal, as after a first segment encoded once) are encoded once and shared by the B rows
    if x.shape[0] == 1 and (state is None or all(bool((t == t[:1]).all()) for t in state.enc)):
        one = None if state is None else state._replace(enc=(state.enc[0][:1], state.enc[1][:1]))
        e, (hf, cf) = net.encode(x, one)
        e, enc_final = e.expand(B, L, e.shape[2]), (hf.expand(B, -1), cf.expand(B, -1))
    else:
        e, enc_final = net.encode(x.expand(B, L, x.shape[2]), state)
    if L == 0:
        z = torch.zeros(B)
        return Seq2SeqOutput(actions, z, z, Seq2SeqState(enc_final, st.dec if state is not None else enc_final,
                                                         st.last), None)
    h0, c0 = enc_final if state is None else st.dec
    prev = torch.cat([st.last.unsqueeze(1), actions[:, :-1]], dim=1)  # d_{t-1}, the start token (or carry) first
    inp = net.device_emb(prev)
    if cfg.feed_aligned:
        inp = torch.cat([inp, e], dim=2)
    dec = net.decoder
    hs, hT, cT = torch.lstm(inp, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()),
                              [dec.weight_ih, dec.weight_hh, dec.bias_ih, dec.bias_hh],
                              True, 1, 0.0, net.training, False, True)  # biases, 1 layer, no dropout, batch-first
    pre = net.att_e(e)  # (B, L, A)
    q = net.att_h(hs)  # (B, L, A)
    block = max(1, BLOCK_ELEMENTS // max(1, B * L * pre.shape[2]))
    ctx = []
    for t0 in range(0, L, block):
        s = net.att_v(torch.tanh(pre.unsqueeze(1) + q[:, t0:t0 + block].unsqueeze(2))).squeeze(3)  # (B, Lt, L)
        ctx.append(torch.bmm(torch.softmax(s, dim=2), e))
    u = cfg.tanh_c * torch.tanh(net.out(torch.cat([hs, torch.cat(ctx, dim=1)], dim=2)) / cfg.temperature)
    if prior is not None:
        u = u + batch_prior(prior, B, L, cfg.n_devices)
    if mask is not None:
        u = u.masked_fill(~mask, float("-inf"))
    logp = torch.log_softmax(u, dim=2)
    p = logp.exp()
    lp = logp.gather(2, actions.unsqueeze(2)).squeeze(2).sum(dim=1)
    ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(dim=2).sum(dim=1)
    return Seq2SeqOutput(actions, lp, ent, Seq2SeqState(enc_final, (hT[0], cT[0]), actions[:, -1]), None)
