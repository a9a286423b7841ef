"""Grouping: fewer, bigger nodes to place. Ops are partitioned into groups, a method places groups,
and the group placement is expanded back to every op (Placeto section 2: "we partition ops into
predetermined groups and place ops from the same group on the same device").

This module is the one place where ops are merged into groups: every method that places groups
(the classical placers' colocation units, Post's softmax units, Placeto's op groups) gets a
:class:`Grouping` from here, and ``--grouping`` names one with the spec language of
:func:`parse_grouping`:

* ``ops``: every op its own group, the graph's colocation groups merged (what must share a device
  and nothing more; :func:`colocation_units`). The classical placers place these.
* ``colocate``: the colocation rules of :func:`colocate` (parameters with their users, updates with
  their parameter, the graph's own colocation groups), kept acyclic.
* ``merge:N``: Placeto appendix A.6 Merge-and-Colocate down to N groups (:func:`merge_and_colocate`).
* ``metis:K``: METIS coarsening into K groups (:func:`metis_groups`).
* ``contiguous:N``: colocation groups and backward/forward mirror pairs merged, then cut into N
  chunks of about equal work in op order (:func:`contiguous`; the group graph may have cycles).
* ``module[:DEPTH]``: the module subtrees at DEPTH (default 2) of a captured PyTorch model, each with
  its backward and optimizer ops (:mod:`placer.grouping.modules`; the group graph may have cycles).

Ways to build a :class:`Grouping`, all starting from the colocation rules:

* :func:`colocate`: only what must share a device (parameters with their users, optimizer updates
  with their parameter, optionally backward ops with the forward op they mirror, the graph's own
  colocation groups such as dnn-partitioning's ``colorClass``).
* :func:`merge_and_colocate`: Placeto appendix A.6. Repeatedly merge the node with the lowest cost
  into its neighbour (a successor; a predecessor when it has no successor) until N nodes are left
  or no node costs less than C. A node's cost is the size of its output tensor; the neighbour
  absorbs the node and keeps its own cost (reading A.6 literally; costing a merged node by all the
  bytes leaving it instead makes the growing group ever cheaper, and it swallows the graph).
* :func:`metis_groups`: METIS (pymetis) partitions the undirected graph into k parts (vertex
  weight = compute, edge weight = bytes), each part becomes as few acyclic pieces as possible, then
  the lightest groups are merged into their heaviest-traffic neighbour until k are left.
* :func:`from_labels`: the same repair for any op -> label map (e.g. a learned grouper's).

The group graph must stay a DAG so that it can be simulated and embedded, so every merge goes
through one rule (see :mod:`placer.grouping.quotient`): groups a and b merge only when no path leads
from one to the other through a third group. In a training graph this means a forward op and its
backward op can share a group only near the loss (the forward path to the rest of the graph and the
backward path from it close a cycle otherwise). A colocation set that cannot become one group stays
several groups tied by a group-level colocation id (``Grouping.group_colocation``, the grouped
graph's ``colocation``): every method must keep such groups on one device, as for any colocation.
:meth:`Grouping.units` merges such ties (and the graph's colocation groups) into one group each:
the *placement units*, one decision each, whose group graph may have cycles.
:func:`group_problem` builds the grouped Problem; its placements expand back to every op and can be
simulated on the group graph or on the full graph.

The map itself, :class:`Grouping`, is in :mod:`placer.grouping.grouping`; the mirror units (each
backward op with the forward op it mirrors) and their cut into chunks in :mod:`placer.grouping.mirrors`.
Connected components (colocation sets, ties) are computed in one place, :func:`components`
(scipy's ``connected_components``); the only union-find left is the incremental one of
:class:`~placer.grouping.quotient.Quotient`, whose ties are refused when two families share no device.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from placer.errors import InputError
from placer.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from placer.grouping.grouping import Grouping, components
from placer.grouping.mirrors import mirror_chunks
from placer.grouping.quotient import Quotient
from placer.problem import Problem

PARAMETER_TYPES = frozenset({"parameter", "param", "variable", "get_attr", "buffer", "weight"})


# ----------------------------------------------------------------------------- colocation rules
def parameter_ops(graph: OpGraph) -> np.ndarray:
    """Ops that hold a parameter: ``op_type`` one of PARAMETER_TYPES, or no inputs, parameter bytes
    and nothing to compute (no FLOPs, zero cost everywhere)."""
    indeg = np.diff(graph.pred_ptr)
    typed = np.array([t.lower() in PARAMETER_TYPES for t in graph.op_types], dtype=bool)
    free = np.ones(graph.n_ops, dtype=bool)
    for v in graph.compute_us.values():
        free &= ~(np.isfinite(v) & (v > 0))
    src = (indeg == 0) & (graph.flops == 0) & free & (graph.role == FORWARD)
    return np.flatnonzero((graph.param_bytes > 0) & (typed | src))


def colocation_sets(graph: OpGraph, *, parameters: bool = True, updates: bool = True,
                    mirrors: bool = False, user: bool = True) -> list[np.ndarray]:
    """Disjoint sets of ops (two or more each) that must share a device, from the rules:
    ``parameters``: a parameter op with every op that reads it; ``updates``: an optimizer update
    (role UPDATE) with the parameter it updates (a parameter-op input, else an input that owns
    parameter bytes, else the op it mirrors); ``mirrors``: a backward op with its forward op;
    ``user``: the graph's own colocation groups."""
    n = graph.n_ops
    pairs: list[np.ndarray] = []

    def union(a, b):
        pairs.append(np.stack(np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64)), axis=-1).reshape(-1, 2))

    params = parameter_ops(graph)
    is_param = np.zeros(n, bool)
    is_param[params] = True
    if parameters:
        for p in params:
            union(p, graph.successors(p))
    if updates:
        for u in np.flatnonzero(graph.role == UPDATE):
            preds = graph.predecessors(u)
            owners = preds[is_param[preds]]
            if not len(owners):
                owners = preds[(graph.param_bytes[preds] > 0) & (graph.role[preds] == FORWARD)]
            if not len(owners) and graph.mirror[u] >= 0:
                owners = graph.mirror[u:u + 1]
            union(u, owners)
    if mirrors:
        b = np.flatnonzero((graph.role == BACKWARD) & (graph.mirror >= 0))
        union(b, graph.mirror[b])
    if user:
        for members in graph.colocation_groups():
            union(members[0], members[1:])
    roots = components(n, np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64))
    order = np.argsort(roots, kind="stable")
    bounds = np.flatnonzero(np.diff(roots[order])) + 1
    return [s for s in np.split(order, bounds) if len(s) > 1]


