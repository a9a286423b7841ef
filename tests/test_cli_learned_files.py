"""The CLI reads the files a learned method's --set parameters name (methods take objects only)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")


@pytest.fixture()
def graph(tmp_path):
    from placer.frontends.native import save_graph
    from placer.zoo.synthetic import layered_training_graph

    path = tmp_path / "g.json"
    save_graph(layered_training_graph(20, seed=1, name="g"), path)
    return path


def test_encoder_and_log_files_reach_mars_as_objects(graph, tmp_path, capsys, monkeypatch):
    enc, log = tmp_path / "enc.pt", tmp_path / "m.jsonl"
    code, _, err = run_cli(capsys, monkeypatch, "pretrain", "-g", graph, "--out", enc, "--epochs", "1", "-c", "k80x2")
    assert code == 0, err
    code, out, err = run_cli(capsys, monkeypatch, "optimize", graph, "-c", "k80x2", "-m", "mars", "--budget", "24",
                             "--set", f"encoder={enc}", "--set", f"log={log}", "--json")
    assert code == 0, err
    assert json.loads(out)["params"]["encoder"] == "given"
    lines = [json.loads(li) for li in log.read_text().splitlines()]
    assert lines and all(isinstance(li, dict) for li in lines)  # one record per PPO update


def test_a_file_of_another_kind_or_a_log_for_a_method_that_trains_nothing_is_refused(graph, tmp_path, capsys, monkeypatch):
    enc = tmp_path / "enc.pt"
    assert run_cli(capsys, monkeypatch, "pretrain", "-g", graph, "--out", enc, "--epochs", "1", "-c", "k80x2")[0] == 0
    for args in (("-m", "gdp", "--set", f"policy={enc}"), ("-m", "random", "--set", f"log={tmp_path / 'x.jsonl'}"),
                 ("-m", "gdp", "--set", f"policy={tmp_path / 'missing.pt'}")):
        code, out, err = run_cli(capsys, monkeypatch, "optimize", graph, "-c", "k80x2", "--budget", "4", *args)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("method", ["gdp", "colocrl"])
def test_policy_train_then_place_through_files(method, graph, tmp_path, capsys, monkeypatch):
    """`placer policy train` writes a learned method's policy state; `placer policy place` reads it back
    (through placer.io), fine-tunes it and places; a policy of another method is refused in one line."""
    pt, log, p = tmp_path / f"{method}.pt", tmp_path / "t.jsonl", tmp_path / "p.json"
    code, _, err = run_cli(capsys, monkeypatch, "policy", "train", "-g", graph, "-m", method, "-c", "k80x2",
                           "--budget", "16", "-o", pt, "--log", log)
    assert code == 0 and pt.exists() and log.read_text().strip(), err
    code, out, err = run_cli(capsys, monkeypatch, "policy", "place", graph, "-m", method, "--policy", pt, "-c", "k80x2",
                             "--budget", "16", "--set", "finetune=1", "-o", p, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["params"]["policy"] == "given" and res["placements_sampled"] <= 16 and p.exists()
    other = "colocrl" if method == "gdp" else "gdp"
    code, _, err = run_cli(capsys, monkeypatch, "policy", "place", graph, "-m", other, "--policy", pt, "-c", "k80x2")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_policy_train_on_several_clusters_then_place_on_another(tmp_path, capsys, monkeypatch):
    """`placer policy train -c A -c B`: every graph on each cluster (GiPH's policy places any cluster);
    the policy then places a generated graph on a network of another size."""
    pt = tmp_path / "giph.pt"
    code, out, err = run_cli(capsys, monkeypatch, "policy", "train", "-m", "giph", "-g", "giph:tasks=12,seed=1",
                             "-g", "giph:tasks=12,seed=2", "-c", "giph-net:devices=3,seed=1",
                             "-c", "giph-net:devices=5,seed=2", "--budget", "40", "-o", pt, "--json")
    assert code == 0 and pt.exists(), err
    data = json.loads(out)
    assert len(data["graphs"]) == 4 and len(set(data["clusters"])) == 2
    code, out, err = run_cli(capsys, monkeypatch, "policy", "place", "giph:tasks=15,seed=9", "-m", "giph", "--policy",
                             pt, "-c", "giph-net:devices=4,seed=7", "--budget", "20", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["params"]["policy"] == "given" and 0 < res["placements_sampled"] <= 20
