"""This machine as a cluster: its devices from the driver, their speed and every link measured.

* :func:`model_key`: the compute-cost key of a real device of this machine (the key a measured
  profile is stored under and a detected cluster device looks up first).
* :func:`detect_cluster`: every GPU torch sees (``gpu:0`` ... in torch's order, so the executor's
  rule maps ``gpu:k`` to ``cuda:k``) and the CPU, either as one device ``cpu:0`` running with all the
  cores this process may use, or as ``cpus`` single-thread devices ``cpu:0`` ... ``cpu:N-1``.

What is measured, and how (each figure a timed run of what :mod:`placer.runtime.executor` does):

* **Roofline figures per device** (graphs without measured costs get an estimate from them): the
  best rate of ``repeats`` timed float32 matrix multiplies at the device's thread count
  (``peak_flops_per_us``), of a large tensor copy (``mem_bw_bytes_per_us``, bytes read plus written)
  and the time of a one-element op (``launch_us``), as :mod:`placer.cost.host` measures the host.
* **Links**, ``latency_us + bytes / bandwidth_bytes_per_us`` fitted by least squares on the relative
  error of the medians of ``repeats`` timings at each of ``sizes`` (4 KiB to 64 MiB):

  - *host -> GPU*: the executor's :func:`~placer.runtime.executor.copy_to_device` (a copy into pinned
    memory, then a non-blocking copy on a copy stream), timed until its event completes;
  - *GPU -> host*: :func:`~placer.runtime.executor.copy_to_host` (non-blocking into pinned memory);
  - *GPU -> GPU*: a non-blocking copy on the source's stream, peer to peer where
    ``torch.cuda.can_device_access_peer`` says so, else through the host (the meta says which);
  - *CPU device -> CPU device* (``cpus`` >= 2): the executor's hand-over between two worker threads,
    each at one torch thread: the producer writes the tensor and puts it in a box (a
    ``threading.Event`` and the value, no copy); the consumer, blocked on the event, wakes and reads
    the whole tensor, then reads it again. The hand-over is the time from the put to the end of the
    first read, less the second read: the wake-up and the cost of reading data another core wrote,
    beyond the read the consuming op does anyway (its measured cost already holds that read).

  Every link between two CPU devices shares the one measured pair; every CPU device reaches a GPU
  over the same host link.
* **Memory** leaves the headroom a real run needs (:data:`GPU_RESERVE_FRACTION`,
  :data:`CPU_RESERVE_FRACTION`; the rule is written into the cluster's meta).

The date, the machine, every fitted link with the spread of its timings at each size and the
memory rule are recorded in ``cluster.meta['detected']``; ``meta['torch_threads']`` is the
intra-op thread count per CPU device the figures hold for (``placer run`` defaults to it).
Detection takes a few seconds; :func:`detected` caches it per process.
"""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from dataclasses import dataclass

import numpy as np

from placer.bounds import physical_memory
from placer.errors import InputError

KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = (4 * KiB, 64 * KiB, MiB, 8 * MiB, 64 * MiB)  # link timings: bytes per copy / hand-over
REPEATS = 7  # timed runs per size and figure (after one untimed warm-up)
MAX_REPEATS = 101
MAX_SIZE = 1 * GiB  # the largest tensor a link timing may copy (it is allocated several times over)
# a link whose time does not grow measurably with size (a hand-over moves no bytes) gets this bandwidth
# (100 TB/s: 0.7 us for 64 MiB): finite, so the cluster file stays plain JSON, and far above any real copy
BANDWIDTH_CAP_BYTES_PER_US = 1e8
# GPU memory headroom: the CUDA context of the process that runs (300-600 MiB, not yet made when the
# driver reports free memory in another process), cuBLAS / cuDNN workspaces and the caching
# allocator's fragmentation take a few hundred MiB to a few GiB, more on a larger GPU
GPU_RESERVE_FRACTION, GPU_RESERVE_MIN_BYTES = 0.10, 1 * GiB
# CPU memory headroom: the OS, the running Python process itself (torch alone holds about 0.5 GiB
# resident), pinned staging buffers and allocator fragmentation; the CPU devices share the rest
CPU_RESERVE_FRACTION, CPU_RESERVE_MIN_BYTES = 0.10, 2 * GiB

_CPU_NOISE = re.compile(r"\(r\)|\(tm\)|\b\d+-core\b|\bprocessor\b|\bcpu\b|@.*$")


