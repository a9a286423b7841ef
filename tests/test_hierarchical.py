"""The Hierarchical Planner (placer.methods.learned.hierarchical): the Grouper's groupings always expand to
valid placements, group embeddings as section 2 builds them, the obvious best placement found,
determinism, checkpoint resume equality."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placer.methods import Budget, run_method  # noqa: E402
from placer.methods.base import Evaluator  # noqa: E402
from placer.methods.learned.hierarchical import (HIERARCHICAL, HierarchicalConfig, HierarchicalTrainer,  # noqa: E402
                                         group_embeddings, op_adjacency)
from placer.methods.learned.seq2seq_reinforce import op_table  # noqa: E402
from tests.test_colocrl import best_objective, obvious_problem, resumed_equals_straight  # noqa: E402
from tests.test_method_contract import contract_problem  # noqa: E402

SMALL = dict(n_groups=8, hidden=32, device_embed=8, attention=8, grouper_hidden=16)


def test_every_sampled_grouping_expands_to_a_valid_placement():
    P = contract_problem()  # colocation groups, a CPU-only op, 2 GPUs + CPU
    for devices in ("gpus", "all"):
        tr = HierarchicalTrainer(P, HierarchicalConfig(devices=devices, **SMALL), seed=1)
        for _ in range(5):
            ug, lp, ent = tr.sample_grouping()
            assert ug.shape == (tr.units.n_units,) and ((ug >= 0) & (ug < 8)).all()
            X, lp, ent = tr.sample(6)
            assert X.shape == (6, P.n_ops) and torch.isfinite(lp).all()
            for p in X:
                P.validate_placement(p)  # runnable devices, colocation kept
        ops = tr.grouping_of_ops(ug)
        for members in P.graph.colocation_groups():  # a colocation group never spans groups
            assert len(set(ops[members].tolist())) == 1
        P.validate_placement(tr.greedy_placement())


def test_group_embeddings_follow_section_2():
    P = obvious_problem()
    tab = op_table(P, 16)
    M = 5
    op_group = np.arange(P.n_ops) % 4  # group 4 stays empty
    f = group_embeddings(P, tab, op_group, M)
    assert f.shape == (M, 16 + 3 + 2 * M)
    assert np.allclose(f[:4, :16].sum(axis=1), 1.0) and np.allclose(f[4], 0.0)
    adj = f[:, 19:19 + M]
    g = P.graph
    intra = np.bincount(op_group[g.edge_src][op_group[g.edge_src] == op_group[g.edge_dst]], minlength=M)
    assert np.allclose(np.diag(adj), np.log1p(intra) / 5.0, atol=1e-6)
    assert np.allclose(f[:, 19 + M:], adj.T)  # in-row = column of the out-rows
    a = op_adjacency(P, 2)
    assert a.shape == (P.n_ops, 5) and ((a > 0) & (a < 1)).all()


def test_finds_the_obvious_best_placement():
    P = obvious_problem()
    r = run_method("hierarchical", P, Budget(placements=160), seed=0, lr=0.1, placer_start="none",
                   **SMALL)  # the paper's lr and start: learned, not given by the single-GPU start
    assert r.sim.objective_us == pytest.approx(best_objective(P), rel=1e-9)


def test_same_seed_same_placement():
    P = obvious_problem()
    a = run_method("hierarchical", P, Budget(placements=12), seed=5, **SMALL)
    b = run_method("hierarchical", P, Budget(placements=12), seed=5, **SMALL)
    assert np.array_equal(a.placement.devices, b.placement.devices) and a.cost.placements == 12


def test_checkpoint_resume_equals_an_uninterrupted_run(tmp_path):
    P = obvious_problem()
    state = resumed_equals_straight(lambda Q, seed: HierarchicalTrainer(Q, HierarchicalConfig(**SMALL), seed=seed),
                                    tmp_path / "hp.pt")
    # fine-tuning from the policy state through the method
    r, _ = HIERARCHICAL.search(P, 0, Evaluator(P, limit=20), HierarchicalConfig(finetune=1), policy=state)
    assert r.cost.placements == 4 + 1


def test_warm_start_makes_groups_follow_the_order_the_grouper_reads():
    P = obvious_problem(60)
    cfg = HierarchicalConfig(**{**SMALL, "n_groups": 6})
    tr = HierarchicalTrainer(P, cfg, seed=0)
    target = tr.chunk
    assert sorted(np.bincount(target).tolist()) == [10] * 6  # 6 chunks of equal op count

    def spread():
        return np.mean([np.abs(tr.grouping_of_ops(tr.sample_grouping()[0]) - target).mean() for _ in range(10)])

    before = spread()
    loss = tr.warm_start(200)
    assert np.isfinite(loss) and spread() < 0.6 * before


def test_split_start_cuts_the_topological_order_at_equal_compute():
    """8 ops in one chain on 2 equal GPUs, compute 1,1,1,1,4,4,4,4 ms, M = 8 (group g = op g after the
    Grouper's chunks): the middle of op g lies at F_g = (cum[g] + cum[g + 1]) / 2 / 20 of the compute,
    so ops 0-4 (F = 0.025 .. 0.3) go to gpu 0 and ops 5-7 (F = 0.5 .. 0.9) to gpu 1."""
    from placer.cluster import preset
    from placer.graph import OpGraph
    from placer.problem import Problem

    names = [f"op{i}" for i in range(8)]
    c = np.array([1, 1, 1, 1, 4, 4, 4, 4], dtype=float) * 1e3
    g = OpGraph.build(names, [(names[i], names[i + 1], 1e3) for i in range(7)], name="chain",
                      compute_us={"gpu": c, "cpu": 10 * c})
    P = Problem(g, preset("k80x2"))
    tr = HierarchicalTrainer(P, HierarchicalConfig(**{**SMALL, "n_groups": 8}), seed=0)
    t = tr.start_targets()
    assert t["split"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1] and t["single"].tolist() == [0] * 8
    assert tr.start_placement(t["split"]).tolist() == [tr.units.cand[d] for d in t["split"]]


def test_placer_warm_start_reaches_its_mass_and_best_start_is_simulated_once_each():
    from placer.methods.learned.hierarchical import choose_start

    P = obvious_problem(40)
    cfg = HierarchicalConfig(**SMALL)
    tr = HierarchicalTrainer(P, cfg, seed=0)
    ev = Evaluator(P, limit=50)
    name, target = choose_start(tr, ev, cfg)
    assert ev.placements == 2 and name == "single"  # everything on gpu:0 is the best placement there is
    assert ev.best_objective_us == pytest.approx(best_objective(P))
    before = np.mean([(tr.sample(4)[0] == 0).mean() for _ in range(3)])
    steps, reached = tr.placer_warm_start(target, 0.95)
    assert reached >= 0.95 and steps >= 1
    after = np.mean([(tr.sample(4)[0] == 0).mean() for _ in range(3)])
    assert after > 0.9 > before


def test_groups_are_cut_to_the_units_a_small_graph_has():
    """M is at most the number of colocation units: a Grouper cannot fill more groups than it has
    units, and the Placer decides once per group (with M = 256 a 4-op graph took 115 s, 90 of them
    in the Placer's warm start). A graph with at least M units keeps M."""
    P = contract_problem()
    small = SMALL | {"n_groups": 64}
    r = run_method("hierarchical", P, Budget(placements=8), seed=0, **small)
    units = HierarchicalTrainer(P, HierarchicalConfig(**small), seed=0).units.n_units
    assert units < 64
    assert f"M = {units} groups, one per colocation unit (n_groups=64 is more than the graph has units)" in r.notes
    assert f"{units} groups over {units} colocation units" in r.notes
    r = run_method("hierarchical", P, Budget(placements=8), seed=0, **(SMALL | {"n_groups": 2}))
    assert any(n.startswith("2 groups over") for n in r.notes) and not any(n.startswith("M = ") for n in r.notes)


def test_the_split_start_is_the_layer_split_methods_result():
    """The Placer's split start is found as the layer-split method finds it (best over 1..G GPUs);
    on this graph that is 2 of the 4 GPUs, where the split over all 4 (the old start) is slower."""
    from placer.cluster import preset
    from placer.methods.learned.hierarchical import joint_units, split_pieces
    from placer.methods.layer_split import tune_split
    from placer.methods.learned.seq2seq_reinforce import base_units
    from placer.problem import Problem
    from placer.sim import simulate
    from placer.zoo.synthetic import layered_training_graph

    P = Problem(layered_training_graph(60, seed=0), preset("k80x4"))
    ls = run_method("layer-split", P, Budget(placements=400), seed=0).sim.objective_us
    u = base_units(P, "gpus", "hierarchical")
    ev = Evaluator(P)
    piece = split_pieces(P, u.unit_of, u.cand, ev, 24)
    assert simulate(P, u.cand[piece]).objective_us == pytest.approx(ls, rel=1e-12)
    assert ev.best_objective_us == pytest.approx(ls, rel=1e-12)
    joint = joint_units(P, u.unit_of)
    old = tune_split(P, joint, list(u.cand), Evaluator(P), 24)[0][joint]
    assert simulate(P, u.cand[old]).objective_us > ls * 1.2
    r = run_method("hierarchical", P, Budget(placements=120), seed=0, warm_start=20, **SMALL)
    assert r.cost.placements == 120 and r.sim.objective_us <= ls * (1 + 1e-12)
