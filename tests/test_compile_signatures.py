"""The simulator's compiled kernels have one specialisation each (issue 64): numba compiles a kernel
once per tuple of argument types, and a constant argument is typed as a literal, so one caller
passing ``False`` where another passes a bool compiles the kernel, and all it calls, twice (the
first command's compilation paid for sim_full and run_loop twice). In a fresh interpreter with an
empty numba cache (a cached kernel loads without compiling, and so without registering, what it
calls), every entry point of the simulator runs (Engine objective and full result, evaluate_many on
one and two threads, under each communication model); then each kernel of placer.sim.kernel, .loop,
.placeto_loop and .state must have at most one signature. The event loop and the entry points are compiled
once per communication model (kernel.py's PER_MODEL), each copy with one signature, and
:func:`test_default_model_compiles_only_its_own` checks that the default model compiles no other's."""

import json
import os
import subprocess
import sys

import pytest


def run_entry_points() -> dict:
    """Every simulator entry point, then {kernel: its signatures} for the kernels compiled."""
    import numpy as np
    from numba.core.registry import CPUDispatcher

    from placer.cluster import preset
    from placer.problem import Problem
    from placer.sim import SimParams, evaluate, evaluate_many, kernel, loop, placeto_loop, simulate, state
    from placer.zoo.synthetic import layered_training_graph

    P = Problem(layered_training_graph(60, seed=0), preset("k80x4"))
    rng = np.random.default_rng(0)
    P2 = rng.integers(0, 4, (3, P.n_ops))
    one = np.zeros(P.n_ops, dtype=np.int64)
    for model in ("placeto", "p2p", "giph", "link"):
        prm = SimParams(comm_model=model)
        for p in (P2[0], one, P2[1].astype(np.int32)):
            simulate(P, p, prm)
            evaluate(P, p, prm)
        evaluate_many(P, P2, prm)
        evaluate_many(P, P2, prm, n_jobs=2)
        evaluate_many(P, np.stack([one, one]), prm)
    out = {}
    for mod in (kernel, loop, placeto_loop, state):
        for name in dir(mod):
            f = getattr(mod, name)
            if isinstance(f, CPUDispatcher):
                out[f"{f.py_func.__module__}.{name}"] = [str(s) for s in f.signatures]
    return out


@pytest.mark.slow
def test_every_kernel_compiles_one_specialisation(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from test_compile_signatures import run_entry_points; "
            "print(json.dumps(run_entry_points()))")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    sigs = json.loads(out.stdout.strip().splitlines()[-1])
    names = ["placeto_loop.run_placeto", "placeto_loop.prepass", "state.views", "state.heap_cap"]
    for model in ("placeto", "p2p", "giph", "link"):  # each model's own loop and entry points (PER_MODEL)
        names += [f"kernel.sim_rows_{model}", f"loop.run_loop_{model}"]
    for name in names:
        assert sigs.get(f"placer.sim.{name}"), f"{name} was not compiled: the calls no longer reach it"
    many = {name: s for name, s in sigs.items() if len(s) > 1}
    assert not many, f"kernels compiled more than once: {many}"


CHILD_DEFAULT = """
import json, numpy as np
from numba.core.registry import CPUDispatcher
from placer.cluster import preset
from placer.problem import Problem
from placer.sim import evaluate_many, kernel, loop, simulate
from placer.zoo.synthetic import layered_training_graph
P = Problem(layered_training_graph(40, seed=0), preset("k80x2"))
p = np.zeros((2, P.n_ops), dtype=np.int64)
simulate(P, p[0])
evaluate_many(P, p)
print(json.dumps(sorted(k for mod in (kernel, loop) for k in dir(mod) if isinstance(getattr(mod, k), CPUDispatcher)
                        and getattr(mod, k).signatures)))
"""


@pytest.mark.slow
def test_default_model_compiles_only_its_own(tmp_path):
    """A command on the default (placeto) model compiles the placeto loop and entry points and no other
    model's: numba compiles every branch of a function, so one loop for all models paid for all four."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", CHILD_DEFAULT], env=env, capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    compiled = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"sim_rows_placeto", "run_loop_placeto"} <= set(compiled), compiled
    others = [k for k in compiled if k.endswith(("_p2p", "_giph", "_link"))]
    assert not others, f"the default model compiled other models' kernels: {others}"
