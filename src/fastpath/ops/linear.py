"""``linear``: ``F.linear`` for decode (few rows), with an optional FP8 weight-only variant.

Rows (the product of the leading dimensions of ``x``) up to ``MAX_GEMV_ROWS`` = 16 take the
matrix-vector kernel of :mod:`fastpath.ops.matvec` (shared with small-M ``scaled_mm``);
more rows call ``torch.nn.functional.linear`` (cuBLAS, the best bf16 matmul available there).

* A program owns ``BLOCK_N`` output features for *all* rows, so each weight byte is read
  from memory once for every row, and reduces its share of K in float32: 16-bit inputs on
  a 16-row ``tl.dot`` tile, one row (fp8 weights up to 32M elements, and above without SwiGLU;
  16-bit weights up to 32M elements without SwiGLU; float32 weights, SwiGLU too, not under a norm)
  by a float32 product-and-sum whose loads run a few K tiles ahead through shared memory (measured
  fastest on the H200); float32 at 2-4 rows by a product-and-sum over (rows, K, columns) tiles;
  float32 from 5 rows on a 16-row dot of three TF32 tensor-core passes (float32-level accuracy;
  exact products on ROCm).
* Split-K when ``N / BLOCK_N`` programs are too few to give every multiprocessor work:
  float32 partials, added in a fixed order by the last program of each column block, in
  the same launch (deterministic).
* FP8 weights (``weight_scale`` given): loaded as ``float8_e4m3fn`` and converted in
  registers on NVIDIA GPUs of compute capability 8.9 or newer, or read as ``uint8`` and
  decoded with integer operations elsewhere (older GPUs, ROCm, and the interpreter, whose
  own float8 conversion reads the NaN code 0x7F as 480); the float32 sums are multiplied
  by the per-output-row scale in the epilogue.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import num_sms, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import cdiv
from .._core.autocast import autocast_dtype, cast
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from . import matvec
from .fp8.bits import fp8_load_mode
from .fp8.scaled_mm import dequantize_rows, weight_mm
from .matvec import Operand
from .norm import _check as norm_check, _rows, rms_norm

_FP8 = getattr(torch, "float8_e4m3fn", None)

#: Rows (product of the leading dims of x) served by the GEMV kernel; more go to F.linear.
MAX_GEMV_ROWS = 16
#: FP8 weights, 16-bit activations, more rows than that (batched decode, prefill): "tiled"
#: (``scaled_mm.weight_mm``: up to 64 rows each fp8 weight tile streamed once a row tile into a
#: tensor-core dot, from 65 rows, and for float32 x, the weight dequantised to x.dtype by one
#: kernel for cuBLAS), or
#: "dequantise" (PyTorch ops through float32 temporaries). H200 against bf16
#: F.linear over six decode shapes (scripts/fp8_rows_probe.py, 200399d and c105b05): 17 / 32 / 64
#: rows 0.79 / 0.80 / 0.65x (geometric means), 512 rows 0.63-0.75x, 2048 rows 0.86-0.92x;
#: "dequantise" 0.07-0.13x up to 128 rows, 0.16-0.21x at 512, 0.47-0.50x at 2048. (The
#: matrix-vector kernel in 16-row chunks, or one 64-row tile a program: 0.67 / 0.81x at 17 rows,
#: 0.58x at 64; not kept.)
FP8_MANY_ROWS = "tiled"


# ---------------------------------------------------------------------------- launcher

#: Tests set this: force the FP8 decoding ("native" loads float8 tensors, "bits" decodes
#: uint8 bits). Block sizes and split-K live in :func:`fastpath.ops.matvec.plan`.
FP8_DECODE: Optional[str] = None


def _fp8_mode(device: torch.device) -> int:
    return fp8_load_mode(device, FP8_DECODE)


def _launch(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            weight_scale: Optional[torch.Tensor], glu: bool = False,
            norm: Optional[matvec.Norm] = None) -> torch.Tensor:
    K = x.shape[-1]
    N = weight.shape[0]
    x2 = _rows(x, K)
    M = x2.shape[0]
    N //= 2 if glu else 1
    y = alloc.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y.view(*x.shape[:-1], N)
    plain_norm = norm is not None and not (norm.deferred or norm.group)
    w = Operand(weight.t())
    if weight_scale is not None:
        mode = _fp8_mode(x.device)
        w = Operand((weight.view(torch.uint8) if mode == 2 else weight).t(), mode)
    plan = matvec.plan(M, N, K, x.device, x.dtype if x.dtype != torch.float32 else None,
                       b_bytes=1 if weight_scale is not None else weight.element_size(), norm=plain_norm,
                       group=norm.group if norm is not None else 0, glu=glu,
                       deferred=norm is not None and norm.deferred)
    matvec.launch(Operand(x2), w, y, plan=plan, sb=weight_scale,
                  sb_strides=(weight_scale.stride(0) if weight_scale is not None else 0, 0),
                  bias=bias, glu=glu, norm=norm)
    return y.view(*x.shape[:-1], N)


# ---------------------------------------------------------------------------- reference

def dequantize_weight(weight: torch.Tensor, weight_scale: torch.Tensor,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``weight.float() * weight_scale`` (per output row), cast to ``dtype``."""
    return (weight.float() * weight_scale.float().reshape(-1, 1)).to(dtype)


