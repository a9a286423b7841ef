"""ColocRL (Mirhoseini et al., "Device Placement Optimization with Reinforcement Learning", ICML
2017): a sequence-to-sequence policy (:mod:`placer.nn.seq2seq`) reads one embedding per group of
co-located ops and emits one device per group; REINFORCE with a moving-average baseline on the
reward ``-sqrt(step time)``. It is the "RNN-based approach" of Placeto's Table 1 and the policy-gradient
baseline of the Hierarchical Planner and of Post.

What the policy reads (section 2, "each operation is embedded from its type, its output shapes and
its adjacency"), per group, in the graph's topological order (:func:`group_features`):

* type: the histogram of the member ops' types (each type hashed into ``n_types`` buckets). A linear
  layer after it is a learned type embedding averaged over the members;
* output sizes: the mean of log(1 + output MiB), the mean of log(1 + consumers) and log(1 + ops);
* adjacency: the group's position in the sequence and the positions of its ``neighbours`` heaviest
  predecessor and successor groups, each as index / length (the paper pads a list of the indices of
  input and output ops; padding here repeats the group's own position).

Groups: ColocRL used hand-made co-location groups. Ours are the project's colocation rules
(:func:`placer.grouping.colocate`: parameters with their readers, optimizer updates with their
parameter, the graph's own colocation), merged further by Merge-and-Colocate
(:func:`placer.grouping.merge_and_colocate`) when more than ``max_groups`` are left. Groups tied by a
colocation id are one decision.

Training (one *policy step*, section 2; :class:`placer.methods.learned.seq2seq_reinforce.Seq2SeqRLTrainer`):
sample ``samples`` (k) placements in one batched forward pass, simulate them in one
``Evaluator.evaluate_batch`` call, reward ``R = -sqrt(T)`` with T the simulated step time in
seconds, or ``oom_penalty_s`` for a placement that runs out of memory (a failed placement is given a
large fixed running time), and one Adam step on ``-(1/k) sum_i (R_i - b) log p(d_i)`` (minus an
optional entropy bonus), gradient norm clipped; then ``b <- decay b + (1 - decay) mean_i R_i``.

Paper values we use: Adam with a fixed learning rate, gradient clipping at norm 1.0, logits
``C tanh(u / T)`` with C = 5, T = 10, k = 4 placements per policy step (the Hierarchical Planner,
ICLR 2018 section 3, which states it uses ColocRL's settings); a bidirectional encoder of 512 units
(Placeto appendix A.7, for its RNN-based baseline). Ours: the learning rate (1e-3, not the paper's
0.1; ``lr=0.1`` gives the paper's), the baseline's decay (0.9), the OOM penalty (100 s, as Post reads
ColocRL), the device embedding and attention sizes, the type buckets, the neighbour count,
``max_groups``, placing on the GPUs only (``devices``; ops no GPU can run go to their fastest device)
and the entropy bonus (off, as the paper; Placeto tuned one for this baseline). Memory (ours, shared
with the Hierarchical Planner, GDP and Mars): when no placement of the first policy step fits in
memory, :func:`placer.methods.memory_fallback.fit_in_memory` runs.

Modes (:meth:`Seq2SeqRLMethod.search`): search (train on this graph within the budget, return the best
placement evaluated); or from a trained policy state, ``finetune`` more policy steps, then the greedy
placement. Tuning notes and measurements: docs/methods/colocrl.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import PolicyFields
from placer.methods.learned.seq2seq_reinforce import (OpTable, Seq2SeqRLMethod, Seq2SeqRLTrainer, base_units, decision_mask,
                                              families, member_averages, op_table, renumber_by_first, torch_available)

PAPER = "Mirhoseini et al., Device Placement Optimization with Reinforcement Learning, ICML 2017"


# ---------------------------------------------------------------------- ColocRL's config
@dataclass(frozen=True)
class ColocRLConfig(PolicyFields, MethodConfig):
    """ColocRL's hyperparameters (see the module docstring for where each comes from)."""

    placements: int = 4000  # default budget: 1000 policy steps of k = 4 (Budget.placements overrides)
    samples: Annotated[int, Range(">= 1")] = 4  # k: placements sampled per policy step (HP section 3: k = 4)
    lr: Annotated[float, Range("> 0")] = 1e-3  # Adam learning rate, fixed (paper: 0.1; ours, docs/methods/colocrl.md)
    grad_clip: Annotated[float, Range("> 0")] = 1.0  # gradient norm clipping (HP section 3)
    tanh_c: Annotated[float, Range("> 0")] = 5.0  # C: logits C tanh(u / T) (HP section 3)
    temperature: Annotated[float, Range("> 0")] = 10.0  # T (HP section 3)
    baseline_decay: Annotated[float, Range("in [0, 1)")] = 0.9  # moving-average baseline b <- decay b + (1 - decay) mean R (decay our choice)
    entropy: Annotated[float, Range(">= 0")] = 0.0  # entropy bonus weight (not in ColocRL; Placeto tuned one for this baseline)
    oom_penalty_s: Annotated[float, Range(">= 0")] = 100.0  # step time (s) given to an out-of-memory placement (large fixed value; 100 s as Post)
    hidden: Annotated[int, Range(">= 2")] = 512  # LSTM hidden units (Placeto A.7: bidirectional RNN of 512 units for this baseline)
    bidirectional: bool = True  # bidirectional encoder (Placeto A.7)
    device_embed: Annotated[int, Range(">= 1")] = 32  # size of each device's trainable embedding (our choice)
    attention: Annotated[int, Range(">= 1")] = 64  # additive attention size (our choice)
    feed_aligned: bool = True  # decoder also reads the encoder state of its own position (our choice)
    max_groups: Annotated[int, Range(">= 1")] = 256  # groups left by the colocation rules are merged down to this many ("hundreds")
    n_types: Annotated[int, Range(">= 1")] = 64  # hash buckets for op types (our choice)
    neighbours: Annotated[int, Range(">= 0")] = 3  # predecessor / successor positions per group in the adjacency feature (our choice)
    devices: Literal["gpus", "all"] = "gpus"  # candidate devices: "gpus" (ops no GPU runs go to their fastest device) or "all" (ours; paper: "all", the CPU too)
    policy: Any = None  # a trained policy state to place with (None: search mode, train from scratch)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: policy steps on this graph before the greedy placement
    progress: Any = None  # called with one dict per policy step (None: nothing)

    @classmethod
    def paper(cls, **overrides) -> "ColocRLConfig":
        """The paper's settings where it gives them (Mirhoseini et al. 2017, section 2; its training
        settings as the Hierarchical Planner's section 3 restates them: Adam at a fixed learning rate
        of 0.1, clipping at 1.0, C = 5, T = 10, k = 4; the encoder as Placeto's A.7 gives it, a
        bidirectional RNN of 512 units), ``overrides`` applied. Differs from the defaults in
        ``lr=0.1`` and ``devices="all"`` (the paper places on the CPU and the GPUs). Not stated,
        so this project's: the baseline's decay, the OOM penalty (a "large fixed running time"),
        the device embedding, attention and type-bucket sizes, the neighbour count and
        ``max_groups``. Not expressible by the fields: the paper's hand-made co-location groups
        (here the colocation rules merged by Merge-and-Colocate), its asynchronous controllers
        and real measurements, and the memory fallback after the first policy step
        (:mod:`placer.methods.memory_fallback`, ours), which always runs when nothing fits."""
        return cls(**{**dict(lr=0.1, devices="all"), **overrides})

    def checks(self):
        return [(self.hidden % 2 == 0, "hidden", "an even number >= 2")]


