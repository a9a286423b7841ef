"""GiPH's networks under GiPH's communication model (issue 62, docs/simulator.md): a ``giph-net:``
cluster declares ``giph`` unless ``comm=`` names another, and every simulation of it (a call without
SimParams, the methods' Evaluator, ``placer simulate`` / ``compare``, the bench's runs, timelines
and trained policies) follows that one rule, ``SimParams.preset(name, cluster)``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from conftest import run_cli
from placer.bench import graphs as G
from placer.bench import policies as pol
from placer.bench.experiments_learned import GIPH_TRAIN_NETS, LEARNED_SINCE
from placer.bench.runner import decode_placement, make_plan, run_plan, sim_params
from placer.bench.spec import Experiment, Level, Method, PolicySpec, Row
from placer.bench.tables import render_table
from placer.errors import InputError
from placer.methods.base import Evaluator
from placer.problem import Problem
from placer.resolve import resolve_cluster, resolve_graph
from placer.sim import SimParams, engine, evaluate_many, simulate
from placer.sim.reference_giph import giph_makespan

GRAPH, NET = "giph:tasks=30,seed=5", "giph-net:devices=5,seed=4"


def _problem(net: str = NET, graph: str = GRAPH) -> Problem:
    return Problem(resolve_graph(graph), resolve_cluster(net))


def _placements(P: Problem, k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, P.n_devices, size=(k, P.n_ops))


def test_a_giph_network_simulates_as_giphs_evaluator_by_default():
    """No SimParams, the batch path, the kept engine and the methods' Evaluator: each the GiPH
    authors' evaluator (the Python reference) on every placement, and not Placeto's bus."""
    P = _problem()
    assert P.cluster.meta["comm_model"] == "giph"
    places = _placements(P, 40)
    ref = np.array([giph_makespan(P, p) for p in places])
    got = np.array([simulate(P, p).makespan_us for p in places])
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose(evaluate_many(P, places).makespan_us, ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose([engine(P).objective(p) for p in places], ref, rtol=1e-9, atol=0)
    ev = Evaluator(P)
    assert ev.sim_params.comm_model == "giph"
    bus = np.array([simulate(P, p, SimParams(comm_model="placeto")).makespan_us for p in places])
    assert np.mean(np.abs(bus - ref) / ref) > 0.01  # the models differ on these placements


def test_comm_placeto_gives_the_numbers_of_before():
    """``comm=placeto``: the devices and links as before, its fingerprint the one the committed runs
    recorded, its step times Placeto's bus on the same network, and a step time recorded before the
    network declared a model (:data:`HEFT_80`) re-simulated to its bits."""
    old, new = resolve_cluster("giph-net:devices=12,seed=13,comm=placeto"), resolve_cluster("giph-net:devices=12,seed=13")
    assert G.cluster_fingerprint(old) == "0bc67c8c2b8afaac" != G.cluster_fingerprint(new)
    assert np.array_equal(old.bandwidth_bytes_per_us, new.bandwidth_bytes_per_us)
    assert np.array_equal(old.latency_us, new.latency_us)
    g = resolve_graph("giph:tasks=80,seed=103")
    Po, Pn = Problem(g, old), Problem(g, new)
    for p in _placements(Po, 10, seed=1):
        assert simulate(Po, p).makespan_us == simulate(Pn, p, SimParams(comm_model="placeto")).makespan_us
    p = np.array([int(ch, 36) for ch in HEFT_80["devices"]])
    assert simulate(Po, p).makespan_us == HEFT_80["step_time_us"]
    under_giph = simulate(Pn, p).makespan_us
    assert under_giph == pytest.approx(giph_makespan(Pn, p), rel=1e-9)
    assert abs(under_giph / HEFT_80["step_time_us"] - 1) > 1e-3  # the default model scores it otherwise


# HEFT's placement of giph:tasks=80,seed=103 on giph-net:devices=12,seed=13 and its step time under
# Placeto's model, as the learned-since run made at commit 11e8a65b recorded them (cluster
# fingerprint 0bc67c8c2b8afaac; the run file heft-critical-path__s0__d57da227a2ac46f2)
HEFT_80 = {"devices": "a6b0566ab05566665a86ba0b30b65556666008b6536b666635bb6b566056b06b6b0666056b656ab6",
           "step_time_us": 12169.583196848616}


def test_every_giph_net_setting_names_the_model(capsys, monkeypatch):
    for model in ("placeto", "p2p", "giph", "link"):
        assert resolve_cluster(f"{NET},comm={model}").meta["comm_model"] == model
    with pytest.raises(InputError, match="comm=bus: is not a communication model"):
        resolve_cluster(f"{NET},comm=bus")
    with pytest.raises(InputError, match="is not a communication model"):
        from placer.zoo.giph import device_network

        device_network(4, 1, comm="nccl")
    code, out, err = run_cli(capsys, monkeypatch, "simulate", GRAPH, "--cluster", f"{NET},comm=bus", "--placement",
                             "single:0")
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "comm=bus" in err and "placeto, p2p, giph, link" in err
    assert "Traceback" not in err and out == ""


def test_the_cli_follows_the_network_unless_sim_overrides(capsys, monkeypatch, tmp_path):
    P = _problem()
    p = _placements(P, 1, seed=3)[0]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "placer", "version": 1, "kind": "placement",
                                "placement": {n: P.cluster.device_names[d] for n, d in zip(P.graph.op_names, p)}}))
    got = {}
    for net, sim in ((NET, "default"), (NET, "placeto"), (f"{NET},comm=placeto", "default"), (f"{NET},comm=placeto", "giph")):
        code, out, err = run_cli(capsys, monkeypatch, "simulate", GRAPH, "--cluster", net, "--placement", path,
                                 "--sim", sim, "--json")
        assert code == 0, err
        got[(net, sim)] = json.loads(out)["makespan_us"]
    assert got[(NET, "default")] == pytest.approx(giph_makespan(P, p), rel=1e-9)
    assert got[(f"{NET},comm=placeto", "giph")] == got[(NET, "default")]
    assert got[(f"{NET},comm=placeto", "default")] == simulate(P, p, SimParams(comm_model="placeto")).makespan_us
    assert got[(NET, "placeto")] == simulate(P, p, SimParams.placeto()).makespan_us
    code, out, err = run_cli(capsys, monkeypatch, "compare", GRAPH, "--cluster", NET, "--methods", "heft",
                             "--budget", "5", "--json")
    assert code == 0, err
    assert json.loads(out)["comm_model"] == "giph"
    code, out, err = run_cli(capsys, monkeypatch, "compare", GRAPH, "--cluster", NET, "--methods", "heft",
                             "--budget", "5")
    assert code == 0 and "giph communication model" in " ".join(out.split())


def _experiment(sim: str = "default") -> Experiment:
    return Experiment(name="gc", title="t", paper="none", sim=sim,
                      rows=(Row("giph", GRAPH, NET), Row("bus", GRAPH, f"{NET},comm=placeto"),
                            Row("k80", "synthetic", "k80x2")),
                      methods=(Method("HEFT", "heft", seeded=False), Method("random", "random")),
                      budgets={lv: Level(4) for lv in ("quick", "default", "paper")})


def test_the_bench_runs_each_row_under_its_clusters_model(tmp_path):
    """The run's spec (its hash) and its recorded step time follow the row's cluster; a row whose
    cluster declares no model keeps the simulator settings (and so the hashes) it had; the table
    says each row's model; ``sim="placeto"`` overrides every cluster."""
    plan = make_plan(_experiment(), "quick", tmp_path)
    by_row = {c.row.row.label: c for c in plan.cells if c.method.label == "random"}
    assert {k: c.task.spec["sim"]["comm_model"] for k, c in by_row.items()} == \
        {"giph": "giph", "bus": "placeto", "k80": "placeto"}
    assert by_row["k80"].task.spec["sim"] == dataclasses.asdict(SimParams())  # as every experiment-wide doc was
    assert by_row["giph"].hash != by_row["bus"].hash
    run_plan(plan)
    for c in plan.cells:
        assert c.status == "ok", c.reason
        P = Problem(c.row.graph, c.row.cluster)
        p = decode_placement(c.doc["placement"])
        want = giph_makespan(P, p) if c.row.row.label == "giph" else simulate(P, p, SimParams()).makespan_us
        assert c.doc["result"]["step_time_us"] == pytest.approx(want, rel=1e-9)
    table, _ = render_table(plan)
    head, _, *rows = table.splitlines()
    cols = [x.strip() for x in head.strip("|").split("|")]
    k = cols.index("comm model")
    assert [[x.strip() for x in r.strip("|").split("|")][k] for r in rows] == ["giph", "placeto", "placeto"]
    fixed = make_plan(_experiment("placeto"), "quick", tmp_path / "fixed")
    assert {c.task.spec["sim"]["comm_model"] for c in fixed.cells} == {"placeto"}
    assert all(c.task.spec["sim"] == dataclasses.asdict(SimParams.placeto()) for c in fixed.cells)
    assert "comm model" not in render_table(fixed)[0].splitlines()[0]  # every row Placeto's: no column


