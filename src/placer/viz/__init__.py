"""Plots: a timeline of one simulated step and learning curves of searching methods.

Matplotlib is the ``plot`` extra; it is imported lazily (Agg backend) by :func:`pyplot` so the rest
of the package never needs it.
"""

from __future__ import annotations

from placer.viz.backend import pyplot
from placer.viz.curves import plot_learning_curves
from placer.viz.timeline import plot_timeline

__all__ = ["pyplot", "plot_learning_curves", "plot_timeline"]
