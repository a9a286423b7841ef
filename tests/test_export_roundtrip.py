"""Issue 63, plan on a laptop and run on the GPU server: ``placer export`` names the cluster's target
devices whatever this machine has, writes a summary per device, and a device map (placer's own or
accelerate's) comes back in as ``--placement`` or through ``placer convert``: export then import is
the identity."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from conftest import run_cli  # noqa: E402
from placer.cluster import preset  # noqa: E402
from placer.frontends.native import load_placement, save_graph, save_placement  # noqa: E402
from placer.grouping.modules import module_problem, module_units  # noqa: E402
from placer.methods import Budget, run_method  # noqa: E402
from placer.problem import Problem  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.ln(x)))


class Net(nn.Module):
    def __init__(self, d=16, n=6):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 5)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A captured graph and a module-level placement of it over both GPUs and the CPU of k80x2."""
    from placer.frontends.torch import capture_training_step

    d = tmp_path_factory.mktemp("rt")
    torch.manual_seed(0)
    g = capture_training_step(Net(), [torch.randn(4, 8)], loss_fn=lambda o: (o ** 2).mean(), name="net")
    P = Problem(g, preset("k80x2"))
    mu = module_units(g, 1)
    on = {"inp": 0, "blocks.0": 0, "blocks.1": 0, "blocks.2": 1, "blocks.3": 1, "blocks.4": 2, "blocks.5": 2, "head": 1}
    p = np.array([on[n] for n in mu.names])[mu.op_unit]
    gp, pp = d / "g.json", d / "p.json"
    save_graph(g, gp)
    save_placement(pp, g, P.cluster, p)
    return d, gp, pp, P, p


