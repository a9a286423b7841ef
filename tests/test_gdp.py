"""GDP (placer.methods.gdp): segments, the Transformer-XL style memory, the method contract clauses
that matter for a learned placer (budget, same seed same placement), batch training across graphs
reused on an unseen graph, save / fine-tune, and checkpoint resume equality."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from placer.cluster import preset  # noqa: E402
from placer.errors import InputError  # noqa: E402
from placer.methods import Budget, get_method, run_method  # noqa: E402
from placer.methods.gdp import GDPConfig, graph_ctx, load_policy, make_gdp_net, segments, train_gdp  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402

SMALL = dict(hidden=16, gnn_layers=1, attn_layers=1, heads=2, segment=8, batch=4)


def problem(n=60, seed=0, cluster="k80x2"):
    return Problem(layered_training_graph(n, seed=seed), preset(cluster))


@pytest.mark.parametrize("n,size", [(1, 1), (7, 3), (9, 3), (128, 128), (129, 128), (300, 7)])
def test_segments_cover_every_node_exactly_once_in_order(n, size):
    seg = segments(n, size)
    covered = [i for s, e in seg for i in range(s, e)]
    assert covered == list(range(n))
    assert all(0 < e - s <= size for s, e in seg)
    assert len(seg) == -(-n // size)


def test_segments_refuse_a_zero_size():
    with pytest.raises(ValueError):
        segments(5, 0)


def test_a_segment_attends_to_the_cached_previous_segment():
    """Transformer-XL recurrence: a node's logits depend on the previous segment (the memory) and
    not on the one before it, nor on later segments."""
    from torch import nn

    class Fixed(nn.Module):  # node embeddings given directly, so only the placer mixes nodes
        def __init__(self, z):
            super().__init__()
            self.z = z

        def forward(self, x, edge_index):
            return self.z

    torch.manual_seed(0)
    ctx = graph_ctx(problem(80), 1024)
    net = make_gdp_net(GDPConfig(**{**SMALL, "superposition": False}), ctx.gp.n_actions)
    z = torch.randn(ctx.n, 16)
    net.encoder = Fixed(z)
    base = net.logits(ctx).detach()
    z2 = z.clone()
    z2[0:8] = torch.randn(8, 16)  # segment 0 (a constant shift would vanish in the layer norm)
    net.encoder = Fixed(z2)
    moved = net.logits(ctx).detach()
    assert not torch.allclose(moved[8:16], base[8:16])  # segment 1 reads segment 0 from the memory
    assert torch.allclose(moved[16:], base[16:], atol=1e-6)  # one segment of memory, one layer


def test_gdp_respects_the_budget_and_is_registered():
    info = get_method("gdp")
    assert info.family == "learned" and info.available() is None
    r = run_method("gdp", problem(), Budget(placements=10), seed=0, **SMALL)
    assert r.cost.placements == 10  # batches of 4: 4 + 4 + 2, never past the budget
    r.placement.devices  # noqa: B018
    problem().validate_placement(r.placement.devices)


def test_same_seed_same_placement_and_another_seed_differs():
    P = problem()
    a = run_method("gdp", P, Budget(placements=12), seed=5, **SMALL)
    b = run_method("gdp", P, Budget(placements=12), seed=5, **SMALL)
    c = run_method("gdp", P, Budget(placements=12), seed=6, **SMALL)
    assert np.array_equal(a.placement.devices, b.placement.devices) and a.sim.objective_us == b.sim.objective_us
    assert a.curve == b.curve
    assert not (np.array_equal(a.placement.devices, c.placement.devices) and a.curve == c.curve)


def test_batch_training_across_graphs_and_reuse_on_an_unseen_graph(tmp_path):
    train = [problem(50, s) for s in range(2)]
    out = tmp_path / "gdp.pt"
    tr = train_gdp(train, GDPConfig(**SMALL), placements=8, out=out, seed=0)
    assert tr.used == [8, 8] and all(np.isfinite(b["objective_us"]) for b in tr.best)
    state = torch.load(out, weights_only=True)
    assert state["format"] == "placer-gdp-1"
    unseen = problem(70, 9)
    r = run_method("gdp", unseen, Budget(placements=1), seed=0, policy=str(out), **SMALL)  # zero-shot, greedy
    assert r.cost.placements == 1 and any("greedy" in n for n in r.notes)
    unseen.validate_placement(r.placement.devices)
    r2 = run_method("gdp", unseen, Budget(placements=9), seed=0, policy=str(out), finetune=2, **SMALL)
    assert r2.cost.placements == 9 and any("fine-tuned 2" in n for n in r2.notes)


def test_a_policy_of_another_shape_or_format_is_refused(tmp_path):
    out = tmp_path / "gdp.pt"
    run_method("gdp", problem(), Budget(placements=4), seed=0, save=str(out), **SMALL)
    with pytest.raises(InputError, match="hidden"):
        run_method("gdp", problem(), Budget(placements=4), seed=0, policy=str(out), **{**SMALL, "hidden": 32})
    with pytest.raises(InputError, match="devices"):
        run_method("gdp", problem(cluster="k80x4"), Budget(placements=4), seed=0, policy=str(out), **SMALL)
    with pytest.raises(InputError, match="not a mars checkpoint"):
        load_policy(str(out), "placer-mars-1", "mars")


def test_checkpoint_resume_equals_training_straight_through(tmp_path):
    train = [problem(40, s) for s in range(2)]
    cfg = GDPConfig(**SMALL)
    straight = train_gdp(train, cfg, placements=16, seed=3)
    half = tmp_path / "half.pt"
    train_gdp(train, cfg, placements=8, out=half, seed=3)
    resumed = train_gdp(train, cfg, placements=16, seed=3, resume=half)
    assert resumed.update == straight.update and resumed.used == straight.used
    for (k, v), w in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(v, w), k
    assert [b["objective_us"] for b in resumed.best] == [b["objective_us"] for b in straight.best]
    assert resumed.history == straight.history


def test_bad_config_values_are_refused():
    with pytest.raises(InputError, match="heads"):
        GDPConfig(hidden=10, heads=4)
    with pytest.raises(InputError, match="clip"):
        GDPConfig(clip=1.5)
    with pytest.raises(InputError, match="start"):
        GDPConfig(start="split")
    with pytest.raises(InputError, match="start_mass"):
        GDPConfig(start_mass=1.0)


@pytest.mark.parametrize("method", ["gdp", "mars"])
def test_the_start_is_simulated_first_counted_and_never_lost(method):
    """start="best": the searched layer split and the whole graph on the fastest device are
    simulated inside the budget; the result is never slower than either. start="none" skips them."""
    from placer.methods.base import Evaluator
    from placer.methods.layer_split import fastest_device, split_start
    from placer.sim import simulate

    P = problem(60, cluster="k80x4")
    kw = SMALL if method == "gdp" else dict(hidden=16, gnn_layers=1, seq_hidden=16, segment=8, batch=4,
                                           pretrain=False, start_steps=5)
    r = run_method(method, P, Budget(placements=120), seed=0, **kw)
    assert r.cost.placements == 120
    assert any(n.startswith("start: the ") for n in r.notes), r.notes
    split = split_start(P, Evaluator(P), 24)[0]
    single = np.full(P.n_ops, fastest_device(P))
    assert r.sim.objective_us <= min(simulate(P, split).objective_us, simulate(P, single).objective_us) * (1 + 1e-9)
    n = run_method(method, P, Budget(placements=120), seed=0, **{**kw, "start": "none"})
    assert n.cost.placements == 120 and not any(x.startswith("start: ") for x in n.notes)


def test_the_warm_start_raises_the_probability_of_its_target():
    import math

    import torch

    from placer.methods.gdp import warm_start
    from placer.methods.mars import MarsConfig, make_mars_net

    P = problem(40)
    ctx = graph_ctx(P, 1024)
    torch.manual_seed(0)
    net = make_mars_net(MarsConfig(hidden=16, gnn_layers=1, seq_hidden=16, segment=8, pretrain=False),
                        ctx.gp.n_actions, [ctx], 0)
    target = np.arange(ctx.n) * ctx.gp.n_actions // ctx.n  # contiguous blocks, one per device
    act = torch.as_tensor(target)[None, :]

    def mean_prob():
        with torch.no_grad():
            return math.exp(float(net.evaluate(ctx, act)[0].mean()))

    before = mean_prob()
    steps, reached = warm_start(net, ctx, target, 0.8, 300)
    assert before < 0.6 and 0 < steps < 300 and reached >= 0.8
    assert mean_prob() == pytest.approx(reached, rel=1e-6)
