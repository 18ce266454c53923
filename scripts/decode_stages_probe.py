"""The engine's prefill tail chunk (a few queries after 512 cached keys, a bool causal mask:
``models.transformer.chunk_attention``) through the decode kernel at two and three pipeline
stages (``attention.NUM_STAGES``; 0 is ``_decode_stages``' choice). Three stages overflow an
sm_90 block's shared memory for 64-row programs with a mask at head dim 256; the row says so.
Times are medians of CUDA-graph replays of 20 calls (warm L2: the cache is a few MB).

    PYTHONPATH=src python3 scripts/decode_stages_probe.py
"""
import torch

from fastpath.bench.harness import knobs
from fastpath.models.transformer import chunk_attention
from fastpath.ops import attention
from fastpath.streams import median_ms


def graph_us(fn, calls=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return 1e3 * median_ms(g.replay, 20) / calls


def main():
    dev = torch.device("cuda")
    print(f"{'heads q/kv':>10} {'D':>4} {'T':>3} {'dtype':>9} | " + " | ".join(f"stages {s}" for s in (0, 2, 3)))
    for hq, hkv, D in ((16, 2, 256), (32, 8, 128), (16, 4, 128)):
        for dt in (torch.bfloat16, torch.float32):
            for T in (5, 8, 16):
                q = torch.randn(1, hq, T, D, device=dev, dtype=dt)
                k = torch.randn(1, hkv, 512 + T, D, device=dev, dtype=dt)
                v = torch.randn(1, hkv, 512 + T, D, device=dev, dtype=dt)
                ref = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=torch.ones(T, 512 + T, dtype=torch.bool, device=dev).tril(512),
                    enable_gqa=True)
                cells = []
                for st in (0, 2, 3):
                    try:
                        with knobs(attention, NUM_STAGES=st):
                            out = chunk_attention(q, k, v, 512)
                            err = (out.float() - ref.float()).abs().max().item()
                            us = graph_us(lambda: chunk_attention(q, k, v, 512))
                        cells.append(f"{us:7.2f} us (err {err:.1e})")
                    except Exception as exc:  # e.g. OutOfResources at three stages
                        cells.append(type(exc).__name__)
                        torch.cuda.synchronize()
                print(f"{hq:>4}/{hkv:<5} {D:>4} {T:>3} {str(dt)[6:]:>9} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
