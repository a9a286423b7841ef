"""Execute a placement of a captured PyTorch model for real, measure it, compare with the simulator.

* :mod:`placer.runtime.devices`: cluster devices -> the real devices torch sees (``--map``).
* :mod:`placer.runtime.plan`: :class:`~placer.runtime.plan.StepPlan`, where every fx node runs, the
  host's issue order (the simulator's schedule), the crossings and the straight-line stretches.
* :mod:`placer.runtime.executor`: :class:`PlacedStep`, the plan executed as PyTorch model-parallel
  code: one host thread issues every GPU's stretches (fx-generated functions) on per-device
  streams with events between them, CPU devices compute on worker threads of their own.
* :mod:`placer.runtime.profile_step`: real steps on one device recorded with ``torch.profiler``,
  kernels and issue time attributed per node (:mod:`placer.cost.gpu_profile`).
* :mod:`placer.runtime.measure`: :func:`run_placement` (rebuild from the graph's recipe, warm-up,
  timed steps, peak memory, the simulator's prediction beside it).

Needs the ``torch`` extra. Graphs without a PyTorch program (PipeDream, dnn-partitioning, the
generated families) cannot run; :func:`rebuild` says so in one line.
"""

from placer.runtime.devices import device_map, parse_map, visible_devices
from placer.runtime.measure import RunReport, rebuild, run_placement

__all__ = ["RunReport", "device_map", "parse_map", "rebuild", "run_placement", "visible_devices"]
