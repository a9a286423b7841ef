"""Simulator fidelity: predicted versus really measured step time of placed training steps.

    python benchmarks/fidelity.py cpu [--models resnet50,bert_base] [--small] [--calibrate] [--threads 1]
                                      [--model-budget-s 120] [--json FILE]
    python benchmarks/fidelity.py cpu --merge A.json B.json ... [--json FILE]
    python benchmarks/fidelity.py here --out DIR [--cpus 2] [--rounds 3] [--steps 2] [--budget 300] [--small]
    python benchmarks/fidelity.py gpu --out DIR [--models resnet50,bert_base,nmt2] [--placements 2]
                                      [--table-only] [--cache DIR] [--budget-s 420] [--small --device cpu]

* ``cpu``: every zoo model (``--small``: reduced configurations that run in seconds) on one CPU
  device. Every op of the captured step is measured alone (``placer.cost.profile``), the compute
  costs are the measured medians plus the per-node overhead of executing the step
  (``OP_OVERHEAD_US``, charged per executed fx node, :func:`placer.cost.profile.with_measured_costs`;
  ``--calibrate`` fits it here by least squares of measured minus summed medians over executed
  nodes), the simulator predicts the step and :func:`placer.runtime.run_placement` runs it. One
  torch thread for the profile and the steps unless ``--threads`` says otherwise (the profile and
  the run must agree). ``--model-budget-s`` fits each model's timed steps (at least 3) into a
  wall-clock budget from its profiled estimate. Reported per model beside the prediction without
  the overhead: the committed ``OP_OVERHEAD_US['cpu']``, the overhead fitted on all models, and the
  one fitted on the other models alone (leave one out, :func:`placer.cost.profile.leave_one_out_overhead`:
  the honest check of the fitted value). ``--merge`` summarises the ``--json`` files of several
  runs together (one model per process keeps each model's memory to itself).
* ``here`` (``benchmarks/fidelity_here.py``): the machine itself as the cluster (every GPU, the CPU
  as ``--cpus`` single-thread devices, links measured), four models with parallel structure costed
  by real-step profiles on each device, at least 20 placements each that use two devices or more,
  every one run for real in interleaved rounds and predicted; MAPE, Spearman, top-1 regret, and the
  per-node overhead refitted with a leave-one-out check. ``--out DIR`` receives
  ``fidelity_here.json`` and ``summary.md``.
* ``gpu`` (``benchmarks/fidelity_gpu.py``): per configuration of issue 50 the eager PyTorch step,
  our executor's single-GPU step and the prediction from a profile of real steps
  (:mod:`placer.cost.gpu_profile`), then mixed GPU + host-CPU placements measured against their
  predictions (MAPE, Spearman); ``--out DIR`` receives ``fidelity_gpu.json`` and ``summary.md``.
  ``--small --device cpu`` runs it all on the CPU with small models, to check the script.

``--json FILE`` (cpu) writes ``{"settings": ..., "rows": [...]}``. Numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from placer.cluster import Device, make_cluster
from placer.cost.profile import (OP_OVERHEAD_US, executed_nodes, fit_node_overhead, fit_overheads,
                                 leave_one_out_overhead, profile_capture, with_measured_costs)
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
GPU_SMALL = {  # gpu mode's script check on a CPU-only machine
    "resnet50": dict(batch=2, image=64), "bert_base": dict(batch=2, seq=16, layers=1, vocab=500),
    "nmt2": dict(batch=4, length=4, hidden=32, vocab=200),
}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred), np.asarray(meas)
    return float(np.mean(np.abs(pred - meas) / meas))


def fit_overhead(rows, kind: str) -> float:
    """Per-node CPU overhead from the single-CPU runs: measured = sum(medians) + nodes * o, least
    squares of the relative error."""
    r = [x for x in rows if x["single"] == kind]
    if not r:
        return OP_OVERHEAD_US[kind]
    return fit_node_overhead([x["sum_median_us"] for x in r], [x["nodes_run"] for x in r],
                             [x["measured_us"] for x in r])


# ---------------------------------------------------------------------- cpu
def _machine() -> dict:
    import platform

    import torch

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:  # pragma: no cover - not Linux
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        mem = float("nan")
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(mem, 1), "torch": torch.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M %Z")}


def cpu_steps(estimate_us: float, budget_s: float, steps: int) -> int:
    """Timed steps that fit ``budget_s`` seconds for a step estimated at ``estimate_us`` (``budget_s``
    0: ``steps``): at least 3 (their median is reported), at most ``steps``. Warm-up steps are not
    cut: the first two or three steps of a fresh process run slower (allocator and page faults)."""
    if budget_s <= 0:
        return steps
    return max(min(3, steps), min(steps, int(budget_s * 1e6 / max(estimate_us, 1.0))))


def _usage(since: dict | None = None) -> dict:
    """This process's wall and CPU seconds, minor page faults and involuntary context switches (the
    times other processes took the core), or their growth ``since`` an earlier reading; with one
    torch thread, ``cpu_share`` (CPU / wall) below 1 says how much of the wall time went elsewhere."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    now = {"wall_s": time.perf_counter(), "cpu_s": r.ru_utime + r.ru_stime, "sys_s": r.ru_stime,
           "minor_faults": r.ru_minflt, "invol_switches": r.ru_nivcsw}
    if since is None:
        return now
    d = {k: round(now[k] - since[k], 3) for k in now}
    d["cpu_share"] = round(d["cpu_s"] / d["wall_s"], 3) if d["wall_s"] > 0 else None
    return d


