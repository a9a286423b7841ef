"""Worker process pools that a Ctrl-C leaves nothing of: :class:`WorkerPool`.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: to every worker as well as
to the command. A worker that took it printed a ``KeyboardInterrupt`` traceback and carried on with
its next task, and the command, leaving at once after its one "interrupted" line
(``placer.cli.guard.leave_now``), left the workers running as orphans and the pool's semaphores
leaked (the resource tracker's warning). So:

* the workers never see SIGINT: each is started with SIGINT blocked (a signal mask is inherited
  through fork and exec, so there is no moment in a worker's life when Ctrl-C could reach it) and
  ignores it once it runs; Ctrl-C is the parent's alone;
* leaving the pool's ``with`` block by an exception (the parent's Ctrl-C, any error) terminates the
  workers, waits for every one of them to be gone and closes the pool's queues, so that the process
  may then end at once; leaving it normally waits for the work as ``ProcessPoolExecutor`` does;
* :func:`kill_all` kills the workers of every live pool at once and releases their semaphores: a
  second Ctrl-C ends the process from inside the signal handler, with no time to unwind.

Workers are spawned (never forked: a parent that has used torch or numba threads must not fork).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import weakref
from concurrent.futures import ProcessPoolExecutor

_LIVE: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()
STOP_WAIT_S = 30.0  # how long a terminated worker may take to go before it is killed


def _worker_start(initializer, initargs) -> None:
    """The first thing a worker runs: SIGINT ignored (it arrived blocked), then the pool's initializer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def _sigint_held():
    """SIGINT held back while the calling (main) thread starts workers: blocked in this thread, so that
    the processes it starts inherit the block, and its Python handler deferred, so that an interrupt
    cannot land between a worker's start and the pool recording it. A SIGINT that arrived meanwhile is
    raised again on leaving."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending SIGINT is taken here, by the recorder
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)  # None: set in C
    if seen:
        signal.raise_signal(signal.SIGINT)


class WorkerPool(ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` of ``max_workers`` spawned processes that ignore SIGINT, stopped
    (terminated and joined) when its ``with`` block is left by an exception. Use it as a context
    manager, or call :meth:`stop` / :meth:`shutdown` yourself."""

    def __init__(self, max_workers: int, initializer=None, initargs: tuple = ()):
        super().__init__(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"),
                         initializer=_worker_start, initargs=(initializer, tuple(initargs)))
        _LIVE.add(self)

    def submit(self, fn, /, *args, **kwargs):
        with _sigint_held():  # a submit may start a worker
            return super().submit(fn, *args, **kwargs)

    def workers(self) -> list:
        """The worker processes started so far (``multiprocessing.Process``)."""
        return list((getattr(self, "_processes", None) or {}).values())

    def stop(self) -> None:
        """Cancel what has not started, terminate every worker and wait until each is gone, then close
        the pool's queues and threads. Prompt whatever the workers were doing."""
        procs = self.workers()
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        self.shutdown(wait=True, cancel_futures=True)  # the pool's own thread sees the workers gone
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(STOP_WAIT_S)
                if p.exitcode is None:
                    p.kill()
                    p.join()
        multiprocessing.active_children()  # forget the finished processes (they hold the queues)
        _LIVE.discard(self)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait:
            _LIVE.discard(self)

    def __exit__(self, typ, exc, tb):
        if typ is None:
            self.shutdown(wait=True)
        else:
            self.stop()
        return False


def kill_all() -> None:
    """For a process about to end without teardown (``os._exit``): SIGKILL the workers of every live
    pool, now (no waiting: safe inside a signal handler), and unlink the named semaphores of this
    process's queues, as their finalizers would at a normal exit, so that multiprocessing's resource
    tracker finds none left to warn about. Never while another pool is to start workers: they open
    those semaphores by name."""
    for pool in list(_LIVE):
        for p in pool.workers():
            with contextlib.suppress(Exception):
                if p.pid is not None and p.exitcode is None:
                    os.kill(p.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):  # multiprocessing's registry of finalizers has no public interface
        from multiprocessing import synchronize, util

        for f in list(util._finalizer_registry.values()):
            if getattr(f, "_callback", None) is synchronize.SemLock._cleanup:
                f()
