"""batch_norm's grid-wide plan for inputs read as rows of contiguous channels (2-D (N, C)
input, channels-last), training mode, one launch per direction.

``P`` programs, one a multiprocessor, all resident at once; program ``p`` takes the tiles of
``BR`` rows ``p, p + P, ...`` (every channel, ``BC`` at a time: whole rows, read along
memory) three times:

1. reduce: per channel the chunk's partial, as in :mod:`.batch_norm_kernel` (forward
   (count, mean, M2) of ``x - pivot`` centred on the first tile's mean; backward sum g and
   sum g * xhat), written to the (3, P, C) partials (``BY_CHUNK``); the next tile's loads are issued before
   the current one is summed (two tiles in flight a program);
2. grid barrier; combine: program ``p`` merges channels ``p * CC ...`` over the ``P``
   partials (Chan's formula, ``_combine``) into the statistics (and running statistics) or
   the backward's sums (and dweight / dbias): the merge is spread over the grid, where
   :mod:`.batch_norm_kernel`'s fused mode leaves a group's merge to its last chunk;
3. grid barrier; normalise: the same tiles from the last (the most recent in L2 first),
   writing y or dx.

A barrier is a counter each program bumps (release) and polls (acquire) until it reaches
``P``; the last program out resets the three counters, so each launch starts from zero. The
launch is cooperative (``ROWS_COOP``): the driver starts all ``P`` programs together or refuses
it. A program that polls ``SPIN`` times without seeing the others (not expected: ``P`` <= the
multiprocessors and one program fits one) writes NaN instead of hanging. Triton's
interpreter runs programs one after another, so there the three steps are three launches
(``PHASE`` 1, 2, 3) of the same kernel; ``PHASE=0`` is the single launch.
"""
from __future__ import annotations

from typing import NamedTuple

from .._core.backend import tl, triton
from .._core.launch import Launcher, cdiv, next_pow2
from .batch_norm_kernel import _combine, _ld, _out, _part_offsets


class RowsGrid(NamedTuple):
    """Rows a tile, channels a tile, channels a program merges, partials merged a step,
    warps, programs."""
    br: int
    bc: int
    cc: int
    kb: int
    warps: int
    programs: int


