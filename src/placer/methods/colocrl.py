"""ColocRL (Mirhoseini et al., "Device Placement Optimization with Reinforcement Learning", ICML
2017): a sequence-to-sequence policy (:mod:`placer.nn.seq2seq`) reads one embedding per group of
co-located ops and emits one device per group; REINFORCE with a moving-average baseline on the
reward ``-sqrt(step time)``. It is the "RNN-based approach" of Placeto's Table 1 and the policy-gradient
baseline of the Hierarchical Planner and of Post.

What the policy reads (ColocRL section 2, "each operation is embedded from its type, its output
shapes and its adjacency"), per group, in the graph's topological order:

* type: the histogram of the member ops' types (each type hashed into ``n_types`` buckets). A linear
  layer after it is a learned type embedding averaged over the members;
* output sizes: the mean of log(1 + output MiB), the mean of log(1 + consumers) and log(1 + ops);
* adjacency: the group's position in the sequence and the positions of its ``neighbours`` heaviest
  predecessor and successor groups, each as index / length (the paper pads a list of the indices of
  input and output ops; padding here repeats the group's own position).

Groups: ColocRL used hand-made co-location groups ("hundreds of groups", Post section 2; the
Hierarchical Planner's text: ColocRL "is limited to small graphs (with fewer than 1000 nodes)"). Ours
are the project's colocation rules (:func:`placer.grouping.colocate`: parameters with their readers,
optimizer updates with their parameter, the graph's own colocation), merged further by
Merge-and-Colocate (:func:`placer.grouping.merge_and_colocate`) when more than ``max_groups`` are
left (NMT's rules leave about 5,700; Post's section 2 says ColocRL had "hundreds of groups", and a
decoder step per group over 256 groups keeps a policy step near a second on one CPU core). Groups
tied by a colocation id are one decision.

Training (one *policy step*): sample ``samples`` (k) placements in one batched forward pass, simulate
them in one ``Evaluator.evaluate_batch`` call, reward ``R = -sqrt(T)`` with T the simulated step time
in seconds, or ``oom_penalty_s`` for a placement that runs out of memory (ColocRL section 2: a failed
placement is given a large fixed running time), and one Adam step on
``-(1/k) sum_i (R_i - b) log p(d_i)`` (minus an optional entropy bonus), gradient norm clipped;
then ``b <- decay b + (1 - decay) mean_i R_i``.

Paper values we use: Adam with a fixed learning rate, gradient clipping at norm 1.0, logits
``C tanh(u / T)`` with C = 5, T = 10, k = 4 placements per policy step (the Hierarchical Planner,
ICLR 2018 section 3, which states it uses ColocRL's settings); a bidirectional encoder of 512 units
(Placeto appendix A.7, for its RNN-based baseline). The learning rate is 1e-3, not the paper's 0.1:
at 0.1 Adam saturates the tanh-clipped logits within about 5 policy steps and the policy collapses
onto one early placement (measured on Inception-V3 / NMT 2-layer on 2 GPUs, 1000 placements: lr 0.1
stopped at the single-GPU placement after 5 placements on Inception-V3 and at 2109 ms on NMT,
lr 1e-2 at 1085 / 1920 ms, lr 1e-3 at 1073 / 1770 ms, for the Hierarchical Planner; the paper trained
with 4 asynchronous controllers and real measurements). Pass ``lr=0.1`` for the paper's value.
Where we chose: the baseline's decay (0.9), the
OOM penalty (100 s, as Post reads ColocRL), the device embedding and attention sizes, the type
buckets, the neighbour count, ``max_groups`` and placing on the GPUs only (``devices``; ops no GPU
can run go to their fastest device). Placeto tuned an entropy bonus for this baseline; ``entropy``
is off by default (the ColocRL paper has none).

Memory (ours, shared with the Hierarchical Planner, GDP and Mars): when no placement of the first policy
step fits in memory, :func:`placer.methods.memory_fallback.fit_in_memory` evaluates the classical seeds
(relieved by simulation), then the host, inside the budget, so a placement that fits is returned where
one of those fits (placing on the GPUs only, every sample can overflow GPUs too small for the model);
nothing is simulated where a placement of the first step fits.

Modes: search (train on this graph within the budget, return the best placement evaluated); with
``policy=<checkpoint>``, start from trained weights, train ``finetune`` more policy steps, then add
the greedy placement. ``save=<path>`` writes the trainer's state (plain tensors and numbers, read back
with ``torch.load(weights_only=True)``); ``log=<path>`` appends one JSON line per policy step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, MethodConfig, NotApplicable, register
from placer.methods.memory_fallback import fit_in_memory

PAPER = "Mirhoseini et al., Device Placement Optimization with Reinforcement Learning, ICML 2017"
CHECKPOINT_FORMAT = "placer-seq2seq-rl-1"


def torch_available() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"needs the 'torch' extra ({e.name} is not installed): pip install 'placer[torch]'"
    return None


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread (restored afterwards): results then never depend on the thread count."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# ---------------------------------------------------------------------- ops, units, devices
@dataclass(eq=False)
class OpTable:
    """Per-op raw features both methods embed (numpy, float32 where continuous)."""

    type_bucket: np.ndarray  # (n,) int64 in [0, n_types)
    log_out: np.ndarray  # (n,) log(1 + output MiB)
    log_consumers: np.ndarray  # (n,) log(1 + number of consumers)
    n_types: int


def op_table(problem, n_types: int) -> OpTable:
    g = problem.graph
    vocab = {t: zlib.crc32(t.lower().encode()) % n_types for t in set(g.op_types)}
    tb = np.fromiter((vocab[t] for t in g.op_types), dtype=np.int64, count=g.n_ops)
    consumers = np.diff(g.succ_ptr).astype(np.float64)
    return OpTable(tb, np.log1p(g.output_bytes / 2**20).astype(np.float32),
                   np.log1p(consumers).astype(np.float32), n_types)


def candidate_devices(problem, devices: str) -> np.ndarray:
    """The devices the policy chooses between: 'gpus' (the GPUs; every device when there is none)
    or 'all'."""
    if devices == "gpus":
        idx = problem.cluster.gpus() or list(range(problem.n_devices))
    elif devices == "all":
        idx = list(range(problem.n_devices))
    else:
        raise InputError("devices", f"'{devices}'", "is not a device selection", "use 'gpus' or 'all'")
    return np.asarray(idx, dtype=np.int64)


@dataclass(eq=False)
class BaseUnits:
    """The smallest pieces a placement may move: the families of :func:`placer.grouping.colocate`
    (colocation sets, tied groups merged). A unit goes to the device the policy chose for it when
    every member can run there, else to its fallback: its fastest candidate device that all members
    can run on, or, when there is none (e.g. a CPU-only op with ``devices='gpus'``), its fastest
    device. Every expanded placement is valid by construction."""

    problem: object
    cand: np.ndarray  # (A,) candidate device indices
    unit_of: np.ndarray  # (n,) unit of each op, units numbered by first op (topological)
    n_units: int
    feasible: np.ndarray  # (U, A) every member can run on candidate a
    fallback: np.ndarray  # (U,) device index used when the chosen one is not feasible

    def expand(self, unit_actions: np.ndarray) -> np.ndarray:
        """(k, U) candidate indices -> (k, n) op placements (device indices)."""
        a = np.asarray(unit_actions, dtype=np.int64)
        ok = np.take_along_axis(np.broadcast_to(self.feasible, (a.shape[0],) + self.feasible.shape),
                                a[:, :, None], axis=2)[:, :, 0]
        dev = np.where(ok, self.cand[a], self.fallback[None, :])
        return dev[:, self.unit_of]


def families(grouping, graph) -> np.ndarray:
    """(n_ops,) placement unit of each op (:meth:`placer.grouping.Grouping.units`: groups tied by a
    colocation id, and the graph's colocation groups, merged), numbered by first op."""
    return renumber_by_first(grouping.units(graph).op_group)


def renumber_by_first(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.int64)
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inv]


