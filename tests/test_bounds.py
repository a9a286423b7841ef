"""One bounds table for every numeric setting (issue 60), run through the real CLI and the library.

Every hostile case ends with exit status 2, exactly one ``error:`` line on stderr, no traceback,
and nothing written (neither in the folder it ran in nor in placer's cache). The last tests take
every row of :data:`placer.bounds.BOUNDS` and every path that accepts that setting (a flag, a spec
string, ``--set``, a config object of the Python API) and show the row's bound is the one enforced.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from conftest import run_cli
from placer.bounds import BOUNDS, Bound, _num, parse_items
from placer.errors import InputError

HAS_TF = importlib.util.find_spec("transformers") is not None
HAS_PYG = importlib.util.find_spec("torch_geometric") is not None
G = "giph:tasks=6,seed=1"  # a graph that builds in milliseconds


@pytest.fixture
def clean(tmp_path, monkeypatch):
    """Run in an empty folder with an empty cache folder; afterwards both must still be empty."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PLACER_CACHE_DIR", str(cache))
    yield work
    assert not list(work.iterdir()), list(work.iterdir())
    assert not cache.exists() or not any(cache.rglob("*")), list(cache.rglob("*"))


def refused(capsys, monkeypatch, args, needle):
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert code == 2, (args, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err and not out.strip(), (out, err)
    assert needle in err, (needle, err)
    return err


# ---------------------------------------------------------------------- the cases of issue 60 and their kind
HF_CASES = [
    # issue 60's findings
    (["info", "hf:gpt2:__class__=1"], "is not an option of GPT2Config"),
    (["info", "hf:gpt2:seq=1e9"], "is not a whole number"),
    (["info", "hf:gpt2:seq=1000000000"], "1,048,576"),
    (["info", "hf:gpt2:n_layer=1000000000"], "is more than 1,000"),
    (["info", "hf:llama:num_hidden_layers=0"], "is not from 1 to 1,000"),
    (["info", "hf:gpt2:n_layer=2,n_layer=3"], "is given twice"),
    # the same kinds
    (["info", "hf:gpt2:__dict__=1"], "is not an option"),
    (["info", "hf:gpt2:to_dict=1"], "is not an option"),
    (["info", "hf:gpt2:model_type=1"], "is not an option"),
    (["info", "hf:gpt2:n_embd=2000000"], "1,048,576"),
    (["info", "hf:gpt2:n_inner=99999999"], "1,048,576"),  # default None: still a size
    (["info", "hf:vit:num_labels=1000000000"], "1,048,576"),  # a property of the config class, still a size
    (["info", "hf:gpt2:n_layer=true"], "is not a whole number"),
    (["info", "hf:bert:vocab_size=-5"], "is not from 1 to 1,048,576"),
    (["info", "hf:t5:num_decoder_layers=5000"], "is more than 1,000"),
    (["info", "hf:llama:num_key_value_heads=0"], "is not from 1"),
    (["info", "hf:gpt2:attn_pdrop=1.5"], "is more than 1"),
    (["info", "hf:gpt2:layer_norm_epsilon=NaN"], "is not finite"),
    (["info", "hf:gpt2:bos_token_id=99999999999"], "2,147,483,647"),
    (["info", "hf:gpt2:n_layer=2.5"], "is not a whole number"),
    (["info", "hf:gpt2:batch=0"], "is not from 1"),
    (["info", "hf:gpt2:batch=100000,seq=100000"], "2,147,483,647"),
    (["info", "hf:gpt2:seq=5000"], "longer than the model's 1,024 positions"),
    (["info", "hf:gpt2:"], "are empty"),
    (["info", "hf:"], "is not named"),
    (["info", "hf:gpt2:n_layer="], "has an empty value"),
    (["info", "hf:gpt2:=2"], "has an empty key"),
    (["info", "hf:gpt2:n_layer=2,,n_embd=32"], "empty item"),
    (["info", "hf:gpt2:n_layer=2,"], "empty item"),
    (["info", "hf:gpt2:n_layer"], "is not KEY=VALUE"),
    (["capture", "hf:gpt2", "--set", "n_layer=1000000000", "-o", "g.json"], "is more than 1,000"),
    (["capture", "hf:gpt2", "--set", "__class__=1", "-o", "g.json"], "is not an option"),
    (["capture", "hf:gpt2:n_layer=2", "--set", "n_layer=3", "-o", "g.json"], "is given twice"),
    (["capture", "hf:gpt2", "--set", "n_layer=2", "--set", "n_layer=3", "-o", "g.json"], "is given twice"),
    (["capture", "hf:gpt2:batch=4", "--batch", "8", "-o", "g.json"], "is given twice"),
    (["capture", "hf:gpt2", "--seq", "2000000", "-o", "g.json"], "1,048,576"),
]


@pytest.mark.skipif(not HAS_TF, reason="transformers not installed")
@pytest.mark.parametrize("args, needle", HF_CASES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _) in enumerate(HF_CASES)])
def test_hf_settings_refused(clean, capsys, monkeypatch, args, needle):
    refused(capsys, monkeypatch, args, needle)