def test_learned_since_gives_giphs_rows_giphs_model_and_its_policy_trains_under_it(tmp_path):
    """The learned-since GiPH rows and the networks GiPH's policy trains on declare giph, the DOPPLER
    rows (K80 presets) Placeto's; the policy's hash covers the model; a policy whose training
    networks declare two models is refused."""
    models = {r.label: sim_params(LEARNED_SINCE.sim, resolve_cluster(r.cluster)).comm_model for r in LEARNED_SINCE.rows}
    assert {m for k, m in models.items() if k.startswith("GiPH")} == {"giph"}
    assert {m for k, m in models.items() if k.startswith("DOPPLER")} == {"placeto"}
    ctx = pol.prepare(LEARNED_SINCE, "giph", "quick", tmp_path, LEARNED_SINCE.sim)
    assert ctx.key["sim"] == dataclasses.asdict(SimParams(comm_model="giph"))
    assert pol.training_params(ctx.problems, "default") == SimParams(comm_model="giph")
    assert pol.training_params(ctx.problems, "placeto") == SimParams.placeto()
    assert {P.cluster.name for P in ctx.problems} == set(GIPH_TRAIN_NETS)
    mixed = dataclasses.replace(LEARNED_SINCE, policies={"giph": dataclasses.replace(
        LEARNED_SINCE.policies["giph"], clusters=(GIPH_TRAIN_NETS[0], GIPH_TRAIN_NETS[1] + ",comm=placeto"))})
    with pytest.raises(InputError, match="declare different communication models"):
        pol.prepare(mixed, "giph", "quick", tmp_path, mixed.sim)
    assert isinstance(LEARNED_SINCE.policies["giph"], PolicySpec)


