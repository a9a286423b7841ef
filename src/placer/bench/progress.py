"""What ``placer compare`` shows while its line-up runs: the methods running now (not the first one
queued), each one's placements done of its budget and best objective so far, and a time left only
where it is honest: for a method with a placement budget, from its own rate (seconds so far /
placements done x placements left); none for a construction, an unbounded run or a wall-clock cap.

:class:`Lineup` takes the reports :func:`placer.compare.compare_methods` passes to its
``on_progress`` (:class:`Report`, from the methods' evaluators, in this process or in the worker
processes) and says them as lines of text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Report:
    """One method's progress: placements done of ``limit`` (None: no placement budget), the best
    objective so far (us; inf before any) and whether it fits, the method's seconds so far, and
    whether it has finished."""

    method: str
    placements: int
    limit: int | None
    best_us: float
    best_fits: bool
    seconds: float
    finished: bool = False


def _clock(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


MIN_DONE = 0.02  # a rate is read off once this share of the budget (and at least MIN_PLACEMENTS) is done
MIN_PLACEMENTS = 10


def eta_s(r: Report) -> float | None:
    """Seconds left for a running search with a placement budget, from its own rate so far; None
    before it has done :data:`MIN_DONE` of its budget (and :data:`MIN_PLACEMENTS`), and for a run
    with no placement budget."""
    if r.finished or not r.limit or r.seconds <= 0 or r.placements < max(MIN_PLACEMENTS, MIN_DONE * r.limit):
        return None
    return r.seconds / r.placements * max(0, r.limit - r.placements)


def line(r: Report, capped_s: float | None = None, search: bool = True) -> str:
    """One running method: ``local-search 1,200/20,000 placements (6%), best 123.46 ms, ~0:01:10 left``."""
    done = (f"{r.placements:,}/{r.limit:,} placements ({r.placements / r.limit:.0%})" if r.limit
            else f"{r.placements:,} placements")
    best = (f", best {r.best_us / 1000:,.2f} ms{'' if r.best_fits else ' (OOM)'}" if math.isfinite(r.best_us) else "")
    if capped_s is not None:
        left = f", stops by {capped_s:g} s"
    elif not search:  # a construction: its placements are no measure of its work
        left = ""
    else:
        t = eta_s(r)
        left = f", ~{_clock(t)} left" if t is not None else ""
    return f"{r.method} {done}{best}{left}"


class Lineup:
    """The state of a line-up as its reports arrive."""

    def __init__(self, names, capped: dict[str, float] | None = None, searches=None):
        """``capped``: methods stopped by a wall-clock cap (seconds); ``searches``: the methods whose
        work is a placement budget (the others are constructions: no time left is shown)."""
        self.names = list(names)
        self.capped = dict(capped or {})
        self.searches = set(self.names if searches is None else searches)
        self.reports: dict[str, Report] = {}

    def update(self, r: Report) -> None:
        self.reports[r.method] = r

    def running(self) -> list[str]:
        """The methods that have started and not finished, in the line-up's order."""
        return [n for n in self.names if n in self.reports and not self.reports[n].finished]

    def finished(self) -> int:
        return sum(1 for r in self.reports.values() if r.finished)

    def head(self) -> str:
        """``3 of 21 methods done, 2 running``."""
        return f"{self.finished()} of {len(self.names)} methods done, {len(self.running())} running"

    def lines(self) -> dict[str, str]:
        """One line per running method."""
        return {n: line(self.reports[n], self.capped.get(n), n in self.searches) for n in self.running()}
