"""Issue 52's command-line findings that are not one bad flag each (those are in test_bad_input.py's
corpus): names from files escaped in every table title, messages that name what the user gave,
Ctrl-C saying what a command keeps, and simulating without a writable numba cache."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import run_cli
from test_bad_input import OPS, _assert_clean_failure, _doc, put

HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\u202e[bold]x"  # sets the title, clears the screen, flips the text, rich markup


def _no_control(text: str, case: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, (case, text)


def test_hostile_names_are_escaped_in_every_table_title(capsys, monkeypatch, tmp_path):
    g = put(tmp_path, "g.json", json.dumps(_doc(name=HOSTILE, ops=OPS, edges=[["a", "b", 8]])))
    c = put(tmp_path, "c.json", json.dumps(_doc("cluster", name=HOSTILE + "-cluster", devices=[
        {"name": HOSTILE + "-gpu", "kind": "gpu", "memory_bytes": 2**34},
        {"name": "cpu:0", "kind": "cpu", "memory_bytes": 2**36}])))
    for args in (["info", g], ["info", g, "--cluster", c], ["simulate", g, "--cluster", c, "--placement", "single:0"],
                 ["compare", g, "--cluster", c, "--methods", "single-gpu,random", "--budget", "4"],
                 ["optimize", g, "--cluster", c, "-m", "random", "--budget", "4"]):
        code, out, err = run_cli(capsys, monkeypatch, *args)
        assert code == 0, (args, err)
        _no_control(out + err, args[0])
        if args[0] in ("info", "compare"):  # the title: escaped as the error lines escape, markup shown as typed
            assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\u202e[bold]x" in out, (args, out)


def test_bad_max_input_env_is_named_as_the_env_var(capsys, monkeypatch):
    monkeypatch.setenv("PLACER_MAX_INPUT_BYTES", "huge")
    code, out, err = run_cli(capsys, monkeypatch, "info", "synthetic")
    _assert_clean_failure(code, out, err, "$PLACER_MAX_INPUT_BYTES: 'huge': is not a size", "env")
    assert "--max-input-size" not in err


def test_size_limit_message_names_small_sizes_in_bytes(capsys, monkeypatch, tmp_path):
    big = put(tmp_path, "g.json", json.dumps(_doc(ops=OPS, edges=[])))
    code, out, err = run_cli(capsys, monkeypatch, "--max-input-size", "10", "info", big)
    _assert_clean_failure(code, out, err, "more than the input limit of 10 bytes", "bytes")
    assert "0 MiB" not in err


def test_ctrl_c_says_what_a_command_keeps():
    """`placer bench` keeps finished runs for resume: the "interrupted" line says so."""
    script = (
        "import os, signal, sys, typer\n"
        "from placer.cli.guard import keep_on_interrupt, run_guarded\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def work(name: str):\n"
        "    keep_on_interrupt('every finished run is kept in results/x/runs')\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    for _ in range(10**6): pass\n"
        "sys.exit(run_guarded(app, ['x']))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and "kept: every finished run is kept in results/x/runs" in r.stderr
    assert "Traceback" not in r.stderr


def test_simulating_without_a_writable_numba_cache(tmp_path):
    """Where numba can write no cache folder (a read-only install, no writable home), the kernels
    compile into a temporary folder instead of every command ending in a traceback. Simulated here by
    refusing every cache folder but the temporary one placer falls back to."""
    script = (
        "import numba.core.caching as c\n"
        "orig = c._CacheLocator.ensure_cache_path\n"
        "def refuse(self):\n"
        "    if 'placer-numba-cache-' not in self.get_cache_path():\n"
        "        raise PermissionError(13, 'Permission denied', self.get_cache_path())\n"
        "    return orig(self)\n"
        "c._CacheLocator.ensure_cache_path = refuse\n"
        "import sys\n"
        "sys.argv = ['placer', 'simulate', 'synthetic', '--placement', 'single:0', '--json']\n"
        "from placer.cli import main\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["makespan_us"] > 0
