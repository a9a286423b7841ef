"""The benchmark zoo: the papers' models at the papers' batch sizes, captured as training steps.

``ZOO[name]`` describes a model; :func:`build_model` returns ``(nn.Module, example inputs)`` (on the
``meta`` device by default: no memory, no weights, nothing downloaded) and :func:`zoo_graph` the
captured, costed OpGraph, cached on disk as native JSON (``$PLACER_CACHE_DIR`` or
``~/.cache/placer/zoo/<name>-<hash>.json.gz``; the hash covers the configuration, the capture
version, torch's version and the cost tables) so a second use loads in seconds.

Batch sizes and lengths: Placeto section 4 (Inception-V3, NASNet batch 64; NMT 2 layers unrolled
40 steps, batch 256), Hierarchical Planner section 4 (Inception-V3 batch 32, NMT 2/4/8 layers and
RNNLM batch 64), Post section 4 (ResNet batch 32, RNNLM 4 layers, batch 64).

Importing this module does not import torch; building a model does (the ``torch`` extra).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from placer.errors import InputError


ZOO_VERSION = 2  # bump when a model or the capture changes what a zoo graph contains (cache key)


@dataclass(frozen=True)
class ZooModel:
    name: str
    family: str  # vision / nasnet / rnn / transformer
    description: str
    make: Callable[..., Any]  # (device, **config) -> (module, inputs)
    config: dict = field(default_factory=dict)


def _inception(device, batch, image=299, classes=1000):
    import torch

    from placer.zoo.vision import InceptionV3, image_inputs

    with torch.device(device):
        m = InceptionV3(classes, image)
    return m, image_inputs(batch, image, classes, device)


def _resnet(device, batch, depth, image=224, classes=1000, blocks=None, base_width=64):
    import torch

    from placer.zoo.vision import ResNet, image_inputs

    with torch.device(device):
        m = ResNet(depth, classes, blocks=tuple(blocks) if blocks else None, base_width=base_width)
    return m, image_inputs(batch, image, classes, device)


def _nasnet(device, batch, variant, image=None, classes=1000, num_cells=None, filters=None):
    import torch

    from placer.zoo.nasnet import CONFIGS, NASNetA
    from placer.zoo.vision import image_inputs

    image = image or CONFIGS[variant]["image"]
    with torch.device(device):
        m = NASNetA(variant, classes, num_cells=num_cells, filters=filters, image=image)
    return m, image_inputs(batch, image, classes, device)


def _nmt(device, batch, layers, length=40, hidden=1024, vocab=32000, gnmt=False):
    import torch

    from placer.zoo.seq2seq import NMT, token_inputs

    with torch.device(device):
        m = NMT(layers, hidden, vocab, gnmt=gnmt)
    return m, token_inputs(batch, length, vocab, 3, device)


def _rnnlm(device, batch, layers=4, length=40, hidden=1024, vocab=32000):
    import torch

    from placer.zoo.seq2seq import RNNLM, token_inputs

    with torch.device(device):
        m = RNNLM(layers, hidden, vocab)
    return m, token_inputs(batch, length, vocab, 2, device)


def _bert(device, batch, variant, seq=128, layers=None, vocab=None):
    import torch

    from placer.zoo.seq2seq import token_inputs
    from placer.zoo.transformer import BERT, CONFIGS

    with torch.device(device):
        m = BERT(variant, layers=layers, vocab=vocab)
    return m, token_inputs(batch, seq, vocab or CONFIGS[variant]["vocab"], 2, device)


def _gpt(device, batch, seq=1024, layers=None, vocab=None):
    import torch

    from placer.zoo.seq2seq import token_inputs
    from placer.zoo.transformer import CONFIGS, GPT

    with torch.device(device):
        m = GPT("gpt2_small", layers=layers, vocab=vocab)
    return m, token_inputs(batch, seq, vocab or CONFIGS["gpt2_small"]["vocab"], 2, device)


ZOO: dict[str, ZooModel] = {m.name: m for m in [
    ZooModel("inception_v3", "vision", "Inception-V3, 299x299, batch 64 (Placeto)", _inception, {"batch": 64}),
    ZooModel("inception_v3-b32", "vision", "Inception-V3, 299x299, batch 32 (Hierarchical Planner, Post)",
             _inception, {"batch": 32}),
    ZooModel("resnet50", "vision", "ResNet-50, 224x224, batch 32", _resnet, {"batch": 32, "depth": 50}),
    ZooModel("resnet101", "vision", "ResNet-101, 224x224, batch 32", _resnet, {"batch": 32, "depth": 101}),
    ZooModel("resnet200", "vision", "ResNet-200 (3-24-36-3), 224x224, batch 32", _resnet, {"batch": 32, "depth": 200}),
    ZooModel("nasnet_large", "nasnet", "NASNet-A 6@4032, 331x331, batch 64 (Placeto)", _nasnet,
             {"batch": 64, "variant": "large"}),
    ZooModel("nasnet_mobile", "nasnet", "NASNet-A 4@1056, 224x224, batch 64", _nasnet,
             {"batch": 64, "variant": "mobile"}),
    ZooModel("nmt2", "rnn", "NMT 2-layer LSTM 1024, attention, 40 steps, batch 256 (Placeto)", _nmt,
             {"batch": 256, "layers": 2}),
    ZooModel("nmt4", "rnn", "NMT 4-layer LSTM 1024, attention, 40 steps, batch 64 (Hierarchical Planner)", _nmt,
             {"batch": 64, "layers": 4}),
    ZooModel("nmt8", "rnn", "NMT 8-layer LSTM 1024, attention, 40 steps, batch 64 (Hierarchical Planner)", _nmt,
             {"batch": 64, "layers": 8}),
    ZooModel("gnmt", "rnn", "GNMT 8+8 layers, bidirectional first layer, residuals, 40 steps, batch 128", _nmt,
             {"batch": 128, "layers": 8, "gnmt": True}),
    ZooModel("rnnlm", "rnn", "RNNLM 4-layer LSTM 1024, 40 steps, batch 64 (Post)", _rnnlm, {"batch": 64}),
    ZooModel("bert_base", "transformer", "BERT-base MLM, sequence 128, batch 32", _bert,
             {"batch": 32, "variant": "bert_base"}),
    ZooModel("bert_large", "transformer", "BERT-large MLM, sequence 512, batch 8", _bert,
             {"batch": 8, "variant": "bert_large", "seq": 512}),
    ZooModel("gpt2", "transformer", "GPT-2 small decoder, sequence 1024, batch 8", _gpt, {"batch": 8}),
]}


def zoo_model(name: str) -> ZooModel:
    try:
        return ZOO[name]
    except KeyError:
        raise InputError("zoo", f"model '{name}'", "is not in the zoo", f"use one of {', '.join(ZOO)}") from None


def build_model(name: str, device: str = "meta", **overrides):
    """``(module, example_inputs)`` of a zoo model; ``overrides`` change its configuration
    (``batch``, ``layers``, ``length``, ``image``, ...). In training mode."""
    z = zoo_model(name)
    cfg = {**z.config, **overrides}
    try:
        m, inputs = z.make(device, **cfg)
    except (TypeError, ValueError, KeyError) as e:
        raise InputError("zoo", f"model '{name}' configuration {overrides}", str(e), "use the builder's options") from None
    m.train()
    return m, inputs


def zoo_capture(name: str, optimizer: str = "sgd-momentum", **overrides):
    """Trace a zoo model's training step (uncached) and return the :class:`Capture`."""
    from placer.frontends.torch import trace_training_step

    m, inputs = build_model(name, **overrides)
    cap = trace_training_step(m, inputs, optimizer=optimizer, name=_graph_name(name, overrides))
    meta = dict(cap.graph.meta)
    meta["zoo"] = {"model": name, "config": {**zoo_model(name).config, **overrides}}
    cap.graph = cap.graph.replace(meta=meta)
    return cap


