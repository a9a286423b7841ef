"""Placement methods, one module each, all with the contract of :mod:`placer.methods.base`: the
classical ones here and in :mod:`placer.methods.list_scheduling`, the learned ones in
:mod:`placer.methods.learned`.

Importing this package registers every method; ``placer methods`` lists them.
"""

from placer.methods import baselines  # noqa: F401
from placer.methods import partitioning  # noqa: F401
from placer.methods import list_scheduling  # noqa: F401
from placer.methods import expert  # noqa: F401
from placer.methods import layer_split  # noqa: F401
from placer.methods import local_search  # noqa: F401
from placer.methods import multilevel  # noqa: F401
from placer.methods import exact  # noqa: F401
from placer.methods import dp_split  # noqa: F401
from placer.methods import published_greedy  # noqa: F401
from placer.methods import exact_published  # noqa: F401
from placer.methods import learned  # noqa: F401  (Post, Placeto, ColocRL, HP, GDP, Mars, DOPPLER, GiPH)
from placer.methods import incumbents  # noqa: F401
from placer.methods.base import METHODS, Budget, Evaluator, get_method, register, run_method

__all__ = ["METHODS", "Budget", "Evaluator", "get_method", "register", "run_method"]
