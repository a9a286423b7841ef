"""Ctrl-C in a command that runs worker processes (`compare --jobs N`, `bench --jobs N`): one line,
exit status 130, no output file, and every worker gone before the command exits (placer.procpool).

Each test starts the real command in a session of its own, waits until its workers are busy (by the
CPU time they have used, never by the clock: a loaded machine only makes the wait longer), sends
SIGINT to its whole process group, as a terminal's Ctrl-C does, and then looks at what is left. The workers must be gone when the command has exited (the command
waits for them); the one other process multiprocessing starts, its resource tracker, ends on its own
once the command is gone (it reads the end of its pipe) and is waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists() or os.name != "posix", reason="needs /proc")

WAIT_S = 600  # upper bound of the waits for start-up; a healthy run takes seconds, a loaded machine minutes
EXIT_WAIT_S = 180  # and of the wait for the command to end once interrupted: seconds when it works, the
# searches' own length (hours) when it waits for its workers instead of stopping them


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), None when PID does not exist."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None = None) -> bool:
    """PID runs (a zombie is dead; ``started``: the start time it had, so that a reused PID is not it)."""
    f = _stat(pid)
    return f is not None and f[0] != "Z" and (started is None or f[19] == started)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _workers(pid: int) -> dict[int, str]:
    """The command's spawned worker processes (not multiprocessing's resource tracker): pid -> start time."""
    out = {}
    for c in _children(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
        except OSError:
            continue
        f = _stat(c)
        if b"spawn_main" in cmd and f is not None:
            out[c] = f[19]
    return out


def _cpu_seconds(pid: int) -> float:
    f = _stat(pid)
    return 0.0 if f is None else (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _group(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies left out)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            f = _stat(int(d.name))
            if f is not None and f[0] != "Z" and int(f[2]) == pgid:
                out.append(int(d.name))
    return out


def _interrupt_when_busy(args: list, cwd: Path, n_workers: int, twice: bool = False):
    """Run ``args``; once ``n_workers`` workers are busy, SIGINT the command's whole process group, as
    a terminal's Ctrl-C does (``twice``: and again at once). Returns (status, stderr). Fails when a
    worker is alive once the command has exited, or any process of its group a while later."""
    p = subprocess.Popen([str(a) for a in args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    workers: dict[int, str] = {}
    try:
        deadline = time.monotonic() + WAIT_S
        while p.poll() is None and time.monotonic() < deadline:
            workers = _workers(p.pid)
            if len(workers) >= n_workers and all(_cpu_seconds(w) > 3.0 for w in workers):
                break  # a worker's start-up (importing placer) takes about 2 CPU s: they are working now
            time.sleep(0.2)
        assert p.poll() is None and len(workers) >= n_workers, (
            "the command never had its workers busy", p.communicate() if p.poll() is not None else "still running")
        for _ in range(2 if twice else 1):
            os.killpg(p.pid, signal.SIGINT)
            time.sleep(0.05)  # not an assert: the second may land while the first is stopping the workers, or after
        _, err = p.communicate(timeout=EXIT_WAIT_S)
        return p.returncode, err
    finally:
        if p.poll() is None:  # the command did not end: take its whole group down
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
        orphans = [w for w, t in workers.items() if _alive(w, t)]  # right at exit: the command waits for them
        left = _group(p.pid)
        deadline = time.monotonic() + EXIT_WAIT_S
        while left and not orphans and time.monotonic() < deadline:  # the resource tracker leaves on its own
            time.sleep(0.2)
            left = _group(p.pid)
        for pid in set(left) | set(orphans):  # never leave a test's processes behind, whatever failed
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        assert not orphans, f"workers alive after the command exited: {orphans}"
        assert not left, f"processes of the command's group still alive after it exited: {left}"


def _assert_clean(code: int, err: str) -> None:
    assert code == 130, err
    assert len(err.splitlines()) == 1 and err.startswith("error: interrupted"), err  # "interrupted twice" too
    assert "Traceback" not in err and "leaked" not in err and "KeyboardInterrupt" not in err


@pytest.fixture()
def small_graph(tmp_path):
    from placer.frontends.native import save_graph
    from placer.zoo.synthetic import layered_training_graph

    g = tmp_path / "g.json"
    save_graph(layered_training_graph(30, seed=2, name="g"), g)
    return g


def test_ctrl_c_in_compare_with_jobs_leaves_no_worker_and_no_file(tmp_path, small_graph):
    """The issue's case: `compare --jobs 2 --html`, with searches far longer than the test waits, and
    Ctrl-C as a terminal sends it, to every process of the group (workers included: they ignore it).
    SIGINT to the command alone is the same case for the command, which stops its workers either way."""
    html = tmp_path / "out.html"
    code, err = _interrupt_when_busy(
        [sys.executable, "-m", "placer", "compare", small_graph, "-c", "k80x2", "--methods", "random,anneal,local-search",
         "--budget", "10000000", "--jobs", "2", "--html", html], tmp_path, 2)
    _assert_clean(code, err)
    assert not html.exists() and not [f for f in tmp_path.iterdir() if "out.html" in f.name]


def test_a_second_ctrl_c_kills_the_workers_on_its_way_out(tmp_path, small_graph):
    """A second Ctrl-C ends the command at once, from inside the signal handler: the workers are
    killed first and their semaphores released, so that nothing is left and nothing warns."""
    code, err = _interrupt_when_busy(
        [sys.executable, "-m", "placer", "compare", small_graph, "-c", "k80x2", "--methods", "random,anneal",
         "--budget", "10000000", "--jobs", "2"], tmp_path, 2, twice=True)
    _assert_clean(code, err)


BENCH_SCRIPT = """
import sys
if __name__ == "__main__":  # spawned workers import this file again as __mp_main__
    from placer.bench import experiments as E
    from placer.bench.spec import Experiment, Level, Method, Row

    E.EXPERIMENTS["tiny"] = Experiment(
        name="tiny", title="Tiny", paper="none", rows=(Row("g", sys.argv[1], "k80x2"),),
        methods=(Method("random", "random"),), differences=("a test",),
        budgets={"quick": Level(10_000_000, seeds=(0, 1, 2))})
    sys.argv = ["placer", "bench", "tiny", "--quick", "--jobs", "2", "--results", sys.argv[2], "--no-plots"]
    from placer.cli import main
    main()
