"""Singular value decomposition of batches of small matrices: ``svd``, ``svdvals``, ``pinv``,
with the semantics of ``torch.linalg``.

One kernel, ``_svd_kernel``: one-sided (Hestenes) Jacobi. A program holds ``BLOCK_B``
matrices in registers as the tall working matrix X (R x K, R = max(m, n): A, or A^T when
m < n) and the accumulated rotations V (K x K). Cyclic sweeps rotate every pair of columns
(p, q) of X until all pairs are orthogonal to ``tol = eps * sqrt(R)`` relative to their
norms (at most ``MAX_SWEEPS``); the column norms are then the singular values, the
normalised columns the left singular vectors. Every quantity a rotation needs is computed
on columns scaled by their largest entry, after the whole matrix was scaled by a power of
two (exact) to a largest entry in [1, 2): no square of an input entry is ever formed, and
inputs of any scale (1e-30, 1e30) and tiny singular values keep their relative accuracy
(one-sided Jacobi is accurate to working precision relative to each singular value for
matrices that are well conditioned up to a column scaling).

Matrices whose working set fits one thread's registers (8x8 float32 and smaller) take
``svd_lanes`` instead: one matrix a thread, no cross-lane reductions.

* ``MODE=0`` (svdvals): singular values only, sorted descending.
* ``MODE=1`` (svd): also U and V, sorted; columns of U whose singular value is zero (or too
  small to normalise: below the smallest normal / eps), and the extra columns of a complete
  U, are completed to an orthonormal basis by
  Gram-Schmidt (twice) from the unit vector least represented in the columns so far, so
  U stays orthonormal for rank-deficient inputs.
* ``MODE=2`` (pinv): ``V diag(1/s, s > max(atol, rtol * s_max)) U^T`` in registers.

Complex dtypes, matrices larger than 32 x 32, ``driver=`` and ``hermitian=True`` take
``torch.linalg``.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple, Union

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton, use_triton
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.memo import LaunchMemo
from ..._core.registry import register_op
from . import svd_lanes
from .tiles import _maxs2, _sums3, check_matrices, flat3, pow2_scale

#: Largest m and n the kernel serves.
MAX_N = 32
KERNEL_DTYPES = (torch.float32, torch.float64)
MAX_SWEEPS = 30
#: Real elements of all tiles of one program (register budget of one block).
TILE_ELEMS = 8192 if INTERPRET else 2048
NUM_WARPS = 4  # warps per program (scripts/tune_linalg.py)


@triton.jit
def _scaled_norm(x, axis: tl.constexpr):
    """2-norm along ``axis`` without squaring raw entries: max|x| * ||x / max|x|||."""
    mx = tl.max(tl.abs(x), axis=axis)
    safe = tl.where(mx > 0, mx, 1.0)
    y = x / tl.expand_dims(safe, axis)
    return mx * tl.sqrt(tl.sum(y * y, axis=axis))


@triton.jit
def _rotate(xp, xq, vp, vq, tol, tiny, WITH_V: tl.constexpr):
    """One Jacobi rotation of the column pair (p, q) of X (``[BLOCK_B, RP]`` each) and of V's
    (``[BLOCK_B, KP]``, with ``WITH_V``). Returns the four new columns and ``rot``, per matrix:
    whether the pair was not yet orthogonal to ``tol`` and so was rotated."""
    dp, dq = _maxs2(tl.abs(xp), tl.abs(xq), 1)
    ok = (dp >= tiny) & (dq >= tiny)  # columns of denormals are not rotated
    dps = tl.where(ok, dp, 1.0)
    dqs = tl.where(ok, dq, 1.0)
    yp = xp / dps[:, None]
    yq = xq / dqs[:, None]
    a, b, g = _sums3(yp * yp, yq * yq, yp * yq, 1)  # a, b in [1, R]
    rot = ok & (tl.abs(g) > tol * tl.sqrt(a) * tl.sqrt(b))
    gs = tl.where(rot, g, 1.0)
    # zeta = (|xq|^2 - |xp|^2) / (2 xp.xq), from the scaled quantities
    zeta = ((dqs / dps) * b - (dps / dqs) * a) / (2.0 * gs)
    az = tl.abs(zeta)
    sgn = tl.where(zeta >= 0, 1.0, -1.0)
    t = tl.where(az > 1e15, 0.5 / tl.where(az > 1e15, zeta, 1.0),
                 sgn / (az + tl.sqrt(1.0 + tl.where(az > 1e15, 0.0, zeta * zeta))))
    cs = 1.0 / tl.sqrt(1.0 + t * t)
    sn = cs * t
    cs = tl.where(rot, cs, 1.0)[:, None]
    sn = tl.where(rot, sn, 0.0)[:, None]
    nxp = cs * xp - sn * xq
    nxq = sn * xp + cs * xq
    if WITH_V:
        nvp = cs * vp - sn * vq
        vq = sn * vp + cs * vq
        vp = nvp
    return nxp, nxq, vp, vq, rot


@triton.jit
def _svd_kernel(a_ptr, s_ptr, w_ptr, v_ptr, p_ptr, atol_ptr, rtol_ptr, atol_s, rtol_s, nbatch, R, K, CC, tol, tiny, safe,
                sab, sar, sac, ssb, swb, swr, swc, svb, svr, svc, spb, spr, spc,
                BLOCK_B: tl.constexpr, RP: tl.constexpr, CP: tl.constexpr, KP: tl.constexpr,
                MODE: tl.constexpr, MAX_SWEEPS: tl.constexpr, TOL_PTR: tl.constexpr):
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    in_b = bidx < nbatch
    b64 = bidx.to(tl.int64)
    b3 = b64[:, None, None]
    r = tl.arange(0, RP)
    r2 = r[None, :]
    r3 = r[None, :, None]
    c2 = tl.arange(0, CP)[None, :]
    c3 = tl.arange(0, CP)[None, None, :]
    kk = tl.arange(0, KP)
    kr3 = kk[None, :, None]
    kc3 = kk[None, None, :]
    xmask = (b3 < nbatch) & (r3 < R) & (c3 < K)
    x = tl.load(a_ptr + b3 * sab + r3 * sar + c3 * sac, mask=xmask, other=0.0)
    scale, unscale = pow2_scale(tl.max(tl.max(tl.abs(x), axis=2), axis=1))  # (BB,)
    x = x * scale[:, None, None]  # exact: A's scale no longer matters
    v = (kr3 == kc3).to(x.dtype) + tl.zeros([BLOCK_B, KP, KP], dtype=x.dtype)
    # ---------------------------------------------------------------- Jacobi sweeps
    sweep = tl.full([], 0, tl.int32)
    todo = tl.full([], 1, tl.int32)
    while (sweep < MAX_SWEEPS) & (todo > 0):
        moved = tl.zeros([BLOCK_B], dtype=tl.int32)
        for p in range(0, K - 1):
            xp = tl.sum(tl.where(c3 == p, x, 0.0), axis=2)  # (BB, RP)
            vp = xp  # a stand-in when MODE == 0 (never read)
            if MODE != 0:
                vp = tl.sum(tl.where(kc3 == p, v, 0.0), axis=2)  # (BB, KP)
            for q in range(p + 1, K):
                xq = tl.sum(tl.where(c3 == q, x, 0.0), axis=2)
                vq = xq  # a stand-in when MODE == 0 (never read)
                if MODE != 0:
                    vq = tl.sum(tl.where(kc3 == q, v, 0.0), axis=2)
                xp, xq, vp, vq, rot = _rotate(xp, xq, vp, vq, tol, tiny, MODE != 0)
                x = tl.where(c3 == q, xq[:, :, None], x)
                if MODE != 0:
                    v = tl.where(kc3 == q, vq[:, :, None], v)
                moved += rot.to(tl.int32)
            x = tl.where(c3 == p, xp[:, :, None], x)
            if MODE != 0:
                v = tl.where(kc3 == p, vp[:, :, None], v)
        todo = tl.sum(moved, axis=0)  # one block-wide sum a sweep
        sweep += 1
    sig = tl.where(c2 < K, _scaled_norm(x, 1), 0.0)  # (BB, CP), of the scaled A
    if MODE == 2:
        # ------------------------------------------------------------ pinv
        smax = tl.max(sig, axis=1) * unscale
        atol = atol_s
        rtol = rtol_s
        if TOL_PTR:  # per matrix; else one pair of scalars
            atol = tl.load(atol_ptr + bidx, mask=in_b, other=0.0)
            rtol = tl.load(rtol_ptr + bidx, mask=in_b, other=0.0)
        cut = tl.maximum(atol, rtol * smax)
        keep = (sig * unscale[:, None] > cut[:, None]) & (c2 < K)
        # A^+ = V diag(1/s) U^T with s = sig * unscale: 1/s = scale / sig
        inv = tl.where(keep, scale[:, None] / tl.where(keep, sig, 1.0), 0.0)
        pm = tl.zeros([BLOCK_B, KP, RP], dtype=x.dtype)
        for c in range(0, K):
            fc = tl.sum(tl.where(c2 == c, inv, 0.0), axis=1)[:, None]  # (BB, 1): 1/s_c or 0
            sc = tl.sum(tl.where(c2 == c, sig, 0.0), axis=1)[:, None]
            uc = tl.sum(tl.where(c3 == c, x, 0.0), axis=2) / tl.where(sc > 0, sc, 1.0)  # u_c
            vc = tl.sum(tl.where(kc3 == c, v, 0.0), axis=2) * fc  # (BB, KP): v_c / s_c
            pm += vc[:, :, None] * uc[:, None, :]
        pk3 = kk[None, :, None]
        prc = r[None, None, :]
        tl.store(p_ptr + b3 * spb + pk3 * spr + prc * spc, pm, mask=(b3 < nbatch) & (pk3 < K) & (prc < R))
    else:
        # ------------------------------------------------------------ sort, descending
        work = tl.where(c2 < K, sig, -1.0)
        ss = tl.zeros([BLOCK_B, CP], dtype=x.dtype)
        if MODE == 1:
            xs = tl.zeros([BLOCK_B, RP, CP], dtype=x.dtype)
            vs = tl.zeros([BLOCK_B, KP, KP], dtype=x.dtype)
        for i in range(0, K):
            j = tl.argmax(work, axis=1)  # (BB,)
            sel = c2 == j[:, None]
            sj = tl.sum(tl.where(sel, sig, 0.0), axis=1)
            ss = tl.where(c2 == i, sj[:, None], ss)
            work = tl.where(sel, -2.0, work)
            if MODE == 1:
                xj = tl.sum(tl.where(sel[:, None, :], x, 0.0), axis=2)
                xj = xj / tl.where(sj > 0, sj, 1.0)[:, None]
                xs = tl.where(c3 == i, xj[:, :, None], xs)
                vj = tl.sum(tl.where(kc3 == j[:, None, None], v, 0.0), axis=2)
                vs = tl.where(kc3 == i, vj[:, :, None], vs)
        tl.store(s_ptr + b64[:, None] * ssb + c2, ss * unscale[:, None], mask=in_b[:, None] & (c2 < K))
        if MODE == 1:
            # -------------------------------------------------------- complete U
            good = (c2 < K) & (ss > safe)  # (BB, CP): a column this small cannot be normalised
            nbad = tl.sum(tl.sum(((c2 < CC) & (~good) & in_b[:, None]).to(tl.int32), axis=1), axis=0)
            if nbad > 0:
                for i in range(0, CC):
                    need = tl.sum(((c2 == i) & (~good)).to(tl.int32), axis=1) > 0  # (BB,)
                    g3 = good[:, None, :]
                    rn = tl.sum(tl.where(g3, xs * xs, 0.0), axis=2)  # (BB, RP)
                    e = tl.argmin(tl.where(r2 < R, rn, float("inf")), axis=1)
                    u = (r2 == e[:, None]).to(x.dtype)
                    for _ in range(0, 2):
                        coef = tl.sum(tl.where(g3, xs * u[:, :, None], 0.0), axis=1)  # (BB, CP)
                        u = u - tl.sum(tl.where(g3, xs * coef[:, None, :], 0.0), axis=2)
                    u = u / _scaled_norm(u, 1)[:, None]
                    xs = tl.where(need[:, None, None] & (c3 == i), u[:, :, None], xs)
                    good = good | (need[:, None] & (c2 == i))
            tl.store(w_ptr + b3 * swb + r3 * swr + c3 * swc, xs, mask=(b3 < nbatch) & (r3 < R) & (c3 < CC))
            tl.store(v_ptr + b3 * svb + kr3 * svr + kc3 * svc, vs, mask=(b3 < nbatch) & (kr3 < K) & (kc3 < K))


_SVD = Launcher(_svd_kernel)


# ---------------------------------------------------------------------------- launcher

def _launch(A3: torch.Tensor, mode: int, *, S3=None, U3=None, V3=None, P3=None, atol=None, rtol=None,
            full: bool = False) -> None:
    """A3 (nb, R, K) with R >= K (A or A^T). mode 0: S3 (nb, K); 1: also U3 (nb, R, C) and
    V3 (nb, K, K) (A3 = U3 diag(S3) V3^T); 2: P3 (nb, K, R) = V diag(1/s) U^T with the cut
    max(atol, rtol * s_max): atol and rtol tensors (nb,), or two floats for every matrix."""
    nb, R, K = A3.shape
    if nb == 0:
        return
    eps = torch.finfo(A3.dtype).eps
    dummy = A3
    S3 = S3 if S3 is not None else dummy
    U3 = U3 if U3 is not None else dummy
    V3 = V3 if V3 is not None else dummy
    P3 = P3 if P3 is not None else dummy
    tols = (eps * math.sqrt(R), torch.finfo(A3.dtype).tiny, torch.finfo(A3.dtype).tiny / eps)
    strides = (*A3.stride(), S3.stride(0), *U3.stride(), *V3.stride(), *P3.stride())
    tol_ptr = isinstance(atol, torch.Tensor)
    tol_args = (atol, rtol, 0.0, 0.0) if tol_ptr else (dummy, dummy, atol or 0.0, rtol or 0.0)
    if svd_lanes.lanes_fit(R, K, A3.dtype == torch.float64):
        block_b = 32 * svd_lanes.LANE_WARPS
        svd_lanes.SVD_LANES[(cdiv(nb, block_b),)](A3, S3, U3, V3, P3, *tol_args, nb, *tols, *strides, BLOCK_B=block_b,
                                        R=R, K=K, CC=R if full else K, MODE=mode, MAX_SWEEPS=MAX_SWEEPS, TOL_PTR=tol_ptr,
                                        num_warps=svd_lanes.LANE_WARPS)
        return
    RP, KP = next_pow2(R), next_pow2(K)
    CP = RP if full else KP
    per = RP * CP + (KP * KP if mode else 0) + (RP * CP + KP * KP if mode == 1 else 0) + (KP * RP if mode == 2 else 0)
    per *= 2 if A3.dtype == torch.float64 else 1
    fit = max(1, TILE_ELEMS // per)
    block_b = min(next_pow2(nb), 1 << (fit.bit_length() - 1))
    _SVD[(cdiv(nb, block_b),)](
        A3, S3, U3, V3, P3, *tol_args, nb, R, K, (R if full else K), *tols, *strides,
        BLOCK_B=block_b, RP=RP, CP=CP, KP=KP, MODE=mode, MAX_SWEEPS=MAX_SWEEPS, TOL_PTR=tol_ptr, num_warps=NUM_WARPS)


# ---------------------------------------------------------------------------- reference

def reference_svd(A: torch.Tensor, full_matrices: bool = True, driver: Optional[str] = None):
    return tuple(torch.linalg.svd(A, full_matrices=full_matrices, driver=driver))


def reference_svdvals(A: torch.Tensor, driver: Optional[str] = None) -> torch.Tensor:
    return torch.linalg.svdvals(A, driver=driver)


def reference_pinv(A: torch.Tensor, atol=None, rtol=None, hermitian: bool = False) -> torch.Tensor:
    return torch.linalg.pinv(A, atol=atol, rtol=rtol, hermitian=hermitian)


# ---------------------------------------------------------------------------- ops


def _kernel_ok(A) -> bool:
    if A.dtype not in KERNEL_DTYPES or max(A.shape[-2:]) > MAX_N or min(A.shape[-2:]) == 0:
        return False
    if not use_triton(A):
        return False
    return not (torch.is_grad_enabled() and A.requires_grad)


def _work(A: torch.Tensor):
    """(batch, m, n, tall working view (nb, R, K), transposed?)."""
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    A3 = flat3(A, batch, (m, n))
    return batch, m, n, (A3.mT if m < n else A3), m < n


def _svd_fake(A, full_matrices):
    m, n = A.shape[-2:]
    k = min(m, n)
    b = A.shape[:-2]
    return (A.new_empty((*b, m, m if full_matrices else k)), A.new_empty((*b, k), dtype=A.real.dtype),
            A.new_empty((*b, n if full_matrices else k, n)))


@register_op("linalg_svd", fake=_svd_fake)
def _svd_op(A: torch.Tensor, full_matrices: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not _kernel_ok(A):
        return reference_svd(A, full_matrices)
    batch, m, n, X3, trans = _work(A)
    k = min(m, n)
    U = alloc.empty(*batch, m, m if full_matrices else k, dtype=A.dtype, device=A.device)
    S = alloc.empty(*batch, k, dtype=A.dtype, device=A.device)
    Vh = alloc.empty(*batch, n if full_matrices else k, n, dtype=A.dtype, device=A.device)
    U3, Vh3 = U.view(-1, *U.shape[-2:]), Vh.view(-1, *Vh.shape[-2:])
    # X = W diag(S) V^T: W is U (m >= n) or Vh^T (m < n), V is Vh^T (m >= n) or U (m < n)
    W3, V3 = (Vh3.mT, U3) if trans else (U3, Vh3.mT)
    _launch(X3, 1, S3=S.view(-1, k), U3=W3, V3=V3, full=full_matrices)
    return U, S, Vh


def _svdvals_fake(A):
    return A.new_empty((*A.shape[:-2], min(A.shape[-2:])), dtype=A.real.dtype)


@register_op("linalg_svdvals", fake=_svdvals_fake)
def _svdvals_op(A: torch.Tensor) -> torch.Tensor:
    if not _kernel_ok(A):
        return reference_svdvals(A)
    batch, m, n, X3, _ = _work(A)
    S = alloc.empty(*batch, min(m, n), dtype=A.dtype, device=A.device)
    _launch(X3, 0, S3=S.view(-1, min(m, n)))
    return S


def _default_rtol(A) -> float:
    """torch.linalg.pinv's default rtol: eps * max(m, n) (0 instead when atol > 0 is given)."""
    return torch.finfo(A.real.dtype if A.is_complex() else A.dtype).eps * max(A.shape[-2:])


