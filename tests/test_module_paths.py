"""A graph whose ops record no PyTorch module paths (a PipeDream profile names its layers node1,
node2, ...) is neither grouped by `module` nor exported as a module -> device map (issue 60): one
line saying so and what to use instead, status 2, nothing written."""

from __future__ import annotations

import pytest

from conftest import run_cli
from placer.errors import InputError

TINY = """node1 -- Conv2d(3, 8, kernel_size=(3, 3)) -- forward_compute_time=1.000, backward_compute_time=2.000, activation_size=4096.000, parameter_size=864.000
node2 -- ReLU(inplace) -- forward_compute_time=0.100, backward_compute_time=0.100, activation_size=4096.000, parameter_size=0.000
node3 -- Linear(in_features=512, out_features=10) -- forward_compute_time=0.500, backward_compute_time=1.000, activation_size=40.000, parameter_size=20480.000
\tnode1 -- node2
\tnode2 -- node3
"""


@pytest.fixture()
def pipedream(tmp_path):
    p = tmp_path / "tiny.txt"
    p.write_text(TINY)
    return p


def _refused(capsys, monkeypatch, *args, says=("records no module paths", "PipeDream profile")):
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for s in says:
        assert s in err, err
    return err


def test_module_grouping_of_a_pipedream_graph_is_refused(pipedream, tmp_path, capsys, monkeypatch):
    from placer.frontends.pipedream import load_pipedream
    from placer.grouping import make_grouping

    g = load_pipedream(pipedream)
    assert g.modules[0] == "node1"  # the importer keeps the layer ids there (to name and mirror ops)
    with pytest.raises(InputError, match="records no module paths.*node1, node2"):
        make_grouping(g, "module:2")
    out = tmp_path / "p.json"
    err = _refused(capsys, monkeypatch, "optimize", pipedream, "-c", "k80x2", "-m", "random", "--budget", "5",
                   "--grouping", "module:1", "-o", out)
    assert "group it otherwise (metis:K" in err and "placer capture" in err
    assert not out.exists()
    make_grouping(g, "metis:2")  # the grouping it suggests works


def test_export_of_a_pipedream_graph_is_refused(pipedream, tmp_path, capsys, monkeypatch):
    out = tmp_path / "map.json"
    for fmt in ("device-map", "pipeline"):
        err = _refused(capsys, monkeypatch, "export", pipedream, "-c", "k80x2", "-p", "single:0", "--format", fmt,
                       "-o", out)
        assert "is no module map" in err and "placer optimize -o" in err
    assert not out.exists()


def test_a_converted_pipedream_graph_keeps_its_source(pipedream, tmp_path, capsys, monkeypatch):
    native = tmp_path / "tiny.json"
    code, _, err = run_cli(capsys, monkeypatch, "convert", pipedream, native)
    assert code == 0, err
    _refused(capsys, monkeypatch, "export", native, "-c", "k80x2", "-p", "single:0")


def test_a_shared_pipedream_profile_read_in_place(shared_graphs, capsys, monkeypatch):
    g = shared_graphs / "pipedream" / "resnet18.txt"
    _refused(capsys, monkeypatch, "optimize", g, "-c", "k80x2", "-m", "random", "--budget", "3", "--grouping", "module")


def test_module_paths_given_in_a_native_file_still_group(tmp_path):
    """The refusal is about what a source records, not about native files: a graph whose module
    paths were written on purpose groups by them."""
    from placer.grouping import make_grouping
    from placer.grouping.modules import no_module_paths
    from placer.zoo.synthetic import layered_training_graph

    g = layered_training_graph(6, seed=0)
    assert no_module_paths(g) == "records no module paths"
    h = g.replace(modules=[f"block.{i % 2}.fc" for i in range(g.n_ops)], meta={})
    assert no_module_paths(h) is None and make_grouping(h, "module:1").n_groups == 2
