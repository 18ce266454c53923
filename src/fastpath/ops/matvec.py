"""The matrix-vector kernel shared by decode-time ``linear`` and small-M ``scaled_mm``.

``out[m, n] = sum_k a[m, k] * b[k, n]`` for M <= 16 rows: each program owns ``BLOCK_N``
output columns for all rows (every weight byte is read once for all of them) and streams
one chunk of K; when N alone cannot keep every SM busy, K is split over programs and
``_splitk_reduce`` adds the fp32 partials in a fixed order (deterministic, no atomics).

Two ways to reduce a tile: ``DOT`` pads the rows to 16 and calls ``tl.dot`` on 16-bit
operands (tensor cores: large tiles at little register cost, for 2..16 rows), otherwise a
float32 broadcast-multiply-and-sum (one row, or float32 inputs). Both accumulate in float32.

Operands load as float (``MODE 0``), as fp8 converted by the hardware (``MODE 1``, NVIDIA
capability 8.9+) or as ``uint8`` fp8 bits decoded exactly in registers (``MODE 2``: older
GPUs, ROCm and Triton's interpreter). Scales: per-row of ``a`` and per-column of ``b``
(a stride of 0 broadcasts one tensor-wise scale), applied once in the epilogue, or
1x128 / 128x128 block scales applied per K tile (``BLOCKWISE``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from typing import Optional

from .._core.backend import INTERPRET, num_sms, tl, triton
from .._core.launch import cdiv, next_pow2
from .fp8.bits import _decode


@triton.jit
def _load_as(ptrs, mask, MODE: tl.constexpr, E5M2: tl.constexpr, DT: tl.constexpr):
    """Load a tile and convert it to ``DT`` (exact for fp8 into any of fp32/bf16/fp16)."""
    if MODE == 0:
        return tl.load(ptrs, mask=mask, other=0.0).to(DT)
    elif MODE == 1:  # no `other=`: it cannot be cast to float8
        return tl.where(mask, tl.load(ptrs, mask=mask).to(DT), 0.0)
    else:
        return _decode(tl.load(ptrs, mask=mask, other=0), E5M2).to(DT)


@triton.jit
def _block_scales(sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, k0, ssa_m, ssa_k, ssb_k, ssb_n):
    """The 1x128 scales of ``a`` and 128x128 scales of ``b`` for the K tile at ``k0``."""
    kb = k0 // 128
    sa = tl.load(sa_ptr + offs_m * ssa_m + kb * ssa_k, mask=mmask, other=0.0)
    sb = tl.load(sb_ptr + kb * ssb_k + (offs_n // 128) * ssb_n, mask=nmask, other=0.0)
    return sa, sb


@triton.jit
def _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
              SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, HAS_BIAS: tl.constexpr, RAW: tl.constexpr):
    """Row / column scales, bias, cast, store. RAW: a split-K partial (fp32, no bias)."""
    mmask = offs_m < M
    nmask = offs_n < N
    if SCALE_A:
        acc = acc * tl.load(sa_ptr + offs_m * ssa_m, mask=mmask, other=0.0)[:, None]
    if SCALE_B:
        acc = acc * tl.load(sb_ptr + offs_n * ssb_n, mask=nmask, other=0.0)[None, :]
    if HAS_BIAS and not RAW:
        acc = acc + tl.load(bias_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * som + offs_n[None, :] * son
    tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


@triton.jit
def _mv_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, out_ptr, M, N, K, k_chunk,
               sam, sak, sbk, sbn, ssa_m, ssa_k, ssb_k, ssb_n, som, son,
               A_MODE: tl.constexpr, B_MODE: tl.constexpr, A_E5M2: tl.constexpr, B_E5M2: tl.constexpr,
               SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, BLOCKWISE: tl.constexpr,
               HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr, DOT: tl.constexpr, DT: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # SPLIT: out_ptr is an fp32 (S, M, N) workspace and program (n, s) writes partial s.
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
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        kmask = offs_k < k_hi
        a = _load_as(a_rows + offs_k[None, :] * sak, mmask[:, None] & kmask[None, :], A_MODE, A_E5M2, DT)
        b = _load_as(b_cols + offs_k[:, None] * sbk, kmask[:, None] & nmask[None, :], B_MODE, B_E5M2, DT)
        if not DOT:
            d = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
        elif DT == tl.float32:  # the interpreter (its 16-bit tl.dot is unreliable)
            d = tl.dot(a, b, input_precision="ieee")
        else:
            d = tl.dot(a, b)
        if BLOCKWISE:  # BLOCK_K divides 128: one scale pair per tile
            sa, sb = _block_scales(sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, k0, ssa_m, ssa_k, ssb_k, ssb_n)
            d = d * sa[:, None] * sb[None, :]
        acc += d
    if SPLIT:
        out_ptr += pid_k.to(tl.int64) * M * N
    _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
              SCALE_A and not BLOCKWISE, SCALE_B and not BLOCKWISE, HAS_BIAS, SPLIT)


@triton.jit
def _splitk_reduce(ws_ptr, bias_ptr, out_ptr, M, N, S, som, son, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, S):  # fixed order: deterministic
        acc += tl.load(ws_ptr + s * M * N + idx, mask=mask, other=0.0)
    n = idx % N
    if HAS_BIAS:
        acc += tl.load(bias_ptr + n, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + (idx // N) * som + n * son, acc.to(out_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------- plan

#: Tuning knobs (measured on the H200, see docs/perf-notes.md; the interpreter uses small
#: blocks so that the tests cover several blocks, masked tails and split-K).
FMA_TILE = 2048 if INTERPRET else 8192  # BLOCK_M * BLOCK_N * BLOCK_K of the float32 path
MAX_BLOCK_K = 32 if INTERPRET else 256
MIN_BLOCK_K = 16 if INTERPRET else 64  # 128 bytes of a bf16 weight row per step
MAX_BLOCK_N = 16 if INTERPRET else 64
MIN_BLOCK_N = 4 if INTERPRET else 8
DOT_BLOCKS = (16, 32) if INTERPRET else (64, 128)  # BLOCK_N, BLOCK_K of the tl.dot path
DOT_MIN_ROWS = 2  # 16-bit operands with this many rows or more take tl.dot
MIN_K_PER_SPLIT = 64 if INTERPRET else 1024  # smallest share of K worth a program
PROGRAMS_PER_SM = 4  # split K until there are this many programs per multiprocessor
#: Tests set this: force a split-K count (clamped to what K allows).
SPLIT_K_OVERRIDE: Optional[int] = None
_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@dataclass(frozen=True)
class Plan:
    block_m: int
    block_n: int
    block_k: int
    split: int  # programs along K
    k_chunk: int  # K per split, a multiple of block_k
    warps: int
    dot: Optional[torch.dtype]  # tl.dot on operands converted to this dtype; None: float32 FMA


def plan(M: int, N: int, K: int, device: torch.device, dot_dtype: Optional[torch.dtype],
         max_block_k: int = 1 << 30) -> Plan:
    """Blocks and split-K for ``(M, K) @ (K, N)``, plain int math only. ``dot_dtype``: the
    16-bit dtype the operands convert to exactly for ``tl.dot`` (None: float32 only);
    ``max_block_k``: a cap that keeps block-scale tiles whole."""
    dot = dot_dtype if (dot_dtype is not None and M >= DOT_MIN_ROWS) else None
    if dot is not None:
        bm = 16
        bn = min(DOT_BLOCKS[0], max(16, next_pow2(N)))
        bk = min(DOT_BLOCKS[1], max(16, next_pow2(K)), max_block_k)
        if INTERPRET:
            dot = torch.float32
    else:
        bm = next_pow2(M)
        bk = min(MAX_BLOCK_K, next_pow2(K), max(MIN_BLOCK_K, FMA_TILE // (bm * MIN_BLOCK_N)), max_block_k)
        bn = max(MIN_BLOCK_N, min(MAX_BLOCK_N, next_pow2(N), FMA_TILE // (bm * bk)))
    n_blocks = cdiv(N, bn)
    if SPLIT_K_OVERRIDE is not None:
        split = SPLIT_K_OVERRIDE
    else:
        target = PROGRAMS_PER_SM * num_sms(device)
        split = min(cdiv(target, n_blocks), max(1, K // MIN_K_PER_SPLIT)) if n_blocks < target else 1
    split = max(1, min(split, cdiv(K, bk)))
    k_chunk = cdiv(cdiv(K, split), bk) * bk if K > 0 else bk
    split = max(1, cdiv(K, k_chunk))  # no empty splits
    warps = 4 if (dot is not None or bm * bn * bk <= 8192) else 8
    return Plan(bm, bn, bk, split, k_chunk, warps, dot)


@dataclass
class Operand:
    """A kernel operand: the tensor as loaded (fp8 as uint8 for MODE 2), its MODE, e5m2 or not."""
    t: torch.Tensor
    mode: int = 0
    e5m2: bool = False


def launch(a: Operand, b: Operand, out: torch.Tensor, *, plan: Plan, sa=None, sb=None,
           sa_strides=(0, 0), sb_strides=(0, 0), blockwise=False, bias=None, workspace_fn=None):
    """Run ``out = a @ b`` (+ scales, bias) with ``plan``; ``a`` is (M, K), ``b`` is (K, N),
    any strides. ``sa_strides`` is (stride over M, stride over K blocks), ``sb_strides``
    (stride over N, over K blocks). ``workspace_fn(numel)`` gives the fp32 split-K buffer."""
    M, K = a.t.shape
    N = b.t.shape[1]
    p = plan
    bm, bn, bk, split, k_chunk, warps = p.block_m, p.block_n, p.block_k, p.split, p.k_chunk, p.warps
    dummy = out
    args = (a.t, b.t, sa if sa is not None else dummy, sb if sb is not None else dummy,
            bias if bias is not None else dummy)
    strides = (a.t.stride(0), a.t.stride(1), b.t.stride(0), b.t.stride(1),
               sa_strides[0], sa_strides[1], sb_strides[1], sb_strides[0])
    flags = dict(A_MODE=a.mode, B_MODE=b.mode, A_E5M2=a.e5m2, B_E5M2=b.e5m2, SCALE_A=sa is not None,
                 SCALE_B=sb is not None, BLOCKWISE=blockwise, HAS_BIAS=bias is not None,
                 DOT=p.dot is not None, DT=_TL[p.dot or torch.float32],
                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps)
    grid = (cdiv(N, bn), split)
    if split == 1:
        _mv_kernel[grid](*args, out, M, N, K, k_chunk, *strides, out.stride(0), out.stride(1),
                         SPLIT=False, **flags)
        return out
    ws = workspace_fn(split * M * N)
    _mv_kernel[grid](*args, ws, M, N, K, k_chunk, *strides, N, 1, SPLIT=True, **flags)
    blk = 256 if INTERPRET else 1024
    _splitk_reduce[(cdiv(M * N, blk),)](ws, args[4], out, M, N, split, out.stride(0), out.stride(1),
                                        HAS_BIAS=bias is not None, BLOCK=blk, num_warps=4)
    return out
