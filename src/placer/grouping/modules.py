"""Module units: the ops of a captured PyTorch step grouped by the module subtree they ran in, at a
depth (the ``module[:DEPTH]`` grouping), so that a placement of these units is a module -> device map
a user applies to their own ``nn.Module`` (:mod:`placer.export`, :func:`placer.apply`).

* **Depth.** A module path's levels are its names, an index of a ``ModuleList`` / ``Sequential``
  counted with the name before it: ``transformer.h.3.attn`` has the levels ``transformer``,
  ``h.3``, ``attn``; at depth 2 its unit is ``transformer.h.3`` (a GPT-2 block, as Hugging Face
  accelerate's device maps name it). Paths are read relative to the user's model: a graph captured
  through the Hugging Face adapter (recipe kind ``hf``) runs the model as the adapter's ``model``
  attribute, and that prefix is dropped (:func:`module_root`).
* **Units.** Every op whose path, cut to the depth, names a module that is not the parent of another
  unit belongs to that unit: its forward ops, and the backward and optimizer ops the capture records
  under the same module (a backward op takes the module of the forward op it mirrors, an update the
  module owning its parameter).
* **Glue.** Ops recorded in a module that is the parent of units (the root's loss, GPT-2's mask and
  position ids computed in ``transformer.forward``) belong to no module of the map: in the user's
  eager step they run where their inputs are. They join the unit of the producer that sends them the
  most bytes (a backward op: the unit of the forward op it mirrors), else, for ops with no placed
  input (graph inputs, ``arange``), the unit of their first consumer.
* **Ties.** A parameter read by several units (GPT-2's ``wte`` and ``lm_head`` share a weight) ties
  those units to one device, as accelerate keeps tied parameters on one device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.graph import BACKWARD, FORWARD, OpGraph
from placer.grouping.grouping import Grouping, components
from placer.problem import Problem

DEFAULT_DEPTH = 2  # module: without a depth (GPT-2 / Llama blocks, T5 blocks)


def module_root(graph: OpGraph) -> str:
    """The module path of the user's model inside the captured program: ``model`` for graphs captured
    through the Hugging Face adapter (:mod:`placer.frontends.hf`), else the root ``""``."""
    recipe = (graph.meta or {}).get("recipe")
    return "model" if isinstance(recipe, dict) and recipe.get("kind") == "hf" else ""


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` (the root itself is ``""``)."""
    if not root:
        return path
    if path == root:
        return ""
    return path[len(root) + 1:] if path.startswith(root + ".") else path


def levels(path: str) -> list[str]:
    """A module path's levels: names, an index joined to the name before it (``h.3``)."""
    out: list[str] = []
    for part in path.split(".") if path else []:
        if part.isdigit() and out:
            out[-1] = f"{out[-1]}.{part}"
        else:
            out.append(part)
    return out


def cut(path: str, depth: int) -> str:
    """The module subtree at ``depth`` that ``path`` lies in (``path`` itself when shallower)."""
    return ".".join(levels(path)[:depth])


def is_under(path: str, module: str) -> bool:
    return path == module or path.startswith(module + ".")


@dataclass(frozen=True, eq=False)
class ModuleUnits:
    """The module units of a graph at one depth."""

    depth: int
    root: str  # the prefix dropped from the graph's module paths (module_root)
    names: tuple[str, ...]  # unit -> module path relative to the user's model, numbered by first op
    op_unit: np.ndarray  # (n_ops,) unit of every op, glue ops included
    glue: np.ndarray  # (n_ops,) bool: the op ran outside every unit (joined a neighbour's unit)
    tie: np.ndarray  # (units,) component id: units sharing a parameter share an id

    @property
    def n_units(self) -> int:
        return len(self.names)

    def forward_order(self, graph: OpGraph) -> list[int]:
        """Units in the order their first forward op (not a parameter) runs; units without one last."""
        n = graph.n_ops
        first = np.full(self.n_units, n, dtype=np.int64)
        fwd = np.flatnonzero((graph.role == FORWARD) & ~self.glue
                             & np.array([t != "parameter" for t in graph.op_types], dtype=bool))
        np.minimum.at(first, self.op_unit[fwd], fwd)
        return [int(u) for u in np.lexsort((np.arange(self.n_units), first))]

    def grouping(self) -> Grouping:
        """The :class:`Grouping` of these units, tied units sharing a colocation id."""
        counts = np.bincount(self.tie, minlength=int(self.tie.max()) + 1 if len(self.tie) else 0)
        coloc = np.where(counts[self.tie] > 1, self.tie, -1)
        return Grouping(self.op_unit.copy(), self.n_units, coloc.astype(np.int64), "module",
                        {"depth": self.depth, "units": self.n_units, "glue_ops": int(self.glue.sum())})


