"""Matplotlib on the non-interactive Agg backend, imported only when a plot is drawn."""

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
