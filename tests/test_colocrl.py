"""ColocRL (placer.methods.learned.colocrl, placer.methods.learned.seq2seq_reinforce): groups and features, rewards,
valid placements, the obvious best placement found, determinism, progress lines, checkpoint resume
equality, fine-tuning from a policy state."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.cluster import Device, make_cluster  # noqa: E402
from placer.io import read_checkpoint, write_checkpoint  # noqa: E402
from placer.methods import Budget, run_method  # noqa: E402
from placer.methods.base import Evaluator  # noqa: E402
from placer.methods.learned.colocrl import COLOCRL, ColocRLConfig, ColocRLTrainer, group_features  # noqa: E402
from placer.methods.learned.seq2seq_reinforce import op_table, reward  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.sim import simulate  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402

GiB = 2**30
SMALL = dict(hidden=32, device_embed=8, attention=8)  # a small network: these tests check behaviour, not scale


def obvious_problem(n_ops: int = 30) -> Problem:
    """Two GPUs; every op takes 20 ms more on the second than the whole step takes on the first:
    everything on gpu:0 is the one best placement, and each op moved to gpu:1 makes the step slower
    (no deceptive optimum such as "everything on the slow GPU" beating mixed placements)."""
    g = layered_training_graph(n_ops, seed=1)
    c = g.compute_us["gpu"]
    g = g.replace(compute_us={"fast": c, "slow": c + 20_000.0})
    devs = [Device("gpu:0", "gpu", "fast", 16 * GiB), Device("gpu:1", "gpu", "slow", 16 * GiB)]
    return Problem(g, make_cluster("obvious", devs, 200.0, 5.0))


def best_objective(problem) -> float:
    return simulate(problem, np.zeros(problem.n_ops, dtype=np.int64)).objective_us


def test_reward_is_minus_sqrt_seconds_with_a_fixed_oom_penalty():
    r = reward(np.array([4e6, 1e6, 9e6]), np.array([False, False, True]), 100.0)
    assert np.allclose(r, [-2.0, -1.0, -10.0])


def test_group_features_shapes_and_adjacency():
    P = obvious_problem()
    tab = op_table(P, 16)
    label = np.minimum(np.arange(P.n_ops) // 4, 6)
    f = group_features(P, tab, label, 7, 2)
    assert f.shape == (7, 16 + 3 + 1 + 4)
    assert np.allclose(f[:, :16].sum(axis=1), 1.0)  # type histograms
    assert ((f[:, -5:] > 0) & (f[:, -5:] < 1)).all()  # positions


def test_placements_are_valid_and_cpu_only_ops_stay_on_a_device_that_runs_them():
    from tests.test_method_contract import contract_problem

    P = contract_problem()
    for devices in ("gpus", "all"):
        tr = ColocRLTrainer(P, ColocRLConfig(devices=devices, **SMALL), seed=0)
        X, lp, ent = tr.sample(16)
        assert X.shape == (16, P.n_ops) and lp.shape == (16,) and torch.isfinite(lp).all()
        for p in X:
            P.validate_placement(p)


def test_finds_the_obvious_best_placement():
    P = obvious_problem()
    r = run_method("colocrl", P, Budget(placements=120), seed=0, lr=0.1, **SMALL)  # the paper's lr: fast here
    assert r.sim.objective_us == pytest.approx(best_objective(P), rel=1e-9)


def test_same_seed_same_placement_and_progress_lines():
    P = obvious_problem()
    lines = []
    a, _ = COLOCRL.search(P, 4, Evaluator(P, limit=16), ColocRLConfig(**SMALL), progress=lines.append)
    b = run_method("colocrl", P, Budget(placements=16), seed=4, **SMALL)
    assert np.array_equal(a.placement.devices, b.placement.devices)
    assert [x["step"] for x in lines] == [1, 2, 3, 4] and lines[-1]["placements"] == 16
    assert all(x["method"] == "colocrl" for x in lines)
    c = run_method("colocrl", P, Budget(placements=7), seed=4, **SMALL)  # a budget that is not a multiple of k
    assert c.cost.placements == 7


def _weights(tr):
    return {f"{k}.{n}": v.clone() for k, m in tr.modules().items() for n, v in m.state_dict().items()}


def resumed_equals_straight(make, path):
    """4 policy steps of ``make(seed)``'s trainer straight through, against 2 steps, its state written
    to ``path`` and read back into a trainer of another seed, and 2 more: the same weights, baseline,
    best and next samples. Returns the state read back."""
    P = obvious_problem()
    straight = make(P, 2)
    ev = Evaluator(P)
    for _ in range(4):
        straight.step(ev)
    first = make(P, 2)
    ev2 = Evaluator(P)
    for _ in range(2):
        first.step(ev2)
    write_checkpoint(first.state_dict(), path)
    state = read_checkpoint(path)  # plain tensors and numbers only (weights_only loading)
    resumed = make(P, 99)  # another seed: everything must come from the checkpoint
    resumed.load_state_dict(state)
    for _ in range(2):
        resumed.step(ev2)
    wa, wb = _weights(straight), _weights(resumed)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert straight.baseline == resumed.baseline and straight.steps == resumed.steps == 4
    assert straight.best_objective_us == resumed.best_objective_us
    assert np.array_equal(straight.sample(3)[0], resumed.sample(3)[0])
    return state


def test_checkpoint_resume_equals_an_uninterrupted_run(tmp_path):
    resumed_equals_straight(lambda P, seed: ColocRLTrainer(P, ColocRLConfig(**SMALL), seed=seed), tmp_path / "ck.pt")


def test_finetune_from_a_policy_state():
    from placer.errors import InputError
    from placer.methods.learned.hierarchical import HIERARCHICAL, HierarchicalConfig

    P = obvious_problem()
    _, state = COLOCRL.search(P, 0, Evaluator(P, limit=40), ColocRLConfig(**SMALL))
    # the network's shape comes from the policy state, not the config
    r = run_method("colocrl", P, Budget(placements=40), seed=1, policy=state, finetune=2)  # the contract
    assert r.cost.placements == 2 * 4 + 1  # two policy steps, then the greedy placement
    assert any("greedy" in n for n in r.notes)
    other = obvious_problem(24)  # another graph: weights only
    r = COLOCRL.place(other, state, 0, Evaluator(other, limit=10), ColocRLConfig())
    assert r.cost.placements == 1
    assert COLOCRL.train([P], ColocRLConfig(**SMALL), 0, placements=40)["steps"] == state["steps"] == 10
    with pytest.raises(InputError, match="one graph"):
        COLOCRL.train([P, other], ColocRLConfig(**SMALL), 0)
    with pytest.raises(InputError, match="policy"):
        HIERARCHICAL.search(P, 0, Evaluator(P, limit=4), HierarchicalConfig(), policy=state)
