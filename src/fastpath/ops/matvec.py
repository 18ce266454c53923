"""The matrix-vector kernel shared by decode-time ``linear`` and small-M ``scaled_mm``.

``out[m, n] = sum_k a[m, k] * b[k, n]`` for M <= 16 rows: each program owns ``BLOCK_N``
output columns for all rows (every weight byte is read once for all of them) and streams
one chunk of K; when N alone cannot keep every SM busy, K is split over programs and the
last program of each column block (an acq_rel ticket) adds the fp32 partials in a fixed
order and finishes the tile: deterministic, one launch.

Two ways to reduce a tile: ``DOT`` pads the rows to 16 and calls ``tl.dot`` on 16-bit
operands (tensor cores: large tiles at little register cost, for 2..16 rows), otherwise a
float32 broadcast-multiply-and-sum (one row, or float32 inputs). Both accumulate in float32.
Triton pipelines only loads that feed a ``tl.dot``; the one-row product-and-sum plans say how
many K tiles ahead their loads go (``Plan.stages``: through shared memory, cp.async). The
16-bit dot plans look at the grid as waves of resident programs: a grid of at most 1.5
programs a multiprocessor loads one tile deeper (``W16_DOT_FEW``), and 32-column blocks that
would spill into a short second wave become one wave of wider ones (``W16_DOT_WIDE``).

Operands load as float (``MODE 0``), as fp8 converted by the hardware (``MODE 1``, NVIDIA
capability 8.9+) or as ``uint8`` fp8 bits decoded exactly in registers (``MODE 2``: older
GPUs, ROCm and Triton's interpreter). ``S16`` (fp8 weights, bfloat16 activations, the
``FP8_VIA_FP16`` knob): a float16 ``tl.dot`` with the activations scaled per row and tile
by a power of two (:func:`_dot16`), since e4m3 converts to float16 in one instruction a pair
and to bfloat16 in three. Scales: per-row of ``a`` and per-column of ``b``
(a stride of 0 broadcasts one tensor-wise scale), applied once in the epilogue, or
1x128 / 128x128 block scales applied per K tile (``BLOCKWISE``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from typing import Optional

from .._core.backend import INTERPRET, TL_DTYPES, num_sms, pdl_start, pdl_trigger, tl, triton
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .fp8.bits import _decode
from .norm import group_gated_rows, normed_rows, round_to, rows_rstd, weighted_rows


@triton.jit
def _load_as(ptrs, mask, MODE: tl.constexpr, E5M2: tl.constexpr, DT: tl.constexpr):
    """Load a tile and convert it to ``DT`` (exact for fp8 into any of fp32/bf16/fp16)."""
    return _convert(_load_raw(ptrs, mask, MODE), ptrs.dtype.element_ty, MODE, E5M2, DT)


@triton.jit
def _load_raw(ptrs, mask, MODE: tl.constexpr):
    """:func:`_load_as`'s load alone (masked elements zero): the stored values, fp8 as its bits
    (``MODE`` 1: a float8 ``other=`` cannot be expressed), for :func:`_convert` later."""
    if MODE == 1:  # (if / else: a return inside a constexpr if gave the wrong tile type, sm_90)
        raw = tl.load(ptrs.to(tl.pointer_type(tl.uint8)), mask=mask, other=0)
    else:
        raw = tl.load(ptrs, mask=mask, other=0)
    return raw


@triton.jit
def _convert(raw, WT: tl.constexpr, MODE: tl.constexpr, E5M2: tl.constexpr, DT: tl.constexpr):
    """:func:`_load_raw`'s tile of stored element type ``WT`` as ``DT``."""
    if MODE == 0:
        out = raw.to(DT)
    elif MODE == 1:
        out = raw.to(WT, bitcast=True).to(DT)
    else:
        out = _decode(raw, E5M2).to(DT)
    return out


@triton.jit
def _mm_prec(a, b, DT: tl.constexpr, PREC: tl.constexpr):
    """``a @ b`` accumulated in float32, both operands as ``DT``: float32 products as ``PREC``
    ("ieee": exact, on the FMA units; "tf32x3": three TF32 tensor-core passes, float32-level
    accuracy), tensor cores otherwise."""
    if DT == tl.float32:
        return tl.dot(a, b, input_precision=PREC)
    else:
        return tl.dot(a.to(DT), b)


@triton.jit
def _mm(a, b, DT: tl.constexpr):
    """:func:`_mm_prec` with exact (ieee) float32 dots (as in Triton's interpreter, whose 16-bit
    tl.dot is unreliable). Shared by every tl.dot kernel of the package but attention's."""
    return _mm_prec(a, b, DT, "ieee")


@triton.jit
def _pow2_scale(v):
    """Per row of ``v`` (float32): powers of two ``(s, 1/s)`` with ``max|row| / s`` in
    ``[2^14, 2^15)``. ``v / s`` of bfloat16 values is exact in float16 (bar elements below
    ``max|row| * 2^-28``), so a float16 tensor-core dot of it, times ``s``, equals the
    bfloat16 dot: fp8 weights then convert to float16 in one instruction, where bfloat16
    takes three. NaN and inf rows stay NaN / inf."""
    return _pow2_of_amax(tl.max(tl.abs(v), axis=1))


