"""Run several methods on one Problem and line them up: the README's main job."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from placer.methods import METHODS, Budget, run_method
from placer.resolve import check_method


# Left out of the default line-up for their cost on the bundled model, not their quality; `--methods all`
# or a name runs them. exact-published: its max-load integer program on Inception-V3 (2,042 ops, 3
# devices) ran HiGHS for 386 s of the README command's 9 min on a quiet 2-core machine, and over
# 20 min under load, before its node limit; under the simulator it only solves a surrogate (max load).
SLOW = frozenset({"exact-published"})


def default_methods() -> list[str]:
    """Every available method except the learned ones that need long training (Post is quick) and
    the ones in :data:`SLOW`."""
    out = []
    for m in sorted(METHODS.values(), key=lambda m: (_FAMILY_ORDER.get(m.family, 9), m.name)):
        if m.available() is None and (m.family != "learned" or m.name == "post") and m.name not in SLOW:
            out.append(m.name)
    return out


_FAMILY_ORDER = {"trivial": 0, "expert": 1, "partitioning": 2, "list-scheduling": 3, "search": 4, "exact": 5, "learned": 6}


def compare_methods(problem, names: Sequence[str] | None, budget: int | None, seed: int, sim_params,
                    on_start: Callable[[str, int, int], None] | None = None, objective=None) -> dict:
    names = list(names) if names is not None else [m for m in sorted(METHODS) if METHODS[m].available() is None]
    for n in names:
        check_method(n, "--methods")
    rows = []
    for k, name in enumerate(names, 1):
        if on_start:
            on_start(name, k, len(names))
        try:
            r = run_method(name, problem, Budget(placements=budget), seed, sim_params, objective=objective)
        except (ValueError, RuntimeError) as e:  # a method that does not apply to this problem
            rows.append({"method": name, "error": str(e)})
            continue
        rows.append(r.summary())
    ok = [r for r in rows if "error" not in r]
    single = next((r["step_time_us"] for r in ok if r["method"] == "single-gpu" and not r["oom"]), None)
    for r in ok:
        r["speedup_vs_single_gpu"] = single / r["step_time_us"] if single else None
    custom = objective not in (None, "sim")  # a published objective: its value decides (invalid = inf)
    best = min(ok, key=lambda r: (not custom and r["oom"], r["objective"]))["method"] if ok else None
    return {"graph": problem.graph.name, "ops": problem.n_ops, "cluster": problem.cluster.name,
            "lower_bound_us": problem.lower_bound_us, "best": best, "rows": rows}
