"""Reinforcement learning for placement (the ``torch`` extra); docs/architecture.md maps its modules."""
