"""Proximal Policy Optimization for placement policies (Schulman et al., 2017, "Proximal Policy
Optimization Algorithms"), as Mars (section 3.4) and GDP (section 3.3) train their placers.

A sample is one whole placement (every node placed) with one reward, so every action of a sample
shares the sample's advantage. For a batch of samples drawn from the policy pi_old:

* advantage A = R - b, R the sample's reward and b a baseline, normalised over the batch to zero
  mean and unit standard deviation (``normalize``);
* per action, ratio r = pi_theta(a | s) / pi_old(a | s) = exp(log pi_theta - log pi_old);
* clipped surrogate (PPO eq. 7), maximised: L_clip = E[min(r A, clip(r, 1 - eps, 1 + eps) A)];
* entropy bonus c_H * E[H(pi_theta(. | s))] (PPO eq. 9, no value term: the baseline is not learned);
* ``epochs`` passes (K) of minibatch gradient steps over the same batch (PPO Algorithm 1).

:func:`clipped_surrogate` is the loss, :func:`ppo_update` the K-epoch loop around a callback that
recomputes log-probabilities and entropies of a minibatch under the current weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from placer.rl.step import gradient_step


def normalize(adv: np.ndarray | torch.Tensor, eps: float = 1e-8):
    """(A - mean) / (std + eps); a batch of one (or of equal values) becomes zeros."""
    if isinstance(adv, torch.Tensor):
        a = adv.to(torch.float64)
        if a.numel() < 2:
            return torch.zeros_like(adv)
        return ((a - a.mean()) / (a.std(unbiased=False) + eps)).to(adv.dtype)
    a = np.asarray(adv, dtype=np.float64)
    if a.size < 2:
        return np.zeros_like(a)
    return (a - a.mean()) / (a.std() + eps)


def clipped_surrogate(logp_new: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip: float,
                      mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """The PPO clipped loss to *minimise*: -mean over actions of min(r A, clip(r, 1-eps, 1+eps) A).

    ``logp_new``, ``logp_old``, ``adv`` broadcast to the same shape (e.g. (B, T) per action with
    ``adv`` (B, 1)); ``mask`` (same shape, bool) selects the actions that count. Returns the loss and
    diagnostics: the fraction of clipped ratios and the approximate KL mean(log pi_old - log pi_new)."""
    ratio = torch.exp(logp_new - logp_old)
    adv = adv.expand_as(ratio) if adv.shape != ratio.shape else adv
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    obj = torch.minimum(unclipped, clipped)
    if mask is None:
        mask = torch.ones_like(obj, dtype=torch.bool)
    m = mask.to(obj.dtype)
    n = m.sum().clamp_min(1.0)
    loss = -(obj * m).sum() / n
    with torch.no_grad():
        frac = (((ratio - 1.0).abs() > clip).to(obj.dtype) * m).sum() / n
        kl = ((logp_old - logp_new) * m).sum() / n
    return loss, {"clip_fraction": float(frac), "approx_kl": float(kl)}


@dataclass(frozen=True)
class PPOSettings:
    clip: float = 0.2  # epsilon of the clipped ratio (PPO's default)
    epochs: int = 4  # K: passes over each batch
    minibatches: int = 1  # minibatches per pass
    entropy: float = 0.01  # c_H: entropy bonus
    grad_clip: float = 1.0  # max global gradient norm


def ppo_update(params, opt: torch.optim.Optimizer, groups: list[tuple], settings: PPOSettings,
               gen: torch.Generator, entropy_coef: float | None = None) -> dict:
    """K epochs of minibatch steps on one batch (PPO Algorithm 1, lines "optimise surrogate L wrt
    theta, with K epochs and minibatch size M").

    ``groups`` holds one ``(n_samples, evaluate, logp_old, adv)`` per graph of the batch:
    ``evaluate(idx) -> (logp, entropy)`` gives the log-probabilities (len(idx), T) of the taken
    actions and the entropies (len(idx), T) under the current weights for the samples ``idx`` (a
    LongTensor); ``logp_old`` (n, T) and ``adv`` (n,) come from the rollout. Each epoch splits every
    group's samples into ``minibatches`` parts (a permutation drawn from ``gen``, so reproducible);
    one gradient step takes part m of every group, the loss being the mean over groups of the clipped
    surrogate minus c_H times the mean entropy. Returns the means of the last epoch."""
    params = [p for p in params if p.requires_grad]
    c_h = settings.entropy if entropy_coef is None else entropy_coef
    stats: dict = {}
    for _ in range(settings.epochs):
        splits = []
        for n, *_ in groups:
            perm = torch.randperm(n, generator=gen)
            splits.append(torch.tensor_split(perm, max(1, min(settings.minibatches, n))))
        M = max(len(s) for s in splits)
        acc = {"loss": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0}
        for m in range(M):
            terms, ents, diags = [], [], []
            for (n, evaluate, logp_old, adv), parts in zip(groups, splits):
                if m >= len(parts) or len(parts[m]) == 0:
                    continue
                idx = parts[m]
                logp, ent = evaluate(idx)
                loss, diag = clipped_surrogate(logp, logp_old[idx], adv[idx][:, None], settings.clip)
                terms.append(loss - c_h * ent.mean())
                ents.append(float(ent.mean().detach()))
                diags.append(diag)
            if not terms:
                continue
            total = torch.stack(terms).mean()
            gradient_step(opt, params, total, settings.grad_clip)
            acc["loss"] += float(total.detach()) / M
            acc["entropy"] += float(np.mean(ents)) / M
            acc["clip_fraction"] += float(np.mean([d["clip_fraction"] for d in diags])) / M
            acc["approx_kl"] += float(np.mean([d["approx_kl"] for d in diags])) / M
        stats = acc
    return stats


# ---------------------------------------------------------------------- the training loop Mars and GDP share
@dataclass(frozen=True)
class TrainSettings:
    batch: int = 8  # placements sampled per PPO update (per graph)
    lr: float = 1e-3  # Adam learning rate
    ppo: PPOSettings = PPOSettings()
    reward: str = "sqrt"  # R = -sqrt(objective in ms) (the Hierarchical Planner's), or "linear": -objective in ms
    seed: int = 0


class Scorer:
    """Objectives of a batch of op placements for one graph, within a budget. ``room()`` is how many
    placements may still be simulated (None: no limit)."""

    def __init__(self, ev):
        self.ev = ev

    def room(self) -> int | None:
        if self.ev.seconds is not None and self.ev.out_of_budget():
            return 0
        return self.ev.remaining()

    def __call__(self, P: np.ndarray) -> np.ndarray:
        return np.asarray(self.ev.evaluate_batch(P).objective_us, dtype=np.float64)


def update_seed(seed: int, update: int, graph: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(update), int(graph), 11]).generate_state(1, dtype=np.uint64)[0] >> 1)


class PolicyTrainer:
    """Synchronous PPO over one graph (search mode) or several (batch training: every update samples
    ``batch`` placements of each graph, normalises the advantages per graph, and takes the K epochs
    over all of them together).

    ``policy`` implements ``sample(graph, B, gen) -> (actions (B, N), logp (B, N))`` without
    gradients and ``evaluate(graph, actions) -> (logp (B, N), entropy (B, N))`` with them, for a
    graph context that has ``gp`` (:class:`placer.nn.encoder.PlacementNodes`). ``scorers[g]`` simulates
    graph g's placements within its budget. Same seed, same updates: every random draw comes from a
    generator seeded by (seed, update, graph)."""

    def __init__(self, policy, graphs: list, scorers: list, settings: TrainSettings, *,
                 progress: Callable[[dict], None] | None = None, log_every: int = 10, logger=None, label: str = "ppo",
                 clock_start: float | None = None):
        """``progress`` gets one record per update (:mod:`placer.methods.learned.protocol`: methods know no
        files; the CLI writes the records with :class:`placer.io.JsonLines`)."""
        import logging
        import time

        if len(graphs) != len(scorers) or not graphs:
            raise ValueError("one scorer per graph, at least one graph")
        self.policy, self.graphs, self.scorers, self.cfg = policy, graphs, scorers, settings
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.opt = torch.optim.Adam(self.params, lr=settings.lr)
        self.update = 0
        self.placements = 0
        self.used = [0 for _ in graphs]  # placements simulated per graph
        self.best = [{"objective_us": float("inf"), "placement": None, "at": 0} for _ in graphs]
        self.history: list[list[float]] = [[] for _ in graphs]  # mean objective (us) of each update's batch
        self.progress, self.log_every = progress, max(1, int(log_every))
        self.logger = logger or logging.getLogger(f"placer.{label}")
        self.label = label
        self.stopped = False
        self.clock_start = time.perf_counter() if clock_start is None else clock_start  # logs only, decides nothing

    # -- one update
    def _reward(self, obj_us: np.ndarray) -> np.ndarray:
        ms = np.asarray(obj_us, dtype=np.float64) / 1000.0
        return -np.sqrt(ms) if self.cfg.reward == "sqrt" else -ms

    def step(self) -> dict | None:
        """One PPO update; None (and ``stopped``) when no graph has budget left."""
        import time

        t0 = time.perf_counter()
        logps, advs, acts, gidx = [], [], [], []
        objs_all = []
        for g, (graph, scorer) in enumerate(zip(self.graphs, self.scorers)):
            room = scorer.room()
            B = self.cfg.batch if room is None else min(self.cfg.batch, room)
            if B <= 0:
                continue
            gen = torch.Generator().manual_seed(update_seed(self.cfg.seed, self.update, g))
            self.policy.eval()
            with torch.no_grad():
                a, lp = self.policy.sample(graph, B, gen)
            P = graph.gp.expand(a.numpy())
            obj = scorer(P)
            self.placements += len(obj)
            self.used[g] += len(obj)
            k = int(np.argmin(obj))
            if obj[k] < self.best[g]["objective_us"]:
                self.best[g] = {"objective_us": float(obj[k]), "placement": a[k].numpy().copy(), "at": self.placements}
            self.history[g].append(float(np.mean(obj)))
            objs_all.append(obj)
            acts.append(a)
            logps.append(lp)
            advs.append(torch.as_tensor(normalize(self._reward(obj)), dtype=torch.float32))
            gidx.append(g)
        if not acts:
            self.stopped = True
            return None
        # K epochs over every graph's samples together
        self.policy.train()
        gen = torch.Generator().manual_seed(update_seed(self.cfg.seed, self.update, 1 << 20))
        groups = [(len(acts[i]), (lambda idx, graph=self.graphs[g], a=acts[i]: self.policy.evaluate(graph, a[idx])),
                   logps[i], advs[i]) for i, g in enumerate(gidx)]
        stats = ppo_update(self.params, self.opt, groups, self.cfg.ppo, gen)
        self.update += 1
        line = {"update": self.update, "placements": self.placements,
                "batch_mean_us": [float(np.mean(o)) for o in objs_all],
                "best_us": [b["objective_us"] for b in self.best], **{k: round(v, 6) for k, v in stats.items()},
                "seconds": round(time.perf_counter() - t0, 4),
                "wall_s": round(time.perf_counter() - self.clock_start, 4)}
        self._log(line)
        return line

    def _log(self, line: dict) -> None:
        if self.progress is not None:
            self.progress({"method": self.label, **line})
        if self.update % self.log_every == 0:
            best = min(b["objective_us"] for b in self.best)
            self.logger.info("%s update %d: %d placements, best %.3f ms, entropy %.3f", self.label, self.update,
                             self.placements, best / 1000.0, line["entropy"])

    def train(self, updates: int | None = None, on_update=None) -> "PolicyTrainer":
        """Run updates until ``updates`` more have been taken or the budget is spent."""
        done = 0
        while not self.stopped and (updates is None or done < updates):
            line = self.step()
            if line is None:
                break
            done += 1
            if on_update is not None:
                on_update(self, line)
        return self

    # -- checkpoints (plain containers: placer.io.read_checkpoint reads them)
    def state_dict(self) -> dict:
        return {"model": self.policy.state_dict(), "optimizer": self.opt.state_dict(), "update": self.update,
                "placements": self.placements, "used": list(self.used), "stopped": self.stopped,
                "best": [{"objective_us": b["objective_us"], "at": b["at"],
                          "placement": None if b["placement"] is None else torch.as_tensor(b["placement"])}
                         for b in self.best],
                "history": [torch.as_tensor(np.asarray(h, dtype=np.float64)) for h in self.history],
                "graphs": [g.gp.name for g in self.graphs]}

    def load_state_dict(self, state: dict, weights_only: bool = False) -> None:
        self.policy.load_state_dict(state["model"])
        if weights_only:
            return
        if list(state["graphs"]) != [g.gp.name for g in self.graphs]:
            raise ValueError("the checkpoint was trained on other graphs; resume with the same ones or fine-tune")
        self.opt.load_state_dict(state["optimizer"])
        self.update, self.placements = int(state["update"]), int(state["placements"])
        self.used = [int(u) for u in state["used"]]
        self.stopped = False  # "stopped" only meant that those scorers' budgets were spent
        self.best = [{"objective_us": float(b["objective_us"]), "at": int(b["at"]),
                      "placement": None if b["placement"] is None else b["placement"].numpy().copy()}
                     for b in state["best"]]
        self.history = [h.tolist() for h in state["history"]]
