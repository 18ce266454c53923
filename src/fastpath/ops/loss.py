"""mse_loss: forward and backward in one pass each over the (broadcast) inputs.

The operands are read in place through their strides (broadcast operands with stride 0,
see :mod:`.elementwise`), so a broadcast target is never materialised. Arithmetic is
float32. ``mean`` / ``sum`` reduce deterministically: each of a fixed number of programs
sums its tiles in float32 and writes one partial; a second one-program launch adds the
partials in a fixed order and scales by ``1/n``. No host sync, so the loss can be captured
in a CUDA graph.
"""
from __future__ import annotations

import warnings

import torch

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .elementwise import _index4, _layout

#: Elements per tile, and the most programs that write a partial sum.
BLOCK = 256 if INTERPRET else 4096
MAX_PARTIALS = 1024
_REDUCTIONS = ("none", "mean", "sum")


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3):
    i0, i1, i2, i3 = _index4(offs, D1, D2, D3)
    a = tl.load(a_ptr + i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3, mask=mask, other=0.0)
    b = tl.load(b_ptr + i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3, mask=mask, other=0.0)
    return a.to(tl.float32) - b.to(tl.float32), i0, i1, i2, i3


@triton.jit
def _mse_fwd_kernel(a_ptr, b_ptr, out_ptr, n, num_tiles, D1, D2, D3, sa0, sa1, sa2, sa3,
                    sb0, sb1, sb2, sb3, BLOCK: tl.constexpr, REDUCE: tl.constexpr):
    """REDUCE=False: out[i] = (a - b)^2 per tile. REDUCE=True: program p sums tiles
    p, p + P, ... and writes out[p] (a float32 partial)."""
    pid = tl.program_id(0)
    if REDUCE:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for t in range(pid, num_tiles, tl.num_programs(0)):
            offs = tl.cast(t, tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            d, _0, _1, _2, _3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3)
            acc += d * d
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))
    else:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        d, _0, _1, _2, _3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3)
        tl.store(out_ptr + offs, (d * d).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_kernel(part_ptr, out_ptr, P, scale, P_PAD: tl.constexpr):
    i = tl.arange(0, P_PAD)
    s = tl.sum(tl.load(part_ptr + i, mask=i < P, other=0.0), axis=0)
    tl.store(out_ptr, (s * scale).to(out_ptr.dtype.element_ty))


@triton.jit
def _mse_bwd_kernel(a_ptr, b_ptr, g_ptr, da_ptr, db_ptr, n, D1, D2, D3, sa0, sa1, sa2, sa3,
                    sb0, sb1, sb2, sb3, sg0, sg1, sg2, sg3, scale, BLOCK: tl.constexpr,
                    G_SCALAR: tl.constexpr, NEED_A: tl.constexpr, NEED_B: tl.constexpr):
    """da = 2 * scale * (a - b) * g, db = -da (g: a scalar for mean/sum, a tensor for none)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    d, i0, i1, i2, i3 = _diff(a_ptr, b_ptr, offs, mask, D1, D2, D3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3)
    if G_SCALAR:
        g = tl.load(g_ptr).to(tl.float32)
    else:
        g = tl.load(g_ptr + i0 * sg0 + i1 * sg1 + i2 * sg2 + i3 * sg3, mask=mask, other=0.0).to(tl.float32)
    da = (2.0 * scale) * d * g
    if NEED_A:
        tl.store(da_ptr + offs, da.to(da_ptr.dtype.element_ty), mask=mask)
    if NEED_B:
        tl.store(db_ptr + offs, (-da).to(db_ptr.dtype.element_ty), mask=mask)


_FWD, _SUM, _BWD = Launcher(_mse_fwd_kernel), Launcher(_sum_kernel), Launcher(_mse_bwd_kernel)


def _kernel_ok(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> bool:
    return (a.dtype in KERNEL_DTYPES and b.dtype in KERNEL_DTYPES and out_dtype in KERNEL_DTYPES
            and a.device == b.device and use_triton(a))


def _forward(a: torch.Tensor, b: torch.Tensor, reduction: str, out_dtype: torch.dtype):
    """The kernel path, or None when the layout needs more than 4 dimensions."""
    ab, bb = torch.broadcast_tensors(a, b)
    lay = _layout(ab.shape, ab.stride(), bb.stride())
    if lay is None:
        return None
    (_, D1, D2, D3), (sa, sb) = lay
    n = ab.numel()
    tiles = cdiv(n, BLOCK)
    if reduction == "none":
        out = alloc.empty(ab.shape, dtype=out_dtype, device=a.device)
        if n:
            _FWD[(tiles,)](ab, bb, out, n, tiles, D1, D2, D3, *sa, *sb, BLOCK=BLOCK, REDUCE=False, num_warps=8)
        return out
    progs = min(tiles, 4 * num_sms(a.device), MAX_PARTIALS)
    part = alloc.empty(progs, dtype=torch.float32, device=a.device)
    out = alloc.empty((), dtype=out_dtype, device=a.device)
    _FWD[(progs,)](ab, bb, part, n, tiles, D1, D2, D3, *sa, *sb, BLOCK=BLOCK, REDUCE=True, num_warps=8)
    _SUM[(1,)](part, out, progs, 1.0 / n if reduction == "mean" else 1.0, P_PAD=max(2, next_pow2(progs)))
    return out


def _backward_kernel(a, b, g, reduction, need_a, need_b):
    """(da, db) in the broadcast shape (None where not needed), or None for >4-D layouts."""
    ab, bb = torch.broadcast_tensors(a, b)
    n = ab.numel()
    scalar = reduction != "none"
    gb = g if scalar else g.expand(ab.shape)
    lay = _layout(ab.shape, ab.stride(), bb.stride(), [0] * ab.dim() if scalar else gb.stride())
    if lay is None:
        return None
    (_, D1, D2, D3), (sa, sb, sg) = lay
    da = alloc.empty(ab.shape, dtype=a.dtype, device=a.device) if need_a else None
    db = alloc.empty(ab.shape, dtype=b.dtype, device=b.device) if need_b else None
    if n:
        _BWD[(cdiv(n, BLOCK),)](ab, bb, gb, da if need_a else db, db if need_b else da, n, D1, D2, D3,
                                *sa, *sb, *sg, 1.0 / max(n, 1) if reduction == "mean" else 1.0, BLOCK=BLOCK,
                                G_SCALAR=scalar, NEED_A=need_a, NEED_B=need_b, num_warps=8)
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
    shape = torch.broadcast_shapes(a.shape, b.shape) if reduction == "none" else ()
    return torch.empty(shape, dtype=torch.result_type(a, b), device=a.device)


def _bwd_fake(grad, a, b, reduction, need_a, need_b):
    shape = torch.broadcast_shapes(a.shape, b.shape)
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


def _setup(ctx, inputs, output):
    a, b, reduction = inputs
    ctx.reduction = reduction
    ctx.save_for_backward(a, b)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    da, db = _mse_bwd_op(grad, a, b, ctx.reduction, need_a, need_b)
    da = (da.sum_to_size(a.shape) if da.shape != a.shape else da) if need_a else None
    db = (db.sum_to_size(b.shape) if db.shape != b.shape else db) if need_b else None
    return da, db, None


@register_op("mse_loss", fake=_fake, backward=_backward, setup_context=_setup)
def _mse_op(a: torch.Tensor, b: torch.Tensor, reduction: str) -> torch.Tensor:
    out_dtype = torch.result_type(a, b)
    out = None
    if _kernel_ok(a, b, out_dtype) and (reduction == "none" or a.numel() and b.numel()):
        out = _forward(a, b, reduction, out_dtype)
    return reference_mse_loss(a, b, reduction) if out is None else out


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
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction: expected one of 'none', 'mean', 'sum', got {reduction!r}")
    if target.device != input.device:
        raise ValueError(f"target: expected a tensor on {input.device}, got {target.device}")
    if target.shape != input.shape:
        try:
            torch.broadcast_shapes(input.shape, target.shape)
        except RuntimeError:
            raise ValueError(f"target: shape {tuple(target.shape)} does not broadcast with input's "
                             f"{tuple(input.shape)}") from None
        if not torch.compiler.is_compiling():  # Dynamo cannot trace warnings.warn: eager only
            warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                          f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                          "Please ensure they have the same size.", stacklevel=2)
    return _mse_op(input, target, reduction)


FAMILY = {"name": "loss", "ops": ["mse_loss"], "reason": triton_reason}