def _tolerances(A, atol, rtol, batch):
    """torch.linalg.pinv's rule (:func:`_default_rtol`) with tensor tolerances, per matrix."""
    real = A.real.dtype if A.is_complex() else A.dtype
    default = _default_rtol(A)
    if atol is None:
        at = torch.zeros((), dtype=real, device=A.device)
    else:
        at = torch.as_tensor(atol, dtype=real, device=A.device)
    if rtol is None:
        rt = torch.full((), default, dtype=real, device=A.device)
        if atol is not None:
            rt = torch.where(at > 0, torch.zeros((), dtype=real, device=A.device), rt)
    else:
        rt = torch.as_tensor(rtol, dtype=real, device=A.device)
    try:
        return at.expand(batch).reshape(-1), rt.expand(batch).reshape(-1)
    except RuntimeError:
        raise ValueError(f"atol/rtol: shapes {tuple(at.shape)} and {tuple(rt.shape)} must broadcast to A's "
                         f"batch shape {batch}") from None


def _scalar_tolerances(A, atol: Optional[float], rtol: Optional[float]) -> Tuple[float, float]:
    """torch.linalg.pinv's rule for float tolerances (no device work)."""
    at = 0.0 if atol is None else float(atol)
    if rtol is None:
        return at, 0.0 if at > 0 else _default_rtol(A)
    return at, float(rtol)


