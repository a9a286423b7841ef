"""The two cost models of Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph
Operators", NeurIPS 2020 (section 3, "Computational model"; Appendix A for non-contiguous splits):

* ``latency``: single-sample latency. Each accelerator's ops are cut into contiguous pieces, each
  piece runs atomically (inputs in, compute, outputs out, in sequence), CPUs run in parallel without
  limit and pay no transfers; the graph contracted by the pieces must be acyclic. ``pieces`` is the
  paper's ``q`` (Appendix A): 1 (default, the paper's IP) makes contiguity a constraint;
  ``pieces=any`` scores any split the way their evaluator does (cut into as many pieces as needed).
* ``throughput``: max-load = time per sample of the pipelined split. Forward ops on each device form a
  contiguous set (their DP and ``ip.py contig``, contiguity also on the CPU); memory: the ``size`` of
  an accelerator's ops at most its capacity. ``contiguous=false`` is ``ip.py noncontig``.

Both are in the workload's own time unit (the dnn-partitioning inputs: milliseconds, kept as
microseconds here: value_us / 1000 is the paper's number).
"""

from __future__ import annotations

import numpy as np

from placer.objectives.base import Objective, ObjectiveBatch
from placer.objectives.kernels import OK, OOM, STATUS_TEXT, latency_batch, maxload_batch
from placer.objectives.model import batch_of, model_for


def _colocation_ok(m, P: np.ndarray) -> np.ndarray:
    free = m.coloc_rep == np.arange(m.n)
    if free.all():
        return np.ones(len(P), dtype=bool)
    return (P == P[:, m.coloc_rep]).all(axis=1)


class _Published(Objective):
    unit_ms = True

    def _finish(self, m, P, out, status, used) -> ObjectiveBatch:
        coloc = _colocation_ok(m, P)
        valid = (status == OK) & coloc
        obj = np.where(valid, out, np.inf)
        return ObjectiveBatch(obj, obj.copy(), used, status == OOM, valid)

    def check(self, problem, placement) -> str | None:
        m = model_for(problem)
        P = batch_of(problem, np.asarray(getattr(placement, "devices", placement)))
        status = self._status(problem, P)
        if not _colocation_ok(m, P)[0]:
            return "a colocation group is split across devices"
        return None if status == OK else STATUS_TEXT[status]

    def _status(self, problem, P) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def repair(self, problem, placement) -> np.ndarray:
        from placer.objectives.units import repair_contiguous

        return repair_contiguous(problem, self, placement)


class LatencyObjective(_Published):
    """Single-sample latency (Tarnawski et al. 2020, section 3; Appendix A for ``pieces`` > 1)."""

    name = "latency"

    def __init__(self, pieces: int | None = 1):
        self.pieces = pieces  # None: any number of pieces per accelerator
        self.contiguous = pieces == 1
        self.cpu_contiguous = False

    def describe(self) -> str:
        return "latency" if self.pieces == 1 else f"latency:pieces={self.pieces or 'any'}"

    def _run(self, problem, P):
        m = model_for(problem)
        k = len(P)
        out, status, used = np.empty(k), np.zeros(k, dtype=np.int64), np.zeros((k, m.D))
        q = m.n + 1 if self.pieces is None else int(self.pieces)
        latency_batch(P, m.acc, m.t_us, m.cost_us, m.mem_bytes, m.cap_bytes, m.pred_ptr, m.pred_idx,
                      m.succ_ptr, m.succ_idx, q, out, status, used)
        return m, out, status, used

    def evaluate_batch(self, problem, placements, n_jobs=None) -> ObjectiveBatch:
        P = batch_of(problem, placements)
        m, out, status, used = self._run(problem, P)
        return self._finish(m, P, out, status, used)

    def _status(self, problem, P) -> int:
        return int(self._run(problem, P)[2][0])


class ThroughputObjective(_Published):
    """Max-load / time per sample (Tarnawski et al. 2020, section 3), their memory rule."""

    name = "throughput"

    def __init__(self, contiguous: bool = True):
        self.contiguous = bool(contiguous)
        self.cpu_contiguous = bool(contiguous)

    def describe(self) -> str:
        return "throughput" if self.contiguous else "throughput:contiguous=false"

    def _run(self, problem, P):
        m = model_for(problem)
        k = len(P)
        out, status = np.empty(k), np.zeros(k, dtype=np.int64)
        used, load = np.zeros((k, m.D)), np.zeros((k, m.D))
        maxload_batch(P, m.acc, m.t_us, m.cost_us, m.mem_bytes, m.cap_bytes, m.pred_ptr, m.pred_idx,
                      m.succ_ptr, m.succ_idx, m.forward, self.contiguous, self.cpu_contiguous, out, status, used, load)
        return m, out, status, used, load

    def loads_us(self, problem, placement) -> np.ndarray:
        """Each device's load (the max of which is the objective)."""
        return self._run(problem, batch_of(problem, placement))[4][0]

    def evaluate_batch(self, problem, placements, n_jobs=None) -> ObjectiveBatch:
        P = batch_of(problem, placements)
        m, out, status, used, _ = self._run(problem, P)
        return self._finish(m, P, out, status, used)

    def _status(self, problem, P) -> int:
        return int(self._run(problem, P)[2][0])