def _result(q: Quotient, method: str, meta: dict[str, Any]) -> Grouping:
    op_group, n_groups, coloc = q.result()
    meta = dict(meta, untied=q.untied) if q.untied else dict(meta)
    return Grouping(op_group, n_groups, coloc, method, meta)


def _start(source, base: Grouping | None, rules: dict[str, bool]) -> Quotient:
    q = Quotient(source)
    if base is not None:
        if base.n_ops != q.n:
            raise ValueError(f"base grouping has {base.n_ops} ops, the graph {q.n}")
        order = np.argsort(base.op_group, kind="stable")
        bounds = np.flatnonzero(np.diff(base.op_group[order])) + 1
        for members in np.split(order, bounds):
            for x in members[1:]:
                if q.try_merge(q.grp[int(members[0])], q.grp[int(x)]) < 0:
                    raise ValueError("base grouping is not acyclic or not runnable; build it with this module")
        coloc = base.group_colocation[base.op_group]
        sets = [np.flatnonzero(coloc == c) for c in np.unique(coloc[coloc >= 0])]
        q.merge_sets(sets)
    else:
        q.merge_sets(colocation_sets(q.graph, **rules))
    return q


# the colocation step of every grouping of one source (Problem or OpGraph), kept while the source
# lives: Post, Placeto and ColocRL each build one or two groupings of the same problem in a process
_COLOCATED: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _colocated(source, rules: dict[str, bool]) -> Quotient:
    """A fresh copy of the quotient with ``source``'s colocation sets merged (what :func:`_start`
    builds without a base), computed once per source and rules."""
    memo = _COLOCATED.setdefault(source, {})
    key = (Quotient, tuple(sorted(rules.items())))
    if key not in memo:
        memo[key] = _start(source, None, rules)
    return memo[key].clone()


# ----------------------------------------------------------------------------- public groupings
def colocate(source, *, parameters: bool = True, updates: bool = True, mirrors: bool = False,
             user: bool = True) -> Grouping:
    """Only what must share a device (see :func:`colocation_sets`); ``source`` a Problem or an OpGraph."""
    rules = dict(parameters=parameters, updates=updates, mirrors=mirrors, user=user)
    q = _colocated(source, rules)
    return _result(q, "colocate", rules)


