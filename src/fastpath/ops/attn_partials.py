"""Split-KV decode attention before its combine, for the kernel that reads the attention output.

The decode kernel (:mod:`fastpath.ops.attention`) splits the keys over programs; each writes,
per row of its block (a query head of a GQA group, one query token), the running max ``m``
(log2 domain), the sum ``l`` and the unnormalised output ``acc`` into a float32 workspace::

    ws[(prog * n_split + s) * STRIDE + ...]:  m (BLOCK_R) | l (BLOCK_R) | acc (BLOCK_R x DV)
    prog = (b * Hkv + head // group) * n_rb + (head % group) // BLOCK_R,  row = (head % group) % BLOCK_R

and a combine launch turns the splits into the output. :class:`Partials` hands that workspace
to the next kernel instead (the output projection, :func:`fastpath.ops.linear.attention_output_linear`),
whose K tiles of whole heads combine their heads as they load them (:func:`combine_heads`):
one launch a layer less.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .._core.backend import tl, triton
from .norm import round_to


@dataclass
class Partials:
    """One query token's split decode attention (batch 1): ``ws`` laid out as the module says,
    ``heads`` query heads of ``dv`` (a power of two) values, ``gate`` (heads, dv) strides or None
    (``out * sigmoid(gate)``), ``out`` the output buffer (1, heads, 1, dv) of the query's dtype;
    ``combine()`` runs the combine launch into ``out`` and returns it."""
    ws: torch.Tensor
    split: int
    group: int
    n_rb: int
    block_r: int
    dv: int
    heads: int
    gate: Optional[torch.Tensor]
    out: torch.Tensor
    combine: Callable[[], torch.Tensor]


@triton.jit
def combine_heads(c_ptr, g_ptr, k0, k_hi, n_split, group, n_rb, sgh, sgd, BK: tl.constexpr, DV: tl.constexpr,
                  BR: tl.constexpr, S_PAD: tl.constexpr, GATED: tl.constexpr, OT: tl.constexpr):
    """Columns ``[k0, k0 + BK)`` (``BK // DV`` whole heads; those at ``>= k_hi`` zero) of the
    attention output row, float32 ``[1, BK]``: each head's splits combined, divided by their
    sum, gated, rounded to ``OT`` as the combine launch stores them."""
    HT: tl.constexpr = BK // DV
    heads = k0 // DV + tl.arange(0, HT)
    hmask = heads * DV < k_hi
    rr = heads % group
    r = rr % BR
    STRIDE: tl.constexpr = BR * (DV + 2)
    first = c_ptr + ((heads // group) * n_rb + rr // BR).to(tl.int64) * n_split * STRIDE
    sp = tl.arange(0, S_PAD)
    smask = (sp < n_split)[:, None] & hmask[None, :]
    stats = first[None, :] + sp[:, None] * STRIDE + r[None, :]
    m = tl.load(stats, mask=smask, other=float("-inf"))
    big = tl.max(m, axis=0)
    big = tl.where(big == float("-inf"), 0.0, big)
    wgt = tl.exp2(m - big[None, :])
    lsum = tl.sum(tl.load(stats + BR, mask=smask, other=0.0) * wgt, axis=0)
    d = tl.arange(0, DV)
    accp = first[None, :, None] + sp[:, None, None] * STRIDE + 2 * BR + r[None, :, None] * DV + d[None, None, :]
    acc = tl.sum(tl.load(accp, mask=smask[:, :, None], other=0.0) * wgt[:, :, None], axis=0)
    o = acc / tl.where(lsum == 0.0, 1.0, lsum)[:, None]
    if GATED:
        g = tl.load(g_ptr + heads[:, None].to(tl.int64) * sgh + d[None, :] * sgd, mask=hmask[:, None],
                    other=0.0).to(tl.float32)
        o = round_to(o, OT).to(tl.float32) * round_to(1.0 / (1.0 + tl.exp(-g)), OT).to(tl.float32)
    return tl.reshape(round_to(o, OT).to(tl.float32), [1, BK])
