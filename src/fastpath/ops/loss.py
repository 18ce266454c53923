"""mse_loss: forward and backward in one pass each over the (broadcast) inputs.

Contiguous operands of one shape (the common case) are read at their flat index with
16-byte vector loads; other layouts (strided views, broadcast operands with stride 0, see
:mod:`.elementwise`) are read in place through their strides, so a broadcast target is
never materialised. Arithmetic is float32. ``mean`` / ``sum`` reduce deterministically:
each of a fixed number of programs (:data:`PROGRAMS_PER_SM` a multiprocessor) sums its
tiles in float32 and writes one partial; a second one-program launch adds the partials in a
fixed order and scales by ``1/n``. No host sync, so the loss can be captured in a CUDA
graph. Eager autograd goes through a ``torch.autograd.Function`` (a few microseconds of
host time); compiled graphs use the registered ops.

Passes over memory (the floor): forward reads input and target (and writes the loss map
for ``none``); backward reads input, target (and the output gradient for ``none``) and
writes the gradient(s). Storing ``2 (input - target)`` in the forward would not save a
pass: the backward would read it and write the gradient, the same bytes as reading the two
operands.
"""
from __future__ import annotations

import warnings
from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .elementwise import _index4, _layout

# Tuning knobs (``scripts/tune_dropout_loss.py`` sweeps them on a GPU). A reducing program
# loops over tiles of RED_BLOCK elements (32 a thread on 8 warps: four 16-byte loads of each
# bf16 operand in flight); MAP_BLOCK is the tile of the elementwise launches ('none'
# forward, backward).
RED_BLOCK, RED_WARPS = (256, 4) if INTERPRET else (8192, 8)
PROGRAMS_PER_SM = 4
MAP_BLOCK, MAP_WARPS = (256, 4) if INTERPRET else (4096, 8)
#: The most programs that write a partial sum (the second launch adds them in one block).
MAX_PARTIALS = 1024
_REDUCTIONS = ("none", "mean", "sum")


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _offs(flat, i0, i1, i2, i3, s0, s1, s2, s3, STRIDED: tl.constexpr):
    if STRIDED:
        return i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3
    return flat


@triton.jit
def _tile(t, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    if IDX64:
        t = t.to(tl.int64)
    return t * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3, STRIDED: tl.constexpr):
    """(a - b) in float32 at flat indices ``offs``, and the multi-index (zeros unless STRIDED)."""
    if STRIDED:
        i0, i1, i2, i3 = _index4(offs, D1, D2, D3)
    else:
        i0, i1, i2, i3 = offs, offs, offs, offs  # unused
    a = tl.load(a_ptr + _offs(offs, i0, i1, i2, i3, sa0, sa1, sa2, sa3, STRIDED), mask=mask, other=0.0)
    b = tl.load(b_ptr + _offs(offs, i0, i1, i2, i3, sb0, sb1, sb2, sb3, STRIDED), mask=mask, other=0.0)
    return a.to(tl.float32) - b.to(tl.float32), i0, i1, i2, i3


@triton.jit
def _mse_fwd_kernel(a_ptr, b_ptr, out_ptr, n, num_tiles, D1, D2, D3, sa0, sa1, sa2, sa3,
                    sb0, sb1, sb2, sb3, BLOCK: tl.constexpr, REDUCE: tl.constexpr,
                    STRIDED: tl.constexpr, IDX64: tl.constexpr):
    """REDUCE=False: out[i] = (a - b)^2 per tile. REDUCE=True: program p sums tiles
    p, p + P, ... and writes out[p] (a float32 partial)."""
    pid = tl.program_id(0)
    if REDUCE:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for t in range(pid, num_tiles, tl.num_programs(0)):
            offs = _tile(t, BLOCK, IDX64)
            mask = offs < n
            d, _0, _1, _2, _3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3,
                                      sb0, sb1, sb2, sb3, STRIDED)
            acc += d * d
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))
    else:
        offs = _tile(pid, BLOCK, IDX64)
        mask = offs < n
        d, _0, _1, _2, _3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3,
                                  sb0, sb1, sb2, sb3, STRIDED)
        tl.store(out_ptr + offs, (d * d).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_kernel(part_ptr, out_ptr, P, scale, P_PAD: tl.constexpr):
    i = tl.arange(0, P_PAD)
    s = tl.sum(tl.load(part_ptr + i, mask=i < P, other=0.0), axis=0)
    tl.store(out_ptr, (s * scale).to(out_ptr.dtype.element_ty))


@triton.jit
def _mse_bwd_kernel(a_ptr, b_ptr, g_ptr, da_ptr, db_ptr, n, D1, D2, D3, sa0, sa1, sa2, sa3,
                    sb0, sb1, sb2, sb3, sg0, sg1, sg2, sg3, scale, BLOCK: tl.constexpr,
                    G_SCALAR: tl.constexpr, NEED_A: tl.constexpr, NEED_B: tl.constexpr,
                    STRIDED: tl.constexpr, IDX64: tl.constexpr):
    """da = 2 * scale * (a - b) * g, db = -da (g: a scalar for mean/sum, a tensor for none)."""
    offs = _tile(tl.program_id(0), BLOCK, IDX64)
    mask = offs < n
    if G_SCALAR:  # issued first: the scalar's latency overlaps the operands'
        g = tl.load(g_ptr).to(tl.float32)
    d, i0, i1, i2, i3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3,
                              sb0, sb1, sb2, sb3, STRIDED)
    if not G_SCALAR:
        g = tl.load(g_ptr + _offs(offs, i0, i1, i2, i3, sg0, sg1, sg2, sg3, STRIDED),
                    mask=mask, other=0.0).to(tl.float32)
    da = (2.0 * scale) * d * g
    if NEED_A:
        tl.store(da_ptr + offs, da.to(da_ptr.dtype.element_ty), mask=mask)
    if NEED_B:
        tl.store(db_ptr + offs, (-da).to(db_ptr.dtype.element_ty), mask=mask)


