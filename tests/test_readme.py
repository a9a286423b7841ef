"""The README promises two set-up commands; CI must run the test one verbatim."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def readme_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    return [l for l in lines if l.startswith("python3 -m venv .venv")]


def test_exactly_two_setup_commands_and_ci_runs_the_test_one():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("placer compare") and "pytest" in cmds[1]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert cmds[1] in ci
