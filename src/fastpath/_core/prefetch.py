"""Bringing a tensor's bytes into the GPU's L2 cache from inside a kernel that has time to
spare: a hint for the kernel after it.

A decode step alternates kernels that stream weights from memory (the projections, at the
bandwidth) with kernels that wait on latency and move almost nothing (rotary, attention over
a short cache, routing). While the latter run, memory is idle. A latency-bound kernel that
knows which weights come next can ask for them: :func:`l2_prefetch` issues Hopper's bulk
prefetch (``cp.async.bulk.prefetch.L2.global``), which returns at once, produces no value and
needs no wait; the projection then finds its weights in L2. Nothing changes in any result:
where the instruction does not exist (before compute capability 9.0, ROCm, Triton's
interpreter) the hint is simply not issued.

A kernel takes ``(pf_ptr, pf_bytes, pf_chunk, PF: tl.constexpr)``, filled from
:func:`prefetch_args`, and calls ``l2_prefetch(pf_ptr, pf_bytes, pf_chunk, part, PF)`` with
its program's index among ``parts``: each of its 32 lanes asks for one chunk.
"""
from __future__ import annotations

from typing import Optional

import torch

from .backend import INTERPRET, capability, tl, triton

LANES = 32  # lanes of a program that each ask for a chunk (l2_prefetch spells it 32)
#: How: 1 Hopper's bulk prefetch (one instruction a chunk), 2 one L2 prefetch a 128-byte line.
MODE = 1
#: Smallest chunk a lane asks for (bytes; a multiple of 16, as the instruction needs).
MIN_CHUNK = 4096


@triton.jit
def l2_prefetch(ptr, nbytes, chunk, part, PF: tl.constexpr):
    """Lanes of program ``part`` ask for chunks ``part * 32 + lane`` of ``chunk`` bytes of
    ``[ptr, ptr + nbytes)`` (``nbytes`` and ``chunk`` multiples of 16, ``ptr`` 16-aligned) to
    be brought into L2: ``PF`` 1 one bulk prefetch a chunk, 2 one ``prefetch.global.L2`` a
    128-byte line. Nothing when ``PF`` is 0."""
    if PF > 0:
        base = ptr.to(tl.pointer_type(tl.int8))
        off = (part.to(tl.int64) * 32 + tl.arange(0, 32)) * chunk  # (32: LANES)
        if PF == 1:
            size = tl.minimum(nbytes - off, chunk).to(tl.int32)
            tl.inline_asm_elementwise(
                "{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
                "=r,l,r", [base + off, size], dtype=tl.int32, is_pure=False, pack=1)
        else:
            for i in range(0, chunk, 128):
                o = off + i
                tl.inline_asm_elementwise(
                    "{ .reg .pred p; setp.lt.s64 p, $2, $3; @p prefetch.global.L2::evict_last [$1]; mov.u32 $0, 0; }",
                    "=r,l,l,l", [base + o, o, nbytes + tl.zeros_like(o)], dtype=tl.int32, is_pure=False, pack=1)


def prefetch_on(device: torch.device) -> bool:
    """Whether kernels on ``device`` can issue the bulk L2 prefetch (CUDA, capability 9.0+)."""
    if INTERPRET or device.type != "cuda" or torch.version.hip is not None:
        return False
    return capability(device.index if device.index is not None else torch.cuda.current_device()) >= (9, 0)


def prefetch_args(t: Optional[torch.Tensor], stand_in: torch.Tensor, parts: int) -> tuple:
    """``(pf_ptr, pf_bytes, pf_chunk, PF)`` (``PF``: :data:`MODE`, 0 when off) for a kernel of ``parts`` programs on
    ``stand_in``'s device that prefetches ``t`` (``None``: nothing; ``pf_ptr`` is then
    ``stand_in``, never read). A hint only: a tensor on another device, not contiguous or not
    16-byte aligned is not prefetched (its last bytes past a multiple of 16 neither)."""
    if t is not None and not isinstance(t, torch.Tensor):
        raise TypeError(f"prefetch: expected a Tensor or None, got {type(t).__name__}")
    nbytes = 0 if t is None else t.numel() * t.element_size() // 16 * 16
    if (nbytes == 0 or t.device != stand_in.device or not t.is_contiguous() or t.data_ptr() % 16
            or not prefetch_on(stand_in.device)):
        return stand_in, 0, MIN_CHUNK, 0
    chunk = max(MIN_CHUNK, -(-nbytes // (parts * LANES * 16)) * 16)
    return t, nbytes, chunk, MODE
