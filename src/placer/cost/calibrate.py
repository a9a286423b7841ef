"""Fit the roofline model's efficiency factors to measured per-op profiles.

For a device with spec (peak per dtype ``P``, bandwidth ``B``) and measured op times ``t_i``, the
raw roofline is ``r_i = max(FLOPs_i / P, bytes_i / B)``. The fit is:

* ``launch_us``: the median measured time of the ops whose raw roofline is under 0.5 us (their
  time is all overhead);
* per op class ``c`` and per ``c/compute`` / ``c/memory`` (which roof binds at peak):
  ``eff = sum_i r_i / sum_i (t_i - launch)`` over those ops, the ratio of sums, so that their total
  predicted time equals their total measured time (large ops dominate, as they dominate a step).

:func:`calibrate_host` profiles given captures on this CPU (one torch thread) and fits the
``host`` factors; :func:`write_calibration` writes them to :mod:`placer.cost.calibrated`. Which
models are profiled is not this layer's business (the cost model knows no zoo):
``python benchmarks/calibrate_host.py --write`` profiles reduced zoo models with them.
"""

from __future__ import annotations

import datetime
import pprint
from pathlib import Path

import numpy as np

from placer.cost.roofline import roofline_parts
from placer.cost.specs import DeviceSpec

def fit_efficiency(samples, spec: DeviceSpec, min_ops: int = 5) -> dict:
    """``samples``: list of (graph, measured_us array). Returns {launch_us, efficiency, ops} with an
    efficiency per ``class/compute`` / ``class/memory`` key (:func:`roofline_parts`) that has at
    least ``min_ops`` ops, and per class (all its ops) as the fallback."""
    keys, classes, raw, meas = [], [], [], []
    for g, t in samples:
        cl, k, r = roofline_parts(g, spec)
        keep = np.isfinite(t) & (cl != "source")
        classes.append(cl[keep]); keys.append(k[keep]); raw.append(r[keep]); meas.append(np.asarray(t)[keep])
    cl, ky, r, t = (np.concatenate(x) for x in (classes, keys, raw, meas))
    tiny = r < 0.5
    launch = float(np.median(t[tiny])) if tiny.any() else spec.launch_us
    eff = {}
    for labels in (cl, ky):
        for c in sorted(set(labels)):
            m = labels == c
            work = np.maximum(t[m] - launch, 0.0).sum()
            if m.sum() >= min_ops and work > 0 and r[m].sum() > 0:
                eff[c] = round(float(np.clip(r[m].sum() / work, 1e-3, 10.0)), 4)
    return {"launch_us": round(launch, 3), "efficiency": eff, "ops": int(len(t))}


def predict_us(graph, spec: DeviceSpec, fit: dict) -> np.ndarray:
    """Calibrated roofline time per op (source ops 0)."""
    cl, ky, r = roofline_parts(graph, spec)
    e = np.array([fit["efficiency"].get(k, fit["efficiency"].get(c, 1.0)) for k, c in zip(ky, cl)])
    t = r / e + fit["launch_us"]
    t[cl == "source"] = 0.0
    return t


def calibrate_host(captures, repeats: int = 5, threads: int = 1, clock: str = "thread") -> dict:
    """Profile ``captures`` (a list of (label, :class:`placer.frontends.torch.Capture`)) on this CPU
    and fit the ``host`` factors. The thread-CPU-time clock keeps other processes' time slices out
    of the fit on a shared machine."""
    from placer.cost.profile import profile_capture
    from placer.cost.specs import device_spec

    samples, names = [], []
    for label, cap in captures:
        prof = profile_capture(cap, "cpu", warmup=2, repeats=repeats, threads=threads, clock=clock)
        samples.append((cap.graph, prof.median_us))
        names.append(f"{label}({cap.graph.n_ops} ops)")
    fit = fit_efficiency(samples, device_spec("host"))
    fit["check_sum_predicted_over_measured"] = {
        nm.split("(")[0]: round(float(predict_us(g, device_spec("host"), fit).sum() / np.nansum(t)), 3)
        for nm, (g, t) in zip(names, samples)}
    fit["source"] = (f"fitted {datetime.date.today()} on this machine's CPU ({threads} torch thread, {clock} clock) "
                     f"from per-op profiles of: {', '.join(names)}")
    return fit


def write_calibration(cal: dict, path: Path | None = None) -> Path:
    path = path or Path(__file__).with_name("calibrated.py")
    text = ('"""Fitted roofline factors (written by ``python benchmarks/calibrate_host.py --write``; do not edit by hand).\n\n'
            "CALIBRATION maps a device spec model to the launch overhead and per-op-class efficiencies fitted\n"
            'to measured per-op profiles on that device."""\n\n'
            f"CALIBRATION: dict = {pprint.pformat(cal, width=110, sort_dicts=True)}\n")
    path.write_text(text)
    return path
