"""Loaded policies of every learned method pass one check (issue 60, :func:`placer.nn.weights.check_weights`):
finite weights, exactly the tensors and shapes of the network the policy's stored settings describe;
anything else is refused in one line naming the file and the tensor, before any placement. Also: a
pickled file is refused in one line (torch's pickle warning does not precede it), and Placeto's
policy, which chooses among a fixed number of devices, refuses training clusters of different sizes
before any work."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

from conftest import run_cli

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from placer.errors import InputError  # noqa: E402
from placer.io import read_checkpoint, write_checkpoint  # noqa: E402
from placer.methods import METHODS, Budget, run_method  # noqa: E402
from placer.methods.learned.protocol import LEARNED  # noqa: E402

SMALL = {"doppler": {"hidden": 16}, "giph": {"hidden": 8}, "gdp": {"hidden": 16, "heads": 2}, "mars": {"hidden": 16},
         "colocrl": {"hidden": 16}, "hierarchical": {"hidden": 16}, "placeto": {}}  # small networks: fast tests
GRAPH = {"format": "placer", "version": 1, "kind": "graph",
         "ops": [{"name": n, "compute_us": {"gpu": c, "cpu": 2 * c}} for n, c in (("a", 1), ("b", 2), ("c", 3))],
         "edges": [["a", "b", 8], ["b", "c", 8]]}


def test_every_learned_method_is_covered():
    assert set(LEARNED) == set(SMALL)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Per method, a policy trained on a 3-op graph (4 placements) written as `placer policy train`
    writes it, and the graph."""
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph

    t = tmp_path_factory.mktemp("policies")
    graph = t / "g.json"
    graph.write_text(json.dumps(GRAPH))
    P = Problem(resolve_graph(str(graph)), resolve_cluster("k80x4"))
    out = {"graph": graph}
    for name, params in SMALL.items():
        m = LEARNED[name]
        policy = m.train([P], METHODS[name].make_config(params), 0, placements=4)
        out[name] = t / f"{name}.pt"
        write_checkpoint(m.policy_state(policy), out[name])
    return out


def _weights(model: dict):
    """(the dict holding it, its key, its dotted name) of each weight: one state dict, or one per
    module (ColocRL's and the Hierarchical Planner's)."""
    for k, v in model.items():
        if isinstance(v, dict):
            yield from ((v, k2, f"{k}.{k2}") for k2 in v)
        else:
            yield model, k, k


def spoil(src, dst, how: str) -> str:
    """A copy of the policy file ``src`` with its first weight matrix all NaN, one column wider, or
    missing; returns that tensor's dotted name."""
    import torch

    state = read_checkpoint(src)
    holder, key, name = next((h, k, n) for h, k, n in _weights(state["model"])
                             if h[k].is_floating_point() and h[k].dim() == 2)
    v = holder[key]
    if how == "nan":
        holder[key] = torch.full_like(v, float("nan"))
    elif how == "wide":
        holder[key] = torch.zeros(v.shape[0], v.shape[1] + 1)
    else:
        del holder[key]
    write_checkpoint(state, dst)
    return name


def _sets(name: str) -> list[str]:
    return [a for k, v in SMALL[name].items() for a in ("--set", f"{k}={v}")]


def _one_line_refusal(code, out, err):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err + out, err
    return err


def test_a_written_policy_passes_the_check_and_places(files, capsys, monkeypatch):
    for name in SMALL:
        code, out, err = run_cli(capsys, monkeypatch, "policy", "place", files["graph"], "-m", name, "--policy",
                                 files[name], "-c", "k80x4", "--budget", "2", "--json", *_sets(name))
        assert code == 0, (name, err)
        assert json.loads(out)["placements_sampled"] <= 2


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("how,says", [("nan", "holds NaN or infinite values"), ("wide", "has shape"),
                                      ("missing", "missing weight")])
def test_a_spoiled_policy_is_refused_naming_the_file_and_the_tensor(files, tmp_path, capsys, monkeypatch, name, how,
                                                                    says):
    bad = tmp_path / f"{how}.pt"
    tensor = spoil(files[name], bad, how)
    code, out, err = run_cli(capsys, monkeypatch, "policy", "place", files["graph"], "-m", name, "--policy", bad,
                             "-c", "k80x4", "--budget", "2", *_sets(name))
    err = _one_line_refusal(code, out, err)
    assert str(bad) in err and says in err and f"'{tensor}'" in err, err


@pytest.mark.parametrize("name", sorted(set(SMALL) - {"placeto"}))
def test_the_python_api_refuses_a_nan_policy_before_placing(files, tmp_path, name):
    """A state given to run_method goes through the same loader: nothing is placed with it."""
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph

    bad = tmp_path / "nan.pt"
    tensor = spoil(files[name], bad, "nan")
    P = Problem(resolve_graph(str(files["graph"])), resolve_cluster("k80x4"))
    with pytest.raises(InputError, match="NaN") as e:
        run_method(name, P, Budget(2), 0, policy=read_checkpoint(bad), **SMALL[name])
    assert f"'{tensor}'" in str(e.value)


def test_a_pickled_file_is_refused_in_one_line_without_torchs_warning(files, tmp_path):
    """In a fresh process (pytest would swallow the warning in-process): a plain pickle is refused
    by the weights-only load, and torch's UserWarning about its pickle protocol is not printed."""
    bad = tmp_path / "pickled.pt"
    bad.write_bytes(pickle.dumps({"model": {}, "format": "placer-doppler-1"}, protocol=4))
    for args in (["policy", "place", str(files["graph"]), "-m", "doppler", "--policy", str(bad)],
                 ["place", str(files["graph"]), "--policy", str(bad)]):
        out = subprocess.run([sys.executable, "-m", "placer", *args, "-c", "k80x4"], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: "), out.stderr
        assert str(bad) in out.stderr and "pickled objects" in out.stderr


def test_placeto_refuses_training_clusters_of_different_sizes_before_any_work(files, tmp_path, capsys, monkeypatch):
    pt, log = tmp_path / "p.pt", tmp_path / "p.jsonl"
    code, out, err = run_cli(capsys, monkeypatch, "policy", "train", "-g", files["graph"], "-m", "placeto",
                             "-c", "k80x2", "-c", "k80x4", "--budget", "4", "-o", pt, "--log", log)
    err = _one_line_refusal(code, out, err)
    assert "candidate devices [2, 4]" in err and "one policy per device count" in err
    assert not pt.exists() and not log.exists()
