"""GiPH (Hu et al., MLSys 2023, "GiPH: Generalizable Placement Learning for Adaptive Heterogeneous
Computing", arXiv:2305.14562): placement as a sequence of improvements. A policy reads the current
placement as a gpNet and picks one (task, device) pair: the task is relocated to that device; the
reward is the step-time improvement; REINFORCE trains the policy. Nothing in the network depends on
the number of tasks or devices, so one policy places task graphs on clusters it has never seen.

* The MDP (section 4.1): the state is the task graph, the device network and the current placement
  p_t; an action (v, d) relocates task v to device d (any device that can run it, CPUs included; the
  device it is on now is masked, so every action moves a task); the reward is the improvement
  r_t = (C(p_t) - C(p_{t+1})) / LB, C the simulated, memory-penalised step time and LB the problem's
  lower bound (critical path, load), so rewards are schedule-length ratios alike on any graph; an
  episode lasts ``episode`` relocations. Training episodes (:meth:`GiPH.train`) start, as in the
  paper, from random placements (``train_start="random"``), where improving moves abound, so the
  policy learns which relocations improve a placement. Placing episodes start by default
  (``start="best"``, ours) from the best placement evaluated so far with ``kick`` random relocations,
  the first from the best of the best single device and the classical list schedulers ``seeds``
  (HEFT, critical-path m-ETF; each simulated once, counted in the budget), the nodes cut along it so
  that it is exactly a placement of the nodes, so the policy's sampling keeps searching around the
  best instead of walking from it; placing episodes undo a relocation that slows the placement
  (``walk="descend"``, version 3). The paper's every episode from a random placement, every
  relocation kept, is :meth:`GiPHConfig.paper`.
* gpNet (section 4.2, :func:`gpnet`): one node per feasible (task, device) pair; for every edge u -> v
  of the task graph, edges from u's current pair (u, p(u)) to every option (v, d) of v, and from every
  option (u, d) of u to v's current pair (v, p(v)). A pair's features are the task's compute time on
  that device (absolute and relative to its fastest device), whether it is the current one, the
  device's properties summarised (busy share, link bandwidth and latency means, memory pressure: per
  device, never an index) and the schedule read from the current simulation (the task's start and
  finish, the time its inputs would be ready on that device and the finish it would have there); an
  edge carries the transfer time of the edge's bytes between the two pairs' devices.
* The GNN (section 4.3, :class:`placer.nn.giph.GiPHNet`): ``mp_steps`` rounds of message passing along the task
  graph's direction (parents to children) and as many against it, each a gather of
  MLP([h_u, e_uv]) over in-edges, a mean, and a residual update; the two embeddings, their mean
  over the task's pairs and over the whole gpNet feed a scorer that gives each pair one logit; the
  policy is the softmax over every pair (section 4.4).
* Training (section 4.4, :func:`reinforce_loss`): REINFORCE on each episode, returns discounted by
  ``gamma``, minus a per-step baseline (the running mean of the return at that step over earlier
  episodes of the same graph), plus an entropy bonus (the estimator :func:`placer.rl.estimator.giph`).

Graphs of thousands of ops are placed as groups (at most ``nodes``: colocation groups and backward
ops with their forward op, then contiguous chunks, :mod:`placer.nn.encoder`, as GDP does), so the
gpNet has at most ``nodes`` x devices pairs. As a method (search mode) it trains on the one graph
within the budget and returns the best placement evaluated (after the first episode the memory
fallback of :mod:`placer.methods.memory_fallback` runs when nothing evaluated fits). ``GIPH_METHOD``
offers train (one policy over several graphs and clusters) / place (zero-shot episodes) /
fine-tune. Measurements and the numbers the paper does not give: docs/methods/giph.md.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.graph_ppo import node_actions, torch_geometric_available
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import (
    PolicyFields,
    Progress,
    StatePolicyMethod,
    Training,
    share,
    single_device_start,
)
from placer.methods.memory_fallback import fit_in_memory
from placer.methods.starts import SEEDS_HELP, seed_names_ok, seeded_start
from placer.nn.threads import one_thread
from placer.rl import estimator
from placer.rl.estimator import DecayedMean
from placer.rl.step import clip_and_step

FORMAT = "placer-giph-1"
N_NODE, N_EDGE = 14, 3  # gpNet feature sizes (gpnet)


@dataclass(frozen=True)
class GiPHConfig(PolicyFields, MethodConfig):
    """GiPH's hyperparameters: the paper's where the text we could read gives them, ours marked
    (docs/methods/giph.md)."""

    placements: int = 1_000  # default budget in placements (simulations) when none is given
    nodes: Annotated[int, Range(">= 1")] = 256  # most nodes placed: op groups beyond this are merged into contiguous chunks (ours)
    hidden: Annotated[int, Range("in [1, 1024]")] = 32  # width of the pair embeddings (ours)
    mp_steps: Annotated[int, Range("in [0, 32]")] = 3  # message-passing rounds in each direction (ours)
    episode: Annotated[int, Range(">= 0", "0: as many as nodes")] = 20  # relocations per episode; 0: as many as nodes (ours; docs/methods/giph.md)
    gamma: Annotated[float, Range("in [0, 1]")] = 0.97  # discount of later improvements (ours)
    lr: Annotated[float, Range(">= 0")] = 1e-3  # Adam learning rate (ours)
    entropy: Annotated[float, Range(">= 0")] = 0.01  # entropy bonus coefficient (ours)
    baseline_decay: Annotated[float, Range("in [0, 1)")] = 0.9  # per-step baseline: weight of the old mean when an episode is added (ours)
    grad_clip: Annotated[float, Range(">= 0")] = 1.0  # max gradient norm (ours)
    start: Literal["random", "fastest", "best"] = "best"  # each placing episode's start: best (ours: the best placement so far, kicked; the first from ``seeds``), fastest (every node on its fastest device), random (the paper's)
    seeds: str = "heft:free,heft,m-etf:free,m-etf"  # start="best": the first episode starts from the best of these classical heuristics, each simulated once (ours; "": every node on its fastest device)
    kick: Annotated[int, Range(">= 0")] = 1  # start="best": random relocations applied to the best placement at each later episode's start (ours; 2 before version 3)
    walk: Literal["descend", "free"] = "descend"  # placing episodes: descend (ours: a relocation that makes the placement slower is undone, its reward kept) or free (every relocation kept, the paper's; training episodes always)
    train_start: Literal["random", "fastest", "best"] = "random"  # each training episode's start in ``train`` (the paper's random placement; or best, fastest)
    policy: Any = None  # a trained policy (its state dict) to place with (None: search mode, train from scratch)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: REINFORCE updates (episodes) on this graph first; the rest of the budget places without updates
    progress: Any = None  # called with one dict per episode (None: nothing)

    @classmethod
    def paper(cls, **overrides) -> GiPHConfig:
        """The paper's settings where the fields express them (Hu et al. 2023, section 4.1: every
        episode starts from a random placement), ``overrides`` applied: ``start="random"``,
        ``episode=0`` (an episode of as many relocations as tasks: the text we could read does not
        state the length; one move per task is our reading) and ``walk="free"`` (every relocation
        kept); ``train_start`` is the paper's random
        start by default, and ``seeds`` and ``kick`` only act with ``start="best"``. The text we could read states no number
        for ``hidden``, ``mp_steps``, ``gamma``, ``lr``, ``entropy``, ``baseline_decay`` or
        ``grad_clip``: those stay this project's. Not expressible by the fields: the memory fallback
        after the first episode (:mod:`placer.methods.memory_fallback`, ours) always runs when
        nothing evaluated fits, nor the best single device simulated first."""
        return cls(**{"start": "random", "episode": 0, "walk": "free", **overrides})

    def checks(self):
        return [(seed_names_ok(self.seeds), "seeds", f"{SEEDS_HELP} (or empty)")]


# ---------------------------------------------------------------------- the problem as the policy sees it
@dataclass(eq=False)
class Ctx:
    """One problem's static view: nodes (op groups), their candidate devices, group edges with bytes,
    the feasible (node, device) pairs and the scales features are divided by."""

    problem: object
    gp: object  # placer.nn.encoder.PlacementNodes
    src: np.ndarray  # (E,) group edges u -> v
    dst: np.ndarray
    nbytes: np.ndarray  # (E,) bytes along each
    pid: np.ndarray  # (N, A) pair index of (node, action), -1 where the node cannot run
    task: np.ndarray  # (K,) node of each pair
    act: np.ndarray  # (K,) action (candidate device position) of each pair
    tau: float  # a typical node's compute time on its fastest device (us)
    lb: float  # the problem's lower bound on the step time (us)
    dev_feat: np.ndarray  # (A, 2) link bandwidth and latency summaries per device


def make_ctx(problem, nodes: int, along: np.ndarray | None = None) -> Ctx:
    """The problem as GiPH places it, with at most ``nodes`` nodes; ``along``: an op placement the
    nodes are cut along (a node split where the placement changes device, nodes numbered by their
    first op), so that it is exactly a placement of the nodes."""
    from placer.nn.encoder import PlacementNodes, placement_nodes

    gp = placement_nodes(problem, nodes, "all")
    if along is not None:
        _, first, inv = np.unique(gp.group_of * problem.n_devices + np.asarray(along, dtype=np.int64),
                                  return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        gp = PlacementNodes(problem, rank[inv.ravel()], gp.devices)
    g, gid, N = problem.graph, gp.group_of, gp.n_groups
    s, d = gid[g.edge_src], gid[g.edge_dst]
    keep = s != d
    key, inv = np.unique(s[keep] * N + d[keep], return_inverse=True)
    nbytes = np.bincount(inv, weights=g.edge_bytes[keep], minlength=len(key)) if len(key) else np.zeros(0)
    feas = gp.feasible
    pid = np.full(feas.shape, -1, dtype=np.int64)
    pid[feas] = np.arange(int(feas.sum()))
    task, act = np.nonzero(feas)
    fast = np.where(feas, gp.compute_us, np.inf).min(axis=1)
    tau = float(fast.mean()) if np.isfinite(fast).all() and fast.mean() > 0 else 1.0
    devs = gp.devices
    bw = problem.bandwidth_bytes_per_us[np.ix_(devs, devs)]
    lat = problem.latency_us[np.ix_(devs, devs)]
    A = len(devs)
    if A > 1:
        off = ~np.eye(A, dtype=bool)
        mbw = np.array([bw[a][off[a]].mean() for a in range(A)])
        mlat = np.array([lat[a][off[a]].mean() for a in range(A)])
        dev_feat = np.stack([np.log(mbw / mbw.mean()), np.log1p(mlat / tau)], axis=1)
    else:
        dev_feat = np.zeros((1, 2))
    return Ctx(problem, gp, key // N, key % N, nbytes, pid, task, act, tau,
               max(float(problem.lower_bound_us), 1e-9), dev_feat)


@dataclass(eq=False)
class GpNet:
    """The gpNet of one placement (section 4.2): pair features, directed edges and their features."""

    x: np.ndarray  # (K, N_NODE) float32
    edge_index: np.ndarray  # (2, M) int64, along the task graph's direction
    edge_attr: np.ndarray  # (M, N_EDGE) float32
    task: np.ndarray  # (K,) node of each pair
    valid: np.ndarray  # (K,) bool: the pairs an action may pick (feasible, not the current device)


def transfer_us(problem, nbytes, a, b):
    """Transfer time of ``nbytes`` from device(s) ``a`` to ``b`` (0 on one device)."""
    same = a == b
    bw = problem.bandwidth_bytes_per_us[a, b]
    return np.where(same, 0.0, problem.latency_us[a, b] + nbytes / np.where(same, 1.0, bw))


def gpnet(ctx: Ctx, acts: np.ndarray, sim) -> GpNet:
    """The gpNet of node placement ``acts`` (action per node) whose simulation is ``sim``."""
    P, gp = ctx.problem, ctx.gp
    N, A = gp.feasible.shape
    devs = gp.devices
    cur = devs[acts]
    gid = gp.group_of
    start = np.full(N, np.inf)
    np.minimum.at(start, gid, sim.start_us)
    end = np.zeros(N)
    np.maximum.at(end, gid, sim.end_us)
    M = max(float(sim.makespan_us), 1e-9)
    # time the inputs of node v would be ready on device a: max over parents u of end(u) + transfer
    ready = np.zeros((N, A))
    if len(ctx.src):
        arrive = end[ctx.src][:, None] + transfer_us(P, ctx.nbytes[:, None], cur[ctx.src][:, None], devs[None, :])
        np.maximum.at(ready, ctx.dst, arrive)
    v, a = ctx.task, ctx.act
    c = gp.compute_us[v, a]
    cmin = np.where(gp.feasible, gp.compute_us, np.inf).min(axis=1)[v]
    here = acts[v] == a
    busy = sim.busy_us[devs] / M
    mem = np.minimum(sim.peak_memory_bytes[devs] / P.memory_bytes[devs], 4.0)
    x = np.stack([
        np.log1p(c / ctx.tau), np.log(np.maximum(c, 1e-12) / np.maximum(cmin, 1e-12)), here.astype(np.float64),
        busy[a], ctx.dev_feat[a, 0], ctx.dev_feat[a, 1], mem[a],
        start[v] / M, end[v] / M, ready[v, a] / M, np.clip((ready[v, a] + c - end[v]) / M, -2.0, 2.0),
        np.full(len(v), np.log1p(M / ctx.lb)), np.log1p(cmin / ctx.tau), busy[a] + np.where(here, 0.0, c / M),
    ], axis=1)
    # edges: (u, p(u)) -> every option (v, d); every other option (u, d) -> (v, p(v))
    u, w = ctx.src, ctx.dst
    fv = gp.feasible[w]  # (E, A)
    e1, a1 = np.nonzero(fv)
    fu = gp.feasible[u] & (np.arange(A)[None, :] != acts[u][:, None])
    e2, a2 = np.nonzero(fu)
    src = np.concatenate([ctx.pid[u[e1], acts[u[e1]]], ctx.pid[u[e2], a2]])
    dst = np.concatenate([ctx.pid[w[e1], a1], ctx.pid[w[e2], acts[w[e2]]]])
    ed = np.concatenate([e1, e2])
    ds, dd = devs[ctx.act[src]], devs[ctx.act[dst]]
    t = transfer_us(P, ctx.nbytes[ed], ds, dd)
    mean_bytes = max(float(ctx.nbytes.mean()), 1.0) if len(ctx.nbytes) else 1.0
    ea = np.stack([np.log1p(t / ctx.tau), (ds == dd).astype(np.float64), np.log1p(ctx.nbytes[ed] / mean_bytes)], axis=1)
    return GpNet(x.astype(np.float32), np.stack([src, dst]).astype(np.int64), ea.astype(np.float32),
                 v.astype(np.int64), ~here)


# ---------------------------------------------------------------------- the GNN and the policy (sections 4.3, 4.4)
def make_net(hidden: int, mp_steps: int):
    """GiPH's network (:class:`placer.nn.giph.GiPHNet`) reading gpNets of this module's feature sizes."""
    from placer.nn.giph import GiPHNet

    return GiPHNet(hidden, mp_steps, N_NODE, N_EDGE)


def _batch(nets: list[GpNet]):
    """Several gpNets as one disjoint graph (PyG batching): tensors and the offsets' bookkeeping."""
    import torch

    xs, eis, eas, tasks, batch, valid = [], [], [], [], [], []
    off = toff = 0
    for i, g in enumerate(nets):
        xs.append(g.x)
        eis.append(g.edge_index + off)
        eas.append(g.edge_attr)
        tasks.append(g.task + toff)
        batch.append(np.full(len(g.x), i, dtype=np.int64))
        valid.append(g.valid)
        off += len(g.x)
        toff += int(g.task.max()) + 1 if len(g.task) else 0
    t = torch.as_tensor
    return (t(np.concatenate(xs)), t(np.concatenate(eis, axis=1)), t(np.concatenate(eas)), t(np.concatenate(tasks)),
            t(np.concatenate(batch)), toff, len(nets), t(np.concatenate(valid)))


