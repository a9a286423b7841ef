"""Take a placement away (issue 51): the module[:DEPTH] grouping, placer export, placer.apply and the
incumbent methods, on the CPU (every cluster device mapped to the CPU)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from torch import nn  # noqa: E402

import placer  # noqa: E402
from placer import export as ex  # noqa: E402
from placer.cluster import preset  # noqa: E402
from placer.graph import BACKWARD, UPDATE  # noqa: E402
from placer.grouping import make_grouping, parse_grouping  # noqa: E402
from placer.grouping.modules import module_problem, module_units  # noqa: E402
from placer.methods import Budget, run_method  # noqa: E402
from placer.problem import Problem  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.ln(x)))


class Net(nn.Module):
    def __init__(self, d=16, n=4, c=5):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, c)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


def loss_of(out):
    return (out ** 2).mean()


@pytest.fixture(scope="module")
def captured():
    from placer.frontends.torch import capture_training_step

    torch.manual_seed(0)
    model = Net()
    x = torch.randn(6, 8)
    g = capture_training_step(model, [x], loss_fn=loss_of, name="net")
    return model, x, g


def module_placement(g, method="param-balanced", cluster="k80x2", depth=1):
    P = Problem(g, preset(cluster))
    r = run_method(method, module_problem(P, depth), Budget(placements=60), 0, depth=depth) if method == "param-balanced" \
        else run_method(method, module_problem(P, depth), Budget(placements=60), 0)
    return P, r.placement.devices


def test_module_units_follow_the_module_tree(captured):
    _, _, g = captured
    mu = module_units(g, 1)  # a ModuleList entry is one level with its list: blocks.0 at depth 1
    assert mu.names == ("inp", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "head")
    assert module_units(g, 2).names[:3] == ("inp", "blocks.0.ln", "blocks.0.fc")
    for i in np.flatnonzero(~mu.glue & (g.role != 0)):  # backward and update ops with their module
        assert g.modules[i].split(".")[0] in mu.names[mu.op_unit[i]]
    assert (g.role[~mu.glue] == BACKWARD).any() and (g.role[~mu.glue] == UPDATE).any()
    assert str(parse_grouping("module")) == "module" and str(parse_grouping("module:3")) == "module:3"
    assert make_grouping(g, "module:1").n_groups == 6
    with pytest.raises(placer.errors.InputError):
        parse_grouping("module:x")


def test_module_problem_gives_module_level_placements(captured):
    _, _, g = captured
    P, p = module_placement(g, "local-search")
    mu, dev = ex.unit_devices(P, p, 1)
    assert np.array_equal(dev[mu.op_unit][~mu.glue], p[~mu.glue])


def test_applied_model_has_the_unplaced_loss_and_gradients(captured):
    model, x, g = captured
    P, p = module_placement(g)
    doc = ex.device_map(P, p, ["cpu"] * P.n_devices, 1)
    assert len(set(doc["cluster_devices"].values())) >= 2  # the map really spreads the model
    ref, placed = copy.deepcopy(model), copy.deepcopy(model)
    placer.apply(placed, doc)
    assert hasattr(placed.blocks[1], "_hf_hook")  # accelerate's hooks, attached even on one real device
    l0, l1 = loss_of(ref(x)), loss_of(placed(x))
    l0.backward()
    l1.backward()
    assert torch.equal(l0, l1)
    grads = dict(placed.named_parameters())
    for n, q in ref.named_parameters():
        assert torch.equal(q.grad, grads[n].grad), n


def test_a_user_loop_of_20_steps_lowers_the_loss(captured, tmp_path):
    model, x, g = captured
    P, p = module_placement(g)
    path = tmp_path / "map.json"
    path.write_text(json.dumps(ex.device_map(P, p, ["cpu"] * P.n_devices, 1)))
    m = placer.apply(copy.deepcopy(model), str(path))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(20):
        loss = loss_of(m(x))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


def test_export_refuses_a_split_module_in_one_line(captured, tmp_path, capsys, monkeypatch):
    from conftest import run_cli

    from placer.frontends.native import save_graph, save_placement

    _, _, g = captured
    gp, pp = tmp_path / "g.json", tmp_path / "p.json"
    save_graph(g, gp)
    mu = module_units(g, 1)
    p = np.zeros(g.n_ops, dtype=np.int64)
    split = np.flatnonzero((mu.op_unit == mu.names.index("blocks.1")) & ~mu.glue & (g.colocation < 0))
    p[split[-1]] = 1  # one op of blocks.1 (a backward op outside every colocation group) on gpu:1
    save_placement(pp, g, preset("k80x2"), p)
    code, out, err = run_cli(capsys, monkeypatch, "export", gp, "--cluster", "k80x2", "-p", pp, "--depth", "1",
                             "-o", tmp_path / "m.json")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "module 'blocks.1'" in err and "--grouping module:1" in err
    assert not (tmp_path / "m.json").exists()
    code, _, err = run_cli(capsys, monkeypatch, "export", gp, "--cluster", "k80x2", "-p", pp, "--format", "pipeline",
                           "--depth", "1")
    assert code == 2 and "module 'blocks.1'" in err
    # a module-level placement exports, and its map names every module
    P, q = module_placement(g)
    save_placement(pp, g, preset("k80x2"), q)
    code, out, err = run_cli(capsys, monkeypatch, "export", gp, "--cluster", "k80x2", "-p", pp, "--depth", "1", "--json")
    assert code == 0, err
    assert list(json.loads(out)["device_map"]) == list(mu.names)


def test_pipeline_split_points_build_a_torch_pipe(captured):
    from torch.distributed.pipelining import SplitPoint, pipeline

    model, x, g = captured
    P = Problem(g, preset("k80x4"))
    r = run_method("param-balanced", P, Budget(placements=4), 0, depth=1)
    doc = ex.pipeline(P, r.placement.devices, ["cpu"] * P.n_devices, 1)
    assert len(doc["stages"]) >= 2 and doc["split_points"]
    assert sum(s["param_bytes"] for s in doc["stages"]) == pytest.approx(float(g.param_bytes.sum()))
    pipe = pipeline(copy.deepcopy(model), mb_args=(x,), split_spec={m: SplitPoint.BEGINNING for m in doc["split_points"]})
    assert pipe.num_stages == len(doc["stages"])
    h = x
    for k in range(pipe.num_stages):
        h = pipe.get_stage_module(k)(h)
    assert torch.allclose(h, model(x))


def test_incumbents_place_modules(captured):
    _, _, g = captured
    P = Problem(g, preset("k80x4"))
    for name in ("accelerate-auto", "accelerate-balanced", "param-balanced"):
        r = run_method(name, P, Budget(placements=4), 0, depth=1)
        ex.unit_devices(P, r.placement.devices, 1)  # module-level: exports
    auto = run_method("accelerate-auto", P, Budget(placements=4), 0, depth=1)
    assert set(auto.placement.devices) == {P.cluster.gpus()[0]}  # a small model: all of it on GPU 0
    bal = run_method("param-balanced", P, Budget(placements=4), 0, depth=1)
    mu, dev = ex.unit_devices(P, bal.placement.devices, 1)
    seq = dev[mu.forward_order(g)]
    assert np.all(np.diff(seq) >= 0) and len(set(seq)) == 4  # contiguous stages in GPU order


def test_min_max_partition():
    from placer.methods.incumbents import min_max_partition

    assert min_max_partition([1, 1, 1, 1, 10, 1, 1], 3) == [0, 4, 5]
    assert min_max_partition([5, 5, 5, 5], 2) == [0, 2]
    assert min_max_partition([3], 4) == [0]
    assert min_max_partition([0, 0, 6, 0], 3) == [0, 1, 2]  # a part per stage even where weights are 0


def test_hf_gpt2_ties_embedding_and_head():
    pytest.importorskip("transformers")
    from placer.frontends.hf import build_hf, hf_graph, parse_hf_spec

    spec = "hf:gpt2:n_layer=2,n_embd=32,n_head=2,vocab_size=300,n_positions=32,batch=2,seq=8"
    g = hf_graph(spec)
    mu = module_units(g, 2)
    assert mu.root == "model" and "transformer.h.1" in mu.names and "lm_head" in mu.names
    assert mu.tie[mu.names.index("transformer.wte")] == mu.tie[mu.names.index("lm_head")]
    P, p = module_placement(g, depth=2)
    dm = ex.device_map(P, p, ["cpu"] * P.n_devices)["device_map"]
    m, xs, _ = build_hf(parse_hf_spec(spec), "cpu")
    ref = copy.deepcopy(m)
    placer.apply(m.model, dm)
    torch.manual_seed(1)
    l1 = m(*xs)
    torch.manual_seed(1)
    l0 = ref(*xs)
    assert torch.equal(l0, l1)
