"""A trained Placeto policy and placing a graph with it, greedily or by sampling (paper section 3,
"Generalizability": a policy trained on some graphs places unseen ones, zero-shot or after
fine-tuning from its parameters, :func:`placer.methods.learned.placeto.build_trainer`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.errors import InputError, first_sentence
from placer.nn.placeto import PlacetoNet, PolicyConfig
from placer.rl.env import EnvConfig
from placer.rl.reinforce import CHECKPOINT_FORMAT, ReinforceConfig, config_from_dict, task_seed
from placer.rl.task import PlacementTask
from placer.rl.workers import RolloutTask, RolloutWorker
from placer.sim import SimParams, memory_first

REQUIRED = {"policy_config": dict, "env_config": dict, "rl_config": dict, "model": dict}
FIX = "give a policy state Placeto's trainer made, or train it again"
KIND = "policy:placeto"  # the command line names the command that writes one (placer.cli.advice)
# the network's integer settings a policy file may hold: devices up to a cluster's 4,096; widths far
# above the paper's 8-16 (A.7) yet small enough that building the network cannot exhaust memory
NET_BOUNDS = {"n_actions": 4096, "embed_dim": 4096, "hidden": 4096, "policy_hidden": 4096, "rounds": 64}


def _check_weights(policy: "PlacetoPolicy", where: str) -> None:
    """The weights are finite and fit the network the settings describe (every key, every shape):
    the check every learned method's loader makes (:func:`placer.nn.weights.check_weights`)."""
    from placer.nn.weights import check_weights

    try:
        want = PlacetoNet(policy.net_config).state_dict()
    except (RuntimeError, TypeError, ValueError) as e:
        raise InputError(where, "policy configuration", f"does not describe a network ({first_sentence(e)})", FIX,
                         kind=KIND) from None
    check_weights(policy.weights, where, FIX, want=want, kind=KIND)


class PlacetoPolicy:
    """A Placeto policy: its network's settings and weights, the MDP it was trained in (and places
    in) and the REINFORCE settings it was trained with (a fine-tuning starts from them). It is the
    state dict :meth:`placer.rl.reinforce.Trainer.state_dict` wrote (the trainer's whole state when
    it comes from training), checked; ``label`` says where it came from (a file, a bench policy) and
    is what a result records as its ``policy`` parameter."""

    def __init__(self, state: dict, label: str | None = None):
        self.state, self.label = state, label
        self.net_config: PolicyConfig = config_from_dict(PolicyConfig, state["policy_config"])
        self.env: EnvConfig = config_from_dict(EnvConfig, state["env_config"])

    @classmethod
    def from_state(cls, state, where: str = "policy", label: str | None = None) -> "PlacetoPolicy":
        """The policy of a state dict; InputError naming ``where`` (of kind :data:`KIND`) when it is not
        a Placeto policy's."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise InputError(where, "policy", "is not a Placeto checkpoint", FIX, kind=KIND)
        for key, type_ in REQUIRED.items():
            if not isinstance(state.get(key), type_):
                raise InputError(where, f"policy '{key}'", "is missing or of the wrong type (a damaged or foreign "
                                 "checkpoint)", FIX, kind=KIND)
        try:
            policy = cls(state, label)
            policy.rl_config()
        except (TypeError, ValueError) as e:  # InputError too: a config field refused
            raise InputError(where, "policy configuration", f"cannot be read ({first_sentence(e)})", FIX,
                             kind=KIND) from None
        cfg = policy.net_config
        for name, most in NET_BOUNDS.items():  # before any weight is allocated from them
            v = getattr(cfg, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most:
                raise InputError(where, f"policy_config '{name}'", f"is {v!r}, not a whole number from 1 to {most:,}",
                                 FIX, kind=KIND)
        if cfg.pool not in ("sum", "mean") or not isinstance(cfg.keep_bias, (int, float)) or not np.isfinite(cfg.keep_bias):
            raise InputError(where, "policy_config", f"has pool {cfg.pool!r} / keep_bias {cfg.keep_bias!r}", FIX, kind=KIND)
        _check_weights(policy, where)
        return policy

    def rl_config(self, **overrides) -> ReinforceConfig:
        """The REINFORCE settings it was trained with, ``overrides`` applied."""
        return ReinforceConfig(**{**config_from_dict(ReinforceConfig, self.state["rl_config"]).to_dict(), **overrides})

    @property
    def weights(self) -> dict:
        return self.state["model"]

    def with_weights(self, weights: dict) -> "PlacetoPolicy":
        """This policy with other network weights (a fine-tuned one)."""
        return PlacetoPolicy({**self.state, "model": weights}, self.label)

    def net(self) -> PlacetoNet:
        net = PlacetoNet(self.net_config)
        net.load_state_dict(self.weights)
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


def place(policy: PlacetoPolicy | dict | PlacetoNet, gp: PlacementTask, *, env: EnvConfig | None = None,
          greedy: bool = True, episodes: int = 1, seed: int = 0, sim_params: SimParams | None = None,
          max_placements: int | None = None) -> PlaceOutcome | None:
    """Run ``episodes`` episodes of the policy (a :class:`PlacetoPolicy`, its state dict, or a bare
    network with the ``env`` it was trained in) on ``gp`` (greedy: most likely device at each step;
    else sampled) in the MDP it was trained in (``env``: another), and return the best placement
    evaluated on the way; never more than ``max_placements`` simulations in all (an episode stops
    before the step that would pass it; None when no placement could be evaluated)."""
    if isinstance(policy, dict):
        policy = PlacetoPolicy(policy)
    if isinstance(policy, PlacetoPolicy):
        net, env = policy.net(), env or policy.env
    elif env is None:
        raise ValueError("placing with a bare network needs the environment it was trained in (env=...)")
    else:
        net = policy
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
