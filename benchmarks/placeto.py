"""Placeto benchmark (Addanki et al., Table 1 and section 3 "Generalizability"), on 2 K80-preset GPUs
with the simulator's Placeto reference constants.

1. From scratch (search mode) on Inception-V3, NMT (2 layers) and NASNet: best step time versus the
   expert placement and the best classical method, simulator calls ("placements sampled") to reach
   within 1% of the final best (paper: 3.7K, 20K, 28.8K), episodes per second on this machine.
2. Transfer: the policy trained on Inception-V3 (the scratch run's), and one trained on the cifar10
   family when the families exist, fine-tuned on NMT and NASNet: simulator calls to reach within 1%
   of the scratch run's final best, versus scratch (paper: 21x and 6x fewer).
3. Zero-shot on the held-out half of each family (cifar10, ptb, nmt): a policy trained on the
   training half places each test graph in one greedy episode; compared with per-graph search.

Graphs come from the zoo (``placer.zoo.BUILTIN``: inception_v3, nmt2, nasnet_mobile) and fall back to
the PipeDream profiles in ../shared/graphs (inception_v3, gnmt, nasnetamobile); ``--source shared``
takes the PipeDream profiles directly. Budgets are far below
the paper's (2 shared CPU cores here): ``--quick`` (default) and ``--full``; the output says which.

    python benchmarks/placeto.py --quick --out results/placeto.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from placer.cluster import preset
from placer.methods import METHODS, Budget, run_method
from placer.problem import Problem
from placer.sim import SimParams

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PLACER_SHARED_GRAPHS", REPO.parent / "shared" / "graphs"))
MODELS = {  # name -> (zoo names, first found wins; shared fallback)
    "Inception-V3": (("inception_v3",), "pipedream/inception_v3.txt"),
    "NMT": (("nmt2", "nmt_2"), "pipedream/gnmt.txt"),
    "NASNet": (("nasnet_mobile", "nasnet"), "pipedream/nasnetamobile.txt"),  # nasnet_large at batch 64 needs 61 GiB: cannot fit 2 K80s
}
PAPER_TO_BEST = {"Inception-V3": 3_700, "NMT": 20_000, "NASNet": 28_800}
PAPER_SPEEDUP = {"NMT": 21, "NASNet": 6}
CLASSICAL_FAMILIES = ("expert", "partitioning", "list-scheduling", "search")


@dataclass(frozen=True)
class Budgets:
    groups: int
    scratch_episodes: int  # per model, search mode from scratch
    finetune_episodes: int  # per model, starting from a trained policy
    family_episodes: int  # policy mode on a family's training half
    family_search_episodes: int  # per-graph search on each held-out graph
    family_test_graphs: int  # held-out graphs evaluated per family (0: all)
    classical_placements: int  # budget of the search-family classical methods
    workers: int = 8


QUICK = Budgets(groups=48, scratch_episodes=320, finetune_episodes=160, family_episodes=160,
                family_search_episodes=64, family_test_graphs=4, classical_placements=2_000)
FULL = Budgets(groups=64, scratch_episodes=2_000, finetune_episodes=1_000, family_episodes=2_000,
               family_search_episodes=320, family_test_graphs=8, classical_placements=20_000)


def load_model(name: str, source: str = "zoo"):
    from placer.resolve import resolve_graph
    from placer.zoo import BUILTIN

    zoo, shared = MODELS[name]
    if source != "shared":
        for z in zoo:
            if z in BUILTIN:
                return BUILTIN[z](), f"zoo:{z}"
    path = SHARED / shared
    if not path.exists():
        return None, f"missing ({'' if source == 'shared' else f'no zoo {zoo}, '}no {path}; set PLACER_SHARED_GRAPHS)"
    return resolve_graph(str(path)), f"shared:{shared}"


def to_within(curve: list[tuple[int, float]], target: float) -> int | None:
    """Simulator calls until the best objective first got within ``target``."""
    for x, y in curve:
        if y <= target:
            return int(x)
    return None


def classical(P: Problem, sim: SimParams, placements: int, seed: int) -> dict:
    rows = {}
    for name, info in sorted(METHODS.items()):
        if info.family not in CLASSICAL_FAMILIES or info.available():
            continue
        t0 = time.perf_counter()
        try:
            r = run_method(name, P, Budget(placements=placements, seconds=120.0), seed, sim)
        except Exception as e:  # a method that does not apply to this graph
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:200]}
            continue
        rows[name] = {"family": info.family, "step_us": r.sim.makespan_us, "objective_us": float(r.sim.objective_us),
                      "oom": bool(r.sim.oom), "sim_calls": r.cost.sim_calls, "wall_s": time.perf_counter() - t0}
    return rows


def _grouping(b: Budgets) -> str:
    from placer.methods.learned.placeto import PlacetoConfig

    kind = PlacetoConfig().grouping.split(":")[0]
    return f"{kind}:{b.groups}"


def trainer_for(gps, b: Budgets, episodes: int, seed: int, sim: SimParams):
    from placer.methods.learned.placeto import PlacetoConfig
    from placer.rl.reinforce import Trainer

    cfg = PlacetoConfig(workers=b.workers)  # the method's settings, written once
    return Trainer(gps, cfg.policy_config(gps[0].n_actions), cfg.env(), cfg.reinforce(seed, episodes), sim_params=sim)


def run_search(tr) -> dict:
    t0 = time.perf_counter()
    try:
        tr.train()
    finally:
        tr.close()
    wall = time.perf_counter() - t0
    best = tr.best[0]
    final = best["objective_us"]
    return {"best_objective_us": final, "best_step_us": best["step_us"], "sim_calls": tr.sim_calls,
            "episodes": tr.episode, "wall_s": wall, "episodes_per_s": tr.episode / wall,
            "to_within_1pct": to_within(tr.curve[0], final * 1.01), "curve": tr.curve[0]}


def fmt_ms(us):
    return "n/a" if us is None or not np.isfinite(us) else f"{us / 1e3:8.1f} ms"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="reduced budgets (default)")
    mode.add_argument("--full", action="store_true", help="larger budgets (hours on 2 cores)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ", ".join(MODELS))
    ap.add_argument("--families", default="cifar10,ptb,nmt", help="families for zero-shot ('' to skip)")
    ap.add_argument("--source", choices=("zoo", "shared"), default="zoo", help="zoo models, or the PipeDream profiles")
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every episode budget (smoke tests: 0.05)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write all figures as JSON here")
    args = ap.parse_args(argv)
    b = FULL if args.full else QUICK
    if args.scale != 1.0:
        sc = lambda k: max(b.workers, int(round(k * args.scale)))
        b = replace(b, scratch_episodes=sc(b.scratch_episodes), finetune_episodes=sc(b.finetune_episodes),
                    family_episodes=sc(b.family_episodes), family_search_episodes=sc(b.family_search_episodes))
    sim = SimParams.placeto()
    cluster = preset("k80x2")
    from placer.rl.task import make_task

    report = {"mode": "full" if args.full else "quick", "budgets": b.__dict__, "cluster": cluster.name,
              "sim": "SimParams.placeto()", "seed": args.seed, "models": {}, "transfer": {}, "families": {}}
    print(f"# Placeto benchmark ({report['mode']} budgets: {b}) on {cluster.name}, sim = Placeto reference constants")
    states = {}
    problems = {}
    for name in [m for m in args.models.split(",") if m]:
        g, source = load_model(name, args.source)
        if g is None:
            print(f"{name}: {source}")
            report["models"][name] = {"missing": source}
            continue
        P = Problem(g, cluster)
        problems[name] = P
        print(f"\n## {name} ({source}, {g.n_ops} ops)")
        cl = classical(P, sim, b.classical_placements, args.seed)
        ok = {k: v for k, v in cl.items() if "error" not in v}
        best_cl = min(ok, key=lambda k: ok[k]["objective_us"]) if ok else None
        gp = make_task(P, _grouping(b))
        tr = trainer_for([gp], b, b.scratch_episodes, args.seed, sim)
        res = run_search(tr)
        states[name] = tr.state_dict()
        row = {"source": source, "ops": g.n_ops, "groups": gp.n_groups, "classical": cl, "best_classical": best_cl,
               "placeto_scratch": res, "paper_to_best": PAPER_TO_BEST[name]}
        report["models"][name] = row
        exp = cl.get("expert", {})
        print(f"expert                {fmt_ms(exp.get('step_us'))}  (objective {fmt_ms(exp.get('objective_us'))})")
        if best_cl:
            print(f"best classical        {fmt_ms(ok[best_cl]['step_us'])}  (objective {fmt_ms(ok[best_cl]['objective_us'])}, {best_cl})")
        print(f"placeto scratch       {fmt_ms(res['best_step_us'])}  (objective {fmt_ms(res['best_objective_us'])}); "
              f"{res['sim_calls']:,} sim calls in {res['episodes']} episodes; within 1% of final best after "
              f"{res['to_within_1pct']:,} sim calls (paper: {PAPER_TO_BEST[name]:,} placements); "
              f"{res['episodes_per_s']:.2f} episodes/s ({gp.n_groups} groups)")

    if not args.no_transfer and "Inception-V3" in states:
        sources = {"Inception-V3": states["Inception-V3"]}
        fam_state = family_policy("cifar10", cluster, b, args.seed, sim, report)
        if fam_state is not None:
            sources["cifar10 family"] = fam_state
        for target in ("NMT", "NASNet"):
            if target not in problems:
                continue
            scratch = report["models"][target]["placeto_scratch"]
            goal = scratch["best_objective_us"] * 1.01
            for src, state in sources.items():
                out = finetune_run(state, problems[target], b, args.seed, sim, goal)
                speed = (scratch["to_within_1pct"] / out["to_goal"]) if out["to_goal"] else None
                report["transfer"][f"{src} -> {target}"] = {**out, "scratch_to_goal": scratch["to_within_1pct"],
                                                            "speedup": speed, "paper_speedup": PAPER_SPEEDUP[target]}
                print(f"transfer {src} -> {target}: best {fmt_ms(out['best_step_us'])}, zero-shot {fmt_ms(out['zero_shot_step_us'])}; "
                      f"within 1% of scratch best after {out['to_goal'] if out['to_goal'] is not None else 'never'} "
                      f"sim calls vs {scratch['to_within_1pct']:,} from scratch"
                      + (f" = {speed:.1f}x fewer" if speed else "") + f" (paper {PAPER_SPEEDUP[target]}x)")

    for fam in [f for f in args.families.split(",") if f]:
        zero_shot_family(fam, cluster, b, args.seed, sim, report)

    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=float))
        print(f"\nwrote {args.out}")
    return 0


def finetune_run(state: dict, P: Problem, b: Budgets, seed: int, sim: SimParams, goal: float) -> dict:
    from placer.rl.task import make_task
    from placer.rl.policy import place

    gp = make_task(P, _grouping(b))
    zero = place(state, gp, greedy=True, episodes=1, seed=seed, sim_params=sim)
    tr = trainer_for([gp], b, b.finetune_episodes, seed, sim)
    tr.load_state_dict(state, weights_only=True)
    res = run_search(tr)
    return {"best_objective_us": res["best_objective_us"], "best_step_us": res["best_step_us"],
            "sim_calls": res["sim_calls"], "episodes": res["episodes"], "to_goal": to_within(res["curve"], goal),
            "zero_shot_step_us": zero.step_us, "zero_shot_objective_us": zero.objective_us}


def _family(fam: str, split: str):
    try:
        from placer.zoo import families
    except ImportError:
        return None, "placer.zoo.families is not available"
    try:
        return list(families.load_family(fam, split=split)), None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


_FAMILY_STATES: dict = {}


def family_policy(fam: str, cluster, b: Budgets, seed: int, sim: SimParams, report: dict):
    """Train (once) a policy on the training half of a family; None when the family is missing."""
    from placer.rl.task import make_task

    if fam in _FAMILY_STATES:
        return _FAMILY_STATES[fam]
    graphs, why = _family(fam, "train")
    if graphs is None:
        print(f"family {fam}: {why}")
        report["families"][fam] = {"missing": why}
        _FAMILY_STATES[fam] = None
        return None
    gps = [make_task(Problem(g, cluster), _grouping(b)) for g in graphs]
    tr = trainer_for(gps, b, b.family_episodes, seed, sim)
    t0 = time.perf_counter()
    try:
        tr.train()
    finally:
        tr.close()
    report["families"].setdefault(fam, {})["training"] = {"graphs": len(gps), "episodes": tr.episode,
                                                          "sim_calls": tr.sim_calls, "wall_s": time.perf_counter() - t0}
    _FAMILY_STATES[fam] = tr.state_dict()
    return _FAMILY_STATES[fam]


def zero_shot_family(fam: str, cluster, b: Budgets, seed: int, sim: SimParams, report: dict) -> None:
    from placer.rl.task import make_task
    from placer.rl.policy import place

    state = family_policy(fam, cluster, b, seed, sim, report)
    if state is None:
        return
    tests, why = _family(fam, "test")
    if tests is None:
        report["families"][fam]["missing_test"] = why
        return
    if b.family_test_graphs:
        tests = tests[:b.family_test_graphs]
    rows = []
    for g in tests:
        gp = make_task(Problem(g, cluster), _grouping(b))
        zero = place(state, gp, greedy=True, episodes=1, seed=seed, sim_params=sim)
        search = run_search(trainer_for([gp], b, b.family_search_episodes, seed, sim))
        rows.append({"graph": g.name, "zero_shot_us": zero.objective_us, "zero_shot_sim_calls": zero.sim_calls,
                     "search_us": search["best_objective_us"], "search_sim_calls": search["sim_calls"],
                     "ratio": zero.objective_us / search["best_objective_us"]})
    ratios = [r["ratio"] for r in rows]
    report["families"][fam]["test"] = rows
    report["families"][fam]["median_ratio"] = float(np.median(ratios))
    print(f"family {fam}: zero-shot / per-graph search objective, median over {len(rows)} held-out graphs = "
          f"{np.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); zero-shot costs "
          f"{np.mean([r['zero_shot_sim_calls'] for r in rows]):.0f} sim calls per graph, search "
          f"{np.mean([r['search_sim_calls'] for r in rows]):.0f}")


if __name__ == "__main__":
    sys.exit(main())
