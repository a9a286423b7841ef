"""Placeto (Addanki et al., 2019): a graph-embedding policy that improves a placement group by
group, trained with REINFORCE (:mod:`placer.rl`, :mod:`placer.nn.placeto`).

As a method with the common contract it runs in *search mode*: it trains a policy on the one graph
it is given, within the budget (placements = simulator calls), and returns the best placement it
evaluated. Its defaults are :meth:`ReinforceConfig.small_budget` (lr 1e-2 -> 1e-3, gamma 0.9,
entropy 0.01 -> 0.0002) and episodes starting from everything on one device: at a few hundred
episodes the paper's lr 1e-3 -> 1e-4 barely moves the policy. With ``policy=<checkpoint>`` it starts from a trained policy instead: ``finetune=N``
trains N more episodes on this graph first, then ``place_episodes`` greedy (or sampled) episodes
place it.
"""

from __future__ import annotations

import numpy as np

from placer.methods.base import Budget, Evaluator, register


def _available() -> str | None:
    try:
        import gymnasium  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return f"needs the 'torch' extra ({e.name} is not installed): pip install 'placer[torch]'"
    return None


def _charge(ev: Evaluator, calls: int, curve: list[tuple[int, float]], best_placement, best_objective: float) -> None:
    """Put the simulations done inside the trainer's workers on the evaluator's bill."""
    base = ev.sim_calls
    ev.sim_calls += calls
    ev.placements += calls
    for x, y in curve:
        if y < ev.best_objective:
            ev.curve.append((base + x, float(y)))
            ev.best_objective = float(y)
    if best_placement is not None and best_objective <= ev.best_objective:
        ev.best_objective = float(best_objective)
        ev.best = np.asarray(best_placement, dtype=np.int64)
    ev.curve.append((ev.placements, ev.best_objective))


@register("placeto", "Placeto: graph-embedding policy, progressive placement MDP, REINFORCE (search mode on this graph)",
          "learned", paper="Addanki et al., Placeto: Learning Generalizable Device Placement Algorithms, NeurIPS 2019",
          available=_available)
def placeto(problem, budget: Budget, seed: int, ev: Evaluator, *, groups: int = 64, devices="gpus",
            grouping: str = "auto", sweeps: int = 1, order: str = "topological", init: str = "single",
            reward: str = "intermediate", workers: int = 8, episodes: int = 200, rounds: int = 8,
            lr_start: float = 1e-2, lr_end: float = 1e-3, gamma: float = 0.9, entropy_start: float = 0.01,
            entropy_end: float = 2e-4, stop_window: int = 0, backend: str = "serial", processes: int | None = None,
            policy: str | None = None, finetune: int = 0, place_episodes: int = 1, greedy: bool = True,
            log: str | None = None, **_):
    from placer.nn.placeto import PolicyConfig
    from placer.rl.env import EnvConfig
    from placer.rl.groups import group_problem
    from placer.rl.reinforce import ReinforceConfig, Trainer

    gp = group_problem(problem, groups, devices, grouping)
    env = EnvConfig(sweeps=sweeps, order=order, init=init, reward=reward)
    params = dict(groups=gp.n_groups, sweeps=sweeps, order=order, init=init, reward=reward, workers=workers,
                  episodes=episodes, rounds=rounds, policy=policy, finetune=finetune)
    if policy is not None:
        return _with_policy(problem, budget, seed, ev, gp, policy, finetune, place_episodes, greedy, workers,
                            backend, processes, log, params)
    rl = ReinforceConfig(episodes=episodes, workers=workers, lr_start=lr_start, lr_end=lr_end, gamma=gamma,
                         entropy_start=entropy_start, entropy_end=entropy_end, stop_window=stop_window, seed=seed)
    tr = Trainer([gp], PolicyConfig(n_actions=gp.n_actions, rounds=rounds), env, rl, sim_params=ev.sim_params,
                 backend=backend, processes=processes, log_path=log)
    try:
        tr.train(max_sim_calls=budget.placements, max_seconds=budget.seconds)
    finally:
        tr.close()
    _charge(ev, tr.sim_calls, tr.curve[0], tr.best_op_placement(0), tr.best[0]["objective_us"])
    return ev.result("placeto", params=params, notes=[f"{tr.episode} episodes, {gp.n_groups} groups"])


def _with_policy(problem, budget, seed, ev, gp, path, finetune_episodes, place_episodes, greedy, workers,
                 backend, processes, log, params):
    from placer.rl.checkpoint import load_checkpoint
    from placer.rl.policy import env_config, finetune, place
    from placer.rl.reinforce import ReinforceConfig, config_from_dict

    state = load_checkpoint(path)
    env = env_config(state)  # place the way the policy was trained
    notes = []
    if finetune_episodes > 0:
        base = config_from_dict(ReinforceConfig, state["rl_config"])
        rl = ReinforceConfig(**{**base.to_dict(), "episodes": finetune_episodes, "workers": workers, "seed": seed,
                                "stop_window": 0})
        tr = finetune(state, [gp], rl, env=env, sim_params=ev.sim_params, backend=backend, processes=processes,
                      log_path=log)
        try:
            tr.train(max_sim_calls=budget.placements, max_seconds=budget.seconds)
        finally:
            tr.close()
        _charge(ev, tr.sim_calls, tr.curve[0], tr.best_op_placement(0), tr.best[0]["objective_us"])
        state = {**state, "model": tr.net.state_dict()}
        notes.append(f"fine-tuned {tr.episode} episodes")
    out = place(state, gp, env=env, greedy=greedy, episodes=place_episodes, seed=seed, sim_params=ev.sim_params)
    _charge(ev, out.sim_calls, [(out.sim_calls, out.objective_us)], out.placement, out.objective_us)
    notes.append(f"placed with {'greedy' if greedy else 'sampled'} policy, {out.episodes} episode(s)")
    return ev.result("placeto", params=params, notes=notes)