# Graph sources whose ops' ``modules`` hold labels of another kind, not the module paths of a PyTorch
# model (the frontends keep them to name and mirror ops): grouping by them, or exporting a placement
# as a module -> device map, would present those labels as a model's modules.
OTHER_LABELS = {
    "pipedream": "a PipeDream profile, whose ops carry its layer ids node1, node2, ...",
    "dnn-partitioning": "a dnn-partitioning input, whose ops carry the file's node names",
    "giph": "a GiPH task graph, whose ops carry the generator's levels",
}
NO_MODULES_FIX = "capture the model from PyTorch (its factory, hf:NAME, the zoo) for module-level placement"


def no_module_paths(graph: OpGraph) -> str | None:
    """Why ``graph``'s ops record no module paths of a PyTorch model (None: they do): its source's
    labels are of another kind (:data:`OTHER_LABELS`, a native file converted from one included:
    it keeps its source), or it has none."""
    source = (graph.meta or {}).get("source")
    if source in OTHER_LABELS:
        return f"records no module paths ({OTHER_LABELS[source]}, not modules)"
    if not any(graph.modules):
        return "records no module paths"
    return None


def module_units(source, depth: int = DEFAULT_DEPTH) -> ModuleUnits | None:
    """The module units of a Problem's or OpGraph's ops at ``depth`` (>= 1), or None when the graph
    records no module paths (nothing to group by)."""
    g = source.graph if isinstance(source, Problem) else source
    n = g.n_ops
    root = module_root(g)
    rel = [relative(m, root) for m in g.modules]
    keys = [cut(m, depth) for m in rel]
    distinct = sorted(set(k for k in keys if k))
    if not distinct:
        return None
    parents = set()
    for k in distinct:
        lv = levels(k)
        for j in range(1, len(lv)):
            parents.add(".".join(lv[:j]))
    index: dict[str, int] = {}
    unit = np.full(n, -1, dtype=np.int64)
    for i, k in enumerate(keys):
        if k and k not in parents:
            unit[i] = index.setdefault(k, len(index))
    glue = unit < 0
    _join_glue(g, unit)
    # number units by their first op
    order = np.full(len(index), -1, dtype=np.int64)
    order[unit[::-1]] = np.arange(n)[::-1]
    rank = np.empty(len(index), dtype=np.int64)
    rank[np.argsort(order, kind="stable")] = np.arange(len(index))
    unit = rank[unit]
    names = [""] * len(index)
    for k, u in index.items():
        names[rank[u]] = k
    return ModuleUnits(depth, root, tuple(names), unit, glue, _ties(g, unit, glue, len(index)))


def _join_glue(g: OpGraph, unit: np.ndarray) -> None:
    """Give every glue op (unit -1) a unit in place (see the module docstring)."""
    n = g.n_ops
    for _ in range(n + 1):
        todo = np.flatnonzero(unit < 0)
        if not len(todo):
            return
        changed = False
        for i in todo:  # forward: the producer sending the most bytes; backward: the mirrored op
            if g.role[i] == BACKWARD and g.mirror[i] >= 0 and unit[g.mirror[i]] >= 0:
                unit[i] = unit[g.mirror[i]]
                changed = True
                continue
            lo, hi = g.pred_ptr[i], g.pred_ptr[i + 1]
            preds, edges = g.pred_idx[lo:hi], g.pred_edge[lo:hi]
            placed = unit[preds] >= 0
            if placed.any():
                j = int(np.argmax(np.where(placed, g.edge_bytes[edges], -1.0)))
                unit[i] = unit[preds[j]]
                changed = True
        for i in np.flatnonzero(unit < 0)[::-1]:  # no placed input: the first consumer's unit
            succ = g.successors(i)
            placed = succ[unit[succ] >= 0]
            if len(placed):
                unit[i] = unit[placed.min()]
                changed = True
        if not changed:
            unit[unit < 0] = 0  # ops joined to nothing at all (isolated): the first unit
            return