def reference_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     *, weight_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """PyTorch path: the oracle in tests and the path on devices Triton does not serve.

    Without ``weight_scale`` this is ``F.linear``. With it the FP8 weight is dequantised to
    float32, the product is taken in float32 and cast to ``x.dtype``."""
    if weight_scale is None:
        return F.linear(x, weight, bias)
    w = dequantize_weight(weight, weight_scale)
    b = bias.float() if bias is not None else None
    return F.linear(x.float(), w, b).to(x.dtype)


# ---------------------------------------------------------------------------- op

def _fake(x, weight, bias, weight_scale):
    return x.new_empty(*x.shape[:-1], weight.shape[0])


def _setup(ctx, inputs, output):
    x, weight, bias, weight_scale = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight, weight_scale)


def _backward(ctx, grad):
    x, weight, weight_scale = ctx.saved_tensors
    w = weight if weight_scale is None else dequantize_weight(weight, weight_scale, x.dtype)
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = grad @ w.to(grad.dtype)
    g2 = grad.reshape(-1, grad.shape[-1])
    if ctx.needs_input_grad[1] and weight_scale is None:
        gw = (g2.t() @ x.reshape(-1, x.shape[-1])).to(weight.dtype)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        gb = g2.sum(0)
    return gx, gw, gb, None


@register_op("linear", fake=_fake, backward=_backward, setup_context=_setup)
def _linear_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
               weight_scale: Optional[torch.Tensor]) -> torch.Tensor:
    rows = x.numel() // max(x.shape[-1], 1) if x.dim() > 0 else 1
    if (x.dim() < 1 or rows > MAX_GEMV_ROWS or not use_triton(x) or x.dtype not in KERNEL_DTYPES):
        if weight_scale is None:
            return F.linear(x, weight, bias)
        if not use_triton(x) or x.dtype not in KERNEL_DTYPES:
            return reference_linear(x, weight, bias, weight_scale=weight_scale)
        if FP8_MANY_ROWS == "dequantise":
            return F.linear(x, dequantize_weight(weight, weight_scale, x.dtype), bias)
        if x.dtype == torch.float32:  # dequantised in one pass (a temporary N x K in float32), cuBLAS
            return F.linear(x, dequantize_rows(weight, weight_scale, x.dtype), bias)
        return weight_mm(_rows(x, x.shape[-1]), weight, weight_scale, bias).view(*x.shape[:-1], weight.shape[0])
    return _launch(x, weight, bias, weight_scale)


