"""The REINFORCE estimator of every REINFORCE trainer in placer, written once: the returns, the
baselines (one interface: :meth:`Baseline.value` before an episode is counted, :meth:`Baseline.add`
to count it), the normalisations and the score-function loss. An :class:`Estimator` names a paper's
choice of each (:func:`placeto`, :func:`colocrl`, :func:`doppler`, :func:`giph`); the table is in
docs/architecture.md. Every piece evaluates the float operations its trainers always did, in the
same order, so a trainer's runs are those it made before this module existed, bit for bit."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np


# ---------------------------------------------------------------------- returns
def returns_to_go(rewards, gamma: float = 1.0) -> np.ndarray:
    """G_t = sum_{t' >= t} gamma^(t' - t) r_t' (float64)."""
    r = np.asarray(rewards, dtype=np.float64)
    if gamma == 1.0:
        return np.cumsum(r[::-1])[::-1].copy()
    G, acc = np.empty_like(r), 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = r[t] + gamma * acc
        G[t] = acc
    return G


# ---------------------------------------------------------------------- baselines
class Baseline(Protocol):
    def value(self, G):
        """The baseline for an episode (or batch) with returns ``G``, from the ones counted before it."""

    def add(self, G) -> None:
        """Count ``G``."""


class WindowMean:
    """Placeto (appendix A.1): b_t the mean of G_t over the last ``window`` episodes counted (None:
    none yet, b = 0). ``G`` is not needed: the trainer sends the value to its workers."""

    def __init__(self, window: int, episodes=()):
        self.episodes = deque(episodes, maxlen=window)

    def value(self, G=None) -> np.ndarray | None:
        return np.mean(np.stack(self.episodes), axis=0) if self.episodes else None

    def add(self, G) -> None:
        self.episodes.append(G)

    def rms(self) -> float:
        """RMS of G_t - b_t over the window's episodes (1 with fewer than two, or when 0)."""
        if len(self.episodes) < 2:
            return 1.0
        H = np.stack(self.episodes)
        rms = float(np.sqrt(np.mean((H - H.mean(axis=0)) ** 2)))
        return rms if rms > 1e-12 else 1.0


@dataclass
class MovingAverage:
    """ColocRL (section 2) and the Hierarchical Planner: one scalar, b <- decay b + (1 - decay) mean R
    after each batch, opened by the first batch's mean."""

    decay: float
    b: float | None = None

    def value(self, R) -> float:
        return float(R.mean()) if self.b is None else self.b

    def add(self, R) -> None:
        m = float(R.mean())
        self.b = self.decay * (m if self.b is None else self.b) + (1 - self.decay) * m


@dataclass
class RunningMean:
    """DOPPLER (section 4.3): the mean reward of every episode counted (``total`` / ``count``); with
    none, the episode's own reward (advantage 0)."""

    total: float = 0.0
    count: int = 0

    def value(self, r: float) -> float:
        return self.total / self.count if self.count else r

    def add(self, r: float) -> None:
        self.total += r
        self.count += 1


@dataclass(eq=False)
class DecayedMean:
    """GiPH (section 4.4): per step, b_t <- decay b_t + (1 - decay) G_t; a step no episode reached yet
    takes the episode's mean return (ours), and its first return opens b_t."""

    decay: float
    b: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def value(self, G: np.ndarray) -> np.ndarray:
        n, k = len(G), min(len(G), len(self.b))
        return np.concatenate([self.b[:k], np.full(n - k, G.mean() if n else 0.0)])

    def add(self, G: np.ndarray) -> None:
        n, k = len(G), min(len(G), len(self.b))
        if k < n:
            self.b = np.concatenate([self.b, G[k:]])
        self.b[:k] = self.decay * self.b[:k] + (1 - self.decay) * G[:k]


# ---------------------------------------------------------------------- advantages and the loss
def advantages(G, b=None, scale=1.0):
    """A = (G - b) / scale; ``b`` None is 0, an array is cut to G's length (a capped episode)."""
    if b is not None:
        G = G - (b[:len(G)] if isinstance(b, np.ndarray) else b)
    return G if scale == 1.0 else G / scale


