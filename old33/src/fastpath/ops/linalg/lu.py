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
  blocked LU with panels of ``W`` columns. Per panel: ``_lu_panel`` on the (M, W) panel in
  registers; its row interchanges applied to the other columns by moving only the rows they
  touch (at most 2W: sources tracked backwards through the swaps, :func:`.triangular._track`);
  ``L11^-1`` formed once in registers, then per chunk of columns ``U12 = L11^-1 A12`` and
  ``A22 -= L21 U12`` with ``tl.dot`` (exact float32). Barriers order the phases, which read
  what the previous one wrote.
* ``DET=1|2``: the determinant (product of the pivots, sign flipped per interchange) or
  ``(sign, log|det|)`` accumulated as the pivots are found; with ``STORE_LU=False`` (small
  matrices) nothing else is written.

Larger matrices (more rows than a panel holds in registers, or one big matrix, where one
program per matrix would leave the GPU idle) take ``torch.linalg`` (cuSOLVER/MAGMA).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Tuple

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.registry import register_op
from .tiles import (_abs1, _cdot, _div, _dot_sub, _ld, _mul, _pick, _pick2, _st, _tri_solve, check_matrices, flat3,
                    kernel_strides, raise_singular, real_view)
from .triangular import _track, check_square, kernel_ok, rhs_shapes, trsm

#: m and n up to this: whole matrices in registers.
SMALL_N = 32
#: Rows x panel width x real components of one panel held in registers (blocked path).
PANEL_ELEMS = 8192
#: Blocked path only for batches at least this large, or matrices of at most BLOCKED_ALWAYS_N.
BLOCKED_MIN_BATCH = 8
BLOCKED_ALWAYS_N = 128
#: lu_solve in the kernel up to this n (the row map is a vector of next_pow2(n) in registers).
SOLVE_MAX_N = 1024
TILE_ELEMS = 8192 if INTERPRET else 2048
#: Warps of a blocked-path program (one matrix); its trailing update in blocks of BLOCKED_BM
#: rows x BLOCKED_CW columns, float32 products as BLOCKED_PREC (see ``triangular.TF32X3_PREC``).
BLOCKED_WARPS = 8
BLOCKED_BM = 32
BLOCKED_CW = 32
BLOCKED_PREC = "ieee"


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
            cand = tl.where((r2 >= g) & (r2 < m), _abs1(colr, coli, CPLX), -1.0)
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
            flip = p != g
            if DET == 1:
                d_r, d_i = _mul(d_r, d_i, pr, pi, CPLX)
            else:
                if CPLX:
                    big = tl.maximum(tl.abs(pr), tl.abs(pi))
                    sb = tl.where(big > 0, big, 1.0)
                    mag = big * tl.sqrt((pr / sb) * (pr / sb) + (pi / sb) * (pi / sb))
                else:
                    mag = tl.abs(pr)
                la = tl.where(mag > 0, la + tl.log(tl.where(mag > 0, mag, 1.0)), float("-inf"))
                safe = tl.where(mag > 0, mag, 1.0)
                if CPLX:
                    d_r, d_i = _mul(d_r, d_i, tl.where(mag > 0, pr / safe, 0.0), pi / safe, CPLX)
                else:  # exactly +-1 (a GPU division pr / |pr| may round to 1 - ulp)
                    d_r = d_r * tl.where(pr > 0, 1.0, tl.where(pr < 0, -1.0, 0.0))
            d_r = tl.where(flip, -d_r, d_r)
            if CPLX:
                d_i = tl.where(flip, -d_i, d_i)
            else:
                d_i = d_r
    return ar, ai, piv, info, d_r, d_i, la


