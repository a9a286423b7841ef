"""REINFORCE for Placeto (appendix A.1, A.7): it learns the obviously best placement of a small graph,
the baseline never contains the current episode, checkpoints resume bit for bit, the backends agree,
the stopping rule fires, every episode is logged."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.cluster import Device, make_cluster, preset  # noqa: E402
from placer.graph import OpGraph  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.io import JsonLines, write_checkpoint  # noqa: E402
from placer.methods.learned.placeto import PlacetoConfig, build_trainer  # noqa: E402
from placer.rl.checkpoint import load_checkpoint, load_policy  # noqa: E402
from placer.nn.placeto import PlacetoNet, PolicyConfig  # noqa: E402
from placer.rl.env import EnvConfig  # noqa: E402
from placer.rl.task import make_task  # noqa: E402
from placer.rl.policy import PlacetoPolicy, place  # noqa: E402
from placer.rl.reinforce import linear  # noqa: E402
from placer.sim import SimParams  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402


def fast_slow_problem(n=12):
    """A chain on a fast and a slow GPU (10x): everything on the fast one is obviously best."""
    devs = [Device("gpu:0", "gpu", "fast", 16e9), Device("gpu:1", "gpu", "slow", 16e9)]
    cluster = make_cluster("fast-slow", devs, 7600.0, 0.0)
    names = [f"op{i}" for i in range(n)]
    edges = [(names[i], names[i + 1], 4e5) for i in range(n - 1)]
    g = OpGraph.build(names, edges, name="chain", compute_us={"fast": [100.0] * n, "slow": [1000.0] * n},
                      output_bytes=[4e5] * n)
    return Problem(g, cluster)


def trainer(graphs, env=None, backend="serial", processes=None, progress=None, *, episodes, seed=0, **settings):
    """A trainer with the paper's settings (:meth:`PlacetoConfig.paper`, the budget stopping it, on
    :class:`EnvConfig`'s MDP unless ``env``), ``settings`` overriding them."""
    cfg = PlacetoConfig.paper(**{"stop_window": 0, **settings}, backend=backend, processes=processes, progress=progress)
    return build_trainer(cfg, graphs, seed, SimParams(), episodes=episodes, env=env or EnvConfig())


@pytest.fixture(scope="module")
def small_gp():
    return make_task(Problem(layered_training_graph(60, seed=2), preset("k80x2")), "contiguous:8")


def test_reinforce_finds_the_obviously_best_placement():
    gp = make_task(fast_slow_problem(), "contiguous:6")
    tr = trainer([gp], EnvConfig(init="random", order="random"), episodes=120, workers=4, lr_start=1e-2, lr_end=1e-3,
                 entropy_start=0.01, entropy_end=0.0, seed=0)
    first = tr.step()
    tr.train()
    assert tr.episode == 120
    best = tr.best[0]
    assert best["objective_us"] == pytest.approx(1200.0)  # 12 ops x 100 us, no transfer
    assert best["placement"] == [0] * gp.n_groups
    out = place(PlacetoPolicy(tr.state_dict()), gp, greedy=True, episodes=2, seed=1)
    assert out.objective_us == pytest.approx(1200.0)
    assert out.final_objective_us == pytest.approx([1200.0, 1200.0])  # the greedy policy ends there
    assert np.mean([r.entropy for r in first]) > 0.5  # started near uniform over 2 devices (ln 2 = 0.69)
    assert np.mean(tr.history[-8:]) < np.mean(tr.history[:8])  # final placements improved


def test_baseline_is_the_mean_of_earlier_episodes_only(small_gp):
    tr = trainer([small_gp], episodes=12, workers=3, baseline_window=4, seed=1)
    assert tr._baseline(0) is None  # the first round has no baseline
    r1 = tr.step()
    assert np.allclose(tr._baseline(0), np.mean([r.returns for r in r1], axis=0))
    r2 = tr.step()
    window = [r.returns for r in (r1 + r2)][-4:]
    assert np.allclose(tr._baseline(0), np.mean(window, axis=0))
    assert len(r1[0].returns) == small_gp.n_groups


def test_schedules_decay_linearly():
    assert linear(1e-3, 1e-4, 0, 10) == pytest.approx(1e-3)
    assert linear(1e-3, 1e-4, 9, 10) == pytest.approx(1e-4)
    assert linear(1e-3, 1e-4, 3, 10) == pytest.approx(1e-3 - 3 * 1e-4)


def _params(tr):
    return {k: v.clone() for k, v in tr.net.state_dict().items()}


