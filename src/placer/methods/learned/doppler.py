"""DOPPLER (Yao et al., "DOPPLER: Dual-Policy Learning for Device Assignment in Asynchronous
Dataflow Graphs", ICLR 2026, arXiv:2505.23131): two policies place a dataflow graph one node at a
time, SEL picking the next node among the schedulable ones and PLC picking its device, trained in
three stages (imitation of a critical-path list scheduler, REINFORCE on a simulator, REINFORCE on
the real system during deployment).

* The MDP (section 3): a state is the graph with its partial assignment; a node is *schedulable*
  once every predecessor is assigned. SEL chooses one schedulable node, PLC one device it can run on
  (and that its colocation group is not pinned away from); an episode ends when every node is
  assigned, and its placement is simulated once.
* The networks (section 4): a message-passing network embeds the nodes once per episode from static
  features (compute cost, output size, degrees, and the critical-path top level and bottom level
  with mean compute and communication costs, which the paper gives SEL as context); messages flow
  along and against the edges, summed and averaged at each node (a PyG ``MessagePassing`` layer,
  :mod:`placer.nn.doppler`). SEL scores a schedulable node from its embedding and its dynamic
  features (earliest start and finish over the devices given the partial assignment, its levels);
  PLC scores each device from the node's embedding, the device's own embedding (the mean embedding
  of the nodes assigned to it so far) and
  per-device state (when it is free, when the node's inputs would reach it, the node's cost and
  earliest finish there, its load, the share of the node's inputs already there). PLC's weights are
  shared by the devices, so a policy places clusters of any size.
* Stage I (section 4.2): imitation of the critical-path heuristic: the teacher's trajectory (its
  node order and devices, HEFT by default: bottom-level order, earliest-finish device, under the
  simulator's bus model; :mod:`placer.methods.list_scheduling`) is replayed and the cross-entropy
  of both policies' choices minimised.
* Stage II (section 4.3): REINFORCE on the simulator, reward the negative execution time (divided
  by the teacher's), baseline the mean reward of the earlier episodes, epsilon-greedy exploration
  and learning rate both decayed linearly to 0.
* Stage III (section 4.4): the paper fine-tunes on the real system during deployment. In placer the
  simulator behind the Evaluator is the only system a method sees, so Stage III is the same
  REINFORCE fine-tuning on the target graph under that Evaluator (``finetune`` with a trained
  policy; in search mode the last ``1 - sim_share`` of the budget, its schedules restarted).

Search mode (``run``): Stages I-III on the one graph within the placement budget (the teacher's
placement, the best single device that fits and the greedy placement after Stage I count one each,
every episode one; Stages II and III explore around the best placement so far, ``explore="best"``:
:func:`reinforce`; the run stops when its placements or its time end; Stage I, which
simulates nothing, runs at most as many updates as the budget has placements, so the budget bounds
its cost too); the best placement evaluated is returned. Graphs with more ops than ``nodes`` are placed as that many
Merge-and-Colocate groups (Placeto A.6, :mod:`placer.grouping`), so 20k-op graphs run; each episode
embeds once and runs its steps in one compiled kernel (:func:`placer.methods.learned.doppler_rollout.rollout`), and an update scores a
whole recorded episode in one batched pass (:func:`log_probs`). ``DOPPLER_METHOD`` offers train
(several graphs: policy mode) / place / fine-tune (:mod:`placer.methods.learned.protocol`). What the paper
specifies and what we chose, and measurements: docs/methods/doppler.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.doppler_rollout import ANCHOR, FORCED, GREEDY, SAMPLE, pick, rollout
from placer.methods.learned.protocol import register_learned
from placer.methods.learned.driver import (
    PolicyFields,
    Progress,
    StatePolicyMethod,
    Training,
    needs,
    share,
    single_device_start,
)
from placer.nn.threads import one_thread
from placer.rl import estimator
from placer.rl.estimator import RunningMean
from placer.rl.step import gradient_step

FORMAT = "placer-doppler-1"
ARCH_FIELDS = ("hidden", "layers")  # the config fields that fix the network's shape
N_STATIC, N_SEL, N_PLC = 11, 4, 7  # static node features, SEL's dynamic features, PLC's per-device features
KERNEL_ARRAYS = {"cost": np.float64, "ok": np.bool_, "coloc": np.int64, "n_pred": np.int64, "succ_ptr": np.int64,
                 "succ_idx": np.int64, "succ_bytes": np.float64, "lat": np.float64, "inv_bw": np.float64,
                 "blevel": np.float64, "lsum": np.float64, "in_bytes": np.float64}  # Ctx's arrays the rollout reads


@dataclass(frozen=True)
class DopplerConfig(PolicyFields, MethodConfig):
    """DOPPLER's hyperparameters: the paper's where its configs give them, ours marked."""

    placements: int = 2_000  # default budget in placements (ours; the paper runs 2,000 simulated + 4,000 real episodes)
    nodes: Annotated[int, Range(">= 2")] = 1_024  # most nodes placed: more ops are merged into this many groups (Placeto A.6; ours)
    devices: Literal["auto", "gpus", "all"] = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: Annotated[int, Range(">= 1")] = 64  # node embedding width (ours: the paper's text we read gives none)
    layers: Annotated[int, Range(">= 0")] = 3  # message-passing rounds, each along and against the edges (ours)
    teacher: Literal["heft", "m-etf"] = "heft"  # Stage I teacher: heft (critical-path order, earliest finish) or m-etf (ours: the project's schedulers)
    il_steps: Annotated[int, Range(">= 0")] = 2_000  # Stage I: most imitation updates (and at most the budget's placements), stopped once both policies pick every teacher action (paper: 2,000 episodes)
    il_patience: Annotated[int, Range(">= 1")] = 100  # Stage I: also stopped after this many updates without the loss falling 1% (ours)
    il_lr: Annotated[float, Range("> 0")] = 1e-3  # Stage I Adam learning rate (paper)
    il_entropy: Annotated[float, Range(">= 0")] = 1e-3  # Stage I entropy bonus (paper)
    lr: Annotated[float, Range(">= 0", "0: Stages II and III never update the network")] = 1e-4  # Stages II and III Adam learning rate, decayed linearly to 0 over each stage (paper; 0: never updated)
    epsilon: Annotated[float, Range("in [0, 1]")] = 0.2  # Stages II and III epsilon-greedy exploration of SEL and PLC, decayed linearly to 0 (paper)
    entropy: Annotated[float, Range(">= 0")] = 0.0  # Stages II and III entropy bonus (paper)
    batch: Annotated[int, Range(">= 1")] = 1  # episodes per REINFORCE update (paper: an update per episode)
    sim_share: Annotated[float, Range("in [0, 1]")] = 1 / 3  # search mode: Stage II's share of the RL episodes, Stage III the rest (paper: 2,000 : 4,000)
    explore: Literal["best", "policy"] = "best"  # search mode, Stages II and III: best (ours: episodes follow the best placement so far, each node leaving its device with probability moves / nodes, PLC sampling the new one) or policy (every choice sampled, as in policy training)
    moves: Annotated[float, Range("> 0")] = 4.0  # explore="best": expected device changes per episode at each stage's start, decayed linearly to 1 (ours)
    grad_clip: Annotated[float, Range(">= 0")] = 1.0  # max gradient norm (ours)
    policy: Any = None  # a trained policy (its state dict) to place with (None: search mode)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: Stage III REINFORCE updates on this graph before the greedy placement
    progress: Any = None  # called with one dict per update (None: nothing)
    log_every: Annotated[int, Range(">= 1")] = 10  # a progress record every this many updates

    @classmethod
    def method_name(cls):
        return "doppler"


# ---------------------------------------------------------------------- the graph a policy reads
class Ctx:
    """One problem as DOPPLER places it: nodes (ops, or Merge-and-Colocate groups beyond
    ``cfg.nodes``), candidate devices, costs, links and the static node features."""

    def __init__(self, problem, cfg: DopplerConfig, episodes: int | None = None):
        """``episodes``: about how many the run will roll out here (None: many), which picks the
        compiled rollout or its plain-Python twin (:func:`placer.methods.learned.doppler_rollout.pick`)."""
        from placer.grouping import colocation_units, group_problem, merge_and_colocate
        from placer.methods.devices import group_allowed
        from placer.nn.encoder import candidate_devices

        self.problem = problem
        if problem.n_ops > cfg.nodes:
            self.grouped = group_problem(problem, merge_and_colocate(problem, n_groups=cfg.nodes))
            P = self.grouped.problem
        else:
            self.grouped, P = None, problem
        self.P, g = P, P.graph
        units = (self.grouped.grouping.units(problem.graph) if self.grouped is not None
                 else colocation_units(problem)).op_group  # what lands on one device
        self.devices = candidate_devices(problem, cfg.devices, units)
        self.N, self.A = g.n_ops, len(self.devices)
        self.cost = np.asarray(P.compute_us[:, self.devices], dtype=np.float64)  # inf: cannot run
        self.ok = group_allowed(P)[:, self.devices]  # a node's colocation group can run there too
        bad = np.flatnonzero(~self.ok.any(axis=1))
        if len(bad):
            raise InputError("doppler", f"node '{g.op_names[bad[0]]}'", "can run on no candidate device",
                             "allow every device (devices=all)")
        self.coloc = np.asarray(g.colocation, dtype=np.int64)
        self.src, self.dst, self.bytes = g.edge_src, g.edge_dst, g.edge_bytes
        self.succ_ptr, self.succ_idx, self.succ_edge = g.succ_ptr, g.succ_idx, g.succ_edge
        self.pred_ptr, self.pred_idx, self.pred_edge = g.pred_ptr, g.pred_idx, g.pred_edge
        dv = self.devices
        self.lat = np.asarray(P.latency_us, dtype=np.float64)[np.ix_(dv, dv)]
        self.inv_bw = 1.0 / np.asarray(P.bandwidth_bytes_per_us, dtype=np.float64)[np.ix_(dv, dv)]
        np.fill_diagonal(self.lat, 0.0)
        np.fill_diagonal(self.inv_bw, 0.0)
        self.x, self.blevel, self.cp = static_features(self)
        self.in_bytes = np.bincount(self.dst, weights=self.bytes, minlength=self.N)
        # the rollout kernel's arrays
        self.n_pred = np.diff(self.pred_ptr).astype(np.int64)
        self.succ_ptr, self.succ_idx = (np.ascontiguousarray(a, dtype=np.int64) for a in (self.succ_ptr, self.succ_idx))
        self.succ_bytes = np.asarray(self.bytes, dtype=np.float64)[self.succ_edge]
        self.lsum = self.x[:, 3].astype(np.float64)
        self.none, self.no_rng = np.zeros(0, dtype=np.int64), np.random.default_rng(0)
        self.work = float(np.where(self.ok, self.cost, 0).sum() / max(self.ok.sum(), 1) * self.N)
        for name, dtype in KERNEL_ARRAYS.items():  # one layout and dtype each: one compiled signature for every graph
            setattr(self, name, np.require(getattr(self, name), dtype, ("C", "W")))
        self.rollout = rollout if episodes is None else pick(self.N * (episodes + 1), cfg.hidden)

    def expand(self, node_placement: np.ndarray) -> np.ndarray:
        """Action per node -> device per op of the problem."""
        p = self.devices[np.asarray(node_placement, dtype=np.int64)]
        return self.grouped.grouping.expand(p) if self.grouped is not None else p


def static_features(c: Ctx) -> tuple[np.ndarray, np.ndarray, float]:
    """(N, N_STATIC) features, the bottom levels and the critical path (mean costs; section 4.1)."""
    N = c.N
    mean = np.where(c.ok, c.cost, 0).sum(axis=1) / c.ok.sum(axis=1)
    A = c.A
    pairs = ~np.eye(A, dtype=bool)
    lat = c.lat[pairs].mean() if A > 1 else 0.0
    ib = c.inv_bw[pairs].mean() if A > 1 else 0.0
    comm = lat + c.bytes * ib if len(c.bytes) else np.zeros(0)
    top, bot = np.zeros(N), mean.copy()
    for i in range(N):  # ops are in a topological order
        a, b = c.pred_ptr[i], c.pred_ptr[i + 1]
        if b > a:
            p = c.pred_idx[a:b]
            top[i] = np.max(top[p] + mean[p] + comm[c.pred_edge[a:b]])
    for i in range(N - 1, -1, -1):
        a, b = c.succ_ptr[i], c.succ_ptr[i + 1]
        if b > a:
            s = c.succ_idx[a:b]
            bot[i] = mean[i] + np.max(bot[s] + comm[c.succ_edge[a:b]])
    cp = max(float((top + bot).max()), 1e-9)
    out = c.P.graph.output_bytes
    indeg, outdeg = np.diff(c.pred_ptr), np.diff(c.succ_ptr)
    out_comm = np.zeros(N)
    if len(comm):
        np.maximum.at(out_comm, c.src, comm)

    def rel(v):
        return np.log1p(v / max(float(np.mean(v)), 1e-12))

    x = np.stack([rel(mean), top / cp, bot / cp, (top + bot) / cp, rel(out), np.log1p(indeg), np.log1p(outdeg),
                  np.log1p(out_comm / np.maximum(mean, 1e-9)) / 5.0, np.arange(N) / max(N - 1, 1),
                  (indeg == 0).astype(float), (outdeg == 0).astype(float)], axis=1)
    assert x.shape[1] == N_STATIC
    return x.astype(np.float32), bot, cp


# ---------------------------------------------------------------------- the networks (section 4.1)
def make_net(cfg: DopplerConfig):
    """DOPPLER's networks (:class:`placer.nn.doppler.DopplerNet`) of ``cfg``'s shape."""
    from placer.nn.doppler import DopplerNet

    return DopplerNet(cfg.hidden, cfg.layers, N_STATIC, N_SEL, N_PLC)


def _np_layers(seq) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.ascontiguousarray(m.weight.detach().double().numpy().T), m.bias.detach().double().numpy())
            for m in seq if hasattr(m, "weight")]


# ---------------------------------------------------------------------- one episode (section 3)
@dataclass
class Record:
    """What an episode chose, with the states it chose in (for the loss); step t's schedulable nodes
    are ``cands[cand_ptr[t]:cand_ptr[t + 1]]``. A candidate whose features did not change since the
    previous step shares that step's row (SEL scores each row once)."""

    order: np.ndarray  # (T,) node per step
    cand_ptr: np.ndarray  # (T + 1,) where each step's candidates start in cands
    cands: np.ndarray  # (M,) schedulable nodes, step after step
    cand_row: np.ndarray  # (M,) each candidate's row in row_node / row_x
    row_node: np.ndarray  # (U,) the node of each distinct (node, SEL features) row
    row_x: np.ndarray  # (U, N_SEL) SEL's dynamic features of each row
    sel_k: np.ndarray  # (T,) position of the chosen node among its step's candidates
    plc_x: np.ndarray  # (T, A, N_PLC) PLC's per-device features
    plc_ok: np.ndarray  # (T, A) feasible devices per step
    act: np.ndarray  # (T,) device per step
    logp: np.ndarray  # (T,) log pi_SEL + log pi_PLC of each step's choices, as the rollout scored them
    placement: np.ndarray  # (N,) action per node
    replay: Any = None  # the record as tensors for log_probs (built once)

    def step_cands(self) -> list[np.ndarray]:
        return np.split(self.cands, self.cand_ptr[1:-1])

    @property
    def sel_x(self) -> np.ndarray:  # (M, N_SEL) each candidate's SEL features
        return self.row_x[self.cand_row]




