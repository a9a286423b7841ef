"""This machine as a cluster (placer.runtime.detect, `--cluster here`, `placer cluster detect/show`):
a valid cluster file with measured, finite links; bad specs refused in one line; `here` accepted by
compare, optimize and run. No timing asserts: the figures move with the machine's load."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

from placer.runtime.detect import usable_cores  # noqa: E402

two_cores = pytest.mark.skipif(usable_cores() < 2, reason="here:cpus=2 needs two usable cores")

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 16)
        self.b = nn.Linear(12, 16)
        self.out = nn.Linear(32, 5)

    def forward(self, x):
        return self.out(torch.cat([torch.relu(self.a(x)), torch.tanh(self.b(x))], dim=1))


def build():
    return Net()
'''


@pytest.fixture(scope="module")
def here2():
    from placer.runtime.detect import detected

    if usable_cores() < 2:
        pytest.skip("here:cpus=2 needs two usable cores")
    return detected(2)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    d = tmp_path_factory.mktemp("detect")
    (d / "net.py").write_text(MODEL)
    from placer.frontends.native import save_graph
    from placer.build import capture_recipe

    recipe = {"kind": "factory", "target": f"{d / 'net.py'}:build", "kwargs": {},
              "inputs": [{"shape": [4, 12], "dtype": "float32"}], "loss": "cross-entropy", "optimizer": "sgd", "seed": 1}
    cap = capture_recipe(recipe, name="net")
    save_graph(cap.graph, d / "g.json")
    return d, cap.graph


def test_model_key_format():
    from placer.runtime.detect import _normalise, model_key

    assert _normalise("AMD EPYC 7B13 64-Core Processor") == "amd-epyc-7b13"
    assert _normalise("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz") == "intel-xeon-e5-2686-v4"
    assert _normalise("NVIDIA H200") == "nvidia-h200"
    assert model_key("cpu", 1).endswith("/1t") and model_key("cpu", 3).endswith("/3t")
    assert model_key("cpu", 1).rsplit("/", 1)[0] == model_key("cpu", 2).rsplit("/", 1)[0]
    assert model_key("cpu") == model_key("cpu", torch.get_num_threads())
    from placer.errors import InputError

    with pytest.raises(InputError):
        model_key("tpu:0")
    with pytest.raises(InputError):
        model_key(f"cuda:{torch.cuda.device_count()}")


def test_fit_link_recovers_a_line_and_clamps():
    from placer.runtime.detect import BANDWIDTH_CAP_BYTES_PER_US, fit_link

    sizes = [4096, 65536, 2**20, 2**23, 2**26]
    lat, bw = fit_link(sizes, [20 + s / 5000 for s in sizes])
    assert lat == pytest.approx(20, rel=1e-6) and bw == pytest.approx(5000, rel=1e-6)
    lat, bw = fit_link(sizes, [30, 31, 29, 30, 30])  # no cost per byte
    assert bw == BANDWIDTH_CAP_BYTES_PER_US and all(27 <= lat + s / bw <= 33 for s in sizes)
    lat, bw = fit_link(sizes, [s / 1000 for s in sizes])  # no fixed cost
    assert lat >= 0 and bw == pytest.approx(1000, rel=0.01)


@two_cores
def test_here_cpus_2_is_two_single_thread_cpu_devices_with_measured_links(here2):
    c = here2
    assert c.name == "here:cpus=2" and c.device_names == ("cpu:0", "cpu:1")
    assert all(d.kind == "cpu" and d.model.endswith("/1t") for d in c.devices)
    assert c.meta["torch_threads"] == 1
    for d in c.devices:
        assert d.memory_bytes > 0 and d.peak_flops_per_us > 0 and d.mem_bw_bytes_per_us > 0 and d.launch_us > 0
    for a, b in ((0, 1), (1, 0)):
        assert np.isfinite(c.bandwidth_bytes_per_us[a, b]) and c.bandwidth_bytes_per_us[a, b] > 0
        assert np.isfinite(c.latency_us[a, b]) and c.latency_us[a, b] >= 0
    det = c.meta["detected"]
    assert det["date"].endswith("+00:00") and det["machine"]["torch"] == torch.__version__
    (link,) = det["links"]
    assert link["kind"] == "handover" and sorted(link["applies_to"]) == ["cpu:0->cpu:1", "cpu:1->cpu:0"]
    assert [p["bytes"] for p in link["per_size"]] == det["sizes_bytes"]
    for p in link["per_size"]:
        assert p["min_us"] <= p["q25_us"] <= p["median_us"] <= p["q75_us"] <= p["max_us"]
    assert link["bandwidth_bytes_per_us"] == pytest.approx(c.bandwidth_bytes_per_us[0, 1], rel=1e-3)
    assert "cpu" in det["memory"] and det["memory"]["cpu_usable_bytes"] >= sum(c.memory_bytes) - 1


@two_cores
def test_detected_cluster_is_a_valid_cluster_file(here2, tmp_path):
    from placer.frontends.native import cluster_to_doc, load_cluster, save_cluster

    save_cluster(here2, tmp_path / "here.json")
    back = load_cluster(tmp_path / "here.json")
    assert cluster_to_doc(back) == cluster_to_doc(here2)
    assert back.devices == here2.devices
    np.testing.assert_array_equal(back.bandwidth_bytes_per_us, here2.bandwidth_bytes_per_us)
    np.testing.assert_array_equal(back.latency_us, here2.latency_us)


def test_here_is_one_cpu_device_with_all_cores():
    from placer.resolve import resolve_cluster

    c = resolve_cluster("here")
    assert c.device_names[-1] == "cpu:0" and len(c.cpus()) == 1
    assert c.devices[-1].model.endswith(f"/{usable_cores()}t") and c.meta["torch_threads"] == usable_cores()
    assert len(c.gpus()) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert resolve_cluster("here") is c  # measured once per process


@pytest.mark.parametrize("spec, needle", [
    ("here:cpus=0", "must be a whole number from 1 to"),
    ("here:cpus=999999", "must be a whole number from 1 to"),
    ("here:cpus=-1", "must be a whole number from 1 to"),
    ("here:cpus=two", "must be a whole number from 1 to"),
    ("here:x=1", "is not a setting of here"),
    ("here:cpus", "is not a setting of here"),
    ("here:cpus=1,cpus=2", "gives cpus twice"),
    ("here:", "is not here or here:cpus=N"),
])
def test_bad_here_specs_are_one_line(capsys, monkeypatch, spec, needle):
    code, so, se = run_cli(capsys, monkeypatch, "cluster", "show", spec)
    assert code == 2 and needle in se and len(se.strip().splitlines()) == 1 and so == "", se
    code, so, se = run_cli(capsys, monkeypatch, "info", "synthetic", "--cluster", spec)
    assert code == 2 and needle in se and len(se.strip().splitlines()) == 1, se


@pytest.mark.parametrize("args, needle", [(["--cpus", "0"], "at least 1"), (["--cpus", "100000"], "the most placer allows"),
                                          (["--repeats", "2"], "at least 3")])
def test_detect_bounds_are_checked_first(capsys, monkeypatch, tmp_path, args, needle):
    code, so, se = run_cli(capsys, monkeypatch, "cluster", "detect", *args, "-o", tmp_path / "c.json")
    assert code == 2 and needle in se and len(se.strip().splitlines()) == 1, se
    assert not (tmp_path / "c.json").exists()


@two_cores
def test_cluster_detect_writes_a_cluster_file_the_cli_reads(capsys, monkeypatch, tmp_path):
    out = tmp_path / "here.json"
    code, so, se = run_cli(capsys, monkeypatch, "cluster", "detect", "--cpus", "2", "--repeats", "3", "-o", out)
    assert code == 0, se
    assert "cpu:0" in so and "thread hand-over" in so and str(out) in so
    doc = json.loads(out.read_text())
    assert doc["kind"] == "cluster" and [d["name"] for d in doc["devices"]] == ["cpu:0", "cpu:1"]
    assert doc["meta"]["detected"]["repeats"] == 3
    code, so, se = run_cli(capsys, monkeypatch, "info", "synthetic", "--cluster", out, "--json")
    assert code == 0, se
    assert json.loads(so)


@pytest.mark.parametrize("name", ["k80x2", "giph-net:devices=3,seed=1", "here"])
def test_cluster_show_json_round_trips(capsys, monkeypatch, tmp_path, name):
    from placer.frontends.native import cluster_to_doc, load_cluster
    from placer.resolve import resolve_cluster

    code, so, se = run_cli(capsys, monkeypatch, "cluster", "show", name, "--json")
    assert code == 0, se
    (tmp_path / "c.json").write_text(so)
    assert cluster_to_doc(load_cluster(tmp_path / "c.json")) == cluster_to_doc(resolve_cluster(name)) == json.loads(so)
    code, so2, se = run_cli(capsys, monkeypatch, "cluster", "show", tmp_path / "c.json", "--json")
    assert code == 0 and so2 == so, se
    code, text, se = run_cli(capsys, monkeypatch, "cluster", "show", name)
    assert code == 0 and resolve_cluster(name).device_names[0] in text, se


@two_cores
def test_compare_and_optimize_accept_here(captured, capsys, monkeypatch, tmp_path):
    d, g = captured
    code, so, se = run_cli(capsys, monkeypatch, "compare", d / "g.json", "--cluster", "here:cpus=2",
                           "--methods", "cpu-only,random", "--budget", "4", "--jobs", "1", "--json")
    assert code == 0, se
    r = json.loads(so)
    assert r["cluster"] == "here:cpus=2"
    code, so, se = run_cli(capsys, monkeypatch, "optimize", d / "g.json", "--cluster", "here", "--method", "random",
                           "--budget", "4", "--json")
    assert code == 0, se
    assert json.loads(so)["step_time_us"] > 0


@two_cores
def test_run_places_a_captured_graph_on_both_cpu_devices(captured, capsys, monkeypatch, here2):
    from placer.frontends.native import save_placement

    d, g = captured
    p = (np.arange(g.n_ops) // 2) % 2
    for i, c in enumerate(g.colocation):
        if c >= 0:
            p[i] = p[np.flatnonzero(g.colocation == c)[0]]
    assert set(p) == {0, 1}
    save_placement(d / "p.json", g, here2, p)
    code, so, se = run_cli(capsys, monkeypatch, "run", d / "g.json", "--cluster", "here:cpus=2", "--placement", d / "p.json",
                           "--steps", "2", "--warmup", "1", "--json", "--allow-code", d)
    assert code == 0, se
    r = json.loads(so)
    dev = {x["name"]: x for x in r["devices"]}
    assert dev["cpu:0"]["ops"] > 0 and dev["cpu:1"]["ops"] > 0 and r["transfers"] > 0
    assert r["predicted_us"] > 0 and r["measured_median_us"] > 0 and np.isfinite(r["loss"])
