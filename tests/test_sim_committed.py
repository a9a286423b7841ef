"""The committed results still hold under today's simulator.

Run files key their cache by a code fingerprint in which the compiled kernel counts through its
pure-Python oracle (``placer.bench.runner.SPECIFIED_BY_ORACLE``): a faster kernel leaves the
committed runs current only if it computes the same bits. Beside the oracle properties
(tests/test_sim_properties.py), this re-simulates the best placement of every committed run whose
graph is cheap to rebuild (shared profiles, synthetic graphs, the generated families; zoo graphs
need a capture and are left to the property tests) and asserts the recorded step time, objective
and peaks exactly, under both tie-break orders and both simulator presets the experiments use."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from placer.bench import graphs as G
from placer.bench.experiments import EXPERIMENTS
from placer.bench.runner import decode_placement
from placer.problem import Problem
from placer.sim import SimParams, simulate

from conftest import SHARED_GRAPHS

RESULTS = Path(__file__).resolve().parents[1] / "results"
# graphs cheap to rebuild: the generated ones always, the shared profiles when they are here
CHEAP = ("synthetic", "family:", "giph:", "doppler-") + (("shared:",) if SHARED_GRAPHS.exists() else ())


def problem_of(exp, doc, graphs={}):
    """The Problem a run was made on: its row's graph and the cluster whose fingerprint it recorded
    (rows share a label across clusters). ``graphs`` caches a resolved graph per spec."""
    spec = doc["graph"]["spec"]
    if spec not in graphs:
        graphs[spec] = G.resolve_row_graph((spec,))
    g, _, path = graphs[spec]
    assert G.graph_fingerprint(g) == doc["spec"]["graph_fp"], f"{spec} changed since {exp} ran"
    for row in EXPERIMENTS[exp].rows:
        if row.label == doc["row"]:
            c = G.resolve_row_cluster(row.cluster, g, path)
            if G.cluster_fingerprint(c) == doc["spec"]["cluster_fp"]:
                return Problem(g, c)
    raise AssertionError(f"no row of {exp} is {doc['row']} on the recorded cluster")


def committed_runs():
    """(experiment, run document) of every committed simulator run on a cheap graph, the paper-budget
    ones under results/paper included (most of them made on other machines)."""
    out = []
    for f in sorted(RESULTS.glob("*/runs/*.json")) + sorted(RESULTS.glob("paper/*/runs/*.json")):
        doc = json.loads(f.read_text())
        res = doc.get("result") or {}
        if doc.get("status") == "ok" and res.get("objective_name") == "sim" and doc["graph"]["spec"].startswith(CHEAP):
            out.append((f.parent.parent.name, doc))
    return out


def test_every_committed_run_resimulates_to_its_recorded_bits():
    runs = committed_runs()
    # classical, real-graphs (both budgets) and generalization: 1,644 with the shared graphs, 249 without
    assert len(runs) > (1400 if SHARED_GRAPHS.exists() else 100)
    by_problem = defaultdict(list)
    for exp, doc in runs:
        by_problem[(exp, doc["row"], doc["spec"]["graph_fp"], doc["spec"]["cluster_fp"])].append(doc)
    checked, presets = 0, set()
    for (exp, label, _, _), docs in by_problem.items():
        problem = problem_of(exp, docs[0])
        for doc in docs:
            params = SimParams(**doc["spec"]["sim"])
            presets.add(params.tie_break)
            r = simulate(problem, decode_placement(doc["placement"]), params)
            want = doc["result"]
            assert (r.makespan_us, r.objective_us, r.oom) == (want["step_time_us"], want["objective"], want["oom"]), \
                f"{exp} / {label} / {doc['cluster']['name']} / {doc['method_label']} seed {doc['seed']}"
            assert np.array_equal(r.peak_memory_bytes, np.asarray(want["peak_memory_bytes"]))
            checked += 1
    assert checked == len(runs) and presets == {"index", "name"}


@pytest.mark.parametrize("tie_break", ["index", "name"])
def test_the_fast_objective_path_gives_the_recorded_bits_too(tie_break):
    """Methods score with the objective-only path (``Engine.objective``, :func:`evaluate_many`), which
    takes other code than :func:`simulate`: the recorded step times through it as well."""
    from placer.sim import engine, evaluate_many

    runs = [(e, d) for e, d in committed_runs() if d["spec"]["sim"]["tie_break"] == tie_break]
    assert runs
    for exp, doc in runs:
        problem = problem_of(exp, doc)
        params, p = SimParams(**doc["spec"]["sim"]), decode_placement(doc["placement"])
        assert engine(problem, params).objective(p) == doc["result"]["objective"]
        assert evaluate_many(problem, p[None, :], params).objective_us[0] == doc["result"]["objective"]