def episode(c: Ctx, h: np.ndarray, net, rng=None, eps: float = 0.0, forced=None, anchor=None, dev: float = 0.0) -> Record:
    """Place every node: SEL picks among the schedulable nodes, PLC the device. ``forced``: (order,
    devices) to replay (Stage I); ``anchor``: (order, devices) to follow, each node leaving its
    device with probability ``dev`` for one PLC samples (epsilon-greedy) among the others; else
    greedy (``rng`` None) or sampled with epsilon-greedy. The steps run in :func:`rollout` (or its
    plain-Python twin, ``c.rollout``) on the embedding ``h`` and the heads' weights."""
    (S1, s1), (S2, s2), (S3, s3) = _np_layers(net.sel)
    (P1, p1), (P2, p2), (P3, p3) = _np_layers(net.plc)
    mode = FORCED if forced is not None else ANCHOR if anchor is not None else GREEDY if rng is None else SAMPLE
    fixed = forced if forced is not None else anchor
    f_order, f_act = (np.require(f, np.int64, ("C", "W")) for f in fixed) if fixed is not None else (c.none, c.none)
    out = c.rollout(c.cost, c.ok, c.coloc, c.n_pred, c.succ_ptr, c.succ_idx, c.succ_bytes, c.lat, c.inv_bw,
                   c.blevel, c.lsum, c.in_bytes, c.cp, c.work, np.ascontiguousarray(h, dtype=np.float64),
                   S1, s1, S2, s2, S3[:, 0], s3[0], P1, p1, P2, p2, P3[:, 0], p3[0],
                   mode, rng if rng is not None else c.no_rng, eps, f_order, f_act, float(dev))
    return Record(*out)


