"""`placer capture`: a user's PyTorch model or a Hugging Face model -> a native training-step graph file.

    placer capture my_model.py:build --input 3x32x32 --batch 16 --out g.json
    placer capture pkg.models:make_net --set width=128 --input 64:int64:1000 --loss cross-entropy -o g.json
    placer capture hf:gpt2 --set n_layer=2 --set n_embd=128 --batch 4 --seq 256 -o gpt2.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from placer.cli import app, console, err_console
from placer.cli.options import at_least, output_file
from placer.errors import InputError


@app.command()
def capture(source: str = typer.Argument(..., help="FILE.py:FACTORY, MODULE:FACTORY, or hf:NAME (a transformers model type)"),
            out: str = typer.Option(..., "--out", "-o", help="native JSON output (.json or .json.gz)",
                                    callback=output_file),
            inputs: list[str] = typer.Option([], "--input", "-i", help="an input, SHAPE[:DTYPE[:HIGH]] without the batch "
                                             "dimension (3x224x224, 128:int64:30000); repeat for several"),
            batch: int = typer.Option(None, "--batch", "-b", help="batch size, prepended to every --input (default 1; hf: 8)",
                                      callback=at_least(1, 16)),
            seq: Optional[int] = typer.Option(None, "--seq", help="hf: tokens per sequence (default 128)",
                                              callback=at_least(1, 128)),
            loss: str = typer.Option("auto", "--loss", help="auto (the output if scalar, else its mean), mean, sum, "
                                     "cross-entropy, or FILE.py:FUNCTION(output) -> scalar"),
            optimizer: str = typer.Option("sgd-momentum", help="sgd, sgd-momentum or adam"),
            sets: list[str] = typer.Option([], "--set", help="KEY=VALUE (JSON value): a factory keyword argument, or an "
                                           "hf config field (n_layer=2)"),
            seed: int = typer.Option(0, help="seeds the weights and inputs (used again by `placer run`)",
                                     callback=at_least(0)),
            name: Optional[str] = typer.Option(None, help="graph name (default: the factory's file or the hf name)"),
            profile_cpu: bool = typer.Option(False, "--profile-cpu", help="also measure every op on this CPU "
                                             "(compute_us['cpu'] = measured medians)"),
            as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON")):
    """Capture a model's training step (forward, loss, backward, update) and write it as a graph file
    that `placer run` can execute."""
    import json
    import sys

    from placer.frontends.native import save_graph
    from placer.frontends.recipe import parse_input_spec, parse_sets
    from placer.frontends.torch import OPTIMIZERS
    from placer.recipes import capture_recipe

    if optimizer not in OPTIMIZERS:
        raise InputError("--optimizer", f"'{optimizer}'", "is not supported", f"use one of {', '.join(OPTIMIZERS)}")
    if batch is not None and batch < 1:
        raise InputError("--batch", str(batch), "is not a positive batch size", "use --batch 1 or more")
    kw = parse_sets(sets)
    if source.startswith("hf:"):
        from placer.frontends.hf import hf_recipe, parse_hf_spec

        if inputs:
            raise InputError("--input", inputs[0], "does not apply to hf: models", "use --batch / --seq (inputs come from the config)")
        base = parse_hf_spec(source)
        over = {**base["config"], **kw}
        if batch is not None:
            over["batch"] = batch
        elif base["batch"] != 8:
            over["batch"] = base["batch"]
        if seq is not None:
            over["seq"] = seq
        elif base["seq"] != 128:
            over["seq"] = base["seq"]
        recipe = hf_recipe(base["name"], over, optimizer, seed)
        if loss != "auto":
            raise InputError("--loss", loss, "does not apply to hf: models", "their task head computes the loss")
        default_name = f"hf-{base['name']}"
    else:
        if ":" not in source:
            raise InputError(source, "model", "is not FILE.py:FACTORY, MODULE:FACTORY or hf:NAME", "e.g. my_model.py:build")
        if seq is not None:
            raise InputError("--seq", str(seq), "applies to hf: models only", "give the sequence length in --input")
        specs = [parse_input_spec(t, batch or 1) for t in inputs]
        target = source
        file_part = source.rpartition(":")[0]
        if file_part.endswith(".py") and Path(file_part).is_file():
            target = f"{Path(file_part).resolve()}:{source.rpartition(':')[2]}"
        recipe = {"kind": "factory", "target": target, "kwargs": kw, "inputs": specs, "loss": loss,
                  "optimizer": optimizer, "seed": seed}
        default_name = Path(file_part).stem if file_part.endswith(".py") else file_part.rsplit(".", 1)[-1]
    with console.status(f"capturing {source} ...", spinner="dots"):
        cap = capture_recipe(recipe, name=name or default_name)
        g = cap.graph
        if profile_cpu:
            from placer.cost.profile import profile_capture, with_measured_costs

            g = with_measured_costs(g, profile_capture(cap, "cpu", threads=1, clock="thread"), "cpu")
    save_graph(g, out)
    data = {"graph": g.name, "ops": g.n_ops, "edges": g.n_edges, "capture_s": round(cap.capture_s, 3),
            "fx_nodes": cap.info.get("fx_nodes"), "params": len(cap.info.get("params", [])),
            "param_bytes": float(g.param_bytes.sum()), "gflops": float(g.flops.sum() / 1e9), "out": str(out)}
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
        return
    console.print(f"{g.name}: {g.n_ops:,} ops, {g.n_edges:,} edges, {data['gflops']:,.2f} GFLOP per step, "
                  f"captured in {cap.capture_s:.2f} s")
    err_console.print(f"wrote {out}")
