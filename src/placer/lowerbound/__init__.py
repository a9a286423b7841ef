"""Lower bounds on the step time of every placement the simulator scores (docs/bounds.md).

:func:`lower_bound` is the one entry point; :mod:`.relax` states the relaxed problem every bound
is a bound of (its heads and tails raised over nearby ancestors by :mod:`.fan`), :mod:`.load` the linear-programming load and window bounds, :mod:`.cpsat` the exact
relaxations solved with CP-SAT, :mod:`.engine` takes the best of them.
"""

from placer.lowerbound.engine import Bound, Candidate, lower_bound

# The bounds' behaviour as a version (a cache of bound values keys on it, beside placer.sim.VERSION):
# bumped whenever a bound's value changes on purpose.
VERSION = 5

__all__ = ["VERSION", "Bound", "Candidate", "lower_bound"]
