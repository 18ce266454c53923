"""LU factorisation with partial pivoting and what is built on it: ``lu_factor_ex``,
``lu_factor``, ``lu_solve``, ``det``, ``slogdet``, with the semantics of ``torch.linalg``.

One kernel, ``_lu_kernel``, for float32, float64, complex64 and complex128 (complex as
``view_as_real`` pairs, :mod:`.tiles`); pivots are LAPACK's: column ``j`` takes the row of
largest ``|re| + |im|`` among rows ``j..m-1`` (the first on a tie), ``pivots[j]`` is that row,
1-based, int32; a pivot that is exactly zero sets ``info`` to its 1-based index (the first
one) and the factorisation carries on, as ``getrf`` does.

* ``BLOCKED=False`` (m, n <= 32): a program holds ``BLOCK_B`` whole matrices in registers
  and eliminates column by column (``_lu_panel`` on a (BLOCK_B, M, N) tile).
* ``BLOCKED=True`` (one matrix per program, factored in place in the output): right-looking
  blocked LU with panels of ``W`` columns. Per panel: ``_lu_panel_rows`` on the panel in
  registers (a thread a row, rows tracked by place rather than moved; complex64's columns
  rotated a place a step and each pivot row passed through shared memory, ``PANEL_ROTATE``,
  ``PANEL_SMEM``; on sm_80+ each step's search and pivot row in one barrier, :mod:`.lu_pivot`);
  its row interchanges
  applied to the other columns by moving only the rows they touch (at most 2W: sources tracked
  backwards through the swaps, :func:`.triangular._track`);
  ``L11^-1`` formed once in registers, then per chunk of columns ``U12 = L11^-1 A12`` and
  ``A22 -= L21 U12`` with ``tl.dot`` (exact float32). Barriers order the phases, which read
  what the previous one wrote. With ``HOST_UPDATE`` (``lu_factor``'s default) a launch does one
  panel and its U12, and ``A22 -= L21 U12`` is a batched matmul between launches; from a
  shape's second call on the whole loop replays from a CUDA graph (:mod:`.graphs`).
* ``DET=1|2``: the determinant (product of the pivots, sign flipped per interchange) or
  ``(sign, log|det|)`` accumulated as the pivots are found; with ``STORE_LU=False`` (small
  matrices) nothing else is written.

Larger matrices (more rows than a panel holds in registers, or one big matrix, where one
program per matrix would leave the GPU idle) take ``torch.linalg`` (cuSOLVER/MAGMA).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton
from ..._core.launch import Launcher, cdiv, next_pow2, workspace
from ..._core.memo import LaunchMemo
from ..._core.registry import register_op
from ..._core.shapes import broadcast_shape
from .graphs import GraphCache, exact_matmuls
from .lu_pivot import (SEARCH_WARPS, _pack64, _ptr64, _search, _slot_pass, _smem_row_declare, _thread_id,
                       _unpack64, _warp_search_pass)
from .lu_step import _chunk_ld, _chunk_st, _l11_inv, _lu_chunk, _lu_left_swaps_kernel, _lu_step_kernel, _swap_sources
from .tiles import (_abs1, _div, _ld, _mul, _pick, _pick2, _st,
                    check_matrices, flat3, kernel_strides, raise_singular, real_view)
from .triangular import KERNEL_DTYPES, check_square, kernel_ok, rhs_shapes, trsm

#: m and n up to this: whole matrices in registers.
SMALL_N = 32
#: Rows x panel width x real components of one panel held in registers (blocked path).
PANEL_ELEMS = 8192
#: Blocked path only for batches at least this large, or matrices of at most BLOCKED_ALWAYS_N.
BLOCKED_MIN_BATCH = 8
BLOCKED_ALWAYS_N = 128
#: lu_solve in the kernel up to this n (the row map is a vector of next_pow2(n) in registers).
SOLVE_MAX_N = 1024
#: lu_factor_ex and lu_solve take torch.linalg's path for the shapes where it was faster
#: (:func:`factor_faster`, :func:`solve_faster`: H100, scripts/lu_routes.py's grid of n x batch,
#: bench/results/tuning/2026-12-06-s56-lu_routes_*). False: the kernels wherever they serve (the
#: tests, which check the kernels on small shapes, set it so).
ROUTE_BY_SPEED = True
TILE_ELEMS = 8192 if INTERPRET else 2048
#: Warps of a blocked-path program (one matrix); its trailing update in blocks of BLOCKED_BM
#: rows x BLOCKED_CW columns (real, complex), float32 products as BLOCKED_PREC (see
#: ``triangular.TF32X3_PREC``).
BLOCKED_WARPS = 8
BLOCKED_BM = 32
BLOCKED_CW = (64, 32)
BLOCKED_PREC = "ieee"
#: The step after each panel of the blocked path (interchanges on the other columns, U12 =
#: L11^-1 A12, A22 -= L21 U12): "kernel": one launch a panel, then ``lu_step._lu_step_kernel``
#: with a program a (matrix, chunk of BLOCKED_STEP_CW columns) over the whole GPU; "matmul": the
#: panel's launch does the interchanges and U12 too and A22 is updated by a batched matmul
#: (cuBLAS) between launches (complex64 64 x 256x256 1295 against 2628 us for "inline", H200,
#: docs/perf-notes.md); "inline": all in the one program a matrix (64 of 132 multiprocessors
#: for the issue's batch). det / slogdet always "inline" (their running product lives in it).
#: One form, or (real, complex): H200, 64 x 256x256, "kernel" with fused look-ahead float32 502 us
#: against 768 for "matmul", complex64 1285 against 1195 (docs/perf-notes.md, thirty-third session).
BLOCKED_STEP = ("kernel", "matmul")
#: Columns a program of the step kernel takes, its row blocks and warps (real, complex).
BLOCKED_STEP_CW = (32, 16)
BLOCKED_STEP_BM = 32
BLOCKED_STEP_WARPS = 4
#: L11^-1 in the step (all forms) as Neumann products (matmuls) rather than forward substitution.
BLOCKED_STEP_NEUMANN = True
#: "kernel" steps with look-ahead: the next panel's columns stepped first ("fused": by the next
#: panel's own launch, before it factors them; "kernel": by a launch of the step kernel), then,
#: on CUDA, that panel factored while a second stream does the rest of the step; "off": none.
BLOCKED_LOOKAHEAD = "fused"
#: Row panels move complex64 entries, and pairs of float32 entries of contiguous rows of even
#: length, as 64-bit words (the pivot row's, the panel's loads and stores): half the memory
#: instructions of a column's chain (H200, complex64 64 x 256x256 in graphs 945 -> 870 us,
#: scripts/lu_breakdown.py; scripts/lu_column_probe.py's column 1515 -> 835 ns).
PANEL_PACK = True
#: Complex64 row panels rotate their columns a place each step (column j always the first: no
#: dynamic pick of a column, in the row or the pivot row; the pivot row through a slot a step, the
#: search on (magnitude, place)): offline sm_90 (scripts/lu_panel_sass.py) a column 636 -> 338
#: instructions with PANEL_SMEM, registers 215 -> 128; 2: and each step's pivot search done at the
#: end of the step before, beside its column updates. H100, complex64 64 x 256x256 in graphs
#: (scripts/lu_breakdown.py --parts, twice): 871.5 / 871.4 us (0) -> 745.0 (1), 745.3 / 747.1 (2);
#: 2 with a global slot instead of shared memory 902.8 (docs/perf-notes.md, fifty-second session).
#: 3 (GPU, sm_80+; else 1, ``_rotation``): rotated, with the pivot search and the pivot row in one
#: barrier (``lu_pivot._warp_search_pass``: 3 barriers and 16 shuffles a column -> 1 and 2 redux);
#: H100, the same (twice, fifty-third session): 723.8 / 723.2 us (1) -> 704.4 / 704.1 (3), the panel
#: launches 555.1 / 555.6 -> 535.0 / 534.7.
PANEL_ROTATE = 3
#: ... and the rotated panel's pivot row through shared memory (inline PTX, 128-bit stores and loads)
#: rather than a global workspace slot (the interpreter has no inline PTX: the workspace there).
PANEL_SMEM = not INTERPRET
#: The blocked step's interchanges tracked in an unrolled loop (the panel's W pivots loaded together,
#: not one a loop trip; ``lu_step._swap_sources``); float64 / complex128 keep the loop (Triton 3.6
#: fails to lower their kernels' float64 dots beside the unrolled form). Off: H100, complex64
#: 64 x 256x256 in graphs (scripts/lu_breakdown.py --parts, twice) 702.9 / 699.8 us against 702.3 /
#: 696.9 (fifty-fourth session, gpu_pending.sh 99).
TRACK_UNROLLED = False
#: The blocked path's chunks of rows moved as contiguous words where entries have unit stride along a
#: row (``lu_step._lu_chunk``'s and ``_lu_left_swaps_kernel``'s UNIT; False: the (re, im) form, two
#: loads strided by two words, which the compiler lays a warp down the rows: a sector an entry). H100,
#: complex64 64 x 256x256 in graphs (gpu_pending.sh 101): 779.0 -> 582.4 us; the panel launches
#: 613.6 -> 416.4, the deferred left launch 148 -> 31.6.
UNIT_ROWS = True
#: The "matmul" step's row interchanges on the columns left of each panel deferred to one launch at
#: the end (``lu_step._lu_left_swaps_kernel``, a program a (matrix, panel), each panel's pivots loaded
#: together) rather than done chunk by chunk in each panel launch, on the chain (nothing later reads
#: those columns). Bit for bit as the other order (tests). Off: H100, the same in graphs, 580.7 /
#: 582.4 us against 575.0 / 574.6 (its launch 31.6 us, the panel launches 13 us less; gpu_pending.sh 101).
DEFER_LEFT = False
#: The "matmul" step with look-ahead: each panel's launch factors the panel alone, the step kernel
#: (``lu_step._lu_step_kernel``, a program a (matrix, chunk): all multiprocessors) then interchanges
#: and solves U12 right of it, the batched matmul updates the next panel's columns, and the next
#: panel is factored (one program a matrix) on the main stream while a second stream updates the
#: rest of A22 (CUDA; elsewhere in that order, one stream): 1 (True), the second stream starting beside
#: the next panel's columns' update; 2, after it (with the next panel, so that the panel's programs are
#: not queued behind a GPU full of the update's). Off: H100, the same in graphs (gpu_pending.sh 101)
#: 716.0 us (1), 588.7 (2) against 582.4; the chain's panels 15.5 us and the step kernel 9.2 us each.
MATMUL_AHEAD = False
#: Columns a chunk of the "matmul" step's panel launch takes right of the panel (interchanges and U12,
#: chunk after chunk in the one program a matrix); None: BLOCKED_CW's. H100 before UNIT_ROWS (gpu_pending.sh
#: 100): 128 columns 790.2 / 789.6 us against 776.9 / 776.0 in graphs.
PANEL_RIGHT_CW: Optional[int] = None
#: The "matmul" step's panel launch loads each chunk's rows right of the panel while the chunk before
#: it is stored (UNIT_ROWS' form; the chunks are one after another in the one program a matrix, each a
#: load-barrier-store latency). Bit for bit as without (tests). H100, complex64 64 x 256x256 in graphs
#: (gpu_pending.sh 102, twice): 575.7 / 576.4 -> 563.3 / 564.4 us, the panel launches 402.8 / 403.0 ->
#: 382.1 / 382.2.
PANEL_PREFETCH = True
#: Small batches of large square matrices that take torch's path go a matrix at a time on these devices
#: (``_torch_factor``, ``LOOP_BATCHES``): torch factors one matrix with cuSOLVER's getrf, several with MAGMA's
#: batched one, which only gains from about 8 matrices. H100, torch's batch against the loop (ms,
#: ``gpu_pending.sh 147`` / ``149``, ``scripts/lu_routes.py --backends default,cusolver``), complex64 /
#: float32: 2 of 2048 rows 36.4 / 11.5, 34.1 / 9.6; 4 of 2048 42.2 / 22.9, 39.4 / 19.2; 2 of 1024 13.6 / 4.5,
#: 11.1 / 4.1; 4 of 1024 13.9 / 9.0, 12.9 / 8.2; 8 of 1024 16.3 / 18.1, 13.6 / 16.5 (MAGMA ahead); 2 of 512
#: 4.6 / 2.0, 3.0 / 1.9; 4 of 512 4.6 / 4.0, 3.3 / 3.8 (mixed).
LOOP_DEVICES = ("cuda",)
#: (rows, most matrices) the loop takes: from 1024 rows 2-4 matrices, from 512 two.
LOOP_BATCHES = ((1024, 4), (512, 2))
#: CUDA graphs kept of that path's host loop (the most recently used shapes, replayed from a
#: shape's second call on, ``graphs.GraphCache``); 0: no graphs.
GRAPHS = 2
#: The blocked path's panel with a thread a row (``_lu_panel_rows``; the GPU's: complex64 64 x
#: 256x256 2485 us against ~2900 for the tile form) or as a (1, M, W) tile (``_lu_panel``; the
#: interpreter's default, 4-5x faster there; tests run both).
ROW_PANEL = not INTERPRET
#: Panel width of the blocked path (None: 32 where the panel has at most PANEL_ELEMS / 2 values, else 16).
BLOCKED_W = None


@triton.jit
def _det_step(d_r, d_i, la, pr, pi, flip, DET: tl.constexpr, CPLX: tl.constexpr):
    """The determinant's accumulators after pivot (pr, pi), ``flip``: rows were interchanged
    (DET 1: the product; 2: the sign and log|det|)."""
    if DET == 1:
        d_r, d_i = _mul(d_r, d_i, pr, pi, CPLX)
    else:
        if CPLX:
            big = tl.maximum(tl.abs(pr), tl.abs(pi))
            sb = tl.where(big > 0, big, 1.0)
            mag = big * tl.sqrt((pr / sb) * (pr / sb) + (pi / sb) * (pi / sb))
        else:
            mag = tl.abs(pr)
        # log|det|: -inf after a zero pivot, NaN (kept, as torch.linalg.slogdet) after a NaN one
        la = tl.where(la != la, la, tl.where(mag > 0, la + tl.log(tl.where(mag > 0, mag, 1.0)),
                                             tl.where(mag == mag, float("-inf"), float("nan"))))
        safe = tl.where(mag > 0, mag, 1.0)
        if CPLX:
            z = tl.where(mag == mag, 0.0, float("nan"))  # a NaN pivot (either part): a NaN sign
            d_r, d_i = _mul(d_r, d_i, tl.where(mag > 0, pr / safe, z), tl.where(mag > 0, pi / safe, z), CPLX)
        else:  # exactly +-1 (a GPU division pr / |pr| may round to 1 - ulp)
            d_r = d_r * tl.where(pr > 0, 1.0, tl.where(pr < 0, -1.0, 0.0))
    d_r = tl.where(flip, -d_r, d_r)
    if CPLX:
        d_i = tl.where(flip, -d_i, d_i)
    else:
        d_i = d_r
    return d_r, d_i, la


@triton.jit
def _lu_panel(ar, ai, k0, m, jcnt, info, d_r, d_i, la, M: tl.constexpr, W: tl.constexpr,
              PIVOT: tl.constexpr, DET: tl.constexpr, CPLX: tl.constexpr):
    """LU of columns 0..jcnt-1 of the tile (BB, M, W): tile row i is matrix row i, tile column j
    is matrix column k0 + j, pivot rows k0 + j .. m-1. Rows above k0 are left as they are.
    Returns the tile (L below the diagonal, U on and above), the pivots (BB, W) 1-based,
    info and the determinant accumulators (d_r, d_i): product or sign, la: log|det|."""
    r = tl.arange(0, M)
    r2 = r[None, :]
    r3 = r[None, :, None]
    c2 = tl.arange(0, W)[None, :]
    c3 = tl.arange(0, W)[None, None, :]
    piv = k0 + c2 + 1 + tl.zeros([ar.shape[0], W], dtype=tl.int32)
    for j in range(0, jcnt):
        g = k0 + j
        colr, coli = _pick(ar, ai, c3 == j, 2, CPLX)  # column j: (BB, M)
        if PIVOT:
            mag = _abs1(colr, coli, CPLX)
            # NaN ranks below every number but above the rows out of play (an argmax never picks
            # NaN: a pivot row above g would corrupt the factorisation); NaN then propagates
            cand = tl.where((r2 >= g) & (r2 < m), tl.where(mag == mag, mag, -0.5), -1.0)
            p = tl.argmax(cand, axis=1).to(tl.int32)  # first largest, as i?amax
        else:
            p = tl.zeros([ar.shape[0]], dtype=tl.int32) + g
        is_p = r2 == p[:, None]
        is_g = r2 == g
        # rows p (the new row g) and g, (BB, W), in one reduction; the pivot and the entry
        # row g held in column j from them
        is_p3 = is_p[:, :, None]
        is_g3 = r3 == g
        rpr, rpi, rgr, rgi = _pick2(ar, ai, is_p3, is_g3, 1, CPLX)
        pr, pi = _pick(rpr, rpi, c2 == j, 1, CPLX)
        gr, gi = _pick(rgr, rgi, c2 == j, 1, CPLX)
        # interchange rows g and p of the tile
        ar = tl.where(is_g3, rpr[:, None, :], tl.where(is_p3, rgr[:, None, :], ar))
        colr = tl.where(is_g, pr[:, None], tl.where(is_p, gr[:, None], colr))
        if CPLX:
            ai = tl.where(is_g3, rpi[:, None, :], tl.where(is_p3, rgi[:, None, :], ai))
            coli = tl.where(is_g, pi[:, None], tl.where(is_p, gi[:, None], coli))
            zero_piv = (pr == 0.0) & (pi == 0.0)
        else:
            zero_piv = pr == 0.0
        info = tl.where(zero_piv & (info == 0), g + 1, info)
        piv = tl.where(c2 == j, p[:, None] + 1, piv)
        # multipliers below row g (a zero pivot has a zero column below it: multipliers 0)
        lr, li = _div(colr, coli, tl.where(zero_piv, 1.0, pr)[:, None], tl.where(zero_piv, 0.0, pi)[:, None], CPLX)
        below3 = ((r2 > g) & (r2 < m))[:, :, None]
        qr, qi = _mul(lr[:, :, None], li[:, :, None], rpr[:, None, :], rpi[:, None, :], CPLX)
        ar = tl.where(below3 & (c3 > j), ar - qr, tl.where(below3 & (c3 == j), lr[:, :, None], ar))
        if CPLX:
            ai = tl.where(below3 & (c3 > j), ai - qi, tl.where(below3 & (c3 == j), li[:, :, None], ai))
        else:
            ai = ar
        if DET != 0:
            d_r, d_i, la = _det_step(d_r, d_i, la, pr, pi, p != g, DET, CPLX)
    return ar, ai, piv, info, d_r, d_i, la


@triton.jit
def _row_ld(base, offs, k0, n, slc, mask, W: tl.constexpr, CPLX: tl.constexpr, PACK: tl.constexpr):
    """A thread's row of the panel (columns k0 .. k0+W-1 at ``base + offs``) as W (re, im)
    column values; PACK: 64-bit loads, an entry each (complex64) or a pair of entries (float32,
    contiguous rows)."""
    cr = ()
    ci = ()
    if PACK and not CPLX:
        for c in tl.static_range(W // 2):
            cm = mask & (offs * 0 + k0 + 2 * c < n)
            lo, hi = _unpack64(tl.load(_ptr64(base + offs + (k0 + 2 * c) * slc), mask=cm, other=0))
            cr = cr + (lo, hi)
        ci = cr
    else:
        for c in tl.static_range(W):
            cm = mask & (offs * 0 + k0 + c < n)
            if PACK:
                x_r, x_i = _unpack64(tl.load(_ptr64(base + offs + (k0 + c) * slc), mask=cm, other=0))
            else:
                x_r, x_i = _ld(base, offs + (k0 + c) * slc, cm, CPLX)
            cr = cr + (x_r,)
            ci = ci + (x_i,)
    return cr, ci


@triton.jit
def _row_st(base, offs, k0, n, slc, cr, ci, mask, W: tl.constexpr, CPLX: tl.constexpr, PACK: tl.constexpr):
    """Stores what :func:`_row_ld` loads."""
    if PACK and not CPLX:
        for c in tl.static_range(W // 2):
            tl.store(_ptr64(base + offs + (k0 + 2 * c) * slc), _pack64(cr[2 * c], cr[2 * c + 1]),
                     mask=mask & (offs * 0 + k0 + 2 * c < n))
    else:
        for c in tl.static_range(W):
            cm = mask & (offs * 0 + k0 + c < n)
            if PACK:
                tl.store(_ptr64(base + offs + (k0 + c) * slc), _pack64(cr[c], ci[c]), mask=cm)
            else:
                _st(base, offs + (k0 + c) * slc, cr[c], ci[c], cm, CPLX)


@triton.jit
def _row_pass(base, g, j, k0, n, slr, slc, cr, ci, own, W: tl.constexpr, CPLX: tl.constexpr, PACK: tl.constexpr):
    """The row of the thread where ``own`` to every thread through the matrix's row g (its final
    place): its W (re, im) entries and the pivot, entry j."""
    _row_st(base, own.to(tl.int32) * 0 + g * slr, k0, n, slc, cr, ci, own, W, CPLX, PACK)
    tl.debug_barrier()
    # every thread reads it, unmasked (a column past n is never stored: addresses clamped into
    # the matrix; n is even where float32 pairs are packed)
    prr = ()
    pri = ()
    if PACK and not CPLX:
        for c in tl.static_range(W // 2):
            lo, hi = _unpack64(tl.load(_ptr64(base + g * slr + tl.minimum(k0 + 2 * c, n - 2) * slc)))
            prr = prr + (lo, hi)
        pri = prr
    else:
        for c in tl.static_range(W):
            if PACK:
                y_r, y_i = _unpack64(tl.load(_ptr64(base + g * slr + tl.minimum(k0 + c, n - 1) * slc)))
            else:
                y_r = tl.load(base + g * slr + tl.minimum(k0 + c, n - 1) * slc)
                y_i = y_r
                if CPLX:
                    y_i = tl.load(base + g * slr + tl.minimum(k0 + c, n - 1) * slc + 1)
            prr = prr + (y_r,)
            pri = pri + (y_i,)
    pr = prr[0]
    pi = pri[0]
    for c in tl.static_range(1, W):
        pr = tl.where(j == c, prr[c], pr)
        pi = tl.where(j == c, pri[c], pi)
    return prr, pri, pr, pi


@triton.jit
def _lu_panel_rows(base, ws, k0, m, n, jcnt, slr, slc, info, d_r, d_i, la, M: tl.constexpr, W: tl.constexpr,
                   PIVOT: tl.constexpr, DET: tl.constexpr, CPLX: tl.constexpr, PACK: tl.constexpr,
                   ROT: tl.constexpr, SMEM: tl.constexpr, WARPS: tl.constexpr):
    """LU of columns k0 .. k0+jcnt-1 of one matrix at ``base``, in place (pivot rows k0..m-1):
    the panel is held as ``W`` column vectors of ``M`` rows, so a thread holds whole rows and
    the elimination needs no reduction but the pivot search. Rows never move in registers:
    ``pos[r]`` is row r's place after the interchanges so far (ties in the search go to the
    earlier place, as getf2 finds them), and each pivot row reaches every thread through
    memory, written by its owner to its final place (row k0 + j); PACK: entries moved as 64-bit
    words (:func:`_row_ld`). ROT (1 or 2, complex64, PACK): the W columns rotate a place each
    step, so that column j is always the first (no pick of a dynamic column, in the row or in the
    pivot row), and the pivot row goes through ``ws`` (W slots of W words, one a step; SMEM: two
    slots of shared memory, :func:`_slot_pass`) in the rotated order; the rows' final store
    undoes the rotation; 2: each step's search done at the end of the step before (beside its
    updates); 3 (SMEM, sm_80+, a row a thread, ``WARPS`` <= 8): search and pivot row in one barrier
    (:func:`.lu_pivot._warp_search_pass`). Returns the pivots (W,), 1-based, info and the
    determinant's accumulators."""
    r = tl.arange(0, M)
    live = r < m
    cr, ci = _row_ld(base, r * slr, k0, n, slc, live, W, CPLX, PACK)
    tl.debug_barrier()  # every row read before pivot rows are written over them
    pos = r
    wv = tl.arange(0, W)
    piv = k0 + wv + 1
    pp = k0
    prow = k0
    tid = r
    if ROT == 3:
        tid = _thread_id(r)
    if ROT == 2 and PIVOT:  # the search a step ahead: the first one here
        pp, prow = _search(cr[0], ci[0], live, pos, r, k0, CPLX, True)
    for j in range(0, jcnt):
        g = k0 + j
        xr = cr[0]
        xi = ci[0]
        if not ROT:
            for c in tl.static_range(1, W):
                xr = tl.where(j == c, cr[c], xr)
                if CPLX:
                    xi = tl.where(j == c, ci[c], xi)
        if not PIVOT:
            pp = g
            prow = g
        elif ROT == 1:
            pp, prow = _search(xr, xi, live, pos, r, g, CPLX, True)
        elif ROT == 0:
            pp, prow = _search(xr, xi, live, pos, r, g, CPLX, False)
        # the thread holding the pivot row (with a rotation found by its place: pos is one-to-one)
        if ROT == 3 and PIVOT:  # search and row in one barrier
            pp, prr, pri = _warp_search_pass(xr, xi, live, pos, g, j, cr, ci, tid, W, CPLX, WARPS)
            own = pos == pp
            pr = prr[0]
            pi = pri[0]
        elif ROT:  # through slot j of ws, in the rotated order: column j first
            own = pos == pp
            prr, pri = _slot_pass(ws, j, cr, ci, own, W, SMEM)
            pr = prr[0]
            pi = pri[0]
        else:
            own = r == prow
            prr, pri, pr, pi = _row_pass(base, g, j, k0, n, slr, slc, cr, ci, own, W, CPLX, PACK)
        if CPLX:
            zero_piv = (pr == 0.0) & (pi == 0.0)
        else:
            zero_piv = pr == 0.0
        info = tl.where(zero_piv & (info == 0), g + 1, info)
        piv = tl.where(wv == j, pp + 1, piv)
        pos = tl.where(own, g, tl.where(pos == g, pp, pos))
        under = live & (pos > g)
        lr, li = _div(xr, xi, tl.where(zero_piv, 1.0, pr), tl.where(zero_piv, 0.0, pi), CPLX)
        ncr = ()
        nci = ()
        for c in tl.static_range(W):
            qr, qi = _mul(lr, li, prr[c], pri[c], CPLX)
            if ROT:  # place c holds column j + c (mod W): those past the panel's end are done
                if c == 0:
                    ncr = ncr + (tl.where(under, lr, cr[0]),)
                    nci = nci + (tl.where(under, li, ci[0]),)
                else:
                    ncr = ncr + (tl.where(under & (c < W - j), cr[c] - qr, cr[c]),)
                    nci = nci + (tl.where(under & (c < W - j), ci[c] - qi, ci[c]),)
            else:
                ncr = ncr + (tl.where(under & (j < c), cr[c] - qr, tl.where(under & (j == c), lr, cr[c])),)
                if CPLX:
                    nci = nci + (tl.where(under & (j < c), ci[c] - qi, tl.where(under & (j == c), li, ci[c])),)
                else:
                    nci = ncr
        if ROT:  # column j + 1 first
            cr = ncr[1:] + ncr[:1]
            ci = nci[1:] + nci[:1]
        else:
            cr = ncr
            ci = nci
        if DET != 0:
            d_r, d_i, la = _det_step(d_r, d_i, la, pr, pi, pp != g, DET, CPLX)
        if ROT == 2 and PIVOT:  # the next step's search, beside this step's updates of the other columns
            pp, prow = _search(cr[0], ci[0], live, pos, r, g + 1, CPLX, True)
    tl.debug_barrier()  # the pivot rows' reads done before the rows go to their places
    if ROT:  # place c holds column jcnt + c (mod W)
        for c in tl.static_range(W):
            col = k0 + ((jcnt + c) & (W - 1))
            tl.store(_ptr64(base + pos * slr + col * slc), _pack64(cr[c], ci[c]),
                     mask=live & (r >= k0) & (r * 0 + col < n))
    else:
        _row_st(base, pos * slr, k0, n, slc, cr, ci, live & (r >= k0), W, CPLX, PACK)
    return piv, info, d_r, d_i, la


