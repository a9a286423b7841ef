"""Placeto (Addanki et al., NeurIPS 2019): a graph-embedding policy that improves a placement group
by group, trained with REINFORCE. Read top to bottom:

* :class:`PlacetoConfig`, the one config (every hyperparameter, its default and the paper's value;
  :meth:`PlacetoConfig.paper` gives the paper's settings), and the views the trainer's parts read:
  the MDP (section 2, appendix A.4; :mod:`placer.rl.env`), the network (section 2, Figure 1, A.7;
  :mod:`placer.nn.placeto`), REINFORCE (A.1 eq. 1, A.7; :mod:`placer.rl.reinforce`, its estimator
  :func:`placer.rl.estimator.placeto`) and the units it places (A.6; :mod:`placer.grouping`);
* :func:`build_trainer`, the one place a trainer is assembled from that config;
* :class:`Placeto`, the learned-method protocol on the shared driver (``StatePolicyMethod.run`` is
  the registered method): *search mode* trains on the one graph within the budget, from a seeded
  start, restarting at the best placement, then on finer units; with a ``policy`` (an object) it
  places with it, fine-tuned first when asked; train on several graphs; policy state in and out.

Why each default departs from the paper, with the measurements that decided it: docs/methods/placeto.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import numpy as np

from placer.grouping import GROUPING_HELP
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.learned.protocol import Progress, register_learned
from placer.methods.learned.driver import PolicyFields, StatePolicyMethod, needs
from placer.methods.starts import CHEAP_SEEDS, RELIEVED, SEEDS_HELP, Start, seed_names_ok, seeded_start
from placer.grouping import grouping_ok
from placer.grouping.parts import cut_along

PAPER = "Addanki et al., Placeto: Learning Generalizable Device Placement Algorithms, NeurIPS 2019"


@dataclass(frozen=True)
class PlacetoConfig(PolicyFields, MethodConfig):
    """Placeto's hyperparameters, the one place they are written. The defaults are what the
    committed results ran with; where the paper differs, its value is in the field's comment and in
    :meth:`paper` (why: docs/methods/placeto.md)."""

    placements: int = 2000  # placements simulated in all (Budget.placements overrides; paper, Table 1: 3.7-28.8 K)
    grouping: str = "metis:64"  # the units placed, a placer.grouping spec (paper, A.6: Merge-and-Colocate, merge:N)
    mirrors: bool = True  # metis:K runs on forward ops joined with their backward ops (paper: no such join)
    devices: Literal["auto", "gpus", "all"] = "auto"  # action space: gpus, all, or auto: the gpus unless no seed fits in memory (paper: gpus)
    sweeps: Annotated[int, Range(">= 1")] = 1  # n: visits of every group per episode (A.7: n = 1 or 2)
    order: Literal["topological", "random"] = "topological"  # visiting order: topological or random (a permutation per sweep)
    init: Literal["single", "random"] = "single"  # episode start: single (all on the first candidate), random, given (paper: an arbitrary placement, random)
    start: Literal["seeds", "init"] = "seeds"  # search mode: start at the best classical seed, units cut along it; "init": as init (paper: init)
    seeds: str = CHEAP_SEEDS  # the classical heuristics start="seeds" tries, comma-separated (those of local-search)
    split_search: Annotated[int, Range(">= 1")] = 72  # simulations searching the layer split's cuts, one of start="seeds"'s candidates
    restart: Literal["best", "start"] = "best"  # search and fine-tuning: episodes start at the best placement so far (paper: "start", always the start)
    refine: Annotated[int, Range(">= 1")] = 2  # search and fine-tuning: the rest of the budget on grouping N*refine cut along the best so far (paper: 1, off)
    refine_at: Annotated[float, Range("in (0, 1]")] = 0.5  # ... after this fraction of the placement budget
    reward: Literal["intermediate", "terminal"] = "intermediate"  # intermediate (r_t = R(p_t) - R(p_t+1), A.4) or terminal (-R(p_T))
    workers: Annotated[int, Range(">= 1")] = 8  # W: episodes per update, gradients summed (A.7: 8 workers)
    episodes: Annotated[int | None, Range(">= 1")] = None  # training episodes at most (None: as many as the placement budget allows)
    rounds: Annotated[int, Range(">= 1")] = 8  # k: message-passing rounds per direction (A.7: k = 4 or 8)
    keep_bias: float = 1.1  # initial logit bonus of a group's current device, learned (paper: no such term, 0)
    lr_start: Annotated[float, Range(">= 0")] = 1e-2  # Adam learning rate at the start (A.7: 1e-3 .. 1e-4) ...
    lr_end: Annotated[float, Range(">= 0")] = 1e-3  # ... decayed linearly to this (A.7: linear decay); 0 and 0: a frozen policy (ablation)
    gamma: Annotated[float, Range("in (0, 1]")] = 0.9  # discount of the return-to-go (paper: 1, undiscounted)
    entropy_start: Annotated[float, Range(">= 0")] = 0.01  # entropy bonus at the start (A.7: high at first, value not given) ...
    entropy_end: Annotated[float, Range(">= 0")] = 2e-4  # ... decayed linearly to this (A.7: low at the end)
    baseline_window: Annotated[int, Range(">= 1")] = 10  # k: episodes in the per-step moving-average baseline (A.7: k = 10)
    stop_window: Annotated[int, Range(">= 0")] = 0  # A.7 stopping rule window in episodes, 0: the budget stops training (paper: 1000)
    backend: Literal["serial", "process", "ray"] = "serial"  # rollout workers: serial, process or ray (results do not depend on it)
    processes: Annotated[int | None, Range(">= 1")] = None  # worker processes for the process / ray backends
    policy: Any = None  # a trained policy to start from (placer.rl.policy.PlacetoPolicy or its state dict; None: search)
    finetune: Annotated[int, Range(">= 0")] = 0  # with a policy: episodes of fine-tuning on this graph before placing
    place_episodes: Annotated[int, Range(">= 1")] = 1  # with a policy: episodes that place the graph, the best wins (bench selection: 8)
    greedy: bool = True  # with a policy: the most likely device (False: sample)
    progress: Any = None  # called with one record (a dict) per training episode (None: nothing)

    @classmethod
    def paper(cls, **overrides) -> "PlacetoConfig":
        """The paper's settings where it gives them (section 2, A.6, A.7; the entropy bonus and the
        number of Merge-and-Colocate groups it tuned without saying, so those are this project's),
        ``overrides`` applied."""
        return cls(**{**dict(grouping="merge:64", mirrors=False, devices="gpus", init="random", start="init",
                             restart="start", refine=1, keep_bias=0.0, lr_start=1e-3, lr_end=1e-4, gamma=1.0,
                             entropy_start=0.05, entropy_end=1e-3, stop_window=1000), **overrides})

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.policy, dict):  # a state dict: the policy object it holds (checked)
            from placer.rl.policy import PlacetoPolicy

            object.__setattr__(self, "policy", PlacetoPolicy.from_state(self.policy))

    def checks(self):
        return [(grouping_ok(self.grouping), "grouping", f"one of: {GROUPING_HELP}"),
                (seed_names_ok(self.seeds), "seeds", SEEDS_HELP),
                (self.policy is None or isinstance(self.policy, dict) or hasattr(self.policy, "state"), "policy",
                 "a trained policy, not a file name (from the command line: placer policy place -m placeto --policy FILE)"),
                (self.progress is None or callable(self.progress), "progress", "a function of one record, or None")]

    # -- the trainer's pieces, built from this one config
    def env(self):
        from placer.rl.env import EnvConfig

        return EnvConfig(sweeps=self.sweeps, order=self.order, init=self.init, reward=self.reward)

    def policy_config(self, n_actions: int):
        """The network's settings for ``n_actions`` candidates; its keep bias is ``keep_bias`` plus
        ln(n_actions - 1), so that the untrained policy keeps a unit where it is as often on any
        number of candidates as ``keep_bias`` does on two (1.1: 0.75)."""
        from placer.nn.placeto import PolicyConfig

        return PolicyConfig(n_actions=n_actions, rounds=self.rounds,
                            keep_bias=self.keep_bias + math.log(max(n_actions - 1, 1)))

    def reinforce(self, seed: int, episodes: int | None = None):
        """The REINFORCE settings; ``episodes`` overrides the config's (None: effectively unbounded,
        the placement budget stops training)."""
        from placer.rl.reinforce import ReinforceConfig

        n = episodes if episodes is not None else (self.episodes if self.episodes is not None else 10**9)
        return ReinforceConfig(episodes=n, workers=self.workers, lr_start=self.lr_start, lr_end=self.lr_end,
                               entropy_start=self.entropy_start, entropy_end=self.entropy_end,
                               baseline_window=self.baseline_window, gamma=self.gamma,
                               stop_window=self.stop_window, seed=seed)

    def units(self, problem, seed: int = 0):
        """The grouping whose units the policy places: ``grouping``, except that with ``mirrors`` a
        METIS grouping partitions forward ops joined with their backward ops."""
        from placer.grouping import metis_groups, parse_grouping

        spec = parse_grouping(self.grouping)
        if self.mirrors and spec.kind == "metis":
            return metis_groups(problem, spec.n, seed=seed, mirrors=True)
        return self.grouping

    def task(self, problem, seed: int = 0, devices=None):
        """The placement task on this config's units; ``devices``: the candidates (a device
        selection or indices; None: :meth:`candidates` of a start that fits)."""
        from placer.rl.task import make_task

        return make_task(problem, self.units(problem, seed), self.candidates() if devices is None else devices, seed)

    def candidates(self, fits: bool = True) -> str:
        """The action space: ``devices``, with ``"auto"`` the GPUs, or every device when the start
        does not fit in memory (no classical seed did: the GPUs alone may not hold the model)."""
        return self.devices if self.devices != "auto" else ("gpus" if fits else "all")


def build_trainer(cfg: PlacetoConfig, tasks: list, seed: int, sim_params=None, *, episodes: int | None = None,
                  env=None, initial: list | None = None, start=None, rl=None):
    """The one place a Placeto trainer (:class:`placer.rl.reinforce.Trainer`) is assembled: REINFORCE
    over ``tasks`` (one: search mode; several: policy mode) with ``cfg``'s network
    (:meth:`PlacetoConfig.policy_config`), MDP (``env``; default :meth:`PlacetoConfig.env`),
    REINFORCE settings (``rl``; default :meth:`PlacetoConfig.reinforce` of ``seed`` and
    ``episodes``), rollout backend and progress callback. ``initial``: each
    task's start (``env.init == "given"``). From a trained policy ``start``: its network's settings
    and weights and, unless ``env`` is given, its MDP (Adam and the schedules start afresh)."""
    from placer.rl.reinforce import Trainer

    net = start.net_config if start is not None else cfg.policy_config(tasks[0].n_actions)
    env = env or (start.env if start is not None else cfg.env())
    tr = Trainer(list(tasks), net, env, rl or cfg.reinforce(seed, episodes),
                 sim_params=sim_params, backend=cfg.backend, processes=cfg.processes, progress=cfg.progress,
                 initial=initial)
    if start is not None:
        tr.net.load_state_dict(start.weights)
    return tr


@register("placeto", "Placeto: graph-embedding policy, progressive placement MDP, REINFORCE (search mode on this graph)",
          "learned", PlacetoConfig, paper=PAPER, available=lambda: needs(("gymnasium", "torch")), version=1)
def placeto(problem, seed: int, ev: Evaluator, cfg: PlacetoConfig):
    return PLACETO.run(problem, seed, ev, cfg)


def host_start(problem, ev: Evaluator):
    """Every op on a CPU (the first that runs them all), simulated once through ``ev``: that
    :class:`placer.methods.starts.Start` when it fits in memory, else None."""
    from placer.methods.baselines import single_device_placement

    for d in problem.cluster.cpus():
        p = single_device_placement(problem, d)
        if p is not None and (ev.remaining() is None or ev.remaining() > 1):
            got = ev.evaluate_batch(p[None])
            return Start(p, True) if not got.oom[0] else None
    return None


def refined(cfg: PlacetoConfig) -> str | None:
    """The grouping of the second phase (``refine`` times as many parts), or None when there is none."""
    from placer.grouping import parse_grouping

    spec = parse_grouping(cfg.grouping)
    return None if cfg.refine <= 1 or cfg.refine_at >= 1 or spec.n is None else f"{spec.kind}:{spec.n * cfg.refine}"


def _train(tr, cfg: PlacetoConfig, ev: Evaluator, placements) -> None:
    """Train ``tr`` for ``placements`` (episodes restarting as ``cfg.restart`` says) or until the
    evaluator's time limit has passed, then charge its simulations and best placement to ``ev``.
    Under a time limit or a progress callback, each update's simulations are charged as it ends,
    so the evaluator's best and its progress follow the training (the same charges in all)."""
    hook, charged = restarts(cfg), [0, 0]  # simulations and curve points charged so far

    def charge() -> None:
        calls, points = tr.sim_calls - charged[0], tr.curve[0][charged[1]:]
        if calls <= 0 and not points:
            return
        ev.charge(calls, [(x - charged[0], *rest) for x, *rest in points],
                  tr.best_op_placement(0) if points else None, tr.best[0]["objective_us"])
        charged[:] = [tr.sim_calls, len(tr.curve[0])]

    def each_update(t, results) -> None:
        if hook is not None:
            hook(t, results)
        charge()

    live = ev.seconds is not None or ev.progress is not None
    try:
        tr.train(max_placements=placements, on_update=each_update if live else hook,
                 time_up=ev.time_up if ev.seconds is not None else None)
    finally:
        tr.close()
    if live:
        charge()
    else:
        ev.charge(tr.sim_calls, tr.curve[0], tr.best_op_placement(0), tr.best[0]["objective_us"])


