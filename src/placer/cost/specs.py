"""Published speeds of the devices and links the cluster presets use.

Numbers are vendor datasheet peaks (dense, no sparsity); efficiency factors that turn peaks into
achieved speed belong to the roofline model (:mod:`placer.cost.roofline`).
Units are in the names: FLOP per microsecond (1 TFLOP/s = 1e6 FLOP/us), bytes per microsecond
(1 GB/s = 1e3 bytes/us).
"""

from __future__ import annotations

from dataclasses import dataclass

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


DEVICE_SPECS: dict[str, DeviceSpec] = {
    s.model: s
    for s in [
        # one GK210 die of a K80 board: 4.37 TFLOP/s fp32 boost, 240 GB/s, 12 GB (about 11 GB usable: Placeto appendix uses M = 10.7 GB,
        # Post section 4 says 11 GB). NVIDIA Tesla K80 datasheet.
        DeviceSpec("k80", "gpu", 11 * GiB, 4.37e6, 240e3, 10.0, "NVIDIA Tesla K80 datasheet (per GK210 die)"),
        DeviceSpec("p100", "gpu", 16 * GiB, 10.6e6, 732e3, 6.0, "NVIDIA Tesla P100 SXM2 datasheet"),
        DeviceSpec("v100", "gpu", 32 * GiB, 15.7e6, 900e3, 5.0, "NVIDIA Tesla V100 SXM2 datasheet"),
        DeviceSpec("a100", "gpu", 80 * GiB, 19.5e6, 2039e3, 4.0, "NVIDIA A100 80GB SXM datasheet (fp32 non-tensor)"),
        DeviceSpec("h100", "gpu", 80 * GiB, 67e6, 3350e3, 4.0, "NVIDIA H100 SXM5 datasheet (fp32 non-tensor)"),
        DeviceSpec("h200", "gpu", 141 * GiB, 67e6, 4800e3, 4.0, "NVIDIA H200 SXM datasheet (fp32 non-tensor)"),
        # Xeon E5-2686 v4 (the papers' p2.8xlarge host): 16 cores x 2.3 GHz x 32 fp32 FLOP/cycle (AVX2 FMA),
        # 4 channels DDR4-2400 = 76.8 GB/s.
        DeviceSpec("xeon-e5-2686", "cpu", 64 * GiB, 1.18e6, 76.8e3, 20.0, "Intel ark E5-2686 v4; 16C AVX2 FMA peak"),
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
        LinkSpec("pcie3", 12e3, 5.0, "PCIe 3.0 x16: 15.75 GB/s raw, ~12 GB/s achieved"),
        LinkSpec("pcie4", 25e3, 5.0, "PCIe 4.0 x16: 31.5 GB/s raw, ~25 GB/s achieved"),
        LinkSpec("pcie5", 50e3, 5.0, "PCIe 5.0 x16: 63 GB/s raw, ~50 GB/s achieved"),
        LinkSpec("nvlink2", 50e3, 2.0, "NVLink 2 (V100 DGX-1): 2 links x 25 GB/s per direction"),
        LinkSpec("nvlink3", 300e3, 2.0, "NVLink 3 via NVSwitch (A100): 300 GB/s per direction"),
        LinkSpec("nvlink4", 450e3, 2.0, "NVLink 4 via NVSwitch (H100): 450 GB/s per direction"),
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
