"""``experts_implementation="fastpath"`` and ``attn_implementation="fastpath"``: fastpath's fused
MoE and attention kernels inside Hugging Face transformers (5.x) models, through transformers'
own ``ExpertsInterface`` and ``AttentionInterface``.

>>> import fastpath.integrations.transformers          # registers "fastpath" (idempotent)
>>> model = AutoModelForCausalLM.from_pretrained(path, experts_implementation="fastpath",
...                                              attn_implementation="fastpath")
>>> model.set_experts_implementation("fastpath")          # or switch a loaded model
>>> model.set_attn_implementation("fastpath")

Every ``*Experts`` class decorated with ``@use_experts_implementation`` looks its forward up
in the interface by ``config._experts_implementation`` on each call, so the choice holds for
``generate()`` (prefill and every decode step) and for ``torch.compile``. Nothing global is
rebound: :func:`register` adds one entry to ``ExpertsInterface`` (and to
``FP8ExpertsInterface``, whose experts transformers swaps in for fine-grained FP8 checkpoints;
the model checks both when the name is set), exactly as transformers' own "grouped_mm" and
"batched_mm" entries are registered. Transformers 5.17 and 5.24 have the same interface
(``ExpertsInterface.register``, forward ``(module, hidden_states (T, H), top_k_index (T, k),
top_k_weights (T, k)) -> (T, H)``, the same ``@use_experts_implementation`` flags); 5.24 adds
``has_post_expert_norm`` (read here with a ``getattr`` default) and ``_is_expert_parallel``
(not needed: ``fused_experts`` skips expert-parallel sentinel ids by itself), and gpt-oss's
``alpha`` / ``limit`` come from its config in 5.24 but are constants in 5.17 (read from the
module either way).

The forward calls :func:`fastpath.ops.moe.fused_experts` with the module's weights as stored
(``(E, 2I, H)`` / ``(E, H, I)``; transposed *views* where a module stores the transpose, as
gpt-oss does):

===============================  ====================  ====================================
experts                          fused_experts         notes
===============================  ====================  ====================================
Qwen3-MoE, Qwen3.5-MoE, OLMoE,   activation from       ``act_fn`` silu / swish -> "silu",
Mixtral, LFM2-MoE (and any       ``act_fn``            gelu -> "gelu", gelu_pytorch_tanh /
default-gated experts)                                 gelu_new / gelu_fast -> "gelu_tanh"
gpt-oss                          "gpt_oss",            biases, ``alpha`` / ``limit`` read
                                 ``interleaved=True``  from the module
FP8 experts (fine-grained FP8)   ``gate_up_scale`` /   one float32 scale per output row
                                 ``down_scale``        only; block-wise / per-tensor scales,
                                                       FP4, static activation scales fall back
===============================  ====================  ====================================

Expert-parallel sentinel ids (``E``) contribute nothing in ``fused_experts``, as in
transformers. What ``fused_experts`` does not compute falls back, with a one-time
``RuntimeWarning`` naming the reason, to transformers' "grouped_mm" implementation of the same
module: other activations (relu, clipped gelu, ...), experts without a gate, a norm after each
expert, other custom ``_apply_gate`` functions, and calls that need autograd
(``fused_experts`` is inference-only). :func:`fallback_reason` says which path a module takes;
the choice is made on a module's first call and kept on the instance.

Routers are left alone (no global patch). Those of the models above compute what
:func:`fastpath.ops.moe.route` computes; :func:`route_kwargs` gives its arguments for a
sparse-MoE block and :func:`route_block` runs it, for code that builds its own MoE layer
(transformers casts the weights to the logits' dtype; ``route`` returns float32, which
``fused_experts`` takes as it is).

Attention. :func:`register` adds :func:`attention_forward` to ``AttentionInterface`` and
:func:`attention_mask` to ``AttentionMaskInterface`` (transformers builds masks only for names
that have a mask function; any other name would get ``attention_mask=None`` and ignore padding).
Each attention module looks its function up by ``config._attn_implementation`` on every call,
so ``set_attn_implementation("fastpath")`` and ``from_pretrained(..., attn_implementation=
"fastpath")`` both hold for ``generate()``. Transformers 5.17 and 5.24 have the same interfaces
(``AttentionInterface.register``, ``AttentionMaskInterface.register``, the same call
``(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs) ->
(out (B, Q, H, D), weights)``); 5.24's ``sdpa_attention_forward`` adds the one-token GQA packing
and rejects ``softcap``, neither of which changes what fastpath receives.

The masks are the ones ``"sdpa"`` gets (``sdpa_mask``), and are mapped as
``sdpa_attention_forward`` maps them onto :func:`fastpath.ops.attention.scaled_dot_product_attention`:

===================================  =====================================================
transformers gives                   fastpath gets
===================================  =====================================================
no mask, several query tokens        ``is_causal=True`` (``False`` where the caller or the
                                     module says non-causal); keys past the queries of an
                                     empty static cache are sliced off (a view)
no mask, one query token             no mask: the token sees the whole cache
boolean 4-D mask (padding, sliding   ``attn_mask`` as it is (True = attend), ``is_causal=
window, chunks, packed sequences)    False``: the pattern is in the mask
additive float 4-D mask              ``attn_mask`` as it is
``H`` query / ``Hkv`` kv heads       ``enable_gqa=True`` (no ``repeat_kv`` copies)
``scaling``                          ``scale``
===================================  =====================================================

The ``sliding_window`` keyword needs no mapping: wherever a window cuts a key, ``sdpa_mask``
puts it in the mask (it returns None only when every key is inside the window).
What fastpath does not compute runs transformers' implementation with a one-time
``RuntimeWarning`` naming why (:func:`attention_fallback_reason`): ``dropout > 0`` (training),
``output_attentions=True``, a ``position_bias``, dtypes other than float16 / bfloat16 / float32,
non-tensor masks, and calls under autograd go to ``"sdpa"``; attention-logit ``softcap`` and
attention sinks (``s_aux``), which sdpa does not compute, go to the model's own
``eager_attention_forward`` (NotImplementedError where its modeling module has none).
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Optional

import torch

from ..ops.moe import fused_experts

#: The name to pass as ``experts_implementation``.
NAME = "fastpath"

_PLAN_ATTR = "_fastpath_experts_plan"
_WARNED: set = set()


def _hf_moe():
    """transformers' ``integrations.moe`` module, or an ImportError saying what is missing."""
    try:
        from transformers.integrations import moe
    except ImportError as exc:
        raise ImportError("fastpath.integrations.transformers needs transformers >= 5 (its "
                          f"ExpertsInterface in transformers.integrations.moe): {exc}") from exc
    if not hasattr(moe, "ExpertsInterface"):
        raise ImportError("fastpath.integrations.transformers needs transformers >= 5: "
                          "transformers.integrations.moe has no ExpertsInterface")
    return moe


