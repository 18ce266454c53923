"""GPU probe for scaled_mm: the small-M matrix-vector plans (native fp8 dot block sizes, or
bf16 conversion) and the tiled kernel's blocks / warps / stages at 4096^3, each checked
against the float64 product and timed against torch._scaled_mm in the same run. Used while
tuning; ``python -m fastpath.bench fp8`` records results.

    python scripts/fp8_probe.py
"""
import importlib

import torch
from triton.testing import do_bench

from fastpath.bench.harness import Timer, measure_ceilings
from fastpath.ops import matvec
from fastpath.ops.fp8 import ScalingType, quantize_fp8, scaled_mm

MM = importlib.import_module("fastpath.ops.fp8.scaled_mm")


def operands(m, k, n, recipe, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a, sa = quantize_fp8(torch.randn(m, k, device="cuda", generator=g), recipe)
    w, sw = quantize_fp8(torch.randn(n, k, device="cuda", generator=g), recipe)
    if recipe == "rowwise":
        return a, w.t(), sa.reshape(-1, 1), sw.reshape(1, -1)
    return a, w.t(), sa, sw


def rel_err(out, a, b, sa, sb):
    ref = (a.double() * sa.double()) @ (b.double() * sb.double())
    return ((out.double() - ref).norm() / ref.norm()).item()


def main():
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    kinds = {"tensorwise": ScalingType.TensorWise, "rowwise": ScalingType.RowWise}
    print("small M: native fp8 dot plans (BLOCK_N, BLOCK_K, programs/SM) vs bf16 conversion")
    for recipe, kind in kinds.items():
        for m, k, n in [(1, 4096, 14336), (16, 4096, 14336), (1, 4096, 4096), (1, 14336, 4096)]:
            per = m * k + k * n
            sets = [operands(m, k, n, recipe, s) for s in range(max(1, 3 * ceil["l2_bytes"] // per + 1))]

            def torch_fn(a, b, sa, sb):
                return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            t_torch = timer.graph_us(torch_fn, sets, 0.02)
            line = f"{recipe:<10} {m:>2}x{k}x{n:<6} torch {t_torch:6.1f} |"
            for cfg in [(64, 128, 4), (32, 256, 2), (64, 256, 2), (128, 128, 4), (32, 128, 8), None]:
                matvec.FP8_DOT = cfg
                fn = (lambda a, b, sa, sb: scaled_mm(a, b, sa, kind, sb, kind, output_dtype=torch.bfloat16))
                try:
                    err = rel_err(fn(*sets[0]), *sets[0])
                    t = timer.graph_us(fn, sets, 0.02)
                    line += f" {cfg}: {t:6.1f} x{t_torch / t:4.2f} e{err:.0e} |"
                except Exception as exc:
                    line += f" {cfg}: FAILED {type(exc).__name__}: {str(exc)[:120]} |"
            print(line, flush=True)
    matvec.FP8_DOT = (64, 128, 4)
    print("4096^3 tiled: (BM, BN, BK), (warps, stages)")
    for recipe, kind in kinds.items():
        a, b, sa, sb = operands(4096, 4096, 4096, recipe, 0)
        t_torch = do_bench(lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                           return_mode="median")
        fl = 2 * 4096 ** 3
        line = f"{recipe:<10} torch {fl / t_torch / 1e9:6.0f} TFLOP/s |"
        for blocks, ws in [((128, 128, 128), (8, 3)), ((128, 256, 128), (8, 3)), ((128, 256, 64), (8, 4)),
                           ((256, 128, 128), (8, 3)), ((128, 128, 128), (4, 4)), ((128, 128, 64), (4, 4)),
                           ((128, 256, 128), (8, 4))]:
            MM.MM_BLOCKS_NATIVE, MM.MM_WARPS_STAGES = blocks, ws
            fn = (lambda: scaled_mm(a, b, sa, kind, sb, kind, output_dtype=torch.bfloat16))
            try:
                err = rel_err(fn(), a, b, sa, sb)
                t = do_bench(fn, return_mode="median")
                line += f" {blocks}{ws}: {fl / t / 1e9:5.0f} x{t_torch / t:4.2f} e{err:.0e} |"
            except Exception as exc:
                line += f" {blocks}{ws}: FAILED {type(exc).__name__}: {str(exc)[:120]} |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
