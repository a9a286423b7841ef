"""Placeto as a method with the common contract, `placer policy train|place|finetune -m placeto`, and the
deprecated aliases `placer train` / `placer place`."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from placer.cli import _load_plugins, main  # noqa: E402
from placer.cluster import preset  # noqa: E402
from placer.frontends.native import save_graph
from placer.methods import Budget, get_method, run_method  # noqa: E402
from placer.problem import Problem  # noqa: E402
from placer.sim import SimParams, simulate  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402


@pytest.fixture(scope="module")
def problem():
    return Problem(layered_training_graph(80, seed=4), preset("k80x2"))


def test_registered_as_learned_and_available():
    info = get_method("placeto")
    assert info.family == "learned"
    assert info.available() is None


def test_search_mode_respects_the_budget_and_reports_honest_cost(problem):
    res = run_method("placeto", problem, Budget(placements=60), seed=0, sim_params=SimParams.placeto(),
                     grouping="contiguous:8", workers=2, episodes=100)
    assert res.method == "placeto"
    assert res.cost.sim_calls == 60  # the last round is capped at the placements left: never over
    assert res.cost.placements == res.cost.sim_calls
    p = problem.validate_placement(res.placement.devices)
    assert set(np.unique(p)) <= set(problem.cluster.gpus())
    assert res.sim.objective_us == pytest.approx(simulate(problem, p, SimParams.placeto()).objective_us)
    assert res.curve[-1][1] == pytest.approx(res.sim.objective_us)
    # same seed, same placement
    again = run_method("placeto", problem, Budget(placements=60), seed=0, sim_params=SimParams.placeto(),
                       grouping="contiguous:8", workers=2, episodes=100)
    assert np.array_equal(again.placement.devices, res.placement.devices)


@pytest.mark.parametrize("budget", [500, 137])
def test_never_overruns_its_budget(problem, budget):
    """Asked 500 placements, Placeto sampled 698-750 (issue 11): the trainer now stops at exactly the
    placements left, episodes of the last round capped."""
    res = run_method("placeto", problem, Budget(placements=budget), seed=1, grouping="contiguous:16", workers=8)
    assert res.cost.placements == budget


def test_config_defaults_are_written_once():
    """The small-budget hyperparameters live in PlacetoConfig only: the trainer built from it uses them."""
    from placer.methods.learned.placeto import PlacetoConfig

    cfg = PlacetoConfig()
    rl = cfg.reinforce(seed=3)
    assert (rl.lr_start, rl.lr_end, rl.gamma, rl.entropy_start, rl.entropy_end, rl.workers) == (
        cfg.lr_start, cfg.lr_end, cfg.gamma, cfg.entropy_start, cfg.entropy_end, cfg.workers)
    from placer.rl.reinforce import ReinforceConfig

    assert not hasattr(ReinforceConfig, "small_budget")
    with pytest.raises(TypeError):  # no second set of defaults: a view of PlacetoConfig, or of a checkpoint
        ReinforceConfig(episodes=1, seed=0)
    with pytest.raises(Exception, match="grouping"):
        PlacetoConfig(grouping="nonsense")
    paper = PlacetoConfig.paper()  # the paper's settings, where it gives them
    assert (paper.lr_start, paper.gamma, paper.keep_bias, paper.stop_window, paper.devices) == (1e-3, 1.0, 0.0, 1000, "gpus")
    assert PlacetoConfig.paper(gamma=0.5).gamma == 0.5


def test_no_config_field_holds_a_path(tmp_path):
    """Methods know no files: a policy is an object (or its state dict), progress a callback."""
    from placer.errors import InputError
    from placer.methods.learned.placeto import PlacetoConfig

    for field in ("policy", "progress"):
        with pytest.raises(InputError, match=field):
            PlacetoConfig(**{field: str(tmp_path / "x")})
    assert "log" not in PlacetoConfig().to_dict() and PlacetoConfig(progress=print).to_dict()["progress"] == "given"


def run_cli(capsys, monkeypatch, *args):
    _load_plugins()
    monkeypatch.setattr(sys, "argv", ["placer", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_then_place_with_and_without_finetuning(tmp_path, capsys, monkeypatch):
    graphs = []
    for s, n in [(0, 60), (1, 90)]:
        path = tmp_path / f"g{s}.json"
        save_graph(layered_training_graph(n, seed=s), path)
        graphs += ["--graph", path]
    ckpt, log = tmp_path / "policy.pt", tmp_path / "log.jsonl"
    code, out, err = run_cli(capsys, monkeypatch, "train", *graphs, "--out", ckpt, "--episodes", 6, "--workers", 3,
                             "--grouping", "contiguous:8", "--log", log, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["episodes"] == 6 and len(d["graphs"]) == 2 and ckpt.exists()
    assert len(log.read_text().splitlines()) == 6
    # the network is PlacetoConfig's, as the method's (it was PolicyConfig's paper defaults: no keep bias)
    from placer.methods.learned.placeto import PlacetoConfig
    from placer.rl.checkpoint import load_checkpoint

    pc = load_checkpoint(ckpt)["policy_config"]
    assert (pc["keep_bias"], pc["rounds"]) == (PlacetoConfig().keep_bias, PlacetoConfig().rounds)
    code, out, err = run_cli(capsys, monkeypatch, "train", *graphs, "--out", tmp_path / "low.pt", "--episodes", 2,
                             "--grouping", "contiguous:8", "--keep-bias", 0.5, "--json")
    assert code == 0, err
    assert load_checkpoint(tmp_path / "low.pt")["policy_config"]["keep_bias"] == 0.5
    target = tmp_path / "target.json"
    save_graph(layered_training_graph(70, seed=7), target)
    code, out, err = run_cli(capsys, monkeypatch, "place", target, "--policy", ckpt, "--grouping", "contiguous:8",
                             "--json", "--out", tmp_path / "p.json")
    assert code == 0, err
    zero = json.loads(out)  # by default the best of 8 sampled episodes (issue 15: greedy kept the start)
    assert any("sampled policy, 8 episode(s)" in n for n in zero["notes"]), zero["notes"]
    assert zero["sim_calls"] <= 8 * 9 and zero["step_time_us"] > 0
    assert (tmp_path / "p.json").exists()
    code, out, err = run_cli(capsys, monkeypatch, "place", target, "--policy", ckpt, "--finetune", 4, "--workers", 2,
                             "--grouping", "contiguous:8", "--json")
    assert code == 0, err
    tuned = json.loads(out)
    assert any("fine-tuned 4 episodes" in n for n in tuned["notes"]), tuned["notes"]
    # bad input: one line, exit 2
    code, _, err = run_cli(capsys, monkeypatch, "place", target, "--policy", tmp_path / "missing.pt")
    assert code == 2 and "does not exist" in err
    code, _, err = run_cli(capsys, monkeypatch, "train", "--out", ckpt)
    assert code == 2 and "--graph" in err
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    code, _, err = run_cli(capsys, monkeypatch, "place", target, "--policy", bad)
    assert code == 2 and "checkpoint" in err


def test_default_placeto_improves_on_its_one_device_start_on_inception():
    """Issue 15: with the paper's network the untrained policy is near uniform, each episode moves half
    the groups off the one-device start, and within the budget Placeto returned its start (Inception-V3
    k80x2: 1,097 ms, the expert's). The learned keep-the-current-device bias makes episodes local walks
    that REINFORCE can learn from (1,009 ms at 2,000 placements)."""
    from placer.resolve import resolve_graph

    P = Problem(resolve_graph("inception_v3"), preset("k80x2"))
    sim = SimParams.placeto()
    start = run_method("single-gpu", P, Budget(), 0, sim).sim.objective_us
    res = run_method("placeto", P, Budget(placements=600), seed=0, sim_params=sim)
    assert res.cost.placements == 600
    assert res.sim.objective_us < 0.97 * start


def test_default_units_let_placeto_split_a_seq2seq_graph_within_a_small_budget():
    """Placeto places METIS units by default (``metis:64``, forward and backward ops together): on a
    held-out nmt family graph 300 placements take it 31% below single GPU (371.2 against 541.3 ms),
    where the earlier default of 64 contiguous chunks of the topological order, each cutting through
    the parallel encoder and decoder, stopped at 470.9 ms (13%)."""
    from placer.bench.graphs import family_graphs
    from placer.methods.learned.placeto import PlacetoConfig

    assert PlacetoConfig().grouping == "metis:64" and PlacetoConfig().mirrors
    P = Problem(family_graphs("nmt", "test")[1], preset("k80x2"))
    prm = SimParams.placeto()
    single = simulate(P, np.zeros(P.n_ops, dtype=np.int64), prm).objective_us
    r = run_method("placeto", P, Budget(placements=300), 0, sim_params=prm)
    assert r.cost.placements <= 300
    assert r.sim.objective_us <= 0.75 * single, (r.sim.objective_us, single)


def test_default_units_keep_each_layer_forward_and_backward_together(shared_graphs):
    """PipeDream profiles tie no ops by colocation: plain METIS parts put a layer's forward and
    backward ops in different units, and a policy that places them apart ships every stored
    activation across the link (VGG-16 k80x2, 2,000 placements: 1,865 ms against 799). Placeto's
    units (``mirrors``) never split a forward op from the ops that mirror it."""
    from placer.grouping import make_grouping
    from placer.grouping.mirrors import mirror_units
    from placer.methods.learned.placeto import PlacetoConfig
    from placer.resolve import resolve_graph

    g = resolve_graph(str(shared_graphs / "pipedream" / "vgg16.txt"))
    P = Problem(g, preset("k80x2"))
    pairs = mirror_units(P)  # ops sharing a value here must share a unit
    for grouping, together in ((PlacetoConfig().units(P), True), (make_grouping(P, "metis:64"), False)):
        unit = grouping.units(P.graph).op_group  # what the policy places: groups tied by a rule merged
        split = any(len(np.unique(unit[pairs == m])) > 1 for m in np.unique(pairs))
        assert split != together


def test_search_starts_at_the_best_classical_seed_with_units_cut_along_it():
    """start="seeds" (the default in search mode): the seeds are simulated through the evaluator
    first, the units are cut along the best of them and episodes start there (later ones at the best
    placement found so far, ``restart="best"``); the result is never worse than that seed."""
    from placer.methods.learned.placeto import PlacetoConfig, seeded_task
    from placer.methods.starts import seeded_start
    from placer.methods.base import Evaluator

    P = Problem(layered_training_graph(200, seed=0), preset("k80x2"))
    r = run_method("placeto", P, Budget(placements=300), 0, None)
    assert r.cost.placements <= 300
    ev = Evaluator(P, None, limit=300)
    best, fits, _ = seeded_start(P, ev, PlacetoConfig().seeds, PlacetoConfig().split_search)
    seed_us = ev.best_objective_us
    assert fits and r.value_us <= seed_us
    gp = PlacetoConfig().task(P, 0)
    task, initial = seeded_task(gp, best, 0)
    assert task.n_groups >= gp.n_groups
    assert np.array_equal(task.devices[initial[0]][task.units.op_group], best)  # the start, exactly


@pytest.mark.parametrize("restart", ["best", "start"])
def test_episodes_restart_at_the_best_placement_found_before_their_round(tmp_path, problem, restart):
    """``restart="best"`` (the default): after a round that improved the best placement, every
    episode of the next round starts there (its initial objective is that best's); ``"start"``:
    every episode starts at the one start, whatever was found. Both spend exactly the budget."""
    lines = []
    res = run_method("placeto", problem, Budget(placements=300), seed=3, sim_params=SimParams.placeto(),
                     grouping="contiguous:8", workers=4, start="init", restart=restart, refine=1, progress=lines.append)
    assert res.cost.placements == 300
    rounds: dict[int, list[dict]] = {}
    for line in lines:
        rounds.setdefault(line["update"], []).append(line)
    start = lines[0]["initial_us"]
    held, restarted = float("inf"), 0  # the best as each round begins; rounds that began below the start
    for u in sorted(rounds):
        for line in rounds[u]:
            assert line["initial_us"] == (start if restart == "start" or held == float("inf") else held)
        restarted += rounds[u][0]["initial_us"] < start
        held = min(held, min(x["best_us"] for x in rounds[u]))
    assert held < start  # the search improved on its start ...
    assert (restarted > 0) == (restart == "best")  # ... and only restart="best" started later rounds there
    assert res.value_us == pytest.approx(held)


def test_search_refines_its_units_after_half_the_budget_starting_from_the_best_found():
    """``refine=2`` (the default): the first half of the budget is exactly the search that ``refine=1``
    makes with that half; the second half places twice as many METIS parts cut along its best (more
    units than the first phase), and the result is never worse than the first half's."""
    import re

    P = Problem(layered_training_graph(200, seed=0), preset("k80x2"))
    half = run_method("placeto", P, Budget(placements=150), 0, None, start="init", refine=1)
    full = run_method("placeto", P, Budget(placements=300), 0, None, start="init")
    assert full.cost.placements == 300 and half.cost.placements == 150
    first, then = full.notes
    assert first == half.notes[0]  # the same first phase: its episodes, units ...
    assert [p for p in full.curve if p[0] < 150] == [p for p in half.curve if p[0] < 150]  # ... its curve, bit for bit
    units = [int(re.search(r"(\d+) units of (metis:\d+)", x).group(1)) for x in (first, then)]
    assert "metis:128" in then and units[1] > units[0]
    assert full.value_us <= half.value_us


def test_finetuning_refines_too_within_its_episodes(tmp_path):
    """Fine-tuning a policy is search on the graph: with episodes to spare it also moves to the finer
    units for the second half of the budget (``refine=1``: never); ``finetune=N`` stays N episodes
    in all, so a short fine-tuning ends before the second phase and places with the policy."""
    from placer.methods.learned.placeto import PlacetoConfig
    from placer.methods.learned.placeto import PLACETO

    P = Problem(layered_training_graph(70, seed=7), preset("k80x2"))
    cfg = PlacetoConfig(grouping="contiguous:8", episodes=4)
    policy = PLACETO.train([P], cfg, 0, SimParams.placeto())
    kw = dict(policy=PLACETO.policy_state(policy), grouping="contiguous:8")  # a state dict, or the policy itself
    long = run_method("placeto", P, Budget(placements=120), 0, SimParams.placeto(), finetune=1000, **kw)
    assert long.cost.placements == 120
    assert any(n.startswith("then") and "units of contiguous:16" in n for n in long.notes), long.notes
    one = run_method("placeto", P, Budget(placements=120), 0, SimParams.placeto(), finetune=1000, refine=1, **kw)
    short = run_method("placeto", P, Budget(placements=120), 0, SimParams.placeto(), finetune=3, **kw)
    for r in (one, short):
        assert not any(n.startswith("then") for n in r.notes), r.notes
    assert "fine-tuned 3 episodes" in short.notes and any("placed with" in n for n in short.notes)


def test_a_refining_finetune_returns_the_weights_its_second_phase_ended_with(monkeypatch):
    """Fine-tuning that refines trains two trainers, the first on the policy's units, the second on
    finer ones from the first's weights: the fine-tuned policy it returns (and places with) holds the
    weights the second ended with, not the first's (which dropped the second phase's training)."""
    import torch

    from placer.methods.learned import placeto as mod
    from placer.methods.base import Evaluator
    from placer.methods.learned.placeto import PLACETO, PlacetoConfig

    P = Problem(layered_training_graph(70, seed=7), preset("k80x2"))
    policy = PLACETO.train([P], PlacetoConfig(grouping="contiguous:8", episodes=4), 0, SimParams.placeto())
    ended, train = [], mod._train

    def recording(tr, *args):
        train(tr, *args)
        ended.append({k: v.detach().clone() for k, v in tr.net.state_dict().items()})
    monkeypatch.setattr(mod, "_train", recording)
    cfg = PlacetoConfig(grouping="contiguous:8", finetune=1000)
    res, tuned = PLACETO.finetune(P, policy, 0, Evaluator(P, SimParams.placeto(), limit=120), cfg)
    assert len(ended) == 2 and any(n.startswith("then") for n in res.notes), res.notes
    assert all(torch.equal(tuned.weights[k], ended[1][k]) for k in ended[1])
    assert any(not torch.equal(ended[0][k], ended[1][k]) for k in ended[0])


def test_family_policies_keep_exploring_where_the_per_graph_entropy_collapses_onto_keeping():
    """The generalization table trains its family policies with a larger entropy bonus than the
    per-graph default: at the default the nmt-family policy soon moves one or two units an episode
    (an episode simulates a placement only when a step moves a unit), so its zero-shot placements
    stay near the start (issue 15: nmt #1 440 ms against scratch's 371). Same graphs, seed and
    budget; the family setting makes about twice the placements per episode."""
    from placer.bench import experiments as E
    from placer.bench import graphs as G
    from placer.methods import METHODS
    from placer.methods.learned.placeto import PLACETO, PlacetoConfig
    from placer.sim import SimParams

    family = dict(E.EXPERIMENTS["generalization"].policies["nmt"].trainer)
    per_graph = {**family, "entropy_start": PlacetoConfig().entropy_start, "entropy_end": PlacetoConfig().entropy_end}
    assert family["entropy_start"] > per_graph["entropy_start"]
    problems = [Problem(g, preset("k80x2")) for g in G.family_graphs("nmt", "train")[:3]]
    per_episode = {}
    for name, overrides in (("family", family), ("per-graph", per_graph)):
        state = PLACETO.policy_state(PLACETO.train(problems, METHODS["placeto"].make_config(overrides), 0,
                                                    SimParams.placeto(), placements=2000))
        per_episode[name] = state["placements"] / state["episode"]
    assert per_episode["family"] > 1.5 * per_episode["per-graph"], per_episode


def test_auto_devices_add_the_cpu_when_no_seed_fits_the_gpus():
    """devices="auto" (the default): on a graph that the GPUs cannot hold (GPUs of 200 MB; on one
    device its step peaks at 440 MB) every classical seed overflows, so Placeto searches over
    every device and returns a placement that fits (on the CPU's memory); restricted to the GPUs
    (the paper's action space), it cannot."""
    from placer.cluster import Device, make_cluster
    from placer.methods.learned.placeto import PlacetoConfig

    g = layered_training_graph(120, seed=5)
    k80 = preset("k80x2")
    tight = make_cluster("tight", [Device(d.name, d.kind, d.model, 200e6 if d.kind == "gpu" else d.memory_bytes)
                                   for d in k80.devices], 7600.0, 0.0)
    P = Problem(g, tight)
    assert simulate(P, np.zeros(P.n_ops, dtype=np.int64)).peak_memory_bytes[0] > 2 * 200e6
    gpus = run_method("placeto", P, Budget(placements=300), 0, None, devices="gpus")
    auto = run_method("placeto", P, Budget(placements=300), 0, None)
    assert gpus.sim.oom and not auto.sim.oom
    cpu = [d for d, dev in enumerate(tight.devices) if dev.kind == "cpu"]
    assert np.isin(auto.placement.devices, cpu).any()
    # where a seed fits, auto keeps to the GPUs, as the paper
    assert PlacetoConfig().candidates(True) == "gpus" and PlacetoConfig().candidates(False) == "all"



@pytest.mark.parametrize("lr", [0.0, 1e-2])
def test_a_learning_rate_of_zero_freezes_the_policy(problem, lr):
    """``lr_start = lr_end = 0`` (the tables' frozen-policy ablation, what learning buys): the search
    runs as usual, and the network's weights never change; at a positive rate they do."""
    import torch

    from placer.methods.learned.placeto import PlacetoConfig, build_trainer

    cfg = PlacetoConfig(grouping="contiguous:8", workers=2, lr_start=lr, lr_end=lr)
    tr = build_trainer(cfg, [cfg.task(problem, 0)], 0, SimParams.placeto())
    before = {k: v.clone() for k, v in tr.net.state_dict().items()}
    try:
        tr.train(max_placements=80)
    finally:
        tr.close()
    assert tr.update >= 2
    same = all(torch.equal(before[k], v) for k, v in tr.net.state_dict().items())
    assert same == (lr == 0.0)
    res = run_method("placeto", problem, Budget(placements=80), seed=0, sim_params=SimParams.placeto(),
                     grouping="contiguous:8", workers=2, lr_start=lr, lr_end=lr)
    assert res.cost.placements == 80


def test_placeto_follows_the_learned_method_protocol(tmp_path):
    """methods/learned/protocol.py: train -> policy object, its plain state round-trips through a file
    (the caller's job, placer.io), placing with it through the common contract is the protocol's
    place, and fine-tuning returns a result and a policy with other weights."""
    import torch

    from placer.io import read_checkpoint, write_checkpoint
    from placer.methods.base import Evaluator
    from placer.methods.learned.protocol import LearnedMethod, learned_method
    from placer.methods.learned.placeto import PlacetoConfig

    m = learned_method("placeto")
    assert isinstance(m, LearnedMethod)
    P = Problem(layered_training_graph(60, seed=4), preset("k80x2"))
    cfg = PlacetoConfig(grouping="contiguous:6", episodes=4, workers=2)
    records = []
    policy = m.train([P], cfg, 0, SimParams.placeto(), progress=records.append)
    assert len(records) == 4 and records[-1]["episode"] == 4
    write_checkpoint(m.policy_state(policy), tmp_path / "p.pt")
    again = m.load_policy(read_checkpoint(tmp_path / "p.pt"), where=str(tmp_path / "p.pt"))
    placed = m.place(P, again, 1, Evaluator(P, SimParams.placeto(), limit=50), cfg)
    ran = run_method("placeto", P, Budget(placements=50), 1, SimParams.placeto(), policy=again, grouping="contiguous:6")
    assert np.array_equal(placed.placement.devices, ran.placement.devices) and ran.params["policy"] == str(tmp_path / "p.pt")
    tuned_cfg = PlacetoConfig(grouping="contiguous:6", finetune=4, workers=2, refine=1)
    res, tuned = m.finetune(P, again, 1, Evaluator(P, SimParams.placeto(), limit=80), tuned_cfg)
    assert res.cost.placements <= 80 and "fine-tuned 4 episodes" in res.notes
    assert any(not torch.equal(tuned.weights[k], again.weights[k]) for k in again.weights)
    with pytest.raises(Exception, match="not a Placeto checkpoint"):
        m.load_policy({"format": "other"})


def _tiny(tmp_path, n=40, seed=3, name="tiny"):
    path = tmp_path / f"{name}.json"
    save_graph(layered_training_graph(n, seed=seed, name=name), path)
    return path


def test_policy_train_place_and_finetune_with_placeto_end_to_end(tmp_path, capsys, monkeypatch):
    """The one road: `placer policy train|place|finetune -m placeto`, the config's fields as --set items."""
    import torch

    from placer.io import read_checkpoint

    g, pt, tuned = _tiny(tmp_path), tmp_path / "p.pt", tmp_path / "t.pt"
    small = ["--set", "grouping=contiguous:6", "--set", "workers=2"]
    code, out, err = run_cli(capsys, monkeypatch, "policy", "train", "-m", "placeto", "-g", g, "-c", "k80x2",
                             "--set", "episodes=2", *small, "-o", pt, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert (d["method"], d["episodes"], d["graphs"]) == ("placeto", 2, ["tiny"]) and d["sim_calls"] > 0 and pt.exists()
    code, out, err = run_cli(capsys, monkeypatch, "policy", "place", g, "-m", "placeto", "--policy", pt, "-c", "k80x2",
                             *small, "--json")
    assert code == 0, err
    placed = json.loads(out)
    assert placed["step_time_us"] > 0 and "placed with greedy policy, 1 episode(s)" in placed["notes"]
    code, out, err = run_cli(capsys, monkeypatch, "policy", "finetune", g, "-m", "placeto", "--policy", pt, "-c", "k80x2",
                             "--set", "finetune=2", "--set", "refine=1", *small, "-o", tuned, "--json")
    assert code == 0, err
    assert "fine-tuned 2 episodes" in json.loads(out)["notes"]
    a, b = read_checkpoint(str(pt))["model"], read_checkpoint(str(tuned))["model"]
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)
    code, _, err = run_cli(capsys, monkeypatch, "policy", "finetune", g, "-m", "placeto", "--policy", pt, "-c", "k80x2",
                           "-o", tmp_path / "none.pt")
    assert code == 2 and "finetune=N" in err and not (tmp_path / "none.pt").exists()


def test_the_aliases_say_they_are_deprecated_and_run_the_policy_commands(tmp_path, capsys, monkeypatch):
    """`placer train` / `placer place` print one line naming the command they stand for, then do what it
    does: the same policy (every weight) and the same placement as the policy commands given the
    alias's options as --set items."""
    import torch

    from placer.cli.learn import notice
    from placer.io import read_checkpoint

    g = _tiny(tmp_path)
    code, out, err = run_cli(capsys, monkeypatch, "train", "--graph", g, "--out", tmp_path / "a.pt", "--episodes", 2,
                             "--workers", 2, "--grouping", "contiguous:6", "--json")
    assert code == 0, err
    assert err.splitlines()[0] == notice("train") and "`placer policy train -m placeto`" in notice("train")
    code, out2, err = run_cli(capsys, monkeypatch, "policy", "train", "-m", "placeto", "-g", g, "-c", "k80x2",
                              "--sim", "placeto", "-o", tmp_path / "b.pt", "--json", *[x for kv in (
                                  "episodes=2", "workers=2", "grouping=contiguous:6", "devices=gpus") for x in ("--set", kv)])
    assert code == 0, err and notice("train") not in err
    a, b = read_checkpoint(str(tmp_path / "a.pt")), read_checkpoint(str(tmp_path / "b.pt"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]) and a["sim_calls"] == b["sim_calls"]
    code, out, err = run_cli(capsys, monkeypatch, "place", g, "--policy", tmp_path / "a.pt", "--grouping", "contiguous:6",
                             "--json")
    assert code == 0, err
    assert err.splitlines()[0] == notice("place") and "`placer policy place -m placeto`" in notice("place")
    code, out2, err = run_cli(capsys, monkeypatch, "policy", "place", g, "-m", "placeto", "--policy", tmp_path / "a.pt",
                              "-c", "k80x2", "--sim", "placeto", "--json", *[x for kv in (
                                  "place_episodes=8", "greedy=False", "grouping=contiguous:6", "devices=gpus") for x in ("--set", kv)])
    assert code == 0, err
    x, y = json.loads(out), json.loads(out2)
    timeless = ("wall_s", "cpu_s", "lower_bound")  # the bound's record holds the seconds it took

    def same(d):
        return {k: v for k, v in d.items() if k not in timeless}

    assert same(x) == same(y) and x["lower_bound_us"] == y["lower_bound_us"]
    # a made-up schedule end is refused with the --set items to give, before any work
    code, out, err = run_cli(capsys, monkeypatch, "train", "--graph", g, "--out", tmp_path / "c.pt", "--lr", "0.001")
    assert code == 2 and len(err.splitlines()) == 1 and "--set lr_start=0.001 --set lr_end=" in err
    assert not (tmp_path / "c.pt").exists()


def test_policy_help_lists_every_learned_method_of_the_registry(capsys, monkeypatch):
    from placer.methods.learned.protocol import LEARNED

    code, out, err = run_cli(capsys, monkeypatch, "policy", "--help")
    assert code == 0, err
    text = " ".join(out.split())
    assert {"doppler", "giph", "placeto"} <= set(LEARNED) and all(name in text for name in LEARNED), text


def test_policy_train_continues_a_placeto_policy_given_with_set_policy(tmp_path, capsys, monkeypatch):
    """`--set policy=FILE` (the alias's --resume): the trainer resumes where the policy stopped, so
    2 + 2 episodes train the weights 4 straight episodes do; other graphs are refused in one line."""
    import torch

    from placer.io import read_checkpoint

    g = _tiny(tmp_path)
    common = ["policy", "train", "-m", "placeto", "-g", g, "-c", "k80x2", "--set", "grouping=contiguous:6",
              "--set", "workers=2"]
    for name, extra in (("straight", ["--set", "episodes=4"]), ("half", ["--set", "episodes=2"])):
        code, _, err = run_cli(capsys, monkeypatch, *common, *extra, "-o", tmp_path / f"{name}.pt")
        assert code == 0, err
    code, _, err = run_cli(capsys, monkeypatch, "train", "--graph", g, "--episodes", 4, "--workers", 2, "--grouping",
                           "contiguous:6", "--sim", "default", "--devices", "gpus", "--resume", tmp_path / "half.pt",
                           "-o", tmp_path / "resumed.pt", "-c", "k80x2")
    assert code == 0, err
    a, b = read_checkpoint(str(tmp_path / "straight.pt")), read_checkpoint(str(tmp_path / "resumed.pt"))
    assert a["episode"] == b["episode"] == 4 and a["sim_calls"] == b["sim_calls"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    other = _tiny(tmp_path, n=50, seed=8, name="other")
    code, out, err = run_cli(capsys, monkeypatch, "policy", "train", "-m", "placeto", "-g", other, "-c", "k80x2",
                             "--set", "grouping=contiguous:6", "--set", f"policy={tmp_path / 'half.pt'}", "-o",
                             tmp_path / "x.pt")
    assert code == 2 and len(err.splitlines()) == 1 and "resume with the graphs" in err, err
    assert not (tmp_path / "x.pt").exists()
