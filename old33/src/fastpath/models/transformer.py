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
from ..ops.linear import group_rms_norm_linear, linear, linear_swiglu, rms_norm_linear
from ..ops.moe import fused_experts, rms_norm_router, route, router
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

    def normed(self, d: torch.Tensor, h: Optional[torch.Tensor], norm: torch.Tensor, eps: float, *,
               zero_centered: bool = False, swiglu: bool = False):
        """``(self(rms_norm(d + h)), d + h)`` (``h`` None: of ``d``), the norm inside the projection's
        kernel for decode (:func:`~fastpath.ops.linear.rms_norm_linear`)."""
        return rms_norm_linear(d, norm, eps, self.weight, self.bias, residual=h, zero_centered=zero_centered,
                               weight_scale=self.scale, swiglu=swiglu)

    def group_normed(self, x: torch.Tensor, norm: torch.Tensor, eps: float, gate: torch.Tensor) -> torch.Tensor:
        """``self(rms_norm(x per group, norm, eps, gate=gate))``, groups of ``norm``'s size (value
        heads), the gated norm inside the projection's kernel for decode
        (:func:`~fastpath.ops.linear.group_rms_norm_linear`)."""
        return group_rms_norm_linear(x, norm, eps, gate, self.weight, self.bias, weight_scale=self.scale)