def _normalise(name: str) -> str:
    """Lower case, trademark marks / ``N-Core`` / ``Processor`` / ``CPU`` / ``@ clock`` dropped, every
    run of other characters than ``a-z0-9.`` written ``-``, no ``-`` at either end."""
    s = _CPU_NOISE.sub(" ", name.lower())
    return re.sub(r"[^a-z0-9.]+", "-", s).strip("-") or "unknown"


def cpu_model_name() -> str:
    """The CPU's model name as the OS reports it (``/proc/cpuinfo``, else :mod:`platform`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Model", "cpu model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


def model_key(device: str, threads: int | None = None) -> str:
    """The compute-cost key of the real device ``device`` (``cpu``, ``cuda``, ``cuda:k``) of this machine.

    The format, fixed (profiles are stored and looked up under it):

    * a GPU: its model name from the driver (``torch.cuda.get_device_properties(k).name``),
      normalised: lower case, runs of characters other than ``a-z0-9.`` written ``-``, e.g.
      ``NVIDIA H200`` -> ``nvidia-h200``, ``Tesla V100-SXM2-16GB`` -> ``tesla-v100-sxm2-16gb``.
      A name that comes out without a ``-`` (``H100``) gets the prefix ``gpu-`` (``gpu-h100``).
      ``threads`` is ignored.
    * the CPU: its model name (``/proc/cpuinfo`` ``model name``, else :func:`platform.processor`),
      normalised the same way after dropping ``(R)``, ``(TM)``, ``N-Core``, ``Processor``, ``CPU``
      and an ``@ clock`` suffix, then ``/<threads>t``, the intra-op thread count the op runs with
      (``threads``, default ``torch.get_num_threads()``): e.g. ``AMD EPYC 7B13 64-Core Processor``
      with 1 thread -> ``amd-epyc-7b13/1t``, ``Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz`` with 4
      threads -> ``intel-xeon-e5-2686-v4/4t``.

    A key always holds a ``-`` or ``/`` or is ``unknown...``, so it never equals a preset's model key
    (``k80``, ``h100``) or a kind (``cpu``, ``gpu``).
    """
    dev = device.strip().lower()
    if dev == "cpu":
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        if not (isinstance(threads, int) and threads >= 1):
            raise InputError("model_key", f"threads {threads!r}", "is not a positive whole number", "give 1 or more")
        return f"{_normalise(cpu_model_name())}/{threads}t"
    if dev == "cuda" or re.fullmatch(r"cuda:\d+", dev):
        import torch

        k = int(dev.partition(":")[2] or 0)
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if k >= n:
            raise InputError("model_key", f"device '{device}'", f"is not a device torch sees here ({n} GPUs)",
                             "use cpu or a cuda:k torch sees")
        name = _normalise(torch.cuda.get_device_properties(k).name)
        return name if ("-" in name or name.startswith("unknown")) else f"gpu-{name}"
    raise InputError("model_key", f"device '{device}'", "is not a real device name", "use cpu or cuda:k")


# ---------------------------------------------------------------------- cores, memory
def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), the most CPU devices ``cpus`` may ask for."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    except OSError:
        pass
    return out


def cpu_memory() -> tuple[float, float, float]:
    """(total, available, usable) bytes of RAM: usable = available less the reserve
    ``max(CPU_RESERVE_MIN_BYTES, CPU_RESERVE_FRACTION * total)`` (module docstring)."""
    info = _meminfo()
    total = float(info.get("MemTotal", 0) or physical_memory() or 16.0 * GiB)
    avail = float(info.get("MemAvailable", total))
    usable = avail - max(CPU_RESERVE_MIN_BYTES, CPU_RESERVE_FRACTION * total)
    if usable <= 0:
        raise InputError("cluster here", "CPU memory", f"only {avail / GiB:.2f} GiB of {total / GiB:.2f} GiB are "
                         "available, less than the reserve a run needs", "free memory, then detect again", kind="cluster")
    return total, avail, usable


# ---------------------------------------------------------------------- timing
def _stats(xs) -> dict:
    """median, quartiles and range of timings (us) or rates, rounded for the meta."""
    q25, q50, q75 = (float(v) for v in np.percentile(xs, [25, 50, 75]))
    return {"median": round(q50, 3), "q25": round(q25, 3), "q75": round(q75, 3),
            "min": round(float(min(xs)), 3), "max": round(float(max(xs)), 3)}


def _time_us(fn, repeats: int, sync=None) -> list[float]:
    """``repeats`` timings of ``fn()`` in microseconds after one untimed run; ``sync`` (a GPU's
    synchronize) before the clock starts and before it stops."""
    fn()
    out = []
    for _ in range(repeats):
        if sync:
            sync()
        t0 = time.perf_counter_ns()
        fn()
        if sync:
            sync()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def fit_link(sizes, times_us) -> tuple[float, float]:
    """``(latency_us, bandwidth_bytes_per_us)`` of ``time = latency + bytes / bandwidth`` fitted to
    the timings by least squares on the relative error (each size counts alike, so the small sizes
    fix the latency and the large ones the bandwidth). Latency is at least 0; a time that does not
    grow with size gets :data:`BANDWIDTH_CAP_BYTES_PER_US`."""
    s = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times_us, dtype=np.float64)
    w = 1.0 / np.maximum(np.abs(t), 1.0)  # a median at or below 0 (a hand-over within noise) weighs as 1 us
    (a, b), *_ = np.linalg.lstsq(np.stack([w, s * w], axis=1), t * w, rcond=None)
    b_min = 1.0 / BANDWIDTH_CAP_BYTES_PER_US
    if b < b_min:  # no measurable cost per byte: the latency alone, with the bytes at the cap
        b = b_min
        a = float(np.sum(w * w * (t - b * s)) / np.sum(w * w))
    if a < 0:  # no measurable fixed cost: the bandwidth alone
        a = 0.0
        b = max(b_min, float(np.sum(w * w * s * t) / np.sum(w * w * s * s)))
    return float(a), float(1.0 / b)


@dataclass(frozen=True)
class LinkFit:
    """One measured link: where it runs, the fit and the timings behind it."""
    kind: str  # "handover" (CPU device -> CPU device), "h2d", "d2h" or "g2g" (what :func:`link_timings` times)
    src: str  # real endpoints: "cpu", "cuda:k"
    dst: str
    path: str  # what was timed, in words
    latency_us: float
    bandwidth_bytes_per_us: float
    sizes: tuple[int, ...]
    per_size: tuple[dict, ...]  # per size: _stats of the timings (us)

    def predict_us(self, nbytes: float) -> float:
        return self.latency_us + nbytes / self.bandwidth_bytes_per_us

    def to_meta(self) -> dict:
        return {"kind": self.kind, "src": self.src, "dst": self.dst, "path": self.path,
                "latency_us": round(self.latency_us, 3), "bandwidth_bytes_per_us": round(self.bandwidth_bytes_per_us, 1),
                "per_size": [{"bytes": int(b), **{f"{k}_us": v for k, v in st.items()}}
                             for b, st in zip(self.sizes, self.per_size)]}


def _fit(kind, src, dst, sizes, timings) -> LinkFit:
    med = [statistics.median(ts) for ts in timings]
    lat, bw = fit_link(sizes, med)
    return LinkFit(kind, src, dst, LINK_PATHS[kind], lat, bw, tuple(int(s) for s in sizes), tuple(_stats(ts) for ts in timings))


LINK_PATHS = {
    "handover": "hand-over between two worker threads at one torch thread each (threading.Event box, no copy): "
                "wake-up wall time plus the consumer's CPU time of its first read less its second",
    "h2d": "executor copy_to_device: into pinned memory, then non-blocking on a copy stream, until its event",
    "d2h": "executor copy_to_host: non-blocking into pinned memory on a copy stream, until its event",
    "g2g": "non-blocking copy on the source's stream, until its event",
}


def link_timings(kind: str, src: str, dst: str, sizes, repeats: int, threads: int = 1) -> list[list[float]]:
    """Per size, ``repeats`` timings (us) of one link as :func:`detect_cluster` measures it."""
    if kind == "handover":
        return handover_us(sizes, repeats, threads)
    if kind == "h2d":
        return h2d_us(int(dst.partition(":")[2]), sizes, repeats)
    if kind == "d2h":
        return d2h_us(int(src.partition(":")[2]), sizes, repeats)
    if kind == "g2g":
        return g2g_us(int(src.partition(":")[2]), int(dst.partition(":")[2]), sizes, repeats)
    raise ValueError(f"unknown link kind {kind!r}")


# ---------------------------------------------------------------------- CPU
class _Threads:
    """Set torch's intra-op thread count for a block, restored after."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.old)


