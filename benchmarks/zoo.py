"""Zoo figures: for every zoo model its captured training-step graph (ops, edges, groups after each
grouping, FLOPs, parameter bytes, capture time) and the simulated single-GPU step time on the K80
and V100 presets; a sanity check of the estimated Inception-V3 / ResNet-50 step against the
PipeDream profiles measured on one GPU; and, on this CPU, for three small zoo models, the step
time the simulator predicts from the measured per-op profile (one CPU device) against the really
measured eager training step.

    python benchmarks/zoo.py                  # everything (captures are cached: slow only once)
    python benchmarks/zoo.py --models resnet50,nmt2 --skip-cpu
    python benchmarks/zoo.py --only-cpu --repeats 7

Graphs come from the zoo cache (``$PLACER_CACHE_DIR`` or ``~/.cache/placer/zoo``); "capture_s" is
the capture time recorded when the graph was built, "load_s" the time to get it now.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from placer.cluster import Device, make_cluster, preset
from placer.cost.specs import device_spec
from placer.graph import UPDATE
from placer.problem import Problem
from placer.sim import simulate
from placer.zoo.models import ZOO, zoo_capture, zoo_graph

PIPEDREAM = Path(__file__).resolve().parent.parent.parent / "shared" / "graphs" / "pipedream"
# three small configurations for the CPU check (each a few hundred ms per step on one thread)
CPU_MODELS = [
    ("resnet50", dict(batch=8, image=64, blocks=(1, 1, 1, 1), base_width=32, classes=100)),
    ("bert_base", dict(batch=4, seq=64, layers=2, vocab=4000)),
    ("nmt2", dict(batch=32, length=8, hidden=256, vocab=4000)),
]


def single_device_step_us(g, cluster_name: str) -> tuple[float, bool]:
    P = Problem(g, preset(cluster_name))
    r = simulate(P, np.zeros(g.n_ops, dtype=np.int64))
    return r.makespan_us, bool(r.oom)


def group_counts(g) -> dict[str, int]:
    try:
        from placer.grouping import colocate, merge_and_colocate, metis_groups
    except ImportError:  # pragma: no cover - grouping not present
        return {}
    P = Problem(g, preset("k80x2"))
    return {"colocate": colocate(P).n_groups,
            "mac_1MB": merge_and_colocate(P, max_cost_bytes=1e6).n_groups,
            "metis256": metis_groups(P, 256).n_groups if g.n_ops > 512 else g.n_ops}


def zoo_table(names, grouping: bool) -> None:
    cols = ["model", "ops", "edges", "colocate", "mac_1MB", "metis256", "TFLOP", "param_MB", "+state_MB",
            "capture_s", "load_s", "k80_ms", "v100_ms"]
    print(" ".join(f"{c:>{w}}" for c, w in zip(cols, (16, 6, 6, 8, 7, 8, 7, 8, 9, 9, 7, 9, 8))), flush=True)
    for name in names:
        t0 = time.perf_counter()
        g = zoo_graph(name)
        load_s = time.perf_counter() - t0
        groups = group_counts(g) if grouping else {}
        k80, k80_oom = single_device_step_us(g, "k80x1")
        v100, v100_oom = single_device_step_us(g, "v100x8")
        slots = {"sgd": 1, "sgd-momentum": 2, "adam": 3}[g.meta.get("optimizer") or "sgd-momentum"]
        params = g.param_bytes[np.array([t == "parameter" for t in g.op_types])].sum()
        row = [name, g.n_ops, g.n_edges, groups.get("colocate", "-"), groups.get("mac_1MB", "-"),
               groups.get("metis256", "-"), f"{g.flops.sum() / 1e12:.2f}", f"{params / slots / 1e6:.1f}",
               f"{g.param_bytes.sum() / 1e6:.1f}", f"{g.meta.get('capture_s', float('nan')):.1f}", f"{load_s:.1f}",
               f"{k80 / 1e3:.1f}{'*' if k80_oom else ''}", f"{v100 / 1e3:.1f}{'*' if v100_oom else ''}"]
        print(" ".join(f"{str(c):>{w}}" for c, w in zip(row, (16, 6, 6, 8, 7, 8, 7, 8, 9, 9, 7, 9, 8))), flush=True)
    print("(* = the step does not fit in the device's memory; param_MB = parameters, +state_MB = with momentum)")


def pipedream_sanity() -> None:
    """PipeDream's profiles are per-layer forward + backward times at batch 128 on one GPU
    (V100-class: Inception's 3x3 conv 64->96 runs at 12.6 TFLOP/s there). Compare with our V100
    roofline for the same batch, forward + backward ops only (PipeDream has no optimizer step)."""
    from placer.frontends.pipedream import load_pipedream

    print("\nsanity vs PipeDream profiles (batch 128, one GPU, forward + backward):")
    for name in ("inception_v3", "resnet50"):
        path = PIPEDREAM / f"{name}.txt"
        if not path.exists():
            print(f"  {name}: {path} not found, skipped")
            continue
        pd_ms = load_pipedream(str(path)).compute_us["gpu"].sum() / 1e3
        g = zoo_graph(name, batch=128)
        fb = g.role != UPDATE
        for key in ("v100", "k80"):
            ours = g.compute_us[key][fb].sum() / 1e3
            print(f"  {name:<13} PipeDream {pd_ms:8.1f} ms   ours[{key}] {ours:8.1f} ms   ratio {ours / pd_ms:5.2f}")


def cpu_check(repeats: int, clock: str) -> None:
    from placer.cost.profile import measure_training_step_us, profile_capture, with_measured_costs
    from placer.zoo.models import build_model

    host = make_cluster("host-cpu", [Device.from_spec("cpu:0", device_spec("host"))], 1.0, 0.0)
    print(f"\nthis CPU (1 torch thread, {clock} clock): simulated step from the measured per-op profile vs the "
          f"measured eager step (median of {repeats}):")
    print(f"  {'model':<10} {'ops':>5} {'unique':>6} {'profile_s':>9} {'predicted_ms':>12} {'measured_ms':>11} "
          f"{'std_ms':>7} {'ratio':>6} {'roofline_ms':>11}")
    import torch

    for name, cfg in CPU_MODELS:
        cap = zoo_capture(name, **cfg)
        torch.manual_seed(0)
        m, inputs = build_model(name, device="cpu", **cfg)
        # the machine may be shared: measure the real step before and after profiling, pool the two
        before = measure_training_step_us(m, inputs, warmup=2, repeats=repeats, threads=1, clock=clock)
        prof = profile_capture(cap, "cpu", warmup=2, repeats=repeats, threads=1, clock=clock)
        after = measure_training_step_us(m, inputs, warmup=1, repeats=repeats, threads=1, clock=clock)
        real, std = (before[0] + after[0]) / 2, max(before[1], after[1], abs(before[0] - after[0]) / 2)
        g = with_measured_costs(cap.graph, prof, "cpu")
        pred = simulate(Problem(g, host), np.zeros(g.n_ops, dtype=np.int64)).makespan_us
        roof = simulate(Problem(cap.graph, host), np.zeros(g.n_ops, dtype=np.int64)).makespan_us
        print(f"  {name:<10} {g.n_ops:>5} {prof.unique_ops:>6} {prof.wall_s:>9.1f} {pred / 1e3:>12.1f} "
              f"{real / 1e3:>11.1f} {std / 1e3:>7.1f} {pred / real:>6.2f} {roof / 1e3:>11.1f}", flush=True)
    print(f"  (ratio = predicted / measured; roofline_ms = the calibrated roofline 'cpu' estimate instead; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo names")
    ap.add_argument("--skip-grouping", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--only-cpu", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clock", choices=("wall", "thread"), default="thread",
                    help="CPU check timing: thread CPU time (default; robust on a shared machine) or wall time")
    a = ap.parse_args()
    if not a.only_cpu:
        zoo_table([m for m in a.models.split(",") if m], not a.skip_grouping)
        pipedream_sanity()
    if not a.skip_cpu:
        cpu_check(a.repeats, a.clock)


if __name__ == "__main__":
    main()
