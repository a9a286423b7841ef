"""The graph encoder (placer.nn.encoder) and its Deep Graph Infomax pre-training (placer.nn.pretrain):
nodes and features, one set of weights for graphs of any size, the DGI pieces as the Mars text
describes them, the loss falling on a small graph family and the discriminator separating real from
corrupted graphs on held-out ones, safe checkpoints, and `placer pretrain`."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from placer.cluster import preset  # noqa: E402
from placer.errors import InputError  # noqa: E402
from placer.graph import BACKWARD  # noqa: E402
from placer.nn.encoder import (N_FEATURES, EncoderConfig, GraphEncoder, canonical_type, graph_data,  # noqa: E402
                               node_of_ops, placement_nodes)
from placer.io import read_checkpoint, write_checkpoint  # noqa: E402
from placer.nn.pretrain import (Corruption, PretrainConfig, check_encoder_state, discrimination, dgi_model,  # noqa: E402
                                encoder_from_state, encoder_state, pretrain, readout)
from placer.problem import Problem  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402


def problem(n=120, seed=0, cluster="k80x2"):
    return Problem(layered_training_graph(n, seed=seed), preset(cluster))


def data(n=120, seed=0):
    return graph_data(placement_nodes(problem(n, seed)))


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    train = [data(100, s) for s in range(5)]
    held_out = [data(140, 100 + s) for s in range(3)]
    res = pretrain(train, EncoderConfig(hidden=32, layers=2), PretrainConfig(epochs=40, seed=0))
    return res, train, held_out


# ---------------------------------------------------------------------- nodes and features
def test_backward_ops_share_the_node_of_their_forward_op_and_nodes_follow_the_op_order():
    P = problem(80)
    g = P.graph
    gid = node_of_ops(P, 10_000)
    bw = np.flatnonzero((g.role == BACKWARD) & (g.mirror >= 0))
    assert (gid[bw] == gid[g.mirror[bw]]).all()
    first = np.array([np.flatnonzero(gid == v)[0] for v in range(gid.max() + 1)])
    assert (np.diff(first) > 0).all()  # numbered by first op


def test_a_node_cap_merges_contiguous_chunks_and_every_op_keeps_one_node():
    P = problem(200)
    gid = node_of_ops(P, 16)
    assert gid.max() + 1 == 16 and gid.min() == 0
    nodes = placement_nodes(P, 16)
    assert nodes.n_groups == 16
    p = nodes.expand(np.zeros(16, dtype=np.int64))
    assert p.shape == (P.n_ops,)
    P.validate_placement(p)


def test_features_and_undirected_edges():
    d = data(100)
    assert d.x.shape == (d.n, N_FEATURES) and torch.isfinite(d.x).all()
    ei = d.edge_index.numpy()
    pairs = set(map(tuple, ei.T.tolist()))
    assert all((b, a) in pairs for a, b in pairs) and not any(a == b for a, b in pairs)
    # op-type histogram rows sum to 1
    assert torch.allclose(d.x[:, :64].sum(dim=1), torch.ones(d.n))


def test_canonical_type():
    assert canonical_type("aten.convolution_backward.default") == "convolution_backward"
    assert canonical_type("aten._softmax.default") == "softmax"
    assert canonical_type("MatMul") == "matmul"


def test_same_weights_for_graphs_of_any_size():
    enc = GraphEncoder(EncoderConfig(hidden=16, layers=2))
    n_params = sum(p.numel() for p in enc.parameters())
    for n in (40, 300):
        d = data(n)
        z = enc.encode(d)
        assert z.shape == (d.n, 16)
    assert sum(p.numel() for p in enc.parameters()) == n_params
    sage = GraphEncoder(EncoderConfig(kind="sage", hidden=16, layers=2))
    assert sage.encode(data(60)).shape[1] == 16


# ---------------------------------------------------------------------- DGI as the seed describes it
def test_readout_is_the_sigmoid_of_the_mean():
    z = torch.randn(7, 5)
    assert torch.allclose(readout(z), torch.sigmoid(z.mean(dim=0)))


def test_corruption_shuffles_feature_rows_and_keeps_the_edges():
    d = data(100)
    xc, ei = Corruption(3)(d.x, d.edge_index)
    assert ei is d.edge_index
    assert not torch.equal(xc, d.x)
    assert torch.equal(torch.sort(xc, dim=0).values, torch.sort(d.x, dim=0).values)
    again, _ = Corruption(3)(d.x, d.edge_index)
    assert torch.equal(again, xc)  # seeded


def test_loss_is_the_jensen_shannon_estimator_with_a_bilinear_discriminator():
    torch.manual_seed(0)
    enc = GraphEncoder(EncoderConfig(hidden=8, layers=1))
    model = dgi_model(enc, 0)
    d = data(60)
    pos, neg, s = model(d.x, d.edge_index)
    W = model.weight
    D_pos = torch.sigmoid(pos @ W @ s)
    D_neg = torch.sigmoid(neg @ W @ s)
    N = d.n
    by_hand = -(torch.log(D_pos).sum() + torch.log(1 - D_neg).sum()) / (N + N)
    # PyG's loss is the mean of the two per-sample means: the same as 1/(N+N) over N + N terms
    assert torch.allclose(model.loss(pos, neg, s), 2 * by_hand, atol=1e-5)
    assert torch.allclose(s, torch.sigmoid(pos.mean(dim=0)))


def test_dgi_loss_decreases_on_a_small_family(trained):
    res, _, _ = trained
    first, last = res.losses[0], res.losses[-1]
    assert last < 0.75 * first, res.losses


def test_discriminator_separates_real_from_corrupted_on_held_out_graphs(trained):
    res, _, held_out = trained
    untrained = discrimination(dgi_model(GraphEncoder(EncoderConfig(hidden=32, layers=2)), 5), held_out)
    after = discrimination(res.model, held_out)
    assert after["accuracy"] > 0.7, after
    assert after["accuracy"] > untrained["accuracy"] + 0.1
    assert after["real_score"] > after["corrupted_score"] + 0.2


def test_pretraining_is_reproducible():
    ds = [data(60, s) for s in range(2)]
    a = pretrain(ds, EncoderConfig(hidden=8, layers=1), PretrainConfig(epochs=3, seed=4))
    b = pretrain(ds, EncoderConfig(hidden=8, layers=1), PretrainConfig(epochs=3, seed=4))
    assert a.losses == b.losses
    for x, y in zip(a.encoder.state_dict().values(), b.encoder.state_dict().values()):
        assert torch.equal(x, y)


def test_a_given_encoder_keeps_its_weights_when_pre_training_starts():
    enc = GraphEncoder(EncoderConfig(hidden=8, layers=1))
    w = {k: v.clone() for k, v in enc.state_dict().items()}
    res = pretrain([data(40)], encoder=enc, cfg=PretrainConfig(epochs=0))
    for k, v in res.encoder.state_dict().items():
        assert torch.equal(v, w[k])


# ---------------------------------------------------------------------- checkpoints
def test_encoder_checkpoint_round_trip(trained, tmp_path):
    res, _, _ = trained
    path = tmp_path / "enc.pt"
    write_checkpoint(encoder_state(res), path)
    state = read_checkpoint(path)  # plain containers only (weights_only loading)
    assert state["format"] == "placer-encoder-1"
    enc = encoder_from_state(state, EncoderConfig(hidden=32, layers=2))
    for k, v in res.encoder.state_dict().items():
        assert torch.equal(enc.state_dict()[k], v)
    with pytest.raises(InputError, match="needs"):
        encoder_from_state(state, EncoderConfig(hidden=64, layers=2))


def test_bad_encoder_files_are_refused(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="not a loadable"):
        read_checkpoint(junk)
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else"}, other)
    with pytest.raises(InputError, match="not a placer encoder"):
        check_encoder_state(read_checkpoint(other))


# ---------------------------------------------------------------------- the command
def test_placer_pretrain_command(capsys, monkeypatch, tmp_path):
    import json

    from conftest import run_cli
    from placer.frontends.native import save_graph

    files = []
    for i, n in enumerate((60, 80, 70)):
        f = tmp_path / f"g{i}.json"
        save_graph(layered_training_graph(n, seed=i), f)
        files.append(f)
    out = tmp_path / "enc.pt"
    code, stdout, err = run_cli(capsys, monkeypatch, "pretrain", "--graph", files[0], "--graph", files[1],
                                "--held-out", files[2], "--out", out, "--epochs", "4", "--hidden", "16",
                                "--layers", "2", "--json")
    assert code == 0, err
    d = json.loads(stdout)
    assert d["epochs"] == 4 and len(d["losses"]) == 4 and d["held_out_after"]["accuracy"] >= 0
    assert encoder_from_state(read_checkpoint(out), EncoderConfig(hidden=16, layers=2)) is not None
    code, _, err = run_cli(capsys, monkeypatch, "pretrain", "--out", tmp_path / "x.pt")
    assert code == 2 and "none were given" in err
