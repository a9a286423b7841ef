"""REINFORCE for Placeto (appendix A.1 eq. 1, A.7 "Training details"), read top to bottom:

for each update u:
    every one of W workers syncs the weights and rolls out one episode (search mode: all on the one
    graph; policy mode: each worker on its own graph of the training set), then returns the gradient of
        -sum_t [ log pi(a_t | s_t) (G_t - b_t) + beta_u H(pi(. | s_t)) ]
    where G_t is the return-to-go and b_t the per-timestep baseline: the mean of G_t over the last
    k (= 10) episodes of the same graph finished before this update (so never the current one);
    the gradients are summed, clipped by global norm, and Adam takes one step with the learning rate
    decayed linearly from lr_start to lr_end; beta decays linearly from entropy_start to entropy_end.
training stops after ``episodes`` episodes, or earlier when the stopping rule of A.7 fires: the mean
final objective of the last ``stop_window`` episodes differs by less than ``stop_tol`` (2%) from that
of the window before, or when a placement budget is spent: an episode simulates up to one placement
per step, so the last round's episodes are capped to share exactly the placements left (a capped
episode stops before the step that would simulate one placement too many).

The estimator (returns, baseline, loss) is :func:`placer.rl.estimator.placeto`; the workers
(:mod:`placer.rl.workers`) roll out and take their episode's loss (:func:`placer.rl.workers.episode_loss`).
:class:`ReinforceConfig` is a plain view of the Placeto method's config
(:meth:`placer.methods.learned.placeto.PlacetoConfig.reinforce`), the one place where the
hyperparameters and their defaults are written; only the settings that config does not carry have
defaults here.

Every episode is one record for the ``progress`` callback (see :meth:`Trainer._log_line`); the
trainer's whole state (weights, Adam moments, baselines, counters, best placements) is a plain state
dict (:meth:`Trainer.state_dict`) that resumes bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields
from typing import Callable

import numpy as np
import torch

from placer.nn.placeto import PlacetoNet, PolicyConfig
from placer.rl.env import EnvConfig
from placer.rl.estimator import Estimator, WindowMean, placeto
from placer.rl.step import clip_and_step
from placer.rl.task import PlacementTask
from placer.sim import SimParams, memory_first

CHECKPOINT_FORMAT = "placer-placeto-1"


@dataclass(frozen=True, kw_only=True)
class ReinforceConfig:
    """REINFORCE's settings, built from :class:`placer.methods.learned.placeto.PlacetoConfig` (which holds
    the defaults and the paper's values) or read back from a checkpoint."""

    episodes: int  # training episodes in all (each worker's rollout is one episode)
    workers: int  # W: episodes per update, gradients summed
    lr_start: float  # Adam learning rate at the first update ...
    lr_end: float  # ... decayed linearly to this at the last update
    entropy_start: float  # entropy bonus beta, high at first ...
    entropy_end: float  # ... decayed linearly to low
    baseline_window: int  # k: episodes in the per-timestep moving-average baseline
    grad_clip: float = 5.0  # max global L2 norm of the summed gradient (not in the paper)
    gamma: float  # discount of the return-to-go
    normalize_advantages: bool = False  # divide G_t - b_t by its RMS over the baseline's episodes (not in the paper)
    stop_window: int  # stopping rule window in episodes; 0 = run all episodes
    stop_tol: float = 0.02  # ... stop when the windowed objective changes less than this fraction (A.7: 2%)
    seed: int  # seeds the initial weights, the episodes and the graph each worker gets

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def updates(self) -> int:
        return max(1, -(-self.episodes // self.workers))

    @property
    def estimator(self) -> Estimator:
        return placeto(self.gamma, self.baseline_window, self.normalize_advantages)


def config_from_dict(cls, d: dict):
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def task_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(episode)]).generate_state(1, dtype=np.uint64)[0] >> 1)


def linear(start: float, end: float, u: int, n: int) -> float:
    """Value at update u of a linear schedule over n updates."""
    return start + (end - start) * (u / max(n - 1, 1))


