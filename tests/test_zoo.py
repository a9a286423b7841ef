"""The model zoo: every family captures (reduced sizes here; full sizes under -m slow), module
paths an expert rule can use, unrolled RNN structure, the disk cache, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from placer.errors import InputError  # noqa: E402
from placer.graph import BACKWARD, FORWARD, UPDATE  # noqa: E402
from placer.zoo import BUILTIN  # noqa: E402
from placer.zoo.models import ZOO, build_model, cached_path, zoo_capture, zoo_graph  # noqa: E402

# the smallest configuration of every zoo model (same architecture code, reduced depth / width / size)
REDUCED = {
    "inception_v3": dict(batch=2, image=75, classes=10),
    "inception_v3-b32": dict(batch=2, image=75, classes=10),
    "resnet50": dict(batch=2, image=32, blocks=(1, 1, 1, 1), base_width=8, classes=10),
    "resnet101": dict(batch=2, image=32, blocks=(1, 1, 2, 1), base_width=8, classes=10),
    "resnet200": dict(batch=2, image=32, blocks=(1, 2, 2, 1), base_width=8, classes=10),
    "nasnet_large": dict(batch=2, image=32, num_cells=3, filters=8, classes=10),
    "nasnet_mobile": dict(batch=2, image=32, num_cells=3, filters=8, classes=10),
    "nmt2": dict(batch=2, length=3, hidden=16, vocab=50),
    "nmt4": dict(batch=2, length=2, hidden=16, vocab=50),
    "nmt8": dict(batch=2, length=2, hidden=16, vocab=50, layers=3),
    "gnmt": dict(batch=2, length=2, hidden=16, vocab=50, layers=3),
    "rnnlm": dict(batch=2, length=3, hidden=16, vocab=50, layers=2),
    "bert_base": dict(batch=2, seq=8, layers=1, vocab=100),
    "bert_large": dict(batch=2, seq=8, layers=1, vocab=100),
    "gpt2": dict(batch=2, seq=8, layers=1, vocab=100),
}
SKIP_FAST = {"inception_v3-b32"}  # same graph as inception_v3 at this size


@pytest.fixture(scope="module")
def reduced():
    return {name: zoo_capture(name, **cfg).graph for name, cfg in REDUCED.items() if name not in SKIP_FAST}


def test_every_zoo_model_has_a_reduced_config():
    assert set(REDUCED) == set(ZOO)


@pytest.mark.parametrize("name", sorted(set(REDUCED) - SKIP_FAST))
def test_reduced_model_captures_a_training_step(name, reduced):
    g = reduced[name]
    assert g.n_ops > 50 and g.n_edges >= g.n_ops - 1
    for role in (FORWARD, BACKWARD, UPDATE):
        assert (g.role == role).any()
    assert g.flops.sum() > 0 and g.param_bytes.sum() > 0
    assert (g.mirror[g.role == BACKWARD] >= 0).mean() > 0.5
    for key in ("k80", "v100", "cpu"):
        assert np.isfinite(g.compute_us[key]).all()
    work = g.flops > 0
    assert (g.compute_us["k80"][work] > g.compute_us["v100"][work]).all()
    assert g.meta["zoo"]["model"] == name


def test_rnn_module_paths_let_an_expert_find_layers(reduced):
    mods = set(reduced["nmt2"].modules)
    for path in ("encoder.embedding", "encoder.layers.0", "encoder.layers.1", "decoder.embedding",
                 "decoder.layers.0", "decoder.layers.1", "decoder.attention", "decoder.softmax.proj"):
        assert path in mods, path
    assert {"embedding", "layers.0", "layers.1", "softmax.proj"} <= set(reduced["rnnlm"].modules)
    gnmt = set(reduced["gnmt"].modules)
    assert "encoder.backward_layer" in gnmt and "encoder.layers.2" in gnmt
    bert = set(reduced["bert_base"].modules)
    assert {"embedding.word", "encoder.layers.0.attention", "encoder.layers.0.ffn.up", "head"} <= bert


def test_unrolled_lstm_has_per_step_cell_ops():
    def cell_sigmoids(length):
        g = zoo_capture("rnnlm", batch=2, length=length, hidden=8, vocab=20, layers=2).graph
        return sum(1 for t, r in zip(g.op_types, g.role) if t == "aten.sigmoid.default" and r == FORWARD)

    assert cell_sigmoids(2) == 2 * 2 * 3 and cell_sigmoids(5) == 5 * 2 * 3  # steps x layers x 3 gates


def test_reduced_vision_models_match_reference_parameter_counts():
    import torch

    from placer.zoo.nasnet import NASNetA
    from placer.zoo.vision import InceptionV3, ResNet

    with torch.device("meta"):
        counts = {"resnet50": ResNet(50), "inception": InceptionV3(), "nasnet_mobile": NASNetA("mobile"),
                  "nasnet_large": NASNetA("large")}
    params = {k: sum(p.numel() for n, p in m.named_parameters() if not n.startswith(("aux", "AuxLogits")))
              for k, m in counts.items()}
    assert params["resnet50"] == 25_557_032  # torchvision's resnet50
    assert abs(params["inception"] - 23_834_568) < 100_000  # Inception-V3 without the auxiliary head
    assert abs(params["nasnet_mobile"] - 5.3e6) < 0.15e6 and abs(params["nasnet_large"] - 88.9e6) < 0.5e6


def test_build_model_runs_for_real_on_cpu():
    m, inputs = build_model("resnet50", device="cpu", **REDUCED["resnet50"])
    loss = m(*inputs)
    assert loss.ndim == 0 and np.isfinite(loss.item())


def test_zoo_graph_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACER_CACHE_DIR", str(tmp_path))
    cfg = REDUCED["gpt2"]
    p = cached_path("gpt2", **cfg)
    assert not p.exists()
    a = zoo_graph("gpt2", **cfg)
    assert p.exists() and str(p).startswith(str(tmp_path)) and p.name.endswith(".json.gz")
    b = zoo_graph("gpt2", **cfg)
    assert a.op_names == b.op_names and np.array_equal(a.compute_us["v100"], b.compute_us["v100"])
    assert cached_path("gpt2", **{**cfg, "batch": 3}) != p
    p.write_bytes(b"\x1f\x8b broken")  # a truncated cache file is rebuilt, not an error
    assert zoo_graph("gpt2", **cfg).n_ops == a.n_ops


def test_unknown_model_and_bad_config_are_input_errors():
    with pytest.raises(InputError, match="not in the zoo"):
        build_model("alexnet")
    with pytest.raises(InputError, match="configuration"):
        build_model("resnet50", colour="blue")


def test_importing_the_zoo_does_not_import_torch():
    code = "import sys, placer.zoo, placer.resolve; assert 'torch' not in sys.modules; print(len(placer.zoo.BUILTIN))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) >= len(ZOO) and set(ZOO) <= set(BUILTIN)


def test_cli_zoo_list_and_export(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from placer.cli import _load_plugins, app
    from placer.frontends.native import load_graph

    monkeypatch.setenv("PLACER_CACHE_DIR", str(tmp_path / "cache"))
    _load_plugins()
    r = CliRunner().invoke(app, ["zoo", "list", "--json"])
    assert r.exit_code == 0 and '"nasnet_large"' in r.output
    out = tmp_path / "g.json"
    r = CliRunner().invoke(app, ["zoo", "export", "bert_base", "--out", str(out), "--batch", "2",
                                 "--set", "seq=8", "--set", "layers=1", "--set", "vocab=100"])
    assert r.exit_code == 0, r.output
    g = load_graph(out)
    assert g.meta["zoo"]["config"]["layers"] == 1 and g.n_ops > 50


# ---------------------------------------------------------------------- full size (slow)
FULL_SIZE_OPS = {"inception_v3": (1500, 4000), "nmt2": (6000, 9000), "nasnet_large": (6000, 20000)}


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("PLACER_FULL_ZOO"), reason="full-size captures take minutes: set PLACER_FULL_ZOO=1")
@pytest.mark.parametrize("name", sorted(ZOO))
def test_full_size_model_captures(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACER_CACHE_DIR", str(tmp_path))
    g = zoo_graph(name)
    lo, hi = FULL_SIZE_OPS.get(name, (500, 60000))
    assert lo <= g.n_ops <= hi
    assert (g.role == UPDATE).any() and (g.mirror >= 0).any()