GIPH_CASES = [
    (["info", "giph:"], "are empty"),
    (["info", "giph: "], "are empty"),
    (["info", G, "-c", "giph-net:"], "are empty"),
    (["info", "giph:tasks=5,tasks=6"], "is given twice"),
    (["info", G, "-c", "giph-net:devices=3,devices=4"], "is given twice"),
    (["info", "giph:tasks=5,,seed=1"], "empty item"),
    (["info", "giph:tasks="], "has an empty value"),
    (["info", "giph:=5"], "has an empty key"),
    (["info", "giph:colour=3"], "is not a giph setting"),
    (["info", G, "-c", "giph-net:tasks=3"], "is not a giph-net setting"),
    (["info", "giph:tasks=20001"], "is more than 20,000"),
    (["info", "giph:tasks=1e3"], "is not a whole number"),
    (["info", "giph:degree=65"], "is more than 64"),
    (["info", "giph:alpha=0.01"], "is not from 0.05 to 20"),
    (["info", "giph:ccr=inf"], "is not finite"),
    (["info", "giph:seed=4294967296"], "4,294,967,295"),
    (["info", G, "-c", "giph-net:spread=1001"], "is more than 1,000"),
    (["info", G, "-c", "giph-net:join=257"], "is more than 256"),
    (["info", G, "-c", "giph-net:devices=4,leave=4"], "leave"),
]


@pytest.mark.parametrize("args, needle", GIPH_CASES, ids=[a[-1] for a, _ in GIPH_CASES])
def test_giph_specs_refused(clean, capsys, monkeypatch, args, needle):
    refused(capsys, monkeypatch, args, needle)


OBJECTIVE_CASES = [
    ("latency:", "are empty"),  # issue 60's finding
    ("throughput:,", "empty item"),
    ("latency:x=1", "unknown option(s) x"),
    ("pipeline:x=1", "unknown option(s) x"),
    ("latency:pieces=2,pieces=3", "is given twice"),
    ("latency:pieces=", "has an empty value"),
    ("latency:=2", "has an empty key"),
    ("latency:pieces", "is not KEY=VALUE"),
    ("latency:pieces=0", "is not from 1 to 2,147,483,647"),
    ("latency:pieces=2.5", "is not a whole number"),
    ("sim:", "are empty"),
    ("throughput:contiguous=maybe", "true or false"),
]


@pytest.mark.parametrize("spec, needle", OBJECTIVE_CASES, ids=[s for s, _ in OBJECTIVE_CASES])
def test_objective_specs_refused(clean, capsys, monkeypatch, spec, needle):
    err = refused(capsys, monkeypatch, ["optimize", G, "-m", "random", "--budget", "2", "--objective", spec], needle)
    assert "--objective" in err


