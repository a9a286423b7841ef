"""The committed results still hold under today's simulator.

Run files key their cache by a code fingerprint in which the compiled kernel counts through its
pure-Python oracle (``placer.bench.runner.SPECIFIED_BY_ORACLE``): a faster kernel leaves the
committed runs current only if it computes the same bits. Beside the oracle properties
(tests/test_sim_properties.py), this re-simulates the best placement of every committed run whose
graph is cheap to rebuild (shared profiles, synthetic graphs, the generated families; zoo graphs
need a capture and are left to the property tests) and asserts the recorded step time, objective
and peaks exactly, under both tie-break orders and both simulator presets the experiments use.

On any processor. The generated inputs are computed so that every machine gets the same bits (GiPH's
networks with a correctly rounded exp, :mod:`placer.zoo.exact`), but one is not: the synthetic
graphs draw numpy's log-normal, whose ``exp`` is the C library's, and glibc picks another variant on
an x86-64 processor without FMA (before 2013; ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA`` shows it
here). So when an input's fingerprint differs from the one a run recorded, the check looks at its
rounded fingerprint (floats to :data:`placer.bench.graphs.FP_DIGITS` significant digits, recorded for
every committed input in ``tests/golden/input_fingerprints.json``): equal there, the difference is
this processor's last bits, and the run must re-simulate to its recorded step time, objective and
peaks within :data:`PROCESSOR_RTOL` (the test passes and warns, naming the inputs); different there,
the input changed and the test fails. Refresh the table after committing runs on new inputs, on a
machine that computes the recorded fingerprints: ``python tests/test_sim_committed.py --write``.
"""

from __future__ import annotations

import functools
import json
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from placer.bench import graphs as G
from placer.bench.experiments import EXPERIMENTS
from placer.bench.runner import decode_placement
from placer.problem import Problem
from placer.sim import SimParams, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import SHARED_GRAPHS  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
ROUNDED = Path(__file__).resolve().parent / "golden" / "input_fingerprints.json"
# graphs cheap to rebuild: the generated ones always, the shared profiles when they are here
CHEAP = ("synthetic", "family:", "giph:", "doppler-") + (("shared:",) if SHARED_GRAPHS.exists() else ())
# Re-simulating an input whose floats are one ulp apart (2e-16 relative) moves a step time by a few
# ulps along its critical path (sums and maxima of such numbers); 1e-9 leaves room for thousands of
# ops and catches any change of schedule, which moves it by a whole op's time.
PROCESSOR_RTOL = 1e-9


class ProcessorDifference(UserWarning):
    """A committed run's input that this processor computes in other last bits (see the module docstring)."""


@functools.cache
def _rounded() -> dict:
    return json.loads(ROUNDED.read_text()) if ROUNDED.exists() else {"graphs": {}, "clusters": {}}


def _matches(kind: str, obj, recorded: str, fingerprint, why: list[str], what: str) -> bool:
    """Whether ``obj`` is the input a run recorded as ``recorded``: exactly, or (noting it in ``why``)
    up to this processor's last bits."""
    fp = fingerprint(obj)
    if fp == recorded:
        return True
    want = _rounded()[kind].get(recorded)
    if want is not None and fingerprint(obj, digits=G.FP_DIGITS) == want:
        why.append(f"{what}: fingerprint {fp} here, {recorded} recorded, equal at {G.FP_DIGITS} significant digits")
        return True
    return False


