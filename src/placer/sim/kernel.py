"""The simulator's compiled entry points (numba, ``cache=True``): one simulation (:func:`sim_full`) or
rows of a batch (:func:`sim_batch`) of a packed Problem (:mod:`placer.sim.prepare`) in a workspace
(``WI`` int64, ``WF`` float64, laid out by :func:`placer.sim.state.views`), so that a call passes a
handful of arrays and allocates nothing.

Per placement: the placement is checked, :func:`placer.sim.loop.init_state` sets up t = 0, an event
loop runs and :func:`finish` computes the status and the objective. The loop is
:func:`placer.sim.loop.run_loop` (every communication model, with or without records: the event
model is described there) or, for objective-only ``placeto`` runs where it pays,
:func:`placer.sim.placeto_loop.run_placeto` after :func:`placer.sim.placeto_loop.prepass` (the same
events, the same bits). The event loop and the entry points are templates compiled once per
communication model, on that model's first use (PER_MODEL below).
"""

from __future__ import annotations

import threading
import types

import numpy as np
from numba import njit

from placer.sim.numba_cache import ensure_writable_cache

ensure_writable_cache()  # before the first cache=True function (placer.sim.state, .loop, .placeto_loop, below)

from placer.sim.state import (  # noqa: E402
    GIPH, LINK, P2P, PLACETO, NSF, S_BAD, S_NRUN, F_OBJ, F_OVER, F_PEAK, F_RESIDENT, F_TMAX, OK, BAD_PLACEMENT,
    NOT_ALL_RAN, ccnt_start, check_placement, heap_extra, link_slots, views, ws_sizes,
)
from placer.sim.loop import HOT, init_state, run_loop  # noqa: E402
from placer.sim.placeto_loop import FAST_MAX_DEVICES, prepass, run_placeto  # noqa: E402

# ONE_SPEC: numba compiles a kernel once per distinct tuple of argument types, and a constant argument
# (``False``, ``0``) is typed as a literal, so calling a kernel with a constant where another caller
# passes a variable compiles it, and everything it calls, a second time: sim_batch's literal ``False``
# cost a second sim_full and run_loop, 37% of the first run's compilation. Constants passed to a kernel
# are typed values here (``np.int64(0)``, a bool expression); tests/test_compile_signatures.py checks
# that each kernel has one signature after the simulator's entry points have run. The queue helpers
# (push, pop, enqueue_op, qpush, ready) are compiled once and called, not inlined into the numba IR at
# each of their 25 call sites (``inline="always"``, which types and lowers every copy again): LLVM
# inlines the calls all the same. Cold compile of sim_full + sim_batch (fresh NUMBA_CACHE_DIR, process
# CPU, loaded 2-core machine): 34.2 s -> 19.8 s (one specialisation) -> 16.6 s (helpers called); the
# objective on 1k / 10k-op random placements 1.00x / 1.02-1.04x (thread CPU medians of 5 interleaved
# runs, noise about 5%).


@njit(**HOT)
def finish(GF, CF, CI, place, WI, WF, vf):
    """Status, and the objective R = r + c * ReLU(max_d(peak_d - M_d)) (+ OOM penalty) in WF."""
    n, m, D = CI[0], CI[1], CI[2]
    if WI[S_NRUN] != n:
        WI[S_BAD] = WI[S_NRUN]
        return NOT_ALL_RAN
    resident = vf[F_RESIDENT]
    peak = vf[F_PEAK]
    pbytes = GF[m + 2 * n:m + 3 * n]
    for d in range(D):
        resident[d] = 0.0
    for i in range(n):
        resident[place[i]] += pbytes[i]
    cap = CF[4 + 2 * D * D:4 + 2 * D * D + D]
    over = -np.inf
    for d in range(D):
        v = (resident[d] + peak[d]) - cap[d]
        if v > over:
            over = v
    obj = WF[F_TMAX] + CF[2] * max(over, 0.0)
    if over > 0:
        obj += CF[3]
    WF[F_OBJ] = obj
    WF[F_OVER] = over
    return OK