def _shape(t: torch.Tensor) -> tuple:
    return tuple(t.shape)


def _checked(x, weight, bias, weight_scale):
    check_tensor("input", x)
    check_tensor("weight", weight)
    if x.dim() < 1:
        raise ValueError("input: expected at least 1 dimension (..., in_features), got a 0-d tensor")
    if not x.dtype.is_floating_point:
        raise TypeError(f"input: expected a floating-point tensor, got {x.dtype}")
    if weight.dim() != 2:
        raise ValueError(f"weight: expected shape (out_features, in_features), got {_shape(weight)}")
    K = x.shape[-1]
    if weight.shape[1] != K:
        raise ValueError(f"weight: expected shape (out_features, {K}) to match input's last dimension "
                         f"{K}, got {_shape(weight)}")
    if weight.device != x.device:
        raise ValueError(f"weight: expected a tensor on {x.device} like input, got {weight.device}")
    N = weight.shape[0]
    if weight_scale is None:
        if _FP8 is not None and weight.dtype == _FP8:
            raise TypeError("weight: a float8_e4m3fn weight needs weight_scale (float32, shape "
                            f"({N}, 1)); got weight_scale=None")
        if weight.dtype != x.dtype:
            raise TypeError(f"weight: expected dtype {x.dtype} like input, got {weight.dtype}")
    else:
        check_tensor("weight_scale", weight_scale)
        if _FP8 is None or weight.dtype != _FP8:
            raise TypeError(f"weight: weight_scale needs a float8_e4m3fn weight, got {weight.dtype}")
        if weight_scale.dtype != torch.float32:
            raise TypeError(f"weight_scale: expected dtype float32, got {weight_scale.dtype}")
        if _shape(weight_scale) not in ((N, 1), (N,)):
            raise ValueError(f"weight_scale: expected shape ({N}, 1) or ({N},) (one scale per output "
                             f"row), got {_shape(weight_scale)}")
        if weight_scale.device != x.device:
            raise ValueError(f"weight_scale: expected a tensor on {x.device} like input, got "
                             f"{weight_scale.device}")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.dtype != x.dtype:
            raise TypeError(f"bias: expected dtype {x.dtype} like input, got {bias.dtype}")
        if _shape(bias) != (N,):
            raise ValueError(f"bias: expected shape ({N},), got {_shape(bias)}")
        if bias.device != x.device:
            raise ValueError(f"bias: expected a tensor on {x.device} like input, got {bias.device}")


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
           weight_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``y = x @ weight.T + bias``, with the semantics of ``torch.nn.functional.linear``,
    fast for decode (few rows), with an optional FP8 weight-only variant.

    Parameters
    ----------
    x : Tensor ``(..., K)``, float16 / bfloat16 / float32, any strides (leading dims that
        cannot be collapsed into one are copied once).
    weight : Tensor ``(N, K)``, the same dtype as ``x``, any strides (row-major reads best);
        or ``float8_e4m3fn`` together with ``weight_scale``.
    bias : optional Tensor ``(N,)``, the same dtype as ``x``.
    weight_scale : optional float32 Tensor ``(N, 1)`` or ``(N,)``: per-output-row scale of an
        FP8 weight; the product is ``x @ (weight.float() * weight_scale).T``.

    Returns
    -------
    Tensor ``(..., N)`` of ``x.dtype``. Arithmetic is float32 (one rounding at the end).

    Paths: with at most 16 rows (product of the leading dims) a Triton matrix-vector kernel
    reads each weight byte once for all rows, splitting K over programs when N alone does
    not fill the GPU (deterministic, one launch). More than 16 rows call
    ``torch.nn.functional.linear`` (cuBLAS is the best bf16 matmul there); with an FP8 weight
    and 16-bit ``x`` (:func:`fastpath.ops.fp8.scaled_mm.weight_mm`), up to 64 rows a tiled
    Triton matmul that converts the weight tiles in registers, from 65 rows the weight
    dequantised to ``x.dtype`` by one kernel (a temporary ``N x K``), then cuBLAS (float32 ``x``:
    that at any row count). No host
    synchronisation: capturable in a CUDA graph. Autograd (gradients of ``x``, ``bias`` and a
    non-FP8 ``weight``) and ``torch.compile(fullgraph=True)`` are supported. On devices
    Triton does not serve, and for float64, :func:`reference_linear` runs.

    Raises
    ------
    TypeError if a dtype does not match ``x`` (naming the argument), a float8 weight comes
    without ``weight_scale`` or ``weight_scale`` with a non-float8 weight or is not float32;
    ValueError for a shape mismatch (``weight``'s K, ``bias``, ``weight_scale``) or tensors on
    different devices.

    Example
    -------
    >>> import torch, fastpath
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> x = torch.randn(1, 1, 4096, dtype=torch.bfloat16, device=dev)
    >>> w = torch.randn(11008, 4096, dtype=torch.bfloat16, device=dev)
    >>> fastpath.linear(x, w).shape
    torch.Size([1, 1, 11008])
    """
    dt = autocast_dtype(x)
    if dt is not None:  # as autocast runs F.linear: the inputs in the region's dtype
        x, weight, bias = cast(dt, x, weight, bias)
        with torch.autocast(x.device.type, enabled=False):
            return linear(x, weight, bias, weight_scale=weight_scale)
    return _MEMO.call(lambda: _checked_linear(x, weight, bias, weight_scale), (x, weight, bias, weight_scale))


def _checked_linear(x, weight, bias, weight_scale):
    _checked(x, weight, bias, weight_scale)
    return _linear_op(x, weight, bias, weight_scale)


#: Eager calls with the tensor properties of an earlier call replay its launch (fastpath._core.memo).
_MEMO = LaunchMemo()


def linear_swiglu(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
                  weight_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``silu(gate) * up`` of ``linear(x, weight, bias, weight_scale=...)`` chunked in two along
    the last dim: a SwiGLU MLP's fused gate/up projection (``weight`` ``(2I, K)``, gate rows
    then up rows) and its activation, ``(..., I)``. Up to 16 rows, one matrix-vector launch:
    each program takes matching gate and up columns and stores the activation (rounded to
    ``x.dtype`` after each op, as PyTorch's separate ops round), so neither the ``(..., 2I)``
    projection nor the two elementwise kernels exist. More rows: :func:`linear` and the two
    ops. Inference only (no autograd). Eager calls like an earlier one replay its launch
    (:mod:`fastpath._core.memo`)."""
    dt = autocast_dtype(x)
    if dt is not None:  # as autocast runs the projection (F.linear), then the activation on its output
        x, weight, bias = cast(dt, x, weight, bias)
        with torch.autocast(x.device.type, enabled=False):
            return linear_swiglu(x, weight, bias, weight_scale=weight_scale)
    return _MEMO.call(lambda: _checked_swiglu(x, weight, bias, weight_scale), (x, weight, bias, weight_scale),
                      ("swiglu",))


def _checked_swiglu(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                    weight_scale: Optional[torch.Tensor]) -> torch.Tensor:
    _checked(x, weight, bias, weight_scale)
    if weight.shape[0] % 2:
        raise ValueError(f"weight: expected an even number of rows (gate then up), got {tuple(weight.shape)}")
    rows = x.numel() // max(x.shape[-1], 1)
    if (rows > MAX_GEMV_ROWS or not use_triton(x) or x.dtype not in KERNEL_DTYPES
            or torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias))):
        g, u = _linear_op(x, weight, bias, weight_scale).chunk(2, dim=-1)
        return F.silu(g) * u
    return _launch(x, weight, bias, weight_scale, glu=True)


