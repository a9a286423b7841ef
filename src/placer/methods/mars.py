"""Mars (Lan, Chen and Li, "Accelerated Device Placement Optimization with Contrastive Learning",
ICPP 2021; papers/003_a13e6b8ab67acb3a.txt): a GCN graph encoder pre-trained with contrastive
self-supervision (Deep Graph Infomax), a segment-level sequence-to-sequence placer, PPO.

Architecture, with our choices where the text we could read gives no number:

* graph encoder: ``gnn_layers`` = 3 GCN layers of ``hidden`` = 128 units (:mod:`placer.nn.encoder`:
  op type, output size, compute cost and adjacency as node features; the same weights for graphs of
  any size);
* self-supervised pre-training (:mod:`placer.nn.pretrain`): corruption by feature shuffling, readout
  sigma(mean h), bilinear discriminator, Jensen-Shannon objective. ``pretrained=<file>`` loads an
  encoder ``placer pretrain`` wrote (pre-trained on a set of graphs); otherwise ``pretrain=True``
  pre-trains on the graph to place for ``pretrain_epochs`` steps (self-supervised: it simulates
  nothing, so it costs no placements, only seconds). ``pretrain=False`` starts from random encoder
  weights. ``finetune_encoder`` keeps training the encoder with the placer during RL (the paper:
  "can be directly used ... and also can be fine-tuned");
* segment-level placer: the node sequence (topological order) is split into segments of
  ``segment`` = 128 nodes, placed one after the other by the shared LSTM encoder-decoder with
  attention (:mod:`placer.nn.seq2seq`, ``seq_hidden`` = 256), each segment starting from the
  recurrent state (encoder, decoder, last device) the previous one ended with; attention covers the
  current segment;
* PPO (:mod:`placer.rl.ppo`): ``batch`` = 8 placements per update, clipped objective (eps 0.2), K = 4
  epochs, advantages normalised over the batch, entropy bonus 0.01, Adam lr 1e-3, reward
  -sqrt(step time in ms) (the Hierarchical Planner's, whose setting Mars follows). The shared
  seq2seq module returns each segment's summed log-probability, so the PPO ratio is taken per
  segment, length-normalised: r = exp((log pi - log pi_old) / L_segment), the geometric mean of the
  per-op ratios (our choice: the ratio of a whole segment's joint probability would clip at once).

The start (ours, not in the paper; ``start="none"`` is the paper's): as the Hierarchical Planner
and Post here, the layer split with its cuts searched over 2..G GPUs (``split_search`` = 24
simulations) and the whole graph on the fastest device are simulated first, counted in the budget
(:func:`placer.methods.gdp.start_target`); the policy is then warm-started toward the faster one by
teacher-forced supervised steps until its mean per-node probability reaches ``start_mass`` = 0.9
(at most ``start_steps`` = 50; nothing simulated). Why: from near-uniform weights the policy spent
its 2,000 placements learning to gather GNMT on one GPU and returned 3,453 ms against 3,189 ms for
the whole graph on one GPU (``placer bench mars`` at stop 14); with the start, GNMT on 4 K80s at
150 placements returns the split's 2,084 ms (the warm start reached 0.91 in 10 steps, 1.6 s each).
When nothing evaluated up to the first PPO update fits in memory, the memory fallback of
:mod:`placer.methods.memory_fallback` runs as for GDP (:func:`placer.methods.gdp.fallback_after_first`).

As a method (search mode) it trains on the one graph within the placement budget and returns the
best placement evaluated. With ``policy=<checkpoint>`` (written by ``save=`` or :func:`train_mars`)
it starts from a trained policy: ``finetune`` PPO updates, then the greedy placement.

Measured (BERT-base, 692 nodes, k80x4, seed 0, 1,000 placements): single GPU 1,017 ms, local search
747 ms, GDP 972 ms, Mars with DGI on this graph 1,013 ms, Mars with an encoder ``placer pretrain``
pre-trained on six zoo graphs (ResNet-50/101, NMT-2/4, RNNLM, Inception-V3 b32) 998 ms (reached at
402 placements). The policy starts near uniform over the GPUs (~1,600 ms: everything talks to
everything) and mostly learns to gather the graph on one GPU within these budgets.

Speed (GNMT, 1,024 nodes, k80x4, 90 placements, one core): the K = 4 re-scoring passes of each PPO
update score the sampled devices with :func:`placer.nn.seq2seq_teacher.teacher_forced` (one fused
LSTM call and one attention tensor per segment) instead of the decoder's step loop: 165 s -> 92 s
for the run, 11.7 s -> 5.7 s per update; sampling stays a step loop (1.0 s per update of 8).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.gdp import ARCH_FIELDS, run_learned, segments, start_checks, train_policy

MARS_FORMAT = "placer-mars-1"


def _available() -> str | None:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError as e:
        return f"needs the 'torch' extra and torch_geometric ({e.name} is not installed): pip install 'placer[torch]'"
    return None


def _net_class():
    import torch
    from torch import nn

    from placer.nn.encoder import EncoderConfig, GraphEncoder
    from placer.nn.seq2seq import Seq2SeqConfig, Seq2SeqPlacer
    from placer.nn.seq2seq_teacher import teacher_forced

    class MarsNet(nn.Module):
        """GCN encoder -> segment-by-segment seq2seq placer."""

        def __init__(self, cfg, n_actions: int):
            super().__init__()
            self.cfg, self.n_actions = cfg, n_actions
            self.encoder = GraphEncoder(EncoderConfig("gcn", cfg.hidden, cfg.gnn_layers))
            self.placer = Seq2SeqPlacer(Seq2SeqConfig(n_features=cfg.hidden, n_devices=n_actions, hidden=cfg.seq_hidden))
            self.notes: list[str] = []

        def embed(self, g):
            z = self.encoder(g.data.x, g.data.edge_index)
            return z if self.cfg.finetune_encoder else z.detach()

        def _decode(self, g, B: int, *, actions=None, greedy=False, gen=None):
            """Per segment: devices (B, L_s), mean log-prob per op (B,), mean entropy per op (B,)."""
            z = self.embed(g)
            state, devs, lps, ents = None, [], [], []
            for s, e in segments(g.n, self.cfg.segment):
                if actions is not None:  # re-scoring a sampled batch: all positions at once
                    out = teacher_forced(self.placer, z[s:e].unsqueeze(0), actions[:, s:e], g.feasible[s:e], state)
                else:
                    out = self.placer(z[s:e].unsqueeze(0), g.feasible[s:e], samples=B if state is None else None,
                                      greedy=greedy, generator=gen, state=state)
                state = out.state
                devs.append(out.devices)
                lps.append(out.log_prob / (e - s))
                ents.append(out.entropy / (e - s))
            return torch.cat(devs, dim=1), torch.stack(lps, dim=1), torch.stack(ents, dim=1)

        def sample(self, g, B: int, gen):
            a, lp, _ = self._decode(g, B, gen=gen)
            return a, lp

        def evaluate(self, g, actions):
            _, lp, ent = self._decode(g, actions.shape[0], actions=actions)
            return lp, ent

        def greedy(self, g):
            return self._decode(g, 1, greedy=True)[0][0]

    return MarsNet


def make_mars_net(cfg, n_actions: int, ctxs=None, seed: int = 0):
    """The network, its encoder pre-trained as the config says (see the module docstring)."""
    from placer.nn.encoder import EncoderConfig
    from placer.nn.pretrain import PretrainConfig, load_encoder, pretrain

    net = _net_class()(cfg, n_actions)
    want = EncoderConfig("gcn", cfg.hidden, cfg.gnn_layers)
    if cfg.pretrained:
        net.encoder.load_state_dict(load_encoder(cfg.pretrained, want).state_dict())
        net.notes.append(f"encoder pre-trained ({cfg.pretrained})")
    elif cfg.pretrain and ctxs and cfg.pretrain_epochs > 0:
        res = pretrain([c.data for c in ctxs], want, PretrainConfig(epochs=cfg.pretrain_epochs, seed=seed),
                       encoder=net.encoder)
        net.notes.append(f"encoder pre-trained with DGI on this graph: {cfg.pretrain_epochs} steps, "
                         f"loss {res.losses[0]:.3f} -> {res.losses[-1]:.3f}, {res.seconds:.1f} s")
    else:
        net.notes.append("encoder not pre-trained")
    return net


@dataclass(frozen=True)
class MarsConfig(MethodConfig):
    """Mars's hyperparameters (module docstring: which come from the paper and which are ours)."""

    placements: int = 2_000  # default budget in placements (simulations) when none is given
    nodes: int = 1_024  # most nodes placed: op groups beyond this are merged into contiguous chunks (ours)
    devices: str = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: int = 128  # GCN embedding size (ours; `placer pretrain --hidden` must match)
    gnn_layers: int = 3  # GCN layers (ours; `placer pretrain --layers` must match)
    seq_hidden: int = 256  # LSTM size of the seq2seq placer (ours)
    segment: int = 128  # nodes per segment of the segment-level placer (ours)
    pretrain: bool = True  # DGI pre-training of the encoder on this graph before RL (when no file is given)
    pretrain_epochs: int = 200  # DGI steps of that pre-training (ours)
    pretrained: str | None = None  # encoder checkpoint from `placer pretrain` (overrides pretrain)
    finetune_encoder: bool = True  # train the encoder with the placer during RL (else frozen)
    batch: int = 8  # placements sampled per PPO update (ours)
    lr: float = 1e-3  # Adam learning rate (ours; 3e-3 gave the same at 400 placements of BERT: 1,012.6 vs 1,012.9 ms)
    ppo_epochs: int = 4  # K: PPO epochs per batch
    minibatches: int = 1  # minibatches per PPO epoch
    clip: float = 0.2  # PPO clipping epsilon
    entropy: float = 0.01  # entropy bonus coefficient
    grad_clip: float = 1.0  # max gradient norm
    reward: str = "sqrt"  # reward: sqrt = -sqrt(step ms) (Hierarchical Planner's), linear = -step ms
    policy: str | None = None  # start from this trained policy checkpoint (else train from scratch)
    finetune: int = 0  # with policy: PPO updates on this graph before the greedy placement
    save: str | None = None  # write the trained policy here (a weights_only-safe state dict)
    log: str | None = None  # append one JSON line per PPO update to this file
    log_every: int = 10  # log a progress line (logger placer.mars) every this many updates
    start: str = "best"  # best: the searched layer split or the fastest single device, whichever is faster, is simulated first and the policy warm-started toward it (ours; none: the paper's start)
    split_search: int = 24  # simulations of that split's cut search, counted in the budget (ours)
    start_mass: float = 0.9  # warm start: supervised steps until the start's mean per-node probability reaches this (ours)
    start_steps: int = 50  # most warm-start steps (ours; GNMT on 4 GPUs: 0.94 after 10 steps, 1.6 s each)

    def checks(self):
        return start_checks(self) + [(self.placements >= 1, "placements", ">= 1"), (self.nodes >= 1, "nodes", ">= 1"),
                (self.devices in ("auto", "gpus", "all"), "devices", "auto, gpus or all"),
                (self.hidden >= 1, "hidden", ">= 1"), (self.gnn_layers >= 1, "gnn_layers", ">= 1"),
                (self.seq_hidden >= 1, "seq_hidden", ">= 1"), (self.segment >= 1, "segment", ">= 1"),
                (self.pretrain_epochs >= 0, "pretrain_epochs", ">= 0"), (self.batch >= 1, "batch", ">= 1"),
                (self.lr > 0, "lr", "> 0"), (self.ppo_epochs >= 1, "ppo_epochs", ">= 1"),
                (self.minibatches >= 1, "minibatches", ">= 1"), (0 < self.clip < 1, "clip", "in (0, 1)"),
                (self.entropy >= 0, "entropy", ">= 0"), (self.grad_clip >= 0, "grad_clip", ">= 0"),
                (self.reward in ("sqrt", "linear"), "reward", "sqrt or linear"),
                (self.finetune >= 0, "finetune", ">= 0"), (self.log_every >= 1, "log_every", ">= 1")]


ARCH_FIELDS["mars"] = ("hidden", "gnn_layers", "seq_hidden", "segment")


@register("mars", "Mars: DGI-pre-trained GCN encoder + segment-level seq2seq placer, PPO", "learned", MarsConfig,
          paper="Lan et al., Accelerated Device Placement Optimization with Contrastive Learning (Mars), ICPP 2021",
          available=_available, version=1)
def mars(problem, seed: int, ev: Evaluator, cfg: MarsConfig):
    return run_learned("mars", problem, seed, ev, cfg, make_mars_net, MARS_FORMAT)


def train_mars(problems: list, cfg: MarsConfig | None = None, placements: int = 2_000, out=None, seed: int = 0,
               sim_params=None, resume=None, on_update=None):
    """One Mars policy trained on several graphs (see :func:`placer.methods.gdp.train_policy`)."""
    return train_policy("mars", problems, cfg or MarsConfig(), make_mars_net, MARS_FORMAT, placements, out, seed,
                        sim_params, resume, on_update)
