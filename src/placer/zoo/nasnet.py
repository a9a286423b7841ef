"""NASNet-A (Zoph et al. 2018, "Learning transferable architectures", Figure 4 and Table 2), written
after the reference TF-slim layout: ImageNet stem (conv + two reduction "stem" cells), ``num_cells``
normal cells with reduction cells at 1/3 and 2/3, an auxiliary head before the second reduction.

* ``large``: NASNet-A 6@4032 (18 normal cells, 168 filters, stem x3, 331 x 331 images; the
  penultimate layer has 24 x 168 = 4032 channels), as in Placeto's NASNet benchmark.
* ``mobile``: NASNet-A 4@1056 (12 normal cells, 44 filters, 224 x 224 images).

Modules are named like the reference checkpoints (``cell_stem_0``, ``cell_7.comb_iter_2.left``,
``reduction_cell_1``, ``aux``). Drop-path is not modelled (it only rescales activations).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

NORMAL_OPS = ["separable_5x5_2", "separable_3x3_2", "separable_5x5_2", "separable_3x3_2", "avg_pool_3x3", "none",
              "avg_pool_3x3", "avg_pool_3x3", "separable_3x3_2", "none"]
NORMAL_INDICES = [0, 1, 1, 1, 0, 1, 1, 1, 0, 0]
NORMAL_USED = [1, 0, 0, 0, 0, 0, 0]
REDUCTION_OPS = ["separable_5x5_2", "separable_7x7_2", "max_pool_3x3", "separable_7x7_2", "avg_pool_3x3",
                 "separable_5x5_2", "none", "avg_pool_3x3", "separable_3x3_2", "max_pool_3x3"]
REDUCTION_INDICES = [0, 1, 0, 1, 0, 1, 3, 2, 2, 0]
REDUCTION_USED = [1, 1, 1, 0, 0, 0, 0]

CONFIGS = {
    "large": dict(num_cells=18, filters=168, stem_multiplier=3.0, image=331, skip_reduction_input=True),
    "mobile": dict(num_cells=12, filters=44, stem_multiplier=1.0, image=224, skip_reduction_input=False),
}


def _bn(c):
    return nn.BatchNorm2d(c, eps=1e-3)


class ReluConvBN(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
        self.bn = _bn(cout)

    def forward(self, x):
        return self.bn(self.conv(F.relu(x)))


class SeparableStack(nn.Module):
    """``separable_KxK_2``: twice (ReLU, depthwise KxK, pointwise 1x1, batch norm); stride on the first."""

    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.dw1 = nn.Conv2d(cin, cin, k, stride=stride, padding=k // 2, groups=cin, bias=False)
        self.pw1 = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn1 = _bn(cout)
        self.dw2 = nn.Conv2d(cout, cout, k, padding=k // 2, groups=cout, bias=False)
        self.pw2 = nn.Conv2d(cout, cout, 1, bias=False)
        self.bn2 = _bn(cout)

    def forward(self, x):
        x = self.bn1(self.pw1(self.dw1(F.relu(x))))
        return self.bn2(self.pw2(self.dw2(F.relu(x))))


class FactorizedReduction(nn.Module):
    """Halve the resolution without losing pixels: two strided 1x1 paths, the second shifted by
    one pixel, concatenated, then batch norm."""

    def __init__(self, cin, cout):
        super().__init__()
        self.path1 = nn.Conv2d(cin, cout // 2, 1, bias=False)
        self.path2 = nn.Conv2d(cin, cout - cout // 2, 1, bias=False)
        self.bn = _bn(cout)

    def forward(self, x):
        p1 = self.path1(x[:, :, ::2, ::2])
        p2 = self.path2(F.pad(x, (0, 1, 0, 1))[:, :, 1::2, 1::2])
        return self.bn(torch.cat([p1, p2], 1))


class Branch(nn.Module):
    """One operation of a combination (``left`` / ``right``), built for its input's shape."""

    def __init__(self, op: str, cin: int, cout: int, stride: int):
        super().__init__()
        self.op = op
        self.stride = stride
        self.body = None
        if op.startswith("separable"):
            self.body = SeparableStack(cin, cout, int(op.split("x")[0][-1]), stride)
        elif op == "none":
            if stride > 1 or cin != cout:
                self.body = ReluConvBN(cin, cout, stride)
        else:  # pooling, then 1x1 conv when the channel count differs
            if cin != cout:
                self.body = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), _bn(cout))

    def forward(self, x):
        if self.op.startswith("separable") or self.op == "none":
            return x if self.body is None else self.body(x)
        if self.op.startswith("avg"):
            x = F.avg_pool2d(x, 3, stride=self.stride, padding=1, count_include_pad=False)
        else:
            x = F.max_pool2d(x, 3, stride=self.stride, padding=1)
        return x if self.body is None else self.body(x)