# the config fields that decide the network's shape (a policy state brings its own)
SHAPE_FIELDS = ("hidden", "bidirectional", "device_embed", "attention", "feed_aligned", "n_types", "neighbours")


# ---------------------------------------------------------------------- what the policy reads (section 2)
def group_features(problem, tab: OpTable, label: np.ndarray, L: int, neighbours: int) -> np.ndarray:
    """(L, n_types + 3 + 1 + 2 * neighbours) ColocRL features of the groups ``label`` (n,) -> [0, L),
    groups numbered in topological order (see the module docstring)."""
    g = problem.graph
    count, hist, mean_out, mean_cons = member_averages(tab, label, L)
    pos = (np.arange(L) + 0.5) / L
    adj = np.repeat(pos[:, None], 2 * neighbours, axis=1)
    if neighbours:
        s, d = label[g.edge_src], label[g.edge_dst]
        keep = s != d
        key = s[keep] * L + d[keep]
        uk, inv = np.unique(key, return_inverse=True)
        w = np.bincount(inv, weights=g.edge_bytes[keep], minlength=len(uk))
        a, b = uk // L, uk % L
        for col, (frm, to) in enumerate(((b, a), (a, b))):  # predecessors of b, successors of a
            order = np.lexsort((to, -w, frm))
            frm_o, to_o = frm[order], to[order]
            starts = np.searchsorted(frm_o, np.arange(L))
            rank = np.arange(len(frm_o)) - starts[frm_o]
            sel = rank < neighbours
            adj[frm_o[sel], col * neighbours + rank[sel]] = pos[to_o[sel]]
    return np.concatenate([hist, mean_out[:, None], mean_cons[:, None], np.log1p(count)[:, None] / 5.0,
                           pos[:, None], adj], axis=1).astype(np.float32)


