"""The learned methods' networks as top-level modules of placer.nn (placer.nn.gdp, mars, giph,
doppler): message passing equal to a hand-computed result on a 4-node graph, DOPPLER's PyG layer
equal to the gather / scatter-sum it replaced, parameter counts and the state-dict keys saved
policies carry, the method modules' factories building these classes, and placer.nn importing
nothing from placer.methods (layers point down)."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.utils import scatter  # noqa: E402

from placer.nn.doppler import DopplerNet, EdgeSum  # noqa: E402
from placer.nn.gdp import GDPNet, masked_logits  # noqa: E402
from placer.nn.giph import EdgeMP, GiPHNet  # noqa: E402
from placer.nn.mars import MarsNet  # noqa: E402

# the 4-node graph: 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3 (a diamond)
SRC, DST = torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 3, 3])
ADJ = torch.zeros(4, 4, dtype=torch.float64).index_put_((SRC, DST), torch.tensor(1.0, dtype=torch.float64))


def _lin(m, x):
    return x @ m.weight.double().T + m.bias.double()


def test_edge_sum_adds_each_nodes_in_neighbours_messages():
    m = torch.arange(8.0).view(4, 2)
    out = EdgeSum()(m, torch.stack([SRC, DST]))
    assert torch.equal(out, torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 1.0], [6.0, 8.0]]))
    back = EdgeSum()(m, torch.stack([DST, SRC]))  # against the edges: each node sums its successors'
    assert torch.equal(back, torch.tensor([[6.0, 8.0], [6.0, 7.0], [6.0, 7.0], [0.0, 0.0]]))


@pytest.mark.parametrize("seed", range(4))
def test_edge_sum_is_bit_identical_to_the_gather_scatter_it_replaced(seed):
    g = torch.Generator().manual_seed(seed)
    N, E = (5, 300, 1000, 2)[seed], (0, 2000, 7000, 3)[seed]
    m = torch.randn(N, 16, generator=g)
    src, dst = torch.randint(0, N, (E,), generator=g), torch.randint(0, N, (E,), generator=g)
    want = scatter(m[src], dst, dim=0, dim_size=N, reduce="sum")
    assert torch.equal(EdgeSum()(m, torch.stack([src, dst])), want)


def test_doppler_embedding_equals_the_hand_computed_rounds_on_a_diamond():
    torch.manual_seed(0)
    net = DopplerNet(6, 2, 11, 4, 7)
    x = torch.randn(4, 11)
    n_in = ADJ.sum(dim=0).clamp(min=1)[:, None]  # predecessors per node, at least 1
    n_out = ADJ.sum(dim=1).clamp(min=1)[:, None]
    h = torch.relu(_lin(net.inp, x.double()))
    for down, up, me in zip(net.down, net.up, net.self_):
        h = h + torch.relu(_lin(me, h) + ADJ.T @ _lin(down, h) / n_in + ADJ @ _lin(up, h) / n_out)
    got = net.embed(x, SRC, DST)
    assert torch.allclose(got.double(), h, atol=1e-5)
    given = net.embed(x, SRC, DST, n_in.float(), n_out.float())  # degrees given, as tensors_of passes them
    assert torch.equal(given, got)


def test_giph_round_averages_its_in_edges_messages_on_a_diamond():
    torch.manual_seed(1)
    mp = EdgeMP(5, 3)
    h, ea = torch.randn(4, 5), torch.randn(4, 3)
    e = mp.edge_term(ea)
    hd, ed = h.double(), e.double()
    msg = torch.relu(_lin(mp.lin_h, hd)[SRC] + ed)  # one message per edge
    agg = torch.zeros(4, 5, dtype=torch.float64).index_add_(0, DST, msg) / ADJ.sum(dim=0).clamp(min=1)[:, None]
    want = hd + torch.relu(_lin(mp.upd[0], torch.cat([hd, agg], dim=1)))
    assert torch.allclose(mp(h, torch.stack([SRC, DST]), e).double(), want, atol=1e-5)


def _count(net) -> int:
    return sum(p.numel() for p in net.parameters())


def test_parameter_counts_and_state_dict_keys_are_the_saved_policies():
    H, L = 8, 2
    net = DopplerNet(H, L, 11, 4, 7)
    head = lambda i: (i * H + H) + (H * H + H) + (H + 1)  # noqa: E731
    assert _count(net) == (11 * H + H) + 3 * L * (H * H + H) + head(H + 4) + head(2 * H + 7)
    assert list(net.state_dict())[:8] == ["inp.weight", "inp.bias", "down.0.weight", "down.0.bias", "down.1.weight",
                                          "down.1.bias", "up.0.weight", "up.0.bias"]
    assert not any(k.startswith("sum") for k in net.state_dict())  # the PyG layer holds no weights
    g = GiPHNet(H, 3, 14, 3)
    mp = (H * H + H) + 3 * H + (2 * H * H + H)
    assert _count(g) == (14 * H + H + H * H + H) + 2 * mp + (6 * H * H + H + H + 1)
    assert sorted({k.split(".")[0] for k in g.state_dict()}) == ["bwd", "embed", "fwd", "score"]
    assert "fwd.lin_e.weight" in g.state_dict() and "fwd.lin_e.bias" not in g.state_dict()


def test_the_method_factories_build_the_nn_classes():
    from placer.methods.learned import doppler, gdp, giph, mars

    assert isinstance(doppler.make_net(doppler.DopplerConfig(hidden=8, layers=1)), DopplerNet)
    assert isinstance(giph.make_net(8, 1), GiPHNet)
    assert isinstance(gdp.make_gdp_net(gdp.GDPConfig(hidden=8, heads=2, gnn_layers=1, attn_layers=1), 3), GDPNet)
    assert isinstance(mars.make_mars_net(mars.MarsConfig(hidden=8, gnn_layers=1, seq_hidden=8, pretrain=False), 3),
                      MarsNet)


def test_gdp_masks_the_devices_a_node_cannot_run_on():
    logits = torch.zeros(2, 3)
    feasible = torch.tensor([[True, False, True], [False, False, True]])
    out = masked_logits(logits, feasible)
    assert torch.equal(out, torch.tensor([[0.0, -1e9, 0.0], [-1e9, -1e9, 0.0]]))


def test_placer_nn_imports_nothing_from_methods():
    code = ("import sys, placer.nn.gdp, placer.nn.mars, placer.nn.giph, placer.nn.doppler; "
            "print(sorted(m for m in sys.modules if m.startswith('placer.methods')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