def _pinv_fake(A, atol, rtol, atol_value, rtol_value):
    return A.new_empty((*A.shape[:-2], A.shape[-1], A.shape[-2]))


@register_op("linalg_pinv", fake=_pinv_fake)
def _pinv_op(A: torch.Tensor, atol: Optional[torch.Tensor], rtol: Optional[torch.Tensor],
             atol_value: Optional[float], rtol_value: Optional[float]) -> torch.Tensor:
    """Tolerances as tensors or as floats (``*_value``, used where the tensor is None)."""
    if not _kernel_ok(A):
        return reference_pinv(A, atol=atol if atol is not None else atol_value,
                              rtol=rtol if rtol is not None else rtol_value)
    batch, m, n, X3, trans = _work(A)
    P = alloc.empty(*batch, n, m, dtype=A.dtype, device=A.device)
    P3 = P.view(-1, n, m)
    if atol is None and rtol is None and A.dtype == torch.float32:
        # two kernel scalars (float32 parameters: A's precision): no tolerance tensors to build
        at, rt = _scalar_tolerances(A, atol_value, rtol_value)
    else:
        def as_tensor(t, value):  # a float becomes a fill on A's device (no host-to-device copy)
            return t if t is not None or value is None else torch.full((), value, dtype=A.dtype, device=A.device)
        at, rt = _tolerances(A, as_tensor(atol, atol_value), as_tensor(rtol, rtol_value), batch)
        at, rt = at.contiguous(), rt.contiguous()
    _launch(X3, 2, P3=P3.mT if trans else P3, atol=at, rtol=rt)
    return P


