"""Using a trained Placeto policy: place a graph greedily or by sampling, and fine-tune from a
checkpoint (paper section 3, "Generalizability": start from parameters learned on other graphs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.nn.placeto import PlacetoNet, PolicyConfig
from placer.rl.env import EnvConfig
from placer.rl.task import PlacementTask
from placer.rl.reinforce import ReinforceConfig, Trainer, config_from_dict, task_seed
from placer.rl.workers import RolloutTask, RolloutWorker
from placer.sim import SimParams, memory_first


def policy_config(state: dict) -> PolicyConfig:
    return config_from_dict(PolicyConfig, state["policy_config"])


def env_config(state: dict) -> EnvConfig:
    return config_from_dict(EnvConfig, state["env_config"])


def net_from_state(state: dict) -> PlacetoNet:
    net = PlacetoNet(policy_config(state))
    net.load_state_dict(state["model"])
    return net


@dataclass
class PlaceOutcome:
    placement: np.ndarray  # (n_ops,) device per op: the best placement evaluated
    group_placement: np.ndarray  # (N,)
    objective_us: float
    step_us: float
    episodes: int
    sim_calls: int
    final_objective_us: list[float] = field(default_factory=list)  # each episode's final placement


def place(net_or_state, gp: PlacementTask, *, env: EnvConfig | None = None, greedy: bool = True,
          episodes: int = 1, seed: int = 0, sim_params: SimParams | None = None,
          max_placements: int | None = None) -> PlaceOutcome | None:
    """Run ``episodes`` episodes of the policy on ``gp`` (greedy: most likely device at each step;
    else sampled) and return the best placement evaluated on the way; never more than
    ``max_placements`` simulations in all (an episode stops before the step that would pass it;
    None when no placement could be evaluated)."""
    if isinstance(net_or_state, dict):
        state = net_or_state
        net = net_from_state(state)
        env = env or env_config(state)
    else:
        net, env = net_or_state, env or EnvConfig()
    if net.cfg.n_actions != gp.n_actions:
        raise ValueError(f"the policy chooses among {net.cfg.n_actions} devices, the graph has {gp.n_actions} candidates")
    if env.reward == "terminal":  # placing scores every step: the best intermediate placement is free
        env = EnvConfig(env.sweeps, env.order, env.init, "intermediate")
    worker = RolloutWorker([gp], net.cfg, env, sim_params)
    worker.load({k: v.detach().numpy() for k, v in net.state_dict().items()})
    best, finals, calls = None, [], 0
    done = 0
    for e in range(max(1, episodes)):
        room = None if max_placements is None else max_placements - calls
        if room is not None and room <= 0:
            break
        r = worker.run(RolloutTask(graph=0, seed=task_seed(seed, e), greedy=greedy, compute_grad=False,
                                   max_sim_calls=room))
        calls += r.sim_calls
        done += 1
        finals.append(r.final_objective_us)
        if r.best_placement is not None and (best is None or memory_first(r.best_objective_us, r.best_fits)
                                             < memory_first(best.best_objective_us, best.best_fits)):
            best = r
    if best is None:
        return None
    return PlaceOutcome(gp.expand(best.best_placement), best.best_placement, best.best_objective_us, best.best_step_us,
                        done, calls, finals)


def finetune(state: dict, graphs: list[PlacementTask], rl: ReinforceConfig, *, env: EnvConfig | None = None,
             sim_params: SimParams | None = None, backend: str = "serial", processes: int | None = None,
             log_path=None) -> Trainer:
    """A trainer on ``graphs`` that starts from the checkpoint's policy weights (fresh Adam and
    schedules, as training from scratch would have)."""
    tr = Trainer(graphs, policy_config(state), env or env_config(state), rl, sim_params=sim_params,
                 backend=backend, processes=processes, log_path=log_path)
    tr.load_state_dict(state, weights_only=True)
    return tr

