"""Search over the simulator: local search (iterated, best-of-sample hill climbing) and simulated
annealing (Kirkpatrick et al. 1983), each moving one op or one colocation group to another device.

Both start from the best of the classical heuristics (single GPU, the expert rule, METIS, m-TOPO,
m-ETF, HEFT, m-ETF / HEFT with the bus-aware communication model, m-SCT, cheapest first, for at most
a quarter of the time limit; their simulations are counted like every other), then repeat: propose ``batch`` moves from
the current placement, simulate them in one batch call through the evaluator (the simulator's
compiled batch path), and take the best; an accepted placement is simulated once more in full, for
the critical path the next moves draw from. A move takes a unit
(op or colocation group) either from the critical path of the current simulated step (half of the
time) or uniformly, and sends it either to a device one of its neighbours is on or to a random
device that can run all its ops; three moves in ten carry a whole run of consecutive ops (in
topological order, mean length 6) together with the ops mirroring them. Local search accepts only improvements and, after ``patience``
batches without one, restarts from its best placement with ``kick`` random unit moves (iterated
local search); annealing accepts a worse placement with probability exp(-delta / T), T cooling
geometrically from ``t0`` x the start objective to ``t1`` x it over the budget.

What is minimised is ``(OOM, objective)``: a memory-feasible placement always beats one that
overflows, then the simulator's memory-penalised step time.
"""

from __future__ import annotations

import math

import numpy as np

from placer.methods.base import Budget, Evaluator, register
from placer.methods.support import gpu_devices, make_units, repair_memory

DEFAULT_PLACEMENTS = 20000
DEFAULT_SECONDS = 60.0


SEEDS = ("single-gpu", "expert", "metis", "m-topo", "m-etf", "heft", "heft:bus", "m-etf:bus", "m-sct")


def seed_placements(problem, ev: Evaluator, names=SEEDS, seconds: float | None = None):
    """Candidate starting points from the classical heuristics (computed without the simulator,
    cheapest first; with ``seconds``, no new heuristic starts once that much wall-clock is spent)."""
    from placer.methods import list_scheduling as ls
    from placer.methods.expert import expert_placement
    from placer.methods.partitioning import metis_placement

    gpus = gpu_devices(problem)
    out = {}
    for name in names:
        if seconds is not None and out and ev.clock() >= seconds:
            break
        try:
            if name == "single-gpu":
                for d in gpus:
                    if np.isfinite(problem.compute_us[:, d]).all():
                        out[f"single-gpu:{d}"] = np.full(problem.n_ops, d, dtype=np.int64)
            elif name == "expert":
                out[name] = expert_placement(problem, ev)[0]
            elif name == "metis":
                out[name] = metis_placement(problem, gpus)
            elif name == "m-topo":
                out[name] = ls.topo_placement(problem)
            elif name in ("m-etf", "m-etf:bus"):
                out[name] = ls.etf_schedule(problem, ev.sim_params, gpus, comm=name[6:] or "free").placement
            elif name in ("heft", "heft:bus"):
                out[name] = ls.heft_schedule(problem, ev.sim_params, gpus, comm=name[5:] or "free").placement
            elif name == "m-sct":
                out[name] = ls.sct_schedule(problem, ev.sim_params, gpus).placement
        except (ValueError, RuntimeError):  # a heuristic that does not apply here is skipped
            continue
    return out


class _Search:
    """The state of one search: units, neighbours, current and best placements."""

    def __init__(self, problem, ev: Evaluator, rng: np.random.Generator):
        self.problem, self.ev, self.rng = problem, ev, rng
        self.units = make_units(problem)
        self.U = self.units.n_units
        self.ok = np.isfinite(self.units.compute_us)
        xadj, adj, _ = self.units.undirected_csr()
        self.xadj, self.adj = xadj, adj
        self.first = np.array([m[0] for m in self.units.members], dtype=np.int64)
        self.cur = self.best = None  # (key, placement, SimResult)
        self.seg_prob, self.seg_mean = 0.3, 6.0

    @staticmethod
    def key(r) -> tuple[bool, float]:
        return (bool(r.oom), float(r.objective))

    def simulate(self, p):
        r = self.ev.simulate(p)
        return (self.key(r), p, r)

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
        return np.unique(self.units.unit_of[path])

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
        return np.unique(self.units.unit_of[ops])

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
            q[self.units.members[v]] = d
        return q

    def kick(self, p: np.ndarray, moves: int) -> np.ndarray:
        q = p.copy()
        for _ in range(moves):
            u = int(self.rng.integers(self.U))
            devs = np.flatnonzero(self.ok[u])
            q[self.units.members[u]] = int(self.rng.choice(devs))
        return q


