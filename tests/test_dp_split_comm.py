"""dp-split's segment transfer costs (issue 64): the incremental ``segment_comm`` equals, bit for bit,
the sum it replaces, written here from its definition (every op of order[i:j] with a successor
outside, then each of its outside parents once, summed block by block in that order)."""

import numpy as np
import pytest

from placer.methods.dp_split import segment_comm


def direct(order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B):
    pos = np.empty(B, dtype=np.int64)
    pos[order] = np.arange(B)
    comm = np.zeros((B + 1, B + 1))
    for i in range(B):
        for j in range(i + 1, B + 1):
            inside = lambda w: i <= pos[block_of[w]] < j
            c, seen = 0.0, set()
            for x in range(i, j):
                for v in bops[bptr[order[x]]:bptr[order[x] + 1]]:
                    if any(not inside(s) for s in succ_idx[succ_ptr[v]:succ_ptr[v + 1]]):
                        c += cost[v]
                    for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]]:
                        if not inside(u) and u not in seen:
                            seen.add(u)
                            c += cost[u]
            comm[i, j] = c
    return comm


def random_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (int(rng.integers(0, 3 * n)), 2)) if a < b}
                   | {(k, k + 1) for k in range(n - 1) if rng.random() < 0.5})
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)

    def csr(a, b):
        o = np.lexsort((b, a))
        return np.concatenate([[0], np.cumsum(np.bincount(a, minlength=n))]).astype(np.int64), b[o].astype(np.int64)

    succ_ptr, succ_idx = csr(src, dst)
    pred_ptr, pred_idx = csr(dst, src)
    B = int(rng.integers(1, n + 1))
    block_of = np.sort(rng.integers(0, B, n)) if rng.random() < 0.5 else rng.integers(0, B, n)
    block_of = np.unique(block_of, return_inverse=True)[1].astype(np.int64)  # every block non-empty
    B = int(block_of.max()) + 1
    members = [np.flatnonzero(block_of == k) for k in range(B)]
    bptr = np.concatenate([[0], np.cumsum([len(x) for x in members])]).astype(np.int64)
    bops = np.concatenate(members).astype(np.int64)
    order = rng.permutation(B).astype(np.int64) if rng.random() < 0.7 else np.arange(B, dtype=np.int64)
    cost = rng.random(n) * 10.0 ** rng.integers(-3, 6, n)  # magnitudes apart: the order of additions shows
    return order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B


@pytest.mark.parametrize("seed", range(40))
def test_segment_comm_equals_the_direct_sum_bit_for_bit(seed):
    args = random_case(seed)
    got, want = segment_comm(*args), direct(*args)
    assert got.shape == want.shape
    assert np.array_equal(got, want), np.argwhere(got != want)[:3]


def test_some_case_has_segments_whose_terms_come_and_go():
    """The cases above reach the incremental path's interesting part: a term dropped before the last."""
    hit = 0
    for seed in range(40):
        order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B = random_case(seed)
        comm = direct(order, bptr, bops, block_of, succ_ptr, succ_idx, pred_ptr, pred_idx, cost, B)
        hit += any(0 < comm[i, j + 1] < comm[i, j] for i in range(B) for j in range(i + 1, B))
    assert hit >= 5
