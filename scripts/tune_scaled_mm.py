"""GPU sweep of the tiled scaled_mm kernel (M > 16): tensor descriptors (TMA) or masked
pointer loads, blocks / warps / stages, each
checked against the float64 product and timed against torch._scaled_mm in the same run
(triton.testing.do_bench, median). Tensorwise and rowwise.

    PYTHONPATH=src python3 scripts/tune_scaled_mm.py [--quick]
"""
import importlib
import json
import os
import sys

import torch
from triton.testing import do_bench

from fastpath.ops.fp8 import ScalingType, scaled_mm

from fp8_probe import operands, rel_err  # (this directory: scripts run as files)

MM = importlib.import_module("fastpath.ops.fp8.scaled_mm")

#: (tma, (BM, BN, BK), (warps, stages)). The sweep at commit dbb4ace also tried persistent
#: programs (one or two an SM walking the tiles): no better, removed from the kernel.
CONFIGS = [
    (False, (128, 128, 128), (8, 3)),  # the default before tensor descriptors
    (True, (128, 128, 128), (8, 3)),
    (True, (128, 128, 128), (8, 4)),
    (True, (128, 128, 128), (4, 4)),
    (True, (128, 256, 128), (8, 3)),
    (True, (128, 256, 128), (8, 4)),
    (True, (256, 128, 128), (8, 3)),
    (True, (128, 256, 64), (8, 4)),
    (True, (128, 256, 64), (8, 5)),
]
SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096), (8192, 8192, 8192)]


def main():
    quick = "--quick" in sys.argv
    out = os.environ.get("OUT", ".")
    kinds = {"tensorwise": ScalingType.TensorWise, "rowwise": ScalingType.RowWise}
    rows = []
    for (m, n, k) in SHAPES[:1] if quick else SHAPES:
        fl = 2 * m * n * k
        for recipe, kind in kinds.items():
            a, b, sa, sb = operands(m, k, n, recipe, 0)
            t_torch = do_bench(lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                               return_mode="median")
            print(f"{m}x{n}x{k} {recipe}: torch {fl / t_torch / 1e9:6.0f} TFLOP/s", flush=True)
            for tma, blocks, ws in CONFIGS:
                MM.MM_TMA, MM.MM_BLOCKS_NATIVE, MM.MM_WARPS_STAGES = tma, blocks, ws
                fn = (lambda: scaled_mm(a, b, sa, kind, sb, kind, output_dtype=torch.bfloat16))
                rec = dict(shape=[m, n, k], recipe=recipe, tma=tma, blocks=blocks, ws=ws,
                           torch_tflops=fl / t_torch / 1e9)
                try:
                    err = rel_err(fn(), a, b, sa, sb)
                    t = do_bench(fn, return_mode="median")
                    rec.update(tflops=fl / t / 1e9, ratio=t_torch / t, err=err)
                    print(f"  tma={tma:d} {blocks} {ws}: {fl / t / 1e9:6.0f} TFLOP/s "
                          f"x{t_torch / t:4.2f} err {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    rec.update(error=f"{type(exc).__name__}: {str(exc)[:300]}")
                    print(f"  tma={tma:d} {blocks} {ws}: FAILED {rec['error']}", flush=True)
                rows.append(rec)
    with open(os.path.join(out, "tune_scaled_mm.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
