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
  along and against the edges as gather / scatter (``torch_geometric.utils.scatter``). SEL scores a
  schedulable node from its embedding and its dynamic features (earliest start and finish over the
  devices given the partial assignment, its levels); PLC scores each device from the node's
  embedding, the device's own embedding (the mean embedding of the nodes assigned to it so far) and
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
placement and the greedy placement after Stage I count one each, every episode one); the best
placement evaluated is returned. Graphs with more ops than ``nodes`` are placed as that many
Merge-and-Colocate groups (Placeto A.6, :mod:`placer.grouping`), so 20k-op graphs run; each episode
embeds once and does O(devices x candidates) numpy work per step. ``DOPPLER_METHOD`` offers train
(several graphs: policy mode) / place / fine-tune (:mod:`placer.methods.learned`). What the paper
specifies and what we chose, and measurements: docs/methods/doppler.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.learned import register_learned
from placer.methods.learned_support import (
    PolicyFields,
    Progress,
    StatePolicyMethod,
    needs,
)
from placer.nn.threads import one_thread

FORMAT = "placer-doppler-1"
ARCH_FIELDS = ("hidden", "layers")  # the config fields that fix the network's shape
N_STATIC, N_SEL, N_PLC = 11, 4, 7  # static node features, SEL's dynamic features, PLC's per-device features


@dataclass(frozen=True)
class DopplerConfig(PolicyFields, MethodConfig):
    """DOPPLER's hyperparameters: the paper's where its configs give them, ours marked."""

    placements: int = 2_000  # default budget in placements (ours; the paper runs 2,000 simulated + 4,000 real episodes)
    nodes: int = 1_024  # most nodes placed: more ops are merged into this many groups (Placeto A.6; ours)
    devices: str = "auto"  # candidate devices: gpus, all, or auto (gpus when every node can run on one)
    hidden: int = 64  # node embedding width (ours: the paper's text we read gives none)
    layers: int = 3  # message-passing rounds, each along and against the edges (ours)
    teacher: str = "heft"  # Stage I teacher: heft (critical-path order, earliest finish) or m-etf (ours: the project's schedulers)
    il_steps: int = 2_000  # Stage I: most imitation updates, stopped once both policies pick every teacher action (paper: 2,000 episodes)
    il_patience: int = 100  # Stage I: also stopped after this many updates without the loss falling 1% (ours)
    il_lr: float = 1e-3  # Stage I Adam learning rate (paper)
    il_entropy: float = 1e-3  # Stage I entropy bonus (paper)
    lr: float = 1e-4  # Stages II and III Adam learning rate, decayed linearly to 0 over each stage (paper)
    epsilon: float = 0.2  # Stages II and III epsilon-greedy exploration of SEL and PLC, decayed linearly to 0 (paper)
    entropy: float = 0.0  # Stages II and III entropy bonus (paper)
    batch: int = 1  # episodes per REINFORCE update (paper: an update per episode)
    sim_share: float = 1 / 3  # search mode: Stage II's share of the RL episodes, Stage III the rest (paper: 2,000 : 4,000)
    grad_clip: float = 1.0  # max gradient norm (ours)
    policy: Any = None  # a trained policy (its state dict) to place with (None: search mode)
    finetune: int = 0  # with a policy: Stage III REINFORCE updates on this graph before the greedy placement
    progress: Any = None  # called with one dict per update (None: nothing)
    log_every: int = 10  # a progress record every this many updates

    @classmethod
    def method_name(cls):
        return "doppler"

    def checks(self):
        return [(self.placements >= 1, "placements", ">= 1"), (self.nodes >= 2, "nodes", ">= 2"),
                (self.devices in ("auto", "gpus", "all"), "devices", "auto, gpus or all"),
                (self.hidden >= 1, "hidden", ">= 1"), (self.layers >= 0, "layers", ">= 0"),
                (self.teacher in ("heft", "m-etf"), "teacher", "heft or m-etf"),
                (self.il_steps >= 0, "il_steps", ">= 0"), (self.il_patience >= 1, "il_patience", ">= 1"), (self.il_lr > 0, "il_lr", "> 0"),
                (self.il_entropy >= 0, "il_entropy", ">= 0"), (self.lr > 0, "lr", "> 0"),
                (0 <= self.epsilon <= 1, "epsilon", "in [0, 1]"), (self.entropy >= 0, "entropy", ">= 0"),
                (self.batch >= 1, "batch", ">= 1"), (0 <= self.sim_share <= 1, "sim_share", "in [0, 1]"),
                (self.grad_clip >= 0, "grad_clip", ">= 0"), (self.finetune >= 0, "finetune", ">= 0"),
                (self.log_every >= 1, "log_every", ">= 1")]


