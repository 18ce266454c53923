"""Inverse and linear solve of batches of small matrices (n <= 16): ``inv_ex``, ``inv``,
``solve_ex``, ``solve``, with the semantics of ``torch.linalg``.

One kernel, ``_gj_kernel``: Gauss-Jordan elimination with partial pivoting, ``BLOCK_B``
systems per program. A solve eliminates ``[A | B]``; the inverse is built in A's own
registers (Gauss-Jordan in place: column ``j`` of the eliminated A is replaced by the
inverse's), half the work of eliminating ``[A | I]``. The rows of a system are a tuple of
registers (``n`` is a constexpr) and each row a tuple of column groups, ``[BLOCK_B, GROUP]``
tensors: with ``GROUP = 1`` every thread owns whole systems, with wider groups a row's
columns spread over a few threads. Picking the pivot row and eliminating are selects and
fused multiply-adds on registers; only a column's entry takes a reduction, over ``GROUP``
lanes. (An earlier kernel on one ``[BLOCK_B, n, n]`` tile reduced across the tile for every
column, pivot row and swap: 155 us for 1M 4x4 inverses, ``docs/perf-notes.md``.)

Rows never move (implicit pivoting). At step ``j`` the pivot row is the first row not yet
used with the largest ``|A[i, j]|``. It is divided by the pivot (correctly rounded, element
by element: ``row * (1 / p)`` gave 3x torch's error against float64 on 1M 4x4 inverses), and
column ``j`` is eliminated from every other row. Each row remembers its step: a solve's row
is stored at that row of X; the inverse's row too, with its columns in pivot order. A pivot
that is exactly zero records ``info = j + 1`` (the first one, 1-based, as LAPACK's
``getrf``) and is replaced by one, so that elimination carries on without dividing by zero;
the result of such a system is written as NaN (torch gives NaN/inf or arbitrary numbers
there), and ``info`` says why. Padding columns (``n`` or ``k`` below the group multiple)
are zero and masked; systems past the batch are masked.

Arithmetic is in the input dtype (float32 or float64; complex64 / complex128 as pairs of
them, the rows' real parts then their imaginary parts in the tuple, the pivot row scaled by
the pivot's reciprocal as LAPACK does). Larger ``n`` or ``k`` solve through :mod:`.lu`'s
factorisation and solve where its solve is the faster (``SOLVE_VIA_LU``); the rest, inputs that
need gradients, and devices Triton does not serve take the reference path, ``torch.linalg`` itself.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Tuple

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton, use_triton
from ..._core.errors import check_tensor
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.memo import LaunchMemo
from ..._core.registry import register_op
from ..._core.shapes import broadcast_shape
from . import lu
from .tiles import LINALG_DTYPES, check_rhs, flat3, raise_singular

#: Largest n (and number of right-hand sides k) the kernel serves.
MAX_N = 16
#: Dtypes the kernel computes in (complex as (re, im) pairs of float32 / float64).
KERNEL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: Plan by n (else by n padded to a power of two): (column group width, systems per thread,
#: warps per program); measured on the H200 (scripts/tune_linalg.py, docs/perf-notes.md).
#: The in-place inverse, looped steps, 1M 4x4: groups of 4 86 us, of 2 146 (4 warps), of 1 (a
#: thread per system) 178; 100K 16x16: groups of 8 with 2 systems a thread 230 us (bench), of 16 292-463.
#: Eliminating [A | I] before it: 1M 3x3 in groups of 1 49-56 us, of 2 53-72; 100K 8x8 in
#: groups of 4 58 us, of 8 61-77, of 2 68-145. Groups of 2 at 16x16 spilled and took 198 s
#: to compile. With the steps unrolled (UNROLL_MAX_N, graphs, bench): 1M 4x4 in groups of 2, one
#: warp 51.0 us (53.8 looped), groups of 4 87.9 (83.0 looped); 1M 3x3 one a thread 32.5 (34.8).
#: With GROUP_LOOPS (H100, scripts/tune_linalg.py, fifty-seventh session): 100K 16x16 in groups of 4, one
#: warp 188.6 us, a first call (the compile) 14.6 s (groups of 8, 2 systems a thread, one warp 206.3 us, 5.1 s;
#: two warps 210.1; 232.7 before GROUP_LOOPS); 100K 8x8 in groups of 4 43.1 -> 39.3-40.7 us.
PLANS = {1: (1, 1, 4), 2: (2, 1, 4), 3: (1, 1, 1), 4: (2, 1, 1), 8: (4, 1, 1), 16: (4, 1, 1)}
#: Complex systems (two registers an entry): the real plans, but at 4x4 the earlier real plan
#: (1M complex64 4x4: 584 us looped, 598 unrolled) and at 16x16 groups of 8 with 2 systems a thread
#: (H100, 100K complex64 16x16: 397.4 us, 4.50x torch, a first call 22.2 s; 1 system a thread 462.4; a
#: 16-lane group in one warp 720.8, 7.3 s, in two (the plan before GROUP_LOOPS) 1700.2, 1.05x).
PLANS_COMPLEX = {**PLANS, 4: (4, 1, 4), 16: (8, 2, 1)}
#: Solves (by n padded to a power of two; else the tables above): B's rows double the registers and the
#: kernel's size, and the inverses' 16x16 plans compile slowly there (offline sm_90, a 16x16 solve with
#: 16 right-hand sides: float32 groups of 4 23.5 s, groups of 8 7.5 s at about the same instructions a
#: system and step; complex64 groups of 8 42-43 s, 16-lane groups 11 s; H100 first calls 29 s and 58 s
#: at the inverses' plans).
SOLVE_PLANS = {16: (8, 2, 1)}
SOLVE_PLANS_COMPLEX = {16: (16, 1, 1)}
#: Override of the plan table (scripts/tune_linalg.py and test_plans set it); None: the table.
PLAN = None
#: Systems past the kernel (n or k above MAX_N, n up to ``lu.SOLVE_MAX_N``) on a device Triton serves:
#: ``lu.lu_factor_ex`` then ``lu.lu_solve`` (each on its kernels where ``lu.factor_faster`` /
#: ``lu.solve_faster`` say so, else torch's) instead of ``torch.linalg.solve_ex``, where lu_solve's
#: kernels serve the shape (torch's solve_ex spends most of its time in its solve: H100, 1000 float32
#: 32x32 with 32 right-hand sides 301.7 us, its lu_factor_ex 61.2, ours 73.0, its lu_solve 239.0, ours
#: 100.7); the same ``info``. H100 (scripts/solve_shapes.py, fifty-sixth session): complex64 64 x 256x256
#: with 256 right-hand sides 3.0 ms -> 1.03 ms (2.9x), float32 64 x 256x256 5.35x, 8 x 512x512 (k=16) 4.8x.
#: Also wherever torch's path factors a matrix at a time (``lu.factor_loops``: torch's solve_ex would factor
#: 2-4 large matrices with MAGMA's slower batched getrf). H100 (scripts/solve_shapes.py, sixty-fourth session):
#: 2 complex64 1024x1024 with 16 right-hand sides 2.34x torch's solve_ex, 2 float32 2048x2048 with 1 3.59x,
#: 4 float32 1024x1024 with 64 1.79x.
SOLVE_VIA_LU = True
#: Up to this n the elimination's steps are unrolled (the column of step j is then known
#: when compiling: no selects over the row's groups for it).
UNROLL_MAX_N = 4
#: Past it, the steps of one column group of A at a time with that group first in every row (the
#: rows' groups rotated by one after each: register renaming), so that the column pick and the
#: in-place entry touch one group known when compiling.
GROUP_LOOPS = True


@triton.jit
def _div(x, y):
    """``x / y`` correctly rounded (float64 division already is)."""
    if x.dtype == tl.float32:
        return tl.div_rn(x, y)
    return x / y


@triton.jit
def _load_row(ptr, b64, in_b, i, sb, sr, sc, width, NG: tl.constexpr, G: tl.constexpr, dtype: tl.constexpr,
              CPLX: tl.constexpr):
    """Row ``i`` as a tuple of ``NG`` column groups ``[BLOCK_B, G]`` (complex: then the ``NG``
    groups of the imaginary parts, at ``ptr + 1``); columns from ``width`` on are zero."""
    cols = tl.arange(0, G)[None, :]
    row = ()
    for part in tl.static_range(2 if CPLX else 1):
        for g in tl.static_range(NG):
            c = cols + g * G
            row = row + (tl.load(ptr + part + b64 * sb + i * sr + c * sc, mask=in_b & (c < width),
                                 other=0.0).to(dtype),)
    return row


@triton.jit
def _column(row, j, NG: tl.constexpr, G: tl.constexpr, CPLX: tl.constexpr, JG: tl.constexpr = -1):
    """Entry ``j`` (a runtime index) of a row of groups: ``[BLOCK_B]`` (one reduction), as
    (re, im) (re twice for real rows). ``JG``: the group holding column j where the caller's loop
    knows it (else -1). Unknown, the group is picked first (a select on a value every lane shares),
    then its entry: sm_90, 100K 16x16's Gauss-Jordan step 688 -> 654 SASS instructions against
    masking every group and adding them (``compile_sm90.py``'s COMPILE_LOOPS; the same values bit
    for bit). H100 against the masked sum (``gpu_pending.sh 110``): 16x16 the same 230.6 us, 3x3 in a
    CUDA graph 36.7 -> 32.5 us."""
    at = tl.arange(0, G)[None, :] == j % G
    if JG >= 0:
        grp = row[JG]
    else:
        grp = row[0]
        for g in tl.static_range(1, NG):
            grp = tl.where(j >= g * G, row[g], grp)  # (j is the same for every lane: the group holding column j)
    re = tl.sum(tl.where(at, grp, 0.0), axis=1)
    im = re
    if CPLX:
        if JG >= 0:
            grp = row[NG + JG]
        else:
            grp = row[NG]
            for g in tl.static_range(1, NG):
                grp = tl.where(j >= g * G, row[NG + g], grp)
        im = tl.sum(tl.where(at, grp, 0.0), axis=1)
    return re, im


@triton.jit
def _pick(cond, a, b, NT: tl.constexpr):
    """Tensor by tensor ``where(cond, a, b)`` of two rows of ``NT`` groups; cond ``[BLOCK_B]``."""
    out = ()
    for g in tl.static_range(NT):
        out = out + (tl.where(cond[:, None], a[g], b[g]),)
    return out


@triton.jit
def _with_entry(v, g, j, value, G: tl.constexpr, ON: tl.constexpr, JG: tl.constexpr = -1):
    """Group ``g`` of a row with its entry in column ``j`` set to ``value`` (with ``ON``; only
    group ``JG`` where the caller knows column j lies there, ``JG >= 0``)."""
    if ON:
        if (JG < 0) or (JG == g):
            v = tl.where(tl.arange(0, G)[None, :] + g * G == j, value, v)
    return v


@triton.jit
def _scale(x, p_re, p_im, j, NG: tl.constexpr, G: tl.constexpr, IN_PLACE: tl.constexpr, CPLX: tl.constexpr,
           JG: tl.constexpr = -1):
    """The pivot row divided by the pivot ``p``; in place, column ``j`` becomes ``1 / p``.
    Real: each entry divided (correctly rounded); complex: times ``1 / p`` (Smith's
    reciprocal, no overflow of |p|^2), as LAPACK's getf2 scales."""
    out = ()
    if CPLX:
        big = tl.abs(p_re) >= tl.abs(p_im)
        t = tl.where(big, p_im, p_re) / tl.where(big, p_re, p_im)
        d = 1.0 / tl.where(big, p_re + p_im * t, p_re * t + p_im)
        q_re = tl.where(big, d, t * d)[:, None]  # 1 / p = (q_re, q_im)
        q_im = tl.where(big, -t * d, -d)[:, None]
        re = ()
        im = ()
        for g in tl.static_range(NG):
            xr = _with_entry(x[g], g, j, 1.0, G, IN_PLACE, JG)
            xi = _with_entry(x[NG + g], g, j, 0.0, G, IN_PLACE, JG)
            re = re + (xr * q_re - xi * q_im,)
            im = im + (xr * q_im + xi * q_re,)
        out = re + im
    else:
        for g in tl.static_range(NG):
            out = out + (_div(_with_entry(x[g], g, j, 1.0, G, IN_PLACE, JG), p_re[:, None]),)
    return out


