"""``add_bias_residual``: ``x + h + bias[c]`` in one pass, written into ``x``, for a residual
block whose last convolution ran without its bias (its output ``x``, the shortcut ``h``).

The stock composition (the convolution adds its bias, then ``x + h``) reads and writes the
activation twice and rounds twice; here float32 arithmetic, one rounding, one pass. ``x`` and
``h`` must share their shape, dtype and dense layout (contiguous or channels-last(-3d)): the
kernel walks the storage in order, the channel of a flat position being ``i % C``
(channels-last) or ``(i // spatial) % C`` (contiguous). Anything else takes the PyTorch path.
"""
from __future__ import annotations

import torch

from .._core.backend import INTERPRET, tl, triton, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv
from .elementwise import _flat
from .norm import round_to

BLOCK = 256 if INTERPRET else 4096
#: Flat offsets reaching this many elements switch the kernel to int64 index arithmetic.
INT32_LIMIT = 2**31


@triton.jit
def _add_bias_residual_kernel(x_ptr, h_ptr, b_ptr, n, C, S, CHANNELS_LAST: tl.constexpr,
                              IDX64: tl.constexpr, ROUND_BITS: tl.constexpr, BLOCK: tl.constexpr):
    offs = _flat(BLOCK, IDX64)
    m = offs < n
    if CHANNELS_LAST:
        c = offs % C
    else:
        c = (offs // S) % C
    y = (tl.load(x_ptr + offs, mask=m).to(tl.float32) + tl.load(h_ptr + offs, mask=m).to(tl.float32)
         + tl.load(b_ptr + c, mask=m).to(tl.float32))
    if ROUND_BITS:  # the interpreter truncates float32 -> bfloat16 casts; the GPU rounds
        out = round_to(y, x_ptr.dtype.element_ty)
    else:
        out = y.to(x_ptr.dtype.element_ty)
    tl.store(x_ptr + offs, out, mask=m)


_KERNEL = Launcher(_add_bias_residual_kernel)


def _layout(x: torch.Tensor):
    """``"last"`` (channels-last storage order), ``"first"`` (contiguous) or None."""
    if x.dim() in (4, 5) and x.shape[1] > 1 and x.stride(1) == 1:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        if x.is_contiguous(memory_format=fmt):
            return "last"
    return "first" if x.is_contiguous() else None


def add_bias_residual(x: torch.Tensor, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x += h + bias`` (bias per channel, dim 1) in one pass; returns ``x``.

    Parameters
    ----------
    x : Tensor ``(B, C, *spatial)``, overwritten (no autograd); the kernel serves float16 /
        bfloat16 / float32 in a dense layout, anything else is computed by PyTorch in place.
    h : Tensor of ``x``'s shape and dtype (the shortcut).
    bias : Tensor with ``C`` elements, ``x``'s dtype.

    Raises
    ------
    TypeError for non-tensors or dtypes that differ from ``x``'s; ValueError for ``h`` of
    another shape, ``bias`` without ``C`` elements, or tensors on different devices.
    """
    for name, t in (("x", x), ("h", h), ("bias", bias)):
        check_tensor(name, t)
        if t.dtype != x.dtype:
            raise TypeError(f"{name}: expected x's dtype {x.dtype}, got {t.dtype}")
        if t.device != x.device:
            raise ValueError(f"{name}: expected a tensor on {x.device}, got {t.device}")
    if x.dim() < 2 or h.shape != x.shape:
        raise ValueError(f"h: expected x's shape {tuple(x.shape)}, got {tuple(h.shape)}")
    if bias.numel() != x.shape[1]:
        raise ValueError(f"bias: expected {x.shape[1]} elements (x's channels, dim 1), got shape {tuple(bias.shape)}")
    layout = _layout(x)
    if not use_triton(x) or x.dtype not in KERNEL_DTYPES or layout is None or _layout(h) != layout or x.numel() == 0:
        return x.add_(h).add_(bias.reshape((1, -1) + (1,) * (x.dim() - 2)))
    n = x.numel()
    b = bias.reshape(-1).contiguous()
    _KERNEL[(cdiv(n, BLOCK),)](x, h, b, n, x.shape[1], n // (x.shape[0] * x.shape[1]),
                               CHANNELS_LAST=layout == "last", IDX64=n + BLOCK >= INT32_LIMIT,
                               ROUND_BITS=INTERPRET and x.dtype == torch.bfloat16, BLOCK=BLOCK, num_warps=8)
    return x
