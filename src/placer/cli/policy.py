"""`placer policy train|place|finetune`: the learned-method protocol (:mod:`placer.methods.learned.protocol`)
for every learned method with a transferable policy (those in
:data:`placer.methods.learned.LEARNED`; `placer policy --help` lists them): train a policy on one
or more graphs (on one or more clusters, or a generated family) and write its state, place a graph
with a written policy (zero-shot, or fine-tuned first with ``--set finetune=N``), fine-tune a
written policy on a graph and write the fine-tuned one. The method's hyperparameters are its
config's, changed with ``--set``. `placer train` / `placer place` (:mod:`placer.cli.learn`) are
deprecated aliases of ``placer policy train|place -m placeto``.

Registered on :data:`placer.cli.app` when imported (``placer.cli._load_plugins``)."""

from __future__ import annotations

from typing import List, Optional

import typer
from typer.core import TyperGroup

from placer.cli import app
from placer.cli.common import console, emit, err_console, load_problem, method_params, sim_params, us
from placer.cli.options import BudgetOpt, SimOpt, output_file, seed_option
from placer.errors import InputError

def learned_names() -> list[str]:
    """The learned methods' names, from the registry (importing every method module)."""
    import placer.methods  # noqa: F401  (registers them)
    from placer.methods.learned.protocol import LEARNED

    return sorted(LEARNED)


class _LearnedGroup(TyperGroup):
    """`placer policy`'s group: its help names the learned methods of the registry, read when the help
    is shown (importing every method at start-up would slow every command)."""

    def format_help(self, ctx, formatter):
        self.help = ("Train and use the policy of any learned method (" + ", ".join(learned_names()) + "): "
                     "`placer policy train`, `placer policy place`, `placer policy finetune`.")
        return super().format_help(ctx, formatter)


