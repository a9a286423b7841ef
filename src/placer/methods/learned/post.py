"""Post (Gao, Chen & Li, NeurIPS 2018): cross-entropy minimisation joined with proximal policy
optimisation over softmax placement distributions (Algorithm 1), and the paper's three ablations.

The policy is one softmax per placement unit over the devices (Eq. 2), the units independent
(Eq. 3); a device a unit cannot run on has probability 0 throughout. Each iteration samples K
placements and evaluates them in one batch; every N = 5 K samples the closed-form cross-entropy
update of Theorem 1 (Eq. 10) sets each unit's distribution to its device frequencies among the
best rho N placements, mixed with the uniform distribution (Algorithm 1, line 11); every other K
samples, gradient ascent on the KL-penalised PPO surrogate of Eq. 11 against a moving-average
baseline. Ablations (section 4, Figure 2): ``ce`` (cross-entropy and mixing only), ``ppo`` (the
PPO steps only), ``pg`` (REINFORCE over the same distributions). Read top to bottom: the config,
the units, the distributions (Eq. 2-3), cross-entropy (Eq. 9-10), PPO and PG (Eq. 11), Algorithm 1.

Departures from the paper (each field's comment; the reasons and measurements are in
docs/methods/post.md): the units are METIS groups cut along device-count parts, not single ops;
the distributions start around the best classical seed (``start="seeds"``, ``start_mass``), not
uniform, and the first sample is that seed; the advantage is relative to the baseline; an
out-of-memory placement pays ``oom_penalty_us`` on top of its objective. ``PostConfig.paper()``
gives the paper's settings where the fields can express them.

Post's "policy" is this one graph's distributions: nothing transfers to another graph, so Post has
search mode only (no train / place-with-policy, see :mod:`placer.methods.learned.protocol`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from placer.errors import InputError
from placer.grouping import GROUPING_HELP, Grouping, make_grouping
from placer.grouping.parts import common_refinement, metis_parts
from placer.methods.base import Evaluator, MethodConfig, Range, register
from placer.methods.layer_split import fastest_device, split_start
from placer.methods.starts import CHEAP_SEEDS, RELIEVED, SEEDS_HELP, seed_names_ok, seeded_start
from placer.grouping import grouping_ok
from placer.grouping.parts import cut_along
from placer.sim import memory_first

PAPER = "Gao, Chen, Li. Post: Device Placement with Cross-Entropy Minimization and Proximal Policy Optimization. NeurIPS 2018"
VARIANTS = ("post", "ce", "ppo", "pg")


@dataclass(frozen=True)
class PostConfig(MethodConfig):
    """Hyperparameters of Algorithm 1 with the paper's defaults (section 4)."""

    placements: int = 2400  # L: placements sampled in all (Budget.placements overrides)
    placements_per_iter: Annotated[int, Range(">= 1")] = 12  # K: placements per iteration (12 workers), one batch evaluation
    ce_every: Annotated[int, Range(">= 1")] = 5  # N = ce_every * K: a cross-entropy update every 5 iterations (N = 60)
    rho: Annotated[float, Range("in (0, 1]")] = 0.1  # elite fraction: the best rho*N placements define Eq. 10's target (6 of 60)
    ppo_steps: Annotated[int, Range(">= 0")] = 10  # stochastic gradient ascent steps on Eq. 11 per K samples
    lr: Annotated[float, Range(">= 0")] = 1.0  # SGA learning rate (PPO steps and the PG step)
    kl_beta: Annotated[float, Range(">= 0")] = 1.0  # beta: KL penalty coefficient of Eq. 11
    baseline_decay: Annotated[float, Range("in [0, 1)")] = 0.9  # b <- decay * b + (1 - decay) * mean T per iteration (rate unstated in the paper)
    eps_start: Annotated[float, Range("in [0, 1]")] = 0.1  # uniform-mixing weight after each CE update at the start of the run ...
    eps_end: Annotated[float, Range("in [0, 1]")] = 0.0  # ... decayed linearly to this at the end (of placements or seconds; section 4: 0.1 "linearly reduced to zero")
    advantage: Literal["relative", "seconds"] = "relative"  # "relative": (b - T) / b; "seconds": b - T in seconds (paper: seconds)
    oom_penalty_us: Annotated[float, Range(">= 0")] = 1e8  # step time added to an out-of-memory placement's T (paper: 100 s)
    start_mass: Annotated[float, Range("in [0, 1)")] = 0.9  # initial probability of each unit on the device its start favours (paper: uniform, i.e. 0; docs/methods/post.md)
    oom_start_mass: Annotated[float, Range("in [0, 1)")] = 0.5  # start_mass instead when the seeded start overflows a device's memory (ours)
    grouping: str = "metis:64"  # placement units, a placer.grouping spec (paper: one softmax per op, "ops"; docs/methods/post.md)
    parts_per_device: Annotated[int, Range(">= 0")] = 2  # units also split along a METIS partition into this many parts per device (ours; 0 = off, the paper's)
    start_mode: bool = True  # the first batch's first sample is the start distribution's most likely placement (ours)
    start: Literal["fastest", "best", "seeds"] = "seeds"  # the start each unit favours: "fastest" (one device), the "best" of it and the layer split, or "seeds" (ours)
    seeds: str = CHEAP_SEEDS  # the classical heuristics start="seeds" also tries, comma-separated (those of local-search)
    split_search: Annotated[int, Range(">= 1")] = 72  # simulations searching the layer split's cuts over all piece counts (ours; docs/methods/post.md)

    @classmethod
    def method_name(cls) -> str:
        return "post"

    @classmethod
    def paper(cls, **overrides) -> "PostConfig":
        """The paper's settings where it gives them (Algorithm 1; section 4, "Setup"), ``overrides``
        applied. The defaults already are the paper's L = 2,400, K = 12, N = 5 K, rho = 0.1, 10 SGA
        steps of learning rate 1, beta = 1, eps 0.1 linearly reduced to 0 and the 100 s OOM penalty.
        Set here: one softmax per op (``grouping="ops"``, ``parts_per_device=0``; ops the graph ties
        by colocation stay one unit), every u at zero, the uniform start (``start_mass=0``: no seeded
        start is simulated and the first sample is not its mode, so ``start``, ``seeds``,
        ``split_search``, ``start_mode`` and ``oom_start_mass`` then do nothing), and the advantage
        b - T in seconds (``advantage="seconds"``). The paper does not state the baseline's
        moving-average rate (``baseline_decay`` is this project's). Not expressible by the fields:
        an out-of-memory placement's T is its memory-penalised objective plus the 100 s here, not a
        fixed 100 s."""
        return cls(**{**dict(grouping="ops", parts_per_device=0, start_mass=0.0, advantage="seconds"), **overrides})

    def checks(self):
        return [(seed_names_ok(self.seeds), "seeds", SEEDS_HELP),
                (grouping_ok(self.grouping), "grouping", f"one of: {GROUPING_HELP}")]


