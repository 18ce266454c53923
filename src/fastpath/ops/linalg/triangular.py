"""Triangular solves, ``solve_triangular`` with the semantics of ``torch.linalg``; the same
kernel runs the two substitutions of ``lu_solve`` (:mod:`.lu`).

One kernel, ``_trsm_kernel``, solving ``M X = B`` where ``M`` is a triangle of ``T`` (read
through its strides, so a transposed ``T`` is a view, not a copy), optionally conjugated:

* ``BLOCKED=False`` (n <= 32): a program holds ``BLOCK_B`` whole matrices and a chunk of
  ``KB`` right-hand-side columns in registers and substitutes row by row.
* ``BLOCKED=True`` (one matrix per program, a chunk of ``KB`` right-hand sides): rows in
  blocks of ``NB``; block ``i`` takes ``B_i - M_i,solved X_solved`` (in chunks of ``KC`` rows)
  and multiplies by ``M_ii^-1`` (``tl.dot``: float32 products exact, or as three TF32
  tensor-core passes, ``PREC``, where a program takes 32 right-hand sides; the diagonal blocks are inverted
  beforehand, all at once, by ``_diag_inv_kernel``, so the sweep has no row-by-row step, as
  GPU trsm implementations do), and writes ``X_i``, which later blocks read back (a barrier
  orders the write and the reads). ``FEW`` 1 or 2 (1-4 right-hand sides, ``FEW_PLAN``): the same
  sweep with products and sums on the FMA units, complex entries as (re, im) pairs
  (``_sweep_few``, a column-major ``T``'s chunks read transposed, ``TRANS``; or ``_sweep_few3``,
  every tensor 3-D so that a chunk step changes no layout).
* ``LU=True``: two passes, ``M1`` then ``M2`` with the opposite triangle and unit flag, and
  the row interchanges of LAPACK's ``ipiv`` (``pivots``) applied to B on the way in
  (``PERM_OUT=False``: ``X = U^-1 L^-1 P^T B``) or to X on the way out (``PERM_OUT=True``:
  ``X = P M2^-1 M1^-1 B`` for the transposed systems). The interchanges are turned into a
  row map without any reduction: each row tracks its position backwards through the swaps.

Large triangular systems (n > ``HOST_BLOCK_N``, one matrix n > ``HOST_ONE_N``) are solved
block by block from the host (a CUDA graph of it replayed from the second call on the same inputs):
the diagonal blocks of ``HOST_BLOCK`` rows inverted up front, all in one launch
(the kernel on identity right-hand sides), then matrix products only, each block's rows
``X_i = M_ii^-1 R_i`` and the update of the rows not yet solved (``torch.baddbmm``), as GPU trsm
implementations do with their diagonal blocks.
"""
from __future__ import annotations

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, num_sms, tl, triton, use_triton
from ..._core.errors import check_tensor
from ..._core.launch import Launcher, cdiv, next_pow2, workspace
from ..._core.registry import register_op
from ..._core.shapes import broadcast_shape
from .graphs import GraphCache, exact_matmuls
from .tiles import (_div, _dot, _eliminate, _ld, _mul, _pick, _st, _tri_solve, check_rhs, flat3,
                    kernel_strides, real_view)

#: Dtypes of the kernels (complex through view_as_real) and of torch.linalg.
KERNEL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: n up to this: whole matrices in registers; above: row blocks (``BLOCKED_PLAN``).
SMALL_N = 32
#: Software-pipeline stages of the blocked path's chunk loop (H200 sweep: 2 stages took complex64
#: lu_solve 64 x 256x256 from 554 to 1681 us, float32 from 180 to 243).
STAGES = 1
#: Above this n, solve_triangular goes block by block from the host (``_host_blocked``); one matrix
#: above HOST_ONE_N. H100, one 1024-row upper matrix (``gpu_pending.sh 146``, sixty-third session), in a
#: graph: 512 right-hand sides 198.8 us on the kernel, 122.7 from the host; 32: 196.6 / 102.1 (torch 223 /
#: 206); 4 such matrices: 192.1 / 279.0 (the kernel's programs fill the GPU); 512 rows: 80.6 / 74.8.
HOST_BLOCK_N = 1024
HOST_ONE_N = 512
#: CUDA graphs of the host path kept (by shape and the inputs' addresses, ``graphs.GraphCache``): its
#: ~20 launches and products cost more host time than GPU time on a slow host (H100, 4096x4096 with 512
#: right-hand sides: ~600-1000 us of host time eager, 440 us in a graph); 0: no graphs.
GRAPHS = 2
#: Rows of a host block (a multiple of every ``BLOCKED_PLAN`` row block). H100, 4096x4096 upper with
#: 512 right-hand sides (``scripts/solve_tri_host.py``, sixty-second session, twice alternated): 128 rows
#: 598 / 600 us in a graph, 1738-1768 eager; 256: 479 / 483, 976-1004; 512: 442 / 443, 610 / 613 (eager
#: host-bound: 593-604 us of host time a call). The earlier form, the kernel on each diagonal block in
#: turn then a product (host blocks of 512 rows): 963 / 969 in a graph, 997 / 1002 eager (its kernel has
#: 32 programs for one matrix's 512 right-hand sides: the diagonal blocks' substitutions were 431 us,
#: their inverses 285).
HOST_BLOCK = 512
#: The blocked path's plan by dtype: (NB rows a block, and the size of its inverted diagonal
#: blocks; KC rows of the solved part a tl.dot; KB right-hand sides a program at most; warps).
#: KB halves (down to 16) while it is at least twice k or the grid would have fewer programs than
#: BLOCKED_FILL of the GPU's SMs. (float64 / complex128 plans: compiled without spills offline, not timed.)
#: (complex64 at 32 right-hand sides a program with registers capped at 128 (``maxnreg``), four programs an SM
#: instead of two: H100, lu_solve of 64 x 256x256 with 256 right-hand sides 330 -> 414 us, the sweep 285-288 -> 366:
#: the sweep's time follows its instructions an SM (each program repeats the matrix side), fifty-ninth session.)
BLOCKED_PLAN = {torch.float32: (64, 64, 64, 4), torch.complex64: (32, 32, 64, 4),
                torch.float64: (32, 32, 32, 4), torch.complex128: (16, 16, 32, 4)}
