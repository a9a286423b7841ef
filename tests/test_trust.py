"""The trust gate (:mod:`placer.runtime.trust`): a graph file's recipe never makes ``placer run`` call
code in Python's installation (standard library, frozen and built-in modules, site-packages, placer
itself), whatever the flags; a refusal's advice names only the folder of the user's own file; and
following every hint the gate prints, for hostile targets, runs nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

MODEL = '''
import torch
from torch import nn


def build():
    return nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3))
'''
HINT = re.compile(r"--allow-code (\S+)")


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    d = tmp_path_factory.mktemp("trust")
    (d / "net.py").write_text(MODEL)
    from placer.frontends.native import save_graph
    from placer.build import capture_recipe

    recipe = {"kind": "factory", "target": f"{d / 'net.py'}:build", "kwargs": {},
              "inputs": [{"shape": [2, 6], "dtype": "float32"}], "loss": "mean", "optimizer": "sgd-momentum", "seed": 1}
    save_graph(capture_recipe(recipe, name="tiny").graph, d / "g.json")
    return d


def _graph(d: Path, out: Path, **changes) -> Path:
    doc = json.loads((d / "g.json").read_text())
    doc["meta"]["recipe"] = {**doc["meta"]["recipe"], **changes}
    out.write_text(json.dumps(doc))
    return out


def _base(g):
    return ["run", g, "--cluster", "k80x2", "--placement", "single:0", "--steps", "1", "--warmup", "1"]


def follow_hints(capsys, monkeypatch, base, flags=()):
    """Run, then rerun with every flag the error line suggests (``--allow-code DIR``, ``--allow-any-code``)
    until it suggests nothing new; ``[(status, stderr, flags used)]`` of every run."""
    from placer.runtime.trust import installation_part

    flags, runs = list(map(str, flags)), []
    for _ in range(8):
        code, _, se = run_cli(capsys, monkeypatch, *base, *flags)
        runs.append((code, se, list(flags)))
        new = [["--allow-code", h.rstrip(";,.")] for h in HINT.findall(se)]
        new += [["--allow-any-code"]] if "--allow-any-code" in se else []
        new = [h for h in new if not any(flags[i:i + len(h)] == h for i in range(len(flags)))]
        for h in new:
            if h[0] == "--allow-code":  # advice names a folder of the user's, never Python's own
                assert installation_part(Path(h[1]).resolve()) is None, se
        if not new:
            return runs
        for h in new:
            flags += h
    raise AssertionError(f"hints never settle: {runs}")


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """Files that show code ran: ``ran`` (created), ``victim/`` (deleted); a script and a module that
    create ``ran`` when run or imported; a torch.hub repo whose hubconf creates it; a project folder
    of the user's with a file that re-exports library functions, and symlinks into the stdlib."""
    ran, victim = tmp_path / "ran", tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    touch = f"open({str(ran)!r}, 'w').write('ran')\n"
    (tmp_path / "script.py").write_text(touch)
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "evil_mod.py").write_text(touch)
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "hubconf.py").write_text(touch + "def x():\n    return None\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "utils.py").write_text("import os\nfrom subprocess import getoutput\nfrom os import system as sh\n"
                                   "system = os.system\n\n\ndef helper():\n    return 1\n")
    (proj / "sp.py").symlink_to(subprocess.__file__)
    (proj / "lib").symlink_to(Path(subprocess.__file__).parent, target_is_directory=True)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(proj))
    monkeypatch.chdir(tmp_path)
    return tmp_path, ran, victim, proj


