"""Starting placements computed once per Problem and shared: :func:`shared`, :func:`shared_schedule`.

The classical constructions that local search and annealing start from (:mod:`placer.methods.seeding`),
and the learned methods' seeded start, are the same computations the line-up runs as rows of their
own (``heft``, ``m-etf``, ``m-topo``, ``expert``, ``metis``): ``placer compare`` on Inception-V3 ran
HEFT and m-ETF three times each, and local search spent 64% of its time rebuilding its starts.
Each is a pure function of the Problem, the simulator's parameters and its own settings, none of
them simulates through an evaluator, so each is computed once per Problem object in a process
(held for as long as that object lives) and every caller gets its own copy of the same answer. No
budget changes: a method still simulates every start it simulated before, and its placements are
those it computed itself before.

The key is the Problem object's identity (a grouped Problem is another object, with its own starts)
and a tuple naming the computation and every setting it reads, the simulator's parameters among
them where it reads them."""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any, Callable

_MEMO: "weakref.WeakKeyDictionary[Any, dict[tuple, Any]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def shared(problem, key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, computed once per (``problem`` object, ``key``) in this process; every call gets a
    deep copy, so no caller can change what another one gets. An exception from ``make`` (such as
    ``NotApplicable``) is not remembered."""
    with _LOCK:
        memo = _MEMO.setdefault(problem, {})
        if key in memo:
            return copy.deepcopy(memo[key])
    value = make()
    with _LOCK:
        memo.setdefault(key, copy.deepcopy(value))
    return value


def computed(problem) -> list[tuple]:
    """The keys of the starts held for ``problem`` (what has been shared so far)."""
    with _LOCK:
        return list(_MEMO.get(problem, {}))


def _devices(devices) -> tuple[int, ...] | None:
    return None if devices is None else tuple(int(d) for d in devices)


def shared_schedule(kind: str, problem, sim_params=None, devices=None, memory: str = "conservative",
                    comm: str = "free", favourites: str = "lp"):
    """The list scheduler ``kind`` (``heft``, ``m-etf`` or ``m-sct``) of
    :mod:`placer.methods.list_scheduling` with these settings (its own defaults when not given), its
    :class:`Schedule` computed once per Problem (:func:`shared`). ``favourites`` is m-SCT's only."""
    from placer.methods import list_scheduling as ls

    key = (kind, sim_params, _devices(devices), memory, comm, favourites if kind == "m-sct" else None)
    if kind == "heft":
        return shared(problem, key, lambda: ls.heft_schedule(problem, sim_params, devices, memory, comm))
    if kind == "m-etf":
        return shared(problem, key, lambda: ls.etf_schedule(problem, sim_params, devices, memory, comm=comm))
    if kind == "m-sct":
        return shared(problem, key, lambda: ls.sct_schedule(problem, sim_params, devices, memory, comm, favourites))
    raise ValueError(f"no list scheduler '{kind}' (heft, m-etf, m-sct)")


def shared_topo(problem, devices=None, memory: str = "conservative"):
    """m-TOPO's placement (:func:`placer.methods.list_scheduling.topo_placement`), once per Problem."""
    from placer.methods.list_scheduling import topo_placement

    return shared(problem, ("m-topo", _devices(devices), memory), lambda: topo_placement(problem, devices, memory))


def shared_expert(problem):
    """The expert placement and how it was made (:func:`placer.methods.expert.expert_placement`), once
    per Problem."""
    from placer.methods.expert import expert_placement

    return shared(problem, ("expert",), lambda: expert_placement(problem))


def shared_metis(problem, devices, seed: int = 0, ufactor: int | None = None):
    """METIS's placement (:func:`placer.methods.partitioning.metis_placement`; ``ufactor`` None: its
    default), once per Problem."""
    import inspect

    from placer.methods.partitioning import metis_placement

    if ufactor is None:
        ufactor = inspect.signature(metis_placement).parameters["ufactor"].default
    return shared(problem, ("metis", _devices(devices), int(seed), int(ufactor)),
                  lambda: metis_placement(problem, devices, seed, ufactor))