def log_policy(net, nets: list[GpNet]):
    """(log pi(pair) for every pair of every gpNet, the batch index of each pair, entropy per gpNet):
    the softmax over the valid pairs of each gpNet (section 4.4)."""
    import torch
    from torch_geometric.utils import scatter

    x, ei, ea, task, batch, n_tasks, B, valid = _batch(nets)
    logits = net(x, ei, ea, task, batch, n_tasks, B).masked_fill(~valid, -1e9)
    top = scatter(logits, batch, dim=0, dim_size=B, reduce="max")
    z = torch.exp(logits - top[batch])
    logp = logits - top[batch] - torch.log(scatter(z, batch, dim=0, dim_size=B, reduce="sum"))[batch]
    ent = -scatter(torch.where(valid, logp.exp() * logp, torch.zeros_like(logp)), batch, dim=0, dim_size=B)
    return logp, batch, ent


# ---------------------------------------------------------------------- episodes and REINFORCE (section 4.4)
CHUNK_PAIRS = 40_000  # pairs per forward pass when an episode is re-scored for its update (memory)


def reinforce_loss(net, opt, steps: list[tuple[GpNet, int]], rewards: list[float], baseline: DecayedMean, cfg) -> float:
    """One REINFORCE update on an episode: loss = -mean_t log pi(a_t | s_t) A_t - entropy * mean_t H_t,
    A_t = (G_t - b_t) / std (ours: normalised per episode; G_t the discounted return-to-go, b_t the
    per-step ``baseline``: :func:`placer.rl.estimator.giph`), its backward pass in chunks of at most
    ``CHUNK_PAIRS`` pairs, gradients clipped. Returns the loss."""
    import torch

    if not steps:
        return 0.0
    est = estimator.giph(cfg.gamma, cfg.baseline_decay)
    G = est.returns_of(rewards)
    b = baseline.value(G)
    baseline.add(G)
    A = est.advantages(G, b)
    opt.zero_grad()
    T, total, i = len(steps), 0.0, 0
    while i < T:
        j, pairs = i, 0
        while j < T and (j == i or pairs + len(steps[j][0].x) <= CHUNK_PAIRS):
            pairs += len(steps[j][0].x)
            j += 1
        chunk = steps[i:j]
        logp, _, ent = log_policy(net, [g for g, _ in chunk])
        first = torch.as_tensor(np.cumsum([0] + [len(g.x) for g, _ in chunk[:-1]]))
        chosen = logp[first + torch.as_tensor([a for _, a in chunk])]
        loss = est.loss(chosen, A[i:j], ent, cfg.entropy) / T
        loss.backward()
        total += float(loss.detach())
        i = j
    clip_and_step(opt, net.parameters(), cfg.grad_clip)
    return total