@triton.jit
def _lu_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, d1_ptr, d2_ptr, nbatch, m, n,
               sab, sar, sac, slb, slr, slc, spb, sd1, sd2,
               BLOCK_B: tl.constexpr, M: tl.constexpr, W: tl.constexpr, CW: tl.constexpr, SW: tl.constexpr,
               BM: tl.constexpr, BLOCKED: tl.constexpr, PIVOT: tl.constexpr, DET: tl.constexpr,
               STORE_LU: tl.constexpr, CPLX: tl.constexpr, PREC: tl.constexpr):
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
        cw = tl.arange(0, CW)[None, :]
        wr = tl.arange(0, W)[:, None]
        wc = tl.arange(0, W)[None, :]
        i2 = tl.arange(0, 2 * W)
        eye3 = (wr == wc)[None, :, :].to(dt) + tl.zeros([1, W, W], dtype=dt)
        zero3 = tl.zeros([1, W, W], dtype=dt)
        for k0 in range(0, kmax, W):
            jcnt = tl.minimum(kmax - k0, W)
            # 1. the panel, in registers
            pmask = (r3 < m) & (k0 + c3 < n)
            poffs = r3 * slr + (k0 + c3) * slc
            ar, ai = _ld(base, poffs, pmask, CPLX)
            ar, ai, piv, info, d_r, d_i, la = _lu_panel(ar, ai, k0, m, jcnt, info, d_r, d_i, la,
                                                        M, W, PIVOT, DET, CPLX)
            _st(base, poffs, ar, ai, pmask, CPLX)
            tl.store(pb + k0 + c2, piv, mask=c2 < jcnt)
            tl.debug_barrier()
            # 2. the panel's interchanges on the other columns. Only the panel rows and their
            #    pivot rows move: destinations (2W,), sources tracked back through the swaps.
            dst = tl.where(i2 < W, k0 + i2, k0 + i2 - W)
            pj = tl.load(pb + k0 + i2 - W, mask=(i2 >= W) & (i2 - W < jcnt), other=0) - 1
            dst = tl.where((i2 >= W) & (i2 - W < jcnt), pj, dst)
            src = _track(piv_ptr, b64 * spb, 1, in_b, dst[None, :], k0, k0 + jcnt, m)
            src = tl.reshape(src, [2 * W])[:, None]
            dst = dst[:, None]
            for c0 in range(0, n, SW):
                cc = c0 + tl.arange(0, SW)[None, :]
                om = (dst < m) & (cc < n) & ((cc < k0) | (cc >= k0 + W))
                xr, xi = _ld(base, src * slr + cc * slc, om, CPLX)
                tl.debug_barrier()  # every row read before any is overwritten
                _st(base, dst * slr + cc * slc, xr, xi, om, CPLX)  # duplicates write equal values
            tl.debug_barrier()
            # 3. U12 = L11^-1 A12 with L11^-1 formed once in registers (unit lower, W x W),
            # 4. then A22 -= L21 @ U12 for the same columns, U12 still in registers
            e0 = k0 + W
            l11r, l11i = _ld(base, (k0 + wr[None, :, :]) * slr + (k0 + c3) * slc,
                             (k0 + wr[None, :, :] < m) & (k0 + c3 < n), CPLX)
            ir, ii = _tri_solve(l11r, l11i, eye3, zero3, jcnt, True, True, False, CPLX)
            ir = tl.reshape(ir, [W, W])
            ii = tl.reshape(ii, [W, W])
            for c0 in range(e0, n, CW):
                cc = c0 + cw
                um = (k0 + wr < m) & (cc < n)
                ar2, ai2 = _ld(base, (k0 + wr) * slr + cc * slc, um, CPLX)
                ur, ui = _cdot(ir, ii, ar2, ai2, CPLX, PREC)
                _st(base, (k0 + wr) * slr + cc * slc, ur, ui, um, CPLX)
                for i0 in range(e0, m, BM):
                    ri = i0 + tl.arange(0, BM)[:, None]
                    lr, li = _ld(base, ri * slr + (k0 + wc) * slc, (ri < m) & (k0 + wc < n), CPLX)
                    amask2 = (ri < m) & (cc < n)
                    accr, acci = _ld(base, ri * slr + cc * slc, amask2, CPLX)
                    accr, acci = _dot_sub(accr, acci, lr, li, ur, ui, CPLX, PREC)
                    _st(base, ri * slr + cc * slc, accr, acci, amask2, CPLX)
            tl.debug_barrier()
    if STORE_LU:
        tl.store(info_ptr + bidx, info, mask=in_b)
    if DET != 0:
        _st(d1_ptr, b64 * sd1, d_r, d_i, in_b, CPLX)
        if DET == 2:
            tl.store(d2_ptr + b64 * sd2, la, mask=in_b)


