"""Declarative experiment specs: graphs x clusters (rows) x methods (columns) x seeds x budget.

An :class:`Experiment` says *what* to run and how to lay out its table; :mod:`placer.bench.runner`
does the running. Adding a method or a graph to an experiment is one line (one :class:`Method` or
one :class:`Row`). Nothing here runs anything or knows a file format.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

LEVELS = ("quick", "default", "paper")
HARNESS_VERSION = 1  # bump when a change makes old cached runs incomparable


@dataclass(frozen=True)
class Level:
    """One budget level: placements each searching method may sample, the seeds to run, and an
    optional wall-clock cap per run (None keeps runs deterministic)."""

    placements: int
    seeds: tuple[int, ...] = (0,)
    seconds: float | None = None
    note: str = ""  # where the number comes from (e.g. the paper's sample count)


@dataclass(frozen=True)
class Method:
    """One method column.

    ``method`` is a name in the :mod:`placer.methods` registry; ``params`` must be fields of its
    config (checked when the plan is made), so a variant such as "Placeto (transfer)" never silently
    runs as "Placeto (scratch)".
    A parameter value ``"@policy:<name>"`` is replaced by the checkpoint of the experiment's policy
    of that name (trained first, see :class:`PolicySpec`).
    """

    label: str
    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    placements: Mapping[str, int] = field(default_factory=dict)  # level -> placements, overriding the level's
    seconds: Mapping[str, float] = field(default_factory=dict)  # level -> wall-clock limit, overriding the level's
    seeded: bool = True  # False: one run (seed 0) is enough, the method ignores its seed
    objective: str | None = None  # what this column minimises, overriding the row's (placer.objectives)

    def budget_for(self, level: str, lv: Level) -> int:
        return int(self.placements.get(level, lv.placements))

    def seconds_for(self, level: str, lv: Level) -> float | None:
        return self.seconds.get(level, lv.seconds)

    def params_for(self, row: "Row") -> dict[str, Any]:
        """The method's parameters with ``"{name}"`` templates filled from ``row.params``."""
        return {k: (v.format(**row.params) if isinstance(v, str) and "{" in v else v) for k, v in self.params.items()}


@dataclass(frozen=True)
class Row:
    """One table row: a graph on a cluster, with the paper's numbers for it.

    ``graph`` is a built-in zoo name, ``shared:<path>`` (a file under the shared graphs folder,
    see :func:`placer.bench.graphs.shared_graphs_dir`), ``family:<family>:<split>:<index>`` (a graph
    of a generated family), a file path, or a tuple of such candidates (the first that resolves is
    used). ``cluster`` is a preset name or ``auto``. ``paper`` maps a
    method label or derived-column name to the paper's value (seconds, a percentage, a count, or
    the string "OOM"); absent means the paper has no such cell.
    """

    label: str
    graph: str | tuple[str, ...]
    cluster: str
    show: Mapping[str, Any] = field(default_factory=dict)  # extra display columns, e.g. {"GPUs": 2}
    paper: Mapping[str, Any] = field(default_factory=dict)
    levels: tuple[str, ...] = LEVELS  # budget levels that include this row
    skip: tuple[str, ...] = ()  # method labels that do not apply to this row (shown as "—", like the paper)
    params: Mapping[str, Any] = field(default_factory=dict)  # fills "{name}" templates in method params
    objective: str | None = None  # what every method of this row minimises (None: the experiment's)

    @property
    def candidates(self) -> tuple[str, ...]:
        return (self.graph,) if isinstance(self.graph, str) else tuple(self.graph)

    @property
    def key(self) -> str:
        return f"{self.label} / {self.cluster}"


