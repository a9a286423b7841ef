"""Each table row's step-time lower bound (:func:`placer.lowerbound.lower_bound`, docs/bounds.md),
cached beside the results in ``results/<experiment>/bounds.json`` so rendering a table again
recomputes nothing.

A cache entry is keyed by everything that decides the bound's value: the graph's and the cluster's
fingerprints, the row's simulator settings, the CP-SAT time the engine was given, the versions
of the bound engine (``placer.lowerbound.VERSION``) and of the simulator (``placer.sim.VERSION``),
and a hash of the bound engine's source (so a change of a bound that forgot its version bump still
recomputes; the bounds of every committed row take seconds).
The value does not depend on the best step time a table reached (``known_us`` only says whether
the bound proves it optimal), so :func:`proven` decides that at rendering time from the cached value.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from pathlib import Path

from placer.bench.spec import stable_hash

CACHE = "bounds.json"
TOLERANCE = 1e-6  # relative, as placer.lowerbound.engine.TOLERANCE: a step time this close to the bound is optimal


def bound_key(ctx, seconds: float | None = None) -> str:
    """The cache key of ``ctx``'s (a RowContext with its graph resolved) bound."""
    from placer.lowerbound import VERSION as LB_VERSION
    from placer.sim import VERSION as SIM_VERSION

    return stable_hash({"graph": ctx.graph_fp, "cluster": ctx.cluster_fp,
                        "sim": dataclasses.asdict(ctx.sim) if ctx.sim is not None else None,
                        "seconds": seconds, "lowerbound": LB_VERSION, "simulator": SIM_VERSION,
                        "source": engine_source()})


@functools.lru_cache(maxsize=1)
def engine_source() -> str:
    """A hash of the source of placer.lowerbound (every module of the package)."""
    import placer.lowerbound as lb

    h = hashlib.sha256()
    for f in sorted(Path(lb.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def read_cache(path: Path) -> dict:
    """The cache's entries (key -> entry); empty when the file is missing or unreadable (it is
    then rebuilt: a cache never decides a value, it only saves recomputing it)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = doc.get("bounds") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else {}


def attach_bounds(plan, out_dir: Path, known: dict[int, float] | None = None,
                  seconds: float | None = None) -> dict[str, int]:
    """Set every resolved row's ``lower_bound_us`` to the engine's bound and ``bound`` to its
    :meth:`Bound.as_dict` (from ``out_dir``/bounds.json where cached, else computed and cached).
    ``known``: row index -> the best fitting step time (us) the table reached, passed to the engine
    as ``known_us``. Rewrites the cache (only the plan's rows' entries) when it changed.
    Returns {"cached": n, "computed": n}."""
    from placer.io import write_text_atomic
    from placer.lowerbound import VERSION as LB_VERSION
    from placer.lowerbound import lower_bound
    from placer.problem import Problem
    from placer.sim import VERSION as SIM_VERSION

    path = Path(out_dir) / CACHE
    old = read_cache(path)
    new: dict = {}
    counts = {"cached": 0, "computed": 0}
    for k, ctx in enumerate(plan.rows):
        if ctx.graph is None or ctx.cluster is None:
            continue
        key = bound_key(ctx, seconds)
        entry = old.get(key)
        if not (isinstance(entry, dict) and isinstance(entry.get("bound"), dict)
                and isinstance(entry["bound"].get("value_us"), (int, float))):
            kn = (known or {}).get(k)
            b = lower_bound(Problem(ctx.graph, ctx.cluster), ctx.sim, seconds=seconds,
                            known_us=kn if kn is not None and math.isfinite(kn) else None)
            entry = {"row": ctx.row.key, "graph_fp": ctx.graph_fp, "cluster_fp": ctx.cluster_fp,
                     "sim": dataclasses.asdict(ctx.sim) if ctx.sim is not None else None, "seconds": seconds,
                     "lowerbound_version": LB_VERSION, "simulator_version": SIM_VERSION,
                     "lowerbound_source": engine_source(), "bound": b.as_dict()}
            counts["computed"] += 1
        else:
            counts["cached"] += 1
        new[key] = entry
        ctx.bound = entry["bound"]
        v = float(entry["bound"]["value_us"])  # infinite when no placement fits: then the bound on every placement
        ctx.lower_bound_us = v if math.isfinite(v) else float(entry["bound"].get("any_placement_us") or 0.0) or None
    if new != old:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps({"note": "step-time lower bounds per row (placer.bench.rowbounds); "
                                                    "safe to delete: rebuilt when missing",
                                            "bounds": new}, indent=1, sort_keys=True, default=str) + "\n")
    return counts


def proven(bound: dict | None, step_us: float | None) -> bool:
    """Whether a fitting placement's step time ``step_us`` equals the bound (within TOLERANCE):
    it is then optimal for the real problem."""
    if not bound or step_us is None or not math.isfinite(step_us):
        return False
    v = float(bound.get("value_us", 0.0))
    return math.isfinite(v) and v > 0 and step_us <= v * (1 + TOLERANCE) + 1e-9