# ---------------------------------------------------------------------- placement units (Eq. 3)
def placement_units(problem, grouping: Grouping | str = "ops", seed: int = 0) -> Grouping:
    """The units Post keeps one softmax for: the units (:meth:`placer.grouping.Grouping.units`:
    groups tied by colocation merged, the graph's colocation groups merged) of ``grouping``, a
    :class:`placer.grouping.Grouping` or a spec of :func:`placer.grouping.parse_grouping`."""
    return make_grouping(problem, grouping, seed).units(problem.graph)


def unit_feasible(problem, units: Grouping) -> np.ndarray:
    """(G, D) bool: devices every op of a unit can run on (finite cost)."""
    ok = np.isfinite(units.compute_us(problem))
    if not ok.any(axis=1).all():
        g = int(np.flatnonzero(~ok.any(axis=1))[0])
        op = problem.graph.op_names[int(units.first[g])]
        raise InputError("grouping", f"group of '{op}'", "its ops share no device they can all run on",
                         "use a grouping that keeps ops with disjoint devices apart")
    return ok


# ---------------------------------------------------------------------- softmax distributions (Eq. 2)
def initial_logits(feasible: np.ndarray, favour=None, mass: float = 0.0) -> np.ndarray:
    """u = 0 on feasible devices (the uniform distribution), -inf elsewhere (Algorithm 1, line 1);
    with ``favour`` = d (one device, or one per unit) and ``mass`` = a > 0, every unit that can run
    on its d starts with probability a on d and the rest spread evenly over its other feasible
    devices (docs/methods/post.md)."""
    u = np.where(feasible, 0.0, -np.inf)
    if favour is None or mass <= 0:
        return u
    fav = np.broadcast_to(np.asarray(favour, dtype=np.int64), (len(feasible),))
    others = feasible.sum(axis=1) - 1
    rows = feasible[np.arange(len(feasible)), fav] & (others > 0)
    p = np.where(feasible[rows], (1.0 - mass) / others[rows, None], 0.0)
    p[np.arange(int(rows.sum())), fav[rows]] = mass
    u[rows] = logits_of(p)
    return u


