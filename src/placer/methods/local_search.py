"""Search over the simulator: local search (iterated, best-of-sample hill climbing) and simulated
annealing (Kirkpatrick et al. 1983), each moving one op or one colocation group to another device.

Both start from the best of the classical heuristics (:data:`placer.methods.starts.SEEDS`: single GPU, the expert rule,
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

from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from numba import njit

from placer.grouping import colocation_units
from placer.methods.base import Evaluator, MethodConfig, NotApplicable, Range, register
from placer.methods.search import best_start, climb, interval_search
from placer.methods.starts import DEFAULT_SEEDS, SEEDS_HELP, seed_names_ok, seed_placements
from placer.methods.memory_repair import repair_memory
from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the cache=True function below: numba refuses one it cannot cache


# ---------------------------------------------------------------------- configs
def _seed_checks(cfg) -> list[tuple[bool, str, str]]:
    return [(seed_names_ok(cfg.seeds), "seeds", SEEDS_HELP),
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
    batch: Annotated[int, Range(">= 1")] = 8  # moves proposed and simulated together per step; the best of them is taken
    patience: Annotated[int, Range(">= 1")] = 20  # steps without a new best before restarting from the best with a kick
    kick: Annotated[int, Range(">= 1")] = 4  # random unit moves applied to the best placement at a restart
    seeds: str = DEFAULT_SEEDS  # seeding heuristics, comma-separated, run cheapest first
    seed_share: Annotated[float, Range("in (0, 1]")] = 0.25  # at most this share of the placement budget goes to simulating seeds
    seed_max_ops: Annotated[int, Range(">= 1")] = 20000  # graphs with more ops skip the n^2 (or worse) seeding heuristics
    start: Any = None  # a starting placement (one device per op) instead of the seeding heuristics

    def __post_init__(self):
        _normalise_start(self)
        super().__post_init__()

    @classmethod
    def method_name(cls):
        return "local-search"

    def checks(self):
        return _seed_checks(self)


@dataclass(frozen=True)
class AnnealConfig(MethodConfig):
    """Simulated annealing (Kirkpatrick, Gelatt, Vecchi 1983) over the simulator."""

    placements: int = 20000  # placements simulated in all, seeding included (Budget.placements overrides)
    batch: Annotated[int, Range(">= 1")] = 4  # moves proposed and simulated together per step; the best of them is the candidate
    t0: Annotated[float, Range("> 0")] = 0.02  # start temperature, as a fraction of the start objective
    t1: float = 1e-4  # end temperature (reached when the budget is spent), as a fraction of it
    seeds: str = DEFAULT_SEEDS  # seeding heuristics, comma-separated, run cheapest first
    seed_share: Annotated[float, Range("in (0, 1]")] = 0.25  # at most this share of the placement budget goes to simulating seeds
    seed_max_ops: Annotated[int, Range(">= 1")] = 20000  # graphs with more ops skip the n^2 (or worse) seeding heuristics
    start: Any = None  # a starting placement (one device per op) instead of the seeding heuristics

    def __post_init__(self):
        _normalise_start(self)
        super().__post_init__()

    @classmethod
    def method_name(cls):
        return "anneal"

    def checks(self):
        return _seed_checks(self) + [(0 < self.t1 <= self.t0, "t1", "in (0, t0]")]


# ---------------------------------------------------------------------- the critical path
def critical_path(graph, start_us: np.ndarray, end_us: np.ndarray, device: np.ndarray) -> np.ndarray:
    """The ops of a simulated step's critical path, last first: from the op that ends last (the first
    such), step back to whichever of its parents, or the op before it on its device (by start time,
    then index), ended last (the first such, parents in the graph's order before the device's), until
    an op that starts at 0 or has neither; at most n_ops steps. The walk is compiled
    (:func:`_walk_back`); what it returns is what the same walk in Python returns."""
    n = graph.n_ops
    if n == 0:
        return np.empty(0, dtype=np.int64)
    start = np.ascontiguousarray(start_us, dtype=np.float64)
    end = np.ascontiguousarray(end_us, dtype=np.float64)
    dev = np.asarray(device)
    order = np.lexsort((start, dev))
    prev = np.full(n, -1, dtype=np.int64)
    same = dev[order[1:]] == dev[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    return _walk_back(graph.pred_ptr, graph.pred_idx, prev, start, end, int(np.argmax(end)))


@njit(cache=True, nogil=True)
def _walk_back(pred_ptr, pred_idx, prev, start, end, i):  # pragma: no cover - compiled
    n = len(end)
    path = np.empty(n + 1, dtype=np.int64)
    path[0] = i
    k = 1
    for _ in range(n):
        a, b, p = pred_ptr[i], pred_ptr[i + 1], prev[i]
        if (b == a and p < 0) or start[i] <= 0:
            break
        best, bv = -1, 0.0
        for j in range(a, b + 1):  # the parents in order, then the op before it on its device
            c = pred_idx[j] if j < b else p
            if c < 0:
                continue
            v = end[c]
            if best < 0 or (not np.isnan(bv) and (np.isnan(v) or v > bv)):  # np.argmax: the first max, a NaN first
                best, bv = c, v
        i = best
        path[k] = i
        k += 1
    return path[:k]


@njit(cache=True, nogil=True)
def _first_at_least(sorted_values, x):  # pragma: no cover - compiled
    """np.searchsorted(sorted_values, x) (side "left"), written out: numba compiles it in a fraction
    of the time its np.searchsorted takes."""
    lo, hi = 0, len(sorted_values)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _segment_units(a, L, mirror, by_mirror, mirrored, op_group):  # pragma: no cover - compiled
    """Units of ops a..a+L-1 (within the graph), the ops they mirror and the ops mirroring them
    (``by_mirror``: ops sorted by the op they mirror, ``mirrored`` that op), sorted, each once (what
    np.unique gives; an insertion sort, the runs being short, and quick for numba to compile)."""
    b = min(len(mirror), a + L)
    lo, hi = _first_at_least(mirrored, a), _first_at_least(mirrored, b)
    units = np.empty(2 * (b - a) + hi - lo, dtype=np.int64)
    k = 0
    for j in range(a, b + hi - lo):
        for side in range(2):
            if j < b:
                op = j if side == 0 else mirror[j]
            elif side == 0:
                op = by_mirror[lo + j - b]
            else:
                op = -1
            if op < 0:
                continue
            v = op_group[op]
            m = k  # insert v into units[:k], kept sorted, unless it is there
            while m > 0 and units[m - 1] > v:
                m -= 1
            if m > 0 and units[m - 1] == v:
                continue
            for t in range(k, m, -1):
                units[t] = units[t - 1]
            units[m] = v
            k += 1
    return units[:k]


@njit(cache=True, nogil=True)
def _targets(us, u, p, ok, xadj, adj, first):  # pragma: no cover - compiled
    """(devices every unit of ``us`` can run on but unit u's, its neighbours' devices among them,
    each sorted, once each)."""
    D = ok.shape[1]
    here = p[first[u]]
    can = np.ones(D, dtype=np.bool_)
    for v in us:
        for d in range(D):
            can[d] = can[d] and ok[v, d]
    devs = np.empty(D, dtype=np.int64)
    m = 0
    for d in range(D):
        if can[d] and d != here:
            devs[m] = d
            m += 1
    seen = np.zeros(D, dtype=np.bool_)
    for j in range(xadj[u], xadj[u + 1]):
        seen[p[first[adj[j]]]] = True
    nbd = np.empty(D, dtype=np.int64)
    k = 0
    for d in range(D):
        if seen[d] and d != here and can[d]:
            nbd[k] = d
            k += 1
    return devs[:m], nbd[:k]


# ---------------------------------------------------------------------- the search
class _Search:
    """The move set of one search (:func:`placer.methods.search.climb`): units, neighbours, and the
    critical path of the current placement. Entries are (key, placement, SimResult)."""

    def __init__(self, problem, ev: Evaluator, rng: np.random.Generator):
        self.problem, self.ev, self.rng = problem, ev, rng
        self.units = colocation_units(problem)
        self.U = self.units.n_groups
        self.ok = np.isfinite(self.units.compute_us(problem))
        xadj, adj, _ = self.units.undirected_csr(problem.graph)
        self.xadj, self.adj = xadj, adj
        self.first = self.units.first
        self.by_mirror = np.argsort(problem.graph.mirror, kind="stable")  # ops by the op they mirror (-1 first)
        self.mirrored = problem.graph.mirror[self.by_mirror]
        self.ok = np.ascontiguousarray(self.ok)
        self.xadj, self.adj = np.asarray(xadj, dtype=np.int64), np.asarray(adj, dtype=np.int64)
        self.critical_of = self.critical = None  # the current entry and the units on its critical path
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

    def critical_units(self, r) -> np.ndarray:
        """Units of the ops on the critical path of a simulated step (walk back from the last op to
        whichever parent, or earlier op on the same device, finished last; :func:`critical_path`)."""
        on = np.zeros(self.U, dtype=bool)
        on[self.units.op_group[critical_path(self.problem.graph, r.start_us, r.end_us, r.device)]] = True
        return np.flatnonzero(on)  # np.unique's answer (sorted, each once), without its sort

    def segment(self, u: int) -> np.ndarray:
        """Units of a run of consecutive ops (in topological order) starting at unit u's first op,
        with the ops mirroring them (a forward run and its backward run move together)."""
        L = int(self.rng.geometric(1.0 / self.seg_mean))
        return _segment_units(int(self.first[u]), L, self.problem.graph.mirror, self.by_mirror, self.mirrored,
                              self.units.op_group)

    def propose(self, p: np.ndarray, critical: np.ndarray) -> np.ndarray | None:
        """One move from ``p`` (the random draws, in order: which unit, from the critical path or
        not; whether a segment and its length; which device, a neighbour's or any). ``rng.choice(a)``
        is written ``a[rng.integers(len(a))]``, the same draw; finding the units and devices is compiled."""
        rng = self.rng
        u = int(critical[rng.integers(len(critical))]) if len(critical) and rng.random() < 0.5 \
            else int(rng.integers(self.U))
        us = self.segment(u) if rng.random() < self.seg_prob else np.array([u], dtype=np.int64)
        p = np.asarray(p, dtype=np.int64)
        devs, nbd = _targets(us, u, p, self.ok, self.xadj, self.adj, self.first)
        if len(devs) == 0:
            return None
        d = int(nbd[rng.integers(len(nbd))]) if len(nbd) and rng.random() < 0.5 else int(devs[rng.integers(len(devs))])
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

    # -- what climb() asks of a move set
    def batch_size(self, batch: int) -> int:
        room = self.ev.remaining()
        # keep one placement for the full simulation of an accepted move (unless only one is left)
        return batch if room is None else max(1, min(batch, room - 1))

    def proposals(self, cur, k: int) -> list:
        if self.critical_of is not cur:  # the full simulation of the current placement gives its critical path
            self.critical_of, self.critical = cur, self.critical_units(cur[2])
        return [q for q in (self.propose(cur[1], self.critical) for _ in range(k)) if q is not None]

    def evaluate(self, states: list):
        br = self.ev.evaluate_batch(np.stack(states))
        keys = [self.key(br.oom[j], br.objective_us[j], br.makespan_us[j]) for j in range(len(states))]
        return keys, min(range(len(states)), key=keys.__getitem__)

    def accept(self, p, key):
        return None if self.ev.out_of_budget() else self.simulate(p)

    def restart(self, p, kick: int):
        return None if self.ev.out_of_budget() else self.simulate(self.kick(p, kick))

    def may_worsen(self, top, cur) -> bool:
        return not (top[0] and not cur[0])  # never from a placement that fits to one that does not


def search(problem, seed: int, ev: Evaluator, cfg, anneal: bool, more_starts: dict | None = None,
           give_up: int | None = None):
    """The shared loop of ``local-search`` and ``anneal`` (:func:`placer.methods.search.climb`);
    returns (best placement, notes). ``more_starts`` ({name: placement}) are candidates after the
    seeds (``multilevel``'s coarse result); ``give_up``: hill climbing ends after that many restarts
    in a row without a new best (``multilevel``'s coarse phase), else when the budget is spent.

    Stops when the evaluator's placement budget is spent (``ev.out_of_budget()``); nothing here
    reads the clock (an opt-in ``Budget.seconds`` is enforced by the evaluator)."""
    if getattr(ev.objective, "contiguous", False):  # a published objective: moves that keep contiguity
        return interval_search(problem, ev.objective, ev, seed, anneal, start=cfg.start, method=type(cfg).method_name(),
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
    for name, p in (more_starts or {}).items():
        if not any(np.array_equal(p, q) for q in starts.values()):
            starts[name] = np.asarray(p, dtype=np.int64)

    def evaluated():
        for k, (name, p) in enumerate(starts.items()):
            if ev.out_of_budget() and (k or not ev.time_up() or ev.remaining() == 0):
                break  # (the first start is evaluated when only a time limit has ended: an answer of its own)
            yield name, s.simulate(repair_memory(problem, p, s.units))

    cur, origin = best_start(evaluated())
    if cur is None:
        raise NotApplicable(type(cfg).method_name(), "no seeding heuristic gave a starting placement",
                            "give more seeds (seeds=...) or a start placement")
    f0 = float(cur[2].objective_us)  # the start's objective (its key is its overflow when it does not fit)
    best, moves, accepted = climb(s, ev, rng, cur, f0, anneal, cfg.batch, getattr(cfg, "patience", None),
                                  getattr(cfg, "kick", None), getattr(cfg, "t0", None), getattr(cfg, "t1", None),
                                  give_up=give_up)
    notes = [f"started from {origin} ({f0:.1f} us) among {len(starts)} seed(s)",
             f"{moves} moves simulated, {accepted} accepted"]
    if skipped:
        notes.append("seeds skipped: " + "; ".join(skipped))
    if best[0][0]:
        notes.append("OOM: no memory-feasible placement found")
    return best[1], notes


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
