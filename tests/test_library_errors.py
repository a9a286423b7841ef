"""Library errors name the parameter and a fix that does not assume the command line; the CLI puts
its option's name in front where it parses the value (tests/test_bad_input.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.methods import Budget, get_method, run_method
from placer.objectives import make_objective

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_method_contract import contract_problem  # noqa: E402


@pytest.mark.parametrize("call, where", [
    (lambda: Budget(0), "budget: placements=0"),
    (lambda: Budget(5, float("nan")), "budget: seconds=nan"),
    (lambda: get_method("no-such-method"), "method: 'no-such-method'"),
    (lambda: run_method("random", contract_problem(), Budget(3), -1), "seed: -1"),
    (lambda: make_objective("bogus"), "objective: 'bogus'"),
    (lambda: make_objective("latency:colour=red"), "objective: 'latency:colour=red'"),
])
def test_library_errors_name_the_parameter(call, where):
    with pytest.raises(InputError) as e:
        call()
    assert str(e.value).startswith(where) and "--" not in str(e.value) and "placer " not in str(e.value)


def _facts_and_cli_line(call):
    """The library's error for ``call`` and the line the command line prints for it."""
    from placer.cli.advice import line

    with pytest.raises(InputError) as e:
        call()
    return e.value, line(e.value)


@pytest.mark.parametrize("call, library, cli", [
    (lambda: __import__("placer.cluster").cluster.preset("k80x3"), "cluster: preset 'k80x3'",
     "--cluster: preset 'k80x3'"),
    (lambda: __import__("placer.resolve").resolve.resolve_cluster("k80x3"), "cluster: preset 'k80x3'",
     "--cluster: preset 'k80x3'"),
    (lambda: __import__("placer.runtime.detect").runtime.detect.parse_here("here:"), "cluster: 'here:'",
     "--cluster: 'here:': is not here or here:cpus=N; e.g. --cluster here:cpus=2"),
    (lambda: __import__("placer.sim").sim.SimParams.preset("fast"), "sim: 'fast'", "--sim: 'fast'"),
    (lambda: __import__("placer.resolve").resolve.check_method("randon"), "method: method 'randon'",
     "--method: method 'randon'"),
    (lambda: __import__("placer.runtime.devices").runtime.devices.parse_map("gpu0", contract_problem().cluster),
     "map: 'gpu0'", "--map: 'gpu0': is not CLUSTER_DEVICE=REAL_DEVICE; e.g. --map gpu:0=cuda:0,cpu:0=cpu"),
])
def test_library_states_facts_and_the_cli_names_its_option(call, library, cli):
    """Issue 67: the library names its parameter; the command line's guard puts the option there."""
    e, said = _facts_and_cli_line(call)
    assert str(e).startswith(library) and "--" not in str(e) and "placer " not in str(e) and e.kind
    assert said.startswith(cli) and said.partition(";")[0].endswith(str(e).partition(";")[0].partition(": ")[2])


def test_module_map_errors_give_the_cli_advice_only_on_the_command_line():
    """A placement of a graph without module paths, or one that splits a module: the library says
    what is wrong; `placer export` / `placer run --apply` add the command to run."""
    import numpy as np

    from placer.cli.advice import module_split
    from placer.cluster import preset
    from placer.export import device_map, unit_devices
    from placer.grouping.modules import module_units
    from placer.problem import Problem

    P = contract_problem()
    e, said = _facts_and_cli_line(lambda: device_map(P, np.zeros(P.n_ops, int), ["cuda:0", "cuda:1", "cpu"], 1))
    assert e.kind == "no-module-map" and "placer " not in str(e) and "(placer optimize -o)" in said
    torch = pytest.importorskip("torch")
    from placer.frontends.torch import capture_training_step

    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    g = capture_training_step(net, [torch.zeros(2, 4)], name="mlp")
    P = Problem(g, preset("k80x2"))
    mu = module_units(P, 1)
    split = np.flatnonzero((mu.op_unit == mu.names.index("0")) & ~mu.glue & (g.colocation < 0))
    p = np.zeros(P.n_ops, dtype=np.int64)
    p[split[-1]] = 1  # one op of module '0' on gpu:1
    with pytest.raises(InputError) as got:
        unit_devices(P, p, 1)
    assert got.value.kind == "module-split" and "--" not in str(got.value) and "placer " not in str(got.value)
    said = str(module_split(got.value, "g.json", 1))
    assert said.partition(";")[0] == str(got.value).partition(";")[0]
    assert "`placer optimize g.json --grouping module:1`" in said


def _policy_state_of_another_method():
    from placer.rl.policy import PlacetoPolicy

    return PlacetoPolicy.from_state({"format": "not-placeto"}, where="p.pt")


@pytest.mark.parametrize("call, command", [
    (_policy_state_of_another_method, "`placer policy train -m placeto --out`"),
    (lambda: __import__("placer.build").build.build({"kind": "pickle"}, "cpu"), "`placer capture`"),
    (lambda: __import__("placer.apply_map").apply_map.read_device_map({}), "`placer export --format device-map`"),
])
def test_policy_recipe_and_map_refusals_state_facts_and_the_cli_names_the_command(call, command):
    """A policy state, a recipe or a device map that is not one: the library says what it is and what
    to give; the command line names the command that makes one."""
    e, said = _facts_and_cli_line(call)
    assert "placer " not in str(e) and "--" not in str(e) and e.kind
    assert command in said and said.partition(";")[0] == str(e).partition(";")[0]


