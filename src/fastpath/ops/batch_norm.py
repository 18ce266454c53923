"""batch_norm over (N, C, *) with ``torch.nn.functional.batch_norm`` semantics, forward and
backward, training and inference.

The input is read as (N, C, S) through its strides (S: the spatial dimensions, merged; a
layout whose spatial dimensions do not merge is copied once). Each channel's N*S values are
split into K chunks so that small C still fills the GPU:

* ``_bn_reduce_kernel``: program (channel block, chunk) reduces its tile rows. Forward:
  Welford (count, mean, M2) of ``x - pivot`` (the channel's first value, so differences are
  exact and means small: no cancellation for a large mean) merged tile by tile, written as
  a partial. Backward: sum(g) and
  sum(g * xhat).
* ``_bn_apply_kernel``: program (channel block, chunk) combines the K partials of its
  channels (Chan's formula), the chunk-0 program stores the statistics (and updates the
  running statistics), then writes its chunk of y (forward) or dx (backward).

Tiles are (rows, channels): one channel per tile for NCHW, up to 64 adjacent channels for
channels-last and 2-D inputs, so loads are contiguous either way.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op

#: Elements per tile, most channels per tile, most chunks per channel.
TILE = 256 if INTERPRET else 4096
MAX_BC = 16 if INTERPRET else 64
MAX_CHUNKS = 512


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _split_rows(r0, S, BR: tl.constexpr):
    """(n, s) of rows r0 .. r0 + BR - 1 of the (N*S) axis: one int64 division per tile, int32
    per row (S == 1, a 2-D input, is specialised by Triton and divides nothing)."""
    n0 = r0 // S
    local = tl.cast(r0 - n0 * S, tl.int32) + tl.arange(0, BR)
    dn = local // S
    return n0 + dn.to(tl.int64), (local - dn * S).to(tl.int64)


@triton.jit
def _tile(ptr, nn, sp, cols, m, sn, sc, ss):
    return tl.load(ptr + nn[:, None] * sn + cols[None, :] * sc + sp[:, None] * ss, mask=m, other=0.0).to(tl.float32)


@triton.jit
def _bn_reduce_kernel(x_ptr, g_ptr, part_ptr, mean_ptr, rstd_ptr, R, S, C, CH,
                      sxn, sxc, sxs, sgn, sgc, sgs, BR: tl.constexpr, BC: tl.constexpr, BWD: tl.constexpr):
    """part[k, c] = (mean, M2) of chunk k (forward) or (sum g, sum g * xhat) (backward)."""
    k = tl.program_id(1)
    cols = tl.program_id(0) * BC + tl.arange(0, BC)
    cmask = cols < C
    r_start = k.to(tl.int64) * CH
    r_end = tl.minimum(r_start + CH, R)
    if BWD:
        mean = tl.load(mean_ptr + cols, mask=cmask, other=0.0)
        rstd = tl.load(rstd_ptr + cols, mask=cmask, other=0.0)
        acc_a = tl.zeros([BR, BC], dtype=tl.float32)
        acc_b = tl.zeros([BR, BC], dtype=tl.float32)
    else:  # statistics of x - pivot (the channel's first value): exact differences, small means
        pivot = tl.load(x_ptr + cols * sxc, mask=cmask, other=0.0).to(tl.float32)
        cnt_acc = tl.zeros([BC], dtype=tl.float32)
        mean_acc = tl.zeros([BC], dtype=tl.float32)
        m2_acc = tl.zeros([BC], dtype=tl.float32)
    for r0 in range(r_start, r_end, BR):
        rows = tl.cast(r0, tl.int64) + tl.arange(0, BR)
        m = (rows < r_end)[:, None] & cmask[None, :]
        nn, sp = _split_rows(r0, S, BR)
        x = _tile(x_ptr, nn, sp, cols, m, sxn, sxc, sxs)
        if BWD:
            g = _tile(g_ptr, nn, sp, cols, m, sgn, sgc, sgs)
            acc_a += g
            acc_b += g * ((x - mean[None, :]) * rstd[None, :])
        else:
            x = tl.where(m, x - pivot[None, :], 0.0)
            cnt = tl.minimum(r_end - r0, BR).to(tl.float32)
            t_mean = tl.sum(x, axis=0) / cnt
            dev = tl.where(m, x - t_mean[None, :], 0.0)
            t_m2 = tl.sum(dev * dev, axis=0)
            total = cnt_acc + cnt
            delta = t_mean - mean_acc
            mean_acc += delta * (cnt / total)
            m2_acc += t_m2 + delta * delta * (cnt_acc * cnt / total)
            cnt_acc = total
    if BWD:
        a = tl.sum(acc_a, axis=0)
        b = tl.sum(acc_b, axis=0)
    else:
        a = mean_acc
        b = m2_acc
    out = part_ptr + (k * C + cols) * 2
    tl.store(out, a, mask=cmask)
    tl.store(out + 1, b, mask=cmask)


@triton.jit
def _bn_apply_kernel(x_ptr, g_ptr, y_ptr, part_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, mean_ptr, rstd_ptr,
                     var_ptr, dw_ptr, db_ptr, R, S, C, CH, K, sxn, sxc, sxs, sgn, sgc, sgs, syn, syc, sys,
                     eps, momentum, unbias, BR: tl.constexpr, BC: tl.constexpr, K_PAD: tl.constexpr,
                     BWD: tl.constexpr, TRAINING: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                     UPDATE: tl.constexpr, HAS_PART: tl.constexpr, STORE_Y: tl.constexpr,
                     STORE_DW: tl.constexpr, STORE_DB: tl.constexpr):
    k = tl.program_id(1)
    cols = tl.program_id(0) * BC + tl.arange(0, BC)
    cmask = cols < C
    if HAS_PART:  # combine the K chunk partials of these channels
        ks = tl.arange(0, K_PAD)
        pm = (ks < K)[:, None] & cmask[None, :]
        pa = tl.load(part_ptr + (ks[:, None] * C + cols[None, :]) * 2, mask=pm, other=0.0)
        pb = tl.load(part_ptr + (ks[:, None] * C + cols[None, :]) * 2 + 1, mask=pm, other=0.0)
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    else:
        w = tl.full([BC], 1.0, dtype=tl.float32)
    if BWD:
        mean = tl.load(mean_ptr + cols, mask=cmask, other=0.0)
        rstd = tl.load(rstd_ptr + cols, mask=cmask, other=0.0)
        if HAS_PART:
            sum_g = tl.sum(pa, axis=0)
            sum_gx = tl.sum(pb, axis=0)
            if k == 0:
                if STORE_DW:
                    tl.store(dw_ptr + cols, sum_gx.to(dw_ptr.dtype.element_ty), mask=cmask)
                if STORE_DB:
                    tl.store(db_ptr + cols, sum_g.to(db_ptr.dtype.element_ty), mask=cmask)
        scale = w * rstd
        if TRAINING:
            c1 = sum_g / R
            c2 = sum_gx / R
    else:
        if TRAINING:  # partials are of x - pivot
            pivot = tl.load(x_ptr + cols * sxc, mask=cmask, other=0.0).to(tl.float32)
            nk = tl.minimum(tl.maximum(R - ks.to(tl.int64) * CH, 0), CH).to(tl.float32)
            shifted = tl.sum(nk[:, None] * pa, axis=0) / R
            d = tl.where(pm, pa - shifted[None, :], 0.0)
            var = tl.sum(pb + nk[:, None] * d * d, axis=0) / R
            mean = pivot + shifted
        else:
            pivot = tl.zeros([BC], dtype=tl.float32)
            mean = tl.load(rm_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            shifted = mean
            var = tl.load(rv_ptr + cols, mask=cmask, other=1.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(var + eps)
        if k == 0:
            tl.store(mean_ptr + cols, mean, mask=cmask)
            tl.store(rstd_ptr + cols, rstd, mask=cmask)
            tl.store(var_ptr + cols, var, mask=cmask)
            if UPDATE:
                rm = tl.load(rm_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
                rv = tl.load(rv_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
                rm = (1.0 - momentum) * rm + momentum * mean
                rv = (1.0 - momentum) * rv + momentum * (var * unbias)
                tl.store(rm_ptr + cols, rm.to(rm_ptr.dtype.element_ty), mask=cmask)
                tl.store(rv_ptr + cols, rv.to(rv_ptr.dtype.element_ty), mask=cmask)
        scale = w * rstd
        if HAS_B:
            shift = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        else:
            shift = tl.zeros([BC], dtype=tl.float32)
    if STORE_Y:
        r_start = k.to(tl.int64) * CH
        r_end = tl.minimum(r_start + CH, R)
        for r0 in range(r_start, r_end, BR):
            rows = tl.cast(r0, tl.int64) + tl.arange(0, BR)
            m = (rows < r_end)[:, None] & cmask[None, :]
            nn, sp = _split_rows(r0, S, BR)
            x = _tile(x_ptr, nn, sp, cols, m, sxn, sxc, sxs)
            if BWD:
                g = _tile(g_ptr, nn, sp, cols, m, sgn, sgc, sgs)
                if TRAINING:
                    xhat = (x - mean[None, :]) * rstd[None, :]
                    y = scale[None, :] * (g - c1[None, :] - xhat * c2[None, :])
                else:
                    y = scale[None, :] * g
            else:
                y = ((x - pivot[None, :]) - shifted[None, :]) * scale[None, :] + shift[None, :]
            tl.store(y_ptr + nn[:, None] * syn + cols[None, :] * syc + sp[:, None] * sys,
                     y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _bn_update_kernel(rm_ptr, rv_ptr, mean_ptr, var_ptr, C, momentum, unbias, BLOCK: tl.constexpr):
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = c < C
    rm = tl.load(rm_ptr + c, mask=m, other=0.0).to(tl.float32)
    rv = tl.load(rv_ptr + c, mask=m, other=0.0).to(tl.float32)
    rm = (1.0 - momentum) * rm + momentum * tl.load(mean_ptr + c, mask=m, other=0.0)
    rv = (1.0 - momentum) * rv + momentum * (tl.load(var_ptr + c, mask=m, other=0.0) * unbias)
    tl.store(rm_ptr + c, rm.to(rm_ptr.dtype.element_ty), mask=m)
    tl.store(rv_ptr + c, rv.to(rv_ptr.dtype.element_ty), mask=m)


_REDUCE, _APPLY, _UPDATE = Launcher(_bn_reduce_kernel), Launcher(_bn_apply_kernel), Launcher(_bn_update_kernel)


# ---------------------------------------------------------------------------- launchers

def _strides3(t: torch.Tensor):
    """(stride N, stride C, stride S) of ``t`` read as (N, C, S), or None if the spatial
    dimensions do not merge into one."""
    sp = [(t.size(i), t.stride(i)) for i in range(2, t.dim()) if t.size(i) != 1]
    for (_, st0), (s1, st1) in zip(sp, sp[1:]):
        if st0 != st1 * s1:
            return None
    return t.stride(0), t.stride(1), sp[-1][1] if sp else 1


def _like(x: torch.Tensor) -> torch.Tensor:
    """A new tensor in ``x``'s memory format (contiguous or channels-last), else contiguous."""
    if x.dim() in (4, 5) and not x.is_contiguous():
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        if x.is_contiguous(memory_format=fmt):
            perm = (0, *range(2, x.dim()), 1)
            inv = (0, x.dim() - 1, *range(1, x.dim() - 1))
            return alloc.empty(*[x.shape[i] for i in perm], dtype=x.dtype, device=x.device).permute(*inv)
    return alloc.empty(x.shape, dtype=x.dtype, device=x.device)