def _json(capsys, monkeypatch, *args):
    code, out, err = run_cli(capsys, monkeypatch, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _refused(capsys, monkeypatch, *args):
    code, _, err = run_cli(capsys, monkeypatch, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_export_names_the_clusters_gpus_on_a_machine_without_them(files, capsys, monkeypatch):
    d, gp, pp, P, p = files
    doc = _json(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1")
    assert set(doc["device_map"].values()) == {"cuda:0", "cuda:1", "cpu"}  # whatever torch sees here
    assert doc["device_map"]["inp"] == "cuda:0" and doc["device_map"]["blocks.3"] == "cuda:1"
    assert doc["device_map"]["head"] == "cuda:1" and doc["device_map"]["blocks.5"] == "cpu"
    # --map to any device name torch parses, present here or not
    doc = _json(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1", "--map", "gpu:0=cuda:6,gpu:1=cuda")
    assert doc["device_map"]["inp"] == "cuda:6" and doc["device_map"]["head"] == "cuda:0"
    err = _refused(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1", "--map", "gpu:0=gpu7")
    assert "'gpu7'" in err and "cuda:K" in err


def test_export_prints_a_summary_per_device(files, capsys, monkeypatch):
    d, gp, pp, P, p = files
    code, out, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1 + 3 + 1, out  # the header, one line per device used, the --verbose hint
    assert "gpu:0 -> cuda:0: 3 modules" in out and "gpu:1 -> cuda:1: 3 modules" in out and "cpu:0 -> cpu: 2 modules" in out
    assert "blocks.1 ->" not in out
    code, out, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1", "--verbose")
    assert code == 0 and "blocks.1 -> cuda:0 (gpu:0)" in out and len(out.strip().splitlines()) == 1 + 8
    doc = _json(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1")
    assert [s["modules"] for s in doc["devices"]] == [3, 3, 2]
    assert sum(s["param_bytes"] for s in doc["devices"]) == pytest.approx(float(P.graph.param_bytes.sum()))


def test_export_then_import_is_the_identity(files, capsys, monkeypatch):
    d, gp, pp, P, p = files
    mp, back = d / "map.json", d / "back.json"
    code, _, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1", "-o", mp)
    assert code == 0, err
    code, _, err = run_cli(capsys, monkeypatch, "convert", mp, back, "--graph", gp, "--cluster", "k80x2")
    assert code == 0, err
    assert np.array_equal(load_placement(back, P.graph, P.cluster), p)
    a = _json(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", pp)
    b = _json(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)
    assert a["makespan_us"] == b["makespan_us"] and a["transfers"] == b["transfers"]


def test_an_optimized_placement_round_trips_through_its_map(files, capsys, monkeypatch):
    d, gp, _, P, _ = files
    op, mp = d / "opt.json", d / "opt-map.json"
    code, _, err = run_cli(capsys, monkeypatch, "optimize", gp, "-c", "k80x2", "-m", "local-search", "--budget", "40",
                           "--grouping", "module:2", "-o", op)
    assert code == 0, err
    code, _, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", op, "-o", mp)
    assert code == 0, err
    a = _json(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", op)
    b = _json(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)
    assert a["makespan_us"] == b["makespan_us"]


def test_accelerates_plain_map_is_a_placement(files, capsys, monkeypatch):
    """Accelerate's {module: device}: GPU indices as ints or cuda:K, 'cpu', keys at any depth."""
    d, gp, _, P, _ = files
    mp = d / "acc.json"
    mp.write_text(json.dumps({"inp": 0, "blocks.0": 0, "blocks.1": "cuda:0", "blocks.2": 1, "blocks.3": "cuda:1",
                              "blocks.4": "cpu", "blocks.5.ln": "cpu", "blocks.5.fc": "cpu", "head": 1}))
    r = _json(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)
    assert r["transfers"] > 0 and all(dv["busy_us"] > 0 for dv in r["devices"])
    out = d / "acc-p.json"
    code, _, err = run_cli(capsys, monkeypatch, "convert", mp, out, "--graph", gp, "--cluster", "k80x2")
    assert code == 0, err
    q = load_placement(out, P.graph, P.cluster)
    mu = module_units(P.graph, 2)
    assert {int(x) for x in q[mu.op_unit == mu.names.index("blocks.5.fc")]} == {2}
    assert {int(x) for x in q[mu.op_unit == mu.names.index("head")]} == {1}
    # a module the map leaves out, and a GPU the cluster lacks: one line each
    mp.write_text(json.dumps({"inp": 0, "blocks": 1}))
    assert "module 'head'" in _refused(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)
    mp.write_text(json.dumps({"": "cuda:3"}))
    assert "2 GPU(s)" in _refused(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)


def test_a_device_map_is_no_loop_between_commands(files, capsys, monkeypatch):
    """Before: simulate said 'convert it first with placer convert' and convert said the same."""
    d, gp, pp, _, _ = files
    mp = d / "loop.json"
    code, _, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", "1", "-o", mp)
    assert code == 0, err
    err = _refused(capsys, monkeypatch, "convert", mp, d / "x.json")
    assert "--graph GRAPH --cluster CLUSTER" in err and "convert it first" not in err
    err = _refused(capsys, monkeypatch, "convert", mp, d / "x.json", "--graph", gp)
    assert "needed together" in err
    assert not (d / "x.json").exists()


class Wrapped(nn.Module):
    """The model one level down: at depth 1 it is one unit with all the work."""

    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        return self.net(x)


def test_module_auto_chooses_the_depth_and_says_so(tmp_path, capsys, monkeypatch):
    from placer.frontends.torch import capture_training_step
    from placer.grouping import parse_grouping

    torch.manual_seed(0)
    g = capture_training_step(Wrapped(), [torch.randn(4, 8)], loss_fn=lambda o: (o ** 2).mean(), name="wrapped")
    gp, op = tmp_path / "w.json", tmp_path / "w-p.json"
    save_graph(g, gp)
    code, out, err = run_cli(capsys, monkeypatch, "optimize", gp, "-c", "k80x2", "-m", "local-search", "--budget", "30",
                             "--grouping", "module:auto", "-o", op, "--json")
    assert code == 0, err
    assert "module:auto chose depth 2: 8 units" in err  # depth 1: 'net', one unit holding all the work
    doc = json.loads(out)
    assert doc["grouping"] == "module:2" and "chose depth 2" in doc["grouping_chosen"]
    code, out, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", op, "--depth", "2", "--json")
    assert code == 0, err  # a module-level placement at the chosen depth
    assert set(json.loads(out)["device_map"]) == {"net.inp", "net.head"} | {f"net.blocks.{k}" for k in range(6)}
    assert str(parse_grouping("module:auto")) == "module:auto"
    code, out, _ = run_cli(capsys, monkeypatch, "optimize", "--help")
    assert "module:auto chooses DEPTH" in " ".join(out.split())


@pytest.mark.parametrize("entries, says", [
    ({"inp": True, "blocks": 0, "head": 0}, "module 'inp'"),
    ({"inp": [0], "blocks": 0, "head": 0}, "not a device"),
    ({"inp": "gpu7", "blocks": 0, "head": 0}, "names no device of cluster"),
])
def test_a_bad_map_entry_is_one_line(files, capsys, monkeypatch, entries, says):
    d, gp, _, _, _ = files
    mp = d / "bad.json"
    mp.write_text(json.dumps(entries))
    assert says in _refused(capsys, monkeypatch, "simulate", gp, "-c", "k80x2", "-p", mp)
    assert says in _refused(capsys, monkeypatch, "convert", mp, d / "bad-p.json", "--graph", gp, "--cluster", "k80x2")