_LU = Launcher(_lu_kernel)


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
        W = 32 if M * 32 * comps <= PANEL_ELEMS // 2 else 16  # wider panels spill on sm_90
        block_b, cw, bm, warps = 1, BLOCKED_CW, BLOCKED_BM, BLOCKED_WARPS
        sw = min(128, 4096 // (2 * W * comps))  # interchange chunk: (2W, sw) in registers
        LU3.copy_(A3)
    else:
        M, W = next_pow2(m), next_pow2(n)
        block_b = max(1, min(next_pow2(nb), TILE_ELEMS // (M * W * comps)))
        cw, sw, bm, warps = 16, 16, 16, 4
    ref = real_view(A3)
    lu_t = real_view(LU3) if store else ref
    d1_t = real_view(d1) if det else ref
    d2_t = d2 if det == 2 else ref
    _LU[(cdiv(nb, block_b),)](
        ref, lu_t, piv if store else ref, info if store else ref, d1_t, d2_t, nb, m, n,
        *kernel_strides(A3), *(kernel_strides(LU3) if store else (0, 0, 0)),
        piv.stride(0) if store else 0, (2 if cplx else 1) if det else 0, 1,
        BLOCK_B=block_b, M=M, W=W, CW=cw, SW=sw, BM=bm, BLOCKED=blocked, PIVOT=pivot, DET=det,
        STORE_LU=store, CPLX=cplx, PREC=BLOCKED_PREC if blocked else "ieee", num_warps=warps)


# ---------------------------------------------------------------------------- reference

def reference_lu_factor_ex(A: torch.Tensor, pivot: bool = True):
    """PyTorch path: ``torch.linalg.lu_factor_ex`` on A's device."""
    return tuple(torch.linalg.lu_factor_ex(A, pivot=pivot))


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


@register_op("linalg_lu_factor_ex", fake=_lu_fake)
def _lu_factor_ex_op(A: torch.Tensor, pivot: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    if not kernel_ok(A) or _path(m, n, math.prod(batch), A.dtype) == "torch":
        return reference_lu_factor_ex(A, pivot)
    LU = alloc.empty(A.shape, dtype=A.dtype, device=A.device)
    piv = alloc.empty(*batch, min(m, n), dtype=torch.int32, device=A.device)
    info = alloc.empty(batch, dtype=torch.int32, device=A.device)
    if m == 0 or n == 0:
        info.zero_()
        return LU, piv, info
    _launch(flat3(A, batch, (m, n)), LU.view(-1, m, n), piv.view(-1, min(m, n)), info.view(-1), pivot=pivot)
    return LU, piv, info


def _lu_solve_fake(LU, pivots, B, left, adjoint):
    batch, k = rhs_shapes(LU, B, left, "lu_solve", "LU")
    n = LU.shape[-1]
    return LU.new_empty((*batch, n, k) if left else (*batch, k, n))


@register_op("linalg_lu_solve", fake=_lu_solve_fake)
def _lu_solve_op(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool, adjoint: bool) -> torch.Tensor:
    n = LU.shape[-1]
    if not kernel_ok(LU, B) or n > SOLVE_MAX_N:
        return reference_lu_solve(LU, pivots, B, left, adjoint)
    batch, k = rhs_shapes(LU, B, left, "lu_solve", "LU")
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
                                "linalg.lu_factor_ex(A, pivot=pivot)")


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
    matrix), on devices Triton does not serve and for inputs that need gradients,
    ``torch.linalg.lu_factor_ex`` (cuSOLVER/MAGMA).

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
    LU, piv, info = _lu_factor_ex_op(A, pivot)
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
    LU, piv, info = _lu_factor_ex_op(A, pivot)
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
    X, contiguous, of the broadcast shape. A zero pivot in U gives inf/NaN, as in torch.

    Paths: n <= 32 in registers (many matrices per program); n <= 1024 one matrix and 32
    right-hand sides per program, blocked (tl.dot off the diagonal; with 32 right-hand sides
    its float32 products run as tf32x3, float32-level accuracy); larger n, devices
    Triton does not serve and inputs that need gradients take ``torch.linalg.lu_solve``.
    Pivots out of range count as no interchange (never an out-of-bounds read).

    Raises
    ------
    TypeError for unsupported or mismatched dtypes (pivots must be int32); ValueError for
    non-square LU, pivots of the wrong shape, B whose rows do not match n, batch
    dimensions that do not broadcast.
    """
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
