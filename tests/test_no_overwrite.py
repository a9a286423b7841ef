"""No command writes over one of its own inputs (issue 60): an output that is an input file by any
name (the same path, relative or absolute, a symbolic link, a hard link) or another output of the
same command is refused with one line and status 2, before any work, and the input is left as it was."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import run_cli
from placer.errors import InputError
from placer.io import check_outputs_spare_inputs


@pytest.fixture()
def files(tmp_path, monkeypatch):
    """A graph, a placement of it, a file posing as a policy and a model file, in the working folder."""
    import numpy as np

    from placer.cluster import preset
    from placer.frontends.native import save_graph, save_placement
    from placer.zoo.synthetic import layered_training_graph

    monkeypatch.chdir(tmp_path)
    g = layered_training_graph(12, seed=1, name="g")
    save_graph(g, tmp_path / "g.json")
    save_placement(tmp_path / "p.json", g, preset("k80x2"), np.zeros(g.n_ops, dtype=np.int64))
    (tmp_path / "policy.pt").write_bytes(b"not really a checkpoint")
    (tmp_path / "model.py").write_text("def build():\n    raise SystemExit('never run')\n")
    return tmp_path


def _snapshot(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def _refused(capsys, monkeypatch, folder, *args, says="would overwrite an input"):
    before = _snapshot(folder)
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert code == 2, (args, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and says in err, err
    assert _snapshot(folder) == before, "a file was written or changed"
    return err


TORCH = importlib.util.find_spec("torch") is not None
PLOTLY = importlib.util.find_spec("plotly") is not None


# ---------------------------------------------------------------------- every command that writes
def test_export_out_naming_its_graph_or_placement(files, capsys, monkeypatch):
    err = _refused(capsys, monkeypatch, files, "export", "g.json", "-c", "k80x2", "-p", "p.json", "-o", "g.json")
    assert err.startswith("error: --out: g.json: is the graph g.json")
    _refused(capsys, monkeypatch, files, "export", "g.json", "-c", "k80x2", "-p", "p.json", "-o", files / "p.json")


def test_convert_out_naming_its_source_or_its_other_output(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "convert", "g.json", "./g.json")
    _refused(capsys, monkeypatch, files, "convert", "g.json", "new.json", "--cluster-out", "new.json",
             says="is also the out output")


def test_simulate_trace_and_html(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "simulate", "g.json", "-c", "k80x2", "-p", "p.json", "--trace", "p.json")
    if PLOTLY:
        _refused(capsys, monkeypatch, files, "simulate", "g.json", "-c", "k80x2", "-p", "single:0", "--html", "g.json")
        _refused(capsys, monkeypatch, files, "simulate", "g.json", "-c", "k80x2", "-p", "single:0", "--trace", "t.json",
                 "--html", "t.json", says="is also the --trace output")


def test_optimize_out_html_and_set_log(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "optimize", "g.json", "-c", "k80x2", "-m", "random", "-o", "g.json")
    _refused(capsys, monkeypatch, files, "optimize", "g.json", "-c", "k80x2", "-m", "placeto", "--set", "log=g.json")
    if PLOTLY:
        _refused(capsys, monkeypatch, files, "optimize", "g.json", "-c", "k80x2", "-m", "random", "--html", "g.json")


@pytest.mark.skipif(not PLOTLY, reason="--html needs plotly")
def test_compare_html_naming_its_graph(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "compare", "g.json", "-c", "k80x2", "--methods", "random", "--html", "g.json")


def test_a_cluster_file_is_an_input_too(files, capsys, monkeypatch):
    from placer.cluster import preset
    from placer.frontends.native import save_cluster

    save_cluster(preset("k80x2"), files / "c.json")
    _refused(capsys, monkeypatch, files, "export", "g.json", "-c", "c.json", "-p", "p.json", "-o", "c.json")


def test_bench_report_out_inside_the_results_it_reads(files, capsys, monkeypatch):
    res = files / "results" / "exp"
    res.mkdir(parents=True)
    (res / "summary.json").write_text("{}")
    before = (res / "summary.json").read_bytes()
    err = _refused(capsys, monkeypatch, files, "bench", "report", "--results", "results", "-o", res / "summary.json")
    assert "is a file in --results results, which this command reads" in err
    assert (res / "summary.json").read_bytes() == before


@pytest.mark.skipif(not TORCH, reason="needs torch")
def test_capture_out_naming_the_models_file(files, capsys, monkeypatch):
    """`capture model.py:build -o model.py` would replace the user's code with a graph: refused before
    the file is imported (its factory would exit)."""
    err = _refused(capsys, monkeypatch, files, "capture", "model.py:build", "-i", "4", "-o", "model.py")
    assert "is the model model.py" in err
    _refused(capsys, monkeypatch, files, "capture", "model.py:build", "-i", "4", "--loss", "model.py:build",
             "-o", files / "model.py")


@pytest.mark.skipif(not TORCH, reason="needs torch")
def test_train_and_place_outputs(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "train", "--graph", "g.json", "-o", "g.json")
    _refused(capsys, monkeypatch, files, "train", "--graph", "g.json", "--resume", "policy.pt", "-o", "policy.pt")
    _refused(capsys, monkeypatch, files, "train", "--graph", "g.json", "-o", "new.pt", "--log", "g.json")
    _refused(capsys, monkeypatch, files, "place", "g.json", "--policy", "policy.pt", "-o", "policy.pt")
    _refused(capsys, monkeypatch, files, "place", "g.json", "--policy", "policy.pt", "--log", "g.json")


@pytest.mark.skipif(not TORCH, reason="needs torch")
def test_policy_train_and_place_outputs(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "policy", "train", "-g", "g.json", "-m", "placeto", "-o", "g.json")
    _refused(capsys, monkeypatch, files, "policy", "train", "-g", "g.json", "-m", "placeto", "-o", "new.pt",
             "--set", "log=new.pt", says="is also the --out output")
    _refused(capsys, monkeypatch, files, "policy", "place", "g.json", "-m", "placeto", "--policy", "policy.pt",
             "-o", "policy.pt")


@pytest.mark.skipif(not TORCH, reason="needs torch")
def test_pretrain_out_naming_a_graph(files, capsys, monkeypatch):
    _refused(capsys, monkeypatch, files, "pretrain", "-g", "g.json", "-o", "g.json")


def test_an_output_beside_the_input_is_written(files, capsys, monkeypatch):
    """The check refuses only the same file: a new name beside the input is written as before."""
    from placer.frontends.native import load_graph

    code, _, err = run_cli(capsys, monkeypatch, "convert", "g.json", "g2.json", "--cluster-out", "c.json")
    assert code == 0, err
    assert load_graph(files / "g2.json").n_ops == load_graph(files / "g.json").n_ops == 12


# ---------------------------------------------------------------------- the check itself
def test_same_file_by_any_name(tmp_path):
    g = tmp_path / "g.json"
    g.write_text("{}")
    (tmp_path / "sym.json").symlink_to(g)
    os.link(g, tmp_path / "hard.json")
    (tmp_path / "sub").mkdir()
    for out in (g, str(g), tmp_path / "sym.json", tmp_path / "hard.json", tmp_path / "sub" / ".." / "g.json"):
        with pytest.raises(InputError, match="would overwrite an input"):
            check_outputs_spare_inputs({"--out": out}, {"the graph": str(g)})
    with pytest.raises(InputError, match="the same file"):  # the input named through the link
        check_outputs_spare_inputs({"--out": g}, {"the graph": str(tmp_path / "hard.json")})
    # the input given as part of FILE:ITEM, or in a list of a repeated option
    with pytest.raises(InputError, match="is --graph"):
        check_outputs_spare_inputs({"--out": g}, {"--graph": ["synthetic", f"{g}:whatever"]})


def test_what_is_not_an_input_passes(tmp_path):
    g = tmp_path / "g.json"
    g.write_text("{}")
    other = tmp_path / "other.json"
    other.write_text("{}")
    check_outputs_spare_inputs({"--out": other, "--html": None, "--log": tmp_path / "new.log"},
                               {"the graph": str(g), "--cluster": "k80x2", "--placement": "single:0", "x": None})
    check_outputs_spare_inputs({"--out": tmp_path / "new.json"}, {"the graph": str(g)})  # not there yet: no input


def test_two_outputs_on_one_file(tmp_path):
    with pytest.raises(InputError, match="is also the --out output"):
        check_outputs_spare_inputs({"--out": tmp_path / "a.json", "--log": str(tmp_path / "x" / ".." / "a.json")}, {})
    (tmp_path / "b.json").write_text("")
    os.link(tmp_path / "b.json", tmp_path / "c.json")
    with pytest.raises(InputError, match="is also the --out output"):
        check_outputs_spare_inputs({"--out": tmp_path / "b.json", "--html": tmp_path / "c.json"}, {})


def test_a_folder_input_covers_its_files(tmp_path):
    d = tmp_path / "results"
    (d / "e").mkdir(parents=True)
    (d / "e" / "summary.json").write_text("{}")
    with pytest.raises(InputError, match="is a file in --results"):
        check_outputs_spare_inputs({"--out": d / "e" / "summary.json"}, {"--results": d})
    check_outputs_spare_inputs({"--out": d / "e" / "new.md"}, {"--results": d})  # a new file in it: nothing overwritten
    check_outputs_spare_inputs({"--out": tmp_path / "REPRODUCTION.md"}, {"--results": d})