def _ties(g: OpGraph, unit: np.ndarray, glue: np.ndarray, n_units: int) -> np.ndarray:
    """Units that read one parameter in the forward pass share a component id."""
    pairs = []
    for p in np.flatnonzero(np.array([t == "parameter" for t in g.op_types], dtype=bool)):
        readers = g.successors(p)
        readers = readers[(g.role[readers] == FORWARD) & ~glue[readers]]
        for u in np.unique(unit[readers]):
            if u != unit[p]:
                pairs.append((int(unit[p]), int(u)))
    return components(n_units, pairs)


def module_grouping(source, depth: int = DEFAULT_DEPTH) -> Grouping:
    """The ``module:DEPTH`` grouping; a graph without module paths (:func:`no_module_paths`) raises
    InputError."""
    from placer.errors import InputError

    g = source.graph if isinstance(source, Problem) else source
    why = no_module_paths(g)
    mu = None if why else module_units(source, depth)
    if mu is None:
        raise InputError("grouping", f"module:{depth}", f"graph '{g.name}' {why or 'records no module paths'}",
                         f"group it otherwise (metis:K, merge:N, contiguous:N or colocate), or {NO_MODULES_FIX}",
                         kind="no-module-paths")
    return mu.grouping()


def auto_depth(problem: Problem) -> tuple[int, str]:
    """The depth ``module:auto`` groups ``problem`` at, and a line saying why: the shallowest depth
    whose largest unit (units sharing a parameter counted together) fits the smallest device's memory
    (parameters and optimizer state) and holds at most 1/n of the step's work (n devices), or, where
    no depth makes a unit that small, the shallowest whose largest unit is as small as any depth makes
    it. E.g. GPT-2 on k80x4: depth 1 leaves ``transformer`` one unit with nearly all the work; depth 2
    cuts it into blocks, its largest unit the tied ``wte`` + ``lm_head`` (27%, which no depth cuts).
    InputError for a graph without module paths."""
    from placer.errors import InputError

    g = problem.graph
    why = no_module_paths(g)
    if why:
        raise InputError("grouping", "module:auto", f"graph '{g.name}' {why}",
                         f"group it otherwise (metis:K, merge:N, contiguous:N or colocate), or {NO_MODULES_FIX}",
                         kind="no-module-paths")
    root = module_root(g)
    deepest = max(len(levels(relative(m, root))) for m in g.modules)
    work, share, smallest = problem.fastest_us, float(problem.fastest_us.sum()) / problem.n_devices, \
        float(np.min(problem.memory_bytes))
    rows = []
    for d in range(1, min(deepest, 64) + 1):
        mu = module_units(problem, d)
        comp_work = np.bincount(mu.tie[mu.op_unit], weights=work)
        comp_mem = np.bincount(mu.tie[mu.op_unit], weights=g.param_bytes)
        rows.append((d, mu.n_units, float(comp_work.max()), float(comp_mem.max())))
    least = min(r[2] for r in rows)
    fits = [r for r in rows if r[3] <= smallest]
    ok = [r for r in fits if r[2] <= share] or [r for r in fits if r[2] <= least * (1 + 1e-9)] or \
        [r for r in rows if r[2] <= least * (1 + 1e-9)]
    d, n, w, m = ok[0]
    return d, (f"module:auto chose depth {d}: {n} units, the largest {m / 2**20:,.1f} MiB of parameters and state "
               f"(smallest device {smallest / 2**30:,.2f} GiB) and {w / max(float(work.sum()), 1e-12):.1%} of the work "
               f"(1/{problem.n_devices} is {1 / problem.n_devices:.1%}"
               f"{'; no depth makes its largest unit smaller' if w > share else ''})")


def module_problem(problem: Problem, depth: int = DEFAULT_DEPTH) -> Problem:
    """The same problem with every module unit (ties joined, the graph's own colocation kept) made one
    colocation group: any method run on it returns a module-level placement, simulated exactly as on
    ``problem`` (colocation changes no cost)."""
    return units_problem(problem, module_grouping(problem, depth), module_depth=int(depth))


def units_problem(problem: Problem, grouping, **meta) -> Problem:
    """The same problem with every unit of ``grouping`` (ties joined, the graph's own colocation
    kept: :meth:`Grouping.units`) of two ops or more made one colocation group, ``meta`` added to the
    graph's: a placement of it is one of ``problem`` that keeps each unit on one device."""
    g = problem.graph
    groups = grouping.units(g).op_group
    sizes = np.bincount(groups)
    coloc = np.where(sizes[groups] > 1, groups, -1)
    return Problem(g.replace(colocation=coloc, meta=dict(g.meta, **meta)), problem.cluster)