def _spoil(state: dict, how: str):
    """A Placeto policy state spoiled one way (each a different refusal of ``PlacetoPolicy.from_state``)."""
    import copy

    import torch

    s = copy.deepcopy(state)
    first = next(iter(s["model"]))
    if how == "no model":
        del s["model"]
    elif how == "env_config":
        s["env_config"] = {**s["env_config"], "sweeps": 0}
    elif how == "embed_dim":
        s["policy_config"] = {**s["policy_config"], "embed_dim": 0}
    elif how == "pool":
        s["policy_config"] = {**s["policy_config"], "pool": "max"}
    elif how == "NaN":
        s["model"][first] = torch.full_like(s["model"][first], float("nan"))
    elif how == "missing weight":
        del s["model"][first]
    elif how == "not a tensor":
        s["model"][first] = [1.0]
    return s


@pytest.mark.parametrize("how", ["no model", "env_config", "embed_dim", "pool", "NaN", "missing weight", "not a tensor"])
def test_every_placeto_policy_refusal_carries_its_kind(how):
    """Each refusal of ``PlacetoPolicy.from_state`` (the state's keys, its settings, its weights) is of
    kind policy:placeto where it is raised: the library's words name no command, the command line's
    name the one that writes a policy."""
    pytest.importorskip("torch_geometric")
    from placer.methods import METHODS
    from placer.methods.learned.protocol import LEARNED
    from placer.rl.policy import PlacetoPolicy

    P = contract_problem()
    m = LEARNED["placeto"]
    state = m.policy_state(m.train([P], METHODS["placeto"].make_config({}), 0, placements=2))
    assert isinstance(PlacetoPolicy.from_state(state, where="p.pt"), PlacetoPolicy)
    e, said = _facts_and_cli_line(lambda: PlacetoPolicy.from_state(_spoil(state, how), where="p.pt"))
    assert e.kind == "policy:placeto" and str(e).startswith("p.pt: ") and "placer " not in str(e), str(e)
    assert "`placer policy train -m placeto --out`" in said and said.partition(";")[0] == str(e).partition(";")[0]


def _trust_cases():
    """``(call(recipe, tmp_path), kind(tmp_path), what the command line's line holds)`` for each kind of
    refusal of :mod:`placer.runtime.trust`; ``recipe`` is a factory recipe naming ``tmp_path/m.py:build``."""
    from placer.runtime import trust

    return [
        (lambda r, d: trust.check_code(r, "g.json", []), lambda d: f"trust:code:{d}",
         "if you trust this graph file, add --allow-code {d}"),
        (lambda r, d: trust.check_code({**r, "loss": "subprocess:getoutput"}, "g.json", [d], any_code=True),
         lambda d: "trust:installation", "(`placer capture FILE.py:FUNCTION`)"),
        (lambda r, d: trust.check_code(r, "g.json", [""]), lambda d: "allowed", "--allow-code: '': is an empty path; "
         "e.g. --allow-code . for the working folder"),
        (lambda r, d: trust.check_allowed([str(d / "nowhere")]), lambda d: "allowed", "--allow-code: '{d}/nowhere'"),
        (lambda r, d: trust.check_recipe({**r, "kind": "pickle"}, "g.json"), lambda d: "recipe", "`placer capture`"),
        (lambda r, d: trust.check_recipe({**r, "target": 7}, "g.json"), lambda d: "recipe-data", "`placer capture`"),
        (lambda r, d: trust.check_code({**r, "target": "build"}, "g.json", [d]), lambda d: "recipe-data",
         "`placer capture`"),
        (lambda r, d: trust.check_recipe({**r, "seed": -1}, "g.json"), lambda d: "recipe-seed",
         "`placer capture --seed N`"),
        (lambda r, d: trust.check_recipe({"kind": "hf", "name": "gpt2", "batch": 2**20, "seq": 2**20}, "g.json"),
         lambda d: "recipe-tokens", "a smaller --batch or --seq"),
        (lambda r, d: trust.check_inputs([{"shape": [2**20, 2**20]}], "g.json"), lambda d: "input-size",
         "use a smaller --batch or input shape"),
    ]


@pytest.mark.parametrize("case", range(len(_trust_cases())))
def test_trust_refusals_state_facts_and_the_cli_names_the_flag(tmp_path, case):
    """Issue 67: the trust gate says what it refuses and why, naming no flag or command (a library
    caller passes ``allowed`` / ``any_code``, not --allow-code); the command line's line names the
    flag or command that fixes it, and its facts are the library's. That the gate refuses the same
    things is tests/test_trust.py's (every hint followed through `placer run`)."""
    call, kind, cli = _trust_cases()[case]
    d = tmp_path.resolve()
    (d / "m.py").write_text("def build():\n    return 1\n")
    recipe = {"kind": "factory", "target": f"{d / 'm.py'}:build", "kwargs": {}, "inputs": [], "seed": 0}
    e, said = _facts_and_cli_line(lambda: call(recipe, d))
    assert e.kind == kind(d) and "--" not in str(e) and "`placer" not in str(e) and "placer run" not in str(e), str(e)
    assert cli.format(d=d) in said, said
    assert said.partition(";")[0].partition(": ")[2] == str(e).partition(";")[0].partition(": ")[2]
    if e.kind == "trust:installation":  # no flag lifts it, and the command line names none
        assert "--allow" not in said
