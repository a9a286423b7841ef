"""PipeDream's pipeline objective (Narayanan et al., "PipeDream: Generalized Pipeline Parallelism for
DNN Training", SOSP 2019) for PipeDream profiles or any training graph.

A stage is the set of ops on one device; a layer's backward op must share its forward op's stage.
In the 1F1B steady state (section 3.2) one minibatch completes every max over stages of the stage's
forward + backward time and over stage pairs of the transfer of the activations and gradients
crossing between them (section 3.1: T(i->j) and C_j; compute and communication overlap). The stage
graph must be acyclic (a pipeline order exists). Memory (sections 3.2-3.3): the stage at position s
of S keeps S - s minibatches in flight, each with its own stashed weights and forward activations.
Replication of a stage (section 3.1's m) is not modelled: a placement maps each op to one device.
"""

from __future__ import annotations

import numpy as np

from placer.graph import BACKWARD
from placer.objectives.base import Objective, ObjectiveBatch
from placer.objectives.kernels import OK, OOM, STATUS_TEXT, pipeline_batch
from placer.objectives.model import batch_of, model_for


class PipelineObjective(Objective):
    """Time per minibatch of a 1F1B pipeline, one stage per device (PipeDream, section 3)."""

    name = "pipeline"
    contiguous = True
    cpu_contiguous = True

    def _arrays(self, problem):
        a = problem.__dict__.get("_pipeline_arrays")
        if a is None:
            g = problem.graph
            bw = np.array(problem.bandwidth_bytes_per_us, dtype=np.float64)
            lat = np.array(problem.latency_us, dtype=np.float64)
            np.fill_diagonal(bw, np.inf)
            mirror_ok_ops = np.flatnonzero((g.role == BACKWARD) & (g.mirror >= 0))
            a = (np.ascontiguousarray(g.output_bytes, dtype=np.float64), np.ascontiguousarray(g.edge_src),
                 np.ascontiguousarray(g.edge_dst), np.ascontiguousarray(g.edge_bytes, dtype=np.float64), bw, lat,
                 mirror_ok_ops, g.mirror[mirror_ok_ops])
            problem.__dict__["_pipeline_arrays"] = a
        return a

    def _run(self, problem, P):
        m = model_for(problem)
        act, es, ed, eb, bw, lat, bwd, fwd_of = self._arrays(problem)
        k = len(P)
        out, status = np.empty(k), np.zeros(k, dtype=np.int64)
        used, stage = np.zeros((k, m.D)), np.zeros((k, m.D))
        pipeline_batch(P, m.t_us, m.mem_bytes, act, m.cap_bytes, es, ed, eb, m.forward, bw, lat, out, status, used, stage)
        mirrored = (P[:, bwd] == P[:, fwd_of]).all(axis=1) if len(bwd) else np.ones(k, dtype=bool)
        return m, out, status, used, mirrored

    def evaluate_batch(self, problem, placements, n_jobs=None) -> ObjectiveBatch:
        from placer.objectives.published import _colocation_ok

        P = batch_of(problem, placements)
        m, out, status, used, mirrored = self._run(problem, P)
        valid = (status == OK) & mirrored & _colocation_ok(m, P)
        obj = np.where(valid, out, np.inf)
        return ObjectiveBatch(obj, obj.copy(), used, status == OOM, valid)

    def check(self, problem, placement) -> str | None:
        from placer.objectives.published import _colocation_ok

        P = batch_of(problem, np.asarray(getattr(placement, "devices", placement)))
        m, out, status, used, mirrored = self._run(problem, P)
        if not mirrored[0]:
            return "a backward op is not on its forward op's stage"
        if not _colocation_ok(m, P)[0]:
            return "a colocation group is split across devices"
        return None if status[0] == OK else STATUS_TEXT[int(status[0])]

    def repair(self, problem, placement) -> np.ndarray:
        from placer.objectives.units import repair_contiguous

        return repair_contiguous(problem, self, placement)
