"""The parts of exact-published (:mod:`placer.methods.exact_published`) that give its bounds: the
static lower bounds both solvers start from (:func:`path_heads`, :func:`static_bound`), and the CP-SAT
model of the published IPs (:func:`cp_sat_solve`) with its path rows and symmetry rule. Why each
keeps the model exact and the bound valid: docs/bounds_published.md."""

from __future__ import annotations

import time

import numpy as np

from placer.objectives.model import model_for


def machine_list(m, latency: bool) -> tuple[list[tuple[str, list[int]]], list[int]]:
    """The published IPs' machines: each accelerator its own; the CPUs one shared machine for the
    latency objective, one each for throughput (Tarnawski et al. 2020, section 4). Returns the
    (kind, devices) list and the indices of the accelerator machines."""
    accs = [int(d) for d in np.flatnonzero(m.acc)]
    cpus = [int(d) for d in np.flatnonzero(~m.acc)]
    machines = ([("cpu", cpus)] if latency and cpus else [("dev", [d]) for d in cpus] if not latency else [])
    machines += [("dev", [d]) for d in accs]
    return machines, [k for k, (_, ds) in enumerate(machines) if m.acc[ds[0]]]

MILP_STATUS = {0: "Optimal", 1: "Node or time limit reached", 2: "Infeasible", 3: "Unbounded"}  # scipy's codes


def path_heads(m) -> np.ndarray:
    """(n,) per op the longest path ending at it (itself included), each op at its fastest time on
    any device it can run on and every transfer free: a lower bound on the op's completion ``Lat_v``
    in every latency split. On the CPU, Lat_v >= Lat_u + t_v along each edge; on an accelerator,
    Lat_v is its piece's Finish >= Start + the time of every op of the piece, Start >= Lat_u of each
    op u outside feeding it, and a path into the piece stays in it up to v (contiguity). So
    Lat_v >= head_v by induction over a topological order (ops are stored in one)."""
    fast = np.where(np.isfinite(m.t_us), m.t_us, np.inf).min(axis=1)
    fast = np.where(np.isfinite(fast), fast, 0.0)
    head = fast.copy()
    for v in range(m.n):
        lo, hi = m.pred_ptr[v], m.pred_ptr[v + 1]
        if hi > lo:
            head[v] = fast[v] + head[m.pred_idx[lo:hi]].max()
    return head


def long_paths(m, count: int = 4) -> list[list[int]]:
    """A few long source-to-sink paths (ops in order), distinct: the longest under each op's fastest
    time, its slowest (CPU) time, and its fastest time plus its transfer cost, and the longest by op count."""
    fin = np.isfinite(m.t_us)
    fast = np.where(fin, m.t_us, np.inf).min(axis=1)
    slow = np.where(fin, m.t_us, -np.inf).max(axis=1)
    weights = [fast, slow, fast + m.cost_us, np.ones(m.n)]
    out = []
    for w in weights[:count]:
        w = np.where(np.isfinite(w), w, 0.0)
        best, back = w.copy(), np.full(m.n, -1, dtype=np.int64)
        for v in range(m.n):
            pv = m.pred_idx[m.pred_ptr[v]:m.pred_ptr[v + 1]]
            if len(pv):
                u = int(pv[np.argmax(best[pv])])
                best[v], back[v] = w[v] + best[u], u
        v = int(np.argmax(best)) if m.n else -1
        path = []
        while v >= 0:
            path.append(v)
            v = int(back[v])
        if path and path[::-1] not in out:
            out.append(path[::-1])
    return out


def static_bound(problem, objective, model=None) -> tuple[float, str]:
    """A lower bound on the objective that needs no search, and what it is: for ``latency`` the
    longest path at each op's fastest time (:func:`path_heads`); for ``throughput`` the larger of the
    busiest colocation group alone (its whole time on its fastest device) and all the work spread
    evenly over every device, transfers free."""
    m = model if model is not None else model_for(problem)
    if objective.name == "latency":
        return float(path_heads(m).max()) if m.n else 0.0, "critical path at each op's fastest time"
    t = np.where(np.isfinite(m.t_us), m.t_us, np.inf)
    _, cls = np.unique(m.coloc_rep, return_inverse=True)
    per = np.zeros((int(cls.max()) + 1, m.D))
    np.add.at(per, cls, t)
    fast = per.min(axis=1)
    fast = fast[np.isfinite(fast)]
    return float(max(fast.max(initial=0.0), fast.sum() / max(1, m.D))), "largest group alone, or all work over every device"


