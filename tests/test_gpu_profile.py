"""placer.cost.gpu_profile: kernels attributed to fx nodes on a recorded torch.profiler trace of a
CUDA step (a hand-written fixture in the format torch.profiler exports: kernels linked to their
launches by correlation ids inside record_function ranges), and on a real CPU profile of a tiny
model; the chain costs. No GPU, no timing asserts."""

from pathlib import Path

import numpy as np
import pytest

from placer.cost.gpu_profile import attribute, chain_costs, per_op, scale_issue, with_step_costs

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_step_trace.json"
NODES = [3, 4, 6, 7, 9]  # the nodes of the fixture, in issue order


def test_kernels_are_attributed_to_their_nodes_on_a_cuda_trace():
    p = attribute(FIXTURE, 12)
    assert p.steps == 2
    # per step: the GEMM (30 and 34 us, one launched through the driver API), the clamp, nothing for
    # the view, memset + reduction for the sum, the device-to-host copy
    assert p.kernel_us[NODES] == pytest.approx([32.0, 5.0, 0.0, 9.0, 4.0])
    assert p.launches[NODES] == pytest.approx([1, 1, 0, 2, 1])
    assert p.kernel_us.sum() == pytest.approx(50.0)  # the GPU-side range (500 us) is not a kernel
    assert p.host_us[NODES] == pytest.approx([12.0, 6.0, 2.0, 10.0, 20.0])
    # start to next start; the last node of a step (next range 146 us later) its own duration
    assert p.issue_us[NODES] == pytest.approx([13.0, 7.0, 3.0, 11.0, 20.0])
    others = np.setdiff1d(np.arange(12), NODES)
    assert not p.host_us[others].any() and not p.kernel_us[others].any()
    assert p.unattributed_kernel_us == pytest.approx(2.0)  # a fill launched outside every node range
    assert {"aten::relu", "aten::clamp_min"} <= set(p.cpu_ops[4]) and "aten::view" in p.cpu_ops[6]
    assert p.summary()["launches"] == 5


def test_launches_on_another_thread_id_are_attributed_by_their_host_op(tmp_path):
    import json

    d = json.loads(FIXTURE.read_text())
    for e in d["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            e["tid"] = 99  # CUPTI's thread id, not the profiler's
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(d))
    p = attribute(path, 12)
    assert p.kernel_us[NODES] == pytest.approx([32.0, 5.0, 0.0, 9.0, 4.0])
    assert p.unattributed_kernel_us == pytest.approx(2.0)


def test_chain_costs_take_the_later_of_issue_and_kernels():
    p = attribute(FIXTURE, 12)
    c = chain_costs(p.issue_us, p.kernel_us, NODES)
    # f: 13 + 32 = 45; max(45, 20) + 5 = 50; 50; 59; max(59, 54) + 4 = 63
    assert c[NODES] == pytest.approx([45.0, 5.0, 0.0, 9.0, 4.0]) and c.sum() == pytest.approx(63.0)
    kernels_only = chain_costs(np.zeros(12), p.kernel_us, NODES)
    issue_only = chain_costs(p.issue_us, np.zeros(12), NODES)
    assert kernels_only.sum() == pytest.approx(p.kernel_us.sum()) and issue_only.sum() == pytest.approx(p.issue_us.sum())
    host_bound = chain_costs(10 * p.issue_us, p.kernel_us, NODES)  # slow host: the kernels hide behind the issue
    assert host_bound.sum() == pytest.approx(10 * p.issue_us.sum() + p.kernel_us[9])
    assert scale_issue(p.issue_us, 27.0).sum() == pytest.approx(27.0)
    ops = per_op(c, {3: 0, 4: 1, 6: 1, 7: 2, 9: 2}, 3)  # a view folded into its producer's op
    assert ops == pytest.approx([45.0, 5.0, 13.0])


def test_step_costs_enter_the_graph_as_a_cost_row():
    from placer.graph import OpGraph  # noqa: F401 - the synthetic graph below is one
    from placer.resolve import resolve_graph

    g = resolve_graph("synthetic")
    cost = np.arange(g.n_ops, dtype=float)
    g2 = with_step_costs(g, cost, "m-cuda", {"device": "cuda:0"})
    assert np.array_equal(g2.compute_us["m-cuda"], cost) and g2.meta["profiles"]["m-cuda"]["kind"] == "step"


def test_attribution_on_a_real_cpu_profile_of_a_tiny_model():
    torch = pytest.importorskip("torch")
    from torch import nn

    from placer.frontends.torch import trace_training_step
    from placer.runtime.profile_step import record_step

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    real = ([p.detach().clone() for p in m.parameters()], [])
    cap = trace_training_step(m, [x], name="tiny", cost_keys=())
    cap.info["real_state"] = real
    sp = record_step(cap, m, [x], "cpu", steps=2, warmup=1, timed=3)
    nodes = list(cap.gm.graph.nodes)
    calls = [i for i, n in enumerate(nodes) if n.op == "call_function"]
    assert sp.nodes.steps == 2 and (sp.nodes.host_us[calls] > 0).all()
    assert not sp.nodes.kernel_us.any() and sp.nodes.unattributed_kernel_us == 0
    for i in calls:  # every aten node ran its own aten op inside its range
        t = nodes[i].target
        if isinstance(t, torch._ops.OpOverload):
            assert t._schema.name in sp.nodes.cpu_ops[i], (nodes[i], sp.nodes.cpu_ops.get(i))
    assert sorted(sp.order) == calls
    # on a CPU the chain is the host's: the op costs add up to the unprofiled step's issue time
    assert sp.op_cost_us.sum() == pytest.approx(sp.issue_step_us, rel=1e-9)
    assert sp.issue_step_us > 0 and len(sp.step_us) == 3