# ---------------------------------------------------------------------- the graph a policy reads
class Ctx:
    """One problem as DOPPLER places it: nodes (ops, or Merge-and-Colocate groups beyond
    ``cfg.nodes``), candidate devices, costs, links and the static node features."""

    def __init__(self, problem, cfg: DopplerConfig):
        from placer.grouping import group_problem, merge_and_colocate
        from placer.nn.encoder import candidate_devices

        self.problem = problem
        if problem.n_ops > cfg.nodes:
            self.grouped = group_problem(problem, merge_and_colocate(problem, n_groups=cfg.nodes))
            P = self.grouped.problem
        else:
            self.grouped, P = None, problem
        self.P, g = P, P.graph
        self.devices = candidate_devices(problem, cfg.devices)
        self.N, self.A = g.n_ops, len(self.devices)
        self.cost = np.asarray(P.compute_us[:, self.devices], dtype=np.float64)  # inf: cannot run
        self.ok = np.isfinite(self.cost)
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
        self.work = float(np.where(self.ok, self.cost, 0).sum() / max(self.ok.sum(), 1) * self.N)

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
    import torch
    from torch import nn
    from torch_geometric.utils import scatter

    def mlp(i, h):
        return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))

    class DopplerNet(nn.Module):
        """Message passing along and against the edges (gather at the source, scatter-mean at the
        target), then SEL's and PLC's scoring heads."""

        def __init__(self, H: int, layers: int):
            super().__init__()
            self.inp = nn.Linear(N_STATIC, H)
            self.down = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])  # messages to successors
            self.up = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])  # messages to predecessors
            self.self_ = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])
            self.sel = mlp(H + N_SEL, H)
            self.plc = mlp(2 * H + N_PLC, H)

        def embed(self, x, src, dst):
            h = torch.relu(self.inp(x))
            for down, up, me in zip(self.down, self.up, self.self_):
                m_in = scatter(down(h)[src], dst, dim=0, dim_size=h.shape[0], reduce="mean")
                m_out = scatter(up(h)[dst], src, dim=0, dim_size=h.shape[0], reduce="mean")
                h = h + torch.relu(me(h) + m_in + m_out)
            return h

    return DopplerNet(cfg.hidden, cfg.layers)


def _np_layers(seq) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(m.weight.detach().double().numpy().T, m.bias.detach().double().numpy()) for m in seq if hasattr(m, "weight")]


def _np_mlp(layers, first: np.ndarray) -> np.ndarray:
    """The rest of an MLP whose first layer's pre-activation is ``first``."""
    x = np.maximum(first, 0.0)
    for k, (W, b) in enumerate(layers[1:]):
        x = x @ W + b
        if k < len(layers) - 2:
            x = np.maximum(x, 0.0)
    return x[..., 0]


# ---------------------------------------------------------------------- one episode (section 3)
@dataclass
class Record:
    """What an episode chose, with the states it chose in (for the loss)."""

    order: list  # node per step
    cands: list  # schedulable nodes per step
    sel_x: list  # (|cands|, N_SEL) per step
    sel_k: list  # position of the chosen node in cands
    plc_x: list  # (A, N_PLC) per step
    plc_ok: list  # (A,) feasible devices per step
    act: list  # device per step
    placement: np.ndarray = None  # (N,) action per node