def cpu_mode(a) -> tuple[list[dict], dict]:
    import resource

    import torch

    from placer.sim import simulate

    threads = a.threads or 1
    models = [m for m in a.models.split(",") if m] if a.models else list(ZOO)
    rows = []
    host = make_cluster("host", [Device("cpu:0", "cpu", "m-cpu", 1e12)], 1.0, 0.0)
    committed = OP_OVERHEAD_US["cpu"]
    t_start = time.perf_counter()
    print(f"CPU fidelity ({threads} torch threads, {'small' if a.small else 'full-size'} models, "
          f"load {os.getloadavg()[0]:.1f}):")
    print(f"  {'model':<16} {'ops':>5} {'nodes':>6} {'sum_profile_ms':>14} {'measured_ms':>11} {'iqr':>7} {'steps':>5}")
    for name in models:
        load0 = os.getloadavg()[0]
        cfg = SMALL.get(name, {}) if a.small else {}
        t0 = time.perf_counter()
        cap = zoo_capture(name, **cfg)
        capture_s = time.perf_counter() - t0
        u0 = _usage()
        prof = profile_capture(cap, "cpu", warmup=1, repeats=a.repeats, threads=threads)
        u_prof = _usage(u0)
        g = cap.graph
        nodes = executed_nodes(cap)
        z = np.zeros(g.n_ops, dtype=np.int64)
        g0 = with_measured_costs(g, prof, "m-cpu", overhead_us=0.0)
        g100 = with_measured_costs(g, prof, "m-cpu", overhead_us=100.0, nodes=nodes)
        pred0 = float(simulate(Problem(g0, host), z).makespan_us)
        slope = (float(simulate(Problem(g100, host), z).makespan_us) - pred0) / 100.0  # us of step per us of overhead
        steps, warmup = cpu_steps(pred0 + committed * slope, a.model_budget_s, a.steps), a.warmup
        t1 = time.perf_counter()
        rb = rebuild(g)
        u0 = _usage()
        rep = run_placement(g0, host, z, ["cpu"], steps=steps, warmup=warmup, threads=threads, rebuilt=rb,
                            )
        u_run = _usage(u0)
        s = rep.summary()
        rows.append({"model": name, "config": cfg or dict(ZOO[name].config), "ops": g.n_ops,
                     "ops_run": int((nodes > 0).sum()), "nodes_run": int(nodes.sum()), "single": "cpu",
                     "output_gib_run": _output_gib(g),
                     "profile_unique_ops": prof.unique_ops, "profile_failed_ops": prof.failed,
                     "profile_repeats": a.repeats, "sum_median_us": float(np.nansum(prof.median_us)),
                     "predicted_no_overhead_us": pred0, "overhead_slope": slope,
                     "measured_us": rep.median_us, "spread_us": s["measured_iqr_us"],
                     "min_us": s["measured_min_us"], "max_us": s["measured_max_us"],
                     "step_us": [round(x, 1) for x in rep.step_us], "steps": steps, "warmup": warmup,
                     "peak_bytes": rep.peak_bytes[0], "predicted_peak_bytes": rep.predicted_peak_bytes[0],
                     "max_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                     "capture_s": round(capture_s, 1), "profile_s": round(prof.wall_s, 1),
                     "run_s": round(time.perf_counter() - t1, 1), "load_start": round(load0, 2),
                     "load_end": round(os.getloadavg()[0], 2), "profile_usage": u_prof, "run_usage": u_run})
        print(f"  {name:<16} {g.n_ops:>5} {int(nodes.sum()):>6} {np.nansum(prof.median_us) / 1e3:>14.1f} "
              f"{rep.median_us / 1e3:>11.1f} {s['measured_iqr_us'] / 1e3:>7.1f} {steps:>5}", flush=True)
        del cap, rb, g, g0, g100, prof
    summary = cpu_summary(rows, committed, a.calibrate)
    settings = {"mode": "cpu", "threads": threads, "executor": "plan (issue 50)", "small": a.small,
                "profile": {"warmup": 1, "repeats": a.repeats, "clock": "wall"}, "steps": a.steps,
                "warmup": a.warmup, "model_budget_s": a.model_budget_s, "machine": _machine(),
                "wall_s": round(time.perf_counter() - t_start, 1), "summary": summary}
    return rows, settings


