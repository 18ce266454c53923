"""The hybrid architectures (Qwen3.5/3.6-MoE, LFM2-MoE) against transformers itself: the same
random weights saved in the Hugging Face layout, loaded by both; logits close (float32),
greedy tokens equal for 32 steps, also when the prompt is prefilled in chunks (the conv and
recurrent states carried from chunk to chunk) and for rows of different lengths in a batch.

On the CPU the long loops run fastpath's PyTorch reference paths (``FASTPATH_DISABLE_TRITON``
semantics); one short test per architecture runs the kernels interpreted. transformers runs
its own pure-PyTorch fallbacks (no flash-linear-attention, no causal-conv1d).
"""
import json
import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Qwen3_5MoeForCausalLM") or not hasattr(transformers, "Lfm2MoeForCausalLM"):
    pytest.skip(f"transformers {transformers.__version__} has no qwen3_5_moe / lfm2_moe", allow_module_level=True)

from fastpath.engine import bench  # noqa: E402
from fastpath.engine.generate import Engine  # noqa: E402
from fastpath.models import safetensors as st  # noqa: E402
from fastpath.models.config import ModelConfig, named  # noqa: E402
from fastpath.models.loader import load  # noqa: E402
from fastpath.ops import linear  # noqa: E402
from tests.conftest import DEVICE, greedy_hf, greedy_ours_cpu  # noqa: E402

logging.getLogger("transformers").setLevel(logging.ERROR)  # "falling back to the PyTorch implementation"

V = 160
ARCHS = {
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", dict(
        vocab_size=V, hidden_size=64, num_hidden_layers=4, full_attention_interval=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32, max_position_embeddings=256,
        initializer_range=0.1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.25})),
    "lfm2_moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM", dict(
        vocab_size=V, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, num_dense_layers=1, num_experts=8, num_experts_per_tok=2,
        layer_types=["conv", "full_attention", "conv", "full_attention"], max_position_embeddings=256,
        initializer_range=0.1, eos_token_id=None)),
}


def _hf_model(arch, tmp_path, **over):
    cfg_cls, model_cls, kw = ARCHS[arch]
    cfg = getattr(transformers, cfg_cls)(**{**kw, **over})
    torch.manual_seed(1)
    model = getattr(transformers, model_cls)(cfg).eval()
    with torch.no_grad():  # random norms, decays and expert biases, so that a misplaced one shows
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if "norm" in name:
                p.copy_(0.2 * torch.randn_like(p) + (0.0 if arch == "qwen3_5_moe" and "linear_attn" not in name else 1))
            elif name.endswith(("dt_bias", "expert_bias")):
                p.copy_(0.3 * torch.randn_like(p))
    path = tmp_path / arch
    model.save_pretrained(path)
    return model, str(path)