def search(problem, budget: Budget, seed: int, ev: Evaluator, anneal: bool, batch: int = 8, patience: int = 20,
           kick: int = 4, t0: float = 0.02, t1: float = 1e-4, start=None, seeds=None):
    """The shared loop of ``local-search`` and ``anneal``; returns (best placement, notes)."""
    rng = np.random.default_rng(seed)
    s = _Search(problem, ev, rng)
    limit = budget.placements if budget.placements is not None else DEFAULT_PLACEMENTS
    seconds = budget.seconds if budget.seconds is not None else (DEFAULT_SECONDS if budget.placements is None else None)
    b = Budget(limit, seconds)
    seed_s = None if seconds is None else 0.25 * seconds  # at most a quarter of the time on seeding
    starts = {"given": np.asarray(start, dtype=np.int64)} if start is not None else seed_placements(
        problem, ev, seeds or SEEDS, seed_s)
    origin = None
    for name, p in starts.items():
        if ev.out_of_budget(b):
            break
        p = repair_memory(problem, p, s.units)
        cand = s.simulate(p)
        if s.cur is None or cand[0] < s.cur[0]:
            s.cur, origin = cand, name
        s.offer(cand)
    if s.cur is None:
        raise RuntimeError("no starting placement could be evaluated within the budget")
    critical = s.critical_units(s.cur[2])
    stale, moves, accepted = 0, 0, 0
    f0 = s.cur[0][1]
    while not ev.out_of_budget(b):
        room = batch if limit is None else max(0, min(batch, limit - ev.placements - 1))
        props = [q for q in (s.propose(s.cur[1], critical) for _ in range(room)) if q is not None]
        if not props:
            break
        br = ev.evaluate_batch(np.stack(props))
        moves += len(props)
        k = min(range(len(props)), key=lambda j: (bool(br.oom[j]), float(br.objective[j])))
        top_key = (bool(br.oom[k]), float(br.objective[k]))
        if anneal:
            frac = min(1.0, max(ev.placements / limit if limit else 0.0,
                                ev.clock() / seconds if seconds else 0.0))
            T = f0 * t0 * (t1 / t0) ** frac
            delta = top_key[1] - s.cur[0][1]
            worse_mem = top_key[0] and not s.cur[0][0]
            take = top_key < s.cur[0] or (not worse_mem and T > 0 and rng.random() < math.exp(-delta / T))
        else:
            take = top_key < s.cur[0]
        improved = s.best is None or top_key < s.best[0]
        if take:  # the full simulation gives the critical path for the next proposals
            s.cur = s.simulate(props[k])
            s.offer(s.cur)
            critical = s.critical_units(s.cur[2])
            accepted += 1
        elif improved:
            s.offer((top_key, props[k], None))
        stale = 0 if improved else stale + 1
        if not anneal and stale >= patience and not ev.out_of_budget(b):
            s.cur = s.simulate(s.kick(s.best[1], kick))
            s.offer(s.cur)
            critical = s.critical_units(s.cur[2])
            stale = 0
    notes = [f"started from {origin} ({f0:.1f} us)", f"{moves} moves simulated, {accepted} accepted"]
    if s.best[0][0]:
        notes.append("OOM: no memory-feasible placement found")
    return s.best[1], notes


@register("local-search", "iterated hill climbing over the simulator, one op or colocation group per move, "
          "seeded from the best classical heuristic", "search", "local search over a simulator (Baechi section 6; "
          "Placeto's comparisons)")
def local_search(problem, budget: Budget, seed: int, ev: Evaluator, batch: int = 8, patience: int = 20, kick: int = 4,
                 start=None, **_):
    p, notes = search(problem, budget, seed, ev, anneal=False, batch=batch, patience=patience, kick=kick, start=start)
    return ev.result("local-search", p, params={"batch": batch, "patience": patience, "kick": kick}, notes=notes)


@register("anneal", "simulated annealing over the simulator, one op or colocation group per move", "search",
          "Kirkpatrick, Gelatt, Vecchi 1983")
def anneal(problem, budget: Budget, seed: int, ev: Evaluator, batch: int = 4, t0: float = 0.02, t1: float = 1e-4,
           start=None, **_):
    p, notes = search(problem, budget, seed, ev, anneal=True, batch=batch, t0=t0, t1=t1, start=start)
    return ev.result("anneal", p, params={"batch": batch, "t0": t0, "t1": t1}, notes=notes)