# ---------------------------------------------------------------------- log-probabilities (the loss)
def _replay(rec: Record, A: int) -> dict:
    """The record as tensors, padded per step (built once per record)."""
    import torch

    if rec.replay is None:
        T, n = len(rec.order), np.diff(rec.cand_ptr)
        step = np.repeat(np.arange(T), n)
        rec.replay = {"node": torch.as_tensor(rec.row_node), "row": torch.as_tensor(rec.cand_row),
                      "step": torch.as_tensor(step), "pos": torch.as_tensor(np.arange(len(rec.cands)) - rec.cand_ptr[step]),
                      "width": int(n.max()), "pad": None, "x": torch.as_tensor(rec.row_x, dtype=torch.float32),
                      "k": torch.as_tensor(rec.sel_k)[:, None], "order": torch.as_tensor(rec.order),
                      "act": torch.as_tensor(rec.act)[:, None],
                      "dev": torch.arange(A)[None, :],
                      "px": torch.as_tensor(rec.plc_x, dtype=torch.float32), "ok": torch.as_tensor(rec.plc_ok)}
        r = rec.replay
        r["pad"] = torch.ones(T, r["width"], dtype=torch.bool).index_put_((r["step"], r["pos"]), torch.tensor(False))
        onehot = np.eye(A, dtype=np.int64)[rec.act]
        before = np.cumsum(onehot, axis=0) - onehot  # (T, A) nodes placed on each device before each step
        r["before"], r["rank"], r["L"] = torch.as_tensor(before), torch.as_tensor(before[np.arange(T), rec.act] + 1), int(
            before[-1].max() + 1)
        r["cnt"] = torch.as_tensor(np.maximum(before, 1).astype(np.float32))[:, :, None]
    return rec.replay


