"""`placer pretrain`: self-supervised (Deep Graph Infomax) pre-training of the graph encoder Mars reads
graphs with (:mod:`placer.nn.pretrain`), on a set of graphs: the training half of a generated family
and/or zoo graphs. Writes the encoder state (:func:`placer.io.write_checkpoint`) that Mars starts
from (read back with :func:`placer.io.read_checkpoint`, given as Mars's ``encoder``); reports the loss
per epoch and how well the discriminator separates real from corrupted graphs on held-out graphs
(the family's test half, or ``--held-out`` graphs).

Registered on :data:`placer.cli.app` when imported (``placer.cli._load_plugins``)."""

from __future__ import annotations

from typing import List, Optional

import typer

from placer.cli import app
from placer.cli.common import console, emit, err_console, load_problem
from placer.cli.options import bounded, one_of, output_file, positive_finite, seed_option
from placer.errors import InputError


def _graphs(family: list[str], graph: list[str], cluster: str, split: str, nodes: int):
    from placer.nn.encoder import graph_data, placement_nodes
    from placer.problem import Problem
    from placer.resolve import resolve_cluster

    problems = []
    for fam in family:
        from placer.zoo import families

        c = resolve_cluster(cluster)
        problems += [Problem(g, c) for g in families.load_family(fam, split=split)]
    problems += [load_problem(g, cluster) for g in graph]
    return [graph_data(placement_nodes(P, nodes, "all")) for P in problems]


@app.command()
def pretrain(family: Optional[List[str]] = typer.Option(None, "--family", "-f",
                                                       help="pre-train on the training half of this graph family "
                                                            "(cifar10, ptb, nmt; repeat for several)"),
             graph: Optional[List[str]] = typer.Option(None, "--graph", "-g",
                                                      help="also pre-train on this graph (zoo name or file; repeat)"),
             held_out: Optional[List[str]] = typer.Option(None, "--held-out",
                                                         help="score the discriminator on this graph (default: the "
                                                              "families' test halves)"),
             out: str = typer.Option(..., "--out", "-o", help="encoder checkpoint to write", callback=output_file),
             cluster: str = typer.Option("k80x4", "--cluster", "-c", help="preset name or cluster JSON (for costs)"),
             epochs: int = typer.Option(50, help="passes over the graphs, one Adam step per graph",
                                        callback=bounded("pretrain.epochs")),
             lr: float = typer.Option(1e-3, help="Adam learning rate (DGI's)", callback=positive_finite(1e-3)),
             kind: str = typer.Option("gcn", help="encoder layers: gcn (Mars) or sage (GDP)", callback=one_of("gcn", "sage")),
             hidden: int = typer.Option(128, help="embedding size (Mars's hidden must match)", callback=bounded("encoder.hidden")),
             layers: int = typer.Option(3, help="message-passing layers (Mars's gnn_layers must match)",
                                        callback=bounded("encoder.layers")),
             nodes: int = typer.Option(1024, help="most nodes per graph (Mars's nodes)", callback=bounded("encoder.nodes")),
             seed: int = typer.Option(0, callback=seed_option),
             as_json: bool = typer.Option(False, "--json")):
    """Pre-train Mars's graph encoder with Deep Graph Infomax and write it."""
    from placer.methods.learned.graph_ppo import torch_geometric_available

    from placer.io import check_outputs_spare_inputs

    check_outputs_spare_inputs({"--out": out}, {"--graph": list(graph or []), "--held-out": list(held_out or []),
                                                "--cluster": cluster})
    why = torch_geometric_available()
    if why:
        raise InputError("placer pretrain", "graph encoder", why, "install the extra")
    if not family and not graph:
        raise InputError("placer pretrain", "graphs", "none were given", "give --family NAME and/or --graph NAME")
    from placer.nn.pretrain import check_pretrain_memory

    check_pretrain_memory(hidden, layers, nodes, "placer pretrain")  # before any graph is read
    import torch

    from placer.io import write_checkpoint
    from placer.nn.encoder import EncoderConfig
    from placer.nn.pretrain import PretrainConfig, discrimination, encoder_state, pretrain as run_pretrain
    from placer.nn.threads import one_thread

    with one_thread():
        train = _graphs(list(family or []), list(graph or []), cluster, "train", nodes)
        test = (_graphs([], list(held_out), cluster, "test", nodes) if held_out
                else _graphs(list(family or []), [], cluster, "test", nodes))
        torch.manual_seed(seed)
        enc_cfg = EncoderConfig(kind, hidden, layers)
        before = None
        if test:
            from placer.nn.encoder import GraphEncoder
            from placer.nn.pretrain import dgi_model

            before = discrimination(dgi_model(GraphEncoder(enc_cfg), seed), test)

        def on_epoch(e, loss):
            if (e + 1) % max(1, epochs // 10) == 0 or e + 1 == epochs:
                err_console.print(f"epoch {e + 1}/{epochs}: DGI loss {loss:.4f}")

        res = run_pretrain(train, enc_cfg, PretrainConfig(epochs=epochs, lr=lr, seed=seed), on_epoch=on_epoch)
        after = discrimination(res.model, test) if test else None
        write_checkpoint(encoder_state(res, extra={"held_out": [g.name for g in test]}), out)
    data = {"out": str(out), "graphs": res.graphs, "held_out": [g.name for g in test], "epochs": epochs,
            "encoder": enc_cfg.to_dict(), "loss_first": res.losses[0] if res.losses else None,
            "loss_last": res.losses[-1] if res.losses else None,
            "losses": res.losses, "seconds": res.seconds, "held_out_before": before, "held_out_after": after}

    def render(d):
        console.print(f"pre-trained a {d['encoder']['kind']} encoder ({d['encoder']['layers']} x {d['encoder']['hidden']}) "
                      f"on {len(d['graphs'])} graph(s), {d['epochs']} epochs, {d['seconds']:.1f} s"
                      + (f": DGI loss {d['loss_first']:.4f} -> {d['loss_last']:.4f}" if d["losses"] else
                         " (none: the encoder as initialised)"))
        if d["held_out_after"]:
            b, a = d["held_out_before"], d["held_out_after"]
            console.print(f"held-out graphs ({len(d['held_out'])}): discriminator accuracy {b['accuracy']:.1%} -> "
                          f"{a['accuracy']:.1%}, real {a['real_score']:.3f} vs corrupted {a['corrupted_score']:.3f}")
        err_console.print(f"wrote {d['out']}")

    emit(data, as_json, render)
