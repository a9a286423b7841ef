"""The progressive placement MDP (Placeto section 2, appendix A.7): episode length, visiting order,
initial placements, and rewards that telescope to the improvement."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from placer.cluster import preset  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.rl.env import EnvConfig, PlacementEnv  # noqa: E402
from placer.grouping import contiguous, merge_and_colocate  # noqa: E402
from placer.rl.task import PlacementTask, candidate_devices, make_task  # noqa: E402
from placer.sim import SimParams, simulate  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402


@pytest.fixture(scope="module")
def gp():
    P = Problem(layered_training_graph(80, seed=3), preset("k80x2"))
    return make_task(P, "contiguous:12")


def test_grouping_keeps_mirrors_together_and_is_a_topological_numbering(gp):
    g = gp.problem.graph
    bw = np.flatnonzero(g.mirror >= 0)
    assert (gp.group_of[bw] == gp.group_of[g.mirror[bw]]).all()
    assert gp.n_groups == 12
    # groups are numbered by their first op, so the DAG edges go from lower to higher ids
    first = [int(np.flatnonzero(gp.group_of == v)[0]) for v in range(gp.n_groups)]
    assert first == sorted(first)
    assert (gp.dag_src < gp.dag_dst).all() and len(gp.dag_src) > 0
    # expand / contract round trip
    a = np.arange(gp.n_groups) % 2
    assert np.array_equal(gp.contract(gp.expand(a)), a)
    assert gp.expand(a).shape == (g.n_ops,)
    assert set(gp.devices.tolist()) == set(gp.problem.cluster.gpus())


def test_contiguous_groups_cover_every_op_once():
    P = Problem(layered_training_graph(200, seed=1), preset("k80x4"))
    gid = contiguous(P, 17).op_group
    assert gid.shape == (P.n_ops,)
    assert len(np.unique(gid)) == 17
    assert set(np.unique(gid)) == set(range(17))


@pytest.mark.parametrize("sweeps", [1, 2])
@pytest.mark.parametrize("order", ["topological", "random"])
def test_episode_length_and_every_group_visited_once_per_sweep(gp, sweeps, order):
    env = PlacementEnv(gp, EnvConfig(sweeps=sweeps, order=order), sim_params=SimParams.placeto())
    obs, _ = env.reset(seed=5)
    N = gp.n_groups
    assert env.episode_length == sweeps * N
    visited, steps, done = [], 0, False
    rng = np.random.default_rng(0)
    while not done:
        visited.append(obs["node"])
        assert obs["placed"][obs["node"]] == (1 if steps >= N else 0)
        obs, _, done, truncated, _ = env.step(int(rng.integers(gp.n_actions)))
        assert not truncated
        steps += 1
    assert steps == sweeps * N
    for s in range(sweeps):
        assert sorted(visited[s * N:(s + 1) * N]) == list(range(N))
    if order == "topological":
        assert visited[:N] == list(range(N))
    assert obs["placed"].all()
    with pytest.raises(RuntimeError):
        env.step(0)


@pytest.mark.parametrize("sweeps", [1, 2])
def test_intermediate_rewards_telescope_to_the_improvement(gp, sweeps):
    params = SimParams.placeto()
    env = PlacementEnv(gp, EnvConfig(sweeps=sweeps, reward="intermediate", init="random"), sim_params=params)
    _, info = env.reset(seed=11)
    p0 = env.placement.copy()
    r0 = simulate(gp.problem, gp.expand(p0), params).objective_us
    assert info["objective_us"] == pytest.approx(r0, rel=1e-12)
    rng = np.random.default_rng(1)
    total, done = 0.0, False
    while not done:
        _, r, done, _, info = env.step(int(rng.integers(gp.n_actions)))
        total += r
    rT = simulate(gp.problem, gp.expand(env.placement), params).objective_us
    assert info["objective_us"] == pytest.approx(rT, rel=1e-12)
    assert total == pytest.approx((r0 - rT) / env.scale_us, rel=1e-9, abs=1e-12)
    assert env.best_objective_us <= min(r0, rT)
    # one simulation for the start and one per step that changed the placement, no more
    assert env.sim_calls <= env.episode_length + 1


def test_terminal_reward_is_minus_final_objective(gp):
    params = SimParams.placeto()
    env = PlacementEnv(gp, EnvConfig(reward="terminal"), sim_params=params)
    env.reset(seed=2)
    rewards, done = [], False
    while not done:
        _, r, done, _, _ = env.step(1)
        rewards.append(r)
    rT = simulate(gp.problem, gp.expand(env.placement), params).objective_us
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert rewards[-1] == pytest.approx(-rT / env.scale_us, rel=1e-12)
    assert env.sim_calls == 1
    assert (env.placement == 1).all()


def test_initial_placements_and_seeding(gp):
    e = PlacementEnv(gp, EnvConfig(init="single"))
    e.reset(seed=0)
    assert (e.placement == 0).all()
    given = np.arange(gp.n_groups) % 2
    e = PlacementEnv(gp, EnvConfig(init="given"), initial=given)
    e.reset(seed=0)
    assert np.array_equal(e.placement, given)
    with pytest.raises(ValueError):
        PlacementEnv(gp, EnvConfig(init="given"))
    a = PlacementEnv(gp, EnvConfig(order="random"))
    b = PlacementEnv(gp, EnvConfig(order="random"))
    oa, _ = a.reset(seed=7)
    ob, _ = b.reset(seed=7)
    assert np.array_equal(oa["placement"], ob["placement"]) and np.array_equal(a._order, b._order)
    a.reset(seed=8)
    assert not (np.array_equal(a._order, b._order) and np.array_equal(a.placement, b.placement))


def test_infeasible_action_is_refused():
    P = Problem(layered_training_graph(40, seed=0), preset("k80x1"))
    gp = make_task(P, "contiguous:5", devices="all")
    assert gp.n_actions == 2
    env = PlacementEnv(gp)
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(7)


def test_gymnasium_env_checker_accepts_the_env(gp):
    from gymnasium.utils.env_checker import check_env

    check_env(PlacementEnv(gp, EnvConfig(order="random")), skip_render_check=True)


def test_merge_and_colocate_grouping_keeps_tied_groups_together():
    P = Problem(layered_training_graph(120, seed=5), preset("k80x2"))
    gr = merge_and_colocate(P, 16, mirrors=True)
    gp = PlacementTask(P, gr, candidate_devices(P))
    g = P.graph
    bw = np.flatnonzero(g.mirror >= 0)
    assert (gp.group_of[bw] == gp.group_of[g.mirror[bw]]).all()  # mirrors tied: one placement unit
    assert 1 <= gp.n_groups <= 60  # fewer units than the 60 mirror pairs
    tie = gr.group_colocation[gr.op_group]  # groups tied by colocation are one unit
    for c in np.unique(tie[tie >= 0]):
        assert len(np.unique(gp.group_of[tie == c])) == 1
    assert make_task(P, "merge:16").n_groups >= 1
    with pytest.raises(Exception):
        make_task(P, "nonsense")


def test_a_unit_no_candidate_runs_is_fixed_on_a_device_that_runs_it():
    from placer.cluster import Device, make_cluster

    g = layered_training_graph(30, seed=1)
    op = int(np.flatnonzero(g.colocation < 0)[5])
    gpu = g.compute_us["gpu"].copy()
    gpu[op] = np.inf  # only the CPU runs this op
    g = g.replace(compute_us={**g.compute_us, "gpu": gpu})
    devs = [Device("gpu:0", "gpu", "k80", 12 * 2**30), Device("gpu:1", "gpu", "k80", 12 * 2**30),
            Device("cpu:0", "cpu", "cpu", 64 * 2**30)]
    P = Problem(g, make_cluster("two-gpus-and-a-cpu", devs, 7600.0, 0.0))
    gp = make_task(P, "ops")
    v = gp.group_of[op]
    assert gp.devices.tolist() == [0, 1]
    assert gp.fixed[v] == 2 and gp.feasible[v].tolist() == [True, False]
    assert (gp.fixed[np.arange(gp.n_groups) != v] == -1).all()
    p = gp.expand(np.ones(gp.n_groups, dtype=np.int64))
    assert p[op] == 2 and (np.delete(p, op) == 1).all()
    P.validate_placement(p)


def test_the_episodes_best_fits_in_memory_before_a_lower_objective_that_overflows(gp):
    """placer.sim.memory_first: a placement that overflows never displaces one that fits, however much
    lower its memory-penalised objective; among overflowing ones, the lower objective wins."""
    seen = []

    def scorer(op_placement):  # group 0 on device 1: lower objective, but out of memory
        moved = bool(gp.contract(op_placement)[0] == 1)
        seen.append(moved)
        return (50.0, 40.0, False) if moved else (100.0, 100.0, True)

    env = PlacementEnv(gp, EnvConfig(init="single"), scorer=scorer)
    env.reset(seed=0)
    start = env.placement.copy()
    assert env.current_node == 0
    env.step(1 - int(start[0]))
    assert seen == [False, True]
    assert env.best_objective_us == 100.0 and env.best_fits and np.array_equal(env.best_placement, start)
    objectives = iter([100.0, 80.0])  # nothing fits: the lower objective wins
    env2 = PlacementEnv(gp, EnvConfig(init="single"), scorer=lambda q: (next(objectives), 70.0, False))
    env2.reset(seed=0)
    env2.step(1 - int(env2.placement[0]))
    assert env2.best_objective_us == 80.0 and not env2.best_fits
