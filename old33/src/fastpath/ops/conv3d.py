"""``causal_conv3d``: the causal 3-D convolution of video VAEs (Wan, Qwen-Image), with the
padding folded into the convolution instead of materialised.

One implicit-GEMM kernel, ``_igemm_kernel``, serves every dense convolution of the package
(``conv1d`` in :mod:`.conv1d` runs on it too). Output positions ``(b, t, h, w)`` are the GEMM
rows, output channels its columns, and the reduction runs over ``kt * kh * kw`` taps times
``C_in`` channels in ``BLOCK_K`` chunks (one flat loop, so that Triton pipelines the loads).
For each tap the row of input it needs is computed from the output position; a row that
falls into the padding is masked to zero, and a frame before the first one is read from the
``cache`` (the previous chunk's last frames) where one is given. Nothing padded or
concatenated is ever allocated. ``tl.dot`` accumulates in float32: tensor cores for
bfloat16 / float16, exact ``ieee`` products for float32.

Layouts: any strides are read in place. Channels-last-3d activations
(``x.stride(1) == 1``; ``torch.channels_last_3d``) are the fast layout: each tap reads
contiguous, aligned channel vectors; the output takes the input's memory format. The
weight is read in place when its ``C_in`` or ``C_out`` stride is 1; otherwise (the default
``(C_out, C_in, kt, kh, kw)`` contiguous layout) it is transposed once per call into a
reused workspace (``C_out * C_in * kt * kh * kw`` elements, a few microseconds).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import INTERPRET, TL_DTYPES, tl, triton, use_triton
from .._core.errors import FLOAT_DTYPES, KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, workspace
from .._core.registry import register_op
from .matvec import _mm


@triton.jit
def _igemm_kernel(x_ptr, c_ptr, w_ptr, b_ptr, y_ptr,
                  M, N, C, T_out, H_out, W_out, T, H, W, NC,
                  sxb, sxc, sxt, sxh, sxw, scb, scc, sct, sch, scw,
                  swn, swc, swt, swh, sww, syb, syc, syt, syh, syw,
                  st, sh, sw, pt, ph, pw, dt, dh, dw,
                  KT: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                  HAS_CACHE: tl.constexpr, HAS_BIAS: tl.constexpr, CL: tl.constexpr, DT: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Output row m = (b, t, h, w); input frame ti = t*st + kt*dt - pt. ti < 0 reads cache
    # frame NC + ti (HAS_CACHE) or zero. CL: channel stride 1 in x (and cache).
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mmask = offs_m < M
    nmask = offs_n < N
    w_o = offs_m % W_out
    r = offs_m // W_out
    h_o = r % H_out
    r = r // H_out
    t_o = r % T_out
    b = (r // T_out).to(tl.int64)
    t0 = t_o * st - pt
    h0 = h_o * sh - ph
    w0 = w_o * sw - pw
    xb = x_ptr + b * sxb
    cb = c_ptr + b * scb
    CB = tl.cdiv(C, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for it in range(0, KT * KH * KW * CB):
        tap = it // CB
        ck = (it % CB) * BLOCK_K + offs_k
        kw_ = tap % KW
        kh_ = (tap // KW) % KH
        kt_ = tap // (KW * KH)
        ti = t0 + kt_ * dt
        hi = h0 + kh_ * dh
        wi = w0 + kw_ * dw
        ok = mmask & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W) & (ti < T)
        hw_x = hi.to(tl.int64) * sxh + wi.to(tl.int64) * sxw
        if HAS_CACHE:
            ok = ok & (ti >= -NC)
            in_x = ti >= 0
            hw_c = hi.to(tl.int64) * sch + wi.to(tl.int64) * scw
            row = tl.where(in_x, xb + ti.to(tl.int64) * sxt + hw_x, cb + (ti + NC).to(tl.int64) * sct + hw_c)
            if CL:
                a_ptrs = row[:, None] + ck[None, :]
            else:
                a_ptrs = row[:, None] + ck[None, :].to(tl.int64) * tl.where(in_x, sxc, scc)[:, None]
        else:
            ok = ok & (ti >= 0)
            row = xb + ti.to(tl.int64) * sxt + hw_x
            if CL:
                a_ptrs = row[:, None] + ck[None, :]
            else:
                a_ptrs = row[:, None] + ck[None, :].to(tl.int64) * sxc
        kmask = ck < C
        a = tl.load(a_ptrs, mask=ok[:, None] & kmask[None, :], other=0.0)
        w_ptrs = w_ptr + kt_ * swt + kh_ * swh + kw_ * sww + ck[:, None] * swc + offs_n[None, :] * swn
        bt = tl.load(w_ptrs, mask=kmask[:, None] & nmask[None, :], other=0.0)
        acc += _mm(a.to(DT), bt.to(DT), DT)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    y_row = b * syb + t_o.to(tl.int64) * syt + h_o.to(tl.int64) * syh + w_o.to(tl.int64) * syw
    y_ptrs = y_ptr + y_row[:, None] + offs_n.to(tl.int64)[None, :] * syc
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


# ---------------------------------------------------------------------------- launcher

#: Tests set this to force (BLOCK_M, BLOCK_N, BLOCK_K) on any backend.
BLOCKS_OVERRIDE: Optional[tuple] = None
#: Interpreter blocks: small, so that tests cross tile edges.
INTERPRET_BLOCKS = (64, 16, 16)

_IGEMM = Launcher(_igemm_kernel)


def _pick(n: int, options) -> int:
    """The widest option whose padding waste on ``n`` is within 1/8 of the least waste."""
    waste = {o: cdiv(n, o) * o - n for o in options}
    best = min(waste.values())
    return max(o for o in options if waste[o] <= best + max(n // 8, 0))


def blocks(M: int, N: int, C: int, dtype: torch.dtype) -> tuple:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`` from the GEMM shape (H200 heuristic,
    untuned: see the ``conv`` bench suite)."""
    if INTERPRET:
        bm, bn, bk = INTERPRET_BLOCKS
        warps, stages = 4, 1
    else:
        bn = _pick(N, (16, 32, 64, 128))
        bm = 128 if M >= 4096 else 64
        bk = _pick(C, (16, 32, 64) if dtype != torch.float32 else (16, 32))
        warps = 8 if bm * bn >= 128 * 128 else 4
        stages = 3 if dtype == torch.float32 or bk == 64 else 4
    if BLOCKS_OVERRIDE is not None:
        bm, bn, bk = BLOCKS_OVERRIDE
    return bm, bn, bk, warps, stages


