"""The protocol of learned methods (DESIGN.md, "Contracts": learned methods also expose train /
place-with-policy / fine-tune, and save/load their policies).

Every method, learned or not, is registered with ``run(problem, seed, ev, cfg)``
(:func:`placer.methods.base.register`); for a learned method that is *search mode*: it trains a
policy on the one graph it is given, within the budget, and returns the best placement evaluated. A
learned method whose policy transfers to other graphs also implements :class:`LearnedMethod` and
lists it in :data:`LEARNED` under its registered name::

    m = LEARNED["placeto"]
    policy = m.train(problems, cfg, seed, sim_params, placements=20_000, progress=log.write)
    result = m.place(problem, policy, seed, ev, cfg)            # zero-shot, through the Evaluator
    result, tuned = m.finetune(problem, policy, seed, ev, cfg)  # more training on this graph, then place
    state = m.policy_state(policy)                              # a plain state dict ...
    policy = m.load_policy(state, where="policy.pt")            # ... and back (bad states: InputError)

``cfg`` is the method's registered config (one config per algorithm: its fields carry the defaults
its committed results ran with; a ``paper()`` preset gives the paper's). ``ev`` is the
:class:`placer.methods.base.Evaluator` that counts, budgets and keeps the best of every placement
simulated for the result (a fine-tuning's training placements included).

Methods know no files. A policy is an object in memory and a state dict on disk: the caller (the
CLI, the bench) writes and reads the dict with :func:`placer.io.write_checkpoint` /
:func:`placer.io.read_checkpoint` and turns it into a policy with ``load_policy``. Training progress
is a callback, :data:`Progress`, that gets one plain JSON-able dict per episode or update (the CLI
writes them with :class:`placer.io.JsonLines`). No config field holds a path.

Through the common contract (``run_method``, the bench), a trained policy travels in the config
field ``policy`` (the policy object, or its state dict): the registered run then places with it,
fine-tuning first when the config asks for it (Placeto: ``finetune`` episodes). The bench's
``"@policy:<name>"`` parameters are replaced by the loaded policy (:func:`placer.bench.policies.substitute`).

Which methods implement it: Placeto (:mod:`placer.methods.placeto`). Post
(:mod:`placer.methods.post`) has no transferable policy: its "policy" is one softmax distribution
per unit of the graph it searches (paper section 3), which means nothing on another graph, so Post
and its ablations (ce, ppo, pg) have search mode only and are not listed here.
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


LEARNED: dict[str, LearnedMethod] = {}


def register_learned(method: LearnedMethod) -> LearnedMethod:
    """List ``method`` in :data:`LEARNED` under its ``name`` (the method module does this on import)."""
    LEARNED[method.name] = method
    return method


def learned_method(name: str) -> LearnedMethod:
    """The learned method registered under ``name`` (the package's ``__init__``, imported before
    this module, has imported every method module)."""
    from placer.errors import InputError

    if name not in LEARNED:
        raise InputError("method", f"'{name}'", "has no transferable policy (train / place / fine-tune)",
                         f"use one of: {', '.join(sorted(LEARNED)) or '(none installed)'}")
    return LEARNED[name]
