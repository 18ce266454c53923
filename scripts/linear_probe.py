"""GPU probe for the matrix-vector kernel (fastpath.ops.matvec): checks and times explicit
plans against F.linear for the issue's decode shapes, in CUDA-graph mode with the weights
rotated through more than 2x L2 (cold), and prints the best plan per shape next to the
default one. Used while tuning; ``python -m fastpath.bench linear fp8`` records results.

    python scripts/linear_probe.py [--quick] [--fp8-only] [--json PATH]

``--fp8-only``: only fp8 weights (1 and 16 rows), the float16-route plans and the default.
"""
import argparse
import itertools
import json
import math

import torch
import torch.nn.functional as F

from fastpath._core.backend import num_sms
from fastpath._core.launch import cdiv
from fastpath.bench.harness import Timer, measure_ceilings
from fastpath.ops import matvec
from fastpath.ops.fp8 import quantize_fp8

KN = [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 4096), (4096, 2048), (2048, 151936),
      (4096, 128256)]

#: Qwen3-30B-A3B's attention projections and LM head, Llama-3-8B's projections.
ONE_ROW_KN = [(2048, 5120), (4096, 2048), (4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (2048, 151936)]


def make_plan(M, N, K, bn, bk, warps, per_sm, dot, s16=False):
    """``s16``: fp8 weights through a float16 dot, bfloat16 activations scaled by powers of two
    (matvec.FP8_VIA_FP16's route)."""
    bm = 16 if dot else max(1, 1 << (M - 1).bit_length())
    n_blocks = cdiv(N, bn)
    target = per_sm * num_sms(torch.device("cuda"))
    split = min(cdiv(target, n_blocks), max(1, K // 512)) if n_blocks < target else 1
    split = max(1, min(split, cdiv(K, bk)))
    k_chunk = cdiv(cdiv(K, split), bk) * bk
    split = cdiv(K, k_chunk)
    return matvec.Plan(bm, bn, bk, split, k_chunk, warps,
                       torch.float16 if s16 else (torch.bfloat16 if dot else None), s16)


def candidates(M, N, K, fp8, s16_only=False, one_row=False):
    out = []
    if one_row:  # the float32 product-and-sum with the K sum after the loop, against the default
        for (bn, bk), warps, per_sm in itertools.product(((8, 1024), (16, 512), (32, 256), (16, 1024)), (4, 8),
                                                         (2, 4)):
            out.append(make_plan(M, N, K, bn, bk, warps, per_sm, False))
        return out
    if s16_only:
        for bn, bk, warps, per_sm in itertools.product((32, 64, 128), (64, 128, 256), (4, 8), (2, 4)):
            out.append(make_plan(M, N, K, bn, bk, warps, per_sm, True, s16=True))
        return out
    for dot in ((False, True) if M <= 4 else (True,)):
        bns = (32, 64, 128) if dot else ((16, 32, 64) if M == 1 else (8, 16))
        bks = (64, 128, 256) if dot else (128, 256, 512)
        for bn, bk, warps, per_sm in itertools.product(bns, bks, (4, 8), (2, 4, 8)):
            if not dot and max(1, 1 << (M - 1).bit_length()) * bn * bk > 32768:
                continue
            if fp8 and warps == 8 and per_sm == 8:
                continue
            out.append(make_plan(M, N, K, bn, bk, warps, per_sm, dot))
    if fp8:  # the float16 route
        for bn, bk, warps, per_sm in itertools.product((32, 64, 128), (64, 128, 256), (4, 8), (2, 4)):
            out.append(make_plan(M, N, K, bn, bk, warps, per_sm, True, s16=True))
    return list(dict.fromkeys(out))


def run_plan(p, x, w, scale):
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    b = matvec.Operand(w.t(), 1 if scale is not None else 0)
    return matvec.launch(matvec.Operand(x), b, y, plan=p, sb=scale,
                         sb_strides=(1 if scale is not None else 0, 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fp8-only", action="store_true")
    ap.add_argument("--one-row", action="store_true", help="one row, bf16 and fp8 weights, the decode shapes: "
                    "the product-and-sum plans against the default")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil['copy_gbps']:.0f} GB/s, L2 {ceil['l2_bytes'] / 2**20:.0f} MiB, SMs {num_sms(torch.device('cuda'))}")
    timer = Timer(ceil["l2_bytes"])
    recs = []
    rows = (1, 4, 16) if not args.quick else (1, 16)
    cases = [(False, m) for m in rows if not args.fp8_only] + [(True, 1), (True, 16)]
    shapes = KN if not args.quick else KN[:2]
    if args.one_row:
        cases, shapes = [(True, 1), (False, 1)], ONE_ROW_KN
    for fp8, M in cases:
        for K, N in shapes:
            g = torch.Generator(device="cuda").manual_seed(0)
            wbytes = N * K * (1 if fp8 else 2)
            n_sets = max(1, math.ceil(3 * ceil["l2_bytes"] / wbytes))
            sets = []
            for _ in range(n_sets):
                x = torch.randn(M, K, device="cuda", generator=g).bfloat16()
                w = (torch.randn(N, K, device="cuda", generator=g) * K ** -0.5).bfloat16()
                if fp8:
                    q, s = quantize_fp8(w, "rowwise")
                    sets.append((x, q, s.reshape(-1), w))
                else:
                    sets.append((x, w, None, w))
            x, w, s, wref = sets[0]
            ref = (x.double() @ (w.double() * s.double()[:, None] if fp8 else w.double()).t())
            est = 2 * wbytes / ceil["copy_gbps"] / 1e6
            t_torch = timer.graph_us(lambda x, w, s, wr: F.linear(x, wr), sets, est)
            default = matvec.plan(M, N, K, x.device, torch.bfloat16, b_bytes=1 if fp8 else 2)
            results = []
            for p in candidates(M, N, K, fp8, args.fp8_only, args.one_row) + [default]:
                try:
                    out = run_plan(p, x, w, s)
                    err = ((out.double() - ref).norm() / ref.norm()).item()
                    if not err < 1e-2:
                        print(f"WRONG {M}x{K}x{N} fp8={fp8} {p}: rel err {err:.2e}")
                        continue
                    t = timer.graph_us(lambda x, w, s, wr: run_plan(p, x, w, s), sets, est)
                except Exception as exc:  # a plan that does not compile: report and go on
                    print(f"FAILED {M}x{K}x{N} {p}: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                results.append((t, p))
                recs.append({"M": M, "K": K, "N": N, "fp8": fp8, "plan": p.__dict__ | {"dot": str(p.dot)},
                             "us": t, "torch_us": t_torch, "default": p == default})
            results.sort(key=lambda r: r[0])
            t_def = next((t for t, p in results if p == default), float("nan"))
            tb, pb = results[0]
            gbps = (wbytes + 2 * M * (K + N)) / tb / 1e3
            print(f"{'fp8 ' if fp8 else 'bf16'} {M:>2}x{K:>5}x{N:>6} torch {t_torch:7.1f} | default {t_def:7.1f} "
                  f"x{t_torch / t_def:4.2f} | best {tb:7.1f} x{t_torch / tb:4.2f} {100 * gbps / ceil['copy_gbps']:5.1f}%copy "
                  f"bn{pb.block_n} bk{pb.block_k} w{pb.warps} split{pb.split} dot={pb.dot is not None} s16={pb.s16}", flush=True)
            for t, p in results[1:4]:
                print(f"      next {t:7.1f} bn{p.block_n} bk{p.block_k} w{p.warps} split{p.split} dot={p.dot is not None} s16={p.s16}")
            del sets
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
