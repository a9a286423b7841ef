"""Placeto's policy network: reachability sets, permutation invariance under node relabelling,
one set of weights on graphs of any size, masking, batching."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings, strategies as st  # noqa: E402

from placer.nn.features import N_STATIC, GraphTensors, reachability, static_features  # noqa: E402
from placer.nn.placeto import PlacetoNet, PolicyConfig, count_parameters, entropy_of  # noqa: E402


def random_dag(n: int, p: float, seed: int):
    rng = np.random.default_rng(seed)
    src, dst = np.nonzero(np.triu(rng.random((n, n)) < p, k=1))
    return src.astype(np.int64), dst.astype(np.int64)


def brute_reach(n, src, dst):
    R = np.zeros((n, n), dtype=bool)
    R[src, dst] = True
    for k in range(n):  # Warshall
        R |= R[:, k:k + 1] & R[k:k + 1, :]
    return R


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 25), p=st.floats(0.0, 0.5), seed=st.integers(0, 10_000))
def test_reachability_matches_transitive_closure(n, p, seed):
    src, dst = random_dag(n, p, seed)
    perm = np.random.default_rng(seed).permutation(n)  # any numbering, not only topological
    src, dst = perm[src], perm[dst]
    ap, ai, dp, di = reachability(n, src, dst)
    R = brute_reach(n, src, dst)
    for v in range(n):
        assert ai[ap[v]:ap[v + 1]].tolist() == np.flatnonzero(R[:, v]).tolist()
        assert di[dp[v]:dp[v + 1]].tolist() == np.flatnonzero(R[v, :]).tolist()


def test_reachability_refuses_a_cycle():
    with pytest.raises(ValueError):
        reachability(3, np.array([0, 1, 2]), np.array([1, 2, 0]))


def make_graph(n, A, seed, p=0.2):
    rng = np.random.default_rng(seed)
    src, dst = random_dag(n, p, seed)
    static = static_features(rng.lognormal(0, 1, (n, A)), rng.lognormal(0, 1, n), rng.random(n) * 1e9, 1e10)
    feasible = np.ones((n, A), dtype=bool)
    return static, src, dst, feasible


def states(n, A, B, seed):
    rng = np.random.default_rng(seed)
    return (torch.as_tensor(rng.integers(0, A, (B, n))), torch.as_tensor(rng.integers(0, n, B)),
            torch.as_tensor(rng.random((B, n)) < 0.5))


@pytest.mark.parametrize("pool", ["sum", "mean"])
def test_output_is_invariant_to_node_relabelling(pool):
    torch.manual_seed(0)
    n, A, B = 30, 3, 6
    net = PlacetoNet(PolicyConfig(n_actions=A, pool=pool))
    static, src, dst, feasible = make_graph(n, A, seed=1)
    pl, node, placed = states(n, A, B, seed=2)
    gt = GraphTensors.build(static, src, dst, feasible)
    perm = np.random.default_rng(3).permutation(n)  # old node i becomes perm[i]
    inv = np.argsort(perm)
    gt2 = GraphTensors.build(static[inv], perm[src], perm[dst], feasible[inv])
    pl2, placed2 = pl[:, inv], placed[:, inv]
    node2 = torch.as_tensor(perm)[node]
    with torch.no_grad():
        a = net(gt, pl, node, placed)
        b = net(gt2, pl2, node2, placed2)
        # the per-node embeddings are relabelled the same way
        from placer.nn.features import state_features
        ea = net.embed(state_features(gt, pl, node, placed), gt)
        eb = net.embed(state_features(gt2, pl2, node2, placed2), gt2)
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)
    assert torch.allclose(ea, eb[:, perm], atol=1e-5)
    # a different state gives a different output (the test can fail)
    with torch.no_grad():
        c = net(gt, pl, (node + 1) % n, placed)
    assert not torch.allclose(a, c)


def test_one_set_of_weights_runs_on_graphs_of_any_size():
    torch.manual_seed(1)
    A = 2
    net = PlacetoNet(PolicyConfig(n_actions=A))
    n_params = count_parameters(net)
    for n, p in [(1, 0.0), (7, 0.4), (60, 0.1), (400, 0.01)]:
        static, src, dst, feasible = make_graph(n, A, seed=n, p=p)
        gt = GraphTensors.build(static, src, dst, feasible)
        pl, node, placed = states(n, A, 4, seed=n)
        logits = net(gt, pl, node, placed)
        probs = torch.softmax(logits, dim=-1)
        assert logits.shape == (4, A)
        assert torch.isfinite(logits).all()
        assert torch.allclose(probs.sum(-1), torch.ones(4))
        logits.sum().backward()  # gradients flow on every size
    assert count_parameters(net) == n_params
    assert all(p.grad is not None for p in net.parameters())


def test_batched_forward_equals_one_state_at_a_time():
    torch.manual_seed(2)
    n, A = 25, 2
    net = PlacetoNet(PolicyConfig(n_actions=A))
    gt = GraphTensors.build(*make_graph(n, A, seed=4))
    pl, node, placed = states(n, A, 5, seed=5)
    with torch.no_grad():
        batch = net(gt, pl, node, placed)
        single = torch.cat([net(gt, pl[i:i + 1], node[i:i + 1], placed[i:i + 1]) for i in range(5)])
    assert torch.allclose(batch, single, atol=1e-6)


def test_infeasible_devices_get_zero_probability():
    torch.manual_seed(3)
    n, A = 10, 3
    static, src, dst, feasible = make_graph(n, A, seed=6)
    feasible[:, 2] = False
    feasible[4] = [False, True, False]
    gt = GraphTensors.build(static, src, dst, feasible)
    net = PlacetoNet(PolicyConfig(n_actions=A))
    pl = torch.zeros(n, n, dtype=torch.long)
    node = torch.arange(n)
    logits = net(gt, pl, node, torch.zeros(n, n, dtype=torch.bool))
    probs = torch.softmax(logits, dim=-1)
    assert (probs[:, 2] == 0).all()
    assert probs[4, 1] == 1.0
    ent = entropy_of(logits)
    assert torch.isfinite(ent).all() and ent[4] == 0


def test_static_features_are_scale_free():
    rng = np.random.default_rng(0)
    c, o, m = rng.lognormal(0, 1, (20, 2)), rng.lognormal(0, 1, 20), rng.random(20) * 1e9
    a = static_features(c, o, m, 1e10)
    b = static_features(c * 1000.0, o * 7.0, m, 1e10)  # other units / batch size
    assert a.shape == (20, N_STATIC)
    assert np.allclose(a, b, rtol=1e-5)
    assert np.allclose(a[:, :2].mean(axis=0), 1.0, rtol=1e-5)


@pytest.mark.parametrize("pool,keep", [("sum", 0.0), ("mean", 0.0), ("sum", 1.1)])
def test_numpy_rollout_forward_matches_torch(pool, keep):
    from placer.nn.fast import NumpyPolicy

    torch.manual_seed(4)
    n, A = 40, 3
    static, src, dst, feasible = make_graph(n, A, seed=8)
    feasible[3, 0] = False
    gt = GraphTensors.build(static, src, dst, feasible)
    net = PlacetoNet(PolicyConfig(n_actions=A, pool=pool, keep_bias=keep))
    fast, cache = NumpyPolicy(net), NumpyPolicy.graph_cache(gt)
    pl, node, placed = states(n, A, 6, seed=9)
    node[0] = 3
    with torch.no_grad():
        want = net(gt, pl, node, placed).numpy()
    for b in range(6):
        got = fast.logits(gt, cache, pl[b].numpy(), int(node[b]), placed[b].numpy())
        assert np.array_equal(np.isinf(got), np.isinf(want[b]))
        fin = np.isfinite(got)
        assert np.allclose(got[fin], want[b][fin], atol=1e-5)


def test_keep_bias_favours_the_current_device_and_is_learned():
    """The initial logit bonus of the group's current device: exactly keep_bias more than without it,
    and a trainable parameter (the policy can learn to move more)."""
    torch.manual_seed(2)
    n, A = 30, 2
    static, src, dst, feasible = make_graph(n, A, seed=3)
    gt = GraphTensors.build(static, src, dst, feasible)
    plain = PlacetoNet(PolicyConfig(n_actions=A))
    torch.manual_seed(2)
    kept = PlacetoNet(PolicyConfig(n_actions=A, keep_bias=1.1))
    pl, node, placed = states(n, A, 5, seed=1)
    a, b = plain(gt, pl, node, placed), kept(gt, pl, node, placed)
    cur = pl[torch.arange(5), node]
    diff = (b - a).detach()
    assert torch.allclose(diff[torch.arange(5), cur], torch.full((5,), 1.1), atol=1e-6)
    assert torch.allclose(diff[torch.arange(5), 1 - cur], torch.zeros(5), atol=1e-6)
    b.logsumexp(-1).sum().backward()
    assert kept.keep.grad is not None and float(kept.keep.grad) != 0.0


def test_the_method_keeps_a_unit_as_often_on_any_number_of_candidates():
    """PlacetoConfig's network adds keep_bias + ln(A - 1) to the current device's logit, so the
    untrained policy keeps a unit where it is about as often (0.75 at keep_bias 1.1) on 2, 4 and 8
    candidates; the plain bonus of 1.1 keeps it about 50% and 30% of the time on 4 and 8."""
    from placer.methods.learned.placeto import PlacetoConfig

    def kept(pc, A):
        torch.manual_seed(0)
        net = PlacetoNet(pc)
        gt = GraphTensors.build(*make_graph(40, A, seed=5))
        pl, node, placed = states(40, A, 64, seed=6)
        with torch.no_grad():
            prob = torch.softmax(net(gt, pl, node, placed), -1)
        return float(prob[torch.arange(64), pl[torch.arange(64), node]].mean())

    cfg = PlacetoConfig()
    for A in (2, 4, 8):
        assert kept(cfg.policy_config(A), A) == pytest.approx(0.75, abs=0.08)
    assert kept(PolicyConfig(n_actions=8, keep_bias=cfg.keep_bias), 8) < 0.4
