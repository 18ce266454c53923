"""Rotary position embedding fused with what surrounds it in a decoder layer: split the fused
q/k/v projection into heads, RMS-normalise q and k per head (Qwen3, optional), rotate q and
k (the ``rotate_half`` convention of transformers), and write k and v straight into a KV
cache at each token's position. One launch instead of the dozen small kernels of the
eager code; no host synchronisation (positions are read on the device)."""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import pdl_start, tl, triton, triton_reason, use_triton
from .._core.errors import check_tensor
from .._core.launch import Launcher


@triton.jit
def _qkv_rope_kernel(x_ptr, pos_ptr, invf_ptr, qw_ptr, kw_ptr, q_ptr, ck_ptr, cv_ptr, T, eps,
                     sxb, sxt, spb, spt, sqb, sqt, sqh, skb, sks, skh, svb, svs, svh,
                     NH: tl.constexpr, NKV: tl.constexpr, HALF: tl.constexpr, NORM: tl.constexpr,
                     PDL: tl.constexpr = 0):
    pdl_start(PDL)
    bt = tl.program_id(0)
    h = tl.program_id(1)
    b = bt // T
    t = bt % T
    pos = tl.load(pos_ptr + b * spb + t * spt)
    i = tl.arange(0, HALF)
    src = x_ptr + b.to(tl.int64) * sxb + t.to(tl.int64) * sxt + h * (2 * HALF)
    x1 = tl.load(src + i)
    x2 = tl.load(src + HALF + i)
    dt = x1.dtype
    if h >= NH + NKV:  # a value head: copied into the cache as it is
        dst = cv_ptr + b.to(tl.int64) * svb + pos * svs + (h - NH - NKV) * svh
        tl.store(dst + i, x1)
        tl.store(dst + HALF + i, x2)
    else:
        a1 = x1.to(tl.float32)
        a2 = x2.to(tl.float32)
        if NORM:  # transformers' RMSNorm: float32 statistics, cast back, times the weight
            r = tl.rsqrt((tl.sum(a1 * a1, 0) + tl.sum(a2 * a2, 0)) / (2 * HALF) + eps)
            if h < NH:
                w1 = tl.load(qw_ptr + i)
                w2 = tl.load(qw_ptr + HALF + i)
            else:
                w1 = tl.load(kw_ptr + i)
                w2 = tl.load(kw_ptr + HALF + i)
            # the weight product of two `dt` values, exact in float32, then rounded to `dt`
            a1 = ((a1 * r).to(dt).to(tl.float32) * w1.to(tl.float32)).to(dt).to(tl.float32)
            a2 = ((a2 * r).to(dt).to(tl.float32) * w2.to(tl.float32)).to(dt).to(tl.float32)
        f = pos.to(tl.float32) * tl.load(invf_ptr + i)
        c = tl.cos(f)
        s = tl.sin(f)
        o1 = (a1 * c - a2 * s).to(dt)
        o2 = (a2 * c + a1 * s).to(dt)
        if h < NH:
            dst = q_ptr + b.to(tl.int64) * sqb + t.to(tl.int64) * sqt + h * sqh
        else:
            dst = ck_ptr + b.to(tl.int64) * skb + pos * sks + (h - NH) * skh
        tl.store(dst + i, o1)
        tl.store(dst + HALF + i, o2)


_ROPE = Launcher(_qkv_rope_kernel, pdl=True)


def reference_qkv_rope(qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_heads: int,
                       num_kv_heads: int, cache_k: torch.Tensor, cache_v: torch.Tensor,
                       q_norm: Optional[torch.Tensor] = None, k_norm: Optional[torch.Tensor] = None,
                       eps: float = 1e-6) -> torch.Tensor:
    """PyTorch path of :func:`qkv_rope` (the operations of transformers' attention layers)."""
    B, T, F = qkv.shape
    D = F // (num_heads + 2 * num_kv_heads)
    q, k, v = qkv.split([num_heads * D, num_kv_heads * D, num_kv_heads * D], dim=-1)
    q, k, v = q.view(B, T, num_heads, D), k.view(B, T, num_kv_heads, D), v.view(B, T, num_kv_heads, D)

    def norm(x, w):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    if q_norm is not None:
        q, k = norm(q, q_norm), norm(k, k_norm)
    f = positions.to(torch.float32)[..., None] * inv_freq.float()
    f = torch.cat((f, f), dim=-1)
    cos, sin = f.cos()[:, :, None].to(qkv.dtype), f.sin()[:, :, None].to(qkv.dtype)

    def rot(x):
        half = D // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    q, k = rot(q), rot(k)
    bidx = torch.arange(B, device=qkv.device)[:, None].expand(B, T)
    cache_k.index_put_((bidx, positions), k)
    cache_v.index_put_((bidx, positions), v)
    return q


def _kernel_ok(qkv, D, cache_k, cache_v, q_norm) -> bool:
    return (use_triton(qkv) and D >= 2 and D & (D - 1) == 0 and qkv.stride(-1) == 1
            and cache_k.stride(-1) == 1 and cache_v.stride(-1) == 1 and qkv.dtype != torch.float64)


