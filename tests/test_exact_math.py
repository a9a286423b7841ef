"""Generated inputs that do not depend on the processor (issue 60): placer.zoo.exact's exp and log are
correctly rounded, GiPH's device networks use them, and the generators give the same fingerprints with
numpy's SIMD dispatch at its best and at the baseline."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from decimal import Context, Decimal

import numpy as np
import pytest

from placer.bench import graphs as G
from placer.resolve import resolve_cluster
from placer.zoo import exact
from placer.zoo.giph import device_network

_FINE = Context(prec=120)  # far beyond the 60 digits exact works at: an independent reference


def _nearest(y: float, true: Decimal) -> bool:
    """Whether the double ``y`` is (one of) the nearest to ``true``."""
    d = abs(Decimal(y) - true)
    return all(d <= abs(Decimal(n) - true) for n in (math.nextafter(y, -math.inf), math.nextafter(y, math.inf)))


def test_exp_and_log_are_correctly_rounded():
    rng = np.random.default_rng(60)
    for x in np.concatenate([rng.uniform(-700, 700, 100), rng.uniform(-7, 7, 300)]).tolist():
        assert _nearest(exact.exp(x), Decimal(x).exp(_FINE)), x
    for x in np.concatenate([rng.uniform(1e-300, 1e-3, 50), rng.uniform(0.5, 1000, 300), [3.0, 1000.0, 1.0]]).tolist():
        assert _nearest(exact.log(x), Decimal(x).ln(_FINE)), x
    assert exact.exp(0.0) == 1.0 and exact.log(1.0) == 0.0 and exact.exp(1000.0) == math.inf and exact.exp(-1000.0) == 0.0
    with pytest.raises(ValueError):
        exact.log(0.0)


def test_giph_speeds_are_the_correctly_rounded_ones():
    """The two speeds numpy's AVX-512 exp (SVML) gave one ulp off on the committed 12-device network
    are the correctly rounded values now, as the C library's exp gives them."""
    c = device_network(12, 13)
    speeds = {d.name: d.peak_flops_per_us for d in c.devices}
    assert speeds["dev5"] == 16340.747458844382 and speeds["dev7"] == 4405.914381612235
    # devices and links alone (comm=placeto hashes no model): 5e9d768face9fd76 on AVX-512 before
    assert G.cluster_fingerprint(device_network(12, 13, comm="placeto")) == "0bc67c8c2b8afaac"
    assert G.cluster_fingerprint(resolve_cluster("giph-net:devices=6,seed=2,join=2,leave=1,comm=placeto")) == \
        "819b414f65ee8fbd"
    assert G.cluster_fingerprint(c) == "deb81583919d51ff"  # under GiPH's model, giph-net's default (issue 62)


_SPECS = {"graphs": ["giph:tasks=80,seed=103", "giph:tasks=40,seed=1", "synthetic", "doppler-tlayer"],
          "clusters": ["giph-net:devices=12,seed=13", "giph-net:devices=6,seed=2,join=2,leave=1",
                       "giph-net:devices=8,seed=3,join=3,leave=2", "giph-net:devices=256,seed=7,spread=1000"]}
_PRINT = """
import json, sys
from placer.bench import graphs as G
from placer.resolve import resolve_cluster
specs = json.loads(sys.argv[1])
print(json.dumps({"graphs": [G.graph_fingerprint(G.resolve_one(s)[0]) for s in specs["graphs"]],
                  "clusters": [G.cluster_fingerprint(resolve_cluster(s)) for s in specs["clusters"]]}))
"""


def _fingerprints(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _PRINT, json.dumps(_SPECS)], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_generated_inputs_do_not_depend_on_simd_dispatch():
    """numpy's dispatch limited to its baseline (every target it could dispatch disabled) and at this
    processor's best give the same fingerprints for GiPH's graphs and networks, the synthetic graph and
    DOPPLER's graphs: before issue 60, the 12-device network differed on an AVX-512 processor."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    best = _fingerprints({"NPY_DISABLE_CPU_FEATURES": ""})
    baseline = _fingerprints({"NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__)})
    assert best == baseline
