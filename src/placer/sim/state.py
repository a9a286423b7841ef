"""The simulator's workspace layout, event keys and heap (used by the event loops of
:mod:`placer.sim.loop` and :mod:`placer.sim.placeto_loop`; some record arrays served a restart path
that was removed, see :mod:`placer.sim.fast`).

``WI`` (int64) and ``WF`` (float64) hold every piece of state: a few scalar slots at their head,
then the arrays listed by :func:`views` (per op, per edge, per device, the event heap, the log of
peak increases). ``GI`` / ``GF`` are the Problem's packed arrays (:mod:`placer.sim.prepare`).
An event key packs (kind, a, b) into one int64: kind << 58 | a << 8 | b.
"""

from __future__ import annotations

import numpy as np
from numba import njit

KIND_SHIFT = 58
A_SHIFT = 8
A_MASK = (1 << 50) - 1
PLACETO, P2P, GIPH, LINK = 0, 1, 2, 3
NS = 16  # scalar slots at the head of WI
NSF = 4  # scalar slots at the head of WF
# WI scalar slots
S_HSIZE, S_SEQ, S_NRUN, S_NXE, S_NXS, S_NLOG, S_NDIRTY, S_BAD = 0, 1, 2, 3, 4, 5, 6, 7
# WF scalar slots
F_TCUR, F_TMAX, F_OBJ, F_OVER = 0, 1, 2, 3

OK, BAD_PLACEMENT, NOT_ALL_RAN = 0, 1, 2


@njit(cache=True, nogil=True)
def heap_cap(D, x):
    """Event heap capacity: at most one op-done and one wake-up per device and one transfer per
    bus are pending (``placeto``, ``p2p``); ``giph`` and ``link`` schedule each transfer's arrival
    when it is sent, so up to ``x`` = m more (:func:`heap_extra`)."""
    return 4 * D + 16 + x


@njit(cache=True, nogil=True)
def heap_extra(CI):
    """The extra heap slots of the model in ``CI`` (see :func:`heap_cap`)."""
    return CI[1] if CI[3] >= GIPH else 0


@njit(cache=True, nogil=True)
def link_slots(CI):
    """Float slots after the workspace for the ``link`` model's resources (when each is free)."""
    return CI[5] if CI[3] == LINK else 0


@njit(cache=True, nogil=True)
def ws_sizes(n, m, D, x):
    """(len(WI), len(WF)) for a graph of n ops, m edges on D devices, ``x`` extra heap slots (the
    ``link`` model's resource slots come after these, see :func:`link_slots`)."""
    H = heap_cap(D, x)
    L = n + m + 1
    return (NS + 6 * n + 7 * m + 13 * D + 2 * H + 2 * L + m + n * D + 2 * n,
            NSF + 5 * n + 6 * m + 6 * D + H + 2 * L + 3 * n)


@njit(cache=True, nogil=True)
def ccnt_start(n, m, D, x):
    """Where :func:`xviews`' ``ccnt`` (n * D) starts in WI."""
    return NS + 6 * n + 7 * m + 13 * D + 2 * heap_cap(D, x) + 2 * (n + m + 1) + m


@njit(cache=True, nogil=True)
def xviews(WI, WF, n, m, D, x):
    """The objective-only placeto loop's per-placement arrays (:func:`placer.sim.placeto_loop.prepass`),
    after the :func:`views` arrays: ``osucc`` (m: each op's consumers, the ones on its device first),
    ``ccnt`` (n*D: consumers of op u's buffer on device x still to run; x = u's own device: its
    output's users, the transfer counted as one), ``nloc`` (n: local consumers), ``mask`` (n: the
    remote consumer devices, a bit each); ``cost`` (n: compute time on the op's device), ``xdur``
    (n: duration of its transfer), ``cb`` (n: bytes of its transfer / of each received copy).
    ``ccnt`` is zero between runs (a run in which every op ran counts it down to zero; otherwise
    :func:`placer.sim.kernel.sim_full` clears it), so :func:`placer.sim.placeto_loop.prepass` only counts up."""
    H = heap_cap(D, x)
    L = n + m + 1
    oi = ccnt_start(n, m, D, x) - m  # osucc, then ccnt
    of = NSF + 5 * n + 6 * m + 6 * D + H + 2 * L
    o2 = oi + m + n * D
    return (WI[oi:oi + m], WI[oi + m:o2], WI[o2:o2 + n], WI[o2 + n:o2 + 2 * n],
            WF[of:of + n], WF[of + n:of + 2 * n], WF[of + 2 * n:of + 3 * n])


