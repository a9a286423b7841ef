"""Starting placements computed once per Problem and shared: :func:`shared`.

Each construction's shared form lives beside it (``list_scheduling.shared_schedule``,
``shared_topo``, ``expert.shared_expert``, ``partitioning.shared_metis``); this module holds only
the cache, so it imports no method.

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


def device_key(devices) -> tuple[int, ...] | None:
    """A device list as part of a key (None: the method's default devices)."""
    return None if devices is None else tuple(int(d) for d in devices)
