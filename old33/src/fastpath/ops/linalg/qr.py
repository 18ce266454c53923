"""QR factorisation of batches of small and tall-skinny matrices, ``qr``, with the semantics of
``torch.linalg.qr``.

One kernel, ``_qr_kernel``: a program holds ``BLOCK_B`` whole matrices in registers (complex
as ``view_as_real`` pairs, :mod:`.tiles`) and applies Householder reflectors column by
column, with LAPACK's conventions (``?larfg``: ``beta = -sign(Re alpha) * ||x||``,
``tau = (beta - alpha) / beta``, no reflection where the column below the diagonal is already
zero and ``alpha`` real), so Q and R agree with torch's up to rounding. The reflectors stay
below the diagonal; with ``WANT_Q`` they are applied in reverse order to the identity
(``?orgqr``) to form the reduced (m x k) or complete (m x m) Q. All norms are computed on
data scaled by its largest entry: no overflow or underflow for any input scale.

Matrices whose tiles do not fit one program's registers (m * (n + columns of Q) above
``TILE_ELEMS``, e.g. 4096 x 4096) take ``torch.linalg.qr`` (cuSOLVER geqrf/orgqr); a
blocked (panel + compact-WY) version for those is not written yet.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton, use_triton
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.registry import register_op
from .tiles import _div, _ld, _mul, _pick, _st, check_matrices, flat3, kernel_strides, real_view

KERNEL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: Real elements of the A and Q tiles of one matrix that one program may hold.
TILE_ELEMS = 8192
#: Programs hold several matrices up to this many elements (register budget at 4 warps).
SMALL_ELEMS = 8192 if INTERPRET else 2048
MODES = ("reduced", "complete", "r")


@triton.jit
def _norm2(re, im, axis: tl.constexpr, CPLX: tl.constexpr):
    """2-norm along ``axis`` of a (complex) tile, scaled by its largest component."""
    if CPLX:
        mx = tl.maximum(tl.max(tl.abs(re), axis=axis), tl.max(tl.abs(im), axis=axis))
    else:
        mx = tl.max(tl.abs(re), axis=axis)
    safe = tl.expand_dims(tl.where(mx > 0, mx, 1.0), axis)
    s = tl.sum((re / safe) * (re / safe), axis=axis)
    if CPLX:
        s += tl.sum((im / safe) * (im / safe), axis=axis)
    return mx * tl.sqrt(s)


@triton.jit
def _hypot3(a, b, c):
    mx = tl.maximum(tl.maximum(tl.abs(a), tl.abs(b)), tl.abs(c))
    s = tl.where(mx > 0, mx, 1.0)
    return mx * tl.sqrt((a / s) * (a / s) + (b / s) * (b / s) + (c / s) * (c / s))


@triton.jit
def _reflect(ar, ai, vr, vi, tr, ti, cmask, CPLX: tl.constexpr):
    """A - tau v (v^H A) on the columns in ``cmask``: v (BB, M), tau (BB,), A (BB, M, C)."""
    wr = tl.sum(vr[:, :, None] * ar, axis=1)  # w = v^H A: (BB, C)
    if CPLX:  # conj(v) a = (vr ar + vi ai) + i (vr ai - vi ar)
        wr += tl.sum(vi[:, :, None] * ai, axis=1)
        wi = tl.sum(vr[:, :, None] * ai, axis=1) - tl.sum(vi[:, :, None] * ar, axis=1)
    else:
        wi = wr
    fr, fi = _mul(tr[:, None], ti[:, None], wr, wi, CPLX)  # tau w: (BB, C)
    ur, ui = _mul(vr[:, :, None], vi[:, :, None], fr[:, None, :], fi[:, None, :], CPLX)
    ar = tl.where(cmask, ar - ur, ar)
    if CPLX:
        ai = tl.where(cmask, ai - ui, ai)
    else:
        ai = ar
    return ar, ai


@triton.jit
def _qr_kernel(a_ptr, q_ptr, r_ptr, nbatch, m, n, QC, RR,
               sab, sar, sac, sqb, sqr, sqc, srb, srr, src,
               BLOCK_B: tl.constexpr, MP: tl.constexpr, NP: tl.constexpr, QP: tl.constexpr,
               WANT_Q: tl.constexpr, CPLX: tl.constexpr):
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b3 = bidx.to(tl.int64)[:, None, None]
    r = tl.arange(0, MP)
    r2 = r[None, :]
    r3 = r[None, :, None]
    c2 = tl.arange(0, NP)[None, :]
    c3 = tl.arange(0, NP)[None, None, :]
    amask = (b3 < nbatch) & (r3 < m) & (c3 < n)
    ar, ai = _ld(a_ptr, b3 * sab + r3 * sar + c3 * sac, amask, CPLX)
    k = tl.minimum(m, n)
    taur = tl.zeros([BLOCK_B, NP], dtype=ar.dtype)
    taui = tl.zeros([BLOCK_B, NP], dtype=ar.dtype)
    for j in range(0, k):
        colr, coli = _pick(ar, ai, c3 == j, 2, CPLX)  # (BB, MP)
        alr, ali = _pick(colr, coli, r2 == j, 1, CPLX)  # (BB,)
        below = r2 > j
        xr = tl.where(below, colr, 0.0)
        if CPLX:
            xi = tl.where(below, coli, 0.0)
        else:
            xi = xr
        xnorm = _norm2(xr, xi, 1, CPLX)
        trivial = xnorm == 0.0  # nothing below the diagonal (and alpha real): H = I
        if CPLX:
            trivial = trivial & (ali == 0.0)
        if CPLX:
            bmag = _hypot3(alr, ali, xnorm)
        else:
            bmag = _hypot3(alr, xnorm, 0.0 * xnorm)
        beta = tl.where(alr >= 0, -bmag, bmag)
        bs = tl.where(trivial, 1.0, beta)
        tr = tl.where(trivial, 0.0, (bs - alr) / bs)
        ti = tl.where(trivial, 0.0, -ali / bs)
        # v = x / (alpha - beta) below the diagonal, 1 on it
        sr, si = _div(tl.zeros_like(alr) + 1.0, tl.zeros_like(alr), tl.where(trivial, 1.0, alr - beta),
                      tl.where(trivial, 0.0, ali), CPLX)
        vr, vi = _mul(xr, xi, sr[:, None], si[:, None], CPLX)
        vr = tl.where(r2 == j, 1.0, vr)
        if CPLX:
            vi = tl.where(r2 == j, 0.0, vi)
        # A <- H^H A on the columns right of j: tau conjugated
        ar, ai = _reflect(ar, ai, vr, vi, tr, -ti, c3 > j, CPLX)
        # column j: beta on the diagonal (alpha where nothing was reflected), v below
        dr = tl.where(trivial, alr, beta)
        ar = tl.where(c3 == j, tl.where(r3 == j, dr[:, None, None], tl.where(r3 > j, vr[:, :, None], ar)), ar)
        if CPLX:
            di = tl.where(trivial, ali, 0.0)
            ai = tl.where(c3 == j, tl.where(r3 == j, di[:, None, None], tl.where(r3 > j, vi[:, :, None], ai)), ai)
        else:
            ai = ar
        taur = tl.where(c2 == j, tr[:, None], taur)
        if CPLX:
            taui = tl.where(c2 == j, ti[:, None], taui)
    # R: the upper triangle, RR rows (k, or m for the complete mode: zeros below)
    rmask = (b3 < nbatch) & (r3 < RR) & (c3 < n)
    upper = r3 <= c3
    _st(r_ptr, b3 * srb + r3 * srr + c3 * src, tl.where(upper, ar, 0.0), tl.where(upper, ai, 0.0), rmask, CPLX)
    if WANT_Q:
        q3 = tl.arange(0, QP)[None, None, :]
        qr = (r3 == q3).to(ar.dtype) + tl.zeros([BLOCK_B, MP, QP], dtype=ar.dtype)
        qi = tl.zeros([BLOCK_B, MP, QP], dtype=ar.dtype)
        for s in range(0, k):
            j = k - 1 - s
            vr, vi = _pick(ar, ai, c3 == j, 2, CPLX)
            vr = tl.where(r2 > j, vr, tl.where(r2 == j, 1.0, 0.0))
            if CPLX:
                vi = tl.where(r2 > j, vi, 0.0)
            tr = tl.sum(tl.where(c2 == j, taur, 0.0), axis=1)
            ti = tl.sum(tl.where(c2 == j, taui, 0.0), axis=1)
            qr, qi = _reflect(qr, qi, vr, vi, tr, ti, q3 < QP, CPLX)
        _st(q_ptr, b3 * sqb + r3 * sqr + q3 * sqc, qr, qi, (b3 < nbatch) & (r3 < m) & (q3 < QC), CPLX)


_QR = Launcher(_qr_kernel)


# ---------------------------------------------------------------------------- launcher

def _comps(dtype) -> int:
    return (2 if dtype.is_complex else 1) * (2 if dtype in (torch.float64, torch.complex128) else 1)


def _fits(m: int, n: int, mode: str, dtype) -> bool:
    qc = 0 if mode == "r" else (m if mode == "complete" else min(m, n))
    return m > 0 and n > 0 and next_pow2(m) * (next_pow2(n) + next_pow2(max(qc, 1))) * _comps(dtype) <= TILE_ELEMS


def _launch(A3, Q3, R3, mode: str) -> None:
    nb, m, n = A3.shape
    if nb == 0:
        return
    want_q = mode != "r"
    qc = m if mode == "complete" else min(m, n)
    MP, NP, QP = next_pow2(m), next_pow2(n), next_pow2(qc)
    per = MP * (NP + (QP if want_q else 0)) * _comps(A3.dtype)
    fit = max(1, SMALL_ELEMS // per)
    block_b = min(next_pow2(nb), 1 << (fit.bit_length() - 1))
    warps = 4 if block_b * per <= 2048 else 8
    Qt = Q3 if want_q else R3
    _QR[(cdiv(nb, block_b),)](
        real_view(A3), real_view(Qt), real_view(R3), nb, m, n, qc, R3.shape[1],
        *kernel_strides(A3), *kernel_strides(Qt), *kernel_strides(R3),
        BLOCK_B=block_b, MP=MP, NP=NP, QP=QP, WANT_Q=want_q, CPLX=A3.is_complex(), num_warps=warps)


# ---------------------------------------------------------------------------- reference, op

def reference_qr(A: torch.Tensor, mode: str = "reduced") -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``torch.linalg.qr`` on A's device."""
    return tuple(torch.linalg.qr(A, mode=mode))