def _fp8_interface():
    """transformers' ``FP8ExpertsInterface`` class, or None where there is none."""
    try:
        from transformers.integrations.finegrained_fp8 import FP8ExpertsInterface
    except ImportError:
        return None
    # register() writes into the class's own mapping; a subclass without one would write into
    # ExpertsInterface's and replace the bf16 entry.
    return FP8ExpertsInterface if "_global_mapping" in vars(FP8ExpertsInterface) else None


def register() -> None:
    """Register ``"fastpath"`` with transformers' ``ExpertsInterface`` (and
    ``FP8ExpertsInterface``), ``AttentionInterface`` and ``AttentionMaskInterface``.
    Idempotent; importing this module calls it.

    Raises ImportError if transformers (>= 5, with ``ExpertsInterface`` and
    ``AttentionInterface``) is not installed.
    """
    moe = _hf_moe()
    moe.ExpertsInterface.register(NAME, experts_forward)
    fp8 = _fp8_interface()
    if fp8 is not None:
        fp8.register(NAME, fp8_experts_forward)
    register_attention()


def is_registered() -> bool:
    """True if ``"fastpath"`` is registered both as experts and as attention implementation."""
    try:
        return NAME in _hf_moe().ALL_EXPERTS_FUNCTIONS and is_attention_registered()
    except ImportError:
        return False