def merge_and_colocate(source, n_groups: int | None = None, max_cost_bytes: float | None = None, *,
                       base: Grouping | None = None, parameters: bool = True, updates: bool = True,
                       mirrors: bool = False, user: bool = True) -> Grouping:
    """Placeto appendix A.6 Merge-and-Colocate: a node costs the bytes of its output tensor and keeps
    that cost when it absorbs a cheaper neighbour. Stops at ``n_groups`` nodes or when no node costs
    less than ``max_cost_bytes`` (give one or both). ``base``: start from this grouping and its
    ties instead of the colocation rules (as every grouping here)."""
    if n_groups is None and max_cost_bytes is None:
        raise ValueError("give n_groups (N) or max_cost_bytes (C)")
    rules = dict(parameters=parameters, updates=updates, mirrors=mirrors, user=user)
    q = _start(source, base, rules) if base is not None else _colocated(source, rules)
    cost = {r: q.out[r] for r in q.live()}
    q.greedy(cost, lambda c_node, c_neighbour: c_neighbour, n_groups, max_cost_bytes, "successor")
    return _result(q, "merge-and-colocate", dict(rules, n_groups=n_groups, max_cost_bytes=max_cost_bytes))


def from_labels(source, labels, *, base: Grouping | None = None, method: str = "labels",
                parameters: bool = True, updates: bool = True, mirrors: bool = False, user: bool = True) -> Grouping:
    """The acyclic grouping closest to an arbitrary op -> label map (e.g. a learned grouper's):
    each label becomes as few groups as the acyclicity rule allows, colocation respected."""
    rules = dict(parameters=parameters, updates=updates, mirrors=mirrors, user=user)
    q = _start(source, base, rules) if base is not None else _colocated(source, rules)
    labels = np.asarray(labels)
    if labels.shape != (q.n,):
        raise ValueError(f"labels have {labels.size} entries for {q.n} ops")
    q.merge_labels(labels)
    return _result(q, method, rules)


def metis_groups(source, n_groups: int, *, seed: int = 0, base: Grouping | None = None, parameters: bool = True,
                 updates: bool = True, mirrors: bool = False, user: bool = True) -> Grouping:
    """METIS coarsening: pymetis k-way partition of the undirected graph of colocation families
    (vertex weight = compute capped at 1/k of the total, edge weight = bytes, both scaled to
    1..1000), each part cut into acyclic pieces and re-merged (:meth:`Quotient.merge_labels`), then
    the lightest groups merged into their heaviest-traffic neighbour until at most ``n_groups`` are
    left (when there are fewer than 2k families METIS is skipped: ``metis_parts`` = 0 in the
    meta). In a training graph a part holding forward ops and the backward ops they feed cannot be
    one group (see the module docstring), so the repair leaves more pieces than parts."""
    import pymetis

    rules = dict(parameters=parameters, updates=updates, mirrors=mirrors, user=user)
    q = _start(source, base, rules) if base is not None else _colocated(source, rules)
    live = q.live()
    fam = np.array([q.family(r) for r in live], dtype=np.int64)
    fams, fidx = np.unique(fam, return_inverse=True)
    nv = len(fams)
    k = int(max(1, min(n_groups, nv)))
    if k > 1 and 2 * k <= nv:
        vidx = {r: int(i) for r, i in zip(live, fidx)}
        wv = np.zeros(nv)
        np.add.at(wv, fidx, [q.work[r] for r in live])
        # no vertex heavier than one part's share: METIS's initial bisection fails on such outliers
        wv = np.minimum(wv, wv.sum() / k)
        pairs: dict[tuple[int, int], float] = {}
        for r in live:
            a = vidx[r]
            for y, w in q.succ[r].items():
                b = vidx[y]
                if a != b:
                    key = (min(a, b), max(a, b))
                    pairs[key] = pairs.get(key, 0.0) + w
        if pairs:
            ends = np.array(list(pairs.keys()), dtype=np.int64)
            ew = np.array(list(pairs.values()))
            u = np.concatenate([ends[:, 0], ends[:, 1]])
            v = np.concatenate([ends[:, 1], ends[:, 0]])
            w = np.concatenate([ew, ew])
            order = np.lexsort((v, u))
            u, v, w = u[order], v[order], w[order]
        else:
            u = v = np.zeros(0, dtype=np.int64)
            w = np.zeros(0)
        xadj = np.zeros(nv + 1, dtype=np.int64)
        np.add.at(xadj, u + 1, 1)
        xadj = np.cumsum(xadj)
        scale = lambda a: (1 + np.round(999 * a / a.max())).astype(np.int64) if len(a) and a.max() > 0 else np.ones(len(a), np.int64)
        opts = pymetis.Options(seed=int(seed))
        adjacency = pymetis.CSRAdjacency(xadj.tolist(), v.tolist())
        _, parts = pymetis.part_graph(k, adjacency, vweights=scale(wv).tolist(),
                                      eweights=scale(w).tolist() if len(w) else None, options=opts)
        part_of_rep = {r: parts[vidx[r]] for r in live}
    elif k > 1:  # hardly more families than parts: each family its own part, the greedy step merges
        part_of_rep = {r: int(i) for r, i in zip(live, fidx)}
        k = 0
    else:
        part_of_rep = {r: 0 for r in live}
    labels = np.array([part_of_rep[q.grp[x]] for x in range(q.n)], dtype=np.int64)
    q.merge_labels(labels)
    after_repair = q.n_alive
    q.greedy({r: q.work[r] for r in q.live()}, lambda a, b: a + b, n_groups, None, "any")
    return _result(q, "metis", dict(rules, n_groups=n_groups, seed=seed, metis_parts=k, groups_after_repair=after_repair))


