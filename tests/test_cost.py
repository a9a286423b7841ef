"""Cost model: device and link specs, the class roofline, measured profiles, calibration."""

from __future__ import annotations

import numpy as np
import pytest

from placer.cost.calibrate import fit_efficiency, predict_us
from placer.cost.roofline import (DEFAULT_COST_KEYS, GPU_EFFICIENCY, efficiency_for, roofline_costs,
                                  with_roofline_costs)
from placer.cost.specs import DEVICE_SPECS, LINK_SPECS, device_spec, link_spec
from placer.errors import InputError
from placer.graph import OpGraph


def tiny_graph(flops, bytes_, types, dtypes=None):
    n = len(flops)
    return OpGraph.build([f"op{i}" for i in range(n)], [(i, i + 1, 4.0) for i in range(n - 1)], op_types=types,
                         flops=flops, bytes_accessed=bytes_, meta={"op_dtype": dtypes or ["float32"] * n})


# ---------------------------------------------------------------------- specs
def test_device_specs_have_sources_and_dtype_peaks():
    for key in ("k80", "p100", "v100", "a100", "h100", "h200", "xeon-e5-2686", "host"):
        s = device_spec(key)
        assert s.source and s.peak_flops_per_us > 0 and s.mem_bw_bytes_per_us > 0 and s.memory_bytes > 0
        assert s.peak_for("float32") == s.peak_flops_per_us
    assert device_spec("v100").peak_for("float16") == 125e6  # tensor cores
    assert device_spec("a100").peak_for("bfloat16") == 312e6
    assert device_spec("k80").peak_for("float16") == device_spec("k80").peak_flops_per_us  # no fast fp16
    assert device_spec("h200").mem_bw_bytes_per_us > device_spec("h100").mem_bw_bytes_per_us
    with pytest.raises(InputError):
        device_spec("tpu-v9")


def test_link_specs_cover_pcie_nvlink_and_host():
    for name in ("pcie3", "pcie4", "pcie5", "nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5",
                 "host-pcie3", "host-pcie3-pinned", "host-pcie4-pinned", "host-pcie5-pinned", "placeto"):
        assert link_spec(name).bandwidth_bytes_per_us > 0 and link_spec(name).source
    bw = [link_spec(f"pcie{k}").bandwidth_bytes_per_us for k in (3, 4, 5)]
    assert bw == sorted(bw) and bw[2] == 2 * bw[1]
    assert link_spec("host-pcie3").bandwidth_bytes_per_us < link_spec("host-pcie3-pinned").bandwidth_bytes_per_us
    assert set(LINK_SPECS) >= {"nvlink4"} and set(DEVICE_SPECS) >= {"host"}


# ---------------------------------------------------------------------- roofline
def test_roofline_matches_hand_computation():
    g = tiny_graph([2e9, 0.0, 0.0], [1e6, 4e8, 0.0], ["aten.mm.default", "aten.add.Tensor", "parameter"])
    t = roofline_costs(g, "v100")
    v = device_spec("v100")
    mm = max(2e9 / (v.peak_flops_per_us * GPU_EFFICIENCY["matmul"]), 1e6 / (v.mem_bw_bytes_per_us * 0.75))
    assert t[0] == pytest.approx(mm + v.launch_us, abs=1e-3)
    assert t[1] == pytest.approx(4e8 / (v.mem_bw_bytes_per_us * GPU_EFFICIENCY["elementwise"]) + v.launch_us, abs=1e-3)
    assert t[2] == 0.0  # a parameter costs nothing
    half = roofline_costs(tiny_graph([2e9], [1e6], ["aten.mm.default"], ["float16"]), "v100")
    assert half[0] < t[0] / 5  # fp16 runs on the tensor cores


def test_cost_keys_order_devices_by_speed():
    g = tiny_graph([1e9, 0.0], [1e6, 1e8], ["aten.convolution.default", "aten.relu.default"])
    k80, v100, h100 = (roofline_costs(g, k) for k in ("k80", "v100", "h100"))
    assert (k80 > v100).all() and (v100 > h100).all()
    assert (roofline_costs(g, "cpu") > 0).all()  # the measured host, calibrated


def test_with_roofline_costs_keeps_measured_keys():
    g = tiny_graph([1e9, 0.0], [1e6, 1e8], ["aten.mm.default", "aten.relu.default"])
    g = g.replace(compute_us={"cpu": [7.0, 8.0]})
    h = with_roofline_costs(g)
    assert set(DEFAULT_COST_KEYS) <= set(h.compute_us)
    assert list(h.compute_us["cpu"]) == [7.0, 8.0]
    assert list(with_roofline_costs(g, overwrite=True).compute_us["cpu"]) != [7.0, 8.0]