# ---------------------------------------------------------------------------- activations

#: transformers.activations classes -> fused_experts activation names.
_HF_ACTIVATIONS = {
    "SiLUActivation": "silu",
    "GELUActivation": "gelu",  # F.gelu or its erf formula in Python
    "GELUTanh": "gelu_tanh",
    "PytorchGELUTanh": "gelu_tanh",
    "NewGELUActivation": "gelu_tanh",
    "FastGELUActivation": "gelu_tanh",
}


def activation_name(act_fn) -> Optional[str]:
    """The ``fused_experts`` activation computing ``act_fn`` (an experts module's gate
    activation), or None if it has none."""
    import torch.nn.functional as F
    from torch import nn

    if act_fn is F.silu or isinstance(act_fn, nn.SiLU):
        return "silu"
    if act_fn is F.gelu:
        return "gelu"
    if isinstance(act_fn, nn.GELU):
        return "gelu" if act_fn.approximate == "none" else "gelu_tanh"
    if isinstance(act_fn, functools.partial) and act_fn.func is F.gelu and not act_fn.args:
        approx = act_fn.keywords.get("approximate", "none")
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
    cls = type(act_fn)
    if cls.__module__.startswith("transformers."):
        return _HF_ACTIVATIONS.get(cls.__name__)
    return None


def _describe_act(module) -> str:
    act = getattr(module, "act_fn", None)
    what = getattr(act, "__name__", None) or type(act).__name__
    cfg = getattr(module, "config", None)
    hidden_act = getattr(cfg, "hidden_act", None) or getattr(cfg, "hidden_activation", None)
    return f"{what} (config.hidden_act={hidden_act!r})" if hidden_act is not None else what


# ---------------------------------------------------------------------------- plans

@dataclass(frozen=True)
class _Plan:
    """How one experts module runs: fused_experts' arguments, or why transformers' path runs."""
    fp8: bool
    activation: str = "silu"
    interleaved: bool = False
    alpha: float = 1.702
    limit: float = 7.0
    reason: Optional[str] = None


def _supported_activations() -> tuple:
    from ..ops import moe_kernels
    return tuple(moe_kernels.ACTIVATIONS)


def _weights_reason(module) -> Optional[str]:
    gu, dn = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not (isinstance(gu, torch.Tensor) and isinstance(dn, torch.Tensor) and gu.dim() == 3 and dn.dim() == 3):
        return "it has no 3-D gate_up_proj and down_proj tensors"
    return None


def _fp8_scales_reason(module) -> Optional[str]:
    """fused_experts takes float8_e4m3fn weights with one float32 scale per output row."""
    if getattr(module, "activation_scheme", "dynamic") != "dynamic":
        return (f"activation_scheme={module.activation_scheme!r} (static activation scales); fastpath's FP8 "
                "experts are weight-only")
    for w_name in ("gate_up_proj", "down_proj"):
        w = getattr(module, w_name)
        s = getattr(module, f"{w_name}_scale_inv", None)
        if w.dtype != getattr(torch, "float8_e4m3fn", None):
            return f"{w_name} is {w.dtype} (FP4 or other packed weights); fused_experts takes float8_e4m3fn"
        E, N = w.shape[0], w.shape[1]
        if not isinstance(s, torch.Tensor) or s.dtype != torch.float32 or tuple(s.shape) not in ((E, N, 1), (E, N)):
            got = "none" if not isinstance(s, torch.Tensor) else f"{s.dtype} {tuple(s.shape)}"
            return (f"{w_name}_scale_inv is {got} (block-size {getattr(module, 'block_size', None)}); "
                    f"fused_experts takes one float32 scale per output row, ({E}, {N}, 1)")
    return None


