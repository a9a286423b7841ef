"""CPU seconds of the op groupings the learned methods build first (issue 64), the compiled
acyclicity search against the Python one, and Post's whole run with each.

    python benchmarks/grouping_speed.py                    # nmt8 on k80x8, gnmt on k80x4
    python benchmarks/grouping_speed.py --graphs nmt8:k80x8 --post

"python" is :class:`placer.grouping.quotient.Quotient` with every merge decided by its plain Python
search (``Quotient._separate``, what the module ran before the compiled search) and no sharing of
the colocation step between groupings; "compiled" is the module as it is. Both give the same
groupings (checked here, and in tests/test_grouping_speedups.py). Times are process CPU seconds
(time.process_time), so load skews them less than wall time; each grouping is built cold (the
per-source memo emptied) except where a row says "shared".
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import placer.grouping as grouping
from placer.cli.common import load_problem
from placer.grouping.parts import metis_parts
from placer.grouping.quotient import Quotient


class PythonSearch(Quotient):
    def _separate_fast(self, a, b):
        return self._separate(a, b)


def use(kind: str) -> None:
    grouping.Quotient = PythonSearch if kind == "python" else Quotient
    grouping._COLOCATED.clear()


def cpu(f):
    t = time.process_time()
    out = f()
    return time.process_time() - t, out


def same(a, b) -> bool:
    return (a.n_groups == b.n_groups and np.array_equal(a.op_group, b.op_group)
            and np.array_equal(a.group_colocation, b.group_colocation))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="nmt8:k80x8,gnmt:k80x4")
    ap.add_argument("--post", action="store_true", help="also Post's whole run (its default budget, seed 0)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; process CPU seconds")
    print(f"{'graph':8} {'grouping':34} {'python s':>9} {'compiled s':>10} {'ratio':>6}  same")
    for item in args.graphs.split(","):
        name, cluster = item.split(":")
        P = load_problem(name, cluster)
        use("compiled")
        grouping.colocate(P.graph)  # the kernel compiled or loaded from the cache outside the timings
        jobs = [("colocate", lambda: grouping.colocate(P)),
                ("metis:64 (Post, Placeto)", lambda: grouping.make_grouping(P, "metis:64", 0)),
                ("metis parts 64 (Post)", lambda: metis_parts(P, 64, 0)),
                ("merge:64 on colocate (ColocRL)", lambda: grouping.merge_and_colocate(P, 64, base=grouping.colocate(P)))]
        tot = {"python": 0.0, "compiled": 0.0}
        for label, f in jobs:
            row = {}
            for kind in ("python", "compiled"):
                use(kind)
                row[kind] = cpu(f)
                tot[kind] += row[kind][0]
            print(f"{name:8} {label:34} {row['python'][0]:9.2f} {row['compiled'][0]:10.2f} "
                  f"{row['python'][0] / max(row['compiled'][0], 1e-9):6.1f}  {same(row['python'][1], row['compiled'][1])}")
        use("compiled")
        shared = cpu(lambda: [f() for _, f in jobs])[0]
        print(f"{name:8} {'all four, cold':34} {tot['python']:9.2f} {tot['compiled']:10.2f} "
              f"{tot['python'] / max(tot['compiled'], 1e-9):6.1f}")
        print(f"{name:8} {'all four again, colocation shared':34} {'':9} {shared:10.2f}")
        if args.post:
            from placer.methods.base import run_method

            res = {}
            for kind in ("python", "compiled"):
                use(kind)
                P2 = load_problem(name, cluster)
                res[kind] = cpu(lambda: run_method("post", P2, seed=0))
            a, b = res["python"][1], res["compiled"][1]
            print(f"{name:8} {'post, whole run':34} {res['python'][0]:9.2f} {res['compiled'][0]:10.2f} "
                  f"{res['python'][0] / max(res['compiled'][0], 1e-9):6.1f}  "
                  f"{np.array_equal(a.placement, b.placement) and a.step_time_us == b.step_time_us}")
    use("compiled")


if __name__ == "__main__":
    main()
