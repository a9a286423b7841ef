"""The gradient step of every policy-gradient trainer in placer, written once: REINFORCE (Placeto's
:mod:`placer.rl.reinforce`, ColocRL's and the Hierarchical Planner's
:class:`placer.methods.learned.seq2seq_reinforce.Seq2SeqRLTrainer`, DOPPLER, GiPH) and PPO
(:mod:`placer.rl.ppo`: GDP, Mars). The REINFORCE trainers take their loss from
:mod:`placer.rl.estimator` (each paper's estimator there; the table in docs/architecture.md), the
PPO trainer from :mod:`placer.rl.ppo`; the step after it is this one."""

from __future__ import annotations


def clip_and_step(opt, params, grad_clip: float) -> None:
    """The gradients' global L2 norm clipped at ``grad_clip`` (0: not clipped), then one step of
    ``opt``."""
    import torch

    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()


def gradient_step(opt, params, loss, grad_clip: float) -> None:
    """One optimiser step on ``loss``: the gradients of ``params`` zeroed, ``loss`` back-propagated,
    then :func:`clip_and_step`."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    clip_and_step(opt, params, grad_clip)
