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

import json
import logging
from dataclasses import dataclass

from placer.errors import InputError, printable
from placer.frontends.recipe import cache_root, cached_graph, capture_with


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


HF_FORM = "hf:NAME[:KEY=VALUE,...], e.g. hf:gpt2:n_layer=2,batch=4"
_COUNT_WORDS = ("layer", "depth", "head", "hidden", "size", "dim", "n_", "num_", "positions", "vocab", "d_", "ff")
_PROBABILITY_WORDS = ("dropout", "pdrop", "drop_prob", "layerdrop", "_prob")
_NOT_SETTABLE = ("model_type", "transformers_version", "use_cache")  # fixed by the class, or by placer


def parse_hf_spec(spec: str) -> dict:
    """``hf:gpt2`` or ``hf:gpt2:n_layer=2,batch=4`` -> a recipe (see :mod:`placer.frontends.recipe`).
    Values are JSON (else strings); an empty, duplicate or unknown key, an empty value and a number
    outside :mod:`placer.bounds` are refused here, before anything is built."""
    name, values = _split_spec(spec)
    return hf_recipe(name, values)


def _split_spec(spec: str) -> tuple[str, dict]:
    from placer.bounds import parse_items

    body = spec[3:] if spec.startswith("hf:") else spec
    name, colon, sets = body.partition(":")
    if not name.strip():
        raise InputError(printable(spec, 80), "model", "is not named", f"write {HF_FORM}")
    values = {}
    for key, text in (parse_items(spec, sets, HF_FORM) if colon else {}).items():
        try:
            values[key] = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            values[key] = text
    return name, values


def spec_recipe(spec: str, sets: dict | None = None, batch: int | None = None, seq: int | None = None,
                optimizer: str = "sgd-momentum", seed: int = 0) -> dict:
    """The recipe of ``hf:NAME[:KEY=VALUE,...]`` with more config fields ``sets`` and the input
    shape ``batch`` / ``seq`` (None: the spec's, else the defaults), as ``placer capture`` takes
    them; a setting given both in the spec and again is refused (which one would win is a guess)."""
    name, given = _split_spec(spec)
    more = dict(sets or {})
    if batch is not None:
        more["batch"] = batch
    if seq is not None:
        more["seq"] = seq
    twice = [k for k in more if k in given]
    if twice:
        raise InputError(printable(spec, 80), printable(twice[0], 40), "is given twice: in the spec and again",
                         "give each setting once")
    return hf_recipe(name, {**given, **more}, optimizer, seed)


def hf_recipe(name: str, sets: dict | None = None, optimizer: str = "sgd-momentum", seed: int = 0) -> dict:
    """The recipe of ``hf:NAME`` with config fields and input shape ``sets`` (``batch``, ``seq``),
    every one checked (:func:`check_recipe`)."""
    sets = dict(sets or {})
    shape = {k: sets.pop(k) for k in INPUT_KEYS if k in sets}
    recipe = {"kind": "hf", "name": name, "config": sets, "batch": shape.get("batch", DEFAULT_BATCH),
              "seq": shape.get("seq", DEFAULT_SEQ), "optimizer": optimizer, "loss": "auto", "seed": seed}
    check_recipe(recipe)
    return recipe


def check_recipe(recipe: dict):
    """Every number of an hf recipe against :data:`placer.bounds.BOUNDS` (``batch``, ``seq``, their
    product, each config field), each config key a field of the config class, ``seq`` within the
    model's positions; returns the config. Every way an hf model arrives (``hf:NAME:k=v``,
    ``placer capture --set``, a graph file's recipe) comes through here before anything is built."""
    from placer.bounds import check, short

    where = f"hf:{printable(recipe.get('name'), 60)}"
    b = check("batch", recipe.get("batch", DEFAULT_BATCH), where, f"batch={short(recipe.get('batch'))}")
    s = check("hf.seq", recipe.get("seq", DEFAULT_SEQ), where, f"seq={short(recipe.get('seq'))}")
    check("hf.tokens", b * s, where, f"batch {b:,} x seq {s:,}", "use a smaller batch or seq")
    cfg = make_config(recipe)
    for key in ("n_positions", "max_position_embeddings"):
        n = getattr(cfg, key, None)
        if isinstance(n, int) and not isinstance(n, bool) and s > n:
            raise InputError(where, f"seq={s:,}", f"is longer than the model's {n:,} positions ({key})",
                             f"use seq={n} or less, or set {key}={s}")
    return cfg


