"""What every `placer` command shares: the consoles it prints on, the inputs it loads (a problem,
the ``--sim`` settings, a ``--placement``, ``--set`` items) and how it prints numbers, names and
``--json``."""

from __future__ import annotations

import json
import sys

import numpy as np
from rich.console import Console

from placer.errors import InputError

console = Console(width=None if sys.stdout.isatty() else 150)  # piped output: don't squeeze tables to 80 columns
err_console = Console(stderr=True)


# ---------------------------------------------------------------------- output
def emit(data: dict, as_json: bool, render) -> None:
    """``data`` as JSON on stdout with ``--json``, else ``render(data)``."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1, default=_jsonable) + "\n")
    else:
        render(data)


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x).__name__)


def safe(text: object, limit: int = 300) -> str:
    """A name from a file or the command line, ready for a rich table or line: control characters
    (ESC of a terminal sequence, newlines, bidi overrides) written as escapes by
    :func:`placer.errors.printable`, as the error lines do, and rich markup ("[bold]") escaped."""
    from rich.markup import escape

    from placer.errors import printable

    return escape(printable(text, limit=limit))


def us(x: float) -> str:
    """Microseconds as milliseconds, e.g. ``1,234.50 ms``."""
    return f"{x / 1000:,.2f} ms" if np.isfinite(x) else "inf"


def gib(x: float) -> str:
    """Bytes as GiB, e.g. ``1.50 GiB``."""
    return f"{x / 2**30:,.2f} GiB"


def bound_text(d: dict) -> str:
    """A command's lower bound as printed: the value, the bound that gave it, and whether it proves
    the best fitting step time optimal."""
    b = d.get("lower_bound")
    if not b:
        return us(d["lower_bound_us"])
    if not np.isfinite(b["value_us"]):
        return f"{us(b['any_placement_us'])}; no placement fits in memory"
    return f"{us(b['value_us'])} ({safe(b['source'])}{', proven optimal' if b['proven_optimal'] else ''})"


def said_html(d: dict) -> None:
    """The line saying where ``--html`` wrote its report, when it did."""
    if "html" in d:
        from placer.cli.report import said

        err_console.print(safe(said(d["html"])))


# ---------------------------------------------------------------------- inputs
def load_problem(graph: str, cluster: str):
    from placer.problem import Problem
    from placer.resolve import resolve_cluster, resolve_graph

    g = resolve_graph(graph)
    c = resolve_cluster(cluster, g, graph)
    return Problem(g, c)


def sim_params(name: str, problem=None):
    """The SimParams of ``--sim``; ``default`` takes the communication model the problem's cluster declares."""
    from placer.sim import SimParams

    return SimParams.preset(name, getattr(problem, "cluster", None))


def placement_arg(P, placement: str) -> np.ndarray:
    """The validated placement named by ``--placement``: a placement file, a module -> device map
    (placer export's or accelerate's, on a graph that records module paths), or ``single:<device>``."""

    if placement.startswith("single:"):
        try:
            d = int(placement.split(":", 1)[1])
        except ValueError:
            raise InputError("--placement", placement, "is not single:<device index>", "e.g. single:0") from None
        p = np.full(P.n_ops, d)
    else:
        from placer.export import is_device_map, placement_from_map
        from placer.frontends.native import placement_from_doc
        from placer.io import read_json

        doc = read_json(placement)
        p = placement_from_map(doc, P, placement) if is_device_map(doc) else \
            placement_from_doc(doc, P.graph, P.cluster, placement)
    p = P.validate_placement(p, placement)
    return p


def method_params(items: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` items as a dict of strings; the method's config parses and checks them."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise InputError("--set", repr(item)[:80], "is not KEY=VALUE", "e.g. --set patience=40 (see `placer methods --json`)")
        out[key.strip()] = value
    return out
