"""``prefill_attention``: a flash-attention forward kernel for long query blocks (prompts),
used by :func:`fastpath.scaled_dot_product_attention` for query lengths above 16.

One program owns ``BLOCK_M`` queries of one (batch, query head) and streams the keys and
values of its KV head (grouped-query attention: query head ``h`` reads KV head
``h // (Hq // Hkv)``) in ``BLOCK_N`` blocks, keeping the running row maximum ``m``, the
running denominator ``l`` and the float32 output accumulator in registers (online softmax).
Scores are ``tl.dot(q, k^T)`` with float32 accumulation, multiplied once by
``scale * log2(e)`` so that every exponential is an ``exp2``; the probabilities are cast to
the input dtype for the second ``tl.dot`` with ``v`` (float32 inputs: exact ``ieee`` dots
throughout). The head dimension is padded to the next power of two (80 -> 128, 96 -> 128)
with masked loads and stores. Key and value blocks come through tensor descriptors (the TMA
copy engine, NVIDIA capability 9.0+) where their layout allows, else through masked pointer
loads. The grid is ``(cdiv(Lq, BLOCK_M), Hq, B)`` (rather than
``B * Hq`` on one axis, whose limit is 65535): the query tiles of one head run next to each
other and share its keys and values in L2.

The mask of query ``i`` and key ``j`` (``b`` the batch index)::

    visible(i, j) = j < kv_len[b]                  (kv_len given; else j < Lk)
                    and j <= i                     (causal)
                    and j > i - window             (window given; needs causal)

``causal`` is PyTorch's ``is_causal`` convention, top-left aligned also when ``Lq != Lk``
(``torch.ones(Lq, Lk).tril()``): query ``i`` sees keys ``0..i``, so with ``Lq > Lk`` the
queries ``i >= Lk`` see every key, and with ``Lq < Lk`` the keys ``j >= Lq`` are never seen.

Key blocks are visited in three ranges: the blocks some of whose keys are masked for some
query of the tile, before and after the blocks that every query of the tile sees whole; the
mask is only computed on the former. Blocks wholly outside the mask (above the causal
diagonal, past ``kv_len[b]``, before the window) are not visited: ``kv_len`` is read in the
kernel (no host synchronisation; capturable in a CUDA graph). Under ``causal`` the query
tiles are scheduled last-first, so the longest programs start first.

A query row that sees no key at all (``kv_len[b] == 0``, ``Lk == 0``, or a window that ends
before the keys that remain) gets zeros, as PyTorch 2.5+'s ``scaled_dot_product_attention``
returns for fully masked rows.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, TL_DTYPES, tl, tma_on, triton, use_triton
from .._core.errors import KERNEL_DTYPES
from .._core.launch import Launcher, cdiv, next_pow2
from .matvec import _mm

#: Head dimensions the kernel serves (others take :func:`reference_prefill_attention`).
HEAD_DIMS = (64, 80, 96, 128, 256)
_LOG2E = 1.4426950408889634


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _attn_blocks(acc, m_i, l_i, q, k_base, v_base, offs_m, offs_d, dmask, kv_end, window, qk_scale,
                 skn, skd, svn, svd, blk_lo, blk_hi, b32, hk32,
                 MASKED: tl.constexpr, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                 PAD_D: tl.constexpr, DT: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr,
                 SOFTMAX: tl.constexpr):
    """Online-softmax update over key blocks ``blk_lo .. blk_hi - 1``. ``MASKED``: apply the
    full mask (boundary blocks); otherwise every key of these blocks is visible to every
    query of the tile and loads are masked only on a padded head dimension (``PAD_D``).
    ``TMA``: ``k_base`` / ``v_base`` are (B, Hkv, Lk, D) tensor descriptors (the copy engine
    zero-fills past Lk and D); a boundary block's values past ``kv_end`` are zeroed in
    registers (a static cache may hold anything there). ``SOFTMAX``: 0 scores scaled then
    exponentiated; 1 (``qk_scale > 0``) the scale folded into the exponent's multiply-add and
    the row maximum (H200: 2-3% faster. Rescaling the accumulator only when a row maximum
    grew by more than 2^8, behind a runtime branch, was 1.1-1.6x slower; exponentials in
    float16, two an instruction, 2-4% slower: neither kept)."""
    for blk in range(blk_lo, blk_hi):
        offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = offs_n < kv_end
        if TMA:
            kt = k_base.load([b32, hk32, blk * BLOCK_N, 0]).reshape(BLOCK_N, offs_d.shape[0]).T.to(DT)
        else:
            offs_n64 = offs_n.to(tl.int64)
            k_ptrs = k_base + offs_n64[None, :] * skn + offs_d[:, None] * skd
            v_ptrs = v_base + offs_n64[:, None] * svn + offs_d[None, :] * svd
            if MASKED:
                kt = tl.load(k_ptrs, mask=dmask[:, None] & nmask[None, :], other=0.0).to(DT)
            elif PAD_D:
                kt = tl.load(k_ptrs, mask=dmask[:, None], other=0.0).to(DT)
            else:
                kt = tl.load(k_ptrs).to(DT)
        s = _mm(q, kt, DT)
        if SOFTMAX == 0:
            s = s * qk_scale  # log2 units
        if MASKED:
            vis = nmask[None, :]
            if CAUSAL:
                vis = vis & (offs_n[None, :] <= offs_m[:, None])
            if HAS_WINDOW:
                vis = vis & (offs_n[None, :] > offs_m[:, None] - window)
            s = tl.where(vis, s, float("-inf"))
        if SOFTMAX == 0:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # A row with no visible key so far keeps m = -inf; subtract 0 instead (p = 0, alpha = 0).
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(s - m_use[:, None])
            alpha = tl.math.exp2(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            m_i = m_new
        else:  # qk_scale > 0: the row maximum of the raw scores, scaled once per row
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.math.exp2(m_i - m_use)
            p = tl.math.exp2(s * qk_scale - m_use[:, None])  # one multiply-add an element
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            m_i = m_new
        if TMA:
            vt = v_base.load([b32, hk32, blk * BLOCK_N, 0]).reshape(BLOCK_N, offs_d.shape[0]).to(DT)
            if MASKED:
                vt = tl.where(nmask[:, None], vt, 0.0).to(DT)
        elif MASKED:
            vt = tl.load(v_ptrs, mask=nmask[:, None] & dmask[None, :], other=0.0).to(DT)
        elif PAD_D:
            vt = tl.load(v_ptrs, mask=dmask[None, :], other=0.0).to(DT)
        else:
            vt = tl.load(v_ptrs).to(DT)
        acc = acc + _mm(p, vt, DT)
    return acc, m_i, l_i


@triton.jit
def _prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, kvlen_ptr, Lq, Lk, group, window, qk_scale, s_kvlen, q_off,
                    sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                    HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, PAD_D: tl.constexpr, CAUSAL: tl.constexpr,
                    HAS_KVLEN: tl.constexpr, HAS_WINDOW: tl.constexpr, DT: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr = False,
                    SOFTMAX: tl.constexpr = 0, HEADS_FIRST: tl.constexpr = False):
    # grid: (Hq, B, query tiles) with HEADS_FIRST, else (query tiles, Hq, B); blocks start in
    # grid order (x fastest), so HEADS_FIRST starts every head's longest causal tile first.
    if HEADS_FIRST:
        h32 = tl.program_id(0)
        b32 = tl.program_id(1)
        m_pid = tl.program_id(2)
        n_m = tl.num_programs(2)
    else:
        m_pid = tl.program_id(0)
        h32 = tl.program_id(1)
        b32 = tl.program_id(2)
        n_m = tl.num_programs(0)
    if CAUSAL:  # the longest programs (last query tiles) first
        pid_m = n_m - 1 - m_pid
    else:
        pid_m = m_pid
    hk32 = h32 // group  # the KV head of this query head
    b = b32.to(tl.int64)
    hk = hk32.to(tl.int64)
    h = h32.to(tl.int64)
    row0 = pid_m * BLOCK_M
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mmask = offs_m < Lq
    dmask = offs_d < HEAD_D
    q_ptrs = q_ptr + b * sqb + h * sqh + offs_m.to(tl.int64)[:, None] * sqm + offs_d[None, :] * sqd
    q = tl.load(q_ptrs, mask=mmask[:, None] & dmask[None, :], other=0.0).to(DT)
    if TMA:
        k_base = k_ptr
        v_base = v_ptr
    else:
        k_base = k_ptr + b * skb + hk * skh
        v_base = v_ptr + b * svb + hk * svh

    # Query row i sits at position i + q_off (a chunk after a cached prefix). Key blocks
    # [blk_lo, blk_hi) hold keys visible to some query of the tile; the blocks
    # [full_blk_lo, full_blk_hi) only keys visible to every query of it (no mask needed).
    pos0 = row0 + q_off
    pos_m = offs_m + q_off
    kv_end = Lk
    if HAS_KVLEN:
        kv_end = tl.minimum(tl.maximum(tl.load(kvlen_ptr + b * s_kvlen), 0), Lk)
    hi = kv_end
    full_hi = kv_end
    if CAUSAL:
        hi = tl.minimum(hi, pos0 + BLOCK_M)
        full_hi = tl.minimum(full_hi, pos0 + 1)
    blk_hi = tl.cdiv(hi, BLOCK_N)
    if HAS_WINDOW:  # the first row sees keys from pos0 - window + 1, the last from pos0 + BLOCK_M - window
        blk_lo = tl.maximum(pos0 - window + 1, 0) // BLOCK_N
        full_blk_lo = tl.minimum(tl.maximum(tl.cdiv(tl.maximum(pos0 + BLOCK_M - window, 0), BLOCK_N),
                                            blk_lo), blk_hi)
    else:
        blk_lo = 0
        full_blk_lo = 0
    # blk_lo <= full_blk_lo <= full_blk_hi <= blk_hi (ranges past blk_hi are empty)
    full_blk_hi = tl.minimum(tl.maximum(full_hi // BLOCK_N, full_blk_lo), blk_hi)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    acc, m_i, l_i = _attn_blocks(acc, m_i, l_i, q, k_base, v_base, pos_m, offs_d, dmask, kv_end, window,
                                 qk_scale, skn, skd, svn, svd, blk_lo, full_blk_lo, b32, hk32,
                                 True, CAUSAL, HAS_WINDOW, PAD_D, DT, BLOCK_N, TMA, SOFTMAX)
    acc, m_i, l_i = _attn_blocks(acc, m_i, l_i, q, k_base, v_base, pos_m, offs_d, dmask, kv_end, window,
                                 qk_scale, skn, skd, svn, svd, full_blk_lo, full_blk_hi, b32, hk32,
                                 False, CAUSAL, HAS_WINDOW, PAD_D, DT, BLOCK_N, TMA, SOFTMAX)
    acc, m_i, l_i = _attn_blocks(acc, m_i, l_i, q, k_base, v_base, pos_m, offs_d, dmask, kv_end, window,
                                 qk_scale, skn, skd, svn, svd, full_blk_hi, blk_hi, b32, hk32,
                                 True, CAUSAL, HAS_WINDOW, PAD_D, DT, BLOCK_N, TMA, SOFTMAX)
    # Rows with no visible key: l = 0 and acc = 0, stored as zeros.
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = o_ptr + b * sob + h * soh + offs_m.to(tl.int64)[:, None] * som + offs_d[None, :] * sod
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=mmask[:, None] & dmask[None, :])


_K = Launcher(_prefill_kernel)


# ---------------------------------------------------------------------------- launcher

#: Interpreter blocks (BLOCK_M, BLOCK_N): small, so that tests cross tile edges.
INTERPRET_BLOCKS = (16, 16)
#: Tests set this to force (BLOCK_M, BLOCK_N) on any backend.
BLOCKS_OVERRIDE: Optional[tuple] = None
#: (BLOCK_M, BLOCK_N, num_warps, num_stages) of 16-bit inputs by padded head dimension. H200,
#: bf16, against torch's flash kernel in the same run (``scripts/tune_prefill.py``, commits
#: f4ffd1d and 336c91a), with tensor descriptors and SOFTMAX 1: causal 32 x 4096^2 heads of
#: 128 0.84x (128 x 64 tiles of 8 warps: 0.70x), not causal 0.79x, 4 x 1024 causal 0.82x,
#: heads of 256 0.82x, of 64 0.92x. Small tiles of one warpgroup win: several programs per SM
#: overlap one's softmax with another's matmuls. Pointer loads at the same tiles: 0.58-0.84x.
#: With HEADS_FIRST (807a310, tune_prefill-807a310): causal 4096 heads of 128 0.89x, of 256
#: 0.87x, of 64 1.07x at (64, 64, 4, 2) (1.00x at the earlier (64, 128, 4, 3)).
TUNED = {64: (64, 64, 4, 2), 128: (64, 64, 4, 3), 256: (64, 64, 4, 3)}
#: Tensor descriptors for K and V (NVIDIA capability 9.0+, and the interpreter) where their
#: layout allows: no empty dimension, D contiguous, every other stride non-zero and 16-byte aligned.
USE_TMA = True
#: Launch order: every head's (and batch's) query tile ``t`` before any head's tile ``t - 1``
#: (under ``causal`` the longest tiles first across all heads, so the last wave is short);
#: False: a head's tiles one after another, head by head.
HEADS_FIRST = True
#: The kernel's ``SOFTMAX`` variant where ``scale > 0`` (0 elsewhere): see :func:`_attn_blocks`.
SOFTMAX_MODE = 1


def kv_descriptors(k: torch.Tensor, v: torch.Tensor, block_n: int, block_d: int, block_dv: int) -> tuple:
    """(B, H, L, D) tensor descriptors of ``k`` and ``v`` with (1, 1, block_n, block_d / block_dv)
    tiles (where :func:`tma_ok` holds)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    return (TensorDescriptor(k, list(k.shape), list(k.stride()), [1, 1, block_n, block_d]),
            TensorDescriptor(v, list(v.shape), list(v.stride()), [1, 1, block_n, block_dv]))


