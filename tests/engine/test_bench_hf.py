"""``fastpath bench-decode --hf``: transformers' own model of each named architecture (dense,
MoE and both hybrids), shrunk, builds and decodes on the CPU with its default experts code and
the one the bench compares against, and reports the tokens it was asked for."""
import math

import pytest

from fastpath.engine import bench
from fastpath.models.config import NAMED

SMALL = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=8,
             num_experts_per_tok=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
             linear_value_head_dim=16)


@pytest.mark.parametrize("name", ["qwen3-8b", "qwen3-30b-a3b", "qwen3.6-35b-a3b", "lfm2.5-8b-a1b"])
def test_hf_baseline_runs_every_architecture(name, monkeypatch):
    cfg = dict(NAMED[name])
    cfg.update({k: v for k, v in SMALL.items() if k in cfg or k in ("head_dim",)})
    moe = "num_experts" in cfg or "num_local_experts" in cfg
    impls = [None, bench.HF_BEST_EXPERTS.get(cfg["model_type"], "grouped_mm")] if moe else [None]
    import transformers.generation.utils as gen
    real, calls = gen.GenerationMixin.generate, []

    def counting(self, *a, **kw):  # the lengths hf_baseline asks for, and what came back
        out = real(self, *a, **kw)
        calls.append((kw["max_new_tokens"], out.shape[1] - a[0].shape[1]))
        return out
    monkeypatch.setattr(gen.GenerationMixin, "generate", counting)
    for impl in impls:
        calls.clear()
        r = bench.hf_baseline(cfg, layers=4, prompt_len=8, new_tokens=3, experts=impl, device="cpu")
        assert calls == [(2, 2), (1, 1), (3, 3)]  # warm-up, prefill, decode: every token made
        assert r["experts"] == (impl or "default") and r["new_tokens"] == 3
        assert math.isfinite(r["decode_tps"]) and r["decode_tps"] > 0 and r["prefill_tps"] > 0
