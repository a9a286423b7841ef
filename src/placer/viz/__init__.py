"""Plots: a timeline of one simulated step and learning curves of searching methods (static PNGs,
matplotlib), and the interactive HTML report of placements (:func:`write_report`, Plotly).

Matplotlib and Plotly are the ``plot`` extra; both are imported lazily (matplotlib on the Agg
backend by :func:`pyplot`, Plotly when a report is written) so the rest of the package never needs them.
"""

from __future__ import annotations

from placer.viz.backend import pyplot
from placer.viz.curves import plot_learning_curves
from placer.viz.report import ReportEntry, write_report
from placer.viz.timeline import plot_timeline

__all__ = ["pyplot", "plot_learning_curves", "plot_timeline", "ReportEntry", "write_report"]