def episode(c: Ctx, h: np.ndarray, net, rng=None, eps: float = 0.0, forced=None) -> Record:
    """Place every node: SEL picks among the schedulable nodes, PLC the device. ``forced``: (order,
    devices) to replay (Stage I); else greedy (``rng`` None) or sampled with epsilon-greedy."""
    N, A, cost, ok = c.N, c.A, c.cost, c.ok
    sel_l, plc_l = _np_layers(net.sel), _np_layers(net.plc)
    H = h.shape[1]
    hs = h @ sel_l[0][0][:H] + sel_l[0][1]  # the node's share of SEL's first layer, once per episode
    hp = h @ plc_l[0][0][:H] + plc_l[0][1]
    pd = h @ plc_l[0][0][H:2 * H]  # a node's share of its device's embedding term
    Ws, Wp = sel_l[0][0][H:], plc_l[0][0][2 * H:]
    dev_sum, dev_cnt = np.zeros((A, pd.shape[1])), np.zeros(A)
    avail, load, drt = np.zeros(A), np.zeros(A), np.zeros((N, A))
    on = np.zeros((N, A))  # bytes of a node's inputs already on each device
    missing = np.diff(c.pred_ptr).astype(np.int64)
    ready = sorted(np.flatnonzero(missing == 0).tolist())
    pin: dict[int, int] = {}
    place = np.full(N, -1, dtype=np.int64)
    rec = Record([], [], [], [], [], [], [], None)
    cp, bl = c.cp, c.blevel
    for t in range(N):
        C = np.asarray(ready, dtype=np.int64)
        okC = ok[C].copy()
        for j, v in enumerate(C.tolist()):
            if c.coloc[v] >= 0 and c.coloc[v] in pin:
                okC[j] = False
                okC[j, pin[c.coloc[v]]] = True
        est = np.maximum(avail[None, :], drt[C])
        eft = np.where(okC, est + np.where(okC, cost[C], 0.0), np.inf)
        now = float(np.where(okC, est, np.inf).min())
        sx = np.stack([(np.where(okC, est, np.inf).min(axis=1) - now) / cp, (eft.min(axis=1) - now) / cp,
                       bl[C] / cp, c.x[C, 3]], axis=1)
        if forced is not None:
            k = int(np.flatnonzero(C == forced[0][t])[0])
        else:
            s = _np_mlp(sel_l, hs[C] + sx @ Ws)
            k = _choose(s, np.ones(len(C), bool), rng, eps)
        v = int(C[k])
        okv = okC[k]
        px = np.stack([(avail - now) / cp, (drt[v] - now) / cp, np.where(okv, cost[v], 0.0) / cp,
                       np.where(okv, eft[k] - eft[k][okv].min(), 0.0) / cp, load / max(c.work, 1e-9),
                       on[v] / max(c.in_bytes[v], 1.0), okv.astype(float)], axis=1)
        if forced is not None:
            a = int(forced[1][v])
        else:
            g = dev_sum / np.maximum(dev_cnt, 1.0)[:, None]
            a = _choose(_np_mlp(plc_l, hp[v][None, :] + g + px @ Wp), okv, rng, eps)
        for lst, val in ((rec.order, v), (rec.cands, C), (rec.sel_x, sx), (rec.sel_k, k), (rec.plc_x, px),
                         (rec.plc_ok, okv), (rec.act, a)):
            lst.append(val)
        # the transition: v runs on a after its inputs and the device's earlier nodes
        place[v] = a
        if c.coloc[v] >= 0:
            pin.setdefault(int(c.coloc[v]), a)
        fin = max(avail[a], drt[v, a]) + cost[v, a]
        avail[a] = fin
        load[a] += cost[v, a]
        dev_sum[a] += pd[v]
        dev_cnt[a] += 1
        ready.remove(v)
        for e in range(c.succ_ptr[v], c.succ_ptr[v + 1]):
            s_, b = int(c.succ_idx[e]), float(c.bytes[c.succ_edge[e]])
            arr = fin + c.lat[a] + b * c.inv_bw[a]
            np.maximum(drt[s_], arr, out=drt[s_])
            on[s_, a] += b
            missing[s_] -= 1
            if missing[s_] == 0:
                ready.append(s_)
    rec.placement = place
    return rec