def _weight_view(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (C_out, C_in, *taps) with C_in or C_out of stride 1: as it is, or transposed
    into a workspace laid out (*taps, C_in, C_out)."""
    if weight.stride(1) == 1 or weight.stride(0) == 1:
        return weight
    nd = weight.dim()
    perm = tuple(range(2, nd)) + (1, 0)
    ws = workspace(weight.device, f"conv.weight.{weight.dtype}", weight.numel(), weight.dtype)
    buf = ws[:weight.numel()].view([weight.shape[p] for p in perm])
    buf.copy_(weight.permute(perm))
    inv = [0] * nd
    for i, p in enumerate(perm):
        inv[p] = i
    return buf.permute(inv)


def igemm_conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], out: torch.Tensor,
               pad: Sequence[int], stride: Sequence[int] = (1, 1, 1), dilation: Sequence[int] = (1, 1, 1),
               cache: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Launch the implicit-GEMM kernel on 5-D views: x (B, C, T, H, W), weight (N, C, kt, kh, kw),
    out (B, N, T_out, H_out, W_out) preallocated, pad = front padding (pt, ph, pw) per dim
    (the back padding is implied by ``out``'s shape), cache (B, C, NC, H, W) or None."""
    B, C, T, H, W = x.shape
    N, _, KT, KH, KW = weight.shape
    _, _, T_out, H_out, W_out = out.shape
    M = B * T_out * H_out * W_out
    if M == 0 or N == 0:
        return out
    wv = _weight_view(weight)
    nc = cache.shape[2] if cache is not None else 0
    cv = cache if cache is not None else x
    cl = x.stride(1) == 1 and (cache is None or cache.stride(1) == 1)
    dt = torch.float32 if INTERPRET else x.dtype
    bm, bn, bk, warps, stages = blocks(M, N, C, x.dtype)
    _IGEMM[(cdiv(M, bm) * cdiv(N, bn),)](
        x, cv, wv, bias if bias is not None else out, out,
        M, N, C, T_out, H_out, W_out, T, H, W, nc,
        *x.stride(), *cv.stride(), *wv.stride(), *out.stride(),
        *stride, *pad, *dilation,
        KT=KT, KH=KH, KW=KW, HAS_CACHE=cache is not None and nc > 0, HAS_BIAS=bias is not None, CL=cl,
        DT=TL_DTYPES[dt], BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
    return out


def _is_channels_last(x: torch.Tensor) -> bool:
    return x.stride(1) == 1 and x.shape[1] > 1 and x.is_contiguous(memory_format=torch.channels_last_3d)


def _empty_like_layout(x: torch.Tensor, shape, dtype=None) -> torch.Tensor:
    """A new (B, C, T, H, W) tensor in ``x``'s memory format (channels-last-3d or contiguous)."""
    dtype = dtype or x.dtype
    if _is_channels_last(x):
        B, C, T, H, W = shape
        return alloc.empty(B, T, H, W, C, dtype=dtype, device=x.device).permute(0, 4, 1, 2, 3)
    return alloc.empty(*shape, dtype=dtype, device=x.device)


# ---------------------------------------------------------------------------- reference

def _out_shape(x, weight, padding) -> list:
    pt, ph, pw = padding
    kt, kh, kw = weight.shape[2:]
    B, _, T, H, W = x.shape
    return [B, weight.shape[0], T + pt - kt + 1, H + 2 * ph - kh + 1, W + 2 * pw - kw + 1]


def reference_causal_conv3d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                            padding: Sequence[int] = (0, 0, 0), cache: Optional[torch.Tensor] = None
                            ) -> torch.Tensor:
    """PyTorch path (no checks, no new cache): the history frames the window needs (the last
    ``pt`` cache frames, zeros for the rest) are concatenated in front of ``x``, and the
    spatial padding is left to ``F.conv3d``; the output takes ``x``'s memory format. A single
    frame without a cache convolves with the one temporal tap that meets it (no zero frames)."""
    pt, ph, pw = padding
    fmt = torch.channels_last_3d if _is_channels_last(x) else torch.contiguous_format
    if cache is None and x.shape[2] == 1 and pt == weight.shape[2] - 1 > 0:
        # One frame after zeros (an image, or a video's first frame): only the tap on the
        # frame itself sees data, so neither the zero frames nor their products exist.
        return F.conv3d(x, weight[:, :, pt:pt + 1], bias, padding=(0, ph, pw)).contiguous(memory_format=fmt)
    if pt > 0:
        hist = cache[:, :, max(cache.shape[2] - pt, 0):] if cache is not None else x[:, :, :0]
        parts = [hist.to(x.device, x.dtype), x]
        if hist.shape[2] < pt:
            zshape = list(x.shape)
            zshape[2] = pt - hist.shape[2]
            parts.insert(0, x.new_zeros(zshape))
        # The window in x's layout: cat alone infers it from its inputs' strides, and a frame
        # whose size-1 dims carry odd strides (a view of a 2-D output) reads as contiguous to
        # it; cuDNN would then convert the window to channels-last on every call.
        if torch.is_grad_enabled() and any(p.requires_grad for p in parts):
            x_in = torch.cat(parts, dim=2).contiguous(memory_format=fmt)  # out= does not record
        else:
            shape = list(x.shape)
            shape[2] = sum(p.shape[2] for p in parts)
            x_in = torch.cat(parts, dim=2, out=_empty_like_layout(x, shape))
    else:
        x_in = x
    out = F.conv3d(x_in, weight, bias, padding=(0, ph, pw))
    return out.contiguous(memory_format=fmt)


def tap_sum_conv3d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                   padding: Sequence[int], cache: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """One output frame as a sum of one convolution per temporal tap, each on its frame in
    place (the last ``pt`` cache frames, then ``x``): no concatenated window is allocated,
    only the output and one tap's result at a time. Serves a single frame with a full causal
    history (``pt == kt - 1``, at least ``pt`` cached frames); None for anything else.
    Partial sums round to ``x.dtype`` once per tap (16-bit dtypes: a few ulps from one rounding)."""
    pt, ph, pw = padding
    kt = weight.shape[2]
    if x.shape[2] != 1 or pt != kt - 1 or pt == 0 or cache is None or cache.shape[2] < pt:
        return None
    frames = [cache[:, :, cache.shape[2] - pt + k:cache.shape[2] - pt + k + 1] for k in range(pt)] + [x]
    fmt = torch.channels_last_3d if _is_channels_last(x) else torch.contiguous_format
    out = None
    for k, fr in enumerate(frames):
        part = F.conv3d(fr.to(x.dtype), weight[:, :, k:k + 1], bias if k == 0 else None, padding=(0, ph, pw))
        out = part if out is None else out.add_(part)
        del part
    return out.contiguous(memory_format=fmt)


def new_cache(x: torch.Tensor, cache: Optional[torch.Tensor], frames: int) -> torch.Tensor:
    """The last ``frames`` frames of ``[cache, x]`` along time (fewer if there are fewer), as a
    new tensor in ``x``'s memory format."""
    T = x.shape[2]
    if T >= frames or cache is None:
        src = x[:, :, max(T - frames, 0):]
    else:
        src = torch.cat([cache[:, :, max(cache.shape[2] - (frames - T), 0):].to(x.dtype), x], dim=2)
    out = _empty_like_layout(x, src.shape)
    return out.copy_(src)


# ---------------------------------------------------------------------------- op

def _fake(x, weight, bias, padding, cache, force=False):
    shape = _out_shape(x, weight, padding)
    if _is_channels_last(x):
        return torch.empty(shape, dtype=x.dtype, device=x.device).contiguous(memory_format=torch.channels_last_3d)
    return torch.empty(shape, dtype=x.dtype, device=x.device)


#: The implicit-GEMM kernel on compiled GPUs. Off: on the H200 (triton 3.6) it ran at
#: 0.41-0.56x of cuDNN on the Wan decoder shapes, while the lean PyTorch path (spatial padding
#: inside ``F.conv3d``, only the cached frames concatenated) ran at 1.03-1.31x of
#: ``F.pad`` + ``F.conv3d`` (docs/perf-notes.md). The kernel still serves Triton's interpreter
#: (tests) and ``optimize_vae(conv="triton")``.
KERNEL_ON_GPU = False


def _kernel_ok(x: torch.Tensor, force: bool = False) -> bool:
    return x.dtype in KERNEL_DTYPES and use_triton(x) and (INTERPRET or KERNEL_ON_GPU or force)


@register_op("causal_conv3d", fake=_fake)
def _causal_conv3d_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], padding: List[int],
                      cache: Optional[torch.Tensor], force: bool = False) -> torch.Tensor:
    if not _kernel_ok(x, force):
        return reference_causal_conv3d(x, weight, bias, padding, cache)
    out = _empty_like_layout(x, _out_shape(x, weight, padding))
    return igemm_conv(x, weight, bias, out, padding, cache=cache)


