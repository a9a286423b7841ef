"""Starting placements computed once per Problem and shared: :func:`shared`.

A construction the searches start from (and the learned methods' seeded start) is also a row of the
line-up (``heft``, ``m-etf``, ``m-sct``, ``m-topo``, ``expert``, ``metis``). Each is a pure function
of the Problem and its settings that simulates nothing, so it is computed once per Problem object in
a process (held while that object lives); every caller gets its own deep copy. The key is the
Problem object's identity and a tuple naming the computation and every setting it reads.

Each construction's shared form lives beside it (``list_scheduling.shared_schedule``,
``shared_topo``, ``expert.shared_expert``, ``partitioning.shared_metis``); this module holds only
the cache, so it imports no method. Why and what it saves: docs/methods/search.md."""

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