PRETRAIN_CASES = [
    (["--hidden", "1000000000"], "is more than 4,096"),  # issue 60's findings
    (["--epochs", "1000000000000"], "is more than 100,000"),
    (["--epochs", "1e12"], "--epochs"),
    (["--hidden", "0"], "is not from 1 to 4,096"),
    (["--layers", "65"], "is more than 64"),
    (["--nodes", str(2**21)], "1,048,576"),
    (["--epochs", "-1"], "is not from 0"),
    (["--seed", str(2**32)], "4,294,967,295"),
]


@pytest.mark.parametrize("flags, needle", PRETRAIN_CASES, ids=[" ".join(f) for f, _ in PRETRAIN_CASES])
def test_pretrain_flags_refused(clean, capsys, monkeypatch, flags, needle):
    refused(capsys, monkeypatch, ["pretrain", "-g", G, "-o", "enc.pt", *flags], needle)


@pytest.mark.skipif(not HAS_PYG, reason="torch_geometric not installed")
def test_pretrain_refuses_an_encoder_larger_than_this_machine(clean, capsys, monkeypatch):
    """Each size within its bound, the product not: refused by the memory estimate, before any graph is read."""
    refused(capsys, monkeypatch, ["pretrain", "-g", G, "-o", "enc.pt", "--hidden", "4096", "--layers", "64",
                                  "--nodes", str(2**20)], "of memory")


METHOD_CASES = [
    ("doppler", "hidden=100000", "is more than 4,096"),
    ("doppler", "layers=65", "is more than 64"),
    ("giph", "mp_steps=1000", "is more than 64"),
    ("hierarchical", "device_embed=5000", "is more than 4,096"),
    ("random", "placements=100000000", "is more than 10,000,000"),
]


@pytest.mark.parametrize("method, item, needle", METHOD_CASES, ids=[f"{m} {i}" for m, i, _ in METHOD_CASES])
def test_method_sizes_refused(clean, capsys, monkeypatch, method, item, needle):
    refused(capsys, monkeypatch, ["optimize", G, "-m", method, "--budget", "2", "--set", item], needle)


# ---------------------------------------------------------------------- the spec splitter
def test_parse_items_refuses_every_malformed_item_and_keeps_good_ones():
    assert parse_items("x:a=1, b = 2", "a=1, b = 2", "FORM") == {"a": "1", "b": "2"}
    assert parse_items("x", "", "FORM", allow_empty=True) == {}
    for body, needle in (("", "are empty"), ("a=1,a=2", "given twice"), ("a=1,,b=2", "empty item"),
                         (",a=1", "empty item"), ("a", "not KEY=VALUE"), ("=1", "empty key"), ("a=", "empty value")):
        with pytest.raises(InputError, match=needle):
            parse_items(f"x:{body}", body, "FORM")


# ---------------------------------------------------------------------- every row, every path
def _hf(key, value_key="config"):
    def submit(v):
        from placer.frontends.hf import build_hf, hf_recipe, make_config

        if value_key == "config":  # a graph file's recipe, rebuilt for real (placer run): make_config, then build_hf
            make_config({"name": "gpt2", "config": {key: v}})
            build_hf({"kind": "hf", "name": "gpt2", "config": {key: v}}, "cpu")
        else:
            hf_recipe("gpt2", {key: v})
    return submit


def _cli(*argv):
    """A path through the CLI: ``{v}`` in ``argv`` is replaced by the value."""
    return ("cli", [str(a) for a in argv])


def _lib(fn):
    return ("lib", fn)


def _giph_graph(key):
    def submit(v):
        from placer.zoo.giph import task_graph

        task_graph(**{"tasks": 5, key: v}) if key != "tasks" else task_graph(v)
    return submit


def _giph_net(key):
    def submit(v):
        from placer.zoo.giph import device_network

        device_network(**({"devices": 256, key: v} if key == "leave" else {key: v}))
    return submit


def _method(name, field):
    def submit(v):
        from placer.methods import METHODS

        METHODS[name].config.from_params(name, {field: v})
    return submit


def _encoder(field):
    def submit(v):
        from placer.nn.encoder import EncoderConfig

        EncoderConfig(**{field: v})
    return submit


def _pretrain_cfg(field):
    def submit(v):
        from placer.nn.pretrain import PretrainConfig

        PretrainConfig(**{field: v})
    return submit


