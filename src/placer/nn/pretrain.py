"""Self-supervised pre-training of the graph encoder with Deep Graph Infomax, as Mars does it
(papers/003_a13e6b8ab67acb3a.txt; Lan et al., ICPP 2021, section 3.2; Velickovic et al., DGI, 2019).

For each graph (X, A):

* positive sample: the graph itself; negative sample: C(X, A) = (X~, A), the corruption function
  of DGI, which shuffles the rows of X (every node gets another node's features) and keeps A;
* local representations H = E(X, A) and H~ = E(X~, A) from the encoder (:class:`GraphEncoder`);
* readout: the mean-pooling summary with a logistic sigmoid, s = sigma((1/N) sum_i h_i);
* discriminator: the bilinear score D(h, s) = sigma(h^T W s);
* objective: the Jensen-Shannon (binary cross-entropy) estimator of the mutual information between
  local and global representations,
  L = -1/(N+N) ( sum_i log D(h_i, s) + sum_j log(1 - D(h~_j, s)) ), minimised.
  (The seed text writes the second term as log D(h~_j, s); DGI's eq. 1, which it summarises, has
  log(1 - D): corrupted pairs must score low. With N positives and N negatives, the 1/(N+N) average
  equals the mean of the two per-sample means, which is PyG's ``DeepGraphInfomax.loss``.)

PyTorch Geometric's ``DeepGraphInfomax`` holds W and computes D and the loss; we give it the encoder,
the readout and the corruption (with its own seeded generator, so pre-training is reproducible).

Training (our choices, the paper gives no schedule): Adam, lr 1e-3 (DGI's), ``epochs`` passes over
the graphs in a seeded order, one step per graph; the encoder weights of the last step are kept.
The encoder state (:func:`encoder_state`) is a plain state dict (``format: placer-encoder-1``):
written with :func:`placer.io.write_checkpoint`, read back with :func:`placer.io.read_checkpoint`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from placer.errors import InputError
from placer.nn.encoder import EncoderConfig, GraphData, GraphEncoder

ENCODER_FORMAT = "placer-encoder-1"


def readout(z: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """R(H) = sigma(mean_i h_i): the graph summary (Mars eq. 1)."""
    return torch.sigmoid(z.mean(dim=0))


class Corruption:
    """C(X, A) = (row-shuffled X, A), the permutation drawn from a seeded generator."""

    def __init__(self, seed: int = 0):
        self.gen = torch.Generator().manual_seed(int(seed))

    def __call__(self, x: torch.Tensor, edge_index: torch.Tensor):
        perm = torch.randperm(x.shape[0], generator=self.gen)
        return x[perm], edge_index


def dgi_model(encoder: GraphEncoder, seed: int = 0):
    """PyG's DeepGraphInfomax around ``encoder`` with the mean-sigmoid readout and the corruption."""
    from torch_geometric.nn import DeepGraphInfomax

    torch.manual_seed(seed)
    model = DeepGraphInfomax(encoder.cfg.hidden, encoder, readout, Corruption(seed))
    return model


def dgi_loss(model, data: GraphData) -> torch.Tensor:
    pos, neg, s = model(data.x, data.edge_index)
    return model.loss(pos, neg, s)


@torch.no_grad()
def discrimination(model, graphs: list[GraphData], seed: int = 1) -> dict:
    """How well the discriminator tells real from corrupted node/summary pairs on ``graphs``:
    accuracy (real scored > 0.5, corrupted < 0.5), mean real / corrupted score, and the loss; each
    graph corrupted with a fresh permutation from ``seed``."""
    gen = torch.Generator().manual_seed(int(seed))
    right = total = 0
    pos_scores, neg_scores, losses = [], [], []
    for d in graphs:
        z = model.encoder(d.x, d.edge_index)
        s = readout(z)
        zn = model.encoder(d.x[torch.randperm(d.n, generator=gen)], d.edge_index)
        p, q = model.discriminate(z, s), model.discriminate(zn, s)
        right += int((p > 0.5).sum()) + int((q < 0.5).sum())
        total += 2 * d.n
        pos_scores.append(float(p.mean()))
        neg_scores.append(float(q.mean()))
        losses.append(float(model.loss(z, zn, s)))
    return {"accuracy": right / max(total, 1), "real_score": float(np.mean(pos_scores)),
            "corrupted_score": float(np.mean(neg_scores)), "loss": float(np.mean(losses))}


@dataclass(frozen=True)
class PretrainConfig:
    epochs: int = 50  # passes over the pre-training graphs, one Adam step per graph
    lr: float = 1e-3  # Adam learning rate (DGI's)
    seed: int = 0  # encoder initialisation, graph order and corruptions

    def __post_init__(self):
        from placer.bounds import bound

        bound("pretrain.epochs").check(self.epochs, "pretrain")  # the table's rows (placer.bounds)
        bound("seed").check(self.seed, "pretrain")

    def to_dict(self) -> dict:
        return asdict(self)