def colocation_units(source) -> Grouping:
    """Every op its own group, the graph's colocation groups merged into one (what must share a
    device and nothing more), numbered by first op: the units the classical placers move."""
    g = source.graph if isinstance(source, Problem) else source
    return Grouping.identity(g).units(g)._renamed("ops")


def contiguous(source, n_groups: int) -> Grouping:
    """Colocation groups and every backward op with the forward op it mirrors merged (TensorFlow
    colocates gradients with their forward op), then these components, in the order of their first
    op, cut into ``n_groups`` contiguous chunks of about equal work (fastest compute of a Problem,
    else FLOPs). The group graph may have cycles (a forward op and its backward op in one group)."""
    P = source if isinstance(source, Problem) else None
    g = source.graph if P is not None else source
    work = P.fastest_us if P is not None else g.flops.astype(np.float64)
    return Grouping.partition(mirror_chunks(g, work, n_groups), "contiguous", meta={"n_groups": int(n_groups)})


# ----------------------------------------------------------------------------- the spec language
GROUPING_KINDS = {"ops": False, "colocate": False, "merge": True, "metis": True, "contiguous": True, "module": True}
OPTIONAL_ARG = {"module"}  # kinds whose number may be left out (module: depth 2)
GROUPING_HELP = ("ops (each op, colocation groups merged), colocate (colocation rules), merge:N (Placeto A.6 "
                 "Merge-and-Colocate to N groups), metis:K (METIS coarsening to K groups), contiguous:N "
                 "(N chunks of equal work), module[:DEPTH] (module subtrees at DEPTH, default 2; "
                 "module:auto chooses DEPTH: the shallowest whose largest unit fits the smallest device and holds "
                 "at most 1/n of the work)")


@dataclass(frozen=True)
class GroupingSpec:
    """A grouping named by the spec language (see :func:`parse_grouping`)."""

    kind: str  # one of GROUPING_KINDS
    n: int | None = None  # N or K for the kinds that take one

    def __str__(self) -> str:
        if self.kind == "module" and self.n == 0:
            return "module:auto"
        return self.kind if self.n is None else f"{self.kind}:{self.n}"

    def build(self, source, seed: int = 0) -> Grouping:
        """The grouping of a Problem (or OpGraph) this spec names."""
        if self.kind == "ops":
            return colocation_units(source)
        if self.kind == "colocate":
            return colocate(source)
        if self.kind == "merge":
            return merge_and_colocate(source, self.n)
        if self.kind == "metis":
            return metis_groups(source, self.n, seed=seed)
        if self.kind == "module":
            from placer.grouping.modules import DEFAULT_DEPTH, auto_depth, module_grouping

            if self.n == 0:  # module:auto: the depth chosen from the model and the devices
                if not isinstance(source, Problem):
                    raise InputError("grouping", "module:auto", "needs the cluster to choose a depth",
                                     "give a Problem, or a depth: module:2")
                return module_grouping(source, auto_depth(source)[0])
            return module_grouping(source, self.n or DEFAULT_DEPTH)
        return contiguous(source, self.n)


