"""GiPH's workloads (Hu et al., MLSys 2023, "GiPH: Generalizable Placement Learning for Adaptive
Heterogeneous Computing", section 5 and its appendix on the synthetic data): random task graphs and
random heterogeneous device networks, the "changing cluster" setting where devices join and leave,
and the spec strings the CLI and the bench name them by.

* task graph (:func:`task_graph`): a layered random DAG in the style of the HEFT generator the paper
  compares against (Topcuoglu et al. 2002): ``tasks`` tasks in about sqrt(tasks) / ``alpha`` levels,
  each task's children drawn from the next ``jump`` levels (1..``degree`` of them), every non-first
  level task with a parent; each task's compute requirement (work, in FLOP) uniform in
  [0.5, 1.5] x ``REF_WORK``; each edge's data size set by the communication-to-computation ratio
  ``ccr`` on the reference device and link (bytes uniform in [0.5, 1.5] x ``ccr`` x reference
  compute time x ``REF_BW``);
* device network (:func:`device_network`): ``devices`` devices whose compute speeds are log-uniform
  in [1 / ``spread``, ``spread``] x ``REF_SPEED``, and a link per pair (symmetric) with bandwidth
  uniform in [0.5, 1.5] x ``REF_BW`` and a delay uniform in [``LAT_LO``, ``LAT_HI``] us;
* changing cluster: every device and every link is a pure function of (seed, its index), so
  ``device_network(d, seed, join=j, leave=l)`` is the same network with ``l`` of its devices gone
  (chosen by the seed) and ``j`` new ones (the next indices of the same stream) joined, the
  survivors' speeds and links unchanged;
* communication model (``comm``, :data:`DEFAULT_COMM`): the network declares GiPH's own, ``giph``
  (one transfer per edge with its bytes, sent when its producer ends, no contention: the GiPH
  authors' evaluator, :mod:`placer.sim.reference_giph`), in ``meta["comm_model"]`` as a cluster
  file's ``comm_model``; ``comm=placeto`` (or ``p2p``, ``link``) gives the same devices and links
  under another model (docs/simulator.md says why giph is the default).

Every float is drawn with numpy's generator (the same bits everywhere) and, for the speeds, a correctly
rounded exp and log (:mod:`placer.zoo.exact`), not numpy's, whose last bits depend on the processor.

Costs are exact: a task's ops carry its work as FLOPs (no bytes accessed) and a device its speed as
``peak_flops_per_us`` with no launch overhead, so :class:`placer.problem.Problem`'s roofline gives
compute_us[task, device] = work / speed, bit for bit. Every number above that the text we could read
does not state is ours (docs/methods/giph.md lists them).
"""

from __future__ import annotations

import math

import numpy as np

from placer.bounds import bound
from placer.cluster import COMM_MODELS, Cluster, Device, make_cluster
from placer.errors import InputError, printable
from placer.graph import OpGraph
from placer.zoo import exact

REF_SPEED = 1e4  # FLOP per us of the reference device (10 GFLOP/s, an edge-class processor)
REF_WORK = 1e7  # FLOP of the mean task: 1 ms on the reference device
REF_BW = 1e2  # bytes per us of the mean link (100 MB/s)
LAT_LO, LAT_HI = 10.0, 100.0  # link delay range, us
DEVICE_MEMORY = 16 * 2**30  # bytes per device: GiPH's model has no memory limit, so none binds

MAX_TASKS = int(bound("giph.tasks").hi)  # tasks in one generated graph (placer.bounds: the reason)
MAX_DEVICES = int(bound("giph-net.devices").hi)  # devices in one generated network
DEFAULTS_GRAPH = {"tasks": 50, "seed": 0, "alpha": 1.0, "degree": 3, "jump": 2, "ccr": 0.5}
# GiPH's networks are simulated as GiPH's evaluator does (placer.cluster.COMM_MODELS; docs/simulator.md)
DEFAULT_COMM = "giph"
DEFAULTS_NET = {"devices": 8, "seed": 0, "spread": 3.0, "join": 0, "leave": 0, "comm": DEFAULT_COMM}


