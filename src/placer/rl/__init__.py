"""Reinforcement learning for placement (needs the ``torch`` extra): Placeto's progressive MDP as a
Gymnasium environment (:mod:`placer.rl.env`), placement tasks over :mod:`placer.grouping` units
(:mod:`placer.rl.task`), the REINFORCE loss (:mod:`placer.rl.loss`), rollout workers
(:mod:`placer.rl.workers`), REINFORCE (:mod:`placer.rl.reinforce`), a trained policy and placing
with it (:mod:`placer.rl.policy`), policy files for the CLI and the bench (:mod:`placer.rl.checkpoint`),
PPO as Mars and GDP train (:mod:`placer.rl.ppo`), the gradient step every policy-gradient trainer
takes (:mod:`placer.rl.step`). Imports run one way:
checkpoint -> policy -> reinforce -> workers -> loss."""