# ---------------------------------------------------------------------------- public API

class SVD(NamedTuple):
    U: torch.Tensor
    S: torch.Tensor
    Vh: torch.Tensor


def svd(A: torch.Tensor, full_matrices: bool = True, *, driver: Optional[str] = None) -> SVD:
    """Singular value decomposition ``A = U diag(S) Vh``, like ``torch.linalg.svd``.

    Parameters
    ----------
    A : Tensor (*, m, n), float32 or float64 with m, n <= 32 for the kernel (one-sided
        Jacobi, many matrices per program); complex dtypes, larger matrices, ``driver``
        other than None, devices Triton does not serve and inputs that need gradients take
        ``torch.linalg.svd``. Any strides.
    full_matrices : U (*, m, m) and Vh (*, n, n) (True, torch's default) or U (*, m, k) and
        Vh (*, k, n) with k = min(m, n).
    driver : cuSOLVER driver name for torch's path (forces it).

    Returns
    -------
    (U, S, Vh): S (*, k) descending, non-negative, real; U and Vh with orthonormal columns
    (rows) even for rank-deficient A (null-space columns completed by Gram-Schmidt).
    Singular vectors are unique only up to sign (and within repeated singular values):
    compare reconstructions, not vectors, with torch's.

    Accuracy: rotations are computed on column-scaled data, so inputs of scale 1e-30 or
    1e30 in float32 and singular values far below the largest keep their relative accuracy.

    Raises
    ------
    TypeError for unsupported dtypes; ValueError for fewer than 2 dimensions.

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.randn(10000, 8, 8)
    >>> U, S, Vh = fastpath.linalg.svd(A)
    >>> bool(torch.dist(U @ torch.diag_embed(S) @ Vh, A) < 1e-3)
    True
    """
    check_matrices(A, "svd")
    if not isinstance(full_matrices, bool):
        raise TypeError(f"full_matrices: expected a bool, got {type(full_matrices).__name__}")
    if driver is not None:
        return SVD(*reference_svd(A, full_matrices, driver))
    return SVD(*_svd_op(A, full_matrices))


