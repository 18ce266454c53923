"""GPU probe: one-row FP8 weight-only projections with the weight streamed through tensor
descriptors (TMA copies into shared memory, ``num_stages`` deep), so that each multiprocessor
keeps far more bytes in flight than its registers can hold; against the current one-row
``linear`` (matrix-vector kernel) and bf16 ``F.linear``, CUDA graphs, weights rotated past L2.

    python scripts/fp8_tma_mv_probe.py [--configs BNxBKxSTAGESxWARPSxPER_SMxTMA,...] [--json PATH]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from fastpath._core import memo
from fastpath.bench.harness import Timer, measure_ceilings
from fastpath.ops import linear as L
from fastpath.ops.fp8 import quantize_fp8

KN = [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 4096), (4096, 2048), (2048, 151936), (4096, 128256),
      (2048, 5120), (2048, 9216)]


@triton.jit
def _mv1_tma_kernel(x_ptr, w_desc, s_ptr, out_ptr, ws_ptr, cnt_ptr, N, K, k_chunk, swn,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, STAGES: tl.constexpr,
                    TMA: tl.constexpr):
    # TMA: w_desc is a tensor descriptor of the (N, K) weight; else its pointer (row stride swn),
    # read by masked loads that the loop's num_stages pipelines through shared memory (cp.async)
    pid_n = tl.program_id(0)
    k_lo = tl.program_id(1) * k_chunk
    k_hi = tl.minimum(K, k_lo + k_chunk)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES):
        if TMA:
            w = w_desc.load([pid_n * BLOCK_N, k0])
        else:
            w = tl.load(w_desc + offs_n.to(tl.int64)[:, None] * swn + (k0 + offs_k)[None, :],
                        mask=(offs_n < N)[:, None] & (k0 + offs_k < k_hi)[None, :], other=0.0)
        xv = tl.load(x_ptr + k0 + offs_k, mask=k0 + offs_k < K, other=0.0).to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * xv[None, :], axis=1)
    nmask = offs_n < N
    if SPLIT:
        tl.store(ws_ptr + tl.program_id(1).to(tl.int64) * N + offs_n, acc, mask=nmask)
        tl.debug_barrier()
        if tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel") == tl.num_programs(1) - 1:
            tl.atomic_xchg(cnt_ptr + pid_n, 0)
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            for sp in range(0, tl.num_programs(1)):
                acc += tl.load(ws_ptr + sp * N + offs_n, mask=nmask, other=0.0, cache_modifier=".cg")
            y = acc * tl.load(s_ptr + offs_n, mask=nmask, other=0.0)
            tl.store(out_ptr + offs_n, y.to(out_ptr.dtype.element_ty), mask=nmask)
    else:
        y = acc * tl.load(s_ptr + offs_n, mask=nmask, other=0.0)
        tl.store(out_ptr + offs_n, y.to(out_ptr.dtype.element_ty), mask=nmask)


_WS = {}


def mv1_tma(x, q, s, cfg):
    """``x (1, K) @ (q * s).T``: q (N, K) float8_e4m3fn, s (N, 1) float32."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    bn, bk, stages, warps, per_sm, tma = cfg
    N, K = q.shape
    nb = triton.cdiv(N, bn)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    split = max(1, min(round(per_sm * sms / nb), triton.cdiv(K, bk)))
    k_chunk = triton.cdiv(triton.cdiv(K, split), bk) * bk
    split = triton.cdiv(K, k_chunk)
    key = (x.device, N)
    if key not in _WS:
        _WS[key] = (torch.empty(64 * N, device=x.device, dtype=torch.float32),
                    torch.zeros(triton.cdiv(N, 16), device=x.device, dtype=torch.int32))
    ws, cnt = _WS[key]
    out = torch.empty(1, N, device=x.device, dtype=x.dtype)
    desc = TensorDescriptor(q, [N, K], [q.stride(0), 1], [bn, bk]) if tma else q
    _mv1_tma_kernel[(nb, split)](x, desc, s, out, ws, cnt, N, K, k_chunk, q.stride(0), BLOCK_N=bn, BLOCK_K=bk,
                                 SPLIT=split > 1, STAGES=stages, TMA=bool(tma), num_warps=warps, num_stages=stages)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="32x256x4x4x1x1,64x256x4x4x1x1,64x256x3x4x2x1,128x256x4x8x1x1,"
                    "32x256x6x4x1x1,64x128x6x4x1x1,16x256x4x4x2x1,64x256x6x8x1x1,128x128x6x8x1x1,"
                    "32x256x4x4x1x0,64x256x4x4x1x0,16x512x4x4x2x0,64x256x6x8x1x0",
                    help="BLOCK_N x BLOCK_K x stages x warps x programs a multiprocessor x TMA (1) or cp.async (0)")
    ap.add_argument("--shapes", default=None, help="KxN,... (default: the issue's and the engine's)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    memo.ENABLED = False
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    cfgs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    shapes = KN if not args.shapes else [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    recs = []
    for K, N in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        n_sets = max(1, math.ceil(3 * ceil["l2_bytes"] / (N * K)))
        sets = []
        for _ in range(n_sets):
            x = torch.randn(1, K, device="cuda", generator=g).bfloat16()
            w = (torch.randn(N, K, device="cuda", generator=g) * K ** -0.5).bfloat16()
            q, s = quantize_fp8(w, "rowwise")
            sets.append((x, q, s.float().reshape(N, 1).contiguous(), w))
        x, q, s, _ = sets[0]
        ref = x.double() @ (q.double() * s.double()).t()
        est = N * K / ceil["copy_gbps"] / 1e6
        floor = N * K / ceil["copy_gbps"] / 1e3
        t_bf16 = timer.graph_us(lambda x, q, s, w: F.linear(x, w), sets, 2 * est)
        t_cur = timer.graph_us(lambda x, q, s, w: L.linear(x, q, weight_scale=s), sets, est)
        line = [f"1x{K:>5}x{N:>6} floor {floor:5.1f} bf16 {t_bf16:6.1f} current {t_cur:6.1f} x{t_bf16 / t_cur:4.2f}"]
        recs.append(dict(K=K, N=N, variant="current", us=t_cur, bf16_us=t_bf16, floor_us=floor))
        for cfg in cfgs:
            try:
                out = mv1_tma(x, q, s, cfg)
                err = ((out.double() - ref).norm() / ref.norm()).item()
                t = timer.graph_us(lambda x, q, s, w: mv1_tma(x, q, s, cfg), sets, est)
            except Exception as e:  # a config the compiler refuses (shared memory)
                line.append(f"{cfg} FAIL {type(e).__name__}")
                continue
            bad = '' if err < 1e-2 else ' WRONG %.1e' % err
            line.append(f"{'x'.join(map(str, cfg))} {t:6.1f} x{t_bf16 / t:4.2f}{bad}")
            recs.append(dict(K=K, N=N, variant="x".join(map(str, cfg)), us=t, bf16_us=t_bf16, err=err))
        print(" | ".join(line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(recs, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
