"""float32 decode attention (the exact ``ieee`` dot): the decode kernel's row and key tiles
(``attention.MAX_ROWS``, ``attention.BLOCK_N``) swept next to ``F.scaled_dot_product_attention``
on the same inputs. Motivated by the prefill tail chunk at 16/2 heads of 256 taking ~880 us in
float32 against ~31 us in bfloat16 (scripts/decode_stages_probe.py, H100). Times: medians of
CUDA-graph replays of 20 calls (us a call); errors against a float64 SDPA.

    PYTHONPATH=src FASTPATH_LAUNCH_MEMO=0 python3 scripts/decode_fp32_probe.py
"""
import torch
import torch.nn.functional as F

from fastpath.bench.harness import knobs
from fastpath.ops import attention
from fastpath.ops.attention import scaled_dot_product_attention as sdpa

from decode_stages_probe import graph_us

VARIANTS = ((64, None), (32, None), (16, None), (32, 16), (16, 16), (16, 64))
SHAPES = ((16, 2, 256, 1, 528), (16, 2, 256, 5, 528), (16, 2, 256, 16, 528), (16, 2, 256, 1, 8192),
          (32, 8, 128, 1, 528), (32, 8, 128, 16, 528), (32, 8, 128, 1, 8192))


def main():
    dev = torch.device("cuda")
    print("heads q/kv D T keys | torch | " + " | ".join(f"rows {r} keys {n}" for r, n in VARIANTS))
    for hq, hkv, D, T, S in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(1, h, n, D, device=dev, generator=g) for h, n in ((hq, T), (hkv, S), (hkv, S)))
        mask = torch.ones(T, S, dtype=torch.bool, device=dev).tril(S - T) if T > 1 else None
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True)
        cells = [f"{graph_us(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)):.1f}"]
        for rows, bn in VARIANTS:
            try:
                with knobs(attention, MAX_ROWS=rows, BLOCK_N=bn):
                    err = (sdpa(q, k, v, attn_mask=mask, enable_gqa=True).double() - ref).abs().max().item()
                    us = graph_us(lambda: sdpa(q, k, v, attn_mask=mask, enable_gqa=True))
                cells.append(f"{us:.1f} ({err:.0e})")
            except Exception as exc:
                cells.append(type(exc).__name__)
                torch.cuda.synchronize()
        print(f"{hq}/{hkv} {D} {T} {S} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
