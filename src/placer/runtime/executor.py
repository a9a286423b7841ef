"""The placed training step: the captured aten program run node by node, each op on its device.

A :class:`~placer.frontends.torch.Capture` keeps the traced fx program and, per fx node, the op
of the OpGraph that computes (or, for a view, is aliased by) its value (``capture.node_op``). A
placement gives every op a cluster device and :func:`~placer.runtime.devices.device_map` every
cluster device a real one. :class:`PlacedStep` puts every parameter, its optimizer state, buffer
and input on the device of its source op, runs every op on its device (a view where its producer
is, an in-place op where the tensor it writes lives; ``device=`` arguments of factory ops are
rewritten) and hands a tensor over once per (tensor, consumer device) where an edge crosses
devices. Every fx node's arguments are compiled once into a small Python function, so a node costs
one call of that function and one aten call.

Two executors, same numerics (every op gets the same inputs and runs with the same number of
intra-op threads, so the results are equal bit for bit; ``tests/test_runtime.py`` checks it):

``threaded`` (the default) executes the simulator's model of a step (:mod:`placer.sim`, Placeto
appendix A.5: per-device FIFO queues of runnable ops, one outgoing transfer queue per device,
communication overlapping compute):

* one host worker thread per cluster device; it runs its device's ops one at a time in the order
  they became runnable (a FIFO: an op is pushed when its last input is there, ties in the order of
  the producer's consumers, i.e. topological). A CPU device's ops run on its thread (torch releases
  the GIL inside an op, so CPU and GPU work overlap for real); a GPU device's thread issues its
  kernels onto its own CUDA stream and goes on (a GPU op is "done" for its same-device consumers
  once issued: the stream keeps the order).
* one transfer thread per cluster device serves its outgoing queue in FIFO order, one tensor at a
  time, to every device that consumes it: GPU -> CPU is a non-blocking copy into pinned memory on
  the GPU's device-to-host stream, after an event recorded behind the producing kernel; the thread
  waits for the copy's event (blocking sync, no spinning), then the CPU consumers become runnable.
  CPU -> GPU copies the tensor into pinned memory on the host and issues a non-blocking copy on the
  destination's host-to-device stream; the consumer's stream waits on that copy's event (the host
  does not). Between two cluster devices on one real device the tensor itself is handed over (on a
  GPU with an event).
* an in-place op (a buffer written back) also waits for every earlier reader of the tensor it
  writes, and later readers for it (write-after-read / read-after-write on alias groups), across
  devices through the transfer thread (after a host sync of the reader's event).
* values are dropped after their last consumer (reference counts), copies after the last consumer
  on their device. The step ends when every thread finished and every GPU is synchronised.

``serial`` runs the fx program in its order from the calling thread: copies towards a GPU
non-blocking, towards the CPU blocking. It alone counts memory (``track_memory``): the live bytes
per cluster device, a value's bytes on the device that made it, a copy's on the device it was
copied to, parameters, optimizer state and buffers all along; two cluster devices mapped to one
real device are counted apart.

The step's outputs are the loss, the new parameters and optimizer state, and the gradients;
feeding the new state back gives the next step, so N steps train the model for real.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import numpy as np

EXECUTORS = ("threaded", "serial")


@dataclass
class StepOutput:
    loss: object
    params: list
    state: list  # per parameter, its optimizer slots
    grads: list
    peak_bytes: np.ndarray | None  # per cluster device (track_memory only)
    transfers: int
    transfer_bytes: float
    executor: str = "serial"


def _tensor_bytes(v) -> int:
    import torch

    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size() if v.numel() else 0
    if isinstance(v, (tuple, list)):
        return sum(_tensor_bytes(x) for x in v)
    return 0


def _dense(t) -> bool:
    """Non-overlapping and dense: its strides are a permutation of a contiguous layout's."""
    dims = sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1)
    expect = 1
    for st, sz in dims:
        if st != expect:
            return False
        expect *= sz
    return True