def _budget(field):
    def submit(v):
        from placer.methods import Budget

        Budget(**{field: v})
    return submit


def _objective(v):
    from placer.objectives import make_objective

    make_objective(f"latency:pieces={v}")


PRETRAIN = ["pretrain", "-g", G, "-o", "enc.pt"]
OPT = ["optimize", G, "-m", "random", "--budget", "2"]

# row -> every path that accepts the setting; "{v}" marks where the value goes on a command line
PATHS = {
    "seed": [_cli(*OPT, "--seed", "{v}"), _cli("info", "giph:tasks=5,seed={v}"), _cli(*PRETRAIN, "--seed", "{v}"),
             _lib(_giph_graph("seed")), _lib(_pretrain_cfg("seed"))],
    "budget": [_cli("optimize", G, "-m", "random", "--budget", "{v}"), _cli(*OPT, "--set", "placements={v}"),
               _lib(_budget("placements")), _lib(_method("random", "placements"))],
    "seconds": [_cli(*OPT, "--seconds", "{v}"), _lib(_budget("seconds"))],
    "anytime.seconds": [_cli("bench", "anytime", "--max-seconds", "{v}", "--graphs", "inception", "--out", "anytime-out")],
    "bound.seconds": [_cli("bound", G, "--cluster", "k80x2", "--seconds", "{v}")],
    "pretrain.epochs": [_cli(*PRETRAIN, "--epochs", "{v}"), _lib(_pretrain_cfg("epochs"))],
    "encoder.hidden": [_cli(*PRETRAIN, "--hidden", "{v}"), _lib(_encoder("hidden"))],
    "encoder.layers": [_cli(*PRETRAIN, "--layers", "{v}"), _lib(_encoder("layers"))],
    "encoder.nodes": [_cli(*PRETRAIN, "--nodes", "{v}")],
    "method.width": [_cli(*OPT[:3], "doppler", "--budget", "2", "--set", "hidden={v}"), _lib(_method("doppler", "hidden")),
                     _lib(_method("hierarchical", "grouper_hidden")), _lib(_method("mars", "seq_hidden")),
                     _lib(_method("colocrl", "attention"))],
    "method.layers": [_cli(*OPT[:3], "doppler", "--budget", "2", "--set", "layers={v}"), _lib(_method("gdp", "gnn_layers")),
                      _lib(_method("giph", "mp_steps"))],
    "method.epochs": [_cli(*OPT[:3], "gdp", "--budget", "2", "--set", "ppo_epochs={v}"),
                      _lib(_method("mars", "pretrain_epochs"))],
    "hf.layers": [_cli("info", "hf:gpt2:n_layer={v}"), _cli("capture", "hf:gpt2", "--set", "n_layer={v}", "-o", "g.json"),
                  _lib(_hf("n_layer")), _lib(_hf("num_hidden_layers"))],
    "hf.size": [_cli("info", "hf:gpt2:n_embd={v}"), _cli("capture", "hf:gpt2", "--set", "vocab_size={v}", "-o", "g.json"),
                _lib(_hf("n_head")), _lib(_hf("n_positions"))],
    "hf.integer": [_cli("info", "hf:gpt2:bos_token_id={v}"), _lib(_hf("eos_token_id"))],
    "hf.probability": [_cli("info", "hf:gpt2:attn_pdrop={v}"), _lib(_hf("resid_pdrop"))],
    "hf.real": [_cli("info", "hf:gpt2:layer_norm_epsilon={v}"), _lib(_hf("initializer_range"))],
    "batch": [_cli("info", "hf:gpt2:batch={v}"), _cli("capture", "hf:gpt2", "--batch", "{v}", "-o", "g.json"),
              _lib(_hf("batch", "recipe"))],
    "hf.seq": [_cli("info", "hf:gpt2:seq={v}"), _cli("capture", "hf:gpt2", "--seq", "{v}", "-o", "g.json"),
               _lib(_hf("seq", "recipe"))],
    "giph.tasks": [_cli("info", "giph:tasks={v}"), _lib(_giph_graph("tasks"))],
    "giph.degree": [_cli("info", "giph:degree={v}"), _lib(_giph_graph("degree"))],
    "giph.jump": [_cli("info", "giph:jump={v}"), _lib(_giph_graph("jump"))],
    "giph.alpha": [_cli("info", "giph:alpha={v}"), _lib(_giph_graph("alpha"))],
    "giph.ccr": [_cli("info", "giph:ccr={v}"), _lib(_giph_graph("ccr"))],
    "giph-net.devices": [_cli("info", G, "-c", "giph-net:devices={v}"), _lib(_giph_net("devices"))],
    "giph-net.spread": [_cli("info", G, "-c", "giph-net:spread={v}"), _lib(_giph_net("spread"))],
    "giph-net.join": [_cli("info", G, "-c", "giph-net:join={v}"), _lib(_giph_net("join"))],
    "giph-net.leave": [_cli("info", G, "-c", "giph-net:devices=256,leave={v}"), _lib(_giph_net("leave"))],
    "objective.pieces": [_cli(*OPT, "--objective", "latency:pieces={v}"), _lib(_objective)],
}
# rows whose paths need a product of two settings: hf.tokens is batch x seq
PRODUCT_PATHS = {"hf.tokens": [_cli("info", "hf:gpt2:batch={a},seq={b}"), _cli("capture", "hf:gpt2", "--batch", "{a}",
                                                                                "--seq", "{b}", "-o", "g.json")]}