def check_sets(name: str, cfg_cls, sets: dict) -> None:
    """Config fields ``sets`` of ``hf:NAME`` against the config class, before anything is built:
    each key a field of it (``to_dict`` or an alias of ``attribute_map``), each value of the
    default's type (an integer field takes an integer: ``n_layer=abc`` is refused), each number
    within its bound of :data:`placer.bounds.BOUNDS`: ``hf.layers`` for layer counts, ``hf.size``
    for other counts and sizes (heads, hidden, vocabulary, positions), ``hf.probability`` for
    dropout rates, ``hf.integer`` / ``hf.real`` for any other number."""
    where = f"hf:{printable(name, 60)}"
    defaults = cfg_cls()
    known = set(defaults.to_dict()) | set(getattr(cfg_cls, "attribute_map", {}) or {}) | {
        k for k in dir(cfg_cls) if isinstance(getattr(cfg_cls, k, None), property) and getattr(cfg_cls, k).fset}  # num_labels
    for key, v in sets.items():
        if not isinstance(key, str) or not key.isidentifier() or key.startswith("_") or key not in known \
                or key in _NOT_SETTABLE:
            raise InputError(where, f"option {printable(key, 40)}", f"is not an option of {cfg_cls.__name__}",
                             "use a field of the config class (or batch / seq)")
        d = getattr(defaults, key, None)
        item = f"{key}={printable(v, 40)}"
        if isinstance(d, bool):
            ok, want = isinstance(v, bool), "true or false"
        elif isinstance(d, int):
            ok, want = isinstance(v, int) and not isinstance(v, bool), "a whole number"
        elif isinstance(d, float):
            ok, want = isinstance(v, (int, float)) and not isinstance(v, bool), "a number"
        elif isinstance(d, str):
            ok, want = isinstance(v, str), "a string"
        else:
            ok, want = True, ""
        if not ok:
            raise InputError(where, item, f"is not {want} (the config's default is {d!r})",
                             f"e.g. {key}={json.dumps(d)}")
        _check_number(where, key, d, v, item)


def _check_number(where: str, key: str, default, v, item: str) -> None:
    from placer.bounds import check

    if isinstance(v, (list, tuple)):
        for x in v:
            _check_number(where, key, default[0] if isinstance(default, (list, tuple)) and default else None, x, item)
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    k = key.lower()
    if isinstance(default, float) or isinstance(v, float):
        prob = any(w in k for w in _PROBABILITY_WORDS)
        check("hf.probability" if prob else "hf.real", float(v), where, item)
        return
    count = any(w in k for w in _COUNT_WORDS) and not k.endswith("_id") \
        and (default is None or (isinstance(default, int) and not isinstance(default, bool) and default >= 1))
    name = ("hf.layers" if "layer" in k or "depth" in k else "hf.size") if count else "hf.integer"
    check(name, v, where, item, f"e.g. {key}={default if isinstance(default, int) and count else 2}")


def _classes(name: str):
    tf = _transformers()
    entry = HF_MODELS.get(name)
    if entry is not None:
        return getattr(tf, entry.config), getattr(tf, entry.model), entry.task
    try:
        cfg = tf.AutoConfig.for_model(name)
    except (ValueError, KeyError, TypeError):
        raise InputError(f"hf:{printable(name, 60)}", "model", "is not a transformers model type",
                         f"use one of {', '.join(HF_MODELS)} or another model_type transformers knows") from None
    return type(cfg), None, "causal-lm"


