"""What the learned-method protocol (:mod:`placer.methods.learned.protocol`) looks like for GDP, Mars, ColocRL
and the Hierarchical Planner, whose policy is its policy state, a plain dict (tensors, numbers,
strings): the config fields that hold objects (:class:`PolicyFields`), and the registered run,
place and fine-tune written once over each method's search (:class:`StatePolicyMethod`).

A learned method's config carries ``policy`` (a trained policy state; None: search mode) and
``progress`` (a callback that gets one dict per training update; None: nothing), Mars's also
``encoder`` (a pre-trained encoder state): objects, never paths. A result records the whole config,
so each of these is recorded as a label: "given", or None.

The multi-problem training loop is written here once (:class:`Training`): the problems a policy
trains on, one Evaluator each with its share of the budget, the turns going round-robin over them,
and the progress records tagged with the method's name. A method's search is the same training on
[its one problem] under the Evaluator it was given (:meth:`Training.one`), then its placement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from placer.errors import InputError

Progress = Callable[[dict], None]


def needs(modules: tuple[str, ...], what: str = "the 'torch' extra") -> str | None:
    """None when every module imports, else why the method cannot run here (``available=`` of
    :func:`placer.methods.base.register`)."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return f"needs {what} ({e.name} is not installed): pip install 'placer[torch]'"
    return None


