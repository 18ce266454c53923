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
from .._core.autocast import autocast_fp32, cast
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from .._core.shapes import broadcast_shape
from .elementwise import _index4, _layout

# Tuning knobs (``scripts/tune_dropout_loss.py`` sweeps them on a GPU). A reducing program
# loops over tiles of RED_BLOCK elements (16 a thread on 8 warps: two 16-byte loads of each
# bf16 operand, four of float32, in flight, ~48 registers); PROGRAMS_PER_SM of them share a
# multiprocessor. MAP_BLOCK is the tile of the elementwise launches ('none' forward, backward).
RED_BLOCK, RED_WARPS = (256, 4) if INTERPRET else (4096, 8)
PROGRAMS_PER_SM = 4
#: H200, 'none' 8192x4096 bf16 forward + backward in graphs: 4096 / 8 warps 92.5 us, 8192 / 8 94.4,
#: 16384 / 8 99.1 (bench/results/tuning/2026-11-30-mse_none_tiles-9741908.log).
MAP_BLOCK, MAP_WARPS = (256, 4) if INTERPRET else (4096, 8)
#: The backward walks the tiles from the last, to meet the forward's last reads in L2.
BWD_REVERSE = True
#: The most programs that write a partial sum (the second launch adds them in one block).
MAX_PARTIALS = 1024
#: Tests set this to run the 64-bit index path on small inputs.
FORCE_INT64 = False
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
        t = tl.cast(t, tl.int64)  # (the interpreter's loop index is a Python int)
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
                    STRIDED: tl.constexpr, IDX64: tl.constexpr, REVERSE: tl.constexpr = False):
    """da = 2 * scale * (a - b) * g, db = -da (g: a scalar for mean/sum, a tensor for none).
    REVERSE: tiles from the last (the programs start about in launch order, so the first ones
    read what the forward read last, while it is still in L2)."""
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    offs = _tile(pid, BLOCK, IDX64)
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
        flat = [(0, 0, 0, 1)] * len(tensors)
        return shape, n, (1, 1, 1, n), flat, False, FORCE_INT64 or n + block >= 2**31
    views = torch.broadcast_tensors(*tensors)
    shape = views[0].shape
    lay = _layout(shape, *(v.stride() for v in views))
    if lay is None:
        return None
    sizes, strides = lay
    n = views[0].numel()
    span = max(sum((d - 1) * s for d, s in zip(sizes, st)) for st in strides)
    return shape, n, sizes, strides, True, FORCE_INT64 or n + block >= 2**31 or span >= 2**31