@triton.jit
def _pow2_of_amax(amax):
    """:func:`_pow2_scale`'s ``(s, 1/s)`` for rows whose largest magnitude is ``amax``."""
    ex = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
    sb = tl.minimum(tl.maximum(ex - 14, 1), 241)
    return (sb << 23).to(tl.float32, bitcast=True), ((254 - sb) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _dot16(a, b, S16: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """``a @ b`` in float32 (a: float32 activations, b: weights already as ``DT``); ``S16``: through
    float16 with ``a`` scaled per row by :func:`_pow2_scale`. PREC: float32 products' precision
    (:func:`_mm_prec`)."""
    if S16:
        s, r = _pow2_scale(a)
        return _mm((a * r[:, None]).to(tl.float16).to(DT), b, DT) * s[:, None]
    return _mm_prec(a.to(DT), b, DT, PREC)


@triton.jit
def _block_scales(sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, k0, ssa_m, ssa_k, ssb_k, ssb_n):
    """The 1x128 scales of ``a`` and 128x128 scales of ``b`` for the K tile at ``k0``."""
    kb = k0 // 128
    sa = tl.load(sa_ptr + offs_m * ssa_m + kb * ssa_k, mask=mmask, other=0.0)
    sb = tl.load(sb_ptr + kb * ssb_k + (offs_n // 128) * ssb_n, mask=nmask, other=0.0)
    return sa, sb


@triton.jit
def _tile_order(pid, grid_m, grid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of tile ``pid`` in groups of GROUP_M row tiles (L2 reuse of ``b``);
    used by the tiled matmuls (scaled_mm, grouped_mm)."""
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    return first_m + (pid % width) % size_m, (pid % width) // size_m


@triton.jit
def _scaled(acc, sa_ptr, sb_ptr, bias_ptr, offs_m, offs_n, mmask, nmask, ssa_m, ssb_n,
            SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, HAS_BIAS: tl.constexpr):
    """``acc`` with its row / column scales and bias applied (float32)."""
    if SCALE_A:
        acc = acc * tl.load(sa_ptr + offs_m * ssa_m, mask=mmask, other=0.0)[:, None]
    if SCALE_B:
        acc = acc * tl.load(sb_ptr + offs_n * ssb_n, mask=nmask, other=0.0)[None, :]
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    return acc


@triton.jit
def _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
              SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, HAS_BIAS: tl.constexpr,
              acc_up=None, n_up=0, GLU: tl.constexpr = False):
    """Row / column scales, bias, cast, store. ``GLU``: ``acc`` holds gate columns and
    ``acc_up`` the up columns ``n_up`` further on; stores ``silu(gate) * up``, rounded to the
    output dtype after each step as PyTorch's separate ops round."""
    mmask = offs_m < M
    nmask = offs_n < N
    y = _scaled(acc, sa_ptr, sb_ptr, bias_ptr, offs_m, offs_n, mmask, nmask, ssa_m, ssb_n, SCALE_A, SCALE_B, HAS_BIAS)
    OT = out_ptr.dtype.element_ty
    if GLU:
        g = round_to(y, OT).to(tl.float32)
        u = _scaled(acc_up, sa_ptr, sb_ptr, bias_ptr, offs_m, offs_n + n_up, mmask, nmask, ssa_m, ssb_n,
                    SCALE_A, SCALE_B, HAS_BIAS)
        y = round_to(g / (1.0 + tl.exp(-g)), OT).to(tl.float32) * round_to(u, OT).to(tl.float32)
    ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * som + offs_n[None, :] * son
    tl.store(ptrs, round_to(y, OT), mask=mmask[:, None] & nmask[None, :])


@triton.jit
def _tile_dot(a, b, DOT: tl.constexpr, DT: tl.constexpr, S16: tl.constexpr, PREC: tl.constexpr):
    """``a @ b`` of one K tile in float32 (``b`` loaded and converted to ``DT``)."""
    if not DOT:  # (BLOCK_M < 16: a product-and-sum Triton does not turn into a tf32 dot)
        d = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    else:  # (if/else, not an early return: Triton would also compile the dot for 1-row tiles)
        d = _dot16(a, b, S16, DT, PREC)
    return d


@triton.jit
def _b_tile(b_ptrs, bmask, raw, HAS_RAW: tl.constexpr, B_MODE: tl.constexpr, B_E5M2: tl.constexpr,
            DT: tl.constexpr):
    """A weight tile as ``DT``: loaded now, or converted from ``raw`` loaded earlier (HAS_RAW)."""
    if HAS_RAW:
        b = _convert(raw, b_ptrs.dtype.element_ty, B_MODE, B_E5M2, DT)
    else:
        b = _load_as(b_ptrs, bmask, B_MODE, B_E5M2, DT)
    return b


@triton.jit
def _mv_acc(acc, acc_up, acc_k, acc_k_up, a, b_ptrs, b_ptrs_up, bmask, raw, raw_up, HAS_RAW: tl.constexpr,
            B_MODE: tl.constexpr, B_E5M2: tl.constexpr, KD: tl.constexpr, GLU: tl.constexpr, DOT: tl.constexpr,
            DT: tl.constexpr, S16A: tl.constexpr, BLOCK_K: tl.constexpr, KSUM: tl.constexpr, PREC: tl.constexpr):
    """One K tile of :func:`_mv_kernel` (no block scales) added into its accumulators: the
    weights at ``b_ptrs`` (GLU: and ``b_ptrs_up``) loaded here, or taken from ``raw``
    (``raw_up``) loaded before (HAS_RAW). KSUM (one row, product-and-sum): the tile's products
    are summed over K at once instead of kept per (k, n) until the end of the loop."""
    if KD > 1:
        a1 = tl.reshape(a, [BLOCK_K])[:, None]
        p = a1 * _b_tile(b_ptrs, bmask, raw, HAS_RAW, B_MODE, B_E5M2, DT)
        p_up = p
        if GLU:
            p_up = a1 * _b_tile(b_ptrs_up, bmask, raw_up, HAS_RAW, B_MODE, B_E5M2, DT)
        if KSUM:
            acc += tl.sum(p, axis=0)[None, :]
            if GLU:
                acc_up += tl.sum(p_up, axis=0)[None, :]
        else:
            acc_k += p
            if GLU:
                acc_k_up += p_up
    else:
        acc += _tile_dot(a, _b_tile(b_ptrs, bmask, raw, HAS_RAW, B_MODE, B_E5M2, DT), DOT, DT, S16A, PREC)
        if GLU:
            acc_up += _tile_dot(a, _b_tile(b_ptrs_up, bmask, raw_up, HAS_RAW, B_MODE, B_E5M2, DT), DOT, DT, S16A,
                                PREC)
    return acc, acc_up, acc_k, acc_k_up


@triton.jit
def _mv_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, K, k_chunk, n_split,
               sam, sak, sbk, sbn, ssa_m, ssa_k, ssb_k, ssb_n, som, son, n_up,
               r_ptr, nw_ptr, nr_ptr, srm, srk, snm, snw, eps,
               A_MODE: tl.constexpr, B_MODE: tl.constexpr, A_E5M2: tl.constexpr, B_E5M2: tl.constexpr,
               SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, BLOCKWISE: tl.constexpr,
               HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr, DOT: tl.constexpr, DT: tl.constexpr,
               S16: tl.constexpr, GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, NORM: tl.constexpr = 0, HAS_RES: tl.constexpr = False,
               NORM_DT: tl.constexpr = tl.float32, NORM_K: tl.constexpr = 16, NORM_DEFER: tl.constexpr = False,
               GNORM: tl.constexpr = 0, W_FIRST: tl.constexpr = False, KSUM: tl.constexpr = False,
               STAGES: tl.constexpr = None, PDL: tl.constexpr = 0, LATE: tl.constexpr = True,
               F32P: tl.constexpr = "ieee"):
    pdl_start(PDL)
    # NORM (1 plain, 2 zero-centred; one row, M == 1): ``a`` is RMS-normalised on the fly (weights nw,
    # eps; with HAS_RES, of a + r, which the programs of column block 0 store into nr): every
    # program first reads the row whole for its rstd (NORM_K columns at a time), then each K
    # tile of a is normalised as it is loaded. NORM_DEFER (any plan): each K chunk of the row is
    # only multiplied by the norm's weights (as a vector, placed in row 0 of a 16-row dot tile),
    # its sum of squares kept, and the finished sums are multiplied by rsqrt(sum / K + eps)
    # (split-K: each program's sum of squares goes to ws beside its partial, and the last
    # program of the column block adds them up).
    # W_FIRST (NORM without NORM_DEFER, no block scales): the first K tile's weights are loaded
    # before the row's sum of squares, so their memory latency overlaps it; that tile is then
    # taken before the loop, which starts one tile later.
    # GNORM (one row; a group size): a is RMS-normalised per group of GNORM columns, times the
    # weights nw (GNORM,) and silu(r) (r: the gate, of a's shape), as each K tile (whole groups)
    # is loaded; no prologue.
    # STAGES (None: Triton's default, which pipelines only loads that feed a tl.dot): the K loop's
    # loads issued that many tiles ahead through shared memory (cp.async), for the product-and-sum.
    # SPLIT: program (n, s) writes its float32 partial to ws[s] (an (n_split, M, N) buffer;
    # GLU: (n_split, 2, M, N)) and bumps cnt[n]; the last of the n_split programs of column
    # block n adds the partials in the order s = 0, 1, ... (deterministic), finishes the tile
    # and re-zeroes cnt[n]. GLU: output column n takes b's columns n (gate) and n + n_up (up).
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = offs_m < M
    nmask = offs_n < N
    k_lo = pid_k * k_chunk
    k_hi = tl.minimum(K, k_lo + k_chunk)
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * sam
    b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * sbn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    # One row without tensor cores or block scales: products accumulate per (k, n) and the sum
    # over K waits for the end of the loop (no cross-thread reduction a tile).
    KD: tl.constexpr = BLOCK_K if (not DOT) and BLOCK_M == 1 and (not BLOCKWISE) else 1
    acc_k = tl.zeros([KD, BLOCK_N], dtype=tl.float32)
    acc_k_up = tl.zeros([KD, BLOCK_N], dtype=tl.float32)
    # fp16 tiles of h * w (not normalised yet) could overflow: scaled by a power of two as S16
    S16A: tl.constexpr = S16 or (NORM_DEFER and DT == tl.float16)
    row0 = tl.arange(0, 1)  # the deferred norm's row
    ss = tl.zeros([1], dtype=tl.float32)
    k_start = k_lo
    if NORM and not NORM_DEFER:  # (BLOCK_M is 1)
        if W_FIRST:
            offs_k = (k_lo + tl.arange(0, BLOCK_K)).to(tl.int64)
            kmask = offs_k < k_hi
            bmask = kmask[:, None] & nmask[None, :]
            b_ptrs = b_cols + offs_k[:, None] * sbk
            b_ptrs_up = b_cols + n_up * sbn + offs_k[:, None] * sbk
            raw = _load_raw(b_ptrs, bmask, B_MODE)
            raw_up = raw
            if GLU:
                raw_up = _load_raw(b_ptrs_up, bmask, B_MODE)
        rstd = rows_rstd(a_ptr, r_ptr, nr_ptr, offs_m.to(tl.int64), mmask, K, sam, sak, srm, srk, snm, eps, HAS_RES,
                         False, BLOCK_M, NORM_K)
        if W_FIRST:
            a = normed_rows(a_ptr, r_ptr, nw_ptr, nr_ptr, nr_ptr, offs_m.to(tl.int64), offs_k,
                            mmask[:, None] & kmask[None, :], kmask, rstd, sam, sak, srm, srk, snm, snw, pid_n == 0,
                            HAS_RES, False, NORM == 2, NORM_DT)
            a = a.to(tl.float32 if S16 else DT)
            acc, acc_up, acc_k, acc_k_up = _mv_acc(acc, acc_up, acc_k, acc_k_up, a, b_ptrs, b_ptrs_up, bmask, raw,
                                                   raw_up, True, B_MODE, B_E5M2, KD, GLU, DOT, DT, S16A, BLOCK_K,
                                                   KSUM, F32P)
            k_start = k_lo + BLOCK_K
    for k0 in tl.range(k_start, k_hi, BLOCK_K, num_stages=STAGES):
        offs_k = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        kmask = offs_k < k_hi
        if NORM_DEFER:
            a, ss_k = weighted_rows(a_ptr, r_ptr, nw_ptr, nr_ptr, row0.to(tl.int64), offs_k,
                                    (row0 < 1)[:, None] & kmask[None, :], kmask, sam, sak, srm, srk, snm, snw,
                                    pid_n == 0, HAS_RES, NORM == 2)
            ss += ss_k
            if BLOCK_M > 1:
                a = tl.where(offs_m[:, None] == 0, a, 0.0)
        elif GNORM > 0:
            a = group_gated_rows(a_ptr, r_ptr, nw_ptr, row0.to(tl.int64), offs_k, (row0 < 1)[:, None] & kmask[None, :],
                                 sam, sak, srm, srk, snw, eps, GNORM, NORM_DT)
            if BLOCK_M > 1:
                a = tl.where(offs_m[:, None] == 0, a, 0.0)
        elif NORM:
            a = normed_rows(a_ptr, r_ptr, nw_ptr, nr_ptr, nr_ptr, offs_m.to(tl.int64), offs_k,
                            mmask[:, None] & kmask[None, :], kmask, rstd, sam, sak, srm, srk, snm, snw, pid_n == 0,
                            HAS_RES, False, NORM == 2, NORM_DT)
            a = a.to(tl.float32 if S16 else DT)
        else:
            a = _load_as(a_rows + offs_k[None, :] * sak, mmask[:, None] & kmask[None, :], A_MODE, A_E5M2,
                         tl.float32 if S16 else DT)
        b_ptrs = b_cols + offs_k[:, None] * sbk
        # (summed in this order: b_ptrs + n_up * sbn compiled the fp8 SwiGLU loop to 40 more instructions, H200
        # Qwen3-8B FP8 2.7% slower)
        b_ptrs_up = b_cols + n_up * sbn + offs_k[:, None] * sbk
        bmask = kmask[:, None] & nmask[None, :]
        if BLOCKWISE:  # BLOCK_K divides 128: one scale pair per tile (scaled_mm: no GLU)
            d = _tile_dot(a, _load_as(b_ptrs, bmask, B_MODE, B_E5M2, DT), DOT, DT, S16A, F32P)
            sa, sb = _block_scales(sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, k0, ssa_m, ssa_k, ssb_k, ssb_n)
            acc += d * sa[:, None] * sb[None, :]
        else:
            acc, acc_up, acc_k, acc_k_up = _mv_acc(acc, acc_up, acc_k, acc_k_up, a, b_ptrs, b_ptrs_up, bmask, 0, 0,
                                                   False, B_MODE, B_E5M2, KD, GLU, DOT, DT, S16A, BLOCK_K,
                                                   KSUM, F32P)
    if LATE:  # (PDL 3: the next kernel may launch now)
        pdl_trigger(PDL)
    if KD > 1 and not KSUM:
        acc = tl.sum(acc_k, axis=0)[None, :]
        acc_up = tl.sum(acc_k_up, axis=0)[None, :]
    if SPLIT:
        tile = offs_m[:, None] * N + offs_n[None, :]
        tmask = mmask[:, None] & nmask[None, :]
        part = ws_ptr + pid_k.to(tl.int64) * M * N * (2 if GLU else 1) + tile
        tl.store(part, acc, mask=tmask)
        if GLU:
            tl.store(part + M * N, acc_up, mask=tmask)
        ss_ws = ws_ptr + n_split.to(tl.int64) * M * N * (2 if GLU else 1) + pid_n + row0
        if NORM_DEFER:  # (n_split, column blocks) after the partials (M is 1)
            tl.store(ss_ws + pid_k * tl.num_programs(0), ss)
        tl.debug_barrier()  # every thread's partial is written before the release below
        if tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel") == n_split - 1:
            tl.atomic_xchg(cnt_ptr + pid_n, 0)
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            ss = tl.zeros([1], dtype=tl.float32)
            for s in range(0, n_split):
                part = ws_ptr + s * M * N * (2 if GLU else 1) + tile
                acc += tl.load(part, mask=tmask, other=0.0, cache_modifier=".cg")
                if GLU:
                    acc_up += tl.load(part + M * N, mask=tmask, other=0.0, cache_modifier=".cg")
                if NORM_DEFER:
                    ss += tl.load(ss_ws + s * tl.num_programs(0), cache_modifier=".cg")
            if NORM_DEFER:
                rstd = tl.rsqrt(ss / K + eps)[:, None]
                acc, acc_up = acc * rstd, acc_up * rstd
            _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
                      SCALE_A and not BLOCKWISE, SCALE_B and not BLOCKWISE, HAS_BIAS, acc_up, n_up, GLU)
    else:
        if NORM_DEFER:
            rstd = tl.rsqrt(ss / K + eps)[:, None]
            acc, acc_up = acc * rstd, acc_up * rstd
        _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
                  SCALE_A and not BLOCKWISE, SCALE_B and not BLOCKWISE, HAS_BIAS, acc_up, n_up, GLU)


_MV = Launcher(_mv_kernel, pdl=True)


# ---------------------------------------------------------------------------- plan

#: Tuned on the H200 (scripts/linear_probe.py; docs/perf-notes.md): (tl.dot?, BLOCK_N,
#: BLOCK_K, programs per SM to split K for) by weight bytes per element and one row or more.
#: 16-bit weights: tl.dot on 16-row tiles (at one row where W16_ONE_ROW_FMA does not apply); fp8
#: weights and one row: the float32 product-and-sum (it converts fewer elements per byte streamed).
TUNED = {(2, True): (True, 32, 256, 2), (2, False): (True, 32, 256, 2),
         (1, True): (False, 32, 256, 4), (1, False): (True, 64, 64, 8)}
#: BLOCK_M * BLOCK_N * BLOCK_K of the float32 product-and-sum (float32 weights, 1-4 rows). H100
#: (scripts/fp32_dots_probe.py, 866936a; 4096 -> 4096, 4096 -> 14336, 14336 -> 4096), 8192 ->
#: 16384: one row 28.2 / 91.9 / 107.7 -> 28.8 / 84.7 / 85.1 us (F.linear 27.5 / 82.8 / 82.5),
#: 4 rows 35.8 / 100.3 / 112.1 -> 31.5 / 98.8 / 97.1 (F.linear 32.4 / 100.7 / 107.6), 2 rows alike.
FMA_TILE = 16384
#: Float32 operands on the dot: the products' precision (:func:`_mm_prec`). Exact ``ieee``
#: products run on the FMA units, where Triton's dot is slow: H100, 16 x 4096 -> 4096 309.3 us
#: against F.linear's 50.1 (7b5b33b); ``tf32x3`` (three TF32 tensor-core passes, float32-level
#: accuracy, as attention's float32 dots) on NVIDIA GPUs.
F32_DOT_PREC = "ieee" if torch.version.hip is not None else "tf32x3"
#: Float32 rows from which the 16-row dot takes over from the product-and-sum, and its (BLOCK_N,
#: BLOCK_K, programs per SM to split K for); None: the product-and-sum's FMA_TILE-derived blocks.
#: H100 (same probe, 866936a), 5-16 rows on the three shapes: the product-and-sum at 5-8 rows and
#: the dot on those blocks at 9-16 took 72-79 / 226-258 / 231-262 us against F.linear's 33-50 /
#: 104-155 / 112-163; the dot on (64, 128, 1) 31.3-31.8 / 88.5-91.2 / 91.2-93.2 (best or within
#: 9% of the best of six tile sets: (64, 64, 2) 29.2 / 118-121 / 86.9).
F32_DOT_FROM = 5
F32_DOT_BLOCKS: Optional[tuple] = (64, 128, 1)
#: Float32 weights at one row (under a norm: F32_ONE_ROW_NORM): (BLOCK_N, BLOCK_K, programs per SM, stages) of a
#: product-and-sum whose tiles are summed over K as they come (``_mv_acc``'s KSUM, split-K
#: counts rounded down), as the 16-bit one-row plan (W16_ONE_ROW_FMA); None: FMA_TILE's blocks.
#: H200 (scripts/fp32_dots_probe.py, ROWS=1, 6053445; 4096 -> 4096, 4096 -> 14336, 14336 -> 4096):
#: FMA_TILE's blocks 23.2 / 63.9 / 61.8 us, F.linear 21.6 / 61.3 / 56.4, these 18.2 / 59.4 / 55.9
#: (best or within 7% of the best of eight tile sets).
F32_ONE_ROW_FMA: Optional[tuple] = (16, 512, 2, 3)
#: ... for SwiGLU projections too (gate and up columns a program); False: FMA_TILE's blocks there.
#: H100 (fp32_dots_probe.py SWIGLU=1, 672d85e): 4096 -> 2 x 14336 321.8 -> 154.6 us, 2048 -> 2 x 6144
#: 88.6 -> 36.8 (F.linear + silu * up 161.9 / 41.3).
F32_ONE_ROW_GLU = True
#: ... and under a norm (row-first or deferred: the q/k/v and gate/up projections of a decoder
#: layer). H100 (gpu_pending.sh 92, 1ff689b; Llama-3-8B shapes, 12 layers, float32, two rounds): decode
#: 224.5 / 224.4 -> 227.5 / 227.4 tok/s (93% -> 95% of the roofline); its compiled tests passed.
F32_ONE_ROW_NORM = True
MIN_K_PER_SPLIT = 64 if INTERPRET else 512  # smallest share of K worth a program
#: The interpreter uses small blocks so that the tests cover several blocks, masked tails
#: and split-K; tests set SPLIT_K_OVERRIDE to force a split count (clamped to what K allows).
INTERPRET_BLOCKS = (16, 32)  # BLOCK_N, BLOCK_K
SPLIT_K_OVERRIDE: Optional[int] = None
#: The split count's rounding for every plan (True: down, False: up; scripts/split_probe.py);
#: None: each plan's own (FP8_VIA_FP16_FILL, FP8_ONE_ROW_FILL; up for the others).
SPLIT_FILL_OVERRIDE: Optional[bool] = None
#: 16-bit weights on the 16-row dot at 2-16 rows: split counts rounded down (True) or up. H200
#: (scripts/split_probe.py --variant, f1837eb, against F.linear in one process), up -> down: 4 / 16
#: rows 2048 -> 4096 8.11 -> 7.79 / 8.30 -> 7.93 us (F.linear 6.79 / 6.99), 2048 -> 5120 9.18 ->
#: 8.75 / 9.27 -> 8.63, 4096 -> 4096 12.27 -> 11.93 / 12.53 -> 12.27, the rest within 1% (other
#: blocks for this plan, 16-64 columns x 64-512 K, lost or tied: same log).
W16_ROWS_FILL = True
#: ... and no split-K where that rule gives 2 splits and K is at most this (None: never): the column
#: blocks then already fill more than a third of the slots, and two halves of a short K do not pay
#: for the partials and the last program's combine. H200 (scripts/split_probe.py --rows 2/4/8/16,
#: 8b2e143, against F.linear in one process), 2 splits -> none at 16 rows: 1024 -> 4096 6.09 ->
#: 4.68 us, 1536 -> 4096 7.04 -> 6.01, 2048 -> 4096 8.00 -> 7.31, 1024 -> 2048 5.00 -> 3.91 (2-8 rows
#: alike); 3072 -> 4096 and 4096 -> 4096 lost or tied unsplit, 2048 -> 2048 (4 splits) lost.
W16_ROWS_UNSPLIT_K: Optional[int] = 2048
#: Software pipelining depth of the 16-bit dot plans (None: Triton's default, 3, or W16_DOT_FEW's).
W16_DOT_STAGES: Optional[int] = None
#: Plain 16-bit dot plans (no SwiGLU or norm) whose grid has at most 1.5 programs a multiprocessor:
#: this pipelining depth (None: W16_DOT_STAGES). H200 (scripts/split_probe.py, 4 / 16 rows, 1ef4d75),
#: 3 -> 4 stages: 2048 -> 4096 unsplit 7.41 -> 6.76 / 7.23 -> 6.57 us, 1536 -> 4096 6.17 -> 5.73 /
#: 5.95 -> 5.41, 4096 -> 6144 (192 programs) 15.68 -> 15.04 / 15.64 -> 15.16; with 2 programs a
#: multiprocessor (4096 -> 4096, 4096 -> 2048) 1-2% slower, with more (4096 -> 14336) 20% slower.
W16_DOT_FEW: Optional[int] = 4
#: ... and the (BLOCK_N, BLOCK_K) they take, K unsplit, where 32-column blocks would make more than
#: one wave of W16_DOT_RESIDENT programs a multiprocessor but at most 1.5 (the second wave's tail);
#: None: never. H200 (same run), 4096 -> 14336 (448 blocks of 32, 224 of 64): 4 / 16 rows 32.60 ->
#: 30.50 / 32.80 -> 30.64 us (F.linear 30.61 / 30.61); 4096 -> 18944 (592 blocks) 50.98 -> 38.12 /
#: 50.06 -> 38.45 (F.linear 40.96 / 41.71; 15d0ac8); 4096 -> 12288 (384 blocks, one wave) would lose
#: 4% with them, so it keeps 32 columns. (At one row, split in two, they lost 1-3% on 14336 and 16384
#: columns: hence unsplit.)
W16_DOT_WIDE: Optional[tuple] = (64, 128)
W16_DOT_RESIDENT = 3
#: fp8 x fp8 (small-M scaled_mm on fp8 hardware): (BLOCK_N, BLOCK_K, programs per SM) of the
#: native fp8 tl.dot on 16-row tiles; None: convert to bfloat16 as for 16-bit operands.
FP8_DOT: Optional[tuple] = (32, 256, 2)
#: fp8 weights x 16-bit activations: (BLOCK_N, BLOCK_K, programs per SM) of a float16 tl.dot
#: on 16-row tiles (e4m3 converts to float16 in one instruction a pair, to bfloat16 in three;
#: bfloat16 activations are scaled per row and tile by a power of two, ``_dot16``, exact);
#: None: the TUNED path. H200 (scripts/linear_probe.py --fp8-only, commit 289973d): geometric
#: mean over the issue's 7 shapes 1.41x of bf16 F.linear at one row (the float32 path: 1.28x).
FP8_VIA_FP16: Optional[tuple] = (64, 256, 4)
#: Split-K count of the FP8_VIA_FP16 plan rounded down (at most its programs per SM; rounded up,
#: the grid may overshoot into a partly filled second wave). H200, one row
#: (scripts/split_probe.py, bbb15f6): 4096 -> 14336 23.50 -> 21.85 us, 4096 -> 2 x 14336 SwiGLU
#: 39.61 -> 37.36, the rest of this plan's shapes within 0.1%; Llama-3-8B FP8 decode 317.9 ->
#: 323.2 tok/s (knob_ab). (Every plan rounded down moved the one-row fp8 product-and-sum plan
#: both ways, 0.94-1.12x: its own rule is FP8_ONE_ROW_FILL.)
FP8_VIA_FP16_FILL = True
#: With SwiGLU (two accumulators, 90 KB of shared memory and 255 registers: two programs a
#: multiprocessor, offline sm_90 compile) the FP8_VIA_FP16 route aims at half its programs per
#: SM. H200, 4096 -> 2 x 14336 (scripts/split_probe.py --splits, 878d556): 1 split 33.05 us, 2
#: splits 37.60, 3 39.81. Spill-free blocks for it lost on one of Llama's and Qwen3's shapes each
#: (64 x 128: 35.7 / 29.9 us, 32 x 256: 42.8 / 31.7, against 33.3 / 30.8; perf-notes).
FP8_VIA_FP16_GLU_HALF = True
#: fp8 weights x 16-bit activations, one row, weights of at most FP8_ONE_ROW_MAX_ELEMS: (BLOCK_N,
#: BLOCK_K, programs per SM) of the float32 product-and-sum instead (K summed after the loop).
#: H200 (scripts/linear_probe.py --one-row, bec570f), against the float16 route: 2048 -> 5120
#: 6.4 vs 8.2 us, 4096 -> 2048 6.9 vs 7.4, 4096 -> 6144 11.5 vs 12.7, 4096 -> 4096 9.2 vs 10.0;
#: from 4096 x 28672 and 14336 x 4096 up the float16 route was faster before the loads were
#: pipelined (FP8_ONE_ROW_STAGES; above the limit see FP8_ONE_ROW_BIG). None: off.
FP8_ONE_ROW_FMA: Optional[tuple] = (16, 512, 4)
FP8_ONE_ROW_MAX_ELEMS = 32 * 2 ** 20
#: Its split-K count: rounded down (at most its programs per SM: whole waves), each split at
#: least FP8_ONE_ROW_MIN_K of K. H200, one row (scripts/split_probe.py --splits, 78e5dbd), 1 / 2
#: / 3 / 4 splits: 4096 -> 2048 9.09 / 7.40 / 6.93 / 6.37 us (this rule: 4, the one before: 3),
#: 2048 -> 4096 5.67 / 6.43 / 6.41 / 7.77 (both: 2), 4096 -> 4096 9.79 / 9.25 / 10.84 / 10.57
#: (both: 2), 2048 -> 5120 6.12 at 1 (both: 1).
FP8_ONE_ROW_FILL = True
FP8_ONE_ROW_MIN_K = 64 if INTERPRET else 1024
#: Where its BLOCK_N-column blocks would not fill the GPU (fewer than its programs per SM times
#: the SMs, no SwiGLU): (BLOCK_N, BLOCK_K) of narrower column blocks instead, and no split-K (its
#: partials and last-program combine cost more than the K they share). H200 (split_probe.py
#: --variant, 7f756bd), default -> (8, 1024): 4096 -> 4096 7.62 -> 6.17 us, 2048 -> 4096 5.71 ->
#: 4.22, 14336 -> 4096 17.59 -> 16.47 (4096 -> 2048: 5.75 -> 5.17 unsplit at 16 columns).
#: None: off (the interpreter's default, so that its tests keep split-K). Decode (knob_ab, 12
#: layers, 0906464): Llama-3-8B FP8 +1.9%, Qwen3-8B FP8 +1.8%, LFM2.5 FP8 +1.3%, Qwen3-30B-A3B
#: FP8 +0.5%, Qwen3.6 FP8 -0.3%.
FP8_ONE_ROW_NARROW: Optional[tuple] = None if INTERPRET else (8, 1024)
#: The same under a group norm (Qwen3.5/3.6's gated norm inside the DeltaNet output projection):
#: off. Qwen3.6 FP8 (knob_ab, 12 layers, 9c6445d): 1536.9-1540.1 tok/s with, 1553.4-1554.0 without,
#: 1542.2-1545.7 with no narrow blocks at all.
FP8_ONE_ROW_NARROW_GROUP = False
#: Its tiles summed over K as they come (``_mv_acc``'s KSUM) instead of products kept per (k, n)
#: until the loop ends: 117 -> 56 registers, but with pipelined loads mixed (scripts/split_probe.py,
#: 4473e03: 4096 -> 4096 7.60 -> 7.77 us, 2048 -> 5120 4.61 -> 5.07, 2048 -> 9216 7.66 -> 6.74); off.
FP8_ONE_ROW_KSUM = False
#: Its K loop's loads pipelined this many tiles deep (``_mv_kernel``'s STAGES; None: not pipelined,
#: Triton pipelines only loads that feed a tl.dot, so each program waited for one tile at a time).
#: H200 (scripts/split_probe.py, 4473e03), None -> 3: 4096 -> 4096 9.31 -> 7.60 us, 2048 -> 4096
#: 6.49 -> 5.75, 4096 -> 2048 6.42 -> 5.75, 2048 -> 5120 6.14 -> 4.61, 4096 -> 6144 11.20 -> 8.26,
#: SwiGLU 2048 -> 2 x 768 5.34 -> 4.57 (4 stages: no better). Decode (knob_ab, 12 layers,
#: b3a0de5, with FP8_ONE_ROW_BIG): Llama-3-8B FP8 +8.1%, LFM2.5 FP8 +2.2%, Qwen3-30B-A3B FP8 +1.9%.
FP8_ONE_ROW_STAGES: Optional[int] = 3
#: The same under the row-first fused norm (rms_norm_linear's fp8 form) or a group norm
#: (group_rms_norm_linear): 3 cost Qwen3-30B-A3B FP8 1.8% and LFM2.5 FP8 1.4% (knob_ab, 12 layers,
#: b3a0de5), and Qwen3.6 FP8 (its DeltaNet output projections under the group norm) decoded at 488.5
#: tok/s with it, 518.9 without (full model, 3fb2b4f / 2b4b145, 495.8 with every plan off); None.
FP8_NORM_ONE_ROW_STAGES: Optional[int] = None
#: fp8 weights above FP8_ONE_ROW_MAX_ELEMS, one row, no SwiGLU: the product-and-sum too, with
#: KSUM and FP8_ONE_ROW_STAGES (False: the float16 dot, FP8_VIA_FP16). H200 (split_probe, 4473e03):
#: 4096 -> 14336 21.60 -> 16.55 us, 14336 -> 4096 20.21 -> 17.21, 2048 -> 151936 79.7 -> 71.9, 4096
#: -> 128256 132.5 -> 118.1 (SwiGLU 4096 -> 2 x 14336: 32.5 -> 39.2, hence not with SwiGLU).
FP8_ONE_ROW_BIG = True
#: The same with the row normalised in the kernel (rms_norm_linear's row-first form); None: as
#: FP8_ONE_ROW_FMA. (Its 16-column tiles stream 8 KB of weights a K tile, to which the norm adds
#: 3 KB of activations, residual and norm weights: scripts/norm_linear_probe.py --fp8-plans.)
FP8_NORM_ONE_ROW_FMA: Optional[tuple] = None
#: 16-bit weights, one row, no SwiGLU or group norm, at most W16_ONE_ROW_MAX_ELEMS weights: (BLOCK_N,
#: BLOCK_K, programs per SM, pipelining stages) of the product-and-sum (tiles summed over K at once,
#: loads ``stages`` tiles ahead; split-K counts rounded down) instead of the 16-row dot; None: the dot
#: (TUNED). W16_ONE_ROW_DEFERRED: also under a deferred norm where its column blocks are at most
#: that many a multiprocessor (None: never). H200 (scripts/split_probe.py, 3625294), dot -> this:
#: 4096 -> 4096 12.08 -> 11.03 us, 2048 -> 4096 7.81 -> 6.56, 4096 -> 2048 7.99 -> 7.39, 2048 ->
#: 5120 8.56 -> 7.64, 4096 -> 6144 15.55 -> 14.24, 4096 -> 14336 30.3 -> 35.4 (hence the limit),
#: SwiGLU 4096 -> 2 x 14336 56.7 -> 59.4 (hence none). Decode (knob_ab, full models, 843b307):
#: Llama-3-8B +1.8%, Qwen3-30B-A3B +3.9%, LFM2.5 +3.5%, Qwen3.6 +0.3% (-2.8% with its 576- and
#: 772-block deferred projections on it, e1c9b8f).
W16_ONE_ROW_FMA: Optional[tuple] = (16, 512, 2, 3)
W16_ONE_ROW_MAX_ELEMS = 32 * 2 ** 20
#: FP8_ONE_ROW_NARROW for this plan: (BLOCK_N, BLOCK_K) unsplit where its column blocks do not fill the GPU;
#: None: off (the interpreter's default). H200 (split_probe.py --variant, 5a4454e), against F.linear
#: in the same run, default -> (8, 512) [(8, 1024)]: 4096 -> 4096 1.15x -> 1.20x [1.12x], 2048 -> 4096
#: 1.10x -> 1.18x [1.03x], 4096 -> 2048 1.15x -> 1.23x [1.31x]; decode (knob_ab, 12 layers): Qwen3-8B
#: +0.4% [0], Llama-3-8B +0.4% [0], Qwen3-30B-A3B +1.0% [+1.4%].
W16_ONE_ROW_NARROW: Optional[tuple] = None if INTERPRET else (8, 512)
W16_ONE_ROW_DEFERRED: Optional[int] = 3


@dataclass(frozen=True)
class Plan:
    block_m: int
    block_n: int
    block_k: int
    split: int  # programs along K
    k_chunk: int  # K per split, a multiple of block_k
    warps: int
    dot: Optional[torch.dtype]  # tl.dot on operands converted to this dtype; None: float32 FMA
    s16: bool = False  # bfloat16 activations through float16 (dot is float16; float32 when interpreted)
    ksum: bool = False  # one-row product-and-sum: each tile summed over K at once (_mv_acc's KSUM)
    stages: Optional[int] = None  # the K loop's software pipelining depth (None: Triton's default)


#: A row normalised in the kernel (``Norm``, one row only), 16-bit weights: (BLOCK_N, BLOCK_K,
#: programs per SM) of the float32 product-and-sum (fp8 weights: FP8_ONE_ROW_FMA). H200, Qwen3-
#: 30B-A3B decode (scripts/norm_fusion_ab.py, f807f63): 347 tok/s against 327 on the 16-row dot
#: (the row normalised, then padded to 16 rows and stored to shared memory every tile).
NORM_ONE_ROW_FMA = (16, 512, 2)
#: With the norm's prologue (``rms_norm_linear`` not deferred: fp8 weights, or a plan the wave
#: rule keeps whole): each program loads its first weight tile before reading the row for its
#: ``rstd``, so the two memory latencies overlap instead of adding up. H200 (knob_ab, 6630a96, with
#: moe.ROUTER_W_FIRST): Qwen3-30B-A3B FP8 432.7 -> 437.0 tok/s, LFM2.5 FP8 912.0 -> 916.5.
NORM_W_FIRST = True
#: With ``FASTPATH_PDL=3``: whether a SwiGLU projection (whose next kernel is its down projection)
#: lets the next kernel launch as its programs leave their loops, like the other projections.
LATE_GLU = False
#: ... and which plans do: None all, True split-K ones only, False unsplit ones only (H200,
#: gpu_pending 48: split-K ones triggering late cost the 8B dense models 1.8%, the loss their
#: successor's: scripts/pdl_pair_probe.py; placed in the last program of a column block, as it
#: combines, still 0.9%: gpu_pending 51).
LATE_SPLIT: Optional[bool] = False


def plan(M: int, N: int, K: int, device: torch.device, dot_dtype: Optional[torch.dtype],
         b_bytes: int = 2, max_block_k: int = 128 * 1024, norm: bool = False, group: int = 0,
         glu: bool = False, deferred: bool = False, w16_dot: bool = False) -> Plan:
    """Blocks and split-K for ``(M, K) @ (K, N)``, plain int math only. ``dot_dtype``: the
    16-bit dtype both operands convert to exactly for ``tl.dot`` (None: float32 operands);
    ``b_bytes``: bytes per element of ``b`` as stored; ``max_block_k`` keeps block-scale
    tiles whole; ``group`` (a power of two): K tiles of whole groups (:class:`Norm`'s ``group``);
    ``glu``: ``N`` output columns of gate and up weights (``launch``'s ``glu``); ``deferred``: under
    a deferred norm (:class:`Norm`); ``w16_dot``: 16-bit weights on the dot whatever W16_ONE_ROW_FMA."""
    s16 = fill = ksum = unsplit = rows16 = few = False
    stages = narrow = None
    min_k = MIN_K_PER_SPLIT
    if dot_dtype is None:  # float32: the product-and-sum below F32_DOT_FROM rows, a dot (F32_DOT_PREC) from it
        dot, bm = (torch.float32, 16) if M >= F32_DOT_FROM else (None, next_pow2(M))
        if dot is not None and F32_DOT_BLOCKS is not None:
            bn, bk, per_sm = F32_DOT_BLOCKS
        elif M == 1 and b_bytes == 4 and F32_ONE_ROW_FMA is not None and not group and (
                F32_ONE_ROW_GLU or not glu) and (F32_ONE_ROW_NORM or not (norm or deferred)):
            (bn, bk, per_sm, stages), ksum, fill = F32_ONE_ROW_FMA, True, True
        else:
            bk = min(256, next_pow2(K), max(64, FMA_TILE // (bm * 8)))
            bn, per_sm = max(8, min(64, next_pow2(N), FMA_TILE // (bm * bk))), 4
    else:
        use_dot, bn, bk, per_sm = TUNED[(min(b_bytes, 2), M == 1)]
        if dot_dtype.itemsize == 1:  # both operands fp8, fed to the tensor cores as they are
            use_dot, (bn, bk, per_sm) = True, FP8_DOT
        elif b_bytes == 1 and M == 1 and FP8_ONE_ROW_FMA is not None and (
                N * K <= FP8_ONE_ROW_MAX_ELEMS or FP8_ONE_ROW_BIG and not glu):
            use_dot, (bn, bk, per_sm) = False, (norm and FP8_NORM_ONE_ROW_FMA) or FP8_ONE_ROW_FMA
            fill, min_k = FP8_ONE_ROW_FILL, max(MIN_K_PER_SPLIT, FP8_ONE_ROW_MIN_K)
            ksum = FP8_ONE_ROW_KSUM or N * K > FP8_ONE_ROW_MAX_ELEMS
            stages = FP8_NORM_ONE_ROW_STAGES if norm or group else FP8_ONE_ROW_STAGES
            narrow = FP8_ONE_ROW_NARROW if not glu and (FP8_ONE_ROW_NARROW_GROUP or not group) else None
        elif (b_bytes == 2 and M == 1 and W16_ONE_ROW_FMA is not None and not (norm or glu or group or w16_dot)
              and N * K <= W16_ONE_ROW_MAX_ELEMS and (not deferred or W16_ONE_ROW_DEFERRED is not None and cdiv(
                  N, W16_ONE_ROW_FMA[0]) <= W16_ONE_ROW_DEFERRED * num_sms(device))):
            use_dot, (bn, bk, per_sm, stages), ksum, fill = False, W16_ONE_ROW_FMA, True, True
            narrow = W16_ONE_ROW_NARROW
        elif norm:  # one row, normalised in the kernel: never the 16-row dot
            use_dot, (bn, bk, per_sm) = False, (FP8_ONE_ROW_FMA if b_bytes == 1 else None) or NORM_ONE_ROW_FMA
        elif b_bytes == 1 and FP8_VIA_FP16 is not None:  # fp8 weights, 16-bit activations
            use_dot, (bn, bk, per_sm) = True, FP8_VIA_FP16
            s16, dot_dtype, fill = dot_dtype == torch.bfloat16, torch.float16, FP8_VIA_FP16_FILL
            if glu and FP8_VIA_FP16_GLU_HALF:
                per_sm = max(1, per_sm // 2)
        if narrow is not None and cdiv(N, bn) < per_sm * num_sms(device):  # the one-row plans' columns
            (bn, bk), unsplit = narrow, True  # do not fill the GPU: narrower blocks, K whole
        dot, bm = (dot_dtype, 16) if use_dot else (None, next_pow2(M))
        if use_dot and b_bytes == 2 and dot_dtype.itemsize == 2:
            stages = W16_DOT_STAGES
            if M > 1:
                fill, rows16 = W16_ROWS_FILL, True
            if not (glu or norm or group or deferred):
                few = W16_DOT_FEW is not None
                slots = W16_DOT_RESIDENT * num_sms(device)
                if W16_DOT_WIDE is not None and slots < cdiv(N, bn) <= slots * 3 // 2:
                    (bn, bk), unsplit = W16_DOT_WIDE, True
    if INTERPRET:
        bn, bk = INTERPRET_BLOCKS
        dot = torch.float32 if dot is not None else None
    bn = min(bn, max(16, next_pow2(N)))
    # (Triton's tl.dot takes K tiles of 16 or more, 32 for fp8: a shorter K is masked within one;
    # the interpreter does not check, the GPU compiler rejects)
    least = 32 if dot is not None and dot.itemsize == 1 else 16
    bk = max(min(bk, max(least, next_pow2(K)), max_block_k), group, 1 if dot is None else least)
    n_blocks = cdiv(N, bn)
    if SPLIT_K_OVERRIDE is not None:
        split = SPLIT_K_OVERRIDE
    elif unsplit:
        split = 1
    else:
        target = per_sm * num_sms(device)
        fill = fill if SPLIT_FILL_OVERRIDE is None else SPLIT_FILL_OVERRIDE
        want = max(1, target // n_blocks) if fill else cdiv(target, n_blocks)
        split = min(want, max(1, K // min_k)) if n_blocks < target else 1
        if rows16 and split == 2 and W16_ROWS_UNSPLIT_K is not None and K <= W16_ROWS_UNSPLIT_K:
            split = 1
    split = max(1, min(split, cdiv(K, bk)))
    k_chunk = cdiv(cdiv(K, split), bk) * bk if K > 0 else bk
    split = max(1, cdiv(K, k_chunk))  # no empty splits
    if few and 2 * n_blocks * split <= 3 * num_sms(device):
        stages = W16_DOT_FEW
    return Plan(bm, bn, bk, split, k_chunk, 4, dot, s16, ksum, None if INTERPRET else stages)


@dataclass
class Operand:
    """A kernel operand: the tensor as loaded (fp8 as uint8 for MODE 2), its MODE, e5m2 or not."""
    t: torch.Tensor
    mode: int = 0
    e5m2: bool = False


@dataclass
class Norm:
    """RMS normalisation of ``a`` inside the kernel (:func:`fastpath.ops.norm.rms_norm`'s
    semantics): weights ``weight`` (K,), ``eps``; ``residual`` (M, K) added first (None: none),
    the sum stored into ``out_residual`` (M, K, rows contiguous). One row (M == 1).
    ``deferred``: ``a`` is only multiplied by the weights as it streams and the sums by
    ``rsqrt(mean(h^2) + eps)`` at the end (any plan; the normalised row is never rounded to 16
    bits); otherwise every program reads the row whole for its rstd first and rounds the
    normalised values as ``rms_norm`` does (one-row plans only). ``group`` (a power of two;
    with ``gate`` (M, K), no residual): each group of ``group`` columns is normalised on its
    own, times ``weight`` (group,) and ``silu(gate)`` (Qwen3.5's gated norm per value head),
    inside each K tile (any plan whose tiles hold whole groups)."""
    weight: torch.Tensor
    eps: float
    residual: Optional[torch.Tensor] = None
    out_residual: Optional[torch.Tensor] = None
    zero_centered: bool = False
    deferred: bool = False
    group: int = 0
    gate: Optional[torch.Tensor] = None


def _norm_args(norm: Optional[Norm], a: torch.Tensor, dummy: torch.Tensor):
    """The kernel's normalisation arguments and flags (off when ``norm`` is None)."""
    if norm is None:
        return (dummy, dummy, dummy, 0, 0, 0, 0, 0.0), {}
    K = a.shape[1]
    prod = TL_DTYPES[torch.promote_types(norm.weight.dtype, a.dtype)]
    if norm.group:
        g = norm.gate
        return (g, norm.weight, dummy, g.stride(0), g.stride(1), 0, norm.weight.stride(0), float(norm.eps)), dict(
            GNORM=norm.group, NORM_DT=prod)
    r = norm.residual if norm.residual is not None else a
    nr = norm.out_residual if norm.out_residual is not None else dummy
    flags = dict(NORM=2 if norm.zero_centered else 1, HAS_RES=norm.residual is not None,
                 NORM_DEFER=norm.deferred,
                 NORM_DT=prod,
                 NORM_K=min(next_pow2(K), 64 if INTERPRET else 4096))
    args = (r, norm.weight, nr, r.stride(0), r.stride(1), nr.stride(0), norm.weight.stride(0), float(norm.eps))
    return args, flags


def launch(a: Operand, b: Operand, out: torch.Tensor, *, plan: Plan, sa=None, sb=None,
           sa_strides=(0, 0), sb_strides=(0, 0), blockwise=False, bias=None, glu=False,
           norm: Optional[Norm] = None):
    """Run ``out = a @ b`` (+ scales, bias) with ``plan``; ``a`` is (M, K), ``b`` is (K, N),
    any strides; ``glu``: ``b`` is (K, 2N), gate columns then up columns, and ``out`` (M, N)
    takes ``silu(a @ gate) * (a @ up)`` (not with block scales). ``sa_strides`` is (stride
    over M, stride over K blocks), ``sb_strides`` (stride over N, over K blocks). ``norm``:
    ``a`` (16-bit or float32) is RMS-normalised in the kernel first (:class:`Norm`). Split-K
    uses two cached workspaces of this device and stream: float32 partials and int32
    counters (zeroed once, returned to zero by the kernel)."""
    M, K = a.t.shape
    N = b.t.shape[1] // (2 if glu else 1)
    p = plan
    dummy = out
    args = (a.t, b.t, sa if sa is not None else dummy, sb if sb is not None else dummy,
            bias if bias is not None else dummy, out)
    n_blocks = cdiv(N, p.block_n)
    if p.split > 1:
        ss = n_blocks if norm is not None and norm.deferred else 0  # the sums of squares after the partials
        args += (workspace(out.device, "matvec.partials", p.split * (M * N * (2 if glu else 1) + ss), torch.float32),
                 workspace(out.device, "matvec.counters", n_blocks, torch.int32, zeroed=True))
    else:
        args += (dummy, dummy)
    strides = (a.t.stride(0), a.t.stride(1), b.t.stride(0), b.t.stride(1),
               sa_strides[0], sa_strides[1], sb_strides[1], sb_strides[0], out.stride(0), out.stride(1), N)
    if norm is not None and (M != 1 or not (norm.deferred or norm.group) and p.block_m != 1):
        raise ValueError(f"norm: one row (on a one-row plan unless deferred), got {M} rows, block_m {p.block_m}")
    if norm is not None and norm.group and (p.block_k % norm.group or p.k_chunk % norm.group or K % norm.group):
        raise ValueError(f"norm: K tiles of whole groups of {norm.group}, got K {K}, block_k {p.block_k}")
    nargs, nflags = _norm_args(norm, a.t, dummy)
    if NORM_W_FIRST and norm is not None and not (norm.deferred or norm.group or blockwise):
        nflags["W_FIRST"] = True
    _MV[(n_blocks, p.split)](
        *args, M, N, K, p.k_chunk, p.split, *strides, *nargs,
        A_MODE=a.mode, B_MODE=b.mode, A_E5M2=a.e5m2, B_E5M2=b.e5m2, SCALE_A=sa is not None,
        SCALE_B=sb is not None, BLOCKWISE=blockwise, HAS_BIAS=bias is not None, SPLIT=p.split > 1,
        DOT=p.dot is not None, DT=TL_DTYPES[p.dot or torch.float32], S16=p.s16, GLU=glu,
        BLOCK_M=p.block_m, BLOCK_N=p.block_n, BLOCK_K=p.block_k, KSUM=p.ksum, STAGES=p.stages, num_warps=p.warps,
        F32P=F32_DOT_PREC if p.dot == torch.float32 else "ieee",
        LATE=(LATE_GLU or not glu) and LATE_SPLIT in (None, p.split > 1), **nflags)
    return out