#: rms_norm_linear's one launch (False: the norm, then the projection; an A/B knob).
FUSE_NORM = True
#: 16-bit weights: the fused norm's rstd deferred to the end (``matvec.Norm.deferred``: any
#: weight size, the projection's own tuned plan) where its programs fill the GPU (below).
#: Otherwise (False, fp8 weights, where the H200 measured the deferred form slower, and the
#: sizes the wave rule below leaves out) every program reads the row for its rstd first, for
#: weights of up to NORM_FUSE_MAX_ELEMS only: larger ones run the norm first (the re-read costs
#: more than the norm's launch there). H200, ``scripts/norm_linear_probe.py``.
NORM_DEFER = True
NORM_FUSE_MAX_ELEMS = 16 * 2 ** 20
#: Programs of the deferred form a multiprocessor holds at once, without and with SwiGLU (the
#: launched sm_90 code, ``scripts/launch_regs.py``: 43 KB of shared memory and 64 registers a
#: program, five; with SwiGLU 75 KB, three). A deferred projection with more programs than
#: that for the GPU but fewer than DEFER_MIN_WAVES times as many runs its last wave nearly
#: empty: the norm's kernel first, then the projection's own plan, is faster there (H200,
#: Llama-3-8B's gate/up, 448 programs of 396 resident: 69.5 us deferred, 59.6 norm first, whose
#: SwiGLU plan holds two a multiprocessor and ends in a 70%-full wave; Qwen3-8B's, 384
#: programs: 49.4 against 54.4; LM heads, 6-12 waves: within 2%). ``scripts/norm_linear_probe.py
#: --dense``.
DEFER_RESIDENT_PER_SM = {False: 5, True: 3}
DEFER_MIN_WAVES = 4


