"""Model configuration read from a Hugging Face ``config.json``, and the named configs of
``fastpath bench-decode --config NAME``."""
from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Optional

#: transformers ``model_type`` values fastpath runs, and what each needs.
SUPPORTED = ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "olmoe", "qwen3_5_moe", "lfm2_moe")

#: ``model_type`` -> module (in this package) of an architecture with its own model class:
#: it defines ``Config`` (with ``from_hf``), ``Model``, ``checkpoint_slots(model)`` and
#: ``checkpoint_name(name)``. The other types run on :class:`~.transformer.Transformer`.
ARCHITECTURES = {"qwen3_5_moe": "qwen3_5_moe", "qwen3_5_moe_text": "qwen3_5_moe", "lfm2_moe": "lfm2_moe"}


def architecture(model_type: Optional[str]):
    """The module of ``model_type`` in :data:`ARCHITECTURES`, or None (a Transformer)."""
    name = ARCHITECTURES.get(model_type)
    return importlib.import_module(f"{__package__}.{name}") if name else None


@dataclass
class Dims:
    """The fields every architecture's config starts with (the hybrids' configs too)."""
    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int


@dataclass
class ModelConfig(Dims):
    intermediate_size: int = 0
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    max_position: int = 32768
    attention_bias: bool = False      # bias on q/k/v (Qwen2)
    qk_norm: str = "none"             # "head" (Qwen3: per head), "full" (OLMoE: whole projection)
    tie_word_embeddings: bool = False
    sliding_window: Optional[int] = None
    # mixture of experts
    num_experts: int = 0
    top_k: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: list = field(default_factory=list)   # per layer: True = MoE block
    eos_token_ids: list = field(default_factory=list)
    bos_token_id: Optional[int] = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, i: int) -> bool:
        return self.is_moe and bool(self.moe_layers[i])

    def with_layers(self, n: int) -> "ModelConfig":
        """The same model cut to its first ``n`` layers (quick runs)."""
        if not 1 <= n <= self.num_layers:
            raise ValueError(f"layers: expected 1..{self.num_layers}, got {n}")
        return dataclasses.replace(self, num_layers=n, moe_layers=list(self.moe_layers[:n]))

    def num_params(self) -> dict:
        """Parameter counts: ``total`` and ``active`` (read per decoded token: top-k experts
        only, the whole LM head, one embedding row)."""
        H, D = self.hidden_size, self.head_dim
        attn = H * D * (2 * self.num_heads + 2 * self.num_kv_heads)
        dense = 3 * H * self.intermediate_size
        expert = 3 * H * self.moe_intermediate_size
        total = active = 0
        for i in range(self.num_layers):
            total += attn + 2 * H
            active += attn + 2 * H
            if self.is_moe_layer(i):
                total += self.num_experts * (expert + H)
                active += self.top_k * expert + self.num_experts * H
            else:
                total += dense
                active += dense
        emb = self.vocab_size * H
        head = 0 if self.tie_word_embeddings else emb
        # per token: the LM head (or the tied embedding it reuses) whole, one embedding row
        return {"total": total + emb + head + H, "active": active + emb + H + H}

    @classmethod
    def from_hf(cls, cfg: dict) -> "ModelConfig":
        """From the dict of a transformers ``config.json`` (the text part of a multimodal one);
        an architecture of :data:`ARCHITECTURES` gets its own config class."""
        arch = architecture(cfg.get("model_type")) or architecture((cfg.get("text_config") or {}).get("model_type"))
        if arch is not None:
            return arch.Config.from_hf(cfg)
        if "text_config" in cfg and "model_type" not in cfg.get("text_config", {}):
            cfg = {**cfg, **cfg["text_config"]}
        elif "text_config" in cfg:
            cfg = cfg["text_config"]
        mt = cfg.get("model_type")
        if mt not in SUPPORTED:
            raise NotImplementedError(
                f"config.json: model_type {mt!r} is not supported; fastpath runs {', '.join(SUPPORTED)}")
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
        scaling = dict(rope) if rope.get("rope_type", rope.get("type", "default")) != "default" else None
        n = cfg["num_hidden_layers"]
        kw = dict(model_type=mt, vocab_size=cfg["vocab_size"], hidden_size=H, num_layers=n, num_heads=nh,
                  num_kv_heads=cfg.get("num_key_value_heads") or nh,
                  head_dim=cfg.get("head_dim") or H // nh, intermediate_size=cfg.get("intermediate_size", 0),
                  rms_norm_eps=cfg.get("rms_norm_eps", 1e-6), rope_theta=float(theta), rope_scaling=scaling,
                  max_position=cfg.get("max_position_embeddings", 32768),
                  tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                  bos_token_id=cfg.get("bos_token_id"))
        eos = cfg.get("eos_token_id")
        kw["eos_token_ids"] = [] if eos is None else list(eos) if isinstance(eos, (list, tuple)) else [eos]
        if cfg.get("use_sliding_window", mt == "mixtral") and cfg.get("sliding_window"):
            kw["sliding_window"] = int(cfg["sliding_window"])
        if mt == "qwen2":
            kw["attention_bias"] = True
        if mt in ("qwen3", "qwen3_moe"):
            kw["qk_norm"] = "head"
            kw["attention_bias"] = bool(cfg.get("attention_bias", False))
        if mt == "olmoe":
            kw["qk_norm"] = "full"
        if mt == "llama" and cfg.get("attention_bias"):
            kw["attention_bias"] = True
        if mt == "qwen3_moe":
            step, only = cfg.get("decoder_sparse_step", 1), set(cfg.get("mlp_only_layers") or [])
            kw.update(num_experts=cfg.get("num_experts") or cfg["num_local_experts"], top_k=cfg["num_experts_per_tok"],
                      moe_intermediate_size=cfg["moe_intermediate_size"],
                      norm_topk_prob=bool(cfg.get("norm_topk_prob", False)),
                      moe_layers=[(i not in only) and (i + 1) % step == 0 for i in range(n)])
        elif mt in ("mixtral", "olmoe"):
            kw.update(num_experts=cfg.get("num_local_experts") or cfg["num_experts"],
                      top_k=cfg["num_experts_per_tok"], moe_intermediate_size=cfg["intermediate_size"],
                      norm_topk_prob=True if mt == "mixtral" else bool(cfg.get("norm_topk_prob", False)),
                      moe_layers=[True] * n)
        return cls(**kw)

    @classmethod
    def from_dir(cls, path: str) -> "ModelConfig":
        f = os.path.join(path, "config.json")
        if not os.path.isfile(f):
            raise FileNotFoundError(f"model: no config.json in {path!r} (expected a Hugging Face model directory)")
        with open(f) as fh:
            return cls.from_hf(json.load(fh))


