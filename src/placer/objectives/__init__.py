"""Objectives: what a method minimises. ``sim`` (the event simulator, the default) and the published
models beside it (DESIGN: "objectives"), all behind one interface (:class:`Objective`):

* ``latency``: Tarnawski et al. 2020's single-sample latency (contiguous pieces run atomically,
  acyclic contraction); ``latency:pieces=N|any``;
* ``throughput``: their max-load / time per sample with their memory rule; ``throughput:contiguous=false``;
* ``pipeline``: PipeDream's 1F1B steady-state time per minibatch (Narayanan et al. 2019).

:func:`make_objective` parses a name (``--objective``); an Objective passes through unchanged.
"""

from __future__ import annotations

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


def make_objective(spec=None, sim_params=None) -> Objective:
    """The Objective named by ``spec`` ('sim', 'latency', 'latency:pieces=2', 'throughput', ...)."""
    if isinstance(spec, Objective):
        return spec
    if spec is None or spec == "sim":
        return SimObjective(sim_params)
    name, _, rest = str(spec).partition(":")
    opts = {}
    for item in filter(None, rest.split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            raise InputError("objective", repr(spec), f"option {item!r} is not KEY=VALUE", "e.g. latency:pieces=2")
        opts[k.strip()] = v.strip()

    def take(key, parse, want):
        if key not in opts:
            return None
        try:
            return parse(opts.pop(key))
        except ValueError:
            raise InputError("objective", repr(spec), f"{key} must be {want}", f"e.g. {name}:{key}=...") from None

    if name == "latency":
        from placer.objectives.published import LatencyObjective

        q = take("pieces", lambda s: None if s == "any" else _positive(s, MAX_PIECES),
                 f"a whole number from 1 to {MAX_PIECES:,} (the compiled kernel's integers), or any "
                 "(latency:pieces=any: no limit)")
        obj = LatencyObjective(pieces=1 if "pieces" not in rest else q)
    elif name == "throughput":
        from placer.objectives.published import ThroughputObjective

        c = take("contiguous", _bool, "true or false")
        obj = ThroughputObjective(contiguous=True if c is None else c)
    elif name == "pipeline":
        from placer.objectives.pipeline import PipelineObjective

        obj = PipelineObjective()
    else:
        raise InputError("objective", repr(spec), "is not a known objective", f"use one of {', '.join(OBJECTIVES)}")
    if opts:
        raise InputError("objective", repr(spec), f"has unknown option(s) {', '.join(opts)}",
                         "the options are latency:pieces=N (or any) and throughput:contiguous=true|false")
    return obj


MAX_PIECES = 2**31 - 1  # latency:pieces=N reaches the compiled latency kernel as a 32-bit-safe integer


def _positive(s: str, most: int | None = None) -> int:
    v = int(s)
    if v < 1 or (most is not None and v > most):
        raise ValueError
    return v


def _bool(s: str) -> bool:
    if s.lower() in ("true", "1", "yes"):
        return True
    if s.lower() in ("false", "0", "no"):
        return False
    raise ValueError


__all__ = ["OBJECTIVES", "Objective", "ObjectiveBatch", "SimObjective", "make_objective"]