def tma_ok(k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether (B, H, L, D) keys and values can be read through tensor descriptors: NVIDIA
    capability 9.0+ with triton 3.4+ (or the interpreter), no empty dimension, D contiguous,
    every other stride non-zero and 16-byte aligned, 16-byte aligned bases."""
    if not tma_on(k.device):
        return False
    return all(t.numel() > 0 and t.stride(3) == 1 and t.data_ptr() % 16 == 0
               and all(st > 0 and st * t.element_size() % 16 == 0 for st in t.stride()[:3]) for t in (k, v))


def blocks(head_dim: int, dtype: torch.dtype) -> tuple:
    """``(BLOCK_M, BLOCK_N, num_warps, num_stages)`` for a padded head dimension and dtype
    (:data:`TUNED`); float32 inputs take half the rows (twice the bytes per element)."""
    bd = min(max(next_pow2(head_dim), 64), 256)
    bm, bn, warps, stages = TUNED[bd]
    if dtype == torch.float32:  # (and at most 32 keys of 256 floats: two stages fit shared memory)
        bm, bn, stages = bm // 2, bn if bd < 256 else min(bn, 32), 2
    if INTERPRET:
        bm, bn = INTERPRET_BLOCKS
        warps, stages = 4, 1
    if BLOCKS_OVERRIDE is not None:
        bm, bn = BLOCKS_OVERRIDE
    return bm, bn, warps, stages


def _check(q, k, v, causal, kv_len, window):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected 4 dimensions (B, H, L, D), got shape {tuple(t.shape)}")
        if t.dtype != q.dtype:
            raise TypeError(f"{name}: expected dtype {q.dtype} like q, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name}: expected a tensor on {q.device} like q, got {t.device}")
    B, Hq, _, D = q.shape
    if k.shape[0] != B or k.shape[3] != D or k.shape[1] == 0 or Hq % k.shape[1]:
        raise ValueError(f"k: expected shape ({B}, Hkv, Lk, {D}) with Hkv dividing {Hq}, got {tuple(k.shape)}")
    if v.shape != k.shape:
        raise ValueError(f"v: expected shape {tuple(k.shape)} like k, got {tuple(v.shape)}")
    if kv_len is not None:
        if not isinstance(kv_len, torch.Tensor) or kv_len.dtype != torch.int32 or tuple(kv_len.shape) != (B,):
            got = (f"{kv_len.dtype} {tuple(kv_len.shape)}" if isinstance(kv_len, torch.Tensor)
                   else type(kv_len).__name__)
            raise ValueError(f"kv_len: expected an int32 tensor of shape ({B},), got {got}")
        if kv_len.device != q.device:
            raise ValueError(f"kv_len: expected a tensor on {q.device} like q, got {kv_len.device}")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window: expected a positive int, got {window!r}")
        if not causal:
            raise NotImplementedError("window: a sliding window is supported with causal=True only")


def _launch(q, k, v, causal, scale, kv_len, window, q_offset=0):
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    # The output has q's layout: (B, Lq, Hq, D) storage when q is a transposed view of one.
    if q.stride(1) < q.stride(2):
        out = alloc.empty(B, Lq, Hq, D, dtype=q.dtype, device=q.device).transpose(1, 2)
    else:
        out = alloc.empty(B, Hq, Lq, D, dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    bm, bn, warps, stages = blocks(D, q.dtype)
    dt = tl.float32 if INTERPRET else TL_DTYPES[q.dtype]
    # window >= Lq + Lk cannot exclude a key: pass a bounded int (no int32 overflow).
    win = min(window, Lq + Lk + q_offset) if window is not None else 0
    tiles = cdiv(Lq, bm)
    heads_first = HEADS_FIRST and tiles <= 65535  # a grid's z extent is at most 65535
    grid = (Hq, B, tiles) if heads_first else (tiles, Hq, B)
    kd, vd = k, v
    tma = USE_TMA and tma_ok(k, v)
    if tma:
        kd, vd = kv_descriptors(k, v, bn, next_pow2(D), next_pow2(D))
    _K[grid](q, kd, vd, out, kv_len if kv_len is not None else out, Lq, Lk, Hq // Hkv, win,
             float(scale) * _LOG2E, kv_len.stride(0) if kv_len is not None else 0, int(q_offset),
             *q.stride(), *k.stride(), *v.stride(), *out.stride(),
             HEAD_D=D, BLOCK_D=next_pow2(D), PAD_D=next_pow2(D) != D, CAUSAL=bool(causal), HAS_KVLEN=kv_len is not None,
             HAS_WINDOW=window is not None, DT=dt, BLOCK_M=bm, BLOCK_N=bn, TMA=tma,
             SOFTMAX=SOFTMAX_MODE if scale > 0 else 0, HEADS_FIRST=heads_first,
             num_warps=warps, num_stages=stages)
    return out


# ---------------------------------------------------------------------------- reference

def attention_mask(Lq: int, Lk: int, *, causal: bool, kv_len: Optional[torch.Tensor] = None,
                   window: Optional[int] = None, device=None, q_offset: int = 0) -> torch.Tensor:
    """The boolean mask ``visible(i, j)`` of the module docstring: ``(B, 1, Lq, Lk)`` with
    ``kv_len``, else ``(1, 1, Lq, Lk)``; True where query ``i`` (at position ``i + q_offset``)
    attends key ``j``."""
    i = torch.arange(Lq, device=device)[:, None] + q_offset
    j = torch.arange(Lk, device=device)[None, :]
    vis = torch.ones(Lq, Lk, dtype=torch.bool, device=device)
    if causal:
        vis &= j <= i
    if window is not None:
        vis &= j > i - window
    vis = vis[None, None]
    if kv_len is not None:
        vis = vis & (j < kv_len.to(device=device, dtype=torch.int64).clamp(0, Lk)[:, None, None, None])
    return vis


def reference_prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                                scale: float, kv_len: Optional[torch.Tensor] = None,
                                window: Optional[int] = None, q_offset: int = 0) -> torch.Tensor:
    """PyTorch path (float32 arithmetic; float64 inputs stay float64): the oracle in tests
    and the path on devices Triton does not serve. Same conventions as the kernel: rows with
    no visible key are zero. Materialises the ``(B, Hq, Lq, Lk)`` scores."""
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    qf = q.to(ct).reshape(B, Hkv, Hq // Hkv, Lq, D)
    s = torch.einsum("bhgqd,bhkd->bhgqk", qf, k.to(ct)) * scale
    vis = attention_mask(Lq, Lk, causal=causal, kv_len=kv_len, window=window, device=q.device,
                         q_offset=q_offset)
    s = s.masked_fill(~vis[:, :, None], float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    o = torch.einsum("bhgqk,bhkd->bhgqd", p, v.to(ct)) / torch.where(l == 0, torch.ones_like(l), l)
    return o.reshape(B, Hq, Lq, D).to(q.dtype)


# ---------------------------------------------------------------------------- entry point

def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, scale: float,
                      kv_len: Optional[torch.Tensor] = None, window: Optional[int] = None,
                      q_offset: int = 0) -> torch.Tensor:
    """Attention forward for long query blocks: ``softmax(q k^T * scale + mask) v``.

    Parameters
    ----------
    q : ``(B, Hq, Lq, D)`` float16 / bfloat16 / float32, any strides (a transposed view
        of ``(B, Lq, Hq, D)`` is read in place, not copied).
    k, v : ``(B, Hkv, Lk, D)``, q's dtype and device, any strides; ``Hkv`` divides ``Hq``
        and query head ``h`` uses KV head ``h // (Hq // Hkv)`` (grouped-query attention).
    causal : PyTorch's ``is_causal``: query ``i`` attends keys ``j <= i`` (top-left aligned,
        also when ``Lq != Lk``).
    scale : multiplies ``q k^T`` (PyTorch's default is ``1 / sqrt(D)``; the caller passes it).
    kv_len : optional int32 ``(B,)`` on q's device: keys ``j >= kv_len[b]`` are ignored
        (values are clamped into ``[0, Lk]``); read in the kernel, no host synchronisation.
    window : optional int >= 1, with ``causal=True`` only: query ``i`` attends keys
        ``i - window < j <= i`` (itself and the ``window - 1`` keys before it, positions
        counted from the top-left as for ``causal``).
    q_offset : int >= 0: query row ``i`` stands at position ``i + q_offset`` for ``causal``
        and ``window`` (a prompt chunk after ``q_offset`` cached keys: bottom-right aligned
        when ``q_offset == Lk - Lq``).

    Returns
    -------
    ``(B, Hq, Lq, D)`` of q's dtype, laid out like ``q`` (``(B, Lq, Hq, D)`` storage when
    ``q`` is a transposed view of one, else contiguous). Arithmetic is float32. Query rows
    that see no key (``kv_len[b] == 0``, ``Lk == 0``, or a window that ends before the keys
    that remain) are zeros, as PyTorch's SDPA returns for fully masked rows.

    Head dimensions 64, 80, 96, 128 and 256 with float16 / bfloat16 / float32 run the Triton
    kernel where Triton serves the device; anything else (CPU without the interpreter,
    float64, other head dimensions) runs :func:`reference_prefill_attention`.

    Raises
    ------
    TypeError / ValueError for ranks, dtypes, devices, shapes, ``kv_len`` and ``window``
    (naming the argument); NotImplementedError for ``window`` without ``causal``.

    Example
    -------
    >>> q = torch.randn(1, 32, 1000, 128, dtype=torch.bfloat16, device="cuda")
    >>> k = v = torch.randn(1, 8, 1000, 128, dtype=torch.bfloat16, device="cuda")
    >>> prefill_attention(q, k, v, causal=True, scale=128 ** -0.5).shape
    torch.Size([1, 32, 1000, 128])
    """
    _check(q, k, v, causal, kv_len, window)
    if isinstance(q_offset, bool) or not isinstance(q_offset, int) or not 0 <= q_offset < 2**30:
        raise ValueError(f"q_offset: expected an int in [0, 2**30), got {q_offset!r}")
    if (not use_triton(q) or q.dtype not in KERNEL_DTYPES or q.shape[3] not in HEAD_DIMS
            or not math.isfinite(float(scale))):
        return reference_prefill_attention(q, k, v, causal=causal, scale=scale, kv_len=kv_len, window=window,
                                           q_offset=q_offset)
    return _launch(q, k, v, causal, scale, kv_len, window, q_offset)
