"""Qwen3.5 / Qwen3.6 MoE (transformers ``qwen3_5_moe``, text part): per 4 layers 3 Gated
DeltaNet layers and 1 gated attention layer, each followed by a routed MoE with a shared
expert behind a sigmoid gate; zero-centred RMSNorms (``y = n * (1 + w)``).

Gated DeltaNet layer (one fused in-projection ``[qkv | z | b | a]``)::

    qkv = silu(causal_conv1d(qkv, rolling state of K - 1 columns))
    beta = sigmoid(b);  g = -exp(A_log) * softplus(a + dt_bias)
    o = gated_delta_rule(l2norm(q), l2norm(k), v, g, beta, recurrent state (HV, Dk, Dv) float32)
    out = out_proj(rms_norm(o) * w * silu(z))          # per value head, inside out_proj's kernel (decode)

Gated attention: ``q_proj`` gives per head a query and an output gate; q/k RMSNorm per head,
rotary embedding on the first ``partial_rotary_factor * head_dim`` dims (mRoPE reduces to
it for text). The partial rotation runs on :func:`~fastpath.ops.rope.qkv_rope`'s full-rotary
kernel: the q/k head dims are permuted at load time so that each rotated pair ``(i, i + r/2)``
lands on ``(j, j + D/2)`` and the pass-through dims on pairs of frequency 0 (the identity);
attention scores do not change under a permutation applied to both q and k. The zero-centred
q/k norm weights are stored as ``1 + w`` (permuted alike).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ..ops.conv1d import causal_conv1d
from ..ops.gated_delta import chunk_gated_delta_rule
from ..ops.gated_delta_conv import gated_delta_conv_step, ring_history, ring_store
from .config import Dims
from .hybrid import Attention, Block, HybridLM, LayerTypesConfig, Mapped, Mixer
from .transformer import Linear, MoE, _buf

MODEL_TYPES = ("qwen3_5_moe", "qwen3_5_moe_text")


@dataclass
class Qwen35MoeConfig(LayerTypesConfig, Dims):
    rotary_dim: int
    layer_types: list                 # "linear_attention" / "full_attention" per layer
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    conv_kernel: int
    num_experts: int
    top_k: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000000.0
    max_position: int = 262144
    tie_word_embeddings: bool = False
    eos_token_ids: list = field(default_factory=list)
    bos_token_id: Optional[int] = None
    def is_moe_layer(self, i: int) -> bool:
        return True

    def num_params(self) -> dict:
        """``total`` and ``active`` (read per decoded token) parameter counts."""
        H, D, nh, nkv = self.hidden_size, self.head_dim, self.num_heads, self.num_kv_heads
        HK, HV = self.linear_num_key_heads, self.linear_num_value_heads
        Dk, Dv = self.linear_key_head_dim, self.linear_value_head_dim
        C = 2 * HK * Dk + HV * Dv
        attn = H * (2 * nh * D + 2 * nkv * D) + nh * D * H + 2 * D
        lin = H * (C + HV * Dv + 2 * HV) + C * self.conv_kernel + HV * Dv * H + Dv + 2 * HV
        E, I, Is = self.num_experts, self.moe_intermediate_size, self.shared_expert_intermediate_size
        common = (E + 1) * H + 3 * H * Is + 2 * H
        total = active = 0
        for t in self.layer_types:
            mix = attn if t == "full_attention" else lin
            total += mix + common + E * 3 * H * I
            active += mix + common + self.top_k * 3 * H * I
        emb = self.vocab_size * H
        head = 0 if self.tie_word_embeddings else emb
        return {"total": total + emb + head + H, "active": active + emb + 2 * H}

    @classmethod
    def from_hf(cls, d: dict) -> "Qwen35MoeConfig":
        """From a ``config.json`` dict: the multimodal one (``text_config`` inside, stop ids
        from both levels) or a text-only one."""
        t = {**{k: v for k, v in d.items() if k not in ("text_config", "vision_config")}, **d.get("text_config", {})}
        if t.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"config.json: hidden_act {t['hidden_act']!r} (qwen3_5_moe runs silu)")
        if t.get("attention_bias") or t.get("mlp_only_layers"):
            raise NotImplementedError("config.json: attention_bias and mlp_only_layers are not supported "
                                      "for qwen3_5_moe")
        rope = t.get("rope_parameters") or t.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise NotImplementedError(f"config.json: rope type {rope.get('rope_type')!r} (qwen3_5_moe runs default)")
        n, H, nh = t["num_hidden_layers"], t["hidden_size"], t["num_attention_heads"]
        D = t.get("head_dim") or H // nh
        partial = rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))
        r = int(D * partial)
        if r % 2 or (D - r) % 2 or D % 2:
            raise NotImplementedError(f"config.json: rotary dims {r} of head_dim {D} must be even")
        types = t.get("layer_types") or ["full_attention" if (i + 1) % t.get("full_attention_interval", 4) == 0
                                         else "linear_attention" for i in range(n)]
        if len(types) != n or set(types) - {"linear_attention", "full_attention"}:
            raise ValueError(f"config.json: layer_types must give linear_attention/full_attention for {n} layers")
        eos = []
        for src in (d, d.get("text_config", {})):
            e = src.get("eos_token_id")
            for x in ([] if e is None else e if isinstance(e, (list, tuple)) else [e]):
                if x not in eos:
                    eos.append(x)
        return cls(model_type="qwen3_5_moe", vocab_size=t["vocab_size"], hidden_size=H, num_layers=n, num_heads=nh,
                   num_kv_heads=t.get("num_key_value_heads") or nh, head_dim=D, rotary_dim=r, layer_types=list(types),
                   linear_num_key_heads=t["linear_num_key_heads"], linear_num_value_heads=t["linear_num_value_heads"],
                   linear_key_head_dim=t["linear_key_head_dim"], linear_value_head_dim=t["linear_value_head_dim"],
                   conv_kernel=t.get("linear_conv_kernel_dim", 4), num_experts=t["num_experts"],
                   top_k=t["num_experts_per_tok"], moe_intermediate_size=t["moe_intermediate_size"],
                   shared_expert_intermediate_size=t.get("shared_expert_intermediate_size", 0),
                   rms_norm_eps=t.get("rms_norm_eps", 1e-6),
                   rope_theta=float(rope.get("rope_theta", t.get("rope_theta", 1e7))),
                   max_position=t.get("max_position_embeddings", 262144),
                   tie_word_embeddings=bool(t.get("tie_word_embeddings", False)), eos_token_ids=eos,
                   bos_token_id=t.get("bos_token_id"))


def rope_perm(D: int, r: int) -> torch.Tensor:
    """New head dim -> old: rotated pairs ``(i, i + r/2)`` to ``(i, i + D/2)``, the rest after."""
    rh, rest = r // 2, list(range(r, D))
    half = len(rest) // 2
    return torch.tensor(list(range(rh)) + rest[:half] + list(range(rh, r)) + rest[half:], device="cpu")


class GatedDeltaNet(Mixer):
    def __init__(self, cfg: Qwen35MoeConfig, dtype, device, fp8: bool):
        super().__init__()
        H = cfg.hidden_size
        self.HK, self.HV = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.Dk, self.Dv, self.eps = cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.rms_norm_eps
        self.kd, self.vd = self.HK * self.Dk, self.HV * self.Dv
        self.C = 2 * self.kd + self.vd
        self.in_proj = Linear(self.C + self.vd + 2 * self.HV, H, dtype, device, fp8=fp8)  # [qkv | z | b | a]
        _buf(self, "conv_w", (self.C, 1, cfg.conv_kernel), dtype, device)
        _buf(self, "A_log", (self.HV,), torch.float32, device)
        _buf(self, "dt_bias", (self.HV,), torch.float32, device)
        _buf(self, "norm", (self.Dv,), dtype, device)
        self.out = Linear(H, self.vd, dtype, device, fp8=fp8)
        self.conv_state = self.state = None

    def alloc(self, batch: int, max_seq: int) -> None:
        dev = self.norm.device
        # a ring of K slots, token t's conv input in slot t % K (gated_delta_conv_step)
        self.conv_state = torch.zeros(batch, self.C, self.conv_w.shape[-1], dtype=self.norm.dtype, device=dev)
        self.state = torch.zeros(batch, self.HV, self.Dk, self.Dv, dtype=torch.float32, device=dev)

    def state_tensors(self) -> list:
        return [self.conv_state, self.state]

    def mix(self, p: torch.Tensor, c) -> torch.Tensor:
        C, vd, HV = self.C, self.vd, self.HV
        cs, rs = self.conv_state[c.rows], self.state[c.rows]
        b, a = p[..., C + vd:C + vd + HV], p[..., C + vd + HV:]
        if c.decode:  # conv, gating (sigmoid, softplus, exp) and the step in one launch
            o = gated_delta_conv_step(p[:, 0, :C], cs, self.conv_w, c.pos[:, 0], a[:, 0], b[:, 0], rs,
                                      self.A_log, self.dt_bias, key_heads=self.HK)[:, None]
        else:
            if c.p0 == 0:  # a new sequence in these rows
                cs.zero_()
                rs.zero_()
            T = p.shape[1]
            out, new = causal_conv1d(p[..., :C].transpose(1, 2), self.conv_w, None, ring_history(cs, c.p0), "silu")
            ring_store(cs, new, c.p0 + T)
            mixed = out.transpose(1, 2)
            q = mixed[..., :self.kd].unflatten(-1, (self.HK, self.Dk))
            k = mixed[..., self.kd:2 * self.kd].unflatten(-1, (self.HK, self.Dk))
            v = mixed[..., 2 * self.kd:].unflatten(-1, (HV, self.Dv))
            o, s = chunk_gated_delta_rule(q, k, v, a, b, initial_state=rs, A_log=self.A_log,  # raw gates
                                          dt_bias=self.dt_bias)
            rs.copy_(s)
        return self.out.group_normed(o.flatten(-2), self.norm, self.eps, p[..., C:C + vd])


class Qwen35Moe(HybridLM):
    zero_centered = True

    def block(self, i: int, dtype, device, fp8: bool) -> Block:
        cfg = self.cfg
        H = cfg.hidden_size
        if cfg.layer_types[i] == "full_attention":
            mixer = Attention(H, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps, dtype, device, fp8,
                              gate=True)
        else:
            mixer = GatedDeltaNet(cfg, dtype, device, fp8)
        ffn = MoE(H, cfg.num_experts, cfg.moe_intermediate_size, cfg.top_k, dtype, device, fp8,
                  shared=cfg.shared_expert_intermediate_size)
        return Block(H, mixer, ffn, dtype, device)

    def rope_inv_freq(self) -> torch.Tensor:
        cfg = self.cfg
        r = cfg.rotary_dim
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, r, 2, dtype=torch.int64, device="cpu").float() / r))
        return torch.cat((inv, torch.zeros(cfg.head_dim // 2 - r // 2, device="cpu")))  # frequency 0: passed through


Model, Config = Qwen35Moe, Qwen35MoeConfig


def checkpoint_name(name: str) -> Optional[str]:
    """The text model's name of a checkpoint tensor; None for the vision tower and the MTP head."""
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    if name.startswith(("model.visual.", "visual.", "mtp.", "model.mtp.")):
        return None
    return name


