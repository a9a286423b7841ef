"""OpGraph: the computational graph of one training step, the data model every layer shares.

An op has a name, an op type, a compute cost per device kind in microseconds (or the FLOPs and
bytes accessed a cost model turns into one), the bytes of the tensor it outputs, the parameter /
persistent bytes it owns for the whole step, temporary workspace bytes while it runs, an optional
colocation group, a role (forward, backward, update), the module path it came from and, for a
backward op, the forward op it mirrors. An edge carries the bytes of the tensor that flows along it.

Everything is held in numpy arrays, ops are stored in a topological order (index 0..n-1), and the
object is immutable once :meth:`OpGraph.build` has validated it: no cycles, no dangling edges, no
duplicate names, finite non-negative sizes, costs that are non-negative (``inf`` marks a device kind
an op cannot run on, NaN is refused).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from placer.errors import InputError

FORWARD, BACKWARD, UPDATE = 0, 1, 2
ROLE_NAMES = ("forward", "backward", "update")
MAX_VALUE = 1e18  # largest cost or size accepted (31,700 years in us, an exabyte): sums of them stay finite


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class OpGraph:
    """A validated, immutable op graph in topological order. Build it with :meth:`build`."""

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    modules: tuple[str, ...]
    compute_us: Mapping[str, np.ndarray]  # cost key (device model or kind, lower case) -> (n,) us
    flops: np.ndarray  # (n,) float64
    bytes_accessed: np.ndarray  # (n,) float64, bytes read + written
    output_bytes: np.ndarray  # (n,) float64
    param_bytes: np.ndarray  # (n,) float64, resident for the whole step where the op is placed
    temp_bytes: np.ndarray  # (n,) float64, workspace while the op runs
    colocation: np.ndarray  # (n,) int64, -1 = free; ops sharing a value must share a device
    role: np.ndarray  # (n,) int8: FORWARD / BACKWARD / UPDATE
    mirror: np.ndarray  # (n,) int64, forward op a backward op mirrors, -1 = none
    edge_src: np.ndarray  # (m,) int64, edges sorted by (src, dst), no duplicates
    edge_dst: np.ndarray  # (m,) int64
    edge_bytes: np.ndarray  # (m,) float64
    meta: Mapping[str, Any] = field(default_factory=dict)
    # derived adjacency in CSR form, filled by build()
    succ_ptr: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    succ_idx: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    succ_edge: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    pred_ptr: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    pred_idx: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    pred_edge: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        names: Sequence[str],
        edges: Iterable[tuple[Any, Any, float]],
        *,
        name: str = "graph",
        op_types: Sequence[str] | None = None,
        modules: Sequence[str] | None = None,
        compute_us: Mapping[str, Sequence[float]] | None = None,
        flops: Sequence[float] | None = None,
        bytes_accessed: Sequence[float] | None = None,
        output_bytes: Sequence[float] | None = None,
        param_bytes: Sequence[float] | None = None,
        temp_bytes: Sequence[float] | None = None,
        colocation: Sequence[int] | None = None,
        role: Sequence[int] | None = None,
        mirror: Sequence[int] | None = None,
        meta: Mapping[str, Any] | None = None,
        source: str = "<graph>",
    ) -> "OpGraph":
        """Validate the ops and edges (given in any order) and return them in topological order.

        ``edges`` are ``(src, dst, bytes)`` with src/dst an op index or an op name. Parallel edges
        between the same pair are merged, their bytes summed. ``mirror`` holds op indices in the
        given order. Raises :class:`InputError` naming ``source`` and the offending item.
        """
        n = len(names)
        if n == 0:
            raise InputError(source, "ops", "the graph has no ops", "give at least one op")
        names = [str(x) for x in names]
        index: dict[str, int] = {}
        for i, nm in enumerate(names):
            if not nm:
                raise InputError(source, f"op #{i}", "empty op name", "give every op a unique name")
            if nm in index:
                raise InputError(source, f"op '{nm}'", "duplicate op name", "make op names unique")
            index[nm] = i

        def vec(values, what, default=0.0, allow_inf=False):
            if values is None:
                return np.full(n, default, dtype=np.float64)
            try:
                a = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(source, what, "values are not numbers", "use numbers") from None
            if a.shape != (n,):
                raise InputError(source, what, f"has {a.size} entries for {n} ops", "give one value per op")
            bad = np.isnan(a) | (a < 0) | (np.isinf(a) if not allow_inf else np.zeros(n, bool)) | (np.isfinite(a) & (a > MAX_VALUE))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(
                    source, f"op '{names[i]}' {what}", f"invalid value {a[i]!r}",
                    "use a finite non-negative number" + (" (or inf: cannot run there)" if allow_inf else ""),
                )
            return a

        costs = {}
        for key, vals in (compute_us or {}).items():
            costs[str(key).lower()] = vec(vals, f"compute_us[{key}]", allow_inf=True)
        fl = vec(flops, "flops")
        ba = vec(bytes_accessed, "bytes_accessed")
        ob = vec(output_bytes, "output_bytes")
        pb = vec(param_bytes, "param_bytes")
        tb = vec(temp_bytes, "temp_bytes")

        def ivec(values, what, default, lo):
            if values is None:
                return np.full(n, default, dtype=np.int64)
            a = np.asarray(values)
            if a.shape != (n,) or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
                raise InputError(source, what, "must be one integer per op", "give one integer per op")
            a = a.astype(np.int64)
            if (a < lo).any():
                i = int(np.flatnonzero(a < lo)[0])
                raise InputError(source, f"op '{names[i]}' {what}", f"invalid value {a[i]}", f"use an integer >= {lo}")
            return a

        coloc = ivec(colocation, "colocation", -1, -1)
        rl = ivec(role, "role", FORWARD, 0)
        if (rl > UPDATE).any():
            i = int(np.flatnonzero(rl > UPDATE)[0])
            raise InputError(source, f"op '{names[i]}' role", f"invalid role {rl[i]}", "use forward, backward or update")
        mir = ivec(mirror, "mirror", -1, -1)
        if (mir >= n).any():
            i = int(np.flatnonzero(mir >= n)[0])
            raise InputError(source, f"op '{names[i]}' mirror", "names no existing op", "point mirror at an op of this graph")

        # edges
        merged: dict[tuple[int, int], float] = {}

        def resolve(x, k, end):
            if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
                if 0 <= int(x) < n:
                    return int(x)
            elif isinstance(x, str) and x in index:
                return index[x]
            raise InputError(source, f"edge #{k}", f"{end} {x!r} is not an op of the graph", "add the op or remove the edge")

        for k, e in enumerate(edges):
            try:
                s, d, b = e
            except (TypeError, ValueError):
                raise InputError(source, f"edge #{k}", "is not (src, dst, bytes)", "give src, dst and bytes") from None
            s, d = resolve(s, k, "source"), resolve(d, k, "destination")
            try:
                b = float(b)
            except (TypeError, ValueError):
                raise InputError(source, f"edge #{k}", f"bytes {b!r} is not a number", "use a non-negative number") from None
            if not np.isfinite(b) or b < 0 or b > MAX_VALUE:
                raise InputError(source, f"edge {names[s]} -> {names[d]}", f"invalid bytes {b!r}", "use a finite non-negative number")
            if s == d:
                raise InputError(source, f"edge {names[s]} -> {names[d]}", "is a self-loop, so the graph has a cycle", "remove the edge")
            merged[(s, d)] = merged.get((s, d), 0.0) + b

        src = np.fromiter((k[0] for k in merged), dtype=np.int64, count=len(merged))
        dst = np.fromiter((k[1] for k in merged), dtype=np.int64, count=len(merged))
        eb = np.fromiter(merged.values(), dtype=np.float64, count=len(merged))

        order = _topological_order(n, src, dst)
        if order is None:
            cyc = _find_cycle(n, src, dst)
            path = " -> ".join(names[i] for i in cyc[:6]) + (" -> ..." if len(cyc) > 6 else "")
            raise InputError(source, f"cycle {path}", "the graph has a cycle", "remove an edge of the cycle (a training step is a DAG)")
        new_of = np.empty(n, dtype=np.int64)
        new_of[order] = np.arange(n)
        src, dst = new_of[src], new_of[dst]
        perm = np.lexsort((dst, src))
        src, dst, eb = src[perm], dst[perm], eb[perm]
        mir = np.where(mir >= 0, new_of[np.maximum(mir, 0)], -1)[order]

        def pick(seq, default):
            return tuple(str(seq[i]) if seq is not None else default for i in order)

        if op_types is not None and len(op_types) != n:
            raise InputError(source, "op_types", f"has {len(op_types)} entries for {n} ops", "give one per op")
        if modules is not None and len(modules) != n:
            raise InputError(source, "modules", f"has {len(modules)} entries for {n} ops", "give one per op")

        return cls._assemble(
            name=str(name),
            op_names=tuple(names[i] for i in order),
            op_types=pick(op_types, "op"),
            modules=pick(modules, ""),
            compute_us={k: v[order] for k, v in sorted(costs.items())},
            flops=fl[order], bytes_accessed=ba[order], output_bytes=ob[order],
            param_bytes=pb[order], temp_bytes=tb[order], colocation=coloc[order],
            role=rl[order].astype(np.int8), mirror=mir,
            edge_src=src, edge_dst=dst, edge_bytes=eb, meta=dict(meta or {}),
        )

    @classmethod
    def _assemble(cls, **kw) -> "OpGraph":
        n = len(kw["op_names"])
        src, dst = kw["edge_src"], kw["edge_dst"]
        m = len(src)
        eid = np.arange(m, dtype=np.int64)
        # successors: edges are sorted by (src, dst)
        succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(succ_ptr, src + 1, 1)
        succ_ptr = np.cumsum(succ_ptr)
        # predecessors: sort by (dst, src)
        p = np.lexsort((src, dst))
        pred_ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(pred_ptr, dst + 1, 1)
        pred_ptr = np.cumsum(pred_ptr)
        arrays = {k: _frozen(v) for k, v in kw.items() if isinstance(v, np.ndarray)}
        kw.update(arrays)
        kw["compute_us"] = {k: _frozen(np.asarray(v, dtype=np.float64)) for k, v in kw["compute_us"].items()}
        return cls(
            **kw,
            succ_ptr=_frozen(succ_ptr), succ_idx=_frozen(dst.copy()), succ_edge=_frozen(eid),
            pred_ptr=_frozen(pred_ptr), pred_idx=_frozen(src[p]), pred_edge=_frozen(eid[p]),
        )

    def replace(self, **changes) -> "OpGraph":
        """A new graph with some per-op fields changed (same ops, same order), validated again."""
        fields = dict(
            name=self.name, op_types=self.op_types, modules=self.modules,
            compute_us=dict(self.compute_us), flops=self.flops, bytes_accessed=self.bytes_accessed,
            output_bytes=self.output_bytes, param_bytes=self.param_bytes, temp_bytes=self.temp_bytes,
            colocation=self.colocation, role=self.role, mirror=self.mirror, meta=dict(self.meta),
        )
        edges = changes.pop("edges", None)
        fields.update(changes)
        if edges is None:
            edges = zip(self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_bytes.tolist())
        return OpGraph.build(self.op_names, edges, **fields)

    # ------------------------------------------------------------------ queries
    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_edges(self) -> int:
        return len(self.edge_src)

    def successors(self, i: int) -> np.ndarray:
        return self.succ_idx[self.succ_ptr[i]:self.succ_ptr[i + 1]]

    def predecessors(self, i: int) -> np.ndarray:
        return self.pred_idx[self.pred_ptr[i]:self.pred_ptr[i + 1]]

    def index_of(self, name: str) -> int:
        try:
            return self.op_names.index(name)
        except ValueError:
            raise KeyError(name) from None

    @property
    def cost_keys(self) -> tuple[str, ...]:
        return tuple(self.compute_us)

    def colocation_groups(self) -> list[np.ndarray]:
        """Ops that must share a device, one array per group of two or more."""
        groups = []
        c = self.colocation
        for g in np.unique(c[c >= 0]):
            members = np.flatnonzero(c == g)
            if len(members) > 1:
                groups.append(members)
        return groups

    def subgraph_summary(self) -> dict[str, Any]:
        return {
            "name": self.name, "ops": self.n_ops, "edges": self.n_edges,
            "forward": int((self.role == FORWARD).sum()), "backward": int((self.role == BACKWARD).sum()),
            "update": int((self.role == UPDATE).sum()), "cost_keys": list(self.cost_keys),
            "param_bytes": float(self.param_bytes.sum()), "output_bytes": float(self.output_bytes.sum()),
            "flops": float(self.flops.sum()), "colocation_groups": len(self.colocation_groups()),
        }

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, ops={self.n_ops}, edges={self.n_edges}, costs={list(self.cost_keys)})"


def _topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """Kahn's algorithm, ready ops taken by smallest original index (stable: a graph already
    in topological order keeps its order). None when there is a cycle."""
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order_e = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(ptr, src + 1, 1)
    ptr = np.cumsum(ptr)
    sdst = dst[order_e].tolist()
    ptr_l = ptr.tolist()
    indeg_l = indeg.tolist()
    heap = [i for i in range(n) if indeg_l[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for j in sdst[ptr_l[i]:ptr_l[i + 1]]:
            indeg_l[j] -= 1
            if indeg_l[j] == 0:
                heapq.heappush(heap, j)
    if len(out) != n:
        return None
    return np.asarray(out, dtype=np.int64)


def _find_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> list[int]:
    """One cycle of the graph (as op indices), for the error message."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(src.tolist(), dst.tolist()):
        adj[s].append(d)
    color = [0] * n
    parent = [-1] * n
    for root in range(n):
        if color[root]:
            continue
        stack = [(root, 0)]
        color[root] = 1
        while stack:
            v, k = stack[-1]
            if k < len(adj[v]):
                stack[-1] = (v, k + 1)
                w = adj[v][k]
                if color[w] == 0:
                    color[w], parent[w] = 1, v
                    stack.append((w, 0))
                elif color[w] == 1:
                    cyc = [v]
                    while cyc[-1] != w:
                        cyc.append(parent[cyc[-1]])
                    return cyc[::-1] + [w]
            else:
                color[v] = 2
                stack.pop()
    return []
