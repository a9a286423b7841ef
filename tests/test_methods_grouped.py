"""`placer optimize --grouping`'s choice, made in the library (:mod:`placer.methods.grouped`): a method
with a ``grouping`` parameter takes the spec; any other is run on module units made colocation groups;
``module:auto`` resolved first, with the line saying why."""

from __future__ import annotations

import numpy as np
import pytest

from placer.errors import InputError
from placer.methods.grouped import apply_grouping, takes_grouping

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def problem():
    from placer.cluster import preset
    from placer.frontends.torch import capture_training_step
    from placer.problem import Problem

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16),
                              torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16)),
                              torch.nn.Linear(16, 3))
    g = capture_training_step(net, [torch.zeros(4, 8)], loss_fn=lambda o: (o ** 2).mean(), name="nested")
    return Problem(g, preset("k80x2"))


def test_which_methods_take_a_grouping():
    assert takes_grouping("post") and takes_grouping("placeto") and takes_grouping("ce")
    assert not takes_grouping("local-search") and not takes_grouping("random")
    with pytest.raises(InputError):
        takes_grouping("no-such-method")


def test_no_grouping_changes_nothing(problem):
    params = {"patience": 3}
    got = apply_grouping("local-search", problem, None, params)
    assert got.problem is problem and got.params == params and got.grouping is None and got.chose is None


def test_a_method_that_does_not_group_runs_on_module_units(problem):
    from placer.grouping.modules import module_problem

    params = {"patience": 3}
    got = apply_grouping("local-search", problem, "module:1", params)
    want = module_problem(problem, 1)
    assert np.array_equal(got.problem.graph.colocation, want.graph.colocation)
    assert not np.array_equal(got.problem.graph.colocation, problem.graph.colocation)
    assert got.problem.graph.meta["module_depth"] == 1 and got.params == {"patience": 3} and "grouping" not in params
    assert got.grouping == "module:1" and got.chose is None
    # module without a depth is module:2; a method that groups takes the spec itself
    assert apply_grouping("random", problem, "module").problem.graph.meta["module_depth"] == 2
    got = apply_grouping("ce", problem, "metis:3", params)
    assert got.problem is problem and got.params == {"patience": 3, "grouping": "metis:3"} and "grouping" not in params


def test_module_auto_is_resolved_and_said(problem):
    from placer.grouping.modules import auto_depth

    depth, why = auto_depth(problem)
    for method in ("local-search", "ce"):
        got = apply_grouping(method, problem, "module:auto")
        assert got.grouping == f"module:{depth}" and got.chose == why and why.startswith(f"module:auto chose depth {depth}")
    assert apply_grouping("ce", problem, "module:auto").params == {"grouping": f"module:{depth}"}
    assert apply_grouping("local-search", problem, "module:auto").problem.graph.meta["module_depth"] == depth


def test_a_graph_without_module_paths_is_refused_with_its_kind():
    from placer.cluster import preset
    from placer.problem import Problem
    from placer.zoo import BUILTIN

    P = Problem(BUILTIN["synthetic"](), preset("k80x2"))
    for spec in ("module:2", "module:auto"):
        with pytest.raises(InputError) as e:
            apply_grouping("local-search", P, spec)
        assert e.value.kind == "no-module-paths" and "--" not in str(e.value)
