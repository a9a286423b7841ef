"""Reinforcement learning for placement (needs the ``torch`` extra): Placeto's progressive MDP as a
Gymnasium environment (:mod:`placer.rl.env`), placement tasks over :mod:`placer.grouping` units (:mod:`placer.rl.task`), rollout
workers (:mod:`placer.rl.workers`), REINFORCE (:mod:`placer.rl.reinforce`), checkpoints and
placing with a trained policy (:mod:`placer.rl.policy`)."""