# ---------------------------------------------------------------------- task graphs
def task_graph(tasks: int = 50, seed: int = 0, *, alpha: float = 1.0, degree: int = 3, jump: int = 2,
               ccr: float = 0.5, name: str | None = None) -> OpGraph:
    """A random layered task DAG (module docstring), deterministic in its arguments."""
    for key, value in (("tasks", tasks), ("degree", degree), ("jump", jump), ("alpha", alpha), ("ccr", ccr)):
        bound(f"giph.{key}").check(value, "giph task graph")  # the table's rows (placer.bounds)
    bound("seed").check(seed, "giph task graph")
    rng = np.random.default_rng([int(seed), int(tasks), 0x61])
    n = int(tasks)
    height = max(1, min(n, round(math.sqrt(n) / alpha)))
    level = np.concatenate([np.arange(height), rng.integers(0, height, size=n - height)])
    level = np.sort(level)  # tasks numbered level by level: a topological order
    first = np.searchsorted(level, np.arange(height + 1))  # first task of each level (and the end)
    edges: set[tuple[int, int]] = set()
    for i in range(n):
        lv = level[i]
        if lv == height - 1:
            continue
        lo, hi = first[lv + 1], first[min(height, lv + 1 + jump)]
        k = int(rng.integers(1, degree + 1))
        for c in rng.choice(np.arange(lo, hi), size=min(k, hi - lo), replace=False):
            edges.add((i, int(c)))
    has_parent = np.zeros(n, dtype=bool)
    for _, c in edges:
        has_parent[c] = True
    for i in range(first[1] if height > 1 else n, n):  # every task below the first level gets a parent
        if not has_parent[i]:
            lv = level[i]
            edges.add((int(rng.integers(first[lv - 1], first[lv])), i))
    work = REF_WORK * rng.uniform(0.5, 1.5, size=n)
    src = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    ref_time_us = REF_WORK / REF_SPEED
    data = ccr * ref_time_us * REF_BW * rng.uniform(0.5, 1.5, size=len(src))
    out = np.zeros(n)
    if len(src):
        np.maximum.at(out, src[:, 0], data)
    names = [f"t{i}" for i in range(n)]
    return OpGraph.build(
        names, [(int(a), int(b), float(w)) for (a, b), w in zip(src, data)],
        name=name or f"giph-t{n}-s{seed}", op_types=["task"] * n, modules=[f"level{lv}" for lv in level],
        flops=work, bytes_accessed=np.zeros(n), output_bytes=out,
        meta={"source": "giph", "generator": {"tasks": n, "seed": int(seed), "alpha": float(alpha), "degree": int(degree),
                                                  "jump": int(jump), "ccr": float(ccr)}},
        source="giph task graph")


# ---------------------------------------------------------------------- device networks
def _device(seed: int, j: int, spread: float) -> Device:
    rng = np.random.default_rng([int(seed), j, 0x64])
    # exp and log correctly rounded (placer.zoo.exact), not numpy's: every processor gets the same bits
    lim = exact.log(spread)
    speed = REF_SPEED * exact.exp(float(rng.uniform(-lim, lim)))
    return Device(f"dev{j}", "gpu", "giph", float(DEVICE_MEMORY), peak_flops_per_us=speed,
                  mem_bw_bytes_per_us=1e9, launch_us=0.0)


def _link(seed: int, a: int, b: int) -> tuple[float, float]:
    lo, hi = min(a, b), max(a, b)
    rng = np.random.default_rng([int(seed), lo, hi, 0x6C])
    return REF_BW * float(rng.uniform(0.5, 1.5)), float(rng.uniform(LAT_LO, LAT_HI))