def start_actions(ctx: Ctx, how: str, ev: Evaluator, rng, first: bool, seeds: str = "", kick: int = 0) -> np.ndarray:
    """An episode's start placement (action per node): random (a uniformly random feasible device per
    node), fastest (each node's fastest device; one device for all when one runs them fastest), best
    (the best placement ``ev`` has evaluated with ``kick`` random relocations; the first episode's
    from the best of the classical heuristics ``seeds``, simulated through ``ev``; fastest without)."""
    gp = ctx.gp
    if how == "random":
        u = rng.random(gp.feasible.shape) * gp.feasible
        return np.argmax(u + gp.feasible, axis=1).astype(np.int64)
    if how == "best" and not first and ev.best is not None:
        acts = node_actions(gp, ev.best)
        for v in rng.integers(0, gp.n_groups, size=kick):
            other = np.flatnonzero(gp.feasible[v] & (np.arange(gp.n_actions) != acts[v]))
            if len(other):
                acts[v] = other[rng.integers(len(other))]
        return acts
    if how == "best" and seeds and ev is not None:
        got = seeded_start(ctx.problem, ev, seeds, 0)
        if got is not None:  # the best evaluated: the best seed, or the single device when it is faster
            return node_actions(gp, ev.best if ev.best is not None else got.placement)
    tot = np.where(gp.feasible.all(axis=0), np.where(gp.feasible, gp.compute_us, 0.0).sum(axis=0), np.inf)
    if np.isfinite(tot).any():
        return np.full(gp.n_groups, int(np.argmin(tot)), dtype=np.int64)
    return np.argmin(np.where(gp.feasible, gp.compute_us, np.inf), axis=1).astype(np.int64)


