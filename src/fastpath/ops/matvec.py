"""The matrix-vector kernel shared by decode-time ``linear`` and small-M ``scaled_mm``.

``out[m, n] = sum_k a[m, k] * b[k, n]`` for M <= 16 rows: each program owns ``BLOCK_N``
output columns for all rows (every weight byte is read once for all of them) and streams
one chunk of K; when N alone cannot keep every SM busy, K is split over programs and
``_splitk_reduce`` adds the fp32 partials in a fixed order (deterministic, no atomics).

Operands load as float (``MODE 0``), as fp8 converted by the hardware (``MODE 1``, NVIDIA
capability 8.9+) or as ``uint8`` fp8 bits decoded exactly in registers (``MODE 2``: older
GPUs, ROCm and Triton's interpreter). Scales: per-row of ``a`` and per-column of ``b``
(a stride of 0 broadcasts one tensor-wise scale), applied once in the epilogue, or
1x128 / 128x128 block scales applied per K tile (``BLOCKWISE``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.backend import INTERPRET, tl, triton
from .._core.launch import cdiv
from .fp8.bits import _decode


@triton.jit
def _load_f32(ptrs, mask, MODE: tl.constexpr, E5M2: tl.constexpr):
    if MODE == 0:
        return tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    elif MODE == 1:  # no `other=`: it cannot be cast to float8
        return tl.where(mask, tl.load(ptrs, mask=mask).to(tl.float32), 0.0)
    else:
        return _decode(tl.load(ptrs, mask=mask, other=0), E5M2)


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
               HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr,
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
        a = _load_f32(a_rows + offs_k[None, :] * sak, mmask[:, None] & kmask[None, :], A_MODE, A_E5M2)
        b = _load_f32(b_cols + offs_k[:, None] * sbk, kmask[:, None] & nmask[None, :], B_MODE, B_E5M2)
        d = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
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


@dataclass
class Operand:
    """A kernel operand: the tensor as loaded (fp8 as uint8 for MODE 2), its MODE, e5m2 or not."""
    t: torch.Tensor
    mode: int = 0
    e5m2: bool = False


def launch(a: Operand, b: Operand, out: torch.Tensor, *, plan, sa=None, sb=None,
           sa_strides=(0, 0), sb_strides=(0, 0), blockwise=False, bias=None, workspace_fn=None):
    """Run ``out = a @ b`` (+ scales, bias) with ``plan = (BLOCK_M, BLOCK_N, BLOCK_K, split,
    k_chunk, num_warps)``; ``a`` is (M, K), ``b`` is (K, N), any strides. ``sa_strides`` is
    (stride over M, stride over K blocks), ``sb_strides`` (stride over N, over K blocks).
    ``workspace_fn(numel)`` gives the fp32 split-K buffer."""
    M, K = a.t.shape
    N = b.t.shape[1]
    bm, bn, bk, split, k_chunk, warps = plan
    dummy = out
    args = (a.t, b.t, sa if sa is not None else dummy, sb if sb is not None else dummy,
            bias if bias is not None else dummy)
    strides = (a.t.stride(0), a.t.stride(1), b.t.stride(0), b.t.stride(1),
               sa_strides[0], sa_strides[1], sb_strides[1], sb_strides[0])
    flags = dict(A_MODE=a.mode, B_MODE=b.mode, A_E5M2=a.e5m2, B_E5M2=b.e5m2, SCALE_A=sa is not None,
                 SCALE_B=sb is not None, BLOCKWISE=blockwise, HAS_BIAS=bias is not None,
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
