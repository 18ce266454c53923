"""Weights brought into the GPU's L2 cache on a second stream, beside a decode step's
latency-bound kernels: a hint for the projection after them.

A decode step alternates kernels that stream weights at the memory bandwidth (the
projections) with kernels that wait on latency and read almost nothing (rotary, attention over
a short cache, its combine). While the latter run, memory is idle. :class:`Prefetcher` forks
a side stream at that point and runs :func:`l2_prefetch` of the weights the next projection
reads; the main stream does not wait for it (nothing in the step depends on it: weights are
only read), only the end of the step joins the two, as a CUDA graph capture needs. Nothing
changes in any result. Earlier tries issued the prefetch from a kernel on the main stream,
whose programs then could not retire before the bytes landed (docs/perf-notes.md, sessions
eleven, fifteen and twenty-six).

Where it cannot help (no CUDA device, Triton's interpreter, ROCm, compute capability below
9.0 for the bulk form) :class:`Prefetcher` does nothing.
"""
from __future__ import annotations

from typing import Optional

import torch

from .backend import INTERPRET, capability, tl, triton
from .launch import Launcher, cdiv

#: How: 1 Hopper's bulk prefetch (``cp.async.bulk.prefetch.L2.global``, one instruction a
#: chunk, no registers held), 2 plain loads kept in L2 only (``.cg``), summed into a scratch word.
MODE = 1
#: Programs of one prefetch launch (bulk: 32 lanes a program, one chunk each; loads: 8 warps).
PROGRAMS = 32
SCRATCH_WORDS = 1024  # the load form's sink: one word a program, so PROGRAMS <= this
_LOAD_BLOCK = 4096  # int32 words a load step of MODE 2 (16 KB)


@triton.jit
def _l2_prefetch_kernel(ptr, nbytes, chunk, scratch_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """Program ``p`` asks for bytes ``[p * 32 * chunk, (p + 1) * 32 * chunk)`` of ``[ptr, ptr +
    nbytes)`` (``nbytes`` and ``chunk`` multiples of 16, ``ptr`` 16-aligned; ``ptr`` points to
    bytes for MODE 1, to int32 words for MODE 2)."""
    p = tl.program_id(0).to(tl.int64)
    if MODE == 1:
        off = (p * 32 + tl.arange(0, 32)) * chunk
        size = tl.minimum(tl.maximum(nbytes - off, 0), chunk).to(tl.int32)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r", [ptr + off, size], dtype=tl.int32, is_pure=False, pack=1)
    else:
        lo = p * 8 * chunk  # 32 chunks of chunk // 4 words
        hi = tl.minimum(lo + 8 * chunk, nbytes // 4)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for s in range(lo, hi, BLOCK):
            o = s + tl.arange(0, BLOCK)
            acc ^= tl.load(ptr + o, mask=o < hi, other=0, cache_modifier=".cg")
        tl.store(scratch_ptr + p, tl.xor_sum(acc, 0))


_PF = Launcher(_l2_prefetch_kernel)


def prefetch_on(device: torch.device) -> bool:
    """Whether :func:`l2_prefetch` does anything on ``device``: CUDA (not ROCm), compute
    capability 9.0+ (the bulk form; the load form too, to keep one rule), never in Triton's
    interpreter."""
    if INTERPRET or device.type != "cuda" or torch.version.hip is not None:
        return False
    return capability(device.index if device.index is not None else torch.cuda.current_device()) >= (9, 0)


def l2_prefetch(t: torch.Tensor, scratch: torch.Tensor) -> None:
    """Ask for ``t``'s bytes to be brought into L2, on the current stream (a hint: a tensor
    that is not contiguous or not 16-byte aligned is skipped, and the bytes past its last
    multiple of 16). ``scratch``: int32, one word a program (the load form's sink)."""
    nbytes = t.numel() * t.element_size() // 16 * 16
    if nbytes == 0 or not t.is_contiguous() or t.data_ptr() % 16:
        return
    chunk = cdiv(cdiv(nbytes, PROGRAMS * 32), 16) * 16
    grid = cdiv(nbytes, 32 * chunk)
    if grid > scratch.numel():
        raise ValueError(f"scratch: expected at least {grid} words (prefetch.PROGRAMS), got {scratch.numel()}")
    flat = t.reshape(-1).view(torch.uint8)[:nbytes]
    _PF[(grid,)](flat if MODE == 1 else flat.view(torch.int32), nbytes, chunk, scratch, MODE=MODE,
                 BLOCK=_LOAD_BLOCK, num_warps=1 if MODE == 1 else 8)


class Prefetcher:
    """A side stream for :func:`l2_prefetch` within one decode step: :meth:`fetch` forks it
    from the current stream (it starts once the work issued so far ends) and asks for the
    tensors there; :meth:`join` makes the current stream wait for it (call it before the step
    ends: a CUDA graph capture must end joined). Inert (``active`` False) where
    :func:`prefetch_on` is False."""

    def __init__(self, device: torch.device):
        self.active = prefetch_on(device)
        self.stream: Optional[torch.cuda.Stream] = torch.cuda.Stream(device) if self.active else None
        self.scratch = torch.zeros(SCRATCH_WORDS, dtype=torch.int32, device=device) if self.active else None
        self._forked = False

    def fetch(self, *tensors: torch.Tensor) -> None:
        if not self.active:
            return
        self.stream.wait_stream(torch.cuda.current_stream(self.stream.device))
        with torch.cuda.stream(self.stream):
            for t in tensors:
                l2_prefetch(t, self.scratch)
        self._forked = True

    def join(self) -> None:
        if self._forked:
            torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)
            self._forked = False
