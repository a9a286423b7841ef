"""`placer train` and `placer place`: train a Placeto policy (search mode on one graph, policy mode
on a family of graphs), place a graph with a trained policy, optionally fine-tuning it first.

Registered on :data:`placer.cli.app` when imported (``placer.cli._load_plugins``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from placer.cli import GroupingOpt, _emit, _us, app, console, err_console, load_problem, sim_params
from placer.cli.options import (at_least, finite_at_least_zero, fraction, one_of, output_file, positive_finite,
                                 seed_option)
from placer.errors import InputError

DEVICE_SETS = ("gpus", "all")
SimChoice = one_of("default", "placeto")
MAX_EPISODES = 1_000_000  # train / fine-tune / place episodes: days of simulation on a large graph
MAX_WORKERS = 1024  # episodes per update: each holds its episode's trajectory in memory until the update
MAX_PROCESSES = 4 * (os.cpu_count() or 1)  # worker processes, as threads elsewhere: 4 per core
EpisodesOpt = at_least(1, 400, MAX_EPISODES, "days of simulation on a large graph")
WorkersOpt = at_least(1, 8, MAX_WORKERS, "each worker keeps its episode's trajectory until the update")


def _need_torch() -> None:
    from placer.methods.placeto import _available

    why = _available()
    if why:
        raise InputError("placer", "learned placement", why, "install the extra")


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


def _placed(P, res, out, params) -> dict:
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


def _log(path):
    """(the JSON-lines log at ``path``, or None; the progress callback that writes one record a line,
    numbers that are not finite as null)."""
    import math

    from placer.io import JsonLines

    if path is None:
        return None, None
    lines = JsonLines(path)
    from placer.cli.guard import keep_on_interrupt

    keep_on_interrupt(f"the log {path} (one line per finished episode)")

    def write(record: dict) -> None:
        lines.write({k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()})

    return lines, write


def _progress(total: int, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[info]}"), console=err_console, transient=True,
                    disable=not err_console.is_terminal)
    task = prog.add_task(label, total=total, info="")

    def on_update(tr, results):
        best = min(b["objective_us"] for b in tr.best)
        prog.update(task, completed=tr.episode,
                    info=f"sims {tr.sim_calls:,}  best {_us(best)}  entropy {sum(r.entropy for r in results) / len(results):.3f}")

    return prog, on_update


@app.command()
def train(graph: Optional[List[str]] = typer.Option(None, "--graph", "-g", help="train on this graph (repeat for several: policy mode)"),
          family: Optional[str] = typer.Option(None, help="train on the training half of a graph family (cifar10, ptb, nmt)"),
          out: str = typer.Option(..., "--out", "-o", help="checkpoint to write (weights_only-safe state dict)",
                                  callback=output_file),
          cluster: str = typer.Option("k80x2", "--cluster", "-c", help="preset name or cluster JSON"),
          episodes: int = typer.Option(400, help=f"training episodes in all (1 to {MAX_EPISODES:,})", callback=EpisodesOpt),
          workers: int = typer.Option(8, help=f"episodes per update (synchronous workers, gradients summed; 1 to {MAX_WORKERS:,})",
                                      callback=WorkersOpt),
          backend: str = typer.Option("serial", help="serial, process (local worker processes) or ray",
                                      callback=one_of("serial", "process", "ray")),
          processes: Optional[int] = typer.Option(None, help=f"worker processes for the process/ray backends (1 to "
                                                  f"{MAX_PROCESSES}: 4 per core)",
                                                  callback=at_least(1, 2, MAX_PROCESSES, "4 per CPU core")),
          grouping: str = GroupingOpt,
          devices: str = typer.Option("gpus", help="candidate devices: gpus or all", callback=one_of(*DEVICE_SETS)),
          sweeps: int = typer.Option(1, help="times each group is revisited per episode (n)", callback=at_least(1, 1)),
          order: str = typer.Option("topological", help="topological or random visiting order",
                                    callback=one_of("topological", "random")),
          init: str = typer.Option("single", help="initial placement: single (all on one device) or random",
                                   callback=one_of("single", "random")),
          reward: str = typer.Option("intermediate", help="intermediate or terminal",
                                     callback=one_of("intermediate", "terminal")),
          lr: Optional[float] = typer.Option(None, help="initial learning rate, decays linearly to lr/10 (default: PlacetoConfig's)",
                                   callback=positive_finite(0.01)),
          gamma: Optional[float] = typer.Option(None, help="discount of the return-to-go (default: PlacetoConfig's)", callback=fraction),
          entropy: Optional[float] = typer.Option(None, help="initial entropy bonus, decays linearly to entropy/50 (default: PlacetoConfig's)",
                                        callback=finite_at_least_zero),
          keep_bias: Optional[float] = typer.Option(None, "--keep-bias", help="initial logit bonus of a group's current device on two "
                                                    "candidates, plus ln(A - 1) on A (default: PlacetoConfig's; the "
                                                    "generalization table's family policies: 0.5)",
                                                    callback=finite_at_least_zero),
          stop_window: int = typer.Option(0, help="stop when the objective changes < 2%% over this many episodes (0: off; "
                                                  "at most --episodes)", callback=at_least(0, 0, MAX_EPISODES)),
          resume: Optional[Path] = typer.Option(None, help="resume from this checkpoint (same graphs and settings)"),
          log: Optional[str] = typer.Option(None, help="JSON lines log, one line per episode", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = typer.Option("placeto", "--sim", help="'default' or 'placeto'", callback=SimChoice),
          as_json: bool = typer.Option(False, "--json")):
    """Train a Placeto policy with REINFORCE and write a checkpoint."""
    _need_torch()
    from placer.io import check_outputs_spare_inputs, write_checkpoint
    from placer.methods.placeto import PlacetoConfig, build_trainer
    from placer.rl.checkpoint import load_policy

    check_outputs_spare_inputs({"--out": out, "--log": log},
                               {"--graph": list(graph or []), "--cluster": cluster, "--resume": resume})
    if bool(graph) == bool(family):
        raise InputError("placer train", "graphs", "give --graph (one or more) or --family, not both or neither",
                         "e.g. --family cifar10 or --graph inception_v3.txt")
    if stop_window > episodes:
        raise InputError("--stop-window", str(stop_window), f"is more than --episodes ({episodes:,}): it could never stop early",
                         f"give --stop-window {min(episodes, 50)} or less than --episodes")
    problems = [load_problem(g, cluster) for g in graph] if graph else family_problems(family, cluster, "train")
    given = dict(lr_start=lr, lr_end=None if lr is None else lr / 10, gamma=gamma, entropy_start=entropy,
                 entropy_end=None if entropy is None else entropy / 50, keep_bias=keep_bias)
    lines, progress = _log(log)
    cfg = PlacetoConfig(grouping=grouping, devices=devices, sweeps=sweeps, order=order, init=init, reward=reward,
                        workers=workers, episodes=episodes, stop_window=stop_window, backend=backend,
                        processes=processes, progress=progress, **{k: v for k, v in given.items() if v is not None})
    gps = [cfg.task(P) for P in problems]
    tr = build_trainer(cfg, gps, seed, sim_params(sim))
    if resume is not None:
        state = load_policy(resume).state  # a bad file: InputError naming it
        try:
            tr.load_state_dict(state)
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(str(resume), "checkpoint", str(e), "resume with the graphs and settings it was trained with") from None
    prog, on_update = _progress(episodes, f"training on {len(gps)} graph(s)")
    try:
        with prog:
            tr.train(on_update=on_update)
    finally:
        tr.close()
        if lines is not None:
            lines.close()
    write_checkpoint(tr.state_dict(), out)
    data = {"out": str(out), "episodes": tr.episode, "updates": tr.update, "sim_calls": tr.sim_calls,
            "placements": tr.placements, "wall_s": tr.wall_s, "stopped_early": tr.stopped,
            "graphs": [{"graph": gp.name, "groups": gp.n_groups,
                        "best_objective_us": b["objective_us"] if b["placement"] is not None else None,
                        "best_step_us": b["step_us"] if b["placement"] is not None else None}
                       for gp, b in zip(gps, tr.best)]}

    def render(d):
        console.print(f"trained {d['episodes']:,} episodes ({d['updates']:,} updates, {d['sim_calls']:,} simulator calls, "
                      f"{d['wall_s']:.1f} s){'; stopped: objective settled' if d['stopped_early'] else ''}")
        for row in d["graphs"]:
            if row["best_step_us"] is None:
                console.print(f"  {row['graph']} ({row['groups']} groups): no episode on it yet")
                continue
            console.print(f"  {row['graph']} ({row['groups']} groups): best step time {_us(row['best_step_us'])}, "
                          f"objective {_us(row['best_objective_us'])}")
        err_console.print(f"wrote {d['out']}")

    _emit(data, as_json, render)


def _check_policy_fits(policy, P, devices: str) -> None:
    """The policy chooses among a fixed number of devices: refuse a cluster that offers another number."""
    from placer.rl.task import candidate_devices

    have = policy.net_config.n_actions
    need = len(candidate_devices(P, devices))
    if have != need:
        raise InputError(policy.label, "policy", f"chooses among {have} devices but cluster '{P.cluster.name}' offers "
                         f"{need} ({devices})", f"use a cluster with {have} candidate devices, or train a policy for this one")


@app.command()
def place(graph: str = typer.Argument(..., help="graph file or built-in name"),
          policy: Path = typer.Option(..., "--policy", help="checkpoint written by `placer train`"),
          cluster: str = typer.Option("k80x2", "--cluster", "-c"),
          finetune: int = typer.Option(0, help=f"fine-tune this many episodes on the graph first (0 to {MAX_EPISODES:,})",
                                       callback=at_least(0, 100, MAX_EPISODES, "days of simulation on a large graph")),
          workers: int = typer.Option(8, help=f"episodes per update while fine-tuning (1 to {MAX_WORKERS:,})", callback=WorkersOpt),
          episodes: int = typer.Option(8, help=f"placement episodes (the best placement evaluated wins; 1 to {MAX_EPISODES:,})",
                                       callback=at_least(1, 8, MAX_EPISODES, "days of simulation on a large graph")),
          sample: bool = typer.Option(True, "--sample/--greedy",
                                      help="sample devices (default), or take the most likely: a trained policy's "
                                           "most likely device is mostly where a group already is"),
          grouping: str = GroupingOpt,
          devices: str = typer.Option("gpus", callback=one_of(*DEVICE_SETS)),
          out: Optional[str] = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file),
          log: Optional[str] = typer.Option(None, help="JSON lines log of the fine-tuning episodes", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option), sim: str = typer.Option("placeto", "--sim", callback=SimChoice),
          as_json: bool = typer.Option(False, "--json")):
    """Place a graph with a trained Placeto policy (zero-shot, or after --finetune N episodes)."""
    _need_torch()
    from placer.io import check_outputs_spare_inputs
    from placer.methods import Budget, run_method
    from placer.rl.checkpoint import load_policy

    check_outputs_spare_inputs({"--out": out, "--log": log}, {"the graph": graph, "--policy": policy, "--cluster": cluster})
    P = load_problem(graph, cluster)
    trained = load_policy(policy)
    _check_policy_fits(trained, P, devices)
    lines, progress = _log(log)
    try:
        with console.status(f"placeto policy on {P.graph.name} ...", spinner="dots"):
            sp = sim_params(sim, P)
            res = run_method("placeto", P, Budget(), seed, sp, policy=trained, finetune=finetune,
                             workers=workers, place_episodes=episodes, greedy=not sample,
                             grouping=grouping, devices=devices, progress=progress)
    finally:
        if lines is not None:
            lines.close()
    data = _placed(P, res, out, sp)

    def render(d):
        console.print(f"placeto: step time {_us(d['step_time_us'])} (objective {_us(d['objective'])}, lower bound "
                      f"{_us(d['lower_bound_us'])}){'  OOM' if d['oom'] else ''}; {d['sim_calls']:,} simulator calls, "
                      f"{d['wall_s']:.2f} s; " + "; ".join(d["notes"]))
        if out is not None:
            err_console.print(f"wrote {out}")

    _emit(data, as_json, render)

