"""linear suite: decode-time matrix-vector products. fastpath.linear against F.linear (bf16),
the fused gate/up projection and SwiGLU (``linear_swiglu``) against F.linear + silu * up, and
the FP8 weight-only path (fastpath.linear with ``weight_scale``) against bf16 F.linear.

Shapes are M x K x N (rows x in_features x out_features): the Llama-3-8B / Qwen3 projections
and lm_heads the issue names, at 1, 4 and 16 rows. Weight bytes dominate every row, so the
% of copy column is the figure of merit.
"""
from __future__ import annotations

from .harness import Case, close_check, sqnr_check

KN = [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 4096), (4096, 2048), (2048, 151936),
      (4096, 128256)]


def _inputs(shape, dtype, device, seed, fp8=False):
    import torch
    m, k, n = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(m, k, generator=g, device=device).to(dt)
    w = (torch.randn(n, k, generator=g, device=device) * k ** -0.5).to(dt)
    if not fp8:
        return x, w
    from ..ops.fp8 import quantize_fp8
    wq, scale = quantize_fp8(w, "rowwise")
    return x, w, wq, scale


def _nbytes_bf16(shape, itemsize):
    m, k, n = shape
    return (n * k + m * k + m * n) * itemsize


def _nbytes_fp8(shape, itemsize):
    m, k, n = shape
    return n * k + n * 4 + (m * k + m * n) * itemsize  # 1-byte weights and a scale per row


def _nbytes_glu(shape, itemsize):
    m, k, n = shape
    return (n * k + m * k + m * n // 2) * itemsize


def _swiglu_native(x, w):
    import torch.nn.functional as F
    g, u = F.linear(x, w).chunk(2, dim=-1)
    return F.silu(g) * u


def cases() -> list:
    import torch.nn.functional as F

    from ..ops.linear import linear, linear_swiglu
    out = []
    for m in (1, 4, 16):
        for k, n in KN:
            out.append(Case(suite="linear", name="linear bf16", shape=(m, k, n), dtype="bfloat16",
                            ours=lambda x, w: linear(x, w), native=lambda x, w: F.linear(x, w),
                            check=close_check, nbytes=_nbytes_bf16, cpu_shape=(m, 67, 13),
                            make=_inputs, graphs=True, quick=(m == 1 and k == n)))
    for k, n in ((4096, 2 * 12288), (4096, 2 * 14336)):  # Qwen3-8B / Llama-3-8B gate_up + SwiGLU
        out.append(Case(suite="linear", name="linear + swiglu", shape=(1, k, n), dtype="bfloat16",
                        ours=lambda x, w: linear_swiglu(x, w), native=_swiglu_native,
                        check=close_check, nbytes=_nbytes_glu, cpu_shape=(1, 67, 26),
                        make=_inputs, graphs=True, quick=False))
    for k, n in KN:
        out.append(Case(suite="linear", name="linear fp8 weights", shape=(1, k, n), dtype="bfloat16",
                        ours=lambda x, w, wq, s: linear(x, wq, weight_scale=s),
                        native=lambda x, w, wq, s: F.linear(x, w),
                        check=sqnr_check("bf16 F.linear"), nbytes=_nbytes_fp8, cpu_shape=(1, 67, 13),
                        make=lambda *a: _inputs(*a, fp8=True), graphs=True, quick=(k == n)))
    return out
