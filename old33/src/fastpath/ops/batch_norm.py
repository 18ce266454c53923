"""batch_norm over (N, C, *) with ``torch.nn.functional.batch_norm`` semantics, forward and
backward, training and inference: the reference path, the registered ops, the autograd
Function and the public function. The kernel, its plans and tuning knobs are in
:mod:`fastpath.ops.batch_norm_kernel` (one kernel: each channel's tiles split into chunks
merged with Chan's formula, fused into one launch per direction where they fit the GPU).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch.autograd.function import once_differentiable

from .._core.backend import triton_reason
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import cdiv
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from .batch_norm_kernel import _UPDATE, _backward_kernel, _forward_kernel, _kernel_ok, configure, knobs  # noqa: F401


# ---------------------------------------------------------------------------- reference

def _acc(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _shape(x):
    return (1, x.shape[1]) + (1,) * (x.dim() - 2)


def _pivot(x, acc):
    """The channel's first value x[0, c, 0, ...], shaped to broadcast against x."""
    return x[(0, slice(None)) + (0,) * (x.dim() - 2)].to(acc).view(_shape(x))


def _reference_forward(x, w, b, rm, rv, training, eps):
    """(y, stats) in plain PyTorch, arithmetic in float32 (float64); stats = (mean, rstd,
    biased var, mean - pivot) stacked as (4, C), pivot = x[0, c, 0] in training, else 0."""
    acc = _acc(x.dtype)
    xf = x.to(acc)
    dims = [0] + list(range(2, x.dim()))
    if training:  # statistics of x - (the channel's first value), as the kernel
        pivot = _pivot(x, acc)
        xf = xf - pivot
        shifted, var = xf.mean(dims), xf.var(dims, unbiased=False)
        mean = shifted + pivot.reshape(-1)
    else:
        mean, var = rm.to(acc), rv.to(acc)
        shifted = mean
    rstd = torch.rsqrt(var + eps)
    scale = rstd * (w.to(acc) if w is not None else 1.0)
    y = (xf - shifted.view(_shape(x))) * scale.view(_shape(x))
    if b is not None:
        y = y + b.to(acc).view(_shape(x))
    return y.to(x.dtype), torch.stack([mean, rstd, var, shifted])


def _reference_update(rm, rv, mean, var, momentum, count):
    rm.copy_((1.0 - momentum) * rm.to(mean.dtype) + momentum * mean)
    rv.copy_((1.0 - momentum) * rv.to(var.dtype) + momentum * var * (count / max(count - 1, 1)))


def _reference_backward(g, x, w, stats, training, need_dx, need_dw, need_db, b_dtype):
    acc = _acc(x.dtype)
    dims = [0] + list(range(2, x.dim()))
    shp = _shape(x)
    st = stats.to(acc)
    xf = x.to(acc) - _pivot(x, acc) if training else x.to(acc)
    xhat = (xf - st[3].view(shp)) * st[1].view(shp)
    gf = g.to(acc)
    sum_g, sum_gx = gf.sum(dims), (gf * xhat).sum(dims)
    dx = None
    if need_dx:
        scale = (st[1] * (w.to(acc) if w is not None else 1.0)).view(shp)
        if training:
            r = x.numel() // x.shape[1]
            dx = scale * (gf - (sum_g / r).view(shp) - xhat * (sum_gx / r).view(shp))
        else:
            dx = scale * gf
        dx = dx.to(x.dtype)
    return dx, sum_gx.to(w.dtype) if need_dw else None, sum_g.to(b_dtype) if need_db else None


