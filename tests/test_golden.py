"""Golden tests: every registered method, run on one small problem with a fixed seed and budget,
must return the placement and step time committed in ``tests/golden/golden.json``, after evaluating
the same placements on the way (a digest of every objective it had simulated, in order: those the
Evaluator scored and those of the RL environments' own simulator, charged to it afterwards).

They guard the bench cache (see :mod:`placer.bench.runner`): a committed run stays current while its
method's version is unchanged, so an edit that is not meant to change what a method returns must
leave its golden result as it is. An edit that changes it on purpose bumps the method's version
(``register(..., version=N)``) and rewrites the fixture in the same commit:

    python tests/test_golden.py --write [METHOD ...]

Tolerances. Classical methods are plain integer and float64 NumPy / numba code: placement and step
time must match exactly. The learned methods run PyTorch float32 kernels, whose results can differ in
the last bits between processor models (the project measured the Hierarchical Planner's runs
differing by 0.01-3.3% between an AMD EPYC and an Intel Xeon, other learned methods bit for bit); for
the methods in :data:`FLOAT_SENSITIVE` a different placement is accepted when its step time is
within :data:`FLOAT_RTOL` of the committed one, and the test says so. Every other mismatch fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from placer.methods import METHODS, Budget, run_method
from placer.methods.base import NotApplicable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_method_contract import contract_problem  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "golden" / "golden.json"
SEED = 3
PLACEMENTS = 400
# PyTorch float32 results seen to differ by processor (hierarchical, mars), or by float32 summation order alone
# (doppler: a 2e-6 gradient difference changed when its imitation stage stopped; docs/methods/doppler.md)
FLOAT_SENSITIVE = frozenset({"hierarchical", "mars", "doppler"})
FLOAT_RTOL = 0.05


@contextlib.contextmanager
def objectives_seen():
    """Collect every objective simulated during a method's run, in order (see the module docstring)."""
    from placer.methods import base

    seen: list[float] = []
    record, patches = base.Evaluator._record, []

    def _record(ev, placement, obj, fits=True):
        seen.append(float(obj))
        return record(ev, placement, obj, fits)

    patches.append((base.Evaluator, "_record", record))
    base.Evaluator._record = _record
    try:
        from placer.rl import env as rl_env
    except ImportError:  # no torch: no RL method runs
        rl_env = None
    if rl_env is not None:
        make = rl_env.simulator_scorer

        def scorer(gp, params=None):
            score = make(gp, params)

            def scored(op_placement):
                out = score(op_placement)
                seen.append(float(out[0]))
                return out
            return scored

        patches.append((rl_env, "simulator_scorer", make))
        rl_env.simulator_scorer = scorer
    try:
        yield seen
    finally:
        for obj, attr, orig in patches:
            setattr(obj, attr, orig)


def golden_run(name: str) -> dict:
    """What the fixture records for one method: its version, the placement, the step time and the
    digest of the objectives it simulated."""
    with objectives_seen() as seen:
        try:
            r = run_method(name, contract_problem(), Budget(placements=PLACEMENTS), SEED)
        except NotApplicable as e:
            return {"version": METHODS[name].version, "status": "does not apply", "reason": str(e)}
    digest = hashlib.sha256(" ".join(repr(x) for x in seen).encode()).hexdigest()[:16]
    return {"version": METHODS[name].version, "status": "ok",
            "placement": "".join(str(int(d)) for d in r.placement.devices),
            "step_time_us": float(r.sim.makespan_us), "objective_us": float(r.sim.objective_us),
            "placements": int(r.cost.placements), "simulated": len(seen), "digest": digest}


def _fixture() -> dict:
    return json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}


def test_every_registered_method_has_a_golden_result():
    missing = sorted(set(METHODS) - set(_fixture()))
    assert not missing, f"no golden result for {missing}: run `python tests/test_golden.py --write {' '.join(missing)}`"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_golden(name):
    why = METHODS[name].available()
    if why:
        pytest.skip(f"{name}: {why}")
    want = _fixture().get(name)
    if want is None:
        pytest.fail(f"no golden result for {name}")
    if want["version"] != METHODS[name].version:
        pytest.fail(f"{name} is at version {METHODS[name].version}, its golden result at {want['version']}: "
                    f"rewrite it with `python tests/test_golden.py --write {name}` in the commit that bumps the version")
    got = golden_run(name)
    assert got["status"] == want["status"], got.get("reason")
    if got["status"] != "ok":
        return
    assert got["placements"] <= PLACEMENTS
    if got["placement"] == want["placement"] and got["digest"] == want["digest"]:
        assert got["step_time_us"] == want["step_time_us"] and got["objective_us"] == want["objective_us"]
        return
    rel = abs(got["step_time_us"] - want["step_time_us"]) / want["step_time_us"]
    if name in FLOAT_SENSITIVE and rel <= FLOAT_RTOL:
        pytest.xfail(f"{name}: another placement ({rel:.2%} step time apart): float32 kernels of this processor")
    if got["placement"] == want["placement"]:
        pytest.fail(f"{name} (version {want['version']}) returned its golden placement but simulated other placements "
                    f"on the way ({got['simulated']} objectives, digest {got['digest']}, against {want['simulated']}, "
                    f"{want['digest']}): its search changed. Bump its version if that is meant")
    changed = int(np.sum(np.frombuffer(got["placement"].encode(), "u1") != np.frombuffer(want["placement"].encode(), "u1")))
    pytest.fail(f"{name} (version {want['version']}) returned another placement than its golden one: {changed} ops moved, "
                f"step time {got['step_time_us']:.1f} us against {want['step_time_us']:.1f}. If the change is meant, "
                f"bump its version and rewrite the fixture; if not, it is a regression")


def _write(names: list[str]) -> None:
    doc = _fixture()
    for name in names or sorted(METHODS):
        if METHODS[name].available():
            print(f"{name}: unavailable here ({METHODS[name].available()}), kept as it was")
            continue
        doc[name] = golden_run(name)
        print(f"{name}: {doc[name].get('step_time_us', doc[name]['status'])}")
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(dict(sorted(doc.items())), indent=1) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "--write":
        sys.exit("usage: python tests/test_golden.py --write [METHOD ...]")
    unknown = sorted(set(args[1:]) - set(METHODS))
    if unknown:
        sys.exit(f"unknown methods: {unknown}")
    _write(args[1:])
