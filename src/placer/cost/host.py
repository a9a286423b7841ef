"""Measure the machine placer runs on: the ``host`` CPU spec (peak FLOP/s per dtype, memory
bandwidth, per-op dispatch overhead) from micro-benchmarks, so that the ``cpu`` cost key of a graph
describes this machine and not a datasheet.

``python -m placer.cost.host`` prints a :class:`~placer.cost.specs.DeviceSpec` line; the numbers
in :data:`placer.cost.specs.DEVICE_SPECS['host']` were produced by it (source noted there).
Each figure is the best (largest rate, smallest overhead) of ``repeats`` timed runs after a warm-up:
on a machine shared with other jobs the best run is the least disturbed one.
"""

from __future__ import annotations

import os
import platform
import time

from placer.cost.specs import DeviceSpec, GiB


def _best_seconds(fn, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_host_cpu(repeats: int = 5, threads: int | None = None) -> DeviceSpec:
    """Micro-benchmark this CPU with torch: a 1024^3 matrix multiply per dtype (256^3 for fp16; peak FLOP/s),
    a 64 MiB element-wise add (memory bandwidth: bytes read + written over time) and a one-element
    add (dispatch overhead, the per-op ``launch_us``)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    n = 1024
    peaks = {}
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        k = n if dt != torch.float16 else n // 4  # CPUs without fp16 arithmetic take seconds at n = 1024
        a = torch.randn(k, k).to(dt)
        b = torch.randn(k, k).to(dt)
        s = _best_seconds(lambda: torch.mm(a, b), repeats)
        peaks[str(dt).replace("torch.", "")] = 2 * k**3 / (s * 1e6)
    x = torch.randn(16 * 2**20)
    y = torch.randn(16 * 2**20)
    out = torch.empty_like(x)
    s = _best_seconds(lambda: torch.add(x, y, out=out), repeats)
    bw = 3 * x.numel() * 4 / (s * 1e6)
    one = torch.ones(1)
    k = 200
    s = _best_seconds(lambda: [torch.add(one, one) for _ in range(k)], repeats)
    launch = s / k * 1e6
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = 16 * GiB
    fp32 = peaks.pop("float32")
    return DeviceSpec("host", "cpu", float(mem), round(fp32, 1), round(bw, 1), round(launch, 2),
                      f"measured: {cpu_name()}, {torch.get_num_threads()} threads, placer.cost.host.measure_host_cpu",
                      {k: round(v, 1) for k, v in peaks.items()})


if __name__ == "__main__":  # pragma: no cover
    print(measure_host_cpu())
