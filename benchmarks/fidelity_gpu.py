"""``benchmarks/fidelity.py gpu``: the simulator against PyTorch itself on one GPU plus the host CPU.

    python benchmarks/fidelity.py gpu --out DIR [--models resnet50,bert_base,nmt2] [--table-only]
                                      [--cache DIR] [--budget-s 420] [--small --device cpu]

1. **Single GPU, per configuration** (:data:`TABLE`, the five of issue 50): the eager step (the zoo
   module itself on ``cuda:0``: forward, loss, backward, ``torch.optim.SGD`` with momentum 0.9 and
   ``foreach=False``, the update the captured program runs; median of 20 synchronised steps after
   5 warm-up; beside it the same with ``foreach=True``, PyTorch's default on a GPU), the GPU step
   profile (:func:`placer.runtime.profile_step.record_step`: kernel time, the host's issue time),
   our executor's single-GPU step (:func:`placer.runtime.run_placement`, 3 warm-up and 10 timed
   steps) and the simulator's prediction from the profile's chain costs.
2. **Mixed placements** on the moderate configurations (:data:`MIXED`): the host CPU profiled the
   same way (a real all-CPU step, the CPU's torch threads), the CPU <-> GPU link measured through
   the executor's own copies; random placements (10 / 30 / 50% of the ops on the CPU, colocation
   kept), structured ones (a prefix or suffix of the topological order on the CPU, the update on
   the CPU, the forward pass on the CPU) and the methods' own (local search, HEFT, m-ETF, m-SCT,
   METIS on that cluster; local search and METIS need pymetis), each measured by our executor (2 warm-up, 5 timed steps) and predicted; MAPE and
   Spearman over the placements that use both devices.

Profiles are cached under ``--cache`` (keyed by model, configuration, device name, CPU threads and
torch version), so a second run only measures. Written under ``--out``: ``fidelity_gpu.json``
(settings, the single-GPU table, every run) and ``summary.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time

import numpy as np

TABLE = [  # (model, configuration): issue 50's five
    ("resnet50", dict(batch=16, image=128)),
    ("resnet50", dict(batch=64, image=224)),
    ("bert_base", dict(batch=8, seq=128, layers=4, vocab=8000)),
    ("bert_base", dict(batch=32, seq=512, layers=12)),
    ("nmt2", dict(batch=64, length=12, hidden=512, vocab=8000)),
]
MIXED = [0, 2, 4]  # rows of TABLE whose mixed placements are run (a CPU-heavy one still runs in about a second)
SMALL = {"resnet50": dict(batch=2, image=64), "bert_base": dict(batch=2, seq=16, layers=1, vocab=500),
         "nmt2": dict(batch=4, length=4, hidden=32, vocab=200)}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, dtype=float), np.asarray(meas, dtype=float)
    return float(np.mean(np.abs(pred - meas) / meas)) if len(meas) else float("nan")


def iqr_pct(xs) -> float:
    q = np.percentile(xs, [25, 75])
    return float((q[1] - q[0]) / np.median(xs) * 100)


def _sync(dev):
    import torch

    if dev.startswith("cuda"):
        torch.cuda.synchronize(dev)


def capture(name: str, cfg: dict):
    """``(capture, module, inputs)``: the zoo model built on the CPU with seeded weights, traced."""
    from placer.frontends.torch import trace_training_step
    from placer.build import build

    recipe = {"kind": "zoo", "name": name, "overrides": cfg, "optimizer": "sgd-momentum", "loss": "auto", "seed": 0}
    module, inputs, loss_fn = build(recipe, "cpu")
    real = ([p.detach().clone() for _, p in module.named_parameters()], [b.detach().clone() for _, b in module.named_buffers()])
    label = name + "".join(f"-{k}{v}" for k, v in sorted(cfg.items()))
    cap = trace_training_step(module, inputs, loss_fn=loss_fn, optimizer="sgd-momentum", name=label, cost_keys=())
    cap.info["real_state"] = real
    return cap, module, inputs


def eager_step(name: str, cfg: dict, dev: str, warmup: int = 5, steps: int = 20, foreach: bool = False) -> list[float]:
    """Wall times (us) of synchronised eager training steps of the zoo model on ``dev`` (``foreach``:
    the optimizer's multi-tensor update, PyTorch's default on a GPU, instead of the per-parameter one)."""
    import torch

    from placer.build import build

    recipe = {"kind": "zoo", "name": name, "overrides": cfg, "loss": "auto", "seed": 0}
    m, xs, loss_fn = build(recipe, dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, foreach=foreach)

    def step():
        loss = loss_fn(m(*xs))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    out = []
    for _ in range(steps):
        _sync(dev)
        t0 = time.perf_counter_ns()
        step()
        _sync(dev)
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def link_costs(dev: str, small: int = 4096, big: int = 32 * 2**20) -> dict:
    """Bandwidth (bytes/us) and latency (us) per direction through the executor's own copies
    (:func:`placer.runtime.executor.copy_to_device` / ``copy_to_host``): latency from back-to-back
    small tensors, bandwidth from the extra time of large ones."""
    if not dev.startswith("cuda"):
        return {k: {"latency_us": 5.0, "bytes_per_us": 1e6} for k in ("h2d", "d2h")}
    import torch

    from placer.runtime.executor import copy_to_device, copy_to_host

    stream = torch.cuda.Stream(dev)
    xs, xb = torch.randn(small // 4), torch.randn(big // 4)
    gs, gb = xs.to(dev), xb.to(dev)

    def h2d(x, k):
        for _ in range(k):
            copy_to_device(x, torch.device(dev), stream)
        torch.cuda.synchronize(dev)

    def d2h(x, k):
        for _ in range(k):
            copy_to_host(x, stream)

    out = {}
    for name, fn, s_, b_ in (("h2d", h2d, xs, xb), ("d2h", d2h, gs, gb)):
        fn(s_, 5), fn(b_, 2)
        ts, tb = [], []
        for _ in range(3):
            t0 = time.perf_counter(); fn(s_, 50); ts.append((time.perf_counter() - t0) * 1e6 / 50)
            t0 = time.perf_counter(); fn(b_, 4); tb.append((time.perf_counter() - t0) * 1e6 / 4)
        lat, tbig = float(np.median(ts)), float(np.median(tb))
        out[name] = {"latency_us": lat, "bytes_per_us": (big - small) / max(tbig - lat, 1e-3)}
    return out


def profiled_costs(cap, module, inputs, dev: str, key: str, cache: str | None, tag: str) -> tuple[np.ndarray, dict]:
    """Per-op chain costs of ``cap`` on ``dev`` from a recorded real step, cached by ``tag``."""
    from placer.runtime.profile_step import record_step

    path = os.path.join(cache, hashlib.sha1(tag.encode()).hexdigest()[:16] + ".json") if cache else None
    if path and os.path.exists(path):
        with open(path) as f:
            d = json.load(f)
        if d.get("tag") == tag and len(d["op_cost_us"]) == cap.graph.n_ops:
            return np.asarray(d["op_cost_us"]), {**d["summary"], "cached": True}
    sp = record_step(cap, module, inputs, dev, steps=2, warmup=3 if dev.startswith("cuda") else 2,
                     timed=5 if dev.startswith("cuda") else 3)
    summary = {**sp.summary(), "key": key, "step_iqr_pct": round(iqr_pct(sp.step_us), 1) if len(sp.step_us) > 1 else 0.0}
    if path:
        os.makedirs(cache, exist_ok=True)
        with open(path, "w") as f:
            json.dump({"tag": tag, "op_cost_us": [round(float(x), 3) for x in sp.op_cost_us], "summary": summary}, f)
    return sp.op_cost_us, summary


def placements(P, rng, n_random: int):
    """``[(label, kind, placement)]`` on the (gpu, cpu) cluster (module docstring)."""
    from placer.methods import Budget, run_method

    g, n = P.graph, P.n_ops
    gpu, cpu = 0, 1

    def coloc(p, member=0):  # a colocation group goes where its first (or last: -1) member is
        for c in np.unique(g.colocation[g.colocation >= 0]):
            idx = np.flatnonzero(g.colocation == c)
            p[idx] = p[idx[member]]
        return p

    out = [("single-gpu", "single", np.full(n, gpu)), ("single-cpu", "single", np.full(n, cpu))]
    for frac in (0.1, 0.3, 0.5):
        for k in range(n_random):
            out.append((f"random-{int(frac * 100)}%-{k}", "random", coloc(np.where(rng.random(n) < frac, cpu, gpu))))
    for frac in (0.1, 0.25, 0.5):
        p = np.full(n, gpu)
        p[:int(frac * n)] = cpu
        out.append((f"prefix-{int(frac * 100)}%-cpu", "structured", coloc(p)))
        p = np.full(n, gpu)
        p[n - int(frac * n):] = cpu
        out.append((f"suffix-{int(frac * 100)}%-cpu", "structured", coloc(p, -1)))
    out.append(("update-on-cpu", "structured", coloc(np.where(g.role == 2, cpu, gpu), -1)))
    out.append(("forward-on-cpu", "structured", coloc(np.where(g.role == 0, cpu, gpu))))
    for m in ("local-search", "heft", "m-etf", "m-sct", "metis"):
        try:
            r = run_method(m, P, Budget(placements=200), seed=0)
            out.append((m, "method", np.asarray(r.placement.devices)))
        except Exception as e:  # a method that does not apply here
            print(f"    ({m}: {type(e).__name__}: {e})")
    return out


def gpu_mode(a) -> tuple[list[dict], dict]:
    import torch

    from placer.cluster import Device, make_cluster
    from placer.cost.gpu_profile import with_step_costs
    from placer.problem import Problem
    from placer.runtime import run_placement

    dev = "cuda:0" if a.device == "cuda" else "cpu"
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu mode needs a CUDA device (or --small --device cpu to check the script)")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    threads = a.threads or max(1, cores - 2)
    torch.set_num_threads(threads)
    t_start = time.perf_counter()
    link = link_costs(dev)
    gname = torch.cuda.get_device_name(0) if dev.startswith("cuda") else "the CPU (script check)"
    print(f"GPU fidelity on {gname} + host CPU ({threads} CPU threads of {cores} cores, torch {torch.__version__}); "
          f"CPU->GPU {link['h2d']['bytes_per_us'] / 1e3:.1f} GB/s + {link['h2d']['latency_us']:.1f} us, "
          f"GPU->CPU {link['d2h']['bytes_per_us'] / 1e3:.1f} GB/s + {link['d2h']['latency_us']:.1f} us", flush=True)
    cluster = make_cluster("cuda0+cpu", [Device("gpu:0", "gpu", "m-cuda", 70e9), Device("cpu:0", "cpu", "m-cpu", 100e9)],
                           link["h2d"]["bytes_per_us"], link["h2d"]["latency_us"],
                           pairs={(0, 1): (link["d2h"]["bytes_per_us"], link["d2h"]["latency_us"]),
                                  (1, 0): (link["h2d"]["bytes_per_us"], link["h2d"]["latency_us"])})
    wanted = [m for m in a.models.split(",") if m] if a.models else None
    rows_table, runs, failed = [], [], []

    def settings_of() -> dict:
        return {"mode": "gpu", "device": gname, "threads": threads, "cores": cores, "torch": torch.__version__,
                "link": link, "small": a.small, "steps": a.steps, "placements_per_fraction": a.placements,
                "budget_s": a.budget_s, "wall_s": round(time.perf_counter() - t_start, 1),
                "date": time.strftime("%Y-%m-%d %H:%M %Z"), "summary": summarise(rows_table, runs), "failed": failed}
    rng = np.random.default_rng(0)
    def configuration(t, name, cfg, label, mixed):
        """One configuration: its table row, then (``mixed``) its placements."""
        t0 = time.perf_counter()
        cap, module, inputs = capture(name, cfg)
        t_cap = time.perf_counter() - t0
        tag = f"{name}|{sorted(cfg.items())}|{gname}|{threads}|{torch.__version__}"
        eager = eager_step(name, cfg, dev, warmup=5, steps=20 if not a.small else 5)
        eager_fe = eager_step(name, cfg, dev, warmup=3, steps=10 if not a.small else 3, foreach=True)
        gcost, gsum = profiled_costs(cap, module, inputs, dev, "m-cuda", a.cache, "gpu|" + tag)
        g = with_step_costs(cap.graph, gcost, "m-cuda", gsum)
        csum = None
        if mixed:
            ccost, csum = profiled_costs(cap, module, inputs, "cpu", "m-cpu", a.cache, "cpu|" + tag)
        else:
            ccost = gcost * 50.0  # never placed there: the table runs one GPU
        g = with_step_costs(g, ccost, "m-cpu", csum or {})
        P = Problem(g, cluster)
        late = time.perf_counter() - t_start > a.budget_s
        rb = (cap, module, inputs)
        one = run_placement(g, cluster, np.zeros(g.n_ops, dtype=np.int64), [dev, "cpu"], steps=10 if not late else 3,
                            warmup=3, threads=threads, rebuilt=rb)
        row = {"model": name, "config": cfg, "label": label, "ops": g.n_ops, "nodes": len(cap.gm.graph.nodes),
               "eager_us": statistics.median(eager), "eager_iqr_pct": iqr_pct(eager), "eager_steps_us": [round(x, 1) for x in eager],
               "eager_foreach_us": statistics.median(eager_fe),
               "executor_us": one.median_us, "executor_iqr_pct": iqr_pct(one.step_us),
               "executor_steps_us": [round(x, 1) for x in one.step_us], "predicted_us": one.predicted_us,
               "kernel_us": gsum["kernel_us"], "issue_us": gsum["issue_us"], "profile": gsum, "cpu_profile": csum,
               "capture_s": round(t_cap, 1)}
        rows_table.append(row)
        print(f"  {label}: eager {row['eager_us'] / 1e3:.2f} ms (iqr {row['eager_iqr_pct']:.1f}%), executor "
              f"{row['executor_us'] / 1e3:.2f} ms (iqr {row['executor_iqr_pct']:.1f}%), predicted {row['predicted_us'] / 1e3:.2f} ms, "
              f"kernels {row['kernel_us'] / 1e3:.2f} ms, issue {row['issue_us'] / 1e3:.2f} ms "
              f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
        save(a, settings_of(), rows_table, runs)
        if not mixed:
            del cap, module, inputs, rb
            return
        for lab, kind, p in placements(P, rng, a.placements):
            if lab == "single-gpu":
                rep = one
            else:
                late = time.perf_counter() - t_start > a.budget_s
                if late and kind == "method":
                    continue
                try:
                    rep = run_placement(g, cluster, P.validate_placement(p, lab), [dev, "cpu"],
                                        steps=a.steps if not late else 2, warmup=2 if not late else 1, threads=threads,
                                        rebuilt=rb)
                except Exception as e:  # noqa: BLE001 - one placement failing (out of memory, say) is reported, the rest run
                    failed.append({"model": name, "placement": lab, "error": f"{type(e).__name__}: {e}"[:300]})
                    print(f"    {lab:<18} FAILED {failed[-1]['error']}", flush=True)
                    continue
            r = {"model": name, "label": label, "placement": lab, "kind": kind, "cpu_ops": int((p == 1).sum()),
                 "mixed": bool(0 < (p == 1).sum() < len(p)), "measured_us": rep.median_us, "predicted_us": rep.predicted_us,
                 "iqr_pct": iqr_pct(rep.step_us) if len(rep.step_us) > 1 else 0.0, "steps_us": [round(x, 1) for x in rep.step_us],
                 "transfers": rep.transfers, "stretches": rep.extra.get("stretches")}
            runs.append(r)
            if len(runs) % 5 == 0:
                save(a, settings_of(), rows_table, runs)
            print(f"    {lab:<18} cpu ops {r['cpu_ops']:>5}  measured {r['measured_us'] / 1e3:9.2f} ms  predicted "
                  f"{r['predicted_us'] / 1e3:9.2f} ms  ratio {r['predicted_us'] / r['measured_us']:5.2f}  "
                  f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
        save(a, settings_of(), rows_table, runs)
        del cap, module, inputs, rb

    for t, (name, cfg) in enumerate(TABLE):
        if wanted and name not in wanted:
            continue
        if a.small:
            if t not in MIXED:
                continue
            cfg = SMALL[name]
        mixed = t in MIXED and not a.table_only
        label = f"{name} ({', '.join(f'{k} {v}' for k, v in cfg.items())})"
        try:
            configuration(t, name, cfg, label, mixed)
        except Exception as e:  # noqa: BLE001 - a configuration failing (out of memory, say) is reported, the rest run
            failed.append({"model": label, "placement": None, "error": f"{type(e).__name__}: {e}"[:300]})
            print(f"  {label}: FAILED {failed[-1]['error']}", flush=True)
            save(a, settings_of(), rows_table, runs)
    settings = settings_of()
    save(a, settings, rows_table, runs)
    print(f"\n{markdown(settings, rows_table, runs)}")
    return runs, settings


def save(a, settings, table, runs) -> None:
    """Write what is measured so far (a run cut short by its time limit keeps it)."""
    if not a.out:
        return
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "fidelity_gpu.json"), "w") as f:
        json.dump({"settings": settings, "table": table, "runs": runs}, f, indent=1, default=str)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(markdown(settings, table, runs))


def summarise(table, runs) -> dict:
    mixed = [r for r in runs if r["mixed"]]
    p, m = [r["predicted_us"] for r in mixed], [r["measured_us"] for r in mixed]
    out = {"mixed_runs": len(mixed), "mixed_mape": mape(p, m), "mixed_spearman": spearman(p, m),
           "executor_over_eager": [round(r["executor_us"] / r["eager_us"], 3) for r in table],
           "predicted_over_eager": [round(r["predicted_us"] / r["eager_us"], 3) for r in table],
           "executor_iqr_pct": [round(r["executor_iqr_pct"], 1) for r in table]}
    per = {}
    for name in sorted({r["label"] for r in mixed}):
        sub = [r for r in mixed if r["label"] == name]
        per[name] = {"runs": len(sub), "mape": mape([r["predicted_us"] for r in sub], [r["measured_us"] for r in sub]),
                     "spearman": spearman([r["predicted_us"] for r in sub], [r["measured_us"] for r in sub])}
    out["per_model"] = per
    return out


def markdown(settings, table, runs) -> str:
    s = settings["summary"]
    lines = [f"# GPU fidelity: {settings['device']}, {settings['threads']} CPU threads, torch {settings['torch']}", "",
             "| model (config) | eager step | eager, foreach update | kernel time | issue time | executor step (IQR) | prediction "
             "| executor / eager | prediction / eager |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['label']} | {r['eager_us'] / 1e3:.2f} ms | {r.get('eager_foreach_us', float('nan')) / 1e3:.2f} ms | "
                     f"{r['kernel_us'] / 1e3:.2f} ms | {r['issue_us'] / 1e3:.2f} ms | "
                     f"{r['executor_us'] / 1e3:.2f} ms ({r['executor_iqr_pct']:.1f}%) | {r['predicted_us'] / 1e3:.2f} ms | "
                     f"{r['executor_us'] / r['eager_us']:.3f} | {r['predicted_us'] / r['eager_us']:.3f} |")
    lines += ["", f"Mixed GPU + CPU placements: {s['mixed_runs']} runs, MAPE {s['mixed_mape']:.1%}, "
              f"Spearman {s['mixed_spearman']:.3f}", ""]
    for name, v in s["per_model"].items():
        lines.append(f"- {name}: {v['runs']} runs, MAPE {v['mape']:.1%}, Spearman {v['spearman']:.3f}")
    lines += ["", "| model | placement | kind | CPU ops | measured | predicted | ratio | IQR |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['model']} | {r['placement']} | {r['kind']} | {r['cpu_ops']} | {r['measured_us'] / 1e3:.2f} ms | "
                     f"{r['predicted_us'] / 1e3:.2f} ms | {r['predicted_us'] / r['measured_us']:.2f} | {r['iqr_pct']:.1f}% |")
    lines.append(f"\nwall {settings['wall_s']} s, {settings['date']}")
    return "\n".join(lines) + "\n"
