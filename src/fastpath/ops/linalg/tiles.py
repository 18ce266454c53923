"""In-register helpers shared by the linalg kernels (``lu``, ``triangular``, ``qr``, ``svd``).

Complex tensors reach the kernels through ``torch.view_as_real``: a float pointer and strides
in units of the real component, the imaginary part at offset +1. Inside a kernel a complex
tile is a pair ``(re, im)`` of real tiles. With ``CPLX=False`` every helper ignores the
imaginary argument and returns the real result twice (the second is a stand-in that no
real-path code reads), so one kernel body serves real and complex dtypes.

Host side: :func:`real_view` / :func:`kernel_strides` give the pointer tensor and strides.
"""
from __future__ import annotations

import torch

from ..._core.backend import INTERPRET, tl, triton
from ..._core.errors import check_tensor

#: Several reductions of one tile in one multi-operand ``tl.reduce`` (one pass through shared
#: memory on a GPU). Triton's interpreter runs a generic reduce element by element, very
#: slowly, so there it takes separate sums (tests switch it on for a few small cases).
FUSED_REDUCE = tl.constexpr(not INTERPRET)


# ---------------------------------------------------------------------------- host side

def real_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor the kernels address: ``t`` itself, or ``view_as_real(t)`` for complex ``t``
    (a conjugate view is resolved first, which copies)."""
    if t.is_complex():
        return torch.view_as_real(t.resolve_conj())
    return t


#: What fastpath.linalg accepts (each op's kernel may serve fewer: see its KERNEL_DTYPES).
LINALG_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def check_matrices(A, fname: str) -> None:
    """``A``: a tensor of a linalg dtype with at least 2 dims, errors naming ``A`` and ``fname``."""
    check_tensor("A", A)
    if A.dtype not in LINALG_DTYPES:
        raise TypeError(f"A: {fname} supports float32, float64, complex64, complex128, got {A.dtype}")
    if A.dim() < 2:
        raise ValueError(f"A: {fname} expects a batch of matrices (*, m, n), got shape {tuple(A.shape)}")


def check_rhs(A, B, left, fname: str, aname: str = "A") -> None:
    """A right-hand side B: a tensor of A's dtype and device, and ``left`` a bool."""
    check_tensor("B", B)
    if B.dtype != A.dtype:
        raise TypeError(f"B: {fname} expects B of {aname}'s dtype {A.dtype}, got {B.dtype}")
    if B.device != A.device:
        raise ValueError(f"B: expected a tensor on {aname}'s device {A.device}, got {B.device}")
    if not isinstance(left, bool):
        raise TypeError(f"left: expected a bool, got {type(left).__name__}")


def raise_singular(info: torch.Tensor, fname: str, message: str) -> None:
    """One host sync: torch's LinAlgError for the first batch element with ``info > 0``;
    ``message`` is formatted with ``j``, that element's info. (The check is one reduction and
    one read; ``nonzero``, which costs a second launch and an allocation a call, runs only to
    name the element.)"""
    if not bool(info.any()):
        return
    bad = info.reshape(-1).nonzero()
    b = int(bad[0, 0])
    j = int(info.reshape(-1)[b])
    where = f"(Batch element {b}): " if info.dim() > 0 else ""
    raise torch.linalg.LinAlgError(f"{fname}: {where}" + message.format(j=j))


def kernel_strides(t: torch.Tensor) -> tuple:
    """Strides of the (batch, rows, cols) dimensions of ``t`` in units of one real component."""
    s = t.stride()[-3:] if t.dim() >= 3 else (0,) * (3 - t.dim()) + t.stride()
    return tuple(2 * x for x in s) if t.is_complex() else tuple(s)


#: The kernels index inside one matrix in int32 (real components): a strided view whose
#: matrices span this many elements or more (a batch-innermost layout of many matrices) is
#: copied compact first (a knob for tests).
SPAN_COPY = 2**30


def flat3(t: torch.Tensor, batch: tuple, tail: tuple) -> torch.Tensor:
    """``t`` broadcast to ``batch + tail`` as a 3-D (batch, rows, cols) view; a copy only where
    the broadcast batch dimensions cannot be collapsed into one stride, or where one matrix's
    offsets would pass int32 (:data:`SPAN_COPY`)."""
    t = t.expand(*batch, *tail)
    nb = 1
    for s in batch:
        nb *= s
    try:
        out = t.view(nb, *tail)
    except RuntimeError:
        out = t.reshape(nb, *tail)
    if (len(tail) == 2 and not out.is_contiguous()
            and (tail[0] - 1) * abs(out.stride(1)) + (tail[1] - 1) * abs(out.stride(2)) >= SPAN_COPY):
        out = out.contiguous()
    return out


# ---------------------------------------------------------------------------- complex arithmetic

