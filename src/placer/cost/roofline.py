"""Roofline estimate of an op's compute time on a device:
``launch + max(FLOPs / (peak[dtype] * eff), bytes / (bandwidth * eff))``.

``eff`` is an efficiency factor per op class (matrix multiply, convolution, attention, reduction,
data movement, element-wise; :func:`placer.frontends.torch_ops.op_class`) and device: datasheet
peaks are never reached, and how far below depends on the kind of op. GPU factors are defaults
typical of cuBLAS / cuDNN (large GEMMs at 70-80% of peak, convolutions lower, memory-bound kernels
at 60-75% of DRAM bandwidth); CPU factors and the CPU launch overhead are fitted to measured
per-op profiles of this machine by :mod:`placer.cost.calibrate` (stored in
:mod:`placer.cost.calibrated`). Source ops (parameters, buffers, inputs, constants) cost nothing.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from placer.cost.specs import DeviceSpec, device_spec

# cost keys a captured graph carries by default: one per GPU model, the papers' host CPU, and
# ``cpu`` = this machine (the ``host`` spec). A cluster device looks its model up first, then its kind.
DEFAULT_COST_KEYS = ("k80", "p100", "v100", "a100", "h100", "h200", "xeon-e5-2686", "cpu")
KEY_SPEC = {"cpu": "host", "gpu": "v100"}  # cost keys that are kinds: which spec they stand for

OP_CLASSES = ("matmul", "conv", "attention", "reduction", "movement", "elementwise", "source")
GPU_EFFICIENCY = {"matmul": 0.75, "conv": 0.6, "conv/memory": 0.35, "attention": 0.5, "reduction": 0.6,
                  "movement": 0.6, "elementwise": 0.75}  # conv/memory: depthwise convolutions
CPU_EFFICIENCY_DEFAULT = {"matmul": 0.8, "conv": 0.5, "attention": 0.4, "reduction": 0.5, "movement": 0.5,
                          "elementwise": 0.6}


def roofline_us(flops: np.ndarray, bytes_accessed: np.ndarray, peak_flops_per_us: float,
                mem_bw_bytes_per_us: float, launch_us: float, efficiency: float = 1.0) -> np.ndarray:
    """Per-op time in microseconds; ops with neither FLOPs nor bytes cost only the launch."""
    t = np.maximum(np.asarray(flops) / (peak_flops_per_us * efficiency),
                   np.asarray(bytes_accessed) / (mem_bw_bytes_per_us * efficiency))
    return t + launch_us


def spec_for_key(key: str) -> DeviceSpec:
    return device_spec(KEY_SPEC.get(key.lower(), key.lower()))


def efficiency_for(spec: DeviceSpec) -> tuple[dict, float]:
    """(efficiency per op class, launch_us) for a device: calibrated where a calibration exists
    (CPUs: this machine's fit), else the defaults above and the spec's launch overhead."""
    from placer.cost.calibrated import CALIBRATION

    cal = CALIBRATION.get(spec.model) or (CALIBRATION.get("host") if spec.kind == "cpu" else None)
    if cal:
        eff = {**(CPU_EFFICIENCY_DEFAULT if spec.kind == "cpu" else GPU_EFFICIENCY), **cal["efficiency"]}
        launch = cal["launch_us"] if spec.model == "host" else spec.launch_us
        return eff, launch
    return dict(CPU_EFFICIENCY_DEFAULT if spec.kind == "cpu" else GPU_EFFICIENCY), spec.launch_us


def roofline_parts(graph, spec: DeviceSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: (op class, efficiency key ``class/compute`` or ``class/memory`` by which roof binds
    at peak speed, raw roofline time in us at peak)."""
    from placer.cost.opclass import op_class

    dtypes = graph.meta.get("op_dtype") or ["float32"] * graph.n_ops
    peak = np.array([spec.peak_for(d) for d in dtypes], dtype=np.float64)
    t_c = graph.flops / peak
    t_m = graph.bytes_accessed / spec.mem_bw_bytes_per_us
    classes = np.array([op_class(t) for t in graph.op_types], dtype=object)
    keys = np.array([f"{c}/{'compute' if a >= b and a > 0 else 'memory'}" for c, a, b in zip(classes, t_c, t_m)],
                    dtype=object)
    return classes, keys, np.maximum(t_c, t_m)


def roofline_costs(graph, key: str, efficiency: Mapping[str, float] | None = None,
                   launch_us: float | None = None) -> np.ndarray:
    """Per-op roofline time (us) of ``graph`` on the device a cost key stands for. Each op's dtype
    (``graph.meta['op_dtype']``, default float32) picks the peak; its efficiency is looked up as
    ``class/compute`` or ``class/memory`` (calibrations fit the two separately: a depthwise
    convolution is memory-bound and far less efficient than a dense one), then ``class``."""
    spec = spec_for_key(key)
    eff0, launch0 = efficiency_for(spec)
    eff = {**eff0, **(efficiency or {})}
    launch = launch0 if launch_us is None else launch_us
    classes, keys, raw = roofline_parts(graph, spec)
    e = np.array([eff.get(k, eff.get(c, 1.0)) for k, c in zip(keys, classes)], dtype=np.float64)
    t = raw / e + launch
    t[classes == "source"] = 0.0
    return np.round(t, 3)


def with_roofline_costs(graph, keys: Sequence[str] = DEFAULT_COST_KEYS, overwrite: bool = False):
    """A copy of ``graph`` with roofline ``compute_us`` for each cost key (keys it already has are
    kept unless ``overwrite``, so measured costs survive)."""
    costs = dict(graph.compute_us)
    for k in keys:
        k = k.lower()
        if overwrite or k not in costs:
            costs[k] = roofline_costs(graph, k)
    return graph.replace(compute_us=costs)
