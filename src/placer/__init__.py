"""placer: fast device placements for neural-network training graphs."""

__version__ = "0.1.0"
