"""PyTorch capture: FLOPs against hand counts, roles, mirrors, module paths, state, views, errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from placer.errors import InputError  # noqa: E402
from placer.frontends.native import graph_from_doc, graph_to_doc
from placer.frontends.torch import capture_forward, capture_training_step, trace_training_step  # noqa: E402
from placer.graph import BACKWARD, FORWARD, UPDATE  # noqa: E402
from placer.zoo.seq2seq import LSTMCell  # noqa: E402


def flops_of(g, op):
    return float(g.flops[[i for i, t in enumerate(g.op_types) if t == op]].sum())


class MLP(nn.Module):
    def __init__(self, i=16, h=8, o=4):
        super().__init__()
        self.fc1 = nn.Linear(i, h)
        self.fc2 = nn.Linear(h, o)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))).pow(2).mean()


class ConvBNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return nn.functional.cross_entropy(self.fc(h), y)


class Cell(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.cell = LSTMCell(i, h)
        self.h = h

    def forward(self, x):
        z = x.new_zeros(x.shape[0], self.h)
        return self.cell(x, (z, z))[0]


# ---------------------------------------------------------------------- FLOPs by hand
def test_linear_flops_match_hand_count():
    B, I, H, O = 4, 16, 8, 4
    g = capture_training_step(MLP(I, H, O), (torch.randn(B, I),), optimizer="sgd")
    fwd = 2 * B * I * H + 2 * B * H * O
    assert g.flops[g.role == FORWARD].sum() == fwd
    # backward: dW for both layers (2BIH + 2BHO) and dX of fc2 only (the input needs no gradient)
    assert g.flops[g.role == BACKWARD].sum() == 2 * B * I * H + 2 * B * H * O + 2 * B * O * H
    assert g.flops[g.role == UPDATE].sum() == 0


@pytest.mark.parametrize("groups", [1, 8])
def test_conv2d_flops_match_hand_count(groups):
    N, C, K, S = 2, 8, 3, 10
    conv = nn.Conv2d(C, 16, K, groups=groups, bias=False)
    g = capture_training_step(nn.Sequential(conv), (torch.randn(N, C, S, S),), optimizer="sgd")
    per = 2 * N * 16 * (S - K + 1) ** 2 * (C // groups) * K * K
    assert flops_of(g, "aten.convolution.default") == per
    assert flops_of(g, "aten.convolution_backward.default") == per  # weight gradient only


def test_lstm_cell_flops_match_hand_count():
    B, I, H = 3, 5, 7
    g = capture_forward(Cell(I, H), (torch.randn(B, I),))
    assert g.flops.sum() == 2 * B * (I + H) * 4 * H
    assert (g.role == FORWARD).all()
    # cat, addmm, 3 sigmoid, 2 tanh, 3 mul, 1 add (+ the zeros of the initial state)
    types = [t.split(".")[1] for t in g.op_types if t.startswith("aten.")]
    assert types.count("sigmoid") == 3 and types.count("tanh") == 2 and types.count("addmm") == 1


def test_output_and_accessed_bytes():
    B, I, H, O = 4, 16, 8, 4
    g = capture_forward(MLP(I, H, O), (torch.randn(B, I),))
    i = g.op_types.index("aten.addmm.default")
    assert g.output_bytes[i] == B * H * 4
    # reads bias (H), x (B x I), W^T (I x H), writes B x H, all float32
    assert g.bytes_accessed[i] == 4 * (H + B * I + I * H + B * H)


# ---------------------------------------------------------------------- structure
def test_roles_mirrors_and_module_paths():
    g = capture_training_step(ConvBNNet(), (torch.randn(2, 3, 6, 6), torch.zeros(2, dtype=torch.long)))
    conv_f = g.op_types.index("aten.convolution.default")
    conv_b = g.op_types.index("aten.convolution_backward.default")
    assert g.modules[conv_f] == "conv" and g.modules[conv_b] == "conv"
    assert g.role[conv_b] == BACKWARD and g.mirror[conv_b] == conv_f
    bn_b = g.op_types.index("aten.native_batch_norm_backward.default")
    assert g.op_types[g.mirror[bn_b]] == "aten.native_batch_norm.default" and g.modules[bn_b] == "bn"
    mirrored = g.mirror >= 0
    assert (g.role[mirrored] == BACKWARD).all() and (g.role[g.mirror[mirrored]] == FORWARD).all()
    assert mirrored.sum() >= 0.7 * (g.role == BACKWARD).sum()
    # every backward op comes after the forward op it mirrors (topological order)
    assert (np.flatnonzero(mirrored) > g.mirror[mirrored]).all()
    assert {"conv", "bn", "fc"} <= set(g.modules)


def test_parameters_state_and_update_colocation():
    m = MLP()
    for opt, slots in (("sgd", 0), ("sgd-momentum", 1), ("adam", 2)):
        g = capture_training_step(m, (torch.randn(4, 16),), optimizer=opt)
        for name, p in m.named_parameters():
            i = g.op_names.index(name)
            assert g.op_types[i] == "parameter" and g.param_bytes[i] == p.numel() * 4 * (1 + slots)
            updates = [k for k in range(g.n_ops) if g.op_names[k].startswith(name + "/update/")]
            assert updates and all(g.role[k] == UPDATE for k in updates)
            if g.colocation[i] >= 0:
                assert all(g.colocation[k] == g.colocation[i] for k in updates)
        assert g.param_bytes.sum() == sum(p.numel() for p in m.parameters()) * 4 * (1 + slots)
        assert g.meta["optimizer"] == opt


def test_batch_norm_buffers_are_inputs_and_written_back():
    g = capture_training_step(ConvBNNet(), (torch.randn(2, 3, 6, 6), torch.zeros(2, dtype=torch.long)))
    buffers = {g.op_names[i]: i for i in range(g.n_ops) if g.op_types[i] == "buffer"}
    assert set(buffers) == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert g.param_bytes[buffers["bn.running_mean"]] == 8 * 4
    bn = g.op_types.index("aten.native_batch_norm.default")
    assert buffers["bn.running_mean"] in g.predecessors(bn)
    wb = [i for i in range(g.n_ops) if "/writeback/" in g.op_names[i]]
    assert wb and all(g.role[i] == UPDATE for i in wb)
    assert g.colocation[wb[0]] == g.colocation[buffers["bn.num_batches_tracked"]] >= 0


def test_views_are_folded_and_edges_carry_bytes():
    g = capture_training_step(MLP(), (torch.randn(4, 16),))
    for view in ("view", "t", "permute", "expand", "transpose", "_unsafe_view", "detach"):
        assert f"aten.{view}.default" not in g.op_types
    # fc1.weight feeds addmm through t(): the edge goes from the parameter op, carrying its bytes
    w = g.op_names.index("fc1.weight")
    mm = g.op_types.index("aten.addmm.default")
    e = np.flatnonzero((g.edge_src == w) & (g.edge_dst == mm))
    assert len(e) == 1 and g.edge_bytes[e[0]] == 16 * 8 * 4
    assert (g.edge_bytes > 0).all()


def test_capture_is_deterministic_and_round_trips():
    a = capture_training_step(ConvBNNet(), (torch.randn(2, 3, 6, 6), torch.zeros(2, dtype=torch.long)))
    b = capture_training_step(ConvBNNet(), (torch.randn(2, 3, 6, 6), torch.zeros(2, dtype=torch.long)))
    assert a.op_names == b.op_names and np.array_equal(a.edge_src, b.edge_src)
    assert all(np.array_equal(a.compute_us[k], b.compute_us[k]) for k in a.compute_us)
    c = graph_from_doc(graph_to_doc(a))
    assert c.op_names == a.op_names and c.modules == a.modules and np.array_equal(c.mirror, a.mirror)
    assert c.meta["op_dtype"] == a.meta["op_dtype"]


def test_meta_inputs_and_fake_capture_need_no_memory():
    with torch.device("meta"):
        m = MLP(4096, 4096, 4096)
    g = capture_training_step(m, (torch.empty(64, 4096, device="meta"),))
    assert g.flops[g.role == FORWARD].sum() == 2 * 64 * 4096 * 4096 * 2


def test_trace_keeps_fx_nodes_per_op():
    cap = trace_training_step(MLP(), (torch.randn(4, 16),))
    assert len(cap.op_nodes) == cap.graph.n_ops
    for i, node in enumerate(cap.op_nodes):
        if node is None:
            assert cap.graph.op_types[i] in ("parameter", "buffer", "input", "constant")
        else:
            assert str(node.target) == cap.graph.op_types[i]


def test_bad_inputs_raise_input_error():
    with pytest.raises(InputError, match="torch.nn.Module"):
        capture_training_step(lambda x: x, (torch.randn(2),))
    with pytest.raises(InputError, match="could not be traced"):
        capture_training_step(MLP(), (torch.randn(4, 3),))  # wrong feature size
    with pytest.raises(InputError, match="optimizer"):
        capture_training_step(MLP(), (torch.randn(4, 16),), optimizer="lamb")
