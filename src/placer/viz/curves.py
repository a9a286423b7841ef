"""Learning curves: best step time found versus placements sampled, one line per method (the
x-axis of Placeto's Figure 2 and Post's Figure 2). A method that samples one placement is a point."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def plot_learning_curves(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], path, title: str = "",
                         lower_bound_us: float | None = None, dpi: int = 64) -> Path:
    """``series``: (label, [(placements sampled, best objective in us), ...]) per method/seed.
    Writes a PNG to ``path``; y in milliseconds (the memory-penalised objective the methods minimise,
    equal to the step time when nothing runs out of memory), x logarithmic when it spans more than 100x."""
    from placer.viz.backend import pyplot
    from placer.viz.colours import colour as line_colour

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=dpi)
    xmax = 1.0
    for k, (label, pts) in enumerate(series):
        pts = [(float(x), float(y)) for x, y in pts if y is not None]
        if not pts:
            continue
        xs, ys = zip(*pts)
        xmax = max(xmax, max(xs))
        colour = line_colour(k)
        if len(pts) == 1:
            ax.plot(xs, [y / 1e3 for y in ys], "o", color=colour, label=label, ms=5)
        else:
            ax.step(xs, [y / 1e3 for y in ys], where="post", color=colour, label=label, lw=1.3)
    if lower_bound_us:
        ax.axhline(lower_bound_us / 1e3, color="k", lw=0.8, ls="--", label="lower bound")
    if xmax > 100:
        ax.set_xscale("log")
    ax.set_xlabel("placements sampled")
    ax.set_ylabel("best objective found (ms)\nstep time + memory penalty", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
