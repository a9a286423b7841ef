"""GDP (placer.methods.learned.gdp, placer.methods.learned.graph_ppo): segments, the Transformer-XL style memory, the
method contract clauses that matter for a learned placer (budget, same seed same placement), batch
training across graphs reused on an unseen graph, policy states (written and read as checkpoint
files), fine-tuning, resume equality, progress lines."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from placer.cluster import preset  # noqa: E402
from placer.errors import InputError  # noqa: E402
from placer.io import read_checkpoint, write_checkpoint  # noqa: E402
from placer.methods import Budget, get_method, run_method  # noqa: E402
from placer.methods.base import Evaluator  # noqa: E402
from placer.methods.learned.gdp import GDP, GDP_METHOD, GDPConfig, make_gdp_net  # noqa: E402
from placer.methods.learned.graph_ppo import check_policy, graph_ctx, policy_state, train  # noqa: E402
from placer.methods.learned.mars import MARS  # noqa: E402
from placer.nn.encoder import segments  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402

SMALL = dict(hidden=16, gnn_layers=1, attn_layers=1, heads=2, segment=8, batch=4)


def problem(n=60, seed=0, cluster="k80x2"):
    return Problem(layered_training_graph(n, seed=seed), preset(cluster))


def run_gdp(P, placements, seed=0, policy=None, progress=None, **kw):
    """(result, policy state) of GDP on ``P`` within ``placements``, from ``policy`` when given."""
    return GDP_METHOD.search(P, seed, Evaluator(P, limit=placements), GDPConfig(**kw), policy=policy,
                             progress=progress)


def train_gdp(problems, cfg, placements, seed=0, resume=None):
    """Batch training on ``problems``, ``placements`` per graph (the trainer)."""
    return train(GDP, problems, cfg, placements, seed, resume=resume)


def trained_state(tr, cfg):
    return policy_state(GDP, cfg, tr.graphs[0].gp.n_actions, tr)


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
    tr = train_gdp(train, GDPConfig(**SMALL), placements=8, seed=0)
    assert tr.used == [8, 8] and all(np.isfinite(b["objective_us"]) for b in tr.best)
    write_checkpoint(trained_state(tr, GDPConfig(**SMALL)), out)
    state = check_policy(GDP, read_checkpoint(out))  # a plain state dict: weights_only loading reads it
    assert state["format"] == "placer-gdp-1"
    unseen = problem(70, 9)
    r = GDP_METHOD.place(unseen, state, 0, Evaluator(unseen, limit=1), GDPConfig(**SMALL))  # zero-shot, greedy
    assert r.cost.placements == 1 and any("greedy" in n for n in r.notes)
    unseen.validate_placement(r.placement.devices)
    r2 = run_method("gdp", unseen, Budget(placements=9), seed=0, policy=state, finetune=2, **SMALL)  # the contract
    assert r2.cost.placements == 9 and any("fine-tuned 2" in n for n in r2.notes)
    assert r2.params["policy"] == "given"  # a result records that a policy was given, not the policy
    again = GDP_METHOD.train(train, GDPConfig(**SMALL), 0, placements=16)  # the protocol: 16 in all, 8 a graph
    assert all(torch.equal(v, state["model"][k]) for k, v in again["model"].items())


def test_a_policy_of_another_shape_or_format_is_refused(tmp_path):
    _, state = run_gdp(problem(), 4, **SMALL)
    with pytest.raises(InputError, match="hidden"):
        run_gdp(problem(), 4, policy=state, **{**SMALL, "hidden": 32})
    with pytest.raises(InputError, match="devices"):
        run_gdp(problem(cluster="k80x4"), 4, policy=state, **SMALL)
    with pytest.raises(InputError, match="not a mars checkpoint"):
        check_policy(MARS, state)
    with pytest.raises(InputError, match="model"):
        check_policy(GDP, {**state, "model": None})
    with pytest.raises(InputError, match="x.pt"):
        GDP_METHOD.load_policy({"format": "placer-mars-1"}, where="x.pt")
    with pytest.raises(InputError, match="file name"):  # a method reads no files: the caller does
        run_method("gdp", problem(), Budget(placements=4), seed=0, policy="gdp.pt", **SMALL)
    out = tmp_path / "gdp.pt"  # a policy file that is not a state dict: the reader refuses it
    out.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="gdp.pt"):
        read_checkpoint(out, "gdp policy")


def test_checkpoint_resume_equals_training_straight_through(tmp_path):
    train = [problem(40, s) for s in range(2)]
    cfg = GDPConfig(**SMALL)
    straight = train_gdp(train, cfg, 16, 3)
    half = tmp_path / "half.pt"
    write_checkpoint(trained_state(train_gdp(train, cfg, 8, 3), cfg), half)
    resumed = train_gdp(train, cfg, 16, 3, resume=read_checkpoint(half))
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
    with pytest.raises(InputError, match="start_moves"):
        GDPConfig(start_moves=0)


@pytest.mark.parametrize("method", ["gdp", "mars"])
def test_the_start_is_simulated_first_counted_and_never_lost(method):
    """start="best": the searched layer split and the whole graph on the fastest device are
    simulated inside the budget; the result is never slower than either. start="none" skips them."""
    from placer.methods.base import Evaluator
    from placer.methods.layer_split import fastest_device, split_start
    from placer.sim import simulate

    P = problem(60, cluster="k80x4")
    kw = SMALL if method == "gdp" else dict(hidden=16, gnn_layers=1, seq_hidden=16, segment=8, batch=4,
                                           pretrain=False)
    r = run_method(method, P, Budget(placements=120), seed=0, **kw)
    assert r.cost.placements == 120
    assert any(n.startswith("start: the ") for n in r.notes), r.notes
    split = split_start(P, Evaluator(P), 24)[0]
    single = np.full(P.n_ops, fastest_device(P))
    assert r.sim.objective_us <= min(simulate(P, split).objective_us, simulate(P, single).objective_us) * (1 + 1e-9)
    n = run_method(method, P, Budget(placements=120), seed=0, **{**kw, "start": "none"})
    assert n.cost.placements == 120 and not any(x.startswith("start: ") for x in n.notes)


def test_progress_gets_one_line_per_ppo_update():
    lines = []
    r, _ = run_gdp(problem(), 12, seed=2, progress=lines.append, **{**SMALL, "start": "none"})
    assert [x["update"] for x in lines] == [1, 2, 3] and lines[-1]["placements"] == 12
    assert all(x["method"] == "gdp" for x in lines)
    b = run_method("gdp", problem(), Budget(placements=12), seed=2, **{**SMALL, "start": "none"})
    assert np.array_equal(r.placement.devices, b.placement.devices)  # watching changes nothing


@pytest.mark.parametrize("method", ["gdp", "mars"])
def test_the_anchor_prior_gives_the_anchor_its_mass_and_the_method_learns_past_its_start(method):
    """The logit prior puts probability m on each node's anchor device at equal network logits;
    with it, GDP's and Mars's default configs return a placement faster than their start on a graph
    where the start is not optimal (before the anchor, GDP's samples were several times slower than
    the start and Mars's all gathered on one GPU: both returned the start itself,
    docs/methods/gdp.md, docs/methods/mars.md)."""
    from placer.methods.learned.graph_ppo import anchor_prior, graph_ctx

    P = problem(60, cluster="k80x4")
    ctx = graph_ctx(P, 1024)
    target = np.arange(ctx.n) % ctx.gp.n_actions
    p = torch.softmax(torch.zeros(ctx.n, ctx.gp.n_actions) + anchor_prior(ctx.feasible, target, 0.97), dim=1)
    assert torch.allclose(p[torch.arange(ctx.n), torch.as_tensor(target)], torch.full((ctx.n,), 0.97), atol=1e-5)
    kw = {} if method == "gdp" else dict(hidden=32, gnn_layers=2, seq_hidden=32, segment=32, pretrain_epochs=20)
    r = run_method(method, P, Budget(placements=200), seed=0, **kw)
    start = next(n for n in r.notes if n.startswith("start: the "))
    start_ms = float(start.rsplit("best ", 1)[1].split(" ms")[0].replace(",", ""))
    assert r.cost.placements == 200 and any("anchored" in n for n in r.notes), r.notes
    assert r.sim.objective_us / 1e3 < start_ms * 0.999, (r.sim.objective_us, start)