class MLP(nn.Module):
    """SwiGLU ``down(silu(gate(x)) * up(x))`` with gate and up in one matrix."""

    def __init__(self, H: int, I: int, dtype, device, fp8: bool):
        super().__init__()
        self.gate_up = Linear(2 * I, H, dtype, device, fp8=fp8)
        self.down = Linear(H, I, dtype, device, fp8=fp8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gu = self.gate_up
        return self.down(linear_swiglu(x, gu.weight, gu.bias, weight_scale=gu.scale))

    def normed(self, d: torch.Tensor, h: Optional[torch.Tensor], norm: torch.Tensor, eps: float, *,
               zero_centered: bool = False):
        """``(self(rms_norm(d + h)), d + h)``, the norm inside the gate/up projection."""
        a, h = self.gate_up.normed(d, h, norm, eps, zero_centered=zero_centered, swiglu=True)
        return self.down(a), h


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
        out = self._experts(x2, ids, w)
        if self.shared_mlp is not None:
            sg = torch.sigmoid(logits[:, self.E:].float())
            out = out + (sg * self.shared_mlp(x2)).to(out.dtype)
        return out.reshape(x.shape)

    def normed(self, d: torch.Tensor, h: Optional[torch.Tensor], norm: torch.Tensor, eps: float, *,
               zero_centered: bool = False):
        """``(self(rms_norm(d + h)), d + h)``: the norm inside the router's kernel (decode), which
        also stores the normalised rows for the experts."""
        if self.shared_mlp is not None:
            x = fused_rms_norm(d, norm, eps, residual=h, zero_centered=zero_centered)
            x, h = x if h is not None else (x, d)
            return self(x), h
        H = d.shape[-1]
        kw = dict(norm_topk_prob=self.norm, expert_bias=self.expert_bias, routed_scaling_factor=self.scaling)
        w, ids, x2, h2 = rms_norm_router(d.reshape(-1, H), norm, eps, self.router, self.top_k, self.scoring,
                                         residual=h.reshape(-1, H) if h is not None else None,
                                         zero_centered=zero_centered, shared_gate=self.stacked, **kw)
        return self._experts(x2, ids, w).reshape(d.shape), h2.reshape(d.shape)

    def _experts(self, x2: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fused_experts(x2, ids, w, self.gate_up, self.down, gate_up_scale=self.gate_up_scale,
                             down_scale=self.down_scale)


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

    def project(self, d: torch.Tensor, h: Optional[torch.Tensor], pos: torch.Tensor, inv_freq: torch.Tensor,
                ck: torch.Tensor, cv: torch.Tensor):
        """``(q, h)``: the residual stream ``h = d + h`` (``d`` alone when ``h`` is None) and, of
        its norm, q (B, T, nh, D) with q/k norm and rotary embedding applied; k and v written
        into the cache rows ``ck``/``cv`` (B, S, nkv, D) at ``pos`` (B, T)."""
        cfg = self.cfg
        nh, nkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv, h = self.qkv.normed(d, h, self.attn_norm, cfg.rms_norm_eps)
        if cfg.qk_norm == "full":  # OLMoE: the norm spans all heads of q and of k
            q, k, v = qkv.split([nh * D, nkv * D, nkv * D], dim=-1)
            eps = cfg.rms_norm_eps
            qkv = torch.cat((fused_rms_norm(q, self.q_norm, eps), fused_rms_norm(k, self.k_norm, eps), v), -1)
        head = cfg.qk_norm == "head"
        return qkv_rope(qkv, pos, inv_freq, nh, nkv, ck, cv, self.q_norm if head else None,
                        self.k_norm if head else None, cfg.rms_norm_eps), h


class CachedLM(nn.Module):
    """What every model of the engine shares: the LM head (or the tied embedding) and the
    checks and positions of a prefill chunk."""

    batch = max_seq = 0
    zero_centered = False  # RMSNorm weights stored around 0 (``y = n * (1 + w)``)

    def _normed_head(self, d: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The logits of ``rms_norm(d + h)``: the final norm inside the LM head's kernel."""
        eps, zc = self.cfg.rms_norm_eps, self.zero_centered
        if self.lm_head is None:
            return rms_norm_linear(d, self.norm, eps, self.embed, residual=h, zero_centered=zc)[0]
        return self.lm_head.normed(d, h, self.norm, eps, zero_centered=zc)[0]

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

    def _layers(self, x: torch.Tensor, attend):
        """The residual stream through every layer: ``(d, h)``, the last layer's output and the
        stream it is to be added to (the final norm's input is ``d + h``). Each residual add and
        the norm after it run inside the kernel that reads the norm's output (the q/k/v
        projection, the router or the MLP's gate/up: :meth:`Linear.normed`, :meth:`MoE.normed`).
        ``attend(i, layer, d, h)`` returns the attention output (B, T, nh * D) and ``d + h``."""
        eps = self.cfg.rms_norm_eps
        d, h = x, None
        for i, layer in enumerate(self.layers):
            a, h = attend(i, layer, d, h)
            d, h = layer.ffn.normed(layer.o(a), h, layer.mlp_norm, eps)
        return d, h

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor, p0: int, rows: Optional[slice] = None,
                last_only: bool = True) -> torch.Tensor:
        """Run ``tokens`` (B, T) at positions ``p0 .. p0 + T - 1`` of cache rows ``rows``
        (default: the first B); returns the logits of the last token (B, V), or of all (B, T, V)."""
        B, T = tokens.shape
        rows, end, pos = self._chunk(tokens, p0, rows)
        if self.cfg.sliding_window and end > self.cfg.sliding_window:
            raise NotImplementedError("prefill: sliding-window attention beyond the window is not supported")

        def attend(i, layer, d, h):
            ck, cv = self.cache_k[i][rows], self.cache_v[i][rows]
            q, h = layer.project(d, h, pos, self.inv_freq, ck, cv)
            a = chunk_attention(q.transpose(1, 2), ck[:, :end].transpose(1, 2), cv[:, :end].transpose(1, 2), p0)
            return a.transpose(1, 2).reshape(B, T, -1), h

        d, h = self._layers(F.embedding(tokens, self.embed), attend)
        return self._normed_head(d[:, -1], h[:, -1]) if last_only else self._normed_head(d, h)

    @torch.inference_mode()
    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, kv_len: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One token per cache row: ``tokens`` (B,) int64 at positions ``pos`` (B,) int64 (device
        tensors, read on the device); ``kv_len``: ``pos + 1`` as int32 when the caller keeps it
        (the engine does). Returns the logits (B, V). No host synchronisation."""
        B = tokens.shape[0]
        if kv_len is None:
            kv_len = (pos + 1).to(torch.int32)
        pos2 = pos[:, None]

        def attend(i, layer, d, h):
            ck, cv = self.cache_k[i][:B], self.cache_v[i][:B]
            q, h = layer.project(d, h, pos2, self.inv_freq, ck, cv)
            a = scaled_dot_product_attention(q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2),
                                             enable_gqa=True, kv_len=kv_len, window=self.cfg.sliding_window)
            return a.reshape(B, 1, -1), h

        d, h = self._layers(F.embedding(tokens[:, None], self.embed), attend)
        return self._normed_head(d[:, 0], h[:, 0])
