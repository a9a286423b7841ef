"""What the bound tests' random instances share (tests/test_lowerbound.py, tests/test_lowerbound_comm.py):
the communication models they cycle through and a random cluster of ``D`` devices of models ``m0``,
``m1``, ... with links of their own between some pairs."""

from __future__ import annotations

import numpy as np

from placer.cluster import Device, make_cluster

MODELS = ("placeto", "p2p", "giph", "link")


def random_cluster(rng: np.random.Generator, D: int, model: str, name: str, memory=1e12, bw_low: float = 2.0,
                   shared_links: bool = True):
    """``D`` devices ``d0``.. of models ``m0``.. (``memory``: one capacity for all or one per device); each
    ordered pair gets, half of the time, a link of its own (bandwidth in [``bw_low``, 20), latency in [0,
    5)); the default link is drawn the same way. Under the ``link`` model (``shared_links``) ``d0`` and
    ``d1`` share one bus half of the time. The draws come in that order from ``rng``."""
    mem = list(memory) if np.ndim(memory) else [float(memory)] * D
    devs = [Device(f"d{d}", "gpu", f"m{d}", mem[d]) for d in range(D)]
    pairs = {(a, b): (float(rng.uniform(bw_low, 20)), float(rng.uniform(0, 5)))
             for a in range(D) for b in range(D) if a != b and rng.random() < 0.5}
    meta = {"comm_model": model}
    if shared_links and model == "link" and rng.random() < 0.5:
        meta["shared_links"] = {"bus": [["d0", "d1"], ["d1", "d0"]]}
    return make_cluster(name, devs, float(rng.uniform(bw_low, 20)), float(rng.uniform(0, 5)), pairs=pairs, meta=meta)
