"""What a split buys: the best single device that fits, and a placement's speed-up over it.

:func:`single_device` simulates every op on one device, for each device that can run every op (D
simulations, once per Problem and SimParams), and keeps the fastest whose peak memory fits that
device; when none fits it keeps the fastest of them, marked ``fits: False``, and every speed-up over
it is None (a ratio against a placement that does not run is no number). :func:`over_single` is the
JSON every placement result carries (``single_device``, ``speedup_over_single``) and
:func:`said` its one line for the terminal, which says plainly when splitting buys under
:data:`SMALL` (2%).
"""

from __future__ import annotations

import weakref

import numpy as np

SMALL = 0.02  # a split that buys less than this over the best single device is said to buy little

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def single_device(problem, sim_params=None) -> dict:
    """``{"device": name or None, "step_us": float or None, "fits": bool}``: the fastest single-device
    placement of ``problem`` whose peak memory fits its device (else the fastest, ``fits`` False;
    device None when no device can run every op). Computed once per Problem and SimParams."""
    from placer.sim import simulate
    from placer.sim.fast import default_params

    params = sim_params or default_params(problem)  # the cluster's communication model, as simulate's
    per = _CACHE.setdefault(problem, {})
    key = params
    if key in per:
        return dict(per[key])
    best = None  # (fits first, step time, device)
    for d in range(problem.n_devices):
        if not bool(problem.allowed[:, d].all()):
            continue  # some op cannot run there: no single-device placement
        r = simulate(problem, np.full(problem.n_ops, d, dtype=np.int64), params)
        cand = (bool(r.oom), float(r.makespan_us), d)
        if best is None or cand < best:
            best = cand
    if best is None:
        out = {"device": None, "step_us": None, "fits": False}
    else:
        out = {"device": str(problem.cluster.device_names[best[2]]), "step_us": best[1], "fits": not best[0]}
    per[key] = out
    return dict(out)


def over_single(problem, sim_params, step_us: float, oom: bool = False) -> dict:
    """The fields a placement result adds: ``single_device`` and ``speedup_over_single`` (the single
    device's step time over ``step_us``; None when that device does not fit, or the placement itself
    runs out of memory)."""
    s = single_device(problem, sim_params)
    ok = s["fits"] and not oom and step_us is not None and np.isfinite(step_us) and step_us > 0
    return {"single_device": s, "speedup_over_single": float(s["step_us"] / step_us) if ok else None}


def said(d: dict) -> str:
    """One line on what the split buys over the best single device, from :func:`over_single`'s fields."""
    s, x = d["single_device"], d["speedup_over_single"]
    if s["device"] is None:
        return "no single device can run every op (no single-device baseline)"
    if not s["fits"]:
        return (f"no single device fits: the fastest, {s['device']} alone, runs out of memory "
                f"({s['step_us'] / 1000:,.2f} ms); speed-up over one device: n/a")
    if x is None:
        return f"best single device: {s['device']} ({s['step_us'] / 1000:,.2f} ms); this placement runs out of memory"
    counts = d.get("device_counts") or {}
    if sum(1 for v in counts.values() if v) == 1:
        return f"this placement is one device alone (no split); the best single device that fits is {s['device']}"
    if x < 1 + SMALL:
        if x >= 1:
            return (f"splitting buys {x - 1:.1%} over {s['device']} alone ({s['step_us'] / 1000:,.2f} ms): "
                    f"under {SMALL:.0%}, one device does about as well")
        return (f"{s['device']} alone is faster ({s['step_us'] / 1000:,.2f} ms): this placement is "
                f"{1 / x - 1:.1%} slower than one device")
    return f"{x:.2f}x faster than the best single device, {s['device']} alone ({s['step_us'] / 1000:,.2f} ms)"