def _qr_fake(A, mode):
    m, n = A.shape[-2:]
    k = min(m, n)
    b = A.shape[:-2]
    if mode == "r":
        return A.new_empty((0,)), A.new_empty((*b, k, n))
    q = m if mode == "complete" else k
    return A.new_empty((*b, m, q)), A.new_empty((*b, q, n))


@register_op("linalg_qr", fake=_qr_fake)
def _qr_op(A: torch.Tensor, mode: str) -> Tuple[torch.Tensor, torch.Tensor]:
    m, n = A.shape[-2:]
    if (A.dtype not in KERNEL_DTYPES or not _fits(m, n, mode, A.dtype) or not use_triton(A)
            or (torch.is_grad_enabled() and A.requires_grad)):
        return reference_qr(A, mode)
    batch = tuple(A.shape[:-2])
    k = min(m, n)
    rows = m if mode == "complete" else k
    R = alloc.empty(*batch, rows, n, dtype=A.dtype, device=A.device)
    if mode == "r":
        Q = torch.empty(0, dtype=A.dtype, device=A.device)
        Q3 = None
    else:
        Q = alloc.empty(*batch, m, rows, dtype=A.dtype, device=A.device)
        Q3 = Q.view(-1, m, rows)
    _launch(flat3(A, batch, (m, n)), Q3, R.view(-1, rows, n), mode)
    return Q, R


