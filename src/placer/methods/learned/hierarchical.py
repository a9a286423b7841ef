"""The Hierarchical Planner (Mirhoseini et al., "A Hierarchical Model for Device Placement", ICLR
2018; papers/002_278923c6d22b8d4e.txt): a feed-forward *Grouper* assigns every op to one of M groups,
a sequence-to-sequence *Placer* (:mod:`placer.nn.seq2seq`) assigns every group to a device, and both
are trained jointly with REINFORCE on the reward ``-sqrt(step time)``.

Section 2 of the paper, as built here:

* op embedding (the Grouper's input): the op's type (a learned embedding of its type, hashed into
  ``n_types`` buckets), "size and number of outputs" (log(1 + output MiB), log(1 + consumers)) and
  its connections (its position in the order the Grouper reads and the positions of up to
  ``neighbours`` of its inputs and outputs, each as rank / n; ColocRL's padded adjacency lists),
  :func:`op_adjacency`;
* the Grouper: one hidden layer of ``grouper_hidden`` ReLU units and a softmax over the M groups
  per op, logits ``C tanh(u / T)`` as the Placer's (section 3 applies C and T to both policies).
  Ops that must share a device under the project's colocation rules (:func:`placer.grouping.colocate`)
  draw their group once, from the mean of their logits, so that every sampled grouping expands to a
  valid placement;
* group embedding (:func:`group_embeddings`): "the concatenation of ... the average of the member
  operation type embeddings [the members' type histogram; the Placer's first linear layer is the
  learned embedding], the average of the member operation sizes and number of outputs, and
  intra-group and inter-group connectivity information encoded as an adjacency matrix" [the group's
  row and column of the M x M matrix of log(1 + edges between groups), its diagonal the edges inside
  the group];
* the Placer reads the M group embeddings in group order and returns one device per group; every op
  goes on its group's device (an op that cannot run there goes to its colocation unit's fallback,
  :class:`placer.methods.learned.seq2seq_reinforce.BaseUnits`). A learned grouping may make the group graph
  cyclic; the placement is expanded per op and simulated on the full op graph, so that is harmless.

Training (section 2, eq. J = sum_g sum_d p(g) p(d | g) R_d): per policy step one grouping is sampled
(m = 1), k = 4 placements are sampled from it (section 3: m = 1, k = 4) in one batched forward pass
and evaluated in one ``Evaluator.evaluate_batch`` call; ``R = -sqrt(T)`` (T in seconds; an
out-of-memory placement counts as ``oom_penalty_s``); one Adam step on
``-(1/k) sum_i (R_i - b) [log p(g) + log p(d_i | g)]`` over both networks, gradient norm clipped; b is
a moving average of rewards (:class:`placer.methods.learned.seq2seq_reinforce.Seq2SeqRLTrainer`). Section 3:
Adam with a fixed learning rate of 0.1, clipping at 1.0, C = 5, T = 10, m = 1, k = 4; we keep all but
the learning rate, 1e-3 by default (as ColocRL here).

Where we chose (the text we could read does not say): M = ``n_groups`` = 256 (the paper calls M a
hyperparameter), cut to the number of colocation units on a graph with fewer (a Grouper cannot fill
more groups than it has units), the Grouper's hidden size, the Placer's LSTM size (256), the
moving-average decay, the OOM penalty (100 s), the sizes of the embeddings, and placing on the GPUs
only by default (``devices``). The memory fallback after the first policy step
(:mod:`placer.methods.memory_fallback`) as ColocRL's.

Not in the paper, two warm starts (supervised steps, no placement simulated):

* ``warm_start`` steps pull the Grouper toward M contiguous chunks of the order it reads: the ops
  sorted by their piece of the layer split (:mod:`placer.methods.layer_split`: forward units cut,
  backward ops with the forward op they mirror, the rest with the neighbours they exchange the most
  bytes with), found as the ``layer-split`` method finds it (the best over 1..G GPUs, fastest first,
  each split's cuts searched with ``split_search`` simulations, all counted in the budget,
  :func:`split_pieces`), then by topological index (:meth:`HierarchicalTrainer.warm_start`). ``warm_start=0`` is the
  paper's start, from which each op's group is close to uniform over the M groups;
* ``placer_start`` pulls the Placer toward a start placement until its devices have mean probability
  ``start_mass`` (geometric mean over the M groups): "split", each chunk on its piece of the layer
  split, or "single", every group on the fastest GPU; "best" (default) simulates both once (2
  placements of the budget) and takes the faster (:func:`choose_start`).
  ``placer_start="none"`` is the paper's start.

Modes (:meth:`Seq2SeqRLMethod.search`): search, or from a trained policy state, as ColocRL's. Why the
warm starts, and the tuning notes: docs/methods/hierarchical.md; the figures are the committed tables
in results/hp-table1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import PolicyFields
from placer.methods.learned.seq2seq_reinforce import (BaseUnits, OpTable, Seq2SeqRLMethod, Seq2SeqRLTrainer, base_units,
                                              decision_mask, member_averages, op_table, torch_available)
from placer.nn.threads import one_thread

PAPER = "Mirhoseini et al., A Hierarchical Model for Device Placement, ICLR 2018"


@dataclass(frozen=True)
class HierarchicalConfig(PolicyFields, MethodConfig):
    """The Hierarchical Planner's hyperparameters (see the module docstring for their sources)."""

    placements: int = 4000  # default budget: 1000 policy updates (section 3) of k = 4 placements
    samples: Annotated[int, Range(">= 1")] = 4  # k: placements sampled from each grouping (section 3: k = 4; m = 1 grouping per step)
    n_groups: Annotated[int, Range(">= 1")] = 256  # M: groups the Grouper chooses between (a hyperparameter in the paper; 256 our choice)
    lr: Annotated[float, Range("> 0")] = 1e-3  # Adam learning rate, fixed (paper: 0.1; ours, docs/methods/colocrl.md)
    grad_clip: Annotated[float, Range("> 0")] = 1.0  # gradient norm clipping over both networks (section 3)
    tanh_c: Annotated[float, Range("> 0")] = 5.0  # C: logits C tanh(u / T) in both networks (section 3)
    temperature: Annotated[float, Range("> 0")] = 10.0  # T (section 3)
    baseline_decay: Annotated[float, Range("in [0, 1)")] = 0.9  # moving-average baseline b <- decay b + (1 - decay) mean R (decay our choice)
    entropy: Annotated[float, Range(">= 0")] = 0.0  # entropy bonus weight (not in the paper)
    oom_penalty_s: Annotated[float, Range(">= 0")] = 100.0  # step time (s) given to an out-of-memory placement (as ColocRL; 100 s our choice)
    grouper_hidden: Annotated[int, Range(">= 1")] = 64  # hidden ReLU units of the feed-forward Grouper (our choice)
    warm_start: Annotated[int, Range(">= 0")] = 1000  # Grouper steps toward contiguous topological chunks before RL (ours; paper: 0, no warm start)
    placer_start: Literal["best", "split", "single", "none"] = "best"  # Placer's start: "best" of "split" / "single" (each simulated once), or "none" (ours; paper: "none")
    start_mass: Annotated[float, Range("in (0, 1)")] = 0.99  # Placer warm start stops when its start's devices reach this mean probability (ours)
    split_search: Annotated[int, Range(">= 0")] = 24  # simulations moving the layer split's cuts for each piece count, as the layer-split method (ours; 0 = equal compute)
    type_embed: Annotated[int, Range(">= 1")] = 16  # size of the Grouper's learned op-type embedding (our choice)
    hidden: Annotated[int, Range(">= 2")] = 256  # Placer LSTM hidden units (our choice)
    bidirectional: bool = False  # Placer encoder reads both ways (the paper's is one-way)
    device_embed: Annotated[int, Range(">= 1")] = 32  # size of each device's trainable embedding (our choice)
    attention: Annotated[int, Range(">= 1")] = 64  # additive attention size (our choice)
    feed_aligned: bool = True  # decoder also reads the encoder state of its own position (our choice)
    n_types: Annotated[int, Range(">= 1")] = 64  # hash buckets for op types (our choice)
    neighbours: Annotated[int, Range(">= 0")] = 3  # input / output positions per op in the Grouper's adjacency feature (our choice)
    devices: Literal["gpus", "all"] = "gpus"  # candidate devices: "gpus" (ops no GPU runs go to their fastest device) or "all" (ours; paper: "all", the CPU too)
    policy: Any = None  # a trained policy state to place with (None: search mode, train from scratch)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: policy steps on this graph before the greedy placement
    progress: Any = None  # called with one dict per policy step (None: nothing)

    @classmethod
    def paper(cls, **overrides) -> "HierarchicalConfig":
        """The paper's settings where it gives them (Mirhoseini et al. 2018, section 2: the Grouper
        and Placer trained jointly with REINFORCE on -sqrt(runtime); section 3: Adam at a fixed
        learning rate of 0.1, clipping at 1.0, C = 5, T = 10, m = 1, k = 4, 1,000 policy updates;
        the CPU and the GPUs as devices, section 3's Mincut being the baseline that "only
        consider[s] GPUs"), ``overrides`` applied. Differs from the defaults in ``lr=0.1``,
        ``devices="all"`` and the paper's start: no Grouper warm start (``warm_start=0``) and no
        Placer warm start (``placer_start="none"``; ``start_mass`` and ``split_search`` then do
        nothing). Not stated, so this project's: M (``n_groups``, "a hyperparameter"), the
        Grouper's hidden size, the Placer's LSTM size, the embedding sizes, the baseline's decay
        and the OOM penalty. Not expressible by the fields: the paper's 4 asynchronous
        controllers with 16 workers and real measurements, and the memory fallback after the first
        policy step (:mod:`placer.methods.memory_fallback`, ours), which always runs when nothing
        fits."""
        return cls(**{**dict(lr=0.1, devices="all", warm_start=0, placer_start="none"), **overrides})

    def checks(self):
        return [(self.hidden % 2 == 0, "hidden", "an even number >= 2")]


