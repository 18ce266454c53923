"""How fast can one decode-step kernel stream the weights of 8 routed experts? A floor for the
one-token MoE experts, measured the way a decode step runs them: R launches back to back in
one CUDA graph (each launch a different set of experts, so L2 does not hold them), time per
launch = graph time / R.

* ``stream``: a bare kernel that sums 8 experts' blocks of Qwen3-30B-A3B size (3 x 768 x 2048
  elements), 8 x S programs, each a contiguous 1/S of an expert; bf16 or one-byte (FP8)
  elements; experts drawn from a small stack (128, one layer) or a large one (tens of GB, a
  whole model), to show a TLB cost if there is one.
* ``experts``: the library's one-token experts (``moe.fused_experts``, the split-I kernels)
  timed the same way, bf16 and FP8.
* ``null``: an empty kernel, the per-launch cost of the graph itself.

    PYTHONPATH=src python3 scripts/stream_probe.py [--json OUT]
"""
import argparse
import json
import time

import torch
import triton
import triton.language as tl

from fastpath.ops import moe
from fastpath.streams import _flush_buffer, median_ms

dev = torch.device("cuda")
H, I, E, TOPK = 2048, 768, 128, 8
EXPERT = 3 * I * H  # elements of one expert's three matrices
R = 24  # launches per graph


@triton.jit
def _stream_kernel(src, ids, out, chunk, per, estride, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    p = tl.program_id(0)
    e = tl.load(ids + p // per).to(tl.int64)
    base = src + e * estride + (p % per).to(tl.int64) * chunk
    acc = tl.zeros([BLOCK], tl.float32)
    for off in tl.range(0, chunk, BLOCK, num_stages=STAGES):
        acc += tl.load(base + off + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(out + p, tl.sum(acc))


@triton.jit
def _null_kernel(out):
    tl.store(out + tl.program_id(0), 0.0)


def per_launch_us(calls, flush, reps=15):
    """calls: R zero-argument callables; one graph runs them in order; us per call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    return 1e3 * median_ms(g.replay, reps, before=lambda: flush.sum()) / len(calls)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--big-gb", type=float, default=40.0)
    args = ap.parse_args()
    flush = _flush_buffer(dev)
    rec = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out = torch.empty(1 << 16, device=dev)
    rec["null us"] = per_launch_us([lambda: _null_kernel[(96,)](out) for _ in range(R)], flush)
    print("null", rec["null us"], flush=True)
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    t_end = time.time() + 150
    for dtype in (torch.bfloat16, torch.uint8):
        nbytes = EXPERT * dtype.itemsize
        stacks = {"stack 128": E, "stack %.0f GB" % args.big_gb: int(args.big_gb * 2 ** 30 // nbytes)}
        for sname, n_e in stacks.items():
            buf = torch.ones(n_e * EXPERT, dtype=dtype, device=dev)
            ids = torch.stack([torch.randperm(n_e, generator=gen)[:TOPK] for _ in range(R)]).to(dev, torch.int32)
            for S in (12, 24, 48, 96):
                for BLOCK, warps, stages in ((4096, 4, 1), (8192, 8, 1), (4096, 4, 3), (2048, 4, 4)):
                    if time.time() > t_end:
                        break
                    chunk = EXPERT // S
                    if chunk % BLOCK:
                        continue
                    calls = [lambda r=r: _stream_kernel[(TOPK * S,)](buf, ids[r], out, chunk, S, EXPERT, BLOCK=BLOCK,
                                                                     STAGES=stages, num_warps=warps)
                             for r in range(R)]
                    us = per_launch_us(calls, flush)
                    gbs = TOPK * nbytes / us / 1e3
                    row = dict(dtype=str(dtype)[6:], stack=sname, programs=TOPK * S, block=BLOCK, warps=warps,
                               stages=stages, us=round(us, 2), GBps=round(gbs))
                    rows.append(row)
                    print(row, flush=True)
            buf = None  # noqa: F841 (frees the stack before the next one)
            torch.cuda.empty_cache()
    rec["stream"] = rows
    # The library's one-token experts, R calls with different experts in one graph.
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(1, H, generator=g, device=dev).bfloat16()
    gu = (torch.randn(E, 2 * I, H, generator=g, device=dev) * H ** -0.5).bfloat16()
    dn = (torch.randn(E, H, I, generator=g, device=dev) * I ** -0.5).bfloat16()
    w = torch.full((1, TOPK), 1.0 / TOPK, device=dev)
    ids = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(R)]).to(dev)
    exp = {}
    for tag in ("bf16", "fp8"):
        a, b, sa, sb = gu, dn, None, None
        if tag == "fp8":
            (a, sa), (b, sb) = moe.quantize_experts(gu), moe.quantize_experts(dn)
        calls = [lambda r=r: moe.fused_experts(x, ids[r:r + 1], w, a, b, gate_up_scale=sa, down_scale=sb)
                 for r in range(R)]
        exp[tag] = round(per_launch_us(calls, flush), 2)
        print("experts", tag, exp[tag], flush=True)
    rec["experts us"] = exp
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
