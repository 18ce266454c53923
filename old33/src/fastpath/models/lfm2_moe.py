"""LFM2-MoE / LFM2.5-MoE (transformers ``lfm2_moe``): gated short-convolution blocks and GQA
blocks with per-head q/k RMSNorm; the first ``num_dense_layers`` layers have a dense SwiGLU
MLP, the others a routed MoE (sigmoid scores, experts chosen by ``score + expert_bias``,
weighted by the unbiased scores, renormalised).

Short convolution (one in-projection ``[B | C | x]``)::

    y = out_proj(C * causal_conv1d(B * x, rolling state of K - 1 columns))   # depthwise, no activation
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ..ops.conv1d import short_conv
from .config import Dims, rope_inv_freq
from .hybrid import Attention, Block, HybridLM, LayerTypesConfig, Mixer
from .transformer import MLP, Linear, MoE, _buf

MODEL_TYPES = ("lfm2_moe",)


@dataclass
class Lfm2MoeConfig(LayerTypesConfig, Dims):
    intermediate_size: int
    moe_intermediate_size: int
    num_experts: int
    top_k: int
    num_dense_layers: int
    layer_types: list                 # "conv" / "full_attention" per layer
    conv_kernel: int = 3
    conv_bias: bool = False
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1000000.0
    max_position: int = 128000
    tie_word_embeddings: bool = True
    use_expert_bias: bool = True
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True
    eos_token_ids: list = field(default_factory=list)
    bos_token_id: Optional[int] = None
    def is_moe_layer(self, i: int) -> bool:
        return i >= self.num_dense_layers

    def num_params(self) -> dict:
        """``total`` and ``active`` (read per decoded token) parameter counts."""
        H, D, nh, nkv = self.hidden_size, self.head_dim, self.num_heads, self.num_kv_heads
        attn = H * (nh + 2 * nkv) * D + nh * D * H + 2 * D
        conv = 3 * H * H + H * self.conv_kernel + H * H
        E, I = self.num_experts, self.moe_intermediate_size
        total = active = 0
        for i, t in enumerate(self.layer_types):
            mix = (attn if t == "full_attention" else conv) + 2 * H
            if self.is_moe_layer(i):
                total += mix + E * H + E * 3 * H * I
                active += mix + E * H + self.top_k * 3 * H * I
            else:
                total += mix + 3 * H * self.intermediate_size
                active += mix + 3 * H * self.intermediate_size
        emb = self.vocab_size * H
        head = 0 if self.tie_word_embeddings else emb
        return {"total": total + emb + head + H, "active": active + emb + 2 * H}

    @classmethod
    def from_hf(cls, d: dict) -> "Lfm2MoeConfig":
        n, H, nh = d["num_hidden_layers"], d["hidden_size"], d["num_attention_heads"]
        types = d.get("layer_types")
        if not types and "full_attn_idxs" in d:
            types = ["full_attention" if i in d["full_attn_idxs"] else "conv" for i in range(n)]
        if not types or len(types) != n or set(types) - {"conv", "full_attention"}:
            raise ValueError(f"config.json: layer_types must give conv/full_attention for {n} layers")
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise NotImplementedError(f"config.json: rope type {rope.get('rope_type')!r} (lfm2_moe runs default)")
        eos = d.get("eos_token_id")
        return cls(model_type="lfm2_moe", vocab_size=d["vocab_size"], hidden_size=H, num_layers=n, num_heads=nh,
                   num_kv_heads=d.get("num_key_value_heads") or nh, head_dim=d.get("head_dim") or H // nh,
                   intermediate_size=d["intermediate_size"], moe_intermediate_size=d["moe_intermediate_size"],
                   num_experts=d["num_experts"], top_k=d["num_experts_per_tok"],
                   num_dense_layers=d.get("num_dense_layers", 2), layer_types=list(types),
                   conv_kernel=d.get("conv_L_cache", 3), conv_bias=bool(d.get("conv_bias", False)),
                   rms_norm_eps=d.get("norm_eps", 1e-5),
                   rope_theta=float(rope.get("rope_theta", d.get("rope_theta", 1000000.0))),
                   max_position=d.get("max_position_embeddings", 128000),
                   tie_word_embeddings=bool(d.get("tie_word_embeddings", d.get("tie_embedding", True))),
                   use_expert_bias=bool(d.get("use_expert_bias", True)),
                   routed_scaling_factor=float(d.get("routed_scaling_factor", 1.0)),
                   norm_topk_prob=bool(d.get("norm_topk_prob", True)),
                   eos_token_ids=[] if eos is None else list(eos) if isinstance(eos, (list, tuple)) else [eos],
                   bos_token_id=d.get("bos_token_id"))


class ShortConv(Mixer):
    def __init__(self, cfg: Lfm2MoeConfig, dtype, device, fp8: bool):
        super().__init__()
        H, b = cfg.hidden_size, cfg.conv_bias
        self.H = H
        self.in_proj = Linear(3 * H, H, dtype, device, bias=b, fp8=fp8)   # [B | C | x]
        _buf(self, "conv_w", (H, 1, cfg.conv_kernel), dtype, device)
        self.register_buffer("conv_b", torch.empty(H, dtype=dtype, device=device) if b else None)
        self.out = Linear(H, H, dtype, device, bias=b, fp8=fp8)
        self.conv_state = None

    def alloc(self, batch: int, max_seq: int) -> None:
        K = self.conv_w.shape[-1]
        self.conv_state = torch.zeros(batch, self.H, K - 1, dtype=self.conv_w.dtype, device=self.conv_w.device)

    def state_tensors(self) -> list:
        return [self.conv_state]

    def mix(self, p: torch.Tensor, c) -> torch.Tensor:
        cs = self.conv_state[c.rows]
        if not c.decode and c.p0 == 0:  # a new sequence in these rows
            cs.zero_()
        return self.out(short_conv(p, cs, self.conv_w, self.conv_b))  # one launch


class Lfm2Moe(HybridLM):
    def block(self, i: int, dtype, device, fp8: bool) -> Block:
        cfg = self.cfg
        H = cfg.hidden_size
        if cfg.layer_types[i] == "full_attention":
            mixer = Attention(H, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps, dtype, device, fp8)
        else:
            mixer = ShortConv(cfg, dtype, device, fp8)
        if cfg.is_moe_layer(i):
            ffn = MoE(H, cfg.num_experts, cfg.moe_intermediate_size, cfg.top_k, dtype, device, fp8, scoring="sigmoid",
                      norm_topk_prob=cfg.norm_topk_prob, scaling=cfg.routed_scaling_factor,
                      expert_bias=cfg.use_expert_bias)
        else:
            ffn = MLP(H, cfg.intermediate_size, dtype, device, fp8)
        return Block(H, mixer, ffn, dtype, device)

    def rope_inv_freq(self) -> torch.Tensor:
        return rope_inv_freq(self.cfg)


Model, Config = Lfm2Moe, Lfm2MoeConfig


def checkpoint_name(name: str) -> Optional[str]:
    return name


def checkpoint_slots(model: Lfm2Moe) -> dict:
    """Checkpoint name -> slot for every tensor of the model."""
    from .loader import _Slot as S, head_slots, linear_slot, mlp_slots, moe_slots, qkv_rows

    cfg, out = model.cfg, {}
    D, nh, nkv = cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
    head_slots(out, model, "model.embedding_norm.weight")
    for i, L in enumerate(model.layers):
        p = f"model.layers.{i}."
        out[p + "operator_norm.weight"] = S(L.norm1)
        out[p + "ffn_norm.weight"] = S(L.norm2)
        m = L.mixer
        if isinstance(m, Attention):
            a = p + "self_attn."
            for n, r in qkv_rows(nh, nkv, D).items():
                out[a + f"{n}_proj.weight"] = linear_slot(m.proj, r)
            out[a + "out_proj.weight"] = linear_slot(m.o)
            out[a + "q_layernorm.weight"] = S(m.q_norm)
            out[a + "k_layernorm.weight"] = S(m.k_norm)
        else:
            s = p + "conv."
            out[s + "conv.weight"] = S(m.conv_w)
            out[s + "in_proj.weight"] = linear_slot(m.in_proj)
            out[s + "out_proj.weight"] = linear_slot(m.out)
            if cfg.conv_bias:
                out[s + "conv.bias"] = S(m.conv_b)
                out[s + "in_proj.bias"] = S(m.in_proj.bias)
                out[s + "out_proj.bias"] = S(m.out.bias)
        f, ff = L.ffn, p + "feed_forward."
        if isinstance(f, MoE):
            moe_slots(out, ff, f, {"gate": ("w1",), "up": ("w3",), "down": ("w2",)})
        else:
            mlp_slots(out, ff, f, ("w1", "w3", "w2"))
    return out