def rows_grid(R: int, C: int, sms: int, tile: int, max_bc: int, warps: int, combine_elems: int) -> RowsGrid:
    """The launch shape for ``R`` rows of ``C`` channels: tiles of ``tile`` elements with at most
    ``max_bc`` channels, at most ``sms`` programs (each at least one tile)."""
    bc = min(next_pow2(C), max_bc)
    br = max(1, min(tile // bc, next_pow2(R)))
    P = max(1, min(sms, cdiv(R, br)))
    cc = next_pow2(cdiv(C, P))
    return RowsGrid(br, bc, cc, max(1, min(next_pow2(P), combine_elems // cc)), warps, P)


@triton.jit
def _rows(t, R, cmask, BR: tl.constexpr):
    """Row indices of tile ``t`` and the tile's mask (rows outside [0, R) off)."""
    a = (t * BR + tl.arange(0, BR)).to(tl.int64)
    return a, ((a >= 0) & (a < R))[:, None] & cmask[None, :]


@triton.jit
def _grid_barrier(cnt_ptr, P, SPIN: tl.constexpr):
    """Arrive (after every thread's stores) and wait for all ``P`` programs; False if it gave up."""
    tl.debug_barrier()
    seen = tl.atomic_add(cnt_ptr, 1, sem="acq_rel") + 1
    spins = 0
    while (seen < P) & (spins < SPIN):
        seen = tl.atomic_add(cnt_ptr, 0, sem="acquire")
        spins += 1
    return seen >= P


@triton.jit
def _bn_rows_kernel(x_ptr, g_ptr, o_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, st_ptr, dw_ptr, db_ptr, ws_ptr, sync_ptr,
                    R, C, sx, sg, so, rf, eps, momentum, unbias, BR: tl.constexpr, BC: tl.constexpr,
                    CC: tl.constexpr, KB: tl.constexpr, BWD: tl.constexpr, PHASE: tl.constexpr,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, UPDATE: tl.constexpr, STORE_DW: tl.constexpr,
                    STORE_DB: tl.constexpr, SPIN: tl.constexpr, STAGES: tl.constexpr = 0,
                    EV_RED: tl.constexpr = "", EV_OUT: tl.constexpr = "", BY_CHUNK: tl.constexpr = False):
    """Pointers as ``_bn_kernel``'s (st: (4, C) mean, rstd, biased var, mean - pivot; ws: (2, C) backward sums
    then (3, P, C) partials ((3, C, P) without BY_CHUNK); sync: three int32 counters). x, g, out: (R, C) with
    row strides sx, sg, so and contiguous channels. STAGES 0: each loop holds the next tile's loads in registers
    (two tiles in flight); >= 2: the loops are ``tl.range(..., num_stages=STAGES)`` (the compiler's copies
    through shared memory, STAGES - 1 tiles ahead). EV_RED: the reduce's loads' L2 eviction policy
    ("evict_last": keep them for the normalise), EV_OUT: the normalise's loads' and stores' ("evict_first":
    their last use); "" the default. BY_CHUNK: the partials' planes (P, C), each program's row stored whole
    (else (C, P): a program's values P apart, every line written by many programs)."""
    p = tl.program_id(0)
    P = tl.num_programs(0)
    fin_ptr = ws_ptr
    part_ptr = ws_ptr + 2 * C
    T = tl.cdiv(R, BR)
    nt = tl.cdiv(T - p, P)  # this program's tiles: p, p + P, ... (P <= T: at least one)
    ok = True

    # ------------------------------------------------------------ reduce
    if PHASE <= 1:
        for c0 in range(0, C, BC):
            cols = c0 + tl.arange(0, BC)
            cmask = cols < C
            pivot = tl.load(x_ptr + cols, mask=cmask, other=0.0).to(tl.float32)  # x[0, c]
            a, m = _rows(p, R, cmask, BR)
            if (not BWD) or STAGES == 0:  # the first tile (the pipelined backward loads its own)
                xn = _ld(x_ptr, a, cols, m, sx, 1, EV_RED)
            if BWD:
                rstd = tl.load(st_ptr + C + cols, mask=cmask, other=0.0)
                shifted = tl.load(st_ptr + 3 * C + cols, mask=cmask, other=0.0)
                acc1 = tl.zeros([BR, BC], dtype=tl.float32)
                acc2 = tl.zeros([BR, BC], dtype=tl.float32)
                if STAGES == 0:
                    gn = _ld(g_ptr, a, cols, m, sg, 1, EV_RED)
                    for i in range(0, nt):
                        xv = xn.to(tl.float32)
                        gv = gn.to(tl.float32)
                        a, m = _rows(p + (i + 1) * P, R, cmask, BR)  # the next tile's loads go out first
                        xn = _ld(x_ptr, a, cols, m, sx, 1, EV_RED)
                        gn = _ld(g_ptr, a, cols, m, sg, 1, EV_RED)
                        acc1 += gv
                        acc2 += gv * (((xv - pivot[None, :]) - shifted[None, :]) * rstd[None, :])
                else:
                    for i in tl.range(0, nt, num_stages=STAGES):
                        a, m = _rows(p + i * P, R, cmask, BR)
                        xv = _ld(x_ptr, a, cols, m, sx, 1, EV_RED).to(tl.float32)
                        gv = _ld(g_ptr, a, cols, m, sg, 1, EV_RED).to(tl.float32)
                        acc1 += gv
                        acc2 += gv * (((xv - pivot[None, :]) - shifted[None, :]) * rstd[None, :])
                pp = part_ptr + _part_offsets(cols, p, P, C, BY_CHUNK)
                tl.store(pp, tl.sum(acc1, axis=0), mask=cmask)
                tl.store(pp + C * P, tl.sum(acc2, axis=0), mask=cmask)
            else:  # d = x - pivot, centred on the first tile's mean sk (squares do not cancel)
                cnt = tl.minimum(R - p * BR, BR)
                d = tl.where(m, xn.to(tl.float32) - pivot[None, :], 0.0)
                sk = tl.sum(d, axis=0) / (cnt * 1.0)
                acc1 = tl.where(m, d - sk[None, :], 0.0)
                acc2 = acc1 * acc1
                if STAGES == 0:
                    a, m = _rows(p + P, R, cmask, BR)
                    xn = _ld(x_ptr, a, cols, m, sx, 1, EV_RED)
                    for i in range(1, nt):
                        mc = m
                        xv = xn.to(tl.float32)
                        cnt += tl.minimum(R - (p + i * P) * BR, BR)
                        a, m = _rows(p + (i + 1) * P, R, cmask, BR)
                        xn = _ld(x_ptr, a, cols, m, sx, 1, EV_RED)
                        e = tl.where(mc, (xv - pivot[None, :]) - sk[None, :], 0.0)
                        acc1 += e
                        acc2 += e * e
                else:
                    for i in tl.range(1, nt, num_stages=STAGES):
                        cnt += tl.minimum(R - (p + i * P) * BR, BR)
                        a, m = _rows(p + i * P, R, cmask, BR)
                        xv = _ld(x_ptr, a, cols, m, sx, 1, EV_RED).to(tl.float32)
                        e = tl.where(m, (xv - pivot[None, :]) - sk[None, :], 0.0)
                        acc1 += e
                        acc2 += e * e
                s1 = tl.sum(acc1, axis=0)
                s2 = tl.sum(acc2, axis=0)
                nf = cnt * 1.0
                pp = part_ptr + _part_offsets(cols, p, P, C, BY_CHUNK)
                tl.store(pp, s1 * 0.0 + nf, mask=cmask)
                tl.store(pp + C * P, sk + s1 / nf, mask=cmask)
                tl.store(pp + 2 * C * P, tl.maximum(s2 - s1 * (s1 / nf), 0.0), mask=cmask)

    # ------------------------------------------------------------ combine: channels p * CC, ...
    if PHASE == 0:
        ok = _grid_barrier(sync_ptr, P, SPIN)
    if PHASE == 0 or PHASE == 2:
        cc = p * CC + tl.arange(0, CC)
        ccm = cc < C
        if BWD:
            pv = tl.zeros([CC], dtype=tl.float32)
        else:
            pv = tl.load(x_ptr + cc, mask=ccm, other=0.0).to(tl.float32)
        _combine(part_ptr, fin_ptr, st_ptr, rm_ptr, rv_ptr, dw_ptr, db_ptr, cc, ccm, pv, P, C, rf, eps, momentum,
                 unbias, KB, CC, BWD, UPDATE, STORE_DW, STORE_DB, BY_CHUNK)
    if PHASE == 0:
        ok = _grid_barrier(sync_ptr + 1, P, SPIN) & ok

    # ------------------------------------------------------------ normalise, tiles from the last
    if PHASE == 0 or PHASE == 3:
        for cr in range(0, C, BC):
            c0 = (tl.cdiv(C, BC) - 1) * BC - cr
            cols = c0 + tl.arange(0, BC)
            cmask = cols < C
            pivot = tl.load(x_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            rstd = tl.load(st_ptr + C + cols, mask=cmask, other=0.0, cache_modifier=".cg")
            shifted = tl.load(st_ptr + 3 * C + cols, mask=cmask, other=0.0, cache_modifier=".cg")
            if HAS_W:
                scale = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32) * rstd
            else:
                scale = rstd
            if PHASE == 0:  # a barrier gave up: NaN, never silently wrong values
                scale = tl.where(ok, scale, float("nan"))
            shift = pivot
            c1 = pivot
            c2 = pivot
            if BWD:
                c1 = tl.load(fin_ptr + cols, mask=cmask, other=0.0, cache_modifier=".cg") / rf
                c2 = tl.load(fin_ptr + C + cols, mask=cmask, other=0.0, cache_modifier=".cg") / rf
            elif HAS_B:
                shift = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            else:
                shift = tl.zeros([BC], dtype=tl.float32)
            if STAGES == 0:
                a, m = _rows(p + (nt - 1) * P, R, cmask, BR)
                xn = _ld(x_ptr, a, cols, m, sx, 1, EV_OUT)
                gn = xn
                if BWD:
                    gn = _ld(g_ptr, a, cols, m, sg, 1, EV_OUT)
                for i in range(0, nt):
                    ac = a
                    mc = m
                    xv = xn
                    gv = gn
                    a, m = _rows(p + (nt - 2 - i) * P, R, cmask, BR)  # i = nt - 1: a negative tile, masked off
                    xn = _ld(x_ptr, a, cols, m, sx, 1, EV_OUT)
                    gn = xn
                    if BWD:
                        gn = _ld(g_ptr, a, cols, m, sg, 1, EV_OUT)
                    _out(o_ptr, xv, gv, ac, cols, mc, so, 1, pivot, shifted, rstd, scale, shift, c1, c2, BWD, True,
                         EV_OUT)
            else:
                for i in tl.range(0, nt, num_stages=STAGES):
                    a, m = _rows(p + (nt - 1 - i) * P, R, cmask, BR)
                    xv = _ld(x_ptr, a, cols, m, sx, 1, EV_OUT)
                    gv = xv
                    if BWD:
                        gv = _ld(g_ptr, a, cols, m, sg, 1, EV_OUT)
                    _out(o_ptr, xv, gv, a, cols, m, so, 1, pivot, shifted, rstd, scale, shift, c1, c2, BWD, True,
                         EV_OUT)

    if PHASE == 0:  # the last program out returns the counters to zero for the next launch
        if tl.atomic_add(sync_ptr + 2, 1, sem="relaxed") == P - 1:
            tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
            tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")
            tl.atomic_xchg(sync_ptr + 2, 0, sem="relaxed")


ROWS = Launcher(_bn_rows_kernel)
