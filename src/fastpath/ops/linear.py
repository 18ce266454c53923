"""``linear``: ``F.linear`` for decode (few rows), with an optional FP8 weight-only variant.

One kernel, ``_gemv_kernel``, with ``tl.constexpr`` variants. Rows (the product of the
leading dimensions of ``x``) up to ``MAX_GEMV_ROWS`` = 16 take it; more rows call
``torch.nn.functional.linear`` (cuBLAS, the best bf16 matmul available there).

* A program owns ``BLOCK_N`` output features for *all* ``BLOCK_M`` (<= 16) rows, so each
  weight byte is read from memory once for every row. It walks its share of K in
  ``BLOCK_K`` steps, multiplies broadcast ``[BLOCK_M, 1, BLOCK_K] * [1, BLOCK_N, BLOCK_K]``
  tiles and reduces over K into a float32 ``[BLOCK_M, BLOCK_N]`` accumulator (no ``tl.dot``:
  a matrix-vector product is bound by memory bandwidth, and the interpreter's bf16
  ``tl.dot`` is wrong).
* ``SPLIT_K > 1``: when ``N / BLOCK_N`` programs are too few to give every multiprocessor
  work, K is split over ``SPLIT_K`` programs per feature block. Each writes its float32
  partial sums to a workspace ``[SPLIT_K, M, N]``; a second small launch,
  ``_splitk_reduce_kernel``, adds the partials in a fixed order (deterministic: no atomics)
  and applies the epilogue.
* ``FP8``: 0 for a bf16/fp16/fp32 weight; 1 loads a ``float8_e4m3fn`` weight and converts it
  in registers (NVIDIA GPUs of compute capability 8.9 or newer); 2 reads the same bytes as
  ``uint8`` and decodes the e4m3fn bits with integer operations (older GPUs, ROCm, and the
  interpreter, whose own float8 conversion reads the NaN code 0x7F as 480).
  The float32 accumulator is multiplied by the per-output-row scale in the epilogue.
* The epilogue (row scale, bias in float32, one rounding to the output dtype, masked store)
  is one ``@triton.jit`` helper shared by both kernels.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import check_tensor
from .._core.launch import cdiv, next_pow2, workspace
from .._core.registry import register_op
from .fp8.bits import _decode

_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_FP8 = getattr(torch, "float8_e4m3fn", None)

#: Rows (product of the leading dims of x) served by the GEMV kernel; more go to F.linear.
MAX_GEMV_ROWS = 16


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _epilogue(acc, offs_m, offs_n, M, N, s_ptr, ssn, b_ptr, y_ptr, sym,
              HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr):
    mask_n = offs_n < N
    if HAS_SCALE:
        s = tl.load(s_ptr + offs_n * ssn, mask=mask_n, other=0.0).to(tl.float32)
        acc = acc * s[None, :]
    if HAS_BIAS:
        b = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        acc = acc + b[None, :]
    mask = (offs_m[:, None] < M) & mask_n[None, :]
    ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * sym + offs_n[None, :]
    tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, b_ptr, y_ptr, part_ptr,
                 M, N, K, sxm, sxk, swn, swk, ssn, sym, K_PER_SPLIT,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 SPLIT_K: tl.constexpr, FP8: tl.constexpr, HAS_BIAS: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * sxm  # [BM, 1]
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * swn  # [BN, 1]
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        kk = k0 + offs_k
        mask_k = kk < k_hi
        kk64 = kk.to(tl.int64)
        x = tl.load(x_rows + kk64[None, :] * sxk, mask=mask_m[:, None] & mask_k[None, :],
                    other=0.0).to(tl.float32)  # [BM, BK]
        mask_w = mask_n[:, None] & mask_k[None, :]
        w = tl.load(w_rows + kk64[None, :] * swk, mask=mask_w)  # [BN, BK]
        if FP8 == 2:
            w = _decode(w, False)  # e4m3fn bits -> float32, exactly
        else:
            w = w.to(tl.float32)
        w = tl.where(mask_w, w, 0.0)  # no `other=`: it cannot be cast to float8
        acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    if SPLIT_K == 1:
        _epilogue(acc, offs_m, offs_n, M, N, s_ptr, ssn, b_ptr, y_ptr, sym,
                  HAS_SCALE=FP8 != 0, HAS_BIAS=HAS_BIAS)
    else:  # partials [SPLIT_K, M, N], float32
        ptrs = part_ptr + (pid_k * M + offs_m)[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _splitk_reduce_kernel(part_ptr, s_ptr, b_ptr, y_ptr, M, N, ssn, sym,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
                          HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr):
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = part_ptr + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for s in range(SPLIT_K):  # fixed order: deterministic
        acc += tl.load(ptrs + (s * M).to(tl.int64) * N, mask=mask, other=0.0)
    _epilogue(acc, offs_m, offs_n, M, N, s_ptr, ssn, b_ptr, y_ptr, sym,
              HAS_SCALE=HAS_SCALE, HAS_BIAS=HAS_BIAS)


# ---------------------------------------------------------------------------- launcher

#: Tuning knobs (untuned guesses for the H200; the interpreter uses small blocks so that the
#: tests cover several blocks, masked tails and split-K).
TILE_ELEMS = 2048 if INTERPRET else 8192  # BLOCK_M * BLOCK_N * BLOCK_K held by one program
MAX_BLOCK_K = 32 if INTERPRET else 256
MIN_BLOCK_K = 16 if INTERPRET else 64  # 128 bytes of a bf16 weight row per step
MAX_BLOCK_N = 16 if INTERPRET else 64
MIN_BLOCK_N = 4 if INTERPRET else 8
MIN_K_PER_SPLIT = 64 if INTERPRET else 1024  # smallest share of K worth a program
PROGRAMS_PER_SM = 4  # split K until there are this many programs per multiprocessor
#: Tests set these: force a SPLIT_K (clamped to what K allows), force the FP8 decoding
#: ("native" loads float8 tensors, "bits" decodes uint8 bits).
SPLIT_K_OVERRIDE: Optional[int] = None
FP8_DECODE: Optional[str] = None


def _plan(M: int, N: int, K: int, device: torch.device):
    """(BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, K_PER_SPLIT, num_warps): plain int math only."""
    bm = next_pow2(M)
    bk = min(MAX_BLOCK_K, next_pow2(K), max(MIN_BLOCK_K, TILE_ELEMS // (bm * MIN_BLOCK_N)))
    bn = max(MIN_BLOCK_N, min(MAX_BLOCK_N, next_pow2(N), TILE_ELEMS // (bm * bk)))
    n_blocks = cdiv(N, bn)
    if SPLIT_K_OVERRIDE is not None:
        split = SPLIT_K_OVERRIDE
    else:
        target = PROGRAMS_PER_SM * num_sms(device)
        split = min(cdiv(target, n_blocks), max(1, K // MIN_K_PER_SPLIT)) if n_blocks < target else 1
    split = max(1, min(split, cdiv(K, bk)))
    k_per = cdiv(cdiv(K, split), bk) * bk if K > 0 else bk
    split = max(1, cdiv(K, k_per))  # no empty splits
    warps = 4 if bm * bn * bk <= 8192 else 8
    return bm, bn, bk, split, k_per, warps


@functools.lru_cache(maxsize=None)
def _native_fp8(device: torch.device) -> bool:
    """float8 loads convert in hardware on NVIDIA compute capability 8.9+ (Ada, Hopper, ...)."""
    return (device.type == "cuda" and torch.version.hip is None
            and torch.cuda.get_device_capability(device) >= (8, 9))


def _fp8_mode(device: torch.device) -> int:
    if FP8_DECODE is not None:
        return 1 if FP8_DECODE == "native" else 2
    # else bits: older GPUs, ROCm, and the interpreter (whose float8 conversion reads the
    # NaN code 0x7F as 480)
    return 1 if _native_fp8(device) else 2


def _launch(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            weight_scale: Optional[torch.Tensor]) -> torch.Tensor:
    K = x.shape[-1]
    N = weight.shape[0]
    try:
        x2 = x.view(-1, K)
    except RuntimeError:  # leading dims that cannot be collapsed: one documented copy
        x2 = x.reshape(-1, K)
    M = x2.shape[0]
    y = alloc.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y.view(*x.shape[:-1], N)
    bm, bn, bk, split, k_per, warps = _plan(M, N, K, x.device)
    fp8 = 0
    scale, ssn = y, 0  # dummies when unused
    if weight_scale is not None:
        fp8 = _fp8_mode(x.device)
        if fp8 == 2:
            weight = weight.view(torch.uint8)
        scale, ssn = weight_scale, weight_scale.stride(0)
    b = bias if bias is not None else y
    part = workspace(x.device, "linear.partials", split * M * N, torch.float32) if split > 1 else y
    n_blocks = cdiv(N, bn)
    _gemv_kernel[(n_blocks, split)](
        x2, weight, scale, b, y, part, M, N, K, x2.stride(0), x2.stride(1),
        weight.stride(0), weight.stride(1), ssn, y.stride(0), k_per,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split, FP8=fp8,
        HAS_BIAS=bias is not None, num_warps=warps)
    if split > 1:
        rbn = max(16, min(1024, 4096 // bm, next_pow2(N)))
        _splitk_reduce_kernel[(cdiv(N, rbn),)](
            part, scale, b, y, M, N, ssn, y.stride(0),
            BLOCK_M=bm, BLOCK_N=rbn, SPLIT_K=split, HAS_SCALE=fp8 != 0,
            HAS_BIAS=bias is not None, num_warps=4)
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
    if (x.dim() < 1 or rows > MAX_GEMV_ROWS or not use_triton(x) or x.dtype not in _KERNEL_DTYPES):
        if weight_scale is None:
            return F.linear(x, weight, bias)
        if not use_triton(x) or x.dtype not in _KERNEL_DTYPES:
            return reference_linear(x, weight, bias, weight_scale=weight_scale)
        # Many rows with an FP8 weight: dequantise once (a temporary N x K in x.dtype), cuBLAS.
        return F.linear(x, dequantize_weight(weight, weight_scale, x.dtype), bias)
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
    not fill the GPU (deterministic two-step reduction). More than 16 rows call
    ``torch.nn.functional.linear`` (cuBLAS is the best bf16 matmul there); with an FP8 weight
    the weight is first dequantised to ``x.dtype`` (a temporary ``N x K`` tensor). No host
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
    >>> x = torch.randn(1, 1, 4096, dtype=torch.bfloat16, device="cuda")
    >>> w = torch.randn(11008, 4096, dtype=torch.bfloat16, device="cuda")
    >>> fastpath.linear(x, w).shape
    torch.Size([1, 1, 11008])
    """
    _checked(x, weight, bias, weight_scale)
    return _linear_op(x, weight, bias, weight_scale)


FAMILY = {"name": "linear", "ops": ["linear"], "reason": triton_reason}