policy_app = typer.Typer(cls=_LearnedGroup, help="Train and use the policy of any learned method.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
MethodOpt = typer.Option(..., "--method", "-m", help="a learned method (`placer policy --help` lists them)")


def _learned(method: str):
    """The learned method ``method`` (InputError when it is none, or cannot run here)."""
    from placer.methods import METHODS
    from placer.methods.learned.protocol import LEARNED, learned_method

    try:
        m = learned_method(method)
    except InputError:
        raise InputError("--method", f"'{method}'", "has no transferable policy",
                         f"use one of: {', '.join(sorted(LEARNED))}") from None
    why = METHODS[method].available()
    if why:
        raise InputError("placer policy", method, why, "install the extra")
    return m


def _config(method: str, params: list[str]):
    """The method's config from ``--set`` items; the files it names read here (methods take objects)."""
    from placer.cli.learned_files import open_learned_params
    from placer.methods import get_method

    return get_method(method).make_config(open_learned_params(method, method_params(params)))


def family_problems(family: str, cluster: str, split: str):
    """The Problems of a generated graph family (placer.zoo.families), on ``cluster``."""
    from placer.problem import Problem
    from placer.resolve import resolve_cluster

    try:
        from placer.zoo import families
    except ImportError:
        raise InputError("--family", f"'{family}'", "graph families are not available (placer.zoo.families is missing)",
                         "train on graphs with --graph") from None
    graphs = families.load_family(family, split=split)
    c = resolve_cluster(cluster)
    return [Problem(g, c) for g in graphs]


def placed_summary(P, res, out, params) -> dict:
    """The summary a policy's placement prints (its result and the problem's lower bound under
    ``params``, as compare states it), the placement written to ``out`` first when given."""
    from placer.compare import lb_us, step_bound
    from placer.frontends.native import save_placement

    data = res.summary()
    fits = not data.get("oom")
    data["lower_bound"] = {k: v for k, v in step_bound(P, params, known_us=data["step_time_us"] if fits else None).items()
                           if k != "placement"}
    data["lower_bound_us"] = lb_us(data["lower_bound"])
    if out is not None:
        save_placement(out, P.graph, P.cluster, res.placement.devices, result=data)
    return data


def _render_placed(method: str, out):
    def render(d):
        console.print(f"{method}: step time {us(d['step_time_us'])} (lower bound {us(d['lower_bound_us'])})"
                      f"{'  OOM' if d['oom'] else ''}; {d['placements_sampled']:,} placements, {d['wall_s']:.2f} s"
                      + "".join(f"; {n}" for n in d.get("notes", [])))
        if out is not None:
            err_console.print(f"wrote {out}")

    return render


def _said(notice: str | None) -> None:
    if notice:
        err_console.print(notice, highlight=False, markup=False, soft_wrap=True)  # one line, however wide


@policy_app.command("train")
def train(graph: Optional[List[str]] = typer.Option(None, "--graph", "-g", help="train on this graph (repeat for "
                                                    "several, where the method trains one policy on several)"),
          family: Optional[str] = typer.Option(None, help="or train on the training half of a graph family (cifar10, "
                                               "ptb, nmt)"),
          method: str = MethodOpt,
          out: str = typer.Option(..., "--out", "-o", help="policy state to write (read back with weights_only)",
                                  callback=output_file),
          cluster: List[str] = typer.Option(["k80x4"], "--cluster", "-c",
                                            help="preset name or cluster JSON (repeat for several: every graph on "
                                                 "each, for a method whose policy places any cluster, as GiPH's)"),
          budget: Optional[int] = BudgetOpt,
          params: List[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE (repeatable; "
                                           "policy=FILE: continue that policy, as the method's train says)"),
          log: Optional[str] = typer.Option(None, help="JSON lines log, one line per training update", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = SimOpt, as_json: bool = typer.Option(False, "--json")):
    """Train a learned method's policy on the graphs and write its state."""
    train_policy(method, out, list(graph or []), family, list(cluster), budget, list(params), log, seed, sim, as_json)


def train_policy(method: str, out: str, graphs: list[str], family: str | None, clusters: list[str],
                 budget: int | None, params: list[str], log: str | None, seed: int, sim: str, as_json: bool,
                 notice: str | None = None) -> None:
    """`placer policy train` (and its alias `placer train`, whose ``notice`` is printed once the
    inputs are read, before any training)."""
    from placer.bench.policies import training_params
    from placer.cli.learned_files import progress_log, set_files
    from placer.io import check_outputs_spare_inputs, write_checkpoint

    given, logs = set_files(params)
    check_outputs_spare_inputs({"--out": out, "--log": log, **logs}, {"--graph": graphs, "--cluster": clusters, **given})
    if bool(graphs) == bool(family):
        raise InputError("placer policy train", "graphs", "give --graph (one or more) or --family, not both or neither",
                         "e.g. --family cifar10 or --graph inception_v3.txt")
    m = _learned(method)
    cfg = _config(method, params)
    problems = ([load_problem(g, c) for c in clusters for g in graphs] if graphs else
                [P for c in clusters for P in family_problems(family, c, "train")])
    prm = training_params(problems, sim, method)  # the clusters' model, as the bench trains (one for all)
    _said(notice)
    lines, progress = progress_log(log)
    try:
        with console.status(f"training {method} on {len(problems)} graph(s) ...", spinner="dots"):
            policy = m.train(problems, cfg, seed, prm, placements=budget, progress=progress)
    finally:
        if lines is not None:
            lines.close()
    write_checkpoint(m.policy_state(policy), out)
    data = {"method": method, "out": str(out), "graphs": [P.graph.name for P in problems],
            "clusters": [P.cluster.name for P in problems], "placements": budget, **m.trained(policy)}

    def render(d):
        done = ", ".join(f"{d[k]:,} {k.replace('_', ' ')}" for k in ("episodes", "placements", "sim_calls")
                         if isinstance(d.get(k), int))
        err_console.print(f"trained {method} on {len(problems)} problem(s) ({len(set(d['graphs']))} graph(s) x "
                          f"{len(clusters)} cluster(s)){': ' + done if done else ''}; wrote {out}")

    emit(data, as_json, render)


@policy_app.command("place")
def place(graph: str = typer.Argument(..., help="graph file or built-in name"),
          method: str = MethodOpt,
          policy: str = typer.Option(..., "--policy", help="a state `placer policy train` wrote"),
          cluster: str = typer.Option("k80x4", "--cluster", "-c"),
          budget: Optional[int] = BudgetOpt,
          params: List[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE, e.g. --set finetune=10"),
          out: Optional[str] = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = SimOpt, as_json: bool = typer.Option(False, "--json")):
    """Place a graph with a written policy (zero-shot, or fine-tuned first: --set finetune=N)."""
    place_policy(graph, method, policy, cluster, budget, list(params), out, seed, sim, as_json)


def _policy_problem(graph: str, method: str, policy: str, cluster: str, params: list[str], outputs: dict):
    """(the method, its config with the policy read from its file, the problem), every input checked
    and the method told to refuse a policy that cannot place the problem, before any work."""
    from placer.cli.learned_files import set_files
    from placer.io import check_outputs_spare_inputs

    given, logs = set_files(params)
    check_outputs_spare_inputs({**outputs, **logs}, {"the graph": graph, "--policy": policy, "--cluster": cluster, **given})
    m = _learned(method)
    cfg = _config(method, [*params, f"policy={policy}"])
    P = load_problem(graph, cluster)
    m.check_fits(P, cfg)
    return m, cfg, P


def place_policy(graph: str, method: str, policy: str, cluster: str, budget: int | None, params: list[str],
                 out: str | None, seed: int, sim: str, as_json: bool, notice: str | None = None) -> None:
    """`placer policy place` (and its alias `placer place`, whose ``notice`` is printed once the
    inputs are read, before any work)."""
    from placer.methods import Budget, run_method

    _, cfg, P = _policy_problem(graph, method, policy, cluster, params, {"--out": out})
    _said(notice)
    with console.status(f"{method} policy on {P.graph.name} ...", spinner="dots"):
        sp = sim_params(sim, P)
        res = run_method(method, P, Budget(budget), seed, sp, config=cfg)
    emit(placed_summary(P, res, out, sp), as_json, _render_placed(method, out))


@policy_app.command("finetune")
def finetune(graph: str = typer.Argument(..., help="graph file or built-in name"),
             method: str = MethodOpt,
             policy: str = typer.Option(..., "--policy", help="a state `placer policy train` wrote"),
             out: str = typer.Option(..., "--out", "-o", help="the fine-tuned policy state to write",
                                     callback=output_file),
             cluster: str = typer.Option("k80x4", "--cluster", "-c"),
             budget: Optional[int] = BudgetOpt,
             params: List[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE; finetune=N (N >= 1) "
                                              "says how long"),
             placement: Optional[str] = typer.Option(None, "--placement", help="write the placement JSON here",
                                                     callback=output_file),
             seed: int = typer.Option(0, callback=seed_option),
             sim: str = SimOpt, as_json: bool = typer.Option(False, "--json")):
    """Fine-tune a written policy on a graph (--set finetune=N), place the graph with it and write the
    fine-tuned policy."""
    from placer.io import write_checkpoint
    from placer.methods.base import Evaluator

    m, cfg, P = _policy_problem(graph, method, policy, cluster, list(params), {"--out": out, "--placement": placement})
    if cfg.finetune < 1:
        raise InputError("--set finetune", str(cfg.finetune), "fine-tunes nothing",
                         "give --set finetune=N with N >= 1 (or place zero-shot: placer policy place)")
    with console.status(f"fine-tuning {method} on {P.graph.name} ...", spinner="dots"):
        sp = sim_params(sim, P)
        ev = Evaluator(P, sp, limit=budget if budget is not None else cfg.placements)  # as run_method's budget
        res, tuned = m.finetune(P, m.load_policy(cfg.policy), seed, ev, cfg, progress=cfg.progress)
    write_checkpoint(m.policy_state(tuned), out)
    data = {**placed_summary(P, res, placement, sp), "policy_out": str(out)}

    def render(d):
        _render_placed(method, placement)(d)
        err_console.print(f"wrote {out}")

    emit(data, as_json, render)