def cpu_summary(rows, committed: float, calibrate: bool) -> dict:
    """Predictions at no overhead, the committed ``OP_OVERHEAD_US['cpu']``, the overhead fitted on
    all rows and, per row, the one fitted on the other rows (leave one out); MAPE and Spearman of
    each. Sets ``predicted_us`` (committed, or fitted with ``calibrate``) on every row. Uses the
    predicted step without overhead and its growth per us of overhead (``overhead_slope``, from the
    simulator), so rows from several runs (``--merge``) combine."""
    b = np.array([r["predicted_no_overhead_us"] for r in rows])
    n = np.array([r["overhead_slope"] for r in rows])
    m = np.array([r["measured_us"] for r in rows])
    fitted = fit_node_overhead(b, n, m)
    loo = leave_one_out_overhead(b, n, m) if len(rows) > 1 else [(float("nan"), float("nan"))]
    used = fitted if calibrate else committed
    for r, (o_i, p_i) in zip(rows, loo):
        r["predicted_committed_us"] = float(r["predicted_no_overhead_us"] + committed * r["overhead_slope"])
        r["predicted_fitted_us"] = float(r["predicted_no_overhead_us"] + fitted * r["overhead_slope"])
        r["predicted_us"] = float(r["predicted_no_overhead_us"] + used * r["overhead_slope"])
        r["loo_overhead_us"], r["predicted_loo_us"] = o_i, p_i
        r["ratio"] = r["predicted_us"] / r["measured_us"]
    out = {"runs": len(rows), "committed_overhead_us": committed, "fitted_overhead_us": fitted,
           "overhead_us": used, "calibrated": bool(calibrate)}
    for key, col in (("no_overhead", "predicted_no_overhead_us"), ("committed", "predicted_committed_us"),
                     ("fitted", "predicted_fitted_us"), ("held_out", "predicted_loo_us")):
        p = [r[col] for r in rows]
        out[key] = {"mape": mape(p, m), "spearman": spearman(p, m),
                    "ratio_min": float(min(np.array(p) / m)), "ratio_max": float(max(np.array(p) / m))}
    out["loo_overhead_range_us"] = [float(np.min([o for o, _ in loo])), float(np.max([o for o, _ in loo]))]
    def share(r, k):
        return (r.get(k) or {}).get("cpu_share")

    # the models whose profile and run had the same share of their core (CPU / wall within 0.1 of each
    # other): on a shared machine the wall-clock profile and step are comparable only then
    calm = [i for i, r in enumerate(rows) if share(r, "run_usage") is not None and share(r, "profile_usage") is not None
            and abs(share(r, "run_usage") - share(r, "profile_usage")) <= 0.1]
    if len(calm) > 2:
        pc = np.array([rows[i]["predicted_us"] for i in calm])
        p0c = np.array([rows[i]["predicted_no_overhead_us"] for i in calm])
        loo_c = leave_one_out_overhead(b[calm], n[calm], m[calm])
        plc = np.array([p for _, p in loo_c])
        out["matched"] = {"models": [rows[i]["model"] for i in calm],
                              "fitted_overhead_us": fit_node_overhead(b[calm], n[calm], m[calm]),
                              "no_overhead": {"mape": mape(p0c, m[calm]), "spearman": spearman(p0c, m[calm])},
                              "used": {"mape": mape(pc, m[calm]), "spearman": spearman(pc, m[calm])},
                              "held_out": {"mape": mape(plc, m[calm]), "spearman": spearman(plc, m[calm])},
                              "held_out_overheads_us": [float(o) for o, _ in loo_c],
                              "held_out_ratios": [float(p / mm) for p, mm in zip(plc, m[calm])]}
    if len(rows) > 2 and all("output_gib_run" in r for r in rows):
        # a second term: us per GiB of op outputs (fresh memory the step allocates; on one CPU the
        # predicted step grows by exactly that); fitted and held out like the per-node term alone
        X = np.column_stack([n, [r["output_gib_run"] for r in rows]])
        o2 = fit_overheads(b, X, m)
        loo2 = leave_one_out_overhead(b, X, m)
        p_all, p_loo = b + X @ o2, np.array([p for _, p in loo2])
        for r, pa, pl in zip(rows, p_all, p_loo):
            r["predicted_fitted_2term_us"], r["predicted_loo_2term_us"] = float(pa), float(pl)
        out["two_term"] = {"per_node_us": float(o2[0]), "per_output_gib_us": float(o2[1]),
                           "fitted": {"mape": mape(p_all, m), "spearman": spearman(p_all, m)},
                           "held_out": {"mape": mape(p_loo, m), "spearman": spearman(p_loo, m)},
                           "held_out_per_node_us": [float(o[0]) for o, _ in loo2],
                           "held_out_per_output_gib_us": [float(o[1]) for o, _ in loo2]}
    print(f"\ncpu results ({len(rows)} models; overhead per executed node: committed {committed:.1f} us, "
          f"fitted on all {fitted:.1f} us, held-out fits {out['loo_overhead_range_us'][0]:.1f}-"
          f"{out['loo_overhead_range_us'][1]:.1f} us):")
    print(f"  {'model':<16} {'measured_ms':>11} {'no_ovh':>7} {'committed':>9} {'fitted':>7} {'held_out':>8}  (ratios)")
    for r in rows:
        mm = r["measured_us"]
        print(f"  {r['model']:<16} {mm / 1e3:>11.1f} {r['predicted_no_overhead_us'] / mm:>7.2f} "
              f"{r['predicted_committed_us'] / mm:>9.2f} {r['predicted_fitted_us'] / mm:>7.2f} {r['predicted_loo_us'] / mm:>8.2f}")
    for key in ("no_overhead", "committed", "fitted", "held_out"):
        print(f"  {key:<12} MAPE {out[key]['mape']:6.1%}  Spearman {out[key]['spearman']:.3f}  "
              f"ratio {out[key]['ratio_min']:.2f}-{out[key]['ratio_max']:.2f}")
    if "matched" in out:
        u = out["matched"]
        print(f"  profile and run at the same CPU share ({', '.join(u['models'])}): fitted {u['fitted_overhead_us']:.1f} us; "
              f"MAPE no overhead {u['no_overhead']['mape']:.1%}, used {u['used']['mape']:.1%}, held out "
              f"{u['held_out']['mape']:.1%} (Spearman {u['no_overhead']['spearman']:.3f} / {u['used']['spearman']:.3f} / "
              f"{u['held_out']['spearman']:.3f})")
    if "two_term" in out:
        t = out["two_term"]
        print(f"  per node + per output GiB: {t['per_node_us']:.1f} us + {t['per_output_gib_us'] / 1e3:.1f} ms/GiB; "
              f"fitted MAPE {t['fitted']['mape']:.1%} Spearman {t['fitted']['spearman']:.3f}; held out MAPE "
              f"{t['held_out']['mape']:.1%} Spearman {t['held_out']['spearman']:.3f}")
    return out


