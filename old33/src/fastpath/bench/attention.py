"""attention suite: fastpath.scaled_dot_product_attention against
``F.scaled_dot_product_attention(..., enable_gqa=True)`` on the same bf16 inputs.

* ``decode``: one query token per sequence over a KV cache (the split-KV kernel), Llama-3-8B
  heads (32 query / 8 key-value heads, head dim 128) at 1K, 8K and 32K keys, batch 1 and 8;
  Qwen3-like 32 / 4 heads and Gemma-like 16 / 2 heads of dim 256 at 8K keys. Decode reads
  every key and value once: its bytes are what the bandwidth roofline is computed from.
* ``prefill causal``: 4096 tokens attending causally, 32 query / 8 key-value heads of dim 128;
  compute-bound, so only its time and its ratio against PyTorch matter (its bytes are the
  inputs and output, a lower bound far from the time).

Shapes are (batch, query heads, key-value heads, query tokens, keys, head dim).
Bytes: the keys and values read, plus the queries read and the output written.
"""
from __future__ import annotations

import functools

from .harness import Case, close_check

LLAMA3_8B = (32, 8, 128)  # query heads, key-value heads, head dim


def _inputs(shape, dtype, device, seed):
    import torch
    B, H, Hkv, Q, KV, D = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)

    def randn(*s):
        return torch.randn(s, generator=g, device=device, dtype=torch.float32).to(dt)
    return randn(B, H, Q, D), randn(B, Hkv, KV, D), randn(B, Hkv, KV, D)


def _bytes(shape, itemsize):
    B, H, Hkv, Q, KV, D = shape
    return (2 * B * Hkv * KV * D + 2 * B * H * Q * D) * itemsize


def _ours(q, k, v, is_causal=False):
    from ..ops.attention import scaled_dot_product_attention
    return scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)


def _native(q, k, v, is_causal=False):
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)


def cases() -> list:
    H, Hkv, D = LLAMA3_8B
    out = []
    # (batch, query heads, kv heads, keys, head dim, target, cpu shape)
    decode = [
        (1, H, Hkv, 1024, D, ("us", 7.0), (1, 4, 1, 1, 67, 16)),
        (1, H, Hkv, 8192, D, None, (1, 4, 1, 1, 130, 16)),
        (1, H, Hkv, 32768, D, ("us", 28.0), (1, 4, 1, 1, 300, 16)),
        (8, H, Hkv, 32768, D, ("pct_copy", 85.0), (3, 4, 1, 1, 300, 16)),
        (1, 32, 4, 8192, 128, None, (1, 8, 1, 1, 130, 16)),
        (1, 16, 2, 8192, 256, None, (1, 8, 1, 1, 130, 64)),
    ]
    for B, h, hkv, KV, d, target, cpu in decode:
        out.append(Case(
            suite="attention", name="decode", shape=(B, h, hkv, 1, KV, d), dtype="bfloat16",
            ours=_ours, native=_native, check=close_check, nbytes=_bytes, cpu_shape=cpu, make=_inputs,
            target=target, graphs=True, quick=(B, KV, d) == (1, 1024, D)))
    out.append(Case(
        suite="attention", name="prefill causal", shape=(1, H, Hkv, 4096, 4096, D), dtype="bfloat16",
        ours=functools.partial(_ours, is_causal=True), native=functools.partial(_native, is_causal=True),
        check=close_check, nbytes=_bytes, cpu_shape=(1, 4, 2, 67, 67, 16), make=_inputs))
    return out
