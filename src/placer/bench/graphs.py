"""Where an experiment's graphs and clusters come from, and fingerprints that key the run cache.

Graphs are named three ways: a built-in zoo name (:data:`placer.zoo.BUILTIN`), ``shared:<path>``
for the real graphs kept outside the repository (``$PLACER_SHARED_GRAPHS``, default
``../shared/graphs`` beside the repository), or a plain file path. A graph that is not there yet
(a zoo model not written, a file absent) is reported as missing with the reason, never replaced.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from placer.errors import InputError

ENV_VAR = "PLACER_SHARED_GRAPHS"
_NOT_IN_ZOO = " is not in placer.zoo yet"


class GraphMissing(Exception):
    """The graph a row names is not available here; the message says why."""


def repo_root() -> Path:
    """The checkout this package runs from (src/placer/bench -> repo), else the working directory."""
    here = Path(__file__).resolve().parents[3]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def shared_graphs_dir() -> Path:
    """``$PLACER_SHARED_GRAPHS``, else ``../shared/graphs`` relative to the repository."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return (repo_root().parent / "shared" / "graphs").resolve()


def shared_path(spec: str) -> Path:
    return shared_graphs_dir() / spec[len("shared:"):]


_FAMILIES: dict[tuple[str, str], list] = {}


def family_graphs(family: str, split: str) -> list:
    """The graphs of one split of a generated family (``placer.zoo.families``), loaded once per process."""
    key = (family, split)
    if key not in _FAMILIES:
        try:
            from placer.zoo import families
        except ImportError:
            raise GraphMissing("generated families (placer.zoo.families) are not in placer yet") from None
        try:
            _FAMILIES[key] = list(families.load_family(family, split=split))
        except ModuleNotFoundError as e:
            raise GraphMissing(f"family '{family}' needs {e.name} (pip install 'placer[torch]')") from None
        except (KeyError, ValueError) as e:
            raise GraphMissing(f"family '{family}' split '{split}': {e}") from None
    return _FAMILIES[key]


def resolve_one(spec: str):
    """(OpGraph, file path or None) for one graph spec; raises :class:`GraphMissing`."""
    from placer.resolve import resolve_graph
    from placer.zoo import BUILTIN

    if spec.startswith("family:"):
        try:
            _, fam, split, index = spec.split(":")
            members = family_graphs(fam, split)
            return members[int(index)], None
        except (ValueError, IndexError):
            raise GraphMissing(f"{spec}: not a member of the family (family:<name>:<split>:<index>)") from None
    if spec.startswith("giph:"):  # a GiPH random task graph (placer.zoo.giph; InputError when malformed)
        from placer.zoo.giph import graph_from_spec
        return graph_from_spec(spec), None
    if spec.startswith("shared:"):
        path = shared_path(spec)
        if not path.exists():
            raise GraphMissing(f"{spec[7:]} not found under {shared_graphs_dir()} (set ${ENV_VAR})")
        return resolve_graph(str(path)), str(path)
    if Path(spec).exists():
        return resolve_graph(spec), spec
    if spec.startswith("hf:"):  # a Hugging Face model built from its config (captured once, then cached)
        try:
            return resolve_graph(spec), None
        except ModuleNotFoundError as e:
            raise GraphMissing(f"{spec} needs {e.name} (pip install 'placer[hf]')") from None
    if spec not in BUILTIN:
        raise GraphMissing(f"zoo model '{spec}'{_NOT_IN_ZOO}")
    try:
        return BUILTIN[spec](), None
    except ModuleNotFoundError as e:  # the zoo's models need the torch extra
        raise GraphMissing(f"zoo model '{spec}' needs {e.name} (pip install 'placer[torch]')") from None


