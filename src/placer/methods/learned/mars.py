"""Mars (Lan, Chen and Li, "Accelerated Device Placement Optimization with Contrastive Learning",
ICPP 2021; papers/003_a13e6b8ab67acb3a.txt): a GCN graph encoder pre-trained with contrastive
self-supervision (Deep Graph Infomax, section 3.2: :mod:`placer.nn.pretrain`), a segment-level
sequence-to-sequence placer (:mod:`placer.nn.mars`) and PPO (section 3.4: :mod:`placer.rl.ppo`, driven
by :mod:`placer.methods.learned.graph_ppo`); the hyperparameters are :class:`MarsConfig`'s.

Given a pre-trained ``encoder`` (the state ``placer pretrain`` makes) the network starts from it;
otherwise ``pretrain=True`` pre-trains on the graph to place for ``pretrain_epochs`` steps (it
simulates nothing, so it costs seconds, not placements). As a method (search mode) it trains on the
one graph within the placement budget and returns the best placement evaluated; given a trained
``policy`` (``MARS_METHOD.train``) it runs ``finetune`` PPO updates, then places greedily
(:mod:`placer.methods.learned.protocol`). The start and the memory fallback (GDP's, ours), our
choices where the paper gives no number, and measurements: docs/methods/mars.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.graph_ppo import GraphPPOMethod, PolicyKind, torch_geometric_available
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import PolicyFields


@dataclass(frozen=True)
class MarsConfig(PolicyFields, MethodConfig):
    """Mars's hyperparameters: the paper's where it gives them, ours marked (module docstring)."""

    placements: int = 2_000  # default budget in placements (simulations) when none is given
    nodes: Annotated[int, Range(">= 1")] = 1_024  # most nodes placed: op groups beyond this are merged into contiguous chunks (ours)
    devices: Literal["auto", "gpus", "all"] = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: Annotated[int, Range(">= 1")] = 128  # GCN embedding size (ours; `placer pretrain --hidden` must match)
    gnn_layers: Annotated[int, Range(">= 1")] = 3  # GCN layers (ours; `placer pretrain --layers` must match)
    seq_hidden: Annotated[int, Range(">= 1")] = 256  # LSTM size of the seq2seq placer (ours)
    segment: Annotated[int, Range(">= 1")] = 128  # nodes per segment of the segment-level placer (ours)
    pretrain: bool = True  # DGI pre-training of the encoder on this graph before RL (when no encoder is given)
    pretrain_epochs: Annotated[int, Range(">= 0")] = 200  # DGI steps of that pre-training (ours)
    finetune_encoder: bool = True  # train the encoder with the placer during RL (else frozen)
    batch: Annotated[int, Range(">= 1")] = 8  # placements sampled per PPO update (ours)
    lr: Annotated[float, Range("> 0")] = 1e-3  # Adam learning rate (ours; docs/methods/mars.md)
    ppo_epochs: Annotated[int, Range(">= 1")] = 4  # K: PPO epochs per batch
    minibatches: Annotated[int, Range(">= 1")] = 1  # minibatches per PPO epoch
    clip: Annotated[float, Range("in (0, 1)")] = 0.2  # PPO clipping epsilon
    entropy: Annotated[float, Range(">= 0")] = 0.01  # entropy bonus coefficient
    grad_clip: Annotated[float, Range(">= 0")] = 1.0  # max gradient norm
    reward: Literal["sqrt", "linear"] = "sqrt"  # reward: sqrt = -sqrt(step ms) (Hierarchical Planner's), linear = -step ms
    encoder: Any = None  # a pre-trained encoder state (`placer pretrain`'s; overrides pretrain)
    policy: Any = None  # a trained policy (its state dict) to place with (None: search mode, train from scratch)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: PPO updates on this graph before the greedy placement
    progress: Any = None  # called with one dict per PPO update (None: nothing)
    log_every: Annotated[int, Range(">= 1")] = 10  # log a progress line (logger placer.mars) every this many updates
    start: Literal["best", "none"] = "best"  # best: the searched layer split or the fastest single device, whichever is faster, is simulated first and anchors the samples (ours; none: the paper's start)
    split_search: Annotated[int, Range(">= 0")] = 24  # simulations of that split's cut search, counted in the budget (ours)
    start_moves: Annotated[float, Range("> 0")] = 2.0  # nodes a sample moves off its anchor on average: each keeps the anchor's device with probability 1 - start_moves / N (ours)
    follow_best: bool = True  # the anchor moves to the best sample whenever one beats it (ours; False: it stays the start)

    @classmethod
    def paper(cls, **overrides) -> "MarsConfig":
        """The paper's settings where it gives them (Lan et al. 2021: the GNN encoder and its
        contrastive pre-training, section 3.2; the segment-level placer; PPO, section 3.4),
        ``overrides`` applied: the defaults are that design already (DGI pre-training on, the
        encoder fine-tuned, reward -sqrt(step ms) after the Hierarchical Planner), so only the
        start differs, the paper's (``start="none"``: no layer split or single device simulated
        first and no anchor; ``split_search``, ``start_moves`` and ``follow_best`` then do
        nothing). The text this project read states no number for ``nodes``, ``hidden``,
        ``gnn_layers``, ``seq_hidden``, ``segment``, ``pretrain_epochs``, ``batch`` or ``lr``:
        those stay this project's. Not expressible by the fields: the memory fallback after the
        first PPO update (:mod:`placer.methods.memory_fallback`, ours) always runs when nothing
        evaluated fits."""
        return cls(**{**dict(start="none"), **overrides})


# ---------------------------------------------------------------------- the network
def make_mars_net(cfg, n_actions: int, ctxs=None, seed: int = 0, stop=None):
    """The network, its encoder loaded from ``cfg.encoder`` (a pre-trained encoder state,
    :func:`placer.nn.pretrain.encoder_state`) or pre-trained as the config says (module docstring).
    Pre-training ends early when ``stop()`` is true after a DGI step (the method's time limit,
    :meth:`Evaluator.time_up`), keeping the steps taken."""
    from placer.nn.encoder import EncoderConfig
    from placer.nn.mars import MarsNet
    from placer.nn.pretrain import PretrainConfig, encoder_from_state, pretrain

    net = MarsNet(cfg, n_actions)
    want = EncoderConfig("gcn", cfg.hidden, cfg.gnn_layers)
    if cfg.encoder is not None:
        net.encoder.load_state_dict(encoder_from_state(cfg.encoder, want).state_dict())
        net.notes.append(f"encoder pre-trained (given: DGI on {len(cfg.encoder.get('graphs', []))} graph(s))")
    elif cfg.pretrain and ctxs and cfg.pretrain_epochs > 0:
        done = [0]

        def on_epoch(epoch: int, _loss: float) -> None:
            done[0] = epoch + 1
            if stop is not None and stop():
                raise _TimeEnded()

        try:
            res = pretrain([c.data for c in ctxs], want, PretrainConfig(epochs=cfg.pretrain_epochs, seed=seed),
                           encoder=net.encoder, on_epoch=on_epoch)
            net.notes.append(f"encoder pre-trained with DGI on this graph: {cfg.pretrain_epochs} steps, "
                             f"loss {res.losses[0]:.3f} -> {res.losses[-1]:.3f}, {res.seconds:.1f} s")
        except _TimeEnded:  # the encoder keeps the steps taken (pretrain trains it in place)
            net.notes.append(f"encoder pre-trained with DGI on this graph: {done[0]} of {cfg.pretrain_epochs} steps: "
                             "the time limit ended it")
    else:
        net.notes.append("encoder not pre-trained")
    return net


class _TimeEnded(Exception):
    """The method's time limit ended DGI pre-training (:func:`make_mars_net`)."""


ARCH_FIELDS = ("hidden", "gnn_layers", "seq_hidden", "segment")  # the network's shape
MARS = PolicyKind("mars", "placer-mars-1", ARCH_FIELDS, make_mars_net)


# ---------------------------------------------------------------------- the method
@register("mars", "Mars: DGI-pre-trained GCN encoder + segment-level seq2seq placer, PPO", "learned", MarsConfig,
          paper="Lan et al., Accelerated Device Placement Optimization with Contrastive Learning (Mars), ICPP 2021",
          available=torch_geometric_available, version=2)
def mars(problem, seed: int, ev: Evaluator, cfg: MarsConfig):
    return MARS_METHOD.run(problem, seed, ev, cfg)


MARS_METHOD = register_learned(GraphPPOMethod(MARS))  # train / place / fine-tune (placer.methods.learned.protocol)