def _rel(got, ref):
    got, ref = got.cpu().double(), ref.cpu().double()
    return ((got - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("arch", list(ARCHS))
def test_logits_and_greedy_match_transformers(arch, tmp_path, reference_paths):
    hf, path = _hf_model(arch, tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, V, (23,)).tolist()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    ours.setup_cache(1, 64)
    t = torch.tensor([ids], device=DEVICE)
    assert _rel(ours.prefill(t, 0, last_only=False)[0], ref) < 1e-4
    # 23 tokens in chunks of 5: every logit equal, the states carried across the chunks
    chunks = torch.cat([ours.prefill(t[:, p:p + 5], p, last_only=False)[0] for p in range(0, 23, 5)])
    assert _rel(chunks, ref) < 1e-4, f"{arch}: chunked prefill"
    want = greedy_hf(hf, ids, 32)
    assert len(set(want)) > 3  # a real sequence, not one repeated token
    eng = Engine(ours, max_seq=64)
    assert [r[0] for r in eng.generate_step([ids], 32, chunk=5)] == want, f"{arch}: greedy tokens (chunk 5)"
    # the engine reused: a prefill at position 0 starts the row from zero state again
    assert [r[0] for r in eng.generate_step([ids], 6)] == want[:6], f"{arch}: greedy tokens (reused cache)"


@pytest.mark.parametrize("arch", list(ARCHS))
def test_load_and_decode_under_another_default_device(arch, tmp_path, reference_paths):
    """With torch's default device elsewhere ("meta": no data), the same tokens as without."""
    _, path = _hf_model(arch, tmp_path)
    ids = torch.randint(0, V, (9,)).tolist()
    assert greedy_ours_cpu(path, ids, 6, "meta") == greedy_ours_cpu(path, ids, 6)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_batch_rows_of_different_lengths(arch, tmp_path, reference_paths):
    hf, path = _hf_model(arch, tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    a, b = torch.randint(0, V, (17,)).tolist(), torch.randint(0, V, (5,)).tolist()
    rows = list(Engine(ours, max_seq=32, batch=2).generate_step([a, b], 8, chunk=8))
    assert [r[0] for r in rows] == greedy_hf(hf, a, 8)
    assert [r[1] for r in rows] == greedy_hf(hf, b, 8)


@pytest.mark.parametrize("fuse_norm", [True, False])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_kernels_interpreted(arch, fuse_norm, tmp_path, monkeypatch):
    """Through the Triton kernels (interpreted on the CPU; 2 layers: one of each kind):
    logits over two prefill chunks, then two decode steps; each layer's first norm inside its
    mixer's projection, or (``linear.FUSE_NORM`` False, where only the decode steps differ) in a
    kernel of its own, one decode step."""
    monkeypatch.setattr(linear, "FUSE_NORM", fuse_norm)
    two = {"qwen3_5_moe": {}, "lfm2_moe": {"layer_types": ["conv", "full_attention"]}}[arch]
    hf, path = _hf_model(arch, tmp_path, num_hidden_layers=2, **two)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, V, (7,)).tolist()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    ours.setup_cache(1, 16)
    t = torch.tensor([ids], device=DEVICE)
    got = torch.cat([ours.prefill(t[:, :5], 0, last_only=False)[0], ours.prefill(t[:, 5:], 5, last_only=False)[0]])
    assert _rel(got, ref) < 1e-4
    toks = [int(got[-1].argmax())]
    for p in (7, 8)[:2 if fuse_norm else 1]:
        logits = ours.decode(torch.tensor(toks[-1:], device=DEVICE), torch.tensor([p], device=DEVICE))
        toks.append(int(logits[0].argmax()))
    assert toks == greedy_hf(hf, ids, len(toks))


def test_qwen_shared_expert_of_another_width(tmp_path, reference_paths):
    """A shared expert narrower than the routed ones runs beside them (not stacked)."""
    hf, path = _hf_model("qwen3_5_moe", tmp_path, shared_expert_intermediate_size=48)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    assert not ours.layers[0].ffn.stacked
    ids = torch.randint(0, V, (1, 13))
    with torch.no_grad():
        ref = hf(ids).logits[0]
    ours.setup_cache(1, 16)
    assert _rel(ours.prefill(ids.to(DEVICE), 0, last_only=False)[0], ref) < 1e-4


def test_qwen_multimodal_checkpoint_layout(tmp_path, reference_paths):
    """The text part of a Qwen3.5/3.6 checkpoint: ``model.language_model.*`` names, vision and
    MTP tensors skipped, the config nested in ``text_config``, stop ids from both levels."""
    hf, path = _hf_model("qwen3_5_moe", tmp_path)
    f = st.SafetensorsFile(path + "/model.safetensors")
    tensors = {k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k: f.get(k)
               for k in f.keys()}
    tensors["model.visual.blocks.0.attn.qkv.weight"] = torch.randn(6, 4)
    tensors["mtp.fc.weight"] = torch.randn(4, 8)
    mm = tmp_path / "mm"
    mm.mkdir()
    st.save(tensors, str(mm / "model.safetensors"))
    with open(path + "/config.json") as fh:
        text = json.load(fh)
    text.update(model_type="qwen3_5_moe_text", eos_token_id=5)
    (mm / "config.json").write_text(json.dumps({"model_type": "qwen3_5_moe", "eos_token_id": 7,
                                                "tie_word_embeddings": False, "text_config": text,
                                                "vision_config": {"depth": 1}}))
    ours = load(str(mm), device=DEVICE, dtype=torch.float32, progress=False)
    assert ours.cfg.eos_token_ids == [7, 5]
    ids = torch.randint(0, V, (1, 11))
    with torch.no_grad():
        ref = hf(ids).logits[0]
    ours.setup_cache(1, 16)
    assert _rel(ours.prefill(ids.to(DEVICE), 0, last_only=False)[0], ref) < 1e-4


@pytest.mark.parametrize("arch", list(ARCHS))
def test_fp8_weights(arch, tmp_path, reference_paths):
    """FP8 weights quantised on load: the same logits as the float32 model holding the
    dequantised weights (every slot, scale and permutation in place), and close to the
    float32 model's."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    _, path = _hf_model(arch, tmp_path, initializer_range=0.02)
    ids = torch.randint(0, V, (1, 11), device=DEVICE)
    ref_m = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    q_m = load(path, device=DEVICE, dtype=torch.float32, fp8=True, progress=False)
    twin = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    qb, tb = dict(q_m.named_buffers()), dict(twin.named_buffers())
    fp8 = [n for n, b in qb.items() if b.dtype == torch.float8_e4m3fn]
    assert any(".mixer.in_proj." in n for n in fp8) and any(n.endswith("ffn.gate_up") for n in fp8)
    for n in fp8:
        s = qb[n[:-len("weight")] + "scale" if n.endswith("weight") else n + "_scale"]
        tb[n].copy_(qb[n].float() * s.reshape(*qb[n].shape[:-1], 1))
    for m in (ref_m, q_m, twin):
        m.setup_cache(1, 16)
    ref = ref_m.prefill(ids, 0, last_only=False).double()
    got = q_m.prefill(ids, 0, last_only=False).double()
    assert _rel(got, twin.prefill(ids, 0, last_only=False)) < 1e-4
    sqnr = 10 * torch.log10(ref.pow(2).sum() / (got - ref).pow(2).sum()).item()
    assert sqnr > 20, f"{arch}: FP8 model logits SQNR {sqnr:.1f} dB"


def test_state_save_restore_undoes_decode_steps(tmp_path, reference_paths):
    """What a CUDA-graph warm-up must do: decode steps advance the conv / recurrent states in
    place; restoring ``state_tensors()`` undoes them."""
    _, path = _hf_model("qwen3_5_moe", tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ours.setup_cache(1, 16)
    ids = torch.randint(0, V, (1, 7), device=DEVICE)
    first = ours.prefill(ids, 0).argmax(-1)
    pos = torch.tensor([7], device=DEVICE)
    saved = [t.clone() for t in ours.state_tensors()]
    want = ours.decode(first, pos)
    ours.decode(first, pos + 1)
    assert not torch.equal(ours.decode(first, pos), want)  # the state moved on
    for t, s in zip(ours.state_tensors(), saved):
        t.copy_(s)
    assert torch.equal(ours.decode(first, pos), want)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_random_model_and_bench_run(arch, tmp_path, reference_paths, capsys):
    """``bench-decode --random-weights`` builds the right class (saying how far it is) and runs its loop."""
    _, path = _hf_model(arch, tmp_path)
    cfg = ModelConfig.from_dir(path).with_layers(2)
    model = bench.random_model(cfg, device=DEVICE, dtype=torch.float32)
    nbytes = sum(b.numel() * b.element_size() for n, b in model.named_buffers() if n != "inv_freq")
    assert f"random weights {nbytes / 1e6:6.1f} / {nbytes / 1e6:.1f} MB (100%" in capsys.readouterr().err
    assert type(model).__name__ == {"qwen3_5_moe": "Qwen35Moe", "lfm2_moe": "Lfm2Moe"}[arch]
    r = bench.run(model, prompt_len=6, new_tokens=3, graphs=False)
    assert r["new_tokens"] == 3 and r["bytes_per_token"] > 0


def test_named_configs_have_the_published_sizes():
    q, l25, l2 = named("qwen3.6-35b-a3b"), named("lfm2.5-8b-a1b"), named("lfm2-8b-a1b")
    assert q.layer_types.count("full_attention") == 10 and q.rotary_dim == 64
    assert 34e9 < q.num_params()["total"] < 36e9 and 2.5e9 < q.num_params()["active"] < 3.5e9
    assert 8.2e9 < l2.num_params()["total"] < 8.5e9 and 1.4e9 < l2.num_params()["active"] < 1.7e9
    assert l25.vocab_size == 128000 and l25.layer_types.count("full_attention") == 6
    assert q.with_layers(3).layer_types == ["linear_attention"] * 3
    with pytest.raises(ValueError, match="layers"):
        l2.with_layers(25)


def test_config_and_checkpoint_errors(tmp_path):
    _, _, kw = ARCHS["qwen3_5_moe"]
    with pytest.raises(NotImplementedError, match="attention_bias"):
        ModelConfig.from_hf({"model_type": "qwen3_5_moe_text", "num_hidden_layers": 4, "attention_bias": True, **kw})
    with pytest.raises(ValueError, match="layer_types"):
        ModelConfig.from_hf({**ARCHS["lfm2_moe"][2], "model_type": "lfm2_moe", "num_hidden_layers": 4,
                             "layer_types": ["conv", "mamba", "conv", "conv"]})
    _, path = _hf_model("lfm2_moe", tmp_path)
    f = st.SafetensorsFile(path + "/model.safetensors")
    tensors = {k: f.get(k) for k in f.keys() if "layers.2.conv.in_proj" not in k}
    st.save(tensors, path + "/model.safetensors")
    with pytest.raises(ValueError, match="layers.2.conv.in_proj"):
        load(path, device="cpu", progress=False)
