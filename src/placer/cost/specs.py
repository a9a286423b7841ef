"""Published speeds of the devices and links the cluster presets use.

Numbers are vendor datasheet peaks (dense, no sparsity); efficiency factors that turn peaks into
achieved speed belong to the roofline model (:mod:`placer.cost.roofline`).
Units are in the names: FLOP per microsecond (1 TFLOP/s = 1e6 FLOP/us), bytes per microsecond
(1 GB/s = 1e3 bytes/us).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from placer.errors import InputError

GB = 1e9
GiB = 2**30


@dataclass(frozen=True)
class DeviceSpec:
    model: str  # lower-case key, also the compute-cost key a graph may carry
    kind: str  # "gpu" or "cpu"
    memory_bytes: float
    peak_flops_per_us: float  # fp32, dense
    mem_bw_bytes_per_us: float
    launch_us: float  # fixed per-op overhead (kernel launch / dispatch)
    source: str
    # dense peaks of other dtypes (tensor cores, AVX-512 BF16); a dtype missing here runs at the fp32 peak
    dtype_peak_flops_per_us: Mapping[str, float] = field(default_factory=dict, hash=False, compare=False)

    def peak_for(self, dtype: str) -> float:
        """Peak FLOP/us for ops in ``dtype`` (``float32``, ``float16``, ``bfloat16``, ``tf32``, ...)."""
        return float(self.dtype_peak_flops_per_us.get(dtype, self.peak_flops_per_us))


T = 1e6  # 1 TFLOP/s in FLOP/us

DEVICE_SPECS: dict[str, DeviceSpec] = {
    s.model: s
    for s in [
        # one GK210 die of a K80 board: 4.37 TFLOP/s fp32 boost (board 8.73), 240 GB/s, 12 GB (about 11 GB usable:
        # Placeto appendix uses M = 10.7 GB, Post section 4 says 11 GB). Kepler has no fast fp16 path.
        DeviceSpec("k80", "gpu", 11 * GiB, 4.37 * T, 240e3, 10.0, "NVIDIA Tesla K80 datasheet (per GK210 die)"),
        DeviceSpec("p100", "gpu", 16 * GiB, 10.6 * T, 732e3, 6.0, "NVIDIA Tesla P100 SXM2 datasheet",
                   {"float16": 21.2 * T}),
        DeviceSpec("v100", "gpu", 32 * GiB, 15.7 * T, 900e3, 5.0, "NVIDIA Tesla V100 SXM2 datasheet (fp16 tensor core)",
                   {"float16": 125 * T}),
        DeviceSpec("a100", "gpu", 80 * GiB, 19.5 * T, 2039e3, 4.0, "NVIDIA A100 80GB SXM datasheet (fp32 non-tensor)",
                   {"tf32": 156 * T, "float16": 312 * T, "bfloat16": 312 * T}),
        DeviceSpec("h100", "gpu", 80 * GiB, 67 * T, 3350e3, 4.0, "NVIDIA H100 SXM5 datasheet (fp32 non-tensor, dense)",
                   {"tf32": 494.7 * T, "float16": 989.4 * T, "bfloat16": 989.4 * T, "float8": 1978.9 * T}),
        DeviceSpec("h200", "gpu", 141 * GiB, 67 * T, 4800e3, 4.0, "NVIDIA H200 SXM datasheet (same SM as H100, dense)",
                   {"tf32": 494.7 * T, "float16": 989.4 * T, "bfloat16": 989.4 * T, "float8": 1978.9 * T}),
        # Xeon E5-2686 v4 (the papers' p2.8xlarge host): 16 cores x 2.3 GHz x 32 fp32 FLOP/cycle (AVX2 FMA),
        # 4 channels DDR4-2400 = 76.8 GB/s. No bf16/fp16 arithmetic (converted to fp32).
        DeviceSpec("xeon-e5-2686", "cpu", 64 * GiB, 1.18 * T, 76.8e3, 20.0, "Intel ark E5-2686 v4; 16C AVX2 FMA peak"),
        # The machine this project was developed on, measured (best of 10 after warm-up, torch 2.13 MKL/oneDNN) by
        # `python -m placer.cost.host`: AMD EPYC (Zen 4, AVX-512 + AVX512_BF16), 2 vCPUs shared with other jobs.
        # fp16 has no fast CPU path (0.6 GFLOP/s in torch.mm), so it is listed at that measured rate.
        # Single torch thread (the thread count placer's CPU profiles use); best of several runs on 2026-11-22
        # (the machine was shared: load 2-7 on 2 cores, so single runs vary by 2x).
        DeviceSpec("host", "cpu", 23.5 * GiB, 95.5e3, 18.5e3, 1.1,
                   "measured on the dev machine: AMD EPYC Zen 4, 1 torch thread, placer.cost.host.measure_host_cpu",
                   {"bfloat16": 118e3, "float16": 0.64e3}),
    ]
}


@dataclass(frozen=True)
class LinkSpec:
    name: str
    bandwidth_bytes_per_us: float  # one direction
    latency_us: float
    source: str


LINK_SPECS: dict[str, LinkSpec] = {
    s.name: s
    for s in [
        # Placeto's simulator assumes 7.6 GB/s between devices (A.5 reference constants).
        LinkSpec("placeto", 7600.0, 0.0, "Placeto reference simulator constant"),
        # PCIe x16, one direction: raw rate after line coding; achieved ~80% for large pinned copies.
        LinkSpec("pcie3", 12e3, 5.0, "PCIe 3.0 x16: 15.75 GB/s raw, ~12 GB/s achieved"),
        LinkSpec("pcie4", 25e3, 5.0, "PCIe 4.0 x16: 31.5 GB/s raw, ~25 GB/s achieved"),
        LinkSpec("pcie5", 50e3, 5.0, "PCIe 5.0 x16: 63 GB/s raw, ~50 GB/s achieved"),
        # host <-> device copies: pageable memory goes through a bounce buffer (about half the pinned rate)
        LinkSpec("host-pcie3", 6e3, 10.0, "cudaMemcpy pageable host memory over PCIe 3.0 x16 (~6 GB/s)"),
        LinkSpec("host-pcie3-pinned", 12e3, 8.0, "cudaMemcpy pinned host memory over PCIe 3.0 x16"),
        LinkSpec("host-pcie4-pinned", 25e3, 8.0, "cudaMemcpy pinned host memory over PCIe 4.0 x16"),
        LinkSpec("host-pcie5-pinned", 50e3, 8.0, "cudaMemcpy pinned host memory over PCIe 5.0 x16"),
        # NVLink, GPU to GPU, one direction
        LinkSpec("nvlink1", 20e3, 2.0, "NVLink 1 (P100 DGX-1): one 20 GB/s link between a pair"),
        LinkSpec("nvlink2", 50e3, 2.0, "NVLink 2 (V100 DGX-1): 2 links x 25 GB/s per direction"),
        LinkSpec("nvlink3", 300e3, 2.0, "NVLink 3 via NVSwitch (A100): 300 GB/s per direction"),
        LinkSpec("nvlink4", 450e3, 2.0, "NVLink 4 via NVSwitch (H100/H200): 450 GB/s per direction"),
        LinkSpec("nvlink5", 900e3, 2.0, "NVLink 5 via NVSwitch (B200): 900 GB/s per direction"),
    ]
}


def device_spec(model: str) -> DeviceSpec:
    try:
        return DEVICE_SPECS[model.lower()]
    except KeyError:
        raise InputError("device spec", f"model '{model}'", "is not a known device model",
                         f"use one of {', '.join(DEVICE_SPECS)}") from None


def link_spec(name: str) -> LinkSpec:
    try:
        return LINK_SPECS[name.lower()]
    except KeyError:
        raise InputError("link spec", f"link '{name}'", "is not a known link kind",
                         f"use one of {', '.join(LINK_SPECS)}") from None