def episode(net, ctx: Ctx, ev: Evaluator, acts: np.ndarray, steps: int, gen, room,
            descend: bool = False) -> tuple[list, list[float]]:
    """One episode from node placement ``acts``: ``steps`` relocations sampled from the policy, each new
    placement simulated through ``ev`` while ``room()`` says the budget allows; with ``descend`` a
    relocation that makes the placement slower is undone (its reward, negative, kept), so the
    episode walks down from its start. Returns ([(gpNet, pair chosen)], rewards)."""
    import torch

    acts = acts.copy()
    if not room():
        return [], []
    sim = ev.simulate(ctx.gp.expand(acts))
    obj, out, rewards = sim.objective_us, [], []
    for _ in range(steps):
        if not room():
            break
        g = gpnet(ctx, acts, sim)
        if descend:  # candidates: relocations after which the task's inputs and compute end no later than it ends now
            near = g.valid & (g.x[:, 10] <= 0)
            if near.any():
                g.valid = near
        if not g.valid.any():
            break
        with torch.no_grad():
            logp, _, _ = log_policy(net, [g])
        k = int(torch.multinomial(logp.exp(), 1, generator=gen))
        v, was = ctx.task[k], acts[ctx.task[k]]
        acts[v] = ctx.act[k]
        new = ev.simulate(ctx.gp.expand(acts))
        rewards.append((obj - new.objective_us) / ctx.lb)
        out.append((g, k))
        if descend and new.objective_us > obj:
            acts[v] = was  # undone: the episode stays where it was
        else:
            sim, obj = new, new.objective_us
    return out, rewards