#: ... the fraction of the GPU's SMs below which a call's programs halve KB (the rule above), by dtype
#: (1 where absent). H100, lu_solve of 64 x 256x256 (scripts/lu_solve_rhs.py, fifty-fifth session),
#: 1 -> 0.5: complex64 64 right-hand sides 471.0 -> 223.0 us (32 a program, not 16), 128: 276.0 -> 272.8,
#: 32: 299.2 -> 299.1; float32 64: 97.3 -> 90.5 but 128: 97.8 -> 110.2 (float32 keeps 1).
BLOCKED_FILL = {torch.complex64: 0.5}
#: The blocked path's few-right-hand-side form (``_sweep_few``: products and sums on the FMA units
#: instead of tl.dot's 16-column tiles, complex entries read as (re, im) pairs) by dtype: (NB rows a
#: block, KC rows of the solved part a chunk at one right-hand side (halved per doubling of k),
#: warps, the most right-hand sides, form); dtypes not listed take BLOCKED_PLAN. H100, lu_solve of
#: 64 x 256x256 with torch's factors (scripts/lu_solve_rhs.py): complex64 one right-hand side 297 ->
#: 180 us (tl.dot form -> this; 198 with the real embedding on the FMA units), 2: ~300 -> 232, 4:
#: ~311 -> 249; float32 1: 121 -> 86 (32-row blocks; 96 with 64), 2: ~120 -> 100, 4: ~125 -> 113.
#: Form 1: ``_sweep_few``; 2: ``_sweep_few3`` (every tensor 3-D, the products summed elementwise
#: over the chunks: complex64's chunk step 978 -> 377 SASS instructions and 19 -> 0 barriers at one
#: right-hand side, scripts/compile_sm90.py's COMPILE_LOOPS; float32 row-major 577 -> 159, 21 -> 0;
#: float32 column-major keeps a layout change of X in a step). H100, the same lu_solve, kernel time
#: (scripts/lu_solve_rhs.py --profile, fifty-second session): complex64's sweep at one right-hand
#: side 127.5 -> 60.2 us with form 2, at 4 193.5 -> 118.7; float32 42.0 -> 53.7 at one, 76.6 -> 68.1 at 4
#: (float32 keeps form 1).
FEW_PLAN = {torch.float32: (32, 128, 4, 4, 1), torch.complex64: (32, 64, 4, 4, 2)}
#: ... reading a column-major M's chunks transposed (along memory) from this many right-hand sides
#: (complex64 one: 180 -> 193 us, 2: 239 -> 232, 4: 386 -> 249; float32 one: 101 -> 96); form 1 only
#: (form 2 reads either order the same way).
FEW_TRANS_MIN_K = {torch.float32: 1, torch.complex64: 2}
#: float32 products of the blocked path when a program takes at least TF32X3_MIN_KB right-hand
#: sides: "tf32x3" (three TF32 tensor-core passes, float32-level accuracy) or "ieee" (exact
#: float32 on the FMA units). H200, complex64 lu_solve of 64 x 256x256 with 256 right-hand
#: sides: 1439 -> 945 us (relative error 3.8e-7 -> 2.9e-7); one right-hand side (16-column
#: tiles) 310 -> 378 us, so those stay exact; the blocked LU factorisation's updates 2959 ->
#: 3492 us, so it stays exact too (bench/results/tuning/2026-11-30-lu_tf32x3-7a5b2d6.log).
TF32X3_PREC = "ieee" if torch.version.hip is not None else "tf32x3"  # (NVIDIA's tensor cores)
TF32X3_MIN_KB = 32
#: The blocked sweep's "tf32x3" products split by fastpath ("tf32x3s", ``tiles._dot``: no NaN fixup,
#: no zero accumulator's sum) instead of by Triton.
OWN_TF32X3 = True
#: (Both operands' low parts formed before the first of the three products, the same products bit for bit, offline
#: 218 -> 168 registers and 4 -> 2 barriers a chunk step, was slower and is gone: H100, complex64 lu_solve of 64 x
#: 256x256 with 256 right-hand sides, the sweep 282.9 / 284.1 -> 287.2 / 288.6 us (gpu_pending.sh 142, sixty-first
#: session).)
#: The blocked sweep without masks where every row block, chunk and column tile is full (n a multiple
#: of its NB, NB of its KC, k of its KB): no compares and no predicated loads.
EVEN_TILES = True
#: Real components of matrix plus right-hand side per program (register budget of one block).
TILE_ELEMS = 8192 if INTERPRET else 4096
#: The blocked path's diagonal-block inverses by dtype: (M's columns read from memory at each
#: step, one reduction a step (``_inv_from_mem``), or picked out of the tile in registers, three;
#: warps a program; blocks a program, None: as TILE_ELEMS allows). H200, lu_solve of 64 x 256x256
#: (scripts/tune_linalg.py, 0feb7cc): complex64 569.8 -> 544.5 us with 256 right-hand sides, 349.3
#: -> 323.4 with one (from memory, one warp; 4 and 2 warps 557 / 337); float32 178.4 in registers
#: against 243-288 from memory. float64 / complex128: not timed, in registers. Fourth: from memory,
#: the inverses' columns a program (None: all; fewer put the two passes and the column blocks
#: side by side, each block starting at its first nonzero row). H100, the same lu_solve with
#: torch's factors (scripts/lu_solve_rhs.py, 63a4f24+): complex64 8 columns 311 -> 297 us (one
#: right-hand side), 545 -> 529 (256); float32 16 columns 152 -> 121, 180 -> 148 (4 columns: 141
#: / 169). First entry 2: from memory with no layout change in a step (``_inv_one_layout``: no barrier
#: or shared memory in a step at one block a program, 102-203 SASS instructions against 168-293 for
#: complex64, scripts/compile_sm90.py's COMPILE_LOOPS); H100, the same lu_solve's inverses (kernel time,
#: fifty-second session): complex64 8 columns 51.2 -> 43.2 us, float32 16 columns 21.3 -> 11.8 (32-row
#: blocks, up to 4 right-hand sides) and 50.6 -> 35.5 (64-row blocks). Since the sixtieth session a step is a
#: unit triangle's (68 / 71 instructions for complex64, was 102 / 203; float32 153 / 156, was 221 / 255): H100
#: 43.8 -> 41.7 us (complex64), 35.2 -> 34.3 (float32). ncu (H200): the inverses are bound by L2 traffic, not
#: issue (L2 70.9% busy, DRAM 2.3%, 0.49 eligible warps a scheduler): complex64's (re, im) stores are 4-byte
#: writes a lane 256 bytes apart, 2.1 M partial sectors for 8 MB. First entry 3: form 2 with the whole block
#: loaded first (its lines cached before the steps' column loads). H200, twice alternated (gpu_pending.sh 138,
#: lu_solve_rhs.py --profile, 256 right-hand sides): float32 34.0 / 34.5 -> 28.0 / 27.9 us (lu_solve 126.5 /
#: 126.8 -> 120.2 / 120.2 us, 5.09x -> 5.35x torch; 64-row blocks; the 32-row ones of 1-4 right-hand sides
#: untimed), complex64 37.2 / 36.8 -> 40.7 / 40.9 (slower: kept at 2); complex64 at 16 columns a program 43.6 /
#: 44.9, two blocks a program 40.4 / 41.2.
DIAG_PLAN = {torch.float32: (3, 1, 1, 16), torch.complex64: (2, 1, 1, 8),
             torch.float64: (False, 4, None, None), torch.complex128: (False, 4, None, None)}
#: Complex inverses of forms 2 / 3 moving their entries as (re, im) word pairs: each step's column one 8-byte load a
#: lane, the inverse's columns stored as one run of words a row (a lane), where the (re, im) stores write 4 bytes a
#: lane 256 bytes apart (ncu above: 2.1 M partial L2 sectors for 8 MB). Offline sm_90 (complex64, 32-row blocks):
#: the stores 16 st.global.b32 -> 4 st.global.v4.b32 a lane, a step's loads 2 -> 1 (ld.global.v2), 68 -> 70
#: instructions a step. H100, complex64 lu_solve of 64 x 256x256 with 256 right-hand sides (scripts/lu_solve_rhs.py
#: --profile, twice alternated, gpu_pending.sh 142, sixty-first session): the inverses 41.6 / 41.3 -> 14.0 / 14.0 us,
#: lu_solve 331.4 / 329.3 -> 300.2 / 302.1 us (2.87x / 2.90x -> 3.18x / 3.15x torch).
DIAG_WORDS = True
#: Complex right-hand sides of unit stride along a row (B's, X's: row-major) take the blocked sweep's
#: tiles as runs of words (``_xw_ld`` / ``_xw_st``, then the same products bit for bit): the (re, im)
#: tiles' strided loads and stores were laid a warp down the rows, a 32-byte sector for each 8 bytes
#: (TTGIR of ``_trsm_kernel``: threadsPerWarp [32, 1], order [0, 1]); from XW_MIN_KB right-hand sides a
#: program (the word tiles pass through shared memory once more to take the embedding's row order).
#: H100, lu_solve of 64 x 256x256 (scripts/lu_solve_rhs.py, twice, fifty-fifth session): 256 right-hand
#: sides (64 a program) 525.5 / 522.6 -> 354.8 / 353.3 us with torch's column-major factors, 622.3 ->
#: 455.4 with row-major ones; 32 (16 a program) 302.0 / 299.3 -> 315.5 / 319.5 (slower: not taken); 128
#: (32 a program) 328.7 / 326.6 -> 275.1 / 276.6; 64 (16 a program) 475.3 / 470.6 -> 461.5 / 462.1.
XW_LOADS = True
XW_MIN_KB = 32
#: (Those sweeps' products transposed, X^T M^T with M's tiles the tensor cores' operand from shared memory,
#: took 8.5-12.4% fewer sm_90 instructions a pass and was slower, and is gone: H100, 64 x 256x256 with 256
#: right-hand sides 333.3 / 330.3 -> 395.3 / 399.4 us, 64: 206 -> 266 (gpu_pending.sh 136, sixtieth session).)
#: (A row-major complex M's chunks as runs of words too, each entry's 2 x 2 block built in registers, was
#: slower and is gone: H100, 256 right-hand sides 454 / 456 -> 586 / 591 us; 64: 279 / 281 -> 331 / 333
#: (gpu_pending.sh 109, fifty-sixth session).)
#: Calls with fewer diagonal blocks than DIAG_FEW_BLOCKS take DIAG_FEW_PLAN where it has their dtype:
#: float32's column blocks were measured on 512 blocks (64 matrices) only; the host-blocked
#: solve_triangular (8 blocks a call, 1015 us on the H200 at 33d9c21 in the tile form) keeps that form.
DIAG_FEW_BLOCKS = 64
DIAG_FEW_PLAN = {torch.float32: (False, 4, None, None)}
#: (The sweep launched as a programmatic dependent launch of the diagonal inverses, tracking the row interchanges
#: before its wait, measured no faster and is gone: H100, the same lu_solve 303.0 / 303.3 -> 302.9 / 303.3 us.)


# ---------------------------------------------------------------------------- complex as real

# A complex product A @ X runs as one real tl.dot: A's entry (r, c) becomes the 2 x 2 block
# [[re, -im], [im, re]] at real rows 2r, 2r+1 and columns 2c, 2c+1, and X's rows interleave
# [re; im] the way view_as_real lays them out. Tiles index real rows i as (i // C, i % C):
# the matrix row and the component (C = 2 for complex, 1 for real, where both helpers are
# plain loads).

@triton.jit
def _emb_ld(ptr, rows, rp, cols, cp, s_r, s_c, mask, CPLX: tl.constexpr, CONJ: tl.constexpr):
    """The real embedding of the entries (rows[:, None], cols[None, :]) of a matrix (of its
    conjugate if CONJ); ``rp`` / ``cp`` the components of the tile's rows / columns."""
    a = tl.load(ptr + rows[:, None] * s_r + cols[None, :] * s_c + (rp[:, None] != cp[None, :]), mask=mask, other=0.0)
    if CPLX:
        if CONJ:
            a = tl.where(rp[:, None] > cp[None, :], -a, a)
        else:
            a = tl.where(rp[:, None] < cp[None, :], -a, a)
    return a


