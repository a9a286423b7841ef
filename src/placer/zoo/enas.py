"""ENAS architectures (Pham et al. 2018, "Efficient Neural Architecture Search via Parameter
Sharing") as PyTorch modules, for the generated graph families of Placeto appendix A.3.

* :class:`ENASConvNet`: the micro (cell) search space of ENAS section 2.3. A cell has two input
  nodes (the outputs of the two previous cells) and ``B`` computed nodes; node j takes two earlier
  nodes, applies one operation to each (identity, separable convolution 3x3 or 5x5, average or max
  pooling 3x3) and adds them; the cell outputs the depth concatenation of the nodes no other node
  uses. The network is a stem, three stages of ``N`` normal cells with a reduction cell (stride 2,
  double the filters) before the second and third, global pooling and a linear classifier.
* :class:`ENASRNNLM`: the recurrent cell of ENAS section 2.2 in a language model. Node 1 reads
  x_t and h_{t-1}; node j > 1 reads one earlier node i; each node is a highway layer
  c = sigmoid(h_i W_c), h_j = c * f(h_i W_h) + (1 - c) * h_i with f one of identity, sigmoid, tanh,
  ReLU; h_t is the mean of the nodes no other node uses. The cell is unrolled step by step.

An architecture is plain data (lists), sampled by :mod:`placer.zoo.families`.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReLUConvBN(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 1, stride: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(F.relu(x)))


class SepConv(nn.Module):
    """ReLU, depthwise k x k convolution, pointwise 1 x 1 convolution, batch norm."""

    def __init__(self, c: int, k: int, stride: int = 1):
        super().__init__()
        self.depthwise = nn.Conv2d(c, c, k, stride, k // 2, groups=c, bias=False)
        self.pointwise = nn.Conv2d(c, c, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.pointwise(self.depthwise(F.relu(x))))


class FactorizedReduce(nn.Module):
    """Halve the resolution without losing pixels: two 1 x 1 stride-2 convolutions, the second on
    the input shifted by one pixel, concatenated (ENAS / NASNet)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout // 2, 1, 2, bias=False)
        self.conv2 = nn.Conv2d(cin, cout - cout // 2, 1, 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = F.relu(x)
        return self.bn(torch.cat([self.conv1(x), self.conv2(x[:, :, 1:, 1:])], 1))


class Pool(nn.Module):
    def __init__(self, kind: str, stride: int):
        super().__init__()
        self.kind, self.stride = kind, stride

    def forward(self, x):
        if self.kind == "avg":
            return F.avg_pool2d(x, 3, self.stride, 1, count_include_pad=False)
        return F.max_pool2d(x, 3, self.stride, 1)


def conv_op(name: str, c: int, stride: int) -> nn.Module:
    if name == "identity":
        return nn.Identity() if stride == 1 else FactorizedReduce(c, c)
    if name.startswith("sep_conv_"):
        return SepConv(c, int(name[-1]), stride)
    if name in ("avg_pool_3x3", "max_pool_3x3"):
        return Pool(name[:3], stride)
    raise ValueError(f"unknown ENAS operation {name!r}")


class Cell(nn.Module):
    """One ENAS cell; ``arch`` is a list of ``[input_a, op_a, input_b, op_b]`` per computed node
    (inputs index the nodes: 0 and 1 are the cell inputs)."""

    def __init__(self, arch, c_pp: int, c_p: int, c: int, reduction: bool, reduction_prev: bool):
        super().__init__()
        self.arch = [list(node) for node in arch]
        used = {a for a, _, b, _ in self.arch} | {b for a, _, b, _ in self.arch}
        # an input no node reads gets no preprocessing (it would be dead code)
        self.pre0 = (FactorizedReduce(c_pp, c) if reduction_prev else ReLUConvBN(c_pp, c)) if 0 in used else None
        self.pre1 = ReLUConvBN(c_p, c) if 1 in used else None
        ops = []  # in a reduction cell only the ops reading the cell inputs have stride 2
        for a, op_a, b, op_b in self.arch:
            ops.append(conv_op(op_a, c, 2 if reduction and a < 2 else 1))
            ops.append(conv_op(op_b, c, 2 if reduction and b < 2 else 1))
        self.ops = nn.ModuleList(ops)
        self.loose = [j for j in range(2, 2 + len(self.arch)) if j not in used]
        self.out_channels = c * len(self.loose)

    def forward(self, s0, s1):
        states = [self.pre0(s0) if self.pre0 is not None else None, self.pre1(s1) if self.pre1 is not None else None]
        for j, (a, _, b, _) in enumerate(self.arch):
            states.append(self.ops[2 * j](states[a]) + self.ops[2 * j + 1](states[b]))
        return torch.cat([states[j] for j in self.loose], 1)


class ENASConvNet(nn.Module):
    """Stem, 3 stages of ``cells`` normal cells with a reduction cell before stages 2 and 3, global
    average pooling, linear classifier; the forward pass returns the cross-entropy loss."""

    def __init__(self, normal, reduce, cells: int = 2, filters: int = 20, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 3 * filters, 3, 1, 1, bias=False), nn.BatchNorm2d(3 * filters))
        c_pp = c_p = 3 * filters
        c = filters
        cells_ = []
        reduction_prev = False
        for stage in range(3):
            kinds = ([True] if stage > 0 else []) + [False] * cells
            for reduction in kinds:
                if reduction:
                    c *= 2
                cell = Cell(reduce if reduction else normal, c_pp, c_p, c, reduction, reduction_prev)
                cells_.append(cell)
                c_pp, c_p = c_p, cell.out_channels
                reduction_prev = reduction
        self.cells = nn.ModuleList(cells_)
        self.classifier = nn.Linear(c_p, classes)

    def forward(self, images, labels):
        s0 = s1 = self.stem(images)
        for cell in self.cells:
            s0, s1 = s1, cell(s0, s1)
        logits = self.classifier(torch.flatten(F.adaptive_avg_pool2d(F.relu(s1), 1), 1))
        return F.cross_entropy(logits, labels)


