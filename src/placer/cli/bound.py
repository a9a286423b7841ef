"""`placer bound`: a proven lower bound on the step time of every placement (placer.lowerbound).

    placer bound inception_v3 --cluster k80x2
    placer bound giph:tasks=30,seed=1 --cluster giph-net:devices=4,seed=1 --seconds 10 --json
"""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, emit, load_problem, safe, sim_params, us
from placer.cli.options import ClusterOpt, GraphArg, JsonOpt, SimOpt, bounded


@app.command()
def bound(graph: str = GraphArg, cluster: str = ClusterOpt,
          seconds: Optional[float] = typer.Option(None, "--seconds", help="CP-SAT's deterministic time (its work "
                                                  "units, about a second each on one core; default 2, 0 runs no "
                                                  "solver, at most 3,600): the same value on any machine load. "
                                                  "CP-SAT solves graphs of up to 40 ops whole; on larger ones it "
                                                  "runs (on sub-problems) only when --seconds is given",
                                                  callback=bounded("bound.seconds", 10)),
          sim: str = SimOpt, as_json: bool = JsonOpt):
    """A lower bound on the step time of every placement that fits in memory: the best of several
    bounds (critical path, load LP, windows, CP-SAT on exact relaxations), each listed with the
    time it took. docs/bounds.md proves each one."""
    from placer.lowerbound import lower_bound

    P = load_problem(graph, cluster)
    sp = sim_params(sim, P)
    b = lower_bound(P, sp, seconds=seconds)
    data = {"graph": P.graph.name, "cluster": P.cluster.name, "ops": P.n_ops, "comm_model": sp.comm_model,
            **b.as_dict()}

    def render(d):
        console.print(f"lower bound {us(d['value_us'])} on the step time of every placement that fits in memory "
                      f"({safe(d['source'])}); {us(d['any_placement_us'])} on every placement; "
                      f"the old bound {us(d['old_us'])}")
        if d["best_known_us"] is not None:
            console.print(f"best placement seen {us(d['best_known_us'])}"
                          + (": proven optimal" if d["proven_optimal"] else ""))
        for c in d["candidates"]:
            console.print(f"  {safe(c['name']):<15} {us(c['value_us']):>14}  {c['seconds']:7.2f} s"
                          f"{'  (placements that fit)' if c['memory'] else ''}  {safe(c['note'])}")

    emit(data, as_json, render)