@triton.jit
def _eliminate(is_p, f_re, f_im, prow, row, j, NG: tl.constexpr, G: tl.constexpr, IN_PLACE: tl.constexpr,
               CPLX: tl.constexpr, JG: tl.constexpr = -1):
    """The pivot row itself where ``is_p``, else ``row - f * prow``, group by group; in place,
    column ``j`` of the other rows becomes ``-f / p`` (the pivot row holds ``1 / p`` there)."""
    out = ()
    if CPLX:
        re = ()
        im = ()
        for g in tl.static_range(NG):
            vr = _with_entry(row[g], g, j, 0.0, G, IN_PLACE, JG)
            vi = _with_entry(row[NG + g], g, j, 0.0, G, IN_PLACE, JG)
            pr = prow[g]
            pi = prow[NG + g]
            re = re + (tl.where(is_p[:, None], pr, vr - (f_re[:, None] * pr - f_im[:, None] * pi)),)
            im = im + (tl.where(is_p[:, None], pi, vi - (f_re[:, None] * pi + f_im[:, None] * pr)),)
        out = re + im
    else:
        for g in tl.static_range(NG):
            v = _with_entry(row[g], g, j, 0.0, G, IN_PLACE, JG)
            out = out + (tl.where(is_p[:, None], prow[g], v - f_re[:, None] * prow[g]),)
    return out


