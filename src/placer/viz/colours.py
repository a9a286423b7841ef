"""One distinct colour per method line (the search curves of the HTML report and the learning-curve
PNGs): the ten Tableau colours first, then hues a golden angle apart at alternating lightness, so
that a line-up of any size gets pairwise distinct colours (the default line-up has over 20 methods;
cycling ten colours made two pairs of its curves share one)."""

from __future__ import annotations

import colorsys

TABLEAU = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def colour(k: int) -> str:
    """The ``k``-th line colour (``#rrggbb``)."""
    if k < len(TABLEAU):
        return TABLEAU[k]
    j = k - len(TABLEAU)
    hue = (0.42 + j * 0.381966) % 1.0  # golden-angle steps: neighbours far apart on the wheel
    light = (0.25, 0.55, 0.70)[j % 3]
    r, g, b = colorsys.hls_to_rgb(hue, light, 0.75)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def colours(n: int) -> list[str]:
    """The first ``n`` line colours."""
    return [colour(k) for k in range(n)]