def resolve_row_graph(candidates: tuple[str, ...]):
    """(OpGraph, spec used, path or None) for the first candidate that resolves."""
    reasons, unbuilt = [], []
    for spec in candidates:
        try:
            g, path = resolve_one(spec)
            return g, spec, path
        except GraphMissing as e:
            (unbuilt if str(e).endswith(_NOT_IN_ZOO) else reasons).append(str(e).removesuffix(_NOT_IN_ZOO))
        except InputError as e:
            reasons.append(f"{spec}: {e}")
    if unbuilt:  # one line for all the spellings tried
        names = [u.removeprefix("zoo model ").strip("'") for u in unbuilt]
        reasons.append(f"zoo model {' / '.join(names)}{_NOT_IN_ZOO}")
    raise GraphMissing("; ".join(dict.fromkeys(reasons)))


def resolve_row_cluster(spec: str, graph, path: str | None):
    from placer.resolve import resolve_cluster

    return resolve_cluster(spec, graph, path)


# Significant digits kept by the rounded fingerprints (``digits=FP_DIGITS``): a value computed in other last
# bits by another processor (a libm or SIMD exp, log, ... one ulp apart, 2e-16 relative) rounds to the same 9
# digits unless it lies within that ulp of a rounding boundary (about 1 value in 10**7)
FP_DIGITS = 9


def _h(h, a, digits: int | None = None) -> None:
    a = np.ascontiguousarray(a)
    h.update(str(a.dtype).encode())
    h.update(str(a.shape).encode())
    if digits is not None and a.dtype.kind == "f":  # Python's correctly rounded decimal formatting: no processor in it
        h.update(" ".join(f"{x:.{digits - 1}e}" for x in a.ravel().tolist()).encode())
    else:
        h.update(a.tobytes())


def _f(x: float, digits: int | None) -> str:
    return repr(x) if digits is None else f"{x:.{digits - 1}e}"


def graph_fingerprint(g, digits: int | None = None) -> str:
    """A hash of everything the simulator and the methods can see of a graph: its exact bits, or with
    ``digits`` its floats rounded to that many significant digits (:data:`FP_DIGITS`), which tells an
    input another processor computed in other last bits from one that changed."""
    h = hashlib.sha256()
    h.update("\0".join(g.op_names).encode())
    h.update("\0".join(g.op_types).encode())
    h.update("\0".join(g.modules).encode())
    for k in sorted(g.compute_us):
        h.update(k.encode())
        _h(h, g.compute_us[k], digits)
    for a in (g.flops, g.bytes_accessed, g.output_bytes, g.param_bytes, g.temp_bytes, g.colocation, g.role,
              g.mirror, g.edge_src, g.edge_dst, g.edge_bytes):
        _h(h, a, digits)
    return h.hexdigest()[:16]


def cluster_fingerprint(c, digits: int | None = None) -> str:
    """A hash of a cluster's devices and links (``digits``: as :func:`graph_fingerprint`'s), and of the
    communication model and shared link groups it declares (``meta["comm_model"]``,
    ``meta["shared_links"]``) when they are not the default (Placeto's model, no groups): a cluster
    that declares none keeps the fingerprint it had before clusters could declare them."""
    import json

    from placer.sim.result import cluster_comm_model

    h = hashlib.sha256()
    for d in c.devices:
        h.update(f"{d.name}|{d.kind}|{d.model}|{_f(d.memory_bytes, digits)}|{_f(d.peak_flops_per_us, digits)}|"
                 f"{_f(d.mem_bw_bytes_per_us, digits)}|{_f(d.launch_us, digits)}".encode())
    _h(h, c.bandwidth_bytes_per_us, digits)
    _h(h, c.latency_us, digits)
    comm, shared = cluster_comm_model(c), (getattr(c, "meta", None) or {}).get("shared_links")
    if comm != "placeto":
        h.update(f"comm_model|{comm}".encode())
    if shared:
        h.update(("shared_links|" + json.dumps(shared, sort_keys=True, default=str)).encode())
    return h.hexdigest()[:16]

