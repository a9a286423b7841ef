"""What ColocRL (:mod:`placer.methods.learned.colocrl`) and the Hierarchical Planner
(:mod:`placer.methods.learned.hierarchical`) share: a sequence-to-sequence policy (:mod:`placer.nn.seq2seq`)
places op groups, trained with REINFORCE on ``-sqrt(step time)`` with a moving-average baseline
(ColocRL section 2; the Hierarchical Planner, section 2, trains its two networks the same way). Not a
method: each method module holds its config, its networks (a :class:`Seq2SeqRLTrainer` subclass) and
its entry point, and calls the pieces here.

* placement units (:func:`base_units`): the families of the colocation rules, the smallest pieces a
  placement may move, each with the candidate devices every member can run on and a fallback device,
  so that every expanded placement is valid; :func:`decision_mask` gives a decision over several
  units the devices its members allow;
* op features both methods embed (:func:`op_table`: hashed type, output size, consumers);
* the reward (:func:`reward`, an out-of-memory placement counted as a large fixed step time, ColocRL
  section 2) and the trainer (:class:`Seq2SeqRLTrainer`: one policy step samples k placements,
  evaluates them in one batch and takes one Adam step on ``-(1/k) sum_i (R_i - b) log p(d_i)``, the
  estimator :func:`placer.rl.estimator.colocrl`);
* :func:`run_trainer`, the method loop (search, or fine-tuning from a policy state and the greedy
  placement) with the memory fallback of :mod:`placer.methods.memory_fallback` after the first step,
  and :class:`Seq2SeqRLMethod`, the learned-method protocol of :mod:`placer.methods.learned.protocol` over it
  (its search written once: a fresh trainer or the policy's, then :func:`run_trainer`);
* policy states: plain state dicts (:meth:`Seq2SeqRLTrainer.state_dict`) checked by
  :func:`check_policy`; the caller reads and writes them as files (:func:`placer.io.read_checkpoint`,
  :func:`placer.io.write_checkpoint`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
import zlib
from dataclasses import dataclass

import numpy as np

from placer.errors import InputError
from placer.methods.base import Evaluator, NotApplicable
from placer.methods.learned.driver import Progress, StatePolicyMethod, Training, needs
from placer.methods.memory_fallback import fit_in_memory
from placer.nn.threads import one_thread
from placer.rl.estimator import colocrl
from placer.rl.step import gradient_step

CHECKPOINT_FORMAT = "placer-seq2seq-rl-1"


def torch_available() -> str | None:
    return needs(("torch",))


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


def member_averages(tab: OpTable, label: np.ndarray, L: int):
    """Per group of ``label`` (n,) -> [0, L): the member count, the members' type histogram (L,
    n_types), their mean log output size and mean log consumer count (empty groups: zeros)."""
    count = np.bincount(label, minlength=L).astype(np.float64)
    safe = np.maximum(count, 1.0)
    hist = np.zeros((L, tab.n_types))
    np.add.at(hist, (label, tab.type_bucket), 1.0)
    hist /= safe[:, None]
    mean_out = np.bincount(label, weights=tab.log_out, minlength=L) / safe
    mean_cons = np.bincount(label, weights=tab.log_consumers, minlength=L) / safe
    return count, hist, mean_out, mean_cons


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
    """The units of ``problem`` placed on the candidate ``devices`` ('gpus': the GPUs, every device
    when there is none; 'all'); NotApplicable when a unit's members share no device."""
    from placer import grouping
    from placer.rl.task import candidate_devices

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


