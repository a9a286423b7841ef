"""The grouping a caller gives one method (``placer optimize --grouping``), applied the one way: a
method with a ``grouping`` parameter takes the spec as that parameter; any other method is run on the
problem with each module unit made one colocation group (``module[:DEPTH]``,
:func:`placer.grouping.modules.module_problem`), so that it returns a module-level placement.
``module:auto`` is resolved first to the depth :func:`placer.grouping.modules.auto_depth` chooses,
with the line saying why."""

from __future__ import annotations

from dataclasses import dataclass, fields

from placer.problem import Problem


@dataclass(frozen=True)
class Grouped:
    """What to run a method on for a grouping: ``problem`` (module units made colocation groups
    where the method does not group), ``params`` (the caller's, with ``grouping`` added where the
    method takes it), ``grouping`` (the spec, ``module:auto`` resolved to ``module:DEPTH``; None when
    none was given) and ``chose`` (``module:auto``'s line saying which depth and why; else None)."""

    problem: Problem
    params: dict
    grouping: str | None = None
    chose: str | None = None


def takes_grouping(method: str) -> bool:
    """Whether a registered method takes a ``grouping`` parameter (the others place module units as
    colocation groups)."""
    from placer.methods.base import get_method

    return any(f.name == "grouping" for f in fields(get_method(method).config))


def apply_grouping(method: str, problem: Problem, grouping=None, params: dict | None = None) -> Grouped:
    """``method`` run with ``grouping`` (a spec of :func:`placer.grouping.parse_grouping`, or None):
    see the module docstring. ``params`` is not changed."""
    params = dict(params or {})
    if grouping is None:
        return Grouped(problem, params)
    from placer.grouping import GroupingSpec, parse_grouping
    from placer.grouping.modules import DEFAULT_DEPTH, auto_depth, module_problem

    spec = parse_grouping(grouping, "grouping")
    chose = None
    if spec.kind == "module" and spec.n == 0:  # module:auto: the depth chosen from the model and the cluster
        depth, chose = auto_depth(problem)
        spec = GroupingSpec("module", depth)
    if spec.kind == "module" and not takes_grouping(method):
        return Grouped(module_problem(problem, spec.n or DEFAULT_DEPTH), params, str(spec), chose)
    params["grouping"] = str(spec)
    return Grouped(problem, params, str(spec), chose)