def play(run: Training, ctxs: list[Ctx], net, cfg, seed: int, *, finetune: int | None = None,
         notes: list[str] | None = None) -> tuple[int, int]:
    """GiPH's training loop (section 4.4): episodes round-robin over ``run``'s problems
    (:meth:`Training.round_robin`; ``ctxs`` their views), a REINFORCE update on each episode's
    relocations (per problem its own baseline), a progress record after each, until every
    problem's budget is spent or an episode finds no relocation. Policy training (``notes`` None)
    starts each episode from a ``cfg.train_start`` placement. Search mode (``notes``: the notes of
    the one problem's result) starts from ``cfg.start`` (the first exactly at the best placement so
    far), walks as ``cfg.walk`` says, stops within ``cfg.placements`` when the Evaluator has no
    limit, updates only the first ``finetune`` episodes (None: every one) and runs the memory
    fallback after the first episode. Returns (episodes, updates)."""
    import torch

    search = notes is not None
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    gen, rng = torch.Generator().manual_seed(seed), np.random.default_rng(seed)
    bases = [estimator.giph(cfg.gamma, cfg.baseline_decay).new_baseline() for _ in ctxs]
    caps = [ev.placements + (cfg.placements if ev.limit is None else ev.remaining()) if search else None
            for ev in run.evs]
    count = [0, 0]  # episodes, updates

    def turn(i: int, k: int) -> bool:
        ctx, ev, P = ctxs[i], run.evs[i], run.problems[i]

        def room() -> bool:
            return not ev.out_of_budget() and (caps[i] is None or ev.placements < caps[i])

        if not room():
            return False
        if not search:
            acts = start_actions(ctx, cfg.train_start, ev, rng, ev.best is None, cfg.seeds, cfg.kick)
        elif cfg.start == "best" and ev.best is not None:  # the first episode exactly from the best
            acts = start_actions(ctx, "best", ev, rng, False, kick=cfg.kick if count[0] else 0)
        else:
            acts = start_actions(ctx, cfg.start, ev, rng, count[0] == 0, cfg.seeds, cfg.kick)
        steps, rewards = episode(net, ctx, ev, acts, cfg.episode or ctx.gp.n_groups, gen, room,
                                 search and cfg.walk == "descend")
        count[0] += 1
        learn = finetune is None or count[1] < finetune
        if learn and steps and cfg.lr > 0:
            reinforce_loss(net, opt, steps, rewards, bases[i], cfg)
            count[1] += 1
        run.report({"episode": k, "graph": P.graph.name, **({} if search else {"cluster": P.cluster.name}),
                    "placements": ev.placements, "improvement": float(np.sum(rewards)) if rewards else 0.0,
                    "best_ms": ev.best_objective_us / 1e3, **({"updated": bool(learn and steps)} if search else {})})
        if search and count[0] == 1:
            note = fit_in_memory(P, ev)
            if note:
                notes.append(note)
        return bool(steps) and room()  # no relocation possible (one device per node) or no budget left: done

    run.round_robin(turn)
    return count[0], count[1]