def _search(tr, env, cfg: PlacetoConfig, seed: int, ev: Evaluator, episodes):
    """Search on the trainer ``tr`` (from scratch, or a fine-tuning one) within the budget and at
    most ``episodes`` in all: with ``refine``, the first ``refine_at`` of the placements on its units,
    then the rest on the units of :func:`refined` cut along the best placement so far, every episode
    starting there, the weights carried over, this config's REINFORCE settings. Returns the notes of
    the second phase (none when there is no budget, time, episode or best placement left for it) and
    the trainer that trained last (the second phase's when there was one: its weights are where the
    training ended)."""
    fine, room = refined(cfg), ev.remaining()
    if fine is None or room is None or room < 2:
        _train(tr, cfg, ev, room)
        return [], tr
    _train(tr, cfg, ev, max(1, int(room * cfg.refine_at)))
    more = None if episodes is None else episodes - tr.episode
    if not ev.remaining() or tr.best[0]["placement"] is None or ev.time_up() or (more is not None and more < 1):
        return [], tr
    task = replace(cfg, grouping=fine).task(tr.graphs[0].problem, seed, tr.graphs[0].devices)  # the same candidates
    gp, initial = seeded_task(task, tr.best_op_placement(0), seed)
    tr2 = build_trainer(cfg, [gp], seed, ev.sim_params, episodes=more, env=replace(env, init="given"), initial=initial,
                        start=Placeto.policy_of(tr))
    _train(tr2, cfg, ev, ev.remaining())
    return [f"then {tr2.episode} episodes, {gp.n_groups} units of {fine}"], tr2