def score_loss(logp, A, ent=None, entropy: float = 0.0, *, reduce: Literal["sum", "mean"] = "sum",
               batch: int | None = None, into=None):
    """``into - R(A_t log pi(a_t | s_t)) / batch - entropy R(H_t)``, whose gradient is the REINFORCE
    estimate. ``logp`` the chosen actions' log-probabilities; ``A`` an array of advantages (one per
    step or sample; float32 in the product) and R the sum or mean, or a float: one advantage for
    the whole episode (a terminal reward), ``A sum_t log pi``. ``into`` None: the loss starts at 0
    (negated); ``batch`` None: not divided. ``ent`` the entropies (a 0-d tensor taken as it is;
    None: no entropy term, 0 subtracted)."""
    import torch

    if isinstance(A, float):
        pg = A * logp.sum()
    else:
        t = logp * torch.as_tensor(A, dtype=torch.float32)
        pg = t.sum() if reduce == "sum" else t.mean()
    if batch is not None:
        pg = pg / batch
    out = -pg if into is None else into - pg
    if ent is None:
        return out - 0.0
    return out - entropy * (ent if ent.dim() == 0 else ent.sum() if reduce == "sum" else ent.mean())


# ---------------------------------------------------------------------- the papers' estimators
@dataclass(frozen=True)
class Estimator:
    """One paper's REINFORCE estimator: its return, baseline, normalisation and reduction."""

    returns: Literal["terminal", "to-go"]  # one reward per episode or sample, or the return-to-go
    baseline: Literal["window", "moving", "running", "decayed"]  # WindowMean, MovingAverage, RunningMean, DecayedMean
    normalise: Literal["none", "rms", "std"] = "none"  # A divided by: 1, the baseline's RMS, the episode's std + 1e-8
    reduce: Literal["sum", "mean"] = "sum"  # over steps or samples, in the loss
    gamma: float = 1.0  # discount of the return-to-go
    window: int = 10  # "window": episodes in the mean
    decay: float = 0.9  # "moving", "decayed": the old value's weight

    def returns_of(self, rewards):
        return rewards if self.returns == "terminal" else returns_to_go(rewards, self.gamma)

    def new_baseline(self) -> Baseline:
        if self.baseline == "window":
            return WindowMean(self.window)
        if self.baseline == "moving":
            return MovingAverage(self.decay)
        return RunningMean() if self.baseline == "running" else DecayedMean(self.decay)

    def scale(self, baseline) -> float:
        """The trainer-side normalisation ("rms": :meth:`WindowMean.rms`), 1 otherwise."""
        return baseline.rms() if self.normalise == "rms" else 1.0

    def advantages(self, G, b, scale=1.0):
        """:func:`advantages`; "std" divides by the episode's std + 1e-8 (episodes of two steps or more)."""
        if self.normalise == "std" and np.size(G) > 1:
            A = advantages(G, b)
            return A / (A.std() + 1e-8)
        return advantages(G, b, scale)

    def loss(self, logp, A, ent=None, entropy: float = 0.0, **how):
        return score_loss(logp, A, ent, entropy, reduce=self.reduce, **how)


def placeto(gamma: float, window: int, rms: bool = False) -> Estimator:
    """Placeto appendix A.1 eq. 1: the gradient of sum_t log pi(a_t | s_t) (G_t - b_t) over each
    worker's episode, b_t the window mean (A.7: k = 10); summed over workers."""
    return Estimator("to-go", "window", "rms" if rms else "none", "sum", gamma=gamma, window=window)


def colocrl(decay: float) -> Estimator:
    """ColocRL section 2 (Mirhoseini et al. 2017): (1/K) sum_i (R(P_i) - B) grad log p(P_i), B a
    moving average; the Hierarchical Planner's too."""
    return Estimator("terminal", "moving", reduce="mean", decay=decay)


def doppler() -> Estimator:
    """DOPPLER section 4.3: (1/B) sum_i (R_i - b) grad sum_t log pi(a_t | s_t), b the mean reward of
    the earlier episodes."""
    return Estimator("terminal", "running")


def giph(gamma: float, decay: float) -> Estimator:
    """GiPH section 4.4: the gradient of (1/T) sum_t log pi(a_t | s_t) A_t, A_t the discounted
    return-to-go minus a per-step baseline, normalised per episode (ours)."""
    return Estimator("to-go", "decayed", "std", "sum", gamma=gamma, decay=decay)
