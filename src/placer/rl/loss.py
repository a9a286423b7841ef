"""The REINFORCE loss of one episode (Placeto appendix A.1 eq. 1, with A.7's entropy bonus): the
rollout workers (:mod:`placer.rl.workers`) compute it, the trainer (:mod:`placer.rl.reinforce`)
sums the workers' gradients."""

from __future__ import annotations

import numpy as np
import torch

from placer.nn.placeto import entropy_of


def returns_to_go(rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """G_t = sum_{t' >= t} gamma^(t' - t) r_t'."""
    r = np.asarray(rewards, dtype=np.float64)
    if gamma == 1.0:
        return np.cumsum(r[::-1])[::-1].copy()
    G, acc = np.empty_like(r), 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = r[t] + gamma * acc
        G[t] = acc
    return G


def reinforce_loss(logits: torch.Tensor, actions, returns, baseline=None, entropy_coef: float = 0.0,
                   adv_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Appendix A.1 eq. 1 with A.7's entropy bonus, for one episode of T steps:
    ``loss = -sum_t [log pi(a_t | s_t) (G_t - b_t) / adv_scale + beta H(pi(. | s_t))]``, whose
    gradient is the REINFORCE estimate (the policy moves towards actions whose return-to-go beats
    the baseline). ``logits`` (T, A), ``actions`` (T,), ``returns`` G (T,), ``baseline`` b (T,) or
    None (0). Returns (loss, per-step entropy)."""
    T = logits.shape[0]
    logp = torch.log_softmax(logits, dim=-1).gather(1, torch.as_tensor(np.asarray(actions), dtype=torch.int64)[:, None])[:, 0]
    ent = entropy_of(logits)
    b = np.zeros(T) if baseline is None else np.asarray(baseline, dtype=np.float64)[:T]
    adv = torch.as_tensor((np.asarray(returns, dtype=np.float64) - b) / adv_scale, dtype=torch.float32)
    return -(logp * adv).sum() - entropy_coef * ent.sum(), ent
