"""Teacher-forced scoring of a :class:`placer.nn.seq2seq.Seq2SeqPlacer`, parallel over positions.

When the devices are given (PPO's K epochs re-score the batch it sampled), the decoder's input at
step t, ``[emb(d_{t-1}); e_t]``, is known for every t in advance and its recurrence does not read
the attention (the context enters only the logits, ``u_t = W_o [h_t; c_t]``; see the seq2seq
module). So the decoder is one fused LSTM call over the whole sequence, and the additive attention
``a_tj = softmax_j(v . tanh(W_e e_j + W_h h_t))`` is one (B, L, L, A) tensor expression (in blocks of
decoder steps to bound memory), where :meth:`Seq2SeqPlacer.forward` takes one Python step, and
autograd one backward node chain, per position.

Same network, same arguments and same results as ``forward(x, mask, actions=..., state=...)`` up to
float32 rounding (``tests/test_seq2seq.py`` checks log-probabilities, entropies, final states and
gradients against it). Measured on Mars, GNMT on 4 K80s (1,024 nodes in 8 segments of 128, batch 8,
one core): one PPO update (K = 4 scoring passes with their backward) took 11.7 s with the step loop
and 5.7 s with this; one segment's scoring with its backward 0.34 s -> 0.18 s (the rest is the
(B, L, L, A) attention's tanh and the LSTMs; the Mars docstring has the whole run). The
Hierarchical Planner and ColocRL still score with the step loop: switching them changes their float32 rounding, so their committed
tables would have to be rerun (hp-table1, post-table1, placeto-table1)."""

from __future__ import annotations

import torch

from placer.nn.seq2seq import Seq2SeqOutput, Seq2SeqPlacer, Seq2SeqState

BLOCK_ELEMENTS = 1 << 24  # most elements of one block of the (B, L_t, L, A) attention tensor


def teacher_forced(net: Seq2SeqPlacer, x: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None,
                   state: Seq2SeqState | None = None) -> Seq2SeqOutput:
    """Log-probabilities and entropies of the given devices ``actions`` (B, L) for inputs ``x``
    ((L, F), (1, L, F) or (B, L, F)), with ``mask`` and ``state`` as in
    :meth:`Seq2SeqPlacer.forward`. Returns its :class:`Seq2SeqOutput` (no attention weights)."""
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
        mask = torch.as_tensor(mask, dtype=torch.bool)
        if mask.dim() == 2:
            mask = mask.unsqueeze(0).expand(B, L, cfg.n_devices)
        if mask.shape != (B, L, cfg.n_devices):
            raise ValueError(f"mask must be ({L}, {cfg.n_devices}) or ({B}, {L}, {cfg.n_devices})")
        if not bool(mask.any(dim=2).all()):
            raise ValueError("every input needs at least one allowed device")
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
    if mask is not None:
        u = u.masked_fill(~mask, float("-inf"))
    logp = torch.log_softmax(u, dim=2)
    p = logp.exp()
    lp = logp.gather(2, actions.unsqueeze(2)).squeeze(2).sum(dim=1)
    ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(dim=2).sum(dim=1)
    return Seq2SeqOutput(actions, lp, ent, Seq2SeqState(enc_final, (hT[0], cT[0]), actions[:, -1]), None)
