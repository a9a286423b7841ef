"""Objectives: what a method minimises. ``sim`` (the event simulator, the default) and the published
models beside it (DESIGN: "objectives"), all behind one interface (:class:`Objective`):

* ``latency``: Tarnawski et al. 2020's single-sample latency (contiguous pieces run atomically,
  acyclic contraction); ``latency:pieces=N|any``;
* ``throughput``: their max-load / time per sample with their memory rule; ``throughput:contiguous=false``;
* ``pipeline``: PipeDream's 1F1B steady-state time per minibatch (Narayanan et al. 2019).

:func:`make_objective` parses a name (``--objective``); an Objective passes through unchanged.
"""

from __future__ import annotations

from placer.bounds import bound, parse_items
from placer.errors import InputError
from placer.objectives.base import Objective, ObjectiveBatch, SimObjective

OBJECTIVES = {
    "sim": "the event simulator's memory-penalised step time (default)",
    "latency": "Tarnawski et al. 2020 single-sample latency; contiguous pieces, acyclic contraction "
               "(latency:pieces=N|any for Appendix A's non-contiguous splits)",
    "throughput": "Tarnawski et al. 2020 max-load (time per sample when pipelined), their memory rule "
                  "(throughput:contiguous=false for non-contiguous splits)",
    "pipeline": "PipeDream 1F1B steady-state time per minibatch, one stage per device",
}


OPTIONS = {"latency": ("pieces",), "throughput": ("contiguous",), "pipeline": (), "sim": ()}
FORM = "NAME[:KEY=VALUE,...], e.g. latency, latency:pieces=2 or throughput:contiguous=false"


def make_objective(spec=None, sim_params=None) -> Objective:
    """The Objective named by ``spec`` ('sim', 'latency', 'latency:pieces=2', 'throughput', ...).
    An unknown name or option, an empty, malformed or repeated option (``latency:``,
    ``throughput:,``, ``latency:pieces=2,pieces=3``) and a number outside its bound
    (:data:`placer.bounds.BOUNDS`) are refused in one line."""
    if isinstance(spec, Objective):
        return spec
    if spec is None or spec == "sim":
        return SimObjective(sim_params)
    text = str(spec)
    name, colon, rest = text.partition(":")
    name = name.strip()
    if name not in OPTIONS:
        raise InputError("objective", repr(spec)[:80], "is not a known objective", f"use one of {', '.join(OBJECTIVES)}")
    try:
        opts = parse_items(repr(spec)[:80], rest, FORM) if colon else {}
    except InputError as e:
        raise InputError("objective", f"{repr(spec)[:80]}: {e.item}", e.problem, e.fix) from None
    unknown = [k for k in opts if k not in OPTIONS[name]]
    if unknown:
        known = ", ".join(f"{name}:{k}" for k in OPTIONS[name]) or "none"
        raise InputError("objective", repr(spec)[:80], f"has unknown option(s) {', '.join(unknown)[:80]}",
                         f"the options of {name} are: {known}")
    if name == "sim":
        return SimObjective(sim_params)
    if name == "latency":
        from placer.objectives.published import LatencyObjective

        pieces = 1
        if "pieces" in opts:
            b = bound("objective.pieces")
            pieces = None if opts["pieces"] == "any" else b.parse(
                opts["pieces"], "objective", f"{repr(spec)[:60]}: pieces={opts['pieces'][:40]}",
                f"give pieces {b.range_text()}, or latency:pieces=any for no limit")
        return LatencyObjective(pieces=pieces)
    if name == "throughput":
        from placer.objectives.published import ThroughputObjective

        contiguous = True
        if "contiguous" in opts:
            try:
                contiguous = _bool(opts["contiguous"])
            except ValueError:
                raise InputError("objective", repr(spec)[:80], "contiguous must be true or false",
                                 "e.g. throughput:contiguous=false") from None
        return ThroughputObjective(contiguous=contiguous)
    from placer.objectives.pipeline import PipelineObjective

    return PipelineObjective()


MAX_PIECES = int(bound("objective.pieces").hi)  # latency:pieces=N reaches the compiled kernel: 32-bit (the table's row)


def _bool(s: str) -> bool:
    if s.lower() in ("true", "1", "yes"):
        return True
    if s.lower() in ("false", "0", "no"):
        return False
    raise ValueError


__all__ = ["OBJECTIVES", "Objective", "ObjectiveBatch", "SimObjective", "make_objective"]
