"""A device profile taken from real training steps: kernels attributed to fx nodes, host issue time
per node, and per-op costs for the simulator from both.

Timing each op alone and synchronised (:mod:`placer.cost.profile`) measures launch plus
synchronisation on a cold cache: on a GPU that is neither what the kernels take inside a step nor
what the host spends issuing them, and small models on a modern GPU are bound by the host. Here
the step itself is recorded with ``torch.profiler`` (:func:`placer.runtime.profile_step.record_step`
runs it: the placed step on one device with every fx node inside a ``record_function`` range
``placer#<node index>``) and the exported Chrome trace is read back:

* **Kernel attribution** (:func:`attribute`). PyTorch's trace links each GPU activity (``cat``
  ``kernel``, ``gpu_memcpy``, ``gpu_memset``) to the CUDA runtime call that launched it
  (``cuda_runtime`` / ``cuda_driver``: ``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...) by
  ``args.correlation``. The runtime call runs on a host thread inside the node's range (same
  ``pid``/``tid``, its ``ts`` within the range): the kernel's duration is charged to that node.
  Where a launch's thread id does not match the host ops' (CUPTI and the profiler name threads
  apart on some systems), its ``External id`` names the host op that launched it, and that op's
  range gives the node.
  Host-side ``cpu_op`` events inside a range are kept too (the aten ops a node ran), and the
  range's own duration is the node's host time. A node that ran several times (several steps
  recorded) gets the mean per step.
* **Issue time** per node: from the start of its range to the start of the next range on the same
  thread (the Python between two aten calls included), or its own duration where the next range
  begins more than :data:`MAX_GAP_US` after it ends (the last node of a step, a wait).
  :func:`scale_issue` scales them to the issue time of an unprofiled step (the profiler's ranges
  cost host time of their own), measured in the same run.
* **Costs** (:func:`chain_costs`). On one device the host issues node after node (the issue chain)
  and the GPU runs each node's kernels once they are issued and the previous ones are done (the
  kernel chain): node ``i`` is finished at ``f_i = max(f_{i-1}, h_i) + k_i`` with ``h_i`` the
  cumulative issue time. Its cost is ``f_i - f_{i-1}``: a step on that device is busy for the later
  of the two chains (kernel-bound: the kernel times; host-bound: the issue times), and the costs of
  a single-device step add up to exactly that. Summed per op of the OpGraph
  (:func:`per_op`), they enter the graph as an ordinary ``compute_us[key]`` row: the simulator, its
  parameters and its Placeto-exact preset are unchanged (``docs/runtime.md``).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

import numpy as np

PREFIX = "placer#"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
MAX_GAP_US = 50.0  # a longer pause between two ranges of a thread is not issue work (a step boundary, a wait)


@dataclass
class NodeProfile:
    """Per fx node (indexed like the captured program's nodes), means per recorded step, us."""

    host_us: np.ndarray  # duration of the node's range
    issue_us: np.ndarray  # range start to the next range's start on the same thread
    kernel_us: np.ndarray  # GPU activity attributed to the node
    launches: np.ndarray  # GPU activities attributed (per step)
    steps: int  # times the most frequent node ran
    unattributed_kernel_us: float  # GPU activity whose launch lay in no range (per step)
    cpu_ops: dict = field(default_factory=dict)  # node -> names of the aten ops recorded inside its range

    def summary(self) -> dict:
        return {"steps": self.steps, "nodes": int((self.host_us > 0).sum()), "host_us": float(self.host_us.sum()),
                "issue_us": float(self.issue_us.sum()), "kernel_us": float(self.kernel_us.sum()),
                "launches": int(self.launches.sum()), "unattributed_kernel_us": self.unattributed_kernel_us}


def load_trace(trace) -> list[dict]:
    """The complete events (``ph: X``) of a Chrome trace: a path, a JSON string's parsed dict or its event list."""
    if isinstance(trace, (str, bytes)) or hasattr(trace, "__fspath__"):
        with open(trace) as f:
            trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X"]


def _node_of(name: str) -> int | None:
    if not name.startswith(PREFIX):
        return None
    head = name[len(PREFIX):].split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def attribute(trace, n_nodes: int) -> NodeProfile:
    """Host, issue and kernel time per node from a recorded trace (module docstring)."""
    events = load_trace(trace)
    ranges: dict[tuple, list[tuple[float, float, int]]] = {}
    for e in events:
        k = _node_of(str(e.get("name", "")))
        if k is None or e.get("cat") == "gpu_user_annotation" or not 0 <= k < n_nodes:
            continue
        ranges.setdefault((e.get("pid"), e.get("tid")), []).append((float(e["ts"]), float(e.get("dur", 0.0)), k))
    host = np.zeros(n_nodes)
    issue = np.zeros(n_nodes)
    runs = np.zeros(n_nodes)
    starts: dict[tuple, list[float]] = {}
    for t, rs in ranges.items():
        rs.sort()
        starts[t] = [r[0] for r in rs]
        for q, (ts, dur, k) in enumerate(rs):
            host[k] += dur
            runs[k] += 1
            nxt = rs[q + 1][0] if q + 1 < len(rs) else ts + dur
            issue[k] += nxt - ts if nxt - (ts + dur) <= MAX_GAP_US else dur

    def enclosing(pid, tid, ts) -> int | None:
        rs = ranges.get((pid, tid))
        if not rs:
            return None
        q = bisect.bisect_right(starts[(pid, tid)], ts) - 1
        if q >= 0 and ts <= rs[q][0] + rs[q][1]:
            return rs[q][2]
        return None

    ext_node: dict = {}  # "External id" of a host op (or a node's range) -> its node
    cpu_ops: dict[int, list[str]] = {}
    for e in events:
        cat = e.get("cat")
        ext = (e.get("args") or {}).get("External id")
        if cat == "user_annotation":
            k = _node_of(str(e.get("name", "")))
            if k is not None and ext is not None and 0 <= k < n_nodes:
                ext_node[ext] = k
        elif cat == "cpu_op":
            k = enclosing(e.get("pid"), e.get("tid"), float(e["ts"]))
            if k is not None:
                cpu_ops.setdefault(k, []).append(str(e.get("name")))
                if ext is not None:
                    ext_node[ext] = k
    launch_node: dict = {}
    for e in events:
        if e.get("cat") in RUNTIME_CATS:
            args = e.get("args") or {}
            k = enclosing(e.get("pid"), e.get("tid"), float(e["ts"]))
            if k is None:  # the launch's thread id not matched to the host ops': by the op that launched it
                k = ext_node.get(args.get("External id"))
            if args.get("correlation") is not None and k is not None:
                launch_node[args["correlation"]] = k
    kernel = np.zeros(n_nodes)
    launches = np.zeros(n_nodes)
    lost = 0.0
    for e in events:
        if e.get("cat") in DEVICE_CATS:
            args = e.get("args") or {}
            k = launch_node.get(args.get("correlation"))
            if k is None and args.get("correlation") is None:
                k = ext_node.get(args.get("External id"))
            if k is None:
                lost += float(e.get("dur", 0.0))
            else:
                kernel[k] += float(e.get("dur", 0.0))
                launches[k] += 1
    steps = int(runs.max()) if runs.size and runs.max() > 0 else 0
    per = np.maximum(runs, 1)
    return NodeProfile(host / per, issue / per, kernel / per, launches / per, steps, lost / max(steps, 1),
                       {k: v for k, v in cpu_ops.items()})


def scale_issue(issue_us: np.ndarray, unprofiled_issue_us: float) -> np.ndarray:
    """Per-node issue times scaled so that they add up to the issue time of an unprofiled step."""
    total = float(np.sum(issue_us))
    return issue_us * (unprofiled_issue_us / total) if total > 0 and unprofiled_issue_us > 0 else issue_us.copy()


def chain_costs(issue_us, kernel_us, order) -> np.ndarray:
    """Per node, its share of a one-device step (``f_i - f_{i-1}``, module docstring) along ``order``
    (the node indices in the order the host issues them)."""
    issue_us, kernel_us = np.asarray(issue_us, dtype=float), np.asarray(kernel_us, dtype=float)
    cost = np.zeros(len(issue_us))
    h = f = 0.0
    for i in order:
        h += issue_us[i]
        nf = max(f, h) + kernel_us[i]
        cost[i] = nf - f
        f = nf
    return cost


def per_op(node_cost, node_op: dict[int, int], n_ops: int) -> np.ndarray:
    """Node costs summed per op (``node_op``: node index -> op index)."""
    out = np.zeros(n_ops)
    for i, op in node_op.items():
        out[op] += node_cost[i]
    return out


def with_step_costs(graph, op_cost_us, key: str, info: dict | None = None):
    """A copy of ``graph`` whose ``compute_us[key]`` is ``op_cost_us`` (from :func:`chain_costs`
    and :func:`per_op`), the profile's summary in ``meta['profiles'][key]``."""
    costs = dict(graph.compute_us)
    costs[key] = np.round(np.asarray(op_cost_us, dtype=float), 3)
    meta = dict(graph.meta)
    profiles = dict(meta.get("profiles") or {})
    profiles[key] = {"kind": "step", **(info or {})}
    meta["profiles"] = profiles
    return graph.replace(compute_us=costs, meta=meta)
