"""Measured op costs on a real device (`placer capture --profile DEVICE`, placer.runtime.profile_device):
a cost for every op under the device's model key, the profile cache (hit, miss on a changed
configuration or torch version, a corrupt or stale entry ignored with a note), a device torch does
not see refused in one line, and a detected cluster (`--cluster here:cpus=2`) costed from the profile."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, width)
        self.out = nn.Linear(width, 5)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(1)
        return self.out(torch.tanh(self.fc(h)))


def build(width=16):
    return Net(width)
'''


@pytest.fixture
def model_file(tmp_path):
    p = tmp_path / "net.py"
    p.write_text(MODEL)
    return p


def capture(capsys, monkeypatch, model_file, out, cache, *extra):
    code, so, se = run_cli(capsys, monkeypatch, "capture", f"{model_file}:build", "--input", "3x6x6", "--batch", "4",
                           "--profile", "cpu", "--profile-steps", "2", "--profile-cache", cache, "-o", out, *extra)
    assert code == 0, se
    return so, se


def costs(path, key):
    from placer.frontends.native import load_graph

    g = load_graph(path)
    return g, np.asarray(g.compute_us[key])


def test_profiled_capture_costs_every_op_under_the_model_key_and_is_cached(tmp_path, model_file, capsys, monkeypatch):
    from placer.runtime.detect import model_key

    key = model_key("cpu", 1)
    cache = tmp_path / "cache"
    so, _ = capture(capsys, monkeypatch, model_file, tmp_path / "a.json", cache, "--json")
    (prof,) = json.loads(so)["profiles"]
    assert prof["key"] == key and prof["device"] == "cpu" and prof["threads"] == 1 and prof["cache"] == "miss"
    g, a = costs(tmp_path / "a.json", key)
    assert a.shape == (g.n_ops,) and np.isfinite(a).all() and (a >= 0).all() and a.sum() > 0
    meta = g.meta["profiles"][key]
    assert meta["kind"] == "step" and meta["steps"] == 2 and meta["torch"] and meta["date"] and meta["step_us"] > 0
    assert "cache" not in meta  # how the costs were found is no property of the graph
    assert a.sum() == pytest.approx(meta["sum_cost_us"], abs=0.1)
    assert len(list(cache.glob("*.json"))) == 1

    # the second capture finds the profile: the same costs, nothing recorded
    so, _ = capture(capsys, monkeypatch, model_file, tmp_path / "b.json", cache)
    assert "from the cache" in so and "recorded" not in so
    _, b = costs(tmp_path / "b.json", key)
    assert np.array_equal(a, b)

    # another configuration is another model: recorded, stored beside the first
    so, _ = capture(capsys, monkeypatch, model_file, tmp_path / "c.json", cache, "--set", "width=12")
    assert "recorded, cached" in so
    assert len(list(cache.glob("*.json"))) == 2

    # --no-profile-cache records again and leaves the cache alone
    so, _ = capture(capsys, monkeypatch, model_file, tmp_path / "d.json", cache, "--no-profile-cache")
    assert "recorded, not cached" in so and len(list(cache.glob("*.json"))) == 2


def _rebuilt(model_file):
    from placer.build import capture_recipe
    from placer.runtime.measure import rebuild

    recipe = {"kind": "factory", "target": f"{model_file}:build", "kwargs": {}, "loss": "auto", "optimizer": "sgd",
              "seed": 0, "inputs": [{"shape": [4, 3, 6, 6], "dtype": "float32"}]}
    g = capture_recipe(recipe, name="net").graph
    return g, rebuild(g)


def test_cache_misses_on_another_torch_version_and_ignores_corrupt_or_stale_entries(tmp_path, model_file):
    from placer.runtime.profile_device import cache_path, profile_device, profile_spec

    g, (cap, m, xs) = _rebuilt(model_file)
    cache = tmp_path / "cache"
    key, a, info = profile_device(cap, m, xs, "cpu", 1, 2, cache, graph=g)
    assert info["cache"] == "miss" and not info["notes"]
    spec = profile_spec(g, key, 2)
    path = cache_path(cache, spec)
    assert path.exists()
    key2, b, info = profile_device(cap, m, xs, "cpu", 1, 2, cache, graph=g)
    assert (key2, info["cache"]) == (key, "hit") and np.array_equal(a, b)

    # the key holds torch's version (and the steps): another version looks elsewhere
    assert cache_path(cache, profile_spec(g, key, 2, torch_version="0.0.1")) != path
    assert cache_path(cache, profile_spec(g, key, 3)) != path

    # an entry whose stored spec says another torch version is stale: ignored with one note, recorded again
    doc = json.loads(path.read_text())
    doc["spec"]["torch"] = "0.0.1"
    path.write_text(json.dumps(doc))
    _, c, info = profile_device(cap, m, xs, "cpu", 1, 2, cache, graph=g)
    assert info["cache"] == "miss" and len(info["notes"]) == 1 and "stale" in info["notes"][0] and "torch" in info["notes"][0]
    assert json.loads(path.read_text())["spec"]["torch"] != "0.0.1"  # rewritten by the new recording

    # corrupt entries: truncated JSON, a cost missing, a negative and a non-finite cost
    good = path.read_text()
    doc = json.loads(good)
    bad = [good[: len(good) // 2], json.dumps({**doc, "op_cost_us": doc["op_cost_us"][:-1]}),
           json.dumps({**doc, "op_cost_us": [-1.0] + doc["op_cost_us"][1:]}),
           json.dumps({**doc, "op_cost_us": [float("inf")] + doc["op_cost_us"][1:]})]
    for text in bad:
        path.write_text(text)
        _, c, info = profile_device(cap, m, xs, "cpu", 1, 2, cache, graph=g)
        assert info["cache"] == "miss" and len(info["notes"]) == 1 and "ignored" in info["notes"][0], text[:80]
        assert c.shape == (g.n_ops,) and np.isfinite(c).all() and (c >= 0).all()


def test_library_profile_graph_dedupes_and_checks_its_arguments(tmp_path, model_file):
    from placer.errors import InputError
    from placer.runtime.detect import model_key
    from placer.runtime.profile_device import profile_graph

    g, rebuilt = _rebuilt(model_file)
    g2, infos = profile_graph(g, ["cpu", "cpu"], threads=2, steps=1, cache=None, rebuilt=rebuilt)
    key = model_key("cpu", 2)
    assert [i["cache"] for i in infos] == ["off", "same"] and infos[1]["same_as"] == "cpu"
    assert key in g2.compute_us and g2.meta["profiles"][key]["threads"] == 2
    for kw, needle in [({"threads": 0}, "threads"), ({"steps": 0}, "steps"), ({"steps": 101}, "steps")]:
        with pytest.raises(InputError, match=needle):
            profile_graph(g, ["cpu"], rebuilt=rebuilt, **kw)
    with pytest.raises(InputError, match="is not a device torch sees here"):
        profile_graph(g, ["cuda:99"], rebuilt=rebuilt)


@pytest.mark.parametrize("device,needle", [("cuda:99", "is not a device torch sees here"),
                                           ("tpu", "is not a device name")])
def test_a_device_torch_does_not_see_is_refused_in_one_line(tmp_path, model_file, capsys, monkeypatch, device, needle):
    out = tmp_path / "bad.json"
    code, so, se = run_cli(capsys, monkeypatch, "capture", f"{model_file}:build", "--input", "3x6x6",
                           "--profile", device, "-o", out)
    assert code == 2 and needle in se and "--profile" in se
    assert len(se.strip().splitlines()) == 1 and "Traceback" not in se and "capturing" not in so
    assert not out.exists()


def test_a_detected_cluster_costs_every_op_from_the_profile(tmp_path, model_file, capsys, monkeypatch):
    """`--cluster here:cpus=2`: both single-thread CPU devices look their costs up under
    model_key('cpu', 1), so a one-device step simulates to the sum of the profiled costs (no per-node
    overhead is added to real-step costs), and optimize / simulate place with those costs."""
    from placer.problem import Problem
    from placer.resolve import resolve_cluster
    from placer.runtime.detect import model_key
    from placer.sim import simulate

    out = tmp_path / "g.json"
    capture(capsys, monkeypatch, model_file, out, tmp_path / "cache")
    g, measured = costs(out, model_key("cpu", 1))
    here = resolve_cluster("here:cpus=2")
    P = Problem(g, here)
    assert np.array_equal(P.compute_us[:, 0], measured) and np.array_equal(P.compute_us[:, 1], measured)
    assert not np.array_equal(measured, np.asarray(g.compute_us["cpu"]))  # the roofline row is not what is used

    code, so, se = run_cli(capsys, monkeypatch, "simulate", out, "--cluster", "here:cpus=2", "--placement", "single:0",
                           "--json")
    assert code == 0, se
    assert json.loads(so)["makespan_us"] == pytest.approx(measured.sum(), rel=1e-9)

    code, so, se = run_cli(capsys, monkeypatch, "optimize", out, "--cluster", "here:cpus=2", "--method", "local-search",
                           "--budget", "200", "-o", tmp_path / "p.json", "--json")
    assert code == 0, se
    from placer.frontends.native import load_placement

    p = load_placement(tmp_path / "p.json", g, here)
    step = float(simulate(P, p).makespan_us)
    assert json.loads(so)["step_time_us"] == pytest.approx(step, rel=1e-9) and step <= measured.sum() + 1e-6