def _pinned_copy(v):
    """A copy of CPU tensor ``v`` in page-locked memory, with ``v``'s strides where they are dense."""
    import torch

    if _dense(v):
        out = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device="cpu", pin_memory=True)
    else:
        out = torch.empty(v.size(), dtype=v.dtype, device="cpu", pin_memory=True)
    out.copy_(v)
    return out


def copy_to_host(v, stream, after=None):
    """GPU tensor ``v`` -> a CPU tensor in pinned memory: a non-blocking copy on ``stream`` (behind
    event ``after``), then a blocking wait (no spinning) for the copy's event. The threaded
    executor's GPU -> CPU transfer; ``benchmarks/fidelity.py`` times the link with it."""
    import torch

    with torch.cuda.stream(stream):
        if after is not None:
            stream.wait_event(after)
        c = v.to("cpu", non_blocking=True)  # pinned: torch pins a non-blocking D2H destination
        done = torch.cuda.Event(blocking=True)
        done.record(stream)
    done.synchronize()
    return c


def copy_to_device(v, dst, stream):
    """CPU tensor ``v`` -> device ``dst``: copied into pinned memory on the host, then a
    non-blocking copy on ``stream``; returns ``(tensor, event)``, the event recorded behind the
    copy (the consumer's stream waits on it; the host does not). The threaded executor's CPU -> GPU
    transfer."""
    import torch

    p = _pinned_copy(v)
    with torch.cuda.device(dst), torch.cuda.stream(stream):
        c = p.to(dst, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    return c, done


class _Compiler:
    """fx arguments -> the source of a Python expression over ``f(j)`` (the value of node ``j`` on
    the running device) and ``c[k]`` (constants)."""

    def __init__(self, index, device):
        self.index, self.device, self.consts = index, device, []

    def const(self, a) -> str:
        self.consts.append(a)
        return f"c[{len(self.consts) - 1}]"

    def expr(self, a) -> str:
        import torch.fx as fx

        if isinstance(a, fx.Node):
            return f"f({self.index[a]})"
        if isinstance(a, tuple) and type(a) is tuple:
            return "(" + "".join(self.expr(x) + ", " for x in a) + ")"
        if isinstance(a, list):
            return "[" + ", ".join(self.expr(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.const(k)}: {self.expr(v)}" for k, v in a.items()) + "}"
        return self.const(a)

    def build(self, args, kwargs):
        """``fn(f) -> (args, kwargs)``."""
        a = self.expr(tuple(args))
        kw = "{" + ", ".join(f"{k!r}: " + (self.const(self.device) if k == "device" else self.expr(v))
                             for k, v in kwargs.items()) + "}"
        return eval(f"lambda f, c=c: ({a}, {kw})", {"c": self.consts})  # noqa: S307 - our own generated source


class PlacedStep:
    """One training step of ``capture`` under ``placement`` (op -> cluster device index) with
    ``real`` (cluster device index -> ``cpu`` / ``cuda:k``); ``executor`` is the default of
    :meth:`run` (see the module docstring)."""

    def __init__(self, capture, placement, real: list[str], executor: str = "threaded"):
        import torch
        import torch.fx as fx

        from placer.frontends.torch_ops import is_view

        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, not {executor!r}")
        self.executor = executor
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
        ldev = np.zeros(len(nodes), dtype=np.int64)  # cluster device of every node
        for i, n in enumerate(nodes):
            if n in node_op:
                ldev[i] = placement[node_op[n]]
        # alias groups (a view keeps its base alive) and last uses, for freeing and memory counts
        alias = list(range(len(nodes)))
        last = [-1] * len(nodes)
        self.program = []  # (kind, node index, target, device index)
        self.mutates = set()
        self.ins: dict[int, list[int]] = {}  # call node -> its distinct input nodes
        for i, n in enumerate(nodes):
            for x in n.all_input_nodes:
                last[index[x]] = i
            if n.op == "call_function":
                view = is_view(n.target)
                mut = bool(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable)
                if (view or mut) and n.all_input_nodes:
                    first = n.args[0] if isinstance(n.args[0], fx.Node) else n.all_input_nodes[0]
                    ldev[i] = ldev[index[first]]
                    alias[i] = alias[index[first]]
                if mut:
                    self.mutates.add(i)
                self.ins[i] = sorted({index[x] for x in n.all_input_nodes})
                self.program.append(("call", i, n.target, int(ldev[i])))
            elif n.op == "get_attr":
                self.ins[i] = []
                self.program.append(("attr", i, n.target, int(ldev[i])))
        self.ldev = ldev
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
        self.persistent = persistent | {k for k in self.outputs if k is not None}
        self.consts = {}
        self.builders: dict[int, object] = {}
        for kind, i, target, d in self.program:
            if kind == "attr":
                self.consts[i] = getattr(gm, target)
            else:
                n = nodes[i]
                self.builders[i] = _Compiler(index, self.devices[d]).build(n.args, n.kwargs)
        self._plan_threaded()

    # ------------------------------------------------------------------ static plan of the threaded run
    def _plan_threaded(self):
        """Dependencies, consumers, transfers and reference counts of the threaded executor."""
        ldev, D = self.ldev, self.n_dev
        ctrl: dict[int, set[int]] = {}  # node -> nodes it must follow without reading their value
        writer: dict[int, int] = {}
        readers: dict[int, list[int]] = {}
        for kind, i, _, _ in self.program:
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
        self.ctrl = {i: sorted(s) for i, s in ctrl.items()}
        on_dev = set(self.placeholders)
        pend = {}  # executable node -> number of events it waits for
        local_users: dict[int, list[int]] = {}  # producer -> consumers on its own device
        remote: dict[int, dict[int, list[int]]] = {}  # producer -> {device: waiting consumers}
        data_remote: set[tuple[int, int]] = set()  # (producer, device) whose value is copied there
        uses = {}  # producer -> consumers on its device + transfers of its value
        copy_uses = {}  # (producer, device) -> consumers there
        for kind, i, _, d in self.program:
            deps = [(j, True) for j in self.ins[i]] + [(j, False) for j in self.ctrl.get(i, [])]
            n = 0
            for j, data in deps:
                if ldev[j] == d:
                    if j in on_dev and j in self.placeholders:
                        pass  # already there when the step starts
                    else:
                        local_users.setdefault(j, []).append(i)
                        n += 1
                    if data:
                        uses[j] = uses.get(j, 0) + 1
                else:
                    w = remote.setdefault(j, {}).setdefault(d, [])
                    if i not in w:
                        w.append(i)
                    n += 1
                    if data:
                        if (j, d) not in data_remote:
                            data_remote.add((j, d))
                            uses[j] = uses.get(j, 0) + 1
                        copy_uses[(j, d)] = copy_uses.get((j, d), 0) + 1
            pend[i] = n
        self.pend0 = pend
        self.local_users = local_users
        self.remote = {j: sorted(v.items()) for j, v in remote.items()}
        self.data_remote = data_remote
        self.uses0 = uses
        self.copy_uses0 = copy_uses
        self.count = np.bincount([d for *_, d in self.program], minlength=D).tolist()
        self.n_out = np.bincount([int(ldev[j]) for j in self.remote], minlength=D).tolist()

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

    def _output(self, env, peak, transfers, transfer_bytes, executor) -> StepOutput:
        outs = [env[k] if k is not None else None for k in self.outputs]
        n_p, slots = self.n_p, self.slots
        params = outs[1:1 + n_p]
        flat_state = outs[1 + n_p:1 + n_p + n_p * slots]
        state = [flat_state[k * slots:(k + 1) * slots] for k in range(n_p)]
        grads = outs[1 + n_p + n_p * slots:1 + 2 * n_p + n_p * slots]
        return StepOutput(outs[0], params, state, grads, peak, transfers, transfer_bytes, executor)

    # ------------------------------------------------------------------ one step
    def run(self, flat, track_memory: bool = False, executor: str | None = None) -> StepOutput:
        """One step from the flat placeholder values. ``track_memory`` needs (and selects) the
        serial executor."""
        executor = "serial" if track_memory else (executor or self.executor)
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, not {executor!r}")
        return self.run_serial(flat, track_memory) if executor == "serial" else self.run_threaded(flat)

    def run_serial(self, flat, track_memory: bool = False) -> StepOutput:
        import torch

        ldev, devices = self.ldev, self.devices
        env: list = [None] * len(self.nodes)
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

        def fetcher(d):
            dst = devices[d]

            def fetch(i):
                nonlocal transfers, transfer_bytes
                v = env[i]
                if ldev[i] == d or not isinstance(v, torch.Tensor):
                    return v
                c = copies.get((i, d))
                if c is None:
                    c = v.to(dst, non_blocking=dst.type == "cuda") if v.device != dst else v
                    copies[(i, d)] = c
                    transfers += 1
                    b = _tensor_bytes(v)
                    transfer_bytes += b
                    if track_memory:
                        live[d] += b
                return c
            return fetch

        fetchers = [fetcher(d) for d in range(self.n_dev)]
        for kind, i, target, d in self.program:
            if kind == "attr":
                c = self.consts[i]
                env[i] = c.to(devices[d]) if c.device != devices[d] else c
            else:
                a, kw = self.builders[i](fetchers[d])
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
        return self._output(env, peak if track_memory else None, transfers, transfer_bytes, "serial")

    def run_threaded(self, flat) -> StepOutput:
        """One step on one worker thread and one transfer thread per cluster device (module docstring)."""
        import torch

        D, ldev, devices, nodes = self.n_dev, self.ldev, self.devices, self.nodes
        n_threads = torch.get_num_threads()
        cuda = [dv.type == "cuda" for dv in devices]
        if not hasattr(self, "_streams"):
            self._streams = {}
        streams, h2d, d2h = [None] * D, [None] * D, [None] * D
        for d, dv in enumerate(devices):
            if cuda[d]:
                if d not in self._streams:
                    self._streams[d] = (torch.cuda.Stream(dv), torch.cuda.Stream(dv), torch.cuda.Stream(dv))
                streams[d], h2d[d], d2h[d] = self._streams[d]
        for d, dv in enumerate(devices):  # behind whatever the calling thread queued (a serial step)
            if cuda[d]:
                now = torch.cuda.current_stream(dv)
                for st in self._streams[d]:
                    st.wait_stream(now)
        env: list = [None] * len(nodes)
        for k, v in zip(self.placeholders, flat):
            env[k] = v
        copies: dict[int, object] = {}  # producer * D + device -> its value there
        copy_event: dict[int, object] = {}  # the event a GPU consumer's stream waits for first
        pend = dict(self.pend0)
        uses = dict(self.uses0)
        copy_uses = dict(self.copy_uses0)
        persistent = self.persistent
        lock = threading.Lock()
        work = [queue.SimpleQueue() for _ in range(D)]
        out = [queue.SimpleQueue() for _ in range(D)]
        errors: list[BaseException] = []
        stats = [0, 0.0]  # transfers, bytes

        def abort(e):
            errors.append(e)
            for q in (*work, *out):
                q.put(None)

        def release(waiting, d):  # under the lock
            for k in waiting:
                pend[k] -= 1
                if pend[k] == 0:
                    work[d].put(k)

        def drop(j):  # under the lock
            uses[j] -= 1
            if uses[j] == 0 and j not in persistent:
                env[j] = None

        def worker(d):
            try:
                torch.set_num_threads(n_threads)
                dev, q, me = devices[d], work[d], d
                stream = streams[d]
                if stream is not None:
                    torch.cuda.set_device(dev)
                    torch.cuda.set_stream(stream)

                def f(j):
                    if ldev[j] == me:
                        return env[j]
                    key = j * D + me
                    ev = copy_event.pop(key, None)
                    if ev is not None:
                        stream.wait_event(ev[0])
                        if ev[1]:
                            copies[key].record_stream(stream)
                    return copies[key]

                for _ in range(self.count[d]):
                    i = q.get()
                    if i is None:
                        return
                    if i in self.consts:
                        c = self.consts[i]
                        env[i] = c.to(dev) if c.device != dev else c
                    else:
                        a, kw = self.builders[i](f)
                        env[i] = nodes[i].target(*a, **kw)
                        del a, kw
                    with lock:
                        for j in self.ins[i]:
                            if ldev[j] == me:
                                drop(j)
                            else:
                                key = j * D + me
                                copy_uses[(j, me)] -= 1
                                if copy_uses[(j, me)] == 0:
                                    copies.pop(key, None)
                        release(self.local_users.get(i, ()), me)
                    if i in self.remote:
                        ev = None
                        if stream is not None:
                            ev = torch.cuda.Event()
                            ev.record(stream)
                        out[d].put((i, ev))
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                abort(e)

        def mover(s):
            try:
                torch.set_num_threads(n_threads)
                if cuda[s]:
                    torch.cuda.set_device(devices[s])
                for _ in range(self.n_out[s]):
                    item = out[s].get()
                    if item is None:
                        return
                    j, ev = item
                    v = env[j]
                    synced = False
                    for d, waiting in self.remote[j]:
                        val, cev = None, None
                        data = (j, d) in self.data_remote
                        if data and isinstance(v, torch.Tensor):
                            val, cev, synced = self._move(v, s, d, ev, synced, streams, h2d, d2h)
                        elif data:
                            val = v
                        if not data and cuda[s] and ev is not None and not synced:
                            ev.synchronize()  # an ordering edge: the reader really finished
                            synced = True
                        with lock:
                            if data and isinstance(v, torch.Tensor):
                                stats[0] += 1
                                stats[1] += _tensor_bytes(v)
                            if data:
                                copies[j * D + d] = val
                                if cev is not None:
                                    copy_event[j * D + d] = cev
                                drop(j)
                            release(waiting, d)
                    del v
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                abort(e)

        for kind, i, _, d in self.program:
            if self.pend0[i] == 0:
                work[d].put(i)
        for j in self.placeholders:
            if j in self.remote:
                out[int(ldev[j])].put((j, None))
        threads = [threading.Thread(target=worker, args=(d,), name=f"placer-dev{d}", daemon=True) for d in range(D)]
        threads += [threading.Thread(target=mover, args=(d,), name=f"placer-out{d}", daemon=True)
                    for d in range(D) if self.n_out[d]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in sorted({str(dv) for dv, c in zip(devices, cuda) if c}):
            torch.cuda.synchronize(r)
        if errors:
            raise errors[0]
        return self._output(env, None, stats[0], stats[1], "threaded")

    def _move(self, v, s, d, ev, synced, streams, h2d, d2h):
        """``v`` (made on cluster device ``s``, ``ev`` behind it on a GPU) for device ``d``:
        ``(value, (event, record_stream) or None, synced)``."""
        import torch

        src, dst = self.devices[s], self.devices[d]
        if src == dst:
            if src.type == "cuda" and ev is not None:
                return v, (ev, True), synced
            return v, None, synced
        if src.type == "cuda" and dst.type == "cpu":  # device -> host into pinned memory, then wait
            return copy_to_host(v, d2h[s], ev), None, True
        if src.type == "cpu":  # host -> device from pinned memory; the consumer's stream waits
            c, done = copy_to_device(v, dst, h2d[d])
            return c, (done, True), synced
        # GPU -> another GPU: a peer copy on the source's copy stream
        with torch.cuda.device(src), torch.cuda.stream(d2h[s]):
            if ev is not None:
                d2h[s].wait_event(ev)
            c = v.to(dst, non_blocking=True)
            done = torch.cuda.Event()
            done.record(d2h[s])
        v.record_stream(d2h[s])
        return c, (done, True), synced
