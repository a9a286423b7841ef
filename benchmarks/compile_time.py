"""The simulator's compilation from a cold cache: what a fresh install's first command pays (issue 64).

Runs a fresh interpreter with an empty numba cache (``NUMBA_CACHE_DIR`` a new temporary folder: numba
then caches there, not next to the sources) that simulates once (``simulate``: the default model's
one entry point, ``kernel.sim_rows_placeto``, and what it calls) and once in batch (``evaluate_many``:
the same entry point, so nothing more to compile), printing wall and process CPU seconds of each
(CPU is the figure load on a shared machine does not stretch), then each compiled kernel's own
compilation (wall, nested as numba compiled them, from numba's compile events) and its signatures
(more than one: the kernel was compiled twice). A second fresh interpreter on the now warm cache
shows what every later command pays (loading).

    python benchmarks/compile_time.py
    python benchmarks/compile_time.py --keep /tmp/numba-cold   # keep the cache folder
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
from numba.core import event
from numba.core.registry import CPUDispatcher
from placer.cluster import preset
from placer.problem import Problem
from placer.sim import evaluate_many, kernel, loop, placeto_loop, simulate, state
from placer.zoo.synthetic import layered_training_graph
P = Problem(layered_training_graph(200, seed=0), preset("k80x2"))
p = np.tile(np.argmin(P.compute_us, axis=1).astype(np.int64), (2, 1))
out = {"import": (time.perf_counter() - t0, time.process_time() - c0)}
with event.install_recorder("numba:compile") as rec:
    for name, f in (("simulate", lambda: simulate(P, p[0])), ("evaluate_many", lambda: evaluate_many(P, p))):
        w, c = time.perf_counter(), time.process_time()
        f()
        out[name] = (time.perf_counter() - w, time.process_time() - c)
stack, events = [], []
for ts, e in rec.buffer:
    if e.is_start:
        stack.append(ts)
    else:
        t_start = stack.pop()
        events.append((t_start, len(stack), e.data["dispatcher"].py_func.__name__, ts - t_start))
out["events"] = [x[1:] for x in sorted(events)]  # in the order compilation started
out["signatures"] = {f"{m.__name__.rsplit('.', 1)[1]}.{k}": len(getattr(m, k).signatures)
                     for m in (kernel, loop, placeto_loop, state) for k in dir(m)
                     if isinstance(getattr(m, k), CPUDispatcher) and getattr(m, k).signatures}
print(json.dumps(out))
"""


def run(cache: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", help="cache folder to use (must be empty or absent) and keep")
    args = ap.parse_args(argv)
    cache = args.keep or tempfile.mkdtemp(prefix="placer-cold-numba-")
    if args.keep and os.path.isdir(cache) and os.listdir(cache):
        sys.exit(f"--keep {cache}: not empty; give an empty or new folder")
    print(f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); cache {cache}")
    cold = run(cache)
    warm = run(cache)
    print(f"{'':<16} {'cold wall s':>11} {'cold cpu s':>10} {'warm wall s':>11} {'warm cpu s':>10}")
    for k in ("import", "simulate", "evaluate_many"):
        print(f"{k:<16} {cold[k][0]:>11.2f} {cold[k][1]:>10.2f} {warm[k][0]:>11.2f} {warm[k][1]:>10.2f}")
    first = cold["simulate"][1] + cold["evaluate_many"][1]
    print(f"first simulation + first batch, cold cache: {first:.1f} CPU s "
          f"({cold['simulate'][0] + cold['evaluate_many'][0]:.1f} s wall)")
    print("\nkernels compiled (wall s, nested as compiled; a nested one is included in its caller's):")
    for depth, name, dt in cold["events"]:
        print(f"  {'  ' * depth}{name:<{24 - 2 * depth}} {dt:7.2f}")
    twice = {k: v for k, v in cold["signatures"].items() if v > 1}
    print(f"\nkernels with more than one signature: {twice or 'none'}")
    if not args.keep:
        import shutil

        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