def checkpoint_slots(model: Qwen35Moe) -> dict:
    """Checkpoint name -> slot for every tensor of the text model."""
    from .loader import _Slot as S, head_slots, linear_slot, mlp_slots, moe_slots

    cfg, out = model.cfg, {}
    D, nh, nkv = cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
    perm = rope_perm(D, cfg.rotary_dim)
    head_slots(out, model, "model.norm.weight")
    for i, L in enumerate(model.layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = S(L.norm1)
        out[p + "post_attention_layernorm.weight"] = S(L.norm2)
        m = L.mixer
        if isinstance(m, Attention):
            a, w = p + "self_attn.", m.proj
            qr, gr = slice(0, nh * D), slice(m.n_qkv, None)
            kr, vr = slice(nh * D, (nh + nkv) * D), slice((nh + nkv) * D, m.n_qkv)

            def q_gate(t, nh=nh):
                t = t.reshape(nh, 2, D, -1)
                return t[:, 0][:, perm].reshape(nh * D, -1), t[:, 1].reshape(nh * D, -1)

            out[a + "q_proj.weight"] = Mapped([linear_slot(w, qr), linear_slot(w, gr)], q_gate)
            out[a + "k_proj.weight"] = Mapped([linear_slot(w, kr)],
                                              lambda t: [t.reshape(nkv, D, -1)[:, perm].reshape(nkv * D, -1)])
            out[a + "v_proj.weight"] = linear_slot(w, vr)
            out[a + "o_proj.weight"] = linear_slot(m.o)
            for n in ("q", "k"):
                out[a + f"{n}_norm.weight"] = Mapped([S(getattr(m, f"{n}_norm"))], lambda t: [(1 + t.float())[perm]])
        else:
            g, w = p + "linear_attn.", m.in_proj
            C, vd, HV = m.C, m.vd, m.HV
            for n, r in (("qkv", slice(0, C)), ("z", slice(C, C + vd)), ("b", slice(C + vd, C + vd + HV)),
                         ("a", slice(C + vd + HV, None))):
                out[g + f"in_proj_{n}.weight"] = linear_slot(w, r)
            out[g + "conv1d.weight"] = S(m.conv_w)
            out[g + "A_log"] = S(m.A_log)
            out[g + "dt_bias"] = S(m.dt_bias)
            out[g + "norm.weight"] = S(m.norm)
            out[g + "out_proj.weight"] = linear_slot(m.out)
        f = L.ffn
        moe_slots(out, p + "mlp.", f, {"gate": ("gate_proj",), "up": ("up_proj",), "down": ("down_proj",)})
        E, Is = f.E, f.shared
        out[p + "mlp.shared_expert_gate.weight"] = S(f.router, slice(E, E + 1))
        sh = p + "mlp.shared_expert."
        if f.stacked:
            out[sh + "gate_proj.weight"] = S(f.gate_up, (E, slice(0, Is)), f.gate_up_scale)
            out[sh + "up_proj.weight"] = S(f.gate_up, (E, slice(Is, 2 * Is)), f.gate_up_scale)
            out[sh + "down_proj.weight"] = S(f.down, (E,), f.down_scale)
        else:
            mlp_slots(out, sh, f.shared_mlp)
    return out
