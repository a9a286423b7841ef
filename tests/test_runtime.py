"""placer.runtime: a placement of a captured model executed for real. On the CPU (CI) every
cluster device maps to ``cpu``; the placed step's loss and gradients equal the unplaced model's."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 16)
        self.out = nn.Linear(16, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).flatten(1)
        h = torch.tanh(self.fc(h))
        return self.out(h + torch.ones(h.shape[-1], device=h.device))


def build():
    return Net()
'''


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    d = tmp_path_factory.mktemp("rt")
    (d / "net.py").write_text(MODEL)
    from placer.build import capture_recipe

    recipe = {"kind": "factory", "target": f"{d / 'net.py'}:build", "kwargs": {},
              "inputs": [{"shape": [4, 3, 6, 6], "dtype": "float32"}], "loss": "cross-entropy",
              "optimizer": "sgd-momentum", "seed": 3}
    cap = capture_recipe(recipe, name="net")
    from placer.frontends.native import save_graph

    save_graph(cap.graph, d / "g.json")
    return d, cap.graph


def _split(g, n_dev=2):
    """Alternate blocks of ops over two devices (crossing edges everywhere), update ops with their parameter."""
    p = (np.arange(g.n_ops) // 3) % n_dev
    for i, c in enumerate(g.colocation):
        if c >= 0:
            p[i] = p[np.flatnonzero(g.colocation == c)[0]]
    return p


@pytest.mark.parametrize("n_dev", [2, 3])
def test_placed_step_equals_unplaced_model(captured, n_dev):
    from placer.build import build, recipe_of
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    single = PlacedStep(cap, np.zeros(g.n_ops, dtype=np.int64), ["cpu"])
    split = PlacedStep(cap, _split(g, n_dev), ["cpu"] * n_dev)
    assert split.n_lanes == n_dev and single.n_lanes == 1
    a = single.run(single.place_state(params, buffers, state, xs))
    b = split.run(split.place_state(params, buffers, state, xs))
    assert b.transfers > 0 and (b.peak_bytes > 0).all()
    assert torch.equal(a.loss, b.loss)
    for ga, gb in zip(a.grads, b.grads):
        assert torch.equal(ga, gb)
    # and the eager model (autograd, no capture): same loss and gradients
    m, xs2, loss_fn = build(recipe_of(g), "cpu")
    loss = loss_fn(m(*xs2))
    loss.backward()
    assert torch.allclose(loss.detach(), b.loss, rtol=1e-5, atol=1e-6)
    for (name, p), gb in zip(m.named_parameters(), b.grads):
        assert torch.allclose(p.grad, gb, rtol=1e-4, atol=1e-6), name
    # the updated parameters: SGD with momentum from zero state, p - lr * g
    for p, gb, nb in zip(params, b.grads, b.params):
        assert torch.allclose(nb, p - 0.1 * gb, rtol=1e-5, atol=1e-6)


def _state_after(step, flat, out):
    n_p, n_b = step.n_p, step.n_b
    return [*out.params, *flat[n_p:n_p + n_b], *[s for per in out.state for s in per], *flat[len(flat) - step.n_in:]]


@pytest.mark.parametrize("n_dev", [2, 3])
def test_placed_steps_equal_the_single_device_step_bit_for_bit(captured, n_dev):
    """Every cluster device on its own lane (worker threads, all mapped to the CPU here): loss,
    gradients, new parameters and optimizer state equal the one-device step's exactly, over two
    steps (the second starts from the first's state), with the buffer write-back ordered."""
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    one = PlacedStep(cap, np.zeros(g.n_ops, dtype=np.int64), ["cpu"])
    step = PlacedStep(cap, _split(g, n_dev), ["cpu"] * n_dev)
    assert step.plan.mutates  # a buffer written back in place
    lanes = {s.lane for segs in step.plan.lanes for s in segs}
    assert lanes == set(range(n_dev))
    assert any(j not in step.plan.initial for segs in step.plan.lanes[1:] for s in segs for j, _ in s.recv)
    flat_s = flat_t = one.place_state(params, buffers, state, xs)
    for _ in range(2):
        a = one.run(flat_s)
        b = step.run(flat_t)
        assert a.transfers == 0 and b.transfers > 0 and b.transfer_bytes > 0
        assert torch.equal(a.loss, b.loss)
        for xa, xb in zip([*a.grads, *a.params, *[s for per in a.state for s in per]],
                          [*b.grads, *b.params, *[s for per in b.state for s in per]]):
            assert torch.equal(xa, xb)
        flat_s, flat_t = _state_after(one, flat_s, a), _state_after(step, flat_t, b)
        for xa, xb in zip(flat_s, flat_t):  # buffers (running statistics) written back alike
            assert torch.equal(xa, xb)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_op_level_placements_equal_the_single_device_step(captured, seed):
    """Every op on a random one of three devices (colocation ignored: updates apart from their
    parameters, views apart from their consumers): still the one-device step bit for bit."""
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    one = PlacedStep(cap, np.zeros(g.n_ops, dtype=np.int64), ["cpu"])
    p = np.random.default_rng(seed).integers(0, 3, g.n_ops)
    step = PlacedStep(cap, p, ["cpu"] * 3, priority=np.random.default_rng(seed + 10).random(g.n_ops))
    _topological(step.plan)
    a = one.run(one.place_state(params, buffers, state, xs))
    b = step.run(step.place_state(params, buffers, state, xs))
    for xa, xb in zip([a.loss, *a.grads, *a.params], [b.loss, *b.grads, *b.params]):
        assert torch.equal(xa, xb)


def test_single_device_step_is_one_generated_function(captured):
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import rebuild

    _, g = captured
    cap, _, _ = rebuild(g)
    step = PlacedStep(cap, np.zeros(g.n_ops, dtype=np.int64), ["cpu"])
    (seg,), = step.plan.lanes
    assert seg.nodes == step.plan.order and not seg.recv and not seg.send
    assert set(seg.outs) == {k for k in step.plan.outputs if k is not None and k not in step.plan.initial}


def _topological(plan):
    pos = {i: t for t, i in enumerate(plan.order)}
    for i in plan.order:
        for j in (*plan.ins[i], *plan.ctrl.get(i, ())):
            if j in pos:
                assert pos[j] < pos[i]


def test_issue_order_follows_the_schedule(captured):
    """The host issues the nodes in the order of the simulator's start times (ties: program
    order), a topological order of data and ordering edges; another priority gives another order."""
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import rebuild
    from placer.sim import simulate

    _, g = captured
    cap, _, _ = rebuild(g)
    p = _split(g, 2)
    sim = simulate(Problem(g, preset("k80x2")), p)
    step = PlacedStep(cap, p, ["cpu", "cpu"], priority=sim.start_us)
    plan = step.plan
    _topological(plan)
    index = {n: i for i, n in enumerate(plan.nodes)}
    op = {index[n]: o for n, o in cap.node_op.items()}
    starts = [float(sim.start_us[op[i]]) for i in plan.order]
    assert starts == sorted(starts)  # the schedule's order exactly
    fx_order = PlacedStep(cap, p, ["cpu", "cpu"]).plan.order
    assert fx_order == sorted(fx_order)
    late_first = PlacedStep(cap, p, ["cpu", "cpu"], priority=-np.arange(g.n_ops, dtype=float)).plan
    _topological(late_first)
    assert late_first.order != fx_order
    # every lane runs its nodes in the issue order
    for segs in plan.lanes:
        seq = [i for s in segs for i in s.nodes]
        assert seq == [i for i in plan.order if plan.lane_of[plan.ldev[i]] == segs[0].lane]


def test_cpu_worker_hands_over_by_events(captured, monkeypatch):
    """A second CPU device runs on a worker thread of its own; values cross in boxes, once per
    (value, consuming device); each thread runs its nodes in the issue order, and a consumer starts
    only after its producer on the other thread finished (recorded through the node ranges)."""
    import threading
    import time

    import placer.runtime.executor as ex
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    log = []

    def enter(name):
        return [name, threading.get_ident(), time.perf_counter_ns()]

    def leave(r, value):
        log.append((*r, time.perf_counter_ns()))

    monkeypatch.setattr(ex, "_range_enter", enter)
    monkeypatch.setattr(ex, "_range_exit", leave)
    step = ex.PlacedStep(cap, _split(g, 2), ["cpu", "cpu"], annotate=True)
    plan = step.plan
    crossing = [(j, dd) for (j, dd) in plan.crossings if j not in plan.initial]
    assert crossing and len(crossing) == len(set(crossing))
    step.run(step.place_state(params, buffers, state, xs))
    ran = {int(n.split("#")[1]): (t, a, b) for n, t, a, b in log}
    assert sorted(ran) == sorted(plan.order)
    threads = {L: {ran[i][0] for i in plan.order if plan.lane_of[plan.ldev[i]] == L} for L in (0, 1)}
    assert threads[0] == {threading.get_ident()} and len(threads[1]) == 1 and threads[1] != threads[0]
    for L in (0, 1):
        mine = [i for i in plan.order if plan.lane_of[plan.ldev[i]] == L]
        assert sorted(mine, key=lambda i: ran[i][1]) == mine
    for j, dd in crossing:
        users = [i for i in plan.order if plan.ldev[i] == dd and (j in plan.ins[i] or j in plan.ctrl.get(i, ()))]
        assert min(ran[u][1] for u in users) >= ran[j][2]


def test_an_in_place_write_waits_for_readers_on_other_devices():
    """A buffer written in place on one device is read before (write-after-read) and after
    (read-after-write) by ops on another device's worker thread: ordering edges cross as "done"."""
    from types import SimpleNamespace

    import torch.fx as fx

    from placer.runtime.executor import PlacedStep

    aten = torch.ops.aten

    def step(x, z):
        r1 = aten.mul.Tensor(x, 2)  # reads the old x
        y = aten.add.Tensor(z, 1)
        aten.copy_.default(x, y)  # x := z + 1
        r2 = aten.add.Tensor(x, 1)  # reads the new x
        loss = aten.add.Tensor(aten.sum.default(r1), aten.mul.Tensor(aten.sum.default(r2), 1000))
        return (loss,)

    gm = fx.symbolic_trace(step)
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    cap = SimpleNamespace(gm=gm, node_op={n: k for k, n in enumerate(nodes)},
                          info={"params": [], "buffers": [], "slots": 0, "inputs": 2})
    dev = np.ones(len(nodes), dtype=np.int64)  # everything on device 1 ...
    dev[0] = 0  # ... but x, so the write runs on device 0 (where x lives)
    plan = PlacedStep(cap, dev, ["cpu", "cpu"]).plan
    w = next(i for i, n in enumerate(plan.nodes) if n.target is aten.copy_.default)
    assert plan.ldev[w] == 0 and plan.ctrl and any(not data for data in plan.crossings.values())
    for _ in range(3):
        step_ = PlacedStep(cap, dev, ["cpu", "cpu"])
        x = torch.ones(4)
        out = step_.run([x, torch.full((4,), 5.0)])
        assert out.loss.item() == 8 + 1000 * 28 and torch.equal(x, torch.full((4,), 6.0))


def test_a_failing_op_in_a_worker_is_raised(captured):
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    p = np.zeros(g.n_ops, dtype=np.int64)
    first_conv = next(i for i, t in enumerate(g.op_types) if "conv" in t)
    p[first_conv] = 1
    step = PlacedStep(cap, p, ["cpu", "cpu"])
    flat = step.place_state(params, buffers, state, xs)
    flat[-1] = flat[-1][:, :2]  # an input of the wrong shape: the conv fails in the worker thread
    with pytest.raises(RuntimeError):
        step.run(flat)


def test_run_split_over_two_devices_reports_both(captured, capsys, monkeypatch):
    from placer.cluster import preset
    from placer.frontends.native import save_placement

    d, g = captured
    save_placement(d / "p.json", g, preset("k80x2"), _split(g))
    code, so, se = run_cli(capsys, monkeypatch, "run", d / "g.json", "--cluster", "k80x2", "--placement", d / "p.json",
                           "--steps", "2", "--warmup", "1", "--map", "gpu:0=cpu", "--json", "--allow-code", d)
    assert code == 0, se
    r = json.loads(so)
    dev = {x["name"]: x for x in r["devices"]}
    assert dev["gpu:0"]["real"] == "cpu" and dev["gpu:1"]["real"] == "cpu"
    assert dev["gpu:0"]["ops"] > 0 and dev["gpu:1"]["ops"] > 0
    assert dev["gpu:0"]["peak_bytes"] > 0 and dev["gpu:1"]["peak_bytes"] > 0
    assert r["steps"] == 2 and r["transfers"] > 0 and r["predicted_us"] > 0 and r["measured_median_us"] > 0
    assert np.isfinite(r["loss"])


@pytest.mark.parametrize("extra, needle", [
    (["--map", "gpu:7=cpu"], "is not a device of cluster"),
    (["--map", "gpu:0=cuda:9"], "is not a device torch sees"),
    (["--map", "gpu:0"], "CLUSTER_DEVICE=REAL_DEVICE"),
    (["--steps", "0"], "at least 1"),
])
def test_run_bad_input_is_one_line(captured, capsys, monkeypatch, extra, needle):
    d, _ = captured
    code, so, se = run_cli(capsys, monkeypatch, "run", d / "g.json", "--cluster", "k80x2", "--placement", "single:0", *extra)
    assert code == 2 and needle in se and len(se.strip().splitlines()) == 1, se


def test_run_needs_an_executable_graph(capsys, monkeypatch):
    code, so, se = run_cli(capsys, monkeypatch, "run", "synthetic", "--cluster", "k80x2", "--placement", "single:0")
    assert code == 2 and "no executable program" in se and len(se.strip().splitlines()) == 1, se


def test_device_map_rule():
    from placer.cluster import preset
    from placer.runtime import device_map, parse_map

    c = preset("k80x2")
    real = device_map(c, parse_map("cpu:0=cpu", c))
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert real[:2] == [f"cuda:{k}" if k < n else "cpu" for k in range(2)] and real[2] == "cpu"


# ---------------------------------------------------------------------- issue 52: trust and bad recipes
def _with_recipe(d, tmp, **changes):
    """The captured graph file with its recipe changed."""
    doc = json.loads((d / "g.json").read_text())
    doc["meta"]["recipe"] = {**doc["meta"]["recipe"], **changes}
    out = tmp / "changed.json"
    out.write_text(json.dumps(doc))
    return out


def _refused(code, so, se, needle):
    assert code == 2 and len(se.strip().splitlines()) == 1 and se.startswith("error: "), se
    assert "Traceback" not in se and needle in se, se


def test_run_refuses_recipe_code_outside_allowed_folders(captured, capsys, monkeypatch, tmp_path):
    """A graph file's recipe names Python code: `placer run` imports nothing unless the user allows its folder."""
    d, _ = captured
    evil = tmp_path / "elsewhere"
    evil.mkdir()
    marker = tmp_path / "imported"
    (evil / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef build():\n    raise SystemExit(0)\n")
    g = _with_recipe(d, tmp_path, target=f"{evil / 'evil.py'}:build")
    base = ["run", g, "--cluster", "k80x2", "--placement", "single:0", "--steps", "1", "--warmup", "1"]
    for extra in ([], ["--allow-code", d]):
        code, so, se = run_cli(capsys, monkeypatch, *base, *extra)
        _refused(code, so, se, f"--allow-code {evil}")
        assert "would import and run" in se and not marker.exists()
    # a module target is code too (os:system with kwargs would run a shell command): refused whatever
    # the flags, and the refusal names none (tests/test_trust.py follows every hint for many such targets)
    g = _with_recipe(d, tmp_path, target="os:system", kwargs={"command": f"touch {marker}"})
    for extra in (["--allow-code", d], ["--allow-any-code"]):
        code, so, se = run_cli(capsys, monkeypatch, *base, *extra)
        _refused(code, so, se, "standard library")
        assert "--allow" not in se and not marker.exists()
    # a factory that exits, trusted explicitly: one line, status 2
    g = _with_recipe(d, tmp_path, target=f"{evil / 'evil.py'}:build")
    code, so, se = run_cli(capsys, monkeypatch, *base, "--allow-any-code")
    _refused(code, so, se, "called sys.exit(0)")


@pytest.mark.parametrize("changes, needle", [
    ({"inputs": [{"shape": [4, 3, 6, 6], "dtype": "complex7"}]}, "is not a supported dtype"),
    ({"inputs": [{"shape": [4, -3], "dtype": "float32"}]}, "positive integers"),
    ({"inputs": [{"shape": [99999999999, 99999999999], "dtype": "float32"}]}, "the most placer allows"),
    ({"inputs": [{"shape": [8], "dtype": "int64", "high": -5}]}, "high"),
    ({"kind": "pickle"}, "not a known recipe kind"),
    ({"optimizer": "lion"}, "is not supported"),
    ({"seed": -1}, "recipe seed"),
])
def test_run_refuses_a_malformed_recipe_before_building(captured, capsys, monkeypatch, tmp_path, changes, needle):
    d, _ = captured
    g = _with_recipe(d, tmp_path, **changes)
    code, so, se = run_cli(capsys, monkeypatch, "run", g, "--cluster", "k80x2", "--placement", "single:0",
                           "--allow-code", d)
    _refused(code, so, se, needle)


@pytest.mark.parametrize("extra, needle", [
    (["--threads", "1000000"], "per CPU core"),
    (["--steps", str(10**9)], "10,000"),
    (["--warmup", str(10**9)], "1,000"),
    (["--allow-code", "/nonexistent-folder"], "is not a folder"),
])
def test_run_bounds_are_checked_before_any_work(captured, capsys, monkeypatch, extra, needle):
    d, _ = captured
    code, so, se = run_cli(capsys, monkeypatch, "run", d / "g.json", "--cluster", "k80x2", "--placement", "single:0", *extra)
    _refused(code, so, se, needle)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("real", [["cuda:0", "cpu"], ["cuda:0", "cuda:0"], ["cuda:0", "cpu", "cuda:0"]])
def test_gpu_placements_equal_the_cpu_step(captured, real):
    """On a GPU: the calling thread issues both GPUs' streams (events between them), the CPU
    device computes on its worker; loss and gradients match the one-CPU step to float tolerance."""
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state, rebuild

    _, g = captured
    cap, module, inputs = rebuild(g)
    params, buffers, state, xs = initial_state(cap, module, inputs)
    one = PlacedStep(cap, np.zeros(g.n_ops, dtype=np.int64), ["cpu"])
    a = one.run(one.place_state(params, buffers, state, xs))
    step = PlacedStep(cap, _split(g, len(real)), real)
    flat = step.place_state(params, buffers, state, xs)
    for _ in range(2):  # the second step reuses the streams and cached pinned blocks
        b = step.run(flat)
    b = step.run(flat)
    assert torch.allclose(a.loss, b.loss.cpu(), rtol=1e-4, atol=1e-5)
    for ga, gb in zip(a.grads + a.params, b.grads + b.params):
        assert torch.allclose(ga, gb.cpu(), rtol=1e-3, atol=1e-5)


def test_dropout_masks_do_not_depend_on_the_placement():
    """A random op (dropout's bernoulli) draws from a generator of its own, seeded per step from one
    draw of the global generator: any placement gives the one-device step's masks; a new seed, new ones."""
    from torch import nn

    from placer.frontends.torch import trace_training_step
    from placer.runtime.executor import PlacedStep
    from placer.runtime.measure import initial_state

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.5), nn.ReLU(), nn.Linear(32, 32), nn.Dropout(0.3), nn.Linear(32, 3))
    x = torch.randn(16, 8)
    real = ([p.detach().clone() for p in m.parameters()], [])
    cap = trace_training_step(m, [x], name="drop", cost_keys=())
    cap.info["real_state"] = real
    st = initial_state(cap, m, [x])
    one = PlacedStep(cap, np.zeros(cap.graph.n_ops, dtype=np.int64), ["cpu"])
    assert len(one.plan.random) == 2
    torch.manual_seed(7)
    a = one.run(one.place_state(*st))
    for seed in range(3):
        p = np.random.default_rng(seed).integers(0, 3, cap.graph.n_ops)
        step = PlacedStep(cap, p, ["cpu"] * 3)
        torch.manual_seed(7)
        b = step.run(step.place_state(*st))
        for xa, xb in zip([a.loss, *a.grads], [b.loss, *b.grads]):
            assert torch.equal(xa, xb)
    torch.manual_seed(8)
    c = one.run(one.place_state(*st))
    assert not torch.equal(a.grads[0], c.grads[0])
