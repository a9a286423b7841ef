"""The Python API's rebuild of a graph's recipe (``placer.runtime.run_placement``, ``rebuild``) goes
through the trust gate's outright refusals: code in Python's installation never runs, whatever the
caller trusts (issue 60)."""

import numpy as np
import pytest

pytest.importorskip("torch")

from placer.cluster import preset  # noqa: E402
from placer.errors import InputError  # noqa: E402
from placer.graph import OpGraph  # noqa: E402


def _graph_with_recipe(recipe: dict) -> OpGraph:
    from placer.zoo.synthetic import layered_training_graph  # a small graph; only its recipe matters here

    g = layered_training_graph(12, seed=0)
    return g.replace(meta={**g.meta, "recipe": recipe, "source": "torch"})


@pytest.mark.parametrize("target", ["subprocess:getoutput", "os:system", "builtins:exec", "shutil:rmtree"])
def test_run_placement_refuses_installation_code(tmp_path, target):
    from placer.runtime import run_placement
    from placer.runtime.measure import rebuild

    marker = tmp_path / "ran"
    recipe = {"kind": "factory", "target": target, "kwargs": {"cmd": f"touch {marker}"}, "inputs": [], "seed": 0}
    g = _graph_with_recipe(recipe)
    with pytest.raises(InputError, match="installation|standard library|never"):
        rebuild(g)
    with pytest.raises(InputError):
        run_placement(g, preset("cpu"), np.zeros(g.n_ops, dtype=np.int64), ["cpu"], steps=1, warmup=1)
    assert not marker.exists()
