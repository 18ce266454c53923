"""dropout: one pass with a counter-based RNG (Philox 4x32-10), forward and backward.

Element ``i`` (row-major over the logical shape) is kept when ``r >> 1 >= round(p * 2**31)``
(probability ``1 - p`` to 2**-31), where ``r`` is lane ``i % 4`` of
``philox4x32_10(counter=(i // 4, 0, 0, 0), key=seed)``. The mask depends on the seed and the
shape only, not on block sizes or the device, and the plain-PyTorch reference computes the
same Philox, so both paths give bit-identical masks. ``seed`` (64 bits) is drawn from the
torch generator on the input's device as a device tensor that the kernel loads: no host
sync, and CUDA-graph capture draws a fresh seed on each replay. The forward stores the mask
as bits (one byte per 8 elements, 1/16 of a bf16 tensor) when autograd needs it; the
backward reads them (no RNG work in the backward).

Kernel: a program handles BLOCK elements as 1-D 16-byte vectors. Philox runs per *unit*
of 8 elements (16-bit dtypes: one vector, two counters, one mask byte) or 4 (float32: one
vector, one counter, half a byte), and its lanes are spread into element order with
``tl.join`` in registers: the RNG runs once per 4 elements, in the loads' layout, with no
shared-memory shuffles. Each round's two 32x32-bit products are 64-bit multiplies (one
IMAD.WIDE each), so Philox costs ~20 multiplies and ~20 LOP3 per 4 elements, about the HBM
time of a bf16 forward on an H200 (sm_90 SASS: ~350 instructions per 16 elements with the
mask bits). The backward is a streaming pass. Eager autograd goes through a
``torch.autograd.Function`` (host time of a few microseconds, against tens through the
custom-op autograd); compiled graphs use the registered ops.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from .elementwise import _index4, _layout

# Tuning knobs (``scripts/tune_dropout_loss.py`` sweeps them on a GPU): elements per program
# and warps per program of the forward (Philox) and backward (bit mask) launches. 2048
# elements on 4 warps is 16 a thread: two 16-byte vectors of bf16, four Philox chains in flight.
FWD_BLOCK, FWD_WARPS = 4096, 8  # H200: forward kernel 67 us on 64M bf16 (scripts/tune_dropout_loss.py)
BWD_BLOCK, BWD_WARPS = 4096, 8
#: Tests set this to run the 64-bit index path on small inputs.
FORCE_INT64 = False
_MASK32 = 0xFFFFFFFF
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key increments


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _philox10(k0, k1, c0, c1):
    """Philox4x32-10 (as ``tl.philox``) of counters (c0, c1, 0, 0) and key (k0, k1), with each
    round's two products as 32x32->64-bit multiplies: one IMAD.WIDE each instead of a high
    and a low half (half the multiply instructions of ``tl.philox``)."""
    c2 = tl.zeros_like(c0)
    c3 = tl.zeros_like(c0)
    for _ in tl.static_range(10):  # constants: _PHILOX_M, _PHILOX_W
        p0 = c0.to(tl.uint64) * 0xD2511F53
        p1 = c2.to(tl.uint64) * 0xCD9E8D57
        c0, c1, c2, c3 = ((p1 >> 32).to(tl.uint32) ^ c1 ^ k0, p1.to(tl.uint32),
                          (p0 >> 32).to(tl.uint32) ^ c3 ^ k1, p0.to(tl.uint32))
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def _keep4(k0, k1, c, thr, IDX64: tl.constexpr):
    """Keep flags of the 4 lanes of Philox counter ``c`` (``r >> 1 >= t31`` as ``r >= 2 t31``)."""
    if IDX64:
        lo, hi = (c & 0xFFFFFFFF).to(tl.uint32), (c >> 32).to(tl.uint32)
    else:
        lo, hi = c.to(tl.uint32), tl.zeros(c.shape, dtype=tl.uint32)  # counters below 2**31
    r0, r1, r2, r3 = _philox10(k0, k1, lo, hi)
    return r0 >= thr, r1 >= thr, r2 >= thr, r3 >= thr


@triton.jit
def _nibble(k0, k1, k2, k3):
    return k0.to(tl.int32) | (k1.to(tl.int32) << 1) | (k2.to(tl.int32) << 2) | (k3.to(tl.int32) << 3)


@triton.jit
def _factor(bits, j: tl.constexpr, scale):
    return tl.where(((bits >> j) & 1) != 0, scale, 0.0)


@triton.jit
def _spread4(v0, v1, v2, v3):
    """[N] lanes -> [4N] with element 4i + l = v_l[i] (a register-level interleave)."""
    return tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), [4 * v0.shape[0]])


@triton.jit
def _spread8(a0, a1, a2, a3, b0, b1, b2, b3):
    """[N] lanes of two counters -> [8N] with element 8i + l = a_l[i], 8i + 4 + l = b_l[i]."""
    return tl.reshape(tl.join(tl.join(tl.join(a0, b0), tl.join(a2, b2)),
                              tl.join(tl.join(a1, b1), tl.join(a3, b3))), [8 * a0.shape[0]])


@triton.jit
def _dropout_kernel(src_ptr, dst_ptr, bits_ptr, seed_ptr, n, D1, D2, D3, s0, s1, s2, s3, thr, scale,
                    BLOCK: tl.constexpr, UNIT: tl.constexpr, STRIDED: tl.constexpr, IDX64: tl.constexpr,
                    FROM_BITS: tl.constexpr, STORE_BITS: tl.constexpr):
    """dst = src * mask * scale over ``n`` elements. Forward (FROM_BITS=False): the mask comes
    from Philox (and is stored as bits if STORE_BITS); backward: from the bits. UNIT = elements
    per Philox unit (8: two counters and one mask byte; 4: one counter, half a byte)."""
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STRIDED:
        i0, i1, i2, i3 = _index4(offs, D1, D2, D3)
        src = tl.load(src_ptr + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3, mask=mask, other=0.0)
    else:
        src = tl.load(src_ptr + offs, mask=mask, other=0.0)
    NU: tl.constexpr = BLOCK // UNIT
    # one mask byte (or nibble) per thread and unit: keep the bit accesses in that layout
    u = tl.max_contiguous(pid * NU + tl.arange(0, NU), 1)
    u_ok = u * UNIT < n
    if FROM_BITS:
        if UNIT == 8:
            b = tl.load(bits_ptr + u, mask=u_ok, other=0).to(tl.int32)
            m = _spread8(_factor(b, 0, scale), _factor(b, 1, scale), _factor(b, 2, scale), _factor(b, 3, scale),
                         _factor(b, 4, scale), _factor(b, 5, scale), _factor(b, 6, scale), _factor(b, 7, scale))
        else:
            b = tl.load(bits_ptr + (u >> 1), mask=u_ok, other=0).to(tl.int32) >> ((u & 1) * 4).to(tl.int32)
            m = _spread4(_factor(b, 0, scale), _factor(b, 1, scale), _factor(b, 2, scale), _factor(b, 3, scale))
    else:
        seed = tl.load(seed_ptr)
        k0, k1 = (seed & 0xFFFFFFFF).to(tl.uint32), ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
        t = thr.to(tl.uint32)
        if UNIT == 8:
            a0, a1, a2, a3 = _keep4(k0, k1, u * 2, t, IDX64)
            b0, b1, b2, b3 = _keep4(k0, k1, u * 2 + 1, t, IDX64)
            m = _spread8(tl.where(a0, scale, 0.0), tl.where(a1, scale, 0.0), tl.where(a2, scale, 0.0),
                         tl.where(a3, scale, 0.0), tl.where(b0, scale, 0.0), tl.where(b1, scale, 0.0),
                         tl.where(b2, scale, 0.0), tl.where(b3, scale, 0.0))
            if STORE_BITS:
                byte = _nibble(a0, a1, a2, a3) | (_nibble(b0, b1, b2, b3) << 4)
                tl.store(bits_ptr + u, byte.to(tl.uint8), mask=u_ok)
        else:
            a0, a1, a2, a3 = _keep4(k0, k1, u, t, IDX64)
            m = _spread4(tl.where(a0, scale, 0.0), tl.where(a1, scale, 0.0), tl.where(a2, scale, 0.0),
                         tl.where(a3, scale, 0.0))
            if STORE_BITS:  # two units (adjacent threads) make a byte
                pair = tl.reshape(_nibble(a0, a1, a2, a3), [NU // 2, 2]) << (tl.arange(0, 2) * 4)[None, :]
                v = tl.max_contiguous(pid * (NU // 2) + tl.arange(0, NU // 2), 1)
                tl.store(bits_ptr + v, tl.sum(pair, axis=1).to(tl.uint8), mask=v * 8 < n)
    out = src.to(tl.float32) * m  # x * 0 keeps torch's NaN for dropped inf
    tl.store(dst_ptr + offs, out.to(dst_ptr.dtype.element_ty), mask=mask)


_KERNEL = Launcher(_dropout_kernel)


def _threshold(p: float) -> int:
    return min(int(round(p * 2**31)), 2**31 - 1)


def _scale(p: float) -> float:
    return 1.0 / (1.0 - p)


def _needs_int64(n: int, block: int, sizes, strides) -> bool:
    """A flat index (rounded up to blocks) or the largest element offset may pass int32."""
    return (FORCE_INT64 or n + block >= 2**31
            or sum((d - 1) * s for d, s in zip(sizes, strides)) >= 2**31)


def _launch(src: torch.Tensor, p: float, seed: Optional[torch.Tensor], bits: Optional[torch.Tensor],
            store_bits: bool, block: Optional[int] = None, num_warps: Optional[int] = None):
    """Forward (``bits`` None: from ``seed``, returns (dst, bits)) or backward (from ``bits``).
    ``block`` / ``num_warps`` override the module's knobs (the tune script uses them)."""
    n = src.numel()
    strided = not src.is_contiguous()
    if strided:
        lay = _layout(src.shape, src.stride())
        if lay is None:  # more than 4 dims after merging: one documented copy
            src, strided = src.contiguous(), False
    sizes, (st,) = lay if strided else ((1, 1, 1, n), ((0, 0, 0, 1),))
    dst = alloc.empty(src.shape, dtype=src.dtype, device=src.device)
    from_bits = bits is not None
    if not from_bits:
        bits = alloc.empty(cdiv(n, 8) if store_bits else 0, dtype=torch.uint8, device=src.device)
    if n:
        block = block or (BWD_BLOCK if from_bits else FWD_BLOCK)
        warps = num_warps or (BWD_WARPS if from_bits else FWD_WARPS)
        block = max(64, min(block, next_pow2(n)))
        warps = max(1, min(warps, block // 256))  # at least 8 elements a thread
        _KERNEL[(cdiv(n, block),)](
            src, dst, bits, seed if seed is not None else bits, n, *sizes[1:], *st,
            2 * _threshold(p), _scale(p), BLOCK=block, UNIT=8 if src.element_size() <= 2 else 4,
            STRIDED=strided, IDX64=_needs_int64(n, block, sizes, st),
            FROM_BITS=from_bits, STORE_BITS=store_bits, num_warps=warps)
    return dst, bits


# ---------------------------------------------------------------------------- reference

def _mulhilo(a: int, b: torch.Tensor):
    """(hi, lo) 32-bit halves of ``a * b`` for a 32-bit constant ``a`` and int64 ``b`` < 2**32,
    in int64 arithmetic without overflow (b split into 16-bit halves)."""
    t = a * (b & 0xFFFF)
    u = a * (b >> 16) + (t >> 16)
    return u >> 16, ((u & 0xFFFF) << 16) | (t & 0xFFFF)


def philox4x32(seed: torch.Tensor, c0: torch.Tensor, c1: torch.Tensor, rounds: int = 10):
    """Philox 4x32 in plain PyTorch (int64 tensors holding uint32 values): counter
    ``(c0, c1, 0, 0)``, key ``(seed & 0xFFFFFFFF, seed >> 32)`` as Triton's ``tl.philox``."""
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    c2 = c3 = torch.zeros_like(c0)
    for _ in range(rounds):
        hi0, lo0 = _mulhilo(_PHILOX_M[0], c0)
        hi1, lo1 = _mulhilo(_PHILOX_M[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _PHILOX_W[0]) & _MASK32, (k1 + _PHILOX_W[1]) & _MASK32
    return c0, c1, c2, c3


def dropout_bits(seed: torch.Tensor, n: int, p: float) -> torch.Tensor:
    """The keep mask of ``n`` elements as bits (uint8, ``ceil(n / 8)``; bit ``k`` of byte ``j``
    is element ``8 j + k``), in plain PyTorch: the oracle for the kernel's RNG."""
    rows = cdiv(n, 8)
    ctr = torch.arange(2 * rows, dtype=torch.int64, device=seed.device)
    lanes = philox4x32(seed.to(torch.int64), ctr & _MASK32, ctr >> 32)
    keep = torch.stack(lanes, dim=-1).reshape(rows, 8) >> 1 >= _threshold(p)  # lanes of 2j, then 2j+1
    weights = torch.tensor([1 << k for k in range(8)], dtype=torch.int32, device=seed.device)
    return (keep.to(torch.int32) * weights).sum(-1).to(torch.uint8)


def _expand_bits(bits: torch.Tensor, n: int) -> torch.Tensor:
    shifts = torch.arange(8, dtype=torch.int32, device=bits.device)
    return ((bits.to(torch.int32)[:, None] >> shifts) & 1).reshape(-1)[:n].bool()


def _apply(src: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
    acc = torch.float64 if src.dtype == torch.float64 else torch.float32
    m = torch.where(keep.reshape(src.shape), torch.tensor(_scale(p), dtype=acc, device=src.device),
                    torch.zeros((), dtype=acc, device=src.device))
    return (src.to(acc) * m).to(src.dtype)


def reference_dropout(input: torch.Tensor, p: float, seed: torch.Tensor, store_bits: bool = True):
    """PyTorch path: ``(output, bits)`` with the kernel's mask (bit-identical)."""
    bits = dropout_bits(seed, input.numel(), p)
    out = _apply(input, _expand_bits(bits, input.numel()), p)
    return out, bits if store_bits else bits[:0]


# ---------------------------------------------------------------------------- op

def draw_seed(device, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The Philox key of one dropout call: a 0-d int64 tensor on ``device`` drawn from
    ``generator`` (default: the device's default generator), without a host sync."""
    return torch.randint(-2**63, 2**63 - 1, (), dtype=torch.int64, device=device, generator=generator)


def _fake(x: torch.Tensor, p: float, seed: torch.Tensor, store_bits: bool):
    n = x.numel()
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty(cdiv(n, 8) if store_bits else 0, dtype=torch.uint8, device=x.device))


def _bwd_fake(grad: torch.Tensor, bits: torch.Tensor, p: float) -> torch.Tensor:
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


@register_op("dropout_backward", fake=_bwd_fake)
def _dropout_bwd_op(grad: torch.Tensor, bits: torch.Tensor, p: float) -> torch.Tensor:
    """grad * mask / (1 - p) from the forward's bits (an op, so that compiled graphs trace it)."""
    if use_triton(grad) and grad.dtype in KERNEL_DTYPES:
        return _launch(grad, p, None, bits, False)[0]
    return _apply(grad, _expand_bits(bits, grad.numel()), p)


def _setup(ctx, inputs, output):
    ctx.p = inputs[1]
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])


def _backward(ctx, grad, _grad_bits):
    (bits,) = ctx.saved_tensors
    return _dropout_bwd_op(grad, bits, ctx.p), None, None, None


def _forward(x: torch.Tensor, p: float, seed: torch.Tensor, store_bits: bool):
    if x.dtype not in KERNEL_DTYPES or not use_triton(x):
        return reference_dropout(x, p, seed, store_bits)
    return _launch(x, p, seed, None, store_bits)


@register_op("dropout", fake=_fake, backward=_backward, setup_context=_setup)
def _dropout_op(x: torch.Tensor, p: float, seed: torch.Tensor,
                store_bits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(x, p, seed, store_bits)


class _Dropout(torch.autograd.Function):
    """The eager autograd path: the same kernels as the registered op, without the
    dispatcher's and custom-op autograd's host cost (tens of microseconds a call, which
    left the GPU idle between the forward and the backward)."""

    @staticmethod
    def forward(ctx, x, p, seed):
        out, bits = _MEMO_FWD.call(lambda: _forward(x, p, seed, True), (x, seed), (p, True))
        ctx.p = p
        ctx.save_for_backward(bits)
        return out

    @staticmethod
    def backward(ctx, grad):
        (bits,) = ctx.saved_tensors
        return _MEMO_BWD.call(lambda: _dropout_bwd_op(grad, bits, ctx.p), (grad, bits), (ctx.p,)), None, None


#: Eager calls like an earlier one replay its launch (fastpath._core.memo).
_MEMO_FWD, _MEMO_BWD = LaunchMemo(), LaunchMemo()


def _eager(t: torch.Tensor) -> bool:
    """Plain tensors outside torch.compile take the autograd.Function path."""
    return type(t) in (torch.Tensor, torch.nn.Parameter) and not torch.compiler.is_compiling()


def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True,
            generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Randomly zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)``,
    as ``torch.nn.functional.dropout``, in one pass.

    Parameters
    ----------
    input : floating-point Tensor of any shape and layout (strided views are read in place).
        float16 / bfloat16 / float32 take the kernel; float64 and other devices take the
        reference path, which produces the same mask.
    p : drop probability in ``[0, 1]``.
    training : with False (or ``p == 0``, or an empty input) ``input`` itself is returned,
        as PyTorch does; ``p == 1`` gives ``input * 0``.
    generator : ``torch.Generator`` on ``input``'s device type (default: that device's default
        generator). One 64-bit seed is drawn from it per call, on the device (no host sync,
        CUDA-graph capturable): the same generator state gives the same mask on every path.

    Returns
    -------
    A new contiguous tensor of ``input``'s shape and dtype, ``input * mask / (1 - p)``
    computed in float32 (float64 for float64). A dropped element is ``x * 0`` (NaN for an
    infinite or NaN ``x``, as in PyTorch). Autograd: the backward is ``grad * mask / (1 - p)``
    from the stored bit mask; ``torch.compile(fullgraph=True)`` is supported.

    Raises
    ------
    TypeError naming ``input`` for a non-floating tensor, ``generator`` for a non-generator;
    ValueError naming ``p`` outside ``[0, 1]``, ``generator`` on another device type.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.dropout import dropout
    >>> g = torch.Generator().manual_seed(0)
    >>> y = dropout(torch.ones(8), 0.5, generator=g)  # entries 0.0 or 2.0
    """
    check_tensor("input", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"input: dropout needs a floating-point tensor, got {input.dtype}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p: dropout probability must be a number in [0, 1], got {p!r}")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != input.device.type:
            raise ValueError(f"generator: must be on {input.device.type} like input, got {generator.device}")
    p = float(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return input * 0
    seed = draw_seed(input.device, generator)
    store_bits = torch.is_grad_enabled() and input.requires_grad
    if store_bits and _eager(input):
        return _Dropout.apply(input, p, seed)
    if not store_bits:  # (autograd need not see it: plain tensors replay; the memo checks)
        return _MEMO_FWD.call(lambda: _dropout_op(input, p, seed, False), (input, seed), (p, False))[0]
    return _dropout_op(input, p, seed, store_bits)[0]


FAMILY = {"name": "dropout", "ops": ["dropout"], "reason": triton_reason}
