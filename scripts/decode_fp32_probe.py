"""float32 attention: the decode kernel's dot precision (``attention_prefill.F32_PREC``: exact
``ieee`` products or ``tf32x3``), row and key tiles (``attention.MAX_ROWS_F32``,
``attention.BLOCK_N``) and split length (``attention.MIN_KV_PER_SPLIT``) swept next to
``F.scaled_dot_product_attention`` on the same inputs, then causal prefill at both precisions.
Motivated by the prefill tail chunk at 16/2 heads of 256 taking ~880 us in float32 against
~31 us in bfloat16 (scripts/decode_stages_probe.py, H100). Times: medians of CUDA-graph replays
of 20 calls (us a call); errors (max abs) against a float64 SDPA.

    PYTHONPATH=src FASTPATH_LAUNCH_MEMO=0 python3 scripts/decode_fp32_probe.py
"""
import sys

import torch
import torch.nn.functional as F

from fastpath.bench.harness import knobs
from fastpath.ops import attention, attention_prefill
from fastpath.ops.attention import scaled_dot_product_attention as sdpa

from decode_stages_probe import graph_us

#: (precision, rows, key tile, fewest keys a split; None: the plan's): the plan as it is, the plan
#: before the forty-seventh session (exact dots, 64 rows, 128 keys a split), then variants.
#: ``--quick``: the first two, and prefill at tf32x3 only.
VARIANTS = ((None, None, None, None), ("ieee", 64, None, 128), ("ieee", 16, None, None),
            ("tf32x3", 32, None, None), ("tf32x3", 16, None, None), ("tf32x3", 16, 16, None), ("tf32x3", 32, None, 32),
            ("tf32x3", 16, None, 32))
SHAPES = ((16, 2, 256, 1, 528), (16, 2, 256, 5, 528), (16, 2, 256, 16, 528), (16, 2, 256, 1, 8192),
          (32, 8, 128, 1, 528), (32, 8, 128, 16, 528), (32, 8, 128, 1, 8192))


def main():
    dev = torch.device("cuda")
    variants = VARIANTS[:2] if "--quick" in sys.argv else VARIANTS
    names = (f"{p} rows {r} keys {n} split {m}" if p else "default" for p, r, n, m in variants)
    print("heads q/kv D T keys | torch (err) | " + " | ".join(names))
    for hq, hkv, D, T, S in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(1, h, n, D, device=dev, generator=g) for h, n in ((hq, T), (hkv, S), (hkv, S)))
        mask = torch.ones(T, S, dtype=torch.bool, device=dev).tril(S - T) if T > 1 else None
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True)
        cells = [torch_cell(q, k, v, mask, ref)]
        for prec, rows, bn, min_kv in variants:
            try:
                set_ = {"BLOCK_N": bn, **({"MAX_ROWS": rows, "MAX_ROWS_F32": rows} if rows else {}),
                        **({"MIN_KV_PER_SPLIT_F32": min_kv} if min_kv else {})}
                prec_ = knobs(attention_prefill, F32_PREC=prec or attention_prefill.F32_PREC)
                with knobs(attention, **set_), prec_:
                    err = (sdpa(q, k, v, attn_mask=mask, enable_gqa=True).double() - ref).abs().max().item()
                    us = graph_us(lambda: sdpa(q, k, v, attn_mask=mask, enable_gqa=True))
                cells.append(f"{us:.1f} ({err:.0e})")
            except Exception as exc:
                cells.append(type(exc).__name__)
                torch.cuda.synchronize()
        print(f"{hq}/{hkv} {D} {T} {S} | " + " | ".join(cells), flush=True)
    print("causal prefill: heads q/kv D L | torch (err) | ieee | tf32x3")
    for hq, hkv, D, L in ((32, 8, 128, 512), (16, 2, 256, 512), (32, 8, 128, 2048)):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(1, h, L, D, device=dev, generator=g) for h in (hq, hkv, hkv))
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, enable_gqa=True)
        cells = [torch_cell(q, k, v, None, ref, causal=True)]
        for prec in ("ieee", "tf32x3") if "--quick" not in sys.argv else ("tf32x3",):
            with knobs(attention_prefill, F32_PREC=prec):
                err = (sdpa(q, k, v, is_causal=True, enable_gqa=True).double() - ref).abs().max().item()
                us = graph_us(lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True))
            cells.append(f"{us:.1f} ({err:.0e})")
        print(f"{hq}/{hkv} {D} {L} | " + " | ".join(cells), flush=True)


def torch_cell(q, k, v, mask, ref, causal=False):
    def call():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
    err = (call().double() - ref).abs().max().item()
    return f"{graph_us(call):.1f} ({err:.0e})"


if __name__ == "__main__":
    main()
