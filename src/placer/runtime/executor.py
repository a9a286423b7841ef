"""The placed training step, executed as PyTorch runs model-parallel code: one host thread issues
every GPU's work asynchronously, CPU devices compute on worker threads.

A :class:`~placer.frontends.torch.Capture` keeps the traced aten program (forward, backward and
optimizer update as one fx graph). :class:`~placer.runtime.plan.StepPlan` decides where every fx
node runs, the order the host issues them in (the simulator's start times, when given) and the
straight-line stretches between crossings. :class:`PlacedStep` runs that plan:

* **Lane 0, the calling thread**, issues the nodes of every cluster device mapped to a GPU, in the
  issue order: each cluster GPU has its own CUDA stream, and the host never waits for a kernel.
  Between two GPUs a value goes through an event recorded behind its producer (the consumer's
  stream waits on it), and a copy on the source's copy stream when the real devices differ.
* **Every cluster device mapped to the CPU** runs its nodes on a worker thread of its own (torch
  releases the interpreter lock inside an op, so CPU ops and GPU issue overlap). When no GPU has
  work the calling thread takes the first CPU device.
* **Hand-over** between threads is a box per (value, consuming device): a ``threading.Event`` and
  the value. GPU -> CPU: the issuing thread queues a non-blocking copy into pinned memory on the
  GPU's device-to-host stream behind an event and goes on; the CPU worker waits for the copy's
  event (a blocking wait, no spinning). CPU -> GPU: the worker copies into pinned memory and queues
  a non-blocking copy on the GPU's host-to-device stream; the GPU stream waits on that copy's event,
  the host only for the box. An ordering edge (a buffer written back after its readers) hands over
  "done" the same way (from a GPU, an event the CPU waits for).
* **Generated code.** Every stretch is one Python function generated with torch.fx (a sub-graph of
  the captured program, ``device=`` arguments rewritten to the real device): the host runs a
  stretch of aten calls with no interpreter loop per node, and fx frees every value after its last
  use inside it. A single-device placement is one function, the captured program itself.
  ``annotate=True`` wraps each node in a ``record_function`` range ``placer#<node index>`` (the
  GPU profile, :mod:`placer.cost.gpu_profile`, attributes kernels to nodes by them).

Numerics: every op gets the same inputs as in the unplaced program and runs with the same intra-op
thread count (a random op its own generator, seeded per step from one draw of the global
generator: its mask does not depend on the placement or the threads' timing), so the loss, the gradients, the new parameters and optimizer state equal the single
device run bit for bit on the CPU (``tests/test_runtime.py``). The step's outputs are the loss,
the new parameters and optimizer state, and the gradients; feeding the new state back gives the
next step. The step ends when every thread finished and every GPU used is synchronised.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from placer.runtime.plan import StepPlan


@dataclass
class StepOutput:
    loss: object
    params: list
    state: list  # per parameter, its optimizer slots
    grads: list
    peak_bytes: np.ndarray  # per cluster device, counted live tensor bytes (StepPlan.counted_peak_bytes)
    transfers: int
    transfer_bytes: float


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


def copy_to_host_async(v, stream, after=None):
    """GPU tensor ``v`` -> ``(CPU tensor in pinned memory, event)``: a non-blocking copy queued on
    ``stream`` behind event ``after``; the host does not wait (whoever reads the copy synchronises
    the event, a blocking wait)."""
    import torch

    with torch.cuda.device(v.device), torch.cuda.stream(stream):
        if after is not None:
            stream.wait_event(after)
        c = v.to("cpu", non_blocking=True)  # torch pins a non-blocking device-to-host destination
        done = torch.cuda.Event(blocking=True)
        done.record(stream)
    v.record_stream(stream)
    return c, done


def copy_to_host(v, stream, after=None):
    """:func:`copy_to_host_async`, then wait for the copy (``benchmarks/fidelity.py`` times the link with it)."""
    c, done = copy_to_host_async(v, stream, after)
    done.synchronize()
    return c


def copy_to_device(v, dst, stream):
    """CPU tensor ``v`` -> device ``dst``: copied into pinned memory on the host, then a
    non-blocking copy on ``stream``; returns ``(tensor, event)``, the event recorded behind the
    copy (the consumer's stream waits on it; the host does not)."""
    import torch

    p = _pinned_copy(v)
    with torch.cuda.device(dst), torch.cuda.stream(stream):
        c = p.to(dst, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    return c, done


def _range_enter(name):
    import torch

    r = torch.profiler.record_function(name)
    r.__enter__()
    return r


def _range_exit(r, value):
    r.__exit__(None, None, None)


class _Abort(Exception):
    """Another lane failed: this one stops (the first error is raised by :meth:`PlacedStep.run`)."""


class _Box:
    __slots__ = ("ready", "val", "event")

    def __init__(self):
        self.ready = threading.Event()
        self.val = None
        self.event = None

    def put(self, val, event):
        self.val, self.event = val, event
        self.ready.set()


def generate(plan: StepPlan, seg, device, annotate: bool = False):
    """The Python function (torch.fx codegen) of one stretch: ``fn(None, *ins) -> outs``."""
    import torch.fx as fx

    nodes = plan.nodes
    index = {n: i for i, n in enumerate(nodes)}
    g = fx.Graph()
    ph = {k: g.placeholder(f"v{k}" if k >= 0 else f"gen{-1 - k}") for k in seg.ins}
    new: dict = {}
    inside = set(seg.nodes)

    def arg(x):
        j = index[x]
        k = plan.key(j, seg.device)
        return new[x] if (k == j and j in inside) else ph[k]

    random = set(plan.random)
    for i in seg.nodes:
        n = nodes[i]
        h = g.call_function(_range_enter, (f"placer#{i}",)) if annotate else None
        m = g.node_copy(n, arg)
        if "device" in m.kwargs:
            m.kwargs = {**m.kwargs, "device": device}
        if i in random:
            m.kwargs = {**m.kwargs, "generator": ph[plan.generator_key(i)]}
        new[n] = m
        if annotate:
            g.call_function(_range_exit, (h, m))
    g.output(tuple(new[nodes[k]] for k in seg.outs))
    code = g.python_code("self")
    ns = dict(code.globals)
    exec(compile(code.src, f"<placer stretch {seg.lane}.{seg.device}.{seg.nodes[0]}>", "exec"), ns)  # noqa: S102 - fx's own codegen
    return ns["forward"]


class PlacedStep:
    """One training step of ``capture`` under ``placement`` (op -> cluster device index) on
    ``real`` (cluster device index -> ``cpu`` / ``cuda:k``), issued in the order of ``priority``
    (per op, e.g. the simulator's start times; ``None``: the program's order)."""

    def __init__(self, capture, placement, real: list[str], priority=None, annotate: bool = False):
        import torch

        self.plan = plan = StepPlan(capture, placement, real, priority)
        self.capture = capture
        self.real = list(real)
        self.devices = [torch.device(r) for r in self.real]
        self.n_dev = len(self.real)
        self.n_p, self.n_b, self.slots, self.n_in = plan.n_p, plan.n_b, plan.slots, plan.n_in
        self.placeholders = plan.placeholders
        self.ldev = plan.ldev
        self.annotate = annotate
        gm = capture.gm
        self.consts = {}
        for i in plan.attrs:
            c = getattr(gm, plan.nodes[i].target)
            dev = self.devices[plan.ldev[i]]
            self.consts[i] = c.to(dev) if isinstance(c, torch.Tensor) and c.device != dev else c
        for segs in plan.lanes:
            for seg in segs:
                seg.fn = generate(plan, seg, self.devices[seg.device], annotate)
        self.generators = {i: torch.Generator(device=self.devices[plan.ldev[i]]) for i in plan.random}
        self.lane_init = [[k for k in plan.initial if plan.lane_of[plan.ldev[k]] == L]
                          + [plan.generator_key(i) for i in plan.random if plan.lane_of[plan.ldev[i]] == L]
                          for L in range(plan.n_lanes)]
        self._streams: dict[int, tuple] = {}
        self._peak = None
        self.last_issue_us = float("nan")  # the last step: from its start until the calling thread issued all its work
        self.transfers, self.transfer_bytes = plan.transfers()

    @property
    def n_lanes(self) -> int:
        return self.plan.n_lanes

    def counted_peak_bytes(self) -> np.ndarray:
        if self._peak is None:
            self._peak = self.plan.counted_peak_bytes()
        return self._peak

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

    def _output(self, value) -> StepOutput:
        outs = [value(k) if k is not None else None for k in self.plan.outputs]
        n_p, slots = self.n_p, self.slots
        params = outs[1:1 + n_p]
        flat_state = outs[1 + n_p:1 + n_p + n_p * slots]
        state = [flat_state[k * slots:(k + 1) * slots] for k in range(n_p)]
        grads = outs[1 + n_p + n_p * slots:1 + 2 * n_p + n_p * slots]
        return StepOutput(outs[0], params, state, grads, self.counted_peak_bytes(), self.transfers, self.transfer_bytes)

    def _stream_set(self, d):
        """(compute, host-to-device, device-to-host) streams of cluster device ``d`` (a GPU)."""
        import torch

        s = self._streams.get(d)
        if s is None:
            dv = self.devices[d]
            s = self._streams[d] = (torch.cuda.Stream(dv), torch.cuda.Stream(dv), torch.cuda.Stream(dv))
        return s

    # ------------------------------------------------------------------ one step
    def run(self, flat) -> StepOutput:
        """One step from the flat placeholder values (module docstring)."""
        import torch

        t0 = time.perf_counter_ns()
        plan = self.plan
        init = dict(zip(plan.placeholders, flat))
        init.update(self.consts)
        if self.generators:  # one draw of the global generator per step seeds every random op's own
            base = int(torch.randint(0, 2**62, (1,)).item())
            for i, gen in self.generators.items():
                gen.manual_seed(base + i)
                init[plan.generator_key(i)] = gen
        gpus = sorted({d for d in range(self.n_dev) if plan.cuda[d] and d in {s.device for s in plan.lanes[0]}})
        real_gpus = sorted({str(self.devices[d]) for d in gpus})
        prev = {r: torch.cuda.current_stream(r) for r in real_gpus}
        prev_dev = torch.cuda.current_device() if real_gpus else None
        for d in range(self.n_dev):  # made here, before any worker thread asks for them
            if plan.cuda[d]:
                self._stream_set(d)
        for d in gpus:  # behind whatever the calling thread queued before the step
            for st in self._stream_set(d):
                st.wait_stream(prev[str(self.devices[d])])
        boxes = {(j, d): _Box() for (j, d) in plan.crossings
                 if j not in plan.initial and plan.lane_of[plan.ldev[j]] != plan.lane_of[d]}
        errors: list[BaseException] = []
        envs: list = [None] * plan.n_lanes
        n_threads = torch.get_num_threads()

        def lane(L):
            try:
                if L:
                    torch.set_num_threads(n_threads)
                with torch.no_grad():
                    envs[L] = self._run_lane(L, init, boxes, errors)
            except _Abort:
                pass
            except BaseException as e:  # noqa: BLE001 - raised by the calling thread
                errors.append(e)
                for b in boxes.values():
                    b.ready.set()

        threads = [threading.Thread(target=lane, args=(L,), name=f"placer-lane{L}", daemon=True)
                   for L in range(1, plan.n_lanes)]
        for t in threads:
            t.start()
        try:
            lane(0)
            self.last_issue_us = (time.perf_counter_ns() - t0) / 1e3
        finally:
            for t in threads:
                t.join()
            for r in real_gpus:
                torch.cuda.set_stream(prev[r])
            if prev_dev is not None:
                torch.cuda.set_device(prev_dev)
            for r in sorted({str(dv) for dv in self.devices if dv.type == "cuda"}):
                torch.cuda.synchronize(r)
        if errors:
            raise errors[0]

        def value(k):
            if k in init:
                return init[k]
            return envs[plan.lane_of[plan.ldev[k]]][k]

        return self._output(value)

    def _fetch(self, v, d):
        """A value that existed before the step (parameter, state, input, constant) for device ``d``."""
        import torch

        dst = self.devices[d]
        if not isinstance(v, torch.Tensor) or v.device == dst:
            return v
        if dst.type == "cpu":
            return v.to("cpu")
        compute, h2d, _ = self._stream_set(d)
        if v.device.type == "cpu":
            c, ev = copy_to_device(v, dst, h2d)
            compute.wait_event(ev)
        else:
            with torch.cuda.device(dst), torch.cuda.stream(compute):
                c = v.to(dst, non_blocking=True)
        c.record_stream(compute)
        return c

    def _run_lane(self, L, init, boxes, errors) -> dict:
        import torch

        plan, devices, ldev, lane_of = self.plan, self.devices, self.plan.ldev, self.plan.lane_of
        env = {k: init[k] for k in self.lane_init[L]}
        pending: dict = {}  # GPU -> GPU in this lane: (value, event)
        cur = None
        Tensor = torch.Tensor
        for seg in plan.lanes[L]:
            d = seg.device
            gpu = plan.cuda[d]
            stream = self._stream_set(d)[0] if gpu else None
            for j, data in seg.recv:
                k = plan.key(j, d)
                if j in plan.initial:
                    if data:
                        env[k] = self._fetch(init[j], d)
                    continue
                if lane_of[ldev[j]] == L:
                    val, ev = pending.pop((j, d))
                    stream.wait_event(ev)
                else:
                    box = boxes[(j, d)]
                    box.ready.wait()
                    if errors:
                        raise _Abort()
                    val, ev = box.val, box.event
                    if ev is not None:
                        if gpu:
                            stream.wait_event(ev)
                        else:
                            ev.synchronize()
                if data:
                    if gpu and isinstance(val, Tensor) and val.is_cuda:
                        val.record_stream(stream)
                    env[k] = val
            if gpu and cur != d:
                torch.cuda.set_device(devices[d])
                torch.cuda.set_stream(stream)
                cur = d
            vals = seg.fn(None, *[env[k] for k in seg.ins])
            for k, v in zip(seg.outs, vals):
                env[k] = v
            for j, dd, data in seg.send:
                self._send(j, d, dd, data, env.get(j), stream, boxes, pending)
            for k in seg.free:
                env.pop(k, None)
        return env

    def _send(self, j, s, d, data, v, stream, boxes, pending):
        """Hand node ``j``'s value (or, without ``data``, its completion) from device ``s`` to ``d``."""
        import torch

        plan = self.plan
        tensor = data and isinstance(v, torch.Tensor)
        if plan.cuda[s]:
            ev = torch.cuda.Event(blocking=True)
            ev.record(stream)
            if plan.lane_of[d] == plan.lane_of[s]:  # another GPU issued by this thread
                if tensor and self.devices[d] != self.devices[s]:
                    _, _, d2h = self._stream_set(s)
                    with torch.cuda.device(self.devices[s]), torch.cuda.stream(d2h):
                        d2h.wait_event(ev)
                        c = v.to(self.devices[d], non_blocking=True)
                        ev = torch.cuda.Event()
                        ev.record(d2h)
                    v.record_stream(d2h)
                    v = c
                pending[(j, d)] = (v if data else None, ev)
            elif tensor:  # to a CPU worker: queue the copy, do not wait
                c, done = copy_to_host_async(v, self._stream_set(s)[2], after=ev)
                boxes[(j, d)].put(c, done)
            else:
                boxes[(j, d)].put(v if data else None, ev)
        elif tensor and plan.cuda[d]:  # a CPU worker to a GPU
            c, done = copy_to_device(v, self.devices[d], self._stream_set(d)[1])
            boxes[(j, d)].put(c, done)
        else:
            boxes[(j, d)].put(v if data else None, None)