def rope_inv_freq(cfg: ModelConfig):
    """Inverse frequencies (head_dim / 2,), on the CPU, as transformers computes them: default,
    linear and llama3 scaling."""
    import torch

    D = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, D, 2, dtype=torch.int64, device="cpu").float() / D))
    sc = cfg.rope_scaling
    if not sc:
        return inv
    kind = sc.get("rope_type", sc.get("type"))
    if kind == "linear":
        return inv / sc["factor"]
    if kind == "llama3":
        factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        old = sc["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * out / factor + smooth * out
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        return torch.where(medium, mid, out)
    raise NotImplementedError(f"config.json: rope type {kind!r} is not supported (default, linear, llama3)")


def _hf(model_type, **kw) -> dict:
    return {"model_type": model_type, **kw}


#: Real model shapes for ``bench-decode --config NAME --random-weights``.
NAMED = {
    "qwen3-30b-a3b": _hf("qwen3_moe", vocab_size=151936, hidden_size=2048, num_hidden_layers=48,
                         num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
                         moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                         rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960,
                         eos_token_id=[151645, 151643]),
    "qwen3-8b": _hf("qwen3", vocab_size=151936, hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                    num_key_value_heads=8, head_dim=128, intermediate_size=12288, rms_norm_eps=1e-6,
                    rope_theta=1000000.0, max_position_embeddings=40960, eos_token_id=[151645, 151643]),
    "llama-3-8b": _hf("llama", vocab_size=128256, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, intermediate_size=14336, rms_norm_eps=1e-5, rope_theta=500000.0,
                      max_position_embeddings=8192, eos_token_id=[128001, 128009]),
    "mixtral-8x7b": _hf("mixtral", vocab_size=32000, hidden_size=4096, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336, num_local_experts=8,
                        num_experts_per_tok=2, rms_norm_eps=1e-5, rope_theta=1000000.0,
                        max_position_embeddings=32768, eos_token_id=2),
    # the text part of Qwen/Qwen3.6-35B-A3B (the architecture of Qwen3.5-35B-A3B)
    "qwen3.6-35b-a3b": _hf("qwen3_5_moe", vocab_size=248320, hidden_size=2048, num_hidden_layers=40,
                           num_attention_heads=16, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                           linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
                           linear_conv_kernel_dim=4, full_attention_interval=4, num_experts=256,
                           num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                           rms_norm_eps=1e-6, max_position_embeddings=262144,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                            "partial_rotary_factor": 0.25},
                           eos_token_id=[248046, 248044]),
    "lfm2.5-8b-a1b": _hf("lfm2_moe", vocab_size=128000, hidden_size=2048, num_hidden_layers=24,
                         num_attention_heads=32, num_key_value_heads=8, intermediate_size=7168,
                         moe_intermediate_size=1792, num_experts=32, num_experts_per_tok=4, num_dense_layers=2,
                         layer_types=["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)],
                         conv_L_cache=3, norm_eps=1e-5, rope_theta=5000000.0, max_position_embeddings=128000,
                         tie_word_embeddings=True, use_expert_bias=True, norm_topk_prob=True, eos_token_id=7),
    # LFM2-8B-A1B: LFM2.5's architecture with the smaller vocabulary and rope base
    "lfm2-8b-a1b": None,
}


NAMED["lfm2-8b-a1b"] = {**NAMED["lfm2.5-8b-a1b"], "vocab_size": 65536, "rope_theta": 1000000.0}


def named(name: str) -> ModelConfig:
    if name not in NAMED:
        raise ValueError(f"config: expected one of {', '.join(NAMED)}, got {name!r}")
    return ModelConfig.from_hf(NAMED[name])
