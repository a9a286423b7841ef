"""`placer policy train` and `placer policy place`: the learned-method protocol
(:mod:`placer.methods.learned`) for every learned method with a transferable policy (GDP, Mars,
ColocRL, the Hierarchical Planner, Placeto, DOPPLER, GiPH): train a policy on one or more graphs (on
one or more clusters) and write its
state, place a graph with a written policy (zero-shot, or fine-tuned first with
``--set finetune=N``). The method's hyperparameters are its config's, changed with ``--set``.
(`placer train` / `placer place` keep Placeto's paper-specific options.)

Registered on :data:`placer.cli.app` when imported (``placer.cli._load_plugins``)."""

from __future__ import annotations

from typing import List, Optional

import typer

from placer.cli import BudgetOpt, SimOpt, _emit, _us, app, console, err_console, load_problem, method_params, sim_params
from placer.cli.options import output_file, seed_option
from placer.errors import InputError

policy_app = typer.Typer(help="Train and use the policy of any learned method (GDP, Mars, ColocRL, the Hierarchical "
                              "Planner, Placeto): `placer policy train`, `placer policy place`.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")


def _learned(method: str):
    from placer.methods.learned import LEARNED, learned_method

    try:
        return learned_method(method)
    except InputError:
        raise InputError("--method", f"'{method}'", "has no transferable policy",
                         f"use one of: {', '.join(sorted(LEARNED))}") from None


def _config(method: str, params: list[str]):
    """The method's config from ``--set`` items; the files it names read here (methods take objects)."""
    from placer.cli.learned_files import open_learned_params
    from placer.methods import get_method

    return get_method(method).make_config(open_learned_params(method, method_params(params)))


@policy_app.command("train")
def train(graph: List[str] = typer.Option(..., "--graph", "-g", help="train on this graph (repeat for several, "
                                           "where the method trains one policy on several)"),
          method: str = typer.Option(..., "--method", "-m", help="a learned method: placeto, gdp, mars, colocrl, hierarchical, doppler or giph"),
          out: str = typer.Option(..., "--out", "-o", help="policy state to write (read back with weights_only)",
                                  callback=output_file),
          cluster: List[str] = typer.Option(["k80x4"], "--cluster", "-c",
                                            help="preset name or cluster JSON (repeat for several: every graph on "
                                                 "each, for a method whose policy places any cluster, as GiPH's)"),
          budget: Optional[int] = BudgetOpt,
          params: List[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE (repeatable)"),
          log: Optional[str] = typer.Option(None, help="JSON lines log, one line per training update", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = SimOpt, as_json: bool = typer.Option(False, "--json")):
    """Train a learned method's policy on the graphs and write its state."""
    from placer.cli.learn import _log
    from placer.cli.learned_files import set_files
    from placer.io import check_outputs_spare_inputs, write_checkpoint

    given, logs = set_files(params)
    check_outputs_spare_inputs({"--out": out, "--log": log, **logs}, {"--graph": graph, "--cluster": cluster, **given})
    m = _learned(method)
    cfg = _config(method, params)
    problems = [load_problem(g, c) for c in cluster for g in graph]
    from placer.bench.policies import training_params

    prm = training_params(problems, sim, method)  # the clusters' model, as the bench trains (one for all)
    lines, progress = _log(log)
    try:
        with console.status(f"training {method} on {len(problems)} graph(s) ...", spinner="dots"):
            policy = m.train(problems, cfg, seed, prm, placements=budget, progress=progress)
    finally:
        if lines is not None:
            lines.close()
    write_checkpoint(m.policy_state(policy), out)
    data = {"method": method, "out": str(out), "graphs": [P.graph.name for P in problems],
            "clusters": [P.cluster.name for P in problems], "placements": budget}
    _emit(data, as_json, lambda d: err_console.print(f"trained {method} on {len(graph)} graph(s) x {len(cluster)} "
                                                     f"cluster(s); wrote {out}"))


@policy_app.command("place")
def place(graph: str = typer.Argument(..., help="graph file or built-in name"),
          method: str = typer.Option(..., "--method", "-m", help="the method that trained the policy"),
          policy: str = typer.Option(..., "--policy", help="a state `placer policy train` wrote"),
          cluster: str = typer.Option("k80x4", "--cluster", "-c"),
          budget: Optional[int] = BudgetOpt,
          params: List[str] = typer.Option([], "--set", help="a method parameter KEY=VALUE, e.g. --set finetune=10"),
          out: Optional[str] = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = SimOpt, as_json: bool = typer.Option(False, "--json")):
    """Place a graph with a written policy (zero-shot, or fine-tuned first: --set finetune=N)."""
    from placer.cli.learn import _placed
    from placer.cli.learned_files import set_files
    from placer.io import check_outputs_spare_inputs
    from placer.methods import Budget, run_method

    given, logs = set_files(params)
    check_outputs_spare_inputs({"--out": out, **logs},
                               {"the graph": graph, "--policy": policy, "--cluster": cluster, **given})
    _learned(method)
    cfg = _config(method, [*params, f"policy={policy}"])
    P = load_problem(graph, cluster)
    with console.status(f"{method} policy on {P.graph.name} ...", spinner="dots"):
        sp = sim_params(sim, P)
        res = run_method(method, P, Budget(budget), seed, sp, config=cfg)
    data = _placed(P, res, out, sp)

    def render(d):
        console.print(f"{method}: step time {_us(d['step_time_us'])} (lower bound {_us(d['lower_bound_us'])})"
                      f"{'  OOM' if d['oom'] else ''}; {d['placements_sampled']:,} placements, {d['wall_s']:.2f} s")
        if out is not None:
            err_console.print(f"wrote {out}")

    _emit(data, as_json, render)