def _make_plan(module, fp8: bool) -> _Plan:
    cls = type(module).__name__
    reason = None
    if not getattr(module, "has_gate", True):
        reason = "its experts have no gate (act(x @ up) @ down); fused_experts computes gated MLPs"
    elif getattr(module, "has_post_expert_norm", False):
        reason = "it applies a norm after each expert (has_post_expert_norm)"
    else:
        reason = _weights_reason(module)
    if reason is None and fp8:
        reason = _fp8_scales_reason(module)
    if reason is not None:
        return _Plan(fp8, reason=reason)
    if fp8:  # FP8Experts._apply_gate: softcapped, clamped SwiGLU-OAI, clamped act, or act(gate) * up
        softcap = [a for a in ("gate_softcap", "up_softcap") if getattr(module, a, None) is not None]
        if softcap:
            return _Plan(fp8, reason=f"its gate is softcapped ({', '.join(softcap)} set)")
        alpha = getattr(module, "swiglu_alpha", None)
        if alpha is not None:  # gpt-oss's clamped SwiGLU on concatenated gate/up halves
            return _Plan(fp8, activation="gpt_oss", alpha=float(alpha), limit=float(module.swiglu_limit))
        if getattr(module, "limit", None) is not None:
            return _Plan(fp8, reason="its gate and up are clamped (limit set) before the activation")
    gate = getattr(type(module), "_apply_gate", None)
    if fp8 or gate is None or gate is getattr(_hf_moe(), "_default_apply_gate", None):
        act = activation_name(getattr(module, "act_fn", None))
        if act is None or act not in _supported_activations():
            return _Plan(fp8, reason=f"its activation {_describe_act(module)} is not one fused_experts computes "
                                     f"({', '.join(_supported_activations())})")
        return _Plan(fp8, activation=act)
    if cls == "GptOssExperts":
        if not (getattr(module, "is_transposed", False) and getattr(module, "has_bias", False)):
            return _Plan(fp8, reason="a GptOssExperts layout other than transposed weights with biases")
        return _Plan(fp8, activation="gpt_oss", interleaved=True, alpha=float(module.alpha),
                     limit=float(module.limit))
    return _Plan(fp8, reason=f"{cls}._apply_gate is a custom gate fused_experts does not compute")


def _plan(module, fp8: bool) -> _Plan:
    plan = module.__dict__.get(_PLAN_ATTR)
    if plan is None or plan.fp8 != fp8:
        plan = _make_plan(module, fp8)
        module.__dict__[_PLAN_ATTR] = plan  # decided once per module instance
    return plan


def fallback_reason(module) -> Optional[str]:
    """None if ``experts_implementation="fastpath"`` runs ``module`` (an experts module) on
    :func:`fastpath.ops.moe.fused_experts`, else why transformers' "grouped_mm" runs it."""
    fp8 = getattr(module, "gate_up_proj_scale_inv", None) is not None or type(module).__name__ == "FP8Experts"
    return _make_plan(module, fp8).reason


# ---------------------------------------------------------------------------- forwards

def _fallback(module, fp8: bool) -> tuple:
    """(name, forward) of transformers' own implementation for ``module``."""
    if fp8:
        if getattr(module, "activation_scheme", "dynamic") != "dynamic":  # grouped_mm refuses static scales
            return "eager", type(module).forward.__wrapped__
        from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS as functions
    else:
        functions = _hf_moe().ALL_EXPERTS_FUNCTIONS
    return "grouped_mm", functions["grouped_mm"]


def _warn_once(module, reason: str, fallback: str) -> None:
    key = (type(module).__qualname__, reason)
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"experts_implementation={NAME!r}: {type(module).__name__} runs transformers' {fallback!r} "
                  f"experts instead of fastpath.fused_experts because {reason}", RuntimeWarning, stacklevel=4)


def _needs_grad(hidden_states, module) -> bool:
    return torch.is_grad_enabled() and (hidden_states.requires_grad or module.gate_up_proj.requires_grad
                                        or module.down_proj.requires_grad)