def _checked(qkv, positions, inv_freq, num_heads: int, num_kv_heads: int, cache_k, cache_v, q_norm, k_norm) -> tuple:
    """``(B, T, D)`` of :func:`qkv_rope`'s arguments; ValueError naming the first bad one."""
    check_tensor("qkv", qkv)
    if qkv.dim() != 3 or num_heads < 1 or num_kv_heads < 1 or qkv.shape[-1] % (num_heads + 2 * num_kv_heads):
        raise ValueError(f"qkv: expected (B, T, (num_heads + 2 * num_kv_heads) * D) with num_heads={num_heads}, "
                         f"num_kv_heads={num_kv_heads}, got {tuple(qkv.shape)}")
    B, T, F = qkv.shape
    D = F // (num_heads + 2 * num_kv_heads)
    if tuple(positions.shape) != (B, T) or positions.dtype != torch.int64 or positions.device != qkv.device:
        raise ValueError(f"positions: expected int64 ({B}, {T}) on {qkv.device}, got {positions.dtype} "
                         f"{tuple(positions.shape)} on {positions.device}")
    if inv_freq.shape != (D // 2,) or not inv_freq.dtype.is_floating_point or inv_freq.device != qkv.device:
        raise ValueError(f"inv_freq: expected a float ({D // 2},) on {qkv.device}, got {inv_freq.dtype} "
                         f"{tuple(inv_freq.shape)} on {inv_freq.device}")
    for name, c in (("cache_k", cache_k), ("cache_v", cache_v)):
        if (c.dim() != 4 or c.shape[0] != B or tuple(c.shape[2:]) != (num_kv_heads, D) or c.dtype != qkv.dtype
                or c.device != qkv.device):
            raise ValueError(f"{name}: expected ({B}, S, {num_kv_heads}, {D}) of {qkv.dtype} on {qkv.device}, "
                             f"got {c.dtype} {tuple(c.shape)} on {c.device}")
    if (q_norm is None) != (k_norm is None):
        raise ValueError("q_norm, k_norm: give both or neither")
    for name, w in (("q_norm", q_norm), ("k_norm", k_norm)):
        if w is not None and (w.shape != (D,) or w.device != qkv.device):
            raise ValueError(f"{name}: expected ({D},) on {qkv.device}, got {tuple(w.shape)} on {w.device}")
    return B, T, D


def qkv_rope(qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_heads: int,
             num_kv_heads: int, cache_k: torch.Tensor, cache_v: torch.Tensor,
             q_norm: Optional[torch.Tensor] = None, k_norm: Optional[torch.Tensor] = None,
             eps: float = 1e-6) -> torch.Tensor:
    """Queries of a fused q/k/v projection, rotated; keys and values written into a cache.

    Parameters
    ----------
    qkv : Tensor ``(B, T, (num_heads + 2 * num_kv_heads) * D)``: q heads, then k heads, then v
        heads, each ``D`` wide (the output of one ``linear`` with the three weights stacked).
    positions : int64 Tensor ``(B, T)``: each token's position (its rotation and its cache slot).
    inv_freq : float32 Tensor ``(D / 2,)``: rotary inverse frequencies (scaling included).
    cache_k, cache_v : Tensors ``(B, S, num_kv_heads, D)`` of ``qkv``'s dtype (views are fine,
        last dim contiguous); token ``t`` of row ``b`` goes to ``[b, positions[b, t]]``.
    q_norm, k_norm : optional ``(D,)`` RMSNorm weights applied per head before the rotation
        (Qwen3), with ``eps``.

    Returns
    -------
    q : Tensor ``(B, T, num_heads, D)``. Positions must be in ``[0, S)`` (not checked: no sync).

    A Triton kernel when ``D`` is a power of two; otherwise (and off GPUs)
    :func:`reference_qkv_rope`.

    Raises
    ------
    ValueError naming the argument: ``qkv`` not ``(B, T, (num_heads + 2 * num_kv_heads) * D)``,
    ``positions`` not int64 ``(B, T)``, ``inv_freq`` not ``(D / 2,)``, caches of another shape or
    dtype, norm weights not ``(D,)`` or given alone, any tensor on another device than ``qkv``.
    """
    B, T, D = _checked(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm)
    if not _kernel_ok(qkv, D, cache_k, cache_v, q_norm):
        return reference_qkv_rope(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v,
                                  q_norm, k_norm, eps)
    q = alloc.empty(B, T, num_heads, D, dtype=qkv.dtype, device=qkv.device)
    norm = q_norm is not None
    _ROPE[(B * T, num_heads + 2 * num_kv_heads)](
        qkv, positions, inv_freq, q_norm if norm else qkv, k_norm if norm else qkv, q, cache_k, cache_v,
        T, float(eps), qkv.stride(0), qkv.stride(1), positions.stride(0), positions.stride(1),
        q.stride(0), q.stride(1), q.stride(2), cache_k.stride(0), cache_k.stride(1), cache_k.stride(2),
        cache_v.stride(0), cache_v.stride(1), cache_v.stride(2),
        NH=num_heads, NKV=num_kv_heads, HALF=D // 2, NORM=norm, num_warps=1 if D <= 128 else 2)
    return q


FAMILY = {"name": "rope", "ops": ["qkv_rope"], "reason": triton_reason}