class Combination(nn.Module):
    def __init__(self, ops, chans, cout, stride, idx):
        super().__init__()
        (li, ri), (lo, ro) = idx, ops
        self.left = Branch(lo, chans[li], cout, stride if li < 2 else 1)
        self.right = Branch(ro, chans[ri], cout, stride if ri < 2 else 1)

    def forward(self, a, b):
        return self.left(a) + self.right(b)


class Cell(nn.Module):
    """A NASNet-A normal or reduction cell: a 1x1 on the current input, the previous input
    reduced to match, five pairwise combinations, and the unused states concatenated."""

    def __init__(self, reduction: bool, cin: int, cin_prev: int, prev_hw_ratio: int, filters: int,
                 raw_prev: bool = False):
        super().__init__()
        self.ops, self.idx, self.used = ((REDUCTION_OPS, REDUCTION_INDICES, REDUCTION_USED) if reduction
                                         else (NORMAL_OPS, NORMAL_INDICES, NORMAL_USED))
        stride = 2 if reduction else 1
        self.base = ReluConvBN(cin, filters)
        if raw_prev:  # the first stem cell: the "previous" state is its own raw input
            self.prev = None
        elif prev_hw_ratio > 1:
            self.prev = nn.Sequential(nn.ReLU(), FactorizedReduction(cin_prev, filters))
        elif cin_prev != filters:
            self.prev = ReluConvBN(cin_prev, filters)
        else:
            self.prev = None
        chans = [filters, cin_prev if raw_prev else filters]
        self.combs = nn.ModuleList()
        for k in range(5):
            self.combs.append(Combination((self.ops[2 * k], self.ops[2 * k + 1]), chans, filters, stride,
                                          (self.idx[2 * k], self.idx[2 * k + 1])))
            chans.append(filters)
        # a normal cell's unused previous state has the right shape already (reduced above)
        self.out_channels = filters * sum(1 for u in self.used if not u)
        for k, comb in enumerate(self.combs):
            self.add_module(f"comb_iter_{k}", comb)

    def forward(self, x, prev):
        p = prev if self.prev is None else self.prev(prev)
        states = [self.base(x), p]
        for k in range(5):
            comb = getattr(self, f"comb_iter_{k}")
            states.append(comb(states[self.idx[2 * k]], states[self.idx[2 * k + 1]]))
        return torch.cat([h for h, u in zip(states, self.used) if not u], 1)