def make_config(recipe: dict):
    """The config of an hf recipe, its ``config`` fields checked (:func:`check_sets`) and set."""
    name = recipe["name"]
    if not isinstance(name, str) or not name.strip():
        raise InputError("hf", "model", "is not named", f"write {HF_FORM}")
    cfg_cls, _, _ = _classes(name)
    sets = recipe.get("config", {}) or {}
    if not isinstance(sets, dict):
        raise InputError(f"hf:{printable(name, 60)}", "config", "is not an object of fields", "capture the model again")
    check_sets(name, cfg_cls, sets)
    cfg = cfg_cls()
    for k, v in sets.items():
        setattr(cfg, k, v)
    cfg.use_cache = False
    for tok in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        v = getattr(cfg, tok, None)
        vocab = getattr(cfg, "vocab_size", None)
        if isinstance(v, int) and isinstance(vocab, int) and v >= vocab:  # a small --set vocab_size
            setattr(cfg, tok, 0)
    if name in ("t5", "bart") and getattr(cfg, "decoder_start_token_id", None) is None:
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
    """``(module, inputs, loss_fn)``: the task model (random weights, seeded) returning its loss.
    On ``meta`` (capture) nothing is allocated, inputs included; on a real device the model's
    estimated training memory (:func:`training_bytes`) must fit this machine's memory first."""
    import torch

    cfg = check_recipe(recipe)
    cfg_cls, model_cls, task = _classes(recipe["name"])
    tf = _transformers()
    where = f"hf:{printable(recipe['name'], 60)}"

    def construct(on: str):
        torch.manual_seed(int(recipe.get("seed", 0)))
        try:
            with torch.device(on):
                return model_cls(cfg) if model_cls is not None else tf.AutoModelForCausalLM.from_config(cfg)
        except Exception as e:
            raise InputError(where, "model", f"could not be built ({type(e).__name__}: {printable(e, 200)})",
                             "check the options") from e

    b, s = int(recipe.get("batch", DEFAULT_BATCH)), int(recipe.get("seq", DEFAULT_SEQ))
    if str(device) != "meta":
        from placer.bounds import check_memory

        shape = construct("meta")
        params = sum(p.numel() for p in shape.parameters())
        del shape
        check_memory(training_bytes(cfg, params, b, s, task), where, f"{params:,} parameters, batch {b:,} x seq {s:,}",
                     "weights, gradients, optimizer state and activations of one training step, estimated",
                     "set fewer or smaller layers, or a smaller batch or seq")
    model = construct(device)
    model.train()
    gen = torch.Generator().manual_seed(int(recipe.get("seed", 0)) + 1)
    meta = str(device) == "meta"  # shapes only: no values drawn, nothing allocated

    def ints(high, shape):
        return torch.empty(shape, dtype=torch.int64, device="meta") if meta else torch.randint(0, high, shape, generator=gen)

    if task == "image":
        n, c = getattr(cfg, "image_size", 224), getattr(cfg, "num_channels", 3)
        x = torch.empty(b, c, n, n, device="meta") if meta else torch.randn(b, c, n, n, generator=gen)
        names, xs = ("pixel_values", "labels"), [x, ints(cfg.num_labels, (b,))]
    else:
        ids = ints(cfg.vocab_size, (b, s))
        if task == "seq2seq":
            names, xs = ("input_ids", "labels"), [ids, ints(cfg.vocab_size, (b, s))]
        else:
            names, xs = ("input_ids", "labels"), [ids, ids.clone()]
    xs = [x.to(device) for x in xs]
    return _adapter(model, names), xs, None


def training_bytes(cfg, params: int, batch: int, seq: int, task: str) -> float:
    """Memory of one training step, estimated: float32 weights, gradients and two optimizer moments
    (16 bytes a parameter); per layer the activations kept for backward, Korthikanti et al. 2022's
    ``s b h (34 + 5 a s / h)`` bytes at 16 bits, doubled for float32; the logits and their gradient."""
    def get(*keys, default=0):
        for k in keys:
            try:
                v = getattr(cfg, k, None)
            except Exception:  # noqa: BLE001 - a config property that needs other fields
                v = None
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return default

    if task == "image":
        seq = (get("image_size", default=224) // max(1, get("patch_size", default=16))) ** 2 + 1
    h = get("hidden_size", "d_model", "n_embd", default=1)
    heads = get("num_attention_heads", "n_head", "num_heads", default=1)
    layers = get("num_hidden_layers", "num_layers", "n_layer", default=1) + get("num_decoder_layers", "decoder_layers")
    tokens = float(batch) * seq
    acts = 2.0 * layers * tokens * h * (34 + 5 * heads * seq / max(h, 1))
    logits = 3 * 4.0 * tokens * get("vocab_size", default=0)
    return 16.0 * params + acts + logits + 16.0 * tokens


def hf_graph(spec: str, cache: bool = True):
    """The captured training-step graph of ``hf:NAME[:key=value,...]``, cached on disk beside the zoo
    (keyed by the recipe, transformers' and torch's versions and the capture version)."""
    import hashlib

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
