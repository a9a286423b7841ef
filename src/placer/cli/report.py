"""``--html FILE`` of ``placer compare``, ``optimize`` and ``simulate``: the option and the glue that
hands their placements to :mod:`placer.viz.report`."""

from __future__ import annotations

import shlex
import sys

import typer

from placer.cli.options import output_file


def html_file(ctx: typer.Context, param: typer.CallbackParam, value):
    """An HTML report path: writable (checked before any work, as every output) and Plotly installed."""
    value = output_file(ctx, param, value)
    if value is not None and not ctx.resilient_parsing:
        import importlib.util

        if importlib.util.find_spec("plotly") is None:
            from placer.errors import InputError

            raise InputError("--html", "plotly", "is not installed (the report inlines Plotly's JavaScript)",
                             "pip install 'placer[plot]'")
    return value


HtmlOpt = typer.Option(None, "--html", callback=html_file, metavar="FILE",
                       help="write a self-contained HTML report (table, timelines, memory, module tree, search curves, "
                            "what changed; no network needed to view it)")


def command_line() -> str:
    """The command as typed, for the page's header."""
    return "placer " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def reference(problem, sim_params):
    """The single-GPU placement as a second placement to compare a lone one against (None when it
    does not apply)."""
    from placer.methods import Budget, run_method

    try:
        return run_method("single-gpu", problem, Budget(placements=1), 0, sim_params)
    except (ValueError, RuntimeError):
        return None


def write(path, problem, entries, **kw) -> dict:
    from placer.viz.report import write_report

    return write_report(path, problem, entries, command=command_line(), **kw)


def said(info: dict) -> str:
    from placer.io import human_size

    return f"wrote report {info['path']} ({human_size(info['bytes'])}, {info['seconds']:.2f} s)"


def for_simulate(path, problem, name: str, placement, sim, sim_params, bound: dict | None = None) -> dict:
    """The report of ``placer simulate``: the placement simulated, beside the single-GPU one."""
    from placer.viz.report import ReportEntry

    entries = [ReportEntry(name, placement, sim, row={"placements_sampled": 1, "sim_calls": 1})]
    ref = reference(problem, sim_params)
    if ref is not None:
        entries.append(ReportEntry.from_result(ref))
    return write(path, problem, entries, best=name, bound=bound)


def for_optimize(path, problem, result, sim_params, bound: dict | None = None) -> dict:
    """The report of ``placer optimize``: the method's answer and its search, beside the single-GPU placement."""
    from placer.viz.report import ReportEntry

    entries = [ReportEntry.from_result(result)]
    ref = reference(problem, sim_params)
    if ref is not None and ref.method != result.method:  # the reference is not the answer itself
        entries.append(ReportEntry.from_result(ref))
    return write(path, problem, entries, best=result.method, bound=bound)


def for_compare(path, problem, data: dict, results: dict) -> dict:
    """The report of ``placer compare``: every method that answered, in the table's order."""
    from placer.viz.report import ReportEntry

    entries = [ReportEntry.from_result(results[r["method"]], r) for r in data["rows"] if r["method"] in results]
    errors = [r for r in data["rows"] if "error" in r]
    return write(path, problem, entries, best=data.get("best"), errors=errors, bound=data.get("lower_bound"))