def base_units(problem, devices: str, method: str) -> BaseUnits:
    from placer import grouping

    cand = candidate_devices(problem, devices)
    unit_of = families(grouping.colocate(problem), problem.graph)
    U = int(unit_of.max()) + 1
    runnable = np.isfinite(problem.compute_us)
    ok_all = np.ones((U, problem.n_devices), dtype=bool)
    np.logical_and.at(ok_all, unit_of, runnable)
    if not ok_all.any(axis=1).all():
        u = int(np.flatnonzero(~ok_all.any(axis=1))[0])
        op = problem.graph.op_names[int(np.flatnonzero(unit_of == u)[0])]
        raise NotApplicable(method, f"the colocation rules tie op '{op}' to ops that share no device with it")
    cost = np.zeros((U, problem.n_devices))
    np.add.at(cost, unit_of, np.where(runnable, problem.compute_us, 0.0))
    cost = np.where(ok_all, cost, np.inf)
    feasible = ok_all[:, cand]
    fallback = np.where(feasible.any(axis=1), cand[np.argmin(np.where(feasible, cost[:, cand], np.inf), axis=1)],
                        np.argmin(cost, axis=1))
    return BaseUnits(problem, cand, unit_of, U, feasible, fallback.astype(np.int64))


def decision_mask(units: BaseUnits, unit_label: np.ndarray, L: int) -> np.ndarray:
    """(L, A) devices each decision may choose: those every member unit can run on; when the members
    share none, those some member can run on; when none can (all pinned), every candidate."""
    A = len(units.cand)
    inter = np.ones((L, A), dtype=bool)
    np.logical_and.at(inter, unit_label, units.feasible)
    union = np.zeros((L, A), dtype=bool)
    np.logical_or.at(union, unit_label, units.feasible)
    out = np.where(inter.any(axis=1, keepdims=True), inter, union)
    return np.where(out.any(axis=1, keepdims=True), out, True)


