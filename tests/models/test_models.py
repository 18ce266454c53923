"""Every architecture against transformers itself: the same random weights saved in the
Hugging Face layout, loaded by both; logits close (float32), greedy tokens equal for 32
steps, also when the prompt is prefilled in chunks.

On the CPU the kernels run in Triton's interpreter, which is too slow for 32-step loops of
six models: those run fastpath's PyTorch reference paths (``FASTPATH_DISABLE_TRITON``
semantics), and one test runs Qwen3-MoE with the kernels interpreted. On a GPU everything
runs compiled.
"""
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fastpath.engine.generate import Engine, SamplingParams  # noqa: E402
from fastpath.models.config import ModelConfig  # noqa: E402
from fastpath.models.loader import load  # noqa: E402
from tests.conftest import DEVICE, greedy_hf  # noqa: E402

SMALL = dict(vocab_size=160, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=96, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False)
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=32)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        head_dim=16, moe_intermediate_size=32, num_experts=6, num_experts_per_tok=2, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[1])),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=6, num_experts_per_tok=2)),
}


def _hf_model(arch, tmp_path, **overrides):
    cfg_cls, model_cls, extra = ARCHS[arch]
    cfg = getattr(transformers, cfg_cls)(**{**SMALL, **extra, **overrides})
    torch.manual_seed(1)
    model = getattr(transformers, model_cls)(cfg).eval()
    with torch.no_grad():  # random norms too, so that a misplaced norm weight shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
    model.save_pretrained(tmp_path / arch)
    return model, str(tmp_path / arch)




@pytest.mark.parametrize("arch", list(ARCHS))
def test_logits_and_greedy_match_transformers(arch, tmp_path, reference_paths):
    hf, path = _hf_model(arch, tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, SMALL["vocab_size"], (1, 23)).tolist()[0]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    ours.setup_cache(1, 96)
    got = ours.prefill(torch.tensor([ids], device=DEVICE), 0, last_only=False)[0].cpu()
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < 1e-4, f"{arch}: logits rel err {err:.2e}"
    # chunked prefill: 23 tokens as 10 + 10 + 3 give the same last logits
    eng = Engine(ours, max_seq=96)
    first_chunked = eng.prefill([ids], SamplingParams(), chunk=10)
    assert first_chunked.item() == int(ref[-1].argmax())
    want = greedy_hf(hf, ids, 32)
    got_tokens = [r[0] for r in eng.generate_step([ids], 32, chunk=10)]
    assert got_tokens == want, f"{arch}: greedy tokens differ"


def test_kernels_interpreted_qwen3_moe(tmp_path):
    """Qwen3-MoE through the Triton kernels (interpreted on the CPU): logits and 6 greedy steps."""
    hf, path = _hf_model("qwen3_moe", tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, SMALL["vocab_size"], (1, 9)).tolist()[0]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    eng = Engine(ours, max_seq=32)
    got = ours.prefill(torch.tensor([ids], device=DEVICE), 0, last_only=False)[0].cpu()
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < 1e-4, f"logits rel err {err:.2e}"
    assert [r[0] for r in eng.generate_step([ids], 6)] == greedy_hf(hf, ids, 6)


def test_batch_rows_of_different_lengths(tmp_path, reference_paths):
    """Two prompts of different lengths in one batch give what each gives alone."""
    hf, path = _hf_model("qwen3", tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    a, b = torch.randint(0, 160, (17,)).tolist(), torch.randint(0, 160, (5,)).tolist()
    rows = list(Engine(ours, max_seq=64, batch=2).generate_step([a, b], 12))
    assert [r[0] for r in rows] == greedy_hf(hf, a, 12)
    assert [r[1] for r in rows] == greedy_hf(hf, b, 12)


def test_stop_tokens_end_a_row(tmp_path, reference_paths):
    hf, path = _hf_model("llama", tmp_path)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, 160, (8,)).tolist()
    want = greedy_hf(hf, ids, 10)
    stop = want[3]
    got = [r[0] for r in Engine(ours, max_seq=32).generate_step([ids], 10, stop_ids=[stop])]
    cut = want.index(stop) + 1
    assert got == want[:cut]