def restarts(cfg: PlacetoConfig):
    """The ``on_update`` hook of :meth:`placer.rl.reinforce.Trainer.train` that makes episodes start
    at the best placement found so far (``restart="best"``; None for ``"start"``): after an update
    that improved it, the environment's start becomes that placement (``init="given"``) and the
    workers are rebuilt with it, so that every episode of the next round starts there."""
    if cfg.restart != "best":
        return None
    seen = [0]  # improvements of the best (entries of the trainer's curve) already restarted from

    def on_update(tr, results):
        if len(tr.curve[0]) == seen[0]:
            return
        seen[0] = len(tr.curve[0])
        tr.initial = [np.asarray(tr.best[0]["placement"], dtype=np.int64)]
        tr.env_cfg = replace(tr.env_cfg, init="given")
        tr.close()  # the next round builds its workers with the new start

    return on_update


def seeded_task(gp, start: np.ndarray, seed: int):
    """``gp`` with its units cut along the op placement ``start``, and the units' start: each unit on
    the candidate device that runs most of its compute in ``start`` (its own device there whenever
    that is a candidate; a unit whose ops all sit on a non-candidate device, e.g. the CPU under
    ``devices="gpus"``, on its first feasible candidate). Returns (task, [initial group placement])."""
    from placer.rl.task import make_task

    P = gp.problem
    task = make_task(P, cut_along(gp.units, start, P.graph), gp.devices, seed)
    work = np.zeros((task.n_groups, task.n_actions))
    for a, d in enumerate(task.devices):
        on = start == d
        np.add.at(work[:, a], task.units.op_group[on], P.fastest_us[on] + 1e-9)
    work[~task.feasible] = -1.0
    return task, [work.argmax(axis=1).astype(np.int64)]


