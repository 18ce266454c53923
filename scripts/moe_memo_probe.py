"""Eager ``router`` + ``fused_experts`` at 64, 32 and 16 tokens (Qwen3-30B-A3B shapes, a GPU): the
time to issue a call and its wall time with the launch memos on and off, alternated over three
rounds in one process, then where the host time goes either way (cProfile, 100 calls).

    cd scripts && PYTHONPATH=../src python3 moe_memo_probe.py
"""
import cProfile
import io
import pstats
import time

import torch
from fastpath._core import memo
from fastpath.ops import moe

dev, dt = torch.device("cuda"), torch.bfloat16
H, I, E, k = 2048, 768, 128, 8
W = torch.randn(E, H, device=dev, dtype=dt) * H ** -0.5
gu = torch.randn(E, 2 * I, H, device=dev, dtype=dt) * H ** -0.5
dn = torch.randn(E, H, I, device=dev, dtype=dt) * I ** -0.5

def two(x):
    w, ids = moe.router(x, W, k, norm_topk_prob=True)
    return moe.fused_experts(x, ids, w, gu, dn)

for T in (64, 32, 16):
    x = torch.randn(T, H, device=dev, dtype=dt)
    res = {}
    for rnd in range(3):
        for on in (True, False):
            memo.ENABLED = on
            for _ in range(5):
                two(x)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                two(x)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            res.setdefault(on, []).append((1e6 * (t1 - t0) / 200, 1e6 * (t2 - t0) / 200))
    print(f"T={T}", {("memo on" if on else "memo off"): [f"issue {a:.0f} / wall {b:.0f}" for a, b in v]
                     for on, v in res.items()}, flush=True)
    for on in (True, False):
        memo.ENABLED = on
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(100):
            two(x)
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
        print(f"--- T={T} memo {'on' if on else 'off'} (100 calls, tottime)")
        print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:3500], flush=True)
