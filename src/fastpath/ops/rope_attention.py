"""``qkv_rope_attention``: one decode step's attention straight from its fused q/k/v
projection row. What :func:`~fastpath.ops.rope.qkv_rope` followed by
:func:`~fastpath.ops.attention.scaled_dot_product_attention` compute, in the decode attention
kernel alone (``ROPE``): each program normalises and rotates the query heads of its group as
it loads them, and the program whose KV split holds the token's own position takes that key
and value from the projection row (normalised and rotated), adds them to its online softmax
from registers and writes them into the cache. The q/k norm + rotary launch is gone; no
program reads the cache row written in the same launch."""
from __future__ import annotations

import math
from typing import Optional

import torch

from .._core import alloc
from .._core.backend import triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES
from . import attention as _attn
from .rope import checked, qkv_rope, reference_qkv_rope

#: The one-launch path where the kernel serves the call; False: :func:`qkv_rope` and
#: :func:`~fastpath.ops.attention.scaled_dot_product_attention` (two launches a step, and
#: the combine), for A/B runs.
FUSED = True


def reference_qkv_rope_attention(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v,
                                 q_norm=None, k_norm=None, eps=1e-6, *, window=None, out_gate=None, scale=None):
    """PyTorch path of :func:`qkv_rope_attention`."""
    q = reference_qkv_rope(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm, eps)
    kv_len = (positions[:, 0] + 1).to(torch.int32)
    gate = out_gate.transpose(1, 2) if out_gate is not None else None
    a = _attn.reference_scaled_dot_product_attention(q.transpose(1, 2), cache_k.transpose(1, 2),
                                                     cache_v.transpose(1, 2), scale=scale, enable_gqa=True,
                                                     kv_len=kv_len, window=window, out_gate=gate)
    return a.transpose(1, 2)


def _two_launches(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm, eps,
                  window, out_gate, scale, kv_len):
    q = qkv_rope(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm, eps)
    kv_len = (positions[:, 0] + 1).to(torch.int32) if kv_len is None else kv_len
    gate = out_gate.transpose(1, 2) if out_gate is not None else None
    a = _attn.scaled_dot_product_attention(q.transpose(1, 2), cache_k.transpose(1, 2), cache_v.transpose(1, 2),
                                           scale=scale, enable_gqa=True, kv_len=kv_len, window=window, out_gate=gate)
    return a.transpose(1, 2)


def qkv_rope_attention(qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_heads: int,
                       num_kv_heads: int, cache_k: torch.Tensor, cache_v: torch.Tensor,
                       q_norm: Optional[torch.Tensor] = None, k_norm: Optional[torch.Tensor] = None,
                       eps: float = 1e-6, *, window: Optional[int] = None, out_gate: Optional[torch.Tensor] = None,
                       scale: Optional[float] = None, kv_len: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A decode step's attention from the fused q/k/v projection of one token a cache row.

    Equals ``q = qkv_rope(qkv, positions, ...)`` (per-head q/k RMSNorm when ``q_norm`` /
    ``k_norm`` are given, rotary embedding, k and v written into the cache at ``positions``)
    followed by ``scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True,
    kv_len=positions + 1, window=window, out_gate=out_gate, scale=scale)`` (heads moved as the
    two functions expect), in one launch on a GPU.

    Parameters
    ----------
    qkv : Tensor ``(B, 1, (num_heads + 2 * num_kv_heads) * D)``: the q heads, k heads, v heads
        of one token a row (the output of one ``linear`` with the weights stacked).
    positions : int64 Tensor ``(B, 1)``: each row's position: its rotation, its cache slot and
        the keys it attends (``0 .. position``; the last ``window`` of them with ``window``).
    inv_freq, cache_k, cache_v, q_norm, k_norm, eps : as for :func:`~fastpath.ops.rope.qkv_rope`.
    window : optional int >= 1: the token attends its ``window`` latest keys (itself included).
    out_gate : optional Tensor ``(B, 1, num_heads, D)`` of qkv's dtype: the output is
        ``attention * sigmoid(out_gate)`` (Qwen3.5's gated attention).
    scale : defaults to ``1 / sqrt(D)``.
    kv_len : optional int32 Tensor ``(B,)`` equal to ``positions[:, 0] + 1`` when the caller
        keeps it (the engine does): the two-launch path then skips computing it. Not checked
        against ``positions`` (no host sync); the one-launch path reads only ``positions``.

    Returns
    -------
    Tensor ``(B, 1, num_heads, D)`` of qkv's dtype. Positions must be in ``[0, S)`` (not
    checked: no host sync); the kernel writes no cache row outside it.

    The kernel serves D a power of two from 16 to 256 in float16 / bfloat16 / float32 on a
    GPU; otherwise (or with ``FUSED`` False) the two calls, and off GPUs
    :func:`reference_qkv_rope_attention`.

    Raises
    ------
    ValueError naming the argument: those of :func:`~fastpath.ops.rope.qkv_rope`, more than
    one token a row (``qkv``), ``window < 1``, an ``out_gate`` of another shape or dtype.
    """
    B, T, D = checked(qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm)
    if T != 1:
        raise ValueError(f"qkv: expected one token a row (B, 1, F), got {tuple(qkv.shape)}; "
                         "longer chunks take qkv_rope and scaled_dot_product_attention")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads: expected a multiple of num_kv_heads={num_kv_heads}, got {num_heads}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window: expected an int >= 1 or None, got {window!r}")
    if out_gate is not None and (tuple(out_gate.shape) != (B, 1, num_heads, D) or out_gate.dtype != qkv.dtype
                                 or out_gate.device != qkv.device):
        raise ValueError(f"out_gate: expected ({B}, 1, {num_heads}, {D}) of {qkv.dtype} on {qkv.device}, got "
                         f"{tuple(out_gate.shape)} {out_gate.dtype} on {out_gate.device}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    args = (qkv, positions, inv_freq, num_heads, num_kv_heads, cache_k, cache_v, q_norm, k_norm, eps)
    if not use_triton(qkv):
        return reference_qkv_rope_attention(*args, window=window, out_gate=out_gate, scale=scale)
    kernel = (FUSED and qkv.dtype in KERNEL_DTYPES and 16 <= D <= _attn.MAX_HEAD_DIM and D & (D - 1) == 0
              and qkv.stride(-1) == 1 and cache_k.stride(-1) == 1 and cache_v.stride(-1) == 1
              and not (torch.is_grad_enabled() and qkv.requires_grad))
    if not kernel:
        return _two_launches(*args, window, out_gate, scale, kv_len)
    out = alloc.empty(B, num_heads, 1, D, dtype=qkv.dtype, device=qkv.device)
    if B == 0:
        return out.transpose(1, 2)
    q = qkv[..., :num_heads * D].view(B, 1, num_heads, D).transpose(1, 2)
    gate = out_gate.transpose(1, 2) if out_gate is not None else None
    _attn._decode(q, cache_k.transpose(1, 2), cache_v.transpose(1, 2), None, None, out, False, scale, window,
                  num_heads // num_kv_heads, gate, rope=(positions, q_norm, k_norm, inv_freq, eps))
    return out.transpose(1, 2)


FAMILY = {"name": "rope_attention", "ops": ["qkv_rope_attention"], "reason": triton_reason}
