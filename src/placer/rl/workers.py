"""Rollout workers: each rolls out one episode with the current weights and returns its REINFORCE
gradient (appendix A.7 "Workers": every worker syncs its weights, rolls out an episode, computes
the gradient of the REINFORCE loss; the parameter server sums the gradients and updates).

The interface is narrow on purpose: a backend is built from the list of grouped graphs and the
configs, and has one call, ``run(weights, tasks) -> results`` (weights as a dict of numpy arrays,
one :class:`RolloutTask` per worker, results in task order) plus ``close()``. A task carries
everything the episode depends on (graph index, seed, entropy coefficient, baseline), so a result
depends only on (weights, task): the serial, process and Ray backends give identical results, and
summing in task order keeps training deterministic.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from placer.nn.fast import NumpyPolicy, softmax
from placer.nn.features import GraphTensors
from placer.nn.placeto import PlacetoNet, PolicyConfig, entropy_of
from placer.procpool import WorkerPool
from placer.rl.env import EnvConfig, PlacementEnv
from placer.rl.estimator import advantages, returns_to_go, score_loss
from placer.rl.task import PlacementTask
from placer.sim import SimParams


@dataclass
class RolloutTask:
    graph: int  # index into the backend's graph list
    seed: int  # seeds the environment (initial placement, order) and the action sampling
    entropy_coef: float = 0.0
    baseline: np.ndarray | None = None  # (T,) per-timestep baseline of the return-to-go; None = 0
    greedy: bool = False  # take the most likely device instead of sampling
    compute_grad: bool = True
    gamma: float = 1.0  # discount of the return-to-go (1: the paper's undiscounted REINFORCE)
    adv_scale: float = 1.0  # advantages are divided by this (see placer.rl.reinforce.ReinforceConfig.normalize_advantages)
    max_sim_calls: int | None = None  # the episode stops before the step that would simulate more (None: no cap)


@dataclass
class RolloutResult:
    graph: int
    seed: int
    actions: np.ndarray  # (T,) action per step
    nodes: np.ndarray  # (T,) group visited per step
    rewards: np.ndarray  # (T,) scaled rewards
    returns: np.ndarray  # (T,) return-to-go G_t = sum_{t' >= t} r_t'
    entropy: float  # mean policy entropy per step
    initial_objective_us: float
    final_objective_us: float
    final_step_us: float
    final_placement: np.ndarray  # (N,) group placement after the last step
    best_objective_us: float  # best evaluated placement of the episode
    best_step_us: float
    best_placement: np.ndarray | None  # (N,) group placement
    best_fits: bool  # whether the best placement fits in memory (the best follows placer.sim.memory_first)
    sim_calls: int
    wall_s: float
    grads: list[np.ndarray] | None = field(default=None, repr=False)
    loss: float = 0.0
    truncated: bool = False  # stopped early by the task's max_sim_calls


def episode_loss(logits, actions, returns, baseline=None, entropy_coef: float = 0.0, adv_scale: float = 1.0):
    """Placeto's loss of one episode of T steps (appendix A.1 eq. 1 with A.7's entropy bonus):
    ``-sum_t [log pi(a_t | s_t) (G_t - b_t) / adv_scale + beta H(pi(. | s_t))]``, the pieces of
    :mod:`placer.rl.estimator`. ``logits`` (T, A), ``actions`` (T,), ``returns`` G (T,), ``baseline``
    b (T,) or None (0). Returns (loss, per-step entropy)."""
    a = torch.as_tensor(np.asarray(actions), dtype=torch.int64)
    logp = torch.log_softmax(logits, dim=-1).gather(1, a[:, None])[:, 0]
    ent = entropy_of(logits)
    b = None if baseline is None else np.asarray(baseline, dtype=np.float64)
    A = advantages(np.asarray(returns, dtype=np.float64), b, adv_scale)
    return score_loss(logp, A, ent, entropy_coef), ent


class RolloutWorker:
    """One worker: its own copy of the network and one environment per graph."""

    def __init__(self, graphs: list[PlacementTask], policy: PolicyConfig, env: EnvConfig,
                 sim_params: SimParams | None = None, initial: list | None = None):
        torch.set_num_threads(1)
        self.net = PlacetoNet(policy)
        self.tensors = [GraphTensors.from_grouped(gp) for gp in graphs]
        initial = initial or [None] * len(graphs)
        self.envs = [PlacementEnv(gp, env, sim_params=sim_params, initial=init) for gp, init in zip(graphs, initial)]
        self.caches = [NumpyPolicy.graph_cache(gt) for gt in self.tensors]
        self.fast = NumpyPolicy(self.net)

    def load(self, weights: dict[str, np.ndarray]) -> None:
        self.net.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
        self.fast = NumpyPolicy(self.net)  # rollouts run the numpy copy; the gradient runs torch

    def run(self, task: RolloutTask) -> RolloutResult:
        t0 = time.perf_counter()
        env, gt = self.envs[task.graph], self.tensors[task.graph]
        rng = np.random.default_rng([int(task.seed), 1])  # action sampling; the env has its own stream
        cache = self.caches[task.graph]
        calls0 = env.sim_calls
        obs, info = env.reset(seed=int(task.seed) % (2**32))
        T = env.episode_length
        placements = np.empty((T, gt.n), dtype=np.int64)
        placed = np.empty((T, gt.n), dtype=bool)
        nodes = np.empty(T, dtype=np.int64)
        actions = np.empty(T, dtype=np.int64)
        rewards = np.empty(T, dtype=np.float64)
        truncated = False
        for t in range(T):
            placements[t], placed[t], nodes[t] = obs["placement"], obs["placed"], obs["node"]
            logits = self.fast.logits(gt, cache, placements[t], int(nodes[t]), placed[t])
            if task.greedy:
                a = int(np.argmax(logits))
            else:
                cum = np.cumsum(softmax(logits))
                a = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
            if task.max_sim_calls is not None and env.episode_sim_calls >= task.max_sim_calls and env.would_simulate(a):
                truncated = True  # the budget has no placement left for this step
                break
            actions[t] = a
            obs, rewards[t], _, _, info = env.step(a)
        else:
            t = T
        if truncated:
            placements, placed, nodes, actions, rewards = placements[:t], placed[:t], nodes[:t], actions[:t], rewards[:t]
        G = returns_to_go(rewards, task.gamma)
        grads, loss_value, ent_mean = None, 0.0, float("nan")
        if len(actions) == 0:
            if task.compute_grad:
                grads = [np.zeros(tuple(p.shape), np.float32) for p in self.net.parameters()]
        elif task.compute_grad:
            self.net.zero_grad(set_to_none=True)
            logits = self.net(gt, torch.as_tensor(placements), torch.as_tensor(nodes), torch.as_tensor(placed))
            loss, ent = episode_loss(logits, actions, G, task.baseline, task.entropy_coef, task.adv_scale)
            loss.backward()
            grads = [p.grad.detach().numpy().copy() if p.grad is not None else np.zeros(tuple(p.shape), np.float32)
                     for p in self.net.parameters()]
            loss_value, ent_mean = float(loss.detach()), float(ent.detach().mean())
        else:
            with torch.no_grad():
                logits = self.net(gt, torch.as_tensor(placements), torch.as_tensor(nodes), torch.as_tensor(placed))
                ent_mean = float(entropy_of(logits).mean())
        return RolloutResult(
            graph=task.graph, seed=task.seed, actions=actions, nodes=nodes, rewards=rewards, returns=G,
            entropy=ent_mean, initial_objective_us=float(env.initial_objective_us),
            final_objective_us=float(env.objective_us), final_step_us=float(env.step_us),
            final_placement=env.placement.copy(), best_objective_us=float(env.best_objective_us),
            best_step_us=float(env.best_step_us),
            best_placement=None if env.best_placement is None else env.best_placement.copy(),
            best_fits=bool(env.best_fits),
            sim_calls=env.sim_calls - calls0, wall_s=time.perf_counter() - t0, grads=grads, loss=loss_value,
            truncated=truncated)


# ---------------------------------------------------------------------- backends
class SerialBackend:
    """All workers' episodes in this process, one after the other (tests, and one-core machines)."""

    def __init__(self, graphs, policy, env, sim_params=None, initial=None):
        self.worker = RolloutWorker(graphs, policy, env, sim_params, initial)

    def run(self, weights: dict[str, np.ndarray], tasks: list[RolloutTask]) -> list[RolloutResult]:
        self.worker.load(weights)
        return [self.worker.run(t) for t in tasks]

    def close(self) -> None:
        pass


