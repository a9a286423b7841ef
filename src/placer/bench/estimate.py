"""What an experiment would cost before it runs (``placer bench <experiment> --estimate``).

The runs still to make (not in the cache) and the policies still to train, each priced from runs of
the same cell made before (same row, cluster and method label, any seed, any budget level: the
committed ``results/`` and ``results/paper/`` folders, or the ones named). A run that used its whole
budget costs in proportion to placements, so a reference of ``s`` seconds at ``B`` placements prices
``B'`` placements at ``s B' / B``; one that stopped short of its budget (a heuristic's fixed count,
zero-shot's few episodes, a converged search) costs the same again, scaled only when the new budget
is below what it used. The estimate of a cell is the median over its references; a cell with none
is priced at the median of its method's other rows (marked ``~``: a row's graph may be larger or
smaller), and one whose method has no runs at all is counted apart (marked ``+``: the total is then
a lower bound). Seconds are those the references took on the machines that made them (each run
file's ``host``); wall time at ``--jobs N`` deals the runs, in the order the command makes them, to
N workers, after the policies trained one after another (as :func:`placer.bench.runner.run_plan`
does)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from placer.bench.runner import Plan, RunTask, identity
from placer.bench.spec import slug
from placer.errors import InputError
from placer.io import read_json


@dataclass
class MethodCost:
    label: str
    cached: int = 0
    to_run: int = 0
    priced: int = 0  # runs to make that have a reference of their own cell
    borrowed: int = 0  # runs to make priced from the method's runs on other rows
    seconds: float = 0.0  # the priced runs' estimated seconds
    placements: int = 0  # placements of the runs to make (their budgets)


@dataclass
class Estimate:
    experiment: str
    level: str
    jobs: int
    methods: list[MethodCost]
    policies: list[tuple[str, float | None]]  # (policy, estimated training seconds or None) still to train
    run_seconds: list[float] = field(default_factory=list)  # every priced run's estimate

    @property
    def cpu_seconds(self) -> float:
        return sum(m.seconds for m in self.methods) + sum(s or 0.0 for _, s in self.policies)

    @property
    def unpriced(self) -> int:
        return sum(m.to_run - m.priced - m.borrowed for m in self.methods) + sum(s is None for _, s in self.policies)

    @property
    def borrowed(self) -> int:
        return sum(m.borrowed for m in self.methods)

    @property
    def wall_seconds(self) -> float:
        return sum(s or 0.0 for _, s in self.policies) + makespan(self.run_seconds, self.jobs)


def makespan(seconds: list[float], jobs: int) -> float:
    """Wall time of independent runs taken in this order by ``jobs`` workers, each run by the worker
    free first (as the worker pool of :func:`placer.bench.runner.run_plan` takes its queue)."""
    load = [0.0] * max(1, jobs)
    for s in seconds:
        load[load.index(min(load))] += s
    return max(load)


def scaled_seconds(doc: dict, placements: int | None, seconds_budget: float | None) -> float | None:
    """One reference run's price at a new budget (see the module docstring); None when it cannot say."""
    took = doc.get("seconds")
    if not isinstance(took, (int, float)) or took < 0:
        return None
    if placements is None:  # a budget in seconds: the run takes that long
        return float(seconds_budget) if seconds_budget is not None else None
    budget = (doc.get("spec") or {}).get("placements")
    used = (doc.get("cost") or {}).get("placements")
    if not isinstance(budget, int) or not isinstance(used, int) or used < 1:
        return None
    if used >= budget:  # searched to the end of its budget: in proportion
        return float(took) * placements / budget
    return float(took) * min(1.0, placements / used)  # stopped short: as long again, unless cut below that


def _cell_key(name: str) -> str:
    """A run file's row, cluster and method label, without its seed and hash."""
    return identity(name).rsplit("__s", 1)[0]


def _label_key(key: str) -> str:
    """The method label part of a cell key."""
    return key.rsplit("__", 1)[-1]


def reference_runs(experiment: str, sources: list[Path], labels: set[str]) -> dict[str, list[dict]]:
    """The run documents under ``<source>/<experiment>/runs`` of the method labels ``labels`` (slugs), by cell."""
    found: dict[str, list[dict]] = {}
    seen: set[str] = set()
    for src in sources:
        d = Path(src) / experiment / "runs"
        for p in sorted(d.glob("*.json")) if d.is_dir() else ():
            key = _cell_key(p.name)
            if _label_key(key) not in labels or p.name in seen:
                continue
            seen.add(p.name)
            try:
                doc = read_json(p)
            except InputError:  # truncated or malformed: the run would be made again, so it prices nothing
                continue
            if isinstance(doc, dict) and doc.get("status") == "ok":
                found.setdefault(key, []).append(doc)
    return found