def sim_full(GI, GF, CF, CI, PI, place, WI, WF, record):
    """One whole simulation into WI/WF. Returns OK, BAD_PLACEMENT (WI[S_BAD] = op) or NOT_ALL_RAN."""
    n, m, D = CI[0], CI[1], CI[2]
    comp = GF[m + 3 * n:m + 3 * n + n * D]
    leader = GI[2 * n + 2 + 3 * m:3 * n + 2 + 3 * m]
    bad = check_placement(place, comp, leader, n, D)
    if bad >= 0:
        WI[S_BAD] = bad
        return BAD_PLACEMENT
    vi, vf = views(WI, WF, n, m, D, heap_extra(CI))
    init_state(GI, GF, CI, place, WI, WF, vi, vf)
    # run_placeto pays off when most ops send a transfer (random-like placements: 1.2-1.35x); on
    # mostly-local placements (one device, contiguous blocks) it measured 2x slower than run_loop
    # (a sample of every 16th edge decides before paying for the prepass)
    fast = False
    if MODEL == PLACETO:  # (a constant: the other models compile none of this)
        fast = not record and D <= FAST_MAX_DEVICES and n > 0
        prepared = False  # whether prepass filled ccnt (the consumer counts that run_placeto counts down to zero)
        if fast:
            succ_idx = GI[n + 1:n + 1 + m]
            edge_src = GI[2 * n + 2 + 2 * m:2 * n + 2 + 3 * m]
            rem = 0
            for e in range(0, m, 16):
                rem += place[edge_src[e]] != place[succ_idx[e]]
            prepared = 5 * rem >= 2 * ((m + 15) // 16)
            fast = prepared and 2 * prepass(GI, GF, CF, CI, place, WI, WF) >= n
        if fast:
            run_placeto(GI, GF, CF, CI, PI, place, WI, WF, vi, vf)
        if fast and WI[S_NRUN] != n or prepared and not fast:  # ccnt is all zero after a run in which every op ran
            o = ccnt_start(n, m, D, np.int64(0))  # (not through xviews: its tuple of views, made here, corrupted the heap)
            for k in range(o, o + n * D):
                WI[k] = 0
    if not fast:
        run_loop(GI, GF, CF, CI, PI, place, WI, WF, vi, vf, record)
    return finish(GF, CF, CI, place, WI, WF, vf)


def sim_rows(GI, GF, CF, CI, PI, places, lo, hi, WI, WF, record, out_obj, out_mk, out_peak, out_status):
    """Rows lo..hi-1 of ``places``, one after the other in the workspace WI/WF (the last row's state is
    left there); with ``out_status`` not empty, each row's objective, makespan, peak bytes per device
    (params included) and status into the outputs. Returns the last row's status. The one compiled
    entry point of a model (see PER_MODEL): :func:`sim_full` is one row, :func:`sim_batch` many."""
    n, m, D = CI[0], CI[1], CI[2]
    o = NSF + 4 * n + 6 * m
    st = OK
    for row in range(lo, hi):
        st = sim_full(GI, GF, CF, CI, PI, places[row], WI, WF, record)
        if len(out_status) > 0:
            out_status[row] = st if st == OK else -1 - WI[S_BAD]
            out_obj[row] = WF[F_OBJ]
            out_mk[row] = WF[F_TMAX]
            for d in range(D):
                out_peak[row, d] = WF[o + D + d] + WF[o + 3 * D + d]
    return st


# ---------------------------------------------------------------------------- one loop per model, compiled when used
# PER_MODEL: numba types, lowers and optimises every branch of a function, so one loop carrying the
# four communication models' transfer code compiled all four for a command that uses one. run_loop
# (:mod:`placer.sim.loop`), sim_full and sim_rows above are templates (plain Python): :func:`entry`
# binds a model's number to the global ``MODEL`` in a copy of each template's module globals and
# compiles them from the same code on the first call with that model (numba's branch pruning drops the
# other models' code: ``MODEL == GIPH`` compares two constants). One compiled entry point per model,
# ``sim_rows_<model>``, with sim_full inlined into it (numba IR): numba re-optimises everything an
# entry point links in (the event loops included), so a second entry point (a compiled sim_full beside
# sim_batch) paid for that twice. Each copy is kept in its template's module under its own name
# (``loop.run_loop_placeto``, ``kernel.sim_rows_placeto``, ...), is cached under that name (numba
# names a cache file after the function's source file and qualified name) and holds one signature
# (ONE_SPEC). ``sim_full`` and ``sim_batch`` below keep the entry points' signatures and pick the
# model's by ``CI[3]``.
MODEL = -1  # the templates' placeholder; every compiled copy binds its own
MODEL_NAMES = {PLACETO: "placeto", P2P: "p2p", GIPH: "giph", LINK: "link"}
_TEMPLATES = {"run_loop": (run_loop, HOT), "sim_full": (sim_full, dict(inline="always")),
              "sim_rows": (sim_rows, dict(cache=True, nogil=True))}
_ENTRIES: dict = {}
_MAKING = threading.Lock()  # evaluate_many's threads: one compiled copy per model
_NO_OUT = (np.empty(0), np.empty(0), np.empty((0, 0)), np.empty(0, dtype=np.int64))  # never written


def entry(model: int):
    """The compiled ``sim_rows`` of communication model ``model`` (made on first use)."""
    got = _ENTRIES.get(model)
    if got is not None:
        return got
    with _MAKING:
        got = _ENTRIES.get(model)
        if got is not None:
            return got
        name = MODEL_NAMES[model]
        made = {"MODEL": model}  # the model and its copies made so far: each finds its callee's here
        for base in ("run_loop", "sim_full", "sim_rows"):  # each one's callee first
            fn, opts = _TEMPLATES[base]
            f = types.FunctionType(fn.__code__, dict(fn.__globals__, **made), f"{base}_{name}", fn.__defaults__)
            f.__qualname__ = f.__name__
            f.__doc__ = fn.__doc__
            made[base] = fn.__globals__[f.__name__] = njit(**opts)(f)  # kept in the template's module
        got = _ENTRIES[model] = made["sim_rows"]
        return got


def sim_full(GI, GF, CF, CI, PI, place, WI, WF, record):  # noqa: F811 (the template is in _TEMPLATES)
    """One whole simulation into WI/WF under model ``CI[3]``. Returns OK, BAD_PLACEMENT (WI[S_BAD] =
    op) or NOT_ALL_RAN."""
    return entry(int(CI[3]))(GI, GF, CF, CI, PI, place.reshape(1, -1), 0, 1, WI, WF, bool(record), *_NO_OUT)


def sim_batch(GI, GF, CF, CI, PI, places, lo, hi, out_obj, out_mk, out_peak, out_status):
    """Rows lo..hi-1 of ``places`` under model ``CI[3]``: objective, makespan, peak bytes per device
    (params included), status (OK or -1 - the bad op) into the outputs."""
    n, m, D = int(CI[0]), int(CI[1]), int(CI[2])
    ni, nf = ws_sizes(n, m, D, heap_extra(CI))
    WI = np.zeros(ni, dtype=np.int64)  # zeros: sim_full keeps xviews' ccnt zero between runs
    WF = np.empty(nf + link_slots(CI), dtype=np.float64)
    entry(int(CI[3]))(GI, GF, CF, CI, PI, places, int(lo), int(hi), WI, WF, False, out_obj, out_mk, out_peak,
                      out_status)
