"""GDP (Zhou et al., 2019, "GDP: Generalized Device Placement for Dataflow Graphs", arXiv:1910.01578):
a GraphSAGE graph encoder, a segment-recurrent attention placer in the style of Transformer-XL, and
PPO, with batch training across graphs so that one policy places graphs it has not seen.

Architecture (section 3), with our choices where the text we could read gives no number:

* graph embedding (3.1): GraphSAGE with the max-pooling aggregator, h_v <- f(h_v, max_u sigma(W h_u + b))
  (PyG ``SAGEConv(aggr="max", project=True)``), ``gnn_layers`` = 3 layers of ``hidden`` = 128 units
  over the node features of :mod:`placer.nn.encoder` (op type, output size, compute cost, adjacency);
* placement network (3.2): the node sequence (topological order) is cut into segments of ``segment``
  = 128 nodes; ``attn_layers`` = 2 pre-norm attention layers of ``heads`` = 4 heads each attend, for
  the nodes of a segment, to the segment and to the cached hidden states of the previous segment at
  the same layer (Transformer-XL's segment-level recurrence: the memory is not back-propagated
  through); positions enter as a learned relative-position bias per head, clipped at +-``segment``
  (Transformer-XL uses sinusoidal relative encodings; a learned bias is our simpler equivalent). The
  placer predicts every node's device in one pass (no autoregression): pi(a | G) = prod_v pi(a_v | G);
* superposition (3.3, batch training): the graph's mean node embedding c conditions every attention
  layer through a multiplicative gate sigma(W_l c) on its feed-forward output, so one network holds
  graph-specific behaviour for many graphs;
* PPO (:mod:`placer.rl.ppo`): ``batch`` = 8 placements per update and graph, clipped objective
  (eps 0.2), K = 4 epochs, advantages normalised per graph and batch, entropy bonus 0.01, Adam lr
  3e-3 (1e-3 barely moved in 400 placements of BERT-base on 4 GPUs, 1e-2 did worse than 3e-3), reward
  -sqrt(step time in ms).

The start (ours, not in the paper; ``start="none"`` is the paper's): the searched layer split and
the whole graph on the fastest device are simulated first, inside the budget (:func:`start_target`,
shared with Mars), so GDP never returns slower than either. GDP is not warm-started toward the start
(``start_steps`` = 0): its per-node outputs see no position, and 60 supervised steps (lr 1e-2) toward
a 4-way contiguous split of GNMT left the target's mean probability at 0.24-0.25, uniform.

Memory (ours, shared with Mars, ColocRL and the Hierarchical Planner): when nothing evaluated up to
the first PPO update (the start included) fits in memory, :func:`fallback_after_first` runs
:func:`placer.methods.memory_fallback.fit_in_memory` (the classical seeds relieved, then the host), so
GDP returns a placement that fits where one of those does; nothing changes where one fits.

As a method (search mode) it trains on the one graph within the placement budget and returns the
best placement evaluated. With ``policy=<checkpoint>`` (written by ``save=`` or :func:`train_policy`,
batch training on several graphs) it starts from a trained policy: ``finetune`` PPO updates on this
graph, then the greedy placement. Nodes are the op groups of :mod:`placer.nn.encoder` (colocation and
forward/backward mirrors merged, at most ``nodes`` of them).

Everything runs on one torch thread, with every random draw from generators seeded by the method's
seed: same seed, same placement.
Measured (BERT-base, 692 nodes, k80x4, seed 0, 1,000 placements): 972 ms against 1,017 ms on a single
GPU and 747 ms for local search; ~0.85 s per PPO update of 8 placements on one core.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.memory_fallback import fit_in_memory
from placer.sim import memory_first

GDP_FORMAT = "placer-gdp-1"


def _available() -> str | None:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError as e:
        return f"needs the 'torch' extra and torch_geometric ({e.name} is not installed): pip install 'placer[torch]'"
    return None


# ---------------------------------------------------------------------- shared with Mars
@contextlib.contextmanager
def one_thread():
    """Run torch on one thread (results then do not depend on the machine's core count)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def segments(n: int, size: int) -> list[tuple[int, int]]:
    """[start, end) of consecutive segments of at most ``size`` nodes covering 0..n-1 in order."""
    if size < 1:
        raise ValueError("segment size must be >= 1")
    return [(s, min(n, s + size)) for s in range(0, n, size)]


@dataclass(eq=False)
class GraphCtx:
    """One graph as the learned placers see it."""

    gp: object  # placer.nn.encoder.PlacementNodes: the nodes placed and their candidate devices
    data: object  # placer.nn.encoder.GraphData
    feasible: object  # torch (N, A) bool: the devices each node can run on

    @property
    def n(self) -> int:
        return self.gp.n_groups


def graph_ctx(problem, nodes: int, devices: str = "auto") -> GraphCtx:
    """Nodes (at most ``nodes`` op groups) and the encoder's view. ``devices``: 'gpus', 'all', or
    'auto' (the GPUs when every node can run on one, else every device)."""
    import torch

    from placer.nn.encoder import graph_data, placement_nodes

    gp = placement_nodes(problem, nodes, devices)
    return GraphCtx(gp, graph_data(gp), torch.as_tensor(gp.feasible))


def masked_logits(logits, feasible):
    return logits.masked_fill(~feasible, -1e9)


def policy_state(kind: str, cfg: MethodConfig, n_actions: int, trainer) -> dict:
    return {"format": kind, "method_config": cfg.to_dict(), "n_actions": int(n_actions), **trainer.state_dict()}


def load_policy(path: str, fmt: str, method: str) -> dict:
    """A policy checkpoint (:func:`placer.io.read_checkpoint`); bad files raise InputError."""
    from placer.io import read_checkpoint

    fix = f"give a file that `{method}` wrote with save=PATH (or its train_policy)"
    state = read_checkpoint(path, f"{method} policy", fix)
    if state.get("format") != fmt:
        raise InputError(str(path), f"{method} policy", f"is not a {method} checkpoint", fix)
    return state


ARCH_FIELDS: dict[str, tuple[str, ...]] = {}  # method -> config fields that decide the network's shape


def check_compatible(method: str, state: dict, cfg, n_actions: int, path: str) -> None:
    saved = state["method_config"]
    for f in ARCH_FIELDS[method]:
        if saved.get(f) != getattr(cfg, f):
            raise InputError(str(path), f"{method} policy", f"was trained with {f}={saved.get(f)!r}, not {getattr(cfg, f)!r}",
                             f"set {f}={saved.get(f)!r}")
    if int(state["n_actions"]) != n_actions:
        raise InputError(str(path), f"{method} policy", f"chooses among {state['n_actions']} devices, this problem has "
                         f"{n_actions} candidates", "use a cluster with as many candidate devices")


def run_learned(name: str, problem, seed: int, ev: Evaluator, cfg, make_net, fmt: str):
    """Search mode, or a trained policy (fine-tuned, then greedy): the driver Mars and GDP share."""
    import time

    import torch

    from placer.rl.checkpoint import save_checkpoint
    from placer.rl.ppo import PolicyTrainer, Scorer

    started = time.perf_counter()  # for the progress log's wall-clock column only
    with one_thread():
        ctx = graph_ctx(problem, cfg.nodes, cfg.devices)
        torch.manual_seed(seed)
        net = make_net(cfg, ctx.gp.n_actions, [ctx], seed)
        notes = [f"{ctx.n} nodes ({problem.n_ops} ops), {ctx.gp.n_actions} candidate devices"]
        state = None
        if cfg.policy:
            state = load_policy(cfg.policy, fmt, name)
            check_compatible(name, state, cfg, ctx.gp.n_actions, cfg.policy)
        notes += list(getattr(net, "notes", []))
        start = None if state is not None else start_target(problem, ctx, ev, cfg)
        if start is not None:
            notes.append(f"start: the {start[0]} placement ({ev.placements} placements simulated for it, best "
                         f"{ev.best_objective_us / 1e3:,.1f} ms)")
            if cfg.start_steps:
                steps, reached = warm_start(net, ctx, start[1], cfg.start_mass, cfg.start_steps)
                notes.append(f"policy warm-started toward it: {steps} steps, mean probability {reached:.3f}")
        tr = PolicyTrainer(net, [ctx], [Scorer(ev)], settings(cfg, seed), log_path=cfg.log, log_every=cfg.log_every,
                           label=name, clock_start=started)
        if state is not None:
            tr.load_state_dict(state, weights_only=True)
            if cfg.finetune > 0:
                tr.train(updates=cfg.finetune, on_update=fallback_after_first(problem, ev, notes))
                notes.append(f"fine-tuned {tr.update} PPO updates")
            if not ev.out_of_budget():
                with torch.no_grad():
                    net.eval()
                    a = net.greedy(ctx)
                ev.evaluate(ctx.gp.expand(a.numpy()))
                notes.append("placed with the greedy policy")
        else:
            tr.train(on_update=fallback_after_first(problem, ev, notes))
            notes.append(f"{tr.update} PPO updates of {cfg.batch} placements")
        if cfg.save:
            save_checkpoint(policy_state(fmt, cfg, ctx.gp.n_actions, tr), cfg.save)
            notes.append(f"policy saved to {cfg.save}")
    if ev.best is None:  # nothing fit in the budget (cannot happen with a budget >= 1)
        raise RuntimeError(f"{name} evaluated no placement")
    return ev.result(name, notes=notes)


def fallback_after_first(problem, ev: Evaluator, notes: list[str]):
    """The trainer's ``on_update`` hook: after the first PPO update, :func:`fit_in_memory` (the
    classical seeds, relieved, when nothing evaluated so far fits in memory)."""
    def hook(tr, _line) -> None:
        if tr.update == 1:
            note = fit_in_memory(problem, ev)
            if note:
                notes.append(note)
    return hook


def start_checks(cfg) -> list:
    return [(cfg.start in ("best", "none"), "start", "best or none"), (cfg.split_search >= 0, "split_search", ">= 0"),
            (0 < cfg.start_mass < 1, "start_mass", "in (0, 1)"), (cfg.start_steps >= 0, "start_steps", ">= 0")]


def node_actions(gp, placement: np.ndarray) -> np.ndarray:
    """(N,) action per node of an op placement: the candidate device that runs most of the node's
    compute there (its first runnable candidate when none of its ops is on one)."""
    P = gp.problem
    pos = np.full(P.n_devices, -1, dtype=np.int64)
    pos[gp.devices] = np.arange(gp.n_actions)
    a = pos[np.asarray(placement, dtype=np.int64)]
    on = a >= 0
    work = np.zeros((gp.n_groups, gp.n_actions))
    np.add.at(work, (gp.group_of[on], a[on]), P.fastest_us[on] + 1e-9)
    work[~gp.feasible] = -1.0
    return np.argmax(work, axis=1).astype(np.int64)


def start_target(problem, ctx: GraphCtx, ev: Evaluator, cfg) -> tuple[str, np.ndarray] | None:
    """The start of ``cfg.start = "best"``, as it is for the Hierarchical Planner and Post: the
    layer split over 2..G GPUs with its cuts searched (``split_search`` simulations,
    :func:`placer.methods.layer_split.split_start`) and the whole graph on the fastest device, each
    as a node placement simulated once; the faster (one that fits in memory before one that does
    not) is returned as (name, action per node). Every placement simulated is counted in the budget
    and is a candidate result, so the method never returns worse than its start. None when the
    budget is under 4 x ``split_search`` or under a published objective."""
    from placer.methods.layer_split import fastest_device, split_start

    room = ev.remaining()
    if cfg.start == "none" or ev.custom or (room is not None and room < 4 * max(cfg.split_search, 1)):
        return None
    gp, cands = ctx.gp, {}
    split = split_start(problem, ev, cfg.split_search)
    if split is not None:
        cands["split"] = node_actions(gp, split[0])
    fast = fastest_device(problem)
    if fast is not None:
        cands["single"] = node_actions(gp, np.full(problem.n_ops, fast, dtype=np.int64))
    if not cands:
        return None
    names = list(cands)
    br = ev.evaluate_batch(np.stack([gp.expand(cands[k]) for k in names]))
    k = names[min(range(len(names)), key=lambda j: memory_first(br.objective_us[j], not br.oom[j]))]
    return k, cands[k]


def warm_start(net, ctx: GraphCtx, target: np.ndarray, mass: float, max_steps: int) -> tuple[int, float]:
    """Raise the policy's probability of ``target`` (N,) to a geometric mean per node of ``mass``
    (:func:`placer.rl.warm.warm_start`, at most ``max_steps`` steps). Returns (steps, mean
    probability reached)."""
    import torch

    from placer.rl.warm import warm_start as supervised

    act = torch.as_tensor(np.asarray(target, dtype=np.int64))[None, :]
    return supervised(lambda: -net.evaluate(ctx, act)[0].mean(), net.parameters(), mass, max_steps)


def settings(cfg, seed: int):
    from placer.rl.ppo import PPOSettings, TrainSettings

    return TrainSettings(batch=cfg.batch, lr=cfg.lr, seed=seed, reward=cfg.reward,
                         ppo=PPOSettings(clip=cfg.clip, epochs=cfg.ppo_epochs, minibatches=cfg.minibatches,
                                         entropy=cfg.entropy, grad_clip=cfg.grad_clip))


def train_policy(name: str, problems: list, cfg, make_net, fmt: str, placements: int, out: str | Path | None = None,
                 seed: int = 0, sim_params=None, resume: str | Path | None = None, on_update=None):
    """Batch training across graphs: one policy, every update sampling ``cfg.batch`` placements of
    each graph, until each graph has used ``placements`` simulations. Returns the trainer (its
    ``best`` per graph); writes the checkpoint to ``out``. ``resume``: continue a checkpoint that
    this function wrote for the same graphs."""
    import torch

    from placer.methods.base import Evaluator
    from placer.rl.checkpoint import save_checkpoint
    from placer.rl.ppo import PolicyTrainer, Scorer

    with one_thread():
        ctxs = [graph_ctx(P, cfg.nodes, cfg.devices) for P in problems]
        A = {c.gp.n_actions for c in ctxs}
        if len(A) != 1:
            raise InputError(name, "training graphs", f"have different numbers of candidate devices {sorted(A)}",
                             "train on one cluster")
        A = A.pop()
        torch.manual_seed(seed)
        net = make_net(cfg, A, ctxs, seed)
        evs = [Evaluator(P, sim_params, limit=placements) for P in problems]
        tr = PolicyTrainer(net, ctxs, [Scorer(e) for e in evs], settings(cfg, seed), log_path=cfg.log,
                           log_every=cfg.log_every, label=name)
        if resume is not None:
            state = load_policy(str(resume), fmt, name)
            check_compatible(name, state, cfg, A, str(resume))
            tr.load_state_dict(state)
            for e, used in zip(evs, tr.used):  # the budget already spent on each graph
                e.placements = min(placements, used)
        tr.train(on_update=on_update)
        if out is not None:
            save_checkpoint(policy_state(fmt, cfg, A, tr), out)
    return tr


# ---------------------------------------------------------------------- GDP's network
def _net_classes():
    import torch
    from torch import nn

    from placer.nn.encoder import EncoderConfig, GraphEncoder

    class XLLayer(nn.Module):
        """Pre-norm attention over [memory; segment] with a learned relative-position bias, then a
        gated feed-forward block (the gate is GDP's superposition)."""

        def __init__(self, d: int, heads: int, max_rel: int):
            super().__init__()
            self.h, self.dk, self.max_rel = heads, d // heads, max_rel
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
            self.rel = nn.Parameter(torch.zeros(2 * max_rel + 1, heads))
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

        def forward(self, h, mem, gate):
            L, d = h.shape
            x = self.ln1(h)
            ctx = x if mem is None else torch.cat([self.ln1(mem), x], dim=0)
            M = ctx.shape[0] - L
            q = self.q(x).view(L, self.h, self.dk).transpose(0, 1)  # (h, L, dk)
            k, v = self.kv(ctx).view(M + L, 2, self.h, self.dk).permute(1, 2, 0, 3)  # (h, M+L, dk) each
            pos_q = torch.arange(L)[:, None]
            pos_k = torch.arange(-M, L)[None, :]
            rel = (pos_k - pos_q).clamp(-self.max_rel, self.max_rel) + self.max_rel
            bias = self.rel[rel].permute(2, 0, 1)  # (h, L, M+L)
            att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.dk) + bias, dim=-1)
            h = h + self.o((att @ v).transpose(0, 1).reshape(L, d))
            return h + self.ff(self.ln2(h)) * gate

    class GDPNet(nn.Module):
        def __init__(self, cfg, n_actions: int):
            super().__init__()
            H = cfg.hidden
            if H % cfg.heads:
                raise InputError("gdp", f"parameter hidden={H}", f"is not a multiple of heads={cfg.heads}",
                                 "choose hidden divisible by heads")
            self.cfg, self.n_actions = cfg, n_actions
            self.encoder = GraphEncoder(EncoderConfig("sage", H, cfg.gnn_layers))
            self.layers = nn.ModuleList([XLLayer(H, cfg.heads, cfg.segment) for _ in range(cfg.attn_layers)])
            self.cond = nn.Linear(H, H * cfg.attn_layers) if cfg.superposition else None
            self.out_ln = nn.LayerNorm(H)
            self.head = nn.Linear(H, n_actions)

        def logits(self, g: GraphCtx):
            z = self.encoder(g.data.x, g.data.edge_index)
            L, H = len(self.layers), z.shape[1]
            gates = (torch.sigmoid(self.cond(z.mean(dim=0))).view(L, H) if self.cond is not None
                     else torch.ones(L, H))
            mems: list = [None] * L
            outs = []
            for s, e in segments(g.n, self.cfg.segment):
                h = z[s:e]
                new = []
                for i, layer in enumerate(self.layers):
                    new.append(h.detach())  # Transformer-XL: the cache is not back-propagated through
                    h = layer(h, mems[i], gates[i])
                mems = new
                outs.append(h)
            return masked_logits(self.head(self.out_ln(torch.cat(outs, dim=0))), g.feasible)

        def sample(self, g: GraphCtx, B: int, gen):
            logp_all = torch.log_softmax(self.logits(g), dim=-1)
            a = torch.multinomial(logp_all.exp(), B, replacement=True, generator=gen).T  # (B, N)
            return a, logp_all.gather(1, a.T).T

        def evaluate(self, g: GraphCtx, actions):
            logp_all = torch.log_softmax(self.logits(g), dim=-1)
            ent = -(logp_all.exp() * logp_all).sum(dim=-1)  # (N,)
            return logp_all.gather(1, actions.T).T, ent.expand(actions.shape[0], -1)

        def greedy(self, g: GraphCtx):
            return self.logits(g).argmax(dim=-1)

    return GDPNet