def log_probs(net, c: Ctx, tensors, rec: Record, stats: bool = True, plc_only: bool = False):
    """(log pi_SEL + log pi_PLC per step (T,) (log pi_PLC alone when ``plc_only``), mean entropy
    of both per step, accuracy of the greedy choices against the record; the last three None unless ``stats``), from one embedding
    pass and both heads batched over the whole episode: SEL over the record's distinct rows, then
    every step's candidates padded to the widest step; PLC over every step's devices; the heads'
    first layers split into the per-node part and the rest, as in :func:`episode`."""
    import torch
    import torch.nn.functional as F

    r = _replay(rec, c.A)
    h = net.embed(*tensors)
    H, T = h.shape[1], len(rec.order)
    W, P = net.sel[0].weight, net.plc[0].weight
    pre = F.linear(h, W[:, :H], net.sel[0].bias)[r["node"]] + F.linear(r["x"], W[:, H:])  # each distinct row once
    s = h.new_full((T, r["width"]), -torch.inf).index_put((r["step"], r["pos"]), net.sel[1:](pre)[:, 0][r["row"]])
    ls = torch.log_softmax(s, dim=1)
    hv = h[r["order"]]
    # each device's embedding term before each step: its nodes' terms summed in step order, then averaged
    dev = h.new_zeros(c.A, r["L"] + 1, H).index_put((r["act"][:, 0], r["rank"]), F.linear(hv, P[:, H:2 * H]))
    g = torch.cumsum(dev, dim=1)[r["dev"], r["before"]] / r["cnt"]  # (T, A, H)
    pre = F.linear(hv, P[:, :H], net.plc[0].bias)[:, None, :] + g + F.linear(r["px"], P[:, 2 * H:])
    z = net.plc[1:](pre)[..., 0].masked_fill(~r["ok"], -1e9)
    lz = torch.log_softmax(z, dim=1)
    lp = lz.gather(1, r["act"])[:, 0] if plc_only else ls.gather(1, r["k"])[:, 0] + lz.gather(1, r["act"])[:, 0]
    if not stats:
        return lp, None, None, None
    ent = -(ls.exp() * ls.masked_fill(r["pad"], 0.0)).sum(dim=1) - (lz.exp() * lz).sum(dim=1)
    sel_acc = (s.amax(dim=1) <= s.gather(1, r["k"])[:, 0]).float().mean()
    plc_acc = (z.argmax(dim=1) == r["act"][:, 0]).float().mean()
    return lp, ent.mean(), float(sel_acc), float(plc_acc)


