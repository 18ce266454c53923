"""Mixture-of-experts: ``route`` (router scores -> top-k experts and weights) and
``fused_experts`` (the whole routed expert MLP), as transformers' ``*TopKRouter`` and
``*Experts`` modules compute them.

* ``route``: one Triton program per token (kernel in :mod:`fastpath.ops.moe_kernels`).
  ``router``: the router matmul and ``route`` in one launch for a few tokens (the last
  program to finish its block of logits routes).
* ``fused_experts``, up to ``moe_kernels.ROWS_MAX_T`` (8) tokens: two launches without tensor
  cores, each of hundreds of programs streaming whole weight rows: gate/up + activation per
  (routed pair, few I columns), then down per (token, few outputs) over every slot, the
  slots added in a fixed order.
* ``fused_experts``, decode (9 to ``MAX_DECODE_TOKENS`` (16) tokens in a CUDA graph's capture,
  to ``MAX_DECODE_TOKENS_EAGER`` (48) eager, where host time counts): three launches and no
  sort. Every program of the gate/up and down kernels owns one expert and one block of
  output features; it finds the tokens routed to its expert from ``topk_ids`` on the
  device, exits at once if there are none, and otherwise streams its block of the
  expert's weights once for all of them (``tl.dot`` on a 16..64-row token tile, float32
  accumulation; forced, the kernels take any number of tokens in 64-row tiles). A third
  launch adds each token's k weighted slot outputs in the fixed order j = 0..k-1. No host
  synchronisation: capturable in a CUDA graph.
* ``fused_experts``, prefill: the T*k (token, slot) pairs are sorted by expert on the
  device, the rows gathered, and two grouped GEMMs (:func:`fastpath.ops.grouped_mm.grouped_mm`)
  with the activation between them compute every expert's rows; a gather-combine kernel
  un-permutes, weights and adds the slots in order (deterministic, no float atomics).
* FP8 experts: ``float8_e4m3fn`` weights with one float32 scale per output row, converted
  exactly in-kernel (hardware conversion on NVIDIA 8.9+, bit decoding elsewhere).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import INTERPRET, TL_DTYPES, triton_reason, needs_grad, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from . import moe_kernels as K
from .grouped_mm import grouped_mm
from .linear import linear
from .norm import _check as norm_check, rms_norm

_ROUTER, _ROUTE, _GATE_UP, _DOWN, _COMBINE, _ACT, _GATE_UP_ROWS, _DOWN_ROWS, _ALIGN, _PRESCALE = (
    Launcher(k, pdl=True) for k in (K._router_kernel, K._route_kernel, K._gate_up_kernel, K._down_kernel,
                                    K._combine_kernel, K._act_kernel, K._gate_up_rows_kernel, K._down_rows_kernel,
                                    K._align_kernel, K._prescale_kernel))
from .fp8.bits import _fp8_dtypes, fp8_load_mode

#: Tokens up to this take the decode kernels (no sort) while a CUDA graph is captured, where only
#: GPU time counts; more take the grouped-GEMM path. H200, Qwen3-30B-A3B shapes, the experts in a
#: CUDA graph (scripts/moe_path_ab.py, 16ec6e8), decode / grouped: bf16 12 tokens 168 / 173 us, 16
#: 199-220 / 203, 24 265-286 / 252, 32 287 / 271, 48 374 / 305, 64 380 / 310; fp8 12 130-142 / 137, 16
#: 148 / 159, 24 246-258 / 189, 32 248 / 210, 48 388-397 / 230, 64 394 / 233. (The grouped GEMM
#: streams each expert's weights at ~95-100% of copy bandwidth from 8 tokens up; the decode down
#: kernel, with 64-row tiles, at ~57%.)
MAX_DECODE_TOKENS = 16
#: The same limit for eager calls: the grouped path's host time (a sort launch, a gather, two
#: grouped GEMMs, the activation and the combine; not replayed by the launch memo) exceeds its GPU
#: time at a few dozen tokens. H200 host, bf16 eager with a cold L2 (``moe_path_ab.py --eager``,
#: fbb6f00; 48 tokens at 8551915), decode / grouped: 16 tokens 277 / 666 us, 24 265 / 394, 32 287 / 546,
#: 48 379 / 499, 64 380 / 317.
MAX_DECODE_TOKENS_EAGER = 48


def _decode_max(device: torch.device) -> int:
    """The most tokens the decode kernels take: fewer while a CUDA graph is captured. (While
    Dynamo traces the Python wrapper, the registered op decides at run time instead.)"""
    capturing = (device.type == "cuda" and not torch.compiler.is_compiling()
                 and torch.cuda.is_current_stream_capturing())
    return MAX_DECODE_TOKENS if capturing else MAX_DECODE_TOKENS_EAGER


#: Tokens per prefill round (bounds the temporaries: rows of T*k pairs, float32 gate/up).
PREFILL_CHUNK = 4096
#: A prefill round sorts its (token, slot) pairs by expert in one kernel (``_align_kernel``, one
#: launch instead of about ten PyTorch calls, each costing host time in an eager prefill) up to
#: this many pairs and experts; more take torch.sort.
ALIGN_MAX_PAIRS = 8192
ALIGN_MAX_EXPERTS = 1023
#: Largest number of experts the routing kernel holds in registers (more: reference path).
MAX_ROUTE_EXPERTS = 16384
#: Tests set this: force the FP8 decoding ("native" loads float8 tensors, "bits" decodes uint8).
FP8_DECODE: Optional[str] = None
#: fp8 experts against bfloat16 activations on the decode kernels: from this token tile up, x
#: is scaled to float16 once per call (``_prescale_kernel``, one more launch) instead of in
#: every gate/up weight tile. H200, Qwen3-30B-A3B shapes, experts in a graph
#: (scripts/moe_fp8_tokens.py, a61a678), per tile / once: 64 tokens 427 / 402 us, 32 tokens
#: 247 / 244, 16 tokens 148 / 155 (the launch costs more than it saves).
PRESCALE_MIN_BLOCK_T = 64
#: Tests set this to force a path of fused_experts: "decode" or "prefill" (None: by token count).
FORCE_PATH: Optional[str] = None

_ID_DTYPES = (torch.int32, torch.int64)


def _shape(t) -> tuple:
    return tuple(t.shape)


def _act_code(activation) -> int:
    name = K.ALIASES.get(activation, activation) if isinstance(activation, str) else activation
    if name not in K.ACTIVATIONS:
        raise NotImplementedError(f"activation: {activation!r} is not supported; supported: "
                                  f"{', '.join(K.ACTIVATIONS)} (aliases: {', '.join(K.ALIASES)})")
    return K.ACTIVATIONS[name]


# ============================================================================ route

def reference_route(router_logits: torch.Tensor, top_k: int, scoring: str = "softmax",
                    norm_topk_prob: bool = False, expert_bias: Optional[torch.Tensor] = None,
                    routed_scaling_factor: float = 1.0, *, norm_eps: Optional[float] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path of :func:`route` (float32 math; float64 logits stay float64)."""
    dt = torch.promote_types(router_logits.dtype, torch.float32)
    x = router_logits.to(dt)
    scores = torch.softmax(x, dim=-1) if scoring == "softmax" else torch.sigmoid(x)
    choice = scores if expert_bias is None else scores + expert_bias.to(dt)
    ids = torch.sort(choice, dim=-1, descending=True, stable=True).indices[..., :top_k]  # ties: lowest index
    w = scores.gather(-1, ids)
    if norm_topk_prob:
        eps = _norm_eps(scoring, norm_eps)
        w = w / (w.sum(dim=-1, keepdim=True) + eps)
    return w * routed_scaling_factor, ids


def _norm_eps(scoring: str, norm_eps: Optional[float]) -> float:
    if norm_eps is not None:
        return float(norm_eps)
    return 0.0 if scoring == "softmax" else 1e-6


def _route_fake(router_logits, top_k, sigmoid, norm, expert_bias, scale, eps, shared):
    shape = (*router_logits.shape[:-1], top_k + shared)
    return (router_logits.new_empty(shape, dtype=torch.float32),
            router_logits.new_empty(shape, dtype=torch.int64))


def _route_reference(router_logits, top_k, sigmoid, norm, expert_bias, scale, eps, shared):
    """:func:`route` by :func:`reference_route` (float32 weights), the shared slot appended."""
    E = router_logits.shape[-1] - shared
    w, ids = reference_route(router_logits[..., :E], top_k, "sigmoid" if sigmoid else "softmax", norm,
                             expert_bias, scale, norm_eps=eps)
    w = w.float()
    if shared:
        g = torch.sigmoid(router_logits[..., E:].float())
        w, ids = torch.cat((w, g), -1), torch.cat((ids, torch.full_like(ids[..., :1], E)), -1)
    return w, ids