def identical_machines(m, machines) -> list[list[int]]:
    """Groups (of at least two) of interchangeable machines: the same kind (accelerator or CPU), the
    same time for every op and the same capacity. Transfer costs are per op, the same on every
    accelerator, so swapping two such machines' sets keeps every constraint and the objective."""
    out, seen = [], set()
    for a in range(len(machines)):
        if a in seen or len(machines[a][1]) != 1:
            continue
        da = machines[a][1][0]
        grp = [a]
        for b in range(a + 1, len(machines)):
            if b in seen or len(machines[b][1]) != 1:
                continue
            db = machines[b][1][0]
            if m.acc[da] == m.acc[db] and m.cap_bytes[da] == m.cap_bytes[db] and np.array_equal(m.t_us[:, da], m.t_us[:, db]):
                grp.append(b)
        seen.update(grp)
        if len(grp) > 1:
            out.append(grp)
    return out


def cp_solver(seconds: float | None, deterministic_s: float, workers: int, seed: int | None = None,
              least_s: float = 0.1):
    """A CP-SAT solver under a wall clock of ``seconds`` (at least ``least_s``), or, without one, under
    ``deterministic_s`` of deterministic time with interleaved workers (the same answer under any load)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    if seconds is not None:
        solver.parameters.max_time_in_seconds = float(max(least_s, seconds))
    else:
        solver.parameters.max_deterministic_time = float(deterministic_s)
        if workers > 1:
            solver.parameters.interleave_search = True
    solver.parameters.num_workers = int(workers)
    if seed is not None:
        solver.parameters.random_seed = int(seed) % (2**31)
    solver.parameters.catch_sigint_signal = False
    return solver


def cp_sat_solve(problem, objective, upper_us: float, seconds: float | None, deterministic_s: float, workers: int,
                 seed: int, hint: np.ndarray | None = None, model=None, floor_us: float = 0.0):
    """The same IP solved with CP-SAT (OR-Tools), exactly reformulated (docs/bounds_published.md):

    * every big-M row becomes the linear row it stands for, enforced by its literal
      (``Lat_v >= Finish_m`` only if x[c(v), m]; ``Start_m >= Lat_u`` only if CommIn[u, m]; CPU time
      only if x[c(v), cpu]), which drops nothing and adds nothing;
    * CommIn / CommOut and contiguity as clauses over the booleans (the IP's rows on 0/1 values);
    * times in integer ticks, each rounded down: every constraint is a sum of non-negative times, so
      the ticked model's optimum is at most the true one and its proven bound stays a lower bound;
    * symmetry: among interchangeable machines (:func:`identical_machines`) the first group of each
      comes after the first group of the one before (any solution, relabelled, meets this);
    * valid lower bounds on the objective and on each Lat_v (:func:`static_bound`, :func:`path_heads`);
    * ``hint``: the best placement known, relabelled to meet the symmetry rule, with the value it
      gives every variable of the model (a complete, feasible warm start).

    ``model``: the :class:`PublishedModel` to solve instead of the problem's own (:func:`sub_model`);
    ``floor_us``: a lower bound on the objective proven elsewhere (:func:`segment_bound`), added as one.

    Returns (placement or None, model incumbent (us), proven bound (us), status text)."""
    from ortools.sat.python import cp_model

    m = model if model is not None else model_for(problem)
    latency = objective.name == "latency"
    machines, acc_m = machine_list(m, latency)
    M = len(machines)
    _, cls = np.unique(m.coloc_rep, return_inverse=True)
    C = int(cls.max()) + 1
    dst = np.repeat(np.arange(m.n), np.diff(m.pred_ptr))
    src = m.pred_idx
    cross = cls[src] != cls[dst]
    t = np.where(np.isfinite(m.t_us), m.t_us, np.inf)
    ub_us = float(upper_us) * (1 + 1e-9) + 1e-6
    res = max(1e-6, ub_us / 1e9)  # ticks: the horizon is 1e9 of them; rounding loses < 1e-6 of it per term

    def tick(us):
        return int(np.floor(float(us) / res + 1e-9))

    UB = tick(ub_us) + 1
    mdl = cp_model.CpModel()
    tc = np.zeros((C, M))
    for c in range(C):
        ops = np.flatnonzero(cls == c)
        for k, (_, ds) in enumerate(machines):
            tc[c, k] = t[ops, ds[0]].sum()
    groups = identical_machines(m, machines)
    hk = None
    if hint is not None:  # the hint's machine per group, interchangeable machines relabelled by first use
        dev_machine = {d: k for k, (_, ds) in enumerate(machines) for d in ds}
        hk = np.array([dev_machine[int(hint[np.flatnonzero(cls == c)[0]])] for c in range(C)])
        for grp in groups:
            first = sorted(grp, key=lambda k: (np.flatnonzero(hk == k)[:1].tolist() or [C])[0])
            hk = np.array([grp[first.index(k)] if k in grp else k for k in hk])

    def boolean(value=None):
        v = mdl.NewBoolVar("")
        if hk is not None and value is not None:
            mdl.AddHint(v, int(bool(value)))
        return v

    on = (hk[:, None] == np.arange(M)[None, :]) if hk is not None else np.zeros((C, M), dtype=bool)
    x = [[boolean(on[c, k]) for k in range(M)] for c in range(C)]
    for c in range(C):
        for k in range(M):
            if not np.isfinite(tc[c, k]):
                mdl.Add(x[c][k] == 0)
        mdl.AddExactlyOne(x[c])
    memc = np.bincount(cls, weights=m.mem_bytes, minlength=C)
    ms = max(1.0, memc.max() / 1e12) if C else 1.0
    for k in acc_m:  # capacity rounded down as the sizes are: exact while sizes stay below 1e12 bytes
        terms = [(int(np.floor(memc[c] / ms)), x[c][k]) for c in range(C) if memc[c] > 0]
        if terms:
            mdl.Add(sum(w * v for w, v in terms) <= int(np.floor(m.cap_bytes[machines[k][1][0]] / ms)))
    order_edge = cross & ((m.forward[src] & m.forward[dst]) if not latency else np.ones_like(cross))
    pairs = sorted(set(zip(cls[src[order_edge]].tolist(), cls[dst[order_edge]].tolist())))
    preds = [[] for _ in range(C)]
    for a, b_ in pairs:
        preds[b_].append(a)
    for k in range(M):
        if not (m.acc[machines[k][1][0]] or objective.cpu_contiguous):
            continue
        below = set(np.flatnonzero(on[:, k]).tolist())  # the hint's z: its set and everything before it
        stack = list(below)
        while stack:
            for a in preds[stack.pop()]:
                if a not in below:
                    below.add(a)
                    stack.append(a)
        z = [boolean(c in below) for c in range(C)]
        for c in range(C):
            mdl.AddImplication(x[c][k], z[c])
        for a, b_ in pairs:
            mdl.AddImplication(z[b_], z[a])
            mdl.AddBoolOr([z[b_].Not(), x[b_][k], x[a][k].Not()])
    tgt = {}
    for u, v in zip(src[cross].tolist(), dst[cross].tolist()):
        tgt.setdefault(u, set()).add(int(cls[v]))
    cin, cout = {}, {}
    hin, hout = {}, {}
    for k in acc_m:
        for u, cs in tgt.items():
            if tick(m.cost_us[u]) <= 0 and not latency:
                continue
            cu = int(cls[u])
            hin[u, k] = not on[cu, k] and any(on[cv, k] for cv in cs)
            hout[u, k] = on[cu, k] and any(not on[cv, k] for cv in cs)
            cin[u, k], cout[u, k] = boolean(hin[u, k]), boolean(hout[u, k])
            for cv in cs:
                mdl.AddBoolOr([cin[u, k], x[cv][k].Not(), x[cu][k]])
                mdl.AddBoolOr([cout[u, k], x[cu][k].Not(), x[cv][k]])
    floor_us = max(static_bound(problem, objective, m)[0], float(floor_us))
    top = mdl.NewIntVar(min(tick(floor_us), UB), UB, "objective")
    top_hint = 0
    if not latency:
        for k in range(M):
            terms = [(tick(tc[c, k]), x[c][k], on[c, k]) for c in range(C) if np.isfinite(tc[c, k])]
            terms += [(tick(m.cost_us[u]), cin[u, k], hin[u, k]) for u in tgt if (u, k) in cin]
            terms += [(tick(m.cost_us[u]), cout[u, k], hout[u, k]) for u in tgt if (u, k) in cout]
            mdl.Add(sum(w * v for w, v, _ in terms if w) <= top)
            top_hint = max(top_hint, sum(w for w, _, h in terms if h))
    else:
        head = path_heads(m)
        k0 = 0 if machines and not m.acc[machines[0][1][0]] else None
        tcpu = [tick(t[v, machines[k0][1][0]]) if k0 is not None and np.isfinite(t[v, machines[k0][1][0]]) else 0
                for v in range(m.n)]  # an op the CPU cannot run is kept off it (x = 0): its time is never read
        work = {k: sum(tick(tc[c, k]) * on[c, k] for c in range(C) if np.isfinite(tc[c, k]))
                + sum(tick(m.cost_us[u]) * (hin[u, k] + hout[u, k]) for u in tgt) for k in acc_m}
        lat_h = np.zeros(m.n, dtype=np.int64)  # the hint's Lat, Start, Finish: the least fixpoint of the rows
        st_h, fin_h = dict.fromkeys(acc_m, 0), dict.fromkeys(acc_m, 0)
        if hk is not None:
            for _ in range(M + 2):
                for k in acc_m:
                    st_h[k] = max([int(lat_h[u]) for u in tgt if hin[u, k]], default=0)
                    fin_h[k] = st_h[k] + work[k]
                new = np.zeros(m.n, dtype=np.int64)
                for v in range(m.n):
                    pv = m.pred_idx[m.pred_ptr[v]:m.pred_ptr[v + 1]]
                    base = int(new[pv].max()) if len(pv) else 0
                    k = int(hk[cls[v]])
                    new[v] = base + tcpu[v] if k == k0 else max(base, fin_h[k])
                if np.array_equal(new, lat_h):
                    break
                lat_h = new
            lat_h = np.maximum(lat_h, [tick(h) for h in head])
        lat = []
        for v in range(m.n):
            lat.append(mdl.NewIntVar(min(tick(head[v]), UB), UB, f"lat{v}"))
            if hk is not None:
                mdl.AddHint(lat[v], int(min(lat_h[v], UB)))
            mdl.Add(top >= lat[v])
        top_hint = int(lat_h.max()) if m.n else 0
        if k0 is not None:
            for v in range(m.n):
                mdl.Add(lat[v] >= tcpu[v]).OnlyEnforceIf(x[cls[v]][k0])
        for u, v in zip(src.tolist(), dst.tolist()):
            mdl.Add(lat[v] >= lat[u])
            if k0 is not None:
                mdl.Add(lat[v] >= lat[u] + tcpu[v]).OnlyEnforceIf(x[cls[v]][k0])
        for k in acc_m:
            st, fin = mdl.NewIntVar(0, UB, f"start{k}"), mdl.NewIntVar(0, UB, f"finish{k}")
            if hk is not None:
                mdl.AddHint(st, int(min(st_h[k], UB)))
                mdl.AddHint(fin, int(min(fin_h[k], UB)))
            terms = [(tick(tc[c, k]), x[c][k]) for c in range(C) if np.isfinite(tc[c, k])]
            for u in tgt:
                mdl.Add(st >= lat[u]).OnlyEnforceIf(cin[u, k])
                terms += [(tick(m.cost_us[u]), cin[u, k]), (tick(m.cost_us[u]), cout[u, k])]
            mdl.Add(fin == st + sum(w * v for w, v in terms if w))
            for v in range(m.n):
                mdl.Add(lat[v] >= fin).OnlyEnforceIf(x[cls[v]][k])
        # redundant rows along a few long paths (valid: a path visits each accelerator piece at most once,
        # contiguity, and pieces it visits run one after another): the path's last Lat is at least the time of
        # each of its ops on the machine it is on plus, where it crosses from one machine to another, the
        # crossing op's transfer once for each accelerator side (its piece's CommOut and the next's CommIn)
        for path in long_paths(m):
            terms = []
            for v in path:
                c = int(cls[v])
                terms += [(tick(t[v, machines[k][1][0]]), x[c][k]) for k in range(M) if np.isfinite(tc[c, k])]
            for w, y in zip(path, path[1:]):
                cw, cy = int(cls[w]), int(cls[y])
                if cw == cy or tick(m.cost_us[w]) <= 0:
                    continue
                for k in acc_m:
                    sep = boolean(on[cw, k] != on[cy, k])
                    mdl.AddBoolOr([sep, x[cw][k].Not(), x[cy][k]])
                    mdl.AddBoolOr([sep, x[cy][k].Not(), x[cw][k]])
                    terms.append((tick(m.cost_us[w]), sep))
            mdl.Add(lat[path[-1]] >= sum(w * v for w, v in terms if w))
    if hk is not None:
        mdl.AddHint(top, int(min(max(top_hint, tick(floor_us)), UB)))
    for grp in groups:  # first-use order: x[c, b] only if machine a holds one of the groups before c
        for a, b_ in zip(grp, grp[1:]):
            used, used_h = None, False
            for c in range(C):
                if used is None:
                    mdl.Add(x[0][b_] == 0)
                else:
                    mdl.AddImplication(x[c][b_], used)
                used_h = used_h or bool(on[c, a])
                nxt = boolean(used_h)
                mdl.AddBoolOr([x[c][a]] + ([used] if used is not None else [])).OnlyEnforceIf(nxt)
                mdl.AddImplication(x[c][a], nxt)
                if used is not None:
                    mdl.AddImplication(used, nxt)
                used = nxt
    mdl.Minimize(top)
    solver = cp_solver(seconds, deterministic_s, workers, seed)
    status = solver.Solve(mdl)
    name = {cp_model.OPTIMAL: MILP_STATUS[0], cp_model.FEASIBLE: MILP_STATUS[1], cp_model.INFEASIBLE: MILP_STATUS[2],
            cp_model.UNKNOWN: MILP_STATUS[1]}.get(status, solver.StatusName(status))
    bound = max(float(solver.BestObjectiveBound()) * res, min(floor_us, ub_us))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, np.inf, bound, name
    place = np.empty(m.n, dtype=np.int64)
    for c in range(C):
        k = next(k for k in range(M) if solver.Value(x[c][k]))
        place[cls == c] = machines[k][1][0]
    return place, float(solver.ObjectiveValue()) * res, bound, name


def sub_model(m, ops: np.ndarray, free_first: bool = False):
    """The :class:`PublishedModel` of the graph induced by ``ops`` (sorted, so still in topological
    order), on the same machines, colocation dropped (a relaxation). ``free_first``: the first op
    keeps its transfer cost but takes no time and no memory (the articulation op closing the segment
    before, counted there: :func:`segment_bound`)."""
    from dataclasses import replace

    ops = np.asarray(ops, dtype=np.int64)
    pos = np.full(m.n, -1, dtype=np.int64)
    pos[ops] = np.arange(len(ops))

    def restrict(ptr, idx):
        out_ptr, out_idx = [0], []
        for v in ops:
            nb = pos[idx[ptr[v]:ptr[v + 1]]]
            out_idx.extend(nb[nb >= 0].tolist())
            out_ptr.append(len(out_idx))
        return np.array(out_ptr, dtype=np.int64), np.array(out_idx, dtype=np.int64)

    pp, pi = restrict(m.pred_ptr, m.pred_idx)
    sp, si = restrict(m.succ_ptr, m.succ_idx)
    t, mem = m.t_us[ops].copy(), m.mem_bytes[ops].copy()
    if free_first and len(ops):
        t[0] = np.where(np.isfinite(t[0]), 0.0, np.inf)
        mem[0] = 0.0
    return replace(m, n=len(ops), t_us=t, cost_us=m.cost_us[ops], mem_bytes=mem,
                   forward=m.forward[ops], pred_ptr=pp, pred_idx=pi, succ_ptr=sp, succ_idx=si,
                   coloc_rep=np.arange(len(ops), dtype=np.int64))


def articulation_ops(m) -> np.ndarray:
    """Ops a every other op is an ancestor or a descendant of, with no edge from an ancestor of a to a
    descendant of a (so every path between them passes a), in topological order."""
    anc = [0] * m.n
    for v in range(m.n):
        a = 0
        for u in m.pred_idx[m.pred_ptr[v]:m.pred_ptr[v + 1]]:
            a |= anc[u] | (1 << int(u))
        anc[v] = a
    desc = [0] * m.n
    for v in range(m.n - 1, -1, -1):
        d = 0
        for w in m.succ_idx[m.succ_ptr[v]:m.succ_ptr[v + 1]]:
            d |= desc[w] | (1 << int(w))
        desc[v] = d
    full = (1 << m.n) - 1
    out = []
    for a in range(m.n):
        if anc[a] | desc[a] | (1 << a) != full:
            continue
        # an edge from an ancestor of a to a descendant of a would bypass it
        if any(desc[a] >> int(w) & 1 for u in range(m.n) if anc[a] >> u & 1
               for w in m.succ_idx[m.succ_ptr[u]:m.succ_ptr[u + 1]]):
            continue
        out.append(a)
    return np.array(out, dtype=np.int64)


def segment_spans(m, max_ops: int = 40) -> list[tuple[int, int]]:
    """The segments (first op, last op) of the graph cut at articulation ops, each an articulation op
    closing it (the last: the last op), at most ``max_ops`` ops where the cuts allow."""
    cuts = [a for a in articulation_ops(m).tolist() if a < m.n - 1]
    segs, start, prev = [], 0, None  # prev: the last articulation op of the open segment (a place to cut)
    for a in cuts + [m.n - 1]:
        if prev is not None and a - start + 1 > max_ops:
            segs.append((start, prev))
            start = prev + 1
        prev = a
    segs.append((start, m.n - 1))
    return segs


def segment_bound(problem, objective, upper_us: float, seconds: float | None, deterministic_s: float,
                  workers: int, seed: int, max_ops: int = 40) -> tuple[float, int]:
    """A lower bound on the latency from sub-problems solved first (docs/bounds_published.md, item 7):
    the graph cut at articulation ops a_1 < ... < a_r into segments (each a_i closing its segment, at
    most ``max_ops`` ops where the cuts allow), each segment's latency IP solved alone by CP-SAT, the
    sum of their proven bounds. Returns (bound in us, segments)."""
    m = model_for(problem)
    if objective.name != "latency" or m.n == 0:
        return 0.0, 0
    segs = segment_spans(m, max_ops)
    if len(segs) < 2:  # nothing to add up
        return 0.0, 0
    t0 = time.monotonic()
    lbs, open_ = [0.0] * len(segs), list(range(len(segs)))
    for rnd in (0, 1):  # a first pass with half the time each; the time left then goes to those not closed
        todo = open_
        open_ = []
        for i, j in enumerate(todo):
            a, b = segs[j]
            left = None if seconds is None else seconds - (time.monotonic() - t0)
            if left is not None and left <= 0.05 and rnd:
                break
            each = None if seconds is None else max(0.05, left / (len(todo) - i) / (2 if rnd == 0 else 1))
            sm = sub_model(m, np.arange(max(0, a - 1), b + 1), free_first=a > 0)
            _, _, lb, status = cp_sat_solve(problem, objective, upper_us, each, deterministic_s / len(segs), workers,
                                            seed, model=sm)
            lbs[j] = max(lbs[j], lb if status != "Infeasible" else static_bound(problem, objective, sm)[0])
            if status != "Optimal":
                open_.append(j)
        if not open_ or seconds is None:
            break
    bounds = float(sum(lbs))
    return bounds, len(segs)
