"""Mars (placer.methods.learned.mars) and PPO (placer.rl.ppo): the clipped objective against a hand
computation, the segment-level placer (segments in order, state carried across them, teacher forcing
reproducing sampling), pre-training on / off / from a given encoder state, same seed same placement,
policy states, fine-tune and checkpoint resume equality."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from placer.cluster import preset  # noqa: E402
from placer.errors import InputError  # noqa: E402
from placer.io import read_checkpoint, write_checkpoint  # noqa: E402
from placer.methods import Budget, get_method, run_method  # noqa: E402
from placer.methods.base import Evaluator  # noqa: E402
from placer.methods.learned.graph_ppo import check_policy, graph_ctx, policy_state, train  # noqa: E402
from placer.methods.learned.mars import MARS, MARS_METHOD, MarsConfig, make_mars_net  # noqa: E402
from placer.nn.encoder import EncoderConfig, graph_data, placement_nodes  # noqa: E402
from placer.nn.pretrain import PretrainConfig, check_encoder_state, encoder_state, pretrain  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.rl.ppo import PPOSettings, clipped_surrogate, normalize, ppo_update  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402

SMALL = dict(hidden=16, gnn_layers=1, seq_hidden=16, segment=8, batch=4, pretrain_epochs=3)


def problem(n=40, seed=0, cluster="k80x2"):
    return Problem(layered_training_graph(n, seed=seed), preset(cluster))


# ---------------------------------------------------------------------- PPO
def test_clipped_objective_matches_a_hand_computation():
    logp_old = torch.log(torch.tensor([[0.5, 0.2], [0.4, 0.1]]))
    logp_new = torch.log(torch.tensor([[0.7, 0.1], [0.3, 0.2]]))
    adv = torch.tensor([[1.0], [-2.0]])
    eps = 0.2
    # ratios: 1.4, 0.5 (A = +1) and 0.75, 2.0 (A = -2)
    # A > 0: min(r A, clip(r) A): min(1.4, 1.2) = 1.2; min(0.5, 0.8) = 0.5
    # A < 0: min(0.75 * -2, 0.8 * -2) = -1.6; min(2.0 * -2, 1.2 * -2) = -4.0
    expected = -(1.2 + 0.5 - 1.6 - 4.0) / 4
    loss, diag = clipped_surrogate(logp_new, logp_old, adv, eps)
    assert math.isclose(float(loss), expected, rel_tol=1e-6)
    assert math.isclose(diag["clip_fraction"], 1.0)  # every ratio is outside [0.8, 1.2]
    # the gradient flows only through the unclipped terms: 0.5 (A > 0, r < 1 - eps) and 2.0 (A < 0)
    lp = logp_new.clone().requires_grad_(True)
    clipped_surrogate(lp, logp_old, adv, eps)[0].backward()
    g = lp.grad
    assert g[0, 0] == 0 and g[1, 0] == 0
    assert math.isclose(float(g[0, 1]), -0.5 * 1.0 / 4, rel_tol=1e-6)  # d(-r A / 4)/d logp = -r A / 4
    assert math.isclose(float(g[1, 1]), -2.0 * -2.0 / 4, rel_tol=1e-6)


def test_at_the_old_policy_the_loss_is_minus_the_mean_advantage():
    lp = torch.randn(3, 5)
    adv = torch.tensor([0.5, -1.0, 2.0])[:, None]
    loss, diag = clipped_surrogate(lp, lp, adv, 0.2)
    assert math.isclose(float(loss), -float(adv.mean()), rel_tol=1e-6)
    assert diag["clip_fraction"] == 0 and diag["approx_kl"] == 0


def test_advantage_normalisation():
    a = normalize(np.array([1.0, 2.0, 3.0, 6.0]))
    assert abs(a.mean()) < 1e-12 and abs(a.std() - 1) < 1e-6
    assert (normalize(np.array([4.0])) == 0).all()
    t = normalize(torch.tensor([1.0, 3.0]))
    assert torch.allclose(t, torch.tensor([-1.0, 1.0]), atol=1e-6)


def test_ppo_update_runs_k_epochs_with_the_entropy_bonus():
    torch.manual_seed(0)
    theta = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.SGD([theta], lr=0.1)
    actions = torch.tensor([[0], [1], [0], [3]])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    calls = []

    def evaluate(idx):
        calls.append(len(idx))
        logp = torch.log_softmax(theta, dim=0)
        ent = -(logp.exp() * logp).sum().expand(len(idx), 1)
        return logp[actions[idx, 0]][:, None], ent

    with torch.no_grad():
        old = torch.log_softmax(theta, dim=0)[actions[:, 0]][:, None]
    ppo_update([theta], opt, [(4, evaluate, old, adv)], PPOSettings(epochs=3, minibatches=2, entropy=0.0),
               torch.Generator().manual_seed(0))
    assert calls == [2, 2, 2, 2, 2, 2]  # 3 epochs x 2 minibatches
    p = torch.softmax(theta.detach(), dim=0)
    assert p[0] > 0.25 and p[1] < 0.25 and p[3] < 0.25  # moved towards the positive advantages


# ---------------------------------------------------------------------- the segment-level placer
def _net(P, **kw):
    ctx = graph_ctx(P, 1024)
    torch.manual_seed(0)
    net = make_mars_net(MarsConfig(**{**SMALL, "pretrain": False, **kw}), ctx.gp.n_actions, [ctx], 0)
    return net, ctx


def test_sampling_places_every_node_once_and_teacher_forcing_reproduces_its_log_probs():
    net, ctx = _net(problem(60))
    assert ctx.n > 2 * SMALL["segment"]  # several segments
    a, lp = net.sample(ctx, 5, torch.Generator().manual_seed(1))
    assert a.shape == (5, ctx.n) and lp.shape == (5, -(-ctx.n // SMALL["segment"]))
    assert ctx.feasible[torch.arange(ctx.n), a].all()
    lp2, ent = net.evaluate(ctx, a)
    assert torch.allclose(lp, lp2, atol=1e-5) and (ent >= 0).all()
    g = net.greedy(ctx)
    assert g.shape == (ctx.n,)


def test_the_recurrent_state_is_carried_across_segments():
    """A later segment's distribution depends on what was placed in the earlier ones (the decoder
    state and last device are carried), so the same later devices score differently after a
    different first segment."""
    net, ctx = _net(problem(60))
    a = net.sample(ctx, 2, torch.Generator().manual_seed(3))[0]
    b = a.clone()
    S = SMALL["segment"]
    b[1, :S] = (a[0, :S] + 1) % ctx.gp.n_actions
    b[0, :S] = a[0, :S]
    b[1, S:] = b[0, S:]  # same devices after the first segment
    lp = net.evaluate(ctx, b)[0].detach()
    assert not torch.allclose(lp[0, 1:], lp[1, 1:])


def test_mars_respects_the_budget_and_same_seed_gives_the_same_placement():
    info = get_method("mars")
    assert info.family == "learned" and info.available() is None
    P = problem()
    a = run_method("mars", P, Budget(placements=10), seed=2, **SMALL)
    b = run_method("mars", P, Budget(placements=10), seed=2, **SMALL)
    assert a.cost.placements == 10
    assert np.array_equal(a.placement.devices, b.placement.devices) and a.curve == b.curve
    P.validate_placement(a.placement.devices)
    assert any("pre-trained with DGI on this graph" in n for n in a.notes)
    c = run_method("mars", P, Budget(placements=4), seed=2, **{**SMALL, "pretrain": False})
    assert any("not pre-trained" in n for n in c.notes)


def test_a_pretrained_encoder_state_is_loaded(tmp_path):
    P = problem()
    res = pretrain([graph_data(placement_nodes(P))], EncoderConfig("gcn", 16, 1), PretrainConfig(epochs=2))
    path = tmp_path / "enc.pt"
    write_checkpoint(encoder_state(res), path)  # as `placer pretrain` writes it
    enc = check_encoder_state(read_checkpoint(path))
    ctx = graph_ctx(P, 1024)
    net = make_mars_net(MarsConfig(**SMALL, encoder=enc), ctx.gp.n_actions, [ctx], 0)
    for k, v in res.encoder.state_dict().items():
        assert torch.equal(net.encoder.state_dict()[k], v)
    r = run_method("mars", P, Budget(placements=4), seed=0, encoder=enc, **SMALL)
    assert any("encoder pre-trained (given" in n for n in r.notes) and r.params["encoder"] == "given"
    with pytest.raises(InputError, match="needs"):
        run_method("mars", P, Budget(placements=4), seed=0, encoder=enc, **{**SMALL, "hidden": 32})
    with pytest.raises(InputError, match="not a placer encoder"):
        check_encoder_state({"format": "placer-mars-1"})


def test_a_frozen_encoder_is_not_trained():
    P = problem()
    net, ctx = _net(P, finetune_encoder=False)
    a, _ = net.sample(ctx, 3, torch.Generator().manual_seed(0))
    lp, ent = net.evaluate(ctx, a)
    (lp.sum() + ent.sum()).backward()
    assert all(p.grad is None for p in net.encoder.parameters())
    assert any(p.grad is not None for p in net.placer.parameters())


def test_policy_state_fine_tune_and_resume(tmp_path):
    P = problem()
    out = tmp_path / "mars.pt"
    _, state = MARS_METHOD.search(P, 0, Evaluator(P, limit=8), MarsConfig(**SMALL))
    write_checkpoint(state, out)
    state = check_policy(MARS, read_checkpoint(out))
    assert state["format"] == "placer-mars-1"
    Q = problem(50, 3)
    r, tuned = MARS_METHOD.finetune(Q, state, 0, Evaluator(Q, limit=5), MarsConfig(**{**SMALL, "finetune": 1}))
    assert r.cost.placements == 5 and any("greedy" in n for n in r.notes)
    assert tuned["update"] == 1 and MARS_METHOD.policy_state(tuned) is tuned
    # resume equality: 2 + 2 updates from a checkpoint == 4 updates straight through
    graphs = [problem(30, 1)]
    cfg = MarsConfig(**SMALL)
    straight = train(MARS, graphs, cfg, 16, 1)
    half = tmp_path / "half.pt"
    tr = train(MARS, graphs, cfg, 8, 1)
    write_checkpoint(policy_state(MARS, cfg, tr.graphs[0].gp.n_actions, tr), half)
    resumed = train(MARS, graphs, cfg, 16, 1, resume=read_checkpoint(half))
    assert resumed.update == straight.update == 4
    for (k, v), w in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(v, w), k
    assert resumed.best[0]["objective_us"] == straight.best[0]["objective_us"]