def test_checkpoint_resume_is_bit_for_bit(tmp_path, small_gp):
    rl = dict(episodes=16, workers=2, seed=3)
    env = EnvConfig(order="random", sweeps=1)
    with JsonLines(tmp_path / "a.jsonl") as a, JsonLines(tmp_path / "b.jsonl") as b:
        straight = trainer([small_gp], env, progress=a.write, **rl)
        straight.train()
        half = trainer([small_gp], env, progress=b.write, **rl)
        for _ in range(4):
            half.step()
        write_checkpoint(half.state_dict(), tmp_path / "ckpt.pt")
        resumed = trainer([small_gp], env, progress=b.write, **rl)
        state = load_checkpoint(tmp_path / "ckpt.pt")
        assert isinstance(torch.load(tmp_path / "ckpt.pt", weights_only=True), dict)
        resumed.load_state_dict(state)
        resumed.train()
    a, b = _params(straight), _params(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    sa, sb = straight.opt.state_dict()["state"], resumed.opt.state_dict()["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)
    assert straight.best == resumed.best and straight.sim_calls == resumed.sim_calls
    assert straight.history == resumed.history
    # the log of the interrupted run is the log of the straight run, wall-clock aside
    la = [json.loads(x) for x in open(tmp_path / "a.jsonl")]
    lb = [json.loads(x) for x in open(tmp_path / "b.jsonl")]
    assert len(la) == len(lb) == 16
    for x, y in zip(la, lb):
        x.pop("wall_s"), y.pop("wall_s")
        assert x == y
    # a different seed trains differently (the test can fail)
    other = trainer([small_gp], env, episodes=16, workers=2, seed=4)
    other.train()
    assert not all(torch.equal(a[k], _params(other)[k]) for k in a)


def test_log_lines_have_the_fields(tmp_path, small_gp):
    with JsonLines(tmp_path / "log.jsonl") as log:
        tr = trainer([small_gp], progress=log.write, episodes=4, workers=2)
        tr.train()
    lines = [json.loads(x) for x in open(tmp_path / "log.jsonl")]
    assert [x["episode"] for x in lines] == [1, 2, 3, 4]
    for k in ("placements", "sim_calls", "reward", "final_us", "best_us", "best_step_us", "entropy", "wall_s"):
        assert all(k in x for x in lines)
    assert lines[-1]["sim_calls"] == tr.sim_calls
    assert lines[-1]["best_us"] == min(x["best_us"] for x in lines)
    assert all(x["best_us"] <= x["final_us"] for x in lines)


def test_stopping_rule_fires_when_the_objective_settles(small_gp):
    tr = trainer([small_gp], episodes=100, workers=2, stop_window=3)
    assert tr.cfg.stop_tol == 0.02
    tr.history = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    tr._check_stop()
    assert not tr.stopped
    tr.history += [2.01, 2.0, 1.99]
    tr._check_stop()
    assert tr.stopped
    tr.train()
    assert tr.episode == 0  # already stopped


def test_process_backend_matches_serial(small_gp):
    rl = dict(episodes=4, workers=4, seed=5)
    serial = trainer([small_gp], **rl)
    serial.train()
    proc = trainer([small_gp], backend="process", processes=2, **rl)
    try:
        proc.train()
    finally:
        proc.close()
    a, b = _params(serial), _params(proc)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert serial.sim_calls == proc.sim_calls


def test_policy_mode_and_finetune(tmp_path):
    graphs = [make_task(Problem(layered_training_graph(n, seed=s), preset("k80x2")), f"contiguous:{k}")
              for n, s, k in [(40, 0, 5), (70, 1, 9), (100, 2, 12)]]
    tr = trainer(graphs, episodes=6, workers=3, seed=0)
    tr.train()
    assert sorted({i for i, b in enumerate(tr.best) if b["placement"] is not None}) != []
    write_checkpoint(tr.state_dict(), tmp_path / "p.pt")
    policy = load_policy(tmp_path / "p.pt")
    state = policy.state
    target = make_task(Problem(layered_training_graph(90, seed=9), preset("k80x2")), "contiguous:10")
    ft = build_trainer(PlacetoConfig(), [target], 0, start=policy, rl=policy.rl_config(episodes=2, workers=2))
    assert all(torch.equal(ft.net.state_dict()[k], tr.net.state_dict()[k]) for k in state["model"])
    assert ft.env_cfg == policy.env and ft.policy_cfg == policy.net_config  # the policy's MDP and network
    ft.train()
    assert ft.episode == 2 and ft.best[0]["placement"] is not None
    with pytest.raises(ValueError):
        trainer([target], episodes=2, workers=2).load_state_dict(state)  # other graphs


@pytest.mark.parametrize("budget", [1, 7, 10, 45, 100])
@pytest.mark.parametrize("reward", ["intermediate", "terminal"])
def test_training_stops_at_exactly_the_placements_budget(small_gp, budget, reward):
    """Placeto overran its budget (asked 500, it sampled 698-750): the last round is capped."""
    tr = trainer([small_gp], EnvConfig(init="random", reward=reward), episodes=10**6, workers=4, seed=2)
    tr.train(max_placements=budget)
    assert tr.sim_calls == budget
    assert tr.best[0]["placement"] is not None


def test_capped_episode_stops_before_the_step_that_would_simulate_too_many(small_gp):
    from placer.rl.workers import RolloutTask, RolloutWorker

    w = RolloutWorker([small_gp], PolicyConfig(n_actions=2), EnvConfig(init="random"))
    w.load({k: v.detach().numpy() for k, v in PlacetoNet(PolicyConfig(n_actions=2)).state_dict().items()})
    full = w.run(RolloutTask(graph=0, seed=3))
    capped = w.run(RolloutTask(graph=0, seed=3, max_sim_calls=3))
    assert full.sim_calls > 3 and capped.sim_calls == 3 and capped.truncated and not full.truncated
    t = len(capped.actions)
    assert 0 < t < len(full.actions) and np.array_equal(capped.actions, full.actions[:t])
    assert len(capped.returns) == t and capped.grads is not None


def test_the_loss_is_eq1_with_the_entropy_bonus():
    from placer.rl.estimator import returns_to_go
    from placer.rl.workers import episode_loss

    logits = torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, float("-inf")]], requires_grad=True)
    actions, rewards = np.array([1, 0, 0]), np.array([1.0, -2.0, 0.5])
    G = returns_to_go(rewards)
    assert G.tolist() == [-0.5, -1.5, 0.5]
    b = np.array([0.5, 0.5, 0.5])
    loss, ent = episode_loss(logits, actions, G, b, entropy_coef=0.1)
    logp = torch.log_softmax(logits.detach(), dim=-1)
    want = -(logp[0, 1] * -1.0 + logp[1, 0] * -2.0 + logp[2, 0] * 0.0) - 0.1 * ent.detach().sum()
    assert float(loss.detach()) == pytest.approx(float(want), rel=1e-6)
    assert float(ent[2].detach()) == 0.0  # a single feasible device: no entropy
