"""The learned placers, one module each, on ``protocol`` and ``driver``; importing the package registers
them (docs/architecture.md maps the modules)."""

from placer.methods.learned import post  # noqa: F401
from placer.methods.learned import placeto  # noqa: F401
from placer.methods.learned import colocrl  # noqa: F401
from placer.methods.learned import hierarchical  # noqa: F401
from placer.methods.learned import gdp  # noqa: F401
from placer.methods.learned import mars  # noqa: F401
from placer.methods.learned import doppler  # noqa: F401
from placer.methods.learned import giph  # noqa: F401