def reward(makespan_us: np.ndarray, oom: np.ndarray, oom_penalty_s: float) -> np.ndarray:
    """R = -sqrt(step time in seconds); an out-of-memory placement counts as ``oom_penalty_s``."""
    t = np.where(np.asarray(oom, dtype=bool), oom_penalty_s, np.asarray(makespan_us, dtype=np.float64) / 1e6)
    return -np.sqrt(np.maximum(t, 0.0))


# ---------------------------------------------------------------------- the REINFORCE trainer
class Seq2SeqRLTrainer:
    """REINFORCE over a policy that samples whole placements; subclasses provide the networks
    (:meth:`modules`) and :meth:`sample`. One :meth:`step` is one policy step."""

    method = "seq2seq-rl"

    def __init__(self, problem, cfg, seed: int = 0):
        import torch

        self.problem, self.cfg, self.seed = problem, cfg, int(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.build()
        self.params = [p for m in self.modules().values() for p in m.parameters()]
        self.opt = torch.optim.Adam(self.params, lr=cfg.lr)
        self.gen = torch.Generator().manual_seed(self.seed)
        self.baseline: float | None = None
        self.steps = 0
        self.placements = 0
        self.best_objective_us = math.inf
        self.best_placement: np.ndarray | None = None
        self.wall_s = 0.0

    # -- to be provided
    def build(self) -> None:
        raise NotImplementedError

    def modules(self) -> dict:
        raise NotImplementedError

    def sample(self, k: int, greedy: bool = False):
        """(placements (k, n) int64, log_prob (k,) tensor, entropy (k,) tensor)."""
        raise NotImplementedError

    # -- one policy step
    def step(self, ev: Evaluator, log_path: str | None = None) -> dict | None:
        """Sample up to ``samples`` placements (never more than the evaluator has left), evaluate them
        in one batch, take one REINFORCE step. None when the budget is spent."""
        import torch

        room = ev.remaining()
        k = self.cfg.samples if room is None else min(self.cfg.samples, room)
        if k <= 0:
            return None
        t0 = time.perf_counter()
        with one_thread():
            P, logp, ent = self.sample(k)
            br = ev.evaluate_batch(P)
            R = reward(br.makespan_us, br.oom, self.cfg.oom_penalty_s)
            if self.baseline is None:
                self.baseline = float(R.mean())
            adv = torch.as_tensor(R - self.baseline, dtype=torch.float32)
            loss = -(adv * logp).mean() - self.cfg.entropy * ent.mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.grad_clip)
            self.opt.step()
        self.baseline = self.cfg.baseline_decay * self.baseline + (1 - self.cfg.baseline_decay) * float(R.mean())
        self.steps += 1
        self.placements += k
        i = int(np.argmin(br.objective_us))
        if br.objective_us[i] < self.best_objective_us:
            self.best_objective_us = float(br.objective_us[i])
            self.best_placement = np.asarray(P[i], dtype=np.int64)
        self.wall_s += time.perf_counter() - t0
        line = {"step": self.steps, "placements": self.placements, "evaluator_placements": ev.placements,
                "mean_step_ms": float(br.makespan_us.mean() / 1e3), "best_step_ms": float(br.makespan_us.min() / 1e3),
                "oom": int(br.oom.sum()), "reward": float(R.mean()), "baseline": self.baseline,
                "entropy": float(ent.detach().mean()), "best_objective_us": self.best_objective_us,
                "wall_s": round(self.wall_s, 4)}
        if log_path:
            p = Path(log_path)
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "a") as f:
                f.write(json.dumps(line) + "\n")
        return line

    def greedy_placement(self) -> np.ndarray:
        import torch

        with one_thread(), torch.no_grad():
            P, _, _ = self.sample(1, greedy=True)
        return P[0]

    # -- checkpoints: plain containers of tensors, numbers and strings (torch.load(weights_only=True))
    def state_dict(self) -> dict:
        import torch

        return {"format": CHECKPOINT_FORMAT, "method": self.method, "config": self.cfg.to_dict(),
                "n_candidates": int(self.n_candidates), "graph": self.problem.graph.name, "n_ops": self.problem.n_ops,
                "model": {k: m.state_dict() for k, m in self.modules().items()}, "optimizer": self.opt.state_dict(),
                "generator": self.gen.get_state(), "baseline": self.baseline, "steps": self.steps,
                "placements": self.placements, "best_objective_us": self.best_objective_us,
                "best_placement": None if self.best_placement is None else torch.as_tensor(self.best_placement),
                "wall_s": self.wall_s}

    def load_state_dict(self, state: dict, weights_only: bool = False) -> None:
        """Restore a checkpoint. ``weights_only``: the policy weights only (fine-tuning another graph)."""
        check_checkpoint(state, self.method, self.n_candidates)
        for k, m in self.modules().items():
            m.load_state_dict(state["model"][k])
        if weights_only:
            return
        if state["graph"] != self.problem.graph.name or state["n_ops"] != self.problem.n_ops:
            raise InputError("policy", state["graph"], "was trained on another graph",
                             "resume on the same graph, or fine-tune from it (policy=..., finetune=N)")
        self.opt.load_state_dict(state["optimizer"])
        self.gen.set_state(state["generator"])
        self.baseline = state["baseline"]
        self.steps, self.placements = int(state["steps"]), int(state["placements"])
        self.best_objective_us = float(state["best_objective_us"])
        bp = state["best_placement"]
        self.best_placement = None if bp is None else bp.numpy().astype(np.int64)
        self.wall_s = float(state["wall_s"])

    def save(self, path: str | Path) -> None:
        from placer.rl.checkpoint import save_checkpoint

        save_checkpoint(self.state_dict(), path)


