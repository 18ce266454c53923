"""GPU probe of the L2 prefetch (``fastpath._core.prefetch``): how much faster an output
projection runs when the rotary kernel before it asked for its weights and a latency-bound
wait (attention, here ``torch.cuda._sleep``) gave memory time to bring them in. One CUDA graph
a case (rotary kernel, wait, projection), L2 flushed before every replay, microseconds a
replay; the rotary kernel alone too (what issuing the prefetch costs it). Each way of asking
(``prefetch.MODE``: none, bulk, one instruction a line).

    PYTHONPATH=src python3 scripts/prefetch_probe.py [--json PATH]
"""
import argparse
import json

import torch

from fastpath._core import prefetch as P
from fastpath.ops.fp8 import quantize_fp8
from fastpath.ops.linear import linear
from fastpath.ops.rope import qkv_rope
from fastpath.streams import _flush_buffer, median_ms

#: (name, K, N, fp8): Qwen3-30B-A3B's o (4096 -> 2048), Qwen3-8B's (4096 -> 4096), LFM2.5's (2048 -> 2048)
SHAPES = [("30B o", 4096, 2048, False), ("30B o fp8", 4096, 2048, True), ("8B o", 4096, 4096, False),
          ("LFM2.5 o", 2048, 2048, False)]
WAITS_US = (0, 8)
MODES = {0: "no prefetch", 1: "bulk prefetch", 2: "line prefetch"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    flush = _flush_buffer(dev)
    torch.cuda._sleep(10 ** 6)  # the wait's clock: cycles a microsecond, measured
    ghz = 10 ** 6 / (1e3 * median_ms(lambda: torch.cuda._sleep(10 ** 6), 5)) / 1e3
    print(f"torch.cuda._sleep: {ghz:.2f} cycles a nanosecond")
    nh, nkv, D = 32, 4, 128
    qkv = torch.randn(1, 1, (nh + 2 * nkv) * D, device=dev, dtype=dt)
    pos = torch.tensor([[700]], device=dev)
    inv = 1.0 / 10000 ** (torch.arange(0, D, 2, device=dev).float() / D)
    ck = torch.zeros(1, 1024, nkv, D, device=dev, dtype=dt)
    cv = torch.zeros_like(ck)
    rows = []

    def graph_us(step):
        step()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        return 1e3 * median_ms(g.replay, 200, before=lambda: flush.sum())

    for name, K, N, fp8 in SHAPES:
        w = torch.randn(N, K, device=dev) * K ** -0.5
        w, s = (quantize_fp8(w, recipe="rowwise") if fp8 else (w.to(dt), None))
        s = s.reshape(-1, 1) if s is not None else None
        x = torch.randn(1, K, device=dev, dtype=dt)
        for mode in MODES:
            P.MODE = mode
            pf = w if mode else None
            row = dict(shape=name, K=K, N=N, fp8=fp8, mode=mode,
                       rotary_us=graph_us(lambda: qkv_rope(qkv, pos, inv, nh, nkv, ck, cv, prefetch=pf)))
            for wait in WAITS_US:
                def step():
                    qkv_rope(qkv, pos, inv, nh, nkv, ck, cv, prefetch=pf)
                    if wait:
                        torch.cuda._sleep(int(wait * ghz * 1e3))
                    linear(x, w, weight_scale=s)
                row[f"wait {wait} us"] = graph_us(step)
            rows.append(row)
            print(f"{name:10s} {MODES[mode]:14s}: rotary alone {row['rotary_us']:6.2f} us; rotary, wait, projection: "
                  + ", ".join(f"{k} {row[k]:6.2f}" for k in row if k.startswith("wait")), flush=True)
        P.MODE = 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
