"""A budget bounds a method's whole cost, its fixed work included (issue 60): DOPPLER's Stage I runs
at most as many imitation updates as the budget has placements (search mode and policy training),
and a run whose rollouts are small work runs the rollout as plain Python, with the kernel's results
bit for bit, instead of compiling the kernel; the kernel compiles for one signature whatever the
graph."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

from placer.methods import Budget, run_method
from placer.methods.learned import doppler as D
from placer.methods.learned import doppler_rollout as R
from placer.problem import Problem
from placer.resolve import resolve_cluster, resolve_graph
from placer.zoo.synthetic import layered_training_graph
from tests.test_method_contract import contract_problem

FAST = {"hidden": 16, "layers": 2}
TINY = {"format": "placer", "version": 1, "kind": "graph",
        "ops": [{"name": n, "compute_us": {"gpu": c, "cpu": 2 * c}} for n, c in (("a", 1), ("b", 2), ("c", 3))],
        "edges": [["a", "b", 8], ["b", "c", 8]]}


def _imitation_updates(result) -> int:
    (note,) = [n for n in result.notes if "imitation updates" in n]
    return int(re.search(r"(\d+) imitation updates", note).group(1))


def test_stage_one_runs_at_most_the_budgets_placements_in_updates():
    P = contract_problem()
    assert _imitation_updates(run_method("doppler", P, Budget(5), 3)) == 5  # version 1 ran 108 here
    assert _imitation_updates(run_method("doppler", P, Budget(24), 3)) == 24
    r = run_method("doppler", P, Budget(400), 3)
    assert 24 < _imitation_updates(r) < 400  # stopped by its own rule once the budget leaves room
    assert r.cost.placements == 400


def test_policy_training_caps_stage_one_at_the_placements_per_graph():
    P = contract_problem()
    lines: list[dict] = []
    cfg = D.DopplerConfig(**FAST, log_every=1)
    D.DOPPLER_METHOD.train([P, P], cfg, 0, placements=8, progress=lines.append)  # 4 per graph
    assert [x["step"] for x in lines if x["stage"] == 1] == [0, 1, 2, 3]


def _problems():
    return [contract_problem(), Problem(layered_training_graph(60, seed=2), resolve_cluster("k80x4"))]


@pytest.mark.parametrize("mode", ["greedy", "epsilon", "softmax", "forced"])
@pytest.mark.parametrize("which", [0, 1])
def test_plain_python_rollout_equals_the_kernel_bit_for_bit(mode, which):
    import torch

    P = _problems()[which]
    cfg = D.DopplerConfig(**FAST)
    torch.manual_seed(which)
    c, net = D.Ctx(P, cfg), D.make_net(cfg)
    h = D.embed_np(net, c, D.tensors_of(c))
    forced = None
    if mode == "forced":
        rec = D.episode(c, h, net, np.random.default_rng(4), 0.5)
        forced = (rec.order, rec.placement)
    recs = []
    for kernel in (R.rollout, R.rollout_py):
        c.rollout = kernel
        rng = None if mode in ("greedy", "forced") else np.random.default_rng(11)
        recs.append(D.episode(c, h, net, rng, 0.3 if mode == "epsilon" else 0.0, forced=forced))
    a, b = recs
    for field in ("order", "cand_ptr", "cands", "cand_row", "row_node", "row_x", "sel_k", "plc_x", "plc_ok", "act",
                  "logp", "placement"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field
    assert len(set(a.placement.tolist())) > 1 or mode == "greedy"


def test_one_compiled_signature_serves_every_graph(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    cfg = D.DopplerConfig(**FAST)
    for P in [Problem(resolve_graph(str(path)), resolve_cluster("k80x4")), *_problems()]:
        c, net = D.Ctx(P, cfg), D.make_net(cfg)
        for name, dtype in D.KERNEL_ARRAYS.items():
            a = getattr(c, name)
            assert a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable, name
        assert c.rollout is R.rollout  # no episode count: the compiled kernel
        D.episode(c, D.embed_np(net, c, D.tensors_of(c)), net, np.random.default_rng(0), 0.2)
    assert len(R.rollout.signatures) == 1


def test_a_tiny_budget_compiles_nothing_and_places_as_the_kernel_does(tmp_path):
    """In a fresh process (nothing compiled yet): DOPPLER at --budget 5 on a 3-op graph runs the
    plain-Python rollout (the kernel has no signature afterwards), and the same run once the kernel
    is compiled returns the same placement and best-so-far curve."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    code = f"""
import json, numpy as np
from placer.methods import Budget, run_method
from placer.methods.learned import doppler as D, doppler_rollout as R
from placer.problem import Problem
from placer.resolve import resolve_cluster, resolve_graph
P = Problem(resolve_graph({str(path)!r}), resolve_cluster("k80x4"))
def run():
    r = run_method("doppler", P, Budget(5), 0)
    return r.placement.devices.tolist(), [[int(n), float(y)] for n, y in r.curve], r.cost.placements
first = run()
compiled_after_first = len(R.rollout.signatures)
c = D.Ctx(P, D.DopplerConfig())
net = D.make_net(D.DopplerConfig())
D.episode(c, D.embed_np(net, c, D.tensors_of(c)), net)  # compiles (or loads) the kernel
assert R.pick(1, 1) is R.rollout
print(json.dumps([first, compiled_after_first, run()]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    first, compiled, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert compiled == 0
    assert first == second and first[2] == 5