def load_policy(path: str | Path) -> dict:
    """Read a checkpoint of this module (:func:`placer.io.read_checkpoint`); InputError when bad."""
    from placer.io import read_checkpoint

    path = str(path)
    state = read_checkpoint(path, "policy", "give a file written with save=<path>")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise InputError(path, "policy", "is not a seq2seq policy checkpoint", "give a file written with save=<path>")
    return state


def check_checkpoint(state: dict, method: str, n_candidates: int) -> None:
    if state.get("format") != CHECKPOINT_FORMAT or state.get("method") != method:
        raise InputError("policy", str(state.get("method")), f"is not a {method} checkpoint",
                         f"give a checkpoint written by {method} with save=<path>")
    if int(state["n_candidates"]) != n_candidates:
        raise InputError("policy", f"{state['n_candidates']} devices", f"do not match this problem's {n_candidates}",
                         "fine-tune on a cluster with as many candidate devices")


def shape_from_checkpoint(cfg, state: dict, fields: tuple[str, ...]):
    """``cfg`` with the network-shape fields taken from a checkpoint (so its weights fit)."""
    return dataclasses.replace(cfg, **{f: state["config"][f] for f in fields if f in state["config"]})


def run_trainer(name: str, tr: Seq2SeqRLTrainer, ev: Evaluator, cfg, notes: list[str]):
    """The shared method loop: (fine-)tune within the budget, add the greedy placement of a loaded
    policy, save, return the best placement evaluated."""
    steps = cfg.finetune if cfg.policy else None
    first = tr.steps
    while not ev.out_of_budget() and (steps is None or tr.steps < steps):
        if tr.step(ev, cfg.log) is None:
            break
        if tr.steps == first + 1:  # after the first policy step: the classical seeds if nothing evaluated fits
            note = fit_in_memory(tr.problem, ev)
            if note:
                notes.append(note)
    if cfg.policy and not ev.out_of_budget():
        ev.evaluate(tr.greedy_placement())
        notes.append("placed with the greedy policy")
    if cfg.save:
        tr.save(cfg.save)
    notes.append(f"{tr.steps} policy steps of {cfg.samples} placements")
    return ev.result(name, notes=notes)