def _resident(block: int, warps: int, strided: bool, idx64: bool) -> int:
    """Reducing programs that fit on one multiprocessor at once (65536 registers), from a
    conservative estimate of the registers a thread (sm_90: 40-80 contiguous, 128 with the
    index math, 255 with it in int64). The grid is persistent: programs beyond this would
    run in a second wave and double the time."""
    regs = 255 if strided and idx64 else (2 if strided else 1) * (32 + 2 * block // (32 * warps))
    return max(1, 65536 // (min(regs, 255) * 32 * warps))


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
    per_sm = min(per_sm or PROGRAMS_PER_SM, _resident(block, warps, strided, idx64))
    progs = min(tiles, per_sm * num_sms(a.device), MAX_PARTIALS)
    part = workspace(a.device, "mse_loss.partials", progs, torch.float32)  # (the sum launch reads it next)
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
                                STRIDED=strided, IDX64=idx64, REVERSE=BWD_REVERSE, num_warps=warps)
    return da, db


# ---------------------------------------------------------------------------- reference

def _acc(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def reference_mse_loss(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """PyTorch path: ``(input - target)**2`` in float32 (float64 for float64), reduced."""
    out_dtype = torch.result_type(input, target)
    acc = _acc(out_dtype)
    d = input.to(acc) - target.to(acc)
    sq = d * d
    if reduction == "mean":
        sq = sq.mean()
    elif reduction == "sum":
        sq = sq.sum()
    return sq.to(out_dtype)


def reference_mse_loss_backward(grad, input, target, reduction, need_input=True, need_target=True):
    """PyTorch path of the backward: (grad_input, grad_target) in the broadcast shape."""
    acc = _acc(torch.result_type(input, target))
    d = input.to(acc) - target.to(acc)
    scale = 2.0 / max(d.numel(), 1) if reduction == "mean" else 2.0
    da = d * grad.to(acc) * scale
    return (da.to(input.dtype) if need_input else None,
            (-da).to(target.dtype) if need_target else None)


# ---------------------------------------------------------------------------- op

def _fake(a: torch.Tensor, b: torch.Tensor, reduction: str) -> torch.Tensor:
    shape = broadcast_shape(a.shape, b.shape) if reduction == "none" else ()
    return torch.empty(shape, dtype=torch.result_type(a, b), device=a.device)


def _bwd_fake(grad, a, b, reduction, need_a, need_b):
    shape = broadcast_shape(a.shape, b.shape)
    return (torch.empty(shape if need_a else 0, dtype=a.dtype, device=a.device),
            torch.empty(shape if need_b else 0, dtype=b.dtype, device=b.device))


@register_op("mse_loss_backward", fake=_bwd_fake)
def _mse_bwd_op(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, reduction: str, need_a: bool,
                need_b: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_input, grad_target) in the broadcast shape; an empty tensor where not needed."""
    res = None
    if _kernel_ok(a, b, torch.result_type(a, b)) and grad.dtype in KERNEL_DTYPES and grad.device == a.device:
        res = _backward_kernel(a, b, grad, reduction, need_a, need_b)
    if res is None:
        res = reference_mse_loss_backward(grad, a, b, reduction, need_a, need_b)
    da, db = res
    return (da if need_a else a.new_empty(0), db if need_b else b.new_empty(0))


def _to_inputs(da, db, a, b, need_a, need_b):
    """The broadcast-shape gradients summed back to input's and target's shapes (None where
    not needed)."""
    da = (da.sum_to_size(a.shape) if da.shape != a.shape else da) if need_a else None
    db = (db.sum_to_size(b.shape) if db.shape != b.shape else db) if need_b else None
    return da, db


def _grads(grad, a, b, reduction, need_a, need_b):
    """Gradients of input and target in their own shapes (None where not needed)."""
    return _to_inputs(*_mse_bwd_op(grad, a, b, reduction, need_a, need_b), a, b, need_a, need_b)


def _setup(ctx, inputs, output):
    a, b, reduction = inputs
    ctx.reduction = reduction
    ctx.save_for_backward(a, b)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    return (*_grads(grad, a, b, ctx.reduction, ctx.needs_input_grad[0], ctx.needs_input_grad[1]), None)


def _loss(a: torch.Tensor, b: torch.Tensor, reduction: str) -> torch.Tensor:
    out_dtype = torch.result_type(a, b)
    out = None
    if _kernel_ok(a, b, out_dtype) and (reduction == "none" or a.numel() and b.numel()):
        out = _forward(a, b, reduction, out_dtype)
    return reference_mse_loss(a, b, reduction) if out is None else out


@register_op("mse_loss", fake=_fake, backward=_backward, setup_context=_setup)
def _mse_op(a: torch.Tensor, b: torch.Tensor, reduction: str) -> torch.Tensor:
    return _loss(a, b, reduction)


class _MSELoss(torch.autograd.Function):
    """The eager autograd path: the same kernels as the registered op, without the
    dispatcher's and custom-op autograd's host cost (tens of microseconds a call); calls
    like an earlier one replay its launches (:mod:`fastpath._core.memo`)."""

    @staticmethod
    def forward(ctx, a, b, reduction):
        _setup(ctx, (a, b, reduction), None)
        return _MEMO_FWD.call(lambda: _loss(a, b, reduction), (a, b), (reduction,))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        need = ctx.needs_input_grad[:2]
        res = _MEMO_BWD.call(lambda: _mse_bwd_op(grad, a, b, ctx.reduction, *need), (grad, a, b),
                             (ctx.reduction, *need))
        return (*_to_inputs(*res, a, b, *need), None)


_MEMO_FWD, _MEMO_BWD = LaunchMemo(), LaunchMemo()


def _eager(*ts: torch.Tensor) -> bool:
    """Plain tensors outside torch.compile take the autograd.Function path."""
    return all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in ts) and not torch.compiler.is_compiling()


def mse_loss(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean squared error, as ``torch.nn.functional.mse_loss``.

    Parameters
    ----------
    input, target : floating-point tensors broadcastable to each other (as in PyTorch, a
        size mismatch warns and broadcasts), any layout (read in place, never copied).
        float16 / bfloat16 / float32 (also mixed) take the kernels; float64 and other
        devices take the reference path.
    reduction : ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns
    -------
    The loss in ``torch.result_type(input, target)``: a 0-d tensor for ``mean`` / ``sum``
    (the mean of an empty input is NaN, as PyTorch), else a new contiguous tensor of the
    broadcast shape. Arithmetic and accumulation are float32. Autograd gives
    ``2 (input - target) grad / n`` (``n`` only for ``mean``) for input and its negation for
    target, summed over broadcast dimensions; ``torch.compile(fullgraph=True)`` is supported.

    Raises
    ------
    TypeError naming ``input`` / ``target`` for a non-tensor or non-floating tensor;
    ValueError naming ``reduction`` for another value, ``target`` for shapes that do not
    broadcast or another device.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.loss import mse_loss
    >>> mse_loss(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    for name, t in (("input", input), ("target", target)):
        check_tensor(name, t)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name}: mse_loss needs a floating-point tensor, got {t.dtype}")
    if autocast_fp32("mse_loss", input) or autocast_fp32("mse_loss", target):  # as autocast runs F.mse_loss:
        input, target = cast(torch.float32, input, target)  # in float32
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction: expected one of 'none', 'mean', 'sum', got {reduction!r}")
    if target.device != input.device:
        raise ValueError(f"target: expected a tensor on {input.device}, got {target.device}")
    if target.shape != input.shape:
        try:
            broadcast_shape(input.shape, target.shape)
        except RuntimeError:
            raise ValueError(f"target: shape {tuple(target.shape)} does not broadcast with input's "
                             f"{tuple(input.shape)}") from None
        if not torch.compiler.is_compiling():  # Dynamo cannot trace warnings.warn: eager only
            warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                          f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                          "Please ensure they have the same size.", stacklevel=2)
    eager = _eager(input, target)
    if torch.is_grad_enabled() and (input.requires_grad or target.requires_grad):
        if eager:
            return _MSELoss.apply(input, target, reduction)
    elif eager:  # no autograd (evaluation): the forward's launches replay, as the autograd path's do
        return _MEMO_FWD.call(lambda: _loss(input, target, reduction), (input, target), (reduction,))
    return _mse_op(input, target, reduction)


FAMILY = {"name": "loss", "ops": ["mse_loss"], "reason": triton_reason}