def softmax(u: np.ndarray) -> np.ndarray:
    """Row-wise Eq. 2; entries at -inf get probability exactly 0."""
    z = np.exp(u - u.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def logits_of(probs: np.ndarray) -> np.ndarray:
    """Softmax parameters whose Eq. 2 probabilities are ``probs`` (log p, -inf where p = 0)."""
    with np.errstate(divide="ignore"):
        return np.log(probs)


def sample_units(probs: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(k, G) devices, each unit drawn independently from its row of ``probs`` (Eq. 3)."""
    cdf = np.cumsum(probs, axis=1)
    r = rng.random((k, probs.shape[0])) * cdf[:, -1]
    return (r[:, :, None] >= cdf[None, :, :]).sum(axis=2).astype(np.int64)


# ---------------------------------------------------------------------- cross-entropy (Eq. 9-10)
def ce_update(elite: np.ndarray, n_devices: int) -> np.ndarray:
    """Theorem 1: the minimiser of Eq. 9 over softmax distributions sets f(d_m = j) to the
    frequency of device j for unit m among the P elite placements ``elite`` (P, G)."""
    P, G = elite.shape
    counts = np.zeros((G, n_devices))
    np.add.at(counts, (np.broadcast_to(np.arange(G), (P, G)), elite), 1.0)
    return counts / P


def mix_uniform(probs: np.ndarray, feasible: np.ndarray, eps: float) -> np.ndarray:
    """Algorithm 1, line 11: (1 - eps) f + eps * uniform over the unit's feasible devices (so every
    feasible probability is at least eps / D)."""
    uni = feasible / feasible.sum(axis=1, keepdims=True)
    return (1.0 - eps) * probs + eps * uni


def elite_indices(times: np.ndarray, rho: float) -> np.ndarray:
    """The best ceil(rho N) samples (ties by sampling order): gamma_t is the rho-quantile (Eq. 9)."""
    P = max(1, int(np.ceil(rho * len(times) - 1e-9)))
    return np.argsort(times, kind="stable")[:P]


# ---------------------------------------------------------------------- PPO (Eq. 11) and PG
def advantage_table(samples: np.ndarray, adv: np.ndarray, n_devices: int) -> np.ndarray:
    """S (G, D): S_mj = (1/K) sum over samples n with d_m^n = j of adv_n. Eq. 11 separates over units:
    its first term is sum_mj f_new(j) / f_old(j) S_mj."""
    K, G = samples.shape
    S = np.zeros((G, n_devices))
    np.add.at(S, (np.broadcast_to(np.arange(G), (K, G)), samples), np.broadcast_to(adv[:, None], (K, G)))
    return S / K


def ppo_surrogate(u: np.ndarray, q: np.ndarray, S: np.ndarray, beta: float) -> float:
    """Eq. 11 at parameters u, old probabilities q: sum_mj f/q S - beta sum_m KL(q_m || f_m)."""
    f = softmax(u)
    alive = q > 0
    ratio = np.divide(f, q, out=np.zeros_like(f), where=alive)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(alive, q * (np.log(np.where(alive, q, 1.0)) - np.log(np.where(alive, f, 1.0))), 0.0)
    return float((ratio * S).sum() - beta * kl.sum())


def ppo_gradient(u: np.ndarray, q: np.ndarray, S: np.ndarray, beta: float) -> np.ndarray:
    """d Eq. 11 / du in closed form: with c = (f/q) S, d/du_mj = c_mj - f_mj sum_i c_mi + beta (q_mj - f_mj)
    (d f_k / d u_j = f_k (1[j = k] - f_j); d KL(q || f) / d u_j = f_j - q_j)."""
    f = softmax(u)
    c = np.divide(f, q, out=np.zeros_like(f), where=q > 0) * S
    return c - f * c.sum(axis=1, keepdims=True) + beta * (q - f)


def ppo_update(u: np.ndarray, S: np.ndarray, steps: int, lr: float, beta: float) -> np.ndarray:
    """``steps`` steps of gradient ascent on Eq. 11 from u (the old parameters)."""
    q = softmax(u)
    new = u.copy()
    for _ in range(steps):
        new = new + lr * ppo_gradient(new, q, S, beta)
    return new


def pg_update(u: np.ndarray, S: np.ndarray, lr: float) -> np.ndarray:
    """REINFORCE: u + lr (1/K) sum_n adv_n grad log f(d^n | u); per unit grad log f(j) = onehot(j) - f."""
    f = softmax(u)
    return u + lr * (S - f * S.sum(axis=1, keepdims=True))


# ---------------------------------------------------------------------- Algorithm 1
def step_times(objective_us: np.ndarray, oom: np.ndarray, penalty_us: float) -> np.ndarray:
    """T of each sample for the baseline and the advantages: its objective plus ``penalty_us`` when it
    runs out of memory. A placement a published objective rejects (not contiguous, over memory:
    value inf) counts as the worst finite T of its batch plus the penalty (the penalty alone when
    none is finite): an inf T made the baseline inf and every advantage (b - T) / b NaN, so PPO and
    PG steps filled the logits with NaN (version 1). Under the simulator every value is finite and T
    is as before. The cross-entropy elite still ranks the values themselves (inf last), so ``ce``
    is unchanged."""
    finite = np.isfinite(objective_us)
    if finite.all():
        return objective_us + penalty_us * oom
    worst = float(objective_us[finite].max()) if finite.any() else 0.0
    return np.where(finite, objective_us, worst + penalty_us) + penalty_us * (oom & finite)


def run_post(problem, seed: int, ev: Evaluator, cfg: PostConfig, variant: str = "post",
             grouping: Grouping | None = None):
    """Algorithm 1 (``variant="post"``) or one of its ablations ``ce``, ``ppo``, ``pg``. The units
    are those of ``cfg.grouping``, or of ``grouping`` when given (a Grouping built by the caller)."""
    if variant not in VARIANTS:
        raise InputError("method", f"variant '{variant}'", "is not a Post variant", f"use one of {VARIANTS}",
                         kind="method")
    rng = np.random.default_rng(seed)
    units = placement_units(problem, grouping if grouping is not None else cfg.grouping, seed)
    ev.tick()  # --seconds: a grouping of a large graph takes seconds, so the time limit is checked after each
    if cfg.parts_per_device:
        units = common_refinement(units, metis_parts(problem, cfg.parts_per_device * problem.n_devices, seed),
                                  problem.graph)
        ev.tick()
    favour = fastest_device(problem)
    room = ev.remaining()
    mass, relieved = cfg.start_mass, False
    if cfg.start == "seeds" and cfg.start_mass > 0:
        got = seeded_start(problem, ev, cfg.seeds, cfg.split_search)
        if got is not None:  # units cut along the start, so that its exact placement is one of the units'
            best, fits, relieved = got
            units = cut_along(units, best, problem.graph)
            favour = np.zeros(units.n_groups, dtype=np.int64)
            favour[units.op_group] = best
            mass = mass if fits else cfg.oom_start_mass
    elif cfg.start == "best" and cfg.start_mass > 0 and not ev.custom and (room is None or room >= 4 * cfg.split_search):
        split = split_start(problem, ev, cfg.split_search)
        if split is not None:
            single = memory_first(np.inf, False)
            if favour is not None:
                r = ev.simulate(np.full(problem.n_ops, favour, dtype=np.int64))
                single = memory_first(r.objective_us, not r.oom)
            if memory_first(split[1], split[2]) < single:  # each unit favours the device of the split that runs most of its compute
                work = np.zeros((units.n_groups, problem.n_devices))
                np.add.at(work, (units.op_group, split[0]), problem.fastest_us + 1e-9)
                favour = np.argmax(work, axis=1)
    feasible = unit_feasible(problem, units)
    D = problem.n_devices
    u = initial_logits(feasible, favour, mass)
    K = cfg.placements_per_iter
    b = None
    window_units, window_t = [], []  # the samples since the last CE update
    it = 0
    curves = {"placements": [], "mean_us": [], "median_us": [], "best_us": [], "best_so_far_us": [], "oom": [],
              "update": [], "eps": []}
    while not ev.out_of_budget():
        room = ev.remaining()
        k = K if room is None else min(K, room)
        samples = sample_units(softmax(u), k, rng)
        if it == 0 and cfg.start_mode and mass > 0:
            samples[0] = np.argmax(u, axis=1)  # the start's mode: every unit on its favoured device
        batch = ev.evaluate_batch(samples[:, units.op_group])
        times = batch.objective_us + cfg.oom_penalty_us * batch.oom  # inf: rejected by a published objective
        finite_t = step_times(batch.objective_us, batch.oom, cfg.oom_penalty_us)  # for the baseline and advantages
        it += 1
        if b is None:
            b = float(finite_t.mean())
        adv = (b - finite_t) / (max(b, 1e-9) if cfg.advantage == "relative" else 1e6)  # b - T in units of b or s
        eps = cfg.eps_start + (cfg.eps_end - cfg.eps_start) * ev.fraction_used()
        window_units.append(samples)
        window_t.append(times)
        if variant in ("post", "ce") and it % cfg.ce_every == 0:
            pool, pool_t = np.concatenate(window_units), np.concatenate(window_t)
            elite = pool[elite_indices(pool_t, cfg.rho)]
            u = logits_of(mix_uniform(ce_update(elite, D), feasible, eps))
            window_units, window_t = [], []
            update = "ce"
        elif variant in ("post", "ppo"):
            u = ppo_update(u, advantage_table(samples, adv, D), cfg.ppo_steps, cfg.lr, cfg.kl_beta)
            update = "ppo"
        elif variant == "pg":
            u = pg_update(u, advantage_table(samples, adv, D), cfg.lr)
            update = "pg"
        else:
            update = "none"
        if variant in ("ppo", "pg"):
            window_units, window_t = [], []
        b = cfg.baseline_decay * b + (1.0 - cfg.baseline_decay) * float(finite_t.mean())
        curves["placements"].append(ev.placements)
        curves["mean_us"].append(float(times.mean()))
        curves["median_us"].append(float(np.median(times)))
        curves["best_us"].append(float(times.min()))
        curves["best_so_far_us"].append(float(ev.best_objective_us))
        curves["oom"].append(int(batch.oom.sum()))
        curves["update"].append(update)
        curves["eps"].append(float(eps))
    how = cfg.grouping if grouping is None else grouping.method
    res = ev.result(variant, params={"variant": variant, "grouping": how, "units": int(units.n_groups)}, seed=seed,
                    notes=[RELIEVED] if relieved else [])
    res.cost.extra["iterations"] = curves
    res.cost.extra["final_probs_max_mean"] = float(softmax(u).max(axis=1).mean())
    return res


def _method(variant: str):
    def run(problem, seed: int, ev: Evaluator, cfg: PostConfig):
        return run_post(problem, seed, ev, cfg, variant=variant)

    run.__name__ = f"run_{variant}"
    run.__doc__ = f"Post's Algorithm 1 as variant '{variant}' (see :func:`run_post`)."
    return run


register("post", "Post: cross-entropy updates (Eq. 10) joined with PPO (Eq. 11) over softmax placement "
         "distributions", "learned", PostConfig, PAPER, version=2)(_method("post"))
register("ce", "Post's ablation: cross-entropy minimisation (Eq. 10) + uniform mixing only", "learned", PostConfig, PAPER, version=1)(_method("ce"))
register("ppo", "Post's ablation: PPO (Eq. 11) over softmax placement distributions only", "learned", PostConfig,
         PAPER, version=2)(_method("ppo"))
register("pg", "Post's ablation: REINFORCE policy gradient over softmax placement distributions", "learned",
         PostConfig, PAPER, version=2)(_method("pg"))
