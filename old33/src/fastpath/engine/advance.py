"""The decode loop's bookkeeping after sampling, in one launch: the sampled tokens become the
next step's input, positions advance, the next step's key counts are written, the tokens go
to the ring slot of this step, and the step counter advances.

Five small PyTorch operations did this before (plus two in the model for the key counts);
in a CUDA-graph replay each is a launch of its own, ~1.4 us apiece on the H200.
"""
from __future__ import annotations

import torch

from .._core.backend import pdl_start, tl, triton, use_triton
from .._core.launch import Launcher, next_pow2


@triton.jit
def _advance_kernel(nxt_ptr, tok_ptr, pos_ptr, kvlen_ptr, ring_ptr, step_ptr, B, R, s_ring,
                    BLOCK: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    r = tl.arange(0, BLOCK)
    m = r < B
    step = tl.load(step_ptr)
    t = tl.load(nxt_ptr + r, mask=m)
    p = tl.load(pos_ptr + r, mask=m) + 1
    tl.store(tok_ptr + r, t, mask=m)
    tl.store(pos_ptr + r, p, mask=m)
    tl.store(kvlen_ptr + r, (p + 1).to(tl.int32), mask=m)
    tl.store(ring_ptr + (step % R) * s_ring + r, t, mask=m)
    tl.debug_barrier()  # every thread has read the step counter
    tl.store(step_ptr, step + 1)


_ADVANCE = Launcher(_advance_kernel, pdl=True)


def advance(nxt: torch.Tensor, tok: torch.Tensor, pos: torch.Tensor, kv_len: torch.Tensor,
            ring: torch.Tensor, step_idx: torch.Tensor) -> None:
    """``tok = nxt``; ``pos += 1``; ``kv_len = pos + 1`` (int32, for the next step);
    ``ring[step_idx % len(ring)] = nxt``; ``step_idx += 1``. All (B,) but ``ring``
    (R, >= B) and ``step_idx`` (1,); contiguous rows; no host synchronisation."""
    B = nxt.shape[0]
    if not use_triton(nxt):
        tok.copy_(nxt)
        pos += 1
        kv_len.copy_(pos + 1)
        ring[:, :B].index_copy_(0, step_idx % ring.shape[0], nxt[None])
        step_idx += 1
        return
    _ADVANCE[(1,)](nxt, tok, pos, kv_len, ring, step_idx, B, ring.shape[0], ring.stride(0),
                   BLOCK=max(16, next_pow2(B)), num_warps=1)
