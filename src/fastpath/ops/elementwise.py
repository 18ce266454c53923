"""Elementwise ops with PyTorch semantics: frexp, heaviside, unsigned comparisons and
min/max, take, and logspace.

Layout: every kernel reads its inputs through strides, so non-contiguous views and
broadcast operands (``torch.broadcast_tensors`` views, stride 0) are read in place,
without copies. On the host the broadcast shape is simplified (size-1 dimensions dropped,
dimensions that are contiguous with each other in every operand merged); the kernels
index up to :data:`MAX_DIMS` dimensions. A layout that still needs more dimensions takes
the reference path (documented per op). Outputs are new contiguous tensors.

Speed: the number of dims left after merging is a constexpr (NDIM), so contiguous operands
(one dim, stride 1) read at the flat index with no index arithmetic, and each extra dim
costs one division; index arithmetic is 32-bit unless an index or offset may reach 2**31
(IDX64). A program moves about :data:`BYTES_PER_PROGRAM` bytes whatever the dtypes (few,
fat programs: at 1024 elements per program, 65536 programs of 3-12 KB each cost ~185 us on
an H200 whatever the bytes); :data:`TUNED` holds measured (BLOCK, num_warps) per kernel
and dtype (``scripts/tune_elementwise.py``).

Integers that PyTorch stores unsigned (uint8/16/32/64) are handed to the kernels as
signed views of the same width and bit-cast to the unsigned Triton type after loading, so
comparisons are unsigned whatever Triton version maps the torch dtype.
"""
from __future__ import annotations

import math
import threading
from typing import Optional, Sequence

import torch

from .._core import alloc
from .._core.backend import tl, triton, triton_reason, needs_grad, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor, require_no_capture
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.readback import read_back
from .._core.registry import register_op
from .._core.shapes import broadcast_pair, broadcast_shape

#: Dimensions the kernels index after the host has simplified the layout.
MAX_DIMS = 4

# Tuning knobs (``scripts/tune_elementwise.py`` sweeps them on a GPU). A program handles
# BLOCK elements; by default BLOCK is the power of two at or below BYTES_PER_PROGRAM /
# (bytes read + written per element), clamped to [MIN_BLOCK, MAX_BLOCK], so narrow dtypes
# (uint8, bf16) move as many bytes per program as wide ones; num_warps is 4 up to 2048
# elements, else 8 (16 to 32 elements per thread: two to four 16-byte accesses).
BYTES_PER_PROGRAM = 32768
MIN_BLOCK, MAX_BLOCK = 1024, 8192
#: (kernel, input dtype) -> (BLOCK, num_warps), measured winners that override the rule
#: above. Kernels: "frexp", "heaviside", "cmp", "take".
#: Measured on the H200 (scripts/tune_elementwise.py, 64M elements, cold L2).
TUNED: dict = {("frexp", torch.float32): (1024, 8), ("frexp", torch.bfloat16): (1024, 4),
               ("cmp", torch.uint8): (4096, 4), ("cmp", torch.uint16): (2048, 4),
               ("cmp", torch.uint32): (2048, 8), ("cmp", torch.uint64): (512, 4)}

UNSIGNED_DTYPES = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
#: Unsigned dtypes whose comparisons and min/max PyTorch (2.13, CPU) does not implement.
_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)
_SIGNED_OF = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_BITS = {torch.uint8: 8, torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}

_CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "minimum", "maximum")


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _index4(offs, D1, D2, D3):
    """Row-major multi-index of flat ``offs`` (int64) in a (D0, D1, D2, D3) shape."""
    i3 = offs % D3
    r = offs // D3
    i2 = r % D2
    r = r // D2
    i1 = r % D1
    i0 = r // D1
    return i0, i1, i2, i3


