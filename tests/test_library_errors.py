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
