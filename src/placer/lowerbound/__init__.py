"""Lower bounds on the step time of every placement the simulator scores (docs/bounds.md).

:func:`lower_bound` is the one entry point; :mod:`.relax` states the relaxed problem every bound
is a bound of, :mod:`.load` the linear-programming load and window bounds, :mod:`.cpsat` the exact
relaxations solved with CP-SAT, :mod:`.engine` takes the best of them.
"""

from placer.lowerbound.engine import Bound, Candidate, lower_bound

__all__ = ["Bound", "Candidate", "lower_bound"]