def test_fp8_weights_close_to_bf16(tmp_path, reference_paths):
    """FP8 (per-row scales, quantised on load) logits stay close to the float32 model's."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    hf, path = _hf_model("qwen3_moe", tmp_path)
    ids = torch.randint(0, 160, (1, 11), device=DEVICE)
    ref_m = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    q_m = load(path, device=DEVICE, dtype=torch.float32, fp8=True, progress=False)
    for m in (ref_m, q_m):
        m.setup_cache(1, 16)
    ref = ref_m.prefill(ids, 0, last_only=False).double()
    got = q_m.prefill(ids, 0, last_only=False).double()
    sqnr = 10 * torch.log10(ref.pow(2).sum() / (got - ref).pow(2).sum()).item()
    assert q_m.layers[0].qkv.weight.dtype == torch.float8_e4m3fn
    assert sqnr > 25, f"FP8 model logits SQNR {sqnr:.1f} dB"


def test_check_fits_names_the_sizes_and_suggests_fp8(monkeypatch):
    """A model larger than the GPU's free memory: MemoryError with both sizes, and --fp8 as
    the way out where it is not on already (free memory faked: any machine runs this)."""
    from fastpath.models.config import named
    from fastpath.models.loader import check_fits, weight_bytes
    cfg = named("qwen3-8b")
    need = weight_bytes(cfg, torch.bfloat16, False)
    assert 15e9 < need < 18e9  # Qwen3-8B's 8.2B parameters in bfloat16
    assert 0.5 < weight_bytes(cfg, torch.bfloat16, True) / need < 0.56  # FP8 projections, bf16 embedding
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (12 * 2**30, 80 * 2**30))
    with pytest.raises(MemoryError, match=r"needs 1[56]\.\d GiB .* 12\.0 GiB free of 80\.0 GiB\. Try --fp8"):
        check_fits(cfg, torch.device("cuda"), torch.bfloat16, False)
    check_fits(cfg, torch.device("cuda"), torch.bfloat16, True)  # FP8 fits in 12 GiB
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (4 * 2**30, 80 * 2**30))
    with pytest.raises(MemoryError) as e:
        check_fits(cfg, torch.device("cuda"), torch.bfloat16, True)
    assert "--fp8" not in str(e.value)


def test_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load(str(tmp_path), device="cpu")
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(NotImplementedError, match="qwen3_moe"):
        load(str(tmp_path), device="cpu")
    hf, path = _hf_model("qwen3", tmp_path)
    from fastpath.models import safetensors as st
    f = st.SafetensorsFile(path + "/model.safetensors")
    tensors = {k: f.get(k) for k in f.keys() if "layers.1.mlp.down_proj" not in k}
    st.save(tensors, path + "/model.safetensors")
    with pytest.raises(ValueError, match="layers.1.mlp.down_proj"):
        load(path, device="cpu", progress=False)
    cfg = ModelConfig.from_dir(path)
    assert cfg.with_layers(1).num_layers == 1
    with pytest.raises(ValueError, match="layers"):
        cfg.with_layers(5)


def _rewrite(path, transform):
    """Rewrite a single-file checkpoint: ``transform(tensors) -> list of {name: tensor}`` shards
    (more than one: written with a model.safetensors.index.json)."""
    import json
    import os

    from fastpath.models import safetensors as st
    f = st.SafetensorsFile(os.path.join(path, "model.safetensors"))
    tensors = {k: f.get(k).clone() for k in f.keys()}
    del f
    os.remove(os.path.join(path, "model.safetensors"))
    shards = transform(tensors)
    if len(shards) == 1:
        st.save(shards[0], os.path.join(path, "model.safetensors"))
        return
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        st.save(shard, os.path.join(path, name))
        weight_map.update({k: name for k in shard})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": weight_map}, fh)


def test_sharded_and_fp8_block_scaled_checkpoints(tmp_path, reference_paths, capsys):
    """A checkpoint split over shards with an index, and one stored as FP8 with 32x32 block
    scales (``weight_scale_inv``), load to the same model as the plain float32 one."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    hf, path = _hf_model("qwen3_moe", tmp_path)
    ids = torch.randint(0, 160, (1, 9), device=DEVICE)
    ref_m = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ref_m.setup_cache(1, 16)
    ref = ref_m.prefill(ids, 0, last_only=False)

    names = sorted(hf.state_dict())
    _rewrite(path, lambda t: [{k: v for k, v in t.items() if k < names[len(names) // 2]},
                              {k: v for k, v in t.items() if k >= names[len(names) // 2]}])
    capsys.readouterr()
    sharded = load(path, device=DEVICE, dtype=torch.float32)  # the status line on stderr, to 100%
    assert f"loading {Path(path).name} " in (err := capsys.readouterr().err) and "(100%" in err
    sharded.setup_cache(1, 16)
    assert torch.equal(sharded.prefill(ids, 0, last_only=False), ref)

    def to_fp8(tensors):
        out = {}
        for k, v in tensors.items():
            if k.endswith("proj.weight") and v.dim() == 2:
                n, kk = v.shape
                blocks = v.float().reshape(-(-n // 32), 32, -(-kk // 32), 32) if n % 32 == 0 and kk % 32 == 0 else None
                if blocks is not None:
                    s = blocks.abs().amax(dim=(1, 3)) / 448
                    q = (blocks / s[:, None, :, None]).reshape(n, kk).to(torch.float8_e4m3fn)
                    out[k], out[k[:-len("weight")] + "weight_scale_inv"] = q, s
                    continue
            out[k] = v
        return [out]

    import os
    for f in os.listdir(path):
        if f.endswith(".safetensors") or f.endswith(".index.json"):
            os.remove(os.path.join(path, f))
    hf.save_pretrained(path)
    _rewrite(path, to_fp8)
    fp8_m = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    fp8_m.setup_cache(1, 16)
    got = fp8_m.prefill(ids, 0, last_only=False).double()
    sqnr = 10 * torch.log10(ref.double().pow(2).sum() / (got - ref.double()).pow(2).sum()).item()
    assert 20 < sqnr < 200, f"FP8 block-scaled checkpoint logits SQNR {sqnr:.1f} dB"


@pytest.mark.parametrize("arch,layout", [("qwen3", "per-channel"), ("qwen3", "per-tensor"),
                                         ("qwen3_moe", "per-channel")])
def test_fp8_weight_scale_checkpoints(tmp_path, reference_paths, arch, layout):
    """FP8 checkpoints with ``weight_scale`` per output channel ((N, 1), compressed-tensors
    "FP8-dynamic") or per tensor: a float32 model dequantises them (the same logits as
    dequantising by hand), an FP8 model keeps the stored float8 weights and scales bit for bit."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    hf, path = _hf_model(arch, tmp_path)
    stored = {}

    def to_fp8(tensors):
        out = {}
        for k, v in tensors.items():
            if k.endswith("proj.weight") and v.dim() == 2:
                amax = v.float().abs().amax(dim=1, keepdim=True) if layout == "per-channel" else v.float().abs().max()
                s = (amax / 448).clamp_min(1e-12)
                q = (v.float() / s).clamp(-448, 448).to(torch.float8_e4m3fn)
                out[k], out[k[:-len("weight")] + "weight_scale"] = q, s.reshape(-1, 1) if s.dim() else s.reshape(1)
                stored[k] = (q, s)
                continue
            out[k] = v
        return [out]
    _rewrite(path, to_fp8)
    ids = torch.randint(0, 160, (1, 9))
    m = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    m.setup_cache(1, 16)
    got = m.prefill(ids.to(DEVICE), 0, last_only=False)[0].double().cpu()
    if arch == "qwen3":  # transformers with the checkpoint's values q * s (its MoE state dict fuses the experts)
        sd = hf.state_dict()
        with torch.no_grad():
            for k, (q, s) in stored.items():
                sd[k].copy_(q.float() * (s if s.dim() else s.reshape(1, 1)))
            want = hf(ids).logits[0].double()
        assert ((got - want).norm() / want.norm()).item() < 1e-4
    want = got
    q_m = load(path, device=DEVICE, dtype=torch.float32, fp8=True, progress=False)
    lin = q_m.layers[0].o
    q, s = stored["model.layers.0.self_attn.o_proj.weight"]
    assert torch.equal(lin.weight.cpu().view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(lin.scale.cpu().float(), s.expand(q.shape[0], 1))
    if arch == "qwen3_moe":  # an expert's rows of the fused (E, 2I, H) gate / up tensor
        q, s = stored["model.layers.0.mlp.experts.3.up_proj.weight"]
        ffn, n = q_m.layers[0].ffn, q.shape[0]
        assert torch.equal(ffn.gate_up[3, n:].cpu().view(torch.uint8), q.view(torch.uint8))
        assert torch.equal(ffn.gate_up_scale[3, n:].cpu().float().reshape(n, 1), s)
    q_m.setup_cache(1, 16)
    got8 = q_m.prefill(ids.to(DEVICE), 0, last_only=False)[0].double().cpu()
    # the same projections; the untied LM head, float32 in the checkpoint, quantised per row on load
    assert ((got8 - want).norm() / want.norm()).item() < 0.05


def test_fp8_checkpoint_errors(tmp_path):
    """An FP8 weight without a scale, or with a scale of no known layout, names the tensor."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    hf, path = _hf_model("qwen3", tmp_path)
    name = "model.layers.0.mlp.down_proj.weight"

    def drop_scale(tensors):
        return [{k: (v.to(torch.float8_e4m3fn) if k == name else v) for k, v in tensors.items()}]
    _rewrite(path, drop_scale)
    with pytest.raises(ValueError, match="down_proj.*weight_scale"):
        load(path, device="cpu", dtype=torch.float32, progress=False)

    def odd_scale(tensors):
        return [{**tensors, name[:-len("weight")] + "weight_scale": torch.ones(3, 5, 7)}]
    _rewrite(path, odd_scale)
    with pytest.raises(ValueError, match="weight_scale.*no FP8 layout"):
        load(path, device="cpu", dtype=torch.float32, progress=False)


def test_long_prompt_chunks_attend_the_cached_prefix(tmp_path):
    """Chunks longer than 16 tokens after the first run the flash kernel with the queries
    offset by the cached prefix (interpreted on the CPU): every logit as in one pass and as
    transformers'."""
    hf, path = _hf_model("qwen3", tmp_path, head_dim=64)
    ours = load(path, device=DEVICE, dtype=torch.float32, progress=False)
    ids = torch.randint(0, SMALL["vocab_size"], (1, 50))
    with torch.no_grad():
        ref = hf(ids).logits[0]
    ours.setup_cache(1, 64)
    x = ids.to(DEVICE)
    parts = [ours.prefill(x[:, p0:p0 + 20], p0, last_only=False)[0].cpu() for p0 in (0, 20, 40)]
    got = torch.cat(parts)
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < 1e-4, f"chunked logits rel err {err:.2e}"