@triton.jit
def _vec_off(rows, rp, cols, s_r, s_c):
    """Offsets of the interleaved rows (rows[:, None], component rp) and columns ``cols``."""
    return rows.to(tl.int64)[:, None] * s_r + cols[None, :] * s_c + rp[:, None]  # (rows x a wide B's stride)


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _track(piv_ptr, poff, spc, pmask, pos, t0, t1, n):
    """Rows ``pos`` (BB, P) tracked backwards through the interchanges ``t <-> piv[t] - 1`` for
    t = t1-1 .. t0: afterwards ``pos[i]`` is the row that the interchanges applied in order
    bring to position i. Out-of-range pivots count as no interchange."""
    for s in range(t0, t1):
        t = t1 - 1 - (s - t0)
        p = tl.load(piv_ptr + poff + t * spc, mask=pmask, other=0) - 1
        p = tl.where((p >= 0) & (p < n), p, t)[:, None]
        pos = tl.where(pos == t, p, tl.where(pos == p, t, pos))
    return pos


@triton.jit
def _col_diag(t_ptr, coffs, cmask, doffs, dmask, UNIT: tl.constexpr, CONJ: tl.constexpr, CPLX: tl.constexpr):
    """A column of M at ``coffs`` (zero where not ``cmask``) and its diagonal entry at ``doffs``
    (one where not ``dmask``), conjugated if CONJ."""
    mr, mi = _ld(t_ptr, coffs, cmask, CPLX)
    if CPLX:
        if CONJ:
            mi = -mi
    dr = mr
    di = mi
    if not UNIT:
        dr, di = _ld(t_ptr, doffs, dmask, CPLX)
        dr = tl.where(dmask, dr, 1.0)
        if CPLX:
            if CONJ:
                di = -di
            di = tl.where(dmask, di, 0.0)
    return mr, mi, dr, di


@triton.jit
def _inv_col(t_ptr, moff1, mvalid, rin, col0, n, s_tr, s_tc, j, r2, UNIT: tl.constexpr, CONJ: tl.constexpr,
             CPLX: tl.constexpr):
    """Column j of the diagonal blocks at ``moff1`` (BB,) (conjugated if CONJ) and their
    diagonal entry (one past n)."""
    return _col_diag(t_ptr, moff1[:, None] + r2 * s_tr + j * s_tc, rin & (col0[:, None] + j < n),
                     moff1 + j * (s_tr + s_tc), mvalid & (col0 + j < n), UNIT, CONJ, CPLX)


@triton.jit
def _first_step(c0, CB: tl.constexpr, NB: tl.constexpr, LOWER: tl.constexpr):
    """The first column and the number of steps of the substitution for an inverse's columns
    c0 .. c0+CB-1 (the steps before them leave them zero: lower, they start at c0; upper, at
    c0+CB-1)."""
    if LOWER:
        j = c0
        steps = NB - c0
    else:
        j = c0 + CB - 1
        steps = c0 + CB
    return j, steps


@triton.jit
def _next_col(j, NB: tl.constexpr, LOWER: tl.constexpr):
    """The substitution's next column after j (clamped into the block: its load is a step ahead)."""
    if LOWER:
        jn = tl.minimum(j + 1, NB - 1)
    else:
        jn = tl.maximum(j - 1, 0)
    return jn


@triton.jit
def _inv_from_mem(t_ptr, moff1, mvalid, col0, n, s_tr, s_tc, c0, dtype: tl.constexpr, BB: tl.constexpr,
                  NB: tl.constexpr, CB: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr,
                  CPLX: tl.constexpr):
    """Columns c0 .. c0+CB-1 of the inverses X (BB, NB, CB) of the triangles of the (NB, NB)
    diagonal blocks at ``moff1`` (BB,) (their first entries; rows and columns ``col0`` (BB,) +
    0..NB-1 of a matrix with ``n`` rows, the identity past them), by substitution from the
    identity's columns. Each step's column and diagonal entry are loaded (cached, one step
    ahead, off the chain) instead of picked out of a tile in registers: one reduction a step (X's
    row). The steps before column c0 (lower; after c0+CB-1 upper) leave these columns zero and are
    skipped."""
    r = tl.arange(0, NB)
    r2 = r[None, :]
    r3 = r[None, :, None]
    xr = (r3 == c0 + tl.arange(0, CB)[None, None, :]).to(dtype) + tl.zeros([BB, NB, CB], dtype=dtype)
    xi = tl.zeros([BB, NB, CB], dtype=dtype)
    rin = mvalid[:, None] & (col0[:, None] + r2 < n)
    j, steps = _first_step(c0, CB, NB, LOWER)
    mr, mi, dr, di = _inv_col(t_ptr, moff1, mvalid, rin, col0, n, s_tr, s_tc, j, r2, UNIT, CONJ, CPLX)
    for s in range(0, steps):
        jn = _next_col(j, NB, LOWER)
        nr, ni, ndr, ndi = _inv_col(t_ptr, moff1, mvalid, rin, col0, n, s_tr, s_tc, jn, r2, UNIT, CONJ, CPLX)
        xjr, xji = _pick(xr, xi, r3 == j, 1, CPLX)  # row j of X: (BB, CB)
        if not UNIT:
            xjr, xji = _div(xjr, xji, dr[:, None], di[:, None], CPLX)
        xr, xi = _eliminate(xr, xi, mr, mi, xjr, xji, j, r3, LOWER, CPLX)
        mr, mi, dr, di = nr, ni, ndr, ndi
        j = jn
    return xr, xi


@triton.jit
def _after(r3, j, LOWER: tl.constexpr):
    """Rows past j in the substitution's order (below it if LOWER, above it if not)."""
    if LOWER:
        return r3 > j
    else:
        return r3 < j


@triton.jit
def _ld_pairs(ptr, coffs, mask):
    """(re, im) of the complex entries at complex offsets ``coffs`` of a real view: one load of
    the word pair a lane (``2 * coffs``: the compiler sees the pair 8-byte aligned)."""
    o = (coffs * 2)[:, :, :, None] + tl.arange(0, 2)[None, None, None, :]
    return tl.split(tl.load(ptr + o, mask=mask[:, :, :, None], other=0.0))