def device_network(devices: int = 8, seed: int = 0, *, spread: float = 3.0, join: int = 0, leave: int = 0,
                   comm: str = DEFAULT_COMM, name: str | None = None) -> Cluster:
    """A random heterogeneous device network (module docstring); ``join`` / ``leave``: the changing
    cluster, the same network with ``leave`` devices gone and ``join`` new ones; ``comm``: the
    communication model it declares (:data:`placer.cluster.COMM_MODELS`)."""
    for key, value in (("devices", devices), ("join", join), ("leave", leave), ("spread", spread)):
        bound(f"giph-net.{key}").check(value, "giph device network")  # the table's rows (placer.bounds)
    bound("seed").check(seed, "giph device network")
    _check_comm("giph device network", comm)
    _check_count("giph device network", "leave", leave, 0, devices - 1)
    if devices - leave + join > MAX_DEVICES:
        raise InputError("giph device network", f"devices={devices}, join={join}, leave={leave}",
                         f"leaves {devices - leave + join} devices, more than {MAX_DEVICES}", "join fewer devices")
    gone = set()
    if leave:
        rng = np.random.default_rng([int(seed), int(devices), int(leave), 0x4C])
        gone = {int(j) for j in rng.choice(devices, size=leave, replace=False)}
    index = [j for j in range(devices) if j not in gone] + list(range(devices, devices + join))
    devs = [_device(seed, j, float(spread)) for j in index]
    pairs = {}
    for a, ja in enumerate(index):
        for b, jb in enumerate(index):
            if a != b:
                pairs[(a, b)] = _link(seed, ja, jb)
    label = name or f"giph-net-d{devices}-s{seed}" + (f"+{join}-{leave}" if join or leave else "")
    return make_cluster(label, devs, REF_BW, LAT_LO, pairs, meta={
        "description": f"GiPH random device network: {len(devs)} devices, speeds x{1 / spread:.2g}..x{spread:g}",
        "source": "giph", "index": index, "comm_model": comm}, source="giph device network")


# ---------------------------------------------------------------------- spec strings
GRAPH_PREFIX, NET_PREFIX = "giph:", "giph-net:"
GRAPH_FORM = "giph:tasks=<1..20000>,seed=<s>[,alpha=<shape>,degree=<out-degree>,jump=<levels>,ccr=<ratio>]"
NET_FORM = "giph-net:devices=<1..256>,seed=<s>[,spread=<x>,join=<j>,leave=<l>,comm=<placeto|p2p|giph|link>]"


def graph_from_spec(spec: str) -> OpGraph:
    """``giph:tasks=50,seed=3`` (:data:`GRAPH_FORM`) -> the task graph."""
    kw = _parse(spec, GRAPH_PREFIX, DEFAULTS_GRAPH, GRAPH_FORM)
    try:
        return task_graph(kw["tasks"], kw["seed"], alpha=kw["alpha"], degree=kw["degree"], jump=kw["jump"],
                          ccr=kw["ccr"], name=spec)
    except InputError as e:
        raise e.at(spec) from None


def network_from_spec(spec: str) -> Cluster:
    """``giph-net:devices=8,seed=1[,join=2,leave=1][,comm=placeto]`` (:data:`NET_FORM`) -> the device
    network, under GiPH's communication model unless ``comm`` names another."""
    kw = _parse(spec, NET_PREFIX, DEFAULTS_NET, NET_FORM)
    try:
        return device_network(kw["devices"], kw["seed"], spread=kw["spread"], join=kw["join"], leave=kw["leave"],
                              comm=kw["comm"], name=spec)
    except InputError as e:
        raise e.at(spec) from None


def _parse(spec: str, prefix: str, defaults: dict, form: str) -> dict:
    """The settings of a spec string, each against its row of :data:`placer.bounds.BOUNDS`
    (``giph.tasks``, ``giph-net.devices``, ``seed``, ...). Refused in one line naming the spec: no
    settings at all (``giph:``), an empty item, key or value, a key given twice, an unknown key, a
    ``comm`` that names no communication model (:data:`placer.cluster.COMM_MODELS`, not a number)."""
    from placer.bounds import parse_items

    scope = prefix.rstrip(":")
    out = dict(defaults)
    for key, text in parse_items(spec, spec[len(prefix):], form).items():
        if key not in defaults:
            raise InputError(spec, f"'{key}'", f"is not a {scope} setting", f"write {form}")
        if key == "comm":
            out[key] = _check_comm(spec, text)
            continue
        out[key] = bound("seed" if key == "seed" else f"{scope}.{key}").parse(text, spec)
    return out


def _check_comm(where: str, comm) -> str:
    if comm not in COMM_MODELS:
        raise InputError(where, f"comm={printable(str(comm), 40)}", "is not a communication model",
                         f"use one of {', '.join(COMM_MODELS)} (docs/simulator.md)")
    return str(comm)


def _check_count(where: str, name: str, value, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise InputError(where, f"{name}={value!r}", f"is not a whole number in [{lo}, {hi}]",
                         f"give {name} between {lo} and {hi}")