# the config fields that decide the networks' shape (a policy state brings its own)
SHAPE_FIELDS = ("n_groups", "grouper_hidden", "type_embed", "hidden", "bidirectional", "device_embed", "attention",
                "feed_aligned", "n_types", "neighbours")


def op_adjacency(problem, neighbours: int, rank: np.ndarray | None = None) -> np.ndarray:
    """(n, 1 + 2 * neighbours): the op's position and those of its first inputs and outputs, as
    rank / n (``rank``: the op's place in the order the Grouper reads, default the topological
    index; padding repeats its own position)."""
    g = problem.graph
    n = g.n_ops
    pos = ((np.arange(n) if rank is None else np.asarray(rank)) + 0.5) / n
    out = np.repeat(pos[:, None], 1 + 2 * neighbours, axis=1)
    for col, (ptr, idx) in enumerate(((g.pred_ptr, g.pred_idx), (g.succ_ptr, g.succ_idx))):
        owner = np.repeat(np.arange(n), np.diff(ptr))
        rank = np.arange(len(idx)) - ptr[owner]
        sel = rank < neighbours
        out[owner[sel], 1 + col * neighbours + rank[sel]] = pos[idx[sel]]
    return out.astype(np.float32)


def group_embeddings(problem, tab: OpTable, op_group: np.ndarray, M: int) -> np.ndarray:
    """(M, n_types + 3 + 2M) group embeddings of section 2 for an op -> group map (see the module
    docstring). Empty groups get zeros."""
    g = problem.graph
    count, hist, mean_out, mean_cons = member_averages(tab, op_group, M)
    adj = np.bincount(op_group[g.edge_src] * M + op_group[g.edge_dst], minlength=M * M).reshape(M, M)
    adj = np.log1p(adj) / 5.0
    return np.concatenate([hist, mean_out[:, None], mean_cons[:, None], np.log1p(count)[:, None] / 5.0, adj, adj.T],
                          axis=1).astype(np.float32)