# ---------------------------------------------------------------------- policy states
def policy_state(net, hidden: int, mp_steps: int, cfg) -> dict:
    return {"format": FORMAT, "method_config": cfg.to_dict(), "arch": {"hidden": int(hidden), "mp_steps": int(mp_steps),
            "node_features": N_NODE, "edge_features": N_EDGE},
            "model": {k: v.detach().clone() for k, v in net.state_dict().items()}}


def check_policy(state) -> dict:
    fix = "give a policy that `giph` trained (GIPH_METHOD.train or policy_state)"
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InputError("giph policy", "state", "is not a giph policy state", fix)
    arch = state.get("arch")
    if not isinstance(arch, dict) or not isinstance(state.get("model"), dict):
        raise InputError("giph policy", "'arch' or 'model'", "is missing (a damaged or foreign state)", fix)
    if arch.get("node_features") != N_NODE or arch.get("edge_features") != N_EDGE:
        raise InputError("giph policy", "features", f"were {arch.get('node_features')}/{arch.get('edge_features')}, "
                         f"this version reads {N_NODE}/{N_EDGE}", "train the policy again")
    for key in ("hidden", "mp_steps"):
        v = arch.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not (0 <= v <= 1024):
            raise InputError("giph policy", f"arch {key}={v!r}", "is not a network size", fix)
    return state


