"""Derived columns of the experiments' tables: functions of one row's aggregated cells (label ->
:class:`placer.bench.spec.Agg`) that give a reduction, a placement count or a ratio of counts, or None
where a cell they read is missing, out of memory or has no curve."""

from __future__ import annotations

from typing import Mapping

from placer.bench.spec import Agg


def _ms(a: Mapping[str, Agg], label: str) -> float | None:
    x = a.get(label)
    return None if x is None or x.step_ms is None or x.oom else x.step_ms


def reduction_vs(base: str | tuple[str, ...], new: str):
    """100 * (best of ``base`` - ``new``) / best of ``base``: positive when ``new`` is faster.
    OOM or missing cells are left out of the base, as the papers do."""
    bases = (base,) if isinstance(base, str) else base

    def fn(a: Mapping[str, Agg]) -> float | None:
        b = [v for v in (_ms(a, k) for k in bases) if v is not None]
        n = _ms(a, new)
        return None if not b or n is None else 100.0 * (min(b) - n) / min(b)

    return fn


def _count(label: str, field: str):
    def fn(a: Mapping[str, Agg]) -> float | None:
        x = a.get(label)
        return None if x is None else getattr(x, field)

    return fn


def to_best(label: str):
    """Placements the column sampled until its best was first reached (mean over seeds)."""
    return _count(label, "placements_to_best")


def used(label: str):
    """Placements the column sampled in all (mean over seeds)."""
    return _count(label, "placements")


def mean_at(curves: tuple, n: float) -> float | None:
    """The mean over runs of their best-so-far after ``n`` placements; None when a run had none yet."""
    at = [min((v for p, v in c if p <= n), default=None) for c in curves]
    return None if None in at else sum(at) / len(at)


def mean_curve(curves: tuple) -> list[tuple[int, float]]:
    """The mean over runs of their best-so-far curves (:func:`mean_at`), at every placement count
    where one of them improved and each has sampled at least one placement: ((placements, mean best
    in ms), ...)."""
    at = ((n, mean_at(curves, n)) for n in sorted({p for c in curves for p, _ in c}))
    return [(n, v) for n, v in at if v is not None]


def to_reach(label: str, target: str):
    """Placements the column had sampled when its mean best-so-far over runs (:func:`mean_curve`)
    first reached ``target``'s mean step time; "not reached" when it did not within the budget. The
    runs of two columns are independent draws (a seed number pairs nothing), so the question is
    asked of the expected curve: per run against the mean, a column whose runs end exactly where the
    target's do would miss it on each run slower than that mean."""

    def fn(a: Mapping[str, Agg]) -> float | str | None:
        x, goal = a.get(label), _ms(a, target)
        if x is None or goal is None or not x.curves or x.oom:
            return None
        return next((float(p) for p, v in mean_curve(x.curves) if v <= goal * (1 + 1e-9)), "not reached")

    return fn


def _own_reach(target: str):
    """Placements ``target`` had sampled when its own mean best-so-far curve reached its mean step
    time (:func:`to_reach` of the column against itself): the count a saving compares with, read the
    same way as the other column's. Each run's own placements to its best would count fewer: a mean
    curve reaches a mean only once its slower runs are there, so set against it any column would look
    slower, one whose runs equal the target's included."""
    reach = to_reach(target, target)

    def fn(a: Mapping[str, Agg]) -> float | None:
        n = reach(a)
        return n if isinstance(n, float) else None

    return fn


def saving_to_reach(label: str, target: str):
    """``target``'s placements until its mean curve reached its result (:func:`_own_reach`), over
    ``label``'s placements until its mean curve reached that result (:func:`to_reach`): how many
    times fewer placements ``label`` needed; 1.0 for a column whose runs are the target's."""
    reach, own = to_reach(label, target), _own_reach(target)

    def fn(a: Mapping[str, Agg]) -> float | None:
        n, t = reach(a), own(a)
        return None if not isinstance(n, float) or t is None else t / n

    return fn


def reduction_with_fewer(label: str, target: str, k: int = 5):
    """:func:`reduction_vs` of ``label``'s best-so-far after 1/k of the placements ``target`` took to
    its result (:func:`_own_reach`, at least one), against that result, mean over ``label``'s runs
    (:func:`mean_at`): positive when ``label`` is already faster with k times fewer placements, 0 when
    it is there."""
    own = _own_reach(target)

    def fn(a: Mapping[str, Agg]) -> float | None:
        x, t, goal = a.get(label), own(a), _ms(a, target)
        if x is None or t is None or goal is None or not x.curves or x.oom:
            return None
        best = mean_at(x.curves, max(1.0, t / k))
        return None if best is None else 100.0 * (goal - best) / goal

    return fn


def ratio_of_counts(num: str, den: str):
    def fn(a: Mapping[str, Agg]) -> float | None:
        x, y = a.get(num), a.get(den)
        if x is None or y is None or x.placements_to_best is None or not y.placements_to_best:
            return None
        return x.placements_to_best / y.placements_to_best

    return fn