@njit(cache=True, nogil=True)
def views(WI, WF, n, m, D, x):
    """(WI views, WF views): two homogeneous tuples of array views, in the I_* / F_* order."""
    H = heap_cap(D, x)
    L = n + m + 1
    oi = np.empty(31, dtype=np.int64)
    oi[0] = NS
    sz = (n, n, n, n, n, n, m, m, m, m, m, m, m, D, D, D, D, D, D, D, D, D, D, D, D, D, H, H, L, L)
    for k in range(30):
        oi[k + 1] = oi[k] + sz[k]
    vi = (WI[oi[0]:oi[1]], WI[oi[1]:oi[2]], WI[oi[2]:oi[3]], WI[oi[3]:oi[4]], WI[oi[4]:oi[5]], WI[oi[5]:oi[6]],
          WI[oi[6]:oi[7]], WI[oi[7]:oi[8]], WI[oi[8]:oi[9]], WI[oi[9]:oi[10]], WI[oi[10]:oi[11]], WI[oi[11]:oi[12]],
          WI[oi[12]:oi[13]], WI[oi[13]:oi[14]], WI[oi[14]:oi[15]], WI[oi[15]:oi[16]], WI[oi[16]:oi[17]],
          WI[oi[17]:oi[18]], WI[oi[18]:oi[19]], WI[oi[19]:oi[20]], WI[oi[20]:oi[21]], WI[oi[21]:oi[22]],
          WI[oi[22]:oi[23]], WI[oi[23]:oi[24]], WI[oi[24]:oi[25]], WI[oi[25]:oi[26]], WI[oi[26]:oi[27]],
          WI[oi[27]:oi[28]], WI[oi[28]:oi[29]], WI[oi[29]:oi[30]])
    of = np.empty(21, dtype=np.int64)
    of[0] = NSF
    szf = (n, n, n, n, m, m, m, m, m, m, D, D, D, D, H, L, L, n, D, D)
    for k in range(20):
        of[k + 1] = of[k] + szf[k]
    vf = (WF[of[0]:of[1]], WF[of[1]:of[2]], WF[of[2]:of[3]], WF[of[3]:of[4]], WF[of[4]:of[5]], WF[of[5]:of[6]],
          WF[of[6]:of[7]], WF[of[7]:of[8]], WF[of[8]:of[9]], WF[of[9]:of[10]], WF[of[10]:of[11]], WF[of[11]:of[12]],
          WF[of[12]:of[13]], WF[of[13]:of[14]], WF[of[14]:of[15]], WF[of[15]:of[16]], WF[of[16]:of[17]],
          WF[of[17]:of[18]], WF[of[18]:of[19]], WF[of[19]:of[20]])
    return vi, vf


# WI views, in order
(I_MISSING, I_USE, I_FIFO, I_ENQSEQ, I_DISP, I_DISPPREV, I_COPYREP, I_COPYCNT, I_XQNEXT, I_XFSEQ, I_XELIST,
 I_XSLIST, I_XSPREV, I_DEVHEAD, I_DEVTAIL, I_DEVACT, I_DEVLAST, I_BUSHEAD, I_BUSTAIL, I_BUSACT, I_BUSLAST,
 I_RECV, I_DIRTY, I_ISDIRTY, I_FIRST, I_LOGLAST, I_HK, I_HP, I_LOGPREV, I_LOGDEV) = range(30)
# WF views, in order
(F_START, F_END, F_ENQT, F_OUTFREE, F_XFSTART, F_XFARR, F_XDUR, F_CBYTES, F_CARR, F_CFREE, F_LEVEL, F_PEAK,
 F_PEAKT, F_RESIDENT, F_HT, F_LOGT, F_LOGLEVEL, F_LFREE, F_DEVFREE, F_BUSFREE) = range(20)


# ---------------------------------------------------------------------------- heap
@njit(cache=True, nogil=True)
def push(ht, hk, hp, size, t, k, pay):
    i = np.uint64(size)  # heap indices unsigned: numba emits no negative-index wrap-around for them
    zero, one = np.uint64(0), np.uint64(1)
    while i > zero:
        par = (i - one) >> one
        if t < ht[par] or (t == ht[par] and k < hk[par]):
            ht[i] = ht[par]
            hk[i] = hk[par]
            hp[i] = hp[par]
            i = par
        else:
            break
    ht[i] = t
    hk[i] = k
    hp[i] = pay
    return size + 1


@njit(cache=True, nogil=True)
def pop(ht, hk, hp, size):
    """Remove the top (the caller read it first); returns the new size."""
    size -= 1
    n = np.uint64(size)  # heap indices unsigned, as in push
    one = np.uint64(1)
    t = ht[n]
    k = hk[n]
    pay = hp[n]
    i = np.uint64(0)
    while True:
        c = i + i + one
        if c >= n:
            break
        c1 = c + one
        if c1 < n and (ht[c1] < ht[c] or (ht[c1] == ht[c] and hk[c1] < hk[c])):
            c = c1
        if ht[c] < t or (ht[c] == t and hk[c] < k):
            ht[i] = ht[c]
            hk[i] = hk[c]
            hp[i] = hp[c]
            i = c
        else:
            break
    ht[i] = t
    hk[i] = k
    hp[i] = pay
    return size


@njit(cache=True, nogil=True, inline="always")
def key(kind, a, b):
    return (np.int64(kind) << KIND_SHIFT) | (np.int64(a) << A_SHIFT) | np.int64(b)


# ---------------------------------------------------------------------------- graph views
@njit(cache=True, nogil=True)
def gviews(GI, GF, n, m, D):
    succ_ptr = GI[0:n + 1]
    succ_idx = GI[n + 1:n + 1 + m]
    o = n + 1 + m
    pred_ptr = GI[o:o + n + 1]
    o += n + 1
    pred_edge = GI[o:o + m]
    edge_src = GI[o + m:o + 2 * m]
    leader = GI[o + 2 * m:o + 2 * m + n]
    pred_idx = GI[o + 2 * m + n:o + 3 * m + n]
    ebytes = GF[0:m]
    obytes = GF[m:m + n]
    tbytes = GF[m + n:m + 2 * n]
    pbytes = GF[m + 2 * n:m + 3 * n]
    comp = GF[m + 3 * n:m + 3 * n + n * D]
    return succ_ptr, succ_idx, pred_ptr, pred_edge, edge_src, leader, pred_idx, ebytes, obytes, tbytes, pbytes, comp


@njit(cache=True, nogil=True)
def check_placement(place, comp, leader, n, D):
    """-1 if ``place`` is a valid placement, else the first bad op (out of range, infinite cost,
    colocation group split)."""
    for i in range(n):
        d = place[i]
        if d < 0 or d >= D:
            return i
        if not np.isfinite(comp[i * D + d]):
            return i
        if place[leader[i]] != d:
            return i
    return -1
