"""The REINFORCE estimator written once (placer.rl.estimator): each paper's returns, baseline and
advantages on a 3-4 step example computed by hand, and the score-function loss whose gradient is the
hand-computed REINFORCE gradient of a tiny categorical policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.rl import estimator as E  # noqa: E402


def test_returns_to_go_undiscounted_and_discounted():
    r = [1.0, -2.0, 0.5, 3.0]
    assert E.returns_to_go(r).tolist() == [2.5, 1.5, 3.5, 3.0]
    assert E.returns_to_go(r, 0.5).tolist() == [0.5, -1.0, 2.0, 3.0]  # 3; 0.5 + 1.5; -2 + 1; 1 - 0.5
    assert E.placeto(0.5, 10).returns_of(r).tolist() == [0.5, -1.0, 2.0, 3.0]
    R = np.array([-1.0, -3.0])
    assert E.colocrl(0.9).returns_of(R) is R  # one reward per sample: the return is the reward


def test_placeto_window_mean_of_earlier_episodes_and_its_rms():
    est = E.placeto(1.0, window=2, rms=True)
    base = est.new_baseline()
    assert isinstance(base, E.WindowMean) and base.value() is None and est.scale(base) == 1.0
    base.add(np.array([1.0, 2.0, 3.0]))
    assert base.value().tolist() == [1.0, 2.0, 3.0] and est.scale(base) == 1.0  # fewer than two episodes
    base.add(np.array([3.0, 2.0, 1.0]))
    assert base.value().tolist() == [2.0, 2.0, 2.0]
    base.add(np.array([5.0, 5.0, 5.0]))  # the window keeps the last two
    assert base.value().tolist() == [4.0, 3.5, 3.0]
    # deviations from that mean: (-1, -1.5, -2) and (1, 1.5, 2): RMS sqrt((1 + 2.25 + 4) / 3)
    rms = math.sqrt(7.25 / 3)
    assert est.scale(base) == pytest.approx(rms, rel=1e-15)
    G = np.array([4.0, 4.0, 4.0])
    assert est.advantages(G, base.value(), est.scale(base)) == pytest.approx(np.array([0.0, 0.5, 1.0]) / rms)
    assert E.placeto(1.0, 2).scale(base) == 1.0  # normalisation off
    assert est.advantages(G[:2], base.value()).tolist() == [0.0, 0.5]  # a capped episode: b cut to its length
    assert est.advantages(G, None).tolist() == [4.0, 4.0, 4.0]  # no baseline yet: b = 0


def test_colocrl_moving_average_opened_by_the_first_batch():
    est = E.colocrl(0.9)
    base = est.new_baseline()
    assert isinstance(base, E.MovingAverage) and base.b is None
    R1 = np.array([-1.0, -3.0])
    assert est.advantages(R1, base.value(R1)).tolist() == [1.0, -1.0]  # b = the first batch's mean, -2
    base.add(R1)
    assert base.b == pytest.approx(-2.0)
    R2 = np.array([-1.0, -1.0])
    assert est.advantages(R2, base.value(R2)) == pytest.approx([1.0, 1.0])
    base.add(R2)
    assert base.b == pytest.approx(0.9 * -2.0 + 0.1 * -1.0)  # -1.9
    R3 = np.array([0.0, -2.0])
    assert est.advantages(R3, base.value(R3)) == pytest.approx([1.9, -0.1])
    base.add(R3)
    assert base.b == pytest.approx(0.9 * -1.9 + 0.1 * -1.0)  # -1.81


def test_doppler_running_mean_of_earlier_rewards():
    est = E.doppler()
    base = est.new_baseline()
    assert isinstance(base, E.RunningMean)
    got = []
    for r in (-2.0, -1.0, -4.0, -3.0):
        got.append(est.advantages(r, base.value(r)))
        base.add(r)
    assert got == pytest.approx([0.0, 1.0, -2.5, -3.0 + 7 / 3], rel=1e-15)  # b: none (its own reward), -2, -1.5, -7/3
    opened = E.RunningMean(-1.0, 1)  # the teacher's reward opens DOPPLER's search-mode baseline
    assert est.advantages(-2.0, opened.value(-2.0)) == -1.0


def test_giph_per_step_decayed_mean_and_per_episode_std():
    est = E.giph(gamma=1.0, decay=0.5)
    base = est.new_baseline()
    assert isinstance(base, E.DecayedMean)
    G1 = est.returns_of([2.0, 1.0])  # returns-to-go (3, 1)
    assert G1.tolist() == [3.0, 1.0]
    b1 = base.value(G1)
    assert b1.tolist() == [2.0, 2.0]  # no step reached yet: the episode's mean return
    base.add(G1)
    assert base.b.tolist() == [3.0, 1.0]  # its returns open b_t
    assert est.advantages(G1, b1) == pytest.approx(np.array([1.0, -1.0]) / (1.0 + 1e-8), rel=1e-15)
    G2 = np.array([1.0, 1.0, 4.0])  # a longer episode
    b2 = base.value(G2)
    assert b2.tolist() == [3.0, 1.0, 2.0]  # step 3 unseen: the mean of G2
    base.add(G2)
    assert base.b.tolist() == [2.0, 1.0, 4.0]  # 0.5 * 3 + 0.5 * 1, 0.5 * 1 + 0.5 * 1, opened by 4
    A = np.array([-2.0, 0.0, 2.0])  # G2 - b2, over its std sqrt(8/3)
    assert est.advantages(G2, b2) == pytest.approx(A / (math.sqrt(8 / 3) + 1e-8), rel=1e-14)
    one = np.array([5.0])
    assert est.advantages(one, np.array([2.0])).tolist() == [3.0]  # one step: not normalised


def _policy(T=3, A=3):
    """A tiny categorical policy: one free logit per step and action."""
    theta = torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.75, -0.5], [1.5, 0.0, -2.0]][:T], dtype=torch.float64,
                         requires_grad=True)
    actions = torch.tensor([2, 1, 0][:T])
    logp_all = torch.log_softmax(theta, dim=-1)
    return theta, actions, logp_all.gather(1, actions[:, None])[:, 0], -(logp_all.exp() * logp_all).sum(dim=-1)


def _hand_gradient(theta, actions, adv, beta):
    """d/d theta of -sum_t [A_t log pi(a_t) + beta H_t]: -A_t (onehot(a_t) - p_t) - beta (-p_t (log p_t + H_t))."""
    p = torch.softmax(theta.detach(), dim=-1).numpy()
    onehot = np.eye(theta.shape[1])[actions.numpy()]
    H = -(p * np.log(p)).sum(axis=1, keepdims=True)
    return -np.asarray(adv)[:, None] * (onehot - p) + beta * p * (np.log(p) + H)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_the_loss_gradient_is_the_score_function_gradient(reduce):
    theta, actions, logp, ent = _policy()
    adv = np.array([0.5, -1.25, 2.0])  # exact in float32
    beta = 0.125
    est = E.Estimator("to-go", "window", reduce=reduce)
    loss = est.loss(logp, adv, ent, beta)
    loss.backward()
    n = 1 if reduce == "sum" else 3
    assert theta.grad.numpy() == pytest.approx(_hand_gradient(theta, actions, adv, beta) / n, rel=1e-12)
    want = -(adv * logp.detach().numpy()).sum() / n - beta * ent.detach().numpy().sum() / n
    assert float(loss.detach()) == pytest.approx(want, rel=1e-12)


def test_a_terminal_advantage_weights_every_step_and_the_batch_divides_it():
    """DOPPLER's form: into - A sum_t log pi / B - beta H, accumulated episode by episode."""
    theta, actions, logp, ent = _policy()
    A, B, beta = -0.75, 4, 0.5
    loss = E.doppler().loss(logp, A, ent.mean(), beta, batch=B, into=2.0)
    loss.backward()
    p = torch.softmax(theta.detach(), dim=-1).numpy()
    onehot = np.eye(3)[actions.numpy()]
    H = -(p * np.log(p)).sum(axis=1, keepdims=True)
    want = -A / B * (onehot - p) + beta / 3 * p * (np.log(p) + H)  # the entropy is the steps' mean
    assert theta.grad.numpy() == pytest.approx(want, rel=1e-12)
    assert float(loss.detach()) == pytest.approx(2.0 - A * float(logp.detach().sum()) / B - beta * float(ent.detach().mean()),
                                        rel=1e-12)
    _, _, logp2, _ = _policy()
    assert float(E.score_loss(logp2, A).detach()) == pytest.approx(-A * float(logp2.detach().sum()), rel=1e-12)  # no entropy


def test_giph_chunks_sum_to_the_whole_episode_loss():
    """GiPH backpropagates an episode in chunks of steps, each chunk's loss divided by T: the
    gradients add up to that of the whole episode's loss over T."""
    adv = np.array([0.5, -1.25, 2.0])
    est = E.giph(1.0, 0.9)
    theta, _, logp, ent = _policy()
    (est.loss(logp, adv, ent, 0.25) / 3).backward()
    chunked, actions, _, _ = _policy()
    for i, j in ((0, 2), (2, 3)):  # each chunk re-scored on its own
        lp_all = torch.log_softmax(chunked[i:j], dim=-1)
        h = -(lp_all.exp() * lp_all).sum(dim=-1)
        (est.loss(lp_all.gather(1, actions[i:j, None])[:, 0], adv[i:j], h, 0.25) / 3).backward()
    assert chunked.grad.numpy() == pytest.approx(theta.grad.numpy(), rel=1e-12)
    assert theta.grad.numpy() == pytest.approx(_hand_gradient(theta, actions, adv, 0.25) / 3, rel=1e-12)