# ---------------------------------------------------------------------- the REINFORCE trainer (ColocRL section 2)
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
        self.estimator = colocrl(cfg.baseline_decay)
        self.baseline = self.estimator.new_baseline()  # its value b: None until the first step
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
    def step(self, ev: Evaluator) -> dict | None:
        """Sample up to ``samples`` placements (never more than the evaluator has left), evaluate them
        in one batch, take one REINFORCE step (ColocRL section 2). Returns the step's progress line,
        None when the budget is spent."""
        room = ev.remaining()
        k = self.cfg.samples if room is None else min(self.cfg.samples, room)
        if k <= 0:
            return None
        t0 = time.perf_counter()
        with one_thread():
            P, logp, ent = self.sample(k)
            br = ev.evaluate_batch(P)
            R = reward(br.makespan_us, br.oom, self.cfg.oom_penalty_s)
            adv = self.estimator.advantages(R, self.baseline.value(R))
            loss = self.estimator.loss(logp, adv, ent, self.cfg.entropy)
            gradient_step(self.opt, self.params, loss, self.cfg.grad_clip)  # grad_clip > 0 (its config's Range)
        self.baseline.add(R)
        self.steps += 1
        self.placements += k
        i = int(np.argmin(br.objective_us))
        if br.objective_us[i] < self.best_objective_us:
            self.best_objective_us = float(br.objective_us[i])
            self.best_placement = np.asarray(P[i], dtype=np.int64)
        self.wall_s += time.perf_counter() - t0
        line = {"step": self.steps, "placements": self.placements, "evaluator_placements": ev.placements,
                "mean_step_ms": float(br.makespan_us.mean() / 1e3), "best_step_ms": float(br.makespan_us.min() / 1e3),
                "oom": int(br.oom.sum()), "reward": float(R.mean()), "baseline": self.baseline.b,
                "entropy": float(ent.detach().mean()), "best_objective_us": self.best_objective_us,
                "wall_s": round(self.wall_s, 4)}
        return line

    def greedy_placement(self) -> np.ndarray:
        import torch

        with one_thread(), torch.no_grad():
            P, _, _ = self.sample(1, greedy=True)
        return P[0]

    # -- policy states: plain containers of tensors, numbers and strings (placer.io.read_checkpoint reads them)
    def state_dict(self) -> dict:
        import torch

        return {"format": CHECKPOINT_FORMAT, "method": self.method, "config": self.cfg.to_dict(),
                "n_candidates": int(self.n_candidates), "graph": self.problem.graph.name, "n_ops": self.problem.n_ops,
                "model": {k: m.state_dict() for k, m in self.modules().items()}, "optimizer": self.opt.state_dict(),
                "generator": self.gen.get_state(), "baseline": self.baseline.b, "steps": self.steps,
                "placements": self.placements, "best_objective_us": self.best_objective_us,
                "best_placement": None if self.best_placement is None else torch.as_tensor(self.best_placement),
                "wall_s": self.wall_s}

    def load_state_dict(self, state: dict, weights_only: bool = False) -> None:
        """Restore a policy state. ``weights_only``: the policy weights only (fine-tuning another graph)."""
        check_policy(state, self.method, self.n_candidates)
        for k, m in self.modules().items():
            m.load_state_dict(state["model"][k])
        if weights_only:
            return
        if state["graph"] != self.problem.graph.name or state["n_ops"] != self.problem.n_ops:
            raise InputError("policy", state["graph"], "was trained on another graph",
                             "resume on the same graph, or fine-tune from it (policy=..., finetune=N)")
        self.opt.load_state_dict(copy.deepcopy(state["optimizer"]))  # else steps would update the caller's tensors
        self.gen.set_state(state["generator"])
        self.baseline.b = state["baseline"]
        self.steps, self.placements = int(state["steps"]), int(state["placements"])
        self.best_objective_us = float(state["best_objective_us"])
        bp = state["best_placement"]
        self.best_placement = None if bp is None else bp.numpy().astype(np.int64)
        self.wall_s = float(state["wall_s"])


def check_policy(state: dict, method: str, n_candidates: int | None = None) -> dict:
    """``state`` when it is a policy state of ``method`` for ``n_candidates`` candidate devices (when
    given); InputError otherwise (attribute it to a file with :meth:`InputError.at`)."""
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT or state.get("method") != method:
        got = state.get("method") if isinstance(state, dict) else None
        raise InputError("policy", str(got), f"is not a {method} checkpoint",
                         f"give a policy state that {method} trained")
    for key, typ in (("config", dict), ("model", dict), ("n_candidates", int)):
        if not isinstance(state.get(key), typ):
            raise InputError("policy", f"'{key}'", "is missing or of the wrong type (a damaged or foreign checkpoint)",
                             f"give a policy state that {method} trained")
    if n_candidates is not None and int(state["n_candidates"]) != n_candidates:
        raise InputError("policy", f"{state['n_candidates']} devices", f"do not match this problem's {n_candidates}",
                         "fine-tune on a cluster with as many candidate devices")
    return state


def shape_from_checkpoint(cfg, state: dict, fields: tuple[str, ...]):
    """``cfg`` with the network-shape fields taken from a checkpoint (so its weights fit)."""
    return dataclasses.replace(cfg, **{f: state["config"][f] for f in fields if f in state["config"]})


def run_trainer(run: Training, tr: Seq2SeqRLTrainer, cfg, notes: list[str], *, from_policy: bool = False):
    """The method loop ColocRL and the Hierarchical Planner share, on ``run``'s one problem: policy
    steps within the budget (``cfg.finetune`` of them when ``from_policy``, then the greedy
    placement), the memory fallback after the first; ``run`` reports each step's line. Returns the
    result and the policy state."""
    ev = run.evs[0]
    steps = cfg.finetune if from_policy else None
    first = tr.steps
    while not ev.out_of_budget() and (steps is None or tr.steps < steps):
        line = tr.step(ev)
        if line is None:
            break
        run.report(line)
        if tr.steps == first + 1:  # after the first policy step: the classical seeds if nothing evaluated fits
            note = fit_in_memory(tr.problem, ev)
            if note:
                notes.append(note)
    if from_policy and not ev.out_of_budget():
        ev.evaluate(tr.greedy_placement())
        notes.append("placed with the greedy policy")
    notes.append(f"{tr.steps} policy steps of {cfg.samples} placements")
    return ev.result(run.name, notes=notes), tr.state_dict()