def test_cpu_efficiencies_come_from_the_calibration():
    eff, launch = efficiency_for(device_spec("host"))
    from placer.cost.calibrated import CALIBRATION

    assert launch == CALIBRATION["host"]["launch_us"]
    assert all(eff[k] == v for k, v in CALIBRATION["host"]["efficiency"].items())
    _, xeon_launch = efficiency_for(device_spec("xeon-e5-2686"))
    assert xeon_launch == device_spec("xeon-e5-2686").launch_us


# ---------------------------------------------------------------------- calibration
def test_fit_recovers_known_efficiencies():
    spec = device_spec("host")
    rng = np.random.default_rng(0)
    n = 60
    types = ["aten.mm.default"] * 20 + ["aten.add.Tensor"] * 20 + ["aten.sum.dim_IntList"] * 20
    flops = np.r_[rng.uniform(1e6, 1e8, 20), np.zeros(40)]
    bytes_ = np.r_[np.full(20, 10.0), rng.uniform(1e5, 1e7, 40)]
    g = tiny_graph(flops, bytes_, types)
    true = {"matmul": 0.5, "elementwise": 0.8, "reduction": 0.25}
    launch = 4.0
    cls = ["matmul"] * 20 + ["elementwise"] * 20 + ["reduction"] * 20
    raw = np.maximum(flops / spec.peak_flops_per_us, bytes_ / spec.mem_bw_bytes_per_us)
    measured = launch + raw / np.array([true[c] for c in cls])
    tiny = tiny_graph([0.0] * 8, [1.0] * 8, ["aten.add.Tensor"] * 8)  # pure overhead ops fix the launch
    fit = fit_efficiency([(g, measured), (tiny, np.full(8, launch))], spec)
    assert fit["launch_us"] == pytest.approx(launch)
    for c, e in true.items():
        assert fit["efficiency"][c] == pytest.approx(e, rel=1e-3)
    assert predict_us(g, spec, fit) == pytest.approx(measured, rel=1e-3)
    assert n == g.n_ops


# ---------------------------------------------------------------------- measured profiles
def test_profile_measures_every_op_and_dedups_unrolled_steps():
    torch = pytest.importorskip("torch")
    from placer.cost.profile import measure_training_step_us, profile_capture, with_measured_costs
    from placer.zoo.models import build_model, zoo_capture

    cfg = dict(batch=4, length=4, hidden=16, vocab=50, layers=1)
    cap = zoo_capture("nmt2", **cfg)
    prof = profile_capture(cap, "cpu", warmup=1, repeats=3)
    g = cap.graph
    real = np.array([n is not None for n in cap.op_nodes])
    assert prof.failed == 0 and np.isfinite(prof.median_us).all()
    assert (prof.median_us[real] > 0).all() and (prof.median_us[~real] == 0).all()
    assert prof.unique_ops < real.sum() / 2  # four identical time steps are measured once
    h = with_measured_costs(g, prof, "cpu")
    assert np.array_equal(h.compute_us["cpu"], np.round(prof.median_us, 3))
    assert h.compute_us["v100"] is not None and np.array_equal(h.compute_us["v100"], g.compute_us["v100"])
    p = h.meta["profiles"]["cpu"]
    assert p["repeats"] == 3 and len(p["std_us"]) == g.n_ops and p["threads"] == 1
    from placer.frontends.native import graph_from_doc, graph_to_doc

    back = graph_from_doc(graph_to_doc(h))  # a profiled graph file keeps its measurements
    assert np.array_equal(back.compute_us["cpu"], h.compute_us["cpu"])
    assert back.meta["profiles"]["cpu"]["std_us"] == p["std_us"]
    m, inputs = build_model("nmt2", device="cpu", **cfg)
    med, std = measure_training_step_us(m, inputs, warmup=1, repeats=2)
    assert med > 0 and std >= 0
    cpu_med, _ = measure_training_step_us(m, inputs, warmup=1, repeats=2, clock="thread")
    assert cpu_med > 0
    thread = profile_capture(cap, "cpu", warmup=1, repeats=3, clock="thread")
    assert thread.summary()["clock"] == "thread" and np.isfinite(thread.median_us).all()
    with pytest.raises(InputError, match="clock"):
        profile_capture(cap, "cpu", clock="sundial")
    assert torch.get_num_threads() >= 1


def test_profile_on_missing_cuda_is_an_input_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from placer.cost.profile import profile_capture
    from placer.zoo.models import zoo_capture

    cap = zoo_capture("rnnlm", batch=2, length=2, hidden=8, vocab=20, layers=1)
    with pytest.raises(InputError, match="not available"):
        profile_capture(cap, "cuda")
