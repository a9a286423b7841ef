"""The compiled half of :meth:`placer.grouping.quotient.Quotient.try_merge` (numba, ``cache=True``):
the search that decides whether merging groups a and b closes a cycle, and which set moves.

:meth:`Quotient._separate` defines the answer: two depth-first searches over the group graph, one
edge each in turn, forward from a among the groups positioned up to b and backward from b among the
groups positioned from a; a path from a to b through a third group means None, otherwise the first
search to run out of edges gives its whole set. That answer does not depend on the order in which
each search takes its edges: with no cycle, the forward search ends after F = outdeg(a) + the sum of
outdeg over its set steps (one step per group edge) and the backward one after B steps alike, and
the forward search answers when F <= B. Here both searches expand whole groups, over the op graph's
edges and the op -> group map, the side with fewer steps counted so far first; as soon as one has
finished, the other runs only until its count decides F <= B. The result is the original one (the
same side, the same set) at compiled speed; only the order of the set differs, which is why the
caller sorts it by position (and, where positions tie, rebuilds the original insertion order).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function below

CYCLE, AFTER, BEFORE = -1, 0, 1


@njit(cache=True)
def separate(a, b, stamp, pos, grp, head, nxt, sptr, sidx, pptr, pidx, outdeg, indeg, fmark, bmark,
             fstack, bstack):
    """(CYCLE, 0) when merging groups a and b (pos[a] < pos[b]) closes a cycle; else (AFTER, k) with
    the descendants of a positioned up to b in fstack[:k], or (BEFORE, k) with the ancestors of b
    positioned from a in bstack[:k]. fmark/bmark: per-group stamps (< stamp on entry)."""
    lo, hi = pos[a], pos[b]
    fmark[a] = stamp
    bmark[b] = stamp
    nf = 0  # discovered so far (fstack[:nf]); fi: next to expand
    nb = 0
    fi = -1  # -1: a itself still to expand
    bi = -1
    F = outdeg[a]
    B = indeg[b]
    fdone = False
    bdone = False
    while True:
        if fi >= nf and fi >= 0:
            fdone = True
        if bi >= nb and bi >= 0:
            bdone = True
        if fdone and bdone:
            return (AFTER, nf) if F <= B else (BEFORE, nb)
        if fdone and B >= F:
            return AFTER, nf
        if bdone and F > B:
            return BEFORE, nb
        go_forward = (not fdone) and (bdone or F <= B)
        if go_forward:
            x = a if fi < 0 else fstack[fi]
            fi = 0 if fi < 0 else fi + 1
            m = head[x]
            while m >= 0:
                for e in range(sptr[m], sptr[m + 1]):
                    y = grp[sidx[e]]
                    if y == x:
                        continue
                    if y == b:
                        if x != a:
                            return CYCLE, 0
                        continue
                    if pos[y] <= hi and fmark[y] != stamp:
                        if bmark[y] == stamp:
                            return CYCLE, 0
                        fmark[y] = stamp
                        fstack[nf] = y
                        nf += 1
                        F += outdeg[y]
                m = nxt[m]
        else:
            x = b if bi < 0 else bstack[bi]
            bi = 0 if bi < 0 else bi + 1
            m = head[x]
            while m >= 0:
                for e in range(pptr[m], pptr[m + 1]):
                    y = grp[pidx[e]]
                    if y == x:
                        continue
                    if y == a:
                        if x != b:
                            return CYCLE, 0
                        continue
                    if pos[y] >= lo and bmark[y] != stamp:
                        if fmark[y] == stamp:
                            return CYCLE, 0
                        bmark[y] = stamp
                        bstack[nb] = y
                        nb += 1
                        B += indeg[y]
                m = nxt[m]
