"""`placer capture`: a user's PyTorch model or a Hugging Face model -> a native training-step graph file.

    placer capture my_model.py:build --input 3x32x32 --batch 16 --out g.json
    placer capture pkg.models:make_net --set width=128 --input 64:int64:1000 --loss cross-entropy -o g.json
    placer capture hf:gpt2 --set n_layer=2 --set n_embd=128 --batch 4 --seq 256 -o gpt2.json
    placer capture my_model.py:build --input 3x32x32 --batch 16 --profile cpu --profile cuda:0 -o g.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, err_console
from placer.cli.options import at_least, bounded, output_file, output_folder, seed_option
from placer.errors import InputError, printable

MAX_NAME = 200
MAX_THREADS_PER_CORE = 4  # torch threads beyond this only slow it down (as `placer run --threads`)


def _profile_threads(ctx: typer.Context, param: typer.CallbackParam, value):
    import os

    cores = os.cpu_count() or 1
    return at_least(1, 1, MAX_THREADS_PER_CORE * cores, f"{MAX_THREADS_PER_CORE} per CPU core, {cores} cores here")(
        ctx, param, value)


def _profile_devices(ctx: typer.Context, param: typer.CallbackParam, value):
    """Every --profile DEVICE a device torch sees here, before anything is captured."""
    if not value or ctx.resilient_parsing:
        return value
    from placer.runtime.profile_device import check_device

    return [check_device(d, "--profile") for d in value]


@app.command()
def capture(ctx: typer.Context, source: str = typer.Argument(..., help="FILE.py:FACTORY, MODULE:FACTORY, or hf:NAME (a transformers model type)"),
            out: str = typer.Option(..., "--out", "-o", help="native JSON output (.json or .json.gz)",
                                    callback=output_file),
            inputs: list[str] = typer.Option([], "--input", "-i", help="an input, SHAPE[:DTYPE[:HIGH]] without the batch "
                                             "dimension (3x224x224, 128:int64:30000); repeat for several"),
            batch: int = typer.Option(None, "--batch", "-b", help="batch size, prepended to every --input (default 1; "
                                      "hf: 8; at most 1,048,576)",
                                      callback=bounded("batch", 16)),
            seq: Optional[int] = typer.Option(None, "--seq", help="hf: tokens per sequence (default 128; at most the "
                                              "model's positions)", callback=bounded("hf.seq", 128)),
            loss: str = typer.Option("auto", "--loss", help="auto (the output if scalar, else its mean), mean, sum, "
                                     "cross-entropy, or FILE.py:FUNCTION(output) -> scalar"),
            optimizer: str = typer.Option("sgd-momentum", help="sgd, sgd-momentum or adam"),
            sets: list[str] = typer.Option([], "--set", help="KEY=VALUE (JSON value): a factory keyword argument, or an "
                                           "hf config field (n_layer=2)"),
            seed: int = typer.Option(0, help="seeds the weights and inputs (used again by `placer run`)",
                                     callback=seed_option),
            name: Optional[str] = typer.Option(None, help="graph name (default: the factory's file or the hf name)"),
            profile: list[str] = typer.Option([], "--profile", help="record real steps on DEVICE (cpu, cuda:K; repeat "
                                              "for several) with torch.profiler and store every op's measured cost under "
                                              "the device's model key (the key `--cluster here` devices look up); "
                                              "cached by model, configuration, device and torch version",
                                              callback=_profile_devices),
            profile_threads: int = typer.Option(1, "--profile-threads", help="torch CPU threads while profiling "
                                                "(default 1: the single-thread devices of `--cluster here:cpus=N` and "
                                                "`placer run --threads 1`; part of the CPU's key, e.g. .../1t)",
                                                callback=_profile_threads),
            profile_steps: int = typer.Option(5, "--profile-steps", help="steps recorded under the profiler, and as "
                                              "many timed plain steps (1 to 100)", callback=at_least(1, 5, 100,
                                              "each step's trace is held in memory")),
            profile_cache: Optional[str] = typer.Option(None, "--profile-cache", help="folder of cached profiles "
                                                        "(default $PLACER_CACHE_DIR/profiles or ~/.cache/placer/profiles)",
                                                        callback=output_folder),
            no_profile_cache: bool = typer.Option(False, "--no-profile-cache", help="record again, read and write no "
                                                  "cached profile"),
            profile_cpu: bool = typer.Option(False, "--profile-cpu", help="the older op-by-op profile: time every op "
                                             "alone on this CPU (compute_us['cpu'] = measured medians); --profile cpu "
                                             "records whole steps instead"),
            as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON")):
    """Capture a model's training step (forward, loss, backward, update) and write it as a graph file
    that `placer run` can execute."""
    import json
    import sys

    say = _sayer(ctx)  # what it is loading, as it goes: a transient line on a terminal's stderr
    say("importing torch ...")
    from placer.frontends.native import save_graph
    from placer.frontends.recipe import parse_input_spec, parse_sets
    from placer.frontends.torch import OPTIMIZERS
    from placer.io import check_outputs_spare_inputs

    check_outputs_spare_inputs({"--out": out}, {"the model": source, "--loss": loss})
    if optimizer not in OPTIMIZERS:
        raise InputError("--optimizer", f"'{optimizer}'", "is not supported", f"use one of {', '.join(OPTIMIZERS)}")
    if batch is not None and batch < 1:
        raise InputError("--batch", str(batch), "is not a positive batch size", "use --batch 1 or more")
    kw = parse_sets(sets)
    if name is not None:
        check_name(name)
    if source.startswith("hf:"):
        say("importing transformers ...")
        from placer.frontends.hf import spec_recipe

        if inputs:
            raise InputError("--input", inputs[0], "does not apply to hf: models", "use --batch / --seq (inputs come from the config)")
        recipe = spec_recipe(source, kw, batch, seq, optimizer, seed)  # every number checked (placer.bounds)
        if loss != "auto":
            raise InputError("--loss", loss, "does not apply to hf: models", "their task head computes the loss")
        default_name = f"hf-{recipe['name']}"
    else:
        if ":" not in source:
            raise InputError(source, "model", "is not FILE.py:FACTORY, MODULE:FACTORY or hf:NAME", "e.g. my_model.py:build")
        if seq is not None:
            raise InputError("--seq", str(seq), "applies to hf: models only", "give the sequence length in --input")
        from placer.runtime.trust import check_inputs

        specs = [parse_input_spec(t, batch or 1) for t in inputs]
        check_inputs(specs, "--input", "input")
        target = source
        file_part = source.rpartition(":")[0]
        if file_part.endswith(".py") and Path(file_part).is_file():
            target = f"{Path(file_part).resolve()}:{source.rpartition(':')[2]}"
        recipe = {"kind": "factory", "target": target, "kwargs": kw, "inputs": specs, "loss": loss,
                  "optimizer": optimizer, "seed": seed}
        default_name = Path(file_part).stem if file_part.endswith(".py") else file_part.rsplit(".", 1)[-1]
    from placer.cli.common import safe
    from placer.cli.guard import user_code

    chose: list[str] = []
    with user_code(source, "model"):
        cap = _capture_saying(recipe, name or default_name, source, say, chose)
        g = cap.graph
        if profile_cpu:
            say("timing every op alone on this CPU ...")
            from placer.cost.profile import profile_capture, with_measured_costs

            g = with_measured_costs(g, profile_capture(cap, "cpu", threads=1, clock="thread"), "cpu")
    err_console.print(f"inputs: {chose[0]}", markup=False, highlight=False)  # the shapes it chose, once captured
    profiles = []
    if profile:
        from placer.runtime.profile_device import default_cache_dir, profile_graph

        cache = None if no_profile_cache else (profile_cache or default_cache_dir())
        with console.status(f"profiling on {', '.join(profile)} ...", spinner="dots"), user_code(source, "model"):
            g, profiles = profile_graph(g, profile, threads=profile_threads, steps=profile_steps, cache=cache)
    save_graph(g, out)
    data = {"graph": g.name, "ops": g.n_ops, "edges": g.n_edges, "capture_s": round(cap.capture_s, 3),
            "fx_nodes": cap.info.get("fx_nodes"), "params": len(cap.info.get("params", [])),
            "param_bytes": float(g.param_bytes.sum()), "gflops": float(g.flops.sum() / 1e9), "out": str(out),
            "profiles": profiles}
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
        return
    console.print(f"{safe(g.name)}: {g.n_ops:,} ops, {g.n_edges:,} edges, {data['gflops']:,.2f} GFLOP per step, "
                  f"captured in {cap.capture_s:.2f} s")
    for p in profiles:
        for note in p["notes"]:
            err_console.print(safe(note))
        if "same_as" in p:
            console.print(f"{p['device']}: same model as {p['same_as']} ({safe(p['key'])}), profiled once")
            continue
        src = {"hit": "from the cache", "miss": "recorded, cached", "off": "recorded, not cached"}[p["cache"]]
        console.print(f"{p['device']} -> {safe('compute_us[' + p['key'] + ']')}: {p['steps']} steps {src} ({p['date']}), "
                      f"step {p['step_us'] / 1e3:,.1f} ms (iqr {p['step_iqr_pct']:.1f}%), ops sum "
                      f"{p['sum_cost_us'] / 1e3:,.1f} ms")
    err_console.print(f"wrote {safe(out)}")


def _sayer(ctx):
    """``say(what)``: one transient status line on stderr, shown on a terminal only (piped stderr and
    bad input get nothing from it), gone when the command ends, with the seconds since it started."""
    import time

    from rich.progress import Progress, SpinnerColumn, TextColumn

    prog = ctx.with_resource(
        Progress(SpinnerColumn(), TextColumn("{task.description}"), console=err_console, transient=True,
                 disable=not err_console.is_terminal, redirect_stdout=False, redirect_stderr=False))
    task = prog.add_task("", total=None)
    t0 = time.perf_counter()

    def say(what: str) -> None:
        prog.update(task, description=f"[{time.perf_counter() - t0:.1f} s] {what}")
        prog.refresh()

    return say


def _capture_saying(recipe: dict, name: str, source: str, say, chose: list):
    """:func:`placer.build.capture_recipe`, saying what it does as it goes (building the model,
    tracing its step) and putting the input shapes it chose in ``chose``."""
    from rich.markup import escape

    from placer.frontends.recipe import capture_with
    from placer.build import build

    def build_saying(r, device):
        say(f"building the model {escape(printable(source))} on {device} ...")
        m, xs, loss_fn = build(r, device)
        shapes = ", ".join("x".join(str(d) for d in getattr(x, "shape", ())) + " " + str(getattr(x, "dtype", "")).replace("torch.", "")
                           for x in xs)
        chose.append((f"batch {r['batch']}, sequence {r['seq']} ({shapes})" if r.get("kind") == "hf" else shapes))
        say(f"tracing the training step (forward, loss, backward, update) of inputs {chose[-1]} ...")
        return m, xs, loss_fn

    return capture_with(recipe, build_saying, name)


def check_name(name: str) -> None:
    """``--name`` is stored in the graph file and printed later: printable characters only, not too long."""
    if not name.strip() or not name.isprintable() or len(name) > MAX_NAME:
        raise InputError("--name", printable(name, 80), f"is empty, longer than {MAX_NAME} characters or holds control "
                         "characters (terminal escapes, newlines, bidi overrides)", "give a plain name, e.g. --name my-net")
