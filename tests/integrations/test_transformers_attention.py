"""``attn_implementation="fastpath"`` in transformers models: tiny random float32 Llama, Qwen3,
Qwen3-MoE and Mistral (sliding window) models, the same tokens through transformers' "sdpa"
attention and through fastpath's, logits close and greedy tokens equal, for a padded batch too;
and the mapping of transformers' conventions (masks, ``is_causal``, grouped-query heads, static
caches) checked call by call against ``sdpa_attention_forward``.

Calls are observed, never patched: attention-module hooks switch a ``sys.setprofile`` observer
on for each attention call; it counts the calls of :func:`attention_forward` and of
``fastpath.ops.attention.scaled_dot_product_attention`` and switches itself off at the latter,
so the interpreted kernels run unobserved. Any fallback is a ``RuntimeWarning``, made an error
where none is expected.
"""
import functools
import inspect
import sys
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.tolerances import assert_close

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("transformers.masking_utils", reason="transformers has no masking_utils (needs >= 5)")

from fastpath.integrations import transformers as fpt  # noqa: E402
from fastpath.ops import attention  # noqa: E402  (an import error fails the tests, never skips them)

TOL = 1e-5  # logits of a 2-layer float32 model: a few float32 roundings apart
PROMPT = 7
PAD = 3  # left padding of the second row of the padded batch
COMMON = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=96, max_position_embeddings=128, tie_word_embeddings=False, eos_token_id=None,
              pad_token_id=0)

#: name -> (config class, model class, config kwargs)
MODELS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict()),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(head_dim=16, moe_intermediate_size=40, num_experts=4, num_experts_per_tok=2)),
    # a window shorter than the prompt: the prefill's and the decode steps' masks cut keys
    "mistral_sliding": ("MistralConfig", "MistralForCausalLM", dict(head_dim=16, sliding_window=4)),
}


def fresh_stack(test):
    """Run ``test`` in a new thread (see tests/integrations/test_transformers_moe.py: interpreted
    kernels are 2-3x slower on a deep pytest stack)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(test, *args, **kwargs).result()
    return run


class AttentionCalls:
    """Counts, in every call of ``model``'s attention modules, the calls of
    :func:`fpt.attention_forward` and of fastpath's ``scaled_dot_product_attention``."""

    def __init__(self, model):
        op = inspect.unwrap(attention.scaled_dot_product_attention)
        self._codes = {fpt.attention_forward.__code__: "attention_forward", op.__code__: "op"}
        self._modules = attention_modules(model)
        self.counts = Counter()

    def _observe(self, frame, event, arg):
        name = self._codes.get(frame.f_code) if event == "call" else None
        if name is not None:
            self.counts[name] += 1
            if name == "op":  # the kernels themselves run unobserved
                sys.setprofile(None)

    def _start(self, module, args, kwargs):
        self.counts["modules"] += 1
        sys.setprofile(self._observe)

    def _stop(self, module, args, kwargs, out):
        sys.setprofile(None)

    def __enter__(self):
        self._handles = [h for m in self._modules for h in (
            m.register_forward_pre_hook(self._start, with_kwargs=True),
            m.register_forward_hook(self._stop, with_kwargs=True))]
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        for h in self._handles:
            h.remove()


def no_fallback():
    """Make fastpath's fallback warning an error (numpy's overflow warnings from interpreted
    kernels, on -inf-like mask values, are left alone)."""
    warnings.filterwarnings("error", message=".*fastpath", category=RuntimeWarning)


def attention_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("Attention")]


def build(name, device, attn="sdpa", **overrides):
    cfg_name, model_name, kwargs = MODELS[name]
    if not hasattr(transformers, model_name):
        pytest.skip(f"transformers {transformers.__version__} has no {model_name}")
    cfg = getattr(transformers, cfg_name)(**{**COMMON, **kwargs, **overrides})
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(cfg).to(device=device, dtype=torch.float32).eval()
    with torch.no_grad():  # attention that matters: the default init (std 0.02) makes it nearly uniform
        for n, p in model.named_parameters():
            if n.endswith(("q_proj.weight", "k_proj.weight")):
                p.normal_(0, 0.3)
    return model


def batch(device, padded: bool):
    ids = torch.randint(1, 128, (2, PROMPT), device=device)
    mask = torch.ones_like(ids)
    if padded:
        ids[1, :PAD] = 0
        mask[1, :PAD] = 0
    return ids, mask


def forward(model, impl, ids, mask):
    model.set_attn_implementation(impl)
    assert model.config._attn_implementation == impl
    with torch.no_grad():
        return model(ids, attention_mask=mask).logits


def generate(model, impl, ids, mask, **kwargs):
    model.set_attn_implementation(impl)
    return model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0,
                          output_logits=True, return_dict_in_generate=True, **kwargs)


