"""One compact decoder-only transformer for Llama, Qwen2, Qwen3, Qwen3-MoE, Mixtral and OLMoE,
run on fastpath's ops, with its own static KV cache.

Two entry points: :meth:`Transformer.prefill` (a chunk of ``T`` tokens of one or more
sequences that all start at the host-known position ``p0``) and :meth:`Transformer.decode`
(one token per sequence at positions held in a device tensor: no host sync, so the whole
step can be captured in a CUDA graph). Weights are fused where the kernels benefit: q/k/v
in one matrix, gate/up in one matrix, experts in ``(E, 2I, H)`` / ``(E, H, I)`` stacks as
transformers 5 holds them. With ``fp8=True`` every projection (attention, MLP, experts,
LM head) is float8_e4m3fn with one float32 scale per output row.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..ops.attention import scaled_dot_product_attention
from ..ops.attention_prefill import prefill_attention
from ..ops.linear import linear, linear_swiglu
from ..ops.moe import fused_experts, route, router
from ..ops.norm import rms_norm as fused_rms_norm
from ..ops.rope import qkv_rope
from .config import ModelConfig, rope_inv_freq


def _buf(module: nn.Module, name: str, shape, dtype, device) -> None:
    module.register_buffer(name, torch.empty(shape, dtype=dtype, device=device), persistent=True)


def chunk_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p0: int) -> torch.Tensor:
    """Causal attention of a prompt chunk: queries (B, H, T, D) at positions ``p0 .. p0 + T - 1``
    over the cached keys (B, Hkv, p0 + T, D). The first chunk is plain causal attention;
    a later one runs the flash kernel with the queries offset by ``p0`` (a few tokens: the
    decode kernel with a mask)."""
    T = q.shape[2]
    if p0 == 0:
        return scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if T > 16:
        return prefill_attention(q, k, v, causal=True, scale=q.shape[-1] ** -0.5, q_offset=p0)
    mask = torch.ones(T, p0 + T, dtype=torch.bool, device=q.device).tril(p0)
    return scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


class Linear(nn.Module):
    """``y = x @ W.T (+ b)``: bf16/fp16/fp32 ``W``, or float8 ``W`` with a per-row scale."""

    def __init__(self, n: int, k: int, dtype, device, *, bias: bool = False, fp8: bool = False):
        super().__init__()
        _buf(self, "weight", (n, k), torch.float8_e4m3fn if fp8 else dtype, device)
        self.register_buffer("scale", torch.empty(n, 1, device=device) if fp8 else None)
        self.register_buffer("bias", torch.empty(n, dtype=dtype, device=device) if bias else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, weight_scale=self.scale)


class MLP(nn.Module):
    """SwiGLU ``down(silu(gate(x)) * up(x))`` with gate and up in one matrix."""

    def __init__(self, H: int, I: int, dtype, device, fp8: bool):
        super().__init__()
        self.gate_up = Linear(2 * I, H, dtype, device, fp8=fp8)
        self.down = Linear(H, I, dtype, device, fp8=fp8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gu = self.gate_up
        return self.down(linear_swiglu(x, gu.weight, gu.bias, weight_scale=gu.scale))


class MoE(nn.Module):
    """Routed experts (``(E, 2I, H)`` / ``(E, H, I)`` stacks) and an optional shared expert
    behind a sigmoid gate (Qwen3.5). The shared gate's logit is one more row of the router
    matrix; a shared expert of the experts' width is stacked as expert ``E`` and run by the
    same :func:`fused_experts` call as a ``k + 1``-th slot weighted by its gate."""

    def __init__(self, H: int, E: int, I: int, top_k: int, dtype, device, fp8: bool, *, scoring: str = "softmax",
                 norm_topk_prob: bool = True, scaling: float = 1.0, expert_bias: bool = False, shared: int = 0):
        super().__init__()
        self.E, self.top_k, self.scoring, self.norm, self.scaling = E, top_k, scoring, norm_topk_prob, scaling
        self.shared, self.stacked = shared, bool(shared) and shared == I
        n = E + (1 if self.stacked else 0)
        wdt = torch.float8_e4m3fn if fp8 else dtype
        _buf(self, "router", (E + (1 if shared else 0), H), dtype, device)
        _buf(self, "gate_up", (n, 2 * I, H), wdt, device)
        _buf(self, "down", (n, H, I), wdt, device)
        self.register_buffer("gate_up_scale", torch.empty(n, 2 * I, device=device) if fp8 else None)
        self.register_buffer("down_scale", torch.empty(n, H, device=device) if fp8 else None)
        self.register_buffer("expert_bias", torch.empty(E, device=device) if expert_bias else None)
        self.shared_mlp = MLP(H, shared, dtype, device, fp8) if shared and not self.stacked else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        kw = dict(norm_topk_prob=self.norm, expert_bias=self.expert_bias, routed_scaling_factor=self.scaling)
        if self.shared_mlp is None:  # router matmul and routing (one launch for decode); a stacked
            # shared expert is one more slot (id E, weight sigmoid(gate logit))
            w, ids = router(x2, self.router, self.top_k, self.scoring, shared_gate=self.stacked, **kw)
        else:
            logits = linear(x2, self.router)
            w, ids = route(logits[:, :self.E], self.top_k, self.scoring, **kw)
        out = fused_experts(x2, ids, w, self.gate_up, self.down, gate_up_scale=self.gate_up_scale,
                            down_scale=self.down_scale)
        if self.shared_mlp is not None:
            sg = torch.sigmoid(logits[:, self.E:].float())
            out = out + (sg * self.shared_mlp(x2)).to(out.dtype)
        return out.reshape(x.shape)


class Layer(nn.Module):
    def __init__(self, cfg: ModelConfig, i: int, dtype, device, fp8: bool):
        super().__init__()
        H, D, nh, nkv = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
        self.cfg, self.moe = cfg, cfg.is_moe_layer(i)
        _buf(self, "attn_norm", (H,), dtype, device)
        _buf(self, "mlp_norm", (H,), dtype, device)
        self.qkv = Linear((nh + 2 * nkv) * D, H, dtype, device, bias=cfg.attention_bias, fp8=fp8)
        self.o = Linear(H, nh * D, dtype, device, fp8=fp8)
        if cfg.qk_norm == "head":
            _buf(self, "q_norm", (D,), dtype, device)
            _buf(self, "k_norm", (D,), dtype, device)
        elif cfg.qk_norm == "full":
            _buf(self, "q_norm", (nh * D,), dtype, device)
            _buf(self, "k_norm", (nkv * D,), dtype, device)
        if self.moe:
            self.ffn = MoE(H, cfg.num_experts, cfg.moe_intermediate_size, cfg.top_k, dtype, device, fp8,
                           norm_topk_prob=cfg.norm_topk_prob)
        else:
            self.ffn = MLP(H, cfg.intermediate_size, dtype, device, fp8)

    def project(self, x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor, ck: torch.Tensor,
                cv: torch.Tensor) -> torch.Tensor:
        """q (B, T, nh, D) with q/k norm and rotary embedding applied; k and v written into the
        cache rows ``ck``/``cv`` (B, S, nkv, D) at ``pos`` (B, T)."""
        cfg = self.cfg
        nh, nkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv = self.qkv(x)
        if cfg.qk_norm == "full":  # OLMoE: the norm spans all heads of q and of k
            q, k, v = qkv.split([nh * D, nkv * D, nkv * D], dim=-1)
            eps = cfg.rms_norm_eps
            qkv = torch.cat((fused_rms_norm(q, self.q_norm, eps), fused_rms_norm(k, self.k_norm, eps), v), -1)
        head = cfg.qk_norm == "head"
        return qkv_rope(qkv, pos, inv_freq, nh, nkv, ck, cv, self.q_norm if head else None,
                        self.k_norm if head else None, cfg.rms_norm_eps)


class CachedLM(nn.Module):
    """What every model of the engine shares: the LM head (or the tied embedding) and the
    checks and positions of a prefill chunk."""

    batch = max_seq = 0

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.embed) if self.lm_head is None else self.lm_head(x)

    def _chunk(self, tokens: torch.Tensor, p0: int, rows: Optional[slice]):
        """``(rows, end, pos)`` of a prefill chunk ``tokens`` (B, T) at ``p0``: the cache rows
        (default: the first B), the key count after it, the positions (B, T) on the device."""
        B, T = tokens.shape
        rows = rows if rows is not None else slice(0, B)
        end = p0 + T
        if end > self.max_seq:
            raise ValueError(f"tokens: positions up to {end} do not fit the cache of {self.max_seq}")
        if len(range(self.batch)[rows]) != B:
            raise ValueError(f"rows: expected {B} rows of the cache's {self.batch}, got {rows}")
        return rows, end, torch.arange(p0, end, device=self.device).expand(B, T)


class Transformer(CachedLM):
    """The model plus its KV cache (allocated by :meth:`setup_cache`)."""

    def __init__(self, cfg: ModelConfig, *, dtype=torch.bfloat16, device="cpu", fp8: bool = False):
        super().__init__()
        device = torch.device(device)
        self.cfg, self.dtype, self.fp8 = cfg, dtype, fp8
        H = cfg.hidden_size
        _buf(self, "embed", (cfg.vocab_size, H), dtype, device)
        self.layers = nn.ModuleList(Layer(cfg, i, dtype, device, fp8) for i in range(cfg.num_layers))
        _buf(self, "norm", (H,), dtype, device)
        self.lm_head = None if cfg.tie_word_embeddings else Linear(cfg.vocab_size, H, dtype, device, fp8=fp8)
        self.register_buffer("inv_freq", rope_inv_freq(cfg).to(device), persistent=False)
        self.cache_k: list = []
        self.cache_v: list = []

    @property
    def device(self) -> torch.device:
        return self.embed.device

    def setup_cache(self, batch: int, max_seq: int) -> None:
        """Static KV cache ``(batch, max_seq, kv_heads, head_dim)`` per layer, in the model dtype."""
        cfg = self.cfg
        if max_seq > cfg.max_position:
            raise ValueError(f"max_seq: the model has {cfg.max_position} positions, asked for {max_seq}")
        shape = (batch, max_seq, cfg.num_kv_heads, cfg.head_dim)
        self.cache_k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        self.cache_v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        self.batch, self.max_seq = batch, max_seq

    def _layers(self, h: torch.Tensor, attend) -> torch.Tensor:
        """The residual stream through every layer; each residual add is fused with the norm
        that follows it. ``attend(i, layer, x)`` returns the attention output (B, T, nh * D)."""
        eps = self.cfg.rms_norm_eps
        x = fused_rms_norm(h, self.layers[0].attn_norm, eps)
        for i, layer in enumerate(self.layers):
            x, h = fused_rms_norm(layer.o(attend(i, layer, x)), layer.mlp_norm, eps, residual=h)
            nxt = self.layers[i + 1].attn_norm if i + 1 < len(self.layers) else self.norm
            x, h = fused_rms_norm(layer.ffn(x), nxt, eps, residual=h)
        return x

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor, p0: int, rows: Optional[slice] = None,
                last_only: bool = True) -> torch.Tensor:
        """Run ``tokens`` (B, T) at positions ``p0 .. p0 + T - 1`` of cache rows ``rows``
        (default: the first B); returns the logits of the last token (B, V), or of all (B, T, V)."""
        B, T = tokens.shape
        rows, end, pos = self._chunk(tokens, p0, rows)
        if self.cfg.sliding_window and end > self.cfg.sliding_window:
            raise NotImplementedError("prefill: sliding-window attention beyond the window is not supported")

        def attend(i, layer, x):
            ck, cv = self.cache_k[i][rows], self.cache_v[i][rows]
            q = layer.project(x, pos, self.inv_freq, ck, cv)
            a = chunk_attention(q.transpose(1, 2), ck[:, :end].transpose(1, 2), cv[:, :end].transpose(1, 2), p0)
            return a.transpose(1, 2).reshape(B, T, -1)

        x = self._layers(F.embedding(tokens, self.embed), attend)
        return self._head(x[:, -1] if last_only else x)

    @torch.inference_mode()
    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, kv_len: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One token per cache row: ``tokens`` (B,) int64 at positions ``pos`` (B,) int64 (device
        tensors, read on the device); ``kv_len``: ``pos + 1`` as int32 when the caller keeps it
        (the engine does). Returns the logits (B, V). No host synchronisation."""
        B = tokens.shape[0]
        if kv_len is None:
            kv_len = (pos + 1).to(torch.int32)
        pos2 = pos[:, None]

        def attend(i, layer, x):
            ck, cv = self.cache_k[i][:B], self.cache_v[i][:B]
            q = layer.project(x, pos2, self.inv_freq, ck, cv)
            a = scaled_dot_product_attention(q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2),
                                             enable_gqa=True, kv_len=kv_len, window=self.cfg.sliding_window)
            return a.reshape(B, 1, -1)

        return self._head(self._layers(F.embedding(tokens[:, None], self.embed), attend)[:, 0])