"""


def test_ctrl_c_in_bench_with_jobs_leaves_no_worker(tmp_path, small_graph):
    script = tmp_path / "bench_tiny.py"
    script.write_text(BENCH_SCRIPT)
    results = tmp_path / "results"
    code, err = _interrupt_when_busy([sys.executable, script, small_graph, results], tmp_path, 2)
    _assert_clean(code, err)
    assert "kept: every finished run" in err  # bench keeps finished runs for resume, and says so
    assert not list((results / "tiny").glob("*.md")) and not list((results / "tiny" / "runs").glob("*.json"))


def _sigint_bits(pid: int) -> tuple[bool, bool]:
    """(SIGINT blocked, SIGINT ignored) in process ``pid``."""
    lines = dict(x.split(":", 1) for x in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in x)
    bit = 1 << (signal.SIGINT - 1)
    return bool(int(lines["SigBlk"], 16) & bit), bool(int(lines["SigIgn"], 16) & bit)


def test_workers_never_see_sigint_and_leave_with_the_pool():
    """A WorkerPool's workers start with SIGINT blocked and ignore it (a SIGINT sent to them changes
    nothing: they go on serving); leaving the block by an exception ends them all before the `with`
    statement is done, running tasks included."""
    from placer.procpool import WorkerPool

    with pytest.raises(RuntimeError, match="stop here"):
        with WorkerPool(2) as pool:
            started = [pool.submit(os.getpid) for _ in range(2)]  # a submit starts a worker while none is idle
            assert all(f.result(timeout=WAIT_S) > 0 for f in started)
            procs = pool.workers()
            assert len(procs) == 2
            deadline = time.monotonic() + WAIT_S
            while not all(_sigint_bits(p.pid)[1] for p in procs) and time.monotonic() < deadline:
                time.sleep(0.1)  # the second worker is still starting
            assert all(_sigint_bits(p.pid) == (True, True) for p in procs)
            for p in procs:
                os.kill(p.pid, signal.SIGINT)
            served = {pool.submit(os.getpid).result(timeout=WAIT_S) for _ in range(6)}
            assert served <= {p.pid for p in procs} and all(p.exitcode is None for p in procs)
            futures = [pool.submit(time.sleep, 600) for _ in range(3)]
            raise RuntimeError("stop here")
    assert all(p.exitcode is not None for p in procs) and not any(_alive(p.pid) for p in procs)
    assert all(f.cancelled() or f.exception() is not None for f in futures)
