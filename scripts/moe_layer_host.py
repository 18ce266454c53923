"""Wall time a call of eager MoE layers (host-bound sizes) on a GPU: ``router`` + ``fused_experts``
against ``moe_layer`` with and without its launch memo, Qwen3-30B-A3B shapes, 1 and 64 tokens.

    PYTHONPATH=src python3 scripts/moe_layer_host.py [--calls 300]
"""
import argparse
import time

import torch

from fastpath._core import memo
from fastpath.ops import moe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
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

    for T in (1, 64):
        x = torch.randn(T, H, device=dev, dtype=dt)
        res = {}
        for rnd in range(2):
            for name, fn, on in (("router + fused_experts", two, True), ("moe_layer", layer, True),
                                 ("moe_layer, memo off", layer, False)):
                memo.ENABLED = on
                for _ in range(5):
                    fn(x)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                torch.cuda.synchronize()
                res.setdefault(name, []).append(1e6 * (time.perf_counter() - t0) / args.calls)
        memo.ENABLED = True
        print(f"T={T}: " + ", ".join(f"{n} {min(v):.1f} us" for n, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
