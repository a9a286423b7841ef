"""The detected cluster's links against a direct timing of 64 MiB made in the same run.

    python benchmarks/detect_links.py [--cpus 2] [--runs 3] [--repeats 15] [--json FILE]

Each run detects this machine (:func:`placer.runtime.detect.detect_cluster`, ``--cpus N``
single-thread CPU devices, every GPU torch sees), then times every measured link once more with a
64 MiB tensor, the way detection timed it (:func:`placer.runtime.detect.link_timings`: the
executor's thread hand-over between CPU devices, its pinned copies between host and GPU, GPU to
GPU copies), ``--repeats`` times, and prints the cluster's prediction
(``latency_us + 64 MiB / bandwidth_bytes_per_us``) beside the median of those timings, with the
ratio. Target (issue 61): every ratio within 20% of 1. The machine's load (1-minute load average,
before and after each run) is printed beside it; the summary gives each link's median ratio over
the runs. Needs the torch extra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from placer.runtime.detect import detect_cluster, handover_parts, link_timings, usable_cores

SIZE = 64 * 2**20
TARGET = 0.20


def one_run(cpus: int | None, repeats: int) -> dict:
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    c = detect_cluster(cpus)
    rows = []
    for ln in c.meta["detected"]["links"]:
        parts = None
        if ln["kind"] == "handover":  # the wake-up and the data part apart: which of them moves with the load
            pairs = handover_parts([SIZE], repeats, c.meta["torch_threads"])[0]
            direct = [w + d for w, d in pairs]
            parts = {"wake_median_us": round(statistics.median(w for w, _ in pairs), 1),
                     "data_median_us": round(statistics.median(d for _, d in pairs), 1)}
        else:
            direct = link_timings(ln["kind"], ln["src"], ln["dst"], [SIZE], repeats, c.meta["torch_threads"])[0]
        med = statistics.median(direct)
        pred = ln["latency_us"] + SIZE / ln["bandwidth_bytes_per_us"]
        q25, q75 = np.percentile(direct, [25, 75])
        rows.append({"link": ", ".join(ln["applies_to"][:2]) + (" ..." if len(ln["applies_to"]) > 2 else ""),
                     "kind": ln["kind"], "latency_us": ln["latency_us"], "bandwidth_bytes_per_us": ln["bandwidth_bytes_per_us"],
                     "fit_64mib_median_us": next(p["median_us"] for p in ln["per_size"] if p["bytes"] == SIZE)
                     if any(p["bytes"] == SIZE for p in ln["per_size"]) else None,
                     "predicted_us": round(pred, 1), "direct_median_us": round(med, 1),
                     "direct_q25_us": round(float(q25), 1), "direct_q75_us": round(float(q75), 1),
                     "ratio": round(pred / med, 3) if med > 0 else None, **(parts or {})})
    return {"cluster": c.name, "date": c.meta["detected"]["date"], "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2), "seconds": round(time.perf_counter() - t0, 1), "links": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cores = usable_cores()
    ap.add_argument("--cpus", type=int, default=min(2, cores), help="CPU devices (1: the CPU as one device)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15, help="direct 64 MiB timings per link and run")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if not 1 <= a.cpus <= cores or not 1 <= a.runs <= 50 or not 3 <= a.repeats <= 101:
        ap.error(f"--cpus 1..{cores}, --runs 1..50, --repeats 3..101")
    runs = []
    for r in range(a.runs):
        run = one_run(None if a.cpus == 1 else a.cpus, a.repeats)
        runs.append(run)
        print(f"run {r + 1}: {run['cluster']} {run['date']}, load {run['load_before']} -> {run['load_after']}, {run['seconds']} s")
        for x in run["links"]:
            print(f"  {x['link']:28s} {x['kind']:8s} fit {x['latency_us']:9.1f} us + 64 MiB / {x['bandwidth_bytes_per_us'] / 1e3:9.1f} GB/s"
                  f" = {x['predicted_us']:10.1f} us | direct median {x['direct_median_us']:10.1f} us"
                  f" [{x['direct_q25_us']:.1f} .. {x['direct_q75_us']:.1f}] | ratio {x['ratio']}"
                  + (f" | direct wake-up {x['wake_median_us']} us, data {x['data_median_us']} us (medians)"
                     if "wake_median_us" in x else ""))
        if not runs[-1]["links"]:
            print("  no links to check (one device)")
    summary = []
    for k, x in enumerate(runs[0]["links"]):
        ratios = [run["links"][k]["ratio"] for run in runs if run["links"][k]["ratio"] is not None]
        med = statistics.median(ratios) if ratios else None
        summary.append({"link": x["link"], "kind": x["kind"], "median_ratio": med, "ratios": ratios,
                        "within_target": med is not None and abs(med - 1) <= TARGET})
        print(f"summary {x['link']} ({x['kind']}): median ratio {med} over {len(ratios)} runs {ratios}; "
              f"target |ratio - 1| <= {TARGET}: {'met' if summary[-1]['within_target'] else 'missed'}")
    print(f"load (1-minute average) over the runs: median {statistics.median(r['load_before'] for r in runs)} "
          f"on {cores} cores")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "runs": runs, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