_FWD, _SUM, _BWD = Launcher(_mse_fwd_kernel), Launcher(_sum_kernel), Launcher(_mse_bwd_kernel)


def _kernel_ok(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> bool:
    return (a.dtype in KERNEL_DTYPES and b.dtype in KERNEL_DTYPES and out_dtype in KERNEL_DTYPES
            and a.device == b.device and use_triton(a))


def _plan(tensors, block: int):
    """(broadcast shape, n, sizes[4], strides per operand, STRIDED, IDX64), or None when the
    layout needs more than 4 dimensions. Contiguous operands of one shape skip the layout
    simplification and are read at the flat index."""
    shape = tensors[0].shape
    if all(t.shape == shape and t.is_contiguous() for t in tensors):
        n = tensors[0].numel()
        return shape, n, (1, 1, 1, n), [(0, 0, 0, 1)] * len(tensors), False, n + block >= 2**31
    views = torch.broadcast_tensors(*tensors)
    shape = views[0].shape
    lay = _layout(shape, *(v.stride() for v in views))
    if lay is None:
        return None
    sizes, strides = lay
    n = views[0].numel()
    span = max(sum((d - 1) * s for d, s in zip(sizes, st)) for st in strides)
    return shape, n, sizes, strides, True, n + block >= 2**31 or span >= 2**31


def _forward(a: torch.Tensor, b: torch.Tensor, reduction: str, out_dtype: torch.dtype,
             block: Optional[int] = None, num_warps: Optional[int] = None, per_sm: Optional[int] = None):
    """The kernel path, or None when the layout needs more than 4 dimensions. ``block``,
    ``num_warps``, ``per_sm`` override the module's knobs (the tune script uses them)."""
    red = reduction != "none"
    block = block or (RED_BLOCK if red else MAP_BLOCK)
    warps = num_warps or (RED_WARPS if red else MAP_WARPS)
    plan = _plan((a, b), block)
    if plan is None:
        return None
    shape, n, sizes, (sa, sb), strided, idx64 = plan
    block = max(64, min(block, next_pow2(n)))
    warps = max(1, min(warps, block // 256))
    tiles = cdiv(n, block)
    if not red:
        out = alloc.empty(shape, dtype=out_dtype, device=a.device)
        if n:
            _FWD[(tiles,)](a, b, out, n, tiles, *sizes[1:], *sa, *sb, BLOCK=block, REDUCE=False,
                           STRIDED=strided, IDX64=idx64, num_warps=warps)
        return out
    progs = min(tiles, (per_sm or PROGRAMS_PER_SM) * num_sms(a.device), MAX_PARTIALS)
    part = alloc.empty(progs, dtype=torch.float32, device=a.device)
    out = alloc.empty((), dtype=out_dtype, device=a.device)
    _FWD[(progs,)](a, b, part, n, tiles, *sizes[1:], *sa, *sb, BLOCK=block, REDUCE=True,
                   STRIDED=strided, IDX64=idx64, num_warps=warps)
    _SUM[(1,)](part, out, progs, 1.0 / n if reduction == "mean" else 1.0, P_PAD=max(2, next_pow2(progs)),
               num_warps=4)
    return out


def _backward_kernel(a, b, g, reduction, need_a, need_b, block: Optional[int] = None,
                     num_warps: Optional[int] = None):
    """(da, db) in the broadcast shape (None where not needed), or None for >4-D layouts."""
    scalar = reduction != "none"
    block = block or MAP_BLOCK
    plan = _plan((a, b) if scalar else (a, b, g), block)
    if plan is None:
        return None
    shape, n, sizes, strides, strided, idx64 = plan
    sa, sb, sg = strides if not scalar else (*strides, (0, 0, 0, 0))
    da = alloc.empty(shape, dtype=a.dtype, device=a.device) if need_a else None
    db = alloc.empty(shape, dtype=b.dtype, device=b.device) if need_b else None
    if n:
        block = max(64, min(block, next_pow2(n)))
        warps = max(1, min(num_warps or MAP_WARPS, block // 256))
        _BWD[(cdiv(n, block),)](a, b, g, da if need_a else db, db if need_b else da, n, *sizes[1:],
                                *sa, *sb, *sg, 1.0 / max(n, 1) if reduction == "mean" else 1.0,
                                BLOCK=block, G_SCALAR=scalar, NEED_A=need_a, NEED_B=need_b,
                                STRIDED=strided, IDX64=idx64, num_warps=warps)
    return da, db
