"""Issue 63: ``placer export --format pipeline`` cuts stages in data-flow order (a BatchNorm's buffers,
recorded before any computation, no longer put it a stage ahead of the conv feeding it), refuses in
one line a placement split points cannot express, and its split points run a 2-stage
``torch.distributed.pipelining`` GPipe step on the CPU (two gloo processes) with the unplaced loss."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from conftest import run_cli  # noqa: E402
from placer.cluster import preset  # noqa: E402
from placer.frontends.native import save_graph, save_placement  # noqa: E402
from placer.grouping.modules import module_units  # noqa: E402


def conv_bn(c_in, c):
    return [nn.Conv2d(c_in, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]


class TwoTower(nn.Module):
    """Two convolution towers read the same input; the head reads both (a branched model)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(*conv_bn(3, 4), *conv_bn(4, 4))
        self.b = nn.Sequential(*conv_bn(3, 4), *conv_bn(4, 4))
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        return self.head(torch.cat([self.a(x), self.b(x)], 1).flatten(1))


class Chain(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.mid = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d), nn.Tanh())
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        return self.out(self.mid(self.inp(x)))


def loss_of(out):
    return (out ** 2).mean()


def _files(tmp_path, model, x, on: dict, depth: int, name: str):
    """The captured graph of ``model`` and the placement putting each unit at ``depth`` on ``on[unit]``
    (a name not in ``on``: the device of the module it lies in, by the longest prefix)."""
    from placer.frontends.torch import capture_training_step

    g = capture_training_step(model, [x], loss_fn=loss_of, name=name)
    mu = module_units(g, depth)
    dev = [on[max((k for k in on if u == k or u.startswith(k + ".")), key=len)] for u in mu.names]
    gp, pp = tmp_path / f"{name}.json", tmp_path / f"{name}-p.json"
    save_graph(g, gp)
    save_placement(pp, g, preset("k80x2"), np.array(dev)[mu.op_unit])
    return gp, pp


def _export(capsys, monkeypatch, gp, pp, depth, *extra):
    return run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--format", "pipeline",
                   "--depth", depth, *extra)


def test_stages_follow_the_data_flow_of_a_batchnorm_chain(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    gp, pp = _files(tmp_path, TwoTower(), torch.randn(2, 3, 6, 6),
                    {"a": 0, "b": 1, "head": 1}, 2, "towers")
    code, out, err = _export(capsys, monkeypatch, gp, pp, 2, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [s["modules"] for s in doc["stages"]] == [["a.0", "a.1", "a.2", "a.3", "a.4", "a.5"],
                                                      ["b.0", "b.1", "b.2", "b.3", "b.4", "b.5", "head"]]
    assert doc["split_points"] == ["b.0"]  # conv before its BatchNorm, tower a before tower b


@pytest.mark.parametrize("on, says", [
    ({"a": 0, "b": 1, "head": 0}, "device gpu:0"),  # gpu:0 holds tower a and the head, b between them
    ({"a": 0, "a.2": 1, "b": 0, "head": 0}, "'a.2' (on gpu:1)"),  # a lone ReLU on another device
])
def test_a_placement_split_points_cannot_express_is_refused(tmp_path, capsys, monkeypatch, on, says):
    torch.manual_seed(0)
    gp, pp = _files(tmp_path, TwoTower(), torch.randn(2, 3, 6, 6), on, 2, "towers")
    code, _, err = _export(capsys, monkeypatch, gp, pp, 2, "-o", tmp_path / "st.json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert says in err and "not contiguous in data-flow order" in err
    assert "--format device-map" in err and not (tmp_path / "st.json").exists()
    code, _, err = run_cli(capsys, monkeypatch, "export", gp, "-c", "k80x2", "-p", pp, "--depth", 2)
    assert code == 0, err  # the same placement is a device map


def _stage_worker(rank: int, store: str, split_points: list, result: str):
    """One rank of the 2-stage GPipe step: rank 0 feeds the input, rank 1 computes the loss."""
    import torch.distributed as dist
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model, x = Chain(), torch.randn(8, 8)
        chunks = 4
        pipe = pipeline(model, mb_args=(x.chunk(chunks)[0],), split_spec={m: SplitPoint.BEGINNING for m in split_points})
        assert pipe.num_stages == 2
        stage = pipe.build_stage(rank, torch.device("cpu"))
        sched = ScheduleGPipe(stage, chunks, loss_fn=lambda out, target: loss_of(out))
        if rank == 0:
            sched.step(x)
        else:
            losses: list = []
            sched.step(target=torch.zeros(8, 3), losses=losses)
            with open(result, "w") as f:
                json.dump([float(v) for v in losses], f)
    finally:
        dist.destroy_process_group()


def test_exported_split_points_run_a_two_stage_pipeline(tmp_path, capsys, monkeypatch):
    import torch.multiprocessing as mp

    torch.manual_seed(0)
    model, x = Chain(), torch.randn(8, 8)
    gp, pp = _files(tmp_path, model, x, {"inp": 0, "mid": 0, "mid.3": 1, "mid.4": 1, "out": 1}, 1, "chain")
    code, out, err = _export(capsys, monkeypatch, gp, pp, 1, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["split_points"] == ["mid.3"] and [s["device"] for s in doc["stages"]] == ["cuda:0", "cuda:1"]
    result = tmp_path / "losses.json"
    mp.spawn(_stage_worker, args=(str(tmp_path / "store"), doc["split_points"], str(result)), nprocs=2, join=True)
    losses = json.loads(result.read_text())
    ref = [float(loss_of(model(xm))) for xm in x.chunk(4)]
    assert len(losses) == 4 and np.allclose(losses, ref, rtol=1e-6, atol=0)
    assert np.mean(losses) == pytest.approx(float(loss_of(model(x))), rel=1e-6)


class Tied(nn.Module):
    """An embedding and a head sharing one weight (GPT-2's wte and lm_head)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.mid = nn.Linear(8, 8)
        self.head = nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.mid(self.emb(ids))))


def test_tied_ends_on_one_device_are_refused_naming_the_tie(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    gp, pp = _files(tmp_path, Tied(), torch.randint(0, 20, (2, 5)), {"emb": 0, "mid": 1, "head": 0}, 1, "tied")
    code, _, err = _export(capsys, monkeypatch, gp, pp, 1)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "modules 'emb' and 'head'" in err and "share a parameter" in err and "--format device-map" in err