_PROCESS_WORKER: RolloutWorker | None = None


def _init_process(graphs, policy, env, sim_params, initial):
    global _PROCESS_WORKER
    _PROCESS_WORKER = RolloutWorker(graphs, policy, env, sim_params, initial)


def _run_in_process(weights, tasks):
    _PROCESS_WORKER.load(weights)
    return [_PROCESS_WORKER.run(t) for t in tasks]


class ProcessBackend:
    """Local worker processes (spawned, one torch thread each; a :class:`placer.procpool.WorkerPool`,
    deaf to Ctrl-C). Tasks are dealt to the processes in contiguous blocks; results come back in task
    order."""

    def __init__(self, graphs, policy, env, sim_params=None, initial=None, processes: int | None = None):
        self.processes = max(1, int(processes or os.cpu_count() or 1))
        self.pool = WorkerPool(self.processes, initializer=_init_process,
                               initargs=(graphs, policy, env, sim_params, initial))

    def run(self, weights, tasks):
        k = min(self.processes, len(tasks))
        blocks = [b.tolist() for b in np.array_split(np.arange(len(tasks)), k)]
        futs = [self.pool.submit(_run_in_process, weights, [tasks[i] for i in b]) for b in blocks]
        out: list[RolloutResult] = []
        for f in futs:
            out.extend(f.result())
        return out

    def close(self) -> None:
        self.pool.stop()  # idle after a finished run(); mid-run (Ctrl-C) its episodes are dropped, promptly