def tensors_of(c: Ctx):
    """The embedding's inputs: static features, edges, in- and out-degrees (at least 1)."""
    import torch

    deg = (np.maximum(np.bincount(i, minlength=c.N), 1).astype(np.float32)[:, None] for i in (c.dst, c.src))
    return (torch.as_tensor(c.x), torch.as_tensor(np.array(c.src, dtype=np.int64)),
            torch.as_tensor(np.array(c.dst, dtype=np.int64)), *(torch.as_tensor(d) for d in deg))


def embed_np(net, c: Ctx, tensors) -> np.ndarray:
    import torch

    with torch.inference_mode():
        return net.embed(*tensors).double().numpy()


# ---------------------------------------------------------------------- Stage I: imitation (section 4.2)
def teacher_record(c: Ctx, net, cfg: DopplerConfig, sim_params=None) -> Record:
    """The critical-path teacher's trajectory on the nodes, replayed through the MDP."""
    from placer.methods.list_scheduling.schedulers import etf_schedule, heft_schedule

    schedule = heft_schedule if cfg.teacher == "heft" else etf_schedule
    s = schedule(c.P, sim_params, [int(d) for d in c.devices], "conservative", comm="sim")
    pos = np.full(c.P.n_devices, -1, dtype=np.int64)
    pos[c.devices] = np.arange(c.A)
    return episode(c, embed_np(net, c, tensors_of(c)), net, forced=(s.order, pos[s.placement]))