def problem_of(exp, doc, graphs={}):
    """(Problem a run was made on, the ways this processor computes its inputs differently: empty
    when bit for bit): its row's graph and the cluster whose fingerprint it recorded (rows share a
    label across clusters). ``graphs`` caches a resolved graph per spec."""
    spec = doc["graph"]["spec"]
    if spec not in graphs:
        graphs[spec] = G.resolve_row_graph((spec,))
    g, _, path = graphs[spec]
    why: list[str] = []
    recorded = doc["spec"]["graph_fp"]
    if not _matches("graphs", g, recorded, G.graph_fingerprint, why, f"graph {spec}"):
        rounded = f"not equal at {G.FP_DIGITS} digits either" if recorded in _rounded()["graphs"] else \
            "no rounded fingerprint recorded"
        raise AssertionError(f"{spec} changed since {exp} ran (fingerprint {G.graph_fingerprint(g)}, recorded "
                             f"{recorded}; {rounded})")
    changed = []
    for row in EXPERIMENTS[exp].rows:
        if row.label == doc["row"]:
            c = G.resolve_row_cluster(row.cluster, g, path)
            if _matches("clusters", c, doc["spec"]["cluster_fp"], G.cluster_fingerprint, why, f"cluster {row.cluster}"):
                return Problem(g, c), why
            changed.append(f"{row.cluster} is {G.cluster_fingerprint(c)}")
    # an input that changed on purpose (e.g. the communication model a cluster declares) fails until rerun
    raise AssertionError(f"no row of {exp} is {doc['row']} on the recorded cluster {doc['spec']['cluster_fp']} "
                         f"({'; '.join(changed) or 'no row has that label'}): rerun `placer bench {exp}` and commit "
                         "its runs, then `python tests/test_sim_committed.py --write`")


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


def _same(got: float, want: float, processor: bool) -> bool:
    return got == want or (processor and abs(got - want) <= PROCESSOR_RTOL * abs(want))


def _warn(differences: dict[str, int]) -> None:
    if differences:
        warnings.warn(ProcessorDifference(
            "inputs this processor computes in other last bits (its C library's or SIMD float functions), "
            f"their runs checked within {PROCESSOR_RTOL:g} relative: "
            + "; ".join(f"{w} ({n} runs)" for w, n in sorted(differences.items()))), stacklevel=2)


def test_every_committed_run_resimulates_to_its_recorded_bits():
    runs = committed_runs()
    # classical, real-graphs (both budgets) and generalization: 1,644 with the shared graphs, 249 without
    assert len(runs) > (1400 if SHARED_GRAPHS.exists() else 100)
    by_problem = defaultdict(list)
    for exp, doc in runs:
        by_problem[(exp, doc["row"], doc["spec"]["graph_fp"], doc["spec"]["cluster_fp"])].append(doc)
    checked, presets, differences = 0, set(), defaultdict(int)
    for (exp, label, _, _), docs in by_problem.items():
        problem, why = problem_of(exp, docs[0])
        for w in why:
            differences[w] += len(docs)
        for doc in docs:
            params = SimParams(**doc["spec"]["sim"])
            presets.add(params.tie_break)
            r = simulate(problem, decode_placement(doc["placement"]), params)
            want = doc["result"]
            where = f"{exp} / {label} / {doc['cluster']['name']} / {doc['method_label']} seed {doc['seed']}"
            assert r.oom == want["oom"], where
            processor = bool(why)
            assert _same(r.makespan_us, want["step_time_us"], processor) and \
                _same(r.objective_us, want["objective"], processor), \
                f"{where}: step time {r.makespan_us!r}, objective {r.objective_us!r}, recorded {want['step_time_us']!r}, " \
                f"{want['objective']!r}" + (f" (inputs in this processor's last bits: {why})" if why else "")
            peaks = np.asarray(want["peak_memory_bytes"])
            assert np.array_equal(r.peak_memory_bytes, peaks) or (
                why and np.allclose(r.peak_memory_bytes, peaks, rtol=PROCESSOR_RTOL, atol=0)), where
            checked += 1
    assert checked == len(runs) and presets == {"index", "name"}
    _warn(differences)