def _choose(scores: np.ndarray, ok: np.ndarray, rng, eps: float) -> int:
    """argmax (rng None), else with probability eps a uniform feasible choice, else a softmax sample."""
    z = np.where(ok, scores, -np.inf)
    if rng is None:
        return int(np.argmax(z))
    idx = np.flatnonzero(ok)
    if eps > 0 and rng.random() < eps:
        return int(idx[rng.integers(len(idx))])
    cum = np.cumsum(np.exp(z - z.max()))
    return int(min(np.searchsorted(cum, rng.random() * cum[-1], side="right"), len(z) - 1))


# ---------------------------------------------------------------------- log-probabilities (the loss)
def log_probs(net, c: Ctx, tensors, rec: Record):
    """(log pi_SEL + log pi_PLC per step (T,), mean entropy of both per step, accuracy of the
    greedy choices against the record), from one embedding pass and batched heads."""
    import torch
    from torch_geometric.utils import scatter, softmax

    x, src, dst = tensors
    h = net.embed(x, src, dst)
    T, A = len(rec.order), c.A
    step = torch.as_tensor(np.repeat(np.arange(T), [len(C) for C in rec.cands]))
    rows = torch.as_tensor(np.concatenate(rec.cands))
    sx = torch.as_tensor(np.concatenate(rec.sel_x), dtype=torch.float32)
    s = net.sel(torch.cat([h[rows], sx], dim=1))[:, 0]
    p = softmax(s, step, num_nodes=T)
    lp_all = torch.log(p.clamp_min(1e-30))
    first = np.concatenate([[0], np.cumsum([len(C) for C in rec.cands])[:-1]])
    chosen = torch.as_tensor(first + np.asarray(rec.sel_k))
    lp_sel = lp_all[chosen]
    ent_sel = -scatter(p * lp_all, step, dim=0, dim_size=T, reduce="sum")
    sel_acc = (scatter(s, step, dim=0, dim_size=T, reduce="max") <= s[chosen]).float().mean()
    order = torch.as_tensor(np.asarray(rec.order))
    act = torch.as_tensor(np.asarray(rec.act))
    onehot = torch.nn.functional.one_hot(act, A).float()  # (T, A)
    hv = h[order]
    csum = torch.cumsum(onehot[:, :, None] * hv[:, None, :], dim=0)  # devices' embedding sums after each step
    cnt = torch.cumsum(onehot, dim=0)
    g = torch.cat([torch.zeros_like(csum[:1]), csum[:-1]]) / torch.cat([torch.zeros_like(cnt[:1]), cnt[:-1]]
                                                                        ).clamp_min(1.0)[:, :, None]
    px = torch.as_tensor(np.stack(rec.plc_x), dtype=torch.float32)
    ok = torch.as_tensor(np.stack(rec.plc_ok))
    z = net.plc(torch.cat([hv[:, None, :].expand(T, A, hv.shape[1]), g, px], dim=2))[..., 0]
    z = z.masked_fill(~ok, -1e9)
    lz = torch.log_softmax(z, dim=1)
    lp_plc = lz.gather(1, act[:, None])[:, 0]
    ent_plc = -(lz.exp() * lz).sum(dim=1)
    plc_acc = (z.argmax(dim=1) == act).float().mean()
    return lp_sel + lp_plc, (ent_sel + ent_plc).mean(), float(sel_acc), float(plc_acc)


