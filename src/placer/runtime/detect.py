"""This machine as a cluster: its devices from the driver, their speed and every link measured.

* :func:`model_key`: the compute-cost key of a real device of this machine (the key a measured
  profile is stored under and a detected cluster device looks up first).
"""

from __future__ import annotations

import os
import re

from placer.errors import InputError

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


__all__ = ["cpu_model_name", "model_key"]
