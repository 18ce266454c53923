"""What an L2 prefetch of a projection's weights buys in a decode-like sequence (H200): per
layer, decode attention over a short cache (latency-bound), then a one-row projection whose
weights are cold, 24 layers with different weights in one CUDA graph. Variants: no prefetch;
``l2_prefetch`` of the projection's weights before the attention (one more launch); and the
projection alone with its weights hot in L2 (the same weights every layer: the best any
prefetch could do) and cold.

    PYTHONPATH=src python3 scripts/prefetch_probe.py [--n 2048 --k 4096]
"""
import argparse

import torch

import fastpath
from fastpath.ops.prefetch import l2_prefetch


def graph_us(body, reps: int = 20) -> float:
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            body()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        body()
    g.replay()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        t0.record()
        g.replay()
        t1.record()
        t1.synchronize()
        times.append(t0.elapsed_time(t1) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--keys", type=int, default=640)
    args = ap.parse_args()
    dev = torch.device("cuda")
    L = args.layers
    ws = [torch.randn(args.n, args.k, device=dev).bfloat16() for _ in range(L)]
    x = torch.randn(1, args.k, device=dev).bfloat16()
    q = torch.randn(1, 32, 1, 128, device=dev).bfloat16()
    kv = [(torch.randn(1, 4, args.keys, 128, device=dev).bfloat16(),
           torch.randn(1, 4, args.keys, 128, device=dev).bfloat16()) for _ in range(L)]

    def attn(i):
        return fastpath.scaled_dot_product_attention(q, kv[i][0], kv[i][1], enable_gqa=True)

    variants = {
        "attention alone": lambda: [attn(i) for i in range(L)],
        "projection alone, cold": lambda: [fastpath.linear(x, ws[i]) for i in range(L)],
        "projection alone, hot": lambda: [fastpath.linear(x, ws[0]) for i in range(L)],
        "attention + projection": lambda: [(attn(i), fastpath.linear(x, ws[i])) for i in range(L)],
        "prefetch + attention + projection": lambda: [(l2_prefetch(ws[i]), attn(i), fastpath.linear(x, ws[i]))
                                                      for i in range(L)],
        "prefetch alone": lambda: [l2_prefetch(ws[i]) for i in range(L)],
    }
    mb = args.n * args.k * 2 / 1e6
    print(f"{L} layers, projection {args.k} -> {args.n} bf16 ({mb:.1f} MB), attention 32/4 heads x {args.keys} keys")
    for name, body in variants.items():
        us = graph_us(body)
        print(f"  {name:36s} {us / L:7.2f} us a layer", flush=True)


if __name__ == "__main__":
    main()