def test_register_is_idempotent_and_named():
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    fpt.register()
    fpt.register()
    assert fpt.is_attention_registered() and fpt.is_registered()
    assert ALL_ATTENTION_FUNCTIONS["fastpath"] is fpt.attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS["fastpath"] is fpt.attention_mask
    assert list(ALL_ATTENTION_FUNCTIONS.keys()).count("fastpath") == 1
    assert ALL_MASK_ATTENTION_FUNCTIONS["sdpa"] is sdpa_mask  # nothing else rebound
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward


# ---------------------------------------------------------------------------- call by call

class _Attn(torch.nn.Module):
    def __init__(self, groups, causal=True):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, causal


def _qkv(B, H, Hkv, Q, KV, D, device):
    return (torch.randn(B, H, Q, D, device=device), torch.randn(B, Hkv, KV, D, device=device),
            torch.randn(B, Hkv, KV, D, device=device))


def _bool_mask(B, Q, KV, device, pad=2):
    """A causal mask aligned to the last query, the first ``pad`` keys of batch row 1 masked."""
    i = torch.arange(Q, device=device)[:, None] + KV - Q
    m = (torch.arange(KV, device=device)[None, :] <= i).expand(B, 1, Q, KV).clone()
    m[1, :, :, :pad] = False
    m[1, :, :pad, 0] = True  # no fully masked rows
    return m


CALLS = {  # name -> (B, H, Hkv, Q, KV, D, mask kind, is_causal, module.is_causal)
    "prefill causal, no mask": (2, 4, 2, 13, 13, 16, None, None, True),
    "prefill bool mask (padding)": (2, 4, 2, 13, 13, 16, "bool", None, True),
    "prefill additive mask, MHA": (2, 4, 4, 7, 7, 16, "float", None, True),
    "decode, no mask": (2, 4, 2, 1, 19, 16, None, None, True),
    "decode bool mask": (2, 8, 2, 1, 19, 32, "bool", None, True),
    "speculative 3 tokens, bool mask": (2, 4, 1, 3, 21, 16, "bool", None, True),
    "empty static cache prefill": (2, 4, 2, 5, 16, 16, None, None, True),
    "long prefill (prefill kernel)": (1, 4, 2, 37, 37, 16, None, None, True),
    "long prefill, bool mask": (2, 4, 2, 21, 21, 16, "bool", None, True),
    "long empty static cache prefill": (1, 4, 2, 20, 32, 16, None, None, True),
    "bidirectional (is_causal=False)": (2, 4, 2, 7, 7, 16, None, False, True),
    "encoder module (module.is_causal=False)": (1, 4, 2, 7, 7, 16, None, None, False),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_calls_match_sdpa_attention_forward(case, device):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    B, H, Hkv, Q, KV, D, kind, is_causal, module_causal = CALLS[case]
    module = _Attn(H // Hkv, module_causal)
    q, k, v = _qkv(B, H, Hkv, Q, KV, D, device)
    mask = None if kind is None else _bool_mask(B, Q, KV, device)
    if kind == "float":
        mask = torch.zeros(mask.shape, device=device).masked_fill(~mask, torch.finfo(torch.float32).min)
        mask += 0.5 * torch.randn(mask.shape, device=device)  # an additive bias, not only 0 / min
    scaling = D ** -0.5 * 0.9
    with warnings.catch_warnings():
        no_fallback()
        out, weights = fpt.attention_forward(module, q, k, v, mask, scaling=scaling, is_causal=is_causal)
    ref, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=scaling, is_causal=is_causal)
    assert weights is None and out.is_contiguous() and out.shape == (B, Q, H, D)
    assert_close(out, ref, tol=TOL)


def test_unsupported_calls_fall_back_with_one_warning(device, monkeypatch):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    monkeypatch.setattr(fpt, "_WARNED", set())
    module = _Attn(2)
    q, k, v = _qkv(1, 4, 2, 5, 5, 16, device)
    assert fpt.attention_fallback_reason(module, q, k, v) is None
    assert "dropout" in fpt.attention_fallback_reason(module, q, k, v, dropout=0.1)
    assert "output_attentions" in fpt.attention_fallback_reason(module, q, k, v, output_attentions=True)
    assert "softcap" in fpt.attention_fallback_reason(module, q, k, v, softcap=30.0)
    assert "dtypes" in fpt.attention_fallback_reason(module, q.double(), k.double(), v.double())
    ref, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.25, output_attentions=True)
    with pytest.warns(RuntimeWarning, match=r"_Attn runs transformers' 'sdpa'.*output_attentions") as rec:
        for _ in range(3):
            out, _ = fpt.attention_forward(module, q, k, v, None, scaling=0.25, output_attentions=True)
    assert len([r for r in rec if "fastpath" in str(r.message)]) == 1
    assert_close(out, ref, tol=TOL)
    with pytest.raises(NotImplementedError, match="softcap"):  # no eager in this test module's namespace
        fpt.attention_forward(module, q, k, v, None, softcap=30.0)


