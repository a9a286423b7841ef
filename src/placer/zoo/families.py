"""Generated graph families for learning placement policies that transfer (Placeto appendix A.3).

Three families of N = 32 graphs each, with a fixed train / test split (f = 0.5):

* ``cifar10``: ENAS convolutional networks (:class:`placer.zoo.enas.ENASConvNet`) with sampled
  normal and reduction cells, batch uniform in [240, 360] (bs_low, bs_high of A.3).
* ``ptb``: ENAS recurrent language models (:class:`placer.zoo.enas.ENASRNNLM`) with a sampled
  cell of identity / sigmoid / tanh / ReLU nodes, unrolled L in [25, 40] steps, batch in [1536, 3072].
* ``nmt``: the 2-layer NMT with attention of the zoo (:class:`placer.zoo.seq2seq.NMT`), unrolled
  L in [16, 32] steps, batch in [64, 128].

Placeto sampled its architectures from ENAS controllers during their training; we sample ENAS's
search spaces uniformly (a seeded random architecture per graph), which gives the same kinds of
graphs without training a controller. The appendix gives only batch and unroll ranges; the other
sizes are ours (``PAPER`` below: 2 normal cells per stage, 20 filters, 5 nodes per conv cell as
ENAS; 12 nodes per recurrent cell as ENAS, 512 hidden units, PTB's 10,000 words; NMT as the zoo's,
1024 units, 32,000 words). ``TINY`` keeps every sampled choice but shrinks the sizes, for tests.

Every graph is a real module captured as a training step (forward, backward, SGD-momentum update)
by :func:`placer.frontends.torch.capture_training_step` with its roofline costs, and cached on disk
like the zoo's graphs (``<cache>/families/<name>-<hash>.json.gz``, the hash covering the spec, the
capture version, torch's version and the cost tables). Graph i of a family depends only on (family,
seed, i, scale), so the first graphs of ``n=4`` are those of ``n=32``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placer.errors import InputError
from placer.graph import OpGraph

CONV_OPS = ("identity", "sep_conv_3x3", "sep_conv_5x5", "avg_pool_3x3", "max_pool_3x3")  # ENAS section 2.3
RNN_ACTIVATIONS = ("identity", "sigmoid", "tanh", "relu")  # ENAS section 2.2
FAMILY_IDS = {"cifar10": 1, "ptb": 2, "nmt": 3}  # mixed into the seed, so families differ
FAMILIES_VERSION = 1  # bump when a generator changes what a family graph contains (cache key)


@dataclass(frozen=True)
class Scale:
    """Sizes not given by Placeto appendix A.3 (see the module docstring)."""

    batch: dict[str, tuple[int, int]]  # family -> (bs_low, bs_high), inclusive
    length: dict[str, tuple[int, int]]  # family -> (L_low, L_high), inclusive
    conv_nodes: int  # computed nodes per ENAS conv cell (B)
    conv_cells: int  # normal cells per stage (N)
    conv_filters: int
    image: int
    rnn_nodes: int
    rnn_hidden: int
    rnn_vocab: int
    nmt_hidden: int
    nmt_vocab: int


_BATCH = {"cifar10": (240, 360), "ptb": (1536, 3072), "nmt": (64, 128)}
PAPER = Scale(_BATCH, {"ptb": (25, 40), "nmt": (16, 32)}, conv_nodes=5, conv_cells=2, conv_filters=20, image=32,
              rnn_nodes=12, rnn_hidden=512, rnn_vocab=10000, nmt_hidden=1024, nmt_vocab=32000)
TINY = Scale(_BATCH, {"ptb": (2, 4), "nmt": (2, 3)}, conv_nodes=3, conv_cells=1, conv_filters=4, image=8,
             rnn_nodes=4, rnn_hidden=8, rnn_vocab=50, nmt_hidden=8, nmt_vocab=50)
SCALES = {"paper": PAPER, "tiny": TINY}


@dataclass(frozen=True)
class GraphSpec:
    """One member of a family: everything needed to rebuild its module, as plain data."""

    family: str
    seed: int
    index: int
    scale: str
    batch: int
    length: int | None
    arch: Any = field(default=None, hash=False, compare=True)

    @property
    def name(self) -> str:
        return f"{self.family}-s{self.seed}-{self.index:02d}" + ("" if self.scale == "paper" else f"-{self.scale}")

    def to_dict(self) -> dict:
        return asdict(self)

    def module(self, device: str = "meta"):
        """``(nn.Module, example inputs)`` in training mode (needs the ``torch`` extra)."""
        import torch

        sc = SCALES[self.scale]
        if self.family == "cifar10":
            from placer.zoo.enas import ENASConvNet

            with torch.device(device):
                m = ENASConvNet(self.arch["normal"], self.arch["reduce"], sc.conv_cells, sc.conv_filters, 10)
                x = torch.empty(self.batch, 3, sc.image, sc.image)
                y = torch.zeros(self.batch, dtype=torch.long)
            inputs = (x if device == "meta" else x.normal_(), y)
        elif self.family == "ptb":
            from placer.zoo.enas import ENASRNNLM
            from placer.zoo.seq2seq import token_inputs

            with torch.device(device):
                m = ENASRNNLM(self.arch, sc.rnn_vocab, sc.rnn_hidden, sc.rnn_hidden)
            inputs = token_inputs(self.batch, self.length, sc.rnn_vocab, 2, device)
        else:
            from placer.zoo.seq2seq import NMT, token_inputs

            with torch.device(device):
                m = NMT(2, sc.nmt_hidden, sc.nmt_vocab)
            inputs = token_inputs(self.batch, self.length, sc.nmt_vocab, 3, device)
        m.train()
        return m, inputs

    def capture(self) -> OpGraph:
        """Capture the training step (uncached)."""
        from placer.frontends.torch import capture_training_step

        m, inputs = self.module()
        g = capture_training_step(m, inputs, name=self.name)
        meta = dict(g.meta)
        meta["family"] = self.to_dict()
        return g.replace(meta=meta)

    def graph(self, cache: bool = True) -> OpGraph:
        """The captured, costed training-step graph, from the disk cache when present."""
        from placer.frontends.recipe import cached_graph

        return cached_graph(self.cache_path() if cache else None, self.capture)

    def cache_path(self) -> Path:
        from placer.frontends.recipe import cache_root

        return cache_root() / "families" / f"{self.name}-{cache_key(self)}.json.gz"


def cache_key(spec: GraphSpec) -> str:
    from placer.cost.calibrated import CALIBRATION
    from placer.cost.roofline import DEFAULT_COST_KEYS, GPU_EFFICIENCY
    from placer.cost.specs import DEVICE_SPECS
    from placer.frontends.torch import CAPTURE_VERSION

    import torch

    blob = json.dumps({"spec": spec.to_dict(), "scale": asdict(SCALES[spec.scale]), "version": FAMILIES_VERSION,
                       "capture": CAPTURE_VERSION, "torch": torch.__version__, "keys": DEFAULT_COST_KEYS,
                       "specs": repr(sorted(DEVICE_SPECS.items())), "cal": CALIBRATION, "gpu_eff": GPU_EFFICIENCY},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- sampling
def sample_conv_cell(rng: np.random.Generator, nodes: int) -> list[list]:
    """ENAS section 2.3: each computed node j (2, 3, ...) picks two earlier nodes and an
    operation for each."""
    cell = []
    for j in range(2, 2 + nodes):
        a, b = (int(x) for x in rng.integers(0, j, size=2))
        op_a, op_b = (CONV_OPS[int(x)] for x in rng.integers(0, len(CONV_OPS), size=2))
        cell.append([a, op_a, b, op_b])
    return cell


def sample_rnn_cell(rng: np.random.Generator, nodes: int) -> dict:
    """ENAS section 2.2: an activation per node and, for nodes after the first, one earlier input."""
    acts = [RNN_ACTIVATIONS[int(x)] for x in rng.integers(0, len(RNN_ACTIVATIONS), size=nodes)]
    inputs = [-1] + [int(rng.integers(0, j)) for j in range(1, nodes)]
    return {"activations": acts, "inputs": inputs}


def graph_spec(family: str, index: int, seed: int = 0, scale: str = "paper") -> GraphSpec:
    """Graph ``index`` of a family: batch, unroll length and architecture drawn from a generator
    seeded by (seed, family, index) only."""
    if family not in FAMILY_IDS:
        raise InputError("families", f"family '{family}'", "is not a generated family", f"use one of {', '.join(FAMILY_IDS)}")
    if scale not in SCALES:
        raise InputError("families", f"scale '{scale}'", "is not a scale", f"use one of {', '.join(SCALES)}")
    sc = SCALES[scale]
    rng = np.random.default_rng([int(seed), FAMILY_IDS[family], int(index)])
    lo, hi = sc.batch[family]
    batch = int(rng.integers(lo, hi + 1))
    length = None
    if family in sc.length:
        lo, hi = sc.length[family]
        length = int(rng.integers(lo, hi + 1))
    if family == "cifar10":
        arch = {"normal": sample_conv_cell(rng, sc.conv_nodes), "reduce": sample_conv_cell(rng, sc.conv_nodes)}
    elif family == "ptb":
        arch = sample_rnn_cell(rng, sc.rnn_nodes)
    else:
        arch = {"layers": 2, "attention": True}
    return GraphSpec(family, int(seed), int(index), scale, batch, length, arch)


@dataclass(frozen=True)
class Family:
    """N graph specs with a fixed train / test split; graphs are built (or loaded) on demand."""

    name: str
    seed: int
    train: tuple[GraphSpec, ...]
    test: tuple[GraphSpec, ...]

    @property
    def specs(self) -> tuple[GraphSpec, ...]:
        return tuple(sorted(self.train + self.test, key=lambda s: s.index))

    def split(self, split: str) -> tuple[GraphSpec, ...]:
        if split == "all":
            return self.specs
        if split not in ("train", "test"):
            raise InputError("families", f"split '{split}'", "is not a split", "use train, test or all")
        return getattr(self, split)

    def graphs(self, split: str = "train", cache: bool = True) -> list[OpGraph]:
        return [s.graph(cache=cache) for s in self.split(split)]


def family(name: str, seed: int = 0, n: int = 32, train_fraction: float = 0.5, scale: str = "paper") -> Family:
    """A generated family of ``n`` graphs (Placeto A.3: N = 32, f = 0.5). The split is a seeded
    permutation: the first ``round(f * n)`` indices are for training, the rest for testing."""
    if n < 1 or not 0.0 <= train_fraction <= 1.0:
        raise InputError("families", f"n={n}, train_fraction={train_fraction}", "out of range",
                         "use n >= 1 and 0 <= train_fraction <= 1")
    specs = [graph_spec(name, i, seed, scale) for i in range(n)]
    perm = np.random.default_rng([int(seed), FAMILY_IDS[name], 1 << 20]).permutation(n)
    k = int(round(train_fraction * n))
    train = tuple(specs[i] for i in sorted(perm[:k].tolist()))
    test = tuple(specs[i] for i in sorted(perm[k:].tolist()))
    return Family(name, int(seed), train, test)


def load_family(name: str, split: str = "train", seed: int = 0, n: int = 32, scale: str = "paper",
                cache: bool = True) -> list[OpGraph]:
    """The OpGraphs of one split (``train``, ``test`` or ``all``) of a family."""
    return family(name, seed=seed, n=n, scale=scale).graphs(split, cache=cache)