def share(default: int, placements: int | None, problems: int) -> int:
    """Placements each of ``problems`` problems gets: ``placements`` in all shared equally (at least
    one each), or ``default`` each when ``placements`` is None."""
    return default if placements is None else max(1, placements // max(1, problems))


@dataclass(eq=False)
class Training:
    """What a policy trains on: ``problems``, each with its own Evaluator (``evs``: its budget and
    its best placement), and ``progress`` (None: nothing), which gets every record :meth:`report`
    is given, tagged with the method's ``name``."""

    name: str
    problems: list
    evs: list
    progress: Progress | None = None

    @classmethod
    def one(cls, name: str, problem, ev, progress: Progress | None = None) -> Training:
        """Search mode: the one problem, under the Evaluator the method was given."""
        return cls(name, [problem], [ev], progress)

    @classmethod
    def of(cls, name: str, problems: list, each: int, sim_params=None, progress: Progress | None = None) -> Training:
        """Policy training: ``problems``, ``each`` placements each (:func:`share`)."""
        from placer.methods.base import Evaluator

        return cls(name, list(problems), [Evaluator(P, sim_params, limit=each) for P in problems], progress)

    def report(self, line: dict) -> None:
        if self.progress is not None:
            self.progress({"method": self.name, **line})

    def round_robin(self, turn: Callable[[int, int], bool]) -> int:
        """``turn(i, k)``, problem i's turn and k its number (from 1, the turns skipped for problems
        already done counted), round-robin over the problems until each is done: a problem is done
        when its turn returns False. Returns the number of turns."""
        done, k = [False] * len(self.problems), 0
        while not all(done):
            i = k % len(done)
            k += 1
            if not done[i]:
                done[i] = not turn(i, k)
        return k


class PolicyFields:
    """Mixin for a frozen config dataclass: :meth:`to_dict` with the object fields as labels."""

    OBJECT_FIELDS = ("policy", "encoder", "progress")  # recorded as "given" (or None)

    def to_dict(self) -> dict:
        return {f.name: _label(getattr(self, f.name)) if f.name in self.OBJECT_FIELDS else getattr(self, f.name)
                for f in dataclasses.fields(self)}


def _label(value) -> str | None:
    """None, the object's ``label`` where it has one (a Placeto policy: the file it came from), else "given"."""
    return None if value is None else (getattr(value, "label", None) or "given")


class StatePolicyMethod:
    """:class:`placer.methods.learned.LearnedMethod` over a method's ``search(problem, seed, ev, cfg,
    *, policy=None, progress=None) -> (PlacementResult, policy state)`` (search mode without a
    policy; with one, ``cfg.finetune`` updates on this graph, then the greedy placement),
    ``check(state) -> state`` (InputError when it is not one of its policy states) and
    ``network(state)`` (the state dict of the network the state's stored settings describe, which
    :meth:`load_policy` holds its weights to). Subclasses add ``name`` and ``train``."""

    name = "learned"

    def search(self, problem, seed: int, ev, cfg, *, policy: dict | None = None, progress: Progress | None = None):
        raise NotImplementedError

    def check(self, state: dict) -> dict:
        raise NotImplementedError

    def network(self, state: dict) -> dict:
        """The state dict of the network ``state``'s stored settings describe (a checked state)."""
        raise NotImplementedError

    def run(self, problem, seed: int, ev, cfg):
        """The registered method: search mode, or, given ``cfg.policy``, the policy fine-tuned
        ``cfg.finetune`` updates when asked, then placed greedily."""
        if cfg.policy is None:
            return self.search(problem, seed, ev, cfg, progress=cfg.progress)[0]
        policy = self.load_policy(cfg.policy)
        if cfg.finetune > 0:
            return self.finetune(problem, policy, seed, ev, cfg, progress=cfg.progress)[0]
        return self.place(problem, policy, seed, ev, cfg)

    def place(self, problem, policy: dict, seed: int, ev, cfg):
        """The greedy placement of ``policy`` (zero-shot: no update)."""
        return self.search(problem, seed, ev, dataclasses.replace(cfg, finetune=0), policy=policy)[0]

    def finetune(self, problem, policy: dict, seed: int, ev, cfg, *, progress: Progress | None = None):
        """``cfg.finetune`` updates on ``problem`` from ``policy``, then its greedy placement.
        Returns (PlacementResult, the fine-tuned policy)."""
        return self.search(problem, seed, ev, cfg, policy=policy, progress=progress)

    def policy_state(self, policy: dict) -> dict:
        return policy

    def check_fits(self, problem, cfg) -> None:
        """Nothing to refuse before the work (a policy that cannot place ``problem`` says so as it runs)."""

    def policy_key(self, cfg, problems: list) -> dict:
        """What a trained policy's cache key holds of the method and its trainer config."""
        return {"method": self.name, "trainer": cfg.to_dict()}

    def trained(self, policy) -> dict:
        """What the policy keeps of its training: nothing (its state holds only the network)."""
        return {}

    def load_policy(self, state: dict, where: str = "policy") -> dict:
        """``state`` when it is one of this method's policy states whose weights are finite and exactly
        those of the network its stored settings describe (:func:`placer.nn.weights.check_weights`);
        InputError naming ``where`` (the file it came from) otherwise."""
        from placer.nn.weights import check_weights

        if isinstance(state, (str, bytes)) or hasattr(state, "__fspath__"):
            raise InputError(where, f"{self.name} policy", "is a file name, not a policy state (a method reads "
                             "no files)", "read the file with placer.io.read_checkpoint and give the state it returns")
        try:
            state = self.check(state)
            check_weights(state["model"], where, f"give a policy state {self.name}'s trainer made, or train it again",
                          want=self.network(state))
            return state
        except InputError as e:
            raise e.at(where, kind=f"policy:{self.name}") from None


def single_device_start(problem, ev) -> float | None:
    """Every op on the fastest single device that fits (:func:`placer.sim.single.single_device`),
    simulated through ``ev`` (one placement of the budget), so that a method searching one graph
    never returns a placement slower than one device. Its objective; None when no device runs every
    op, none fits, or the budget is spent (DOPPLER and GiPH call it at their start)."""
    import numpy as np

    from placer.sim.single import single_device

    one = single_device(problem, ev.sim_params)
    if one["device"] is None or not one["fits"] or ev.out_of_budget():
        return None
    d = list(problem.cluster.device_names).index(one["device"])
    return float(ev.evaluate(np.full(problem.n_ops, d, dtype=np.int64)))
