"""Simulator fidelity: predicted versus really measured step time of placed training steps.

    python benchmarks/fidelity.py cpu [--models resnet50,bert_base] [--small] [--calibrate]
    python benchmarks/fidelity.py gpu [--models resnet50,bert_base,nmt2] [--placements 12] [--calibrate]

Both modes capture zoo models, measure every op on the real devices (``placer.cost.profile``),
build a cluster of those devices whose compute costs are the measured medians plus the per-op
overhead of op-by-op execution (``OP_OVERHEAD_US``; ``--calibrate`` fits it here instead, by least
squares over the single-device runs), predict each placement's step with the simulator and run it
for real with :func:`placer.runtime.run_placement`. Reported: per run predicted / measured, and per
mode the MAPE (mean |predicted - measured| / measured) and the Spearman rank correlation.

* ``cpu``: every zoo model (``--small``: reduced configurations that run in seconds) on one device.
* ``gpu``: 2 devices, ``cuda:0`` and ``cpu``; per model the single-device placements, random ones
  (10 / 30 / 50% of the ops on the CPU, colocation kept), structured ones (a contiguous prefix or
  suffix of the topological order on the CPU; the update ops on the CPU) and the methods' own
  (``local-search``, ``heft``, ``m-etf``, ``metis``) on that cluster. The CPU <-> GPU link is
  measured (pageable copies, as the runtime makes them).

``--json FILE`` writes every run. Numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from placer.cluster import Device, make_cluster
from placer.cost.profile import OP_OVERHEAD_US, profile_capture, with_measured_costs
from placer.problem import Problem
from placer.runtime import run_placement
from placer.runtime.measure import rebuild
from placer.zoo.models import ZOO, zoo_capture

SMALL = {  # seconds per step on one CPU thread
    "inception_v3": dict(batch=2, image=139), "inception_v3-b32": dict(batch=2, image=139),
    "resnet50": dict(batch=4, image=112), "resnet101": dict(batch=2, image=112),
    "resnet200": dict(batch=1, image=96), "nasnet_large": dict(batch=1, num_cells=2, filters=48, image=96),
    "nasnet_mobile": dict(batch=2, image=96, num_cells=2), "nmt2": dict(batch=16, length=8, hidden=256, vocab=4000),
    "nmt4": dict(batch=16, length=8, hidden=256, vocab=4000), "nmt8": dict(batch=8, length=6, hidden=256, vocab=4000),
    "gnmt": dict(batch=8, length=6, hidden=256, vocab=4000), "rnnlm": dict(batch=16, length=8, hidden=256, vocab=4000),
    "bert_base": dict(batch=4, seq=64, layers=2, vocab=4000), "bert_large": dict(batch=2, seq=64, layers=2, vocab=4000),
    "gpt2": dict(batch=2, seq=128, layers=2, vocab=4000),
}
GPU_MODELS = {  # moderate sizes: a CPU-heavy placement still runs in about a second on a 16-core host
    "resnet50": dict(batch=16, image=128),
    "bert_base": dict(batch=8, seq=128, layers=4, vocab=8000),
    "nmt2": dict(batch=64, length=12, hidden=512, vocab=8000),
}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred), np.asarray(meas)
    return float(np.mean(np.abs(pred - meas) / meas))


def costed(graph, profiles: dict, overhead: dict):
    """The graph with compute_us['m-<device>'] = measured medians + overhead per real device."""
    g = graph
    for dev, prof in profiles.items():
        g = with_measured_costs(g, prof, f"m-{dev.split(':')[0]}", overhead_us=overhead[dev.split(':')[0]])
    return g


def link_bytes_per_us() -> tuple[float, float]:
    """Measured pageable host -> GPU copy bandwidth (bytes/us) and latency (us)."""
    import torch

    x = torch.empty(64 * 2**20, dtype=torch.uint8)
    small = torch.empty(4, dtype=torch.uint8)
    for _ in range(3):
        x.to("cuda:0"); small.to("cuda:0")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        x.to("cuda:0")
    torch.cuda.synchronize()
    bw = 5 * x.numel() / ((time.perf_counter() - t0) * 1e6)
    t0 = time.perf_counter()
    for _ in range(50):
        small.to("cuda:0")
    torch.cuda.synchronize()
    return bw, (time.perf_counter() - t0) * 1e6 / 50


def fit_overhead(rows, kind: str) -> float:
    """Least-squares per-op overhead from single-device runs: measured = sum(medians) + n * o."""
    r = [x for x in rows if x["single"] == kind]
    if not r:
        return OP_OVERHEAD_US[kind]
    n = np.array([x["ops_run"] for x in r], dtype=float)
    gap = np.array([x["measured_us"] - x["sum_median_us"] for x in r])
    return float(max(0.0, (n * gap).sum() / (n * n).sum()))


# ---------------------------------------------------------------------- cpu
def cpu_mode(a) -> list[dict]:
    import torch

    threads = a.threads or torch.get_num_threads()
    models = [m for m in a.models.split(",") if m] if a.models else list(ZOO)
    rows = []
    host = make_cluster("host", [Device("cpu:0", "cpu", "m-cpu", 1e12)], 1.0, 0.0)
    print(f"CPU fidelity ({threads} torch threads, {'small' if a.small else 'full-size'} models, "
          f"load {os.getloadavg()[0]:.1f}):")
    print(f"  {'model':<16} {'ops':>5} {'sum_profile_ms':>14} {'measured_ms':>11} {'spread':>7}")
    for name in models:
        cfg = SMALL.get(name, {}) if a.small else {}
        cap = zoo_capture(name, **cfg)
        prof = profile_capture(cap, "cpu", warmup=1, repeats=a.repeats, threads=threads)
        g = cap.graph
        ran = np.asarray([t not in ("parameter", "buffer", "input", "constant") for t in g.op_types])
        rb = rebuild(g)
        rep = run_placement(g, host, np.zeros(g.n_ops, dtype=np.int64), ["cpu"],
                            steps=a.steps, warmup=1, threads=threads, rebuilt=rb)
        s = rep.summary()
        rows.append({"model": name, "config": cfg, "ops": g.n_ops, "ops_run": int(ran.sum()), "single": "cpu",
                     "sum_median_us": float(np.nansum(prof.median_us)), "measured_us": rep.median_us,
                     "spread_us": s["measured_iqr_us"], "prof": prof, "graph": g})
        print(f"  {name:<16} {g.n_ops:>5} {np.nansum(prof.median_us) / 1e3:>14.1f} {rep.median_us / 1e3:>11.1f} "
              f"{s['measured_iqr_us'] / 1e3:>7.1f}", flush=True)
    o = fit_overhead(rows, "cpu") if a.calibrate else OP_OVERHEAD_US["cpu"]
    print(f"  per-op overhead: {o:.2f} us ({'fitted here' if a.calibrate else 'OP_OVERHEAD_US'})")
    for r in rows:
        from placer.sim import simulate

        g0 = with_measured_costs(r["graph"], r["prof"], "m-cpu", overhead_us=0.0)
        g1 = with_measured_costs(r["graph"], r["prof"], "m-cpu", overhead_us=o)
        z = np.zeros(g0.n_ops, dtype=np.int64)
        r["predicted_no_overhead_us"] = float(simulate(Problem(g0, host), z).makespan_us)
        r["predicted_us"] = float(simulate(Problem(g1, host), z).makespan_us)
        del r["prof"], r["graph"]
    report(rows, "cpu", o)
    return rows


# ---------------------------------------------------------------------- gpu
def placements_for(P, rng, n_random: int) -> list[tuple[str, np.ndarray]]:
    from placer.methods import Budget, run_method

    g, n = P.graph, P.n_ops
    gpu, cpu = 0, 1

    def coloc(p, member=0):  # a colocation group goes where its first (or last: -1) member is
        for c in np.unique(g.colocation[g.colocation >= 0]):
            idx = np.flatnonzero(g.colocation == c)
            p[idx] = p[idx[member]]
        return p

    out = [("single-gpu", np.full(n, gpu)), ("single-cpu", np.full(n, cpu))]
    for frac in (0.1, 0.3, 0.5)[:max(1, n_random)]:
        for k in range(max(1, n_random // 3)):
            out.append((f"random-{int(frac * 100)}%-{k}", coloc(np.where(rng.random(n) < frac, cpu, gpu))))
    for frac in (0.1, 0.25, 0.5):
        p = np.full(n, gpu)
        p[:int(frac * n)] = cpu
        out.append((f"prefix-{int(frac * 100)}%-cpu", coloc(p)))
        p = np.full(n, gpu)
        p[n - int(frac * n):] = cpu
        out.append((f"suffix-{int(frac * 100)}%-cpu", coloc(p, -1)))
    out.append(("update-on-cpu", coloc(np.where(g.role == 2, cpu, gpu), -1)))
    for m in ("local-search", "heft", "m-etf", "metis"):
        try:
            r = run_method(m, P, Budget(placements=200), seed=0)
            out.append((m, np.asarray(r.placement.devices)))
        except Exception as e:  # a method that does not apply here
            print(f"    ({m}: {type(e).__name__}: {e})")
    return out


def gpu_mode(a) -> list[dict]:
    import torch

    from placer.sim import simulate

    assert torch.cuda.is_available(), "gpu mode needs a CUDA device"
    threads = a.threads or torch.get_num_threads()
    bw, lat = link_bytes_per_us()
    name_gpu = torch.cuda.get_device_name(0)
    print(f"GPU fidelity on {name_gpu} + host CPU ({threads} threads); host->GPU link {bw / 1e3:.1f} GB/s, "
          f"{lat:.1f} us")
    cluster = make_cluster("cuda0+cpu", [Device("gpu:0", "gpu", "m-cuda", 70e9), Device("cpu:0", "cpu", "m-cpu", 100e9)],
                           bw, lat)
    models = [m for m in a.models.split(",") if m] if a.models else list(GPU_MODELS)
    rng = np.random.default_rng(0)
    raw = []
    for name in models:
        t0 = time.perf_counter()
        cap = zoo_capture(name, **GPU_MODELS.get(name, {}))
        profs = {"cuda:0": profile_capture(cap, "cuda:0", warmup=2, repeats=a.repeats, threads=threads),
                 "cpu": profile_capture(cap, "cpu", warmup=1, repeats=a.repeats, threads=threads)}
        g = cap.graph
        ran = int(np.sum([t not in ("parameter", "buffer", "input", "constant") for t in g.op_types]))
        P0 = Problem(costed(g, profs, dict(OP_OVERHEAD_US)), cluster)
        rb = rebuild(g)
        print(f"  {name}: {g.n_ops} ops, profiled in {time.perf_counter() - t0:.1f} s "
              f"(cuda sum {np.nansum(profs['cuda:0'].median_us) / 1e3:.1f} ms, cpu sum "
              f"{np.nansum(profs['cpu'].median_us) / 1e3:.1f} ms)", flush=True)
        for label, p in placements_for(P0, rng, a.placements):
            p = P0.validate_placement(p, label)
            rep = run_placement(P0.graph, cluster, p, ["cuda:0", "cpu"], steps=a.steps, warmup=1, threads=threads, rebuilt=rb)
            single = "cuda" if label == "single-gpu" else "cpu" if label == "single-cpu" else None
            key = "cuda:0" if single == "cuda" else "cpu"
            raw.append({"model": name, "placement": label, "ops": g.n_ops, "ops_run": ran, "single": single,
                        "cpu_ops": int((p == 1).sum()), "measured_us": rep.median_us,
                        "spread_us": rep.summary()["measured_iqr_us"], "transfers": rep.transfers,
                        "sum_median_us": float(np.nansum(profs[key].median_us)), "_p": p, "_g": g, "_profs": profs})
            print(f"    {label:<22} cpu ops {int((p == 1).sum()):>5}  measured {rep.median_us / 1e3:9.2f} ms", flush=True)
    over = dict(OP_OVERHEAD_US)
    if a.calibrate:
        over = {"cuda": fit_overhead(raw, "cuda"), "cpu": fit_overhead(raw, "cpu")}
    print(f"  per-op overhead: cuda {over['cuda']:.2f} us, cpu {over['cpu']:.2f} us "
          f"({'fitted here' if a.calibrate else 'OP_OVERHEAD_US'})")
    cache = {}
    for r in raw:
        if r["model"] not in cache:
            cache[r["model"]] = (Problem(costed(r["_g"], r["_profs"], over), cluster),
                                 Problem(costed(r["_g"], r["_profs"], {"cuda": 0.0, "cpu": 0.0}), cluster))
        P1, P0 = cache[r["model"]]
        r["predicted_us"] = float(simulate(P1, r["_p"]).makespan_us)
        r["predicted_no_overhead_us"] = float(simulate(P0, r["_p"]).makespan_us)
        for k in ("_p", "_g", "_profs"):
            del r[k]
    report(raw, "gpu", over)
    return raw


def report(rows, mode, overhead) -> None:
    print(f"\n{mode} results (predicted / measured):")
    for r in rows:
        print(f"  {r['model']:<14} {r.get('placement', 'single-cpu'):<22} predicted {r['predicted_us'] / 1e3:9.2f} ms  "
              f"measured {r['measured_us'] / 1e3:9.2f} ms  ratio {r['predicted_us'] / r['measured_us']:5.2f}  "
              f"(no overhead {r['predicted_no_overhead_us'] / r['measured_us']:5.2f})")
    pred, meas = [r["predicted_us"] for r in rows], [r["measured_us"] for r in rows]
    pred0 = [r["predicted_no_overhead_us"] for r in rows]
    print(f"  {mode}: {len(rows)} runs; MAPE {mape(pred, meas):.1%} (without the overhead term {mape(pred0, meas):.1%}); "
          f"Spearman {spearman(pred, meas):.3f} (without {spearman(pred0, meas):.3f}); overhead {overhead}")
    if mode == "gpu":
        for m in sorted({r["model"] for r in rows}):
            sub = [r for r in rows if r["model"] == m]
            print(f"    {m}: {len(sub)} runs, MAPE {mape([r['predicted_us'] for r in sub], [r['measured_us'] for r in sub]):.1%}, "
                  f"Spearman {spearman([r['predicted_us'] for r in sub], [r['measured_us'] for r in sub]):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("cpu", "gpu"))
    ap.add_argument("--models", default=None, help="comma-separated zoo names")
    ap.add_argument("--small", action="store_true", help="cpu: reduced configurations")
    ap.add_argument("--placements", type=int, default=6, help="gpu: random placements per model")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--calibrate", action="store_true", help="fit the per-op overhead on these runs")
    ap.add_argument("--json", default=None, help="write every run here")
    a = ap.parse_args()
    rows = cpu_mode(a) if a.mode == "cpu" else gpu_mode(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