def reference_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                         momentum=0.1, eps=1e-5):
    """PyTorch path, same arguments and effects as :func:`batch_norm` (updates the running
    statistics in training mode)."""
    y, stats = _reference_forward(input, weight, bias, running_mean, running_var, training, eps)
    if training and running_mean is not None:
        _reference_update(running_mean, running_var, stats[0], stats[2], momentum, input.numel() // input.shape[1])
    return y


# ---------------------------------------------------------------------------- ops

def _forward(x, w, b, rm, rv, training, momentum, eps, update):
    if _kernel_ok(x, w, b, rm, rv):
        return _forward_kernel(x, w, b, rm, rv, training, momentum, eps, update)
    y, stats = _reference_forward(x, w, b, rm, rv, training, eps)
    if update and training and rm is not None:
        _reference_update(rm, rv, stats[0], stats[2], momentum, x.numel() // x.shape[1])
    return y, stats


def _backward_impl(grad, x, w, stats, training, need_dx, need_dw, need_db):
    """(dx, dweight, dbias as float32/float64), None where not needed."""
    use_kernel = _kernel_ok(x, w) and grad.dtype in KERNEL_DTYPES and stats.dtype == torch.float32
    fn = _backward_kernel if use_kernel else _reference_backward
    return fn(grad, x, w, stats, training, need_dx, need_dw, need_db, _acc(x.dtype))


class _BatchNorm(torch.autograd.Function):
    """The eager autograd path: no dispatcher, running statistics updated by the kernel."""

    @staticmethod
    def forward(ctx, x, w, b, rm, rv, training, momentum, eps):
        y, stats = _MEMO_FWD.call(lambda: _forward(x, w, b, rm, rv, training, momentum, eps, True),
                                  (x, w, b, rm, rv), (training, momentum, eps))
        ctx.save_for_backward(x, w, stats)
        ctx.training = training
        ctx.b_dtype = b.dtype if b is not None else None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, w, stats = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        dx, dw, db = _MEMO_BWD.call(lambda: _backward_impl(grad, x, w, stats, ctx.training, *need),
                                    (grad, x, w, stats), (ctx.training, *need))
        return dx, dw, (db.to(ctx.b_dtype) if need[2] else None), None, None, None, None, None


#: Eager calls like an earlier one replay its launches (fastpath._core.memo): the forward
#: (also without autograd) and the backward of the autograd Function.
_MEMO_FWD, _MEMO_BWD = LaunchMemo(), LaunchMemo()


def _fake(x, w, b, rm, rv, training, momentum, eps):
    C = x.shape[1]
    acc = _acc(x.dtype)
    return torch.empty_like(x), x.new_empty(4, C, dtype=acc)


def _setup(ctx, inputs, output):
    x, w, b, training = inputs[0], inputs[1], inputs[2], inputs[5]
    ctx.mark_non_differentiable(output[1])
    ctx.training = training
    ctx.b_dtype = b.dtype if b is not None else None
    ctx.save_for_backward(x, w, output[1])


def _bwd_fake(grad, x, w, stats, training, need_dx, need_dw, need_db):
    C = x.shape[1]
    return (torch.empty_like(x) if need_dx else x.new_empty(0),
            x.new_empty(C if need_dw else 0, dtype=w.dtype if w is not None else x.dtype),
            x.new_empty(C if need_db else 0, dtype=_acc(x.dtype)))


@register_op("batch_norm_backward", fake=_bwd_fake)
def _bn_bwd_op(grad: torch.Tensor, x: torch.Tensor, w: Optional[torch.Tensor], stats: torch.Tensor, training: bool,
               need_dx: bool, need_dw: bool, need_db: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias as float32/float64); an empty tensor where not needed."""
    dx, dw, db = _backward_impl(grad, x, w, stats, training, need_dx, need_dw, need_db)
    return (dx if need_dx else x.new_empty(0),
            dw if need_dw else x.new_empty(0, dtype=w.dtype if w is not None else x.dtype),
            db if need_db else x.new_empty(0, dtype=_acc(x.dtype)))


def _backward(ctx, grad, _stats_grad):
    x, w, stats = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    dx, dw, db = _bn_bwd_op(grad, x, w, stats, ctx.training, need_dx, need_dw, need_db)
    return (dx if need_dx else None, dw if need_dw else None, db.to(ctx.b_dtype) if need_db else None,
            None, None, None, None, None)


@register_op("batch_norm", fake=_fake, backward=_backward, setup_context=_setup)
def _bn_op(x: torch.Tensor, w: Optional[torch.Tensor], b: Optional[torch.Tensor], rm: Optional[torch.Tensor],
           rv: Optional[torch.Tensor], training: bool, momentum: float,
           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(x, w, b, rm, rv, training, momentum, eps, update=False)


def _update_fake(rm, rv, stats, momentum, count):
    return None


@register_op("batch_norm_update_stats", fake=_update_fake, mutates_args=("rm", "rv"))
def _update_op(rm: torch.Tensor, rv: torch.Tensor, stats: torch.Tensor, momentum: float, count: int) -> None:
    """Running statistics from the forward's (mean, rstd, biased var, ...), in place."""
    C = rm.numel()
    if _kernel_ok(rm, rm, rv) and stats.dtype == torch.float32:  # rm twice: its stride is checked too
        _UPDATE[(cdiv(C, 1024),)](rm, rv, stats[0], stats[2], C, momentum, count / max(count - 1, 1), BLOCK=1024)
    else:
        _reference_update(rm, rv, stats[0], stats[2], momentum, count)


def _check_param(name, t, C, device):
    if t is None:
        return
    check_tensor(name, t)
    if not t.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point tensor, got {t.dtype}")
    if t.shape != (C,):
        raise ValueError(f"{name}: expected shape ({C},) for input with {C} channels, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: expected a tensor on {device}, got {t.device}")


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def batch_norm(input: torch.Tensor, running_mean: Optional[torch.Tensor], running_var: Optional[torch.Tensor],
               weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> torch.Tensor:
    """Batch normalisation over (N, C, *), as ``torch.nn.functional.batch_norm``.

    Parameters
    ----------
    input : floating Tensor (N, C, *) with N * prod(*) > 1 in training. Any layout; NCHW and
        channels-last are read in place, other layouts whose spatial dimensions do not merge
        into one stride are copied once. float16 / bfloat16 / float32 take the kernels;
        float64 and other devices take the reference path.
    running_mean, running_var : (C,) tensors or None (both or neither). Training updates them
        in place: ``r = (1 - momentum) r + momentum * stat`` with the unbiased variance;
        inference normalises with them (then they are required).
    weight, bias : optional (C,) affine parameters. Parameters and running statistics may be
        float32 with half input, as in PyTorch's mixed precision.
    training : use (and update) the batch statistics (biased variance for normalising).
    momentum, eps : as PyTorch.

    Returns
    -------
    A new tensor of ``input``'s shape and dtype, laid out as ``input`` when it is dense
    (contiguous, channels-last, ...), else contiguous or channels-last. Statistics and
    arithmetic are float32: per-chunk shifted sums, merged across chunks with Chan's formula.
    Autograd gives dx, dweight, dbias (training: through the batch statistics; inference:
    ``dx = grad * weight * rstd``); ``torch.compile(fullgraph=True)`` is supported.

    Raises
    ------
    TypeError naming the argument for a non-tensor or non-floating tensor, or ``momentum`` /
    ``eps`` that are not numbers; ValueError naming ``input`` for fewer than 2 dimensions or a
    single value per channel in training, the argument for a shape other than (C,) or another
    device, ``running_mean`` when inference has no running statistics or only one is given.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.batch_norm import batch_norm
    >>> x = torch.randn(8, 3, 4, 4)
    >>> rm, rv = torch.zeros(3), torch.ones(3)
    >>> y = batch_norm(x, rm, rv, training=True)  # rm, rv updated
    """
    check_tensor("input", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"input: batch_norm needs a floating-point tensor, got {input.dtype}")
    if input.dim() < 2:
        raise ValueError(f"input: expected (N, C, *) with at least 2 dimensions, got shape {tuple(input.shape)}")
    C = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_param(name, t, C, input.device)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean: running_mean and running_var must both be tensors or both None")
    if not training and running_mean is None:
        raise ValueError("running_mean: inference (training=False) needs running_mean and running_var")
    for name, v in (("momentum", momentum), ("eps", eps)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: expected a number, got {type(v).__name__}")
    count = input.numel() // C if C else 0
    if training and count == 1:
        raise ValueError(f"input: expected more than 1 value per channel when training, got shape "
                         f"{tuple(input.shape)}")
    momentum, eps = float(momentum), float(eps)
    grads = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (input, weight, bias))
    if not torch.compiler.is_compiling():  # eager: the kernel updates the running statistics in place
        if not grads:
            return _MEMO_FWD.call(lambda: _forward(input, weight, bias, running_mean, running_var, training, momentum,
                                                   eps, True), (input, weight, bias, running_mean, running_var),
                                  (training, momentum, eps))[0]
        if all(type(t) in _PLAIN for t in (input, weight, bias) if t is not None):
            return _BatchNorm.apply(input, weight, bias, running_mean, running_var, training, momentum, eps)
    y, stats = _bn_op(input, weight, bias, running_mean, running_var, training, momentum, eps)
    if training and running_mean is not None:
        _update_op(running_mean, running_var, stats, momentum, count)
    return y


FAMILY = {"name": "batch_norm", "ops": ["batch_norm"], "reason": triton_reason}