# ---------------------------------------------------------------------------- models

@pytest.mark.parametrize("name", list(MODELS))
@fresh_stack
def test_model_logits_and_generate_match_sdpa(name, device):
    """A padded batch of 2 (left padding): the logits of a forward at every real position, and
    greedy generate()'s tokens and logits of every step, with "sdpa" and "fastpath"; fastpath's
    op ran in every attention call."""
    model = build(name, device)
    layers = len(attention_modules(model))
    assert layers == 2
    ids, mask = batch(device, padded=True)

    ref = forward(model, "sdpa", ids, mask)
    with warnings.catch_warnings():
        no_fallback()  # no fallback anywhere
        with AttentionCalls(model) as calls:
            out = forward(model, "fastpath", ids, mask)
    assert calls.counts["modules"] == calls.counts["attention_forward"] == calls.counts["op"] == layers
    real = mask.bool()
    assert_close(out[real], ref[real], tol=TOL)

    ref = generate(model, "sdpa", ids, mask)
    with warnings.catch_warnings():
        no_fallback()
        with AttentionCalls(model) as calls:
            out = generate(model, "fastpath", ids, mask)
    steps = len(out.logits)
    assert steps == 4 and out.sequences.shape == (2, PROMPT + steps)
    assert calls.counts["attention_forward"] == calls.counts["op"] == layers * steps
    for got, want in zip(out.logits, ref.logits):
        assert_close(got, want, tol=TOL)
    assert torch.equal(out.sequences, ref.sequences)


@fresh_stack
def test_unpadded_generate_and_from_pretrained(device, tmp_path):
    """No padding (masks are None: is_causal prefill, maskless decode), loaded with
    ``from_pretrained(..., attn_implementation="fastpath")``."""
    model = build("qwen3", device)
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path, attn_implementation="fastpath").to(device).eval()
    assert loaded.config._attn_implementation == "fastpath"
    ids, mask = batch(device, padded=False)
    ref = generate(model, "sdpa", ids, mask)
    with AttentionCalls(loaded) as calls:
        out = generate(loaded, "fastpath", ids, mask)
    assert calls.counts["op"] == 2 * len(out.logits)
    for got, want in zip(out.logits, ref.logits):
        assert_close(got, want, tol=TOL)
    assert torch.equal(out.sequences, ref.sequences)


def test_training_dropout_falls_back_and_gradients_flow(device, monkeypatch):
    monkeypatch.setattr(fpt, "_WARNED", set())
    model = build("llama", device, attn="fastpath", attention_dropout=0.1).train()
    ids, mask = batch(device, padded=False)
    with pytest.warns(RuntimeWarning, match="dropout"):
        model(ids, attention_mask=mask).logits.square().mean().backward()
    grad = model.model.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


@fresh_stack
def test_softcap_runs_the_models_eager_attention(device, monkeypatch):
    """Gemma2 softcaps its attention logits, which neither fastpath nor sdpa computes: its own
    eager attention runs, on sdpa-style masks turned additive (padding and sliding window kept)."""
    if not hasattr(transformers, "Gemma2ForCausalLM"):
        pytest.skip(f"transformers {transformers.__version__} has no Gemma2ForCausalLM")
    monkeypatch.setattr(fpt, "_WARNED", set())
    MODELS["gemma2"] = ("Gemma2Config", "Gemma2ForCausalLM", dict(
        head_dim=16, query_pre_attn_scalar=16, sliding_window=4, attn_logit_softcapping=2.0,
        layer_types=["sliding_attention", "full_attention"]))
    try:
        model = build("gemma2", device, attn="eager")
    finally:
        del MODELS["gemma2"]
    ids, mask = batch(device, padded=True)
    ref = forward(model, "eager", ids, mask)
    with pytest.warns(RuntimeWarning, match=r"Gemma2Attention runs transformers' 'eager'.*softcap") as rec:
        out = forward(model, "fastpath", ids, mask)
    assert len([r for r in rec if "fastpath" in str(r.message)]) == 1
    real = mask.bool()
    assert_close(out[real], ref[real], tol=TOL)


@fresh_stack
def test_static_cache_generate(device):
    """A static cache: the prefill sees more keys than queries (sliced off), each decode step
    a materialised (B, 1, 1, max_len) mask, padding included."""
    model = build("llama", device)
    ids, mask = batch(device, padded=True)
    ref = generate(model, "sdpa", ids, mask, cache_implementation="static")
    with warnings.catch_warnings():
        no_fallback()
        out = generate(model, "fastpath", ids, mask, cache_implementation="static")
    for got, want in zip(out.logits, ref.logits):
        assert_close(got, want, tol=TOL)
    assert torch.equal(out.sequences, ref.sequences)
