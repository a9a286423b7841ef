"""The graph of op groups Placeto places (paper section 2: "we partition ops into predetermined
groups and place ops from the same group on the same device").

:class:`GroupedProblem` holds one op-level :class:`~placer.problem.Problem`, the map op -> group,
the candidate devices (the action space) and the group-level arrays the policy network reads.
Groups come from :func:`contiguous_groups` (the default): colocation groups and each backward op
with the forward op it mirrors are merged (TensorFlow colocates gradients with their forward op),
then the merged components, in the order of their first op, are cut into contiguous chunks of about
equal work; or from :mod:`placer.grouping`'s Merge-and-Colocate (appendix A.6).

Groups are numbered by their first op in the graph's topological order. Merging a backward op with
its forward op puts cycles into the group graph (forward a -> b, backward b -> a); the network
reads the DAG of the edges that agree with the group numbering (``dag_src`` -> ``dag_dst``), which
for a training graph is the structure of the forward model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.errors import InputError
from placer.graph import BACKWARD
from placer.problem import Problem


def _union_find_components(n: int, pairs: np.ndarray) -> np.ndarray:
    parent = np.arange(n)

    def find(x):
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def contiguous_groups(problem: Problem, n_groups: int) -> np.ndarray:
    """op -> group id: colocation groups and backward/forward mirror pairs merged, then the
    components (ordered by first op) cut into ``n_groups`` contiguous chunks of about equal work."""
    g = problem.graph
    n = g.n_ops
    pairs = []
    for members in g.colocation_groups():
        pairs += [(int(members[0]), int(m)) for m in members[1:]]
    bw = np.flatnonzero((g.role == BACKWARD) & (g.mirror >= 0))
    pairs += list(zip(bw.tolist(), g.mirror[bw].tolist()))
    comp = _union_find_components(n, np.asarray(pairs, dtype=np.int64).reshape(-1, 2))
    roots, comp_id = np.unique(comp, return_inverse=True)  # roots are each component's first op
    work = np.bincount(comp_id, weights=problem.fastest_us, minlength=len(roots))
    k = max(1, min(int(n_groups), len(roots)))
    # k - 1 cuts where the cumulative work crosses j/k of the total, moved so that every chunk
    # keeps at least one component
    c = len(roots)
    cum = np.cumsum(work)
    cuts = np.searchsorted(cum, np.arange(1, k) * cum[-1] / k, side="right").astype(np.int64)
    for j in range(k - 1):  # cut j is the first component of chunk j + 1
        lo = cuts[j - 1] + 1 if j else 1
        cuts[j] = min(max(cuts[j], lo), c - (k - 1 - j))
    chunk = np.zeros(c, dtype=np.int64)
    chunk[cuts] = 1
    chunk = np.cumsum(chunk)
    return chunk[comp_id].astype(np.int64)


def _external_groups(problem: Problem, n_groups: int):
    """op -> group from :func:`placer.grouping.merge_and_colocate` (appendix A.6, backward ops
    colocated with their forward op), groups tied by a group-level colocation id merged into one;
    None when that module is not there."""
    try:
        from placer.grouping import merge_and_colocate
    except ImportError:
        return None
    # A forward group and its backward groups stay separate groups tied by a colocation id (the group
    # graph must stay acyclic), so N groups make fewer placement units; ask for more until the number
    # of units is about n_groups.
    ask, best = int(n_groups), None
    for _ in range(6):
        gr = merge_and_colocate(problem, ask, mirrors=True)
        coloc = np.asarray(gr.group_colocation, dtype=np.int64)
        family = np.where(coloc >= 0, gr.n_groups + coloc, np.arange(gr.n_groups))
        units = len(np.unique(family))
        if best is None or abs(units - n_groups) < abs(best[0] - n_groups):
            best = (units, family[np.asarray(gr.op_group, dtype=np.int64)])
        if units >= 0.9 * n_groups or gr.n_groups < ask:  # close enough, or the graph cannot be split further
            break
        ask = int(np.ceil(ask * n_groups / max(units, 1)))
    return best[1]


@dataclass(eq=False)
class GroupedProblem:
    """An op-level Problem seen as a graph of op groups with a fixed set of candidate devices."""

    problem: Problem
    group_of: np.ndarray  # (n_ops,) group of each op, groups numbered by their first op
    devices: np.ndarray  # (A,) device index of each action
    name: str = ""
    # group level, filled in __post_init__
    n_groups: int = field(init=False)
    compute_us: np.ndarray = field(init=False, repr=False)  # (N, A) summed over the group's ops
    output_bytes: np.ndarray = field(init=False, repr=False)  # (N,)
    memory_bytes: np.ndarray = field(init=False, repr=False)  # (N,) parameter + output bytes
    feasible: np.ndarray = field(init=False, repr=False)  # (N, A) every op of the group can run there
    edge_src: np.ndarray = field(init=False, repr=False)  # all group edges (may contain cycles)
    edge_dst: np.ndarray = field(init=False, repr=False)
    edge_bytes: np.ndarray = field(init=False, repr=False)
    dag_src: np.ndarray = field(init=False, repr=False)  # edges with src < dst: the DAG the network reads
    dag_dst: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        P, g = self.problem, self.problem.graph
        gid = np.asarray(self.group_of, dtype=np.int64)
        if gid.shape != (g.n_ops,) or (gid < 0).any():
            raise InputError(g.name, "grouping", "op -> group map has the wrong shape or negative ids", "give one id >= 0 per op")
        # renumber groups by their first op (a topological order when the group graph is a DAG)
        first = np.full(gid.max() + 1, g.n_ops, dtype=np.int64)
        np.minimum.at(first, gid, np.arange(g.n_ops))
        used = np.flatnonzero(first < g.n_ops)
        rank = np.empty(gid.max() + 1, dtype=np.int64)
        rank[used[np.argsort(first[used], kind="stable")]] = np.arange(len(used))
        gid = rank[gid]
        self.group_of = gid
        self.devices = np.asarray(self.devices, dtype=np.int64)
        N, A = len(used), len(self.devices)
        self.n_groups = N
        self.name = self.name or g.name
        cost = P.compute_us[:, self.devices]
        self.compute_us = np.stack([np.bincount(gid, weights=cost[:, a], minlength=N) for a in range(A)], axis=1)
        self.feasible = np.isfinite(self.compute_us)
        if not self.feasible.any(axis=1).all():
            v = int(np.flatnonzero(~self.feasible.any(axis=1))[0])
            op = g.op_names[int(np.flatnonzero(gid == v)[0])]
            raise InputError(g.name, f"group of op '{op}'", "no candidate device can run all its ops",
                             "allow more devices or group differently")
        self.output_bytes = np.bincount(gid, weights=g.output_bytes, minlength=N)
        self.memory_bytes = np.bincount(gid, weights=g.param_bytes + g.output_bytes, minlength=N)
        s, d = gid[g.edge_src], gid[g.edge_dst]
        keep = s != d
        key = s[keep] * N + d[keep]
        uk, inv = np.unique(key, return_inverse=True)
        self.edge_src, self.edge_dst = uk // N, uk % N
        self.edge_bytes = np.bincount(inv, weights=g.edge_bytes[keep], minlength=len(uk))
        fwd = self.edge_src < self.edge_dst
        self.dag_src, self.dag_dst = self.edge_src[fwd], self.edge_dst[fwd]

    @property
    def n_actions(self) -> int:
        return len(self.devices)

    def expand(self, actions: np.ndarray) -> np.ndarray:
        """Group placement (action index per group) -> op placement (device index per op)."""
        return self.devices[np.asarray(actions, dtype=np.int64)[self.group_of]]

    def contract(self, op_placement: np.ndarray) -> np.ndarray:
        """Op placement -> action index per group (the device of each group's first op)."""
        p = np.asarray(op_placement, dtype=np.int64)
        first = np.full(self.n_groups, -1, dtype=np.int64)
        first[self.group_of[::-1]] = np.arange(len(p))[::-1]
        lookup = {int(d): a for a, d in enumerate(self.devices)}
        try:
            return np.array([lookup[int(p[i])] for i in first], dtype=np.int64)
        except KeyError as e:
            raise InputError(self.name, "initial placement", f"uses device {e.args[0]} that is not a candidate",
                             f"use devices {self.devices.tolist()}") from None


def candidate_devices(problem: Problem, devices: str | list[int] = "gpus") -> np.ndarray:
    """The action space: 'gpus' (the paper places on the GPUs), 'all', or explicit indices."""
    if isinstance(devices, str):
        if devices == "gpus":
            idx = problem.cluster.gpus() or list(range(problem.n_devices))
        elif devices == "all":
            idx = list(range(problem.n_devices))
        else:
            raise InputError("devices", f"'{devices}'", "is not a device selection", "use 'gpus', 'all' or a list of indices")
    else:
        idx = [int(d) for d in devices]
    if not idx or any(d < 0 or d >= problem.n_devices for d in idx):
        raise InputError("devices", str(devices), "selects no valid device", f"use indices 0..{problem.n_devices - 1}")
    return np.asarray(idx, dtype=np.int64)


def group_problem(problem: Problem, n_groups: int = 64, devices: str | list[int] = "gpus",
                  grouping: str = "auto") -> GroupedProblem:
    """Group ``problem`` into about ``n_groups`` groups. ``grouping``: 'contiguous' (colocation and
    mirror pairs merged, then contiguous chunks of equal work; 'auto' is this one: with it Placeto
    found better placements of Inception-V3 and NASNet than with Merge-and-Colocate, 731 vs 769 ms
    and 542 vs 621 ms at 320 episodes), or 'merge-and-colocate' (:mod:`placer.grouping`, appendix A.6)."""
    if grouping in ("auto", "contiguous"):
        gid = contiguous_groups(problem, n_groups)
    elif grouping in ("merge-and-colocate", "external"):
        gid = _external_groups(problem, n_groups)
        if gid is None:
            raise InputError("grouping", f"'{grouping}'", "placer.grouping is not available", "use grouping='contiguous'")
    else:
        raise InputError("grouping", f"'{grouping}'", "is not a grouping", "use 'contiguous' or 'merge-and-colocate'")
    return GroupedProblem(problem, gid, candidate_devices(problem, devices))