class Trainer:
    """Synchronous data-parallel REINFORCE over one graph (search mode) or several (policy mode)."""

    def __init__(self, graphs: list[PlacementTask], policy: PolicyConfig, env: EnvConfig, rl: ReinforceConfig, *,
                 sim_params: SimParams | None = None, backend: str = "serial", processes: int | None = None,
                 progress: Callable[[dict], None] | None = None, initial: list | None = None):
        """Assembled by :func:`placer.methods.learned.placeto.build_trainer` from the method's one config;
        ``progress`` gets one record per episode (:meth:`_log_line`)."""
        if not graphs:
            raise ValueError("training needs at least one graph")
        A = {gp.n_actions for gp in graphs}
        if len(A) != 1:
            raise ValueError(f"all graphs must have the same number of candidate devices, got {sorted(A)}")
        self.graphs = graphs
        self.policy_cfg = policy
        if self.policy_cfg.n_actions != A.pop():
            raise ValueError(f"the policy has {self.policy_cfg.n_actions} outputs, the graphs {graphs[0].n_actions} devices")
        self.env_cfg = env
        self.cfg = rl
        self.sim_params = sim_params or SimParams()
        torch.manual_seed(self.cfg.seed)
        self.net = PlacetoNet(self.policy_cfg)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.cfg.lr_start)
        self.backend_name, self.processes, self.initial = backend, processes, initial
        self._backend = None
        self.progress = progress
        self.episode = 0
        self.update = 0
        self.sim_calls = 0
        self.wall_s = 0.0
        self.baselines = [self.cfg.estimator.new_baseline() for _ in graphs]
        self.history: list[float] = []  # final objective / scale per episode (stopping rule)
        # per graph the best placement seen, kept in placer.sim.memory_first order
        self.best = [{"objective_us": float("inf"), "step_us": float("inf"), "placement": None, "at_sim_calls": 0,
                      "fits": False} for _ in graphs]
        self.curve: list[list[tuple]] = [[] for _ in graphs]  # (sim calls so far, best objective, it fits)
        self.stopped = False
        self.schedule_placements: int | None = None  # set by train(max_placements=...)

    @property
    def placements(self) -> int:
        """Placements simulated so far (every simulation is one placement)."""
        return self.sim_calls

    # ------------------------------------------------------------------ workers
    @property
    def backend(self):
        if self._backend is None:
            from placer.rl.workers import make_backend

            self._backend = make_backend(self.backend_name, self.graphs, self.policy_cfg, self.env_cfg,
                                         self.sim_params, self.initial, self.processes)
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in self.net.state_dict().items()}

    # ------------------------------------------------------------------ one update
    def _graphs_for_update(self, W: int) -> list[int]:
        if len(self.graphs) == 1:
            return [0] * W
        rng = np.random.default_rng([self.cfg.seed, self.update, 7])
        return rng.choice(len(self.graphs), size=W, replace=len(self.graphs) < W).tolist()

    def _baseline(self, g: int) -> np.ndarray | None:
        return self.baselines[g].value()

    def max_sims_per_episode(self, g: int) -> int:
        """Placements an episode on graph g may simulate: the initial one and one per step
        (intermediate rewards), or the final one (terminal reward)."""
        if self.env_cfg.reward == "terminal":
            return 1
        return self.env_cfg.sweeps * self.graphs[g].n_groups + 1

    def caps(self, graphs: list[int], room: int | None) -> list[int | None]:
        """Per episode of this round, the most placements it may simulate: no cap while the round
        fits in ``room`` placements; else the first ceil(room / per-episode) episodes share ``room``
        evenly (the rest are not run), so the round never simulates more than ``room``."""
        if room is None:
            return [None] * len(graphs)
        per = [self.max_sims_per_episode(g) for g in graphs]
        if sum(per) <= room:
            return [None] * len(graphs)
        k = int(min(len(graphs), room, max(1, -(-room // max(1, int(np.mean(per)))))))
        return [room // k + (1 if i < room % k else 0) for i in range(k)]

    def step(self, room: int | None = None) -> list["RolloutResult"]:
        """One synchronous update: W episodes (fewer, capped, when fewer than a round's placements
        are left in ``room``), summed gradients, one Adam step."""
        from placer.rl.workers import RolloutTask

        t0 = time.perf_counter()
        cfg, U = self.cfg, self.cfg.updates
        W = min(cfg.workers, cfg.episodes - self.episode) if cfg.episodes > self.episode else cfg.workers
        if self.schedule_placements:  # schedules follow the fraction of the placement budget used
            f = min(1.0, self.sim_calls / self.schedule_placements)
            beta = cfg.entropy_start + (cfg.entropy_end - cfg.entropy_start) * f
            lr = cfg.lr_start + (cfg.lr_end - cfg.lr_start) * f
        else:  # ... or of the updates
            beta = linear(cfg.entropy_start, cfg.entropy_end, self.update, U)
            lr = linear(cfg.lr_start, cfg.lr_end, min(self.update, U - 1), U)
        graphs = self._graphs_for_update(W)
        caps = self.caps(graphs, room)
        est = cfg.estimator
        tasks = [RolloutTask(graph=g, seed=task_seed(cfg.seed, self.episode + i), entropy_coef=beta,
                             baseline=self._baseline(g), gamma=est.gamma, adv_scale=est.scale(self.baselines[g]),
                             max_sim_calls=cap)
                 for i, (g, cap) in enumerate(zip(graphs, caps))]
        results = self.backend.run(self.weights(), tasks)
        params = list(self.net.parameters())
        for p, *gs in zip(params, *[r.grads for r in results]):
            total = np.zeros_like(gs[0])
            for g in gs:  # summed in task order: deterministic whatever the backend
                total += g
            p.grad = torch.as_tensor(total)
        for group in self.opt.param_groups:
            group["lr"] = lr
        clip_and_step(self.opt, params, cfg.grad_clip)
        self.opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        for r in results:
            self._account(r, dt / len(results))
        for r in results:  # after the whole update: no episode's baseline contains itself or its round
            if not r.truncated:  # a capped episode's returns are not those of a whole episode
                self.baselines[r.graph].add(r.returns)
        self.update += 1
        self._check_stop()
        return results

    def _account(self, r: "RolloutResult", wall_s: float) -> None:
        gp = self.graphs[r.graph]
        self.episode += 1
        self.sim_calls += r.sim_calls
        self.wall_s += wall_s
        b = self.best[r.graph]
        if r.best_placement is not None and (memory_first(r.best_objective_us, r.best_fits)
                                             < memory_first(b["objective_us"], b.get("fits", True))):
            b.update(objective_us=r.best_objective_us, step_us=r.best_step_us, fits=r.best_fits,
                     placement=r.best_placement.astype(np.int64).tolist(), at_sim_calls=self.sim_calls)
            self.curve[r.graph].append((self.sim_calls, r.best_objective_us, r.best_fits))
        scale = max(float(gp.problem.fastest_us.sum()), 1e-9)
        self.history.append(r.final_objective_us / scale)
        if self.progress is not None:
            self.progress(self._log_line(r, b))

    def _log_line(self, r: "RolloutResult", best: dict) -> dict:
        return {"episode": self.episode, "update": self.update, "graph": self.graphs[r.graph].name,
                "placements": self.placements, "sim_calls": self.sim_calls, "reward": float(r.rewards.sum()),
                "initial_us": r.initial_objective_us, "final_us": r.final_objective_us, "final_step_us": r.final_step_us,
                "best_us": best["objective_us"], "best_step_us": best["step_us"], "entropy": r.entropy,
                "wall_s": round(self.wall_s, 4)}

    def _check_stop(self) -> None:
        w = self.cfg.stop_window
        if w and len(self.history) >= 2 * w:
            last, prev = np.mean(self.history[-w:]), np.mean(self.history[-2 * w:-w])
            if abs(last - prev) <= self.cfg.stop_tol * abs(prev):
                self.stopped = True

    # ------------------------------------------------------------------ the loop
    def train(self, on_update: Callable[["Trainer", list["RolloutResult"]], None] | None = None,
              max_placements: int | None = None, max_seconds: float | None = None,
              time_up: Callable[[], bool] | None = None) -> "Trainer":
        """Train until ``cfg.episodes`` episodes, the stopping rule, exactly ``max_placements``
        simulated placements in all (counting those of earlier calls), or the opt-in wall-clock
        limit ``max_seconds``, or until ``time_up()`` says a method's time limit has passed
        (:meth:`placer.methods.base.Evaluator.time_up`, on the clock it names; both not reproducible)."""
        t0 = time.perf_counter()
        self.schedule_placements = max_placements
        while self.episode < self.cfg.episodes and not self.stopped:
            room = None if max_placements is None else max_placements - self.sim_calls
            if room is not None and room <= 0:
                break
            if max_seconds is not None and time.perf_counter() - t0 >= max_seconds:
                break
            if time_up is not None and time_up():
                break
            results = self.step(room)
            if on_update is not None:
                on_update(self, results)
        return self

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything needed to resume bit for bit: plain containers of tensors, numbers and strings,
        so :func:`placer.io.read_checkpoint` reads it back."""
        return {
            "format": CHECKPOINT_FORMAT,
            "policy_config": self.policy_cfg.to_dict(), "env_config": self.env_cfg.to_dict(),
            "rl_config": self.cfg.to_dict(), "sim_params": asdict(self.sim_params),
            "graphs": [gp.name for gp in self.graphs],
            "grouping": [{"n_groups": gp.n_groups, "devices": gp.devices.tolist()} for gp in self.graphs],
            "model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
            "episode": self.episode, "update": self.update, "placements": self.placements,
            "sim_calls": self.sim_calls, "wall_s": self.wall_s, "stopped": self.stopped,
            "baselines": [[torch.as_tensor(x) for x in q.episodes] for q in self.baselines],
            "history": torch.as_tensor(np.asarray(self.history, dtype=np.float64)),
            "best": [dict(b) for b in self.best],
            "curve": [[list(p) for p in c] for c in self.curve],
        }

    def load_state_dict(self, state: dict, weights_only: bool = False) -> None:
        """Restore a checkpoint. ``weights_only``: take the policy weights and nothing else (fine-tuning)."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"not a Placeto checkpoint (format {state.get('format')!r})")
        self.net.load_state_dict(state["model"])
        if weights_only:
            return
        if list(state["graphs"]) != [gp.name for gp in self.graphs]:
            raise ValueError("the checkpoint was trained on other graphs; resume with the same ones or fine-tune")
        self.opt.load_state_dict(state["optimizer"])
        self.episode, self.update = int(state["episode"]), int(state["update"])
        self.sim_calls = int(state["sim_calls"])
        self.wall_s, self.stopped = float(state["wall_s"]), bool(state["stopped"])
        self.baselines = [WindowMean(self.cfg.baseline_window, (x.numpy() for x in q)) for q in state["baselines"]]
        self.history = state["history"].tolist()
        self.best = [dict(b) for b in state["best"]]
        self.curve = [[tuple(p) for p in c] for c in state["curve"]]

    def best_op_placement(self, g: int = 0) -> np.ndarray | None:
        b = self.best[g]["placement"]
        return None if b is None else self.graphs[g].expand(np.asarray(b))