def _graph_name(name: str, overrides: dict) -> str:
    return name + "".join(f"-{k}{v}" for k, v in sorted(overrides.items()))


def cache_dir() -> Path:
    from placer.frontends.recipe import cache_root

    return cache_root() / "zoo"


def cache_key(name: str, optimizer: str, overrides: dict) -> str:
    from placer.cost.calibrated import CALIBRATION
    from placer.cost.roofline import DEFAULT_COST_KEYS, GPU_EFFICIENCY
    from placer.cost.specs import DEVICE_SPECS

    try:
        import torch
        tv = torch.__version__
    except ModuleNotFoundError:  # pragma: no cover
        tv = "none"
    blob = json.dumps({"name": name, "config": {**zoo_model(name).config, **overrides}, "optimizer": optimizer,
                       "zoo_version": ZOO_VERSION, "torch": tv, "keys": DEFAULT_COST_KEYS,
                       "specs": repr(sorted(DEVICE_SPECS.items())), "cal": CALIBRATION, "gpu_eff": GPU_EFFICIENCY},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cached_path(name: str, optimizer: str = "sgd-momentum", **overrides) -> Path:
    return cache_dir() / f"{_graph_name(name, overrides)}-{cache_key(name, optimizer, overrides)}.json.gz"


def zoo_graph(name: str, *, cache: bool = True, optimizer: str = "sgd-momentum", **overrides):
    """The captured, costed training-step OpGraph of a zoo model, from the disk cache when present."""
    from placer.frontends.recipe import cached_graph

    return cached_graph(cached_path(name, optimizer, **overrides) if cache else None,
                        lambda: zoo_capture(name, optimizer=optimizer, **overrides).graph)
