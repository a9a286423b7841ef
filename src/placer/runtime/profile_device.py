"""Measured op costs on a real device of this machine, cached: ``placer capture ... --profile DEVICE``.

:func:`profile_device` records a few real training steps of a captured model on one device
(:func:`placer.runtime.profile_step.record_step`: the step as ``placer run`` executes it on one
device, under ``torch.profiler``; on a GPU its kernels attributed to their fx node and the host's
issue time measured in the same run, on the CPU each node's host time) and returns the per-op costs
under the device's model key (:func:`placer.runtime.detect.model_key`: ``nvidia-h200``,
``amd-epyc-7b13/1t``), the key a detected cluster's device (``--cluster here``) looks its costs up
by. A cluster that mixes device models thus costs each op on each device from that device's own
measurement. :func:`with_profile` stores them in a graph (``compute_us[key]``, the figures in
``meta['profiles'][key]``).

No per-node overhead is added (``overhead_us`` 0 in the figures): the executor runs fx-generated
stretches, so the recorded host time of a node already holds its dispatch, and the costs of a
one-device step add up to that step's unprofiled time (:func:`placer.cost.gpu_profile.scale_issue`).
:data:`placer.cost.profile.OP_OVERHEAD_US` is for graphs costed op by op in isolation
(``--profile-cpu``).

**The cache.** A profile is stored as JSON (``<folder>/<hash>.json``; default
``$PLACER_CACHE_DIR/profiles`` or ``~/.cache/placer/profiles``, :func:`default_cache_dir`) under the
hash of its spec: the graph's recipe (model source, configuration, inputs, loss, optimizer, seed),
a digest of the captured ops (names, FLOPs, bytes: the shapes the step runs), the device key, torch's
version, the profiled steps and :data:`PROFILE_VERSION`. An entry is read through
:func:`placer.io.read_json` (size-capped, no unpickling) and used only when its spec equals the one
asked for and it holds a finite, non-negative cost for every op; anything else is ignored with one
note and recorded again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np

from placer.errors import InputError

PROFILE_VERSION = 1  # bump when what a recorded profile holds changes: every cached profile is recorded again
MAX_PROFILE_STEPS = 100  # profiled steps: their traces are held in memory and read back; a median needs a few
DEFAULT_STEPS = 5


def default_cache_dir() -> Path:
    """``$PLACER_CACHE_DIR/profiles``, else ``~/.cache/placer/profiles``."""
    from placer.frontends.recipe import cache_root

    return cache_root() / "profiles"


def check_device(device: str, where: str = "device") -> str:
    """``cpu`` or ``cuda:k`` (``cuda`` is ``cuda:0``) that torch sees here, normalised; else InputError."""
    from placer.runtime.devices import visible_devices

    text = str(device).strip().lower()
    if text == "cuda":
        text = "cuda:0"
    seen = visible_devices()
    if text not in seen:
        shape_ok = text == "cpu" or (text.startswith("cuda:") and text[5:].isdigit())
        raise InputError(where, f"'{device}'", "is not a device torch sees here" if shape_ok else
                         "is not a device name", f"use one of {', '.join(seen)}")
    return text


def graph_digest(graph) -> str:
    """What the recorded costs depend on in the captured graph itself: op names, FLOPs and bytes."""
    h = hashlib.sha256()
    h.update("\n".join(graph.op_names).encode())
    for a in (graph.flops, graph.bytes_accessed, graph.output_bytes):
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()[:32]


def profile_spec(graph, key: str, steps: int, torch_version: str | None = None) -> dict:
    """The cache spec of a profile of ``graph`` under device key ``key`` (module docstring)."""
    from placer.build import recipe_of

    if torch_version is None:
        import torch

        torch_version = torch.__version__
    return {"version": PROFILE_VERSION, "recipe": recipe_of(graph), "graph": graph_digest(graph), "n_ops": graph.n_ops,
            "key": key, "torch": str(torch_version), "steps": int(steps)}


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:24]


def cache_path(folder, spec: dict) -> Path:
    return Path(folder) / f"{spec_hash(spec)}.json"


def read_cached(folder, spec: dict) -> tuple[np.ndarray | None, dict | None, str | None]:
    """``(op_cost_us, info, note)`` of the entry for ``spec``: costs and info when it is there and
    valid, else None with a note saying why it was ignored (None as well when there is no entry)."""
    from placer.io import read_json

    path = cache_path(folder, spec)
    if not path.exists():
        return None, None, None
    try:
        doc = read_json(path)
    except InputError as e:
        return None, None, f"profile cache entry {path} ignored (unreadable: {e.problem}); recorded again"
    why = _invalid(doc, spec)
    if why:
        return None, None, f"profile cache entry {path} ignored ({why}); recorded again"
    return np.asarray(doc["op_cost_us"], dtype=np.float64), dict(doc["info"]), None


def _invalid(doc, spec: dict) -> str | None:
    if not isinstance(doc, dict) or doc.get("format") != "placer-profile":
        return "not a placer profile"
    if doc.get("spec") != json.loads(json.dumps(spec, default=str)):
        stored = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        diff = [k for k in spec if stored.get(k) != json.loads(json.dumps(spec[k], default=str))]
        return f"stale: its {', '.join(diff) or 'spec'} differ{'s' if len(diff) == 1 else ''}"
    costs, info = doc.get("op_cost_us"), doc.get("info")
    if not isinstance(costs, list) or len(costs) != spec["n_ops"]:
        return f"holds {len(costs) if isinstance(costs, list) else 'no'} costs for {spec['n_ops']} ops"
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c >= 0 for c in costs):
        return "a cost is not a finite non-negative number"
    if not isinstance(info, dict):
        return "no profile figures"
    return None


def write_cached(folder, spec: dict, op_cost_us, info: dict) -> str | None:
    """Store a profile; a note instead of an error when the folder cannot be written."""
    from placer.io import dumps, write_text_atomic

    doc = {"format": "placer-profile", "spec": spec, "info": info,
           "op_cost_us": [float(x) for x in np.asarray(op_cost_us, dtype=np.float64)]}
    try:
        write_text_atomic(cache_path(folder, spec), dumps(json.loads(json.dumps(doc, default=str))))
    except InputError as e:
        return f"profile not cached ({e.problem})"
    return None


def _spread_pct(xs) -> float:
    if len(xs) < 2:
        return 0.0
    q = np.percentile(xs, [25, 75])
    return float((q[1] - q[0]) / statistics.median(xs) * 100)


def record(capture, module, inputs, device: str, threads: int = 1, steps: int = DEFAULT_STEPS):
    """One recording (no cache): ``(op_cost_us, info)``. torch runs with ``threads`` intra-op
    threads meanwhile (restored after)."""
    import torch

    from placer.runtime.profile_step import record_step

    cuda = device.startswith("cuda")
    old = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        sp = record_step(capture, module, inputs, device, steps=steps, warmup=3 if cuda else 2, timed=steps)
    finally:
        torch.set_num_threads(old)
    cost = np.round(np.asarray(sp.op_cost_us, dtype=np.float64), 3)  # as a graph stores them
    info = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M %Z"), "torch": torch.__version__,
            "threads": int(threads), "steps": int(steps), "timed_steps": len(sp.step_us),
            "step_us": round(sp.median_us, 1), "step_min_us": round(min(sp.step_us), 1),
            "step_max_us": round(max(sp.step_us), 1), "step_iqr_pct": round(_spread_pct(sp.step_us), 1),
            "issue_us": round(sp.issue_step_us, 1), "kernel_us": round(float(sp.nodes.kernel_us.sum()), 1),
            "unattributed_kernel_us": round(float(sp.nodes.unattributed_kernel_us), 1),
            "sum_cost_us": round(float(cost.sum()), 1), "overhead_us": 0.0, "wall_s": round(sp.wall_s, 2)}
    if cuda:
        info["gpu"] = torch.cuda.get_device_name(int(device.partition(":")[2] or 0))
    else:
        from placer.runtime.detect import cpu_model_name

        info["cpu"] = cpu_model_name()
    return cost, info


def profile_device(capture, module, inputs, device: str = "cpu", threads: int = 1, steps: int = DEFAULT_STEPS,
                   cache=None, graph=None) -> tuple[str, np.ndarray, dict]:
    """``(key, op_cost_us, info)``: the measured cost of every op of ``capture.graph`` on ``device``
    (module docstring), under ``key = model_key(device, threads)``. ``module`` and ``inputs`` hold
    real values (:func:`placer.runtime.measure.rebuild` gives all three from a graph's recipe).
    ``cache``: a folder (:func:`default_cache_dir`), or None for no cache. ``info`` holds the figures
    stored with the graph plus ``cache`` (``hit``, ``miss`` or ``off``) and ``notes`` (an ignored or
    unwritten cache entry). ``graph``: the graph the costs are for, whose recipe keys the cache
    (default ``capture.graph``; a capture rebuilt from a graph file carries no recipe of its own)."""
    from placer.runtime.detect import model_key

    device = check_device(device)
    most = 4 * (os.cpu_count() or 1)  # as `placer run --threads`: more only slows torch down
    if not (isinstance(threads, int) and not isinstance(threads, bool) and 1 <= threads <= most):
        raise InputError("profile", f"threads {threads!r}", f"is not a whole number from 1 to {most} (4 per CPU core)",
                         "use threads=1")
    if not (isinstance(steps, int) and not isinstance(steps, bool) and 1 <= steps <= MAX_PROFILE_STEPS):
        raise InputError("profile", f"steps {steps!r}", f"is not from 1 to {MAX_PROFILE_STEPS}", "use steps=5")
    key = model_key(device, threads)
    graph = capture.graph if graph is None else graph
    if list(graph.op_names) != list(capture.graph.op_names):
        raise InputError("profile", f"graph '{graph.name}'", "does not hold the captured step's ops",
                         "give the graph the capture was rebuilt from")
    spec = profile_spec(graph, key, steps)
    notes: list[str] = []
    if cache is not None:
        cost, info, note = read_cached(cache, spec)
        if note:
            notes.append(note)
        if cost is not None:
            return key, cost, {**info, "key": key, "cache": "hit", "notes": notes}
    cost, info = record(capture, module, inputs, device, threads, steps)
    info["key"] = key
    if cache is not None:
        note = write_cached(cache, spec, cost, info)
        if note:
            notes.append(note)
    return key, cost, {**info, "cache": "off" if cache is None else "miss", "notes": notes}


def with_profile(graph, key: str, op_cost_us, info: dict):
    """``graph`` with ``compute_us[key] = op_cost_us`` and the profile's figures (not its cache
    status) in ``meta['profiles'][key]``."""
    from placer.cost.gpu_profile import with_step_costs

    return with_step_costs(graph, op_cost_us, key, {k: v for k, v in info.items() if k not in ("cache", "notes")})


def profile_graph(graph, devices, threads: int = 1, steps: int = DEFAULT_STEPS, cache=None, rebuilt=None):
    """``(graph with every device's costs, [info per device])``: :func:`profile_device` on each of
    ``devices`` in turn, the model rebuilt once from the graph's recipe
    (:func:`placer.runtime.measure.rebuild`, unless ``rebuilt`` gives ``(capture, module, inputs)``).
    A device whose key another listed device already has (two GPUs of one model) is profiled once;
    its info says so (``same_as``)."""
    from placer.runtime.detect import model_key
    from placer.runtime.measure import rebuild

    devs = [check_device(d) for d in devices]
    keys = [model_key(d, threads) for d in devs]
    cap, module, inputs = rebuilt or rebuild(graph, "profile")
    out, first = [], {}
    for d, k in zip(devs, keys):
        if k in first:
            out.append({"device": d, "key": k, "same_as": first[k], "cache": "same", "notes": []})
            continue
        first[k] = d
        key, cost, info = profile_device(cap, module, inputs, d, threads, steps, cache, graph)
        graph = with_profile(graph, key, cost, info)
        out.append(info)
    return graph, out


__all__ = ["DEFAULT_STEPS", "MAX_PROFILE_STEPS", "PROFILE_VERSION", "check_device", "default_cache_dir",
           "profile_device", "profile_graph", "with_profile"]
