"""The static plan of a placed training step: who runs which fx node, in which order, and what
crosses between devices. :class:`~placer.runtime.executor.PlacedStep` executes it.

* **Devices.** Every fx node gets the cluster device of the op that computes it
  (``capture.node_op``); a view, a ``getitem`` or an in-place op goes where the tensor it aliases
  lives (alias groups: a view keeps its base alive).
* **Issue order.** One total order of the executable nodes: a topological order (data edges plus
  the ordering edges below) that takes the nodes by ``priority`` of their op, ties by fx order. The
  executor passes the simulator's start times, so the host issues the ops in the schedule's order.
* **Lanes.** Lane 0 is the calling thread: it issues every node of every cluster device that runs
  on a GPU (each on its own stream). Every other cluster device that runs on the CPU is a lane of
  its own (a worker thread). When no GPU has work, the calling thread takes the first CPU device.
  Each lane runs its nodes in the issue order restricted to it.
* **Ordering edges.** An in-place op (a buffer written back) waits for every earlier reader of the
  alias group it writes, and later readers wait for it (write-after-read / read-after-write).
* **Crossings.** A value is handed over once per (value, consuming device); a crossing with no
  data (an ordering edge) hands over only "done". A value that exists when the step starts (a
  parameter, optimizer state, input or constant) is fetched by its consumer.
* **Segments.** A lane's nodes are cut into straight-line stretches of one device: a stretch ends
  after a node whose value (or completion) another device waits for and begins at a node that
  waits for another device. Each stretch becomes one generated Python function (fx codegen).
* **Random ops.** An op that takes a generator (``bernoulli``: dropout masks) gets one of its own,
  seeded per step from one draw of the global generator plus the node's index, so its mask does
  not depend on the placement or on which thread draws first.
* **Memory.** :meth:`StepPlan.counted_peak_bytes`: the live tensor bytes per cluster device along
  the issue order, counted from the traced shapes (a value's bytes on the device that made it, a
  copy's on the device it was copied to, the step's inputs all along).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np


def _val_bytes(v) -> int:
    import torch

    if isinstance(v, torch.Tensor):
        return int(v.numel() * v.element_size()) if v.numel() else 0
    if isinstance(v, (tuple, list)):
        return sum(_val_bytes(x) for x in v)
    return 0


def issue_order(n_exec: int, deps: list[list[int]], priority) -> list[int]:
    """A topological order of ``n_exec`` items (``deps[k]``: items that must come before ``k``)
    that takes, among the ready items, the one of smallest ``(priority[k], k)``."""
    users: list[list[int]] = [[] for _ in range(n_exec)]
    pend = [0] * n_exec
    for k, ds in enumerate(deps):
        pend[k] = len(ds)
        for j in ds:
            users[j].append(k)
    heap = [(priority[k], k) for k in range(n_exec) if pend[k] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, k = heapq.heappop(heap)
        out.append(k)
        for u in users[k]:
            pend[u] -= 1
            if pend[u] == 0:
                heapq.heappush(heap, (priority[u], u))
    if len(out) != n_exec:
        raise ValueError("the step's dependencies have a cycle")
    return out


@dataclass
class Segment:
    """A straight-line stretch of one cluster device's nodes in one lane."""

    lane: int
    device: int
    nodes: list[int]
    recv: list[tuple[int, bool]] = field(default_factory=list)  # (producer, data) to receive before the stretch
    send: list[tuple[int, int, bool]] = field(default_factory=list)  # (producer, device, data) to hand over after it
    ins: list[int] = field(default_factory=list)  # env keys the stretch reads
    outs: list[int] = field(default_factory=list)  # env keys it produces that are used after it
    free: list[int] = field(default_factory=list)  # env keys dead after it
    fn: object = None  # the generated function (executor)


