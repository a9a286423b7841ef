"""Benchmark graphs the project builds itself: the papers' models (with the ``torch`` extra) and
generated graphs. ``BUILTIN`` maps a name to a function returning an OpGraph."""

from __future__ import annotations

from typing import Callable

from placer.graph import OpGraph
from placer.zoo.doppler import DOPPLER_GRAPHS
from placer.zoo.models import ZOO, zoo_graph
from placer.zoo.synthetic import layered_training_graph

BUILTIN: dict[str, Callable[[], OpGraph]] = {
    "synthetic": lambda: layered_training_graph(400, seed=0, name="synthetic"),
    "synthetic-1k": lambda: layered_training_graph(1000, seed=0, name="synthetic-1k"),
    "synthetic-10k": lambda: layered_training_graph(10_000, seed=0, name="synthetic-10k"),
    "synthetic-80k": lambda: layered_training_graph(80_000, seed=0, name="synthetic-80k"),
}
BUILTIN.update(DOPPLER_GRAPHS)  # DOPPLER's dataflow workloads (placer.zoo.doppler)
# the papers' models (captured with the torch extra on first use, then cached on disk)
BUILTIN.update({name: (lambda name=name: zoo_graph(name)) for name in ZOO})
