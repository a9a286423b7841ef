"""Fit the roofline model's ``host`` factors to per-op profiles of reduced zoo models on this CPU.

    python benchmarks/calibrate_host.py [--write] [--repeats 5]

Profiles :data:`CALIBRATION_SET` (small enough to profile in about a minute) with one torch thread
and, with ``--write``, stores the fit in ``src/placer/cost/calibrated.py``
(:func:`placer.cost.calibrate.write_calibration`). The zoo lives here, above the cost layer.
"""

from __future__ import annotations

import argparse
import pprint

from placer.cost.calibrate import calibrate_host, write_calibration
from placer.zoo.models import zoo_capture

# reduced zoo configurations used for the CPU fit
CALIBRATION_SET = [
    ("resnet50", dict(batch=8, image=64, blocks=(1, 1, 1, 1), base_width=32, classes=100)),
    ("inception_v3", dict(batch=2, image=107, classes=100)),
    ("nasnet_mobile", dict(batch=4, image=64, num_cells=3, filters=16, classes=100)),
    ("nmt2", dict(batch=32, length=8, hidden=256, vocab=4000)),
    ("bert_base", dict(batch=4, seq=64, layers=2, vocab=4000)),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write src/placer/cost/calibrated.py")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    fit = calibrate_host([(name, zoo_capture(name, **cfg)) for name, cfg in CALIBRATION_SET], a.repeats)
    pprint.pprint(fit)
    if a.write:
        print("wrote", write_calibration({"host": fit}))


if __name__ == "__main__":
    main()
