"""``experts_implementation="fastpath"`` in transformers MoE models: tiny random float32 models,
the same tokens through transformers' "eager" experts and through fastpath's, logits close and
greedy tokens equal, and fastpath's ``fused_experts`` (and its kernel launchers, where Triton
serves the device) observed being called in every MoE layer of every ``generate()`` step.

Calls are observed, never patched: in eager steps by a ``sys.setprofile`` observer that module
hooks switch on for the duration of each experts call (matching code objects), in compiled
steps by the profiler (the compiled graph calls the registered ``fastpath::fused_experts`` op).
The heavy tests run in a fresh thread (see :func:`fresh_stack`). A model is skipped only when
the installed transformers lacks it.
"""
import functools
import sys
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.tolerances import assert_close

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("transformers.integrations.moe", reason="transformers has no ExpertsInterface (needs >= 5)")

from fastpath._core.backend import use_triton  # noqa: E402
from fastpath.integrations import transformers as fpt  # noqa: E402
from fastpath.ops import moe  # noqa: E402

TOL = 1e-5  # logits of a 2-layer float32 model: a few float32 roundings apart
PROMPT = 5
COMMON = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128, tie_word_embeddings=False, eos_token_id=None, pad_token_id=0)

#: name -> (config class, model class, config kwargs, expert-weight std): 8 experts, awkward widths.
MODELS = {
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(head_dim=16, intermediate_size=96, moe_intermediate_size=40, num_experts=8,
                       num_experts_per_tok=2, norm_topk_prob=True), 0.15),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                    dict(head_dim=16, moe_intermediate_size=44, shared_expert_intermediate_size=24, num_experts=8,
                         num_experts_per_tok=4, layer_types=["linear_attention", "full_attention"],
                         linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                         linear_value_head_dim=16), 0.15),
    "lfm2_moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM",
                 dict(intermediate_size=96, moe_intermediate_size=36, num_experts=8, num_experts_per_tok=4,
                      num_dense_layers=0, layer_types=["conv", "full_attention"], use_expert_bias=True,
                      norm_topk_prob=True, routed_scaling_factor=1.5), 0.15),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(intermediate_size=40, num_local_experts=8, num_experts_per_tok=2), 0.15),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(intermediate_size=44, num_experts=8, num_experts_per_tok=4, norm_topk_prob=False), 0.15),
    # large gate/up weights so gpt-oss's clamps (limit 7) are reached
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(head_dim=16, intermediate_size=40, num_local_experts=8, num_experts_per_tok=4,
                     layer_types=["sliding_attention", "full_attention"], sliding_window=4), 1.0),
}


