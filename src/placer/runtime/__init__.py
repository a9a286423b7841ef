"""Execute a placement of a captured PyTorch model for real, measure it, compare with the simulator.

* :mod:`placer.runtime.devices`: cluster devices -> the real devices torch sees (``--map``).
* :mod:`placer.runtime.executor`: :class:`PlacedStep`, the captured aten program run op by op,
  each op on its device, copies where an edge crosses devices.
* :mod:`placer.runtime.measure`: :func:`run_placement` (rebuild from the graph's recipe, warm-up,
  timed steps, peak memory, the simulator's prediction beside it).

Needs the ``torch`` extra. Graphs without a PyTorch program (PipeDream, dnn-partitioning, the
generated families) cannot run; :func:`rebuild` says so in one line.
"""

from placer.runtime.devices import device_map, parse_map, visible_devices
from placer.runtime.measure import RunReport, rebuild, run_placement

__all__ = ["RunReport", "device_map", "parse_map", "rebuild", "run_placement", "visible_devices"]