def parse_grouping(spec, where: str = "--grouping") -> GroupingSpec:
    """The one parser of grouping specs, for the CLI and every method: ``ops``, ``colocate``,
    ``merge:N``, ``metis:K``, ``contiguous:N`` or ``module[:DEPTH]`` (N, K, DEPTH >= 1). Raises
    InputError otherwise."""
    if isinstance(spec, GroupingSpec):
        return spec
    text = str(spec).strip().lower()
    kind, sep, arg = text.partition(":")
    if kind in GROUPING_KINDS:
        if (not GROUPING_KINDS[kind] or kind in OPTIONAL_ARG) and not sep:
            return GroupingSpec(kind)
        if kind == "module" and arg == "auto":
            return GroupingSpec(kind, 0)
        if GROUPING_KINDS[kind] and arg.isdigit() and 0 < int(arg) < 10**9:
            return GroupingSpec(kind, int(arg))
    raise InputError(where, f"grouping '{spec}'", "is not a grouping spec", f"use one of: {GROUPING_HELP}")


def grouping_ok(spec: str) -> bool:
    """Whether ``spec`` is a grouping :func:`placer.grouping.parse_grouping` reads (a config check)."""
    try:
        parse_grouping(spec)
    except InputError:
        return False
    return True


def make_grouping(source, spec, seed: int = 0) -> Grouping:
    """A Grouping from a spec string, a :class:`GroupingSpec` or a Grouping (returned as it is,
    after checking it has one group per op of ``source``)."""
    if isinstance(spec, Grouping):
        n = (source.graph if isinstance(source, Problem) else source).n_ops
        if spec.n_ops != n:
            raise InputError("grouping", f"grouping '{spec.method}'", f"has {spec.n_ops} ops, the graph {n}",
                             "build the grouping from this graph")
        return spec
    return parse_grouping(spec).build(source, seed)