def make_gdp_net(cfg, n_actions: int, ctxs=None, seed: int = 0):
    return _net_classes()(cfg, n_actions)


# ---------------------------------------------------------------------- the method
@dataclass(frozen=True)
class GDPConfig(MethodConfig):
    """GDP's hyperparameters (module docstring: which come from the paper and which are ours)."""

    placements: int = 2_000  # default budget in placements (simulations) when none is given
    nodes: int = 1_024  # most nodes placed: op groups beyond this are merged into contiguous chunks (ours)
    devices: str = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: int = 128  # embedding and attention width (ours)
    gnn_layers: int = 3  # GraphSAGE layers (ours)
    attn_layers: int = 2  # attention layers of the placer (ours)
    heads: int = 4  # attention heads (ours)
    segment: int = 128  # nodes per segment; the memory is the previous segment (ours)
    superposition: bool = True  # graph-conditioned gates on every attention layer (GDP section 3.3)
    batch: int = 8  # placements sampled per PPO update (ours)
    lr: float = 3e-3  # Adam learning rate (ours: 1e-3 barely moved GDP in 400 placements of BERT, 3e-3 beat 1e-2)
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
    log_every: int = 10  # log a progress line (logger placer.gdp) every this many updates
    start: str = "best"  # best: the searched layer split or the fastest single device, whichever is faster, is simulated first (ours; none: the paper's start)
    split_search: int = 24  # simulations of that split's cut search, counted in the budget (ours)
    start_mass: float = 0.9  # warm start: supervised steps until the start's mean per-node probability reaches this (ours)
    start_steps: int = 0  # most warm-start steps (ours: 0, GDP's per-node outputs did not move toward a split in 60 steps on GNMT)

    def checks(self):
        return start_checks(self) + [
                (self.placements >= 1, "placements", ">= 1"), (self.nodes >= 1, "nodes", ">= 1"),
                (self.devices in ("auto", "gpus", "all"), "devices", "auto, gpus or all"),
                (self.hidden >= 1, "hidden", ">= 1"), (self.gnn_layers >= 1, "gnn_layers", ">= 1"),
                (self.attn_layers >= 1, "attn_layers", ">= 1"), (self.heads >= 1, "heads", ">= 1"),
                (self.hidden % max(self.heads, 1) == 0, "hidden", "a multiple of heads"),
                (self.segment >= 1, "segment", ">= 1"), (self.batch >= 1, "batch", ">= 1"),
                (self.lr > 0, "lr", "> 0"), (self.ppo_epochs >= 1, "ppo_epochs", ">= 1"),
                (self.minibatches >= 1, "minibatches", ">= 1"), (0 < self.clip < 1, "clip", "in (0, 1)"),
                (self.entropy >= 0, "entropy", ">= 0"), (self.grad_clip >= 0, "grad_clip", ">= 0"),
                (self.reward in ("sqrt", "linear"), "reward", "sqrt or linear"),
                (self.finetune >= 0, "finetune", ">= 0"), (self.log_every >= 1, "log_every", ">= 1")]


ARCH_FIELDS["gdp"] = ("hidden", "gnn_layers", "attn_layers", "heads", "segment", "superposition")


@register("gdp", "GDP: GraphSAGE + segment-recurrent (Transformer-XL style) attention placer, PPO", "learned", GDPConfig,
          paper="Zhou et al., GDP: Generalized Device Placement for Dataflow Graphs, arXiv:1910.01578, 2019",
          available=_available, version=1)
def gdp(problem, seed: int, ev: Evaluator, cfg: GDPConfig):
    return run_learned("gdp", problem, seed, ev, cfg, make_gdp_net, GDP_FORMAT)


def train_gdp(problems: list, cfg: GDPConfig | None = None, placements: int = 2_000, out=None, seed: int = 0,
              sim_params=None, resume=None, on_update=None):
    """GDP's batch training: one policy over several graphs (see :func:`train_policy`)."""
    return train_policy("gdp", problems, cfg or GDPConfig(), make_gdp_net, GDP_FORMAT, placements, out, seed,
                        sim_params, resume, on_update)