class Placeto(StatePolicyMethod):
    """Placeto's learned-method protocol; its policy is a :class:`placer.rl.policy.PlacetoPolicy`."""

    name = "placeto"

    def search(self, problem, seed: int, ev: Evaluator, cfg: PlacetoConfig, *, policy=None,
               progress: Progress | None = None):
        """Search mode; returns (the result, the policy training ended with)."""
        cfg = cfg if progress is None or progress is cfg.progress else replace(cfg, progress=progress)
        env, initial = cfg.env(), None
        got = seeded_start(problem, ev, cfg.seeds, cfg.split_search) if cfg.start == "seeds" else None
        devices = cfg.candidates(got is None or (got.fits and not got.relieved))  # relieved: it may use the host
        if got is not None and not got.fits and devices == "all":  # no seed fits the GPUs: try the host
            got = host_start(problem, ev) or got
        gp = cfg.task(problem, seed, devices)
        if got is not None:
            gp, initial = seeded_task(gp, got.placement, seed)
            env = replace(env, init="given")
        tr = build_trainer(cfg, [gp], seed, ev.sim_params, env=env, initial=initial)
        more, last = _search(tr, env, cfg, seed, ev, cfg.episodes)
        notes = [RELIEVED] if got is not None and got.relieved else []
        return (ev.result("placeto", notes=notes + [f"{tr.episode} episodes, {gp.n_groups} units of {cfg.grouping}"] + more),
                self.policy_of(last))

    def train(self, problems: list, cfg: PlacetoConfig, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None):
        """Policy mode: REINFORCE over ``problems`` (each worker's episode on a graph of them, A.7),
        until ``cfg.episodes`` episodes or ``placements`` placements (both None: ``cfg.placements``);
        the policy holds the trainer's whole state. With ``cfg.policy``: its training resumed."""
        from placer.errors import InputError
        from placer.rl.task import candidate_devices

        counts = sorted({len(candidate_devices(P, cfg.candidates())) for P in problems})
        if len(counts) > 1:  # before any work: the policy's last layer has one output per candidate device
            raise InputError("placeto", "training clusters", f"have different numbers of candidate devices {counts}: "
                             "a Placeto policy chooses among a fixed number", "train one policy per device count "
                             "(doppler and giph train one policy for clusters of any size)")
        cfg = cfg if progress is None else replace(cfg, progress=progress)
        tr = build_trainer(cfg, [cfg.task(P, seed) for P in problems], seed, sim_params)
        if cfg.policy is not None:
            try:
                tr.load_state_dict(cfg.policy.state)
            except (ValueError, KeyError, TypeError) as e:
                tr.close()
                raise InputError(cfg.policy.label or "policy", "policy to resume", str(e),
                                 "resume with the graphs and settings it was trained with") from None
        if placements is None and cfg.episodes is None:  # never an unbounded training
            placements = cfg.placements
        try:
            tr.train(max_placements=placements)
        finally:
            tr.close()
        return self.policy_of(tr)

    def check_fits(self, problem, cfg: PlacetoConfig) -> None:
        """Refuse a cluster that offers another number of devices than the policy chooses among."""
        from placer.errors import InputError
        from placer.rl.task import candidate_devices

        if cfg.policy is None:
            return
        have, need = cfg.policy.net_config.n_actions, len(candidate_devices(problem, cfg.candidates()))
        if have != need:
            raise InputError(cfg.policy.label or "policy", "policy", f"chooses among {have} devices but cluster "
                             f"'{problem.cluster.name}' offers {need} ({cfg.candidates()})",
                             f"use a cluster with {have} candidate devices, or train a policy for this one")

    def place(self, problem, policy, seed: int, ev: Evaluator, cfg: PlacetoConfig):
        """``place_episodes`` episodes of ``policy`` (greedy or sampled, as ``cfg.greedy``) in the MDP
        it was trained in; the best placement evaluated is the result."""
        return _place(cfg.task(problem, seed), policy, seed, ev, cfg, [])

    def finetune(self, problem, policy, seed: int, ev: Evaluator, cfg: PlacetoConfig, *,
                 progress: Progress | None = None):
        """``cfg.finetune`` episodes of REINFORCE on ``problem`` from ``policy`` (its REINFORCE
        settings, ``cfg``'s workers; restarts and refinement as search mode), then :meth:`place`
        with the fine-tuned weights: those training ended with (the second phase's when it
        refined; the network reads units of any count, so they place the policy's own units too)."""
        cfg = cfg if progress is None else replace(cfg, progress=progress)
        gp = cfg.task(problem, seed)
        rl = policy.rl_config(episodes=cfg.finetune, workers=cfg.workers, seed=seed, stop_window=0)
        tr = build_trainer(cfg, [gp], seed, ev.sim_params, env=policy.env, start=policy, rl=rl)
        more, last = _search(tr, policy.env, cfg, seed, ev, cfg.finetune)
        tuned = policy.with_weights(last.net.state_dict())
        return _place(gp, tuned, seed, ev, cfg, [f"fine-tuned {tr.episode} episodes"] + more), tuned

    def policy_state(self, policy) -> dict:
        return policy.state

    def load_policy(self, state, where: str = "policy"):
        """The checked policy of a state dict, labelled ``where`` (a policy: itself)."""
        from placer.rl.policy import PlacetoPolicy

        return state if isinstance(state, PlacetoPolicy) else PlacetoPolicy.from_state(state, where, label=where)

    def policy_key(self, cfg: PlacetoConfig, problems: list) -> dict:
        """:func:`trainer_key`, and the candidates' number off two (no ``"method"``: committed keys stay)."""
        from placer.rl.task import candidate_devices

        key = {"trainer": trainer_key(cfg)}
        n = len(candidate_devices(problems[0], cfg.candidates()))
        if n != 2:
            key["candidates"] = n
        return key

    def trained(self, policy) -> dict:
        """Its episodes, placements, simulator calls and best objective per graph (None: not visited)."""
        s = policy.state
        return {"episodes": s["episode"], "placements": s["placements"], "sim_calls": s["sim_calls"],
                "best_objective_us": [b["objective_us"] if math.isfinite(b["objective_us"]) else None
                                      for b in s["best"]]}

    @staticmethod
    def policy_of(tr, label: str | None = None):
        """The policy a trainer has trained so far (its whole state)."""
        from placer.rl.policy import PlacetoPolicy

        return PlacetoPolicy(tr.state_dict(), label)


