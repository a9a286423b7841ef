"""The placed training step: the captured aten program run node by node, each op on its device.

A :class:`~placer.frontends.torch.Capture` keeps the traced fx program and, per fx node, the op
of the OpGraph that computes (or, for a view, is aliased by) its value (``capture.node_op``). A
placement gives every op a cluster device and :func:`~placer.runtime.devices.device_map` every
cluster device a real one. :class:`PlacedStep` then:

* puts every parameter, its optimizer state, buffer and input on the device of its source op;
* runs every op on its device (a view where its producer is, an in-place op where the tensor it
  writes lives; ``device=`` arguments of factory ops are rewritten);
* copies a tensor once per (tensor, consumer device) where an edge crosses devices, non-blocking
  towards a GPU (the copy is queued on the GPU's stream and the host goes on issuing work), a
  blocking copy towards the CPU (the host needs the data);
* frees every value after its last use, and (``track_memory``) counts the live bytes per cluster
  device: a value's bytes on the device that made it, a copy's on the device it was copied to,
  parameters, optimizer state and buffers all along. Two cluster devices mapped to one real device
  are still counted apart.

The step's outputs are the loss, the new parameters and optimizer state, and the gradients;
feeding the new state back gives the next step, so N steps train the model for real.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class StepOutput:
    loss: object
    params: list
    state: list  # per parameter, its optimizer slots
    grads: list
    peak_bytes: np.ndarray | None  # per cluster device (track_memory only)
    transfers: int
    transfer_bytes: float


def _tensor_bytes(v) -> int:
    import torch

    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size() if v.numel() else 0
    if isinstance(v, (tuple, list)):
        return sum(_tensor_bytes(x) for x in v)
    return 0


class PlacedStep:
    """One training step of ``capture`` under ``placement`` (op -> cluster device index) with
    ``real`` (cluster device index -> ``cpu`` / ``cuda:k``)."""

    def __init__(self, capture, placement, real: list[str]):
        import torch
        import torch.fx as fx

        from placer.frontends.torch_ops import is_view

        self.capture = capture
        self.real = list(real)
        self.devices = [torch.device(r) for r in self.real]
        self.n_dev = len(self.real)
        placement = np.asarray(placement, dtype=np.int64)
        gm = capture.gm
        nodes = list(gm.graph.nodes)
        self.nodes = nodes
        index = {n: i for i, n in enumerate(nodes)}
        info = capture.info
        self.n_p, self.n_b, self.slots, self.n_in = len(info["params"]), len(info["buffers"]), info["slots"], info["inputs"]
        node_op = capture.node_op
        self.ldev = np.zeros(len(nodes), dtype=np.int64)  # cluster device of every node
        for i, n in enumerate(nodes):
            if n in node_op:
                self.ldev[i] = placement[node_op[n]]
        # alias groups (a view keeps its base alive) and last uses, for freeing and memory counts
        alias = list(range(len(nodes)))
        last = [-1] * len(nodes)
        self.program = []  # (kind, node index, target, args, kwargs, device index, mutates)
        for i, n in enumerate(nodes):
            for x in n.all_input_nodes:
                last[index[x]] = i
            if n.op == "call_function":
                view = is_view(n.target)
                mut = bool(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable)
                if (view or mut) and n.all_input_nodes:
                    first = n.args[0] if isinstance(n.args[0], fx.Node) else n.all_input_nodes[0]
                    self.ldev[i] = self.ldev[index[first]]
                    if view:
                        alias[i] = alias[index[first]]
                    if mut:
                        alias[i] = alias[index[first]]
                self.program.append(("call", i, n.target, n.args, dict(n.kwargs), int(self.ldev[i]), view or mut))
            elif n.op == "get_attr":
                self.program.append(("attr", i, n.target, None, None, int(self.ldev[i]), False))
        group_last = {}
        for i, a in enumerate(alias):
            group_last[a] = max(group_last.get(a, -1), last[i], i)
        self.alias = alias
        self.free_at: dict[int, list[int]] = {}
        self.placeholders = [i for i, n in enumerate(nodes) if n.op == "placeholder"]
        persistent = set(self.placeholders)
        out_node = nodes[-1]
        self.outputs = [index[x] if isinstance(x, fx.Node) else None for x in out_node.args[0]]
        for i, l in enumerate(last):
            if l >= 0 and i not in persistent and nodes[l].op != "output":
                self.free_at.setdefault(l, []).append(i)
        self.group_free_at: dict[int, list[int]] = {}
        for a, l in group_last.items():
            if a not in persistent and nodes[l].op != "output" and nodes[a].op != "output":
                self.group_free_at.setdefault(l, []).append(a)
        self.consts = {}
        for kind, i, target, *_ in self.program:
            if kind == "attr":
                self.consts[i] = getattr(gm, target)

    # ------------------------------------------------------------------ state
    def place_state(self, params, buffers, state, inputs):
        """The flat placeholder values, each on the device of its source op."""
        flat = [*params, *buffers, *[s for per in state for s in per], *inputs]
        if len(flat) != len(self.placeholders):
            raise ValueError(f"expected {len(self.placeholders)} step inputs, got {len(flat)}")
        out = []
        for k, v in zip(self.placeholders, flat):
            dev = self.devices[self.ldev[k]]
            out.append(v.to(dev) if v.device != dev else v)
        return out

    # ------------------------------------------------------------------ one step
    def run(self, flat, track_memory: bool = False) -> StepOutput:
        import torch
        from torch.utils._pytree import tree_map

        import torch.fx as fx

        nodes, ldev, devices = self.nodes, self.ldev, self.devices
        env: list = [None] * len(nodes)
        copies: dict[tuple[int, int], object] = {}
        live = np.zeros(self.n_dev)
        peak = np.zeros(self.n_dev)
        group_bytes: dict[int, tuple[int, int]] = {}
        transfers, transfer_bytes = 0, 0.0
        for k, v in zip(self.placeholders, flat):
            env[k] = v
            if track_memory:
                live[ldev[k]] += _tensor_bytes(v)
        peak[:] = live
        index_of = {n: i for i, n in enumerate(nodes)}

        def fetch(node, d):
            nonlocal transfers, transfer_bytes
            i = index_of[node]
            v = env[i]
            if ldev[i] == d or not isinstance(v, torch.Tensor):
                return v
            key = (i, d)
            c = copies.get(key)
            if c is None:
                dst = devices[d]
                c = v.to(dst, non_blocking=dst.type == "cuda") if v.device != dst else v
                copies[key] = c
                transfers += 1
                b = _tensor_bytes(v)
                transfer_bytes += b
                if track_memory:
                    live[d] += b
            return c

        for kind, i, target, args, kwargs, d, local in self.program:
            if kind == "attr":
                c = self.consts[i]
                env[i] = c.to(devices[d]) if c.device != devices[d] else c
            else:
                dev = devices[d]
                if local:  # a view or in-place op: where its first tensor lives
                    a = tree_map(lambda x: env[index_of[x]] if isinstance(x, fx.Node) else x, args[:1])
                    rest = tree_map(lambda x: fetch(x, d) if isinstance(x, fx.Node) else x, args[1:])
                    a = tuple(a) + tuple(rest)
                else:
                    a = tree_map(lambda x: fetch(x, d) if isinstance(x, fx.Node) else x, args)
                kw = {k: (dev if k == "device" else tree_map(lambda x: fetch(x, d) if isinstance(x, fx.Node) else x, v))
                      for k, v in kwargs.items()} if kwargs else {}
                env[i] = target(*a, **kw)
            if track_memory:
                if self.alias[i] == i:
                    b = _tensor_bytes(env[i])
                    group_bytes[i] = (d, b)
                    live[d] += b
                    peak[d] = max(peak[d], live[d])
            for j in self.free_at.get(i, ()):
                env[j] = None
                for dd in range(self.n_dev):
                    c = copies.pop((j, dd), None)
                    if c is not None and track_memory:
                        live[dd] -= _tensor_bytes(c)
            if track_memory:
                for g in self.group_free_at.get(i, ()):
                    dd, b = group_bytes.pop(g, (0, 0))
                    live[dd] -= b
        outs = [env[k] if k is not None else None for k in self.outputs]
        n_p, slots = self.n_p, self.slots
        loss = outs[0]
        params = outs[1:1 + n_p]
        flat_state = outs[1 + n_p:1 + n_p + n_p * slots]
        state = [flat_state[k * slots:(k + 1) * slots] for k in range(n_p)]
        grads = outs[1 + n_p + n_p * slots:1 + 2 * n_p + n_p * slots]
        return StepOutput(loss, params, state, grads, peak if track_memory else None, transfers, transfer_bytes)
