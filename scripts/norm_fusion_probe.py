"""Kernel time of a pre-norm projection in a CUDA graph: the norm as a launch of its own then
the projection, against the norm inside the projection's kernel (``rms_norm_linear``,
``rms_norm_router``) at several tiles of its first (rstd) pass. 20 calls a graph over 4 weight
copies (cold weights), median of 20 replays.

    PYTHONPATH=src python3 scripts/norm_fusion_probe.py [--json OUT]
"""
import argparse
import json

import torch

from fastpath.ops import matvec
from fastpath.ops.linear import linear, linear_swiglu, rms_norm_linear
from fastpath.ops.moe import rms_norm_router, router
from fastpath.ops.norm import rms_norm


def graph_us(fn, calls=20, reps=20):
    fn(0)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn(0)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for i in range(calls):
                fn(i)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / calls)
    return sorted(ts)[reps // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    rows = []
    for K, N, glu in ((4096, 6144, False), (4096, 2 * 12288, True), (2048, 5120, False)):
        d, r = torch.randn(1, K, device=dev, dtype=dt), torch.randn(1, K, device=dev, dtype=dt)
        nw = torch.rand(K, device=dev, dtype=dt)
        Ws = [torch.randn(N, K, device=dev, dtype=dt) * K ** -0.5 for _ in range(4)]
        proj = linear_swiglu if glu else linear
        res = {"shape": f"{K}->{N}{' swiglu' if glu else ''}"}
        res["linear only"] = graph_us(lambda i: proj(d, Ws[i % 4]))
        res["norm + linear"] = graph_us(lambda i: proj(rms_norm(d, nw, 1e-6, residual=r)[0], Ws[i % 4]))
        for tile in (256, 1024, 8192):
            matvec.NORM_TILE = tile
            res[f"fused tile {tile}"] = graph_us(
                lambda i: rms_norm_linear(d, nw, 1e-6, Ws[i % 4], residual=r, swiglu=glu)[0])
        print(res, flush=True)
        rows.append(res)
    H, E = 2048, 128
    d, r = torch.randn(1, H, device=dev, dtype=dt), torch.randn(1, H, device=dev, dtype=dt)
    nw = torch.rand(H, device=dev, dtype=dt)
    Rs = [torch.randn(E, H, device=dev, dtype=dt) for _ in range(4)]
    res = {"shape": f"router {H}x{E} top-8"}
    res["router only"] = graph_us(lambda i: router(d, Rs[i % 4], 8))
    res["norm + router"] = graph_us(lambda i: router(rms_norm(d, nw, 1e-6, residual=r)[0], Rs[i % 4], 8))
    res["fused"] = graph_us(lambda i: rms_norm_router(d, nw, 1e-6, Rs[i % 4], 8, residual=r)[0])
    print(res, flush=True)
    rows.append(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
