"""Wall time a call of eager MoE layers (host-bound sizes) on a GPU: ``router`` + ``fused_experts``
against ``moe_layer`` with and without its launch memo, Qwen3-30B-A3B shapes, 1 and 64 tokens.
``--memo-ab``: instead, ``router`` + ``fused_experts`` at 64, 32 and 16 tokens with every launch
memo on and off, alternated over three rounds in one process (time to issue a call and its wall
time), then where the host time goes either way (cProfile, 100 calls).

    PYTHONPATH=src python3 scripts/moe_layer_host.py [--calls 300] [--memo-ab]
"""
import argparse
import cProfile
import io
import pstats
import time

import torch

from fastpath._core import memo
from fastpath.ops import moe


def timed(fn, x, calls: int) -> tuple:
    """(us to issue a call, us of wall a call) over ``calls`` calls after five warm-up calls."""
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / calls, 1e6 * (time.perf_counter() - t0) / calls


def memo_ab(two, H: int, dev, dt) -> None:
    for T in (64, 32, 16):
        x = torch.randn(T, H, device=dev, dtype=dt)
        res = {}
        for _ in range(3):
            for on in (True, False):
                memo.ENABLED = on
                res.setdefault(on, []).append(timed(two, x, 200))
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
            print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:3500], flush=True)
    memo.ENABLED = True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--memo-ab", action="store_true")
    args = ap.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    H, I, E, k = 2048, 768, 128, 8
    W = torch.randn(E, H, device=dev, dtype=dt) * H ** -0.5
    gu = torch.randn(E, 2 * I, H, device=dev, dtype=dt) * H ** -0.5
    dn = torch.randn(E, H, I, device=dev, dtype=dt) * I ** -0.5

    def two(x):
        w, ids = moe.router(x, W, k, norm_topk_prob=True)
        return moe.fused_experts(x, ids, w, gu, dn)

    def layer(x):
        return moe.moe_layer(x, W, k, gu, dn, norm_topk_prob=True)

    if args.memo_ab:
        return memo_ab(two, H, dev, dt)
    for T in (1, 64):
        x = torch.randn(T, H, device=dev, dtype=dt)
        res = {}
        for rnd in range(2):
            for name, fn, on in (("router + fused_experts", two, True), ("moe_layer", layer, True),
                                 ("moe_layer, memo off", layer, False)):
                memo.ENABLED = on
                res.setdefault(name, []).append(timed(fn, x, args.calls)[1])
        memo.ENABLED = True
        print(f"T={T}: " + ", ".join(f"{n} {min(v):.1f} us" for n, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