def _forward(module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
             fp8: bool) -> torch.Tensor:
    plan = _plan(module, fp8)
    reason = plan.reason
    if reason is None and _needs_grad(hidden_states, module):
        reason = "autograd is recording (fused_experts is inference-only)"
    if reason is not None:
        name, fn = _fallback(module, fp8)
        _warn_once(module, reason, name)
        return fn(module, hidden_states, top_k_index, top_k_weights)
    gate_up, down = module.gate_up_proj, module.down_proj
    if getattr(module, "is_transposed", False):  # stored (E, H, 2I) / (E, I, H): views, no copies
        gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
    has_bias = getattr(module, "has_bias", False)
    x = hidden_states
    if not fp8 and x.dtype != gate_up.dtype:  # e.g. float32 activations under autocast, as transformers does
        x = x.to(gate_up.dtype)
    out = fused_experts(
        x, top_k_index, top_k_weights, gate_up, down, activation=plan.activation,
        gate_up_bias=module.gate_up_proj_bias if has_bias else None,
        down_bias=module.down_proj_bias if has_bias else None,
        gate_up_scale=module.gate_up_proj_scale_inv if fp8 else None,
        down_scale=module.down_proj_scale_inv if fp8 else None,
        interleaved=plan.interleaved, swiglu_alpha=plan.alpha, swiglu_limit=plan.limit)
    return out if out.dtype == hidden_states.dtype else out.to(hidden_states.dtype)


