"""`placer ...`: the command line, assembled. Thin: every command parses, calls the library, prints.

The commands live one group to a module (:mod:`placer.cli.inspect`: info, methods;
:mod:`placer.cli.convert`; :mod:`placer.cli.simulate`: simulate, optimize; :mod:`placer.cli.compare`),
what they share in :mod:`placer.cli.common` and :mod:`placer.cli.options`; the sub-command groups
of other layers (zoo, bench, policy, ...) register themselves when :func:`_load_plugins` imports them.
Bad input anywhere raises :class:`placer.errors.InputError`; :func:`main` prints its one line and
exits with status 2, writing nothing.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from placer.cli import compare, convert, inspect, simulate
from placer.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find fast device placements for neural-network training graphs.")


def _version(value: bool) -> None:
    if value:
        from placer import __version__

        sys.stdout.write(f"placer {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", help="print the version and exit", callback=_version,
                                     is_eager=True),
        max_input_size: Optional[str] = typer.Option(
            None, "--max-input-size", metavar="SIZE", envvar="PLACER_MAX_INPUT_BYTES", show_envvar=True,
            help="refuse input files (or what a .gz decompresses to) larger than this, e.g. 2GiB; default 256MiB")):
    """Find fast device placements for neural-network training graphs."""
    from placer.bounds import physical_memory
    from placer.io import parse_size, set_max_input_bytes

    source = ctx.get_parameter_source("max_input_size")
    where = "$PLACER_MAX_INPUT_BYTES" if getattr(source, "name", "") == "ENVIRONMENT" else "--max-input-size"
    limit = parse_size(max_input_size, where) if max_input_size else None
    ram = physical_memory()
    if limit is not None and ram and limit > ram:
        from placer.io import human_size

        raise InputError(where, repr(max_input_size), f"is more than this machine's memory ({human_size(ram)}), "
                         "the most placer allows (an input is held in memory whole)", "e.g. --max-input-size 2GiB")
    set_max_input_bytes(limit)


for _command in (inspect.info, convert.convert, simulate.simulate, simulate.optimize, inspect.methods,
                 compare.compare):  # the order `placer --help` lists them in
    app.command()(_command)


def _load_plugins() -> None:
    """Sub-command groups of other layers (zoo, bench, rl) register themselves on ``app``."""
    import importlib

    for mod in ("placer.cli.zoo", "placer.cli.bench", "placer.cli.learn", "placer.cli.capture", "placer.cli.run",
                "placer.cli.pretrain", "placer.cli.export", "placer.cli.policy", "placer.cli.cluster",
                "placer.cli.bound"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def main(args: Optional[list[str]] = None) -> None:
    """The ``placer`` entry point: every failure ends as one stderr line and a status (see cli/guard.py).
    From the command line (``args`` None, stdout not captured), native libraries' stdout goes to
    stderr (see :func:`_native_stdout_to_stderr`)."""
    from placer.cli.guard import run_guarded

    if args is None and sys.stdout is sys.__stdout__:  # a process's own command line (not a test's capture)
        _native_stdout_to_stderr()
    sys.exit(run_guarded(app, args, setup=_load_plugins, leave_on_interrupt=args is None))


def _native_stdout_to_stderr() -> None:
    """Keep stdout for placer's own output (tables, ``--json``): file descriptor 1 becomes a copy of
    stderr, so what compiled libraries print there goes to stderr (METIS prints "Cannot bisect a
    graph with 0 vertices!" on C stdout when a k-way partition of a small graph fails to bisect a
    part, and it used to land before the JSON of ``placer optimize --json``), while Python's
    ``sys.stdout`` writes to a duplicate of the original descriptor. Child processes (bench workers)
    inherit the swapped descriptor; they print nothing to stdout."""
    import os

    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no usable descriptors (an embedding host): leave them alone
        return
    old = sys.stdout
    sys.stdout = os.fdopen(real, "w", buffering=1 if os.isatty(real) else -1,
                           encoding=getattr(old, "encoding", None) or "utf-8", errors=getattr(old, "errors", None))