@dataclass(frozen=True)
class PolicySpec:
    """A learned policy some method columns start from (Placeto's transfer and generalization, GiPH's
    unseen clusters): trained once per level by ``method``'s own trainer (:mod:`placer.methods.learned.protocol`)
    on ``graphs`` (graph specs as in :class:`Row`) or on the training half of ``family``, each on
    ``cluster`` or, when ``clusters`` is given, on every one of those, cached by a hash like a run."""

    graphs: tuple[str, ...] = ()
    family: str | None = None
    cluster: str = "k80x2"
    clusters: tuple[str, ...] = ()  # train on every graph on each of these clusters (overrides ``cluster``)
    method: str = "placeto"  # the learned method whose trainer makes the policy and whose columns use it
    placements: Mapping[str, int] = field(default_factory=dict)  # level -> simulator calls for training
    seed: int = 0
    groups: int = 64
    # config fields of ``method`` the policy trains with instead of its defaults (checked against the
    # config when the policy is prepared; for placeto the trained values, the learned keep bias
    # included, travel in the checkpoint, so the placing method needs none of them); empty: the defaults
    trainer: Mapping[str, Any] = field(default_factory=dict)
    # alternatives to try on top of ``trainer``: one policy is trained per entry (each on the full
    # placement budget) and the one whose zero-shot placements of its own training graphs are the
    # fastest (geometric mean of the best of 8 sampled episodes per graph) is kept; the test graphs
    # are never looked at, and every candidate's cost is counted in the policy's record
    choices: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Agg:
    """A method's aggregate over seeds in one row (what derived columns see)."""

    step_ms: float | None  # mean best step time, None when no run succeeded
    oom: bool
    placements_to_best: float | None  # mean placements sampled until the best was first reached
    placements: float | None  # mean placements sampled in all
    seconds: float | None
    runs: int
    invalid: bool = False  # under a published objective: some run's placement breaks its constraints
    curves: tuple = ()  # per run: its best-so-far curve, ((placements sampled, best objective in ms), ...)


@dataclass(frozen=True)
class Derived:
    """A column computed from the row's aggregates, e.g. the Hierarchical Planner's "runtime
    reduction over the best prior placement". ``fn`` returns a number, a word shown as it is (e.g.
    "not reached"), or None (not computable)."""

    name: str
    fn: Callable[[Mapping[str, Agg]], float | str | None]
    fmt: str = "{:.1f}%"  # how ours and the paper's value are printed


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str  # citation, with the table it reproduces
    rows: tuple[Row, ...]
    methods: tuple[Method, ...]
    budgets: Mapping[str, Level]
    sim: str = "default"  # "default" or "placeto" (SimParams.placeto())
    derived: tuple[Derived, ...] = ()
    differences: tuple[str, ...] = ()  # why our numbers differ from the paper's, said plainly
    add_registered: tuple[str, ...] = ()  # also add every registered method of these families
    exclude_registered: tuple[str, ...] = ()  # ...except these names
    lower_bound_column: bool = False  # show the step-time lower bound and each cell's ratio to it
    method_summary: bool = False  # add a per-method summary (ratio to lower bound, gap to CP-SAT)
    paper_unit: str = "s"
    paper_notes: tuple[str, ...] = ()  # the paper's claims that are not table cells
    policies: Mapping[str, PolicySpec] = field(default_factory=dict)  # name -> policy for "@policy:<name>"
    objective: str = "sim"  # what the methods minimise (placer.objectives); rows and columns may override it

    def objective_for(self, row: Row, method: Method) -> str:
        """The objective a (row, column) cell minimises: the column's, else the row's, else the
        experiment's (``sim``: the event simulator)."""
        return method.objective or row.objective or self.objective

    def uses_objectives(self) -> bool:
        """Whether any cell minimises something other than the simulator (its table then reports
        the objective's value instead of the simulated step time)."""
        return (self.objective != "sim" or any(r.objective not in (None, "sim") for r in self.rows)
                or any(m.objective not in (None, "sim") for m in self.methods))

    def level(self, name: str) -> Level:
        if name not in self.budgets:
            raise KeyError(name)
        return self.budgets[name]


def with_registered(exp: Experiment) -> tuple[Method, ...]:
    """The experiment's methods plus, when asked, every registered method of the named families
    that the spec does not list yet (so a newly landed classical method appears by itself)."""
    if not exp.add_registered:
        return exp.methods
    from placer.methods import METHODS

    listed = {m.method for m in exp.methods}
    extra = [Method(m.name, m.name) for m in sorted(METHODS.values(), key=lambda m: (m.family, m.name))
             if m.family in exp.add_registered and m.name not in listed and m.name not in exp.exclude_registered]
    return tuple(exp.methods) + tuple(extra)


def stable_hash(doc: Mapping[str, Any], n: int = 16) -> str:
    """sha256 of the canonical JSON of ``doc`` (sorted keys), first ``n`` hex digits."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def slug(text: str) -> str:
    out = "".join(c if c.isalnum() or c in "-_." else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "x"