def experts_forward(module: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:
    """The ``"fastpath"`` entry of ``ExpertsInterface``: ``module``'s routed experts on
    ``hidden_states`` ``(T, H)`` with ``top_k_index`` / ``top_k_weights`` ``(T, k)`` from its
    router, returning ``(T, H)`` in ``hidden_states.dtype``."""
    return _forward(module, hidden_states, top_k_index, top_k_weights, fp8=False)


def fp8_experts_forward(module: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                        top_k_weights: torch.Tensor) -> torch.Tensor:
    """The ``"fastpath"`` entry of ``FP8ExpertsInterface`` (transformers' ``FP8Experts``)."""
    return _forward(module, hidden_states, top_k_index, top_k_weights, fp8=True)


# ---------------------------------------------------------------------------- routers

#: Router class -> (scoring, norm_topk_prob; None: the router's ``norm_topk_prob``).
_ROUTERS = {
    "Qwen3MoeTopKRouter": ("softmax", None),
    "Qwen3_5MoeTopKRouter": ("softmax", True),
    "MixtralTopKRouter": ("softmax", True),
    "OlmoeTopKRouter": ("softmax", None),
    "Lfm2MoeTopKRouter": ("sigmoid", None),
    "GptOssTopKRouter": ("softmax", True),  # softmax over the top-k logits == softmax + renormalise
}


def _router(block):
    for attr in ("gate", "router"):
        r = getattr(block, attr, None)
        if type(r).__name__ in _ROUTERS:
            return r
    raise NotImplementedError(f"{type(block).__name__}: no router of a known kind (gate or router of "
                              f"{', '.join(_ROUTERS)})")


def route_kwargs(block: torch.nn.Module) -> dict:
    """Keyword arguments of :func:`fastpath.ops.moe.route` that reproduce the router of a
    transformers sparse-MoE ``block`` (e.g. ``model.model.layers[i].mlp``) from its logits.

    Raises NotImplementedError for a router of another kind."""
    router = _router(block)
    scoring, norm = _ROUTERS[type(router).__name__]
    expert_bias = None
    if scoring == "sigmoid" and getattr(router, "use_expert_bias", False):
        expert_bias = block.expert_bias
    return {"top_k": int(router.top_k), "scoring": scoring,
            "norm_topk_prob": bool(router.norm_topk_prob if norm is None else norm),
            "expert_bias": expert_bias,
            "routed_scaling_factor": float(getattr(router, "routed_scaling_factor", 1.0) or 1.0)}


def route_block(block: torch.nn.Module, hidden_states: torch.Tensor) -> tuple:
    """``(topk_weights float32, topk_ids int64)`` of ``block``'s router for ``hidden_states``
    ``(T, H)``, by :func:`fastpath.ops.moe.route` (the logits by ``F.linear``)."""
    import torch.nn.functional as F

    from ..ops.moe import route

    router = _router(block)
    logits = F.linear(hidden_states, router.weight, getattr(router, "bias", None))
    return route(logits, **route_kwargs(block))


# ---------------------------------------------------------------------------- attention

#: The dtypes fastpath's attention takes (query, key and value alike).
_ATTN_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _hf_attention():
    """transformers' ``AttentionInterface``, ``AttentionMaskInterface`` and ``sdpa_mask``, or an
    ImportError saying what is missing."""
    try:
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        from transformers.modeling_utils import AttentionInterface
    except ImportError as exc:
        raise ImportError("fastpath.integrations.transformers needs transformers >= 5 (AttentionInterface "
                          f"and masking_utils.AttentionMaskInterface): {exc}") from exc
    return AttentionInterface, AttentionMaskInterface, sdpa_mask


def register_attention() -> None:
    """Register ``"fastpath"`` with transformers' ``AttentionInterface`` (:func:`attention_forward`)
    and ``AttentionMaskInterface`` (:func:`attention_mask`). Idempotent; :func:`register` calls it.

    Both are needed: transformers builds masks only for implementations that have a mask function
    (any other name gets ``attention_mask=None``, padding ignored)."""
    attn, masks, _ = _hf_attention()
    attn.register(NAME, attention_forward)
    masks.register(NAME, attention_mask)


def is_attention_registered() -> bool:
    try:
        attn, masks, _ = _hf_attention()
    except ImportError:
        return False
    return attn._global_mapping.get(NAME) is attention_forward and masks._global_mapping.get(NAME) is attention_mask


def attention_mask(*args, **kwargs):
    """The ``"fastpath"`` entry of ``AttentionMaskInterface``: the masks transformers builds for
    ``"sdpa"`` (``masking_utils.sdpa_mask``, same arguments). ``None`` where ``is_causal`` (or no
    mask) expresses the pattern: no padding and one query token, or a prefill that sees every
    key (no cache offset, no sliding window reached); otherwise a boolean ``(B, 1, Q, KV)`` mask,
    True = attend, with padding, sliding windows, chunks and packed sequences in it."""
    return _hf_attention()[2](*args, **kwargs)


def _sdpa_fallback():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return "sdpa", sdpa_attention_forward


def _eager_fallback(module):
    """The model's own ``eager_attention_forward`` (softcaps, sinks), found in its modeling module."""
    import sys
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    return ("eager", fn) if callable(fn) else (None, None)


def _additive_mask(module, query, key, mask, is_causal):
    """The sdpa-style mask (None: causal or nothing; boolean: True = attend) as the additive mask
    eager attention adds to its scores."""
    if mask is not None and mask.dtype != torch.bool:
        return mask
    if mask is None:
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        if not (causal and query.shape[2] > 1):
            return None
        mask = torch.ones(query.shape[2], key.shape[2], dtype=torch.bool, device=query.device).tril()[None, None]
    return torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(
        ~mask, torch.finfo(query.dtype).min)


def attention_fallback_reason(module, query, key, value, attention_mask=None, dropout=0.0, **kwargs):
    """``None`` if ``attn_implementation="fastpath"`` runs this call on
    :func:`fastpath.ops.attention.scaled_dot_product_attention`, else why transformers runs it
    (the arguments are those of :func:`attention_forward`)."""
    if dropout:
        return f"dropout={dropout:g} (training; fastpath's attention computes no dropout)"
    if kwargs.get("output_attentions", False):
        return "output_attentions=True (fastpath returns no attention weights)"
    if kwargs.get("softcap") is not None:
        return f"softcap={kwargs['softcap']} (attention-logit softcapping)"
    if kwargs.get("s_aux") is not None or kwargs.get("sinks") is not None:
        return "attention sinks (s_aux)"
    if kwargs.get("position_bias") is not None:
        return "a position_bias (learned relative-position bias)"
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
        return "query, key or value is not a tensor"
    if query.dtype not in _ATTN_DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        return (f"dtypes query {query.dtype}, key {key.dtype}, value {value.dtype} (fastpath takes one of "
                "float16, bfloat16, float32 for all three)")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return f"query {tuple(query.shape)} is not (batch, heads, tokens, head_dim)"
    if query.shape[1] % key.shape[1]:
        return f"{query.shape[1]} query heads are not a multiple of {key.shape[1]} key/value heads"
    if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
        return f"a {type(attention_mask).__name__} mask (fastpath takes boolean or additive tensors)"
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        return "autograd is recording (fastpath's attention is inference-only)"
    return None


def _warn_attention_once(module, reason: str, fallback: str) -> None:
    key = ("attention", type(module).__qualname__, reason)
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"attn_implementation={NAME!r}: {type(module).__name__} runs transformers' {fallback!r} "
                  f"attention instead of fastpath.scaled_dot_product_attention because {reason}",
                  RuntimeWarning, stacklevel=3)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs) -> tuple:
    """The ``"fastpath"`` entry of ``AttentionInterface``, called as transformers calls
    ``sdpa_attention_forward``: ``query`` ``(B, H, Q, D)``, ``key`` / ``value`` ``(B, Hkv, KV, D)``
    (``H`` a multiple of ``Hkv``: grouped-query attention without repeating keys), the mask
    :func:`attention_mask` built (boolean, True = attend, or additive; ``None``: causal or none).
    Returns ``(attn_output (B, Q, H, D) contiguous, None)``.

    As ``sdpa_attention_forward`` decides: causal only for more than one query token and no mask
    (a mask holds the causal pattern itself; one query token sees the whole cache), the module's
    ``is_causal`` where the caller passes none; a causal prefill into a longer empty static cache
    reads only the first ``Q`` keys. The ``sliding_window`` keyword is not needed: the window is
    in the mask wherever it cuts a key. What fastpath does not compute runs transformers'
    implementation (see :func:`attention_fallback_reason`), with one ``RuntimeWarning``."""
    reason = attention_fallback_reason(module, query, key, value, attention_mask, dropout, **kwargs)
    if reason is not None:
        if kwargs.get("softcap") is not None or kwargs.get("s_aux") is not None or kwargs.get("sinks") is not None:
            name, fn = _eager_fallback(module)  # sdpa computes neither
            if fn is None:
                raise NotImplementedError(f"attn_implementation={NAME!r}: {type(module).__name__} needs {reason}, "
                                          "which neither fastpath nor sdpa computes; use attn_implementation='eager'")
        else:
            name, fn = _sdpa_fallback()
        _warn_attention_once(module, reason, name)
        if name == "eager":
            scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
            mask = _additive_mask(module, query, key, attention_mask, is_causal)
            return fn(module, query, key, value, mask, dropout=dropout, scaling=scaling, **kwargs)
        return fn(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                  is_causal=is_causal, **kwargs)

    from ..ops.attention import scaled_dot_product_attention

    q_len = query.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_len > 1 and attention_mask is None and causal)
    if causal and key.shape[2] > q_len:  # empty static cache: keys past the prompt are all masked
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, is_causal=causal,
                                       scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def _register_on_import() -> None:
    try:
        register()
    except ImportError:  # transformers missing or too old: register() says so when called
        pass


_register_on_import()

__all__: list = ["NAME", "register", "is_registered", "experts_forward", "fp8_experts_forward",
                 "activation_name", "fallback_reason", "route_kwargs", "route_block", "register_attention",
                 "is_attention_registered", "attention_forward", "attention_mask", "attention_fallback_reason"]