def cpu_roofline(threads: int, repeats: int) -> dict:
    """Matmul rate, copy bandwidth and one-op time of the CPU at ``threads`` torch threads (module docstring)."""
    import torch

    n = 512 if threads <= 4 else 1024  # about 5 ms at one thread
    with _Threads(threads):
        a, b = torch.randn(n, n), torch.randn(n, n)
        mm = _time_us(lambda: torch.mm(a, b), repeats)
        x, y = torch.randn(16 * MiB // 4), torch.empty(16 * MiB // 4)
        cp = _time_us(lambda: y.copy_(x), repeats)
        one, k = torch.ones(1), 100
        op = _time_us(lambda: [torch.add(one, one) for _ in range(k)], repeats)
    flops = [2 * n**3 / t for t in mm]
    bw = [2 * 16 * MiB / t for t in cp]
    launch = [t / k for t in op]
    return {"peak_flops_per_us": max(flops), "mem_bw_bytes_per_us": max(bw), "launch_us": min(launch),
            "matmul_flops_per_us": _stats(flops), "copy_bytes_per_us": _stats(bw), "op_us": _stats(launch),
            "matmul_n": n, "copy_bytes": 16 * MiB}


def handover_us(sizes, repeats: int, threads: int = 1) -> list[list[float]]:
    """Per size, ``repeats`` timings (us) of the hand-over: :func:`handover_parts`, summed."""
    return [[w + d for w, d in per] for per in handover_parts(sizes, repeats, threads)]


def handover_parts(sizes, repeats: int, threads: int = 1) -> list[list[tuple[float, float]]]:
    """Per size, ``repeats`` timings (us, as ``(wake-up, data)``) of the executor's hand-over of a float32 tensor of that many
    bytes from one worker thread to another (module docstring), the sizes in interleaved rounds (a
    drift of the machine's load hits every size alike), after one untimed round.

    One hand-over: the producer writes the tensor and puts it in the box; the consumer, asleep on
    the box's event, wakes, reads the tensor whole, then reads it again. Its time is the wall time
    from the put until the consumer runs again, plus the consumer's CPU time of the first read less
    that of the second (``time.thread_time_ns``: a read preempted by another process on a loaded
    machine is not charged the time it did not run; a wake-up that waits for a free core is)."""
    import torch

    from placer.runtime.executor import _Box

    sizes = list(sizes)
    xs = [torch.zeros(max(1, s // 4)) for s in sizes]  # their pages are touched here, not inside a timing
    plan = [(r, k) for r in range(repeats + 1) for k in range(len(sizes))]
    n = len(plan)
    ready = [threading.Event() for _ in range(n)]
    done = [threading.Event() for _ in range(n)]
    boxes = [_Box() for _ in range(n)]
    put_ns, got = [0] * n, [(0, 0, 0, 0)] * n
    errors: list[BaseException] = []

    def consumer():
        try:
            torch.set_num_threads(threads)
            for i in range(n):
                ready[i].set()
                boxes[i].ready.wait()
                woke = time.perf_counter_ns()
                v = boxes[i].val
                c0 = time.thread_time_ns()
                v.sum()
                c1 = time.thread_time_ns()
                v.sum()
                got[i] = (woke, c0, c1, time.thread_time_ns())
                done[i].set()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)
            for ev in done:
                ev.set()

    def producer():
        try:
            torch.set_num_threads(threads)
            for i, (_, k) in enumerate(plan):
                ready[i].wait()
                time.sleep(0.0005)  # the consumer is asleep in its wait, as a worker waiting for its input is
                xs[k].fill_(float(i + 1))
                put_ns[i] = time.perf_counter_ns()
                boxes[i].put(xs[k], None)
                done[i].wait()
                if errors:
                    return
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            for b in boxes:
                b.ready.set()

    ts = [threading.Thread(target=f, name=f"placer-detect-{f.__name__}", daemon=True) for f in (consumer, producer)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    out: list[list[tuple[float, float]]] = [[] for _ in sizes]
    for i, (r, k) in enumerate(plan):
        if r:
            woke, c0, c1, c2 = got[i]
            out[k].append(((woke - put_ns[i]) / 1e3, ((c1 - c0) - (c2 - c1)) / 1e3))
    return out


# ---------------------------------------------------------------------- GPU
def gpu_roofline(k: int, repeats: int) -> dict:
    import torch

    dev = torch.device(f"cuda:{k}")
    sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    n = 4096
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    mm = _time_us(lambda: torch.mm(a, b), repeats, sync)
    nb = 256 * MiB
    x, y = torch.empty(nb // 4, device=dev), torch.empty(nb // 4, device=dev)
    cp = _time_us(lambda: y.copy_(x), repeats, sync)
    one, kk = torch.ones(1, device=dev), 200
    op = _time_us(lambda: [torch.add(one, one) for _ in range(kk)], repeats, sync)
    del a, b, x, y
    torch.cuda.empty_cache()
    flops = [2 * n**3 / t for t in mm]
    bw = [2 * nb / t for t in cp]
    launch = [t / kk for t in op]
    return {"peak_flops_per_us": max(flops), "mem_bw_bytes_per_us": max(bw), "launch_us": min(launch),
            "matmul_flops_per_us": _stats(flops), "copy_bytes_per_us": _stats(bw), "op_us": _stats(launch),
            "matmul_n": n, "copy_bytes": nb}


def gpu_memory(k: int) -> tuple[float, float, float]:
    """(total, free, usable) bytes of GPU ``k``: usable = free (this process's context already made)
    less ``max(GPU_RESERVE_MIN_BYTES, GPU_RESERVE_FRACTION * total)``."""
    import torch

    free, total = torch.cuda.mem_get_info(k)
    usable = free - max(GPU_RESERVE_MIN_BYTES, GPU_RESERVE_FRACTION * total)
    if usable <= 0:
        raise InputError("cluster here", f"cuda:{k}", f"has {free / GiB:.2f} GiB free of {total / GiB:.2f} GiB, "
                         "less than the reserve a run needs", "free the GPU or hide it with CUDA_VISIBLE_DEVICES",
                         kind="cluster")
    return float(total), float(free), float(usable)


def h2d_us(k: int, sizes, repeats: int) -> list[list[float]]:
    """Host -> ``cuda:k`` through the executor's :func:`~placer.runtime.executor.copy_to_device`."""
    import torch

    from placer.runtime.executor import copy_to_device

    dev = torch.device(f"cuda:{k}")
    stream = torch.cuda.Stream(dev)
    out = []
    for s in sizes:
        x = torch.randn(max(1, s // 4))
        out.append(_time_us(lambda: copy_to_device(x, dev, stream)[1].synchronize(), repeats,
                            lambda: torch.cuda.synchronize(dev)))
    return out


def d2h_us(k: int, sizes, repeats: int) -> list[list[float]]:
    """``cuda:k`` -> host through the executor's :func:`~placer.runtime.executor.copy_to_host`."""
    import torch

    from placer.runtime.executor import copy_to_host

    dev = torch.device(f"cuda:{k}")
    stream = torch.cuda.Stream(dev)
    out = []
    for s in sizes:
        g = torch.randn(max(1, s // 4), device=dev)
        out.append(_time_us(lambda: copy_to_host(g, stream), repeats, lambda: torch.cuda.synchronize(dev)))
        del g
    return out


def g2g_us(a: int, b: int, sizes, repeats: int) -> list[list[float]]:
    """``cuda:a`` -> ``cuda:b``: a non-blocking copy on a stream of the source, as the executor's
    GPU -> GPU hand-over; peer to peer where the driver allows it, else torch goes through the host."""
    import torch

    src, dst = torch.device(f"cuda:{a}"), torch.device(f"cuda:{b}")
    stream = torch.cuda.Stream(src)

    def sync():
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)

    def copy(v):
        with torch.cuda.device(src), torch.cuda.stream(stream):
            c = v.to(dst, non_blocking=True)
            ev = torch.cuda.Event(blocking=True)
            ev.record(stream)
        ev.synchronize()
        return c

    out = []
    for s in sizes:
        v = torch.randn(max(1, s // 4), device=src)
        out.append(_time_us(lambda: copy(v), repeats, sync))
        del v
    return out


# ---------------------------------------------------------------------- the cluster
def check_settings(cpus: int | None, repeats: int, sizes) -> None:
    """Bounds on what a caller asks for, checked before any measurement."""
    cores = usable_cores()
    if cpus is not None and not (isinstance(cpus, int) and not isinstance(cpus, bool) and 1 <= cpus <= cores):
        raise InputError("cluster here", f"cpus={cpus!r}", f"must be a whole number from 1 to {cores} "
                         "(the cores this process may use)", f"e.g. here:cpus={min(2, cores)}", kind="cluster")
    if not (isinstance(repeats, int) and 3 <= repeats <= MAX_REPEATS):
        raise InputError("detect", f"repeats={repeats!r}", f"must be 3 to {MAX_REPEATS}", "a median needs a few")
    sizes = list(sizes)
    if len(sizes) < 2 or any(not (isinstance(s, int) and 4 <= s <= MAX_SIZE) for s in sizes) or len(set(sizes)) != len(sizes):
        raise InputError("detect", f"sizes {sizes!r}", f"must be 2 or more distinct byte counts from 4 to {MAX_SIZE:,}",
                         "e.g. 4096 to 67108864")


def detect_cluster(cpus: int | None = None, *, repeats: int = REPEATS, sizes=SIZES, name: str | None = None):
    """This machine as a :class:`~placer.cluster.Cluster` (module docstring): every GPU torch sees,
    then the CPU as one device (``cpus`` None) or ``cpus`` single-thread devices."""
    import datetime
    import platform

    import torch

    from placer.cluster import Device, make_cluster

    check_settings(cpus, repeats, sizes)
    sizes = tuple(sorted(int(s) for s in sizes))
    t_start = time.perf_counter()
    cores = usable_cores()
    n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    n_cpu = 1 if cpus is None else cpus
    threads = cores if cpus is None else 1
    devices, dev_meta = [], []
    for k in range(n_gpu):
        total, free, usable = gpu_memory(k)
        roof = gpu_roofline(k, repeats)
        devices.append(Device(f"gpu:{k}", "gpu", model_key(f"cuda:{k}"), usable, roof["peak_flops_per_us"],
                              roof["mem_bw_bytes_per_us"], roof["launch_us"]))
        dev_meta.append({"name": f"gpu:{k}", "real": f"cuda:{k}", "driver_name": torch.cuda.get_device_properties(k).name,
                         "total_bytes": int(total), "free_bytes": int(free), **_roof_meta(roof)})
    total, avail, usable = cpu_memory()
    roof = cpu_roofline(threads, repeats)
    key = model_key("cpu", threads)
    for i in range(n_cpu):
        devices.append(Device(f"cpu:{i}", "cpu", key, usable / n_cpu, roof["peak_flops_per_us"],
                              roof["mem_bw_bytes_per_us"], roof["launch_us"]))
        dev_meta.append({"name": f"cpu:{i}", "real": "cpu", "threads": threads, **({"total_bytes": int(total),
                         "available_bytes": int(avail)} if i == 0 else {}), **(_roof_meta(roof) if i == 0 else
                         {"figures": "as cpu:0 (measured once: the CPU devices are alike)"})})

    index = {d.name: i for i, d in enumerate(devices)}
    gpu_names = [f"gpu:{k}" for k in range(n_gpu)]
    cpu_names = [f"cpu:{i}" for i in range(n_cpu)]
    pairs, links = {}, []

    def use(fit: LinkFit, src: list[str], dst: list[str], peer: bool | None = None):
        applied = [(a, b) for a in src for b in dst if a != b]
        for a, b in applied:
            pairs[(index[a], index[b])] = (fit.bandwidth_bytes_per_us, fit.latency_us)
        m = fit.to_meta()
        if peer is not None:
            m["path"] += ", peer to peer" if peer else ", through the host (torch.cuda.can_device_access_peer: no)"
            m["peer"] = peer
        links.append({**m, "applies_to": [f"{a}->{b}" for a, b in applied]})

    for k in range(n_gpu):
        use(_fit("h2d", "cpu", f"cuda:{k}", sizes, h2d_us(k, sizes, repeats)), cpu_names, [gpu_names[k]])
        use(_fit("d2h", f"cuda:{k}", "cpu", sizes, d2h_us(k, sizes, repeats)), [gpu_names[k]], cpu_names)
    for a in range(n_gpu):
        for b in range(n_gpu):
            if a != b:
                fit = _fit("g2g", f"cuda:{a}", f"cuda:{b}", sizes, g2g_us(a, b, sizes, repeats))
                use(fit, [gpu_names[a]], [gpu_names[b]], peer=bool(torch.cuda.can_device_access_peer(a, b)))
    if n_cpu > 1:
        use(_fit("handover", "cpu", "cpu", sizes, handover_us(sizes, repeats, threads)), cpu_names, cpu_names)
    meta = {
        "description": f"this machine as detected: {n_gpu} GPU(s), the CPU as "
                       + ("one device" if cpus is None else f"{n_cpu} single-thread device(s)"),
        "torch_threads": threads,
        "detected": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"hostname": platform.node(), "cpu": cpu_model_name(), "cores": cores, "torch": torch.__version__,
                        "cuda": torch.version.cuda, "gpus": n_gpu},
            "repeats": repeats, "sizes_bytes": list(sizes),
            "fit": "per link latency_us + bytes / bandwidth_bytes_per_us, least squares on the relative error of the "
                   "median timing at each size; per_size gives the median, quartiles and range of the timings",
            "devices": dev_meta,
            "links": links,
            "memory": {"gpu": f"free memory (after this process made its CUDA context) less max({GPU_RESERVE_MIN_BYTES / GiB:g} GiB, "
                              f"{GPU_RESERVE_FRACTION:.0%} of the total): the running process's own CUDA context, cuBLAS/cuDNN "
                              "workspaces and the caching allocator's fragmentation",
                       "cpu": f"available RAM less max({CPU_RESERVE_MIN_BYTES / GiB:g} GiB, {CPU_RESERVE_FRACTION:.0%} of the "
                              "total) for the OS, the Python process and pinned staging buffers, shared equally by the "
                              "CPU devices (they share the RAM)",
                       "cpu_usable_bytes": int(usable)},
            "seconds": round(time.perf_counter() - t_start, 2),
        },
    }
    label = name or ("here" if cpus is None else f"here:cpus={cpus}")
    return make_cluster(label, devices, BANDWIDTH_CAP_BYTES_PER_US, 0.0, pairs, meta, source="--cluster here")


def _roof_meta(roof: dict) -> dict:
    return {k: roof[k] for k in ("matmul_n", "matmul_flops_per_us", "copy_bytes", "copy_bytes_per_us", "op_us")}


# ---------------------------------------------------------------------- here, here:cpus=N
HERE_KEYS = ("cpus",)


def parse_here(spec: str) -> int | None:
    """``here`` -> None (the CPU as one device), ``here:cpus=N`` -> N; anything else refused in one line."""
    if spec == "here":
        return None
    head, sep, rest = spec.partition(":")
    if head != "here" or not sep or not rest.strip():
        raise InputError("cluster", f"'{spec}'", "is not here or here:cpus=N", "e.g. here:cpus=2", kind="cluster")
    got: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = (p.strip() for p in item.partition("="))
        if key not in HERE_KEYS or not eq:
            raise InputError("cluster", f"'{spec}': '{item}'", "is not a setting of here",
                             f"use {', '.join(k + '=N' for k in HERE_KEYS)}, e.g. here:cpus=2", kind="cluster")
        if key in got:
            raise InputError("cluster", f"'{spec}'", f"gives {key} twice", f"give it once, e.g. here:{key}={value}",
                             kind="cluster")
        got[key] = value
    text = got["cpus"]
    cores = usable_cores()
    if not re.fullmatch(r"\d{1,9}", text) or not 1 <= int(text) <= cores:
        raise InputError("cluster", f"'{spec}': cpus={text}", f"must be a whole number from 1 to {cores} "
                         "(the cores this process may use)", f"e.g. here:cpus={min(2, cores)}", kind="cluster")
    return int(text)


def cluster_threads(cluster) -> int | None:
    """The torch thread count a cluster's figures hold for (``meta['torch_threads']`` of a detected
    cluster, 1 for ``here:cpus=N``), when it is a whole number from 1 to 4 per usable core; else None."""
    t = dict(cluster.meta).get("torch_threads")
    ok = isinstance(t, int) and not isinstance(t, bool) and 1 <= t <= 4 * usable_cores()
    return t if ok else None


_DETECTED: dict = {}
_LOCK = threading.Lock()


def detected(cpus: int | None = None):
    """:func:`detect_cluster` with the default settings, measured once per process and ``cpus``."""
    with _LOCK:
        c = _DETECTED.get(cpus)
        if c is None:
            c = _DETECTED[cpus] = detect_cluster(cpus)
        return c


__all__ = ["LinkFit", "cluster_threads", "cpu_model_name", "detect_cluster", "detected", "fit_link", "handover_parts",
           "handover_us", "link_timings", "model_key", "parse_here", "usable_cores"]