def _plan(x: torch.Tensor, sxc: int):
    """(BR, BC, CH, K): tile rows and channels, rows per chunk, chunks per channel."""
    C = x.shape[1]
    R = x.numel() // C
    bc = min(next_pow2(C), MAX_BC) if sxc == 1 and C > 1 else 1
    br = max(1, min(TILE // bc, next_pow2(R)))
    cblocks = cdiv(C, bc)
    want = max(1, cdiv(2 * num_sms(x.device), cblocks))
    k = min(want, cdiv(R, br), MAX_CHUNKS)
    ch = cdiv(cdiv(R, k), br) * br
    return br, bc, ch, cdiv(R, ch)


def _checked3(t: torch.Tensor):
    st = _strides3(t)
    if st is None:  # spatial dims that do not merge: one documented copy
        t = t.contiguous()
        st = _strides3(t)
    return t, st


def _forward_kernel(x, w, b, rm, rv, training, momentum, eps, update):
    x, sx = _checked3(x)
    C = x.shape[1]
    R = x.numel() // C
    br, bc, ch, k = _plan(x, sx[1])
    y = _like(x)
    sy = _strides3(y)
    stats = alloc.empty(3, C, dtype=torch.float32, device=x.device)
    mean, rstd, var = stats[0], stats[1], stats[2]
    grid = (cdiv(C, bc), k)
    part = alloc.empty(k, C, 2, dtype=torch.float32, device=x.device) if training else stats
    if training:
        _REDUCE[grid](x, x, part, mean, rstd, R, R // x.shape[0], C, ch, *sx, *sx,
                      BR=br, BC=bc, BWD=False, num_warps=8)
    dummy = stats
    _APPLY[grid](x, x, y, part, w if w is not None else dummy, b if b is not None else dummy,
                 rm if rm is not None else dummy, rv if rv is not None else dummy, mean, rstd, var,
                 dummy, dummy, R, R // x.shape[0], C, ch, k, *sx, *sx, *sy, eps, momentum,
                 R / max(R - 1, 1), BR=br, BC=bc, K_PAD=max(2, next_pow2(k)), BWD=False,
                 TRAINING=training, HAS_W=w is not None, HAS_B=b is not None,
                 UPDATE=bool(update and training and rm is not None), HAS_PART=training, STORE_Y=True,
                 STORE_DW=False, STORE_DB=False, num_warps=8)
    return y, stats


def _backward_kernel(g, x, w, mean, rstd, training, need_dx, need_dw, need_db, b_dtype):
    x, sx = _checked3(x)
    g, sg = _checked3(g)
    C = x.shape[1]
    R = x.numel() // C
    S = R // x.shape[0]
    br, bc, ch, k = _plan(x, sx[1])
    grid = (cdiv(C, bc), k)
    dx = _like(x) if need_dx else None
    sy = _strides3(dx) if need_dx else (0, 0, 0)
    dw = alloc.empty(C, dtype=w.dtype, device=x.device) if need_dw else None
    db = alloc.empty(C, dtype=b_dtype, device=x.device) if need_db else None
    has_part = training or need_dw or need_db
    part = alloc.empty(k, C, 2, dtype=torch.float32, device=x.device) if has_part else mean
    if has_part:
        _REDUCE[grid](x, g, part, mean, rstd, R, S, C, ch, *sx, *sg, BR=br, BC=bc, BWD=True, num_warps=8)
    if need_dx or has_part:
        _APPLY[grid](x, g, dx if need_dx else mean, part, w if w is not None else mean, mean, mean, mean,
                     mean, rstd, mean, dw if need_dw else mean, db if need_db else mean, R, S, C, ch, k,
                     *sx, *sg, *sy, 0.0, 0.0, 1.0, BR=br, BC=bc, K_PAD=max(2, next_pow2(k)), BWD=True,
                     TRAINING=training, HAS_W=w is not None, HAS_B=False, UPDATE=False, HAS_PART=has_part,
                     STORE_Y=need_dx, STORE_DW=need_dw, STORE_DB=need_db, num_warps=8)
    return dx, dw, db


def _kernel_ok(x, *params) -> bool:
    return (x.dtype in KERNEL_DTYPES and x.numel() > 0 and use_triton(x)
            and all(p is None or (p.dtype in KERNEL_DTYPES and p.is_contiguous()) for p in params))


# ---------------------------------------------------------------------------- reference

def _acc(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _shape(x):
    return (1, x.shape[1]) + (1,) * (x.dim() - 2)


def _reference_forward(x, w, b, rm, rv, training, eps):
    """(y, stats) in plain PyTorch, arithmetic in float32 (float64); stats = (mean, rstd,
    biased var) stacked as (3, C)."""
    acc = _acc(x.dtype)
    xf = x.to(acc)
    dims = [0] + list(range(2, x.dim()))
    if training:  # statistics of x - (the channel's first value), as the kernel
        pivot = xf[(0, slice(None)) + (0,) * (x.dim() - 2)].view(_shape(x))
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
    return y.to(x.dtype), torch.stack([mean, rstd, var])


def _reference_update(rm, rv, mean, var, momentum, count):
    rm.copy_((1.0 - momentum) * rm.to(mean.dtype) + momentum * mean)
    rv.copy_((1.0 - momentum) * rv.to(var.dtype) + momentum * var * (count / max(count - 1, 1)))


def _reference_backward(g, x, w, mean, rstd, training, need_dx, need_dw, need_db, b_dtype):
    acc = _acc(x.dtype)
    dims = [0] + list(range(2, x.dim()))
    shp = _shape(x)
    xhat = (x.to(acc) - mean.to(acc).view(shp)) * rstd.to(acc).view(shp)
    gf = g.to(acc)
    sum_g, sum_gx = gf.sum(dims), (gf * xhat).sum(dims)
    dx = None
    if need_dx:
        scale = (rstd.to(acc) * (w.to(acc) if w is not None else 1.0)).view(shp)
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


def _fake(x, w, b, rm, rv, training, momentum, eps):
    C = x.shape[1]
    acc = _acc(x.dtype)
    return torch.empty_like(x), x.new_empty(3, C, dtype=acc)


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
    use_kernel = _kernel_ok(x, w) and grad.dtype in KERNEL_DTYPES and stats.dtype == torch.float32
    fn = _backward_kernel if use_kernel else _reference_backward
    dx, dw, db = fn(grad, x, w, stats[0], stats[1], training, need_dx, need_dw, need_db, _acc(x.dtype))
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
    """Running statistics from the forward's (mean, rstd, biased var), in place."""
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
    A new tensor of ``input``'s shape, dtype and memory format (contiguous or channels-last).
    Statistics and arithmetic are float32 (Welford per tile, merged across chunks).
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
    if not grads and not torch.compiler.is_compiling():  # eager: the kernel updates running stats in place
        return _forward(input, weight, bias, running_mean, running_var, training, momentum, eps, update=True)[0]
    y, stats = _bn_op(input, weight, bias, running_mean, running_var, training, momentum, eps)
    if training and running_mean is not None:
        _update_op(running_mean, running_var, stats, momentum, count)
    return y


FAMILY = {"name": "batch_norm", "ops": ["batch_norm"], "reason": triton_reason}