@triton.jit
def _gj_step(a, r, step, info, j, jc, BLOCK_B: tl.constexpr, N: tl.constexpr, NGA: tl.constexpr, GA: tl.constexpr,
             NGR: tl.constexpr, GR: tl.constexpr, NTA: tl.constexpr, NTR: tl.constexpr, INV: tl.constexpr,
             CPLX: tl.constexpr, JG: tl.constexpr = -1):
    """Step ``j`` of the elimination (the kernel's comment above its loop says how); ``jc``: column j's
    place in A's rows as they are held now (their groups rotated: ``GROUP_LOOPS``); ``JG``: the group
    holding that place when known at compile time (else -1)."""
    dtype = a[0][0].dtype
    col_re = ()
    col_im = ()
    for i in tl.static_range(N):
        c_re, c_im = _column(a[i], jc, NGA, GA, CPLX, JG)
        col_re = col_re + (c_re,)
        col_im = col_im + (c_im,)
    best = tl.full([BLOCK_B], -1.0, tl.float32).to(dtype)
    p = tl.full([BLOCK_B], -1, tl.int32)
    pv_re = tl.zeros([BLOCK_B], dtype=dtype)
    pv_im = tl.zeros([BLOCK_B], dtype=dtype)
    for i in tl.static_range(N):
        free = step[i] < 0
        mag = tl.abs(col_re[i])
        if CPLX:
            mag += tl.abs(col_im[i])
        take = free & ((mag > best) | (p < 0))
        best = tl.where(take, mag, best)
        p = tl.where(take, i, p)
        pv_re = tl.where(take, col_re[i], pv_re)
        pv_im = tl.where(take, col_im[i], pv_im)
    singular = (pv_re == 0.0) & (pv_im == 0.0)
    info = tl.where(singular & (info == 0), j + 1, info)
    pv_re = tl.where(singular, 1.0, pv_re)
    pa = a[0]
    for i in tl.static_range(1, N):
        pa = _pick(p == i, a[i], pa, NTA)
    pa = _scale(pa, pv_re, pv_im, jc, NGA, GA, INV, CPLX, JG)
    na = ()
    ns = ()
    for i in tl.static_range(N):
        is_p = p == i
        na = na + (_eliminate(is_p, col_re[i], col_im[i], pa, a[i], jc, NGA, GA, INV, CPLX, JG),)
        ns = ns + (tl.where(is_p, j, step[i]),)
    if not INV:
        pr = r[0]
        for i in tl.static_range(1, N):
            pr = _pick(p == i, r[i], pr, NTR)
        pr = _scale(pr, pv_re, pv_im, j, NGR, GR, False, CPLX)
        nr = ()
        for i in tl.static_range(N):
            nr = nr + (_eliminate(p == i, col_re[i], col_im[i], pr, r[i], j, NGR, GR, False, CPLX),)
        r = nr
    a = na
    step = ns
    return a, r, step, info