class StepPlan:
    """The plan of ``capture``'s step under ``placement`` (op -> cluster device) on ``real``
    (cluster device -> ``cpu`` / ``cuda:k``), issued by ``priority`` (per op; ``None``: fx order)."""

    def __init__(self, capture, placement, real: list[str], priority=None):
        import torch
        import torch.fx as fx

        from placer.frontends.torch_ops import is_view

        self.real = list(real)
        self.n_dev = D = len(self.real)
        placement = np.asarray(placement, dtype=np.int64)
        gm = capture.gm
        nodes = list(gm.graph.nodes)
        self.nodes = nodes
        N = self.N = len(nodes)
        index = {n: i for i, n in enumerate(nodes)}
        info = capture.info
        self.n_p, self.n_b, self.slots, self.n_in = len(info["params"]), len(info["buffers"]), info["slots"], info["inputs"]
        node_op = capture.node_op
        ldev = np.zeros(N, dtype=np.int64)
        op_of = np.full(N, -1, dtype=np.int64)
        for i, n in enumerate(nodes):
            if n in node_op:
                ldev[i] = placement[node_op[n]]
                op_of[i] = node_op[n]
        alias = list(range(N))
        last = [-1] * N
        self.mutates: set[int] = set()
        self.random: list[int] = []  # random ops (dropout masks) that take a generator: each gets its own
        self.ins: dict[int, list[int]] = {}
        calls, attrs = [], []
        for i, n in enumerate(nodes):
            for x in n.all_input_nodes:
                last[index[x]] = i
            if n.op == "call_function":
                mut = bool(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable)
                if (is_view(n.target) or mut) and n.all_input_nodes:
                    first = n.args[0] if isinstance(n.args[0], fx.Node) else n.all_input_nodes[0]
                    ldev[i] = ldev[index[first]]
                    alias[i] = alias[index[first]]
                if mut:
                    self.mutates.add(i)
                if (isinstance(n.target, torch._ops.OpOverload) and n.kwargs.get("generator") is None
                        and any(a.name == "generator" and a.kwarg_only for a in n.target._schema.arguments)):
                    self.random.append(i)
                self.ins[i] = sorted({index[x] for x in n.all_input_nodes})
                calls.append(i)
            elif n.op == "get_attr":
                attrs.append(i)
        self.ldev, self.alias, self.last = ldev, alias, last
        self.calls = calls
        self.placeholders = [i for i, n in enumerate(nodes) if n.op == "placeholder"]
        self.attrs = attrs
        self.initial = set(self.placeholders) | set(attrs)  # values that exist when the step starts
        self.outputs = [index[x] if isinstance(x, fx.Node) else None for x in nodes[-1].args[0]]
        self.ctrl = self._ordering_edges(calls)
        # lanes
        self.cuda = [r.startswith("cuda") for r in self.real]
        used = sorted({int(ldev[i]) for i in calls})
        lane_of = [-1] * D
        if any(self.cuda[d] for d in used):
            for d in used:
                if self.cuda[d]:
                    lane_of[d] = 0
            rest = [d for d in used if not self.cuda[d]]
            first = 1
        else:
            rest, first = used, 0
        for k, d in enumerate(rest):
            lane_of[d] = first + k
        self.lane_of = lane_of
        self.n_lanes = max(lane_of) + 1 if used else 1
        # issue order over the call nodes
        pos = {i: k for k, i in enumerate(calls)}
        prio = [(float(priority[op_of[i]]) if priority is not None and op_of[i] >= 0 else 0.0, k)
                for k, i in enumerate(calls)]
        deps = [[pos[j] for j in (*self.ins[i], *self.ctrl.get(i, ())) if j in pos] for i in calls]
        self.order = [calls[k] for k in issue_order(len(calls), deps, prio)]
        self._segments()

    # ------------------------------------------------------------------ analysis
    def _ordering_edges(self, calls) -> dict[int, list[int]]:
        """Write-after-read and read-after-write edges on alias groups, for nodes that do not
        already read the value (in fx order, the program's own)."""
        ctrl: dict[int, set] = {}
        writer: dict[int, int] = {}
        readers: dict[int, list[int]] = {}
        for i in calls:
            groups = {self.alias[j] for j in self.ins[i]}
            for g in groups:
                w = writer.get(g)
                if w is not None and w != i and w not in self.ins[i]:
                    ctrl.setdefault(i, set()).add(w)
            if i in self.mutates:
                g = self.alias[i]
                for r in readers.get(g, []):
                    if r != i and r not in self.ins[i]:
                        ctrl.setdefault(i, set()).add(r)
                writer[g], readers[g] = i, []
            for g in groups:
                readers.setdefault(g, []).append(i)
        return {i: sorted(s) for i, s in ctrl.items()}

    @staticmethod
    def generator_key(i: int) -> int:
        """The env key of random node ``i``'s generator (see the executor)."""
        return -1 - i

    def key(self, j: int, d: int) -> int:
        """The env key of node ``j``'s value as device ``d`` reads it: ``j`` on its own device, else its copy."""
        return j if self.ldev[j] == d else self.N + j * self.n_dev + d

    def _segments(self):
        ldev = self.ldev
        need: dict[tuple[int, int], bool] = {}  # (producer, consuming device) -> carries data
        first_need: dict[tuple[int, int], int] = {}
        for i in self.order:
            d = int(ldev[i])
            for j, data in [(j, True) for j in self.ins[i]] + [(j, False) for j in self.ctrl.get(i, ())]:
                if ldev[j] != d:
                    need[(j, d)] = need.get((j, d), False) or data
                    first_need.setdefault((j, d), i)
        self.crossings = need
        sends: dict[int, list[tuple[int, bool]]] = {}
        recvs: dict[int, list[tuple[int, bool]]] = {}
        for (j, d), data in sorted(need.items()):
            recvs.setdefault(first_need[(j, d)], []).append((j, data))
            if j not in self.initial:
                sends.setdefault(j, []).append((d, data))
        outputs = {k for k in self.outputs if k is not None}
        self.lanes: list[list[Segment]] = [[] for _ in range(self.n_lanes)]
        prev: dict[int, int] = {}
        for i in self.order:
            d = int(ldev[i])
            L = self.lane_of[d]
            segs = self.lanes[L]
            cur = segs[-1] if segs else None
            if cur is None or cur.device != d or i in recvs or prev.get(L) in sends:
                cur = Segment(L, d, [])
                segs.append(cur)
            cur.nodes.append(i)
            cur.recv += recvs.get(i, [])
            cur.send += [(i, dd, data) for dd, data in sends.get(i, [])]
            prev[L] = i
        random = set(self.random)
        for L, segs in enumerate(self.lanes):
            last_use: dict[int, int] = {}
            for s, seg in enumerate(segs):
                inside = set(seg.nodes)
                ins = []
                for i in seg.nodes:
                    for j in self.ins[i]:
                        k = self.key(j, seg.device)
                        if not (k == j and j in inside) and k not in ins:
                            ins.append(k)
                    if i in random:
                        ins.append(self.generator_key(i))
                seg.ins = ins
                for k in ins:
                    last_use[k] = s
                for j, _, data in seg.send:
                    if data:
                        last_use[j] = max(last_use.get(j, s), s)
            for s, seg in enumerate(segs):
                inside = set(seg.nodes)
                seg.outs = [i for i in seg.nodes if last_use.get(i, -1) > s or i in outputs
                            or any(j == i and data for j, _, data in seg.send)]
                for k in seg.outs:
                    last_use.setdefault(k, s)
            dead: dict[int, list[int]] = {}
            for k, s in last_use.items():
                if k not in outputs and k not in self.initial and k >= 0:
                    dead.setdefault(s, []).append(k)
            for s, seg in enumerate(segs):
                seg.free = sorted(dead.get(s, []))

    # ------------------------------------------------------------------ static counts
    def value_bytes(self, j: int) -> int:
        return _val_bytes(self.nodes[j].meta.get("val"))

    def transfers(self) -> tuple[int, float]:
        """Tensors handed over between devices per step and their bytes (traced shapes)."""
        import torch

        n, b = 0, 0.0
        for (j, _), data in self.crossings.items():
            if data and isinstance(self.nodes[j].meta.get("val"), torch.Tensor):
                n += 1
                b += self.value_bytes(j)
        return n, b

    def counted_peak_bytes(self) -> np.ndarray:
        """Peak live tensor bytes per cluster device along the issue order (module docstring)."""
        ldev, D = self.ldev, self.n_dev
        live = np.zeros(D)
        for k in self.initial:
            if self.alias[k] == k:
                live[ldev[k]] += self.value_bytes(k)
        peak = live.copy()
        pos = {i: t for t, i in enumerate(self.order)}
        group_last: dict[int, int] = {}
        copy_last: dict[tuple[int, int], int] = {}
        for i in self.order:
            for j in self.ins[i]:
                g = self.alias[j]
                group_last[g] = max(group_last.get(g, -1), pos[i])
                if ldev[j] != ldev[i]:
                    copy_last[(j, int(ldev[i]))] = pos[i]
        free_at: dict[int, list[tuple[int, int]]] = {}
        outputs = {self.alias[k] for k in self.outputs if k is not None}
        for g, t in group_last.items():
            if g not in self.initial and g not in outputs:
                free_at.setdefault(t, []).append((int(ldev[g]), self.value_bytes(g)))
        for (j, d), t in copy_last.items():
            free_at.setdefault(t, []).append((d, self.value_bytes(j)))
        copied = set()
        for t, i in enumerate(self.order):
            d = int(ldev[i])
            for j in self.ins[i]:
                if ldev[j] != d and (j, d) not in copied:
                    copied.add((j, d))
                    live[d] += self.value_bytes(j)
            if self.alias[i] == i:
                live[d] += self.value_bytes(i)
            peak[d] = max(peak[d], live[d])
            for dd, b in free_at.get(t, ()):
                live[dd] -= b
        return peak