@triton.jit
def _flat(BLOCK: tl.constexpr, IDX64: tl.constexpr):
    """This program's row-major flat indices: int32 unless IDX64 (the host sets it when an
    index or element offset may reach 2**31; 32-bit division is several times cheaper)."""
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _offsets(flat, D1, D2, D3, s0, s1, s2, s3, NDIM: tl.constexpr):
    """Element offsets of flat indices in a layout of NDIM trailing dims (sizes D*, strides
    s*): the index arithmetic of absent dims is skipped, so a contiguous operand (NDIM=1,
    stride 1, which Triton specialises) reads at ``flat`` itself, without any division."""
    if NDIM == 1:
        off = flat * s3
    elif NDIM == 2:
        off = (flat // D3) * s2 + (flat % D3) * s3
    elif NDIM == 3:
        r = flat // D3
        off = (r // D2) * s1 + (r % D2) * s2 + (flat % D3) * s3
    else:
        i0, i1, i2, i3 = _index4(flat, D1, D2, D3)
        off = i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3
    return off


@triton.jit
def _as_unsigned(x, BITS: tl.constexpr):
    if BITS == 8:
        y = x.to(tl.uint8, bitcast=True)
    elif BITS == 16:
        y = x.to(tl.uint16, bitcast=True)
    elif BITS == 32:
        y = x.to(tl.uint32, bitcast=True)
    else:
        y = x.to(tl.uint64, bitcast=True)
    return y


@triton.jit
def _frexp_kernel(x_ptr, m_ptr, e_ptr, n, D1, D2, D3, s0, s1, s2, s3, NDIM: tl.constexpr,
                  IDX64: tl.constexpr, BLOCK: tl.constexpr):
    """Through float32, exact for float32 / float16 / bfloat16 inputs (float64: the same on its
    own bits): a subnormal is scaled
    by 2**64 (an exact multiply that normalises it), then the exponent field is read and the
    mantissa's exponent field replaced by 0.5's. The mantissa has the input's significant bits,
    so it converts back exactly. Zeros, infinities, NaN: the input itself, exponent 0.
    (Normalising the mantissa field with integer shifts took ~64 instructions an element, bound
    bfloat16 by instruction issue at 74% of the copy bandwidth on the H200.)"""
    flat = _flat(BLOCK, IDX64)
    mask = flat < n
    x = tl.load(x_ptr + _offsets(flat, D1, D2, D3, s0, s1, s2, s3, NDIM), mask=mask, other=0.0)
    if x.dtype == tl.float64:  # float64's own fields: 11-bit exponent, 52-bit fraction
        xf = x
        SHIFT: tl.constexpr = 52
        EMAX: tl.constexpr = 0x7FF
        BIAS: tl.constexpr = 1022
        TINY: tl.constexpr = 2.2250738585072014e-308  # the smallest normal
        KEEP: tl.constexpr = 0x800FFFFFFFFFFFFF  # sign and fraction
        HALF: tl.constexpr = 0x3FE0000000000000  # 0.5's exponent field
        UINT: tl.constexpr = tl.uint64
    else:  # through float32
        if x.dtype == tl.bfloat16:  # its bits are float32's upper half (Triton's interpreter converts
            # bfloat16 subnormals inexactly; this shift is exact everywhere)
            xf = (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
        else:
            xf = x.to(tl.float32)
        SHIFT: tl.constexpr = 23
        EMAX: tl.constexpr = 0xFF
        BIAS: tl.constexpr = 126
        TINY: tl.constexpr = 1.1754943508222875e-38
        KEEP: tl.constexpr = 0x807FFFFF
        HALF: tl.constexpr = 0x3F000000
        UINT: tl.constexpr = tl.uint32
    sub = tl.abs(xf) < TINY  # subnormals (zeros too): scaled by 2**64 first
    bits = tl.where(sub, xf * 18446744073709551616.0, xf).to(UINT, bitcast=True)
    e = ((bits >> SHIFT) & EMAX).to(tl.int32)
    mant = ((bits & KEEP) | HALF).to(xf.dtype, bitcast=True)
    special = (e == EMAX) | (xf == 0.0)  # inf, NaN, +-0: mantissa x, exponent 0
    tl.store(m_ptr + flat, tl.where(special, x, mant.to(x.dtype)), mask=mask)
    tl.store(e_ptr + flat, tl.where(special, 0, e - tl.where(sub, BIAS + 64, BIAS)), mask=mask)


@triton.jit
def _heaviside_kernel(x_ptr, v_ptr, o_ptr, n, D1, D2, D3, sx0, sx1, sx2, sx3,
                      sv0, sv1, sv2, sv3, NDIM: tl.constexpr, IDX64: tl.constexpr,
                      BLOCK: tl.constexpr):
    flat = _flat(BLOCK, IDX64)
    mask = flat < n
    x = tl.load(x_ptr + _offsets(flat, D1, D2, D3, sx0, sx1, sx2, sx3, NDIM), mask=mask, other=0.0)
    v = tl.load(v_ptr + _offsets(flat, D1, D2, D3, sv0, sv1, sv2, sv3, NDIM), mask=mask, other=0.0)
    # torch: input == 0 ? values : (input > 0); NaN input gives 0
    xf = x.to(tl.float32)  # NaN compares false (also in the interpreter's bfloat16)
    y = tl.where(xf == 0, v, tl.where(xf > 0, 1.0, 0.0).to(v.dtype))
    tl.store(o_ptr + flat, y, mask=mask)


@triton.jit
def _ucmp_kernel(a_ptr, b_ptr, o_ptr, n, D1, D2, D3, sa0, sa1, sa2, sa3,
                 sb0, sb1, sb2, sb3, OP: tl.constexpr, BITS: tl.constexpr, NDIM: tl.constexpr,
                 IDX64: tl.constexpr, BLOCK: tl.constexpr):
    flat = _flat(BLOCK, IDX64)
    mask = flat < n
    xa = tl.load(a_ptr + _offsets(flat, D1, D2, D3, sa0, sa1, sa2, sa3, NDIM), mask=mask, other=0)
    xb = tl.load(b_ptr + _offsets(flat, D1, D2, D3, sb0, sb1, sb2, sb3, NDIM), mask=mask, other=0)
    a = _as_unsigned(xa, BITS)  # the loads are of signed views
    b = _as_unsigned(xb, BITS)
    if OP == 0:
        r = a == b
    elif OP == 1:
        r = a != b
    elif OP == 2:
        r = a < b
    elif OP == 3:
        r = a <= b
    elif OP == 4:
        r = a > b
    elif OP == 5:
        r = a >= b
    elif OP == 6:
        r = tl.where(a < b, xa, xb)  # the bits of the smaller, in the signed view's type
    else:
        r = tl.where(a > b, xa, xb)
    tl.store(o_ptr + flat, r, mask=mask)


@triton.jit
def _take_kernel(x_ptr, i_ptr, o_ptr, flag_ptr, n, numel, X1, X2, X3, sx0, sx1, sx2, sx3,
                 D1, D2, D3, si0, si1, si2, si3, NDIM_X: tl.constexpr, NDIM_I: tl.constexpr,
                 CHECK: tl.constexpr, IDX64: tl.constexpr, BLOCK: tl.constexpr):
    flat = _flat(BLOCK, IDX64)
    mask = flat < n
    idx = tl.load(i_ptr + _offsets(flat, D1, D2, D3, si0, si1, si2, si3, NDIM_I), mask=mask, other=0)
    idx = tl.where(idx < 0, idx + numel, idx)
    ok = (idx >= 0) & (idx < numel)
    if CHECK:  # one flag word: only lanes with a bad index store (no atomics, no traffic)
        tl.store(flag_ptr + tl.zeros_like(flat), tl.full(flat.shape, 1, tl.int32), mask=mask & ~ok)
    idx = tl.where(ok, idx, 0)  # clamp: never read out of bounds
    if not IDX64:
        idx = idx.to(tl.int32)  # < numel < 2**31 here
    v = tl.load(x_ptr + _offsets(idx, X1, X2, X3, sx0, sx1, sx2, sx3, NDIM_X), mask=mask & ok, other=0)
    tl.store(o_ptr + flat, v, mask=mask)


_FREXP, _HEAVI, _UCMP, _TAKE = (Launcher(_frexp_kernel), Launcher(_heaviside_kernel),
                               Launcher(_ucmp_kernel), Launcher(_take_kernel))


# ---------------------------------------------------------------------------- launch helpers

def _layout(shape: Sequence[int], *strides: Sequence[int]):
    """Simplify a broadcast layout: drop size-1 dims, merge dims contiguous with each other
    in every operand. Returns ``(sizes[4], [strides[4] per operand])`` or None when more
    than :data:`MAX_DIMS` dimensions remain."""
    dims = []
    for i, size in enumerate(shape):
        if size == 1:
            continue
        sts = [st[i] for st in strides]
        if dims and all(p == c * size for p, c in zip(dims[-1][1], sts)):
            dims[-1] = (dims[-1][0] * size, sts)
        else:
            dims.append((size, sts))
    if len(dims) > MAX_DIMS:
        return None
    dims = [(1, [0] * len(strides))] * (MAX_DIMS - len(dims)) + dims
    sizes = [d[0] for d in dims]
    return sizes, [[d[1][k] for d in dims] for k in range(len(strides))]


def _ndim(sizes: list) -> int:
    """Dims a simplified layout really has (only its padding dims have size 1), at least 1."""
    return MAX_DIMS - sizes.count(1) or 1


def _needs_int64(n: int, block: int, sizes: list, *strides: list) -> bool:
    """True when a flat index (``n`` rounded up to blocks) or the largest element offset of
    an operand with these strides (non-negative, as torch's) may not fit in int32."""
    if n + block >= 2**31:
        return True
    d0, d1, d2, d3 = sizes
    return any((d0 - 1) * s0 + (d1 - 1) * s1 + (d2 - 1) * s2 + (d3 - 1) * s3 >= 2**31
               for s0, s1, s2, s3 in strides)


def _config(kernel: str, dtype: torch.dtype, bytes_per_elem: int, n: int):
    """(grid, BLOCK, num_warps) for ``n`` elements: :data:`TUNED`, else the bytes rule."""
    tuned = TUNED.get((kernel, dtype))
    if tuned is not None:
        block, warps = tuned
    else:
        block = 1 << max(0, (BYTES_PER_PROGRAM // bytes_per_elem).bit_length() - 1)
        block = max(MIN_BLOCK, min(MAX_BLOCK, block))
        warps = 4 if block <= 2048 else 8
    block = min(block, next_pow2(n))
    warps = min(warps, max(1, block // 128))  # tiny inputs: fewer idle warps
    return (cdiv(n, block),), block, warps


def _signed_view(t: torch.Tensor) -> torch.Tensor:
    """The same bytes as a signed integer tensor of the same width (strides unchanged)."""
    return t.view(_SIGNED_OF[t.element_size()])


# ---------------------------------------------------------------------------- frexp

def reference_frexp(input: torch.Tensor):
    """PyTorch path: ``torch.frexp`` (mantissa in ``input.dtype``, exponent int32)."""
    return torch.frexp(input)


def _frexp_fake(x: torch.Tensor):
    return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty(
        x.shape, dtype=torch.int32, device=x.device)


@register_op("frexp", fake=_frexp_fake)
def _frexp_op(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ok = x.dtype in KERNEL_DTYPES or x.dtype == torch.float64
    lay = _layout(x.shape, x.stride()) if ok and use_triton(x) else None
    if lay is None:
        return reference_frexp(x)
    m = alloc.empty(x.shape, dtype=x.dtype, device=x.device)
    e = alloc.empty(x.shape, dtype=torch.int32, device=x.device)
    n = x.numel()
    if n:
        sizes, (st,) = lay
        grid, block, warps = _config("frexp", x.dtype, 2 * x.element_size() + 4, n)
        _FREXP[grid](x, m, e, n, *sizes[1:], *st, NDIM=_ndim(sizes),
                     IDX64=_needs_int64(n, block, sizes, st), BLOCK=block, num_warps=warps)
    return m, e


def frexp(input: torch.Tensor):
    """Decompose ``input`` into mantissa and exponent, as ``torch.frexp``.

    ``input == mantissa * 2**exponent`` with ``0.5 <= |mantissa| < 1``, computed exactly by
    integer manipulation of the bits (subnormals are normalised). ``+-0``, ``+-inf`` and
    NaN give ``mantissa = input`` and ``exponent = 0``, as PyTorch.

    Parameters
    ----------
    input : Tensor of any shape and layout (strided views are read in place), float16 /
        bfloat16 / float32 / float64 on the kernel; other devices take the reference path.

    Returns
    -------
    (mantissa, exponent): new contiguous tensors of ``input``'s shape, ``input.dtype`` and int32.

    Raises
    ------
    TypeError if ``input`` is not a floating-point tensor.

    Example
    -------
    >>> import torch, fastpath.ops.elementwise as ew
    >>> ew.frexp(torch.tensor([8.0, -0.75]))
    torch.return_types.frexp(
    mantissa=tensor([ 0.5000, -0.7500]),
    exponent=tensor([4, 0], dtype=torch.int32))
    """
    return _MEMO_FREXP.call(lambda: _checked_frexp(input), (input,))


def _checked_frexp(input):
    check_tensor("input", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"input: frexp needs a floating-point tensor, got {input.dtype}")
    if needs_grad(input):  # the kernel has no backward: torch.frexp, which autograd records
        return reference_frexp(input)
    return _frexp_op(input)


# ---------------------------------------------------------------------------- heaviside

def reference_heaviside(input: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """PyTorch path: ``torch.heaviside``."""
    return torch.heaviside(input, values)


def _heaviside_fake(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.empty(broadcast_shape(x.shape, v.shape), dtype=x.dtype, device=x.device)


@register_op("heaviside", fake=_heaviside_fake)
def _heaviside_op(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if x.dtype not in KERNEL_DTYPES or x.dtype != v.dtype or x.device != v.device or not use_triton(x):
        return reference_heaviside(x, v)
    xb, vb = broadcast_pair(x, v)
    lay = _layout(xb.shape, xb.stride(), vb.stride())
    if lay is None:
        return reference_heaviside(x, v)
    out = alloc.empty(xb.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    if n:
        sizes, (sx, sv) = lay
        grid, block, warps = _config("heaviside", x.dtype, 3 * x.element_size(), n)
        _HEAVI[grid](xb, vb, out, n, *sizes[1:], *sx, *sv, NDIM=_ndim(sizes),
                     IDX64=_needs_int64(n, block, sizes, sx, sv), BLOCK=block,
                     num_warps=warps)
    return out


def heaviside(input: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Heaviside step function, as ``torch.heaviside``: ``values`` where ``input == 0``,
    1 where ``input > 0``, else 0 (NaN input gives 0, as PyTorch).

    Parameters
    ----------
    input, values : tensors of one dtype, broadcastable to each other. float16 / bfloat16 /
        float32 take the kernel (strided and broadcast operands read in place); other dtypes
        and devices take the reference path.

    Returns
    -------
    A new contiguous tensor of the broadcast shape and ``input.dtype``.

    Raises
    ------
    TypeError naming ``values`` if the dtypes differ; ValueError if the shapes do not
    broadcast.

    Example
    -------
    >>> import torch, fastpath.ops.elementwise as ew
    >>> ew.heaviside(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([0.5]))
    tensor([0.0000, 0.5000, 1.0000])
    """
    return _MEMO_HEAVISIDE.call(lambda: _checked_heaviside(input, values), (input, values))


def _checked_heaviside(input, values):
    check_tensor("input", input)
    check_tensor("values", values)
    if values.dtype != input.dtype:
        raise TypeError(f"values: heaviside needs the dtype of input ({input.dtype}), got {values.dtype}")
    if input.dtype.is_complex:
        raise NotImplementedError("input: heaviside supports real dtypes only, got complex")
    try:
        broadcast_shape(input.shape, values.shape)
    except RuntimeError:
        raise ValueError(f"values: shape {tuple(values.shape)} does not broadcast with input's "
                         f"{tuple(input.shape)}") from None
    if needs_grad(input, values):  # torch.heaviside: autograd records it (and says it has no derivative)
        return reference_heaviside(input, values)
    return _heaviside_op(input, values)


# ---------------------------------------------------------------------------- unsigned compare

def reference_compare(op: str, input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """PyTorch path for :data:`_CMP_OPS`. PyTorch 2.13 on CPU lacks ``lt/le/gt/ge/minimum/
    maximum`` for uint16/32/64; for those the sign bit of signed views is flipped, which maps
    unsigned order onto signed order, and the signed op is applied."""
    fn = getattr(torch, op)
    if input.dtype not in _WIDE_UNSIGNED or op in ("eq", "ne"):
        return fn(input, other)
    bits = _BITS[input.dtype]
    flip = -(1 << (bits - 1))  # the sign bit of the signed type
    a = _signed_view(input) ^ flip
    b = _signed_view(other) ^ flip
    r = fn(a, b)
    if op in ("minimum", "maximum"):
        r = (r ^ flip).view(input.dtype)
    return r


def _cmp_fake(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    dtype = a.dtype if op in ("minimum", "maximum") else torch.bool
    return torch.empty(broadcast_shape(a.shape, b.shape), dtype=dtype, device=a.device)


@register_op("ucompare", fake=_cmp_fake)
def _cmp_op(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype not in UNSIGNED_DTYPES or a.dtype != b.dtype or a.device != b.device or not use_triton(a):
        return reference_compare(op, a, b)
    ab, bb = broadcast_pair(a, b)
    lay = _layout(ab.shape, ab.stride(), bb.stride())
    if lay is None:
        return reference_compare(op, a, b)
    code = _CMP_OPS.index(op)
    out = alloc.empty(ab.shape, dtype=a.dtype if code >= 6 else torch.bool, device=a.device)
    n = out.numel()
    if n:
        sizes, (sa, sb) = lay
        grid, block, warps = _config("cmp", a.dtype, 2 * a.element_size() + out.element_size(), n)
        o = _signed_view(out) if code >= 6 else out
        _UCMP[grid](_signed_view(ab), _signed_view(bb), o, n, *sizes[1:], *sa, *sb,
                    OP=code, BITS=_BITS[a.dtype], NDIM=_ndim(sizes),
                    IDX64=_needs_int64(n, block, sizes, sa, sb), BLOCK=block,
                    num_warps=warps)
    return out


def _compare(op: str, input, other) -> torch.Tensor:
    check_tensor("input", input)
    if isinstance(other, bool) or not isinstance(other, (int, torch.Tensor)):
        raise TypeError(f"other: {op} expected a torch.Tensor or an int, got {type(other).__name__}")
    if isinstance(other, int):
        if input.dtype in UNSIGNED_DTYPES:
            hi = 1 << _BITS[input.dtype]
            if not 0 <= other < hi:
                raise ValueError(f"other: {other} is outside the range of {input.dtype} [0, {hi - 1}]")
            # Python ints above the signed range: build the tensor from its signed bit pattern
            signed = other - hi if other >= hi // 2 else other
            other = torch.tensor(signed, dtype=_SIGNED_OF[input.element_size()],
                                 device=input.device).view(input.dtype)
        else:
            return getattr(torch, op)(input, other)
    if input.device != other.device and other.dim() > 0 and input.dim() > 0:
        raise ValueError(f"other: expected a tensor on {input.device}, got {other.device}")
    wide = input.dtype in _WIDE_UNSIGNED or other.dtype in _WIDE_UNSIGNED
    if wide and input.dtype != other.dtype:
        raise NotImplementedError(
            f"other: {op} on uint16/uint32/uint64 needs both operands of one dtype, got "
            f"{input.dtype} and {other.dtype}")
    try:
        broadcast_shape(input.shape, other.shape)
    except RuntimeError:
        raise ValueError(f"other: shape {tuple(other.shape)} does not broadcast with input's "
                         f"{tuple(input.shape)}") from None
    if input.dtype in UNSIGNED_DTYPES and input.dtype == other.dtype:
        return _cmp_op(op, input, other)
    return getattr(torch, op)(input, other)  # other dtypes: PyTorch's own op and promotion


_CMP_DOC = """Elementwise ``{op}`` with the semantics of ``torch.{op}``, correct for unsigned integers.

    Parameters
    ----------
    input : Tensor. uint8 / uint16 / uint32 / uint64 take the kernel, which loads the values
        as unsigned (so ``2**63 + 5 > 3`` for uint64); other dtypes go to ``torch.{op}``.
    other : Tensor of ``input``'s dtype broadcastable with it, or a Python int in the range
        of that dtype (for unsigned inputs; values above the signed range are fine).

    Returns
    -------
    A new contiguous tensor of the broadcast shape: {ret}.

    Raises
    ------
    TypeError for a non-tensor ``input`` or ``other``; ValueError naming ``other`` for an
    int out of range or shapes that do not broadcast; NotImplementedError for uint16/32/64
    mixed with another dtype.

    Example
    -------
    >>> import torch, fastpath.ops.elementwise as ew
    >>> a = torch.tensor([2**63 + 5, 3], dtype=torch.uint64)
    >>> ew.{op}(a, torch.tensor([3, 2**63 + 5], dtype=torch.uint64))
    {example}
    """


#: The docstring example's result per op (2**63 + 5 against 3, then 3 against 2**63 + 5).
_CMP_EXAMPLE = {"eq": "tensor([False, False])", "ne": "tensor([True, True])", "lt": "tensor([False,  True])",
                "le": "tensor([False,  True])", "gt": "tensor([ True, False])", "ge": "tensor([ True, False])",
                "minimum": "tensor([3, 3], dtype=torch.uint64)",
                "maximum": "tensor([9223372036854775813, 9223372036854775813], dtype=torch.uint64)"}


def _make_cmp(op: str):
    def fn(input: torch.Tensor, other) -> torch.Tensor:
        if type(other) is not torch.Tensor:  # (an int becomes a new tensor: nothing to replay)
            return _compare(op, input, other)
        return _MEMO_CMP.call(lambda: _compare(op, input, other), (input, other), (op,))
    fn.__name__ = fn.__qualname__ = op
    ret = "``input.dtype``" if op in ("minimum", "maximum") else "bool"
    fn.__doc__ = _CMP_DOC.format(op=op, ret=ret, example=_CMP_EXAMPLE[op])
    return fn


#: Eager calls like an earlier one replay its launch (fastpath._core.memo).
_MEMO_FREXP, _MEMO_HEAVISIDE, _MEMO_CMP = LaunchMemo(), LaunchMemo(), LaunchMemo()
eq, ne, lt, le, gt, ge = (_make_cmp(o) for o in ("eq", "ne", "lt", "le", "gt", "ge"))
minimum, maximum = _make_cmp("minimum"), _make_cmp("maximum")


# ---------------------------------------------------------------------------- take

def reference_take(input: torch.Tensor, index: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """PyTorch path: ``torch.take`` (raises IndexError for an index out of range; with
    ``validate=False`` such indices give 0 instead, as the kernel does). Dtypes PyTorch's
    take lacks (uint16/32/64) are moved as signed integers of the same width."""
    if not validate and input.numel() > 0:
        n = input.numel()
        ok = (index >= -n) & (index < n)
        got = reference_take(input, torch.where(ok, index, 0))
        return torch.where(ok, got, torch.zeros((), dtype=got.dtype, device=got.device))
    if input.dtype in _WIDE_UNSIGNED:
        return torch.take(_signed_view(input), index).view(input.dtype)
    return torch.take(input, index)


def _take_fake(x: torch.Tensor, i: torch.Tensor, validate: bool) -> torch.Tensor:
    return torch.empty(i.shape, dtype=x.dtype, device=x.device)


@register_op("take", fake=_take_fake)
def _take_op(x: torch.Tensor, i: torch.Tensor, validate: bool) -> torch.Tensor:
    if x.dtype.is_complex or x.device != i.device or not use_triton(x):
        return reference_take(x, i, validate)
    lx = _layout(x.shape, x.stride())
    li = _layout(i.shape, i.stride())
    if lx is None or li is None:
        return reference_take(x, i, validate)
    out = alloc.empty(i.shape, dtype=x.dtype, device=x.device)
    n = i.numel()
    if n:
        if validate:
            require_no_capture(x.device, "take", "validate=True reads an out-of-range flag back to the host",
                               "pass validate=False (out-of-range indices then give 0, unchecked)")
        (xs, (sx,)), (isz, (si,)) = lx, li
        grid, block, warps = _config("take", x.dtype, 8 + 2 * x.element_size(), n)
        flag = _take_flag(x.device) if validate else i  # i: never written (CHECK=False)
        xv = x.view(torch.uint8) if x.dtype == torch.bool else _signed_view(x) if not x.is_floating_point() else x
        ov = out.view(xv.dtype)
        _TAKE[grid](xv, i, ov, flag, n, x.numel(), *xs[1:], *sx, *isz[1:], *si,
                    NDIM_X=_ndim(xs), NDIM_I=_ndim(isz), CHECK=validate,
                    IDX64=_needs_int64(n, block, isz, si) or _needs_int64(x.numel(), 0, xs, sx),
                    BLOCK=block, num_warps=warps)
        if validate and read_back(flag[:1])[0]:  # the one host sync, one word; validate=False skips it
            flag.zero_()  # the word is zero between calls: no fill launch on the good path
            raise IndexError(f"index: out of range for input of {x.numel()} elements "
                             f"(valid: [{-x.numel()}, {x.numel() - 1}])")
    return out


def _take_flag(device: torch.device) -> torch.Tensor:
    """take's error word for this device, stream and host thread (so concurrent callers
    never read each other's flag). Zero between calls: only a failing call sets it, and it
    clears it before raising."""
    return workspace(device, f"take_flag/{threading.get_ident()}", 1, torch.int32, zeroed=True)


def take(input: torch.Tensor, index: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """``input`` treated as 1-D (row-major, whatever its strides) indexed by ``index``, as
    ``torch.take``. Negative indices count from the end.

    Parameters
    ----------
    input : Tensor of any shape, layout and (non-complex) dtype; read in place.
    index : int64 tensor of any shape and layout.
    validate : with True (default), an index outside ``[-numel, numel)`` raises IndexError as
        in PyTorch. The kernel flags such indices in a device word and the launcher reads it
        once after the launch: one host<->device sync (the word is kept per device, stream
        and host thread and is zero between calls, so no fill is launched). With False there
        is no sync and no flag (the call can be captured in a CUDA graph): out-of-range
        indices are never read out of bounds (the kernel masks them) and give 0 (False for
        bool) in the output, unchecked.

    Returns
    -------
    A new contiguous tensor of ``index``'s shape and ``input``'s dtype.

    Raises
    ------
    TypeError naming ``index`` if it is not int64; IndexError naming ``index`` for an index
    out of range, or any index into an empty ``input``; RuntimeError for ``validate=True``
    inside a CUDA graph capture (the flag's read cannot be captured: pass False there).

    Example
    -------
    >>> import torch, fastpath.ops.elementwise as ew
    >>> ew.take(torch.tensor([[4, 3], [5, 6]]), torch.tensor([0, -1]))
    tensor([4, 6])
    """
    check_tensor("input", input)
    check_tensor("index", index, dtypes=(torch.int64,))
    if input.numel() == 0 and index.numel() > 0:
        raise IndexError("index: cannot take from an empty input")
    if index.device != input.device and index.dim() > 0:
        raise ValueError(f"index: expected a tensor on {input.device}, got {index.device}")
    if needs_grad(input):  # the kernel has no backward: torch's take, which autograd records
        return reference_take(input, index, bool(validate))
    return _take_op(input, index, bool(validate))


# ---------------------------------------------------------------------------- logspace

def reference_logspace(start: float, end: float, steps: int, base: float = 10.0,
                       dtype: Optional[torch.dtype] = None, device=None) -> torch.Tensor:
    """``torch.logspace`` computed as PyTorch's CPU kernel does, on any device.

    Floating dtypes: ``start``/``end`` are first rounded to ``dtype``; ``step = (end - start)
    / (steps - 1)`` in float64 (the difference taken in ``dtype``); the first half is
    ``base ** (start + step*i)``, the second half ``base ** (end - step*(steps-1-i))`` in
    float64 ``pow``, then rounded to ``dtype``. Integer dtypes: ``start``/``end`` truncated to
    the integer type, ``base`` rounded to float32, the same ``pow`` in float64, then truncated
    toward zero. ``steps == 1`` gives ``base ** start``.
    """
    dtype = dtype or torch.get_default_dtype()
    device = torch.device(device) if device is not None else torch.device("cpu")
    if steps == 0:
        return torch.empty(0, dtype=dtype, device=device)
    if steps == 1:
        vals = [math.pow(float(base), float(start))]
    else:
        if dtype.is_floating_point:
            s, e, step = _float_exponents(start, end, steps, dtype)
            b = float(base)
        else:
            s, e = int(start), int(end)
            step = float(e - s) / (steps - 1)
            b = float(torch.tensor(float(base), dtype=torch.float32))
        half = steps // 2
        vals = [_pow(b, s + step * i) if i < half else _pow(b, e - step * (steps - i - 1))
                for i in range(steps)]
    if dtype.is_floating_point:
        out = torch.tensor(vals, dtype=torch.float64).to(dtype)
    else:
        out = torch.tensor([_trunc(v) for v in vals], dtype=torch.float64).to(dtype)
    return out.to(device)


#: Steps from which a logspace of float32 / float16 / bfloat16 on a Triton device is computed
#: by :func:`_logspace_kernel` (below: on the host, where the Python loop costs ~0.3 us a step).
LOGSPACE_KERNEL_STEPS = 256
_LOGSPACE_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _f64(bits):
    """The float64 whose bit pattern is the integer ``bits`` (an int32 where it is small)."""
    return tl.cast(bits, tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def _split(a):
    """Veltkamp's split of a float64 into two halves of 26 bits (exact, no FMA needed)."""
    c = a * 134217729.0
    hi = c - (c - a)
    return hi, a - hi


@triton.jit
def _pow2i(k):
    """2.0 ** k for int64 ``k`` in [-1022, 1023] (the exponent field)."""
    return ((k + 1023) << 52).to(tl.float64, bitcast=True)


@triton.jit
def _logspace_kernel(out_ptr, n, half, s_bits, e_bits, step_bits, lhi_bits, llo_bits, BLOCK: tl.constexpr,
                     BF16: tl.constexpr):
    """out[i] = base ** x_i with x_i = s + step * i below ``half``, else e - step * (n - 1 - i)
    (float64, as PyTorch's CPU kernel), the power as exp2(x * log2(base)): the product exact
    (Dekker's two-product on Veltkamp halves, log2(base) as a double-double), its integer
    part k taken out, exp2 of the rest (|f| <= 1/2), times 2 ** k in two exact factors;
    within ~2 float64 ulps of the true power, then rounded to float32 (and from there to the
    output dtype, as torch converts float64; BF16: the output as int16 bits, rounded to nearest
    even by integer arithmetic, which Triton's interpreter would truncate). float64 scalars
    arrive as int64 bit patterns."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    s, e, step = _f64(s_bits), _f64(e_bits), _f64(step_bits)
    lhi, llo = _f64(lhi_bits), _f64(llo_bits)
    x = tl.where(i < half, s + step * i.to(tl.float64), e - step * (n - 1 - i).to(tl.float64))
    p = x * lhi
    xh, xl = _split(x)
    lh, ll = _split(lhi)
    err = ((xh * lh - p) + xh * ll + xl * lh) + xl * ll + x * llo  # x * log2(base) = p + err
    p = tl.minimum(tl.maximum(p, -4096.0), 4096.0)  # beyond: 0 or inf whatever the rest
    kf = tl.floor(p + 0.5)
    r = tl.exp2((p - kf) + err)
    k = kf.to(tl.int64)
    k1 = k >> 1
    k2 = k - k1
    v = r * _pow2i(tl.minimum(tl.maximum(k1, -1022), 1023)) * _pow2i(tl.minimum(tl.maximum(k2, -1022), 1023))
    f = v.to(tl.float32)
    if BF16:  # (v >= 0: a positive base)
        b = f.to(tl.int32, bitcast=True)
        tl.store(out_ptr + i, ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).to(tl.int16), mask=i < n)
    else:
        tl.store(out_ptr + i, f.to(out_ptr.dtype.element_ty), mask=i < n)


_LOGSPACE = Launcher(_logspace_kernel)


def _bits(v: float) -> int:
    import struct
    return struct.unpack("<q", struct.pack("<d", v))[0]


def _log2_dd(b: float):
    """log2(b) as a double-double (hi, lo), from 50-digit decimal arithmetic."""
    import decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        d = decimal.Decimal(b).ln() / decimal.Decimal(2).ln()
        hi = float(d)
        return hi, float(d - decimal.Decimal(hi))


def _logspace_kernel_path(start, end, steps, base, dtype, device) -> Optional[torch.Tensor]:
    """The kernel's result, or None where the host path serves (other dtypes, few steps, a
    base or exponents outside what the kernel handles: base <= 0, 1 or not finite)."""
    if (dtype not in _LOGSPACE_KERNEL_DTYPES or steps < max(2, LOGSPACE_KERNEL_STEPS)
            or triton_reason(device) is not None or not (math.isfinite(base) and base > 0 and base != 1)):
        return None
    s, e, step = _float_exponents(start, end, steps, dtype)
    if not all(math.isfinite(v) for v in (s, e, step)):
        return None
    lhi, llo = _log2_dd(float(base))
    out = alloc.empty(steps, dtype=dtype, device=device)
    block = 1024
    bf16 = dtype == torch.bfloat16
    _LOGSPACE[(cdiv(steps, block),)](out.view(torch.int16) if bf16 else out, steps, steps // 2, _bits(s), _bits(e),
                                     _bits(step), _bits(lhi), _bits(llo), BLOCK=block, BF16=bf16,
                                     enable_fp_fusion=False, num_warps=4)
    return out


def _float_exponents(start, end, steps: int, dtype):
    """(start, end, step) of a floating logspace as PyTorch's CPU kernel forms them: the ends
    rounded to ``dtype``, their difference taken in ``dtype``, divided in float64."""
    ts, te = torch.tensor(float(start), dtype=dtype), torch.tensor(float(end), dtype=dtype)
    return float(ts), float(te), float(te - ts) / (steps - 1)


def _pow(b: float, x: float) -> float:
    try:
        return math.pow(b, x)
    except OverflowError:
        return math.inf
    except ValueError:  # negative base, non-integer exponent: C pow gives NaN
        return math.nan


def _trunc(v: float) -> float:
    return float(math.trunc(v)) if math.isfinite(v) else v


def logspace(start: float, end: float, steps: int, base: float = 10.0,
             dtype: Optional[torch.dtype] = None, device=None) -> torch.Tensor:
    """``steps`` values from ``base**start`` to ``base**end``, evenly spaced in the exponent,
    as ``torch.logspace`` (bit-exact with PyTorch's CPU kernel, see :func:`reference_logspace`).

    A factory without tensor inputs. float32 / float16 / bfloat16 outputs of at least
    :data:`LOGSPACE_KERNEL_STEPS` values on a device Triton serves come from
    :func:`_logspace_kernel` (the power within ~2 float64 ulps, so the rounded output equals
    the CPU kernel's except where the true power lies within a few float64 ulps of a rounding
    boundary of the output dtype: about 1 value in 10^8); other calls are computed on the
    host in float64 (C ``pow``, as PyTorch's CPU kernel, bit-exact; float64 outputs and
    integer dtypes always) and copied to ``device`` once.

    Parameters
    ----------
    start, end : exponents (Python numbers).
    steps : number of values, ``>= 0``.
    base : the base (default 10).
    dtype : output dtype (default ``torch.get_default_dtype()``); integer dtypes truncate.
    device : output device (default CPU, as PyTorch).

    Raises
    ------
    ValueError naming ``steps`` if it is negative; TypeError naming the argument for a
    non-number ``start``/``end``/``base`` or a non-int ``steps``; NotImplementedError naming
    ``dtype`` for complex or bool.

    Example
    -------
    >>> import fastpath.ops.elementwise as ew
    >>> ew.logspace(0, 3, 4)
    tensor([   1.,   10.,  100., 1000.])
    """
    for name, val in (("start", start), ("end", end), ("base", base)):
        if isinstance(val, torch.Tensor) and val.dim() == 0:
            val = val.item()
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise TypeError(f"{name}: expected a real number, got {type(val).__name__}")
    start, end, base = (v.item() if isinstance(v, torch.Tensor) else v for v in (start, end, base))
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise TypeError(f"steps: expected an int, got {type(steps).__name__}")
    if steps < 0:
        raise ValueError(f"steps: must be non-negative, got {steps}")
    if dtype is not None and (dtype.is_complex or dtype == torch.bool):
        raise NotImplementedError(f"dtype: logspace supports real floating and integer dtypes, got {dtype}")
    dev = torch.device(device) if device is not None else torch.device("cpu")
    out = _logspace_kernel_path(start, end, steps, base, dtype or torch.get_default_dtype(), dev)
    return reference_logspace(start, end, steps, base, dtype, device) if out is None else out


FAMILY = {"name": "elementwise",
          "ops": ["frexp", "heaviside", "eq", "ne", "lt", "le", "gt", "ge", "minimum", "maximum",
                  "take", "logspace"],
          "reason": triton_reason}
