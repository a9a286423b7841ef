"""The seq2seq placer (placer.nn.seq2seq): shapes, attention, masking, determinism, teacher forcing,
segment-by-segment decoding, and that REINFORCE through it learns a target placement."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.nn.seq2seq import Seq2SeqConfig, Seq2SeqPlacer, sample_categorical  # noqa: E402


def net(F=5, D=3, H=16, seed=0, **kw):
    torch.manual_seed(seed)
    return Seq2SeqPlacer(Seq2SeqConfig(n_features=F, n_devices=D, hidden=H, device_embed=8, attention=8, **kw))


@pytest.mark.parametrize("L", [1, 2, 7, 19])
def test_attention_sums_to_one_and_one_device_per_input(L):
    m = net()
    x = torch.randn(2, L, 5)
    out = m(x, generator=torch.Generator().manual_seed(0), return_attention=True)
    assert out.devices.shape == (2, L) and out.log_prob.shape == (2,) and out.entropy.shape == (2,)
    assert out.attention.shape == (2, L, L)
    assert torch.allclose(out.attention.sum(dim=2), torch.ones(2, L), atol=1e-6)
    assert (out.attention >= 0).all()
    assert ((out.devices >= 0) & (out.devices < 3)).all()


def test_masked_devices_are_never_chosen():
    m = net(D=4)
    L = 12
    rng = np.random.default_rng(1)
    mask = rng.random((L, 4)) < 0.4
    mask[np.arange(L), rng.integers(0, 4, L)] = True  # every input keeps one device
    mask = torch.as_tensor(mask)
    g = torch.Generator().manual_seed(3)
    out = m(torch.randn(1, L, 5), mask, samples=300, generator=g)
    chosen = mask[torch.arange(L).expand(300, L), out.devices]
    assert chosen.all()
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.entropy).all()
    greedy = m(torch.randn(1, L, 5), mask, greedy=True)
    assert mask[torch.arange(L), greedy.devices[0]].all()
    # an input with a single allowed device: always that device, log-prob 0 there
    only = torch.zeros(L, 4, dtype=torch.bool)
    only[:, 2] = True
    out = m(torch.randn(1, L, 5), only, samples=5, generator=g)
    assert (out.devices == 2).all() and torch.allclose(out.log_prob, torch.zeros(5), atol=1e-6)
    with pytest.raises(ValueError, match="at least one allowed"):
        m(torch.randn(1, L, 5), torch.zeros(L, 4, dtype=torch.bool))


def test_sampler_never_draws_zero_probability_and_follows_probabilities():
    p = torch.tensor([[0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0], [0.2, 0.0, 0.8, 0.0]])
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_categorical(p, g) for _ in range(2000)])
    assert set(draws[:, 0].tolist()) == {1, 3} and set(draws[:, 1].tolist()) == {2}
    assert set(draws[:, 2].tolist()) == {0, 2}
    assert abs((draws[:, 2] == 2).float().mean().item() - 0.8) < 0.04


def test_same_generator_same_samples_and_teacher_forcing_agrees():
    m = net()
    x = torch.randn(1, 9, 5)
    a = m(x, samples=6, generator=torch.Generator().manual_seed(11))
    b = m(x, samples=6, generator=torch.Generator().manual_seed(11))
    assert torch.equal(a.devices, b.devices) and torch.equal(a.log_prob, b.log_prob)
    forced = m(x, samples=6, actions=a.devices)
    assert torch.allclose(forced.log_prob, a.log_prob, atol=1e-5)
    assert torch.allclose(forced.entropy, a.entropy, atol=1e-5)
    # batched sampling from one encoding equals decoding the expanded batch
    batch = m(x.expand(6, 9, 5), actions=a.devices)
    assert torch.allclose(batch.log_prob, a.log_prob, atol=1e-5)


def test_threads_do_not_change_samples():
    m = net(H=64)
    x = torch.randn(1, 30, 5)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = m(x, samples=8, generator=torch.Generator().manual_seed(5))
        torch.set_num_threads(2)
        b = m(x, samples=8, generator=torch.Generator().manual_seed(5))
    finally:
        torch.set_num_threads(old)
    assert torch.equal(a.devices, b.devices)
    assert torch.allclose(a.log_prob, b.log_prob, atol=1e-4)


def test_segments_continue_the_recurrent_state():
    m = net()
    x = torch.randn(1, 10, 5)
    e_full, fin = m.encode(x)
    first = m(x[:, :6], greedy=True)
    e2, fin2 = m.encode(x[:, 6:], first.state)
    assert torch.allclose(e_full[:, 6:], e2, atol=1e-5)  # the encoder continues where it stopped
    assert torch.allclose(fin[0], fin2[0], atol=1e-5)
    second = m(x[:, 6:], greedy=True, state=first.state)
    assert second.devices.shape == (1, 4)
    assert second.state.last.item() == second.devices[0, -1].item()
    fresh = m(x[:, 6:], greedy=True)
    assert not torch.allclose(second.log_prob, fresh.log_prob)  # the state is used
    # a batch of samples carries its own decoder state per sample into the next segment
    s1 = m(x[:, :6], samples=4, generator=torch.Generator().manual_seed(0))
    s2 = m(x[:, 6:], state=s1.state, generator=torch.Generator().manual_seed(1))
    assert s2.devices.shape == (4, 4)


def test_gradients_reach_every_parameter():
    m = net()
    out = m(torch.randn(1, 6, 5), samples=3, generator=torch.Generator().manual_seed(0))
    (out.log_prob.sum() + out.entropy.sum()).backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert any(p.grad.abs().sum() > 0 for p in m.parameters())


def test_reinforce_learns_a_target_placement():
    """REINFORCE with a moving-average baseline through the network finds a fixed target sequence."""
    L, D = 6, 3
    m = net(D=D, H=32)
    target = torch.tensor([0, 2, 1, 1, 0, 2])
    x = torch.randn(1, L, 5, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(0)
    base = None
    for _ in range(150):
        out = m(x, samples=8, generator=g)
        r = (out.devices == target).float().mean(dim=1)
        base = r.mean() if base is None else 0.9 * base + 0.1 * r.mean()
        loss = -((r - base) * out.log_prob).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.equal(m(x, greedy=True).devices[0], target)


def test_bidirectional_encoder_shapes_and_masking():
    m = net(H=16, bidirectional=True)
    x = torch.randn(1, 8, 5)
    mask = torch.ones(8, 3, dtype=torch.bool)
    mask[:, 0] = False
    out = m(x, mask, samples=5, generator=torch.Generator().manual_seed(0), return_attention=True)
    assert out.devices.shape == (5, 8) and (out.devices != 0).all()
    assert torch.allclose(out.attention.sum(dim=2), torch.ones(5, 8), atol=1e-6)
    nxt = m(x, mask, state=out.state, generator=torch.Generator().manual_seed(1))
    assert nxt.devices.shape == (5, 8)


@pytest.mark.parametrize("bidirectional,with_prior", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("feed_aligned", [True, False])
def test_teacher_forced_scoring_equals_the_step_loop(bidirectional, with_prior, feed_aligned, monkeypatch):
    """placer.nn.seq2seq.teacher_forced scores given devices in one pass over positions: the same
    log-probabilities, entropies, carried states and gradients as forward(actions=...), over two
    segments (the second continuing the first's per-sample state), with a mask, with a logit prior,
    with inputs that differ per row, and with the attention computed in blocks of a few decoder steps."""
    from placer.nn import seq2seq
    from placer.nn.seq2seq import teacher_forced

    monkeypatch.setattr(seq2seq, "BLOCK_ELEMENTS", 3 * 4 * 9 * 8)  # blocks of 3 of the 9 steps
    m = net(D=4, H=16, bidirectional=bidirectional, feed_aligned=feed_aligned)
    x = torch.randn(1, 16, 5)
    mask = torch.rand(16, 4) > 0.3
    mask[torch.arange(16), torch.randint(0, 4, (16,))] = True
    pr = 3.0 * torch.randn(16, 4) if with_prior else None
    cut = (lambda lo, hi: None) if pr is None else (lambda lo, hi: pr[lo:hi])
    with torch.no_grad():
        first = m(x[:, :9], mask[:9], samples=4, generator=torch.Generator().manual_seed(0), prior=cut(0, 9))
        second = m(x[:, 9:], mask[9:], state=first.state, generator=torch.Generator().manual_seed(1),
                   prior=cut(9, 16))
    acts = torch.cat([first.devices, second.devices], dim=1)

    def run(score):
        m.zero_grad()
        a = score(x[:, :9], acts[:, :9], mask[:9], None, cut(0, 9))
        b = score(x[:, 9:], acts[:, 9:], mask[9:], a.state, cut(9, 16))
        (a.log_prob.sum() + b.log_prob.sum() + 0.1 * (a.entropy.sum() + b.entropy.sum())).backward()
        return a, b, {k: p.grad.clone() for k, p in m.named_parameters()}

    loop = run(lambda xx, aa, mm, st, pp: m(xx, mm, samples=4 if st is None else None, actions=aa, state=st,
                                            prior=pp))
    fused = run(lambda xx, aa, mm, st, pp: teacher_forced(m, xx, aa, mm, st, pp))
    for lo, fu in zip(loop[:2], fused[:2]):
        assert torch.equal(lo.devices, fu.devices)
        assert torch.allclose(lo.log_prob, fu.log_prob, atol=1e-4)
        assert torch.allclose(lo.entropy, fu.entropy, atol=1e-4)
        for s_lo, s_fu in zip(lo.state.enc + lo.state.dec, fu.state.enc + fu.state.dec):
            assert torch.allclose(s_lo, s_fu, atol=1e-5)
        assert torch.equal(lo.state.last, fu.state.last)
    assert torch.allclose(loop[0].log_prob, first.log_prob, atol=1e-4)  # what the sampler reported
    for k, g in loop[2].items():
        assert torch.allclose(g, fused[2][k], atol=1e-4, rtol=1e-3), k
    # inputs that differ per row (no shared encoding)
    xb = torch.randn(4, 9, 5)
    lo = m(xb, actions=acts[:, :9])
    fu = teacher_forced(m, xb, acts[:, :9])
    assert torch.allclose(lo.log_prob, fu.log_prob, atol=1e-4) and torch.allclose(lo.entropy, fu.entropy, atol=1e-4)
    with pytest.raises(ValueError):
        teacher_forced(m, torch.randn(2, 9, 5), acts[:, :9])


def test_a_strong_logit_prior_holds_the_samples_on_its_devices_and_a_bad_shape_is_refused():
    """A prior of +50 on one device per position outweighs the network's logits (at most C = 5 in
    size): every sample and the greedy decode follow it; a prior of the wrong shape is refused."""
    m = net(D=3, H=16)
    target = torch.arange(10) % 3
    pr = torch.zeros(10, 3)
    pr[torch.arange(10), target] = 50.0
    with torch.no_grad():
        out = m(torch.randn(1, 10, 5), samples=6, generator=torch.Generator().manual_seed(0), prior=pr)
        greedy = m(torch.randn(1, 10, 5), greedy=True, prior=pr)
    assert torch.equal(out.devices, target.expand(6, 10)) and torch.equal(greedy.devices[0], target)
    with pytest.raises(ValueError, match="prior"):
        m(torch.randn(1, 10, 5), prior=torch.zeros(9, 3))