def _hostile_cases(tmp, ran, victim, proj):
    sh = {"cmd": f"touch {ran}"}
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    numpy_dir = Path(__import__("numpy").__file__).parent
    return [
        ("subprocess:getoutput", sh),
        ("subprocess:run", {"args": ["touch", str(ran)]}),
        ("os:system", {"command": f"touch {ran}"}),
        ("os:popen", sh),
        ("builtins:exec", {"source": f"open({str(ran)!r}, 'w')"}),
        ("builtins:open", {"file": str(ran), "mode": "w"}),
        ("_io:open", {"file": str(ran), "mode": "w"}),
        ("io:open", {"file": str(ran), "mode": "w"}),
        ("importlib:import_module", {"name": "evil_mod"}),
        ("shutil:rmtree", {"path": str(victim)}),
        ("pickle:loads", {"data": "cos\nsystem\n(S'true'\ntR."}),
        ("runpy:run_path", {"path_name": str(tmp / "script.py")}),
        ("ctypes:CDLL", {"name": "libc.so.6"}),
        ("ctypes.util:find_library", {"name": "c"}),
        ("zipimport:zipimporter", {"path": str(tmp / "x.zip")}),
        ("numpy:savetxt", {"fname": str(ran), "X": [1.0]}),
        ("numpy.lib.npyio:savetxt", {"fname": str(ran), "X": [1.0]}),
        ("torch:save", {"obj": 1, "f": str(ran)}),
        ("torch.hub:load", {"repo_or_dir": str(tmp / "hub"), "model": "x", "source": "local"}),
        ("placer.cli:main", {"args": ["--help"]}),
        (f"{subprocess.__file__}:getoutput", sh),
        (f"/usr/lib/python{py}/subprocess.py:getoutput", sh),
        (f"/usr/lib/python3/dist-packages/subprocess.py:getoutput", sh),
        (f"{os.path.relpath(subprocess.__file__, tmp)}:getoutput", sh),
        (f"{numpy_dir / 'lib' / 'npyio.py'}:savetxt", {"fname": str(ran), "X": [1.0]}),
        (f"{proj / 'sp.py'}:getoutput", sh),  # a symlink in the user's folder to the stdlib file
        ("proj/sp.py:getoutput", sh),
        (f"{proj / 'lib' / 'subprocess.py'}:getoutput", sh),  # a symlinked folder
        ("proj/lib/../lib/subprocess.py:getoutput", sh),
        (f"{proj / 'utils.py'}:getoutput", sh),  # the user's file re-exports a library function
        (f"{proj / 'utils.py'}:system", {"command": f"touch {ran}"}),
        (f"{proj / 'utils.py'}:sh", {"command": f"touch {ran}"}),
        ("utils:getoutput", sh),  # ... named as a module on sys.path
        ("sp:getoutput", sh),  # a module of the user's folder that is a symlink to the stdlib
    ]


def test_following_every_hint_for_hostile_targets_runs_nothing(captured, hostile, capsys, monkeypatch):
    """Each hostile target as the factory (with kwargs that would leave a marker, delete a folder or
    run a script) and as the loss function, from several starting flags, every hint followed: every
    run is one line, status 2, and nothing ran. The factory's refusal names no flag at all; as a
    loss, the only hint is the (user's own) factory's folder, and the end is the loss's refusal."""
    tmp, ran, victim, proj = hostile
    # from no flags, and from the most any user could give (each refusal below holds for every subset)
    starts = ([], ["--allow-code", proj, "--allow-code", "/", "--allow-any-code"])
    for k, (target, kwargs) in enumerate(_hostile_cases(tmp, ran, victim, proj)):
        for what, changes in (("factory", {"target": target, "kwargs": kwargs}), ("loss function", {"loss": target})):
            g = _graph(captured, tmp / f"g{k}.json", **changes)
            for start in starts:
                runs = follow_hints(capsys, monkeypatch, _base(g), start)
                for code, se, flags in runs:
                    where = f"{target} ({what}) with {flags}: {se}"
                    assert code == 2 and len(se.strip().splitlines()) == 1 and se.startswith("error: "), where
                    assert "Traceback" not in se and not ran.exists() and (victim / "keep").exists(), where
                    if what == "factory":
                        assert "recipe factory" in se and "--allow" not in se, where
                last = runs[-1][1]
                assert f"recipe {what} " in last and "--allow" not in last, f"{target} ({what}): {runs}"


def test_following_the_hint_for_the_users_own_file_does_run_it(captured, tmp_path, capsys, monkeypatch):
    """The harness above is not vacuous: for a file of the user's, the one hint is its folder, and
    following it runs the file (here it leaves a marker, then builds the same model)."""
    own = tmp_path / "own"
    own.mkdir()
    ran = tmp_path / "ran"
    (own / "mine.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n" + MODEL)
    g = _graph(captured, tmp_path / "g.json", target=f"{own / 'mine.py'}:build")
    runs = follow_hints(capsys, monkeypatch, _base(g))
    assert [c for c, _, _ in runs] == [2, 0], runs
    assert runs[0][1].rstrip().endswith(f"--allow-code {own}") and runs[-1][2] == ["--allow-code", str(own)]
    assert ran.exists()
    # a package of the user's on sys.path, named as MODULE:FUNCTION: the hint is the package's folder
    pkg = tmp_path / "src" / "mymodels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "net.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    g = _graph(captured, tmp_path / "g2.json", target="mymodels.net:build")
    runs = follow_hints(capsys, monkeypatch, _base(g))
    assert [c for c, _, _ in runs] == [2, 0] and runs[-1][2] == ["--allow-code", str(pkg)], runs