def _int_triple(name: str, v) -> tuple:
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v, v)
    if (not isinstance(v, (tuple, list)) or len(v) != 3
            or any(isinstance(p, bool) or not isinstance(p, int) for p in v)):
        raise TypeError(f"{name}: expected an int or 3 ints (pt, ph, pw), got {v!r}")
    if any(p < 0 for p in v):
        raise ValueError(f"{name}: expected non-negative padding, got {tuple(v)}")
    return tuple(v)


def check_conv3d_args(x, weight, bias, padding, cache) -> tuple:
    """Validate ``causal_conv3d``'s arguments; returns the padding as (pt, ph, pw)."""
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    check_tensor("weight", weight)
    if x.dim() != 5:
        raise ValueError(f"x: expected a 5-D (B, C_in, T, H, W) tensor, got shape {tuple(x.shape)}")
    if weight.dim() != 5:
        raise ValueError(f"weight: expected a 5-D (C_out, C_in, kt, kh, kw) tensor, got shape {tuple(weight.shape)}")
    if weight.dtype != x.dtype:
        raise TypeError(f"weight: expected dtype {x.dtype} (x's), got {weight.dtype}")
    if weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight: expected {x.shape[1]} input channels (x.shape[1]; groups=1 only), "
                         f"got weight of shape {tuple(weight.shape)}")
    if weight.device != x.device:
        raise ValueError(f"weight: expected device {x.device} (x's), got {weight.device}")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.shape != (weight.shape[0],) or bias.dtype != x.dtype or bias.device != x.device:
            raise ValueError(f"bias: expected shape ({weight.shape[0]},), dtype {x.dtype} on {x.device}, "
                             f"got {tuple(bias.shape)}, {bias.dtype} on {bias.device}")
    padding = _int_triple("padding", padding)
    if cache is not None:
        check_tensor("cache", cache)
        B, C, _, H, W = x.shape
        if (cache.dim() != 5 or cache.shape[:2] != (B, C) or cache.shape[3:] != (H, W)):
            raise ValueError(f"cache: expected shape ({B}, {C}, frames, {H}, {W}), got {tuple(cache.shape)}")
        if cache.dtype != x.dtype or cache.device != x.device:
            raise ValueError(f"cache: expected dtype {x.dtype} on {x.device} (x's), got {cache.dtype} on {cache.device}")
    shape = _out_shape(x, weight, padding)
    if min(shape[2:]) < 1:
        raise ValueError(f"padding: the output would have shape {tuple(shape)}: x {tuple(x.shape)} with padding "
                         f"{padding} is smaller than the kernel {tuple(weight.shape[2:])}")
    return padding