class Seq2SeqRLMethod(StatePolicyMethod):
    """ColocRL's or the Hierarchical Planner's side of :class:`placer.methods.learned.LearnedMethod`:
    its policy is the trainer's state (:meth:`Seq2SeqRLTrainer.state_dict`). ``trainer``: its
    trainer class, whose networks' shapes depend on the config (the fields ``shape``) and the device
    count only; ``fresh(problem, seed, ev, cfg, notes) -> (cfg, trainer)``: its search-mode start (a
    fresh trainer, its warm starts done); ``describe(trainer, cfg)``: the result's last note."""

    def __init__(self, name: str, trainer, shape: tuple[str, ...], fresh, describe):
        self.name, self.trainer, self.shape, self.fresh, self.describe = name, trainer, shape, fresh, describe

    def search(self, problem, seed: int, ev: Evaluator, cfg, *, policy: dict | None = None,
               progress: Progress | None = None):
        """From a fresh policy (search mode, :attr:`fresh`), or from a trained policy state (its
        network shape replaces the config's) fine-tuned ``cfg.finetune`` steps, then placed greedily
        (:func:`run_trainer`). ``progress`` gets one dict per policy step. Returns (PlacementResult,
        policy state)."""
        notes: list[str] = []
        if policy is None:
            cfg, tr = self.fresh(problem, seed, ev, cfg, notes)
        else:
            check_policy(policy, self.name)
            cfg = shape_from_checkpoint(cfg, policy, self.shape)
            tr = self.trainer(problem, cfg, seed)
            tr.load_state_dict(policy, weights_only=True)
            notes.append(f"started from a policy trained on {policy.get('graph')}")
        notes.append(self.describe(tr, cfg))
        return run_trainer(Training.one(self.name, problem, ev, progress), tr, cfg, notes,
                           from_policy=policy is not None)

    def check(self, state: dict) -> dict:
        return check_policy(state, self.name)

    def network(self, state: dict) -> dict:
        """The state dicts of the trainer's networks for the policy's stored config and device count,
        built on a two-op stand-in graph with that many GPUs (the shapes depend on nothing else)."""
        from placer.cluster import Device, make_cluster
        from placer.graph import OpGraph
        from placer.methods.base import METHODS
        from placer.methods.learned.driver import PolicyFields
        from placer.problem import Problem

        fix = f"give a policy state that {self.name} trained"
        n = state["n_candidates"]
        from placer.cluster import MAX_DEVICES

        if isinstance(n, bool) or not 1 <= n <= MAX_DEVICES:
            raise InputError("policy", f"n_candidates={n!r}", f"is not a device count from 1 to {MAX_DEVICES:,}", fix)
        kind = METHODS[self.name].config
        keep = {f.name for f in dataclasses.fields(kind)} - set(PolicyFields.OBJECT_FIELDS)
        try:
            cfg = kind(**{k: v for k, v in state["config"].items() if k in keep})
        except InputError as e:
            raise InputError("policy", f"stored {e.item}", e.problem, fix) from None
        gpus = [Device(f"gpu:{i}", "gpu", "k80", 12 * 2**30) for i in range(n)]
        g = OpGraph.build(["f0", "b0"], [(0, 1, 0.0)], name="stand-in", op_types=["op", "op_grad"], role=[0, 1],
                          mirror=[-1, 0], compute_us={"gpu": [180.0, 434.0], "cpu": [2204.0, 5690.0]},
                          output_bytes=[7589130.0, 0.0], param_bytes=[1170555.0, 0.0])
        tr = self.trainer(Problem(g, make_cluster("stand-in", gpus, 7600.0, 0.0)), cfg)
        return {k: m.state_dict() for k, m in tr.modules().items()}

    def train(self, problems: list, cfg, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> dict:
        """Search mode on one graph (the papers train one policy per graph), ``placements`` of it
        (None: ``cfg.placements``); the policy it ended with. Other graphs: :meth:`finetune`."""
        if len(problems) != 1:
            raise InputError(self.name, "training graphs", f"are {len(problems)}: its policy trains on one graph",
                             "train on one graph, then fine-tune the policy on the others")
        P = problems[0]
        ev = Evaluator(P, sim_params, limit=cfg.placements if placements is None else placements)
        return self.search(P, seed, ev, cfg, progress=progress)[1]
