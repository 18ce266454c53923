"""What the hybrid decoders (Qwen3.5/3.6-MoE, LFM2-MoE) share: the decoder loop with its
per-layer caches, grouped-query attention on a static KV cache, and a checkpoint slot that
reshapes a tensor on its way in. The feed-forward blocks (``MLP``, ``MoE``) are those of
:mod:`~fastpath.models.transformer`.

A hybrid layer is ``h += mixer(norm1(h)); h += ffn(norm2(h))``; the mixer is attention or a
recurrent block (gated DeltaNet, short convolution) that keeps per-row state. Every mixer
owns its cache, allocated by :meth:`HybridLM.setup_cache`: ``(batch, max_seq, kv_heads, D)``
keys and values for attention, fixed-size conv / recurrent states for the others (updated in
place by :meth:`HybridLM.decode`, so a decode step is capturable in a CUDA graph). A prefill
at ``p0 == 0`` starts the rows it fills from zero state; later chunks continue from it.

Because the recurrent states advance in place, a decode step is not idempotent: whoever
runs extra steps (a CUDA-graph warm-up) must save and restore :meth:`HybridLM.state_tensors`.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..ops.attention import scaled_dot_product_attention
from ..ops.rope import qkv_rope
from .transformer import CachedLM, Linear, _buf, chunk_attention


class LayerTypesConfig:
    """What the hybrid configs share: common defaults and cutting to the first ``n`` layers
    (their ``layer_types`` list cut with them)."""

    rope_scaling = None
    sliding_window = None
    is_moe = True

    def with_layers(self, n: int):
        if not 1 <= n <= self.num_layers:
            raise ValueError(f"layers: expected 1..{self.num_layers}, got {n}")
        return dataclasses.replace(self, num_layers=n, layer_types=list(self.layer_types[:n]))


@dataclass
class Ctx:
    """One forward call: ``rows`` of the caches, positions ``pos`` (B, T) on the device;
    prefill also has the host-known start ``p0`` and the key count ``end``;
    decode has ``kv_len`` (B,) int32."""
    decode: bool
    rows: slice
    pos: torch.Tensor
    inv_freq: torch.Tensor
    p0: int = 0
    end: int = 0
    kv_len: Optional[torch.Tensor] = None


class Mixer(nn.Module):
    """A layer's token mixer: :meth:`mix` of its input projection (one matrix, the
    :class:`~fastpath.models.transformer.Linear` named ``PROJ``)."""

    PROJ = "in_proj"

    def normed(self, d: torch.Tensor, h: Optional[torch.Tensor], norm: torch.Tensor, eps: float, c: "Ctx", *,
               zero_centered: bool = False):
        """``(mixer(rms_norm(d + h)), d + h)`` (``h`` None: of ``d``): the norm inside the input
        projection's kernel for decode (:meth:`~fastpath.models.transformer.Linear.normed`;
        ``linear.FUSE_NORM`` False: the norm's own kernel first)."""
        p, h = getattr(self, self.PROJ).normed(d, h, norm, eps, zero_centered=zero_centered)
        return self.mix(p, c), h

    def mix(self, p: torch.Tensor, c: "Ctx") -> torch.Tensor:
        raise NotImplementedError


class Attention(Mixer):
    """GQA with per-head q/k RMSNorm and rotary embedding on a static KV cache; with
    ``gate`` (Qwen3.5) the projection also gives an output gate: ``o(attn * sigmoid(gate))``.
    The projection is one matrix: q, k, v (, gate) rows."""

    def __init__(self, H: int, nh: int, nkv: int, D: int, eps: float, dtype, device, fp8: bool, gate: bool = False):
        super().__init__()
        self.nh, self.nkv, self.D, self.eps, self.gate = nh, nkv, D, eps, gate
        self.n_qkv = (nh + 2 * nkv) * D
        self.proj = Linear(self.n_qkv + (nh * D if gate else 0), H, dtype, device, fp8=fp8)
        _buf(self, "q_norm", (D,), dtype, device)
        _buf(self, "k_norm", (D,), dtype, device)
        self.o = Linear(H, nh * D, dtype, device, fp8=fp8)
        self.ck = self.cv = None

    def alloc(self, batch: int, max_seq: int) -> None:
        shape = (batch, max_seq, self.nkv, self.D)
        self.ck = torch.zeros(shape, dtype=self.q_norm.dtype, device=self.q_norm.device)
        self.cv = torch.zeros_like(self.ck)

    def state_tensors(self) -> list:
        return []  # the KV cache is written at positions: replaying a step rewrites the same slots

    PROJ = "proj"

    def mix(self, p: torch.Tensor, c: Ctx) -> torch.Tensor:
        B, T = p.shape[:2]
        ck, cv = self.ck[c.rows], self.cv[c.rows]
        q = qkv_rope(p[..., :self.n_qkv], c.pos, c.inv_freq, self.nh, self.nkv, ck, cv, self.q_norm, self.k_norm,
                     self.eps)
        if c.decode:  # the output gate in the attention kernel's epilogue
            gate = p[..., self.n_qkv:].unflatten(-1, (self.nh, self.D)).transpose(1, 2) if self.gate else None
            a = scaled_dot_product_attention(q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2),
                                             enable_gqa=True, kv_len=c.kv_len, out_gate=gate)
            return self.o(a.transpose(1, 2).reshape(B, T, -1))
        a = chunk_attention(q.transpose(1, 2), ck[:, :c.end].transpose(1, 2), cv[:, :c.end].transpose(1, 2), c.p0)
        a = a.transpose(1, 2).reshape(B, T, -1)
        if self.gate:
            a = a * torch.sigmoid(p[..., self.n_qkv:])
        return self.o(a)


