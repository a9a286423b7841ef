"""Plots: a timeline of one simulated step and learning curves of searching methods.

Matplotlib is the ``plot`` extra; it is imported lazily (Agg backend) by :func:`pyplot` so the rest
of the package never needs it.
"""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend, or a clear error without the extra."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        from placer.errors import InputError

        raise InputError("plots", "matplotlib", "is not installed", "pip install 'placer[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


from placer.viz.curves import plot_learning_curves  # noqa: E402
from placer.viz.timeline import plot_timeline  # noqa: E402

__all__ = ["pyplot", "plot_learning_curves", "plot_timeline"]
