"""fp8 suite: fastpath.scaled_mm against torch._scaled_mm (cuBLASLt), tensorwise and rowwise.

Shapes are M x K x N with mat_b the transpose of a row-major (N, K) weight. At M <= 16 the
op streams the FP8 weights (a bandwidth figure); at M = 4096 it is a tensor-core matmul,
where the ratio against torch._scaled_mm is the figure (the issue asks for >= 0.85x).
"""
from __future__ import annotations

from .harness import Case, close_check

SHAPES = [(1, 4096, 14336), (16, 4096, 14336), (1, 4096, 4096), (4096, 4096, 4096)]


def _inputs(shape, dtype, device, seed, recipe="tensorwise"):
    import torch

    from ..ops.fp8 import quantize_fp8
    m, k, n = shape
    g = torch.Generator(device=device).manual_seed(seed)
    a, sa = quantize_fp8(torch.randn(m, k, generator=g, device=device), recipe)
    w, sw = quantize_fp8(torch.randn(n, k, generator=g, device=device), recipe)
    return a, w.t(), sa.reshape(-1, 1) if recipe == "rowwise" else sa, \
        sw.reshape(1, -1) if recipe == "rowwise" else sw


def _nbytes(shape, itemsize):
    m, k, n = shape
    return m * k + k * n + m * n * itemsize  # fp8 operands, bf16 output


def _native(a, b, sa, sb):
    import torch
    if a.device.type != "cuda":  # the CPU check: dequantise and multiply
        return ((a.float() * sa) @ (b.float() * sb)).to(torch.bfloat16)
    return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def cases() -> list:
    import functools

    import torch

    from ..ops.fp8 import ScalingType, scaled_mm

    def ours(a, b, sa, sb, kind):
        return scaled_mm(a, b, sa, kind, sb, kind, output_dtype=torch.bfloat16)

    out = []
    for recipe, kind in (("tensorwise", ScalingType.TensorWise), ("rowwise", ScalingType.RowWise)):
        for shape in SHAPES:
            out.append(Case(
                suite="fp8", name=f"scaled_mm {recipe}", shape=shape, dtype="bfloat16",
                ours=functools.partial(ours, kind=kind),
                native=_native, check=close_check, nbytes=_nbytes,
                cpu_shape=(shape[0] if shape[0] < 100 else 17, 67, 13),
                make=functools.partial(_inputs, recipe=recipe), graphs=True,
                quick=shape == (1, 4096, 14336)))
    return out
