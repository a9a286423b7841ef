"""DOPPLER (placer.methods.learned.doppler) and its workloads (placer.zoo.doppler): the dual policy picks only
schedulable nodes and feasible devices, imitation moves it toward the teacher, search mode keeps the
contract, a policy state round-trips and places another cluster size, and the zoo graphs have the
paper's node counts."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

from placer.cluster import preset
from placer.errors import InputError
from placer.methods import Budget, run_method
from placer.methods.learned import doppler as D
from placer.nn.threads import one_thread
from placer.problem import Problem
from placer.zoo import BUILTIN
from placer.zoo.doppler import PAPER_NODES, chain_mm
from placer.zoo.synthetic import layered_training_graph
from tests.test_method_contract import contract_problem

FAST = {"hidden": 16, "layers": 2, "il_steps": 300, "il_patience": 50}


@pytest.fixture(scope="module")
def small():
    """Colocation groups, an op only the CPU can run, two GPUs and a CPU (the contract's problem)."""
    return contract_problem()


@pytest.mark.parametrize("name", sorted(PAPER_NODES))
def test_zoo_graphs_have_the_papers_node_counts_and_are_dags(name):
    g = BUILTIN[name]()
    assert g.n_ops == PAPER_NODES[name]
    assert (g.edge_src < g.edge_dst).all()  # ops in a topological order: a DAG
    assert g.meta["source"] == "doppler" and "not a training step" in g.meta["description"]
    mm = np.array([t == "matmul" for t in g.op_types])
    assert mm.any() and (g.flops[mm] > 0).all() and (g.edge_bytes > 0).all()
    P = Problem(g, preset("k80x4"))  # roofline costs on the GPU model
    assert set(P.cost_sources) == {"roofline"} and np.isfinite(P.compute_us).all()


def test_chain_mm_follows_the_3d_algorithm():
    g = chain_mm()
    kinds = {k: g.op_types.count(k) for k in set(g.op_types)}
    assert kinds == {"input": 24, "matmul": 64, "add": 24}  # 4x2 . 2x4 . 4x2 blocks


def test_episode_picks_schedulable_nodes_and_feasible_devices(small):
    import torch

    cfg = D.DopplerConfig(**FAST)
    torch.manual_seed(0)
    c, net = D.Ctx(small, cfg), D.make_net(cfg)
    rec = D.episode(c, D.embed_np(net, c, D.tensors_of(c)), net, np.random.default_rng(1), eps=0.3)
    placed = set()
    g = c.P.graph
    for v, C, k, a, ok in zip(rec.order, rec.step_cands(), rec.sel_k, rec.act, rec.plc_ok):
        assert C[k] == v and v not in placed
        for u in C.tolist():  # every candidate is schedulable: all its predecessors assigned
            assert set(g.pred_idx[g.pred_ptr[u]:g.pred_ptr[u + 1]].tolist()) <= placed
        assert ok[a] and np.isfinite(c.cost[v, a])
        placed.add(v)
    assert len(placed) == c.N
    p = c.expand(rec.placement)
    small.validate_placement(p)
    for members in g.colocation_groups():  # colocation groups share a device
        assert len(set(p[members].tolist())) == 1
    cpu_only = np.flatnonzero(~np.isfinite(small.compute_us[:, 0]))
    assert (p[cpu_only] == 2).all()


def test_batched_log_probs_replay_the_rollouts_choices(small):
    """log_probs scores a recorded episode in one batched pass (distinct SEL rows once, steps
    padded): per step it equals what the rollout's own float64 scores gave, sampled or replayed."""
    import torch

    cfg = D.DopplerConfig(**FAST)
    torch.manual_seed(0)
    P = Problem(layered_training_graph(40, seed=3), preset("k80x4"))
    for prob in (small, P):
        c, net = D.Ctx(prob, cfg), D.make_net(cfg)
        t = D.tensors_of(c)
        sampled = D.episode(c, D.embed_np(net, c, t), net, np.random.default_rng(2), eps=0.3)
        for rec in (sampled, D.teacher_record(c, net, cfg)):
            C = rec.step_cands()
            assert len(rec.row_x) <= len(rec.cands) and np.array_equal(rec.row_node[rec.cand_row], rec.cands)
            assert [C[i][k] for i, k in enumerate(rec.sel_k)] == rec.order.tolist()
            lp, ent, _, _ = D.log_probs(net, c, t, rec)
            assert np.allclose(lp.detach().double().numpy(), rec.logp, atol=1e-5, rtol=0)
            assert float(lp.detach().sum()) == pytest.approx(rec.logp.sum(), rel=1e-5)
            assert (rec.logp < 0).any() and float(ent) > 0
            lp.sum().backward()  # the replay is differentiable through both heads and the embedding
            assert all(bool(p.grad.abs().sum() > 0) for n, p in net.named_parameters() if n.endswith("weight"))
            net.zero_grad()


def test_imitation_moves_the_policy_toward_the_teacher():
    import torch

    P = Problem(layered_training_graph(40, seed=3), preset("k80x2"))
    cfg = D.DopplerConfig(**FAST)
    torch.manual_seed(0)
    c, net = D.Ctx(P, cfg), D.make_net(cfg)
    teacher = D.teacher_record(c, net, cfg)
    tens = D.tensors_of(c)

    def greedy_match():
        r = D.episode(c, D.embed_np(net, c, tens), net)
        return float((r.placement == teacher.placement).mean())

    with one_thread():  # torch's default threads fight over CI's shared cores
        before = greedy_match()
        loss0 = float(-D.log_probs(net, c, tens, teacher)[0].mean().detach())
        info = D.imitate(net, [c], [teacher], cfg)
        after = greedy_match()
    assert info["il_loss"] < 0.5 * loss0
    assert after > before
    assert info["sel_acc"] > 0.9 and info["plc_acc"] > 0.8


def test_search_keeps_the_contract(small):
    a = run_method("doppler", small, Budget(12), seed=4, **FAST)
    b = run_method("doppler", small, Budget(12), seed=4, **FAST)
    assert np.array_equal(a.placement.devices, b.placement.devices)
    assert a.cost.placements <= 12 and a.cost.placements == 12
    assert a.sim.objective_us <= min(y for _, y in a.curve) * (1 + 1e-12)  # never worse than the best evaluated
    assert any("Stage I: teacher heft" in n for n in a.notes)


def test_policy_state_round_trip_other_cluster_size_and_refusals():
    small2 = Problem(chain_mm(256), preset("k80x2"))
    cfg = D.DopplerConfig(**FAST)
    state = D.DOPPLER_METHOD.train([small2], cfg, seed=0, placements=6)
    assert state["format"] == D.FORMAT and D.DOPPLER_METHOD.load_policy(state) is state
    big = Problem(chain_mm(256), preset("k80x4"))  # per-device PLC: another device count is fine
    r = run_method("doppler", big, Budget(3), 0, policy=state, finetune=1, **FAST)
    assert r.cost.placements == 2 and r.params["policy"] == "given"
    z = D.DOPPLER_METHOD.place(big, state, 0, _ev(big), cfg)
    z2 = D.DOPPLER_METHOD.place(big, state, 0, _ev(big), cfg)
    assert np.array_equal(z.placement.devices, z2.placement.devices)
    with pytest.raises(InputError, match="not a doppler checkpoint"):
        D.DOPPLER_METHOD.load_policy({"format": "placer-gdp-1", "model": {}})
    with pytest.raises(InputError, match="network shape"):
        run_method("doppler", big, Budget(2), 0, policy=state, **{**FAST, "hidden": 32})
    with pytest.raises(InputError, match="file name"):
        D.DOPPLER_METHOD.load_policy("policy.pt")


def test_unknown_parameter_and_bad_teacher_refused(small):
    with pytest.raises(InputError, match="teacher"):
        run_method("doppler", small, Budget(2), 0, teacher="random")
    with pytest.raises(InputError, match="not parameters"):
        run_method("doppler", small, Budget(2), 0, temperature=1.0)


def _ev(problem):
    from placer.methods.base import Evaluator

    return Evaluator(problem, limit=4)