class Block(nn.Module):
    """One decoder layer: ``norm1``, ``mixer``, ``norm2``, ``ffn``."""

    def __init__(self, H: int, mixer: nn.Module, ffn: nn.Module, dtype, device):
        super().__init__()
        _buf(self, "norm1", (H,), dtype, device)
        _buf(self, "norm2", (H,), dtype, device)
        self.mixer, self.ffn = mixer, ffn


class HybridLM(CachedLM):
    """Embedding, :class:`Block` layers, final norm and LM head, with the interface of
    :class:`~fastpath.models.transformer.Transformer` (``setup_cache``, ``prefill``,
    ``decode``). Subclasses build the layers (:meth:`block`) and the rotary frequencies."""

    def __init__(self, cfg, *, dtype=torch.bfloat16, device="cpu", fp8: bool = False):
        super().__init__()
        device = torch.device(device)
        self.cfg, self.dtype, self.fp8 = cfg, dtype, fp8
        H = cfg.hidden_size
        _buf(self, "embed", (cfg.vocab_size, H), dtype, device)
        self.layers = nn.ModuleList(self.block(i, dtype, device, fp8) for i in range(cfg.num_layers))
        _buf(self, "norm", (H,), dtype, device)
        self.lm_head = None if cfg.tie_word_embeddings else Linear(cfg.vocab_size, H, dtype, device, fp8=fp8)
        self.register_buffer("inv_freq", self.rope_inv_freq().to(device), persistent=False)

    def block(self, i: int, dtype, device, fp8: bool) -> Block:
        raise NotImplementedError

    def rope_inv_freq(self) -> torch.Tensor:
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        return self.embed.device

    def setup_cache(self, batch: int, max_seq: int) -> None:
        """Per layer: the KV cache ``(batch, max_seq, kv_heads, head_dim)`` of attention layers,
        the conv / recurrent states of the others (zeros)."""
        if max_seq > self.cfg.max_position:
            raise ValueError(f"max_seq: the model has {self.cfg.max_position} positions, asked for {max_seq}")
        for layer in self.layers:
            layer.mixer.alloc(batch, max_seq)
        self.batch, self.max_seq = batch, max_seq

    def state_tensors(self) -> list:
        """The tensors a decode step advances in place (conv and recurrent states): what a
        caller that runs throw-away steps (a CUDA-graph warm-up) must save and restore."""
        return [t for layer in self.layers for t in layer.mixer.state_tensors()]

    def _run(self, x: torch.Tensor, c: Ctx):
        """The residual stream through every layer: ``(d, h)``, the last layer's output and the
        stream it is to be added to (the final norm's input is ``d + h``). Each residual add and
        the norm after it run inside the kernel that reads the norm's output (the mixer's input
        projection, the router or the MLP's gate/up: the ``normed`` methods)."""
        eps, zc = self.cfg.rms_norm_eps, self.zero_centered
        d, h = x, None
        for layer in self.layers:
            m, h = layer.mixer.normed(d, h, layer.norm1, eps, c, zero_centered=zc)
            d, h = layer.ffn.normed(m, h, layer.norm2, eps, zero_centered=zc)
        return d, h

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor, p0: int, rows: Optional[slice] = None,
                last_only: bool = True) -> torch.Tensor:
        """Run ``tokens`` (B, T) at positions ``p0 .. p0 + T - 1`` of cache rows ``rows``
        (default: the first B); ``p0 == 0`` starts those rows from zero state. Returns the
        logits of the last token (B, V), or of all (B, T, V)."""
        rows, end, pos = self._chunk(tokens, p0, rows)
        c = Ctx(decode=False, rows=rows, pos=pos, inv_freq=self.inv_freq, p0=p0, end=end)
        d, h = self._run(F.embedding(tokens, self.embed), c)
        return self._normed_head(d[:, -1], h[:, -1]) if last_only else self._normed_head(d, h)

    @torch.inference_mode()
    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, kv_len: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One token per cache row: ``tokens`` (B,) int64 at positions ``pos`` (B,) int64 (device
        tensors); ``kv_len``: ``pos + 1`` as int32 when the caller keeps it (the engine does).
        Returns the logits (B, V). No host synchronisation; states advance in place."""
        B = tokens.shape[0]
        c = Ctx(decode=True, rows=slice(0, B), pos=pos[:, None], inv_freq=self.inv_freq,
                kv_len=(pos + 1).to(torch.int32) if kv_len is None else kv_len)
        d, h = self._run(F.embedding(tokens[:, None], self.embed), c)
        return self._normed_head(d[:, 0], h[:, 0])


class Mapped:
    """A checkpoint tensor written through ``fn`` (tensor -> tensors) into ``parts``, a list of
    loader slots (e.g. one projection split into rows of two fused matrices, permuted)."""

    def __init__(self, parts: list, fn):
        self.parts, self.fn = parts, fn
        self.scale = parts[0].scale  # the loader moves unscaled tensors to the device first

    def write(self, w: torch.Tensor) -> None:
        outs = self.fn(w)
        for slot, piece in zip(self.parts, outs):
            slot.write(piece)