class RayBackend:
    """Ray actors, one per worker (the optional ``ray`` extra); same contract as the others.

    Joins the Ray cluster at ``address`` (or ``$RAY_ADDRESS``; every node needs placer installed)
    when given, else uses the runtime already initialised in this process, else starts a local one
    with ``processes`` CPUs (stopped again by :meth:`close`). Tasks are dealt to the actors round
    robin; a result depends only on (weights, task), so it equals the serial backend's."""

    def __init__(self, graphs, policy, env, sim_params=None, initial=None, processes: int | None = None,
                 address: str | None = None):
        try:
            import ray
        except ImportError as e:  # pragma: no cover - ray is optional
            raise RuntimeError("the Ray backend needs the 'ray' extra: pip install 'placer[ray]'") from e
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, int(processes or os.cpu_count() or 1)), include_dashboard=False,
                         log_to_driver=False)
            self.started = True
        actor = ray.remote(num_cpus=1)(RolloutWorker)
        n = max(1, int(processes or os.cpu_count() or 1))
        self.actors = [actor.remote(graphs, policy, env, sim_params, initial) for _ in range(n)]

    def run(self, weights, tasks):
        ray = self.ray
        ref = ray.put(weights)
        ray.get([a.load.remote(ref) for a in self.actors])
        futs = [self.actors[i % len(self.actors)].run.remote(t) for i, t in enumerate(tasks)]
        return ray.get(futs)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []
        if self.started:
            self.ray.shutdown()


BACKENDS = {"serial": SerialBackend, "process": ProcessBackend, "ray": RayBackend}


def make_backend(name: str, graphs, policy, env, sim_params=None, initial=None, processes: int | None = None,
                 address: str | None = None):
    if name not in BACKENDS:
        raise ValueError(f"unknown rollout backend {name!r}; use one of {', '.join(BACKENDS)}")
    if name == "serial":
        return SerialBackend(graphs, policy, env, sim_params, initial)
    if name == "ray":
        return RayBackend(graphs, policy, env, sim_params, initial, processes=processes, address=address)
    return BACKENDS[name](graphs, policy, env, sim_params, initial, processes=processes)
