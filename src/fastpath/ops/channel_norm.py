"""``channel_rms_norm``: L2 normalisation over the channel dimension with a per-channel scale
and shift, and an optional SiLU, in one kernel (the ``WanRMS_norm`` / ``QwenImageRMS_norm``
of diffusers' Wan and Qwen-Image VAEs, followed by the SiLU of their residual blocks).

``y = x / max(||x||_2 over dim 1, eps) * scale * gamma[c] + bias[c]``, then ``y * sigmoid(y)``
with ``silu``: float32 arithmetic and one rounding to ``x.dtype`` (the stock composition
rounds after the normalisation, each product, the add and the SiLU).

Layout: ``x`` of shape ``(B, C, *spatial)`` is seen as ``(B, C, S)``. The host merges the
spatial dimensions whose strides nest in both ``x`` and the output (one dimension for
contiguous and channels-last tensors and for frame slices; at most three for crops). A
program holds a ``[C_PAD, BLOCK_S]`` tile (``C_PAD`` = next power of two >= C) of one batch
entry in registers: the sum of squares is reduced over the channel axis, the tile is
normalised and stored; one read and one write of the data. The unit stride (spatial for
contiguous tensors, channel for channels-last) is specialised by Triton, so loads and
stores vectorise along it in either layout. Offsets are int32 unless a batch entry spans
``2**31`` elements.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, tl, triton, triton_reason, needs_grad, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .norm import round_to

#: Widest channel tile held in registers; more channels take the reference path.
MAX_C_PAD = 4096
#: Elements per program aimed at, the most allowed, and the fewest spatial positions per
#: channel row (16 x 2 bytes: a full 32-byte sector in contiguous layouts). The interpreter
#: uses small tiles so that CI runs many programs and the masked edges.
TILE = 256 if INTERPRET else 8192
MAX_TILE = 1024 if INTERPRET else 16384
MIN_BLOCK_S = 4 if INTERPRET else 16
#: Offsets reaching this many elements switch the kernel to int64 index arithmetic.
INT32_LIMIT = 2**31


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _spatial_offsets(s, S1, S2, st0, st1, st2, NDIM: tl.constexpr):
    """Element offsets of flat spatial positions ``s`` in a layout of up to three merged dims."""
    if NDIM == 1:
        return s * st2
    elif NDIM == 2:
        return (s // S2) * st1 + (s % S2) * st2
    else:
        t = s // S2
        return (t // S1) * st0 + (t % S1) * st1 + (s % S2) * st2


@triton.jit
def _channel_norm_kernel(x_ptr, g_ptr, b_ptr, i_ptr, y_ptr, C, S, S1, S2, n_sblk,
                         sxb, sxc, sx0, sx1, sx2, syb, syc, sy0, sy1, sy2, sg, sbias, sib,
                         scale, eps, bias_value,
                         NDIM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_IN_BIAS: tl.constexpr,
                         SILU: tl.constexpr,
                         IDX64: tl.constexpr, ROUND_BITS: tl.constexpr,
                         C_PAD: tl.constexpr, BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // n_sblk).to(tl.int64)
    s = (pid % n_sblk) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.arange(0, C_PAD)
    cmask = c < C
    mask = cmask[:, None] & (s < S)[None, :]
    if IDX64:
        s = s.to(tl.int64)
        c = c.to(tl.int64)
    xo = _spatial_offsets(s, S1, S2, sx0, sx1, sx2, NDIM)
    yo = _spatial_offsets(s, S1, S2, sy0, sy1, sy2, NDIM)
    x = tl.load(x_ptr + b * sxb + c[:, None] * sxc + xo[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_IN_BIAS:
        x += tl.load(i_ptr + c * sib, mask=cmask, other=0.0).to(tl.float32)[:, None]
    norm = tl.sqrt_rn(tl.sum(x * x, axis=0))
    norm = tl.where(norm < eps, eps, norm)  # max(norm, eps); NaN stays NaN, as in PyTorch
    inv = tl.div_rn(tl.full([BLOCK_S], 1.0, tl.float32) * scale, norm)
    g = tl.load(g_ptr + c * sg, mask=cmask, other=0.0).to(tl.float32)
    y = x * inv[None, :] * g[:, None] + bias_value
    if HAS_BIAS:
        y += tl.load(b_ptr + c * sbias, mask=cmask, other=0.0).to(tl.float32)[:, None]
    if SILU:
        y = y / (1.0 + tl.exp(-y))
    if ROUND_BITS:  # the interpreter truncates float32 -> bfloat16 casts; the GPU rounds
        out = round_to(y, y_ptr.dtype.element_ty)
    else:
        out = y.to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + b * syb + c[:, None] * syc + yo[None, :], out, mask=mask)


# ---------------------------------------------------------------------------- launcher

_KERNEL = Launcher(_channel_norm_kernel)


def _merge_spatial(shape, xs, ys):
    """``(sizes, x strides, y strides)`` of the spatial dims with size-1 dims dropped and
    neighbours merged where their strides nest in both tensors; at least one dim."""
    dims = []
    for n, a, b in zip(shape, xs, ys):
        if n == 1:
            continue
        if dims and dims[-1][1] == n * a and dims[-1][2] == n * b:
            dims[-1] = (dims[-1][0] * n, a, b)
        else:
            dims.append((n, a, b))
    return dims or [(1, 0, 0)]


def _output(x: torch.Tensor) -> torch.Tensor:
    """A new tensor laid out as ``torch.empty_like(x)`` (x's memory format), poisoned in tests."""
    y = torch.empty_like(x)
    if alloc.POISON:
        y.fill_(float("nan"))
    return y


def _blocks(c_pad: int, S: int):
    block_s = max(TILE // c_pad, min(MIN_BLOCK_S, max(1, MAX_TILE // c_pad)))
    block_s = min(block_s, next_pow2(S))
    return block_s, max(1, min(16, c_pad * block_s // 1024))


def _launch(x, gamma, bias, bias_value, scale, eps, silu, in_bias=None):
    B, C = x.shape[:2]
    y = _output(x)
    if x.numel() == 0:
        return y
    dims = _merge_spatial(x.shape[2:], x.stride()[2:], y.stride()[2:])
    ndim = len(dims)
    if ndim > 3:  # cannot happen for inputs up to 5-D; kept as a guard
        return reference_channel_rms_norm(x, gamma, bias if bias is not None else bias_value,
                                          scale=scale, eps=eps, silu=silu, input_bias=in_bias)
    dims = [(1, 0, 0)] * (3 - ndim) + dims
    S = dims[0][0] * dims[1][0] * dims[2][0]
    c_pad = next_pow2(C)
    block_s, warps = _blocks(c_pad, S)
    n_sblk = cdiv(S, block_s)
    g = gamma.reshape(-1)
    bt = bias.reshape(-1) if bias is not None else g
    it = in_bias.reshape(-1) if in_bias is not None else g
    strides = [x.stride(1), y.stride(1)] + [d[1] for d in dims] + [d[2] for d in dims]
    reach = (max(x.stride(1), y.stride(1)) * (c_pad + 1) + sum(d[0] * max(d[1], d[2]) for d in dims)
             + (block_s + 1) * max(strides))
    _KERNEL[(B * n_sblk,)](
        x, g, bt, it, y, C, S, dims[1][0], dims[2][0], n_sblk,
        x.stride(0), x.stride(1), dims[0][1], dims[1][1], dims[2][1],
        y.stride(0), y.stride(1), dims[0][2], dims[1][2], dims[2][2], g.stride(0), bt.stride(0), it.stride(0),
        float(scale), float(eps), float(bias_value),
        NDIM=ndim, HAS_BIAS=bias is not None, HAS_IN_BIAS=in_bias is not None, SILU=bool(silu),
        IDX64=reach >= INT32_LIMIT,
        ROUND_BITS=INTERPRET and x.dtype == torch.bfloat16, C_PAD=c_pad, BLOCK_S=block_s,
        num_warps=warps)
    return y


# ---------------------------------------------------------------------------- reference

def reference_channel_rms_norm(x: torch.Tensor, gamma: torch.Tensor, bias=None, *,
                               scale: Optional[float] = None, eps: float = 1e-12,
                               silu: bool = False, input_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """PyTorch path: float32 arithmetic (float64 for float64 inputs), one cast at the end."""
    C = x.shape[1]
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    shape = (1, C) + (1,) * (x.dim() - 2)
    h = x.to(ct)
    if input_bias is not None:
        h = h + input_bias.reshape(shape).to(ct)
    norm = torch.linalg.vector_norm(h, dim=1, keepdim=True).clamp_min(eps)
    y = h / norm * (C ** 0.5 if scale is None else float(scale)) * gamma.reshape(shape).to(ct)
    if isinstance(bias, torch.Tensor):
        y = y + bias.reshape(shape).to(ct)
    elif bias is not None:
        y = y + float(bias)
    if silu:
        y = torch.nn.functional.silu(y)
    return y.to(x.dtype)


# ---------------------------------------------------------------------------- op

def _fake(x, gamma, bias, bias_value, scale, eps, silu, input_bias=None):
    return torch.empty_like(x)


@register_op("channel_rms_norm", fake=_fake)
def _channel_norm_op(x: torch.Tensor, gamma: torch.Tensor, bias: Optional[torch.Tensor],
                     bias_value: float, scale: float, eps: float, silu: bool,
                     input_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    if not use_triton(x) or x.dtype not in KERNEL_DTYPES or next_pow2(x.shape[1]) > MAX_C_PAD:
        b = bias if bias is not None else bias_value
        return reference_channel_rms_norm(x, gamma, b, scale=scale, eps=eps, silu=silu, input_bias=input_bias)
    return _launch(x, gamma, bias, bias_value, scale, eps, silu, input_bias)


def _real(name: str, v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected {what}, got {type(v).__name__}")
    return float(v)


def _check_param(name: str, t: torch.Tensor, x: torch.Tensor) -> None:
    check_tensor(name, t)
    if t.dtype != x.dtype:
        raise TypeError(f"{name}: expected x's dtype {x.dtype}, got {t.dtype}")
    if t.numel() != x.shape[1]:
        raise ValueError(f"{name}: expected {x.shape[1]} elements (x's channels, dim 1), got shape "
                         f"{tuple(t.shape)}")
    if t.device != x.device:
        raise ValueError(f"{name}: expected a tensor on {x.device}, got {t.device}")


def channel_rms_norm(x: torch.Tensor, gamma: torch.Tensor, bias=None, *,
                     scale: Optional[float] = None, eps: float = 1e-12,
                     silu: bool = False, input_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """L2 normalisation over the channel dimension (dim 1), scaled and shifted per channel,
    with an optional SiLU: the ``RMS_norm`` (+ ``SiLU``) of diffusers' Wan and Qwen-Image VAEs.

    ``y = x / max(||x||_2 over dim 1, eps) * scale * gamma[c] + bias[c]``
    (``x + input_bias[c]`` in place of ``x`` where ``input_bias`` is given), then
    ``y = y * sigmoid(y)`` if ``silu``. Arithmetic in float32 with one rounding to
    ``x.dtype`` at the end; the stock ``F.normalize(x.float(), dim=1).to(x.dtype) * scale *
    gamma + bias`` (then ``F.silu``) rounds several times, so 16-bit results differ from it
    by a few units in the last place and are closer to the exact value.

    Parameters
    ----------
    x : Tensor ``(B, C, *spatial)`` with 1 to 3 spatial dims (``(B, C, L)``, ``(B, C, H, W)``,
        ``(B, C, T, H, W)``), float16 / bfloat16 / float32 (float64 takes the reference path).
        Any strides: contiguous, channels_last / channels_last_3d and views such as frame
        slices ``x[:, :, t:t+1]`` or crops are read in place, without a copy.
    gamma : Tensor with ``C`` elements (``(C,)``, ``(C, 1, 1)``, ``(C, 1, 1, 1)``), ``x``'s
        dtype and device.
    bias : None (no shift), a Python float added to every element, or a tensor like ``gamma``.
    scale : multiplier of the normalised values; None means ``sqrt(C)`` (RMS normalisation).
    eps : lower bound of the norm (``F.normalize``'s default 1e-12); an all-zero vector gives
        ``bias`` (``silu(bias)`` with ``silu``).
    silu : apply SiLU to the result (fused, no extra pass).
    input_bias : None, or a tensor like ``gamma`` added to ``x`` per channel (in float32) before
        the normalisation: the bias of the convolution that produced ``x``, folded in.

    Returns
    -------
    A new tensor of ``x``'s shape and dtype in ``x``'s memory format (as ``torch.empty_like``:
    contiguous stays contiguous, channels-last stays channels-last, non-dense views give a
    dense tensor). No host synchronisation (CUDA-graph capturable);
    ``torch.compile(fullgraph=True)`` traces it. Under autograd (an input that requires grad)
    the PyTorch path, which autograd records. More than 4096 channels take
    the PyTorch path.

    Raises
    ------
    TypeError for non-tensor or non-floating ``x``, ``gamma``/``bias`` of another dtype than
    ``x``, a ``bias`` that is neither None, a float nor a tensor, or a non-numeric ``scale`` /
    ``eps``; ValueError for ``x`` with fewer than 3 dims, ``gamma``/``bias`` without ``C``
    elements or on another device, a negative ``eps``.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.channel_norm import channel_rms_norm
    >>> x = torch.randn(1, 96, 2, 60, 104, dtype=torch.bfloat16)
    >>> gamma = torch.ones(96, 1, 1, 1, dtype=torch.bfloat16)
    >>> y = channel_rms_norm(x, gamma, 0.0, silu=True)  # WanRMS_norm then SiLU
    >>> y.shape, y.dtype
    (torch.Size([1, 96, 2, 60, 104]), torch.bfloat16)
    """
    check_tensor("x", x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"x: expected a floating-point tensor, got {x.dtype}")
    if x.dim() < 3:
        raise ValueError(f"x: expected a (B, C, *spatial) tensor with 3 to 5 dims, got shape {tuple(x.shape)}")
    if x.dim() > 5:
        raise ValueError(f"x: expected a (B, C, *spatial) tensor with 3 to 5 dims, got {x.dim()} dims")
    _check_param("gamma", gamma, x)
    bias_value, bias_t = 0.0, None
    if isinstance(bias, torch.Tensor):
        _check_param("bias", bias, x)
        bias_t = bias
    elif bias is not None:
        bias_value = _real("bias", bias, "None, a float or a tensor")
    if input_bias is not None:
        _check_param("input_bias", input_bias, x)
    scale = x.shape[1] ** 0.5 if scale is None else _real("scale", scale, "a real number or None")
    eps = _real("eps", eps, "a non-negative float")
    if not eps >= 0:
        raise ValueError(f"eps: expected a non-negative float, got {eps!r}")
    if needs_grad(x, gamma, bias_t, input_bias):  # the kernel has no backward: torch's ops, which autograd records
        return reference_channel_rms_norm(x, gamma, bias, scale=scale, eps=eps, silu=silu, input_bias=input_bias)
    return _channel_norm_op(x, gamma, bias_t, bias_value, scale, eps, bool(silu), input_bias)


FAMILY = {"name": "channel_norm", "ops": ["channel_rms_norm"], "reason": triton_reason}