def svdvals(A: torch.Tensor, *, driver: Optional[str] = None) -> torch.Tensor:
    """Singular values of a batch of matrices, descending, like ``torch.linalg.svdvals``.

    Same arguments and paths as :func:`svd`; computes no singular vectors. Returns (*, k)
    real. Example: ``fastpath.linalg.svdvals(torch.diag(torch.tensor([1.0, -3.0])))`` gives
    ``tensor([3., 1.])``.
    """
    check_matrices(A, "svdvals")
    if driver is not None:
        return reference_svdvals(A, driver)
    return _svdvals_op(A)


def pinv(A: torch.Tensor, *, atol: Union[float, torch.Tensor, None] = None,
         rtol: Union[float, torch.Tensor, None] = None, hermitian: bool = False) -> torch.Tensor:
    """Moore-Penrose pseudo-inverse, like ``torch.linalg.pinv``.

    Parameters
    ----------
    A : Tensor (*, m, n); paths as :func:`svd` (float32/float64 with m, n <= 32 in the
        kernel, which computes ``V diag(1/s) U^T`` in registers without writing U, S, V).
    atol, rtol : singular values ``s <= max(atol, rtol * s_max)`` are treated as zero;
        floats or tensors broadcastable to A's batch shape. As in torch, ``rtol`` defaults
        to ``eps * max(m, n)``, or to 0 when ``atol`` > 0 is given.
    hermitian : as torch's (A taken as Hermitian, read from its lower triangle): takes
        ``torch.linalg.pinv``.

    Returns
    -------
    Tensor (*, n, m) of A's dtype.

    Raises
    ------
    TypeError for unsupported dtypes; ValueError for fewer than 2 dimensions or tolerances
    that do not broadcast to the batch shape.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.pinv(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    tensor([[1., 0.],
            [0., 0.]])
    """
    if not isinstance(hermitian, bool):
        raise TypeError(f"hermitian: expected a bool, got {type(hermitian).__name__}")
    for name, t in (("atol", atol), ("rtol", rtol)):
        if t is not None and not isinstance(t, (float, int, torch.Tensor)):
            raise TypeError(f"{name}: expected a float, a Tensor or None, got {type(t).__name__}")
    tensors = [t if isinstance(t, torch.Tensor) else None for t in (atol, rtol)]
    values = [None if isinstance(t, torch.Tensor) or t is None else float(t) for t in (atol, rtol)]

    def checked():
        check_matrices(A, "pinv")
        if hermitian:
            return reference_pinv(A, atol=atol, rtol=rtol, hermitian=True)
        return _pinv_op(A, *tensors, *values)
    if hermitian or any(t is not None for t in tensors):
        return checked()
    # float tolerances: eager calls like an earlier one replay its launch (fastpath._core.memo)
    return _PINV_MEMO.call(checked, (A,), tuple(values))


_PINV_MEMO = LaunchMemo()