def net_from(state: dict | None, cfg):
    """The network: the policy's shape and weights, or a fresh one of ``cfg``'s shape."""
    if state is None:
        return make_net(cfg.hidden, cfg.mp_steps), cfg.hidden, cfg.mp_steps
    arch = state["arch"]
    net = make_net(arch["hidden"], arch["mp_steps"])
    try:
        net.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise InputError("giph policy", "model", f"does not fit the network ({str(e)[:80]})",
                         "give a policy that `giph` trained") from None
    return net, arch["hidden"], arch["mp_steps"]


# ---------------------------------------------------------------------- the method
class GiPH(StatePolicyMethod):
    """GiPH's side of :class:`placer.methods.learned.LearnedMethod`; its policy is its state dict."""

    name = "giph"

    def check(self, state: dict) -> dict:
        return check_policy(state)

    def network(self, state: dict) -> dict:
        """The state dict of the network the policy's stored ``arch`` describes (checked sizes)."""
        return make_net(state["arch"]["hidden"], state["arch"]["mp_steps"]).state_dict()

    def search(self, problem, seed: int, ev: Evaluator, cfg: GiPHConfig, *, policy: dict | None = None,
               progress: Progress | None = None):
        """Search mode (``policy`` None: learn on this graph, an update after every episode), or a
        trained policy: ``cfg.finetune`` updates, then episodes without updates, until the budget
        (``cfg.placements`` when ``ev`` has none) is spent. Returns (PlacementResult, policy state)."""
        import torch

        if policy is not None:
            check_policy(policy)
        with one_thread():
            one = single_device_start(problem, ev)  # never slower than the best single device
            if cfg.start == "best" and cfg.seeds:  # the best list scheduler, simulated first
                seeded_start(problem, ev, cfg.seeds, 0)
            # the nodes cut along the best placement so far, so that episodes start exactly there
            ctx = make_ctx(problem, cfg.nodes, along=ev.best if cfg.start == "best" else None)
            torch.manual_seed(seed)
            net, H, K = net_from(policy, cfg)
            notes = [(f"{ctx.gp.n_groups} nodes ({problem.n_ops} ops) x {ctx.gp.n_actions} devices: "
                     f"{len(ctx.task)} gpNet pairs; episodes of {cfg.episode or ctx.gp.n_groups} relocations from "
                     f"a {cfg.start} start")]
            if one is not None:
                notes.append(f"the best single device: {one / 1e3:,.1f} ms")
            n_ep, updates = play(Training.one(self.name, problem, ev, progress), [ctx], net, cfg, seed,
                                 finetune=None if policy is None else cfg.finetune, notes=notes)
            notes.append(f"{n_ep} episodes, {updates} REINFORCE updates" +
                         (" (zero-shot)" if policy is not None and not updates else ""))
            state = policy_state(net, H, K, cfg)
        if ev.best is None:
            raise RuntimeError("giph evaluated no placement")
        return ev.result(self.name, notes=notes), state

    def train(self, problems: list, cfg: GiPHConfig, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> dict:
        """One policy trained on ``problems`` (any graphs, any clusters: GiPH section 4): episodes go
        round-robin over them (:func:`play`), each from a ``cfg.train_start`` placement, an update
        after each, until ``placements`` simulations in all (shared equally; None: ``cfg.placements``
        per problem) are spent. Returns the policy state."""
        import torch

        if not problems:
            raise InputError("giph", "training problems", "are none", "give at least one Problem")
        start = cfg.policy
        if start is not None:
            check_policy(start)
        with one_thread():
            ctxs = [make_ctx(P, cfg.nodes) for P in problems]
            run = Training.of(self.name, problems, share(cfg.placements, placements, len(problems)), sim_params,
                              progress)
            torch.manual_seed(seed)
            net, H, K = net_from(copy.deepcopy(start) if start is not None else None, cfg)
            play(run, ctxs, net, cfg, seed)
            return policy_state(net, H, K, cfg)


# version 3: the best single device simulated first, nodes cut along the best start, placing episodes
# descend (a slowing relocation undone), kick 1 (issue 66)
@register("giph", "GiPH: gpNet of (task, device) pairs, GNN along the task graph, relocate one task per step, "
          "REINFORCE on step-time improvements", "learned", GiPHConfig,
          paper="Hu et al., MLSys 2023, GiPH: Generalizable Placement Learning for Adaptive Heterogeneous Computing",
          available=torch_geometric_available, version=3)
def giph(problem, seed: int, ev: Evaluator, cfg: GiPHConfig):
    return GIPH_METHOD.run(problem, seed, ev, cfg)


GIPH_METHOD = register_learned(GiPH())  # train / place / fine-tune (placer.methods.learned.protocol)