@triton.jit
def _ld(ptr, offs, mask, CPLX: tl.constexpr):
    """(re, im) of the elements at ``offs`` (zero where masked)."""
    re = tl.load(ptr + offs, mask=mask, other=0.0)
    if CPLX:
        im = tl.load(ptr + offs + 1, mask=mask, other=0.0)
        return re, im
    else:
        return re, re


@triton.jit
def _st(ptr, offs, re, im, mask, CPLX: tl.constexpr):
    tl.store(ptr + offs, re.to(ptr.dtype.element_ty), mask=mask)
    if CPLX:
        tl.store(ptr + offs + 1, im.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mul(ar, ai, br, bi, CPLX: tl.constexpr):
    if CPLX:
        return ar * br - ai * bi, ar * bi + ai * br
    else:
        p = ar * br
        return p, p


@triton.jit
def _div(ar, ai, br, bi, CPLX: tl.constexpr):
    """a / b; complex by Smith's method (no overflow of |b|^2)."""
    if CPLX:
        big = tl.abs(br) >= tl.abs(bi)
        safe_br = tl.where(big, br, 1.0)
        safe_bi = tl.where(big, 1.0, bi)
        t = tl.where(big, bi / safe_br, br / safe_bi)
        d = tl.where(big, br + bi * t, br * t + bi)
        re = tl.where(big, ar + ai * t, ar * t + ai) / d
        im = tl.where(big, ai - ar * t, ai * t - ar) / d
        return re, im
    else:
        q = ar / br
        return q, q


@triton.jit
def _abs1(re, im, CPLX: tl.constexpr):
    """|re| + |im|: the magnitude LAPACK's i?amax compares when it picks a pivot."""
    if CPLX:
        return tl.abs(re) + tl.abs(im)
    else:
        return tl.abs(re)


@triton.jit
def _pick(re, im, sel, axis: tl.constexpr, CPLX: tl.constexpr):
    """Sum over ``axis`` of the entries where ``sel``: one row/column/element of a tile."""
    r = tl.sum(tl.where(sel, re, 0.0), axis=axis)
    if CPLX:
        return r, tl.sum(tl.where(sel, im, 0.0), axis=axis)
    else:
        return r, r


@triton.jit
def _sum2(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def _sum3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@triton.jit
def _sum4(a0, a1, a2, a3, b0, b1, b2, b3):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3


@triton.jit
def _max2(a0, a1, b0, b1):
    return tl.maximum(a0, b0), tl.maximum(a1, b1)


@triton.jit
def _pick2(re, im, sel_a, sel_b, axis: tl.constexpr, CPLX: tl.constexpr):
    """Two picks (see :func:`_pick`) in one multi-operand reduction: (a_re, a_im, b_re, b_im)."""
    if not FUSED_REDUCE:
        ar, ai = _pick(re, im, sel_a, axis, CPLX)
        br, bi = _pick(re, im, sel_b, axis, CPLX)
        return ar, ai, br, bi
    if CPLX:
        return tl.reduce((tl.where(sel_a, re, 0.0), tl.where(sel_a, im, 0.0), tl.where(sel_b, re, 0.0),
                          tl.where(sel_b, im, 0.0)), axis, _sum4)
    else:
        a, b = tl.reduce((tl.where(sel_a, re, 0.0), tl.where(sel_b, re, 0.0)), axis, _sum2)
        return a, a, b, b


@triton.jit
def _sums3(x, y, z, axis: tl.constexpr):
    """(sum x, sum y, sum z) along ``axis``, fused where FUSED_REDUCE."""
    if FUSED_REDUCE:
        return tl.reduce((x, y, z), axis, _sum3)
    else:
        return tl.sum(x, axis=axis), tl.sum(y, axis=axis), tl.sum(z, axis=axis)


@triton.jit
def _maxs2(x, y, axis: tl.constexpr):
    if FUSED_REDUCE:
        return tl.reduce((x, y), axis, _max2)
    else:
        return tl.max(x, axis=axis), tl.max(y, axis=axis)


@triton.jit
def _tf32_round(x):
    """float32 ``x`` rounded to TF32's 10 stored mantissa bits (to nearest, ties away from zero, as
    ``cvt.rna.tf32.f32``), by its bits: the interpreter runs it too."""
    b = x.to(tl.uint32, bitcast=True)
    return ((b + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def _dot(a, b, PREC: tl.constexpr):
    """a @ b in the operands' dtype: float32 products as ``PREC`` ("ieee": exact float32 on
    the FMA units; "tf32x3": three TF32 tensor-core passes, float32-level accuracy; "tf32x3s": the
    same three, split here: Triton's form adds a NaN fixup and a zero accumulator's sum, 96 compares,
    32 selects and 32 adds a 64x64 tile on sm_90 (the lu_solve sweep's chunk step 808 -> 590
    instructions offline); its result is NaN rather than inf where an operand is infinite),
    float64 as is. ``PREC`` has no default: Triton 3.6 does not turn a helper's default string into a
    constexpr (the sm_90 compile fails where the interpreter runs). (The three products chained into
    a caller's accumulator lost accuracy: 3.8e-7 -> 5.9e-6 relative in a complex64 lu_solve on an
    H100, the tensor cores' accumulation truncating each partial sum at the accumulator's magnitude.)"""
    if a.dtype == tl.float32:
        if PREC == "tf32x3s":
            ab = _tf32_round(a)
            bb = _tf32_round(b)
            p = tl.dot(a - ab, bb, input_precision="tf32")  # (the small terms first, as Triton's)
            p = tl.dot(ab, b - bb, p, input_precision="tf32")
            return tl.dot(ab, bb, p, input_precision="tf32")
        else:
            return tl.dot(a, b, input_precision=PREC)
    else:
        return tl.dot(a, b)


@triton.jit
def _cdot(ar, ai, br, bi, CPLX: tl.constexpr, PREC: tl.constexpr):
    """a @ b for 2-D (complex) tiles."""
    if CPLX:
        return _dot(ar, br, PREC) - _dot(ai, bi, PREC), _dot(ar, bi, PREC) + _dot(ai, br, PREC)
    else:
        p = _dot(ar, br, PREC)
        return p, p


@triton.jit
def _dot_sub(accr, acci, ar, ai, br, bi, CPLX: tl.constexpr, PREC: tl.constexpr):
    """acc - a @ b for 2-D tiles (complex: four real products)."""
    if CPLX:
        accr = accr - _dot(ar, br, PREC) + _dot(ai, bi, PREC)
        acci = acci - _dot(ar, bi, PREC) - _dot(ai, br, PREC)
        return accr, acci
    else:
        accr = accr - _dot(ar, br, PREC)
        return accr, accr


# ---------------------------------------------------------------------------- triangular solve

@triton.jit
def _tri_solve(tr, ti, xr, xi, nr, LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr,
               CPLX: tl.constexpr):
    """Solve ``M X = X0`` for tiles M (BB, R, R) and X0 (BB, R, K), in registers, by forward
    (``LOWER``) or backward substitution over rows 0..nr-1; only M's lower (upper) triangle is
    read, its diagonal taken as one if ``UNIT``, its entries conjugated if ``CONJ``. Rows
    >= nr are padding: never divided by, never meaningful."""
    r = tl.arange(0, tr.shape[1])
    r2 = r[None, :]
    r3 = r[None, :, None]
    c3 = r[None, None, :]
    for s in range(0, nr):
        if LOWER:
            j = s
        else:
            j = nr - 1 - s
        mr, mi = _pick(tr, ti, c3 == j, 2, CPLX)  # column j of M: (BB, R)
        if CPLX:
            if CONJ:
                mi = -mi
        xjr, xji = _pick(xr, xi, r3 == j, 1, CPLX)  # row j of X: (BB, K)
        if not UNIT:
            dr, di = _pick(mr, mi, r2 == j, 1, CPLX)
            xjr, xji = _div(xjr, xji, dr[:, None], di[:, None], CPLX)
        xr, xi = _eliminate(xr, xi, mr, mi, xjr, xji, j, r3, LOWER, CPLX)
    return xr, xi


@triton.jit
def _eliminate(xr, xi, mr, mi, xjr, xji, j, r3, LOWER: tl.constexpr, CPLX: tl.constexpr):
    """One substitution step of X (BB, R, K): row j becomes ``xj`` (solved), the rows after it
    (below for LOWER, above otherwise) lose column j of M (``m``, (BB, R)) times ``xj``."""
    if LOWER:
        after = r3 > j
    else:
        after = r3 < j
    pr, pi = _mul(mr[:, :, None], mi[:, :, None], xjr[:, None, :], xji[:, None, :], CPLX)
    xr = tl.where(after, xr - pr, tl.where(r3 == j, xjr[:, None, :], xr))
    if CPLX:
        xi = tl.where(after, xi - pi, tl.where(r3 == j, xji[:, None, :], xi))
    else:
        xi = xr
    return xr, xi


@triton.jit
def pow2_scale(amax):
    """(scale, unscale): powers of two with amax * scale in [1, 2), exact in both directions
    (built from the exponent bits; zero and denormal amax count as the smallest normal)."""
    if amax.dtype == tl.float64:
        e = (amax.to(tl.int64, bitcast=True) >> 52) & 0x7FF
        e = tl.minimum(tl.maximum(e, 1), 2045)
        scale = ((2046 - e) << 52).to(tl.float64, bitcast=True)
        unscale = (e << 52).to(tl.float64, bitcast=True)
    else:
        e = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
        e = tl.minimum(tl.maximum(e, 1), 253)
        scale = ((254 - e) << 23).to(tl.float32, bitcast=True)
        unscale = (e << 23).to(tl.float32, bitcast=True)
    return scale, unscale
