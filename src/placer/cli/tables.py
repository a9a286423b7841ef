"""Result tables that fit the terminal without cutting a number.

Rich shrinks every column of a table wider than the console, ellipsising numbers (``1,088…``). A
:func:`fitted` table instead keeps every number column at its widest cell (never wrapped, never
cut), lets only the text columns wrap, and, where even that is too wide, leaves out whole columns,
lowest priority first, saying which below the table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rich.table import Table

TEXT_MIN = 12  # the narrowest a wrapping text column is made


@dataclass
class Col:
    head: str
    whole: bool = True  # a number (or name) column: never wrapped nor cut; else text that may wrap
    keep: int = 0  # priority: columns with the lowest keep are left out first; keep >= 100 are never left out


def width(console) -> int:
    """The width to lay a table out in: ``COLUMNS`` when set (a terminal's size, or a test's), else the console's."""
    try:
        return max(20, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return console.width


def _need(cols: list[Col], rows: list[list[str]], keep: list[int]) -> int:
    total = 1  # the left border
    for k in keep:
        longest = max(len(c) for c in [cols[k].head] + [r[k] for r in rows])
        total += (longest if cols[k].whole else min(TEXT_MIN, longest)) + 3
    return total


def fitted(cols: list[Col], rows: list[list[str] | None], width_: int, title: str | None = None):
    """A rich Table of ``rows`` (None: a section break) that fits ``width_`` columns, and the heads left out."""
    keep = list(range(len(cols)))
    body = [r for r in rows if r is not None]
    while _need(cols, body, keep) > width_:
        cand = [k for k in keep if cols[k].keep < 100]
        if not cand:
            break
        keep.remove(min(cand, key=lambda k: (cols[k].keep, -k)))
    t = Table(title=title)
    for k in keep:
        cells = [cols[k].head] + [r[k] for r in body]
        if cols[k].whole:
            t.add_column(cols[k].head, no_wrap=True, min_width=max(len(c) for c in cells),
                         justify="left" if k == 0 else "right")
        else:
            t.add_column(cols[k].head, overflow="fold", min_width=min(TEXT_MIN, max(len(c) for c in cells)))
    for r in body:
        t.add_row(*[r[k] for k in keep])
    return t, [cols[k].head for k in range(len(cols)) if k not in keep]