def test_placer_policy_train_follows_the_networks_and_refuses_two_models(capsys, monkeypatch, tmp_path):
    """``placer policy train`` takes the training networks' model by the bench's rule: networks that
    declare two models are refused in one line before any training, nothing written."""
    out = tmp_path / "giph.pt"
    args = ["policy", "train", "-m", "giph", "-g", "giph:tasks=8,seed=1", "-o", out, "--budget", "4",
            "-c", "giph-net:devices=3,seed=1", "-c", "giph-net:devices=4,seed=2,comm=placeto"]
    code, _, err = run_cli(capsys, monkeypatch, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "declare different communication models (giph, placeto)" in err and not out.exists()
    code, _, err = run_cli(capsys, monkeypatch, *args[:-1], "giph-net:devices=4,seed=2")
    assert code == 0, err
    assert out.exists()


def test_a_saved_network_keeps_its_model_and_fingerprint(tmp_path):
    """A network written as a cluster file (``placer cluster show --json``, ``save_cluster``) declares
    its model there (``comm_model``) and reads back with the same fingerprint."""
    from placer.frontends.native import save_cluster

    for net in (NET, f"{NET},comm=placeto", f"{NET},comm=link"):
        c = resolve_cluster(net)
        save_cluster(c, tmp_path / "c.json")
        back = resolve_cluster(str(tmp_path / "c.json"))
        assert back.meta.get("comm_model", "placeto") == c.meta["comm_model"]
        assert G.cluster_fingerprint(back) == G.cluster_fingerprint(c)
    fps = {G.cluster_fingerprint(resolve_cluster(f"{NET},comm={m}")) for m in ("placeto", "p2p", "giph", "link")}
    assert len(fps) == 4