def tensors_of(c: Ctx):
    import torch

    return (torch.as_tensor(c.x), torch.as_tensor(np.array(c.src, dtype=np.int64)),
            torch.as_tensor(np.array(c.dst, dtype=np.int64)))


def embed_np(net, c: Ctx, tensors) -> np.ndarray:
    import torch

    with torch.no_grad():
        return net.embed(*tensors).double().numpy()


# ---------------------------------------------------------------------- Stage I: imitation (section 4.2)
def teacher_record(c: Ctx, net, cfg: DopplerConfig, sim_params=None) -> Record:
    """The critical-path teacher's trajectory on the nodes, replayed through the MDP."""
    from placer.methods.list_scheduling import etf_schedule, heft_schedule

    schedule = heft_schedule if cfg.teacher == "heft" else etf_schedule
    s = schedule(c.P, sim_params, [int(d) for d in c.devices], "conservative", comm="sim")
    pos = np.full(c.P.n_devices, -1, dtype=np.int64)
    pos[c.devices] = np.arange(c.A)
    return episode(c, embed_np(net, c, tensors_of(c)), net, forced=(s.order, pos[s.placement]))


def imitate(net, ctxs: list[Ctx], records: list[Record], cfg: DopplerConfig, progress=None) -> dict:
    """Stage I: cross-entropy of SEL's and PLC's choices on the teachers' trajectories, until both
    pick every teacher action greedily or ``il_steps`` updates."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=cfg.il_lr)
    tens = [tensors_of(c) for c in ctxs]
    info = {"il_steps": 0, "sel_acc": 0.0, "plc_acc": 0.0, "il_loss": None}
    best = (np.inf, 0)
    for step in range(cfg.il_steps):
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
        opt.zero_grad()
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        info["il_steps"] = step + 1
        if progress is not None and step % cfg.log_every == 0:
            progress({"method": "doppler", "stage": 1, "step": step, "loss": info["il_loss"],
                      "sel_acc": info["sel_acc"], "plc_acc": info["plc_acc"]})
    return info


# ---------------------------------------------------------------------- Stages II and III: REINFORCE (4.3, 4.4)
def reinforce(net, ctxs: list[Ctx], evs: list[Evaluator], episodes: int, cfg: DopplerConfig, rng, stage: int,
              baselines: list, scales: list, progress=None) -> int:
    """REINFORCE for ``episodes`` episodes per graph (``cfg.batch`` per update), reward -makespan /
    scale, baseline the mean reward of the earlier episodes, epsilon and the learning rate decayed
    linearly to 0 over the stage. Stops early when an Evaluator's budget is spent. Returns updates."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    tens = [tensors_of(c) for c in ctxs]
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
            if B <= 0:
                continue
            h = embed_np(net, c, t)
            recs = [episode(c, h, net, rng, eps) for _ in range(B)]
            obj = ev.evaluate_batch(np.stack([c.expand(r.placement) for r in recs])).objective_us
            for r, y in zip(recs, obj):
                reward = -float(y) / max(scales[gi], 1e-9)
                b = baselines[gi][0] / baselines[gi][1] if baselines[gi][1] else reward
                lp, ent, _, _ = log_probs(net, c, t, r)
                loss = loss - (reward - b) * lp.sum() / B - cfg.entropy * ent
                baselines[gi][0] += reward
                baselines[gi][1] += 1
            ran = True
        if not ran:
            break
        opt.zero_grad()
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        done += 1
        if progress is not None and done % cfg.log_every == 0:
            progress({"method": "doppler", "stage": stage, "update": done, "epsilon": eps,
                      "best_us": min(e.best_objective_us for e in evs)})
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

    def search(self, problem, seed: int, ev: Evaluator, cfg: DopplerConfig, *, policy: dict | None = None,
               progress: Progress | None = None):
        import torch

        with one_thread():
            torch.manual_seed(seed)
            rng = np.random.default_rng(seed)
            c = Ctx(problem, cfg)
            net = make_net(cfg)
            notes = [f"{c.N} nodes ({problem.n_ops} ops), {c.A} candidate devices"]
            if policy is not None:  # zero-shot, or Stage III fine-tuning, then greedy
                _load(net, check_policy(policy, cfg))
                if cfg.finetune > 0:  # no teacher: rewards in critical paths, the baseline opened by the first
                    n = reinforce(net, [c], [ev], cfg.finetune * cfg.batch, cfg, rng, 3, [[0.0, 0]], [c.cp], progress)
                    notes.append(f"Stage III: {n} REINFORCE updates on this graph")
                if not ev.out_of_budget():
                    ev.evaluate(c.expand(episode(c, embed_np(net, c, tensors_of(c)), net).placement))
                    notes.append("placed with the greedy policies")
            else:
                teacher = teacher_record(c, net, cfg, ev.sim_params)
                scale = float(ev.evaluate(c.expand(teacher.placement)))
                info = imitate(net, [c], [teacher], cfg, progress)
                notes.append(f"Stage I: teacher {cfg.teacher} {scale / 1e3:,.1f} ms, {info['il_steps']} imitation "
                             f"updates (SEL accuracy {info['sel_acc']:.2f}, PLC {info['plc_acc']:.2f})")
                if not ev.out_of_budget():
                    ev.evaluate(c.expand(episode(c, embed_np(net, c, tensors_of(c)), net).placement))
                _fallback(problem, ev, notes)
                room = ev.remaining() or 0
                base = [[-1.0, 1]]  # the teacher's reward opens the baseline
                two = round(room * cfg.sim_share)
                n2 = reinforce(net, [c], [ev], two, cfg, rng, 2, base, [scale], progress)
                n3 = reinforce(net, [c], [ev], ev.remaining() or 0, cfg, rng, 3, base, [scale], progress)
                notes.append(f"Stages II/III: {n2} + {n3} REINFORCE updates of {cfg.batch} episodes")
        return ev.result("doppler", notes=notes), policy_state(net, cfg)

    def train(self, problems: list, cfg: DopplerConfig, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> dict:
        """Policy mode: Stage I on every graph's teacher at once, then Stage II round-robin over the
        graphs; ``placements`` in all, shared equally (None: ``cfg.placements`` per graph)."""
        import torch

        each = cfg.placements if placements is None else max(1, placements // max(1, len(problems)))
        with one_thread():
            torch.manual_seed(seed)
            rng = np.random.default_rng(seed)
            ctxs = [Ctx(P, cfg) for P in problems]
            net = make_net(cfg)
            evs = [Evaluator(P, sim_params, limit=each) for P in problems]
            records = [teacher_record(c, net, cfg, sim_params) for c in ctxs]
            scales = [float(e.evaluate(c.expand(r.placement))) for c, e, r in zip(ctxs, evs, records)]
            imitate(net, ctxs, records, cfg, progress)
            reinforce(net, ctxs, evs, max(e.remaining() or 0 for e in evs), cfg, rng, 2,
                      [[-1.0, 1] for _ in ctxs], scales, progress)
        return policy_state(net, cfg)


def _fallback(problem, ev: Evaluator, notes: list) -> None:
    from placer.methods.memory_fallback import fit_in_memory

    note = fit_in_memory(problem, ev)
    if note:
        notes.append(note)


def torch_geometric_available() -> str | None:
    return needs(("torch", "torch_geometric"), "the 'torch' extra and torch_geometric")


DOPPLER_METHOD = register_learned(DopplerMethod())  # train / place / fine-tune (placer.methods.learned)


@register("doppler", "DOPPLER: dual policy (SEL picks the node, PLC its device), imitation of a critical-path "
          "scheduler then REINFORCE", "learned", DopplerConfig, paper="Yao et al., ICLR 2026",
          available=torch_geometric_available, version=1)
def doppler(problem, seed: int, ev: Evaluator, cfg: DopplerConfig):
    return DOPPLER_METHOD.run(problem, seed, ev, cfg)