SEARCH_ONLY = ("restart", "refine", "refine_at")  # fields that training a policy does not read (search on one graph only)


def trainer_key(cfg: PlacetoConfig) -> dict:
    """The trainer settings a policy's cache key holds: not :data:`SEARCH_ONLY`, devices as training
    reads them, ``log: None`` for ``progress`` (the committed policies' keys)."""
    key = {k: v for k, v in cfg.to_dict().items() if k != "progress"}
    return {k: v for k, v in {**key, "log": None, "devices": cfg.candidates()}.items() if k not in SEARCH_ONLY}


PLACETO = register_learned(Placeto(), version=2)  # 2: a refining fine-tune keeps its second phase's weights


def _place(gp, policy, seed: int, ev: Evaluator, cfg: PlacetoConfig, notes: list[str]):
    from placer.rl.policy import place

    out = place(policy, gp, greedy=cfg.greedy, episodes=cfg.place_episodes, seed=seed, sim_params=ev.sim_params,
                max_placements=ev.remaining())
    if out is not None:
        ev.charge(out.sim_calls, [(out.sim_calls, out.objective_us)], out.placement, out.objective_us)
        notes.append(f"placed with {'greedy' if cfg.greedy else 'sampled'} policy, {out.episodes} episode(s)")
    return ev.result("placeto", notes=notes)