def test_every_row_has_its_paths_and_a_reason():
    assert set(PATHS) | set(PRODUCT_PATHS) == set(BOUNDS), "a row of placer.bounds.BOUNDS without its paths here"
    for b in BOUNDS.values():
        assert b.kind in (int, float) and b.lo < b.hi and b.lo <= b.example <= b.hi and b.why, b
        b.check(b.hi, "t"), b.check(b.example, "t")
        if not b.lo_open:
            b.check(b.lo, "t")


def _outside(b: Bound):
    """(value above the most, value below the least, text the refusal names)."""
    step = 1 if b.kind is int else max(abs(b.hi) * 0.5, 1.0)
    above = b.hi + step
    below = b.lo if b.lo_open else b.lo - (1 if b.kind is int else max(abs(b.lo) * 0.5, 0.01))
    if b.kind is float and below < b.lo and b.lo > 0:
        below = b.lo / 2
    return above, below


CASES = [(name, i) for name, paths in PATHS.items() for i in range(len(paths))]


@pytest.mark.parametrize("name, i", CASES, ids=[f"{n} path {i}" for n, i in CASES])
def test_every_path_enforces_the_rows_bound(clean, capsys, monkeypatch, name, i):
    kind, path = PATHS[name][i]
    b = BOUNDS[name]
    if (name.startswith("hf.") or name == "batch") and not HAS_TF:
        pytest.skip("transformers not installed")
    above, below = _outside(b)
    for value, needle in ((above, f"is more than {_num(b.hi)}"),
                          (below, f"is not above {_num(b.lo)}" if b.lo_open else f"is not from {_num(b.lo)} to {_num(b.hi)}")):
        if kind == "cli":
            refused(capsys, monkeypatch, [a.replace("{v}", repr(value) if b.kind is float else str(value)) for a in path],
                    needle)
        else:
            with pytest.raises(InputError) as e:
                path(value)
            assert needle in str(e.value), (name, value, str(e.value))


@pytest.mark.skipif(not HAS_TF, reason="transformers not installed")
@pytest.mark.parametrize("i", range(len(PRODUCT_PATHS["hf.tokens"])))
def test_batch_times_seq_is_bounded_on_every_path(clean, capsys, monkeypatch, i):
    _, path = PRODUCT_PATHS["hf.tokens"][i]
    b = BOUNDS["hf.tokens"]
    a = BOUNDS["batch"].hi
    s = b.hi // a + 1  # each within its own row, the product one past the most
    assert s <= BOUNDS["hf.seq"].hi and a * s > b.hi
    refused(capsys, monkeypatch, [x.replace("{a}", str(a)).replace("{b}", str(s)) for x in path], _num(b.hi))


