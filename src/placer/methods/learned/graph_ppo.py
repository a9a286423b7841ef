"""What GDP (:mod:`placer.methods.learned.gdp`) and Mars (:mod:`placer.methods.learned.mars`) share: a policy network
reads a graph's nodes and places every node, and clipped PPO (:mod:`placer.rl.ppo`; GDP section 3.3,
Mars section 3.4) trains it on sampled placements. Not a method: each method module holds its config,
its network and a :class:`PolicyKind` naming them, and calls the driver here.

* nodes: the op groups of :mod:`placer.nn.encoder` (colocation and forward/backward mirrors merged,
  at most ``cfg.nodes`` of them, in topological order), :func:`graph_ctx`;
  :func:`placer.nn.encoder.segments` cuts their sequence into the pieces both papers' placers read
  one after the other;
* :func:`search`, the method (:class:`GraphPPOMethod`, the learned-method protocol of
  :mod:`placer.methods.learned.protocol`): from a fresh policy (search mode: trained on the one graph within the
  placement budget, the best placement evaluated returned), or from a trained policy state
  (``cfg.finetune`` PPO updates on this graph, then the greedy placement). In search mode the start
  is simulated first (:func:`start_target`, ours, not in either paper) and the policy held near it
  (:class:`Anchor`: a logit prior on the anchor's devices that follows the best sample); after the
  first PPO update the memory fallback of
  :mod:`placer.methods.memory_fallback` runs (:func:`fallback_after_first`);
* :func:`train`: batch training across graphs (GDP section 3.3): one policy, every update sampling
  ``cfg.batch`` placements of each graph;
* policy states: plain state dicts (tensors, numbers, strings) made by :func:`policy_state` and
  checked by :func:`check_policy`; the caller reads and writes them as files
  (:func:`placer.io.read_checkpoint`, :func:`placer.io.write_checkpoint`).

Everything runs on one torch thread, with every random draw from generators seeded by the seed: same
seed, same placement.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator
from placer.methods.learned.driver import Progress, StatePolicyMethod, Training, needs, share
from placer.methods.memory_fallback import fit_in_memory
from placer.nn.threads import one_thread
from placer.sim import memory_first


def torch_geometric_available() -> str | None:
    return needs(("torch", "torch_geometric"), "the 'torch' extra and torch_geometric")


# ---------------------------------------------------------------------- what a policy reads
@dataclass(eq=False)
class GraphCtx:
    """One graph as the learned placers see it."""

    gp: object  # placer.nn.encoder.PlacementNodes: the nodes placed and their candidate devices
    data: object  # placer.nn.encoder.GraphData
    feasible: object  # torch (N, A) bool: the devices each node can run on
    prior: object = None  # torch (N, A) float added to a per-node policy's logits (the anchor, :func:`anchor_prior`), or None

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


# ---------------------------------------------------------------------- one method's policy
@dataclass(frozen=True)
class PolicyKind:
    """What the driver needs to know of a method: its name, the format its policy states carry, the
    config fields that decide the network's shape (a policy state fits only a network of the same
    shape), and how to build the network: ``make_net(cfg, n_actions, graphs, seed, stop=None)`` with
    ``graphs`` the :class:`GraphCtx` it will be trained on and ``stop()`` asked between the steps of
    its fixed work (pretraining), which ends early when it is true (:meth:`Evaluator.time_up`)."""

    name: str
    format: str
    arch_fields: tuple[str, ...]
    make_net: Callable


def policy_state(kind: PolicyKind, cfg, n_actions: int, trainer) -> dict:
    """The trained policy as a plain state dict (the trainer's state, the config, the device count)."""
    return {"format": kind.format, "method_config": cfg.to_dict(), "n_actions": int(n_actions), **trainer.state_dict()}


def check_policy(kind: PolicyKind, state: dict, cfg=None, n_actions: int | None = None) -> dict:
    """``state`` when it is a policy state of ``kind`` whose network fits ``cfg`` and ``n_actions``
    candidate devices (each checked when given); InputError otherwise (attribute it to a file with
    :meth:`InputError.at`)."""
    where, fix = f"{kind.name} policy", f"give a policy that `{kind.name}` trained"
    if not isinstance(state, dict) or state.get("format") != kind.format:
        raise InputError(where, "state", f"is not a {kind.name} checkpoint", fix)
    for key, typ in (("method_config", dict), ("n_actions", int), ("model", dict)):
        if not isinstance(state.get(key), typ):
            raise InputError(where, f"'{key}'", "is missing or of the wrong type (a damaged or foreign checkpoint)",
                             fix)
    saved = state["method_config"]
    if cfg is not None:
        for f in kind.arch_fields:
            if saved.get(f) != getattr(cfg, f):
                raise InputError(where, "network shape",
                                 f"was trained with {f}={saved.get(f)!r}, not {getattr(cfg, f)!r}", f"set {f}={saved.get(f)!r}")
    if n_actions is not None and int(state["n_actions"]) != n_actions:
        raise InputError(where, "devices", f"chooses among {state['n_actions']} devices, this problem has "
                         f"{n_actions} candidates", "use a cluster with as many candidate devices")
    return state


def settings(cfg, seed: int):
    from placer.rl.ppo import PPOSettings, TrainSettings

    return TrainSettings(batch=cfg.batch, lr=cfg.lr, seed=seed, reward=cfg.reward,
                         ppo=PPOSettings(clip=cfg.clip, epochs=cfg.ppo_epochs, minibatches=cfg.minibatches,
                                         entropy=cfg.entropy, grad_clip=cfg.grad_clip))


def trainer(kind: PolicyKind, run: Training, ctxs: list[GraphCtx], cfg, seed: int, stop=None, clock_start=None):
    """The PPO trainer (:class:`placer.rl.ppo.PolicyTrainer`) of a fresh network on ``run``'s
    problems (``ctxs`` their views): every update samples each problem within its Evaluator's budget.
    ``stop``: asked between the steps of the network's fixed work (:class:`PolicyKind`)."""
    import torch

    from placer.rl.ppo import PolicyTrainer, Scorer

    torch.manual_seed(seed)
    net = kind.make_net(cfg, ctxs[0].gp.n_actions, ctxs, seed, stop=stop)
    return PolicyTrainer(net, ctxs, [Scorer(ev) for ev in run.evs], settings(cfg, seed), log_every=cfg.log_every,
                         label=kind.name, clock_start=clock_start)


def _hook(run: Training, then=None):
    """The trainer's ``on_update``: ``run`` reports each update's line, then ``then(trainer, line)``
    runs."""
    if run.progress is None and then is None:
        return None

    def hook(tr, line) -> None:
        run.report(line)
        if then is not None:
            then(tr, line)
    return hook


# ---------------------------------------------------------------------- the method
def search(kind: PolicyKind, problem, seed: int, ev: Evaluator, cfg, *, policy: dict | None = None,
           progress: Progress | None = None):
    """Search mode (``policy`` None), or a trained policy state fine-tuned for ``cfg.finetune`` PPO
    updates, then placed greedily. ``progress`` gets one dict per PPO update. Returns
    (PlacementResult, the policy state it ended with)."""
    import time

    import torch

    name = kind.name
    started = time.perf_counter()  # for the progress lines' wall-clock column only
    with one_thread():
        ctx = graph_ctx(problem, cfg.nodes, cfg.devices)
        run = Training.one(name, problem, ev, progress)
        tr = trainer(kind, run, [ctx], cfg, seed, stop=ev.time_up, clock_start=started)  # its fixed work ends with the time
        net = tr.policy
        notes = [f"{ctx.n} nodes ({problem.n_ops} ops), {ctx.gp.n_actions} candidate devices"]
        if policy is not None:
            check_policy(kind, policy, cfg, ctx.gp.n_actions)
        notes += list(getattr(net, "notes", []))
        start = None if policy is not None else start_target(problem, ctx, ev, cfg)
        anchor = None
        if start is not None:
            notes.append(f"start: the {start[0]} placement ({ev.placements} placements simulated for it, best "
                         f"{ev.best_objective_us / 1e3:,.1f} ms)")
            anchor = Anchor(ctx, cfg, notes)
            anchor.hold(start[1], ev.best_objective_us, f"the {start[0]} start")
        on_update = _hook(run, fallback_after_first(problem, ev, notes, anchor))
        if policy is not None:
            tr.load_state_dict(policy, weights_only=True)
            if cfg.finetune > 0:
                tr.train(updates=cfg.finetune, on_update=on_update)
                notes.append(f"fine-tuned {tr.update} PPO updates")
            if not ev.out_of_budget():
                with torch.no_grad():
                    net.eval()
                    a = net.greedy(ctx)
                ev.evaluate(ctx.gp.expand(a.numpy()))
                notes.append("placed with the greedy policy")
        else:
            tr.train(on_update=on_update)
            notes.append(f"{tr.update} PPO updates of {cfg.batch} placements")
            if anchor is not None and anchor.moves:
                notes.append(f"the anchor followed the best sample {anchor.moves} times")
    if ev.best is None and not ev.time_up():  # nothing fit in the budget (cannot happen with a budget >= 1)
        raise RuntimeError(f"{name} evaluated no placement")  # (its time limit ending first: ev.result's fallback)
    return ev.result(name, notes=notes), policy_state(kind, cfg, ctx.gp.n_actions, tr)


def fallback_after_first(problem, ev: Evaluator, notes: list[str], anchor: Anchor | None = None):
    """The trainer's ``on_update`` hook: after the first PPO update, :func:`fit_in_memory` (the
    classical seeds, relieved, when nothing evaluated so far fits in memory); after every update,
    the anchor follows the best sample when one beat it (:meth:`Anchor.follow`)."""
    def hook(tr, _line) -> None:
        if tr.update == 1:
            note = fit_in_memory(problem, ev)
            if note:
                notes.append(note)
        if anchor is not None:
            anchor.follow(tr)
    return hook


class GraphPPOMethod(StatePolicyMethod):
    """GDP's or Mars's side of :class:`placer.methods.learned.LearnedMethod`: its policy is its
    policy state (:func:`policy_state`); :meth:`run` is the registered method."""

    def __init__(self, kind: PolicyKind):
        self.kind, self.name = kind, kind.name

    def search(self, problem, seed: int, ev: Evaluator, cfg, *, policy: dict | None = None,
               progress: Progress | None = None):
        return search(self.kind, problem, seed, ev, cfg, policy=policy, progress=progress)

    def check(self, state: dict) -> dict:
        return check_policy(self.kind, state)

    def network(self, state: dict) -> dict:
        """The state dict of the network the policy's stored shape settings and device count describe."""
        from placer.methods.base import METHODS

        where, fix = f"{self.name} policy", f"give a policy that `{self.name}` trained"
        n = state["n_actions"]
        from placer.cluster import MAX_DEVICES

        if isinstance(n, bool) or not 1 <= n <= MAX_DEVICES:
            raise InputError(where, f"n_actions={n!r}", f"is not a device count from 1 to {MAX_DEVICES:,}", fix)
        saved = state["method_config"]
        try:
            cfg = METHODS[self.name].config(**{f: saved[f] for f in self.kind.arch_fields if f in saved})
        except InputError as e:
            raise InputError(where, f"stored {e.item}", e.problem, fix) from None
        return self.kind.make_net(cfg, n).state_dict()

    def train(self, problems: list, cfg, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> dict:
        """Batch training (:func:`train`) on ``problems``: ``placements`` in all, shared equally by
        the graphs (None: ``cfg.placements`` per graph)."""
        tr = train(self.kind, problems, cfg, share(cfg.placements, placements, len(problems)), seed, sim_params,
                   progress=progress)
        return policy_state(self.kind, cfg, tr.graphs[0].gp.n_actions, tr)


# ---------------------------------------------------------------------- the start (ours)
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


def anchor_prior(feasible, target: np.ndarray, mass: float):
    """(N, A) logit prior that gives each node's ``target`` device probability ``mass`` when the
    network's own logits are equal: beta = log(mass / (1 - mass)) + log(A_v - 1) on the target, 0
    elsewhere (A_v the node's feasible devices), so that softmax(f + prior) = mass there at f = 0."""
    import torch

    N, A = feasible.shape
    others = (feasible.sum(dim=1).to(torch.float64) - 1.0).clamp_min(1.0)
    beta = math.log(mass / (1.0 - mass)) + torch.log(others)
    prior = torch.zeros(N, A, dtype=torch.float32)
    prior[torch.arange(N), torch.as_tensor(np.asarray(target, dtype=np.int64))] = beta.to(torch.float32)
    return prior


class Anchor:
    """The placement the policy samples around (ours, not in either paper): first the start, then,
    with ``cfg.follow_best``, the best sample whenever one beats it. A logit prior on the anchor's
    devices (:func:`anchor_prior`, the graph's ``prior``, added to the network's logits) keeps each
    node there with probability m = 1 - ``cfg.start_moves`` / N when the network's own logits are
    equal, so a sample moves about ``start_moves`` of the N nodes off the anchor and PPO learns the
    residual from the samples near it. A policy sampled near uniform is many times slower than the
    start and never beats it (docs/methods/gdp.md); a supervised warm start toward the start does not
    take with GDP's per-node outputs and, with Mars's decoder, leaves every sample after the first
    update on one GPU (docs/methods/mars.md). Nothing here is simulated."""

    def __init__(self, ctx: GraphCtx, cfg, notes: list[str]):
        self.ctx, self.cfg, self.notes = ctx, cfg, notes
        self.mass = min(1.0 - 1e-6, max(0.5, 1.0 - cfg.start_moves / max(ctx.n, 1)))
        self.objective_us, self.moves = math.inf, 0

    def hold(self, target: np.ndarray, objective_us: float, what: str) -> None:
        """Make ``target`` (N,) the anchor (``objective_us`` its step time)."""
        self.target, self.objective_us = np.asarray(target, dtype=np.int64).copy(), float(objective_us)
        self.ctx.prior = anchor_prior(self.ctx.feasible, self.target, self.mass)
        if not self.moves:
            self.notes.append(f"policy anchored at {what}: logit prior, each node there with probability "
                              f"{self.mass:.4f}")

    def follow(self, tr) -> None:
        """After a PPO update: move the anchor to the best sample when it beat the anchor."""
        best = tr.best[0]
        if self.cfg.follow_best and best["placement"] is not None and best["objective_us"] < self.objective_us:
            self.moves += 1
            self.hold(best["placement"], best["objective_us"], "the best sample")


# ---------------------------------------------------------------------- batch training (GDP section 3.3)
def train(kind: PolicyKind, problems: list, cfg, placements: int, seed: int = 0, sim_params=None,
          resume: dict | None = None, on_update=None, progress: Progress | None = None):
    """One policy trained on several graphs: every update samples ``cfg.batch`` placements of each
    graph, until each graph has used ``placements`` simulations. Returns the trainer (its ``best`` per
    graph; :func:`policy_state` makes its state). ``resume``: continue a policy state that this
    function made for the same graphs. ``on_update(trainer, line)`` runs after each update,
    ``progress`` gets its line."""
    with one_thread():
        ctxs = [graph_ctx(P, cfg.nodes, cfg.devices) for P in problems]
        A = {c.gp.n_actions for c in ctxs}
        if len(A) != 1:
            raise InputError(kind.name, "training graphs", f"have different numbers of candidate devices {sorted(A)}",
                             "train on one cluster")
        run = Training.of(kind.name, problems, placements, sim_params, progress)
        tr = trainer(kind, run, ctxs, cfg, seed)
        if resume is not None:
            check_policy(kind, resume, cfg, A.pop())
            tr.load_state_dict(copy.deepcopy(resume))  # the optimizer would train the caller's tensors in place
            for e, used in zip(run.evs, tr.used):  # the budget already spent on each graph
                e.placements = min(placements, used)
        tr.train(on_update=_hook(run, on_update))
    return tr