# ---------------------------------------------------------------------------- public API

class QR(NamedTuple):
    Q: torch.Tensor
    R: torch.Tensor


def qr(A: torch.Tensor, mode: str = "reduced") -> QR:
    """QR factorisation ``A = Q R``, like ``torch.linalg.qr``.

    Parameters
    ----------
    A : Tensor (*, m, n), float32, float64, complex64 or complex128, any strides.
    mode : ``'reduced'`` (Q (*, m, k), R (*, k, n), k = min(m, n)), ``'complete'`` (Q (*, m, m),
        R (*, m, n)) or ``'r'`` (R only; Q is an empty tensor, as in torch).

    Returns
    -------
    (Q, R), contiguous: Q with orthonormal columns, R upper triangular; with LAPACK's
    Householder conventions, so the same as torch's up to rounding (diagonal of R not
    necessarily positive).

    Paths: one Householder kernel, many matrices per program, when a matrix and its Q fit
    one program's registers: m * (n + columns of Q) <= 8192 real elements (after rounding
    each up to a power of two; half for float64/complex64, a quarter for complex128), e.g.
    batches of 32 x 32, 64 x 64 or 256 x 16. Larger matrices (4096 x 4096), devices Triton
    does not serve and inputs that need gradients take ``torch.linalg.qr``.

    Raises
    ------
    TypeError for unsupported dtypes; ValueError for fewer than 2 dimensions or an unknown mode.

    Example
    -------
    >>> import torch, fastpath
    >>> Q, R = fastpath.linalg.qr(torch.randn(10000, 32, 32))
    """
    check_matrices(A, "qr")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of 'reduced', 'complete', 'r', got {mode!r}")
    return QR(*_qr_op(A, mode))

