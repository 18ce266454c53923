"""Qwen3.5's Gated DeltaNet decode step from the in-projection, in one launch: the short causal
conv (SiLU) of q, k, v, the raw gates and the recurrent update (``_recurrent_kernel`` of
:mod:`.gated_delta` with its conv variant ``KC``).

The conv state is a ring: token ``t``'s conv input lives in slot ``t % K`` of ``(B, C, K)``,
so a step reads the ``K - 1`` slots of earlier tokens and writes only its own. The programs
of one key head (several value heads and blocks of ``Dv``) then share its q/k channels
without racing: one of them writes them, none reads the slot written. A separate conv launch
in front of the step cost ~2.8 us a layer on the H200 (``scripts/fusion_bound.py``).
:func:`ring_history` and :func:`ring_store` convert between the ring and the ordered
``K - 1`` columns that :func:`~fastpath.ops.conv1d.causal_conv1d` continues from (prefill).
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core.errors import check_tensor
from .conv1d import reference_causal_conv1d
from .gated_delta import _check_raw, _kernel_ok, _launch_recurrent, _shape, gated_delta_rule_step


def _slots(start, n: int, K: int, device) -> torch.Tensor:
    """Ring slots of tokens ``start .. start + n - 1`` (``start`` an int or a (B,) tensor)."""
    if isinstance(start, int):
        return torch.tensor([(start + i) % K for i in range(n)], dtype=torch.int64, device=device)
    return (start.long()[:, None] + torch.arange(n, device=device)) % K


def ring_history(ring: torch.Tensor, p0: int) -> torch.Tensor:
    """The ``K - 1`` conv inputs before token ``p0``, oldest first: ``(B, C, K - 1)``."""
    K = ring.shape[2]
    return ring.index_select(2, _slots(p0 - (K - 1), K - 1, K, ring.device))


def ring_store(ring: torch.Tensor, last: torch.Tensor, end: int) -> None:
    """Write ``last`` (B, C, K - 1), the conv inputs of tokens ``end - K + 1 .. end - 1``,
    into their ring slots."""
    K = ring.shape[2]
    ring.index_copy_(2, _slots(end - (K - 1), K - 1, K, ring.device), last.to(ring.dtype))


def reference_gated_delta_conv_step(qkv, conv_state, conv_weight, pos, a, b, state, A_log, dt_bias,
                                    key_heads: int, scale: Optional[float] = None) -> torch.Tensor:
    """PyTorch path: the ring's history, ``causal_conv1d_update``'s math, the step."""
    B, C = qkv.shape
    K = conv_state.shape[2]
    HV, Dk, Dv = state.shape[1:]
    kd = key_heads * Dk
    hist = conv_state.gather(2, _slots(pos - (K - 1), K - 1, K, qkv.device)[:, None, :].expand(B, C, K - 1))
    mixed, _ = reference_causal_conv1d(qkv[:, :, None], conv_weight, None, hist, "silu")
    conv_state.scatter_(2, (pos.long() % K)[:, None, None].expand(B, C, 1), qkv[:, :, None].to(conv_state.dtype))
    mixed = mixed[:, :, 0]
    q, k, v = (mixed[:, :kd].unflatten(1, (key_heads, Dk)), mixed[:, kd:2 * kd].unflatten(1, (key_heads, Dk)),
               mixed[:, 2 * kd:].unflatten(1, (HV, Dv)))
    return gated_delta_rule_step(q, k, v, a, b, state, scale=scale, A_log=A_log, dt_bias=dt_bias)


def gated_delta_conv_step(qkv: torch.Tensor, conv_state: torch.Tensor, conv_weight: torch.Tensor,
                          pos: torch.Tensor, a: torch.Tensor, b: torch.Tensor, state: torch.Tensor,
                          A_log: torch.Tensor, dt_bias: torch.Tensor, *, key_heads: int,
                          scale: Optional[float] = None) -> torch.Tensor:
    """One decode token of Qwen3.5's Gated DeltaNet from its in-projection, in one launch:
    ``q, k, v = silu(causal_conv1d(qkv))`` (depthwise, K taps, no bias), l2-normalised q and k,
    ``g = -exp(A_log) * softplus(a + dt_bias)``, ``beta = sigmoid(b)``, then the gated delta
    rule step (:func:`~fastpath.ops.gated_delta.gated_delta_rule_step`). Updates
    ``conv_state`` and ``state`` in place; no host synchronisation (CUDA-graph capturable).

    Parameters
    ----------
    qkv : (B, C), the projection's conv channels ``[q (HK * Dk) | k (HK * Dk) | v (HV * Dv)]``
        for this token, float16 / bfloat16 / float32, any strides.
    conv_state : (B, C, K) ring: token t's input in slot ``t % K`` (:func:`ring_store`
        fills it from a prefill), qkv's dtype.
    conv_weight : (C, K) or (C, 1, K).
    pos : (B,) int64: this token's position (the slot it writes).
    a, b : (B, HV) raw gate projections. state : (B, HV, Dk, Dv) float32.
    A_log, dt_bias : (HV,) float. key_heads : HK. scale : multiplies q (default Dk ** -0.5).

    Returns
    -------
    o : (B, HV, Dv) in qkv's dtype.

    Raises
    ------
    ValueError naming the argument for shapes that do not fit together or tensors on another
    device than qkv's; TypeError for a state that is not float32, positions that are not
    int64, non-float inputs or non-tensor arguments.
    """
    for name, t in (("qkv", qkv), ("conv_state", conv_state), ("conv_weight", conv_weight), ("pos", pos),
                    ("a", a), ("b", b), ("state", state), ("A_log", A_log), ("dt_bias", dt_bias)):
        check_tensor(name, t)
        if t.device != qkv.device:
            raise ValueError(f"{name}: expected a tensor on {qkv.device} (qkv's), got {t.device}")
    for name, t in (("qkv", qkv), ("conv_state", conv_state), ("conv_weight", conv_weight), ("a", a), ("b", b)):
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point tensor, got {t.dtype}")
    if state.dim() != 4:
        raise ValueError(f"state: expected (B, HV, Dk, Dv), got shape {tuple(state.shape)}")
    B, HV, Dk, Dv = state.shape
    if isinstance(key_heads, bool) or not isinstance(key_heads, int) or key_heads < 1 or HV % key_heads:
        raise ValueError(f"key_heads: expected a positive divisor of the {HV} value heads, got {key_heads!r}")
    C = 2 * key_heads * Dk + HV * Dv
    _shape("qkv", qkv, (B, C), f"(batch, 2 * {key_heads} * {Dk} + {HV} * {Dv} conv channels)")
    if conv_weight.dim() == 3 and conv_weight.shape[1] == 1:
        conv_weight = conv_weight[:, 0]
    if conv_weight.dim() != 2 or conv_weight.shape[0] != C or conv_weight.shape[1] < 1:
        raise ValueError(f"conv_weight: expected (C, K) or (C, 1, K) with C = {C}, got {tuple(conv_weight.shape)}")
    K = conv_weight.shape[1]
    _shape("conv_state", conv_state, (B, C, K), "(batch, channels, a ring of K slots)")
    _shape("pos", pos, (B,), "(one position per row)")
    if pos.dtype != torch.int64:
        raise TypeError(f"pos: expected int64 positions, got {pos.dtype}")
    if state.dtype != torch.float32:
        raise TypeError(f"state: expected a float32 tensor (updated in place), got {state.dtype}")
    for name, t in (("a", a), ("b", b)):
        _shape(name, t, (B, HV), "(batch, value heads)")
    _check_raw(A_log, dt_bias, HV, qkv.device)
    sc = Dk ** -0.5 if scale is None else float(scale)
    if not _kernel_ok(qkv, a, b, A_log, dt_bias, conv_state, conv_weight):
        return reference_gated_delta_conv_step(qkv, conv_state, conv_weight, pos, a, b, state, A_log, dt_bias,
                                               key_heads, sc)
    kd = key_heads * Dk
    q = qkv[:, None, :kd].unflatten(-1, (key_heads, Dk))
    k = qkv[:, None, kd:2 * kd].unflatten(-1, (key_heads, Dk))
    v = qkv[:, None, 2 * kd:].unflatten(-1, (HV, Dv))
    o = _launch_recurrent(q, k, v, a[:, None], b[:, None], sc, True, state, state, None, A_log, dt_bias,
                          conv=(conv_state, conv_weight, pos.contiguous()))
    return o[:, 0]
