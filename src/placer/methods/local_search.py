"""Search over the simulator: local search (iterated, best-of-sample hill climbing) and simulated
annealing (Kirkpatrick et al. 1983), each moving one op or one colocation group to another device.

Both start from the best of the classical heuristics (:data:`SEEDS`: single GPU, the expert rule,
m-TOPO, METIS, HEFT, m-ETF, HEFT / m-ETF with the bus-aware communication model, m-SCT, and last,
as it costs the most placements, the layer split with its cuts searched over 2..G GPUs as the
``layer-split`` method does: on chains best cut into a pipeline, which no other seed proposes,
PipeDream ResNet-50 at 2,000 placements, seed 0, went from 534 to 512 ms on k80x2 and from 655 to
515 ms on k80x4). Seeding is paid in placements like everything else: each seed's placement is simulated once
through the evaluator, the seeds together may use at most ``seed_share`` of the budget, a seed whose
placements do not fit what is left of that share is skipped, and a heuristic whose own computation
grows as n^2 or worse (HEFT's insertion search, ETF's scan of the ready list, SCT's linear program)
is skipped on graphs of more than ``seed_max_ops`` ops: a size rule, never a clock.

Then repeat: propose ``batch`` moves from the current placement, simulate them in one batch call
through the evaluator (the simulator's compiled batch path), and take the best; an accepted
placement is simulated once more in full, for the critical path the next moves draw from. A move
takes a unit (op or colocation group) either from the critical path of the current simulated step
(half of the time) or uniformly, and sends it either to a device one of its neighbours is on or to
a random device that can run all its ops; three moves in ten carry a whole run of consecutive ops
(in topological order, mean length 6) together with the ops mirroring them. Local search accepts
only improvements and, after ``patience`` batches without one, restarts from its best placement
with ``kick`` random unit moves (iterated local search); annealing accepts a worse placement with
probability exp(-delta / T), T cooling geometrically from ``t0`` x the start objective to ``t1`` x
it as the placement budget is used (:meth:`Evaluator.fraction_used`), so two runs with the same
seed and budget take the same steps under any machine load.

Both stop when the placement budget is spent (or, only when asked, at ``Budget.seconds``).
What is minimised is ``(OOM, objective)``, feasibility first: a memory-feasible placement always
beats one that overflows and ranks by the simulator's objective; one that overflows ranks by how much
(the memory part of its objective), so a search whose seeds all overflow heads for the nearest fit.
Ranked by the penalised objective instead, on the dnn-partitioning BERT-3 inference input (every seed
over its 0.59 GiB accelerators) both searches settled on short steps 0.14 GB over capacity and ended
out of memory on 2 of 3 seeds; now all 3 fit (local search 491 / 493 / 498 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, NotApplicable, register
from placer.grouping import colocation_units
from placer.methods.support import gpu_devices, repair_memory


# ---------------------------------------------------------------------- seeding heuristics
def _single_gpu(problem, ev, gpus):
    """Every op on one GPU: one placement per class of identical GPUs (same costs and memory)."""
    out, seen = {}, set()
    for d in gpus:
        if not np.isfinite(problem.compute_us[:, d]).all():
            continue
        key = (problem.compute_us[:, d].tobytes(), float(problem.memory_bytes[d]))
        if key not in seen:
            seen.add(key)
            out[f"single-gpu:{d}"] = np.full(problem.n_ops, d, dtype=np.int64)
    return out


def _expert(problem, ev, gpus):
    from placer.methods.expert import expert_placement

    return {"expert": expert_placement(problem)[0]}


def _metis(problem, ev, gpus):
    from placer.methods.partitioning import metis_placement

    return {"metis": metis_placement(problem, gpus)}


def _topo(problem, ev, gpus):
    from placer.methods.list_scheduling import topo_placement

    return {"m-topo": topo_placement(problem, gpus)}


def _list(kind: str, comm: str):
    def make(problem, ev, gpus):
        from placer.methods import list_scheduling as ls

        fn = {"heft": ls.heft_schedule, "m-etf": ls.etf_schedule, "m-sct": ls.sct_schedule}[kind]
        return {kind + (":" + comm if comm != "sim" else ""): fn(problem, ev.sim_params, gpus, comm=comm).placement}

    return make


def _layer_split(problem, ev, gpus):
    """The layer-wise split over 2..G GPUs with its cuts searched
    (:func:`placer.methods.layer_split.split_start`, SPLIT_SEARCH simulations per piece count through
    ``ev``, as the ``layer-split`` method's default spends):
    where a chain is best pipelined (ResNet) list scheduling and partitioners miss it."""
    from placer.methods.layer_split import split_start

    if ev.custom:  # a published objective: the split's search simulates under the event simulator
        raise NotApplicable("the layer-split seed searches under the simulator's objective")
    got = split_start(problem, ev, _split_search(gpus))
    return {} if got is None else {"layer-split": got[0]}


SPLIT_SEARCH = 24  # simulations the layer-split seed spends searching the cuts of each piece count


def _split_search(gpus) -> int:
    """Simulations of the split's search over 2..G pieces (G GPUs)."""
    return SPLIT_SEARCH * max(1, len(gpus) - 1)


@dataclass(frozen=True)
class Seed:
    """A seeding heuristic: its name, whether its own computation grows as n^2 or worse, how many
    placements it proposes (each simulated once), and the function computing them."""

    name: str
    quadratic: bool
    placements: Callable[[Any, list[int]], int]
    make: Callable
    searches: bool = False  # simulates placements through the evaluator itself: skipped unless all fit


SEEDS: dict[str, Seed] = {s.name: s for s in [  # cheapest first (in placements)
    Seed("single-gpu", False, lambda pr, gpus: len(gpus), _single_gpu),
    Seed("expert", False, lambda pr, gpus: 1, _expert),
    Seed("m-topo", False, lambda pr, gpus: 1, _topo),
    Seed("metis", False, lambda pr, gpus: 1, _metis),
    Seed("heft", True, lambda pr, gpus: 1, _list("heft", "sim")),
    Seed("m-etf", True, lambda pr, gpus: 1, _list("m-etf", "sim")),
    Seed("heft:free", True, lambda pr, gpus: 1, _list("heft", "free")),
    Seed("m-etf:free", True, lambda pr, gpus: 1, _list("m-etf", "free")),
    Seed("m-sct", True, lambda pr, gpus: 1, _list("m-sct", "sim")),
    Seed("layer-split", False, lambda pr, gpus: _split_search(gpus) + 1, _layer_split, searches=True),
]}
DEFAULT_SEEDS = ",".join(SEEDS)


def seed_placements(problem, ev: Evaluator, names=tuple(SEEDS), max_placements: int | None = None,
                    max_ops: int | None = None, skipped: list[str] | None = None) -> dict[str, np.ndarray]:
    """Candidate starting points from the seeding heuristics, in the given order (cheapest first).

    A heuristic proposing more placements than are left of ``max_placements`` is skipped (its
    placements would be simulated once each; a searching one, the layer split, also spends its
    search's simulations from them); one marked quadratic is skipped when the graph has
    more than ``max_ops`` ops. A heuristic that does not apply here (``NotApplicable``) is skipped.
    Placements equal to an earlier seed's are dropped. ``skipped`` collects why each was left out.
    Nothing here reads the clock."""
    gpus = gpu_devices(problem)
    out: dict[str, np.ndarray] = {}
    skipped = skipped if skipped is not None else []
    searched = 0  # placements a searching heuristic simulated while building its seed
    for name in names:
        s = SEEDS[name]
        left = None if max_placements is None else max_placements - len(out) - searched
        if left is not None and (left < 1 or (s.searches and s.placements(problem, gpus) > left)):
            skipped.append(f"{name} (no seeding placements left)")
            continue
        if s.quadratic and max_ops is not None and problem.n_ops > max_ops:
            skipped.append(f"{name} (n^2 heuristic, {problem.n_ops} ops > seed_max_ops={max_ops})")
            continue
        try:
            before = ev.placements
            got = s.make(problem, ev, gpus)
            searched += ev.placements - before
            left = None if left is None else left - (ev.placements - before)
        except NotApplicable:
            skipped.append(f"{name} (does not apply)")
            continue
        for k, p in got.items():
            if left is not None and left < 1:
                skipped.append(f"{k} (no seeding placements left)")
                break
            if not any(np.array_equal(p, q) for q in out.values()):
                out[k] = np.asarray(p, dtype=np.int64)
                left = None if left is None else left - 1
    return out


# ---------------------------------------------------------------------- configs
def _seed_checks(cfg) -> list[tuple[bool, str, str]]:
    names = [s for s in cfg.seeds.split(",") if s]
    return [(cfg.placements >= 1, "placements", ">= 1"),
            (cfg.batch >= 1, "batch", ">= 1"),
            (0.0 < cfg.seed_share <= 1.0, "seed_share", "in (0, 1]"),
            (cfg.seed_max_ops >= 1, "seed_max_ops", ">= 1"),
            (all(s in SEEDS for s in names), "seeds", f"a comma-separated list of {', '.join(SEEDS)}"),
            (cfg.start is None or all(isinstance(d, int) and d >= 0 for d in cfg.start), "start",
             "a sequence of device indices, one per op")]


def _normalise_start(cfg) -> None:
    if cfg.start is not None and not isinstance(cfg.start, tuple):
        try:
            start = tuple(int(d) for d in np.asarray(getattr(cfg.start, "devices", cfg.start)).ravel())
        except (TypeError, ValueError):
            start = ("?",)
        object.__setattr__(cfg, "start", start)


@dataclass(frozen=True)
class LocalSearchConfig(MethodConfig):
    """Iterated hill climbing over the simulator."""

    placements: int = 20000  # placements simulated in all, seeding included (Budget.placements overrides)
    batch: int = 8  # moves proposed and simulated together per step; the best of them is taken
    patience: int = 20  # steps without a new best before restarting from the best with a kick
    kick: int = 4  # random unit moves applied to the best placement at a restart
    seeds: str = DEFAULT_SEEDS  # seeding heuristics, comma-separated, run cheapest first
    seed_share: float = 0.25  # at most this share of the placement budget goes to simulating seeds
    seed_max_ops: int = 20000  # graphs with more ops skip the n^2 (or worse) seeding heuristics
    start: Any = None  # a starting placement (one device per op) instead of the seeding heuristics

    def __post_init__(self):
        _normalise_start(self)
        super().__post_init__()

    @classmethod
    def method_name(cls):
        return "local-search"

    def checks(self):
        return _seed_checks(self) + [(self.patience >= 1, "patience", ">= 1"), (self.kick >= 1, "kick", ">= 1")]


@dataclass(frozen=True)
class AnnealConfig(MethodConfig):
    """Simulated annealing (Kirkpatrick, Gelatt, Vecchi 1983) over the simulator."""

    placements: int = 20000  # placements simulated in all, seeding included (Budget.placements overrides)
    batch: int = 4  # moves proposed and simulated together per step; the best of them is the candidate
    t0: float = 0.02  # start temperature, as a fraction of the start objective
    t1: float = 1e-4  # end temperature (reached when the budget is spent), as a fraction of it
    seeds: str = DEFAULT_SEEDS  # seeding heuristics, comma-separated, run cheapest first
    seed_share: float = 0.25  # at most this share of the placement budget goes to simulating seeds
    seed_max_ops: int = 20000  # graphs with more ops skip the n^2 (or worse) seeding heuristics
    start: Any = None  # a starting placement (one device per op) instead of the seeding heuristics

    def __post_init__(self):
        _normalise_start(self)
        super().__post_init__()

    @classmethod
    def method_name(cls):
        return "anneal"

    def checks(self):
        return _seed_checks(self) + [(self.t0 > 0, "t0", "> 0"), (0 < self.t1 <= self.t0, "t1", "in (0, t0]")]


# ---------------------------------------------------------------------- the search
class _Search:
    """The state of one search: units, neighbours, current and best placements."""

    def __init__(self, problem, ev: Evaluator, rng: np.random.Generator):
        self.problem, self.ev, self.rng = problem, ev, rng
        self.units = colocation_units(problem)
        self.U = self.units.n_groups
        self.ok = np.isfinite(self.units.compute_us(problem))
        xadj, adj, _ = self.units.undirected_csr(problem.graph)
        self.xadj, self.adj = xadj, adj
        self.first = self.units.first
        self.cur = self.best = None  # (key, placement, SimResult)
        self.seg_prob, self.seg_mean = 0.3, 6.0

    def key(self, oom, objective_us, makespan_us) -> tuple[bool, float]:
        """Feasibility first: a placement that fits ranks by its objective, one that overflows by
        how much it overflows (the memory part of the simulator's objective, objective - makespan),
        so a search that starts out of memory heads for the nearest fit instead of trading overflow
        for step time. (Under a published objective the objective itself.)"""
        if oom and not self.ev.custom:
            return (True, float(objective_us) - float(makespan_us))
        return (bool(oom), float(objective_us))

    def simulate(self, p):
        r = self.ev.simulate(p)
        return (self.key(r.oom, r.objective_us, r.makespan_us), p, r)

    def offer(self, cand) -> None:
        if self.best is None or cand[0] < self.best[0]:
            self.best = cand

    def critical_units(self, r) -> np.ndarray:
        """Units of the ops on the critical path of a simulated step (walk back from the last op to
        whichever parent, or earlier op on the same device, finished last)."""
        g = self.problem.graph
        start, end, dev = r.start_us, r.end_us, r.device
        order = np.lexsort((start, dev))
        prev = np.full(g.n_ops, -1, dtype=np.int64)
        same = dev[order[1:]] == dev[order[:-1]]
        prev[order[1:][same]] = order[:-1][same]
        i = int(np.argmax(end))
        path = [i]
        for _ in range(g.n_ops):
            cands = list(g.predecessors(i))
            if prev[i] >= 0:
                cands.append(prev[i])
            if not cands or start[i] <= 0:
                break
            cands = np.asarray(cands)
            i = int(cands[np.argmax(end[cands])])
            path.append(i)
        return np.unique(self.units.op_group[path])

    def segment(self, u: int) -> np.ndarray:
        """Units of a run of consecutive ops (in topological order) starting at unit u's first op,
        with the ops mirroring them (a forward run and its backward run move together)."""
        g = self.problem.graph
        L = int(self.rng.geometric(1.0 / self.seg_mean))
        a = int(self.first[u])
        ops = np.arange(a, min(g.n_ops, a + L))
        mir = g.mirror[ops]
        back = np.flatnonzero(np.isin(g.mirror, ops))
        ops = np.unique(np.concatenate([ops, mir[mir >= 0], back]))
        return np.unique(self.units.op_group[ops])

    def propose(self, p: np.ndarray, critical: np.ndarray) -> np.ndarray | None:
        rng = self.rng
        u = int(rng.choice(critical)) if len(critical) and rng.random() < 0.5 else int(rng.integers(self.U))
        us = self.segment(u) if rng.random() < self.seg_prob else np.array([u])
        here = p[self.first[u]]
        ok = self.ok[us].all(axis=0)
        devs = np.flatnonzero(ok)
        devs = devs[devs != here]
        if len(devs) == 0:
            return None
        nb = self.adj[self.xadj[u]:self.xadj[u + 1]]
        nbd = np.unique(p[self.first[nb]]) if len(nb) else np.empty(0, dtype=np.int64)
        nbd = nbd[(nbd != here) & ok[nbd]]
        d = int(rng.choice(nbd)) if len(nbd) and rng.random() < 0.5 else int(rng.choice(devs))
        q = p.copy()
        for v in us:
            q[self.units.groups[v]] = d
        return q

    def kick(self, p: np.ndarray, moves: int) -> np.ndarray:
        q = p.copy()
        for _ in range(moves):
            u = int(self.rng.integers(self.U))
            devs = np.flatnonzero(self.ok[u])
            q[self.units.groups[u]] = int(self.rng.choice(devs))
        return q


def search(problem, seed: int, ev: Evaluator, cfg, anneal: bool):
    """The shared loop of ``local-search`` and ``anneal``; returns (best placement, notes).

    Stops when the evaluator's placement budget is spent (``ev.out_of_budget()``); nothing here
    reads the clock (an opt-in ``Budget.seconds`` is enforced by the evaluator)."""
    if getattr(ev.objective, "contiguous", False):  # a published objective: moves that keep contiguity
        from placer.objectives.search import interval_search

        return interval_search(problem, ev.objective, ev, seed, anneal, start=cfg.start,
                               **{k: getattr(cfg, k) for k in ("batch", "patience", "kick", "t0", "t1") if hasattr(cfg, k)})
    rng = np.random.default_rng(seed)
    s = _Search(problem, ev, rng)
    skipped: list[str] = []
    if cfg.start is not None:
        if len(cfg.start) != problem.n_ops:
            raise NotApplicable(type(cfg).method_name(), f"the start placement has {len(cfg.start)} entries "
                                f"for {problem.n_ops} ops", "give one device per op")
        starts = {"given": np.asarray(cfg.start, dtype=np.int64)}
    else:
        room = ev.remaining()
        share = None if room is None else max(1, int(cfg.seed_share * room))
        starts = seed_placements(problem, ev, [n for n in cfg.seeds.split(",") if n], share, cfg.seed_max_ops,
                                 skipped)
    origin = None
    for name, p in starts.items():
        if ev.out_of_budget():
            break
        p = repair_memory(problem, p, s.units)
        cand = s.simulate(p)
        if s.cur is None or cand[0] < s.cur[0]:
            s.cur, origin = cand, name
        s.offer(cand)
    if s.cur is None:
        raise NotApplicable(type(cfg).method_name(), "no seeding heuristic gave a starting placement",
                            "give more seeds (seeds=...) or a start placement")
    critical = s.critical_units(s.cur[2])
    stale, moves, accepted = 0, 0, 0
    f0 = float(s.cur[2].objective_us)  # the start's objective (its key is its overflow when it does not fit)
    while not ev.out_of_budget():
        room = ev.remaining()
        # keep one placement for the full simulation of an accepted move (unless only one is left)
        k_props = cfg.batch if room is None else max(1, min(cfg.batch, room - 1))
        props = [q for q in (s.propose(s.cur[1], critical) for _ in range(k_props)) if q is not None]
        if not props:
            break
        br = ev.evaluate_batch(np.stack(props))
        moves += len(props)
        keys = [s.key(br.oom[j], br.objective_us[j], br.makespan_us[j]) for j in range(len(props))]
        k = min(range(len(props)), key=keys.__getitem__)
        top_key = keys[k]
        if anneal:
            T = f0 * cfg.t0 * (cfg.t1 / cfg.t0) ** ev.fraction_used()
            delta = top_key[1] - s.cur[0][1]
            worse_mem = top_key[0] and not s.cur[0][0]
            take = top_key < s.cur[0] or (not worse_mem and T > 0 and rng.random() < math.exp(-delta / T))
        else:
            take = top_key < s.cur[0]
        improved = s.best is None or top_key < s.best[0]
        if take and not ev.out_of_budget():  # the full simulation gives the critical path for the next proposals
            s.cur = s.simulate(props[k])
            s.offer(s.cur)
            critical = s.critical_units(s.cur[2])
            accepted += 1
        elif improved:
            s.offer((top_key, props[k], None))
        stale = 0 if improved else stale + 1
        if not anneal and stale >= cfg.patience and not ev.out_of_budget():
            s.cur = s.simulate(s.kick(s.best[1], cfg.kick))
            s.offer(s.cur)
            critical = s.critical_units(s.cur[2])
            stale = 0
    notes = [f"started from {origin} ({f0:.1f} us) among {len(starts)} seed(s)",
             f"{moves} moves simulated, {accepted} accepted"]
    if skipped:
        notes.append("seeds skipped: " + "; ".join(skipped))
    if s.best[0][0]:
        notes.append("OOM: no memory-feasible placement found")
    return s.best[1], notes


@register("local-search", "iterated hill climbing over the simulator, one op or colocation group per move, "
          "seeded from the best classical heuristic", "search", LocalSearchConfig,
          paper="local search over a simulator (Baechi section 6; Placeto's comparisons)", version=1)
def local_search(problem, seed: int, ev: Evaluator, cfg: LocalSearchConfig):
    p, notes = search(problem, seed, ev, cfg, anneal=False)
    return ev.result("local-search", p, notes=notes)


@register("anneal", "simulated annealing over the simulator, one op or colocation group per move", "search",
          AnnealConfig, paper="Kirkpatrick, Gelatt, Vecchi 1983", version=1)
def anneal(problem, seed: int, ev: Evaluator, cfg: AnnealConfig):
    p, notes = search(problem, seed, ev, cfg, anneal=True)
    return ev.result("anneal", p, notes=notes)