def rms_norm_linear(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                    bias: Optional[torch.Tensor] = None, *, residual: Optional[torch.Tensor] = None,
                    zero_centered: bool = False, weight_scale: Optional[torch.Tensor] = None,
                    swiglu: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """``linear(rms_norm(x, norm_weight, eps, residual=residual, zero_centered=...), weight,
    bias, weight_scale=...)`` (``linear_swiglu`` with ``swiglu``): a decoder layer's norm and
    the projection after it, in one matrix-vector launch for one row (batch-1 decode).

    16-bit weights (``NORM_DEFER``): the kernel multiplies each K chunk of ``h = x (+
    residual)`` by the norm's weights as it streams the projection's weights, keeps the sum of
    ``h^2``, and multiplies the finished float32 sums by ``rsqrt(mean(h^2) + eps)``: the
    projection's own plan, no prologue, any weight size whose programs fill the GPU in one
    wave or in several (``DEFER_MIN_WAVES``; in between, as fp8 weights). The normalised row is
    not rounded to 16 bits first as :func:`~fastpath.ops.norm.rms_norm`'s output is, so results
    differ from the two calls by about one rounding of the activations (bfloat16: 2^-9
    relative). fp8 weights of up to ``NORM_FUSE_MAX_ELEMS`` (16M) elements: every program reads the row whole
    for its rstd first and rounds as ``rms_norm`` does. The programs of the first column block
    store the new residual ``h``. No norm kernel, no normalised activations in memory. More
    rows, larger fp8 weights, other devices and autograd: :func:`~fastpath.ops.norm.rms_norm`,
    then :func:`linear` (or :func:`linear_swiglu`).

    Parameters
    ----------
    x, norm_weight, eps, residual, zero_centered : as :func:`~fastpath.ops.norm.rms_norm`.
    weight, bias, weight_scale : as :func:`linear` (``weight`` ``(N, K)``, or ``(2I, K)``
        gate rows then up rows with ``swiglu``).

    Returns
    -------
    ``(y, h)``: the projection ``(..., N)`` (``(..., I)`` with ``swiglu``) and the residual
    stream ``h`` (``x + residual``, or ``x`` itself without a residual). No host
    synchronisation: capturable in a CUDA graph. No autograd.

    Raises
    ------
    The errors of :func:`~fastpath.ops.norm.rms_norm` and :func:`linear`, naming the argument.

    Example
    -------
    >>> import torch, fastpath
    >>> from fastpath.ops.linear import rms_norm_linear
    >>> d, h = (torch.randn(1, 2048, dtype=torch.bfloat16) for _ in range(2))
    >>> q, h = rms_norm_linear(d, torch.ones(2048, dtype=torch.bfloat16), 1e-6,
    ...                        torch.randn(5120, 2048, dtype=torch.bfloat16), residual=h)
    """
    return _MEMO.call(lambda: _checked_norm_linear(x, norm_weight, eps, weight, bias, residual, zero_centered,
                                                    weight_scale, swiglu),
                      (x, norm_weight, weight, bias, residual, weight_scale), (eps, zero_centered, swiglu))


def _checked_norm_linear(x, norm_weight, eps, weight, bias, residual, zero_centered, weight_scale, swiglu):
    norm_check(x, norm_weight, residual, None, "silu", eps, "x", "norm_weight")
    _checked(x, weight, bias, weight_scale)
    if swiglu and weight.shape[0] % 2:
        raise ValueError(f"weight: expected an even number of rows (gate then up), got {tuple(weight.shape)}")
    rows = x.numel() // max(x.shape[-1], 1)
    deferred = (NORM_DEFER and weight_scale is None and rows == 1
                and _defer_fills(weight.shape[0] // (2 if swiglu else 1), weight.shape[-1], x.device, x.dtype,
                                 swiglu))
    fits = rows == 1 and weight.numel() > 0 and (deferred or weight.numel() <= NORM_FUSE_MAX_ELEMS)
    if (not FUSE_NORM or not fits or not use_triton(x)
            or x.dtype not in KERNEL_DTYPES or norm_weight.dtype not in KERNEL_DTYPES or torch.is_grad_enabled()
            and any(t is not None and t.requires_grad for t in (x, norm_weight, residual, weight, bias))):
        xn = rms_norm(x, norm_weight, eps, residual=residual, zero_centered=zero_centered)
        xn, h = xn if residual is not None else (xn, x)
        project = linear_swiglu if swiglu else linear
        return project(xn, weight, bias, weight_scale=weight_scale), h
    K = x.shape[-1]
    h = alloc.empty(x.shape, dtype=x.dtype, device=x.device) if residual is not None else x
    norm = matvec.Norm(norm_weight, float(eps), _rows(residual, K) if residual is not None else None,
                       h.view(-1, K) if residual is not None else None, bool(zero_centered), deferred)
    return _launch(x, weight, bias, weight_scale, glu=swiglu, norm=norm), h


def _defer_fills(N: int, K: int, device: torch.device, dtype: torch.dtype, glu: bool = False) -> bool:
    """Whether the deferred form's programs for ``N`` output columns (of gate and up with
    ``glu``) fill the GPU in one wave or in many (``DEFER_MIN_WAVES``), not in a few with a
    near-empty last one."""
    if device.type != "cuda" or N == 0 or K == 0:
        return True
    # (the dot's plan, whose residency DEFER_RESIDENT_PER_SM gives, whatever plan the launch then takes)
    p = matvec.plan(1, N, K, device, dtype if dtype != torch.float32 else None, glu=glu, w16_dot=True)
    resident = DEFER_RESIDENT_PER_SM[bool(glu)] * num_sms(device)
    programs = cdiv(N, p.block_n) * p.split
    return programs <= resident or programs >= DEFER_MIN_WAVES * resident


#: group_rms_norm_linear's one launch (False: the gated norm's kernel, then the projection).
FUSE_GROUP_NORM = True


def group_rms_norm_linear(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, gate: torch.Tensor,
                          weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
                          weight_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``linear(rms_norm(x.unflatten(-1, (-1, G)), norm_weight, eps, gate=g).flatten(-2), weight,
    bias, weight_scale=...)`` with ``G = norm_weight.numel()`` and ``g`` the gate viewed alike:
    Qwen3.5's gated norm per value head (``RMSNormGated``: each head normalised on its own, times
    the weights and ``silu(gate)``) and the output projection after it, in one matrix-vector
    launch for one row (batch-1 decode; ``G`` a power of two). Each K tile of the projection
    holds whole heads, so the kernel normalises the tile as it loads it (no prologue), rounded
    as :func:`~fastpath.ops.norm.rms_norm` rounds. More rows, other devices and autograd: the
    norm's kernel, then :func:`linear`.

    Parameters
    ----------
    x : Tensor ``(..., K)``, ``K`` a multiple of ``G``: the heads' outputs side by side.
    norm_weight : Tensor ``(G,)``. eps : as :func:`~fastpath.ops.norm.rms_norm`.
    gate : Tensor of ``x``'s shape (read as float32).
    weight, bias, weight_scale : as :func:`linear` (``weight`` ``(N, K)``).

    Returns
    -------
    The projection ``(..., N)``. No host synchronisation: capturable in a CUDA graph.

    Raises
    ------
    ValueError when ``K`` is not a multiple of ``G`` or a shape does not match, naming the
    argument; the errors of :func:`~fastpath.ops.norm.rms_norm` and :func:`linear`.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.linear import group_rms_norm_linear
    >>> o, z = (torch.randn(1, 4096, dtype=torch.bfloat16) for _ in range(2))
    >>> y = group_rms_norm_linear(o, torch.ones(128, dtype=torch.bfloat16), 1e-6, z,
    ...                           torch.randn(2048, 4096, dtype=torch.bfloat16))
    """
    return _MEMO.call(lambda: _checked_group_norm_linear(x, norm_weight, eps, gate, weight, bias, weight_scale),
                      (x, norm_weight, gate, weight, bias, weight_scale), (eps,))


def _checked_group_norm_linear(x, norm_weight, eps, gate, weight, bias, weight_scale):
    check_tensor("x", x)
    check_tensor("norm_weight", norm_weight)
    K, G = x.shape[-1] if x.dim() else 0, norm_weight.shape[0] if norm_weight.dim() == 1 else 0
    if norm_weight.dim() != 1 or G == 0 or K % G:
        raise ValueError(f"norm_weight: expected shape (G,) with G dividing x's last dimension {K}, "
                         f"got {tuple(norm_weight.shape)}")
    check_tensor("gate", gate)
    if gate.shape != x.shape:
        raise ValueError(f"gate: expected x's shape {tuple(x.shape)}, got {tuple(gate.shape)}")
    x3, g3 = x.unflatten(-1, (K // G, G)), gate.unflatten(-1, (K // G, G))
    norm_check(x3, norm_weight, None, g3, "silu", eps, "x", "norm_weight")
    _checked(x, weight, bias, weight_scale)
    rows = x.numel() // max(K, 1)
    if (not FUSE_GROUP_NORM or rows != 1 or G & (G - 1) or weight.numel() == 0 or not use_triton(x)
            or x.dtype not in KERNEL_DTYPES or norm_weight.dtype not in KERNEL_DTYPES
            or gate.dtype not in KERNEL_DTYPES or torch.is_grad_enabled()
            and any(t is not None and t.requires_grad for t in (x, norm_weight, gate, weight, bias))):
        return linear(rms_norm(x3, norm_weight, eps, gate=g3).flatten(-2), weight, bias, weight_scale=weight_scale)
    norm = matvec.Norm(norm_weight, float(eps), group=G, gate=_rows(gate, K))
    return _launch(x, weight, bias, weight_scale, norm=norm)


FAMILY = {"name": "linear", "ops": ["linear"], "reason": triton_reason}
