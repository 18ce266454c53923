"""``scaled_dot_product_attention``: ``F.scaled_dot_product_attention`` with a split-KV
decode kernel, a flash-attention prefill kernel and a PyTorch reference on every device.

Paths (chosen on shapes and flags only, never on data):

* Query length 1..16 (decode, speculative decode): ``_decode_kernel``. One program owns one
  (batch, KV head, KV split) and *all* query heads of that KV head's group and all query
  tokens: the ``G * Lq`` rows (padded to at least 16 for ``tl.dot``) share every K and V
  tile, so the cache is read once per group. Online softmax in float32 (``exp2`` with the
  scale folded into ``log2(e)``). The KV range is split over programs so that about two
  programs per multiprocessor run (at most 16 splits; 32 for value heads of 256); each
  writes its float32 partial (row max, row sum, unnormalised output) to a workspace, and
  ``_decode_combine_kernel`` (a second launch, 64 output columns a program) adds the
  partials in the fixed order 0, 1, ... and writes the output: deterministic. (Combining in
  the last split's program, behind a ticket, in one launch, measured slower at every shape.)
  The split is of the *valid* range, computed in the kernel from ``kv_len`` (read on the
  device) and ``window``: no host sync, and a growing ``kv_len`` neither recompiles nor
  changes the grid (capturable in a CUDA graph).
* Query length > 16 without ``attn_mask``: ``prefill_attention`` from
  :mod:`fastpath.ops.attention_prefill` (flash-attention style), when that module exists.
* Everything else (``dropout_p > 0``, a mask with more than 16 query tokens, float64,
  head dims above 256, key and value head counts that differ beyond broadcasting, devices
  Triton does not serve, autograd): :func:`reference_scaled_dot_product_attention`.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, TL_DTYPES, num_sms, pdl_start, pdl_trigger, tl, triton, triton_reason, use_triton
from .._core.errors import FLOAT_DTYPES, KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.autocast import autocast_dtype, cast
from .._core.memo import LaunchMemo
from .._core.registry import register_op
from .._core.shapes import broadcast_shape
from .matvec import _mm_prec
from .norm import round_to

from . import attention_prefill as _prefill
from .attention_prefill import kv_descriptors, prefill_attention, tma_ok

LOG2E = 1.4426950408889634


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _finish(acc, l_i, out_ptr, b, head, tok, rmask, offs_dv, DV, sob, soh, sol, sod,
            g_ptr, sgb, sgh, sgl, sgd, GATED: tl.constexpr):
    """acc / l (0 for a row that attends nothing, as PyTorch), cast, store. ``GATED``: times
    ``sigmoid(gate)``, rounded as ``out * torch.sigmoid(gate)`` in the output dtype rounds."""
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    mask = rmask[:, None] & (offs_dv[None, :] < DV)
    OT = out_ptr.dtype.element_ty
    if GATED:
        g = tl.load(g_ptr + b.to(tl.int64) * sgb + head[:, None] * sgh + tok[:, None] * sgl + offs_dv[None, :] * sgd,
                    mask=mask, other=0.0).to(tl.float32)
        acc = round_to(acc, OT).to(tl.float32) * round_to(1.0 / (1.0 + tl.exp(-g)), OT).to(tl.float32)
    ptrs = (out_ptr + b.to(tl.int64) * sob + head[:, None] * soh + tok[:, None] * sol
            + offs_dv[None, :] * sod)
    tl.store(ptrs, acc.to(OT), mask=mask)


@triton.jit
def _group_rows(pid, Hkv, G, Lq, n_rb, BLOCK_R: tl.constexpr):
    """Program ``pid``'s (batch, KV head, row block): batch, KV head, and per row its query
    head (int64), query token and validity. Row r of a block is query head kvh * G + r // Lq,
    query token r % Lq."""
    rb = pid % n_rb
    bh = pid // n_rb
    kvh = bh % Hkv
    rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
    return bh // Hkv, kvh, (kvh * G + rows // Lq).to(tl.int64), rows % Lq, rows < G * Lq


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, kvlen_ptr, out_ptr, ws_ptr, g_ptr,
                   Hkv, G, Lq, Lk, D, DV, n_rb, n_split, qk_scale, window,
                   sqb, sqh, sql, sqd, skb, skh, skl, skd, svb, svh, svl, svd,
                   smb, smh, smq, smk, sob, soh, sol, sod, sgb, sgh, sgl, sgd,
                   GATED: tl.constexpr, CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr, BOOL_MASK: tl.constexpr,
                   HAS_KVLEN: tl.constexpr, WINDOW: tl.constexpr, SPLIT: tl.constexpr,
                   DT: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PDL: tl.constexpr = 0,
                   TMA: tl.constexpr = False, PREC: tl.constexpr = "ieee"):
    pdl_start(PDL)
    # Axis 0: (batch, KV head, row block) -- row r of a block is query head kvh * G + r // Lq,
    # query token r % Lq. Axis 1: the KV split. SPLIT: program (p, s) writes its partial to
    # ws[p, s] (m: BLOCK_R, l: BLOCK_R, acc: BLOCK_R x BLOCK_DV, float32), which
    # _decode_combine_kernel, launched next, combines; else it writes the output.
    pid = tl.program_id(0)
    pid_s = tl.program_id(1)
    b, kvh, head, tok, rmask = _group_rows(pid, Hkv, G, Lq, n_rb, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    dmask = offs_d < D
    dvmask = offs_dv < DV

    q = tl.load(q_ptr + b.to(tl.int64) * sqb + head[:, None] * sqh + tok[:, None] * sql + offs_d[None, :] * sqd,
                mask=rmask[:, None] & dmask[None, :], other=0.0).to(DT)
    # TMA: k_ptr / v_ptr are (B, Hkv, Lk, D) tensor descriptors (zero fill past Lk and D)
    if TMA:
        k_base = k_ptr
        v_base = v_ptr
    else:
        k_base = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
        v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh

    # The keys row r may see: [lo_r, hi_r); the union over rows: [kv_lo, kv_hi).
    L = Lk
    if HAS_KVLEN:
        L = tl.minimum(tl.maximum(tl.load(kvlen_ptr + b), 0), Lk)
    if CAUSAL:  # PyTorch's top-left alignment: token t sees keys 0..t
        hi_r = tl.minimum(tok + 1, L)
        kv_hi = tl.minimum(L, Lq)
    else:
        hi_r = tl.zeros([BLOCK_R], dtype=tl.int32) + L
        kv_hi = L
    if WINDOW:  # causal: keys (t - window, t]; else the last `window` valid keys
        if CAUSAL:
            lo_r = tl.maximum(tok + 1 - window, 0)
            kv_lo = 0
        else:
            lo_r = tl.maximum(hi_r - window, 0)
            kv_lo = tl.maximum(kv_hi - window, 0)
    else:
        lo_r = tl.zeros([BLOCK_R], dtype=tl.int32)
        kv_lo = 0
    chunk = tl.cdiv(tl.cdiv(kv_hi - kv_lo, n_split), BLOCK_N) * BLOCK_N
    start = kv_lo + pid_s * chunk
    end = tl.minimum(kv_hi, start + chunk)

    m_i = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_DV], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        nmask = offs_n < end
        if TMA:
            kt = k_base.load([b, kvh, n0, 0]).reshape(BLOCK_N, BLOCK_D).T.to(DT)
        else:
            kt = tl.load(k_base + offs_n[None, :].to(tl.int64) * skl + offs_d[:, None] * skd,
                         mask=dmask[:, None] & nmask[None, :], other=0.0).to(DT)
        s = _mm_prec(q, kt, DT, PREC) * qk_scale
        valid = (offs_n[None, :] >= lo_r[:, None]) & (offs_n[None, :] < hi_r[:, None]) & nmask[None, :]
        if HAS_MASK:
            mptrs = (mask_ptr + b.to(tl.int64) * smb + head[:, None] * smh + tok[:, None] * smq
                     + offs_n[None, :].to(tl.int64) * smk)
            mm = rmask[:, None] & nmask[None, :]
            if BOOL_MASK:  # True (nonzero byte) = attend
                valid = valid & (tl.load(mptrs, mask=mm, other=0) != 0)
            else:  # additive, in the log2 domain
                s = s + tl.load(mptrs, mask=mm, other=0.0).to(tl.float32) * 1.4426950408889634
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet: p = 0, no NaN
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if TMA:
            vt = v_base.load([b, kvh, n0, 0]).reshape(BLOCK_N, BLOCK_DV).to(DT)
            if HAS_KVLEN:  # rows past kv_len (a static cache's unused rows) may hold NaN: p = 0 is not enough
                vt = tl.where(nmask[:, None], vt, 0.0).to(DT)
        else:
            vt = tl.load(v_base + offs_n[:, None].to(tl.int64) * svl + offs_dv[None, :] * svd,
                         mask=nmask[:, None] & dvmask[None, :], other=0.0).to(DT)
        acc = acc * alpha[:, None] + _mm_prec(p, vt, DT, PREC)
        m_i = m_new
    pdl_trigger(PDL)

    if SPLIT:
        STRIDE: tl.constexpr = BLOCK_R * (BLOCK_DV + 2)
        r_ar = tl.arange(0, BLOCK_R)
        tile = 2 * BLOCK_R + r_ar[:, None] * BLOCK_DV + offs_dv[None, :]
        base = ws_ptr + (pid.to(tl.int64) * n_split + pid_s) * STRIDE
        tl.store(base + r_ar, m_i)
        tl.store(base + BLOCK_R + r_ar, l_i)
        tl.store(base + tile, acc)
    else:
        _finish(acc, l_i, out_ptr, b, head, tok, rmask, offs_dv, DV, sob, soh, sol, sod,
                g_ptr, sgb, sgh, sgl, sgd, GATED)


@triton.jit
def _decode_combine_kernel(ws_ptr, out_ptr, g_ptr, Hkv, G, Lq, n_rb, n_split, DV, sob, soh, sol, sod,
                           sgb, sgh, sgl, sgd, GATED: tl.constexpr, BLOCK_R: tl.constexpr,
                           BLOCK_DV: tl.constexpr, BLOCK_C: tl.constexpr,
                           S_PAD: tl.constexpr, UNROLL: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # Program (p, c): output columns [c * BLOCK_C, (c + 1) * BLOCK_C) of the decode kernel's
    # program p, from its n_split partials ws[p, s] added in the order
    # s = 0, 1, ... (deterministic); UNROLL partials' loads in flight at a time. Many splits of
    # wide heads: the combine's reads are spread over BLOCK_DV / BLOCK_C programs a group.
    pid = tl.program_id(0)
    b, _, head, tok, rmask = _group_rows(pid, Hkv, G, Lq, n_rb, BLOCK_R)
    STRIDE: tl.constexpr = BLOCK_R * (BLOCK_DV + 2)
    r_ar = tl.arange(0, BLOCK_R)
    first = ws_ptr + pid.to(tl.int64) * n_split * STRIDE
    sp = tl.arange(0, S_PAD)
    stats = first + sp[:, None] * STRIDE + r_ar[None, :]
    smask = (sp < n_split)[:, None]
    ms = tl.load(stats, mask=smask, other=float("-inf"))
    big = tl.max(ms, axis=0)
    big = tl.where(big == float("-inf"), 0.0, big)
    l_i = tl.sum(tl.load(stats + BLOCK_R, mask=smask, other=0.0) * tl.exp2(ms - big[None, :]), axis=0)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    tile = 2 * BLOCK_R + r_ar[:, None] * BLOCK_DV + offs_c[None, :]
    acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for j0 in range(0, n_split, UNROLL):
        for jj in tl.static_range(UNROLL):
            j = j0 + jj
            mj = tl.load(first + j * STRIDE + r_ar, mask=(tl.zeros([BLOCK_R], dtype=tl.int32) + j) < n_split,
                         other=float("-inf"))
            jmask = (tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.int32) + j) < n_split
            acc += tl.load(first + j * STRIDE + tile, mask=jmask, other=0.0) * tl.exp2(mj - big)[:, None]
    pdl_trigger(PDL)
    _finish(acc, l_i, out_ptr, b, head, tok, rmask, offs_c, DV, sob, soh, sol, sod,
            g_ptr, sgb, sgh, sgl, sgd, GATED)


_DECODE, _COMBINE = Launcher(_decode_kernel, pdl=True), Launcher(_decode_combine_kernel, pdl=True)


# ---------------------------------------------------------------------------- launcher

#: Longest query served by the decode kernel; longer ones go to the prefill kernel.
MAX_DECODE_Q = 16
#: Widest head dim (of q/k and of v) the decode kernel holds in registers.
MAX_HEAD_DIM = 256
#: Rows (query heads of a group x query tokens) per program; more rows take more programs.
#: The interpreter uses small blocks so that CI covers several row blocks, KV blocks and splits.
MAX_ROWS = 32 if INTERPRET else 64
#: The same for float32 inputs: their tf32x3 dots keep more tiles in shared memory (sm_90 offline
#: compiles, triton 3.6: 64 rows of 256 need 262-270 KB of the 227 KB a block may take). H200
#: (scripts/decode_fp32_probe.py, 6d7ee66; graph, 528 keys): 16/2 heads of 256, 5 query tokens
#: (40 rows) 53.0 us at 32 rows, 25.4 at 16; 32/8 heads of 128, 16 tokens 21.5 -> 15.4.
MAX_ROWS_F32 = 16
#: KV splits: about PROGRAMS_PER_SM programs a multiprocessor, each over at least
#: MIN_KV_PER_SPLIT keys, at most MAX_SPLITS. H200 sweep (scripts/tune_attention.py, 32/8 heads of 128, graph):
#: from 2 programs an SM and 256 keys, 1K / 8K / 32K keys 9.2 / 23.8 / 48.7 us -> 9.0 / 18.8 / 42.8
#: with 1 program an SM; 2 programs an SM under the 16-split cap leave those batch-1 plans as
#: they are and give batch 8 x 32K keys 5 splits instead of 3 (87% -> 90% of copy, d69b353).
MIN_KV_PER_SPLIT = 32 if INTERPRET else 128
#: float32 inputs: MIN_KV_PER_SPLIT_F32 (their programs are slower a key). H200, float32 at 528 / 8192
#: keys (scripts/decode_fp32_probe.py, 6d7ee66), 16 rows: 32/8 heads of 128, one token 13.0 -> 8.8 us,
#: 16 tokens 15.4 -> 15.8; 16/2 heads of 256, 1 / 5 / 16 tokens 21.7 / 25.4 / 25.4 -> 14.0 / 15.8 / 17.1.
MIN_KV_PER_SPLIT_F32 = 32
PROGRAMS_PER_SM = 2
MAX_SPLITS = 16
#: Splits are combined by ``_decode_combine_kernel`` (BLOCK_DV / COMBINE_BLOCK programs a group, a
#: launch of its own); value heads of 256 take up to MAX_SPLITS_WIDE splits. H200
#: (scripts/tune_attention.py, 0ac1aec and 8b53b2a), against the last split's program
#: combining them in one launch: 32/8 heads of 128 at 1K / 8K / 32K keys 7.76 / 17.02 / 40.05
#: -> 7.40 / 15.20 / 38.12 us; Qwen3-30B-A3B's 4 KV heads at 640 keys 7.06 -> 6.53; 2 KV heads
#: of 256 at 8K keys 22.3 (16 splits) -> 17.4 (32 splits; 64 take 23.4). In one program the
#: combine grew with the splits.
MAX_SPLITS_WIDE = 32
#: Output columns of a combine program: COMBINE_BLOCK_FEW up to COMBINE_FEW_SPLITS splits, else
#: COMBINE_BLOCK. H200 (scripts/tune_attention.py, 167f33d, graph, cold): 32 columns instead of
#: 64 took 1K keys 7.19 -> 6.53 us and Qwen3-30B-A3B's 640 keys 6.21 -> 5.75 (8 and 5 splits),
#: but 8K / 32K keys (16 splits) 14.76 / 38.27 -> 15.80 / 39.27.
COMBINE_BLOCK = 16 if INTERPRET else 64
COMBINE_BLOCK_FEW = 8 if INTERPRET else 32
COMBINE_FEW_SPLITS = 8
#: Tuning overrides (scripts/tune_attention.py): KV tile and software-pipeline stages.
BLOCK_N: Optional[int] = None
NUM_STAGES: Optional[int] = None
#: Tests set this to force the number of KV splits (clamped to what the KV length allows).
SPLIT_OVERRIDE: Optional[int] = None
#: Keys and values through tensor descriptors where their layout allows (:func:`tma_ok`). H200
#: (scripts/tune_attention.py, ee0d25f), 32/8 heads of 128 at 1K / 8K / 32K keys 7.44 / 15.41 /
#: 38.95 -> 7.25 / 14.96 / 38.61 us, 4 KV heads at 640 keys 6.58 -> 6.28, 2 KV heads of 256 at
#: 8K keys 17.46 -> 16.66 (pointer loads were not pipelined: an offline sm_90 compile shows no
#: cp.async and 40 KB of shared memory; descriptors stream through 3 stages).
USE_TMA = True


def _decode_blocks(D: int, DV: int, rows: int, itemsize: int = 2) -> tuple:
    """(BLOCK_R, BLOCK_N, BLOCK_D, BLOCK_DV, num_warps); plain int math."""
    bd, bdv = max(16, next_pow2(D)), max(16, next_pow2(DV))
    br = min(MAX_ROWS if itemsize < 4 else MAX_ROWS_F32, max(16, next_pow2(rows)))
    # KV tiles of up to 32 KB (128 keys of 128 bf16; three pipeline stages of K and V fit)
    bn = 16 if INTERPRET else BLOCK_N or min(128, 32768 // (max(bd, bdv) * itemsize))
    warps = 8 if br * max(bd, bdv) >= 64 * 128 else 4
    return br, bn, bd, bdv, warps


def _decode_stages(br: int, itemsize: int, has_mask: bool) -> Optional[int]:
    """Pipeline stages of the decode kernel (None: Triton's default, 3). Three stages of 32 KB K
    and V tiles fill 192 KB; a 64-row program's other buffers bring that to 229 KB, and a mask tile
    (or, in float32, the causal / kv_len / window / gate terms) past the 227 KB of shared memory an
    H100 / H200 block may take (sm_90 offline compiles, triton 3.6: up to 245816 B, an
    ``OutOfResources`` at launch). Those programs take two stages (at most 172312 B compiled), as do
    float32 ones: their tf32x3 dots need up to 270 KB at three stages (32 rows of 256)."""
    if NUM_STAGES:
        return NUM_STAGES
    return 2 if itemsize >= 4 or (br >= 64 and has_mask) else None


def decode_split(span: int, programs: int, device: torch.device, block_n: int, max_splits: int = 0,
                 min_kv: int = 0) -> int:
    """KV splits for ``programs`` (batch x KV head x row block) programs over ``span`` keys:
    enough for about ``PROGRAMS_PER_SM`` programs per multiprocessor, at least ``min_kv``
    (0: ``MIN_KV_PER_SPLIT``) keys each, at most ``max_splits`` (0: ``MAX_SPLITS``)."""
    if SPLIT_OVERRIDE is not None:
        split = SPLIT_OVERRIDE
    else:
        target = PROGRAMS_PER_SM * num_sms(device)
        least = min_kv or MIN_KV_PER_SPLIT
        split = min(cdiv(target, max(programs, 1)), max(1, span // least), max_splits or MAX_SPLITS)
    return max(1, min(split, cdiv(max(span, 1), block_n)))


def _decode(q, k, v, mask, kv_len, out, causal: bool, scale: float, window: Optional[int], G: int, gate=None):
    """q (B, Hout, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv, Lk, DV) (strides of 0 broadcast),
    mask None or (B, Hout, Lq, Lk) views, out and gate (B, Hout, Lq, DV); Hout = Hkv * G."""
    B, Hout, Lq, D = q.shape
    Hkv, Lk, DV = k.shape[1], k.shape[2], v.shape[3]
    rows = G * Lq
    br, bn, bd, bdv, warps = _decode_blocks(D, DV, rows, k.element_size())
    n_rb = cdiv(rows, br)
    programs = B * Hkv * n_rb
    span = Lk
    if causal:
        span = min(Lk, Lq)
    elif window is not None:
        span = min(Lk, window)
    split = decode_split(span, programs, q.device, bn, MAX_SPLITS_WIDE if bdv >= 256 else MAX_SPLITS,
                         MIN_KV_PER_SPLIT_F32 if k.element_size() >= 4 else 0)
    dummy = out
    kd, vd, tma = k, v, USE_TMA and tma_ok(k, v)
    if tma:
        kd, vd = kv_descriptors(k, v, bn, bd, bdv)
    ws = workspace(q.device, "attention.partials", programs * split * br * (bdv + 2), torch.float32) \
        if split > 1 else dummy
    if mask is not None:
        bool_mask = mask.dtype == torch.bool
        m = mask.view(torch.uint8) if bool_mask else mask
        mstrides = m.stride()
    else:
        bool_mask, m, mstrides = False, dummy, (0, 0, 0, 0)
    g, gstrides = (gate, gate.stride()) if gate is not None else (dummy, (0, 0, 0, 0))
    stages = _decode_stages(br, k.element_size(), mask is not None)
    _DECODE[(programs, split)](
        q, kd, vd, m, kv_len if kv_len is not None else dummy, out, ws, g,
        Hkv, G, Lq, Lk, D, DV, n_rb, split, float(scale) * LOG2E, int(window or 0),
        *q.stride(), *k.stride(), *v.stride(), *mstrides, *out.stride(), *gstrides,
        GATED=gate is not None and split == 1, CAUSAL=causal, HAS_MASK=mask is not None, BOOL_MASK=bool_mask,
        HAS_KVLEN=kv_len is not None,
        WINDOW=window is not None, SPLIT=split > 1,
        DT=tl.float32 if INTERPRET else TL_DTYPES[q.dtype],  # the interpreter's 16-bit tl.dot is unreliable
        BLOCK_R=br, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, TMA=tma, PREC=_prefill.F32_PREC,
        num_warps=warps,
        **({"num_stages": stages} if stages else {}))
    if split > 1:
        bc = min(COMBINE_BLOCK_FEW if split <= COMBINE_FEW_SPLITS else COMBINE_BLOCK, bdv)
        _COMBINE[(programs, bdv // bc)](
            ws, out, g, Hkv, G, Lq, n_rb, split, DV, *out.stride(), *gstrides, GATED=gate is not None,
            BLOCK_R=br, BLOCK_DV=bdv, BLOCK_C=bc, S_PAD=next_pow2(split), UNROLL=8, num_warps=4)
    return out


# ---------------------------------------------------------------------------- shapes

class _Shapes:
    """How query, key, value (and the mask) broadcast, from shapes only.

    ``prefix``: the broadcast batch dims before the head dim; ``heads``: output heads;
    ``qh, kh, vh``: head counts as given (1 broadcasts); ``hkv``: KV heads of the kernel
    (each of kh, vh is 1 or hkv, else None: reference path); ``group``: heads / hkv."""

    def __init__(self, qs: tuple, ks: tuple, vs: tuple, ms: Optional[tuple], enable_gqa: bool):
        self.lq, self.lk, self.d, self.dv = qs[-2], ks[-2], qs[-1], vs[-1]
        if ks[-1] != self.d:
            raise ValueError(f"key: expected head dim {self.d} like query (..., L, {self.d}), got shape {ks}")
        if vs[-2] != self.lk:
            raise ValueError(f"value: expected {self.lk} keys like key (..., {self.lk}, Ev), got shape {vs}")
        if enable_gqa and min(len(qs), len(ks), len(vs)) < 3:
            raise ValueError("enable_gqa: query, key and value need a head dimension (..., H, L, E); got "
                             f"shapes {qs}, {ks}, {vs}")
        qh, kh, vh = (s[-3] if len(s) >= 3 else 1 for s in (qs, ks, vs))
        pre = [s[:-3] for s in (qs, ks, vs)]
        try:
            self.prefix = broadcast_shape(*pre)
        except RuntimeError:
            raise ValueError(f"key/value: batch dimensions {pre[1]} / {pre[2]} do not broadcast with "
                             f"query's {pre[0]}") from None
        if enable_gqa and not (qh == kh == vh):
            for name, h in (("key", kh), ("value", vh)):
                if h < 1 or qh % h != 0:
                    raise ValueError(f"{name}: enable_gqa needs the number of query heads ({qh}) to be a "
                                     f"multiple of {name}'s ({h})")
            heads = qh
        else:
            heads = max(qh, kh, vh)
            for name, h in (("query", qh), ("key", kh), ("value", vh)):
                if h not in (1, heads):
                    hint = "" if name == "query" else "; pass enable_gqa=True for grouped-query attention"
                    raise ValueError(f"{name}: expected {heads} heads (or 1 to broadcast), got {h} "
                                     f"(query {qh}, key {kh}, value {vh}){hint}")
        self.qh, self.kh, self.vh, self.heads = qh, kh, vh, heads
        self.hkv = max(kh, vh) if min(kh, vh) in (1, max(kh, vh)) else None
        self.group = heads // self.hkv if self.hkv else None
        self.ndim = max(len(qs), len(ks), len(vs))
        self.batch = self.prefix + ((heads,) if self.ndim >= 3 else ())
        if ms is not None:
            scores = self.batch + (self.lq, self.lk)
            ok = len(ms) >= 2
            if ok:
                try:
                    ok = broadcast_shape(ms, scores) == scores
                except RuntimeError:
                    ok = False
            if not ok:
                raise ValueError(f"attn_mask: expected a shape that broadcasts to the scores' {scores} "
                                 f"(..., L, S), got {ms}")

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def of(qs: tuple, ks: tuple, vs: tuple, ms: Optional[tuple], enable_gqa: bool) -> "_Shapes":
        """The (cached) shapes of these operands: the same shapes give the same object,
        without redoing the checks on every decode step."""
        return _Shapes(qs, ks, vs, ms, enable_gqa)

    @property
    def out_shape(self) -> tuple:
        return self.batch + (self.lq, self.dv)

    @property
    def nbatch(self) -> int:
        return math.prod(self.prefix)


def _shapes(query, key, value, attn_mask, enable_gqa: bool) -> _Shapes:
    args = (tuple(query.shape), tuple(key.shape), tuple(value.shape),
            None if attn_mask is None else tuple(attn_mask.shape), bool(enable_gqa))
    try:
        return _Shapes.of(*args)
    except TypeError:  # symbolic sizes while torch.compile traces: not hashable, not cached
        return _Shapes(*args)


def _as4(t: torch.Tensor, s: _Shapes, heads: int) -> torch.Tensor:
    """``t`` (..., H, L, E) as (B, heads, L, E), broadcasting batch dims with stride 0 and a
    single head (H == 1) to ``heads`` (a view where the strides allow, else one copy)."""
    while t.dim() < 3:
        t = t.unsqueeze(0)
    t = t.expand(*s.prefix, heads, t.shape[-2], t.shape[-1])
    return t.reshape(s.nbatch, heads, t.shape[-2], t.shape[-1])


# ---------------------------------------------------------------------------- reference

def _allowed(s: _Shapes, is_causal: bool, kv_len, window, device) -> Optional[torch.Tensor]:
    """Boolean (True = attend) of the causal / kv_len / window constraints, broadcastable to
    the scores, or None if there are none. Built with tensor ops only (no host sync)."""
    if not (is_causal or kv_len is not None or window is not None):
        return None
    t = torch.arange(s.lq, device=device).view(-1, 1)
    j = torch.arange(s.lk, device=device)
    if kv_len is not None:
        lens = kv_len.to(torch.int64).clamp(0, s.lk).view(*s.prefix, *([1] * (3 if s.ndim >= 3 else 2)))
    else:
        lens = torch.full((1, 1), s.lk, dtype=torch.int64, device=device)
    hi = torch.minimum(t + 1, lens) if is_causal else lens
    ok = j < hi
    if window is not None:  # causal: keys (t - window, t]; else the last `window` valid keys
        ok = ok & (j >= (t + 1 if is_causal else lens) - window)
    return ok


def reference_scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                           scale=None, enable_gqa=False, *, kv_len=None, window=None,
                                           out_gate=None):
    """PyTorch path: the same function in plain PyTorch (float32 math, float64 stays float64).

    The path on devices Triton does not serve, for dropout and for what the kernels do not
    cover; also an oracle in tests. GQA expands key and value with ``repeat_interleave``.
    Rows that attend to nothing give zeros, as PyTorch's own SDPA."""
    s = _shapes(query, key, value, attn_mask, enable_gqa)
    ct = torch.float64 if query.dtype == torch.float64 else torch.float32
    q, k, v = query.to(ct), key.to(ct), value.to(ct)
    if enable_gqa and not (s.qh == s.kh == s.vh):
        k = k.repeat_interleave(s.qh // s.kh, dim=-3)
        v = v.repeat_interleave(s.qh // s.vh, dim=-3)
    scale = 1.0 / math.sqrt(s.d) if scale is None else scale
    scores = (torch.matmul(q, k.transpose(-2, -1)) * scale).expand(*s.batch, s.lq, s.lk)
    ok = _allowed(s, is_causal, kv_len, window, query.device)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            ok = attn_mask if ok is None else ok & attn_mask
        else:
            scores = scores + attn_mask.to(ct)
    if ok is not None:
        scores = scores.masked_fill(~ok, float("-inf"))
    m = scores.amax(-1, keepdim=True) if s.lk > 0 else scores.sum(-1, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    p = torch.exp(scores - m)
    den = p.sum(-1, keepdim=True)
    p = p / torch.where(den == 0, torch.ones_like(den), den)
    if dropout_p > 0:
        p = torch.nn.functional.dropout(p, dropout_p)
    out = torch.matmul(p, v)
    return _gated(out.expand(s.out_shape).to(query.dtype), out_gate)


def _gated(out: torch.Tensor, out_gate: Optional[torch.Tensor]) -> torch.Tensor:
    """``out * sigmoid(out_gate)`` as Qwen3.5's gated attention computes it (in out's dtype)."""
    return out if out_gate is None else out * torch.sigmoid(out_gate)


# ---------------------------------------------------------------------------- op

def _fake(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, kv_len, window, out_gate):
    return query.new_empty(_shapes(query, key, value, attn_mask, enable_gqa).out_shape)


@register_op("scaled_dot_product_attention", fake=_fake)
def _sdpa_op(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor],
             dropout_p: float, is_causal: bool, scale: Optional[float], enable_gqa: bool,
             kv_len: Optional[torch.Tensor], window: Optional[int], out_gate: Optional[torch.Tensor]) -> torch.Tensor:
    s = _shapes(query, key, value, attn_mask, enable_gqa)
    scale = 1.0 / math.sqrt(s.d) if scale is None else float(scale)
    ref = (dropout_p > 0 or not use_triton(query) or query.dtype not in KERNEL_DTYPES or s.hkv is None
           or max(s.d, s.dv) > MAX_HEAD_DIM or (attn_mask is not None and attn_mask.dtype not in (
               torch.bool, torch.float32, query.dtype)))
    decode = s.lq <= MAX_DECODE_Q
    prefill = (not decode and attn_mask is None and s.d == s.dv
               and (window is None or is_causal))  # (the prefill kernel's window needs causal)
    if ref or not (decode or prefill):
        return reference_scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                      enable_gqa, kv_len=kv_len, window=window, out_gate=out_gate)
    if s.nbatch * s.heads * s.lq * s.dv == 0:
        return alloc.empty(s.nbatch, s.heads, s.lq, s.dv, dtype=query.dtype, device=query.device).view(s.out_shape)
    q = _as4(query, s, s.heads)
    k = _as4(key, s, s.kh)
    v = _as4(value, s, s.vh)
    if s.kh != s.hkv:  # one key head shared by all: stride 0 over heads
        k = k.expand(s.nbatch, s.hkv, s.lk, s.d)
    if s.vh != s.hkv:
        v = v.expand(s.nbatch, s.hkv, s.lk, s.dv)
    if prefill:
        res = prefill_attention(q, k, v, causal=is_causal, scale=scale, kv_len=kv_len, window=window)
        return _gated(res.view(s.out_shape) if res.is_contiguous() else res.reshape(s.out_shape), out_gate)
    out = alloc.empty(s.nbatch, s.heads, s.lq, s.dv, dtype=query.dtype, device=query.device)
    mask = None
    if attn_mask is not None:
        mask = attn_mask.expand(*s.batch, s.lq, s.lk).reshape(s.nbatch, s.heads, s.lq, s.lk)
    gate = _as4(out_gate, s, s.heads) if out_gate is not None else None
    _decode(q, k, v, mask, kv_len, out, is_causal, scale, window, s.group, gate)
    return out.view(s.out_shape)


def _checked(query, key, value, attn_mask, dropout_p, is_causal, scale, kv_len, window):
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, t, dtypes=FLOAT_DTYPES)
        if t.dim() < 2:
            raise ValueError(f"{name}: expected at least 2 dimensions (..., L, E), got shape {tuple(t.shape)}")
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            raise TypeError(f"{name}: expected dtype {query.dtype} like query, got {t.dtype}")
        if t.device != query.device:
            raise ValueError(f"{name}: expected a tensor on {query.device} like query, got {t.device}")
    if attn_mask is not None:
        check_tensor("attn_mask", attn_mask)
        if attn_mask.dtype not in (torch.bool, torch.float32, query.dtype):
            raise TypeError(f"attn_mask: expected dtype bool, float32 or {query.dtype} (query's), "
                            f"got {attn_mask.dtype}")
        if attn_mask.device != query.device:
            raise ValueError(f"attn_mask: expected a tensor on {query.device} like query, got {attn_mask.device}")
        if is_causal:
            raise ValueError("attn_mask: must be None when is_causal=True (as in PyTorch); fold the causal "
                             "constraint into the mask instead")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p: expected a probability in [0, 1], got {dropout_p}")
    if scale is not None and not isinstance(scale, (int, float)):
        raise TypeError(f"scale: expected a float or None, got {type(scale).__name__}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window: expected an int >= 1 (keys attended per query) or None, got {window!r}")
    if kv_len is not None:
        check_tensor("kv_len", kv_len)
        if kv_len.dtype != torch.int32:
            raise TypeError(f"kv_len: expected dtype int32, got {kv_len.dtype}")
        if kv_len.device != query.device:
            raise ValueError(f"kv_len: expected a tensor on {query.device} like query, got {kv_len.device}")


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False, *, kv_len: Optional[torch.Tensor] = None,
                                 window: Optional[int] = None, out_gate: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Attention ``softmax(q @ k.T * scale + mask) @ v``, with the semantics of
    ``torch.nn.functional.scaled_dot_product_attention``, fast for decode.

    Parameters
    ----------
    query : Tensor ``(..., Hq, L, E)``, float16 / bfloat16 / float32 (float64 takes the
        reference path), any strides.
    key : Tensor ``(..., Hk, S, E)``, query's dtype.
    value : Tensor ``(..., Hv, S, Ev)``, query's dtype.
        Batch dims broadcast as in PyTorch (``query (1, 1, 64)`` with ``key (2, 1, 1, 64)``
        gives ``(2, 1, 1, 64)``), and so do heads: a count of 1 broadcasts to the others.
    attn_mask : optional bool (True = attend) or additive float Tensor (float32 or query's
        dtype) broadcastable to the scores ``(..., H, L, S)``.
    dropout_p : dropout on the attention weights; > 0 takes the reference path.
    is_causal : causal mask aligned top-left as in PyTorch: query token ``i`` attends keys
        ``0..i`` (also when ``L != S``). Cannot be combined with ``attn_mask``.
    scale : defaults to ``1 / sqrt(E)``.
    enable_gqa : grouped-query attention: ``Hq`` a multiple of ``Hk`` and ``Hv``; query head
        ``h`` uses key/value head ``h // (Hq / Hk)``.
    kv_len : fastpath extension, keyword-only. Optional int32 Tensor ``(B,)`` on query's
        device, ``B`` the product of the batch dims before the head dim (1 for 2-D / 3-D
        inputs): the valid keys of each batch entry of a static cache; keys at positions
        ``>= kv_len[b]`` are ignored (values clamped to ``[0, S]``). Read on the device: no
        host sync, and a growing ``kv_len`` does not recompile (CUDA-graph capturable).
    window : fastpath extension, keyword-only. Optional int >= 1: sliding window. With
        ``is_causal``, query token ``i`` attends keys ``i - window < j <= i`` (itself and the
        ``window - 1`` before it, positions counted top-left as for ``is_causal``; also
        ``j < kv_len[b]``). Without it, every query attends the last ``window`` valid keys,
        ``n - window <= j < n`` with ``n = kv_len[b]`` (or ``S``): the decode convention,
        the queries standing at the end of the cache.
    out_gate : fastpath extension, keyword-only. Optional Tensor of the output's shape and
        query's dtype: the result is ``out * torch.sigmoid(out_gate)`` (the output gate of
        Qwen3.5 / Qwen3.6 / Qwen3-Next attention), applied in the decode kernel's epilogue
        with the same roundings, so the two elementwise launches after it are gone.

    Returns
    -------
    Tensor ``(..., H, L, Ev)`` of query's dtype (the broadcast batch and head dims). Math is
    float32 (online softmax). A query row that attends to no key gives zeros, as PyTorch.

    Paths: query length 1..16 run a split-KV decode kernel that reads each key/value once
    for all query heads of a GQA group, deterministic, no host sync. Longer queries without
    ``attn_mask`` run the flash-attention prefill kernel (:mod:`fastpath.ops.attention_prefill`,
    when present). ``dropout_p > 0``, masks with more than 16 query tokens, float64, head dims
    above 256, autograd and devices Triton does not serve take
    :func:`reference_scaled_dot_product_attention` (plain PyTorch, float32 math).
    ``torch.compile(fullgraph=True)`` traces the op (registered with ``torch.library``).

    Raises
    ------
    ValueError naming the argument: head dims differ (``key``), key/value lengths differ
    (``value``), head counts that neither match nor broadcast (without ``enable_gqa``) or
    are not divisors of the query heads (with it), batch dims or ``attn_mask`` that do not
    broadcast, ``attn_mask`` with ``is_causal``, ``dropout_p`` outside [0, 1], ``kv_len``
    of a wrong shape or device, ``window < 1``. TypeError for dtypes (mixed q/k/v, a mask
    that is neither bool, float32 nor query's dtype, ``kv_len`` not int32).

    Example
    -------
    >>> import torch, fastpath
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device=dev)
    >>> k = torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16, device=dev)
    >>> v = torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16, device=dev)
    >>> lens = torch.tensor([1000], dtype=torch.int32, device=dev)
    >>> fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True, kv_len=lens).shape
    torch.Size([1, 32, 1, 128])
    """
    dt = autocast_dtype(query)
    if dt is not None:  # as autocast runs F.scaled_dot_product_attention: float inputs in the region's dtype
        query, key, value, attn_mask, out_gate = cast(dt, query, key, value, attn_mask, out_gate)
        with torch.autocast(query.device.type, enabled=False):
            return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                                kv_len=kv_len, window=window, out_gate=out_gate)
    call = lambda: _checked_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,  # noqa: E731
                                 enable_gqa, kv_len, window, out_gate)
    if not (type(dropout_p) in (int, float) and type(scale) in (int, float, type(None))
            and type(window) in (int, type(None)) and type(is_causal) is bool and type(enable_gqa) is bool):
        return call()  # (its checks name what is wrong)
    # eager calls like an earlier one replay its launches (fastpath._core.memo): the decode
    # path's Python costs ~100 us on a slow host, its kernels 5-40 us
    return _MEMO.call(call, (query, key, value, attn_mask, kv_len, out_gate),
                      (dropout_p, is_causal, scale, enable_gqa, window))


def _checked_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, kv_len, window, out_gate):
    _checked(query, key, value, attn_mask, dropout_p, is_causal, scale, kv_len, window)
    s = _shapes(query, key, value, attn_mask, enable_gqa)
    if out_gate is not None:
        check_tensor("out_gate", out_gate)
        if (tuple(out_gate.shape) != tuple(s.out_shape) or out_gate.dtype != query.dtype
                or out_gate.device != query.device):
            raise ValueError(f"out_gate: expected the output's shape {tuple(s.out_shape)}, dtype {query.dtype} on "
                             f"{query.device}, got {tuple(out_gate.shape)} {out_gate.dtype} on {out_gate.device}")
    if kv_len is not None and tuple(kv_len.shape) != (s.nbatch,):
        raise ValueError(f"kv_len: expected shape ({s.nbatch},) (one length per batch entry {s.prefix}), "
                         f"got {tuple(kv_len.shape)}")
    args = (query, key, value, attn_mask, float(dropout_p), bool(is_causal),
            None if scale is None else float(scale), bool(enable_gqa), kv_len, window, out_gate)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (query, key, value, attn_mask, out_gate)):
        return reference_scaled_dot_product_attention(*args[:8], kv_len=kv_len, window=window, out_gate=out_gate)
    return _sdpa_op(*args)


_MEMO = LaunchMemo()

FAMILY = {"name": "attention", "ops": ["scaled_dot_product_attention"], "reason": triton_reason}