# ----------------------------------------------------------------------------- the grouped graph
def group_graph(graph: OpGraph, grouping: Grouping, problem: Problem | None = None) -> OpGraph:
    """The graph whose ops are the groups: compute per cost key, FLOPs, bytes accessed, parameter
    and temporary bytes summed over members; output bytes = the tensors leaving the group (a tensor
    is one op's output, sized by the largest edge it feeds); one edge per pair of groups carrying
    the tensors that cross it, each counted once. Given a Problem, devices costed by the roofline
    get their summed per-op estimate under their model key, so the grouped Problem sees the same
    per-group costs as the ops'. Role: the members' most common role; mirror: the group of the first
    mirrored forward op of a backward group; op type of the costliest member; module: the members'
    common module prefix."""
    g, og, G = graph, np.asarray(grouping.op_group, dtype=np.int64), int(grouping.n_groups)
    if og.shape != (g.n_ops,):
        raise ValueError(f"grouping has {og.size} ops, graph '{g.name}' {g.n_ops}")
    total = lambda v: np.bincount(og, weights=np.asarray(v, dtype=np.float64), minlength=G)
    compute = {k: total(v) for k, v in g.compute_us.items()}
    if problem is not None:
        for d, (dev, srcname) in enumerate(zip(problem.cluster.devices, problem.cost_sources)):
            if srcname == "roofline" and dev.model.lower() not in compute:
                compute[dev.model.lower()] = total(problem.compute_us[:, d])
    s, d, b = g.edge_src, g.edge_dst, g.edge_bytes
    tb = np.zeros(g.n_ops)
    np.maximum.at(tb, s, b)
    cross = og[s] != og[d]
    key = np.unique(s[cross] * G + og[d[cross]])  # (tensor, destination group), each once
    t_op, t_dst = key // G, key % G
    pair = np.unique(og[t_op] * G + t_dst, return_inverse=True)
    gbytes = np.bincount(pair[1], weights=tb[t_op]) if len(key) else np.zeros(0)
    edges = list(zip((pair[0] // G).tolist(), (pair[0] % G).tolist(), gbytes.tolist()))
    leaving = np.unique(t_op)
    out = np.bincount(og[leaving], weights=tb[leaving], minlength=G)
    rc = np.zeros((G, 3), dtype=np.int64)
    np.add.at(rc, (og, g.role.astype(np.int64)), 1)
    role = rc.argmax(axis=1)
    work = g.compute_us[g.cost_keys[0]] if g.cost_keys else g.flops
    work = np.where(np.isfinite(work), work, 0.0)
    top = np.lexsort((-work, og))
    first_of = top[np.flatnonzero(np.r_[True, og[top][1:] != og[top][:-1]])]
    op_types = [g.op_types[i] for i in first_of]
    mirror = np.full(G, -1, dtype=np.int64)
    for i in np.flatnonzero((g.mirror >= 0) & (g.role == BACKWARD))[::-1]:
        if role[og[i]] == BACKWARD and og[g.mirror[i]] != og[i]:
            mirror[og[i]] = og[g.mirror[i]]
    members = np.split(np.argsort(og, kind="stable"), np.cumsum(np.bincount(og, minlength=G))[:-1])
    modules = [_common_module([g.modules[i] for i in m]) for m in members]
    names = [f"g{k}:{g.op_names[m[0]]}" for k, m in enumerate(members)]
    return OpGraph.build(
        names, edges, name=f"{g.name}/{grouping.method}-{G}", op_types=op_types, modules=modules,
        compute_us=compute, flops=total(g.flops), bytes_accessed=total(g.bytes_accessed), output_bytes=out,
        param_bytes=total(g.param_bytes), temp_bytes=total(g.temp_bytes), colocation=grouping.group_colocation,
        role=role, mirror=mirror, source=f"{g.name} grouped by {grouping.method}",
        meta={"source": "grouping", "grouped_from": g.name, "grouping": grouping.method, "source_ops": g.n_ops},
    )


def _common_module(paths: list[str]) -> str:
    parts = [p.split(".") for p in paths if p]
    if not parts:
        return ""
    common = parts[0]
    for p in parts[1:]:
        k = 0
        while k < min(len(common), len(p)) and common[k] == p[k]:
            k += 1
        common = common[:k]
    return ".".join(common)


@dataclass(eq=False)
class GroupedProblem:
    """A Problem whose ops are groups, with the grouping and the original Problem. Unpacks as
    ``(problem, grouping)``. A method places ``problem``; :meth:`expand` maps its placement back."""

    problem: Problem
    grouping: Grouping
    original: Problem

    def __iter__(self) -> Iterator:
        return iter((self.problem, self.grouping))

    def expand(self, group_placement) -> np.ndarray:
        gp = self.problem.validate_placement(np.asarray(getattr(group_placement, "devices", group_placement)))
        return self.original.validate_placement(self.grouping.expand(gp), "expanded placement")

    def simulate(self, group_placement, params=None):
        """Simulate the group graph (each group one op)."""
        from placer.sim import simulate

        return simulate(self.problem, group_placement, params)

    def simulate_full(self, group_placement, params=None):
        """Simulate the expanded placement on the full op graph."""
        from placer.sim import simulate

        return simulate(self.original, self.expand(group_placement), params)


def group_problem(problem: Problem, grouping: Grouping) -> GroupedProblem:
    """The grouped Problem on the same cluster (see :func:`group_graph`)."""
    return GroupedProblem(Problem(group_graph(problem.graph, grouping, problem), problem.cluster), grouping, problem)


def check_grouping(graph: OpGraph, grouping: Grouping) -> None:
    """Raise ValueError unless every op is in exactly one group, every group is non-empty, the group
    graph is acyclic and numbered topologically, and every colocation group shares a device."""
    og = np.asarray(grouping.op_group)
    if og.shape != (graph.n_ops,) or og.min(initial=0) < 0 or og.max(initial=-1) >= grouping.n_groups:
        raise ValueError("op_group must map every op to a group 0..n_groups-1")
    if (np.bincount(og, minlength=grouping.n_groups) == 0).any():
        raise ValueError("a group has no ops")
    gs, gd = og[graph.edge_src], og[graph.edge_dst]
    if (gs > gd).any():
        raise ValueError("group numbering is not topological (or the group graph has a cycle)")
    gc = np.asarray(grouping.group_colocation)[og]
    for members in graph.colocation_groups():
        if len(np.unique(og[members])) > 1 and (len(np.unique(gc[members])) > 1 or gc[members[0]] < 0):
            raise ValueError(f"colocation group of op '{graph.op_names[members[0]]}' is split over free groups")