def check_pretrain_memory(hidden: int, layers: int, nodes: int, where: str = "pretrain") -> None:
    """Refuse, before any graph is read, an encoder whose DGI training on graphs of up to ``nodes``
    nodes needs more memory than this machine has (:func:`placer.bounds.encoder_bytes`)."""
    from placer.bounds import check_memory, encoder_bytes

    check_memory(encoder_bytes(hidden, layers, nodes), where, f"hidden {hidden:,} x layers {layers:,} x nodes {nodes:,}",
                 "encoder weights, Adam state and two embeddings per layer, estimated",
                 "use a smaller hidden, fewer layers or fewer nodes")


@dataclass
class PretrainResult:
    encoder: GraphEncoder
    model: object  # the DeepGraphInfomax (encoder + bilinear W)
    losses: list[float]  # mean loss per epoch
    seconds: float
    graphs: list[str]


def pretrain(graphs: list[GraphData], enc_cfg: EncoderConfig | None = None, cfg: PretrainConfig | None = None,
             encoder: GraphEncoder | None = None, on_epoch: Callable[[int, float], None] | None = None) -> PretrainResult:
    """DGI pre-training of a fresh encoder (or of ``encoder``) on ``graphs``."""
    if not graphs:
        raise InputError("pretrain", "graphs", "none were given", "give at least one graph")
    cfg = cfg or PretrainConfig()
    shape = encoder.cfg if encoder is not None and hasattr(encoder, "cfg") else (enc_cfg or EncoderConfig())
    check_pretrain_memory(shape.hidden, shape.layers, max(g.n for g in graphs))
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    given = None if encoder is None else {k: v.clone() for k, v in encoder.state_dict().items()}
    encoder = encoder if encoder is not None else GraphEncoder(enc_cfg or EncoderConfig())
    model = dgi_model(encoder, cfg.seed)
    if given is not None:  # DeepGraphInfomax resets its encoder's parameters: keep the given weights
        encoder.load_state_dict(given)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    order_rng = np.random.default_rng([cfg.seed, 7])
    losses = []
    for epoch in range(cfg.epochs):
        tot = 0.0
        for i in order_rng.permutation(len(graphs)):
            opt.zero_grad(set_to_none=True)
            loss = dgi_loss(model, graphs[int(i)])
            loss.backward()
            opt.step()
            tot += float(loss.detach())
        losses.append(tot / len(graphs))
        if on_epoch is not None:
            on_epoch(epoch, losses[-1])
    return PretrainResult(encoder, model, losses, time.perf_counter() - t0, [g.name for g in graphs])


# ---------------------------------------------------------------------- checkpoints
def encoder_state(res: PretrainResult, extra: dict | None = None) -> dict:
    return {"format": ENCODER_FORMAT, "encoder_config": res.encoder.cfg.to_dict(),
            "encoder": res.encoder.state_dict(), "dgi": res.model.state_dict(),
            "losses": torch.as_tensor(np.asarray(res.losses, dtype=np.float64)),
            "graphs": list(res.graphs), "seconds": float(res.seconds), **(extra or {})}


def check_encoder_state(state: dict) -> dict:
    """``state`` when it is an encoder state made by :func:`encoder_state` (read from a file with
    :func:`placer.io.read_checkpoint`); InputError otherwise (attribute it to a file with
    :meth:`InputError.at`)."""
    fix = "give the encoder state placer.nn.pretrain.encoder_state made"
    if isinstance(state, (str, bytes)) or hasattr(state, "__fspath__"):
        raise InputError("pre-trained encoder", str(state), "is a file name, not an encoder state (a method reads no "
                         "files)", "read the file with placer.io.read_checkpoint and give the state it returns")
    if not isinstance(state, dict) or state.get("format") != ENCODER_FORMAT:
        raise InputError("pre-trained encoder", "state", "is not a placer encoder checkpoint", fix, kind="encoder")
    for key in ("encoder_config", "encoder"):
        if not isinstance(state.get(key), dict):
            raise InputError("pre-trained encoder", f"'{key}'", "is missing or of the wrong type (a damaged or foreign "
                             "checkpoint)", fix)
    return state


def encoder_from_state(state: dict, expect: EncoderConfig | None = None) -> GraphEncoder:
    """The encoder of an encoder state; InputError when it is not one, or not of ``expect``'s kind and sizes."""
    cfg = EncoderConfig.from_dict(check_encoder_state(state)["encoder_config"])
    if expect is not None and (cfg.kind, cfg.hidden, cfg.layers) != (expect.kind, expect.hidden, expect.layers):
        raise InputError("pre-trained encoder", "shape",
                         f"is a {cfg.kind} encoder of {cfg.layers} x {cfg.hidden}, the policy needs "
                         f"{expect.kind} {expect.layers} x {expect.hidden}", "pre-train with the policy's encoder sizes")
    enc = GraphEncoder(cfg)
    enc.load_state_dict(state["encoder"])
    return enc