def _output_gib(g) -> float:
    """GiB of the outputs of a graph's computing ops (all but parameters, buffers and inputs: the
    fresh memory one step allocates)."""
    comp = np.array([t not in ("parameter", "buffer", "input") for t in g.op_types])
    return float(g.output_bytes[comp].sum() / 2**30)


def _zoo_output_gib(name: str, ops: int) -> float:
    """:func:`_output_gib` of a full-size zoo model from its cached graph (the same capture), for
    rows written before ``output_gib_run`` was recorded."""
    from placer.zoo.models import zoo_graph

    g = zoo_graph(name)
    if g.n_ops != ops:
        raise SystemExit(f"{name}: the cached graph has {g.n_ops} ops, the row {ops}")
    return _output_gib(g)


def merge(a) -> tuple[list[dict], dict]:
    """``--merge A.json B.json ...``: the cpu rows of several runs (one model per process keeps each
    model's memory to itself) summarised together (:func:`cpu_summary`)."""
    rows, parts = [], []
    for path in a.merge:
        with open(path) as f:
            d = json.load(f)
        for r in d["rows"]:
            if "output_gib_run" not in r and r["config"] == dict(ZOO[r["model"]].config):
                r["output_gib_run"] = _zoo_output_gib(r["model"], r["ops"])
        rows += d["rows"]
        parts.append({k: v for k, v in d["settings"].items() if k != "summary"} | {"file": os.path.basename(path)})
    committed = OP_OVERHEAD_US["cpu"]
    summary = cpu_summary(rows, committed, a.calibrate)
    keys = ("threads", "executor", "small", "profile", "machine")
    settings = {"mode": "cpu", **{k: parts[0].get(k) for k in keys}, "runs": parts, "summary": summary}
    return rows, settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("cpu", "gpu", "here"))
    ap.add_argument("--models", default=None, help="comma-separated zoo names")
    ap.add_argument("--small", action="store_true", help="reduced configurations (gpu mode: a script check)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="gpu mode: the real device of gpu:0 (cpu only to check the script, with --small)")
    ap.add_argument("--placements", type=int, default=2, help="gpu: random placements per CPU fraction and model")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads, for the profile and the steps alike (cpu mode: 1; gpu mode: usable cores - 2)")
    ap.add_argument("--model-budget-s", type=float, default=0.0,
                    help="cpu: fit each model's timed steps into this many seconds from its profiled estimate "
                         "(at least 3 steps; 0: --steps as given)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="cpu: summarise the rows of these --json files together (fit, leave-one-out) instead of running")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="gpu: past this many seconds the remaining placements time 2 steps and the methods are skipped")
    ap.add_argument("--out", default=None, help="gpu: write fidelity_gpu.json and summary.md into this folder")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "placer", "fidelity-gpu"),
                    help="gpu: profiles cached here ('' for none)")
    ap.add_argument("--table-only", action="store_true", help="gpu: the single-GPU table, no mixed placements")
    ap.add_argument("--calibrate", action="store_true", help="fit the per-node overhead on the single-device runs")
    ap.add_argument("--cpus", type=int, default=2, help="here: the CPU as this many single-thread devices")
    ap.add_argument("--rounds", type=int, default=3, help="here: interleaved rounds over every placement")
    ap.add_argument("--random", type=int, default=3, help="here: random placements per ratio and model")
    ap.add_argument("--budget", type=int, default=300, help="here: placements per quick method")
    ap.add_argument("--profile-steps", type=int, default=3, help="here: profiled real steps per device")
    ap.add_argument("--seed", type=int, default=0, help="here: seeds the random placements and the run order")
    ap.add_argument("--json", default=None, help="write the settings and every run here")
    a = ap.parse_args()
    if a.merge:
        rows, settings = merge(a)
    elif a.mode == "cpu":
        rows, settings = cpu_mode(a)
    elif a.mode == "here":
        from fidelity_here import here_mode

        rows, settings = here_mode(a)
    else:
        from fidelity_gpu import gpu_mode

        rows, settings = gpu_mode(a)
    if a.json and a.mode == "cpu":
        with open(a.json, "w") as f:
            json.dump({"settings": settings, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
