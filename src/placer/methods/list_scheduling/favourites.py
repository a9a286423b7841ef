"""m-SCT's favourite children (Baechi, Jeon et al., SoCC 2020, section 4.3, after Hanen and Munier's
SCT, 1995): each op gets at most one favourite child and each child at most one favourite parent,
and the ETF pass keeps a favourite child on its parent's device.

Two ways to pick them (``SctConfig.favourites``):

``"critical-path"`` (the default): a greedy matching along the longest paths. With every edge
paying its mean transfer time, an edge ``e = (i, j)`` lies on a longest path of length
``tl_i + p_i + c_e + bl_j`` (``tl``: longest path from an entry to the op's start; ``bl``: from
the op's start to an exit, its own cost included). Edges are taken from the longest such path
down (ties: the costlier transfer, then the lower edge index), and ``e`` becomes a favourite when
neither ``i`` has a favourite child nor ``j`` a favourite parent yet. It is the rounding the LP below
aims at (its optimum zeroes the transfers of the longest paths first), in O(e log e), where
HiGHS's dual simplex on the LP grew about with the square of the graph (9.5 s at 10k ops, 51 s
at 20k: docs/methods/list_scheduling.md).

``"lp"``: the relaxed SCT linear program, as Baechi solves it, with scipy's HiGHS. Variables
``x_e`` in [0, 1] per edge e = (i, j) (0: j is i's favourite child, so no communication on e),
start times ``s_i >= 0`` and the makespan ``w``::

    minimise   w
    subject to s_i + p_i + c_e x_e <= s_j               for every edge e = (i, j)
               s_i + p_i <= w                           for every op i
               sum_{j in succ(i)} x_ij >= |succ(i)| - 1  (at most one favourite child)
               sum_{i in pred(j)} x_ij >= |pred(j)| - 1  (at most one favourite parent)

Rounding ``x_e < 1/2`` to 0 keeps both "at most one" constraints (two values below 1/2 would sum
below 1). The LP is degenerate (only the critical edges' values matter to ``w``), so which optimal
vertex, and which favourites off the critical paths, depends on the solver's path.

``p_i`` is the op's mean compute time, ``c_e`` the mean transfer time of the edge's bytes.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from placer.methods.list_scheduling.state import bottom_level


def top_level(problem, cost_us: np.ndarray, edge_comm_us: np.ndarray) -> np.ndarray:
    """Longest path from an entry to each op's start, op and edge costs included (ops are stored in
    a topological order)."""
    g = problem.graph
    tl = np.zeros(g.n_ops)
    pp, pi, pe = g.pred_ptr, g.pred_idx, g.pred_edge
    for j in range(g.n_ops):
        a, b = pp[j], pp[j + 1]
        if b > a:
            ps = pi[a:b]
            tl[j] = (tl[ps] + cost_us[ps] + edge_comm_us[pe[a:b]]).max()
    return tl


def critical_path_favourites(problem, p_us: np.ndarray, c_us: np.ndarray) -> np.ndarray:
    """(n,) favourite child of each op (-1: none): the greedy matching along the longest paths (module
    docstring)."""
    g = problem.graph
    n, m = g.n_ops, g.n_edges
    fav = np.full(n, -1, dtype=np.int64)
    if m == 0:
        return fav
    p = np.asarray(p_us, dtype=np.float64)
    c = np.asarray(c_us, dtype=np.float64)
    src, dst = g.edge_src, g.edge_dst
    through = top_level(problem, p, c)[src] + p[src] + c + bottom_level(problem, p, c)[dst]
    order = np.lexsort((np.arange(m), -np.round(c, 6), -np.round(through, 6)))  # last key first
    has_parent = [False] * n
    favl = [-1] * n
    for i, j in zip(src[order].tolist(), dst[order].tolist()):
        if favl[i] < 0 and not has_parent[j]:
            favl[i] = j
            has_parent[j] = True
    fav[:] = favl
    return fav


def favourite_children(problem, p_us: np.ndarray, c_us: np.ndarray) -> np.ndarray:
    """(n,) favourite child of each op (-1: none) from the rounded LP solution (HiGHS)."""
    g = problem.graph
    n, m = g.n_ops, g.n_edges
    fav = np.full(n, -1, dtype=np.int64)
    if m == 0:
        return fav
    src, dst = g.edge_src, g.edge_dst
    nv = m + n + 1
    W = m + n
    rows, cols, vals, rhs = [], [], [], []
    r = 0
    e = np.arange(m)
    # precedence with communication: s_i - s_j + c_e x_e <= -p_i
    rows += [e, e, e]
    cols += [m + src, m + dst, e]
    vals += [np.ones(m), -np.ones(m), np.asarray(c_us, dtype=np.float64)]
    rhs.append(-np.asarray(p_us)[src])
    r += m
    # makespan: s_i - w <= -p_i
    i = np.arange(n)
    rows += [r + i, r + i]
    cols += [m + i, np.full(n, W)]
    vals += [np.ones(n), -np.ones(n)]
    rhs.append(-np.asarray(p_us, dtype=np.float64))
    r += n
    # at most one favourite child / parent: -sum x <= -(k - 1) where k >= 2
    for ptr, eids in ((g.succ_ptr, g.succ_edge), (g.pred_ptr, g.pred_edge)):
        deg = np.diff(ptr)
        for op in np.flatnonzero(deg >= 2):
            es = eids[ptr[op]:ptr[op + 1]]
            rows.append(np.full(len(es), r))
            cols.append(es)
            vals.append(-np.ones(len(es)))
            rhs.append(np.array([-(deg[op] - 1.0)]))
            r += 1
    A = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv)).tocsr()
    b = np.concatenate(rhs)
    cobj = np.zeros(nv)
    cobj[W] = 1.0
    bounds = [(0.0, 1.0)] * m + [(0.0, None)] * (n + 1)
    res = linprog(cobj, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"the SCT favourite-child LP failed: {res.message}")
    x = res.x[:m]
    fe = np.flatnonzero(x < 0.5)
    fav[src[fe]] = dst[fe]
    return fav


FAVOURITES = {"critical-path": critical_path_favourites, "lp": favourite_children}
