"""Placeto's progressive placement MDP as a Gymnasium environment (paper section 2, "MDP
formulation"; appendix A.4 and A.7 "MDP" and "Reward").

State: the grouped graph (fixed for the environment), the current placement of every group, the
group being decided and which groups were already decided. An episode starts from an initial
placement (random per episode, everything on one device, or a given one) and visits every group
once per sweep, ``sweeps`` (n) times, in topological order or in a random order drawn per episode
from the seed; the action is the new device of the visited group. An episode has ``n * |V|`` steps.

Reward, with R the memory-penalised step time ``R(p) = r + c * ReLU(m - M)`` (appendix A.7, c = 2 s
per GB over M, computed by the simulator):

* ``intermediate``: ``r_t = R(p_t) - R(p_{t+1})``, the improvement made by step t; the rewards of an
  episode sum to ``R(p_0) - R(p_T)``. Costs one simulation per step that changes the placement.
* ``terminal``: 0 at every step but the last, which gets ``-R(p_T)``. One simulation per episode.

Rewards are divided by ``scale_us`` (default: the graph's total work on its fastest devices, so a
reward of -1 means "as slow as running everything serially"); ``info`` carries the raw microseconds.

The episode's best placement, which the trainer keeps across episodes, follows
:func:`placer.sim.memory_first`: one that fits in memory before a lower-objective one that overflows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placer.rl.task import PlacementTask
from placer.sim import Engine, SimParams, memory_first

Scorer = Callable[[np.ndarray], tuple[float, float, bool]]  # op placement -> (objective_us, step_time_us, fits)


@dataclass(frozen=True)
class EnvConfig:
    sweeps: int = 1  # n: times each group is revisited per episode (A.7: n = 1 or 2)
    order: str = "topological"  # "topological" or "random" (a fresh permutation per sweep, from the seed)
    init: str = "single"  # "single" (all on the first candidate device), "random" (per episode), "given"
    reward: str = "intermediate"  # "intermediate" (r_t = R(p_t) - R(p_{t+1})) or "terminal" (-R(p_T))

    def __post_init__(self):
        if self.sweeps < 1:
            raise ValueError("sweeps must be >= 1")
        if self.order not in ("topological", "random"):
            raise ValueError(f"order must be 'topological' or 'random', not {self.order!r}")
        if self.init not in ("random", "single", "given"):
            raise ValueError(f"init must be 'random', 'single' or 'given', not {self.init!r}")
        if self.reward not in ("intermediate", "terminal"):
            raise ValueError(f"reward must be 'intermediate' or 'terminal', not {self.reward!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def simulator_scorer(gp: PlacementTask, params: SimParams | None = None) -> Scorer:
    """Score op placements with the simulator's objective-only path on one kept
    :class:`placer.sim.Engine`: (memory-penalised objective, step time, fits in memory)."""
    engine = Engine(gp.problem, params)  # None: the defaults with the cluster's communication model

    def score(op_placement: np.ndarray) -> tuple[float, float, bool]:
        obj = engine.objective(np.asarray(op_placement, dtype=np.int64))
        return float(obj), engine.makespan_us, not engine.oom

    return score


class PlacementEnv(gym.Env):
    """The progressive placement MDP on one grouped graph."""

    metadata = {"render_modes": []}

    def __init__(self, gp: PlacementTask, config: EnvConfig | None = None, *, scorer: Scorer | None = None,
                 sim_params: SimParams | None = None, initial: np.ndarray | None = None,
                 scale_us: float | None = None):
        self.gp = gp
        self.config = config or EnvConfig()
        self.scorer = scorer or simulator_scorer(gp, sim_params)
        N, A = gp.n_groups, gp.n_actions
        if self.config.init == "given":
            if initial is None:
                raise ValueError("init='given' needs an initial group placement")
            initial = np.asarray(initial, dtype=np.int64)
            if initial.shape != (N,) or not gp.feasible[np.arange(N), initial].all():
                raise ValueError("the initial group placement has the wrong length or an infeasible device")
        self.initial = initial
        self.scale_us = float(scale_us if scale_us is not None else max(gp.problem.fastest_us.sum(), 1e-9))
        self.episode_length = self.config.sweeps * N
        self.observation_space = spaces.Dict({
            "placement": spaces.MultiDiscrete(np.full(N, A)),
            "node": spaces.Discrete(N),
            "placed": spaces.MultiBinary(N),
        })
        self.action_space = spaces.Discrete(A)
        self.sim_calls = 0
        self._t = 0
        self._order = np.arange(N)
        self.placement = np.zeros(N, dtype=np.int64)
        self.placed = np.zeros(N, dtype=np.int8)

    # ------------------------------------------------------------------ helpers
    def _score(self, group_placement: np.ndarray) -> tuple[float, float]:
        self.sim_calls += 1
        obj, step, fits = self.scorer(self.gp.expand(group_placement))
        if memory_first(obj, fits) < memory_first(self.best_objective_us, self.best_fits):
            self.best_objective_us, self.best_step_us, self.best_fits = obj, step, fits
            self.best_placement = group_placement.copy()
        return obj, step

    def _initial_placement(self) -> np.ndarray:
        N, ok = self.gp.n_groups, self.gp.feasible
        if self.config.init == "given":
            return self.initial.copy()
        if self.config.init == "single":
            first = np.argmax(ok, axis=1)  # the first candidate device each group can run on
            return first.astype(np.int64)
        u = self.np_random.random(ok.shape) * ok
        return u.argmax(axis=1).astype(np.int64)

    def _obs(self) -> dict:
        t = min(self._t, self.episode_length - 1)
        return {"placement": self.placement.copy(), "node": int(self._order[t]), "placed": self.placed.copy()}

    def would_simulate(self, action: int) -> bool:
        """True when taking ``action`` now costs a simulation (so a rollout with no simulations
        left in its budget stops before it)."""
        if self.config.reward == "intermediate":
            return int(self.placement[self.current_node]) != int(action)
        return self._t + 1 == self.episode_length

    @property
    def episode_sim_calls(self) -> int:
        return self.sim_calls - self._calls_at_reset

    @property
    def current_node(self) -> int:
        return int(self._order[min(self._t, self.episode_length - 1)])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        N = self.gp.n_groups
        if self.config.order == "topological":
            self._order = np.tile(np.arange(N), self.config.sweeps)
        else:
            self._order = np.concatenate([self.np_random.permutation(N) for _ in range(self.config.sweeps)])
        self.placement = self._initial_placement()
        self.placed = np.zeros(N, dtype=np.int8)
        self._t = 0
        self._calls_at_reset = self.sim_calls
        self.best_objective_us, self.best_step_us, self.best_placement, self.best_fits = np.inf, np.inf, None, False
        self.objective_us = self.step_us = np.nan
        if self.config.reward == "intermediate":
            self.objective_us, self.step_us = self._score(self.placement)
        self.initial_objective_us = self.objective_us
        return self._obs(), {"objective_us": self.objective_us, "step_time_us": self.step_us}

    def step(self, action):
        if self._t >= self.episode_length:
            raise RuntimeError("the episode is over; call reset()")
        v, a = self.current_node, int(action)
        if not (0 <= a < self.gp.n_actions) or not self.gp.feasible[v, a]:
            raise ValueError(f"action {a} is not a device group {v} can run on")
        changed = self.placement[v] != a
        self.placement[v] = a
        self.placed[v] = 1
        self._t += 1
        done = self._t == self.episode_length
        if self.config.reward == "intermediate":
            prev = self.objective_us
            if changed:
                self.objective_us, self.step_us = self._score(self.placement)
            reward = (prev - self.objective_us) / self.scale_us
        else:
            reward = 0.0
            if done:
                self.objective_us, self.step_us = self._score(self.placement)
                reward = -self.objective_us / self.scale_us
        info = {"objective_us": self.objective_us, "step_time_us": self.step_us, "episode_sim_calls": self.sim_calls - self._calls_at_reset}
        return self._obs(), float(reward), done, False, info