@pytest.mark.skipif(not HAS_TF, reason="transformers not installed")
def test_a_model_larger_than_this_machine_is_refused_before_it_is_built():
    """Built for real (``placer run`` rebuilds a graph file's recipe on the CPU): every field within
    its row, the estimated training memory above this machine's, refused in one line naming it."""
    from placer.bounds import physical_memory
    from placer.frontends.hf import build_hf, hf_recipe

    recipe = hf_recipe("gpt2", {"n_layer": 1000, "n_embd": 8192, "n_head": 64})
    with pytest.raises(InputError, match="more than this machine's .* of memory") as e:
        build_hf(recipe, "cpu")
    assert "parameters" in str(e.value) and physical_memory()
    module, inputs, _ = build_hf(hf_recipe("gpt2", {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 64,
                                                    "batch": 2, "seq": 8}), "cpu")
    assert tuple(inputs[0].shape) == (2, 8)


@pytest.mark.skipif(not HAS_TF, reason="transformers not installed")
def test_meta_capture_allocates_no_inputs():
    """``info hf:...:seq=N`` drew N x batch token ids on the CPU before moving them to meta (GBs for a
    long sequence); on meta the inputs are made on meta."""
    from placer.frontends.hf import build_hf, hf_recipe

    _, inputs, _ = build_hf(hf_recipe("gpt2", {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_positions": 2**20,
                                               "batch": 64, "seq": 2**20}), "meta")
    assert all(x.device.type == "meta" for x in inputs) and inputs[0].shape == (64, 2**20)


def test_reasons_are_printed_with_the_bound():
    b = BOUNDS["giph.tasks"]
    with pytest.raises(InputError) as e:
        b.check(b.hi + 1, "w")
    assert b.why in str(e.value) and _num(b.hi) in str(e.value)
    with pytest.raises(InputError, match="is not finite"):
        BOUNDS["giph.ccr"].check(math.nan, "w")
    with pytest.raises(InputError, match="is not a whole number"):
        BOUNDS["giph.tasks"].check(True, "w")


@pytest.fixture(scope="module")
def tiny_hf_graph_doc(tmp_path_factory):
    """A captured 1-layer GPT-2's graph file as a dict (its recipe is what `placer run` rebuilds)."""
    if not HAS_TF:
        pytest.skip("transformers not installed")
    import gzip
    import json

    from placer.frontends.hf import hf_graph
    from placer.frontends.native import save_graph

    path = tmp_path_factory.mktemp("hf") / "g.json"
    save_graph(hf_graph("hf:gpt2:n_layer=1,n_embd=32,n_head=2,vocab_size=64,n_positions=32,batch=2,seq=8", cache=False),
               path)
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


@pytest.mark.parametrize("change, needle", [
    ({"config": {"n_layer": 10**9}}, "is more than 1,000"),
    ({"config": {"__class__": 1}}, "is not an option of GPT2Config"),
    ({"config": {"n_embd": 8192, "n_layer": 1000, "n_head": 64}}, "of memory"),
    ({"config": {"attn_pdrop": float("inf")}}, "is not finite"),
], ids=["layers", "dunder key", "memory", "infinite dropout"])
def test_a_graph_files_recipe_is_bounded_when_run(tiny_hf_graph_doc, clean, tmp_path, capsys, monkeypatch, change, needle):
    """The config-file path: a graph file whose hf recipe was edited is refused by `placer run` in
    one line before the model is built (the same rows as hf:NAME:k=v and capture --set)."""
    import copy
    import json

    doc = copy.deepcopy(tiny_hf_graph_doc)
    doc["meta"]["recipe"].update(change)
    src = tmp_path / "in"
    src.mkdir()
    (src / "g.json").write_text(json.dumps(doc).replace("Infinity", "1e999"))
    refused(capsys, monkeypatch, ["run", str(src / "g.json"), "-p", "single:0", "--steps", "1", "--warmup", "1"], needle)