def policy_seconds(experiment: str, sources: list[Path], name: str, placements: int) -> float | None:
    """A policy's training priced from a record of the same policy at another level: its seconds in
    proportion to the placements each candidate trains on."""
    prices = []
    for src in sources:
        for p in sorted((Path(src) / experiment / "policies").glob(f"{slug(name)}__*.json")):
            try:
                rec = read_json(p)
            except InputError:
                continue
            per = rec.get("placements", 0) / max(1, len(rec.get("candidates") or [None]))
            if isinstance(rec.get("seconds"), (int, float)) and per > 0:
                prices.append(rec["seconds"] * placements / per)
    return statistics.median(prices) if prices else None


def _price(docs: list[dict], task: RunTask) -> float | None:
    """The median of ``docs``' prices at ``task``'s budget (None without one)."""
    prices = [s for s in (scaled_seconds(d, task.placements, task.seconds) for d in docs) if s is not None]
    return statistics.median(prices) if prices else None


def estimate(plan: Plan, sources: list[Path], jobs: int = 1) -> Estimate:
    """Price the runs ``plan`` would make and the policies it would train (see the module docstring)."""
    todo = plan.pending()
    refs = reference_runs(plan.experiment.name, sources, {_label_key(_cell_key(c.path.name)) for c in todo})
    costs = {m.label: MethodCost(m.label) for m in plan.methods}
    out = Estimate(plan.experiment.name, plan.level, jobs, list(costs.values()), [])
    for c in plan.cells:
        if c.cached and not c.stale:
            costs[c.method.label].cached += 1
    for c in todo:
        mc = costs[c.method.label]
        mc.to_run += 1
        mc.placements += c.task.placements or 0
        key = _cell_key(c.path.name)
        s = _price(refs.get(key, []), c.task)
        if s is not None:
            mc.priced += 1
        else:  # no run of this cell: the median over the method's other rows, each priced as above
            rows = [_price(docs, c.task) for k, docs in refs.items() if k != key and _label_key(k) == _label_key(key)]
            rows = [x for x in rows if x is not None]
            s = statistics.median(rows) if rows else None
            mc.borrowed += s is not None
        if s is not None:
            mc.seconds += s
            out.run_seconds.append(s)
    for ctx in {id(p): p for c in todo for p in c.policies}.values():
        if not ctx.ready:
            out.policies.append((ctx.name, policy_seconds(plan.experiment.name, sources, ctx.name, ctx.placements)))
    return out


def render(est: Estimate) -> list[str]:
    """The estimate as lines for the terminal."""
    h = 3600.0
    lines = [f"{est.experiment} ({est.level}): what a run of this command would make, priced from earlier runs "
             "of the same cells (seconds as they took where they were made)", "",
             f"{'method':<44} {'cached':>7} {'to run':>7} {'budget':>12} {'CPU hours':>10}"]
    for m in est.methods:
        if m.cached or m.to_run:
            hours = f"{m.seconds / h:,.2f}" + ("+" if m.priced + m.borrowed < m.to_run else "~" if m.borrowed else "")
            lines.append(f"{m.label[:44]:<44} {m.cached:>7} {m.to_run:>7} {m.placements:>12,} {hours:>10}")
    for name, s in est.policies:
        label, hours = f"policy '{name}' (to train)", f"{s / h:,.2f}" if s is not None else "unknown"
        lines.append(f"{label[:44]:<44} {'':>7} {'':>7} {'':>12} {hours:>10}")
    more = (f"; ~ {_runs(est.borrowed)} priced from the method's runs on other rows" if est.borrowed else "") + \
        (f"; + {_runs(est.unpriced)} with no earlier run of their method to price them" if est.unpriced else "")
    lines += ["", f"in all: {est.cpu_seconds / h:,.2f} CPU hours{more}; about {est.wall_seconds / h:,.2f} hours "
              f"at --jobs {est.jobs}"]
    return lines


def _runs(n: int) -> str:
    return f"{n} run{'s' * (n != 1)}"
