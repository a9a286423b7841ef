"""Run an experiment's cells on a Ray cluster (``placer bench ... --backend ray [--address HOST:PORT]``).

Each cell is one Ray task (one CPU) calling the runner's ``execute`` (:func:`placer.bench.runner.execute`)
on whichever machine Ray picks; the task writes its run file into a scratch folder there and returns
the document with the file's bytes, which the driver writes to ``results/`` as they are, so the
results land on the machine that asked for them whichever node computed them. A cell's result
depends only on its task (graph, cluster, method, seed, budget), so the serial, process and Ray
backends give the same documents (wall-clock fields aside).

Without ``--address`` (and no ``RAY_ADDRESS`` in the environment) a local Ray runtime with
``jobs`` CPUs is started for the run and stopped after it; with one, the driver joins that cluster
(every node needs the same placer installed) and leaves it running.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

from placer.errors import InputError
from placer.io import write_bytes_atomic


def _execute_remote(execute: Callable, task) -> tuple[dict, bytes | None]:
    """``execute(task)`` with the run file in the node's scratch folder: the document and the run
    file's bytes (None where the run wrote none, an error)."""
    import tempfile

    scratch = Path(tempfile.gettempdir()) / "placer-ray-runs" / os.path.basename(task.out)
    scratch.unlink(missing_ok=True)  # a file left by an earlier run must not pass for this one's
    doc = execute(dataclasses.replace(task, out=str(scratch)))
    return doc, (scratch.read_bytes() if scratch.exists() else None)


def ray_init(jobs: int, address: str | None = None):
    """Join the cluster at ``address`` (or ``$RAY_ADDRESS``), else start a local runtime with
    ``jobs`` CPUs. Returns (ray module, whether this call started it)."""
    try:
        import ray
    except ImportError:
        raise InputError("--backend", "ray", "is not installed", "pip install 'placer[ray]'") from None
    if ray.is_initialized():
        return ray, False
    address = address or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, int(jobs)), include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise InputError("--address", address or "local", f"Ray could not start or connect ({e})".replace("\n", " "),
                         "start a head node with `ray start --head` and pass its address") from None
    return ray, True


def run_cells_ray(cells: list, jobs: int, address: str | None, finish: Callable[[object, dict], None],
                  execute: Callable) -> None:
    """Execute ``cells`` (each with a ``task``, a :class:`placer.bench.runner.RunTask`) as Ray tasks running ``execute`` (the runner's); call
    ``finish(cell, doc)`` as each completes (in completion order), after writing its run file, when
    the run wrote one, where the driver wants it."""
    ray, started = ray_init(jobs, address)
    try:
        remote = ray.remote(num_cpus=1)(_execute_remote)
        pending = {remote.remote(execute, c.task): c for c in cells}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                cell = pending.pop(ref)
                doc, data = ray.get(ref)
                if data is not None:
                    out = Path(cell.task.out)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    write_bytes_atomic(out, data)
                finish(cell, doc)
    finally:
        if started:
            ray.shutdown()