# ---------------------------------------------------------------------- ColocRL
@dataclass(frozen=True)
class ColocRLConfig(MethodConfig):
    """ColocRL's hyperparameters (see the module docstring for where each comes from)."""

    placements: int = 4000  # default budget: 1000 policy steps of k = 4 (Budget.placements overrides)
    samples: int = 4  # k: placements sampled per policy step (HP section 3: k = 4)
    lr: float = 1e-3  # Adam learning rate, fixed (paper: 0.1, which collapses the policy within 5 steps here; see docstring)
    grad_clip: float = 1.0  # gradient norm clipping (HP section 3)
    tanh_c: float = 5.0  # C: logits C tanh(u / T) (HP section 3)
    temperature: float = 10.0  # T (HP section 3)
    baseline_decay: float = 0.9  # moving-average baseline b <- decay b + (1 - decay) mean R (decay our choice)
    entropy: float = 0.0  # entropy bonus weight (not in ColocRL; Placeto tuned one for this baseline)
    oom_penalty_s: float = 100.0  # step time (s) given to an out-of-memory placement (large fixed value; 100 s as Post)
    hidden: int = 512  # LSTM hidden units (Placeto A.7: bidirectional RNN of 512 units for this baseline)
    bidirectional: bool = True  # bidirectional encoder (Placeto A.7)
    device_embed: int = 32  # size of each device's trainable embedding (our choice)
    attention: int = 64  # additive attention size (our choice)
    feed_aligned: bool = True  # decoder also reads the encoder state of its own position (our choice)
    max_groups: int = 256  # groups left by the colocation rules are merged down to this many ("hundreds")
    n_types: int = 64  # hash buckets for op types (our choice)
    neighbours: int = 3  # predecessor / successor positions per group in the adjacency feature (our choice)
    devices: str = "gpus"  # candidate devices: "gpus" (ops no GPU runs go to their fastest device) or "all"
    policy: str | None = None  # checkpoint to start from (then train `finetune` steps and add the greedy placement)
    finetune: int = 0  # policy steps of training from `policy` on this graph
    save: str | None = None  # write the trained policy (and the trainer's state) here
    log: str | None = None  # append one JSON line per policy step here

    def checks(self):
        return seq_checks(self) + [(self.max_groups >= 1, "max_groups", ">= 1")]


SHAPE_FIELDS = ("hidden", "bidirectional", "device_embed", "attention", "feed_aligned", "n_types", "neighbours")


def seq_checks(c) -> list:
    return [(c.placements >= 1, "placements", ">= 1"), (c.samples >= 1, "samples", ">= 1"),
            (c.lr > 0, "lr", "> 0"), (c.grad_clip > 0, "grad_clip", "> 0"), (c.tanh_c > 0, "tanh_c", "> 0"),
            (c.temperature > 0, "temperature", "> 0"), (0 <= c.baseline_decay < 1, "baseline_decay", "in [0, 1)"),
            (c.entropy >= 0, "entropy", ">= 0"), (c.oom_penalty_s >= 0, "oom_penalty_s", ">= 0"),
            (c.hidden >= 2 and c.hidden % 2 == 0, "hidden", "an even number >= 2"),
            (c.device_embed >= 1, "device_embed", ">= 1"), (c.attention >= 1, "attention", ">= 1"),
            (c.n_types >= 1, "n_types", ">= 1"), (c.neighbours >= 0, "neighbours", ">= 0"),
            (c.devices in ("gpus", "all"), "devices", "'gpus' or 'all'"), (c.finetune >= 0, "finetune", ">= 0")]


def group_features(problem, tab: OpTable, label: np.ndarray, L: int, neighbours: int) -> np.ndarray:
    """(L, n_types + 3 + 1 + 2 * neighbours) ColocRL features of the groups ``label`` (n,) -> [0, L),
    groups numbered in topological order (see the module docstring)."""
    g = problem.graph
    count = np.bincount(label, minlength=L).astype(np.float64)
    safe = np.maximum(count, 1.0)
    hist = np.zeros((L, tab.n_types))
    np.add.at(hist, (label, tab.type_bucket), 1.0)
    hist /= safe[:, None]
    mean_out = np.bincount(label, weights=tab.log_out, minlength=L) / safe
    mean_cons = np.bincount(label, weights=tab.log_consumers, minlength=L) / safe
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


class ColocRLTrainer(Seq2SeqRLTrainer):
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
    notes: list[str] = []
    state = None
    if cfg.policy:
        state = load_policy(cfg.policy)
        cfg = shape_from_checkpoint(cfg, state, SHAPE_FIELDS)
    tr = ColocRLTrainer(problem, cfg, seed)
    if state is not None:
        tr.load_state_dict(state, weights_only=True)
        notes.append(f"started from {cfg.policy} (trained on {state['graph']})")
    notes.append(f"{tr.L} groups")
    return run_trainer("colocrl", tr, ev, cfg, notes)
