"""Supervised warm start of a placement policy toward a start placement (not in the papers: the
Hierarchical Planner, Mars and GDP here start their policy from the searched layer split or the
whole graph on the fastest device, see their module docstrings)."""

from __future__ import annotations

import math
from typing import Callable


def warm_start(nll: Callable, params, mass: float, max_steps: int, lr: float = 1e-2,
               stop: Callable[[], bool] | None = None) -> tuple[int, float]:
    """Adam steps on ``nll()`` (the policy's mean negative log-probability per decision of the
    target placement, a tensor with gradients; teacher forcing) until the geometric-mean probability
    exp(-nll) reaches ``mass``, ``max_steps`` steps were taken or ``stop()`` is true (a method's time
    limit, :meth:`placer.methods.base.Evaluator.time_up`); nothing is simulated. Returns (steps
    taken, the mean probability last measured)."""
    import torch

    opt = torch.optim.Adam(params, lr=lr)
    reached, steps = 0.0, 0
    while steps < max_steps and not (stop is not None and stop()):
        loss = nll()
        reached = math.exp(-float(loss.detach()))
        if reached >= mass:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    return steps, reached
