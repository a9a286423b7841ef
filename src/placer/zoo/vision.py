"""Image classifiers of the papers, written here (no torchvision): Inception-V3 and ResNet-50/101/200.

Each model takes ``(images, labels)`` and returns the training loss, so a captured training step
includes the loss like the papers' TensorFlow graphs. Module names follow the published layer
names (``Mixed_5b.branch3x3dbl_2``, ``layer3.4.conv2``) so an expert rule can find them.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBN(nn.Module):
    """conv (no bias) -> batch norm -> ReLU, the unit every Inception / ResNet block is made of."""

    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0, relu: bool = True, eps: float = 1e-3):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=eps)
        self.relu = relu

    def forward(self, x):
        x = self.bn(self.conv(x))
        return F.relu(x) if self.relu else x


# ---------------------------------------------------------------------- Inception-V3
class InceptionA(nn.Module):
    def __init__(self, cin: int, pool: int):
        super().__init__()
        self.branch1x1 = ConvBN(cin, 64, 1)
        self.branch5x5_1 = ConvBN(cin, 48, 1)
        self.branch5x5_2 = ConvBN(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = ConvBN(cin, 64, 1)
        self.branch3x3dbl_2 = ConvBN(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = ConvBN(96, 96, 3, padding=1)
        self.branch_pool = ConvBN(cin, pool, 1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3 = ConvBN(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = ConvBN(cin, 64, 1)
        self.branch3x3dbl_2 = ConvBN(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = ConvBN(96, 96, 3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([b3, bd, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, c7: int):
        super().__init__()
        self.branch1x1 = ConvBN(cin, 192, 1)
        self.branch7x7_1 = ConvBN(cin, c7, 1)
        self.branch7x7_2 = ConvBN(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = ConvBN(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = ConvBN(cin, c7, 1)
        self.branch7x7dbl_2 = ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = ConvBN(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = ConvBN(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = ConvBN(cin, 192, 1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = x
        for m in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            bd = m(bd)
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3_1 = ConvBN(cin, 192, 1)
        self.branch3x3_2 = ConvBN(192, 320, 3, stride=2)
        self.branch7x7x3_1 = ConvBN(cin, 192, 1)
        self.branch7x7x3_2 = ConvBN(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = ConvBN(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = ConvBN(192, 192, 3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int):
        super().__init__()
        self.branch1x1 = ConvBN(cin, 320, 1)
        self.branch3x3_1 = ConvBN(cin, 384, 1)
        self.branch3x3_2a = ConvBN(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = ConvBN(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = ConvBN(cin, 448, 1)
        self.branch3x3dbl_2 = ConvBN(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = ConvBN(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = ConvBN(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = ConvBN(cin, 192, 1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    def __init__(self, cin: int, classes: int, kernel: int = 5, pool: int = 5):
        super().__init__()
        self.pool = pool
        self.conv0 = ConvBN(cin, 128, 1)
        self.conv1 = ConvBN(128, 768, kernel)
        self.fc = nn.Linear(768, classes)

    def forward(self, x):
        x = F.avg_pool2d(x, self.pool, stride=3)
        x = self.conv1(self.conv0(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InceptionV3(nn.Module):
    """Inception-V3 (Szegedy et al. 2016, "Rethinking the Inception architecture", Figure 5-7,
    Table 1) with the auxiliary classifier used in training (loss + 0.4 x auxiliary loss)."""

    def __init__(self, classes: int = 1000, image: int = 299):
        super().__init__()
        s = ((image - 3) // 2 + 1) - 2  # the 17 x 17 grid of Mixed_6e at 299 x 299
        for _ in range(2):
            s = (s - 3) // 2 + 1 - (2 if _ == 0 else 0)
        s = (s - 3) // 2 + 1
        aux_pool = min(5, s)  # TF-slim shrinks the 5 x 5 pooling and kernel for small inputs
        aux_kernel = min(5, (s - aux_pool) // 3 + 1)
        self.Conv2d_1a_3x3 = ConvBN(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = ConvBN(32, 32, 3)
        self.Conv2d_2b_3x3 = ConvBN(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = ConvBN(64, 80, 1)
        self.Conv2d_4a_3x3 = ConvBN(80, 192, 3)
        self.Mixed_5b = InceptionA(192, 32)
        self.Mixed_5c = InceptionA(256, 64)
        self.Mixed_5d = InceptionA(288, 64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, 128)
        self.Mixed_6c = InceptionC(768, 160)
        self.Mixed_6d = InceptionC(768, 160)
        self.Mixed_6e = InceptionC(768, 192)
        self.AuxLogits = InceptionAux(768, classes, aux_kernel, aux_pool)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(2048, classes)

    def forward(self, images, labels):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(images)))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, stride=2)
        for m in (self.Mixed_5b, self.Mixed_5c, self.Mixed_5d, self.Mixed_6a, self.Mixed_6b, self.Mixed_6c,
                  self.Mixed_6d, self.Mixed_6e):
            x = m(x)
        aux = self.AuxLogits(x)
        for m in (self.Mixed_7a, self.Mixed_7b, self.Mixed_7c):
            x = m(x)
        logits = self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))
        return F.cross_entropy(logits, labels) + 0.4 * F.cross_entropy(aux, labels)


# ---------------------------------------------------------------------- ResNet
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = ConvBN(cin, width, 1, eps=1e-5)
        self.conv2 = ConvBN(width, width, 3, stride=stride, padding=1, eps=1e-5)
        self.conv3 = ConvBN(width, cout, 1, relu=False, eps=1e-5)
        self.downsample = ConvBN(cin, cout, 1, stride=stride, relu=False, eps=1e-5) \
            if stride != 1 or cin != cout else None

    def forward(self, x):
        idn = x if self.downsample is None else self.downsample(x)
        return F.relu(self.conv3(self.conv2(self.conv1(x))) + idn)


RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3), 200: (3, 24, 36, 3)}


class ResNet(nn.Module):
    """ResNet with bottleneck blocks (He et al. 2016, Table 1; ResNet-200 from He et al. 2016b,
    "Identity mappings", with blocks 3-24-36-3). ``blocks`` overrides the depth (tests)."""

    def __init__(self, depth: int = 50, classes: int = 1000, blocks: tuple | None = None, base_width: int = 64):
        super().__init__()
        blocks = blocks or RESNET_BLOCKS[depth]
        self.conv1 = ConvBN(3, base_width, 7, stride=2, padding=3, eps=1e-5)
        cin = base_width
        layers = []
        for k, n in enumerate(blocks):
            width = base_width * 2**k
            stage = []
            for b in range(n):
                stage.append(Bottleneck(cin, width, 2 if (b == 0 and k > 0) else 1))
                cin = width * Bottleneck.expansion
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(cin, classes)

    def forward(self, images, labels):
        x = F.max_pool2d(self.conv1(images), 3, stride=2, padding=1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits = self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return F.cross_entropy(logits, labels)


def image_inputs(batch: int, size: int, classes: int, device="meta"):
    return (torch.empty(batch, 3, size, size, device=device).normal_() if device != "meta"
            else torch.empty(batch, 3, size, size, device="meta"),
            torch.zeros(batch, dtype=torch.long, device=device) if device != "meta"
            else torch.empty(batch, dtype=torch.long, device="meta"))
