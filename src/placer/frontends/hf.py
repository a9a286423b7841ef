"""Hugging Face ``transformers`` models as training-step graphs (the optional ``hf`` extra).

A model is built from its config class with random weights: the config's defaults, overridden by
``--set key=value`` (``n_layer=2``, ``hidden_size=128``, ...). Nothing is downloaded, ever: no
``from_pretrained``, no hub access. The task head computes its own loss from labels made with the
inputs (next-token / masked-LM / seq2seq cross-entropy, image classification), so the captured step
is forward + loss + backward + update.

Names (``hf:NAME`` on the command line, e.g. ``placer info hf:gpt2``): the entries of
:data:`HF_MODELS`, or any ``model_type`` ``transformers.AutoConfig.for_model`` knows, as a causal LM.
Two keys of ``--set`` shape the inputs instead of the config: ``batch`` (default 8) and ``seq``
(tokens per sequence, default 128; ViT takes its ``image_size`` from the config).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from placer.errors import InputError
from placer.frontends.recipe import cache_root, cached_graph, capture_with, parse_sets


@dataclass(frozen=True)
class HFModel:
    config: str  # config class name in transformers
    model: str  # model class (with its task head)
    task: str  # causal-lm | masked-lm | seq2seq | image


HF_MODELS: dict[str, HFModel] = {
    "gpt2": HFModel("GPT2Config", "GPT2LMHeadModel", "causal-lm"),
    "bert": HFModel("BertConfig", "BertForMaskedLM", "masked-lm"),
    "roberta": HFModel("RobertaConfig", "RobertaForMaskedLM", "masked-lm"),
    "llama": HFModel("LlamaConfig", "LlamaForCausalLM", "causal-lm"),
    "mistral": HFModel("MistralConfig", "MistralForCausalLM", "causal-lm"),
    "qwen2": HFModel("Qwen2Config", "Qwen2ForCausalLM", "causal-lm"),
    "opt": HFModel("OPTConfig", "OPTForCausalLM", "causal-lm"),
    "t5": HFModel("T5Config", "T5ForConditionalGeneration", "seq2seq"),
    "bart": HFModel("BartConfig", "BartForConditionalGeneration", "seq2seq"),
    "vit": HFModel("ViTConfig", "ViTForImageClassification", "image"),
}
INPUT_KEYS = ("batch", "seq")
DEFAULT_BATCH, DEFAULT_SEQ = 8, 128


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise InputError("hf", "transformers", "is not installed", "pip install 'placer[hf]'") from e
    logging.getLogger("transformers").setLevel(logging.ERROR)  # config sanity warnings on small --set configs
    return transformers


def parse_hf_spec(spec: str) -> dict:
    """``hf:gpt2`` or ``hf:gpt2:n_layer=2,batch=4`` -> a recipe (see :mod:`placer.frontends.recipe`)."""
    body = spec[3:] if spec.startswith("hf:") else spec
    name, _, sets = body.partition(":")
    return hf_recipe(name, parse_sets([s for s in sets.split(",") if s]) if sets else {})


def hf_recipe(name: str, sets: dict | None = None, optimizer: str = "sgd-momentum", seed: int = 0) -> dict:
    sets = dict(sets or {})
    shape = {k: sets.pop(k) for k in INPUT_KEYS if k in sets}
    for k, v in shape.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InputError(f"hf:{name}", f"{k}={v!r}", "is not a positive integer", f"e.g. {k}=8")
    return {"kind": "hf", "name": name, "config": sets, "batch": shape.get("batch", DEFAULT_BATCH),
            "seq": shape.get("seq", DEFAULT_SEQ), "optimizer": optimizer, "loss": "auto", "seed": seed}


def _classes(name: str):
    tf = _transformers()
    entry = HF_MODELS.get(name)
    if entry is not None:
        return getattr(tf, entry.config), getattr(tf, entry.model), entry.task
    try:
        cfg = tf.AutoConfig.for_model(name)
    except (ValueError, KeyError):
        raise InputError(f"hf:{name}", "model", "is not a transformers model type",
                         f"use one of {', '.join(HF_MODELS)} or another model_type transformers knows") from None
    return type(cfg), None, "causal-lm"


def make_config(recipe: dict):
    cfg_cls, _, _ = _classes(recipe["name"])
    cfg = cfg_cls()
    for k, v in recipe.get("config", {}).items():
        if not hasattr(cfg, k):
            raise InputError(f"hf:{recipe['name']}", f"option {k}", f"is not an option of {cfg_cls.__name__}",
                             "use a field of the config class (or batch / seq)")
        setattr(cfg, k, v)
    cfg.use_cache = False
    for tok in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        v = getattr(cfg, tok, None)
        vocab = getattr(cfg, "vocab_size", None)
        if isinstance(v, int) and isinstance(vocab, int) and v >= vocab:  # a small --set vocab_size
            setattr(cfg, tok, 0)
    if recipe["name"] in ("t5", "bart") and getattr(cfg, "decoder_start_token_id", None) is None:
        cfg.decoder_start_token_id = 0
    return cfg


class _Tracing:
    """While the model runs, transformers' ``is_tracing`` answers yes: its checks that read tensor
    values (packed-sequence detection, all-ones masks) recognise fake tensors but not the
    functional wrappers ``make_fx(functionalize(...))`` traces with, and would otherwise fail as
    data-dependent. The traced program is the one ``torch.compile`` / ``torch.export`` would get."""

    def __enter__(self):
        import sys

        from transformers.utils import import_utils

        original = import_utils.is_tracing
        self.patched = [m for m in list(sys.modules.values())
                        if getattr(m, "__name__", "").startswith("transformers") and getattr(m, "is_tracing", None) is original]
        self.original = original
        for m in self.patched:
            m.is_tracing = lambda *a, **k: True
        return self

    def __exit__(self, *exc):
        for m in self.patched:
            m.is_tracing = self.original


def _adapter(model, names):
    import torch

    class HFTask(torch.nn.Module):
        """Calls the Hugging Face model with keyword inputs and returns its loss."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            with _Tracing():
                return self.model(**dict(zip(names, xs)), return_dict=True).loss

    return HFTask()