class AuxHead(nn.Module):
    def __init__(self, cin, classes, hw):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, 128, 1, bias=False)
        self.bn1 = _bn(128)
        self.pool = min(5, hw)  # 5 x 5 / 3 as in the reference; smaller for tiny test images
        k = (hw - self.pool) // 3 + 1
        self.conv2 = nn.Conv2d(128, 768, k, bias=False)
        self.bn2 = _bn(768)
        self.fc = nn.Linear(768, classes)

    def forward(self, x):
        x = F.avg_pool2d(F.relu(x), self.pool, stride=3)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class NASNetA(nn.Module):
    """NASNet-A for ImageNet; ``num_cells`` / ``filters`` override the variant (reduced tests)."""

    def __init__(self, variant: str = "large", classes: int = 1000, num_cells: int | None = None,
                 filters: int | None = None, image: int | None = None):
        super().__init__()
        cfg = dict(CONFIGS[variant])
        cfg.update({k: v for k, v in dict(num_cells=num_cells, filters=filters, image=image).items() if v})
        n, f = cfg["num_cells"], cfg["filters"]
        self.skip_reduction_input = cfg["skip_reduction_input"]
        stem = int(32 * cfg["stem_multiplier"])
        self.conv0 = nn.Conv2d(3, stem, 3, stride=2, bias=False)
        self.conv0_bn = _bn(stem)
        hw = (cfg["image"] - 3) // 2 + 1
        # (channels, resolution) of every cell output so far, conv0 first
        outs = [(stem, hw)]
        self.cell_stem_0 = Cell(True, stem, stem, 1, int(f * 0.25), raw_prev=True)
        hw = (hw + 1) // 2
        outs.append((self.cell_stem_0.out_channels, hw))
        self.cell_stem_1 = Cell(True, outs[-1][0], outs[-2][0], _ratio(outs[-2][1], outs[-1][1]), int(f * 0.5))
        hw = (hw + 1) // 2
        outs.append((self.cell_stem_1.out_channels, hw))
        self.reductions = [n // 3, 2 * n // 3]
        self.aux_after = self.reductions[1] - 1
        scaling = 1.0
        self.plan = []  # (kind, module name) in execution order
        for c in range(n):
            prev_for_normal = outs[-2] if self.skip_reduction_input else None
            if c in self.reductions:
                scaling *= 2
                r = self.reductions.index(c)
                cell = Cell(True, outs[-1][0], outs[-2][0], _ratio(outs[-2][1], outs[-1][1]), int(f * scaling))
                self.add_module(f"reduction_cell_{r}", cell)
                self.plan.append(("reduction", f"reduction_cell_{r}"))
                hw = (hw + 1) // 2
                outs.append((cell.out_channels, hw))
            prev = prev_for_normal if self.skip_reduction_input else outs[-2]
            cell = Cell(False, outs[-1][0], prev[0], _ratio(prev[1], outs[-1][1]), int(f * scaling))
            self.add_module(f"cell_{c}", cell)
            self.plan.append(("normal", f"cell_{c}"))
            outs.append((cell.out_channels, hw))
            if c == self.aux_after:
                self.aux = AuxHead(cell.out_channels, classes, hw)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(outs[-1][0], classes)

    def forward(self, images, labels):
        x = self.conv0_bn(self.conv0(images))
        outs = [x]
        outs.append(self.cell_stem_0(outs[-1], outs[-1]))
        outs.append(self.cell_stem_1(outs[-1], outs[-2]))
        aux = None
        for kind, name in self.plan:
            cell = getattr(self, name)
            if kind == "reduction":
                skip_prev = outs[-2]
                outs.append(cell(outs[-1], outs[-2]))
                continue
            prev = skip_prev if (self.skip_reduction_input and _after_reduction(self.plan, name)) else outs[-2]
            outs.append(cell(outs[-1], prev))
            if name == f"cell_{self.aux_after}":
                aux = self.aux(outs[-1])
        x = F.relu(outs[-1])
        logits = self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))
        loss = F.cross_entropy(logits, labels)
        return loss if aux is None else loss + 0.4 * F.cross_entropy(aux, labels)


def _ratio(prev_hw: int, hw: int) -> int:
    return 2 if prev_hw != hw else 1


def _after_reduction(plan, name) -> bool:
    k = [n for _, n in plan].index(name)
    return k > 0 and plan[k - 1][0] == "reduction"
