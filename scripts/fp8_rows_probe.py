"""GPU probe: FP8 weight-only ``linear`` above 16 rows (batched decode, prefill), the ways it can run
against bf16 ``F.linear`` in CUDA graphs with the weights rotated through more than 2x L2
(cold): the weight dequantised for cuBLAS, and the tiled kernel's 16-bit-activation mode
(scaled_mm.weight_mm) with several blocks, bfloat16 activations through float16 (S16) or not.

    python scripts/fp8_rows_probe.py [--rows 17,32,64,128,512,2048] [--blocks] [--json PATH]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

from fastpath._core import memo
from fastpath.bench.harness import Timer, knobs, measure_ceilings
from fastpath.ops import linear as L
from fastpath.ops.fp8 import quantize_fp8

S = sys.modules["fastpath.ops.fp8.scaled_mm"]

#: the issue's shapes (K, N) and Qwen3-30B-A3B's attention projections
KN = [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 4096), (4096, 2048), (2048, 5120)]

VARIANTS = {  # (linear knobs, scaled_mm knobs)
    "dequantise": (dict(FP8_MANY_ROWS="dequantise"), {}),
    "tiled": (dict(FP8_MANY_ROWS="tiled"), dict(W8_DEQUANT_FROM=None)),
    "dequant-kernel": (dict(FP8_MANY_ROWS="tiled"), dict(W8_DEQUANT_FROM=1)),
    "tiled-split2": (dict(FP8_MANY_ROWS="tiled"), dict(W8_DEQUANT_FROM=None, W8_SPLIT_PER_SM=2)),
    "tiled-split4": (dict(FP8_MANY_ROWS="tiled"), dict(W8_DEQUANT_FROM=None, W8_SPLIT_PER_SM=4)),
}
BLOCK_VARIANTS = {}
#: scaled_mm.weight_mm's (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) tried up to 64 rows and above
FEW = [(16, 64, 256, 4, 3), (32, 64, 256, 4, 3), (64, 64, 256, 4, 3), (32, 128, 128, 4, 3), (64, 128, 128, 8, 3),
       (32, 64, 128, 4, 4), (16, 128, 256, 8, 3)]
MANY = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 128, 8, 3), (64, 128, 128, 4, 4)]
for blocks in FEW + MANY:
    for s16 in (True, False):
        BLOCK_VARIANTS[f"tiled{'' if s16 else '-bf16'}{blocks}"] = (
            dict(FP8_MANY_ROWS="tiled"),
            dict(W8_BLOCKS_FEW=blocks, W8_BLOCKS_MANY=blocks, W8_S16=s16, W8_FEW_ROWS=1 << 30 if s16 else 64,
                 W8_DEQUANT_FROM=None, _few=blocks in FEW))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="17,32,64,128,512,2048")
    ap.add_argument("--json", default=None)
    ap.add_argument("--blocks", action="store_true", help="also sweep weight_mm's blocks")
    args = ap.parse_args()
    memo.ENABLED = False  # a replay would keep the first variant's launches
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    recs = []
    for M in (int(r) for r in args.rows.split(",")):
        for K, N in KN:
            g = torch.Generator(device="cuda").manual_seed(0)
            n_sets = max(1, math.ceil(3 * ceil["l2_bytes"] / (N * K)))
            sets = []
            for _ in range(n_sets):
                x = torch.randn(M, K, device="cuda", generator=g).bfloat16()
                w = (torch.randn(N, K, device="cuda", generator=g) * K ** -0.5).bfloat16()
                q, s = quantize_fp8(w, "rowwise")
                sets.append((x, q, s, w))
            x, q, s, _ = sets[0]
            ref = x.double() @ (q.double() * s.double().reshape(-1, 1)).t()
            est = 2 * N * K * 2 / ceil["copy_gbps"] / 1e6
            t_bf16 = timer.graph_us(lambda x, q, s, w: F.linear(x, w), sets, est)
            line = [f"{M:>2}x{K:>5}x{N:>5} bf16 {t_bf16:6.1f}"]
            for name, (lk, sk) in (VARIANTS | BLOCK_VARIANTS if args.blocks else VARIANTS).items():
                sk = dict(sk)
                if sk.pop("_few", M <= 64) != (M <= 64) or ("split" in name and M > 64):
                    continue
                with knobs(L, **lk), knobs(S, **sk):
                    out = L.linear(x, q, weight_scale=s)
                    err = ((out.double() - ref).norm() / ref.norm()).item()
                    t = timer.graph_us(lambda x, q, s, w: L.linear(x, q, weight_scale=s), sets, est)
                line.append(f"{name} {t:6.1f} x{t_bf16 / t:4.2f}{'' if err < 1e-2 else ' WRONG %.1e' % err}")
                recs.append(dict(M=M, K=K, N=N, variant=name, us=t, bf16_us=t_bf16, err=err))
            print(" | ".join(line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(recs, f, indent=1)


if __name__ == "__main__":
    main()