def fresh_stack(test):
    """Run ``test`` in a new thread. Under pytest, the interpreted kernels' hot Python calls can
    sit on a boundary of CPython 3.11's 16 KiB frame-stack chunks, which are then mmap'ed and
    munmap'ed on every crossing (strace: 700k mmap/munmap pairs per forward, 2-3x the time);
    a new thread starts from a shallow stack."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(test, *args, **kwargs).result()
    return run


class KernelCalls:
    """Counts, in every call of ``model``'s experts modules, the calls of fastpath's
    ``fused_experts`` and of its kernel launchers: module hooks (public PyTorch API) switch a
    ``sys.setprofile`` observer on when an experts module starts and off at its first launcher
    (or when the module returns), so the interpreted kernels run unobserved, at full speed."""

    #: fastpath.ops.moe's kernel launchers (``_launch_decode``, ``_launch_prefill``).
    LAUNCHERS = tuple(n for n, f in vars(moe).items() if n.startswith("_launch") and hasattr(f, "__code__"))

    def __init__(self, model):
        assert self.LAUNCHERS, "fastpath.ops.moe has no _launch* functions to observe"
        fns = [moe.fused_experts] + [getattr(moe, n) for n in self.LAUNCHERS]
        self._codes = {f.__code__: n for n, f in zip(["fused_experts", *self.LAUNCHERS], fns)}
        self._modules = experts_modules(model)
        self.counts = Counter()

    def _observe(self, frame, event, arg):
        name = self._codes.get(frame.f_code) if event == "call" else None
        if name is not None:
            self.counts[name] += 1
            if name in self.LAUNCHERS:  # the kernels themselves run unobserved
                sys.setprofile(None)

    def _start(self, module, args):
        self.counts["experts"] += 1
        sys.setprofile(self._observe)

    def _stop(self, module, args, out):
        sys.setprofile(None)

    @property
    def launches(self) -> int:
        return sum(self.counts[n] for n in self.LAUNCHERS)

    def __enter__(self):
        self._handles = [h for m in self._modules for h in (m.register_forward_pre_hook(self._start),
                                                              m.register_forward_hook(self._stop))]
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        for h in self._handles:
            h.remove()


def build(name, device, **overrides):
    cfg_name, model_name, kwargs, std = MODELS[name]
    if not hasattr(transformers, model_name):
        pytest.skip(f"transformers {transformers.__version__} has no {model_name}")
    cfg = getattr(transformers, cfg_name)(**{**COMMON, **kwargs, **overrides})
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(cfg).to(device=device, dtype=torch.float32).eval()
    with torch.no_grad():  # decisive routing and experts that matter (the default init is 0.02)
        for n, p in model.named_parameters():
            if ".experts." in n:
                small = n.endswith("bias") or (n.endswith("down_proj") and std > 0.5)
                p.normal_(0, 0.1 if small else std)
            elif n.endswith(("gate.weight", "router.weight", "router.bias")):
                p.normal_(0, 0.5)
        for n, b in model.named_buffers():
            if n.endswith("expert_bias"):
                b.normal_(0, 0.1)
    return model


def experts_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("Experts")]


def logits(model, ids, impl):
    model.set_experts_implementation(impl)
    assert model.config._experts_implementation == impl
    with torch.no_grad():
        return model(ids).logits


def generate(model, ids, impl, **kwargs):
    model.set_experts_implementation(impl)
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False,
                          pad_token_id=0, output_logits=True, return_dict_in_generate=True, **kwargs)


def block_and_router(model):
    """The first sparse-MoE block, and ``h -> (weights, ids)`` of its own router."""
    block = next(m for m in model.modules() if hasattr(m, "experts") and type(m.experts).__name__.endswith("Experts"))
    router = block.gate if hasattr(block, "gate") else block.router

    def run(h):
        if getattr(block, "use_expert_bias", False):
            _, w, ids = router(h, block.expert_bias)
        else:
            _, w, ids = router(h)
        return w, ids
    return block, run


def test_register_is_idempotent_and_named():
    fpt.register()
    fpt.register()
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    assert fpt.is_registered() and ALL_EXPERTS_FUNCTIONS["fastpath"] is fpt.experts_forward
    assert list(ALL_EXPERTS_FUNCTIONS.keys()).count("fastpath") == 1
    try:
        from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS
    except ImportError:
        return
    assert ALL_FP8_EXPERTS_FUNCTIONS["fastpath"] is fpt.fp8_experts_forward
    assert ALL_EXPERTS_FUNCTIONS["grouped_mm"] is not fpt.experts_forward  # nothing else rebound


@pytest.mark.parametrize("name", list(MODELS))
@fresh_stack
def test_model_logits_and_generate_match_eager(name, device):
    """Greedy generate() with "eager" and "fastpath" experts: the logits of every step (the
    prefill's and each decode step's) close, the tokens equal, and fused_experts run in every
    MoE layer of every step."""
    model = build(name, device)
    experts = experts_modules(model)
    assert len(experts) == 2 and all(fpt.fallback_reason(m) is None for m in experts)
    ids = torch.randint(1, 128, (2, PROMPT), device=device)

    ref = generate(model, ids, "eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback anywhere
        with KernelCalls(model) as calls:
            out = generate(model, ids, "fastpath")
    assert model.config._experts_implementation == "fastpath"
    steps = len(out.logits)  # forwards: the prefill and one per further token
    assert steps == 4 and out.sequences.shape == (2, PROMPT + steps)
    # every MoE layer of every step ran fused_experts, which launched its kernels
    assert calls.counts["experts"] == calls.counts["fused_experts"] == len(experts) * steps
    if use_triton(ids):
        assert calls.launches == len(experts) * steps
    for got, want in zip(out.logits, ref.logits):
        assert_close(got, want, tol=TOL)
    assert torch.equal(out.sequences, ref.sequences)

    # the router is what fastpath.ops.moe.route computes (noted, not patched)
    block, router = block_and_router(model)
    h = torch.randn(5, model.config.hidden_size, device=device)
    with torch.no_grad():
        w_ref, ids_ref = router(h)
        w, top = fpt.route_block(block, h)
    assert torch.equal(top, ids_ref)
    assert_close(w.to(w_ref.dtype), w_ref, tol=TOL)


@fresh_stack
def test_static_cache_compiled_decode_keeps_fastpath(device):
    """generate(cache_implementation="static") compiles the decode step (transformers does so by
    itself on a GPU; forced here, with fullgraph=True): fastpath's registered op is in the graph
    and runs at every compiled step (seen by the profiler, as the dispatcher calls it)."""
    from torch._dynamo.utils import counters

    if not hasattr(getattr(transformers, "CompileConfig", None), "_compile_all_devices"):
        pytest.skip(f"transformers {transformers.__version__} has no CompileConfig._compile_all_devices")
    model = build("qwen3_moe", device)
    ids = torch.randint(1, 128, (2, PROMPT), device=device)
    ref = generate(model, ids, "eager")
    config = transformers.CompileConfig(backend="aot_eager", mode=None, fullgraph=True)
    config._compile_all_devices = True
    static = dict(cache_implementation="static", compile_config=config)
    torch._dynamo.reset()
    counters.clear()
    try:
        generate(model, ids, "fastpath", **static)  # compiles
        assert counters["stats"]["unique_graphs"] >= 1 and not counters["graph_break"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = generate(model, ids, "fastpath", **static)
    finally:
        torch._dynamo.reset()
    ops = [e for e in prof.events() if e.name == "fastpath::fused_experts"]
    assert len(ops) == 2 * (len(out.logits) - 1)  # each compiled decode step (the prefill runs uncompiled)
    for got, want in zip(out.logits, ref.logits):
        assert_close(got, want, tol=TOL)
    assert torch.equal(out.sequences, ref.sequences)


@fresh_stack
def test_prefill_path(device):
    """More than MAX_DECODE_TOKENS_EAGER tokens: the sorted grouped-GEMM path (one MoE layer)."""
    model = build("qwen3_moe", device, num_hidden_layers=1)
    ids = torch.randint(1, 128, (1, moe.MAX_DECODE_TOKENS_EAGER + 3), device=device)
    ref = logits(model, ids, "eager")
    with KernelCalls(model) as calls:
        out = logits(model, ids, "fastpath")
    assert calls.counts["fused_experts"] == 1
    if use_triton(ids):
        assert calls.counts["_launch_prefill"] == 1
    assert_close(out, ref, tol=TOL)


@fresh_stack
def test_from_pretrained_experts_implementation(device, tmp_path):
    model = build("olmoe", device)
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path, experts_implementation="fastpath").to(device).eval()
    assert loaded.config._experts_implementation == "fastpath"
    ids = torch.randint(1, 128, (1, 3), device=device)
    ref = logits(model, ids, "eager")
    with KernelCalls(loaded) as calls, torch.no_grad():
        out = loaded(ids).logits
    assert calls.counts["fused_experts"] == 2
    assert_close(out, ref, tol=TOL)


@fresh_stack
def test_gpt_oss_alpha_and_limit_come_from_the_module(device):
    model = build("gpt_oss", device)
    for m in experts_modules(model):  # instance attributes, read by the plan
        m.alpha, m.limit = 1.25, 2.5
    ids = torch.randint(1, 128, (1, 5), device=device)
    assert_close(logits(model, ids, "fastpath"), logits(model, ids, "eager"), tol=TOL)


def test_unsupported_activation_falls_back_with_one_warning(device, monkeypatch):
    monkeypatch.setattr(fpt, "_WARNED", set())
    model = build("qwen3_moe", device, hidden_act="relu")
    experts = experts_modules(model)
    assert "relu" in fpt.fallback_reason(experts[0])
    ids = torch.randint(1, 128, (1, 5), device=device)
    ref = logits(model, ids, "eager")
    with pytest.warns(RuntimeWarning, match=r"Qwen3MoeExperts runs transformers' 'grouped_mm'.*relu") as rec:
        with KernelCalls(model) as calls:
            out = logits(model, ids, "fastpath")
    assert calls.counts["experts"] == 2
    assert len([r for r in rec if "fastpath" in str(r.message)]) == 1  # two layers, one warning
    assert calls.counts["fused_experts"] == 0
    assert_close(out, ref, tol=TOL)


def test_autograd_falls_back_and_gradients_flow(device, monkeypatch):
    monkeypatch.setattr(fpt, "_WARNED", set())
    model = build("mixtral", device)
    model.set_experts_implementation("fastpath")
    ids = torch.randint(1, 128, (1, 5), device=device)
    with pytest.warns(RuntimeWarning, match="autograd"):
        model(ids).logits.square().mean().backward()
    grad = experts_modules(model)[0].gate_up_proj.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


@fresh_stack
def test_expert_parallel_sentinel_ids_contribute_nothing(device):
    """Expert parallelism marks slots of experts on other ranks with id E (weight 0)."""
    model = build("olmoe", device)
    ex = experts_modules(model)[0]
    E, k = ex.gate_up_proj.shape[0], model.config.num_experts_per_tok
    h = torch.randn(7, model.config.hidden_size, device=device)
    ids = torch.stack([torch.randperm(E, device=device)[:k] for _ in range(7)])
    w = torch.rand(7, k, device=device)
    drop = torch.rand(7, k, device=device) < 0.4
    model.set_experts_implementation("fastpath")
    with torch.no_grad():
        out = ex(h, ids.masked_fill(drop, E), w.masked_fill(drop, 0.0))
        ref = type(ex).forward.__wrapped__(ex, h, ids.masked_fill(drop, 0), w.masked_fill(drop, 0.0))
    assert_close(out, ref, tol=TOL)


def _dequantized_experts_f64(h, ids, w, q1, s1, q2, s2, act):
    """The routed experts in float64 from dequantised weights, token by token."""
    out = torch.zeros(h.shape, dtype=torch.float64)
    wgu, wd = q1.double().cpu() * s1.double().cpu()[..., None], q2.double().cpu() * s2.double().cpu()[..., None]
    for t in range(h.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            g, u = (wgu[e] @ h[t].double().cpu()).chunk(2)
            out[t] += w[t, j].double().cpu() * (wd[e] @ act(g, u))
    return out


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch has no float8_e4m3fn")
@fresh_stack
def test_fp8_experts_rowwise_scales_run_and_blockwise_scales_fall_back(device):
    fp8 = pytest.importorskip("transformers.integrations.finegrained_fp8",
                              reason="transformers has no fine-grained FP8 experts")
    from transformers.integrations.moe import use_experts_implementation

    class Experts(fp8.FP8Experts):  # decorated here, as transformers' FP8 quantizer does (not its class)
        pass

    Experts = use_experts_implementation(experts_class=Experts, experts_interface=fp8.ALL_FP8_EXPERTS_FUNCTIONS)
    cfg = transformers.Qwen3MoeConfig(hidden_size=64, moe_intermediate_size=40, num_experts=8, num_experts_per_tok=2)
    cfg._experts_implementation = "fastpath"
    assert "one float32 scale per output row" in fpt.fallback_reason(Experts(cfg, block_size=(128, 128)))

    q1, s1 = moe.quantize_experts(torch.randn(8, 80, 64, device=device) * 0.2)
    q2, s2 = moe.quantize_experts(torch.randn(8, 64, 40, device=device) * 0.2)
    h = torch.randn(7, 64, device=device) * 4
    ids = torch.stack([torch.randperm(8, device=device)[:2] for _ in range(7)])
    w = torch.rand(7, 2, device=device)

    def silu(g, u):
        return torch.nn.functional.silu(g) * u

    def oai(g, u):
        g = g.clamp(max=2.5)
        return (u.clamp(-2.5, 2.5) + 1) * g * torch.sigmoid(1.5 * g)

    for act, alpha in ((silu, None), (oai, 1.5)):
        ex = Experts(cfg, block_size=(1, 64)).to(device)  # one scale per row: (E, N, 1)
        if alpha is not None:  # FP8Experts' clamped SwiGLU-OAI gate
            ex.swiglu_alpha, ex.swiglu_limit, ex.limit = alpha, 2.5, 2.5
        with torch.no_grad():
            ex.gate_up_proj.copy_(q1)
            ex.down_proj.copy_(q2)
            ex.gate_up_proj_scale_inv.copy_(s1[..., None])
            ex.down_proj_scale_inv.copy_(s2[..., None])
        assert fpt.fallback_reason(ex) is None
        with torch.no_grad(), KernelCalls(torch.nn.ModuleList([ex])) as calls:
            out = ex(h, ids, w)
        assert calls.counts["fused_experts"] == 1
        assert_close(out, _dequantized_experts_f64(h, ids, w, q1, s1, q2, s2, act), tol=1e-5)


def test_activation_names():
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    assert fpt.activation_name(F.silu) == "silu"
    assert fpt.activation_name(ACT2FN["silu"]) == "silu" and fpt.activation_name(ACT2FN["swish"]) == "silu"
    assert fpt.activation_name(ACT2FN["gelu"]) == "gelu"
    assert fpt.activation_name(ACT2FN["gelu_pytorch_tanh"]) == "gelu_tanh"
    assert fpt.activation_name(ACT2FN["gelu_new"]) == "gelu_tanh"
    assert fpt.activation_name(torch.nn.GELU(approximate="tanh")) == "gelu_tanh"
    for unsupported in ("relu", "gelu_10", "quick_gelu", "relu2"):
        assert fpt.activation_name(ACT2FN[unsupported]) is None, unsupported