class HierarchicalTrainer(Seq2SeqRLTrainer):
    """The Grouper and the Placer (section 2), trained jointly by the shared REINFORCE step.
    ``piece`` (n_ops,): each op's piece of the layer split the Grouper reads in (default: the split at
    equal compute, :func:`split_pieces`); ``units``: the colocation units
    (:func:`placer.methods.learned.seq2seq_reinforce.base_units`) when the caller has them already."""

    method = "hierarchical"

    def __init__(self, problem, cfg, seed: int = 0, piece: np.ndarray | None = None, units: BaseUnits | None = None):
        self.given_piece, self.given_units = piece, units
        super().__init__(problem, cfg, seed)

    def build(self) -> None:
        import torch
        from torch import nn

        from placer.nn.seq2seq import Seq2SeqConfig, Seq2SeqPlacer

        cfg, P = self.cfg, self.problem
        self.units: BaseUnits = (base_units(P, cfg.devices, self.method) if self.given_units is None
                                 else self.given_units)
        self.n_candidates = len(self.units.cand)
        self.tab = op_table(P, cfg.n_types)
        self.types = torch.as_tensor(self.tab.type_bucket)
        M, n = cfg.n_groups, P.n_ops
        # the order the Grouper reads: ops by their piece of the layer split, then topological index
        self.piece = (split_pieces(P, self.units.unit_of, self.units.cand) if self.given_piece is None
                      else np.asarray(self.given_piece, dtype=np.int64))
        self.order = np.lexsort((np.arange(n), self.piece))
        rank = np.empty(n, dtype=np.int64)
        rank[self.order] = np.arange(n)
        self.chunk = (rank * M) // max(n, 1)
        self.op_x = torch.as_tensor(np.concatenate([self.tab.log_out[:, None], self.tab.log_consumers[:, None],
                                                    op_adjacency(P, cfg.neighbours, rank)], axis=1))
        self.unit_index = torch.as_tensor(self.units.unit_of)
        self.unit_count = torch.bincount(self.unit_index, minlength=self.units.n_units).to(torch.float32)
        self.type_emb = nn.Embedding(cfg.n_types, cfg.type_embed)
        self.grouper = nn.Sequential(nn.Linear(cfg.type_embed + self.op_x.shape[1], cfg.grouper_hidden), nn.ReLU(),
                                     nn.Linear(cfg.grouper_hidden, M))
        self.n_features = cfg.n_types + 3 + 2 * M
        self.placer = Seq2SeqPlacer(Seq2SeqConfig(
            n_features=self.n_features, n_devices=self.n_candidates, hidden=cfg.hidden, device_embed=cfg.device_embed,
            attention=cfg.attention, tanh_c=cfg.tanh_c, temperature=cfg.temperature, feed_aligned=cfg.feed_aligned,
            bidirectional=cfg.bidirectional))

    def modules(self) -> dict:
        return {"type_emb": self.type_emb, "grouper": self.grouper, "placer": self.placer}

    def warm_start(self, steps: int, batch: int = 4096, stop=None) -> float:
        """Supervised steps (Adam, lr 1e-2, cross-entropy on ``batch`` ops drawn per step) pulling the
        Grouper toward ``self.chunk``: M chunks of equal op count of the order it reads (the ops by
        their piece of the layer split over the A candidates, :func:`split_pieces`, then by
        topological index); no placement is simulated. Ends early once ``stop()`` is true (the
        method's time limit, :meth:`Evaluator.time_up`; :attr:`warm_steps` counts the steps taken).
        Returns the final loss. Not in the paper (docs/methods/hierarchical.md says why)."""
        import torch

        n = self.problem.n_ops
        target = torch.as_tensor(self.chunk)
        params = list(self.type_emb.parameters()) + list(self.grouper.parameters())
        opt = torch.optim.Adam(params, lr=1e-2)
        g = torch.Generator().manual_seed(self.seed + 1)
        loss = torch.tensor(float("nan"))
        self.warm_steps = 0
        with one_thread():
            for _ in range(steps):
                if stop is not None and stop():
                    break
                self.warm_steps += 1
                idx = torch.randint(0, n, (min(batch, n),), generator=g)
                u = self.grouper(torch.cat([self.type_emb(self.types[idx]), self.op_x[idx]], dim=1))
                u = self.cfg.tanh_c * torch.tanh(u / self.cfg.temperature)
                loss = torch.nn.functional.cross_entropy(u, target[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return float(loss.detach())

    # -- the Placer's start
    def start_targets(self) -> dict[str, np.ndarray]:
        """(M,) candidate index per group for each start the Placer may be pulled toward:

        * "split": group g (chunk g of the Grouper's warm-start target) goes to the piece of the
          layer split its middle op has: the layer-wise split a person draws for a deep network;
        * "single": every group on the candidate that runs the whole graph fastest."""
        P, M = self.problem, self.cfg.n_groups
        n = P.n_ops
        mid = self.order[np.minimum(((2 * np.arange(M) + 1) * n) // (2 * M), n - 1)]
        split = self.piece[mid].astype(np.int64)
        t = np.asarray(P.compute_us, dtype=np.float64)
        tc = t[:, self.units.cand]
        tot = np.where(np.isfinite(tc).all(axis=0), np.where(np.isfinite(tc), tc, 0.0).sum(axis=0), np.inf)
        single = np.full(M, int(np.argmin(tot)) if np.isfinite(tot).any() else 0, dtype=np.int64)
        return {"split": split, "single": single}

    def start_placement(self, target: np.ndarray) -> np.ndarray:
        """The op placement the Placer's start gives under the warm-start grouping (unit: its first
        op's chunk)."""
        first = np.full(self.units.n_units, -1, dtype=np.int64)
        first[self.units.unit_of[::-1]] = np.arange(self.problem.n_ops)[::-1]
        return self.units.expand(target[self.chunk[first]][None, :])[0]

    def placer_warm_start(self, target: np.ndarray, mass: float, max_steps: int = 1000, stop=None) -> tuple[int, float]:
        """Supervised steps (Adam, lr 1e-2; teacher forcing on groupings sampled from the Grouper) that
        raise the Placer's probability of ``target`` (M,) until the geometric mean over groups reaches
        ``mass``; no placement is simulated. Returns (steps, final mean probability). Not in the paper
        (docs/methods/hierarchical.md says why)."""
        import torch

        from placer.rl.warm import warm_start

        M = self.cfg.n_groups

        def nll():
            with torch.no_grad():
                ug, _, _ = self.sample_grouping()
                x = torch.as_tensor(group_embeddings(self.problem, self.tab, self.grouping_of_ops(ug), M))
                mask = torch.as_tensor(decision_mask(self.units, ug, M))
                allowed = mask[torch.arange(M), torch.as_tensor(target)]
                act = torch.where(allowed, torch.as_tensor(target), mask.to(torch.int64).argmax(dim=1))
            return -self.placer(x.unsqueeze(0), mask, actions=act.unsqueeze(0)).log_prob.sum() / M

        with one_thread():
            return warm_start(nll, self.placer.parameters(), mass, max_steps, stop=stop)

    # -- the Grouper
    def group_logits(self):
        """(U, M) log-probabilities of each colocation unit's group: the per-op logits C tanh(u / T),
        averaged over the unit's ops, through a log-softmax."""
        import torch

        cfg = self.cfg
        u = self.grouper(torch.cat([self.type_emb(self.types), self.op_x], dim=1))
        u = cfg.tanh_c * torch.tanh(u / cfg.temperature)
        per_unit = torch.zeros(self.units.n_units, u.shape[1]).index_add_(0, self.unit_index, u)
        return torch.log_softmax(per_unit / self.unit_count[:, None], dim=1)

    def sample_grouping(self, greedy: bool = False):
        """(unit -> group (U,) int64, log p(g) scalar tensor, entropy scalar tensor)."""
        import torch

        from placer.nn.seq2seq import sample_categorical

        logp = self.group_logits()
        p = logp.exp()
        g = torch.argmax(logp.detach(), dim=1) if greedy else sample_categorical(p, self.gen)
        lp = logp.gather(1, g.unsqueeze(1)).sum()
        ent = -(p * logp).sum()
        return g.numpy().astype(np.int64), lp, ent

    def grouping_of_ops(self, unit_group: np.ndarray) -> np.ndarray:
        return unit_group[self.units.unit_of]

    # -- one grouping, k placements
    def sample(self, k: int, greedy: bool = False):
        import torch

        M = self.cfg.n_groups
        ug, lp_g, ent_g = self.sample_grouping(greedy)
        x = torch.as_tensor(group_embeddings(self.problem, self.tab, self.grouping_of_ops(ug), M)).unsqueeze(0)
        mask = torch.as_tensor(decision_mask(self.units, ug, M))
        out = self.placer(x, mask, samples=k, greedy=greedy, generator=self.gen)
        actions = out.devices.numpy()[:, ug]  # (k, U): each unit takes its group's device
        return self.units.expand(actions), lp_g + out.log_prob, ent_g + out.entropy


def joint_units(problem, unit_of: np.ndarray) -> np.ndarray:
    """(n_ops,) units that join ``unit_of``'s units with :func:`placer.grouping.mirrors.mirror_units`
    (every backward op with the forward op it mirrors), numbered by first op."""
    from placer.grouping import components
    from placer.grouping.mirrors import mirror_units

    n = problem.n_ops
    ops = np.arange(n)
    pairs = []
    for lab in (np.asarray(unit_of, dtype=np.int64), mirror_units(problem)):
        first = np.full(int(lab.max()) + 1, -1, dtype=np.int64)
        first[lab[::-1]] = ops[::-1]
        pairs += list(zip(ops.tolist(), first[lab].tolist()))
    return components(n, pairs)


def split_pieces(problem, unit_of: np.ndarray, cand, ev: Evaluator | None = None, search: int = 0) -> np.ndarray:
    """(n_ops,) piece in [0, len(cand)) of each op, over the :func:`joint_units` of ``unit_of``.
    Without ``ev``: the layer split over all the candidates ``cand`` at equal compute. With ``ev``:
    the ``layer-split`` method's search (:mod:`placer.methods.layer_split`): for k = 1..G of the
    candidate GPUs, fastest first, the split over the first k with its cuts moved by
    :func:`~placer.methods.layer_split.tune_split` (``search`` simulations for each k > 1, each a
    placement of ``ev``'s budget and a candidate result), the best in
    :func:`placer.sim.memory_first` order; piece j of it is the candidate index of its j-th GPU."""
    from placer.methods.layer_split import gpus_by_speed, layer_split, tune_split
    from placer.sim import memory_first

    joint = joint_units(problem, unit_of)
    cand = [int(d) for d in cand]
    if ev is None:
        return layer_split(problem, joint, len(cand))[joint]
    gpus = [d for d in gpus_by_speed(problem) if d in cand] or cand
    best, best_key = None, memory_first(np.inf, False)
    for k in range(1, len(gpus) + 1):
        if ev.out_of_budget():
            break
        piece, t, fits, _ = tune_split(problem, joint, gpus[:k], ev, search if k > 1 else 0)
        if memory_first(t, fits) < best_key:
            best, best_key = np.asarray([cand.index(d) for d in gpus[:k]], dtype=np.int64)[piece], memory_first(t, fits)
    return (layer_split(problem, joint, len(cand)) if best is None else best)[joint]


def choose_start(tr: HierarchicalTrainer, ev: Evaluator, cfg: HierarchicalConfig) -> tuple[str, np.ndarray] | None:
    """The start the Placer is pulled toward: ``placer_start`` itself, or for "best" the faster of the
    two (their placements simulated once each, counted in the budget; the lower one is also a
    candidate result). None for "none", or when the budget has no room for the comparison."""
    if cfg.placer_start == "none":
        return None
    targets = tr.start_targets()
    if cfg.placer_start != "best":
        return cfg.placer_start, targets[cfg.placer_start]
    room = ev.remaining()
    if room is not None and room < len(targets) + 1:
        return None
    names = list(targets)
    br = ev.evaluate_batch(np.stack([tr.start_placement(targets[k]) for k in names]))
    k = names[int(np.argmin(br.objective_us))]
    return k, targets[k]


@register("hierarchical", "Hierarchical Planner: feed-forward Grouper + seq2seq Placer trained jointly with REINFORCE",
          "learned", HierarchicalConfig, paper=PAPER, available=torch_available, version=2)
def hierarchical(problem, seed: int, ev: Evaluator, cfg: HierarchicalConfig):
    return HIERARCHICAL.run(problem, seed, ev, cfg)


def fresh_hierarchical(problem, seed: int, ev: Evaluator, cfg: HierarchicalConfig, notes: list[str]):
    """Search mode's start (:meth:`Seq2SeqRLMethod.search`): M cut to the graph's colocation units,
    the layer split's cuts searched, both warm starts. Returns (the config, the trainer)."""
    piece = None
    units = base_units(problem, cfg.devices, "hierarchical")
    if units.n_units < cfg.n_groups:
        notes.append(f"M = {units.n_units} groups, one per colocation unit (n_groups={cfg.n_groups} is more "
                     "than the graph has units)")
        cfg = replace(cfg, n_groups=units.n_units)
    if cfg.placer_start != "none":
        room, k = ev.remaining(), len(units.cand)
        search = cfg.split_search if room is None else min(cfg.split_search, (room - 4) // max(k, 1) - 1)
        if search >= 0:
            piece = split_pieces(problem, units.unit_of, units.cand, ev, search)
            notes.append(f"layer split searched as the layer-split method does, {ev.placements} placements "
                         f"(best {ev.best_objective_us / 1e3:,.1f} ms)")
    tr = HierarchicalTrainer(problem, cfg, seed, piece=piece, units=units)
    if cfg.warm_start:
        loss = tr.warm_start(cfg.warm_start, stop=ev.time_up)  # the time limit ends it early (never else)
        steps = (f"{cfg.warm_start} steps" if tr.warm_steps == cfg.warm_start else
                 f"{tr.warm_steps} of {cfg.warm_start} steps: the time limit ended it")
        notes.append(f"Grouper warm-started toward chunks of the layer-split order ({steps}, loss "
                     f"{loss:.2f})")
    start = None if ev.time_up() else choose_start(tr, ev, cfg)
    if start is not None:
        steps, reached = tr.placer_warm_start(start[1], cfg.start_mass, stop=ev.time_up)
        notes.append(f"Placer warm-started toward the {start[0]} start ({steps} steps, mean probability "
                     f"{reached:.3f})")
    return cfg, tr


# train / place / fine-tune (methods.learned); search: a fresh policy or the given one, then run_trainer
HIERARCHICAL = register_learned(Seq2SeqRLMethod("hierarchical", HierarchicalTrainer, SHAPE_FIELDS, fresh_hierarchical,
                                                lambda tr, cfg: f"{cfg.n_groups} groups over {tr.units.n_units} "
                                                "colocation units"))