def build_hf(recipe: dict, device: str = "cpu"):
    """``(module, inputs, loss_fn)``: the task model (random weights, seeded) returning its loss."""
    import torch

    cfg = make_config(recipe)
    cfg_cls, model_cls, task = _classes(recipe["name"])
    tf = _transformers()
    torch.manual_seed(int(recipe.get("seed", 0)))
    try:
        with torch.device(device):
            model = model_cls(cfg) if model_cls is not None else tf.AutoModelForCausalLM.from_config(cfg)
    except Exception as e:
        raise InputError(f"hf:{recipe['name']}", "model", f"could not be built ({type(e).__name__}: {e})",
                         "check the options") from e
    model.train()
    b, s = int(recipe.get("batch", DEFAULT_BATCH)), int(recipe.get("seq", DEFAULT_SEQ))
    gen = torch.Generator().manual_seed(int(recipe.get("seed", 0)) + 1)
    if task == "image":
        n, c = getattr(cfg, "image_size", 224), getattr(cfg, "num_channels", 3)
        x = torch.randn(b, c, n, n, generator=gen)
        y = torch.randint(0, cfg.num_labels, (b,), generator=gen)
        names, xs = ("pixel_values", "labels"), [x, y]
    else:
        ids = torch.randint(0, cfg.vocab_size, (b, s), generator=gen)
        if task == "seq2seq":
            names, xs = ("input_ids", "labels"), [ids, torch.randint(0, cfg.vocab_size, (b, s), generator=gen)]
        else:
            names, xs = ("input_ids", "labels"), [ids, ids.clone()]
    xs = [x.to(device) for x in xs]
    return _adapter(model, names), xs, None


def hf_graph(spec: str, cache: bool = True):
    """The captured training-step graph of ``hf:NAME[:key=value,...]``, cached on disk beside the zoo
    (keyed by the recipe, transformers' and torch's versions and the capture version)."""
    import hashlib
    import json

    from placer.frontends.torch import CAPTURE_VERSION

    recipe = parse_hf_spec(spec)
    tf = _transformers()
    import torch

    from placer.cost.calibrated import CALIBRATION
    from placer.cost.specs import DEVICE_SPECS

    key = hashlib.sha256(json.dumps([recipe, tf.__version__, torch.__version__, CAPTURE_VERSION,
                                     repr(sorted(DEVICE_SPECS.items())), CALIBRATION],
                                    sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = cache_root() / "hf" / f"{recipe['name']}-{key}.json.gz"
    return cached_graph(path if cache else None, lambda: capture_with(recipe, build_hf, name=f"hf-{recipe['name']}").graph)
