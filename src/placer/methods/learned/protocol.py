"""The protocol of learned methods: train a policy, place with it, fine-tune it, and its state in
and out (DESIGN.md, "Contracts").

Every method's registered ``run(problem, seed, ev, cfg)`` is its *search mode* (a policy trained on
the one graph it places, within the budget). A method whose policy transfers to other graphs also
implements :class:`LearnedMethod` and is listed in :data:`LEARNED` (Placeto, GDP, Mars, ColocRL,
the Hierarchical Planner, DOPPLER, GiPH; Post's per-unit distributions mean nothing on another
graph, so it has search mode only); every one of them is driven the same way
(:class:`placer.methods.learned.driver.StatePolicyMethod`: its ``run`` is the registered method). A policy is an object; its state is a plain dict the caller (the CLI, the bench)
writes and reads with :mod:`placer.io`. Progress is a callback (:data:`Progress`). Through
``run_method``, a policy travels in the config field ``policy`` (object or state dict), and the
run places with it, fine-tuning first when the config says so. docs/architecture.md shows the calls.

Versions: a method's registered version (``register(..., version=N)``) covers what it does; placing
with a given policy and fine-tuning one have a version of their own (``register_learned(method,
version=N)``, :func:`policy_version`), bumped when that behaviour changes on purpose, so that a change
there redoes the bench runs that place with a policy (:func:`placer.bench.versions.versions`) and
not every run of the method.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

Progress = Callable[[dict], None]  # called with one JSON-able record per episode (or update) of training
Policy = Any  # a method's trained policy object (Placeto: placer.rl.policy.PlacetoPolicy)


@runtime_checkable
class LearnedMethod(Protocol):
    """What a learned method offers beyond ``run`` (search mode on one graph)."""

    name: str  # the registered method name

    def train(self, problems: list, cfg, seed: int, sim_params=None, *, placements: int | None = None,
              progress: Progress | None = None) -> Policy:
        """Train a policy on ``problems`` (several graphs: policy mode) with ``cfg``'s settings,
        within ``placements`` simulated placements in all (None: the config's episode limit only)."""
        ...

    def place(self, problem, policy: Policy, seed: int, ev, cfg):
        """Place ``problem`` with ``policy`` as it is (zero-shot), every placement simulated through
        ``ev``; returns the PlacementResult (``ev.result(...)``)."""
        ...

    def finetune(self, problem, policy: Policy, seed: int, ev, cfg, *,
                 progress: Progress | None = None) -> tuple[Any, Policy]:
        """Train ``policy`` further on ``problem`` (the config says how long), then place with it;
        every placement goes through ``ev``. Returns (PlacementResult, the fine-tuned policy)."""
        ...

    def policy_state(self, policy: Policy) -> dict:
        """The policy as a plain state dict (tensors, numbers, strings, lists, dicts)."""
        ...

    def load_policy(self, state: dict, where: str = "policy") -> Policy:
        """The policy of a state dict ``policy_state`` made; InputError naming ``where`` when it is
        not one (a damaged or foreign file)."""
        ...

    def check_fits(self, problem, cfg) -> None:
        """Refuse (InputError, before any work) a ``cfg.policy`` that cannot place ``problem`` (a
        Placeto policy chooses among a fixed number of devices); nothing otherwise."""
        ...

    def policy_key(self, cfg, problems: list) -> dict:
        """What a trained policy depends on of the method, its trainer config ``cfg`` and its training
        ``problems`` beyond their graphs and clusters: part of the key a trained policy is cached
        under (:mod:`placer.bench.policies`); its ``"trainer"`` entry is the config's part."""
        ...

    def trained(self, policy: Policy) -> dict:
        """What ``policy`` keeps of its training (JSON-able: counts of episodes, placements,
        simulator calls...; {} when it keeps nothing), for the bench's record and `placer policy train`."""
        ...


LEARNED: dict[str, LearnedMethod] = {}
POLICY_VERSIONS: dict[str, int] = {}  # method name -> the version of its place / fine-tune behaviour


def register_learned(method: LearnedMethod, version: int = 1) -> LearnedMethod:
    """List ``method`` in :data:`LEARNED` under its ``name`` (the method module does this on import);
    ``version``: that of its placing with a policy and fine-tuning (module docstring)."""
    LEARNED[method.name] = method
    POLICY_VERSIONS[method.name] = int(version)
    return method


def policy_version(name: str) -> int | None:
    """The version of method ``name``'s placing with a policy and fine-tuning (None: it has no policy mode)."""
    return POLICY_VERSIONS.get(name)


def learned_method(name: str) -> LearnedMethod:
    """The learned method registered under ``name`` (the package's ``__init__``, imported before
    this module, has imported every method module)."""
    from placer.errors import InputError

    if name not in LEARNED:
        raise InputError("method", f"'{name}'", "has no transferable policy (train / place / fine-tune)",
                         f"use one of: {', '.join(sorted(LEARNED)) or '(none installed)'}")
    return LEARNED[name]