@triton.jit
def _lu_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, d1_ptr, d2_ptr, ws_ptr, nbatch, m, n,
               sab, sar, sac, slb, slr, slc, spb, sd1, sd2, k_lo, k_hi,
               BLOCK_B: tl.constexpr, M: tl.constexpr, W: tl.constexpr, CW: tl.constexpr,
               BM: tl.constexpr, BLOCKED: tl.constexpr, PIVOT: tl.constexpr, DET: tl.constexpr,
               STORE_LU: tl.constexpr, CPLX: tl.constexpr, PREC: tl.constexpr, ROWS_PANEL: tl.constexpr,
               HOST_UPDATE: tl.constexpr, NEUMANN: tl.constexpr, PANEL_SMEM: tl.constexpr, WARPS: tl.constexpr,
               TRACK: tl.constexpr, DEFER_LEFT: tl.constexpr, RCW: tl.constexpr, UNIT: tl.constexpr,
               PREFETCH: tl.constexpr):
    if ROWS_PANEL >= 3 and PANEL_SMEM:
        _smem_row_declare()
    kmax = tl.minimum(m, n)
    r = tl.arange(0, M)
    r3 = r[None, :, None]
    c2 = tl.arange(0, W)[None, :]
    c3 = tl.arange(0, W)[None, None, :]
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    in_b = bidx < nbatch
    b64 = bidx.to(tl.int64)
    dt = a_ptr.dtype.element_ty
    info = tl.zeros([BLOCK_B], dtype=tl.int32)
    d_r = tl.zeros([BLOCK_B], dtype=dt) + 1.0
    d_i = tl.zeros([BLOCK_B], dtype=dt)
    la = tl.zeros([BLOCK_B], dtype=dt)
    if not BLOCKED:
        b3 = b64[:, None, None]
        amask = (b3 < nbatch) & (r3 < m) & (c3 < n)
        ar, ai = _ld(a_ptr, b3 * sab + r3 * sar + c3 * sac, amask, CPLX)
        ar, ai, piv, info, d_r, d_i, la = _lu_panel(ar, ai, 0, m, kmax, info, d_r, d_i, la,
                                                    M, W, PIVOT, DET, CPLX)
        if STORE_LU:
            _st(lu_ptr, b3 * slb + r3 * slr + c3 * slc, ar, ai, amask, CPLX)
            tl.store(piv_ptr + b64[:, None] * spb + c2, piv, mask=in_b[:, None] & (c2 < kmax))
    else:
        bs = tl.program_id(0).to(tl.int64)
        base = lu_ptr + bs * slb  # the launcher copied A here
        pb = piv_ptr + bs * spb
        if HOST_UPDATE:  # one launch a panel: info carried over from the previous one
            info = tl.load(info_ptr + bidx, mask=in_b & (bidx * 0 + k_lo > 0), other=0)
        for k0 in range(k_lo, k_hi, W):
            jcnt = tl.minimum(kmax - k0, W)
            if HOST_UPDATE == 3:  # 0. the previous panel's step on this panel's columns (the rest is
                if k0 > 0:      # _lu_step_kernel's, on another stream, while this one runs)
                    kp = k0 - W
                    ir, ii = _l11_inv(base, kp, W, m, n, slr, slc, W, CPLX, NEUMANN, PREC)
                    pj, st, sb = _swap_sources(pb, kp, W, m, W, TRACK)
                    _lu_chunk(base, kp, W, k0, k0 + W, m, n, slr, slc, pj, st, sb, ir, ii, True, True, W, W, BM,
                              CPLX, PREC, UNIT)
                    tl.debug_barrier()
            # 1. the panel, in registers
            if ROWS_PANEL:
                piv1, info1, d_r1, d_i1, la1 = _lu_panel_rows(base, ws_ptr + bs * W * W, k0, m, n, jcnt, slr, slc,
                                                              tl.max(info), tl.max(d_r), tl.max(d_i), tl.max(la),
                                                              M, W, PIVOT, DET, CPLX, ROWS_PANEL >= 2,
                                                              ROWS_PANEL // 3 * (ROWS_PANEL - 2), PANEL_SMEM, WARPS)
                info = tl.zeros_like(info) + info1  # (BLOCK_B = 1,) again (not x * 0: la may be -inf)
                d_r = tl.zeros_like(d_r) + d_r1
                d_i = tl.zeros_like(d_i) + d_i1
                la = tl.zeros_like(la) + la1
                tl.store(pb + k0 + tl.arange(0, W), piv1, mask=tl.arange(0, W) < jcnt)
            else:  # the (1, M, W) tile form
                pmask = (r3 < m) & (k0 + c3 < n)
                poffs = r3 * slr + (k0 + c3) * slc
                ar, ai = _ld(base, poffs, pmask, CPLX)
                ar, ai, piv, info, d_r, d_i, la = _lu_panel(ar, ai, k0, m, jcnt, info, d_r, d_i, la,
                                                            M, W, PIVOT, DET, CPLX)
                _st(base, poffs, ar, ai, pmask, CPLX)
                tl.store(pb + k0 + c2, piv, mask=c2 < jcnt)
            tl.debug_barrier()
            if HOST_UPDATE < 2:  # 2, 3: the step is _lu_step_kernel's, launched after this
                # 2. the panel's interchanges on the other columns, 3. U12 = L11^-1 A12,
                # 4. A22 -= L21 U12 (HOST_UPDATE 1: a batched matmul by the caller)
                pj, st, sb = _swap_sources(pb, k0, jcnt, m, W, TRACK)
                if not (DEFER_LEFT and HOST_UPDATE == 1):  # (deferred: _lu_left_swaps_kernel at the end)
                    for c0 in range(0, k0, CW):
                        _lu_chunk(base, k0, jcnt, c0, k0, m, n, slr, slc, pj, st, sb, None, None, False, False,
                                  W, CW, BM, CPLX, PREC, UNIT)
                ir, ii = _l11_inv(base, k0, jcnt, m, n, slr, slc, W, CPLX, NEUMANN, PREC)
                if PREFETCH:  # (UNIT, HOST_UPDATE 1) each chunk's rows loaded while the one before is stored
                    xt, xb = _chunk_ld(base, k0, k0 + W, n, m, n, slr, st, sb, W, RCW, CPLX)
                    for c0 in range(k0 + W, n, RCW):
                        nt, nb = _chunk_ld(base, k0, c0 + RCW, n, m, n, slr, st, sb, W, RCW, CPLX)
                        tl.debug_barrier()  # chunk c0's rows read (the loads before the barrier)
                        _chunk_st(base, k0, c0, n, m, n, slr, pj, xt, xb, ir, ii, True, W, RCW, CPLX, PREC)
                        xt = nt
                        xb = nb
                else:
                    for c0 in range(k0 + W, n, RCW):
                        _lu_chunk(base, k0, jcnt, c0, n, m, n, slr, slc, pj, st, sb, ir, ii, True,
                                  HOST_UPDATE == 0, W, RCW, BM, CPLX, PREC, UNIT)
                tl.debug_barrier()
    if STORE_LU:
        tl.store(info_ptr + bidx, info, mask=in_b)
    if DET != 0:
        _st(d1_ptr, b64 * sd1, d_r, d_i, in_b, CPLX)
        if DET == 2:
            tl.store(d2_ptr + b64 * sd2, la, mask=in_b)


_LU = Launcher(_lu_kernel)
_STEP = Launcher(_lu_step_kernel)
_LEFT = Launcher(_lu_left_swaps_kernel)


# ---------------------------------------------------------------------------- launcher

def _comps(dtype) -> int:
    return (2 if dtype.is_complex else 1) * (2 if dtype in (torch.float64, torch.complex128) else 1)


def _path(m: int, n: int, nb: int, dtype) -> str:
    """'small', 'blocked' or 'torch' for a batch of nb (m, n) matrices."""
    if m <= SMALL_N and n <= SMALL_N:
        return "small"
    if next_pow2(m) * 16 * _comps(dtype) <= PANEL_ELEMS and (nb >= BLOCKED_MIN_BATCH or max(m, n) <= BLOCKED_ALWAYS_N):
        return "blocked"
    return "torch"


def factor_faster(n: int, nb: int) -> bool:
    """fastpath's factorisation of nb matrices of n rows or columns (the larger) beat torch's on the
    H100 grid: never up to SMALL_N (0.14-0.90x against torch's batched getrf, host time included);
    below 192 for batches of 32-512 only (64: 2.5-4.1x; 8: 0.34-0.95x; 1000-4096: 0.41-0.80x but
    complex64 128x128 1.10x); from 192 for 8 matrices or more (256: 1.8-5.4x; one: torch's path)."""
    if not ROUTE_BY_SPEED:
        return True
    if n <= SMALL_N:
        return False
    return 32 <= nb <= 512 if n < 192 else nb >= 8


def solve_faster(n: int, nb: int, k: int, cplx: bool) -> bool:
    """fastpath's lu_solve of nb systems of n rows with k right-hand sides beat torch's on the H100
    grid (1.1-16x over most of it) but for: batches from 2048 (4096: 0.29-0.98x at k=1); complex64
    batches of 256 or more of 48-128 rows with fewer than 16 right-hand sides (512: 0.64-0.99x); up to 16
    rows with 16 or more right-hand sides and 8 or more systems (0.53-0.86x); fewer than 4 systems of 512
    rows or more with up to 64 right-hand sides (one complex64 1024x1024: 0.42-0.50x, 0.19x at k=64); fewer
    than 4 float32 systems of 32-64 rows with 16 or more right-hand sides (one: 0.51-0.83x); complex
    batches of 16 or more of 1024 rows with 16 or more right-hand sides (sixty-third session: 16 complex64
    1024x1024 with 16, 0.54x: torch's solve takes a faster form from 16 systems; 8: 3.22x; one right-hand
    side 3.19x)."""
    if not ROUTE_BY_SPEED:
        return True
    return not (nb >= 2048 or (cplx and nb >= 256 and 48 <= n <= 128 and k < 16)
                or (n <= 16 and k >= 16 and nb >= 8) or (nb < 4 and n >= 512 and k <= 64)
                or (not cplx and nb < 4 and 32 <= n <= 64 and k >= 16)
                or (cplx and nb >= 16 and n >= 1024 and k >= 16))


def _rotation(device, M: int, W: int, warps: int) -> int:
    """The complex64 row panel's ``PANEL_ROTATE`` form on ``device``: 3 (the one-barrier search)
    only where it compiles and holds (shared memory by inline PTX, redux.sync: sm_80+; a slot a warp,
    W <= 32 words a row; at most one of the M rows a thread, so that a warp has one candidate), else 1."""
    rot = int(PANEL_ROTATE)
    if rot == 3 and not (PANEL_SMEM and device.type == "cuda" and warps <= SEARCH_WARPS.value and W <= 32
                         and M <= 32 * warps and torch.cuda.get_device_capability(device) >= (8, 0)):
        return 1
    return rot


def _launch(A3, LU3, piv, info, d1=None, d2=None, *, pivot: bool = True, det: int = 0) -> None:
    """A3 (nb, m, n) -> LU3 (nb, m, n), piv (nb, min(m, n)), info (nb,) or, with det=1|2,
    d1 (nb,) det or sign and d2 (nb,) log|det| (LU3/piv/info may then be None on the small
    path: nothing but the determinant is written)."""
    nb, m, n = A3.shape
    if nb == 0:
        return
    cplx = A3.is_complex()
    comps = _comps(A3.dtype)
    blocked = _path(m, n, nb, A3.dtype) == "blocked"
    store = LU3 is not None
    if blocked:
        M = next_pow2(m)
        W = BLOCKED_W or (32 if M * 32 * comps <= PANEL_ELEMS // 2 else 16)
        block_b, cw, bm, warps = 1, BLOCKED_CW[cplx], BLOCKED_BM, BLOCKED_WARPS
        if LU3.data_ptr() != A3.data_ptr():  # (in place: _factor's own_input)
            LU3.copy_(A3)
    else:
        M, W = next_pow2(m), next_pow2(n)
        block_b = max(1, min(next_pow2(nb), TILE_ELEMS // (M * W * comps)))
        cw, bm, warps = 16, 16, 4
    ref = real_view(A3)
    lu_t = real_view(LU3) if store else ref
    d1_t = real_view(d1) if det else ref
    d2_t = d2 if det == 2 else ref
    kmax = min(m, n)
    step = _step_form(cplx) if blocked and det == 0 else "inline"
    ahead = BLOCKED_LOOKAHEAD if step == "kernel" else "off"
    mm_ahead = step == "matmul" and bool(MATMUL_AHEAD)
    mode = {"inline": 0, "matmul": 2 if mm_ahead else 1, "kernel": 3 if ahead == "fused" else 2}[step]
    if mode == 3:
        bm = min(M, 128)  # the row blocks of the fused step

    pack = PANEL_PACK and (A3.dtype == torch.complex64 or (
        A3.dtype == torch.float32 and lu_t.stride(2) == 1 and lu_t.stride(1) % 2 == 0 and lu_t.stride(0) % 2 == 0
        and n % 2 == 0 and lu_t.data_ptr() % 8 == 0))

    rot = _rotation(A3.device, M, W, warps) if blocked and ROW_PANEL and pack and cplx else 0
    track = TRACK_UNROLLED and A3.dtype not in (torch.float64, torch.complex128)
    defer = bool(DEFER_LEFT) and step == "matmul"
    ws = workspace(A3.device, "lu.panel_rows", nb * W * W, torch.int64) if rot and not PANEL_SMEM else ref
    unit = UNIT_ROWS and (LU3 if store else A3).stride(2) == 1  # (the kernels' entries of unit stride)

    def launch(k_lo, k_hi):
        _LU[(cdiv(nb, block_b),)](
            ref, lu_t, piv if store else ref, info if store else ref, d1_t, d2_t, ws, nb, m, n,
            *kernel_strides(A3), *(kernel_strides(LU3) if store else (0, 0, 0)),
            piv.stride(0) if store else 0, (2 if cplx else 1) if det else 0, 1, k_lo, k_hi,
            BLOCK_B=block_b, M=M, W=W, CW=cw, BM=bm, BLOCKED=blocked, PIVOT=pivot, DET=det,
            STORE_LU=store, CPLX=cplx, PREC=BLOCKED_PREC if blocked else "ieee",
            ROWS_PANEL=(1 + pack + rot) * (blocked and ROW_PANEL),
            HOST_UPDATE=mode, NEUMANN=BLOCKED_STEP_NEUMANN, PANEL_SMEM=bool(rot and PANEL_SMEM), WARPS=warps,
            TRACK=track, DEFER_LEFT=defer, RCW=(PANEL_RIGHT_CW or cw) if mode == 1 else cw, UNIT=unit,
            PREFETCH=bool(PANEL_PREFETCH) and unit and mode == 1, num_warps=warps)

    if step == "inline":
        launch(0, kmax)
        return
    scw = BLOCKED_STEP_CW[cplx]

    def step_cols(k0, c_lo, c_hi, left, update=True):  # the step after panel k0 on columns c_lo..c_hi-1 [and left]
        n_left, n_right = cdiv(k0, scw) if left else 0, cdiv(max(c_hi - c_lo, 0), scw)
        if n_left + n_right:
            _STEP[(nb, n_left + n_right)](
                lu_t, piv, m, n, *kernel_strides(LU3), piv.stride(0), k0, min(W, kmax - k0), c_lo, c_hi, n_left,
                W=W, CW=scw, BM=BLOCKED_STEP_BM, CPLX=cplx, PREC=BLOCKED_PREC, NEUMANN=BLOCKED_STEP_NEUMANN,
                TRACK=track, UPDATE=update, UNIT=unit, num_warps=BLOCKED_STEP_WARPS)

    main = side = None  # elsewhere the same order, one stream
    if (ahead != "off" or mm_ahead) and A3.is_cuda:
        main = torch.cuda.current_stream(A3.device)
        side = _SIDE.get(A3.device) or _SIDE.setdefault(A3.device, torch.cuda.Stream(A3.device))
    if step == "matmul":
        with exact_matmuls():
            if mm_ahead:
                _matmul_ahead_loop(launch, step_cols, LU3, kmax, m, n, W, not defer, main, side, int(MATMUL_AHEAD))
            else:
                for k0 in range(0, kmax, W):
                    launch(k0, min(k0 + W, kmax))
                    e0 = k0 + W
                    if e0 < m and e0 < n:  # A22 -= L21 U12, the panel's L and U stored by the launch
                        LU3[:, e0:, e0:].baddbmm_(LU3[:, e0:, k0:e0], LU3[:, k0:e0, e0:], alpha=-1)
        if defer and kmax > W:  # the earlier panels' columns take the later panels' interchanges
            _LEFT[(nb, cdiv(kmax, W) - 1)](lu_t, piv, m, kmax, *kernel_strides(LU3), piv.stride(0), W=W, M=M,
                                           CPLX=cplx, UNIT=unit, num_warps=warps)
        return
    _panel_loop(launch, step_cols, kmax, n, W, ahead, main, side)


def _panel_loop(launch, step_cols, kmax: int, n: int, W: int, ahead: str, main, side) -> None:
    """The blocked path's host loop: each panel's launch, then the step after it (with ``main`` /
    ``side`` streams, the look-ahead's panel on ``main`` beside the rest of the step on ``side``)."""
    launch(0, min(W, kmax))
    for k0 in range(0, kmax, W):
        e0 = k0 + W
        if ahead == "off" or e0 >= kmax:
            step_cols(k0, e0, n, True)
            if e0 < kmax:
                launch(e0, min(e0 + W, kmax))
            continue
        # look-ahead: the next panel's columns first, then that panel factored (on the
        # multiprocessors it needs) while the rest of this step runs beside it
        if ahead == "kernel":
            step_cols(k0, e0, min(e0 + W, n), False)
        if main is not None:
            ready = main.record_event()
            launch(e0, min(e0 + W, kmax))  # "fused": it steps its columns first
            side.wait_event(ready)
            with torch.cuda.stream(side):
                step_cols(k0, e0 + W, n, True)
            main.wait_stream(side)
        else:
            launch(e0, min(e0 + W, kmax))
            step_cols(k0, e0 + W, n, True)


def _matmul_ahead_loop(launch, step_cols, LU3, kmax: int, m: int, n: int, W: int, left: bool, main,
                       side, form: int) -> None:
    """The "matmul" step with look-ahead (``MATMUL_AHEAD``): after panel k0's launch (the panel
    alone), the step kernel's interchanges and U12 right of it (and left of it: ``left``, else
    deferred), A22 -= L21 U12 on the next panel's columns, then that panel's launch on ``main``
    beside the rest of the update on ``side`` (``form`` 2: which waits for the next panel's columns)."""
    def update(k0, c_lo, c_hi):
        e0 = k0 + W
        if e0 < m and c_lo < c_hi:
            LU3[:, e0:, c_lo:c_hi].baddbmm_(LU3[:, e0:, k0:e0], LU3[:, k0:e0, c_lo:c_hi], alpha=-1)

    launch(0, min(W, kmax))
    for k0 in range(0, kmax, W):
        e0 = k0 + W
        if e0 >= n:  # nothing right of the last panel
            if left:
                step_cols(k0, e0, e0, True, False)
            break
        step_cols(k0, e0, n, left, False)
        if e0 >= kmax:  # the last panel: its update (rows below it, tall matrices) alone
            update(k0, e0, n)
            break
        mid = min(e0 + W, n)
        if main is None:
            update(k0, e0, n)
            launch(e0, min(e0 + W, kmax))
            continue
        if form != 2:
            ready = main.record_event()
        update(k0, e0, mid)
        if form == 2:
            ready = main.record_event()
        launch(e0, min(e0 + W, kmax))
        side.wait_event(ready)
        with torch.cuda.stream(side):
            update(k0, mid, n)
        main.wait_stream(side)


_SIDE: dict = {}


# ---------------------------------------------------------------------------- reference

def reference_lu_factor_ex(A: torch.Tensor, pivot: bool = True):
    """PyTorch path: ``torch.linalg.lu_factor_ex`` on A's device."""
    return tuple(torch.linalg.lu_factor_ex(A, pivot=pivot))


def factor_loops(A: torch.Tensor, pivot: bool = True) -> bool:
    """torch's path factors A a matrix at a time: a small batch of large square matrices on
    LOOP_DEVICES (``LOOP_BATCHES``)."""
    n = A.shape[-1]
    nb = math.prod(A.shape[:-2])
    most = max((b for rows, b in LOOP_BATCHES if n >= rows), default=0)
    return pivot and A.device.type in LOOP_DEVICES and 1 < nb <= most and A.shape[-2] == n


def _torch_factor(A: torch.Tensor, pivot: bool):
    """torch's lu_factor_ex, where ``factor_loops`` a matrix at a time (cuSOLVER's getrf, torch's
    choice for one matrix, in place of its batched path)."""
    if not factor_loops(A, pivot):
        return reference_lu_factor_ex(A, pivot)
    n = A.shape[-1]
    outs = [torch.linalg.lu_factor_ex(a) for a in A.reshape(-1, n, n)]
    return tuple(torch.stack(ts).view(*A.shape[:-2], *ts[0].shape) for ts in zip(*outs))


def reference_lu_solve(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool = True,
                       adjoint: bool = False) -> torch.Tensor:
    """PyTorch path: ``torch.linalg.lu_solve`` on LU's device."""
    return torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)


def reference_det(A: torch.Tensor) -> torch.Tensor:
    return torch.linalg.det(A)


def reference_slogdet(A: torch.Tensor):
    return tuple(torch.linalg.slogdet(A))


# ---------------------------------------------------------------------------- ops


def _lu_fake(A, pivot):
    m, n = A.shape[-2:]
    batch = A.shape[:-2]
    return (A.new_empty(A.shape), A.new_empty((*batch, min(m, n)), dtype=torch.int32),
            A.new_empty(batch, dtype=torch.int32))


def _torch_route(A: torch.Tensor) -> bool:
    """A's factorisation takes torch's path."""
    m, n = A.shape[-2:]
    nb = math.prod(A.shape[:-2])
    return not kernel_ok(A) or _path(m, n, nb, A.dtype) == "torch" or not factor_faster(max(m, n), nb)


def _factor_ex(A: torch.Tensor, pivot: bool):
    """(LU, pivots, info): torch's path called directly where it is taken (the custom op's
    dispatch is host time before a call that is all torch's: H200, one 2048x2048 complex64
    matrix 0.99x of torch's own call through it), else the op."""
    return _torch_factor(A, pivot) if _torch_route(A) else _lu_factor_ex_op(A, pivot)


@register_op("linalg_lu_factor_ex", fake=_lu_fake)
def _lu_factor_ex_op(A: torch.Tensor, pivot: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    if _torch_route(A):
        return _torch_factor(A, pivot)
    if m == 0 or n == 0:
        return (alloc.empty(A.shape, dtype=A.dtype, device=A.device),
                alloc.empty(*batch, min(m, n), dtype=torch.int32, device=A.device),
                torch.zeros(batch, dtype=torch.int32, device=A.device))
    A3 = flat3(A, batch, (m, n))
    if _step_form(A.is_complex()) != "inline" and _path(m, n, A3.shape[0], A.dtype) == "blocked":
        key = (tuple(A3.shape), A3.dtype, A3.device, pivot, BLOCKED_W, BLOCKED_CW, BLOCKED_WARPS, BLOCKED_PREC,
               ROW_PANEL, PANEL_PACK, PANEL_ROTATE, PANEL_SMEM, BLOCKED_STEP, BLOCKED_STEP_CW, BLOCKED_STEP_BM,
               BLOCKED_STEP_WARPS, BLOCKED_LOOKAHEAD, BLOCKED_STEP_NEUMANN, TRACK_UNROLLED,
               DEFER_LEFT, UNIT_ROWS, MATMUL_AHEAD, PANEL_RIGHT_CW, PANEL_PREFETCH)
        LU, piv, info = _GRAPHS(key, lambda a: _factor(a, pivot), A3, GRAPHS,
                                in_place=lambda a: _factor(a, pivot, own_input=True))
    else:
        LU, piv, info = _factor(A3, pivot)
    return LU.view(A.shape), piv.view(*batch, min(m, n)), info.view(batch)


def _step_form(cplx: bool) -> str:
    """The blocked path's step form (``BLOCKED_STEP``) for real or complex matrices."""
    return BLOCKED_STEP if isinstance(BLOCKED_STEP, str) else BLOCKED_STEP[bool(cplx)]


def _factor(A3: torch.Tensor, pivot: bool, own_input: bool = False):
    """(LU3, pivots, info) of A3 (nb, m, n), new tensors (``own_input``, the blocked path on a
    contiguous A3 only: LU3 is A3, factored in place)."""
    nb, m, n = A3.shape
    LU = A3 if own_input else alloc.empty(nb, m, n, dtype=A3.dtype, device=A3.device)
    piv = alloc.empty(nb, min(m, n), dtype=torch.int32, device=A3.device)
    info = alloc.empty(nb, dtype=torch.int32, device=A3.device)
    _launch(A3, LU, piv, info, pivot=pivot)
    return LU, piv, info


_GRAPHS = GraphCache()


def _lu_solve_fake(LU, pivots, B, left, adjoint):
    batch, k = rhs_shapes(LU, B, left, "lu_solve", "LU")
    n = LU.shape[-1]
    return LU.new_empty((*batch, n, k) if left else (*batch, k, n))


@register_op("linalg_lu_solve", fake=_lu_solve_fake)
def _lu_solve_op(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool, adjoint: bool) -> torch.Tensor:
    n = LU.shape[-1]
    if not kernel_ok(LU, B) or n > SOLVE_MAX_N or LU.numel() == 0 or B.numel() == 0:
        return reference_lu_solve(LU, pivots, B, left, adjoint)
    batch, k = rhs_shapes(LU, B, left, "lu_solve", "LU")
    if not solve_faster(n, math.prod(batch), k, LU.is_complex()):
        return reference_lu_solve(LU, pivots, B, left, adjoint)
    X = alloc.empty(*batch, *((n, k) if left else (k, n)), dtype=LU.dtype, device=LU.device)
    T3 = flat3(LU, batch, (n, n))
    P2 = pivots.expand(*batch, n).reshape(-1, n)
    # op(A) X = B with A = P L U. left: op = A (adjoint: A^H); right, X A = B <=> A^T X^T = B^T
    # (adjoint: X A^H = B <=> conj(A) X^T = B^T). A transposed op reads U^T, L^T through
    # transposed strides and applies P to the result instead of P^T to B.
    trans = adjoint if left else not adjoint
    conj = adjoint
    if left:
        B3, X3 = flat3(B, batch, (n, k)), X.view(-1, n, k)
    else:
        B3, X3 = flat3(B, batch, (k, n)).mT, X.view(-1, k, n).mT
    trsm(T3.mT if trans else T3, B3, X3, lower=True, unit=not trans, conj=conj, piv=P2, perm_out=trans)
    return X


def _det_fake(A):
    return A.new_empty(A.shape[:-2])


def _det_launch(A: torch.Tensor, det: int):
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    d1 = alloc.empty(batch, dtype=A.dtype, device=A.device)
    d2 = alloc.empty(batch, dtype=A.real.dtype, device=A.device) if det == 2 else None
    if n == 0:
        d1.fill_(1)
        if d2 is not None:
            d2.zero_()
        return d1, d2
    A3 = flat3(A, batch, (n, n))
    nb = A3.shape[0]
    if _path(n, n, nb, A.dtype) == "small":
        _launch(A3, None, None, None, d1.view(-1), None if d2 is None else d2.view(-1), det=det)
    else:  # blocked: the factorisation needs a buffer to work in
        LU = torch.empty(nb, n, n, dtype=A.dtype, device=A.device)
        piv = torch.empty(nb, n, dtype=torch.int32, device=A.device)
        info = torch.empty(nb, dtype=torch.int32, device=A.device)
        _launch(A3, LU, piv, info, d1.view(-1), None if d2 is None else d2.view(-1), det=det)
    return d1, d2


@register_op("linalg_det", fake=_det_fake)
def _det_op(A: torch.Tensor) -> torch.Tensor:
    n = A.shape[-1]
    if not kernel_ok(A) or _path(n, n, math.prod(A.shape[:-2]), A.dtype) == "torch":
        return reference_det(A)
    return _det_launch(A, 1)[0]


def _slogdet_fake(A):
    return A.new_empty(A.shape[:-2]), A.new_empty(A.shape[:-2], dtype=A.real.dtype)


@register_op("linalg_slogdet", fake=_slogdet_fake)
def _slogdet_op(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not kernel_ok(A) or _path(n, n, math.prod(A.shape[:-2]), A.dtype) == "torch":
        return reference_slogdet(A)
    return _det_launch(A, 2)


# ---------------------------------------------------------------------------- public API

class LUFactor(NamedTuple):
    LU: torch.Tensor
    pivots: torch.Tensor


class LUFactorEx(NamedTuple):
    LU: torch.Tensor
    pivots: torch.Tensor
    info: torch.Tensor


class SlogDet(NamedTuple):
    sign: torch.Tensor
    logabsdet: torch.Tensor


def _raise_singular(info: torch.Tensor, fname: str) -> None:
    raise_singular(info, fname, "U[{j},{j}] is zero and using it on lu_solve would result in a division by "
                                "zero. If you still want to perform the factorization, consider calling "
                                "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor_ex(A: torch.Tensor, *, pivot: bool = True, check_errors: bool = False) -> LUFactorEx:
    """LU factorisation with partial pivoting and an error code, like ``torch.linalg.lu_factor_ex``.

    Parameters
    ----------
    A : Tensor (*, m, n), float32, float64, complex64 or complex128, any strides (batch
        dimensions that cannot be collapsed into one stride are copied once).
    pivot : partial pivoting (True) or none (False: no row interchanges, pivots 1..k; only
        on the kernel path, torch.linalg has it on CUDA only).
    check_errors : raise ``torch.linalg.LinAlgError`` if a pivot is zero (a host sync).

    Returns
    -------
    (LU, pivots, info): ``LU`` (*, m, n) contiguous (torch's is column-major; the values are
    the same): L below the diagonal (unit diagonal not stored), U on and above it;
    ``pivots`` (*, min(m, n)) int32, 1-based: row i was interchanged with row pivots[i]
    (LAPACK's ipiv, so that ``A = P L U``); ``info`` (*) int32: 0, or the 1-based index of
    the first exactly-zero pivot (the factorisation still completes, as LAPACK's).

    Paths: m, n <= 32, whole matrices in registers, many per program; up to 512 rows
    (256 complex64/float64, 128 complex128) a blocked LU per matrix in one program, for
    batches of 8 or more matrices (any batch up to 128 x 128); otherwise (e.g. one 2048 x 2048
    matrix), on devices Triton does not serve, for inputs that need gradients and for the
    shapes where torch's was measured faster (:func:`factor_faster`: up to 32 rows, and batches
    below 32 or above 512 of fewer than 192 rows), ``torch.linalg.lu_factor_ex`` (cuSOLVER/MAGMA).

    Raises
    ------
    TypeError for unsupported dtypes; ValueError for fewer than 2 dimensions.

    Example
    -------
    >>> import torch, fastpath
    >>> LU, piv, info = fastpath.linalg.lu_factor_ex(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv, info
    (tensor([2, 2], dtype=torch.int32), tensor(0, dtype=torch.int32))
    """
    check_matrices(A, "lu_factor_ex")
    if not isinstance(pivot, bool):
        raise TypeError(f"pivot: expected a bool, got {type(pivot).__name__}")
    LU, piv, info = _factor_ex(A, pivot)
    if check_errors:
        _raise_singular(info, "torch.linalg.lu_factor_ex")
    return LUFactorEx(LU, piv, info)


def lu_factor(A: torch.Tensor, *, pivot: bool = True) -> LUFactor:
    """LU factorisation with partial pivoting, like ``torch.linalg.lu_factor``: as
    :func:`lu_factor_ex`, and ``torch.linalg.LinAlgError`` for an exactly-zero pivot,
    which reads ``info`` on the host (every call syncs once; :func:`lu_factor_ex` does not).

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.randn(1000, 4, 4)
    >>> LU, pivots = fastpath.linalg.lu_factor(A)
    >>> x = fastpath.linalg.lu_solve(LU, pivots, torch.randn(1000, 4, 1))
    """
    check_matrices(A, "lu_factor")
    if not isinstance(pivot, bool):
        raise TypeError(f"pivot: expected a bool, got {type(pivot).__name__}")
    if _torch_route(A) and not factor_loops(A, pivot):  # torch's own call and check: no Python between its
        try:  # sync and the return (H200, one 2048x2048 complex64 through _factor_ex + our check: 0.99x)
            return LUFactor(*torch.linalg.lu_factor(A, pivot=pivot))
        except RuntimeError as e:  # torch's zero-pivot error (a RuntimeError) raised as the kernels' paths raise it
            if isinstance(e, torch.linalg.LinAlgError) or "is zero and using it on lu_solve" not in str(e):
                raise
            raise torch.linalg.LinAlgError(str(e)) from None
    LU, piv, info = _factor_ex(A, pivot)
    _raise_singular(info, "torch.linalg.lu_factor")
    return LUFactor(LU, piv)


def lu_solve(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, left: bool = True,
             adjoint: bool = False) -> torch.Tensor:
    """Solve ``A X = B`` given the LU factorisation of A, like ``torch.linalg.lu_solve``.

    Parameters
    ----------
    LU, pivots : as returned by :func:`lu_factor` (or torch's): LU (*, n, n), pivots (*, n)
        int32 with ``pivots.shape == LU.shape[:-1]``; any strides.
    B : Tensor (*, n, k) (``(*, k, n)`` with ``left=False``) of LU's dtype and device; batch
        dimensions broadcast with LU's.
    left : solve ``A X = B`` (True) or ``X A = B`` (False).
    adjoint : solve with ``A^H`` in place of A.

    Returns
    -------
    X, contiguous, of the broadcast shape. A zero pivot in U gives inf/NaN, as in torch; an
    infinite entry in a system's LU or B gives NaN in that system's columns on the tf32x3 path
    (where torch's may hold inf), the other systems unaffected.

    Paths: n <= 32 in registers (many matrices per program); n <= 1024 one matrix and up to
    64 right-hand sides per program, blocked (every step one tl.dot, complex systems as real
    ones of twice the size; with 32 or more right-hand sides its float32 products run as
    tf32x3, float32-level accuracy; float32 / complex64 with 1-4 right-hand sides: products and
    sums on the FMA units, ``triangular.FEW_PLAN``); larger n, devices
    Triton does not serve, inputs that need gradients and the shapes where torch's was measured
    faster (:func:`solve_faster`: 2048 systems or more, one large system with few right-hand
    sides, ...) take ``torch.linalg.lu_solve``. On the kernels, pivots out of range count as no
    interchange (never an out-of-bounds read); torch's path has torch's behaviour.

    Raises
    ------
    TypeError for unsupported or mismatched dtypes (pivots must be int32); ValueError for
    non-square LU, pivots of the wrong shape, B whose rows do not match n, batch
    dimensions that do not broadcast.
    """
    if _routed_to_torch(LU, B, left):
        return torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
    if not (MEMO and isinstance(left, bool) and isinstance(adjoint, bool)):
        return _checked_lu_solve(LU, pivots, B, left, adjoint)
    return _LU_SOLVE_MEMO.call(lambda: _checked_lu_solve(LU, pivots, B, left, adjoint), (LU, pivots, B),
                               (left, adjoint))


def _routed_to_torch(LU, B, left) -> bool:
    """A call of matrices that :func:`solve_faster` sends to torch's path, taken before fastpath's
    checks and memo: those cost ~20-30 us of host time a call, as much as torch's whole solve of a
    few small systems (H100: 8 float32 16x16 systems with 16 right-hand sides 51.1 against 22.3 us);
    torch's own checks apply."""
    if not (ROUTE_BY_SPEED and type(LU) is torch.Tensor and type(B) is torch.Tensor and LU.dim() >= 2
            and B.dim() >= 2 and isinstance(left, bool) and LU.dtype in KERNEL_DTYPES and B.dtype == LU.dtype):
        return False  # (anything else: fastpath's checks and their messages first)
    try:  # (torch.broadcast_shapes takes ~8 us)
        nb = math.prod(broadcast_shape(tuple(LU.shape[:-2]), tuple(B.shape[:-2])))
    except RuntimeError:
        return False
    return not solve_faster(LU.shape[-1], nb, B.shape[-1] if left else B.shape[-2], LU.is_complex())


def _checked_lu_solve(LU, pivots, B, left, adjoint) -> torch.Tensor:
    """lu_solve's checks, then the kernel or torch (eager calls like an earlier one replay its
    launches: fastpath._core.memo)."""
    n = check_square("LU", LU, "lu_solve")
    from ..._core.errors import check_tensor
    check_tensor("pivots", pivots)
    if pivots.dtype != torch.int32:
        raise TypeError(f"pivots: lu_solve expects int32 pivots (as lu_factor returns), got {pivots.dtype}")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise ValueError(f"pivots: expected shape LU.shape[:-1] = {tuple(LU.shape[:-1])}, got {tuple(pivots.shape)}")
    if pivots.device != LU.device:
        raise ValueError(f"pivots: expected a tensor on LU's device {LU.device}, got {pivots.device}")
    if not isinstance(adjoint, bool):
        raise TypeError(f"adjoint: expected a bool, got {type(adjoint).__name__}")
    rhs_shapes(LU, B, left, "lu_solve", "LU")
    del n
    return _lu_solve_op(LU, pivots, B, left, adjoint)


#: Eager lu_solve calls like an earlier one replay its launches (fastpath._core.memo). H100
#: (scripts/lu_solve_rhs.py --host, fifty-third session): host time a call 111 -> 20 us (complex64,
#: one right-hand side), 89 -> 20 (float32); the eager call 124.9 -> 106.1 us and 101.8 -> 58.0,
#: 4 right-hand sides unchanged (GPU-bound: 167.8 us); compiled memo tests passed.
MEMO = True
_LU_SOLVE_MEMO = LaunchMemo()


def det(A: torch.Tensor) -> torch.Tensor:
    """Determinant of a batch of square matrices, like ``torch.linalg.det``: the product of
    the pivots of the LU factorisation with partial pivoting, negated per row interchange.

    A : Tensor (*, n, n), float32, float64, complex64 or complex128. Returns (*) of A's
    dtype (0 for a singular matrix; may overflow where the slogdet would not, as torch's).
    Paths as :func:`lu_factor_ex`; n <= 32 writes nothing but the determinants. Raises
    TypeError for unsupported dtypes, ValueError for non-square A.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.det(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    check_square("A", A, "det")
    return _det_op(A)


def slogdet(A: torch.Tensor) -> SlogDet:
    """Sign and log of the absolute value of the determinant, like ``torch.linalg.slogdet``.

    A : Tensor (*, n, n), float32, float64, complex64 or complex128. Returns
    ``(sign, logabsdet)``: ``sign`` (*) of A's dtype (+-1, a unit complex number, or 0 for a
    singular matrix), ``logabsdet`` (*) real (``-inf`` for a singular matrix). The log is
    summed pivot by pivot, so it neither overflows nor underflows. Paths as :func:`det`.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.slogdet(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    SlogDet(sign=tensor(-1.), logabsdet=tensor(0.6931))
    """
    check_square("A", A, "slogdet")
    return SlogDet(*_slogdet_op(A))