@register_op("route", fake=_route_fake)
def _route_op(router_logits: torch.Tensor, top_k: int, sigmoid: bool, norm: bool,
              expert_bias: Optional[torch.Tensor], scale: float, eps: float,
              shared: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    E = router_logits.shape[-1] - shared
    lead = router_logits.shape[:-1]
    if (not use_triton(router_logits) or router_logits.dtype not in KERNEL_DTYPES or E > MAX_ROUTE_EXPERTS
            or (expert_bias is not None and expert_bias.dtype not in KERNEL_DTYPES)):
        return _route_reference(router_logits, top_k, sigmoid, norm, expert_bias, scale, eps, shared)
    x = router_logits.reshape(-1, E + shared)  # a view for any collapsible layout
    T, k = x.shape[0], top_k + shared
    w = alloc.empty(T, k, dtype=torch.float32, device=x.device)
    ids = alloc.empty(T, k, dtype=torch.int64, device=x.device)
    if T > 0:
        block_e, block_k, bitonic = K.topk_blocks(E, k)
        _ROUTE[(T,)](x, expert_bias if expert_bias is not None else x, w, ids, E, x.stride(0),
                     x.stride(1), w.stride(0), ids.stride(0), float(scale), float(eps),
                     TOPK=top_k, SIGMOID=sigmoid, HAS_BIAS=expert_bias is not None, NORM=norm,
                     SHARED=shared, BLOCK_E=block_e, BLOCK_K=block_k, BITONIC=bitonic,
                     num_warps=1 if block_e <= 256 else (4 if block_e <= 4096 else 8))
    return w.view(*lead, k), ids.view(*lead, k)


def route(router_logits: torch.Tensor, top_k: int, scoring: str = "softmax", norm_topk_prob: bool = False,
          expert_bias: Optional[torch.Tensor] = None, routed_scaling_factor: float = 1.0, *,
          norm_eps: Optional[float] = None, shared_gate: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top-k expert routing: ``(topk_weights, topk_ids)`` from router logits, as the
    transformers routers compute them.

    ``scoring="softmax"`` (Qwen3-MoE, Qwen3.5-MoE, Mixtral, OLMoE): ``p = softmax(logits)`` over
    the experts in float32, the ``top_k`` largest, then with ``norm_topk_prob`` divided by their
    sum (Mixtral and Qwen3.5-MoE always renormalise: pass ``True``; gpt-oss's softmax over the
    top-k logits is the same as softmax + renormalisation). ``scoring="sigmoid"`` (LFM2-MoE,
    DeepSeek-V3 style): ``s = sigmoid(logits)``; the experts are chosen by ``s + expert_bias``
    but weighted by the unbiased ``s``; with ``norm_topk_prob`` divided by ``sum + norm_eps``.
    Finally the weights are multiplied by ``routed_scaling_factor``.

    Parameters
    ----------
    router_logits : Tensor ``(..., E)`` (usually ``(T, E)``), float16 / bfloat16 / float32, any
        strides (leading dims that cannot be collapsed are copied once); float64 takes the
        reference path.
    top_k : int in ``[1, E]``.
    scoring : ``"softmax"`` or ``"sigmoid"``.
    norm_topk_prob : renormalise the k weights to sum to one.
    expert_bias : optional float Tensor ``(E,)``, added to the scores for choosing only
        (LFM2-MoE ``expert_bias``, DeepSeek-V3 ``e_score_correction_bias``).
    routed_scaling_factor : float multiplying the final weights.
    norm_eps : added to the sum when renormalising. Default: 0 for softmax (Qwen3-MoE, Mixtral,
        OLMoE divide by the plain sum), 1e-6 for sigmoid (LFM2-MoE); DeepSeek-V3 uses 1e-20.
    shared_gate : the last of the ``E + 1`` logits is a shared expert's gate (Qwen3.5-MoE's
        ``shared_expert_gate``, one more row of the router matrix): the ``E`` others are routed
        as above, and a ``top_k + 1``-th slot ``(id E, weight sigmoid(gate))`` is appended, so
        that :func:`fused_experts` runs a shared expert stacked as expert ``E`` in the same call.

    Returns
    -------
    ``(topk_weights, topk_ids)`` of shape ``(..., top_k)`` (``top_k + 1`` with ``shared_gate``):
    weights **float32** (transformers
    casts them to the logits' dtype afterwards; callers cast as they need, ``fused_experts``
    takes float32), ids **int64** like ``torch.topk``, ordered by decreasing (biased) score;
    equal scores go to the lowest expert index first. All math is float32, also for 16-bit
    logits (LFM2-MoE computes its sigmoid in the logits' dtype: weights can differ by that
    rounding). NaN logits rank first, as in ``torch.topk``. DeepSeek-V3's group-limited
    choice (``n_group > 1``) is not modelled: with one group it is this function.

    No host synchronisation; one Triton program per token. ``torch.compile`` traces it. Under
    autograd (an input that requires grad) the PyTorch path, which autograd records.

    Raises
    ------
    TypeError for a non-float ``router_logits`` or ``expert_bias``; ValueError for a bad
    ``top_k``, ``scoring``, ``expert_bias`` shape or device.

    Example
    -------
    >>> import torch, fastpath
    >>> logits = torch.randn(4, 128, dtype=torch.bfloat16)
    >>> w, ids = fastpath.route(logits, 8, norm_topk_prob=True)
    >>> w.dtype, ids.shape
    (torch.float32, torch.Size([4, 8]))
    """
    check_tensor("router_logits", router_logits)
    if not router_logits.dtype.is_floating_point:
        raise TypeError(f"router_logits: expected a floating-point tensor, got {router_logits.dtype}")
    if router_logits.dim() < 1:
        raise ValueError("router_logits: expected shape (..., num_experts), got a 0-d tensor")
    expert_bias = _check_route(router_logits.shape[-1] - bool(shared_gate), top_k, scoring, expert_bias,
                               router_logits.device, "router_logits")
    if needs_grad(router_logits, expert_bias):  # the kernel has no backward: torch's ops, which autograd records
        return _route_reference(router_logits, top_k, scoring == "sigmoid", bool(norm_topk_prob), expert_bias,
                                float(routed_scaling_factor), _norm_eps(scoring, norm_eps), bool(shared_gate))
    return _route_op(router_logits, top_k, scoring == "sigmoid", bool(norm_topk_prob), expert_bias,
                     float(routed_scaling_factor), _norm_eps(scoring, norm_eps), bool(shared_gate))


def _check_route(E: int, top_k, scoring: str, expert_bias: Optional[torch.Tensor], device: torch.device,
                 source: str) -> Optional[torch.Tensor]:
    """route's argument checks (E experts); returns ``expert_bias`` with unit stride."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= E:
        raise ValueError(f"top_k: expected an int in [1, {E}] (num_experts), got {top_k!r}")
    if scoring not in ("softmax", "sigmoid"):
        raise ValueError(f"scoring: expected 'softmax' or 'sigmoid', got {scoring!r}")
    if expert_bias is not None:
        check_tensor("expert_bias", expert_bias)
        if not expert_bias.dtype.is_floating_point:
            raise TypeError(f"expert_bias: expected a floating-point tensor, got {expert_bias.dtype}")
        if _shape(expert_bias) != (E,):
            raise ValueError(f"expert_bias: expected shape ({E},), got {_shape(expert_bias)}")
        if expert_bias.device != device:
            raise ValueError(f"expert_bias: expected a tensor on {device} like {source}, got {expert_bias.device}")
        if expert_bias.stride(0) != 1:
            expert_bias = expert_bias.contiguous()  # E elements
    return expert_bias


#: Tokens up to which :func:`router` runs its one-launch kernel (more: ``linear`` + ``route``).
ROUTER_MAX_T = 4
#: Router rows (experts) a program of the one-launch router. H200 (scripts/norm_fusion_ab.py
#: --router-blocks, 21d46bf, the norm fused, decode tok/s): Qwen3-30B-A3B 1 / 2 / 4 / 8 / 16
#: rows 353.0 / 354.2 / 352.6 / 347.9 / 334.6, FP8 432.7 / 433.7 / 431.0 (1, 2, 4), Qwen3.6
#: 387.9 / 387.8 / 381.9 / 369.1 (2, 4, 8, 16).
ROUTER_BLOCK_N = 2
#: Elements (tokens x router rows x hidden columns) of the one-launch router's tile; its loop
#: reads the hidden row in chunks of what is left for the columns.
ROUTER_TILE = 1024 if INTERPRET else 8192
#: The one-launch router loads its router rows before the hidden row (and its norm) where one
#: tile holds the whole row: one memory latency instead of two in its chain. H200 (knob_ab,
#: 6630a96, with matvec.NORM_W_FIRST): Qwen3.6 402.1 -> 407.8 tok/s, Qwen3-30B-A3B 351.9 -> 352.8.
ROUTER_W_FIRST = True


def _router_fake(x, weight, top_k, sigmoid, norm, expert_bias, scale, eps, shared):
    return (x.new_empty((x.shape[0], top_k + shared), dtype=torch.float32),
            x.new_empty((x.shape[0], top_k + shared), dtype=torch.int64))


@register_op("router", fake=_router_fake)
def _router_op(x: torch.Tensor, weight: torch.Tensor, top_k: int, sigmoid: bool, norm: bool,
               expert_bias: Optional[torch.Tensor], scale: float, eps: float,
               shared: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    if not _router_kernel_ok(x, weight, expert_bias, shared):
        return _route_op(linear(x, weight), top_k, sigmoid, norm, expert_bias, scale, eps, shared)
    return _router_launch(x, weight, top_k, sigmoid, norm, expert_bias, scale, eps, shared)


def _router_kernel_ok(x, weight, expert_bias, shared) -> bool:
    T, H = x.shape
    return (use_triton(x) and x.dtype in KERNEL_DTYPES and 0 < T <= ROUTER_MAX_T and H > 0
            and weight.shape[0] - shared <= MAX_ROUTE_EXPERTS
            and (expert_bias is None or expert_bias.dtype in KERNEL_DTYPES))


def _router_launch(x, weight, top_k, sigmoid, norm, expert_bias, scale, eps, shared, rms=None, route=True,
                   out=None):
    """The one-launch router; ``rms``: ``(norm weight, eps, residual or None, zero_centered,
    xn, h)``, x normalised in the kernel, which stores the normalised rows into ``xn`` (and
    ``x + residual`` into ``h``). ``route`` False: the logits only (the weights and ids are
    left for the gate/up row kernel to write); returns ``(w, ids, logits)`` then. ``out``: the
    ``(w, ids)`` to write ((T, top_k + shared) float32 and int64, contiguous)."""
    T, H = x.shape
    E = weight.shape[0] - shared
    k = top_k + shared
    w, ids = out if out is not None else (alloc.empty(T, k, dtype=torch.float32, device=x.device),
                                          alloc.empty(T, k, dtype=torch.int64, device=x.device))
    block_e, block_k, bitonic = K.topk_blocks(E, k)
    lg = workspace(x.device, "moe.router.logits", T * (E + shared), torch.float32)
    cnt = workspace(x.device, "moe.router.ticket", 1, torch.int32, zeroed=True)
    block_t = next_pow2(T)
    block_n = 16 if INTERPRET else ROUTER_BLOCK_N
    block_h = min(next_pow2(H), max(16, ROUTER_TILE // (block_t * block_n)))
    if rms is None:
        rargs, rflags = (x, x, x, x, 0, 0, 0, 0, 0.0), {}
    else:
        nw, neps, res, zc, xn, h = rms
        r = res if res is not None else x
        rargs = (r, nw, h, xn, r.stride(0), r.stride(1), xn.stride(0), nw.stride(0), float(neps))
        rflags = dict(RMS=2 if zc else 1, HAS_RES=res is not None,
                      RMS_DT=TL_DTYPES[torch.promote_types(nw.dtype, x.dtype)],
                      RMS_K=min(next_pow2(H), max(16, (64 if INTERPRET else 4096) // block_t)))
    _ROUTER[(cdiv(E + shared, block_n),)](
        x, weight, expert_bias if expert_bias is not None else x, lg, cnt, w, ids, T, H, E, x.stride(0), x.stride(1),
        weight.stride(0), weight.stride(1), w.stride(0), ids.stride(0), float(scale), float(eps), *rargs,
        TOPK=top_k, SIGMOID=sigmoid, HAS_BIAS=expert_bias is not None, NORM=norm, SHARED=shared, RNE=INTERPRET,
        BLOCK_T=block_t, BLOCK_N=block_n, BLOCK_H=block_h, BLOCK_E=block_e, BLOCK_K=block_k,
        BITONIC=bitonic, W_FIRST=ROUTER_W_FIRST and block_h >= H, num_warps=4 if block_e <= 4096 else 8,
        ROUTE=route, **rflags)
    return (w, ids) if route else (w, ids, lg)


def router(hidden_states: torch.Tensor, weight: torch.Tensor, top_k: int, scoring: str = "softmax",
           norm_topk_prob: bool = False, expert_bias: Optional[torch.Tensor] = None,
           routed_scaling_factor: float = 1.0, *, norm_eps: Optional[float] = None,
           shared_gate: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """``route(linear(hidden_states, weight), ...)``: the router matmul and the top-k routing,
    in one launch for up to ``ROUTER_MAX_T`` (4) tokens (decode), as two otherwise.

    Parameters
    ----------
    hidden_states : Tensor ``(T, H)``, float16 / bfloat16 / float32.
    weight : the router matrix ``(E, H)`` (``(E + 1, H)`` with ``shared_gate``), of
        ``hidden_states``' dtype.
    top_k, scoring, norm_topk_prob, expert_bias, routed_scaling_factor, norm_eps, shared_gate :
        as :func:`route`.

    Returns
    -------
    ``(topk_weights float32, topk_ids int64)`` of shape ``(T, top_k)`` (``top_k + 1`` with
    ``shared_gate``), equal to :func:`route` of the logits ``F.linear`` returns: the kernel
    rounds each logit to ``hidden_states.dtype`` before routing, as ``F.linear`` does. No host
    synchronisation. Under autograd: ``linear``, then :func:`route`'s PyTorch path.

    Raises
    ------
    TypeError / ValueError as :func:`route`, and for shapes or dtypes of ``hidden_states`` and
    ``weight`` that do not match.
    """
    x = hidden_states
    expert_bias = _check_router(x, weight, top_k, scoring, expert_bias, shared_gate)
    if needs_grad(x, weight, expert_bias):  # the kernel has no backward: linear, then torch's routing ops
        return _route_reference(linear(x, weight), top_k, scoring == "sigmoid", bool(norm_topk_prob), expert_bias,
                                float(routed_scaling_factor), _norm_eps(scoring, norm_eps), bool(shared_gate))
    return _router_op(x, weight, top_k, scoring == "sigmoid", bool(norm_topk_prob), expert_bias,
                      float(routed_scaling_factor), _norm_eps(scoring, norm_eps), bool(shared_gate))


def _check_router(x, weight, top_k, scoring, expert_bias, shared_gate):
    """:func:`router`'s checks; returns the expert bias as the kernels take it."""
    check_tensor("hidden_states", x)
    check_tensor("weight", weight)
    if not x.dtype.is_floating_point:
        raise TypeError(f"hidden_states: expected a floating-point tensor, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"hidden_states: expected shape (num_tokens, hidden_size), got {_shape(x)}")
    if weight.dtype != x.dtype:
        raise TypeError(f"weight: expected dtype {x.dtype} like hidden_states, got {weight.dtype}")
    if weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight: expected shape (num_experts, {x.shape[1]}) (hidden_size of hidden_states), "
                         f"got {_shape(weight)}")
    if weight.device != x.device:
        raise ValueError(f"weight: expected a tensor on {x.device} like hidden_states, got {weight.device}")
    return _check_route(weight.shape[0] - bool(shared_gate), top_k, scoring, expert_bias, x.device, "hidden_states")


#: rms_norm_router's one launch (False: the norm, then the router; an A/B knob).
FUSE_NORM = True


def rms_norm_router(hidden_states: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                    top_k: int, scoring: str = "softmax", norm_topk_prob: bool = False,
                    expert_bias: Optional[torch.Tensor] = None, routed_scaling_factor: float = 1.0, *,
                    residual: Optional[torch.Tensor] = None, zero_centered: bool = False,
                    shared_gate: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A MoE layer's norm and :func:`router` in one launch (up to ``ROUTER_MAX_T`` tokens):
    ``x, h = rms_norm(hidden_states, norm_weight, eps, residual=residual, zero_centered=...)``,
    then ``router(x, weight, top_k, ...)``. Every program of the router normalises the rows it
    reads (rounded as :func:`~fastpath.ops.norm.rms_norm` rounds, so the logits equal those
    of the two calls up to the order of the float32 sums); program 0 also stores ``x`` (the
    experts' input) and ``h``. More tokens, other devices: the two calls.

    Returns ``(topk_weights, topk_ids, x, h)``; ``h`` is ``hidden_states`` itself without a
    residual. Arguments and errors as :func:`~fastpath.ops.norm.rms_norm` and :func:`router`
    (``eps`` is the norm's). No host synchronisation. Under autograd: the two calls (their PyTorch paths).
    """
    x = hidden_states
    norm_check(x, norm_weight, residual, None, "silu", eps, "hidden_states", "norm_weight")
    kw = dict(scoring=scoring, norm_topk_prob=norm_topk_prob, expert_bias=expert_bias,
              routed_scaling_factor=routed_scaling_factor, shared_gate=shared_gate)
    if (not FUSE_NORM or x.dim() != 2 or norm_weight.dtype not in KERNEL_DTYPES
            or needs_grad(x, norm_weight, weight, residual, expert_bias)):  # (autograd: the calls' PyTorch paths)
        return _norm_then_router(x, norm_weight, eps, weight, top_k, residual, zero_centered, kw)
    expert_bias = _check_router(x, weight, top_k, scoring, expert_bias, shared_gate)
    if not _router_kernel_ok(x, weight, expert_bias, bool(shared_gate)):
        return _norm_then_router(x, norm_weight, eps, weight, top_k, residual, zero_centered, kw)
    xn = alloc.empty(x.shape, dtype=x.dtype, device=x.device)
    h = alloc.empty(x.shape, dtype=x.dtype, device=x.device) if residual is not None else x
    w, ids = _router_launch(x, weight, top_k, scoring == "sigmoid", bool(norm_topk_prob), expert_bias,
                            float(routed_scaling_factor), _norm_eps(scoring, None), bool(shared_gate),
                            rms=(norm_weight, eps, residual, bool(zero_centered), xn, h))
    return w, ids, xn, h


#: moe_layer / rms_norm_moe at up to ROUTER_MAX_T tokens: the router's launch ends with the logits
#: and each gate/up row program routes its own token (False: the router routes, then the experts
#: run; an A/B knob).
ROUTE_IN_EXPERTS = True


def moe_layer(hidden_states: torch.Tensor, weight: torch.Tensor, top_k: int, gate_up_proj: torch.Tensor,
              down_proj: torch.Tensor, scoring: str = "softmax", norm_topk_prob: bool = False,
              expert_bias: Optional[torch.Tensor] = None, routed_scaling_factor: float = 1.0, *,
              shared_gate: bool = False, gate_up_scale: Optional[torch.Tensor] = None,
              down_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A MoE layer's router and routed SwiGLU experts: ``w, ids = router(hidden_states, weight,
    top_k, ...)``, then ``fused_experts(hidden_states, ids, w, gate_up_proj, down_proj,
    gate_up_scale=..., down_scale=...)``, the same values. Up to ``ROUTER_MAX_T`` (4) tokens
    (decode), three launches: the router's ends with the logits (no ticket, no program that
    routes after all the others) and every program of the gate/up row kernel routes its own
    token from them before its weight loads; one of each token's programs stores the ids and
    weights the down kernel reads. Otherwise (more tokens, other devices, ``ROUTE_IN_EXPERTS``
    off, or under autograd) the two calls. Arguments and errors as :func:`router` and
    :func:`fused_experts`. No host synchronisation.

    Example
    -------
    >>> import torch, fastpath
    >>> E, H, I = 8, 64, 32
    >>> x, router_w = torch.randn(1, H), torch.randn(E, H)
    >>> gate_up, down = torch.randn(E, 2 * I, H) / H ** 0.5, torch.randn(E, H, I) / I ** 0.5
    >>> y = fastpath.ops.moe.moe_layer(x, router_w, 2, gate_up, down, norm_topk_prob=True)
    >>> y.shape
    torch.Size([1, 64])
    """
    kw = dict(scoring=scoring, norm_topk_prob=norm_topk_prob, expert_bias=expert_bias,
              routed_scaling_factor=routed_scaling_factor, shared_gate=shared_gate)
    tensors = (hidden_states, weight, gate_up_proj, down_proj, expert_bias, gate_up_scale, down_scale)
    call = lambda: _moe_layer(hidden_states, weight, top_k, gate_up_proj, down_proj, gate_up_scale,  # noqa: E731
                              down_scale, kw)
    return _LAYER_MEMO.call(call, tensors, (top_k, *_kw_key(kw))) if _few(hidden_states) else call()


def _few(x) -> bool:
    """Few enough tokens for the three launches, the memo's only replayable path (H200 host,
    64 tokens, scripts/moe_layer_host.py: moe_layer through the memo 889 us a call against 764
    for the two calls it then makes)."""
    return isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[0] <= min(ROUTER_MAX_T, K.ROWS_MAX_T)


def _kw_key(kw) -> tuple:
    """The routing options as a launch-memo key (the bias is one of the call's tensors)."""
    return tuple(v for n, v in kw.items() if n != "expert_bias")


def _moe_layer(x, weight, top_k, gate_up_proj, down_proj, gate_up_scale, down_scale, kw):
    done = _moe_fused(x, None, weight, top_k, gate_up_proj, down_proj, gate_up_scale, down_scale, kw)
    if done is not None:
        return done[0]
    w, ids = router(x, weight, top_k, **kw)
    return fused_experts(x, ids, w, gate_up_proj, down_proj, gate_up_scale=gate_up_scale, down_scale=down_scale)


def _rms_norm_moe(x, norm_weight, eps, weight, top_k, gate_up_proj, down_proj, residual, zero_centered,
                  gate_up_scale, down_scale, kw):
    if isinstance(norm_weight, torch.Tensor) and norm_weight.dtype in KERNEL_DTYPES:
        done = _moe_fused(x, (norm_weight, eps, residual, bool(zero_centered)), weight, top_k, gate_up_proj,
                          down_proj, gate_up_scale, down_scale, kw)
        if done is not None:
            return done
    w, ids, xn, h = rms_norm_router(x, norm_weight, eps, weight, top_k, residual=residual,
                                    zero_centered=zero_centered, **kw)
    return fused_experts(xn, ids, w, gate_up_proj, down_proj, gate_up_scale=gate_up_scale,
                         down_scale=down_scale), h


#: Eager calls with the properties of an earlier call replay its launches (fastpath._core.memo):
#: the routing, normalised rows and h between the launches live in workspaces for that.
_LAYER_MEMO = LaunchMemo()


def rms_norm_moe(hidden_states: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                 top_k: int, gate_up_proj: torch.Tensor, down_proj: torch.Tensor, scoring: str = "softmax",
                 norm_topk_prob: bool = False, expert_bias: Optional[torch.Tensor] = None,
                 routed_scaling_factor: float = 1.0, *, residual: Optional[torch.Tensor] = None,
                 zero_centered: bool = False, shared_gate: bool = False,
                 gate_up_scale: Optional[torch.Tensor] = None,
                 down_scale: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`moe_layer` of ``rms_norm(hidden_states, norm_weight, eps, residual=residual,
    zero_centered=...)``, the norm inside the router's launch as in :func:`rms_norm_router`:
    returns ``(out, h)`` (``h`` the residual stream, ``hidden_states`` itself without a
    residual), the values of ``rms_norm_router`` then ``fused_experts``. Arguments and errors as
    those two.

    Example
    -------
    >>> import torch, fastpath
    >>> E, H, I = 8, 64, 32
    >>> d, h = torch.randn(1, H), torch.randn(1, H)      # the attention output, the residual stream
    >>> norm_w, router_w = torch.ones(H), torch.randn(E, H)
    >>> gate_up, down = torch.randn(E, 2 * I, H) / H ** 0.5, torch.randn(E, H, I) / I ** 0.5
    >>> out, h = fastpath.ops.moe.rms_norm_moe(d, norm_w, 1e-6, router_w, 2, gate_up, down,
    ...                                        norm_topk_prob=True, residual=h)
    >>> out.shape, h.shape
    (torch.Size([1, 64]), torch.Size([1, 64]))
    """
    kw = dict(scoring=scoring, norm_topk_prob=norm_topk_prob, expert_bias=expert_bias,
              routed_scaling_factor=routed_scaling_factor, shared_gate=shared_gate)
    tensors = (hidden_states, norm_weight, weight, gate_up_proj, down_proj, residual, expert_bias, gate_up_scale,
               down_scale)
    call = lambda: _rms_norm_moe(hidden_states, norm_weight, eps, weight, top_k, gate_up_proj,  # noqa: E731
                                 down_proj, residual, zero_centered, gate_up_scale, down_scale, kw)
    if not _few(hidden_states):
        return call()
    return _LAYER_MEMO.call(call, tensors, ("norm", eps, bool(zero_centered), top_k, *_kw_key(kw)))


def _moe_fused(x, rms, weight, top_k, gate_up_proj, down_proj, gate_up_scale, down_scale, kw):
    """``(out, h)`` of :func:`moe_layer` / :func:`rms_norm_moe` (``rms``: ``(norm weight, eps,
    residual, zero_centered)`` or None) by the three launches, after every check; None where
    they do not apply (the caller then makes the two calls)."""
    if needs_grad(x, weight, gate_up_proj, down_proj, kw["expert_bias"], *(rms or ())):
        return None  # autograd: the separate calls, which take their PyTorch paths
    if not (ROUTE_IN_EXPERTS and FORCE_PATH is None and isinstance(x, torch.Tensor) and x.dim() == 2
            and 0 < x.shape[0] <= min(ROUTER_MAX_T, K.ROWS_MAX_T) and use_triton(x) and x.dtype in KERNEL_DTYPES
            and (rms is None or FUSE_NORM)):
        return None
    scoring, shared = kw["scoring"], bool(kw["shared_gate"])
    if rms is not None:
        norm_check(x, rms[0], rms[2], None, "silu", rms[1], "hidden_states", "norm_weight")
    bias = _check_router(x, weight, top_k, scoring, kw["expert_bias"], shared)
    T, H = x.shape
    k = top_k + shared
    w = workspace(x.device, "moe.route.w", T * k, torch.float32)[:T * k].view(T, k)
    ids = workspace(x.device, "moe.route.ids", T * k, torch.int64)[:T * k].view(T, k)
    _check_experts(x, ids, w, gate_up_proj, down_proj, None, None, gate_up_scale, down_scale)
    if not (_router_kernel_ok(x, weight, bias, shared) and H > 0 and gate_up_proj.shape[1] > 0
            and weight.shape[0] == gate_up_proj.shape[0]):  # (a router over more experts: the two calls)
        return None
    xn, h = x, x
    if rms is not None:
        xn = workspace(x.device, f"moe.xn.{x.dtype}", T * H, x.dtype)[:T * H].view(T, H)
        h = alloc.empty(x.shape, dtype=x.dtype, device=x.device) if rms[2] is not None else x
        rms = (*rms, xn, h)
    sigmoid, norm, scale = scoring == "sigmoid", bool(kw["norm_topk_prob"]), float(kw["routed_scaling_factor"])
    reps = _norm_eps(scoring, None)
    _, _, lg = _router_launch(x, weight, top_k, sigmoid, norm, bias, scale, reps, shared, rms=rms, route=False,
                              out=(w, ids))
    with torch.no_grad():
        out = _launch_rows(xn, ids, w, gate_up_proj, down_proj, None, None, gate_up_scale, down_scale,
                           K.ACTIVATIONS["silu"], False, 1.702, 7.0,
                           route=(lg, bias, sigmoid, norm, scale, reps, int(shared)))
    return out, h


def _norm_then_router(x, norm_weight, eps, weight, top_k, residual, zero_centered, kw):
    xn = rms_norm(x, norm_weight, eps, residual=residual, zero_centered=zero_centered)
    xn, h = xn if residual is not None else (xn, x)
    return (*router(xn, weight, top_k, **kw), xn, h)


# ============================================================================ fused_experts: reference

def _act_torch(g: torch.Tensor, u: torch.Tensor, code: int, alpha: float, limit: float) -> torch.Tensor:
    if code == 0:
        return F.silu(g) * u
    if code == 1:
        return F.gelu(g) * u
    if code == 2:
        return F.gelu(g, approximate="tanh") * u
    g = g.clamp(max=limit)
    u = u.clamp(min=-limit, max=limit)
    return (u + 1) * (g * torch.sigmoid(g * alpha))


def _rows_scale(s: Optional[torch.Tensor], e: int, dt) -> Optional[torch.Tensor]:
    return None if s is None else s[e].reshape(-1, 1).to(dt)


def reference_fused_experts(hidden_states: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                            gate_up_proj: torch.Tensor, down_proj: torch.Tensor, *, activation: str = "silu",
                            gate_up_bias: Optional[torch.Tensor] = None, down_bias: Optional[torch.Tensor] = None,
                            gate_up_scale: Optional[torch.Tensor] = None, down_scale: Optional[torch.Tensor] = None,
                            interleaved: bool = False, swiglu_alpha: float = 1.702,
                            swiglu_limit: float = 7.0) -> torch.Tensor:
    """PyTorch path of :func:`fused_experts`: the path on devices Triton does not serve and an
    oracle. Float32 math (float64 inputs: float64); the intermediate ``act(gate) * up`` is
    rounded to ``hidden_states.dtype`` as the kernels and transformers do; the k slot outputs
    are weighted and added in float32 in slot order, then cast. Ids outside ``[0, E)``
    contribute nothing. Loops over experts (host synchronisation: not for CUDA graphs)."""
    code = _act_code(activation)
    dt = torch.promote_types(hidden_states.dtype, torch.float32)
    T, H = hidden_states.shape
    E = gate_up_proj.shape[0]
    k = topk_ids.shape[1]
    x = hidden_states.to(dt)
    ids = topk_ids.long()
    w = topk_weights.to(dt)
    parts = torch.zeros(T, k, H, dtype=dt, device=hidden_states.device)
    for e in range(E):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        wgu = gate_up_proj[e].to(dt)
        if gate_up_scale is not None:
            wgu = wgu * _rows_scale(gate_up_scale, e, dt)
        gu = x[tok] @ wgu.t()
        if gate_up_bias is not None:
            gu = gu + gate_up_bias[e].to(dt)
        g, u = (gu[:, 0::2], gu[:, 1::2]) if interleaved else gu.chunk(2, dim=-1)
        h = _act_torch(g, u, code, swiglu_alpha, swiglu_limit).to(hidden_states.dtype).to(dt)
        wd = down_proj[e].to(dt)
        if down_scale is not None:
            wd = wd * _rows_scale(down_scale, e, dt)
        y = h @ wd.t()
        if down_bias is not None:
            y = y + down_bias[e].to(dt)
        parts[tok, slot] = y * w[tok, slot, None]
    out = parts[:, 0]
    for j in range(1, k):
        out = out + parts[:, j]
    return out.to(hidden_states.dtype)


# ============================================================================ fused_experts: launchers

def _fp8_mode(device: torch.device) -> int:
    return fp8_load_mode(device, FP8_DECODE)


def _operand(w: torch.Tensor, scaled: bool):
    """(tensor as the kernel loads it, MODE, E5M2)."""
    if not scaled:
        return w, 0, False
    mode = _fp8_mode(w.device)
    e5m2 = w.dtype == getattr(torch, "float8_e5m2", None)
    return (w.view(torch.uint8) if mode == 2 else w), mode, e5m2


def _dot_dtype(x: torch.Tensor, mode: int):
    """(dtype the kernels load a weight as and multiply in, S16): fp8 weights against bfloat16
    activations go through float16 (see ``moe_kernels._dot16``); float32 in the interpreter."""
    s16 = mode != 0 and x.dtype == torch.bfloat16
    if INTERPRET or x.dtype == torch.float32:
        return torch.float32, s16
    return (torch.float16 if s16 else x.dtype), s16


def _scale2d(s: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if s is None else (s.squeeze(-1) if s.dim() == 3 else s)


def _s(t: Optional[torch.Tensor]) -> tuple:
    return (t.stride(0), t.stride(1)) if t is not None else (0, 0)


def _setup(x, ids, gate_up, down, gu_scale, d_scale) -> tuple:
    """Shapes (T, H, k, E, I), the output, the 2-D scales, both weights as the kernels load
    them ((tensor, MODE, E5M2) each) and the gate/up weight's bytes per element."""
    T, H = x.shape
    E, I2, _ = gate_up.shape
    gu_scale, d_scale = _scale2d(gu_scale), _scale2d(d_scale)
    out = alloc.empty(T, H, dtype=x.dtype, device=x.device)
    return (T, H, ids.shape[1], E, I2 // 2, out, gu_scale, d_scale, _operand(gate_up, gu_scale is not None),
            _operand(down, d_scale is not None), 1 if gu_scale is not None else gate_up.element_size())


def _launch_decode(x, ids, tw, gate_up, down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved,
                   alpha, limit) -> torch.Tensor:
    if x.shape[0] <= K.ROWS_MAX_T:
        return _launch_rows(x, ids, tw, gate_up, down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved,
                            alpha, limit)
    T, H, k, E, NI, out, gu_scale, d_scale, (w1, mode1, e5m2_1), (w2, mode2, e5m2_2), wb = _setup(
        x, ids, gate_up, down, gu_scale, d_scale)
    p = K.decode_plan(T, k, E, H, NI, x.device, wb)
    dt = torch.float32 if (INTERPRET or x.dtype == torch.float32) else x.dtype
    dt1, s16_1 = _dot_dtype(x, mode1)
    h = workspace(x.device, f"moe.h.{x.dtype}", T * k * NI, x.dtype)
    y = workspace(x.device, "moe.y", T * k * H, torch.float32)
    dummy = out
    n0 = T * k if p.by_pair else E
    n_tb = cdiv(T, p.block_t)
    row_mul, up_off = (2, 1) if interleaved else (1, NI)
    xa, xs, sxa = x, dummy, x.stride()
    if s16_1 and p.block_t >= PRESCALE_MIN_BLOCK_T:  # x to float16 once, not per weight tile
        xa, sxa = workspace(x.device, "moe.x16", T * H, torch.float16), (H, 1)  # (T, H) contiguous
        xs = workspace(x.device, "moe.xs", T, torch.float32)
        _PRESCALE[(T,)](x, xa, xs, H, x.stride(0), x.stride(1), BLOCK_H=min(1024, next_pow2(H)), num_warps=4)
        s16_1 = 2
    _GATE_UP[(n0, cdiv(NI, p.block_i), n_tb)](
        xa, xs, ids, w1, gu_scale if gu_scale is not None else dummy, gu_bias if gu_bias is not None else dummy, h,
        T, H, NI, E, *sxa, ids.stride(0), ids.stride(1),
        w1.stride(0), w1.stride(1), w1.stride(2), *_s(gu_scale), *_s(gu_bias), row_mul, up_off,
        float(alpha), float(limit),
        TOPK=k, BY_PAIR=p.by_pair, MODE=mode1, E5M2=e5m2_1, HAS_SCALE=gu_scale is not None,
        HAS_BIAS=gu_bias is not None, ACT=code, DT=TL_DTYPES[dt1], S16=int(s16_1), RNE=INTERPRET,
        BLOCK_P=p.block_p, BLOCK_T=p.block_t, BLOCK_I=p.block_i, BLOCK_H=p.block_h, num_warps=p.warps)
    _DOWN[(n0, cdiv(H, p.block_n), n_tb)](
        h, ids, tw, w2, d_scale if d_scale is not None else dummy, d_bias if d_bias is not None else dummy, y,
        T, H, NI, E, ids.stride(0), ids.stride(1), tw.stride(0), tw.stride(1),
        w2.stride(0), w2.stride(1), w2.stride(2), *_s(d_scale), *_s(d_bias),
        TOPK=k, BY_PAIR=p.by_pair, MODE=mode2, E5M2=e5m2_2, HAS_SCALE=d_scale is not None,
        HAS_BIAS=d_bias is not None, DT=TL_DTYPES[dt], BLOCK_P=p.block_p, BLOCK_T=p.block_t,
        BLOCK_N=p.block_n, BLOCK_K=p.block_k, num_warps=p.warps)
    _COMBINE[(T, cdiv(H, p.block_c))](
        y, ids, tw, dummy, out, H, E, ids.stride(0), ids.stride(1), tw.stride(0), tw.stride(1), H,
        out.stride(0), out.stride(1), TOPK=k, GATHER=False, WEIGHTED=False, RNE=INTERPRET, BLOCK=p.block_c, num_warps=4)
    return out


def _launch_rows(x, ids, tw, gate_up, down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved,
                 alpha, limit, route=None) -> torch.Tensor:
    """Up to ROWS_MAX_T tokens: every program streams whole weight rows without tensor cores,
    gate/up over (pair, few I columns), then down over (token, few outputs) adding the slots.
    ``route``: ``(logits, expert_bias, sigmoid, norm, scale, eps, shared)``: the gate/up
    programs route each token from the router's logits and write ``ids`` and ``tw``."""
    T, H, k, E, NI, out, gu_scale, d_scale, (w1, mode1, e5m2_1), (w2, mode2, e5m2_2), wb = _setup(
        x, ids, gate_up, down, gu_scale, d_scale)
    p = K.rows_plan(k, NI, wb)
    if p.block_k2 and p.block_k + p.block_k2 < NI:  # (a swept plan; rows_plan never)
        raise ValueError(f"rows plan: a down step of {p.block_k} + {p.block_k2} columns must hold I = {NI}")
    h = workspace(x.device, f"moe.h.{x.dtype}", T * k * NI, x.dtype)
    dummy = out
    row_mul, up_off = (2, 1) if interleaved else (1, NI)
    rargs, rflags = (dummy, dummy, dummy, 0, 1.0, 0.0), {}
    if route is not None:
        lg, rbias, sigmoid, norm, scale, eps, shared = route
        block_e, _, bitonic = K.topk_blocks(E - shared, k)
        rargs = (lg, rbias if rbias is not None else dummy, tw, tw.stride(0), float(scale), float(eps))
        rflags = dict(ROUTE=True, SIGMOID=sigmoid, HAS_RBIAS=rbias is not None, RNORM=norm, SHARED=shared,
                      BLOCK_E=block_e, BITONIC=bitonic)
    _GATE_UP_ROWS[(T * k, cdiv(NI, p.block_i))](
        x, ids, w1, gu_scale if gu_scale is not None else dummy, gu_bias if gu_bias is not None else dummy, h,
        H, NI, E, x.stride(0), x.stride(1), ids.stride(0), ids.stride(1),
        w1.stride(0), w1.stride(1), w1.stride(2), *_s(gu_scale), *_s(gu_bias), row_mul, up_off,
        float(alpha), float(limit), *rargs,
        TOPK=k, MODE=mode1, E5M2=e5m2_1, HAS_SCALE=gu_scale is not None, HAS_BIAS=gu_bias is not None, ACT=code,
        RNE=INTERPRET, BLOCK_K8=p.block_k8, BLOCK_I=p.block_i, BLOCK_H=p.block_h, STAGES=p.stages,
        ROW_SUM=p.row_sum, num_warps=p.warps, **rflags)
    _DOWN_ROWS[(cdiv(H, p.block_n), T)](
        h, ids, tw, w2, d_scale if d_scale is not None else dummy, d_bias if d_bias is not None else dummy, out,
        H, NI, E, ids.stride(0), ids.stride(1), tw.stride(0), tw.stride(1),
        w2.stride(0), w2.stride(1), w2.stride(2), *_s(d_scale), *_s(d_bias), out.stride(0), out.stride(1),
        TOPK=k, MODE=mode2, E5M2=e5m2_2, HAS_SCALE=d_scale is not None, HAS_BIAS=d_bias is not None,
        RNE=INTERPRET, BLOCK_K8=p.block_k8, BLOCK_N=p.block_n, BLOCK_K=p.block_k, STAGES=p.stages,
        BLOCK_K2=p.block_k2, SLOT_SUM=p.slot_sum,
        num_warps=p.warps)
    return out


def _launch_prefill(x, ids, tw, gate_up, down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved,
                    alpha, limit) -> torch.Tensor:
    T, H = x.shape
    out = alloc.empty(T, H, dtype=x.dtype, device=x.device)
    step = PREFILL_CHUNK
    for t0 in range(0, T, step):
        _prefill_chunk(out[t0:t0 + step], x[t0:t0 + step], ids[t0:t0 + step], tw[t0:t0 + step], gate_up,
                       down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved, alpha, limit)
    return out


def _prefill_chunk(out, x, ids, tw, gate_up, down, gu_bias, d_bias, gu_scale, d_scale, code, interleaved,
                   alpha, limit) -> None:
    T, H = x.shape
    k = ids.shape[1]
    E, I2, _ = gate_up.shape
    NI = I2 // 2
    P = T * k
    dev = x.device
    offs, src, pos = _align(ids, E)
    xs = x.index_select(0, src)
    # gate/up in float32 (no rounding before the activation, like the decode kernels)
    gu = grouped_mm(xs, gate_up.transpose(1, 2), offs=offs, bias=_bias_for(gu_bias, x.dtype), out_dtype=torch.float32,
             scale_b=_scale2d(gu_scale))
    h = alloc.empty(P, NI, dtype=x.dtype, device=dev)
    col_mul, up_off = (2, 1) if interleaved else (1, NI)
    br, bi = (16, 32) if INTERPRET else (16, 128)
    _ACT[(cdiv(P, br), cdiv(NI, bi))](gu, h, P, NI, gu.stride(0), gu.stride(1), col_mul, up_off,
                                              float(alpha), float(limit), ACT=code, RNE=INTERPRET,
                                              BLOCK_R=br, BLOCK_I=bi)
    y = grouped_mm(h, down.transpose(1, 2), offs=offs, bias=_bias_for(d_bias, x.dtype), out_dtype=torch.float32,
            scale_b=_scale2d(d_scale))
    bc = 32 if INTERPRET else min(1024, max(128, next_pow2(H)))
    _COMBINE[(T, cdiv(H, bc))](
        y, ids, tw, pos, out, H, E, ids.stride(0), ids.stride(1), tw.stride(0), tw.stride(1), y.stride(0),
        out.stride(0), out.stride(1), TOPK=k, GATHER=True, WEIGHTED=True, RNE=INTERPRET, BLOCK=bc, num_warps=4)


def _align(ids: torch.Tensor, E: int) -> tuple:
    """The (T, k) pairs sorted by expert, stably, ids outside [0, E) last (a trailing bucket
    no GEMM reads): ``offs`` (E,) int32 cumulative group ends, ``src`` (T*k,) the token of
    each sorted row, ``pos`` (T*k,) each pair's sorted row."""
    flat = ids.reshape(-1)
    P, k, dev = flat.numel(), ids.shape[1], ids.device
    if P <= ALIGN_MAX_PAIRS and E <= ALIGN_MAX_EXPERTS:
        offs = alloc.empty(E, dtype=torch.int32, device=dev)
        src = alloc.empty(P, dtype=torch.int32, device=dev)
        pos = alloc.empty(P, dtype=torch.int32, device=dev)
        bp = max(16, next_pow2(P))
        _ALIGN[(1,)](flat, offs, src, pos, P, E, flat.stride(0), TOPK=k, BLOCK_P=bp, BLOCK_E=max(16, next_pow2(E + 1)),
                     num_warps=max(1, min(16, bp // 512)))
        return offs, src, pos
    key = torch.where((flat >= 0) & (flat < E), flat, E)
    sorted_key, order = torch.sort(key, stable=True)
    ends = torch.arange(1, E + 1, device=dev, dtype=sorted_key.dtype)
    offs = torch.searchsorted(sorted_key, ends).to(torch.int32)
    pos = torch.empty_like(order)
    pos.scatter_(0, order, torch.arange(P, device=dev, dtype=order.dtype))
    return offs, order // k, pos


def _bias_for(b: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    """grouped_mm takes a bias of mat_a's dtype or of out_dtype (float32): others are
    converted (E x N elements, not a weight)."""
    return b if b is None or b.dtype in (dtype, torch.float32) else b.float()


# ============================================================================ fused_experts: op

def _fe_fake(hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias,
             gate_up_scale, down_scale, act, interleaved, alpha, limit):
    return hidden_states.new_empty(hidden_states.shape)


@register_op("fused_experts", fake=_fe_fake)
def _fused_experts_op(hidden_states: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                      gate_up_proj: torch.Tensor, down_proj: torch.Tensor, gate_up_bias: Optional[torch.Tensor],
                      down_bias: Optional[torch.Tensor], gate_up_scale: Optional[torch.Tensor],
                      down_scale: Optional[torch.Tensor], act: int, interleaved: bool, alpha: float,
                      limit: float) -> torch.Tensor:
    x = hidden_states
    T, H = x.shape
    NI = gate_up_proj.shape[1] // 2
    if (not use_triton(x) or x.dtype not in KERNEL_DTYPES or T == 0 or H == 0 or NI == 0
            or gate_up_proj.shape[0] == 0):
        name = {v: n for n, v in K.ACTIVATIONS.items()}[act]
        out = reference_fused_experts(x, topk_ids, topk_weights, gate_up_proj, down_proj, activation=name,
                                      gate_up_bias=gate_up_bias, down_bias=down_bias, gate_up_scale=gate_up_scale,
                                      down_scale=down_scale, interleaved=interleaved, swiglu_alpha=alpha,
                                      swiglu_limit=limit)
        res = alloc.empty(T, H, dtype=x.dtype, device=x.device)
        return res.copy_(out)
    args = (x, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias, gate_up_scale,
            down_scale, act, interleaved, alpha, limit)
    path = FORCE_PATH or ("decode" if T <= _decode_max(x.device) else "prefill")
    with torch.no_grad():  # inference only: grouped_mm must not record its autograd graph
        return _launch_decode(*args) if path == "decode" else _launch_prefill(*args)


def _check_same_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"{name}: expected a tensor on {device} like hidden_states, got {t.device}")


def _check_experts(hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias,
                   gate_up_scale, down_scale) -> None:
    x = hidden_states
    check_tensor("hidden_states", x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"hidden_states: expected a floating-point tensor, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"hidden_states: expected shape (num_tokens, hidden_size), got {_shape(x)}")
    T, H = x.shape
    check_tensor("topk_ids", topk_ids, dtypes=_ID_DTYPES)
    if topk_ids.dim() != 2 or topk_ids.shape[0] != T or topk_ids.shape[1] < 1:
        raise ValueError(f"topk_ids: expected shape ({T}, top_k) with top_k >= 1 (one row per token of "
                         f"hidden_states), got {_shape(topk_ids)}")
    k = topk_ids.shape[1]
    check_tensor("topk_weights", topk_weights)
    if not topk_weights.dtype.is_floating_point:
        raise TypeError(f"topk_weights: expected a floating-point tensor, got {topk_weights.dtype}")
    if _shape(topk_weights) != (T, k):
        raise ValueError(f"topk_weights: expected shape ({T}, {k}) like topk_ids, got {_shape(topk_weights)}")
    fp8 = _fp8_dtypes()
    for name, w, sname, s in (("gate_up_proj", gate_up_proj, "gate_up_scale", gate_up_scale),
                              ("down_proj", down_proj, "down_scale", down_scale)):
        check_tensor(name, w)
        if s is None:
            if w.dtype in fp8:
                raise TypeError(f"{name}: a {w.dtype} weight needs {sname} (float32, one scale per output row); "
                                f"got {sname}=None")
            if w.dtype != x.dtype:
                raise TypeError(f"{name}: expected dtype {x.dtype} like hidden_states, got {w.dtype}")
        else:
            check_tensor(sname, s)
            if w.dtype not in fp8:
                raise TypeError(f"{name}: {sname} needs a float8_e4m3fn (or float8_e5m2) weight, got {w.dtype}")
            if s.dtype != torch.float32:
                raise TypeError(f"{sname}: expected dtype float32, got {s.dtype}")
    if gate_up_proj.dim() != 3 or gate_up_proj.shape[2] != H or gate_up_proj.shape[1] % 2:
        raise ValueError(f"gate_up_proj: expected shape (num_experts, 2 * intermediate_size, {H}) (hidden_size "
                         f"{H} of hidden_states; for gpt-oss's (E, H, 2I) storage pass .transpose(1, 2)), "
                         f"got {_shape(gate_up_proj)}")
    E, NI = gate_up_proj.shape[0], gate_up_proj.shape[1] // 2
    if _shape(down_proj) != (E, H, NI):
        raise ValueError(f"down_proj: expected shape ({E}, {H}, {NI}) = (num_experts, hidden_size, "
                         f"intermediate_size) to match gate_up_proj {_shape(gate_up_proj)} (for (E, I, H) storage "
                         f"pass .transpose(1, 2)), got {_shape(down_proj)}")
    for name, t, n in (("gate_up_scale", gate_up_scale, 2 * NI), ("down_scale", down_scale, H)):
        if t is not None and _shape(t) not in ((E, n), (E, n, 1)):
            raise ValueError(f"{name}: expected shape ({E}, {n}) or ({E}, {n}, 1) (one scale per output row of "
                             f"each expert), got {_shape(t)}")
    for name, t, n in (("gate_up_bias", gate_up_bias, 2 * NI), ("down_bias", down_bias, H)):
        if t is None:
            continue
        check_tensor(name, t)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point tensor, got {t.dtype}")
        if _shape(t) != (E, n):
            raise ValueError(f"{name}: expected shape ({E}, {n}), got {_shape(t)}")
    for name, t in (("topk_ids", topk_ids), ("topk_weights", topk_weights), ("gate_up_proj", gate_up_proj),
                    ("down_proj", down_proj), ("gate_up_bias", gate_up_bias), ("down_bias", down_bias),
                    ("gate_up_scale", gate_up_scale), ("down_scale", down_scale)):
        if t is not None:
            _check_same_device(name, t, x.device)


def fused_experts(hidden_states: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                  gate_up_proj: torch.Tensor, down_proj: torch.Tensor, *, activation: str = "silu",
                  gate_up_bias: Optional[torch.Tensor] = None, down_bias: Optional[torch.Tensor] = None,
                  gate_up_scale: Optional[torch.Tensor] = None, down_scale: Optional[torch.Tensor] = None,
                  interleaved: bool = False, swiglu_alpha: float = 1.702, swiglu_limit: float = 7.0,
                  validate: bool = False) -> torch.Tensor:
    """The routed expert MLPs of a mixture-of-experts layer, as transformers' ``*Experts``
    modules compute them: for each token t and slot j with expert ``e = topk_ids[t, j]``::

        g, u = split(x_t @ gate_up_proj[e].T + gate_up_bias[e])
        y_tj = (act(g) * u) @ down_proj[e].T + down_bias[e]
        out_t = sum_j topk_weights[t, j] * y_tj

    Parameters
    ----------
    hidden_states : Tensor ``(T, H)``, float16 / bfloat16 / float32, any strides (float64:
        reference path).
    topk_ids : int64 or int32 Tensor ``(T, k)`` (from :func:`route` or a transformers router).
        Ids outside ``[0, E)`` select nothing and contribute nothing (transformers uses id
        ``E`` to mask a slot); the kernels never read out of bounds for them. They are not
        reported unless ``validate=True``.
    topk_weights : float Tensor ``(T, k)`` (float32 or ``hidden_states.dtype``).
    gate_up_proj : Tensor ``(E, 2I, H)``: rows ``[0, I)`` the gate, ``[I, 2I)`` the up
        projection (or alternating gate, up rows with ``interleaved=True``), as
        Qwen3-MoE, Qwen3.5-MoE, Mixtral, OLMoE, LFM2-MoE and DeepSeek-V3 store
        ``experts.gate_up_proj`` in transformers 5. Any strides, never copied: gpt-oss stores
        ``(E, H, 2I)``: pass ``gate_up_proj.transpose(1, 2)``. The dtype of ``hidden_states``,
        or ``float8_e4m3fn`` with ``gate_up_scale``.
    down_proj : Tensor ``(E, H, I)``, the same rules (gpt-oss: ``down_proj.transpose(1, 2)``).
    activation : ``"silu"`` (SwiGLU, default), ``"gelu"`` (erf), ``"gelu_tanh"``, or
        ``"gpt_oss"``: gpt-oss's clamped SwiGLU ``(clamp(u, -l, l) + 1) * g' * sigmoid(alpha g')``
        with ``g' = min(g, l)``, ``alpha = swiglu_alpha``, ``l = swiglu_limit``; gpt-oss also
        needs ``interleaved=True`` and its biases.
    gate_up_bias, down_bias : optional float Tensors ``(E, 2I)`` and ``(E, H)`` (gpt-oss's
        ``gate_up_proj_bias``, ``down_proj_bias``); ``down_bias`` is added before weighting.
    gate_up_scale, down_scale : float32 Tensors ``(E, 2I)`` and ``(E, H)`` (or with a trailing
        1): per-output-row scales of FP8 weights, ``W[e] = q[e].float() * scale[e][:, None]``
        (see :func:`quantize_experts`).
    interleaved : gate and up are columns ``2i`` and ``2i + 1`` of the gate/up output.
    validate : check on the host that every id is in ``[0, E)`` (a host synchronisation:
        not for CUDA graphs) and raise ``ValueError`` otherwise.

    Returns
    -------
    Tensor ``(T, H)`` of ``hidden_states.dtype``. Products accumulate in float32; ``act(g) * u``
    is rounded to ``hidden_states.dtype`` (as in transformers); the k slot outputs are
    weighted and added in float32 in slot order (deterministic) and rounded once.

    Paths: up to ``moe_kernels.ROWS_MAX_T`` (8) tokens, two launches without tensor cores:
    gate/up and the activation over (routed pair, 16 columns of I), then the down projection
    over (token, 8 outputs) for every slot, added in a fixed order (no combine launch). Up to
    16 tokens while a CUDA graph is captured, 48 eager (``MAX_DECODE_TOKENS``,
    ``MAX_DECODE_TOKENS_EAGER``), three Triton launches without a sort that read each
    routed expert's weights once. Neither synchronises with the host (CUDA-graph capturable).
    FP8 weights against bfloat16 activations multiply in float16 on the tensor cores, the
    activations scaled per row by a power of two (exact; one conversion per fp8 pair), or
    in float32 up to 8 tokens.
    More tokens: the pairs are sorted by expert on the device and two grouped GEMMs run
    (:mod:`fastpath.ops.grouped_mm`), ``PREFILL_CHUNK`` (4096) tokens at a time, with float32
    temporaries of ``chunk * k * (2I + H)`` elements (no host synchronisation either). On
    devices Triton does not serve, and for float64, :func:`reference_fused_experts` runs.
    The kernels have no backward: under autograd (an input that requires grad) the call takes
    :func:`reference_fused_experts`, which autograd records. ``torch.compile`` traces it as one op.

    Raises
    ------
    TypeError for a dtype mismatch (naming the argument), an FP8 weight without its scale or a
    scale without an FP8 weight, ids that are not int32/int64; ValueError for shapes that do
    not match (``H``, ``I``, ``E``, ``k``) or tensors on different devices (and for
    out-of-range ids with ``validate=True``); NotImplementedError for an unknown activation.

    Example
    -------
    >>> import torch, fastpath
    >>> E, H, I, T = 8, 64, 32, 3
    >>> x = torch.randn(T, H)
    >>> w, ids = fastpath.route(torch.randn(T, E), 2, norm_topk_prob=True)  # or a model's router
    >>> gate_up, down = torch.randn(E, 2 * I, H), torch.randn(E, H, I)    # e.g. moe.experts.gate_up_proj, .down_proj
    >>> fastpath.fused_experts(x, ids, w, gate_up, down).shape
    torch.Size([3, 64])
    """
    tensors = (hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias,
               gate_up_scale, down_scale)
    if (not validate and FORCE_PATH is None and isinstance(hidden_states, torch.Tensor)
            and hidden_states.dim() == 2 and hidden_states.shape[0] <= _decode_max(hidden_states.device)):
        # the decode path (allocations and Triton launches only): replayed by the launch memo
        return _MEMO.call(lambda: _checked_experts(*tensors, activation, interleaved, swiglu_alpha, swiglu_limit,
                                                   False), tensors,
                          (activation, interleaved, swiglu_alpha, swiglu_limit))
    return _checked_experts(*tensors, activation, interleaved, swiglu_alpha, swiglu_limit, validate)


#: Eager decode calls with the properties of an earlier call replay its launches (fastpath._core.memo).
_MEMO = LaunchMemo()


def _checked_experts(hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias,
                     gate_up_scale, down_scale, activation, interleaved, swiglu_alpha, swiglu_limit, validate):
    code = _act_code(activation)
    _check_experts(hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias,
                   gate_up_scale, down_scale)
    if validate and topk_ids.numel() > 0:
        E = gate_up_proj.shape[0]
        bad = (topk_ids < 0) | (topk_ids >= E)
        if bool(bad.any()):
            first = bad.nonzero()[0].tolist()
            raise ValueError(f"topk_ids: expected ids in [0, {E}) (num_experts), got {int(topk_ids[tuple(first)])} "
                             f"at {tuple(first)}")
    if needs_grad(hidden_states, topk_weights, gate_up_proj, down_proj, gate_up_bias, down_bias):
        return reference_fused_experts(  # the kernels have no backward: torch's ops, which autograd records
            hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, activation=activation,
            gate_up_bias=gate_up_bias, down_bias=down_bias, gate_up_scale=gate_up_scale, down_scale=down_scale,
            interleaved=interleaved, swiglu_alpha=swiglu_alpha, swiglu_limit=swiglu_limit)
    return _fused_experts_op(hidden_states, topk_ids, topk_weights, gate_up_proj, down_proj, gate_up_bias,
                             down_bias, gate_up_scale, down_scale, code, bool(interleaved), float(swiglu_alpha),
                             float(swiglu_limit))


def quantize_experts(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """FP8 expert weights with one float32 scale per output row, for :func:`fused_experts`.

    ``w`` : Tensor ``(E, N, K)`` in the layout ``fused_experts`` reads (``gate_up_proj``
    ``(E, 2I, H)`` or ``down_proj`` ``(E, H, I)``; for gpt-oss pass the ``.transpose(1, 2)``
    views), any strides. Returns ``(q, scale)``: ``q`` contiguous ``float8_e4m3fn`` ``(E, N, K)``,
    ``scale`` float32 ``(E, N)``, ``w ~= q.float() * scale[..., None]``
    (:func:`fastpath.ops.fp8.quantize_fp8` ``"rowwise"``, each row of each expert).

    >>> import torch, fastpath
    >>> E, H, I, T = 8, 64, 32, 3
    >>> gate_up, down = torch.randn(E, 2 * I, H), torch.randn(E, H, I)
    >>> q, s = fastpath.ops.moe.quantize_experts(gate_up)
    >>> q.dtype, s.shape
    (torch.float8_e4m3fn, torch.Size([8, 64]))
    >>> qd, sd = fastpath.ops.moe.quantize_experts(down)
    >>> x = torch.randn(T, H)
    >>> w, ids = fastpath.route(torch.randn(T, E), 2)
    >>> y = fastpath.fused_experts(x, ids, w, q, qd, gate_up_scale=s, down_scale=sd)
    """
    from .fp8 import quantize_fp8

    check_tensor("w", w)
    if w.dim() != 3:
        raise ValueError(f"w: expected shape (num_experts, out_features, in_features), got {_shape(w)}")
    q, s = quantize_fp8(w, "rowwise")
    return q, s.reshape(w.shape[0], w.shape[1])


FAMILY = {"name": "moe", "ops": ["route", "router", "fused_experts"], "reason": triton_reason}
