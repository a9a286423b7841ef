"""The list schedulers (HEFT, m-ETF, m-SCT, m-TOPO); importing the package registers them."""

from placer.methods.list_scheduling import schedulers  # noqa: F401 (registers heft, m-etf, m-sct, m-topo)
