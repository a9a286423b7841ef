"""The one place where the command line turns failures into exit statuses.

:func:`run_guarded` runs the typer app and answers every way a command can end badly with one
line on stderr and a fixed status, never a traceback:

* bad input (:class:`~placer.errors.InputError`, raised by every loader, validator and option
  callback) and usage errors (unknown command or option, a missing argument): status 2;
* an output that cannot be written (an ``OSError`` naming a file): status 2;
* Ctrl-C: status 130, "interrupted". A second Ctrl-C stops at once, whatever the first one was
  waiting for (killing the workers of any :class:`placer.procpool.WorkerPool` first; the first one
  stops them as it unwinds, and they never see SIGINT themselves). A Ctrl-C that lands inside a C callback (numba writing its cache, for one) cannot
  propagate from there: Python reports it as "unraisable" and the library then fails with an error of
  its own. Both are recognised as the interrupt's consequence: the unraisable report is silenced and
  any failure after a Ctrl-C ends as an interrupt.

Anything else is a bug in placer and keeps its traceback. Typer vendors click in recent releases and
re-exports it in older ones, so usage errors are recognised by what typer exposes, with click's own
classes added when click is installed.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable

import typer

from placer.errors import InputError, printable

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
INTERRUPTED = "interrupted (Ctrl-C); stopped before finishing, no partial output file left"
_kept: list[str] = []  # what the running command keeps on purpose when interrupted (keep_on_interrupt)


def keep_on_interrupt(note: str) -> None:
    """Declare what the running command leaves behind on purpose if Ctrl-C stops it (a resumable
    cache of finished runs, a log written line by line): the "interrupted" line then says so
    instead of claiming that no file is left."""
    if note not in _kept:
        _kept.append(note)


def interrupted_message() -> str:
    """The one line printed on Ctrl-C: :data:`INTERRUPTED`, or what the command keeps."""
    if not _kept:
        return INTERRUPTED
    return "interrupted (Ctrl-C); stopped before finishing, no partial output file left; kept: " + "; ".join(_kept)


class Interrupted(BaseException):
    """Ctrl-C, raised by our SIGINT handler. Not a KeyboardInterrupt, so that nothing between here
    and the signal (click, a method's loop) turns it into something else or swallows it."""


def _classes(*names: str) -> tuple[type, ...]:
    found = []
    for mod_name in ("typer", "typer.exceptions", "click.exceptions"):
        try:
            mod = __import__(mod_name, fromlist=["_"])
        except ImportError:
            continue
        for n in names:
            c = getattr(mod, n, None)
            if isinstance(c, type) and c not in found:
                found.append(c)
    return tuple(found)


_USAGE = _classes("TyperException", "ClickException")  # typer's vendored click, or click itself
_EXIT = _classes("Exit")
_ABORT = _classes("Abort")


def error_line(message: str) -> None:
    """Print ``error: message`` as exactly one line on stderr."""
    text = "error: " + printable(" ".join(str(message).split()), limit=2000)
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _usage_message(e: Exception) -> str:
    msg = (e.format_message() if hasattr(e, "format_message") else str(e)).strip().rstrip(".")
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", None) or "placer"
    return f"{path}: {msg}; see `{path} --help`"


def _is_help_on_no_args(e: Exception) -> bool:
    return type(e).__name__ == "NoArgsIsHelpError"


class _SigintGuard:
    """SIGINT raises :class:`Interrupted` the first time and exits at once the second."""

    def __init__(self):
        self.count, self.previous, self.installed = 0, None, False

    def handler(self, signum, frame):
        self.count += 1
        if self.count >= 2:
            pools = sys.modules.get("placer.procpool")  # loaded only where a command started workers
            if pools is not None:
                pools.kill_all()  # no time to unwind: the workers go with the process
            os.write(2, b"error: interrupted twice; stopped\n")
            os._exit(EXIT_INTERRUPTED)
        raise Interrupted()

    def unraisable(self, info):
        """Swallow our own :class:`Interrupted` when Python cannot raise it (inside a C callback)."""
        if isinstance(info.exc_value, Interrupted) or info.exc_type is Interrupted:
            return
        self.previous_hook(info)

    def __enter__(self):
        try:
            self.previous = signal.signal(signal.SIGINT, self.handler)
            self.installed = True
        except ValueError:  # not the main thread: leave signals alone
            pass
        self.previous_hook, sys.unraisablehook = sys.unraisablehook, self.unraisable
        return self

    def __exit__(self, *exc):
        if self.installed:
            signal.signal(signal.SIGINT, self.previous)
        sys.unraisablehook = self.previous_hook
        return False


def leave_now(code: int) -> None:
    """End the process with ``code`` after an interrupt, without the interpreter's teardown. The
    interrupt may have landed inside a native library (numba compiling or writing its cache, torch,
    OR-Tools) and left it mid-call; finalising its modules at exit can then crash: a fresh-checkout
    CI run once ended a Ctrl-C'd ``placer optimize`` with SIGSEGV (status -11) after the
    "interrupted" line was printed. By then every output file was removed or never written (atomic
    writes clean up as the interrupt unwinds), so nothing is left that teardown would do."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    pools = sys.modules.get("placer.procpool")
    if pools is not None:  # workers were stopped as the interrupt unwound; what is left goes now
        pools.kill_all()
    os._exit(code)


def run_guarded(app: Any, args: list[str] | None = None, setup: Callable[[], None] | None = None,
                leave_on_interrupt: bool = False) -> int:
    """Run ``setup`` (registering sub-commands) and then ``app`` on ``args`` (default: sys.argv[1:]);
    return the exit status, having printed at most one error line. With ``leave_on_interrupt`` (a
    process's own command line) a Ctrl-C ends the process inside the handler that caught it, by
    :func:`leave_now`: leaving the handler would release the traceback, and with it the frames of
    whatever native call the interrupt cut short, whose objects may be half built. The guard once
    left first and exited after, and a fresh-checkout CI run under load still ended an interrupted
    ``placer optimize`` with SIGSEGV after the "interrupted" line."""
    guard = _SigintGuard()
    _kept.clear()

    def interrupted() -> int:
        error_line(interrupted_message())
        if leave_on_interrupt:
            leave_now(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED

    try:
        with guard:
            if setup is not None:
                setup()
            rv = app(args=args, prog_name="placer", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except InputError as e:
        from placer.cli.advice import line

        error_line(line(e))  # the library's facts, the command line's option and advice
        return EXIT_BAD_INPUT
    except (Interrupted, KeyboardInterrupt):
        return interrupted()
    except _EXIT as e:
        code = getattr(e, "exit_code", 0)
        if code == EXIT_INTERRUPTED:  # typer's own translation of a KeyboardInterrupt
            return interrupted()
        return code
    except _ABORT:
        if guard.count:
            return interrupted()
        error_line("aborted")
        return 1
    except _USAGE as e:
        if _is_help_on_no_args(e):
            sys.stdout.write(e.format_message() + "\n")
            return 0
        error_line(_usage_message(e))
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `placer ... | head`: the reader left; say nothing
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141
    except OSError as e:
        if e.filename is None:
            raise
        error_line(f"{e.filename}: {e.strerror or e}; check the path, its permissions and free space")
        return EXIT_BAD_INPUT
    except Exception:
        if guard.count:  # a library failing because the interrupt hit it mid-callback
            return interrupted()
        raise


class user_code:
    """``with user_code(where, what):`` around code the user gave (a model factory, a loss): its
    ``sys.exit()``, ``exit()`` or a ``KeyboardInterrupt`` it raises itself ends the command as bad
    input (one line, status 2) instead of as a silent success, another status or a fake Ctrl-C. A
    real Ctrl-C is :class:`Interrupted` under :func:`run_guarded` and passes through."""

    def __init__(self, where: str, what: str = "factory"):
        self.where, self.what = where, what

    def __enter__(self):
        return self

    def __exit__(self, typ, e, tb):
        if typ is None:
            return False
        if issubclass(typ, SystemExit):
            code = e.code
            raise InputError(self.where, self.what, f"called sys.exit({'' if code is None else repr(code)[:40]}) "
                             "instead of returning", "return a model from the factory; do not exit") from None
        if issubclass(typ, KeyboardInterrupt):  # under our guard Ctrl-C raises Interrupted: this one is the code's own
            if isinstance(getattr(signal.getsignal(signal.SIGINT), "__self__", None), _SigintGuard):
                raise InputError(self.where, self.what, "raised KeyboardInterrupt itself (no Ctrl-C was pressed)",
                                 "fix the code so that it returns") from None
        return False
