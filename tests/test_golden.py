"""Golden tests: every registered method, run on one small problem with a fixed seed and budget,
must return the placement and step time committed in ``tests/golden/golden.json``, after evaluating
the same placements on the way (a digest of every objective it had simulated, in order: those the
Evaluator scored and those of the RL environments' own simulator, charged to it afterwards).

They guard the bench cache (see :mod:`placer.bench.runner`): a committed run stays current while its
method's version is unchanged, so an edit that is not meant to change what a method returns must
leave its golden result as it is. An edit that changes it on purpose bumps the method's version
(``register(..., version=N)``) and rewrites the fixture in the same commit:

    python tests/test_golden.py --write [METHOD ...]

Tolerances. Classical methods are plain integer and float64 NumPy / numba code: placement, step time
and the sequence of simulated placements must match exactly, on every processor. The learned methods
run PyTorch float32 kernels, whose last bits depend on the SIMD path torch and numpy take for the
processor (AVX-512, AVX2, baseline; ``ATEN_CPU_CAPABILITY``, ``NPY_DISABLE_CPU_FEATURES``); a policy
that samples placements turns a last-bit difference into another sample, then another search. Most
learned methods still reproduce bit for bit on the golden problem under every dispatch; those that do
not are in :data:`FLOAT_SENSITIVE`, each with the tolerance its golden test allows: another sequence
of simulated placements, and a returned placement with at most ``moved`` of the 24 ops on another
device and a step time within ``rtol`` of the golden one. That range is what the method returns on
this problem anyway when only its random stream changes (seeds 0-7, measured with
``python tests/test_golden.py --spread NAME``), so it says "another processor", not "another method".
The test then passes and warns (:class:`ProcessorDifference`) with what differed; anything beyond it,
or the same placement at another step time, fails. The fixture is written on the machine the
committed runs were made on (AVX-512).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import warnings
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FloatTolerance:
    """What a float-sensitive method's golden test accepts on another processor (module docstring)."""

    rtol: float  # the returned step time within this relative distance of the golden one
    moved: int  # at most this many ops on another device than in the golden placement
    why: str  # what was seen, and the method's own spread over seeds 0-7 that bounds it


# Measured on the golden problem (24 ops, 2 K80s + CPU; moved counts the two GPUs as interchangeable): the
# spread over seeds 0-7 (`--spread`), and what AVX2 / baseline dispatch gave at seed 3 (ATEN_CPU_CAPABILITY=avx2 /
# default with NPY_DISABLE_CPU_FEATURES); each tolerance covers that spread, with room (at most 16 of the 24 ops
# moved: seeds move up to 11): another processor's last bits act as another random stream once they change a sample
FLOAT_SENSITIVE = {
    "doppler": FloatTolerance(0.20, 16, "seeds: 0-11 ops moved, -18.7% to 0%; AVX2: 2 ops, 4,326.3 against 4,730.2 us "
                              "(-8.5%); baseline: 10 ops, 4,269.3 (-9.7%); a 2e-6 gradient difference also changes when its "
                              "imitation stage stops (docs/methods/doppler.md)"),
    "gdp": FloatTolerance(0.15, 16, "seeds: 0-10 ops moved, 0 to +11.6%; AVX2 and baseline: the golden placement "
                          "after another sequence of samples"),
    "hierarchical": FloatTolerance(0.10, 16, "seeds: 0-10 ops moved, -9.6% to +0.2%; AVX2: 10 ops, -0.35%; baseline: 8, "
                                   "-2.73%; 0.01-3.3% apart between an AMD EPYC and an Intel Xeon (README)"),
    "mars": FloatTolerance(0.05, 16, "seeds: 0-8 ops moved, all at 7,248.2 us; bit for bit here under every "
                           "dispatch, but its float32 seq2seq kernels are the Hierarchical Planner's"),
}


class ProcessorDifference(UserWarning):
    """A float-sensitive method returned, on this processor, another result within its tolerance."""


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


def golden_run(name: str, seed: int = SEED) -> dict:
    """What the fixture records for one method: its version, the placement, the step time and the
    digest of the objectives it simulated."""
    with objectives_seen() as seen:
        try:
            r = run_method(name, contract_problem(), Budget(placements=PLACEMENTS), seed)
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
    if got["placement"] == want["placement"]:  # the same placement simulates to the same bits on every processor
        assert got["step_time_us"] == want["step_time_us"] and got["objective_us"] == want["objective_us"]
        if got["digest"] == want["digest"]:
            return
    moved = _moved(got["placement"], want["placement"])
    rel = abs(got["step_time_us"] - want["step_time_us"]) / want["step_time_us"]
    tol = FLOAT_SENSITIVE.get(name)
    if tol is not None and moved <= tol.moved and rel <= tol.rtol:
        warnings.warn(ProcessorDifference(
            f"{name}: float32 kernels of this processor: {moved} ops moved, step time {got['step_time_us']:.1f} us against "
            f"{want['step_time_us']:.1f} ({rel:.2%}), another sequence of simulated placements (digest {got['digest']}); "
            f"allowed: {tol.moved} ops, {tol.rtol:.0%}"))
        return
    allowed = f" (beyond the {tol.moved} ops / {tol.rtol:.0%} a processor's float32 bits are allowed)" if tol else ""
    if got["placement"] == want["placement"]:
        pytest.fail(f"{name} (version {want['version']}) returned its golden placement but simulated other placements "
                    f"on the way ({got['simulated']} objectives, digest {got['digest']}, against {want['simulated']}, "
                    f"{want['digest']}): its search changed. Bump its version if that is meant")
    pytest.fail(f"{name} (version {want['version']}) returned another placement than its golden one: {moved} ops moved, "
                f"step time {got['step_time_us']:.1f} us against {want['step_time_us']:.1f}{allowed}. If the change is "
                f"meant, bump its version and rewrite the fixture; if not, it is a regression")


def _moved(a: str, b: str) -> int:
    """Ops on another device in placement ``a`` than in ``b``, the golden problem's two identical GPUs
    taken as interchangeable (a placement with them swapped is the same placement)."""
    x, y = np.frombuffer(a.encode(), "u1") - ord("0"), np.frombuffer(b.encode(), "u1") - ord("0")
    swapped = np.array([1, 0, 2], dtype=x.dtype)[x]  # devices: gpu:0, gpu:1 (both K80), cpu:0
    return int(min(np.sum(x != y), np.sum(swapped != y)))


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


def _spread(names: list[str]) -> None:
    """How far a method's result moves on the golden problem when only its seed changes (seeds 0-7):
    ops moved from the golden placement and step time against the golden one, per seed."""
    doc = _fixture()
    for name in names:
        want = doc[name]
        for seed in range(8):
            got = golden_run(name, seed)
            rel = got["step_time_us"] / want["step_time_us"] - 1
            print(f"{name} seed {seed}: {_moved(got['placement'], want['placement']):2d} ops moved, "
                  f"{got['step_time_us']:9.1f} us ({rel:+.1%}), placement {got['placement']}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] not in ("--write", "--spread"):
        sys.exit("usage: python tests/test_golden.py --write [METHOD ...] | --spread METHOD ...")
    unknown = sorted(set(args[1:]) - set(METHODS))
    if unknown:
        sys.exit(f"unknown methods: {unknown}")
    _write(args[1:]) if args[0] == "--write" else _spread(args[1:])
