"""The list schedulers: HEFT, m-ETF, m-SCT and m-TOPO (:mod:`.schedulers`, the registered methods and
their schedules), the state they share, kept incrementally (:mod:`.state`), and m-SCT's favourite
children (:mod:`.favourites`). Importing the package registers the four methods."""

from placer.methods.list_scheduling import schedulers  # noqa: F401 (registers heft, m-etf, m-sct, m-topo)