@triton.jit
def _gj_kernel(a_ptr, b_ptr, x_ptr, info_ptr, nbatch, n, k,
               sab, sar, sac, sbb, sbr, sbc, sxb, sxr, sxc,
               BLOCK_B: tl.constexpr, N: tl.constexpr, NGA: tl.constexpr, GA: tl.constexpr,
               NGR: tl.constexpr, GR: tl.constexpr, INV: tl.constexpr, CPLX: tl.constexpr = False,
               UNROLL: tl.constexpr = False, GROUP_LOOPS: tl.constexpr = False):
    """CPLX: the pointers are complex tensors' (re, im) float views, strides in floats.
    UNROLL: the elimination's steps unrolled (small n); else GROUP_LOOPS: a loop of steps a
    column group of A, its group rotated to the front (module docstring of ``GROUP_LOOPS``)."""
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b64 = bidx.to(tl.int64)[:, None]
    in_b = bidx[:, None] < nbatch
    dtype = a_ptr.dtype.element_ty
    NTA: tl.constexpr = NGA * 2 if CPLX else NGA
    NTR: tl.constexpr = NGR * 2 if CPLX else NGR
    a = ()
    r = ()
    step = ()  # per row: the step at which it was the pivot row, -1 while unused
    for i in tl.static_range(N):
        a = a + (_load_row(a_ptr, b64, in_b, i, sab, sar, sac, n, NGA, GA, dtype, CPLX),)
        if not INV:
            r = r + (_load_row(b_ptr, b64, in_b, i, sbb, sbr, sbc, k, NGR, GR, dtype, CPLX),)
        step = step + (tl.full([BLOCK_B], -1, tl.int32),)
    info = tl.zeros([BLOCK_B], dtype=tl.int32)
    # Rows are never moved: the pivot row of step j is remembered and its result row stored
    # as row j at the end. The pivot row of step j: the first unused row with the largest
    # |A[i, j]| (|re| + |im| for complex, as LAPACK's i?amax; the first unused row at all if
    # every candidate is NaN, so that each row is the pivot of exactly one step). The inverse
    # is built in A's registers (Gauss-Jordan in place: column j of the eliminated A is
    # replaced by that of the inverse), half the work of eliminating [A | I]; a solve carries
    # B beside A.
    if UNROLL:  # j known at compile time: column picks are register moves
        for j in tl.static_range(N):
            a, r, step, info = _gj_step(a, r, step, info, j, j, BLOCK_B, N, NGA, GA, NGR, GR, NTA, NTR, INV, CPLX,
                                        j // GA)
    elif GROUP_LOOPS:  # a group's steps with that group first in every row: its place known when compiling
        for g in range(NGA):
            for jj in range(0, tl.minimum(GA, N - g * GA)):
                a, r, step, info = _gj_step(a, r, step, info, g * GA + jj, jj, BLOCK_B, N, NGA, GA, NGR, GR, NTA,
                                            NTR, INV, CPLX, 0)
            na = ()
            for i in tl.static_range(N):  # the rows' groups rotated by one (register renaming)
                row = ()
                for part in tl.static_range(2 if CPLX else 1):
                    for t in tl.static_range(NGA):
                        row = row + (a[i][part * NGA + (t + 1) % NGA],)
                na = na + (row,)
            a = na
    else:
        for j in range(N):
            a, r, step, info = _gj_step(a, r, step, info, j, j, BLOCK_B, N, NGA, GA, NGR, GR, NTA, NTR, INV, CPLX)
    bad = (info != 0)[:, None]  # a singular system gives NaN, never a number
    if INV:
        # Row i of the registers is row step[i] of the inverse with its columns in pivot
        # order: column c goes to column piv[c], the row that was the pivot of step c.
        piv = ()
        for c in tl.static_range(N):
            pc = tl.zeros([BLOCK_B], dtype=tl.int32)
            for i in tl.static_range(N):
                pc = tl.where(step[i] == c, i, pc)
            piv = piv + (pc,)
        cols = tl.arange(0, GA)[None, :]
        for i in tl.static_range(N):
            dst = b64 * sxb + step[i][:, None].to(tl.int64) * sxr
            for g in tl.static_range(NGA):
                dcol = tl.zeros([BLOCK_B, GA], dtype=tl.int32)
                for t in tl.static_range(GA):
                    if g * GA + t < N:
                        dcol = tl.where(cols == t, piv[g * GA + t][:, None], dcol)
                for part in tl.static_range(2 if CPLX else 1):
                    v = tl.where(bad, float("nan"), a[i][part * NGA + g])
                    tl.store(x_ptr + part + dst + dcol * sxc, v.to(x_ptr.dtype.element_ty),
                             mask=in_b & (cols + g * GA < n))
    else:
        cols = tl.arange(0, GR)[None, :]
        for i in tl.static_range(N):
            dst = b64 * sxb + step[i][:, None].to(tl.int64) * sxr
            for g in tl.static_range(NGR):
                c = cols + g * GR
                for part in tl.static_range(2 if CPLX else 1):
                    v = tl.where(bad, float("nan"), r[i][part * NGR + g])
                    tl.store(x_ptr + part + dst + c * sxc, v.to(x_ptr.dtype.element_ty), mask=in_b & (c < k))
    tl.store(info_ptr + bidx, info, mask=bidx < nbatch)


_GJ = Launcher(_gj_kernel)


# ---------------------------------------------------------------------------- launcher

def _launch(A3: torch.Tensor, B3, X3: torch.Tensor, info: torch.Tensor, n: int, k: int) -> None:
    """A3 (nb, n, n), B3 (nb, n, k) or None for the inverse, X3 (nb, n, k) output views.
    Complex tensors go in as their (re, im) float views, strides in floats."""
    nb = A3.shape[0]
    if nb == 0:
        return
    n_pad, k_pad = next_pow2(n), next_pow2(k)
    cplx = A3.is_complex()
    plans = PLANS_COMPLEX if cplx else PLANS
    solve_plan = B3 is not None and (SOLVE_PLANS_COMPLEX if cplx else SOLVE_PLANS).get(n_pad)
    group, per_thread, warps = PLAN or solve_plan or plans.get(n) or plans[n_pad]
    ga, gr = min(group, n_pad), min(group, k_pad)
    # One program: 32 * warps threads, a system's row spread over at most ``ga`` of them. The
    # tile keeps the plan's shape however small the batch (masks cover the rest): triton 3.6's
    # layout passes never finished some shrunk ones (n = 16, groups of 8, 2 or 4 systems).
    block_b = min(next_pow2(nb), 256) if INTERPRET else max(1, 32 * warps * per_thread // ga)
    inv = B3 is None
    B3 = X3 if inv else B3
    if cplx:  # (a lazily conjugated view is resolved first: no float view of it exists)
        A3, B3, X3 = (torch.view_as_real(t.resolve_conj()) for t in (A3, B3, X3))
    _GJ[(cdiv(nb, block_b),)](
        A3, B3, X3, info, nb, n, k, *A3.stride()[:3], *B3.stride()[:3], *X3.stride()[:3],
        BLOCK_B=block_b, N=n, NGA=n_pad // ga, GA=ga, NGR=k_pad // gr, GR=gr, INV=inv, CPLX=cplx,
        UNROLL=n <= UNROLL_MAX_N, GROUP_LOOPS=GROUP_LOOPS and n_pad // ga > 1, num_warps=warps)


# ---------------------------------------------------------------------------- reference

def reference_inv_ex(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``torch.linalg.inv_ex`` on A's device."""
    return tuple(torch.linalg.inv_ex(A))


def reference_solve_ex(A: torch.Tensor, B: torch.Tensor, left: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``torch.linalg.solve_ex`` on A's device."""
    return tuple(torch.linalg.solve_ex(A, B, left=left))


# ---------------------------------------------------------------------------- shapes and checks

def _check_A(A, fname: str) -> int:
    check_tensor("A", A)
    if A.dtype not in LINALG_DTYPES:
        raise TypeError(f"A: {fname} supports float32, float64, complex64, complex128, got {A.dtype}")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A: {fname} expects a batch of square matrices (*, n, n), got shape {tuple(A.shape)}")
    return A.shape[-1]


def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    """torch's rule: B is a (batch of) vector(s) if it is 1-D or has exactly A's shape minus the last dim."""
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_shapes(A: torch.Tensor, B: torch.Tensor, left: bool):
    """(batch, n, k, vector) of the system, after torch.linalg.solve's checks (messages name B)."""
    n = A.shape[-1]
    vector = _is_vector_rhs(A, B)
    if vector and not left:
        raise ValueError(f"B: a vector right-hand side (shape {tuple(B.shape)}) needs left=True; "
                         "for left=False pass B of shape (*, k, n), as torch.linalg.solve does")
    if vector:
        rows, k, bbatch = B.shape[-1], 1, tuple(B.shape[:-1])
    else:
        if B.dim() < 2:
            raise ValueError(f"B: expected shape (*, n) or (*, n, k), got {tuple(B.shape)}")
        rows, k = (B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2])
        bbatch = tuple(B.shape[:-2])
    if rows != n:
        side = "B.shape[-2]" if left and not vector else "B.shape[-1]"
        raise ValueError(f"B: {side} must equal n = {n} (A has shape {tuple(A.shape)}, left={left}), "
                         f"got B of shape {tuple(B.shape)}")
    try:
        batch = broadcast_shape(tuple(A.shape[:-2]), bbatch)
    except RuntimeError:
        raise ValueError(f"B: batch dimensions {bbatch} do not broadcast with A's {tuple(A.shape[:-2])}") from None
    return batch, n, k, vector


def _out_shape(batch, n, k, vector, left):
    if vector:
        return (*batch, n)
    return (*batch, n, k) if left else (*batch, k, n)


def _kernel_ok(*ts, n: int, k: int = 1) -> bool:
    if n > MAX_N or k > MAX_N or ts[0].dtype not in KERNEL_DTYPES or not use_triton(ts[0]):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in ts))


# ---------------------------------------------------------------------------- ops

def _inv_fake(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(A, memory_format=torch.contiguous_format),
            A.new_empty(A.shape[:-2], dtype=torch.int32))


@register_op("linalg_inv_ex", fake=_inv_fake)
def _inv_ex_op(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not _kernel_ok(A, n=n) or A.numel() == 0:  # (empty: torch.linalg's own result)
        return reference_inv_ex(A)
    batch = tuple(A.shape[:-2])
    X = alloc.empty(*batch, n, n, dtype=A.dtype, device=A.device)
    info = alloc.empty(batch, dtype=torch.int32, device=A.device)
    _launch(flat3(A, batch, (n, n)), None, X.view(-1, n, n), info.view(-1), n, n)
    return X, info


def _solve_fake(A: torch.Tensor, B: torch.Tensor, left: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    batch, n, k, vector = _solve_shapes(A, B, left)
    return (A.new_empty(_out_shape(batch, n, k, vector, left)), A.new_empty(A.shape[:-2], dtype=torch.int32))


@register_op("linalg_solve_ex", fake=_solve_fake)
def _solve_ex_op(A: torch.Tensor, B: torch.Tensor, left: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    batch, n, k, vector = _solve_shapes(A, B, left)
    if not _kernel_ok(A, B, n=n, k=k) or A.numel() == 0 or B.numel() == 0:
        if (SOLVE_VIA_LU and A.numel() and B.numel() and _kernel_ok(A, B, n=1)
                and (lu.factor_loops(A) or n <= lu.SOLVE_MAX_N
                     and lu.solve_faster(n, math.prod(batch), k, A.is_complex()))):
            return _solve_by_lu(A, B, left, vector)
        return reference_solve_ex(A, B, left)
    X = alloc.empty(_out_shape(batch, n, k, vector, left), dtype=A.dtype, device=A.device)
    info = alloc.empty(batch, dtype=torch.int32, device=A.device)
    Bm = B.unsqueeze(-1) if vector else B
    Xm = X.unsqueeze(-1) if vector else X
    if left:  # A X = B
        A3, B3, X3 = flat3(A, batch, (n, n)), flat3(Bm, batch, (n, k)), Xm.view(-1, n, k)
    else:  # X A = B  <=>  A^T X^T = B^T: transposed views, no copies
        A3 = flat3(A, batch, (n, n)).mT
        B3 = flat3(Bm, batch, (k, n)).mT
        X3 = Xm.view(-1, k, n).mT
    _launch(A3, B3, X3, info.view(-1), n, k)
    abatch = tuple(A.shape[:-2])
    if abatch != batch:  # torch's info has A's batch shape: every copy of a broadcast A has the same
        lead = len(batch) - len(abatch)
        idx = (0,) * lead + tuple(slice(0, 1) if a == 1 else slice(None) for a in abatch)
        info = info[idx].contiguous()
    return X, info


def _solve_by_lu(A, B, left, vector) -> Tuple[torch.Tensor, torch.Tensor]:
    """``SOLVE_VIA_LU``: (X, info) of the system from fastpath's LU factorisation and solve."""
    LU, piv, info = lu.lu_factor_ex(A)
    X = lu.lu_solve(LU, piv, B.unsqueeze(-1) if vector else B, left=left)
    return (X.squeeze(-1) if vector else X), info


# ---------------------------------------------------------------------------- public API

class InvEx(NamedTuple):
    inverse: torch.Tensor
    info: torch.Tensor


class SolveEx(NamedTuple):
    result: torch.Tensor
    info: torch.Tensor


def _raise_singular(info: torch.Tensor, fname: str, what: str) -> None:
    raise_singular(info, fname, f"The diagonal element {{j}} is zero, the {what} could not be completed "
                                "because the input matrix is singular.")


def _checked_inv(A: torch.Tensor, fname: str):
    _check_A(A, fname)
    return _inv_ex_op(A)


def _checked_solve(A: torch.Tensor, B: torch.Tensor, left: bool, fname: str):
    _check_solve(A, B, left, fname)
    return _solve_ex_op(A, B, left)


def _inv_pair(A: torch.Tensor, fname: str):
    """(X, info): checked, then the kernel or torch; eager calls like an earlier one replay its
    launch (fastpath._core.memo)."""
    return _INV_MEMO.call(lambda: _checked_inv(A, fname), (A,))


def _solve_pair(A: torch.Tensor, B: torch.Tensor, left: bool, fname: str):
    if not isinstance(left, bool):
        return _checked_solve(A, B, left, fname)
    return _SOLVE_MEMO.call(lambda: _checked_solve(A, B, left, fname), (A, B), (left,))


_INV_MEMO, _SOLVE_MEMO = LaunchMemo(), LaunchMemo()


def inv_ex(A: torch.Tensor, *, check_errors: bool = False) -> InvEx:
    """Inverse of a batch of square matrices with an error code, like ``torch.linalg.inv_ex``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32, float64, complex64 or complex128, any strides (batch
        dimensions that cannot be collapsed into one stride are copied once; a lazily
        conjugated view is resolved). n <= 16 runs the Triton kernel (Gauss-Jordan with
        partial pivoting, in A's dtype); larger n and inputs that need gradients take
        ``torch.linalg.inv_ex``.
    check_errors : raise ``torch.linalg.LinAlgError`` if a matrix is singular. This reads
        ``info`` on the host (a sync); with the default False the call never syncs and is
        capturable in a CUDA graph.

    Returns
    -------
    (inverse, info): ``inverse`` (*, n, n) contiguous, of A's dtype; ``info`` int32 of shape
    (*): 0 where the inverse was computed, ``i`` (1-based) where the i-th pivot of the LU
    factorisation with partial pivoting is exactly zero; the inverse of such a matrix is all
    NaN on the kernel path (NaN/inf or arbitrary on torch's path): check ``info``.

    Raises
    ------
    TypeError if A is not a float32/float64/complex tensor; ValueError if A is not (*, n, n).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.inv_ex(torch.tensor([[0.0, 2.0], [4.0, 0.0]]))
    InvEx(inverse=tensor([[0.0000, 0.2500],
            [0.5000, 0.0000]]), info=tensor(0, dtype=torch.int32))
    """
    X, info = _inv_pair(A, "inv_ex")
    if check_errors:
        _raise_singular(info, "linalg.inv_ex", "inversion")
    return InvEx(X, info)


def inv(A: torch.Tensor) -> torch.Tensor:
    """Inverse of a batch of square matrices, like ``torch.linalg.inv``.

    Same arguments, dtypes and paths as :func:`inv_ex`. Raises
    ``torch.linalg.LinAlgError`` for a singular matrix, which needs ``info`` on the host:
    every call syncs once (use :func:`inv_ex` where that must not happen).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    X, info = _inv_pair(A, "inv")
    _raise_singular(info, "linalg.inv", "inversion")
    return X


def _check_solve(A, B, left, fname):
    _check_A(A, fname)
    check_rhs(A, B, left, fname)
    _solve_shapes(A, B, left)


def solve_ex(A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False) -> SolveEx:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``) with an error code, like
    ``torch.linalg.solve_ex``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32, float64, complex64 or complex128; n <= 16 runs the
        Triton kernel (Gauss-Jordan with partial pivoting on [A | B]); larger n and inputs
        that need gradients take ``torch.linalg.solve_ex``.
    B : Tensor of A's dtype and device: a batch of vectors (*, n) when B is 1-D or its shape
        is exactly ``A.shape[:-1]`` (torch's rule), else a batch of matrices (*, n, k)
        (``(*, k, n)`` when ``left=False``); k <= 16 for the kernel. Batch dimensions
        broadcast as in torch; broadcast batches that cannot be collapsed into one stride
        are copied once.
    left : solve ``A X = B`` (True) or ``X A = B`` (False; a vector B raises then, as in torch).
    check_errors : raise ``torch.linalg.LinAlgError`` for a singular A (a host sync); with the
        default False the call never syncs.

    Returns
    -------
    (result, info): ``result`` of B's broadcast shape, A's dtype; ``info`` int32 of A's
    batch shape ``A.shape[:-2]`` (as torch), 0 or the 1-based index of the first exactly-zero pivot (the
    result of such a system is NaN on the kernel path).

    Raises
    ------
    TypeError for unsupported or mismatched dtypes; ValueError for non-square A, B whose
    rows do not match n, or batch dimensions that do not broadcast.

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.tensor([[0.0, 1.0], [2.0, 0.0]]); B = torch.tensor([3.0, 4.0])
    >>> fastpath.linalg.solve_ex(A, B).result
    tensor([2., 3.])
    """
    X, info = _solve_pair(A, B, left, "solve_ex")
    if check_errors:
        _raise_singular(info, "linalg.solve_ex", "solve")
    return SolveEx(X, info)


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True) -> torch.Tensor:
    """Solve ``A X = B`` (or ``X A = B``), like ``torch.linalg.solve``.

    Same arguments, dtypes and paths as :func:`solve_ex`. Raises
    ``torch.linalg.LinAlgError`` for a singular A, which reads ``info`` on the host: every
    call syncs once (use :func:`solve_ex` where that must not happen).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.solve(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.tensor([2.0, 2.0]))
    tensor([1.0000, 0.5000])
    """
    X, info = _solve_pair(A, B, left, "solve")
    _raise_singular(info, "linalg.solve", "solve")
    return X
