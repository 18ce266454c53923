"""``l2_prefetch``: start streaming tensors from GPU memory into the L2 cache, and return at
once. A decode step alternates kernels that stream weights (matrix-vector products, experts)
with kernels bound by latency (norms, rotary, attention over a short cache, routing), during
which the memory system idles. A prefetch launched before a latency-bound stretch moves the
next projection's weights into L2 meanwhile, so that the projection reads them from L2.

The kernel issues Hopper's bulk L2 prefetch (``cp.async.bulk.prefetch.L2.global``, the copy
engine: one instruction per ``CHUNK`` bytes, nothing waits for the data) and exits. It is a
hint: results never depend on it. Launched as a programmatic dependent launch it starts
while the kernel before it finishes and lets the next kernel launch at once; it waits for
its predecessor before it exits, so a kernel after it still sees every earlier one complete.

Where it cannot run (devices other than NVIDIA capability 9.0+, Triton's interpreter, CPU)
it does nothing.
"""
from __future__ import annotations

import torch

from .._core.backend import INTERPRET, capability, tl, triton, use_triton
from .._core.launch import Launcher, cdiv

#: Bytes per bulk-prefetch instruction (a multiple of 16) and instructions per program (one
#: warp: one per thread).
CHUNK = 32768
PER_PROGRAM = 32


@triton.jit
def _l2_prefetch_kernel(base, nbytes, CHUNK: tl.constexpr, PER: tl.constexpr, PDL: tl.constexpr = 0):
    offs = (tl.program_id(0).to(tl.int64) * PER + tl.arange(0, PER)) * CHUNK
    size = (tl.minimum(nbytes - offs, CHUNK) // 16 * 16).to(tl.int32)  # <= 0 past the end
    addr = (base + offs).to(tl.int64)  # base is a uint8 pointer
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [addr, size], dtype=tl.int32, is_pure=False, pack=1)
    if PDL > 0:  # let the next kernel launch now; exit only once the previous one is complete
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()


_PREFETCH = Launcher(_l2_prefetch_kernel, pdl=True)


def prefetch_ok(t: torch.Tensor) -> bool:
    """Whether :func:`l2_prefetch` does anything for ``t``: a contiguous, 16-byte aligned CUDA
    tensor on an NVIDIA GPU of capability 9.0+ (not Triton's interpreter)."""
    return (not INTERPRET and t.device.type == "cuda" and torch.version.hip is None and use_triton(t)
            and capability(t.device.index if t.device.index is not None else torch.cuda.current_device()) >= (9, 0)
            and t.is_contiguous() and t.data_ptr() % 16 == 0)


def l2_prefetch(*tensors: torch.Tensor) -> None:
    """Start moving each tensor's bytes into the L2 cache; returns at once (no host sync,
    capturable in a CUDA graph). A no-op for tensors :func:`prefetch_ok` rejects, ``None``
    and empty tensors.

    Example
    -------
    >>> fastpath.ops.prefetch.l2_prefetch(layer.o.weight)   # before attention, in decode
    """
    for t in tensors:
        if t is None or t.numel() == 0 or not prefetch_ok(t):
            continue
        nbytes = t.numel() * t.element_size()
        raw = t.view(-1).view(torch.uint8)
        _PREFETCH[(cdiv(nbytes, CHUNK * PER_PROGRAM),)](raw, nbytes, CHUNK=CHUNK, PER=PER_PROGRAM, num_warps=1)


__all__ = ["l2_prefetch", "prefetch_ok"]
