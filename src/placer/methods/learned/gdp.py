"""GDP (Zhou et al., 2019, "GDP: Generalized Device Placement for Dataflow Graphs", arXiv:1910.01578):
a GraphSAGE graph encoder, a segment-recurrent attention placer and PPO, trained in batches across
graphs so that one policy places graphs it has not seen. The network (sections 3.1-3.3) is
:mod:`placer.nn.gdp`; PPO (section 3.3) is :mod:`placer.rl.ppo`, driven by
:mod:`placer.methods.learned.graph_ppo`; the hyperparameters are :class:`GDPConfig`'s.

As a method (search mode) it trains on the one graph within the placement budget and returns the
best placement evaluated. Given a trained ``policy`` (``GDP_METHOD.train``) it runs ``finetune`` PPO
updates on this graph, then places greedily (:mod:`placer.methods.learned.protocol`). The start and
the memory fallback (ours), our choices where the paper gives no number, and measurements:
docs/methods/gdp.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.graph_ppo import GraphPPOMethod, PolicyKind, torch_geometric_available
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import PolicyFields


@dataclass(frozen=True)
class GDPConfig(PolicyFields, MethodConfig):
    """GDP's hyperparameters: the paper's where it gives them, ours marked (module docstring)."""

    placements: int = 2_000  # default budget in placements (simulations) when none is given
    nodes: Annotated[int, Range(">= 1")] = 1_024  # most nodes placed: op groups beyond this are merged into contiguous chunks (ours)
    devices: Literal["auto", "gpus", "all"] = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: Annotated[int, Range(">= 1")] = 128  # embedding and attention width (ours)
    gnn_layers: Annotated[int, Range(">= 1")] = 3  # GraphSAGE layers (ours)
    attn_layers: Annotated[int, Range(">= 1")] = 2  # attention layers of the placer (ours)
    heads: Annotated[int, Range(">= 1")] = 4  # attention heads (ours)
    segment: Annotated[int, Range(">= 1")] = 128  # nodes per segment; the memory is the previous segment (ours)
    superposition: bool = True  # graph-conditioned gates on every attention layer (GDP section 3.3)
    batch: Annotated[int, Range(">= 1")] = 8  # placements sampled per PPO update (ours)
    lr: Annotated[float, Range("> 0")] = 3e-3  # Adam learning rate (ours; docs/methods/gdp.md)
    ppo_epochs: Annotated[int, Range(">= 1")] = 4  # K: PPO epochs per batch
    minibatches: Annotated[int, Range(">= 1")] = 1  # minibatches per PPO epoch
    clip: Annotated[float, Range("in (0, 1)")] = 0.2  # PPO clipping epsilon
    entropy: Annotated[float, Range(">= 0")] = 0.01  # entropy bonus coefficient
    grad_clip: Annotated[float, Range(">= 0")] = 1.0  # max gradient norm
    reward: Literal["sqrt", "linear"] = "sqrt"  # reward: sqrt = -sqrt(step ms) (Hierarchical Planner's), linear = -step ms
    policy: Any = None  # a trained policy (its state dict) to place with (None: search mode, train from scratch)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: PPO updates on this graph before the greedy placement
    progress: Any = None  # called with one dict per PPO update (None: nothing)
    log_every: Annotated[int, Range(">= 1")] = 10  # log a progress line (logger placer.gdp) every this many updates
    start: Literal["best", "none"] = "best"  # best: the searched layer split or the fastest single device, whichever is faster, is simulated first (ours; none: the paper's start)
    split_search: Annotated[int, Range(">= 0")] = 24  # simulations of that split's cut search, counted in the budget (ours)
    start_moves: Annotated[float, Range("> 0")] = 2.0  # nodes a sample moves off its anchor on average: each keeps the anchor's device with probability 1 - start_moves / N (ours)
    follow_best: bool = True  # the anchor moves to the best sample whenever one beats it (ours; False: it stays the start)

    @classmethod
    def paper(cls, **overrides) -> "GDPConfig":
        """The paper's settings where it gives them (Zhou et al. 2019, section 3: GraphSAGE embedding
        3.1, segment-recurrent attention placer 3.2, superposition and PPO 3.3), ``overrides``
        applied: the defaults are that design already, so only the start differs, the paper's
        (``start="none"``: no layer split or single device simulated first and no anchor;
        ``split_search``, ``start_moves`` and ``follow_best`` then do nothing). The text this project read (not in
        ../shared/papers) states no number for ``nodes``, ``hidden``, ``gnn_layers``,
        ``attn_layers``, ``heads``, ``segment``, ``batch`` or ``lr``: those stay this project's.
        Not expressible by the fields: the memory fallback after the first PPO update
        (:mod:`placer.methods.memory_fallback`, ours) always runs when nothing evaluated fits."""
        return cls(**{**dict(start="none"), **overrides})

    def checks(self):
        return [(self.hidden % self.heads == 0, "hidden", "a multiple of heads")]


# ---------------------------------------------------------------------- the network (sections 3.1-3.3)
def make_gdp_net(cfg, n_actions: int, ctxs=None, seed: int = 0, stop=None):
    """GDP's network (:class:`placer.nn.gdp.GDPNet`) of ``cfg``'s shape for ``n_actions`` devices."""
    from placer.nn.gdp import GDPNet

    return GDPNet(cfg, n_actions)


ARCH_FIELDS = ("hidden", "gnn_layers", "attn_layers", "heads", "segment", "superposition")  # the network's shape
GDP = PolicyKind("gdp", "placer-gdp-1", ARCH_FIELDS, make_gdp_net)


# ---------------------------------------------------------------------- the method
@register("gdp", "GDP: GraphSAGE + segment-recurrent (Transformer-XL style) attention placer, PPO", "learned", GDPConfig,
          paper="Zhou et al., GDP: Generalized Device Placement for Dataflow Graphs, arXiv:1910.01578, 2019",
          available=torch_geometric_available, version=2)
def gdp(problem, seed: int, ev: Evaluator, cfg: GDPConfig):
    return GDP_METHOD.run(problem, seed, ev, cfg)


GDP_METHOD = register_learned(GraphPPOMethod(GDP))  # train / place / fine-tune (placer.methods.learned.protocol)