def _activation(name: str):
    return {"identity": lambda x: x, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": F.relu}[name]


class ENASRNNCell(nn.Module):
    """``arch = {"activations": [f_1, ..., f_N], "inputs": [-1, i_2, ..., i_N]}`` (node j reads node
    ``inputs[j]``; node 1 reads x_t and h_{t-1})."""

    def __init__(self, arch, embed: int, hidden: int):
        super().__init__()
        self.acts = list(arch["activations"])
        self.inputs = list(arch["inputs"])
        self.w_x = nn.Linear(embed, 2 * hidden, bias=False)
        self.w_h = nn.Linear(hidden, 2 * hidden, bias=False)
        self.w = nn.ModuleList([nn.Linear(hidden, 2 * hidden, bias=False) for _ in self.acts[1:]])
        used = set(self.inputs[1:])
        self.loose = [j for j in range(len(self.acts)) if j not in used]

    def forward(self, x, h):
        c, hh = (self.w_x(x) + self.w_h(h)).chunk(2, 1)
        c = torch.sigmoid(c)
        states = [c * _activation(self.acts[0])(hh) + (1 - c) * h]
        for j in range(1, len(self.acts)):
            s = states[self.inputs[j]]
            c, hh = self.w[j - 1](s).chunk(2, 1)
            c = torch.sigmoid(c)
            states.append(c * _activation(self.acts[j])(hh) + (1 - c) * s)
        if len(self.loose) == 1:
            return states[self.loose[0]]
        return torch.stack([states[j] for j in self.loose]).mean(0)


class ENASRNNLM(nn.Module):
    """Embedding, the ENAS cell unrolled over the sequence, a softmax over the vocabulary on every
    step's output; the forward pass returns the mean cross-entropy."""

    def __init__(self, arch, vocab: int = 10000, embed: int = 512, hidden: int = 512):
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, embed)
        self.cell = ENASRNNCell(arch, embed, hidden)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens, targets):
        h = tokens.new_zeros(tokens.shape[0], self.hidden, dtype=self.decoder.weight.dtype)
        outs = []
        for t in range(tokens.shape[1]):
            h = self.cell(self.embedding(tokens[:, t]), h)
            outs.append(h)
        logits = self.decoder(torch.stack(outs, 1))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