def causal_conv3d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  padding=(0, 0, 0), cache: Optional[torch.Tensor] = None
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """A 3-D convolution causal in time and zero-padded in space, without padded copies.

    Equal to ``F.conv3d(F.pad(torch.cat([cache, x], 2), (pw, pw, ph, ph, pt - c, 0)), weight, bias)``
    (what Wan's and Qwen-Image's ``CausalConv3d`` compute; ``c`` cache frames), with the
    padding and the cache folded into the convolution's index arithmetic.

    Parameters
    ----------
    x : (B, C_in, T, H, W), float16 / bfloat16 / float32 (float64 takes the PyTorch path).
        Any strides; channels-last-3d (``x.stride(1) == 1``) is the fast layout.
    weight : (C_out, C_in, kt, kh, kw), x's dtype. Stride 1, dilation 1, groups 1.
    bias : (C_out,) or None.
    padding : (pt, ph, pw) (or one int): ``pt`` frames before the first (none after),
        ``ph`` rows above and below, ``pw`` columns left and right. Wan's ``padding=1``
        module is ``(2, 1, 1)`` here.
    cache : (B, C_in, c, H, W) or None: the frames before ``x`` (the previous chunk's last
        ones). The last ``min(c, pt)`` of them take the place of that many zero frames.

    Returns
    -------
    ``(out, new_cache)``: out (B, C_out, T + pt - kt + 1, H + 2ph - kh + 1, W + 2pw - kw + 1)
    in x's memory format; new_cache: the last ``min(pt, c + T)`` frames of ``[cache, x]``,
    a new tensor to pass as ``cache`` with the next chunk. Inference only: a call that needs
    autograd takes the PyTorch path. The Triton path computes in float32 (tensor cores for
    16-bit inputs, exact products for float32).

    Raises
    ------
    TypeError for non-float input, a weight dtype other than x's, a malformed padding;
    ValueError for wrong ranks, mismatched channels, a cache of the wrong shape, negative
    padding, or an output with no positions.

    Example
    -------
    >>> x = torch.randn(1, 8, 4, 16, 16)
    >>> w = torch.randn(8, 8, 3, 3, 3)
    >>> out, cache = fastpath.causal_conv3d(x, w, padding=(2, 1, 1))  # out: (1, 8, 4, 16, 16)
    >>> out2, cache = fastpath.causal_conv3d(x_next, w, padding=(2, 1, 1), cache=cache)
    """
    padding = check_conv3d_args(x, weight, bias, padding, cache)
    out = conv3d_forward(x, weight, bias, padding, cache)
    return out, new_cache(x, cache, padding[0])


def conv3d_forward(x, weight, bias, padding, cache, use_kernel: Optional[bool] = None) -> torch.Tensor:
    """``causal_conv3d``'s output only (checked arguments). ``use_kernel`` False forces the PyTorch
    path; None: the kernel where Triton serves x and no autograd is needed."""
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias, cache))
    if use_kernel is False or grad:
        return reference_causal_conv3d(x, weight, bias, padding, cache)
    return _causal_conv3d_op(x, weight, bias, list(padding), cache, bool(use_kernel))

