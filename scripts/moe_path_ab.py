"""fused_experts at 9-64 tokens (Qwen3-30B-A3B shapes, bf16 and fp8 experts): the decode path (three
kernels, no sort) against the prefill path (sort, grouped_mm, activation, grouped_mm, combine), each in
a CUDA graph with a cold L2, two rounds alternated (``--eager``: then eager with a cold L2 and the host
time of a call, with the launch memo). Run from scripts/:
PYTHONPATH=../src [FASTPATH_LAUNCH_MEMO=0] python3 moe_path_ab.py [--tokens 16,32,64] [--eager]"""
import argparse

import torch

from fastpath.bench.harness import host_us
from fastpath.ops import moe
from fastpath.streams import median_ms
from moe_profile import TOPK, flush, graph_us, inputs

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", default="12,16,24,32,48,64")
ap.add_argument("--dtypes", default="bf16,fp8")
ap.add_argument("--eager", action="store_true", help="also eager us and host us a call (round 2)")
ap.add_argument("--fresh-capture", type=int, default=0, help="first: T tokens run eagerly three times, then "
                "captured in a CUDA graph (the capture's path compiling there), replayed and checked")
a = ap.parse_args()
if a.fresh_capture:
    T = a.fresh_capture
    x, router, gu, dn, sc = inputs(T, False)
    w, ids = moe.route(torch.nn.functional.linear(x, router), TOPK, norm_topk_prob=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            moe.fused_experts(x, ids, w, gu, dn)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = moe.fused_experts(x, ids, w, gu, dn)
    x.copy_(torch.randn_like(x))  # new inputs for the replay
    ref = moe.reference_fused_experts(x, ids, w, gu, dn).float()
    g.replay()
    torch.cuda.synchronize()
    err = float((out.float() - ref).abs().max() / ref.abs().max())
    print(f"fresh capture, {T} tokens: replay max rel err {err:.1e}", flush=True)
for fp8 in [d == "fp8" for d in a.dtypes.split(",")]:
    for T in [int(t) for t in a.tokens.split(",")]:
        x, router, gu, dn, sc = inputs(T, fp8)
        w, ids = moe.route(torch.nn.functional.linear(x, router), TOPK, norm_topk_prob=True)
        fn = lambda: moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1])  # noqa: E731
        res = {}
        for rnd in (1, 2):
            for path in ("decode", "prefill"):
                moe.FORCE_PATH = path
                try:
                    res.setdefault(path, []).append(round(graph_us(fn), 1))
                    if a.eager and rnd == 2:  # eager, flushed L2 (as the bench's eager rows); host time a call
                        res[path] += [round(1e3 * median_ms(fn, 20, before=lambda: flush.sum()), 1),
                                      round(host_us(fn, n=50, warmup=5), 1)]
                finally:
                    moe.FORCE_PATH = None
        print(f"{'fp8' if fp8 else 'bf16'} T={T}: {res}", flush=True)