@pytest.mark.parametrize("target, needle", [
    ("net\x00.py:build", "control character"),
    ("/tmp/a\x00b/net.py:build", "control character"),
    ("net.py:bu\x1b[2Jild", "control character"),
    ("x" * 5000 + ".py:build", "the most placer allows"),
    ("x" * 300 + ".py:build", "does not exist"),  # a name longer than the OS allows
    ("net.py:", "is not FILE.py:FUNCTION"),
    ("net.py:class", "is not FILE.py:FUNCTION"),
    ("no_such_module_xyz:build", "cannot be found"),
    ("missing.py:build", "does not exist"),
    ("notes.txt:build", "not a Python source file"),
])
def test_a_malformed_target_is_one_line(captured, tmp_path, capsys, monkeypatch, target, needle):
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    g = _graph(captured, tmp_path / "g.json", target=target)
    code, so, se = run_cli(capsys, monkeypatch, *_base(g), "--allow-any-code")
    assert code == 2 and len(se.strip().splitlines()) == 1 and needle in se and "Traceback" not in se, se
    assert "\x00" not in se and "\x1b" not in se


@pytest.mark.parametrize("folder, needle", [
    ("", "is an empty path"),
    ("   ", "is an empty path"),
    ("a\x00b", "control character"),
    ("/nonexistent-folder", "is not a folder"),
    (os.path.dirname(os.__file__), "standard library"),
    (os.path.dirname(os.path.dirname(torch.__file__)), "site-packages"),
])
def test_allow_code_folders_are_checked_before_any_work(captured, capsys, monkeypatch, folder, needle):
    code, so, se = run_cli(capsys, monkeypatch, *_base(captured / "g.json"), "--allow-code", folder)
    assert code == 2 and len(se.strip().splitlines()) == 1 and needle in se and "Traceback" not in se, se


@pytest.mark.parametrize("source, ok", [
    ("def build():\n    return 1\n", True),
    ("class build:\n    pass\n", True),
    ("import functools\n\n\n@functools.lru_cache\ndef build():\n    return 1\n", True),
    ("try:\n    import torch\nexcept ImportError:\n    torch = None\nif torch:\n    def build():\n        return 1\n", True),
    ("def build():\n    build = 2\n    return build\n", True),  # a local of the same name binds nothing at module level
    ("from subprocess import getoutput as build\n", False),
    ("import os\nbuild = os.system\n", False),
    ("def build():\n    return 1\nimport os\nbuild = os.system\n", False),
    ("def build():\n    return 1\nfrom os import *\n", False),
    ("from os import *\ndef build():\n    return 1\n", True),
    ("import os\ndef build():\n    return 1\ndef f():\n    global build\n    build = os.system\n", False),
    ("import os\nfor build in [os.system]:\n    pass\n", False),
    ("import os\nwith open(__file__) as build:\n    pass\n", False),
    ("def other():\n    return 1\n", False),
    ("def build(:\n", False),
])
def test_the_function_must_be_defined_by_its_own_file(tmp_path, source, ok):
    from placer.errors import InputError
    from placer.runtime.trust import locate

    (tmp_path / "m.py").write_text(source)
    if ok:
        assert locate(f"{tmp_path / 'm.py'}:build", "g.json")[1] == (tmp_path / "m.py").resolve()
    else:
        with pytest.raises(InputError):
            locate(f"{tmp_path / 'm.py'}:build", "g.json")


def test_installation_part_knows_pythons_folders():
    from placer.runtime.trust import installation_part

    assert installation_part(Path(subprocess.__file__).resolve()) == "Python's standard library"
    assert "site-packages" in installation_part(Path(torch.__file__).resolve())
    assert installation_part(Path("/usr/lib/python3.9/os.py")) is not None
    assert installation_part(Path("/opt/venv/lib/python3.12/site-packages/x.py")) is not None
    assert installation_part(Path("/usr/lib/python3/dist-packages/x.py")) is not None
    assert installation_part(Path("/home/me/project/models/net.py")) is None
    assert installation_part(Path("/home/me/python3.11/net.py")) is None
