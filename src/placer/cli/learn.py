"""`placer train` and `placer place`: deprecated aliases, for one release, of ``placer policy train
-m placeto`` and ``placer policy place -m placeto`` (:mod:`placer.cli.policy`). Each takes its old
options, turns them into that command's ``--set`` items (the placeto method's config fields), prints
one line to stderr saying so once its inputs are read, and runs it. ``--lr`` and ``--entropy`` set
the end of their schedules to lr/10 and entropy/50 here, values the command line made up: they are
refused, with the ``--set`` items to give instead.

Registered on :data:`placer.cli.app` when imported (``placer.cli._load_plugins``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from placer.cli import app
from placer.cli.options import (GroupingOpt, at_least, finite_at_least_zero, fraction, one_of, output_file,
                                positive_finite, seed_option)
from placer.errors import InputError

DEVICE_SETS = ("gpus", "all")
SimChoice = one_of("default", "placeto")
MAX_EPISODES = 1_000_000  # train / fine-tune / place episodes: days of simulation on a large graph
MAX_WORKERS = 1024  # episodes per update: each holds its episode's trajectory in memory until the update
MAX_PROCESSES = 4 * (os.cpu_count() or 1)  # worker processes, as threads elsewhere: 4 per core
EpisodesOpt = at_least(1, 400, MAX_EPISODES, "days of simulation on a large graph")
WorkersOpt = at_least(1, 8, MAX_WORKERS, "each worker keeps its episode's trajectory until the update")
SetOpt = typer.Option([], "--set", help="a placeto parameter KEY=VALUE (repeatable), as `placer policy` takes")


def notice(command: str) -> str:
    """The line an alias prints: what it is an alias of."""
    return f"placer {command} is a deprecated alias of `placer policy {command} -m placeto` (removed in the next release)"


def _items(**values) -> list[str]:
    """``--set`` items of the given config fields (None: not given, the config's value)."""
    return [f"{k}={v}" for k, v in values.items() if v is not None]


def _refuse_made_up(lr, entropy) -> None:
    for flag, value, start, end, ratio in (("--lr", lr, "lr_start", "lr_end", 10), ("--entropy", entropy,
                                                                                    "entropy_start", "entropy_end", 50)):
        if value is not None:
            raise InputError(flag, f"{value:g}", f"set {end} to {flag[2:]}/{ratio}, a value the command line made up "
                             "(it is no longer given)", f"give --set {start}={value:g} --set {end}=VALUE (the placeto "
                             "config's defaults: `placer methods --json`)")


@app.command()
def train(graph: Optional[List[str]] = typer.Option(None, "--graph", "-g", help="train on this graph (repeat for several: policy mode)"),
          family: Optional[str] = typer.Option(None, help="train on the training half of a graph family (cifar10, ptb, nmt)"),
          out: str = typer.Option(..., "--out", "-o", help="checkpoint to write (weights_only-safe state dict)",
                                  callback=output_file),
          cluster: str = typer.Option("k80x2", "--cluster", "-c", help="preset name or cluster JSON"),
          episodes: int = typer.Option(400, help=f"training episodes in all (1 to {MAX_EPISODES:,}): --set episodes",
                                       callback=EpisodesOpt),
          workers: int = typer.Option(8, help=f"episodes per update (1 to {MAX_WORKERS:,}): --set workers",
                                      callback=WorkersOpt),
          backend: str = typer.Option("serial", help="serial, process (local worker processes) or ray: --set backend",
                                      callback=one_of("serial", "process", "ray")),
          processes: Optional[int] = typer.Option(None, help=f"worker processes for the process/ray backends (1 to "
                                                  f"{MAX_PROCESSES}: 4 per core): --set processes",
                                                  callback=at_least(1, 2, MAX_PROCESSES, "4 per CPU core")),
          grouping: str = GroupingOpt,
          devices: str = typer.Option("gpus", help="candidate devices: gpus or all: --set devices",
                                      callback=one_of(*DEVICE_SETS)),
          sweeps: int = typer.Option(1, help="times each group is revisited per episode (n): --set sweeps",
                                     callback=at_least(1, 1)),
          order: str = typer.Option("topological", help="topological or random visiting order: --set order",
                                    callback=one_of("topological", "random")),
          init: str = typer.Option("single", help="initial placement: single or random: --set init",
                                   callback=one_of("single", "random")),
          reward: str = typer.Option("intermediate", help="intermediate or terminal: --set reward",
                                     callback=one_of("intermediate", "terminal")),
          lr: Optional[float] = typer.Option(None, help="refused: give --set lr_start=X --set lr_end=Y",
                                             callback=positive_finite(0.01)),
          gamma: Optional[float] = typer.Option(None, help="discount of the return-to-go: --set gamma", callback=fraction),
          entropy: Optional[float] = typer.Option(None, help="refused: give --set entropy_start=X --set entropy_end=Y",
                                                  callback=finite_at_least_zero),
          keep_bias: Optional[float] = typer.Option(None, "--keep-bias", help="initial logit bonus of a group's current "
                                                    "device on two candidates: --set keep_bias",
                                                    callback=finite_at_least_zero),
          stop_window: int = typer.Option(0, help="stop when the objective changes < 2%% over this many episodes (0: off; "
                                                  "at most --episodes): --set stop_window",
                                          callback=at_least(0, 0, MAX_EPISODES)),
          resume: Optional[Path] = typer.Option(None, help="resume from this checkpoint (same graphs and settings): "
                                                "--set policy"),
          params: List[str] = SetOpt,
          log: Optional[str] = typer.Option(None, help="JSON lines log, one line per episode", callback=output_file),
          seed: int = typer.Option(0, callback=seed_option),
          sim: str = typer.Option("placeto", "--sim", help="'default' or 'placeto'", callback=SimChoice),
          as_json: bool = typer.Option(False, "--json")):
    """Deprecated alias of `placer policy train -m placeto` (its options become --set items)."""
    from placer.cli.policy import train_policy

    _refuse_made_up(lr, entropy)
    if stop_window > episodes:
        raise InputError("--stop-window", str(stop_window), f"is more than --episodes ({episodes:,}): it could never stop early",
                         f"give --stop-window {min(episodes, 50)} or less than --episodes")
    items = _items(episodes=episodes, workers=workers, backend=backend, processes=processes, grouping=grouping,
                   devices=devices, sweeps=sweeps, order=order, init=init, reward=reward, gamma=gamma,
                   keep_bias=keep_bias, stop_window=stop_window, policy=resume)
    train_policy("placeto", out, list(graph or []), family, [cluster], None, items + list(params), log, seed, sim,
                 as_json, notice=notice("train"))


@app.command()
def place(graph: str = typer.Argument(..., help="graph file or built-in name"),
          policy: Path = typer.Option(..., "--policy", help="checkpoint written by `placer policy train -m placeto`"),
          cluster: str = typer.Option("k80x2", "--cluster", "-c"),
          finetune: int = typer.Option(0, help=f"fine-tune this many episodes on the graph first (0 to {MAX_EPISODES:,}): "
                                       "--set finetune", callback=at_least(0, 100, MAX_EPISODES,
                                                                           "days of simulation on a large graph")),
          workers: int = typer.Option(8, help=f"episodes per update while fine-tuning (1 to {MAX_WORKERS:,}): --set workers",
                                      callback=WorkersOpt),
          episodes: int = typer.Option(8, help=f"placement episodes, the best placement evaluated wins (1 to "
                                       f"{MAX_EPISODES:,}): --set place_episodes",
                                       callback=at_least(1, 8, MAX_EPISODES, "days of simulation on a large graph")),
          sample: bool = typer.Option(True, "--sample/--greedy",
                                      help="sample devices (default), or take the most likely: --set greedy"),
          grouping: str = GroupingOpt,
          devices: str = typer.Option("gpus", help="gpus or all: --set devices", callback=one_of(*DEVICE_SETS)),
          params: List[str] = SetOpt,
          out: Optional[str] = typer.Option(None, "--out", "-o", help="write the placement JSON here", callback=output_file),
          log: Optional[str] = typer.Option(None, help="JSON lines log of the fine-tuning episodes: --set log",
                                            callback=output_file),
          seed: int = typer.Option(0, callback=seed_option), sim: str = typer.Option("placeto", "--sim", callback=SimChoice),
          as_json: bool = typer.Option(False, "--json")):
    """Deprecated alias of `placer policy place -m placeto` (its options become --set items)."""
    from placer.cli.policy import place_policy

    items = _items(finetune=finetune, workers=workers, place_episodes=episodes, greedy=not sample, grouping=grouping,
                   devices=devices, log=log)
    place_policy(graph, "placeto", str(policy), cluster, None, items + list(params), out, seed, sim, as_json,
                 notice=notice("place"))