@pytest.mark.parametrize("tie_break", ["index", "name"])
def test_the_fast_objective_path_gives_the_recorded_bits_too(tie_break):
    """Methods score with the objective-only path (``Engine.objective``, :func:`evaluate_many`), which
    takes other code than :func:`simulate`: the recorded step times through it as well."""
    from placer.sim import engine, evaluate_many

    runs = [(e, d) for e, d in committed_runs() if d["spec"]["sim"]["tie_break"] == tie_break]
    assert runs
    differences = defaultdict(int)
    for exp, doc in runs:
        problem, why = problem_of(exp, doc)
        for w in why:
            differences[w] += 1
        params, p = SimParams(**doc["spec"]["sim"]), decode_placement(doc["placement"])
        want = doc["result"]["objective"]
        assert _same(engine(problem, params).objective(p), want, bool(why)), (exp, doc["row"], doc["method_label"], why)
        assert _same(evaluate_many(problem, p[None, :], params).objective_us[0], want, bool(why)), (exp, doc["row"], why)
    _warn(differences)


def test_every_committed_input_has_a_rounded_fingerprint():
    """The table the processor check reads covers every graph and cluster a committed cheap run names
    (refresh it with ``python tests/test_sim_committed.py --write``)."""
    table = _rounded()
    runs = committed_runs()
    missing = sorted({d["spec"]["graph_fp"] for _, d in runs} - set(table["graphs"])) + \
        sorted({d["spec"]["cluster_fp"] for _, d in runs} - set(table["clusters"]))
    assert not missing, f"no rounded fingerprint for {missing[:5]}: run `python tests/test_sim_committed.py --write`"


def test_a_processor_difference_is_told_from_a_changed_input():
    """An input one ulp off the recorded one (what another processor's float functions give) matches at
    the rounded fingerprint and is named; one changed in its sixth digit does not match at all."""
    import dataclasses
    import math

    from placer.resolve import resolve_cluster

    c = resolve_cluster("giph-net:devices=12,seed=13")
    recorded = G.cluster_fingerprint(c)
    assert recorded in _rounded()["clusters"]  # a committed learned-since row's network

    def with_speed(speed):
        devs = (dataclasses.replace(c.devices[5], peak_flops_per_us=speed),)
        return dataclasses.replace(c, devices=c.devices[:5] + devs + c.devices[6:])

    why: list[str] = []
    speed = c.devices[5].peak_flops_per_us
    assert _matches("clusters", with_speed(math.nextafter(speed, 0.0)), recorded, G.cluster_fingerprint, why, "net")
    assert len(why) == 1 and "equal at 9 significant digits" in why[0]
    assert not _matches("clusters", with_speed(speed * (1 + 1e-6)), recorded, G.cluster_fingerprint, [], "net")
    assert _matches("clusters", c, recorded, G.cluster_fingerprint, why, "net") and len(why) == 1


def _write() -> None:
    """Record the rounded fingerprint of every input a committed cheap run names, from inputs this
    machine computes bit for bit as recorded (any other is refused: its rounding would not be the run's)."""
    table: dict[str, dict[str, str]] = {"graphs": {}, "clusters": {}}
    first = {(e, d["row"], d["spec"]["graph_fp"], d["spec"]["cluster_fp"]): (e, d) for e, d in committed_runs()}
    for exp, doc in first.values():
        problem, why = problem_of(exp, doc)
        if why:
            sys.exit(f"this machine computes other bits for {exp} / {doc['row']} ({why}): write the table where "
                     "the recorded fingerprints are reproduced")
        table["graphs"][doc["spec"]["graph_fp"]] = G.graph_fingerprint(problem.graph, digits=G.FP_DIGITS)
        table["clusters"][doc["spec"]["cluster_fp"]] = G.cluster_fingerprint(problem.cluster, digits=G.FP_DIGITS)
    doc = {"digits": G.FP_DIGITS, "graphs": dict(sorted(table["graphs"].items())),
           "clusters": dict(sorted(table["clusters"].items()))}
    ROUNDED.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{ROUNDED}: {len(doc['graphs'])} graphs, {len(doc['clusters'])} clusters")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_sim_committed.py --write")
    _write()
