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
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .elementwise import _index4, _layout

#: Rows of 8 elements per program.
ROWS = 256
_MASK32 = 0xFFFFFFFF
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key increments


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _keep_bits(r0, r1, r2, r3, t31, SHIFT: tl.constexpr):
    b = ((r0 >> 1).to(tl.int32, bitcast=True) >= t31).to(tl.int32) << SHIFT
    b |= ((r1 >> 1).to(tl.int32, bitcast=True) >= t31).to(tl.int32) << (SHIFT + 1)
    b |= ((r2 >> 1).to(tl.int32, bitcast=True) >= t31).to(tl.int32) << (SHIFT + 2)
    b |= ((r3 >> 1).to(tl.int32, bitcast=True) >= t31).to(tl.int32) << (SHIFT + 3)
    return b


@triton.jit
def _dropout_kernel(src_ptr, dst_ptr, bits_ptr, seed_ptr, n, D1, D2, D3, s0, s1, s2, s3, t31, scale,
                    ROWS: tl.constexpr, STRIDED: tl.constexpr, FROM_BITS: tl.constexpr,
                    STORE_BITS: tl.constexpr):
    """dst = src * mask * scale over ``n`` elements, 8 per row. Forward (FROM_BITS=False):
    the mask comes from Philox (and is stored as bits if STORE_BITS); backward: from bits."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    row_ok = rows * 8 < n
    if FROM_BITS:
        byte = tl.load(bits_ptr + rows, mask=row_ok, other=0).to(tl.int32)
    else:
        seed = tl.load(seed_ptr)
        c = rows * 2
        zero = tl.zeros([ROWS], dtype=tl.uint32)
        a0, a1, a2, a3 = tl.philox(seed, (c & 0xFFFFFFFF).to(tl.uint32), (c >> 32).to(tl.uint32), zero, zero)
        c = c + 1
        b0, b1, b2, b3 = tl.philox(seed, (c & 0xFFFFFFFF).to(tl.uint32), (c >> 32).to(tl.uint32), zero, zero)
        byte = _keep_bits(a0, a1, a2, a3, t31, 0) | _keep_bits(b0, b1, b2, b3, t31, 4)
        if STORE_BITS:
            tl.store(bits_ptr + rows, byte.to(tl.uint8), mask=row_ok)
    cols = tl.arange(0, 8)
    offs = rows[:, None] * 8 + cols[None, :]
    mask = offs < n
    if STRIDED:
        i0, i1, i2, i3 = _index4(offs, D1, D2, D3)
        src = tl.load(src_ptr + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3, mask=mask, other=0.0)
    else:
        src = tl.load(src_ptr + offs, mask=mask, other=0.0)
    keep = ((byte[:, None] >> cols[None, :]) & 1) != 0
    out = src.to(tl.float32) * tl.where(keep, scale, 0.0)  # x * 0 keeps torch's NaN for dropped inf
    tl.store(dst_ptr + offs, out.to(dst_ptr.dtype.element_ty), mask=mask)


_KERNEL = Launcher(_dropout_kernel)


def _threshold(p: float) -> int:
    return min(int(round(p * 2**31)), 2**31 - 1)


def _scale(p: float) -> float:
    return 1.0 / (1.0 - p)


def _launch(src: torch.Tensor, p: float, seed: Optional[torch.Tensor], bits: Optional[torch.Tensor],
            store_bits: bool):
    """Forward (``bits`` None: from ``seed``, returns (dst, bits)) or backward (from ``bits``)."""
    lay = _layout(src.shape, src.stride())
    if lay is None:  # more than 4 dims after merging: one documented copy
        src = src.contiguous()
        lay = _layout(src.shape, src.stride())
    (_, D1, D2, D3), (st,) = lay
    n = src.numel()
    dst = alloc.empty(src.shape, dtype=src.dtype, device=src.device)
    from_bits = bits is not None
    if not from_bits:
        bits = alloc.empty(cdiv(n, 8) if store_bits else 0, dtype=torch.uint8, device=src.device)
    if n:
        rows = min(ROWS, next_pow2(cdiv(n, 8)))
        strided = not src.is_contiguous()
        _KERNEL[(cdiv(n, 8 * rows),)](
            src, dst, bits, seed if seed is not None else bits, n, D1, D2, D3, *st,
            _threshold(p), _scale(p), ROWS=rows, STRIDED=strided, FROM_BITS=from_bits,
            STORE_BITS=store_bits, num_warps=4)
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


@register_op("dropout", fake=_fake, backward=_backward, setup_context=_setup)
def _dropout_op(x: torch.Tensor, p: float, seed: torch.Tensor, store_bits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if x.dtype not in KERNEL_DTYPES or not use_triton(x):
        return reference_dropout(x, p, seed, store_bits)
    return _launch(x, p, seed, None, store_bits)


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
    return _dropout_op(input, p, seed, store_bits)[0]


FAMILY = {"name": "dropout", "ops": ["dropout"], "reason": triton_reason}