@triton.jit
def _st_runs(ptr, coffs, xr, xi, mask, BB: tl.constexpr, NB: tl.constexpr, CB: tl.constexpr):
    """The complex (BB, NB, CB) tile (xr, xi) stored from complex offsets ``coffs`` (BB, NB, 1)
    on, each row's CB entries one run of 2 CB words."""
    w = tl.reshape(tl.join(xr, xi), (BB, NB, 2 * CB))
    tl.store(ptr + coffs * 2 + tl.arange(0, 2 * CB)[None, None, :], w.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _col3(t_ptr, moff3, rin3, jok, s_tr, s_tc, j, r3, rdr, rdi, LOWER: tl.constexpr, UNIT: tl.constexpr,
          CONJ: tl.constexpr, CPLX: tl.constexpr, WORDS: tl.constexpr):
    """Column j of the diagonal blocks at ``moff3`` (BB, 1, 1) as (BB, NB, 1) (conjugated if
    CONJ), its rows past j only (zero elsewhere, and where not ``jok``: column j past n or the
    block invalid); not UNIT: of the unit triangle D^-1 M, row i scaled by (rdr, rdi) = 1 / d_i.
    WORDS (complex): each entry one load of its word pair (``_ld_pairs``; a real view's offsets and
    strides are even)."""
    m = rin3 & jok & _after(r3, j, LOWER)
    if WORDS:
        mr, mi = _ld_pairs(t_ptr, moff3 // 2 + r3 * (s_tr // 2) + j * (s_tc // 2), m)
    else:
        mr, mi = _ld(t_ptr, moff3 + r3 * s_tr + j * s_tc, m, CPLX)
    if CPLX:
        if CONJ:
            mi = -mi
    if not UNIT:
        mr, mi = _mul(mr, mi, rdr, rdi, CPLX)
    return mr, mi


@triton.jit
def _recip(dr, di, ok3, UNIT: tl.constexpr, CONJ: tl.constexpr, CPLX: tl.constexpr):
    """1 / d for diagonal entries (dr, di) (conjugated if CONJ; one where not ``ok3`` or UNIT)."""
    if UNIT:
        dr = tl.full(dr.shape, 1.0, dr.dtype)
        di = tl.zeros(dr.shape, dr.dtype)
    else:
        dr = tl.where(ok3, dr, 1.0)
        if CPLX:
            di = tl.where(ok3, di, 0.0)
            if CONJ:
                di = -di
    return _div(tl.full(dr.shape, 1.0, dr.dtype), tl.zeros(dr.shape, dr.dtype), dr, di, CPLX)


@triton.jit
def _recip_diag(t_ptr, moff3, idx3, ok3, s_tr, s_tc, UNIT: tl.constexpr, CONJ: tl.constexpr, CPLX: tl.constexpr):
    """:func:`_recip` of the diagonal entries i = ``idx3`` of the blocks at ``moff3``."""
    dr, di = _ld(t_ptr, moff3 + idx3 * (s_tr + s_tc), ok3, CPLX)
    return _recip(dr, di, ok3, UNIT, CONJ, CPLX)


@triton.jit
def _inv_one_layout(t_ptr, moff1, mvalid, col0, n, s_tr, s_tc, c0, dtype: tl.constexpr, BB: tl.constexpr,
                    NB: tl.constexpr, CB: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr,
                    CPLX: tl.constexpr, PRE: tl.constexpr, WORDS: tl.constexpr):
    """:func:`_inv_from_mem` with no layout change in a step: X (BB, NB, CB) keeps the layout of
    M's column (BB, NB, 1) (its rows across the lanes), X's row j is a gather (a lane's values
    broadcast, not a reduction). A step is a unit triangle's (no select, no division: M's column
    is loaded zero outside the rows it updates): not UNIT, M^-1 = V^-1 D^-1 with V = D^-1 M the
    unit triangle (its columns M's scaled by a lane's 1 / d_i as they load, a step ahead) and
    the inverse's columns scaled by 1 / d_c at the end. PRE: the whole block loaded first (its lines
    cached before the steps' column loads; the rows' diagonal entries picked out of it). WORDS: see
    :func:`_col3`."""
    r3 = tl.arange(0, NB)[None, :, None]
    cc = c0 + tl.arange(0, CB)[None, None, :]
    xr = (r3 == cc).to(dtype) + tl.zeros([BB, NB, CB], dtype=dtype)
    xi = tl.zeros([BB, NB, CB], dtype=dtype)
    rin3 = mvalid[:, None, None] & (col0[:, None, None] + r3 < n)
    moff3 = moff1[:, None, None]
    c3 = col0[:, None, None]
    ok3 = mvalid[:, None, None]
    if PRE:
        cf = tl.arange(0, NB)[None, None, :]
        tr, ti = _ld(t_ptr, moff3 + r3 * s_tr + cf * s_tc, rin3 & (c3 + cf < n), CPLX)
        on = r3 == cf
        pdr = tl.sum(tl.where(on, tr, 0.0), axis=2, keep_dims=True)
        pdi = tl.sum(tl.where(on, ti, 0.0), axis=2, keep_dims=True)
        if UNIT:  # (a store that never happens, r3 >= 0 > -n, keeps the block's loads)
            tl.store(t_ptr + moff3 + r3 * (s_tr + s_tc), pdr + pdi, mask=rin3 & (r3 < -n))
        rdr, rdi = _recip(pdr, pdi, rin3, UNIT, CONJ, CPLX)  # (rows: 1 / d_i)
    else:
        rdr, rdi = _recip_diag(t_ptr, moff3, r3, rin3, s_tr, s_tc, UNIT, CONJ, CPLX)
    j, steps = _first_step(c0, CB, NB, LOWER)
    mr, mi = _col3(t_ptr, moff3, rin3, ok3 & (c3 + j < n), s_tr, s_tc, j, r3, rdr, rdi, LOWER, UNIT, CONJ, CPLX,
                   WORDS)
    for s in range(0, steps):
        jn = _next_col(j, NB, LOWER)
        nr, ni = _col3(t_ptr, moff3, rin3, ok3 & (c3 + jn < n), s_tr, s_tc, jn, r3, rdr, rdi, LOWER, UNIT, CONJ,
                       CPLX, WORDS)
        jj = tl.zeros([BB, 1, CB], dtype=tl.int32) + j
        xjr = tl.gather(xr, jj, 1)  # row j of X: (BB, 1, CB)
        if CPLX:  # (x - m xj, as two fused multiply-adds a component)
            xji = tl.gather(xi, jj, 1)
            xi = xi - mr * xji - mi * xjr
            xr = xr - mr * xjr + mi * xji
        else:
            xr = xr - mr * xjr
            xi = xr
        mr, mi = nr, ni
        j = jn
    if not UNIT:
        cdr, cdi = _recip_diag(t_ptr, moff3, cc, ok3 & (c3 + cc < n), s_tr, s_tc, UNIT, CONJ, CPLX)
        xr, xi = _mul(xr, xi, cdr, cdi, CPLX)
    return xr, xi


@triton.jit
def _inv_cols(t_ptr, moff1, mvalid, col0, n, s_tr, s_tc, c0, dtype: tl.constexpr, BB: tl.constexpr,
              NB: tl.constexpr, CB: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr,
              CPLX: tl.constexpr, FORM: tl.constexpr, WORDS: tl.constexpr):
    """:func:`_inv_one_layout` (FORM 2; 3: the block loaded first) or :func:`_inv_from_mem`."""
    if FORM >= 2:
        xr, xi = _inv_one_layout(t_ptr, moff1, mvalid, col0, n, s_tr, s_tc, c0, dtype, BB, NB, CB, LOWER, UNIT,
                                 CONJ, CPLX, FORM == 3, WORDS)
    else:
        xr, xi = _inv_from_mem(t_ptr, moff1, mvalid, col0, n, s_tr, s_tc, c0, dtype, BB, NB, CB, LOWER, UNIT,
                               CONJ, CPLX)
    return xr, xi


@triton.jit
def _diag_inv_kernel(t_ptr, inv_ptr, total, nblk, n, stb, s_tr, s_tc,
                     BLOCK_B: tl.constexpr, NB: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
                     CONJ: tl.constexpr, LU: tl.constexpr, CPLX: tl.constexpr, FROM_MEM: tl.constexpr,
                     CB: tl.constexpr, WORDS: tl.constexpr = False):
    """Inverses of the (NB, NB) diagonal blocks of M (and of the opposite triangle with the
    opposite unit flag, after them, if LU), BLOCK_B blocks per program, to ``inv`` as
    (pass, matrix, block, NB, NB), contiguous. Past n a block is padded with the identity.
    FROM_MEM: the substitution reads M's columns from memory (:func:`_inv_from_mem`), CB of the
    inverses' columns a program, grid axis 1 = (pass, column block) (the passes side by side).
    WORDS (complex, forms 2 / 3): the inverses' rows stored as runs of words (``_st_runs``)."""
    idx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)  # (matrix, block) flattened
    valid = idx < total
    r3 = tl.arange(0, NB)[None, :, None]
    c3 = tl.arange(0, NB)[None, None, :]
    C: tl.constexpr = 2 if CPLX else 1
    # (the second pass's half starts total * NB * NB * C components in: past int32 for big batches)
    half = tl.full([], NB * NB * C, tl.int64) * total
    if FROM_MEM:
        col0 = (idx % nblk) * NB
        moff1 = (idx // nblk).to(tl.int64) * stb + col0.to(tl.int64) * (s_tr + s_tc)
        c0 = (tl.program_id(1) % (NB // CB)) * CB
        cc3 = c0 + tl.arange(0, CB)[None, None, :]
        offs = (idx.to(tl.int64)[:, None, None] * NB * NB + r3 * NB + cc3) * C
        first = tl.program_id(1) < NB // CB  # (the L pass; else the opposite triangle's)
        if first:
            xr, xi = _inv_cols(t_ptr, moff1, valid, col0, n, s_tr, s_tc, c0, t_ptr.dtype.element_ty, BLOCK_B, NB,
                               CB, LOWER, UNIT, CONJ, CPLX, FROM_MEM, WORDS)
        else:
            xr, xi = _inv_cols(t_ptr, moff1, valid, col0, n, s_tr, s_tc, c0, t_ptr.dtype.element_ty, BLOCK_B, NB,
                               CB, not LOWER, not UNIT, CONJ, CPLX, FROM_MEM, WORDS)
        if WORDS:
            _st_runs(inv_ptr + tl.where(first, 0, half), idx.to(tl.int64)[:, None, None] * NB * NB + r3 * NB + c0,
                     xr, xi, valid[:, None, None], BLOCK_B, NB, CB)
        else:
            _st(inv_ptr + tl.where(first, 0, half), offs, xr, xi, valid[:, None, None], CPLX)
    else:
        eye = (r3 == c3).to(t_ptr.dtype.element_ty) + tl.zeros([BLOCK_B, NB, NB], dtype=t_ptr.dtype.element_ty)
        zero = tl.zeros([BLOCK_B, NB, NB], dtype=eye.dtype)
        offs = (idx.to(tl.int64)[:, None, None] * NB * NB + r3 * NB + c3) * C
        b3 = (idx // nblk).to(tl.int64)[:, None, None]
        i0 = ((idx % nblk) * NB)[:, None, None]
        mask = valid[:, None, None] & (i0 + r3 < n) & (i0 + c3 < n)
        tr, ti = _ld(t_ptr, b3 * stb + (i0 + r3) * s_tr + (i0 + c3) * s_tc, mask, CPLX)
        tr = tl.where(mask, tr, eye)
        if not CPLX:
            ti = tr
        xr, xi = _tri_solve(tr, ti, eye, zero, NB, LOWER, UNIT, CONJ, CPLX)
        _st(inv_ptr, offs, xr, xi, valid[:, None, None], CPLX)
        if LU:
            xr, xi = _tri_solve(tr, ti, eye, zero, NB, not LOWER, not UNIT, CONJ, CPLX)
            _st(inv_ptr + half, offs, xr, xi, valid[:, None, None], CPLX)


@triton.jit
def _mapped(perm, rows, mask, PERM: tl.constexpr):
    """``perm[rows]`` (the row map) if PERM, else ``rows``."""
    if PERM:
        out = tl.load(perm + rows, mask=mask, other=0)
    else:
        out = rows
    return out


@triton.jit
def _block_rows(s, nblk, n, perm, cmask, NB: tl.constexpr, LOWER: tl.constexpr, SRC_PERM: tl.constexpr):
    """:func:`_block_span`'s block as NB rows: (i0, lo, hi, its rows, their mask, the rows read from
    the source (through ``perm`` if SRC_PERM), the mask of its (rows, columns ``cmask``))."""
    i0, lo, hi = _block_span(s, nblk, n, NB, LOWER)
    rows = i0 + tl.arange(0, NB)
    rmask = rows < n
    return i0, lo, hi, rows, rmask, _mapped(perm, rows, rmask, SRC_PERM), rmask[:, None] & cmask


@triton.jit
def _block_span(s, nblk, n, NB: tl.constexpr, LOWER: tl.constexpr):
    """Step ``s`` of a blocked substitution: the block's first row i0 (from the top if LOWER, else
    from the bottom) and the rows solved before it, [lo, hi)."""
    if LOWER:
        i0 = s * NB
        lo = 0
        hi = i0
    else:
        i0 = (nblk - 1 - s) * NB
        lo = i0 + NB
        hi = n
    return i0, lo, hi


@triton.jit
def _below(x, bound, EVEN: tl.constexpr):
    """``x < bound``, or all true where EVEN (the caller knows it holds: no masks, no compares)."""
    if EVEN:
        return tl.full(x.shape, 1, tl.int1)
    else:
        return x < bound


@triton.jit
def _xw_offs(rows, s_r, c0, rmask, k, K: tl.constexpr, EVEN: tl.constexpr):
    """Offsets and mask of complex rows ``rows`` at columns c0 .. c0+K-1 (of unit complex stride,
    those below ``k``) as an (R, 2K) tile of words: each row's columns one run along memory."""
    w = tl.arange(0, 2 * K)
    offs = rows.to(tl.int64)[:, None] * s_r + (c0 * 2 + w)[None, :]
    return offs, rmask[:, None] & _below(c0 + w // 2, k, EVEN)[None, :]


@triton.jit
def _xw_ld(ptr, rows, s_r, c0, rmask, k, R: tl.constexpr, K: tl.constexpr, EVEN: tl.constexpr):
    """Those rows as the real embedding's (2R, K) tile (row 2i: the real parts of rows[i], 2i + 1:
    the imaginary), loaded as runs of words: the (re, im) tile's strided loads are laid a warp down
    the rows, a 32-byte sector for 8 bytes (TTGIR of ``_trsm_kernel``)."""
    offs, m = _xw_offs(rows, s_r, c0, rmask, k, K, EVEN)
    x = tl.reshape(tl.load(ptr + offs, mask=m, other=0.0), (R, K, 2))
    return tl.reshape(tl.permute(x, (0, 2, 1)), (2 * R, K))


@triton.jit
def _xw_st(ptr, rows, s_r, c0, x, rmask, k, R: tl.constexpr, K: tl.constexpr, EVEN: tl.constexpr):
    """:func:`_xw_ld`'s inverse: the (2R, K) tile ``x`` stored as runs of words."""
    offs, m = _xw_offs(rows, s_r, c0, rmask, k, K, EVEN)
    v = tl.reshape(tl.permute(tl.reshape(x, (R, 2, K)), (0, 2, 1)), (R, 2 * K))
    tl.store(ptr + offs, v.to(ptr.dtype.element_ty), mask=m)


@triton.jit
def _sweep(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0,
           SRC_PERM: tl.constexpr, DST_PERM: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
           CONJ: tl.constexpr, CPLX: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr,
           PREC: tl.constexpr, XW: tl.constexpr, EVEN: tl.constexpr):
    """One blocked substitution of one matrix: rows of ``src`` (through ``perm`` if SRC_PERM)
    -> rows of ``dst`` (through ``perm`` if DST_PERM), columns c0 .. c0+KB-1; ``inv``: the
    inverses of its diagonal blocks (``_diag_inv_kernel``), so that every step is a tl.dot.
    Block i of NB rows takes the rows solved before it in chunks of KC (one tl.dot each).
    Complex systems run as real ones of twice the size (:func:`_emb_ld`); XW (complex right-hand
    sides of unit stride along a row): their tiles moved as runs of words (:func:`_xw_ld`). EVEN: n
    a multiple of NB, NB of KC and k of KB (every block, chunk and column tile full: no masks)."""
    C: tl.constexpr = 2 if CPLX else 1
    nblk = tl.cdiv(n, NB)
    r = tl.arange(0, NB * C)
    rp = r % C  # component of a row
    q = tl.arange(0, KC * C)
    qp = q % C  # component of a column of M / a row of X
    cc = c0 + tl.arange(0, KB)
    cmask = _below(cc, k, EVEN)[None, :]
    for s in range(0, nblk):
        i0, lo, hi = _block_span(s, nblk, n, NB, LOWER)
        rows = i0 + r // C
        rmask = _below(rows, n, EVEN)
        xmask = rmask[:, None] & cmask
        crows = i0 + tl.arange(0, NB)  # (XW: the block's complex rows)
        crmask = _below(crows, n, EVEN)
        if XW:
            acc = _xw_ld(src, _mapped(perm, crows, crmask, SRC_PERM), s_sr, c0, crmask, k, NB, KB, EVEN)
        else:
            srows = _mapped(perm, rows, rmask, SRC_PERM)
            acc = tl.load(src + _vec_off(srows, rp, cc, s_sr, s_sc), mask=xmask, other=0.0)
        for k0 in range(lo, hi, KC):
            qc = k0 + q // C  # column of M, row of X
            qmask = _below(qc, hi, EVEN)
            a = _emb_ld(t_ptr, rows, rp, qc, qp, s_tr, s_tc, rmask[:, None] & qmask[None, :], CPLX, CONJ)
            if XW:
                cq = k0 + tl.arange(0, KC)
                cqmask = _below(cq, hi, EVEN)
                x = _xw_ld(dst, _mapped(perm, cq, cqmask, DST_PERM), s_dr, c0, cqmask, k, KC, KB, EVEN)
            else:
                drows = _mapped(perm, qc, qmask, DST_PERM)
                x = tl.load(dst + _vec_off(drows, qp, cc, s_dr, s_dc), mask=qmask[:, None] & cmask, other=0.0)
            acc -= _dot(a, x, PREC)
        # the inverse blocks (NB, NB) contiguous, of the conjugated blocks already
        lr = (i0 // NB) * NB + r // C
        acc = _dot(_emb_ld(inv, lr, rp, r // C, rp, NB * C, C, tl.full([NB * C, NB * C], 1, tl.int1), CPLX, False),
                   acc, PREC)
        if XW:
            _xw_st(dst, _mapped(perm, crows, crmask, DST_PERM), s_dr, c0, acc, crmask, k, NB, KB, EVEN)
        else:
            drows = _mapped(perm, rows, rmask, DST_PERM)
            tl.store(dst + _vec_off(drows, rp, cc, s_dr, s_dc), acc.to(dst.dtype.element_ty), mask=xmask)
        tl.debug_barrier()  # X_i is read back by the next blocks


@triton.jit
def _cprod(ar, ai, xr, xi, TRANS: tl.constexpr, CPLX: tl.constexpr):
    """(a @ x) for a (R, Q) (TRANS: given as (Q, R)) and few columns x (Q, K), on the FMA units,
    complex as (re, im) pairs."""
    if TRANS:
        pr = tl.sum(ar[:, :, None] * xr[:, None, :], axis=0)
        if CPLX:
            pr -= tl.sum(ai[:, :, None] * xi[:, None, :], axis=0)
            pi = tl.sum(ar[:, :, None] * xi[:, None, :] + ai[:, :, None] * xr[:, None, :], axis=0)
        else:
            pi = pr
    else:
        pr = tl.sum(ar[:, :, None] * xr[None, :, :], axis=1)
        if CPLX:
            pr -= tl.sum(ai[:, :, None] * xi[None, :, :], axis=1)
            pi = tl.sum(ar[:, :, None] * xi[None, :, :] + ai[:, :, None] * xr[None, :, :], axis=1)
        else:
            pi = pr
    return pr, pi


@triton.jit
def _sweep_few(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0,
               SRC_PERM: tl.constexpr, DST_PERM: tl.constexpr, LOWER: tl.constexpr, CONJ: tl.constexpr,
               CPLX: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr, TRANS: tl.constexpr):
    """:func:`_sweep` for few right-hand sides (KB, a power of two from 1): products and sums on
    the FMA units, complex entries as (re, im) pairs read once each (no real embedding), M's chunks
    read transposed if TRANS (a column-major M along memory)."""
    C: tl.constexpr = 2 if CPLX else 1
    nblk = tl.cdiv(n, NB)
    r = tl.arange(0, NB)
    q = tl.arange(0, KC)
    cc = c0 + tl.arange(0, KB)
    cmask = (cc < k)[None, :]
    for s in range(0, nblk):
        i0, lo, hi, rows, rmask, srows, xmask = _block_rows(s, nblk, n, perm, cmask, NB, LOWER, SRC_PERM)
        accr, acci = _ld(src, srows.to(tl.int64)[:, None] * s_sr + cc[None, :] * s_sc, xmask, CPLX)
        for k0 in range(lo, hi, KC):
            qc = k0 + q  # column of M, row of X
            qmask = qc < hi
            if TRANS:
                ar, ai = _ld(t_ptr, qc[:, None] * s_tc + rows[None, :] * s_tr, qmask[:, None] & rmask[None, :], CPLX)
            else:
                ar, ai = _ld(t_ptr, rows[:, None] * s_tr + qc[None, :] * s_tc, rmask[:, None] & qmask[None, :], CPLX)
            if CPLX:
                if CONJ:
                    ai = -ai
            drows = _mapped(perm, qc, qmask, DST_PERM)
            xr, xi = _ld(dst, drows.to(tl.int64)[:, None] * s_dr + cc[None, :] * s_dc, qmask[:, None] & cmask, CPLX)
            pr, pi = _cprod(ar, ai, xr, xi, TRANS, CPLX)
            accr -= pr
            if CPLX:
                acci -= pi
        # the inverse blocks (NB, NB) contiguous, of the conjugated blocks already
        lr = (i0 // NB) * NB + r
        dr, di = _ld(inv, (lr[:, None] * NB + r[None, :]) * C, r[:, None] >= 0, CPLX)
        accr, acci = _cprod(dr, di, accr, acci, False, CPLX)
        drows = _mapped(perm, rows, rmask, DST_PERM)
        _st(dst, drows.to(tl.int64)[:, None] * s_dr + cc[None, :] * s_dc, accr, acci, xmask, CPLX)
        tl.debug_barrier()  # X_i is read back by the next blocks


@triton.jit
def _sweep_few3(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0,
                SRC_PERM: tl.constexpr, DST_PERM: tl.constexpr, LOWER: tl.constexpr, CONJ: tl.constexpr,
                CPLX: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr):
    """:func:`_sweep_few` with every tensor 3-D (block rows, chunk rows, right-hand sides), so
    that no step changes a layout: M's chunk (NB, KC, 1) in either storage order, X's rows
    (1, KC, KB), the products summed over the chunks elementwise and reduced once a block (no
    reduction across warps in a chunk step); the inverse block is read transposed, (c, r, 1), so
    that its product with the block's (NB, 1, KB) sums lands as (1, NB, KB) without a transpose."""
    C: tl.constexpr = 2 if CPLX else 1
    nblk = tl.cdiv(n, NB)
    r0 = tl.arange(0, NB)[:, None, None]  # block rows on axis 0
    r1 = tl.arange(0, NB)[None, :, None]  # block rows on axis 1
    q1 = tl.arange(0, KC)[None, :, None]
    kk = c0 + tl.arange(0, KB)[None, None, :]
    kmask = kk < k
    for s in range(0, nblk):
        i0, lo, hi = _block_span(s, nblk, n, NB, LOWER)
        rows = i0 + r0
        rmask = rows < n
        srows = _mapped(perm, rows, rmask, SRC_PERM)
        # the products summed over the chunks elementwise, (NB, KC, KB), reduced once a block
        pr = tl.zeros([NB, KC, KB], dtype=t_ptr.dtype.element_ty)
        pi = tl.zeros([NB, KC, KB], dtype=t_ptr.dtype.element_ty)
        for k0 in range(lo, hi, KC):
            qc = k0 + q1  # column of M, row of X: (1, KC, 1)
            qmask = qc < hi
            ar, ai = _ld(t_ptr, rows * s_tr + qc * s_tc, rmask & qmask, CPLX)  # (NB, KC, 1)
            drows = _mapped(perm, qc, qmask, DST_PERM)
            xr, xi = _ld(dst, drows.to(tl.int64) * s_dr + kk * s_dc + rows * 0, qmask & kmask & rmask,
                         CPLX)  # (NB, KC, KB): the tile's shape, so that both loads take one layout
            if CPLX:
                if CONJ:
                    ai = -ai
                pr += ar * xr - ai * xi
                pi += ar * xi + ai * xr
            else:
                pr += ar * xr
        accr, acci = _ld(src, srows.to(tl.int64) * s_sr + kk * s_sc, rmask & kmask, CPLX)  # (NB, 1, KB)
        accr -= tl.sum(pr, axis=1, keep_dims=True)
        if CPLX:
            acci -= tl.sum(pi, axis=1, keep_dims=True)
        # the inverse blocks (NB, NB) contiguous, of the conjugated blocks already: entry (r, c) as (c, r)
        lr = (i0 // NB) * NB + r1
        dr, di = _ld(inv, (lr * NB + r0) * C, r0 >= 0, CPLX)  # (NB c, NB r, 1)
        if CPLX:
            outr = tl.sum(dr * accr - di * acci, axis=0, keep_dims=True)  # (1, NB, KB)
            outi = tl.sum(dr * acci + di * accr, axis=0, keep_dims=True)
        else:
            outr = tl.sum(dr * accr, axis=0, keep_dims=True)
            outi = outr
        orows = i0 + r1
        omask = orows < n
        drows = _mapped(perm, orows, omask, DST_PERM)
        _st(dst, drows.to(tl.int64) * s_dr + kk * s_dc, outr, outi, omask & kmask, CPLX)
        tl.debug_barrier()  # X_i is read back by the next blocks


@triton.jit
def _pass(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0,
          SRC_PERM: tl.constexpr, DST_PERM: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
          CONJ: tl.constexpr, CPLX: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr,
          PREC: tl.constexpr, FEW: tl.constexpr, TRANS: tl.constexpr, XW: tl.constexpr, EVEN: tl.constexpr):
    """One blocked substitution: :func:`_sweep_few3` (FEW 2), :func:`_sweep_few` (FEW 1) or :func:`_sweep`."""
    if FEW == 2:
        _sweep_few3(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0, SRC_PERM, DST_PERM,
                    LOWER, CONJ, CPLX, NB, KC, KB)
    elif FEW:
        _sweep_few(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0, SRC_PERM, DST_PERM,
                   LOWER, CONJ, CPLX, NB, KC, KB, TRANS)
    else:
        _sweep(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0, SRC_PERM, DST_PERM,
               LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC, XW, EVEN)


@triton.jit
def _trsm_kernel(t_ptr, b_ptr, w_ptr, x_ptr, piv_ptr, perm_ptr, inv_ptr, nbatch, n, k,
                 stb, s_tr, s_tc, sbb, sbr, sbc, swb, swr, swc, sxb, sxr, sxc, spb, spc,
                 BLOCK_B: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr, P: tl.constexpr,
                 LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr, LU: tl.constexpr,
                 PERM_OUT: tl.constexpr, CPLX: tl.constexpr, BLOCKED: tl.constexpr, PREC: tl.constexpr = "ieee",
                 FEW: tl.constexpr = 0, TRANS: tl.constexpr = False, XW: tl.constexpr = False,
                 EVEN: tl.constexpr = False):
    c0 = tl.program_id(1) * KB
    if not BLOCKED:
        bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        r = tl.arange(0, NB)
        b3 = bidx[:, None, None].to(tl.int64)
        r3 = r[None, :, None]
        c3 = r[None, None, :]
        k3 = (c0 + tl.arange(0, KB))[None, None, :]
        in_b = b3 < nbatch
        tmask = in_b & (r3 < n) & (c3 < n)
        tr, ti = _ld(t_ptr, b3 * stb + r3 * s_tr + c3 * s_tc, tmask, CPLX)
        tr = tl.where(tmask, tr, (r3 == c3).to(tr.dtype))  # identity padding
        if not CPLX:
            ti = tr
        xmask = in_b & (r3 < n) & (k3 < k)
        rows_in = r3
        rows_out = r3
        if LU:
            pos = tl.arange(0, NB)[None, :] + tl.zeros([BLOCK_B, NB], dtype=tl.int32)
            pos = _track(piv_ptr, bidx.to(tl.int64) * spb, spc, bidx < nbatch, pos, 0, n, n)
            if PERM_OUT:
                rows_out = pos[:, :, None]
            else:
                rows_in = pos[:, :, None]
        xr, xi = _ld(b_ptr, b3 * sbb + rows_in.to(tl.int64) * sbr + k3 * sbc, xmask, CPLX)
        xr, xi = _tri_solve(tr, ti, xr, xi, n, LOWER, UNIT, CONJ, CPLX)
        if LU:
            xr, xi = _tri_solve(tr, ti, xr, xi, n, not LOWER, not UNIT, CONJ, CPLX)
        _st(x_ptr, b3 * sxb + rows_out.to(tl.int64) * sxr + k3 * sxc, xr, xi, xmask, CPLX)
    else:
        b = tl.program_id(0).to(tl.int64)
        tb = t_ptr + b * stb
        C: tl.constexpr = 2 if CPLX else 1
        blk = tl.cdiv(n, NB) * NB * NB * C  # one matrix's inverse blocks
        inv1 = inv_ptr + b * blk
        inv2 = inv_ptr + (nbatch + b) * blk
        perm = perm_ptr + (b * tl.num_programs(1) + tl.program_id(1)) * P
        if LU:
            one = tl.arange(0, 1)
            pos = tl.arange(0, P)[None, :] + tl.zeros([1, P], dtype=tl.int32)
            pos = _track(piv_ptr, b * spb + one, spc, one < 1, pos, 0, n, n)
            tl.store(perm + tl.arange(0, P)[None, :], pos)
            tl.debug_barrier()
            if PERM_OUT:  # B -> W (M1), W -> X scattered (M2)
                _pass(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, w_ptr + b * swb, swr, swc, perm, n, k,
                      c0, False, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC, FEW, TRANS, XW, EVEN)
                _pass(tb, s_tr, s_tc, inv2, w_ptr + b * swb, swr, swc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                      c0, False, True, not LOWER, not UNIT, CONJ, CPLX, NB, KC, KB, PREC, FEW, TRANS, XW, EVEN)
            else:  # B gathered -> X (M1), X -> X (M2)
                _pass(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                      c0, True, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC, FEW, TRANS, XW, EVEN)
                _pass(tb, s_tr, s_tc, inv2, x_ptr + b * sxb, sxr, sxc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                      c0, False, False, not LOWER, not UNIT, CONJ, CPLX, NB, KC, KB, PREC, FEW, TRANS, XW, EVEN)
        else:
            _pass(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                  c0, False, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC, FEW, TRANS, XW, EVEN)


_TRSM = Launcher(_trsm_kernel)
_DIAG_INV = Launcher(_diag_inv_kernel)


# ---------------------------------------------------------------------------- launcher

def trsm(T3: torch.Tensor, B3: torch.Tensor, X3: torch.Tensor, *, lower: bool, unit: bool,
         conj: bool = False, piv: torch.Tensor = None, perm_out: bool = False) -> None:
    """X3 = M^-1 B3 for the (nb, n, n) matrices T3 (any strides: pass ``T.mT`` for a transpose),
    M the lower or upper triangle of T3 (conjugated if ``conj``). With ``piv`` (nb, n) int32,
    LU mode: X3 = M2^-1 M1^-1 P^T B3 (``perm_out=False``) or P M2^-1 M1^-1 B3 (``perm_out=True``),
    M1 = (lower, unit) as given, M2 the opposite triangle with the opposite unit flag.
    B3, X3 (nb, n, k); X3 may be B3 (in place) when piv is None."""
    nb, n, k = B3.shape
    if nb == 0 or n == 0 or k == 0:
        return
    step = _columns_per_call(n, k, B3, X3)
    if step < k:  # column slices: offsets within a matrix fit int32, column blocks the grid
        for c in range(0, k, step):
            cols = slice(c, min(k, c + step))
            trsm(T3, B3[..., cols], X3[..., cols], lower=lower, unit=unit, conj=conj, piv=piv, perm_out=perm_out)
        return
    cplx = T3.is_complex()
    comps = (2 if cplx else 1) * (2 if T3.dtype in (torch.float64, torch.complex128) else 1)
    lu = piv is not None
    blocked = n > SMALL_N
    kc = 0
    few = blocked and T3.dtype in FEW_PLAN and k <= FEW_PLAN[T3.dtype][3]
    few_form = 0
    if few:  # few right-hand sides: products and sums on the FMA units, no 16-column tiles
        nb_rows, kc, warps, _, few_form = FEW_PLAN[T3.dtype]
        kb = next_pow2(k)
        kc = max(8, kc // kb)
        block_b = 1
    elif blocked:
        nb_rows, kc, kb, warps = BLOCKED_PLAN[T3.dtype]
        block_b = 1
        while kb > 16 and (kb >= 2 * k or nb * cdiv(k, kb) < BLOCKED_FILL.get(T3.dtype, 1) * num_sms(T3.device)):
            kb //= 2
    else:
        warps = 4
        nb_rows = next_pow2(n)
        kb = min(next_pow2(k), 32)
        fit = max(1, TILE_ELEMS // (nb_rows * (nb_rows + kb) * comps))
        block_b = min(next_pow2(nb), 1 << (fit.bit_length() - 1))  # a power of two
    words = blocked and not few and T3.dtype == torch.complex64  # (complex128: neither compiled nor timed)
    xw = bool(XW_LOADS) and words and kb >= XW_MIN_KB and kernel_strides(B3)[2] == 2 and kernel_strides(X3)[2] == 2
    p = next_pow2(n)
    grid = (cdiv(nb, block_b), cdiv(k, kb))
    W3 = X3
    perm = real_view(X3)  # stand-in pointer where no row map is needed
    if blocked and lu:  # (cached buffers: an eager lu_solve replays its launches, fastpath._core.memo)
        perm = workspace(X3.device, "trsm.perm", grid[0] * grid[1] * p, torch.int32)
        if perm_out:
            W3 = torch.empty(nb, n, k, dtype=X3.dtype, device=X3.device)
    pv = piv if lu else perm
    inv = perm
    conj = conj and cplx
    if blocked:  # the inverses of the diagonal blocks, all in parallel
        nblk = cdiv(n, nb_rows)
        total = nb * nblk
        inv = real_view(workspace(T3.device, f"trsm.inv.{T3.dtype}", (2 if lu else 1) * total * nb_rows * nb_rows,
                                        T3.dtype))
        plan = DIAG_FEW_PLAN if total < DIAG_FEW_BLOCKS and T3.dtype in DIAG_FEW_PLAN else DIAG_PLAN
        from_mem, diag_warps, ib, cb = plan[T3.dtype]
        cb = min(cb or nb_rows, nb_rows) if from_mem else nb_rows
        ib = ib or max(1, min(next_pow2(total), TILE_ELEMS // (2 * nb_rows * cb * comps)))
        _DIAG_INV[(cdiv(total, ib), (2 if lu and from_mem else 1) * (nb_rows // cb))](
            real_view(T3), inv, total, nblk, n, *kernel_strides(T3),
            BLOCK_B=ib, NB=nb_rows, LOWER=lower, UNIT=unit, CONJ=conj, LU=lu, CPLX=cplx, FROM_MEM=from_mem,
            CB=cb, WORDS=bool(DIAG_WORDS) and cplx and from_mem in (2, 3), num_warps=diag_warps)
    _TRSM[grid](
        real_view(T3), real_view(B3), real_view(W3), real_view(X3), pv, perm, inv, nb, n, k,
        *kernel_strides(T3), *kernel_strides(B3), *kernel_strides(W3), *kernel_strides(X3),
        *(pv.stride() if lu else (0, 0)),
        BLOCK_B=block_b, NB=nb_rows, KC=kc, KB=kb, P=p, LOWER=lower, UNIT=unit, CONJ=conj, LU=lu,
        PERM_OUT=perm_out, CPLX=cplx, BLOCKED=blocked, PREC=_sweep_prec(blocked and not few, kb),
        FEW=few_form, XW=xw,
        EVEN=bool(EVEN_TILES) and blocked and not few and n % nb_rows == 0 and nb_rows % kc == 0 and k % kb == 0,
        # (form 1 only: form 2 reads either storage order one way, and a TRANS it ignores would compile twice)
        TRANS=few_form == 1 and k >= FEW_TRANS_MIN_K[T3.dtype] and abs(T3.stride(-2)) < abs(T3.stride(-1)),
        num_warps=warps, **({"num_stages": STAGES} if blocked else {}))


def _sweep_prec(dot_sweep: bool, kb: int) -> str:
    """The products' precision of a launch: exact below TF32X3_MIN_KB right-hand sides a program or
    off the tl.dot sweep, else TF32X3_PREC ("tf32x3s" where fastpath splits the products)."""
    if not dot_sweep or kb < TF32X3_MIN_KB:
        return "ieee"
    return "tf32x3s" if TF32X3_PREC == "tf32x3" and OWN_TF32X3 else TF32X3_PREC


#: The kernels take the batch and row terms of B's and X's offsets in int64, the column term
#: in int32; the grid's second dimension (column blocks of at least 16) holds at most
#: GRID_Y_MAX: wider right-hand sides are solved in column slices (knobs for tests).
INT32_END = 2**31
GRID_Y_MAX = 65535


def _columns_per_call(n: int, k: int, B3: torch.Tensor, X3: torch.Tensor) -> int:
    """Right-hand sides one launch takes: all k, or fewer where the column term of B3's or
    X3's offsets would pass int32 (``left=False``: B is a transposed view, its column stride
    n) or the column blocks the grid."""
    step = min(k, GRID_Y_MAX * 16)
    col = max(abs(kernel_strides(B3)[2]), abs(kernel_strides(X3)[2]))
    while step > 1 and (step - 1) * col + 2 >= INT32_END:
        step = (step + 1) // 2
    return step


def _host_solve(T3, B3, lower: bool, unit: bool, right: bool) -> torch.Tensor:
    """X3 (nb, n, k) = M^-1 B3 from the host (``_host_blocked``), from a CUDA graph from the
    second call on the same inputs (addresses, shapes, strides) on: X3 laid out as the
    transpose of a contiguous (nb, k, n) if ``right``."""
    nb, n, k = B3.shape

    def solve(T3, B3):
        X3 = alloc.empty(nb, k, n, dtype=B3.dtype, device=B3.device).mT if right else \
            alloc.empty(nb, n, k, dtype=B3.dtype, device=B3.device)
        _host_blocked(T3, B3, X3, lower, unit)
        return (X3,)

    key = ("solve_triangular", lower, unit, right, HOST_BLOCK)
    return _GRAPHS(key, solve, (T3, B3), GRAPHS, by_address=True)[0]


_GRAPHS = GraphCache()


def _host_blocked(T3, B3, X3, lower: bool, unit: bool) -> None:
    """Block substitution for large n from the host, blocks of ``HOST_BLOCK`` rows: their
    inverses up front, then two products a block; float32 products exact whatever the user's
    TF32 setting."""
    n = T3.shape[-1]
    hb = HOST_BLOCK
    starts = list(range(0, n, hb))
    order = starts if lower else starts[::-1]
    with exact_matmuls():
        inverses = _diag_inverses(T3, hb, lower, unit)
        R = B3.clone()  # the right-hand sides, less the solved blocks' terms
        for i0 in order:
            i1 = min(i0 + hb, n)
            Xi = X3[:, i0:i1]
            torch.matmul(inverses(i0), R[:, i0:i1], out=Xi)
            rest = slice(i1, n) if lower else slice(0, i0)
            if rest.stop > rest.start:
                R[:, rest].baddbmm_(T3[:, rest, i0:i1], Xi, alpha=-1)


#: Identity matrices the diagonal blocks' inversions take as right-hand sides, by (device, dtype, size):
#: one a host block size (a shorter last block takes a corner of it).
_EYES: dict = {}


def _eye(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An (n, n) identity, kept for later calls (not while a CUDA graph is captured: its fill
    would run only on the graph's replays)."""
    key = (device, dtype, n)
    eye = _EYES.get(key)
    if eye is None:
        eye = torch.eye(n, dtype=dtype, device=device)
        if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            _EYES[key] = eye
    return eye


def _diag_inverses(T3: torch.Tensor, hb: int, lower: bool, unit: bool):
    """The inverses of the (hb, hb) diagonal blocks of T3's triangle (the last one n mod hb rows
    where hb does not divide n): the kernel on identity right-hand sides, the full blocks of a
    matrix in one launch (or, where the matrices outnumber the blocks, a launch a block).
    Returns ``inverse(i0)``, the (nb, rows, rows) inverses of the block at row i0."""
    nb, n, _ = T3.shape
    full = n // hb
    rem = n - full * hb
    inv = torch.empty(nb, full, hb, hb, dtype=T3.dtype, device=T3.device)
    s_b, s_r, s_c = T3.stride()
    eye = _eye(hb, T3.dtype, T3.device)  # (its top-left corner is the last block's: one kept a size)
    if nb <= full:  # a launch a matrix, its blocks the kernel's batch (one batch stride)
        for b in range(nb):
            D = T3.as_strided((full, hb, hb), (hb * (s_r + s_c), s_r, s_c), T3.storage_offset() + b * s_b)
            trsm(D, eye.expand(full, hb, hb), inv[b], lower=lower, unit=unit)
    else:  # a launch a block, the matrices the batch
        for i in range(full):
            rows = slice(i * hb, (i + 1) * hb)
            trsm(T3[:, rows, rows], eye.expand(nb, hb, hb), inv[:, i], lower=lower, unit=unit)
    last = None
    if rem:
        last = torch.empty(nb, rem, rem, dtype=T3.dtype, device=T3.device)
        trsm(T3[:, full * hb:, full * hb:], eye[:rem, :rem].expand(nb, rem, rem), last, lower=lower, unit=unit)
    return lambda i0: inv[:, i0 // hb] if i0 < full * hb else last


# ---------------------------------------------------------------------------- reference

def reference_solve_triangular(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool = True,
                               unitriangular: bool = False) -> torch.Tensor:
    """PyTorch path: ``torch.linalg.solve_triangular`` on A's device."""
    return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


# ---------------------------------------------------------------------------- checks

def check_square(name: str, A, fname: str, dtypes=KERNEL_DTYPES) -> int:
    """A is a tensor of a supported dtype with shape (*, n, n); returns n."""
    check_tensor(name, A)
    if A.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: {fname} supports {names}, got {A.dtype}")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{name}: {fname} expects a batch of square matrices (*, n, n), got shape {tuple(A.shape)}")
    return A.shape[-1]


def rhs_shapes(A: torch.Tensor, B: torch.Tensor, left: bool, fname: str, aname: str = "A"):
    """(batch, k) of a matrix right-hand side B of (*, n, k) (left) or (*, k, n) (right),
    with messages naming B; A (*, n, n)."""
    check_rhs(A, B, left, fname, aname)
    n = A.shape[-1]
    if B.dim() < 2:
        raise ValueError(f"B: {fname} expects B of shape (*, n, k) with at least 2 dimensions, got {tuple(B.shape)}")
    rows, k = (B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2])
    if rows != n:
        side = "B.shape[-2]" if left else "B.shape[-1]"
        raise ValueError(f"B: {side} must equal n = {n} ({aname} has shape {tuple(A.shape)}, left={left}), "
                         f"got B of shape {tuple(B.shape)}")
    try:
        batch = broadcast_shape(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    except RuntimeError:
        raise ValueError(f"B: batch dimensions {tuple(B.shape[:-2])} do not broadcast with "
                         f"{aname}'s {tuple(A.shape[:-2])}") from None
    return batch, k


def kernel_ok(*ts) -> bool:
    """The kernels serve these tensors: a kernel dtype, a Triton device, no autograd."""
    if ts[0].dtype not in KERNEL_DTYPES or not use_triton(ts[0]):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in ts))


# ---------------------------------------------------------------------------- op

def _st_fake(A, B, upper, left, unitriangular):
    batch, k = rhs_shapes(A, B, left, "solve_triangular")
    n = A.shape[-1]
    return A.new_empty((*batch, n, k) if left else (*batch, k, n))


@register_op("linalg_solve_triangular", fake=_st_fake)
def _solve_triangular_op(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool,
                         unitriangular: bool) -> torch.Tensor:
    if not kernel_ok(A, B) or A.numel() == 0 or B.numel() == 0:
        return reference_solve_triangular(A, B, upper, left, unitriangular)
    batch, k = rhs_shapes(A, B, left, "solve_triangular")
    n = A.shape[-1]
    shape = (*batch, *((n, k) if left else (k, n)))
    T3 = flat3(A, batch, (n, n))
    if left:  # A X = B
        B3, lower = flat3(B, batch, (n, k)), not upper
    else:  # X A = B  <=>  A^T X^T = B^T: transposed views, the other triangle
        T3, B3, lower = T3.mT, flat3(B, batch, (k, n)).mT, upper
    if n > HOST_BLOCK_N or (n > HOST_ONE_N and B3.shape[0] == 1):
        X3 = _host_solve(T3, B3, lower, unitriangular, right=not left)
        return (X3 if left else X3.mT).reshape(shape)
    X = alloc.empty(*shape, dtype=A.dtype, device=A.device)
    trsm(T3, B3, X.view(-1, n, k) if left else X.view(-1, k, n).mT, lower=lower, unit=unitriangular)
    return X


def solve_triangular(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> torch.Tensor:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``) for triangular A, like
    ``torch.linalg.solve_triangular``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32, float64, complex64 or complex128, any strides. Only the
        upper (``upper=True``) or lower triangle is read.
    B : Tensor (*, n, k) (``(*, k, n)`` with ``left=False``) of A's dtype and device; batch
        dimensions broadcast with A's (a copy only where they cannot be collapsed).
    upper : A is upper (True) or lower (False) triangular (keyword, required as in torch).
    left : solve ``A X = B`` (True) or ``X A = B`` (False).
    unitriangular : take A's diagonal as all ones (it is not read).

    Returns
    -------
    X, contiguous, of the broadcast shape ``(*, n, k)`` (``(*, k, n)`` for left=False).
    A zero on the diagonal gives inf/NaN, as in torch (no error is raised, no sync).

    Paths: n <= 32, whole matrices in registers, many per program; n <= 1024, one matrix per
    program in blocks of rows (``BLOCKED_PLAN``), all tl.dot (diagonal blocks inverted up front,
    in parallel; complex systems as real ones of twice the size; float32 / complex64 with 1-4
    right-hand sides: products and sums on the FMA units, ``FEW_PLAN``); larger n (one matrix: above
    ``HOST_ONE_N``) block by block from the host (the kernel inverts the ``HOST_BLOCK``-row diagonal
    blocks, all in one launch; then matrix products, in float32 exact whatever the TF32 setting),
    replayed from a CUDA graph from the second call on the same A and B (the same addresses,
    shapes and strides: the graph reads what they hold at the time; ``GRAPHS``).
    Devices Triton does not serve and inputs that need gradients take torch.linalg.

    Raises
    ------
    TypeError for unsupported or mismatched dtypes; ValueError for non-square A, B whose
    rows (columns with left=False) do not match n, or batch dimensions that do not broadcast.

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> fastpath.linalg.solve_triangular(A, torch.tensor([[3.0], [4.0]]), upper=True)
    tensor([[1.],
            [1.]])
    """
    check_square("A", A, "solve_triangular")
    rhs_shapes(A, B, left, "solve_triangular")
    for name, v in (("upper", upper), ("unitriangular", unitriangular)):
        if not isinstance(v, bool):
            raise TypeError(f"{name}: expected a bool, got {type(v).__name__}")
    return _solve_triangular_op(A, B, upper, left, unitriangular)
