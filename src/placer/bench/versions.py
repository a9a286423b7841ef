"""What a cached bench run or trained policy depends on besides its inputs: the versions of the code
that made it (declared, not hashed from source), and the commit it was made at."""

from __future__ import annotations

from pathlib import Path


def versions(method: str, objective=None, policy: bool = False) -> dict[str, int]:
    """The versions a run of ``method`` depends on: the method's own (``register(..., version=N)``),
    the simulator's (:data:`placer.sim.VERSION`), the cost model's (:data:`placer.cost.VERSION`),
    under a published objective that objective's, and for a run that places with a given ``policy``
    (zero-shot or fine-tuned) the version of the method's policy mode
    (:func:`placer.methods.learned.policy_version`). A committed run is current while these equal
    today's; an edit meant to change one of them bumps it (and its runs are redone), an edit not
    meant to is held by the golden tests (tests/test_golden.py) and by re-simulating every committed
    run (tests/test_sim_committed.py)."""
    from placer import cost, sim
    from placer.methods import METHODS

    from placer.methods.learned.protocol import policy_version

    out = {"method": METHODS[method].version, "sim": sim.VERSION, "cost": cost.VERSION}
    mode = policy_version(method) if policy else None
    if mode is not None:
        out["policy"] = mode
    if objective not in (None, "sim"):
        from placer.objectives import make_objective

        out["objective"] = make_objective(objective).version
    return out


def source_commit() -> dict | None:
    """The git commit of the checkout placer runs from, and whether it had uncommitted changes
    (``dirty``): kept in each run file to say which code made it (not part of the run's hash). None
    where placer is not run from a git checkout (an installed wheel)."""
    import subprocess

    import placer

    root = Path(placer.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=root,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