def imitate(net, ctxs: list[Ctx], records: list[Record], cfg: DopplerConfig, report=None,
            budget: int | None = None, stop=None) -> dict:
    """Stage I: cross-entropy of SEL's and PLC's choices on the teachers' trajectories, until both
    pick every teacher action greedily, or ``il_steps`` updates, or ``budget`` updates (the run's
    placements per graph: an update, one scoring pass over each teacher's trajectory and a backward
    pass, costs about what a REINFORCE episode does, so Stage I costs at most what the budget's
    episodes do), or once ``stop()`` is true (a time limit). ``report`` (None: nothing) gets a
    record every ``cfg.log_every`` updates (:meth:`placer.methods.learned.driver.Training.report`)."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=cfg.il_lr, fused=True)
    tens = [tensors_of(c) for c in ctxs]
    info = {"il_steps": 0, "sel_acc": 0.0, "plc_acc": 0.0, "il_loss": None}
    best = (np.inf, 0)
    for step in range(min(cfg.il_steps, cfg.il_steps if budget is None else budget)):
        if stop is not None and stop():
            break
        loss, accs = 0.0, []
        for c, t, r in zip(ctxs, tens, records):
            lp, ent, sa, pa = log_probs(net, c, t, r)
            loss = loss - lp.mean() - cfg.il_entropy * ent
            accs.append((sa, pa))
        info.update(il_steps=step, sel_acc=min(a for a, _ in accs), plc_acc=min(b for _, b in accs),
                    il_loss=float(loss.detach()) / len(ctxs))
        info.setdefault("il_loss_first", info["il_loss"])
        if info["il_loss"] < 0.99 * best[0]:
            best = (info["il_loss"], step)
        if (info["sel_acc"] >= 1.0 and info["plc_acc"] >= 1.0) or step - best[1] >= cfg.il_patience:
            break
        gradient_step(opt, net.parameters(), loss, cfg.grad_clip)
        info["il_steps"] = step + 1
        if report is not None and step % cfg.log_every == 0:
            report({"stage": 1, "step": step, "loss": info["il_loss"], "sel_acc": info["sel_acc"],
                    "plc_acc": info["plc_acc"]})
    return info


# ---------------------------------------------------------------------- Stages II and III: REINFORCE (4.3, 4.4)
def reinforce(net, run: Training, ctxs: list[Ctx], episodes: int, cfg: DopplerConfig, rng, stage: int,
              baselines: list[RunningMean], scales: list, anchors: list | None = None) -> int:
    """REINFORCE for ``episodes`` episodes per graph of ``run`` (``ctxs`` their views; each update
    takes ``cfg.batch`` of each in turn, while its budget lasts), reward -makespan /
    scale, baseline the mean reward of the earlier episodes (per graph ``baselines``, the estimator
    :func:`placer.rl.estimator.doppler`), epsilon and the learning rate decayed
    linearly to 0 over the stage. ``anchors`` (search mode, ``explore="best"``): per graph [Record,
    objective] of the best episode so far; each episode follows it, every node leaving its device
    with probability moves / nodes (``cfg.moves`` decayed linearly to 1 over the stage) for one PLC
    samples among the others, the update's log-probabilities are PLC's at the nodes that left (the
    choices the policy made), and a better episode becomes the anchor. Stops early when an
    Evaluator's budget (placements or time) is spent. Returns updates."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, fused=True)
    est = estimator.doppler()
    tens, evs = [tensors_of(c) for c in ctxs], run.evs
    updates = -(-episodes // cfg.batch) if episodes > 0 else 0
    done = 0
    for u in range(updates):
        frac = u / max(updates, 1)
        for gr in opt.param_groups:
            gr["lr"] = cfg.lr * (1.0 - frac)
        eps = cfg.epsilon * (1.0 - frac)
        loss, ran = 0.0, False
        for gi, (c, t, ev) in enumerate(zip(ctxs, tens, evs)):
            room = ev.remaining()
            B = min(cfg.batch, episodes - u * cfg.batch, room if room is not None else cfg.batch)
            if B <= 0 or ev.out_of_budget():
                continue
            h = embed_np(net, c, t)
            a = anchors[gi] if anchors is not None else None
            if a is not None:
                dev = min(1.0, (cfg.moves + (1.0 - cfg.moves) * frac) / c.N)
                recs = [episode(c, h, net, rng, eps, anchor=(a[0].order, a[0].placement), dev=dev) for _ in range(B)]
                moved = [r.act != a[0].placement[r.order] for r in recs]  # the steps PLC chose
            else:
                recs = [episode(c, h, net, rng, eps) for _ in range(B)]
            obj = ev.evaluate_batch(np.stack([c.expand(r.placement) for r in recs])).objective_us
            for i, (r, y) in enumerate(zip(recs, obj)):
                reward = -float(y) / max(scales[gi], 1e-9)
                b = baselines[gi].value(reward)
                if a is None or moved[i].any():
                    lp, ent, _, _ = log_probs(net, c, t, r, stats=cfg.entropy > 0, plc_only=a is not None)
                    if a is not None:
                        lp = lp[torch.as_tensor(moved[i])]
                    loss = est.loss(lp, est.advantages(reward, b), ent, cfg.entropy, batch=B, into=loss)
                baselines[gi].add(reward)
            if a is not None:
                k = int(np.argmin(obj))
                if obj[k] < a[1]:
                    a[0], a[1] = recs[k], float(obj[k])
            ran = True
        if not ran:
            break
        if isinstance(loss, torch.Tensor):
            gradient_step(opt, net.parameters(), loss, cfg.grad_clip)
        done += 1
        if done % cfg.log_every == 0:
            run.report({"stage": stage, "update": done, "epsilon": eps, "best_us": min(e.best_objective_us for e in evs)})
    return done


# ---------------------------------------------------------------------- policy states
def policy_state(net, cfg: DopplerConfig) -> dict:
    return {"format": FORMAT, "method_config": cfg.to_dict(),
            "model": {k: v.detach().clone() for k, v in net.state_dict().items()}}


def check_policy(state, cfg: DopplerConfig | None = None) -> dict:
    """``state`` when it is a DOPPLER policy state (whose network fits ``cfg``); InputError otherwise."""
    fix = "give a policy that `doppler` trained"
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InputError("doppler policy", "state", "is not a doppler checkpoint", fix)
    if not isinstance(state.get("method_config"), dict) or not isinstance(state.get("model"), dict):
        raise InputError("doppler policy", "'method_config' or 'model'", "is missing or of the wrong type "
                         "(a damaged or foreign checkpoint)", fix)
    if cfg is not None:
        for f in ARCH_FIELDS:
            if state["method_config"].get(f) != getattr(cfg, f):
                raise InputError("doppler policy", "network shape", f"was trained with {f}="
                                 f"{state['method_config'].get(f)!r}, not {getattr(cfg, f)!r}",
                                 f"set {f}={state['method_config'].get(f)!r}")
    return state


def _load(net, state: dict) -> None:
    try:
        net.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise InputError("doppler policy", "weights", f"do not fit the network ({str(e)[:80]})",
                         "give a policy that `doppler` trained") from None


# ---------------------------------------------------------------------- the method
class DopplerMethod(StatePolicyMethod):
    """DOPPLER's side of :class:`placer.methods.learned.LearnedMethod`; its policy is its state dict."""

    name = "doppler"

    def check(self, state: dict) -> dict:
        return check_policy(state)

    def network(self, state: dict) -> dict:
        """The state dict of the network the policy's stored ``hidden`` and ``layers`` describe."""
        try:
            cfg = DopplerConfig(**{f: state["method_config"].get(f) for f in ARCH_FIELDS})
        except InputError as e:
            raise InputError("doppler policy", f"stored {e.item}", e.problem, "give a policy that `doppler` trained") from None
        return make_net(cfg).state_dict()

    def search(self, problem, seed: int, ev: Evaluator, cfg: DopplerConfig, *, policy: dict | None = None,
               progress: Progress | None = None):
        import torch

        run = Training.one(self.name, problem, ev, progress)
        with one_thread():
            torch.manual_seed(seed)
            rng = np.random.default_rng(seed)
            limit = ev.limit if ev.limit is not None else cfg.placements
            c = Ctx(problem, cfg, cfg.finetune * cfg.batch + 1 if policy is not None else limit)
            net = make_net(cfg)
            notes = [f"{c.N} nodes ({problem.n_ops} ops), {c.A} candidate devices"]
            if policy is not None:  # zero-shot, or Stage III fine-tuning, then greedy
                _load(net, check_policy(policy, cfg))
                if cfg.finetune > 0:  # no teacher: rewards in critical paths, the baseline opened by the first
                    n = reinforce(net, run, [c], cfg.finetune * cfg.batch, cfg, rng, 3, [RunningMean()], [c.cp])
                    notes.append(f"Stage III: {n} REINFORCE updates on this graph")
                if not ev.out_of_budget():
                    ev.evaluate(c.expand(episode(c, embed_np(net, c, tensors_of(c)), net).placement))
                    notes.append("placed with the greedy policies")
            else:
                teacher = teacher_record(c, net, cfg, ev.sim_params)
                scale = float(ev.evaluate(c.expand(teacher.placement)))
                starts = [[teacher, scale]]  # the placements Stages II and III may start from
                one = single_device_start(problem, ev)  # never slower than the best single device
                if one is not None:
                    notes.append(f"the best single device: {one / 1e3:,.1f} ms")
                    d = np.flatnonzero(c.devices == int(ev.best[0])) if one <= scale else []
                    if len(d):  # as a record: the teacher's order, every node on that device
                        starts.append([episode(c, embed_np(net, c, tensors_of(c)), net,
                                               forced=(teacher.order, np.full(c.N, int(d[0])))), one])
                info = imitate(net, [c], [teacher], cfg, run.report, budget=limit, stop=ev.out_of_budget)
                notes.append(f"Stage I: teacher {cfg.teacher} {scale / 1e3:,.1f} ms, {info['il_steps']} imitation "
                             f"updates (SEL accuracy {info['sel_acc']:.2f}, PLC {info['plc_acc']:.2f})")
                if not ev.out_of_budget():
                    greedy = episode(c, embed_np(net, c, tensors_of(c)), net)
                    starts.append([greedy, float(ev.evaluate(c.expand(greedy.placement)))])
                _fallback(problem, ev, notes)
                room = ev.remaining() or 0
                base = [RunningMean(-1.0, 1)]  # the teacher's reward opens the baseline
                anchor = [min(starts, key=lambda a: a[1])] if cfg.explore == "best" else None
                two = round(room * cfg.sim_share)
                n2 = reinforce(net, run, [c], two, cfg, rng, 2, base, [scale], anchor)
                n3 = reinforce(net, run, [c], ev.remaining() or 0, cfg, rng, 3, base, [scale], anchor)
                notes.append(f"Stages II/III: {n2} + {n3} REINFORCE updates of {cfg.batch} episodes" +
                             (f" around the best placement so far ({anchor[0][1] / 1e3:,.1f} ms at the end)"
                              if anchor else ""))
        return ev.result("doppler", notes=notes), policy_state(net, cfg)

    def train(self, problems: list, cfg: DopplerConfig, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> dict:
        """Policy mode: Stage I on every graph's teacher at once, then Stage II round-robin over the
        graphs; ``placements`` in all, shared equally (None: ``cfg.placements`` per graph)."""
        import torch

        each = share(cfg.placements, placements, len(problems))
        with one_thread():
            torch.manual_seed(seed)
            rng = np.random.default_rng(seed)
            ctxs = [Ctx(P, cfg, each) for P in problems]
            net = make_net(cfg)
            run = Training.of(self.name, problems, each, sim_params, progress)
            records = [teacher_record(c, net, cfg, sim_params) for c in ctxs]
            scales = [float(e.evaluate(c.expand(r.placement))) for c, e, r in zip(ctxs, run.evs, records)]
            imitate(net, ctxs, records, cfg, run.report, budget=each)
            reinforce(net, run, ctxs, max(e.remaining() or 0 for e in run.evs), cfg, rng, 2,
                      [RunningMean(-1.0, 1) for _ in ctxs], scales)
        return policy_state(net, cfg)


def _fallback(problem, ev: Evaluator, notes: list) -> None:
    from placer.methods.memory_fallback import fit_in_memory

    note = fit_in_memory(problem, ev)
    if note:
        notes.append(note)


def torch_geometric_available() -> str | None:
    return needs(("torch", "torch_geometric"), "the 'torch' extra and torch_geometric")


DOPPLER_METHOD = register_learned(DopplerMethod())  # train / place / fine-tune (placer.methods.learned.protocol)


# version 2: Stage I at most the budget's placements in updates; 3: the best single device simulated first,
# Stages II/III explore around the best placement so far (issue 66)
@register("doppler", "DOPPLER: dual policy (SEL picks the node, PLC its device), imitation of a critical-path "
          "scheduler then REINFORCE", "learned", DopplerConfig, paper="Yao et al., ICLR 2026",
          available=torch_geometric_available, version=3)
def doppler(problem, seed: int, ev: Evaluator, cfg: DopplerConfig):
    return DOPPLER_METHOD.run(problem, seed, ev, cfg)