# ---------------------------------------------------------------------- the policy and the method
class ColocRLTrainer(Seq2SeqRLTrainer):
    """ColocRL's policy: one seq2seq decision per group of co-located ops (more merged by
    Merge-and-Colocate when the rules leave over ``max_groups``), trained by the shared REINFORCE step."""

    method = "colocrl"

    def build(self) -> None:
        import torch

        from placer import grouping
        from placer.nn.seq2seq import Seq2SeqConfig, Seq2SeqPlacer

        cfg, P = self.cfg, self.problem
        self.units = base_units(P, cfg.devices, self.method)
        self.n_candidates = len(self.units.cand)
        if self.units.n_units > cfg.max_groups:
            fam = families(grouping.merge_and_colocate(P, cfg.max_groups, base=grouping.colocate(P)), P.graph)
        else:
            fam = self.units.unit_of
        # one decision per family; a base unit follows the family of its first op
        first = np.full(self.units.n_units, -1, dtype=np.int64)
        first[self.units.unit_of[::-1]] = np.arange(P.n_ops)[::-1]
        self.seq_of_unit = renumber_by_first(fam[first])
        self.L = int(self.seq_of_unit.max()) + 1
        op_seq = self.seq_of_unit[self.units.unit_of]
        feats = group_features(P, op_table(P, cfg.n_types), op_seq, self.L, cfg.neighbours)
        self.x = torch.as_tensor(feats).unsqueeze(0)
        self.mask = torch.as_tensor(decision_mask(self.units, self.seq_of_unit, self.L))
        self.net = Seq2SeqPlacer(Seq2SeqConfig(
            n_features=feats.shape[1], n_devices=self.n_candidates, hidden=cfg.hidden, device_embed=cfg.device_embed,
            attention=cfg.attention, tanh_c=cfg.tanh_c, temperature=cfg.temperature, feed_aligned=cfg.feed_aligned,
            bidirectional=cfg.bidirectional))

    def modules(self) -> dict:
        return {"placer": self.net}

    def sample(self, k: int, greedy: bool = False):
        out = self.net(self.x, self.mask, samples=k, greedy=greedy, generator=self.gen)
        actions = out.devices.numpy()[:, self.seq_of_unit]
        return self.units.expand(actions), out.log_prob, out.entropy


@register("colocrl", "ColocRL: seq2seq LSTM with attention over colocation groups, REINFORCE on -sqrt(step time)",
          "learned", ColocRLConfig, paper=PAPER, available=torch_available, version=1)
def colocrl(problem, seed: int, ev: Evaluator, cfg: ColocRLConfig):
    return COLOCRL.run(problem, seed, ev, cfg)


def fresh_colocrl(problem, seed: int, ev: Evaluator, cfg: ColocRLConfig, notes: list[str]):
    """Search mode's start (:meth:`Seq2SeqRLMethod.search`): a fresh policy, no warm start."""
    return cfg, ColocRLTrainer(problem, cfg, seed)


# train / place / fine-tune (methods.learned); search: a fresh policy or the given one, then run_trainer
COLOCRL = register_learned(Seq2SeqRLMethod("colocrl", ColocRLTrainer, SHAPE_FIELDS, fresh_colocrl,
                                           lambda tr, cfg: f"{tr.L} groups"))
