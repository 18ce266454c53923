"""bincount with privatised histograms, as ``torch.bincount`` (weights, minlength).

One launch counts, a second adds the private copies into the output. A fixed number of
programs each walk a strided set of tiles:

* few bins (``nbins < 256``, no weights): each program keeps its own histogram in registers
  (``tl.histogram``: ballots and popcounts, no atomics, indifferent to skew) and adds it to
  a shared copy once at the end.
* more bins, no weights: per tile, the values within a 127-bin window are counted with
  ``tl.histogram`` and added with one atomic per non-empty bin (a run of equal or clustered
  values costs a few atomics per tile); the rest are added one atomic each. The window
  starts at the tile's minimum, or 63 below the tile's first value when that is higher
  (the first value is likely the hot one of skewed data). The atomics go to private
  copies of the bins (program ``p`` uses copy ``p % COPIES``), so that skewed data
  contends only within a program.
* weights: one atomic add per value into the private copies.

The copies live in a per-(device, stream) workspace that the second launch adds up and
returns to zero. Counts are exact; weighted sums use float atomics (order-dependent
rounding, as PyTorch's CUDA kernel).

Sizes and syncs: the output has ``max(max(input) + 1, minlength)`` bins. With ``minlength``
given, the kernel counts into ``minlength`` bins and flags values outside them; the
default ``validate=True`` reads the flag once (one host sync, as ``torch.bincount``, which
syncs too) to raise on negative values and to redo the count with more bins when a value is
``>= minlength``. ``validate=False`` skips that read: no sync, CUDA-graph capturable, the
size is ``minlength`` and values outside ``[0, minlength)`` are skipped unchecked. Without
``minlength`` the size needs the maximum: one ``aminmax`` and one sync before counting.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import check_tensor
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.registry import register_op

#: Values per tile; bins below which a register histogram is used; the sliding window's bins;
#: the most elements all private copies may hold.
BLOCK = 256 if INTERPRET else 4096
HIST_MAX = 256
WINDOW = 128
COPY_BUDGET = 1 << 22
#: Elements (copies x bins) the summing kernel loads per step.
SUM_TILE = 64 if INTERPRET else 4096
INDEX_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _bincount_kernel(x_ptr, w_ptr, copies_ptr, flag_ptr, n, sx, sw, nbins, num_tiles, COPIES,
                     BLOCK: tl.constexpr, W: tl.constexpr, MODE: tl.constexpr, CHECK: tl.constexpr):
    """MODE 0: register histogram of W bins (nbins < W); 1: sliding W-bin window + atomics;
    2: weighted atomics. CHECK: flag bit 1 for a negative value, bit 2 for one >= nbins."""
    pid = tl.program_id(0)
    dst = copies_ptr + (pid % COPIES).to(tl.int64) * nbins
    lanes = tl.arange(0, W)
    if MODE == 0:
        acc = tl.zeros([W], dtype=tl.int32)
    bad = tl.zeros([BLOCK], dtype=tl.int32)
    for t in range(pid, num_tiles, tl.num_programs(0)):
        offs = tl.cast(t, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        valid = offs < n
        v = tl.load(x_ptr + offs * sx, mask=valid, other=0).to(tl.int64)
        ok = valid & (v >= 0) & (v < nbins)
        if CHECK:
            bad |= tl.where(valid & (v < 0), 1, 0) | tl.where(valid & (v >= nbins), 2, 0)
        v = tl.where(ok, v, 0)
        if MODE == 0:
            acc += tl.histogram(tl.where(ok, v, W - 1).to(tl.int32), W)
        elif MODE == 1:
            # window: from the tile's minimum, or lower half a window below the tile's first
            # value (often the hot value of skewed data)
            lo = tl.min(tl.where(ok, v, nbins), axis=0)
            lo = tl.where(lo == nbins, 0, lo)
            first = tl.max(tl.where(offs == tl.cast(t, tl.int64) * BLOCK, v, 0), axis=0)
            lo = tl.maximum(lo, first - (W // 2 - 1))
            rel = v - lo
            win = ok & (rel >= 0) & (rel < W - 1)
            h = tl.histogram(tl.where(win, rel, W - 1).to(tl.int32), W)
            tl.atomic_add(dst + lo + lanes, h.to(copies_ptr.dtype.element_ty),
                          mask=(lanes < W - 1) & (h > 0) & (lo + lanes < nbins), sem="relaxed")
            one = tl.full([BLOCK], 1, dtype=copies_ptr.dtype.element_ty)
            tl.atomic_add(dst + v, one, mask=ok & ~win, sem="relaxed")
        else:
            w = tl.load(w_ptr + offs * sw, mask=valid, other=0).to(copies_ptr.dtype.element_ty)
            tl.atomic_add(dst + v, w, mask=ok, sem="relaxed")
    if MODE == 0:
        tl.atomic_add(dst + lanes, acc.to(copies_ptr.dtype.element_ty), mask=(lanes < nbins) & (acc > 0),
                      sem="relaxed")
    if CHECK:
        flags = tl.max(bad & 1, axis=0) | tl.max(bad & 2, axis=0)
        if flags != 0:
            tl.atomic_or(flag_ptr, flags)


@triton.jit
def _sum_copies_kernel(copies_ptr, out_ptr, nbins, COPIES, RB: tl.constexpr, CB: tl.constexpr):
    """out[b] = sum of the COPIES private copies of bin b, CB copies x RB bins per step; the
    copies are reset to zero."""
    b = tl.program_id(0).to(tl.int64) * RB + tl.arange(0, RB)
    acc = tl.zeros([CB, RB], dtype=out_ptr.dtype.element_ty)  # int64 counts, float sums
    for c0 in range(0, COPIES, CB):
        c = tl.cast(c0, tl.int64) + tl.arange(0, CB)
        m = (c < COPIES)[:, None] & (b < nbins)[None, :]
        p = copies_ptr + c[:, None] * nbins + b[None, :]
        acc += tl.load(p, mask=m, other=0).to(acc.dtype)
        tl.store(p, tl.zeros([CB, RB], dtype=copies_ptr.dtype.element_ty), mask=m)
    tl.store(out_ptr + b, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=b < nbins)


_COUNT, _SUM = Launcher(_bincount_kernel), Launcher(_sum_copies_kernel)


def _out_dtype(weights: Optional[torch.Tensor]) -> torch.dtype:
    if weights is None:
        return torch.int64
    return torch.float32 if weights.dtype == torch.float32 else torch.float64


def _launch(x: torch.Tensor, w: Optional[torch.Tensor], nbins: int, check: bool):
    n = x.numel()
    out_dtype = _out_dtype(w)
    out = alloc.empty(nbins, dtype=out_dtype, device=x.device)
    flag = torch.zeros(1, dtype=torch.int32, device=x.device) if check else out
    tiles = cdiv(n, BLOCK)
    progs = max(1, min(tiles, 4 * num_sms(x.device)))
    if w is None:
        mode = 0 if nbins < HIST_MAX else 1
        copy_dtype = torch.int32 if n < 2**31 else torch.int64
    else:
        mode, copy_dtype = 2, out_dtype
    copies = 1 if mode == 0 else max(1, min(progs, COPY_BUDGET // nbins))
    width = max(32, next_pow2(nbins + 1)) if mode == 0 else WINDOW
    buf = workspace(x.device, f"bincount.copies.{copy_dtype}", copies * nbins, copy_dtype, zeroed=True)
    if n:
        _COUNT[(progs,)](x, w if w is not None else x, buf, flag, n, x.stride(0),
                         w.stride(0) if w is not None else 0, nbins, tiles, copies, BLOCK=BLOCK, W=width,
                         MODE=mode, CHECK=check, num_warps=8)
    rb = min(128, next_pow2(nbins))
    cb = min(next_pow2(copies), max(1, SUM_TILE // rb))
    _SUM[(cdiv(nbins, rb),)](buf, out, nbins, copies, RB=rb, CB=cb, num_warps=4)
    return out, flag if check else alloc.empty(0, dtype=torch.int32, device=x.device)


# ---------------------------------------------------------------------------- reference

def reference_bincount(input: torch.Tensor, weights: Optional[torch.Tensor], nbins: int, check: bool = True):
    """PyTorch path: ``(counts, flag)`` over ``nbins`` bins; values outside ``[0, nbins)`` are
    skipped and flagged (bit 1: negative, bit 2: ``>= nbins``) as in the kernel. A
    ``scatter_add_`` (no data-dependent shapes)."""
    out_dtype = _out_dtype(weights)
    x = input.to(torch.int64)
    ok = (x >= 0) & (x < nbins)
    vals = torch.ones_like(x, dtype=out_dtype) if weights is None else weights.to(out_dtype)
    vals = torch.where(ok, vals, torch.zeros((), dtype=out_dtype, device=x.device))
    out = torch.zeros(nbins, dtype=out_dtype, device=x.device).scatter_add_(0, torch.where(ok, x, 0), vals)
    flag = ((x < 0).any().to(torch.int32) | ((x >= nbins).any().to(torch.int32) << 1)).reshape(1)
    return out, flag if check else flag[:0]


# ---------------------------------------------------------------------------- op

def _fake(x: torch.Tensor, w: Optional[torch.Tensor], nbins: int, check: bool):
    return (torch.empty(nbins, dtype=_out_dtype(w), device=x.device),
            torch.empty(1 if check else 0, dtype=torch.int32, device=x.device))


@register_op("bincount", fake=_fake)
def _bincount_op(x: torch.Tensor, w: Optional[torch.Tensor], nbins: int,
                 check: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if not use_triton(x) or (w is not None and w.device != x.device):
        return reference_bincount(x, w, nbins, check)
    return _launch(x, w, nbins, check)


def bincount(input: torch.Tensor, weights: Optional[torch.Tensor] = None, minlength: int = 0, *,
             validate: bool = True) -> torch.Tensor:
    """Count the occurrences of each value in ``input`` (or sum ``weights`` per value), as
    ``torch.bincount``.

    Parameters
    ----------
    input : 1-D tensor of uint8 / int8 / int16 / int32 / int64 values, any stride.
    weights : optional 1-D tensor of ``input``'s length (float or integer); the output
        sums them per value.
    minlength : at least this many bins (an int >= 0).
    validate : True (default): PyTorch's semantics. Negative values raise; the size is
        ``max(max(input) + 1, minlength)``. This costs one host sync (``torch.bincount``
        syncs too): after counting when ``minlength`` is given (a flag read; if a value
        was ``>= minlength`` the count is redone with more bins), before counting otherwise
        (the maximum). False: no sync, no check, capturable in a CUDA graph; needs
        ``minlength > 0``, which is then the size: the caller guarantees the values lie in
        ``[0, minlength)``; values outside are skipped (never written out of bounds).

    Returns
    -------
    A new 1-D tensor: int64 counts, or the weights' sums in float32 (float32 weights) or
    float64 (other weights), as PyTorch. An empty input gives ``minlength`` zeros.

    Raises
    ------
    TypeError naming ``input`` / ``weights`` for a non-tensor or an unsupported dtype;
    ValueError naming ``input`` for a non-1-D tensor or a negative value (validate=True),
    ``weights`` for another shape or device, ``minlength`` for a negative value or for
    ``validate=False`` with ``minlength == 0``.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.bincount import bincount
    >>> bincount(torch.tensor([0, 2, 2, 5]))
    tensor([1, 0, 2, 0, 0, 1])
    """
    check_tensor("input", input, dtypes=INDEX_DTYPES)
    if input.dim() != 1:
        raise ValueError(f"input: bincount needs a 1-D tensor, got shape {tuple(input.shape)}")
    if weights is not None:
        check_tensor("weights", weights)
        if weights.dtype.is_complex:
            raise TypeError(f"weights: expected real values, got {weights.dtype}")
        if weights.shape != input.shape:
            raise ValueError(f"weights: expected shape {tuple(input.shape)} like input, got {tuple(weights.shape)}")
        if weights.device != input.device:
            raise ValueError(f"weights: expected a tensor on {input.device}, got {weights.device}")
    if isinstance(minlength, bool) or not isinstance(minlength, int) or minlength < 0:
        raise ValueError(f"minlength: expected an int >= 0, got {minlength!r}")
    if not validate:
        if minlength == 0:
            raise ValueError("minlength: validate=False needs minlength > 0, the output size "
                             "(without it the size depends on the data and needs a host sync)")
        return _bincount_op(input, weights, minlength, False)[0]
    if input.numel() == 0:
        return torch.zeros(minlength, dtype=_out_dtype(weights), device=input.device)
    if minlength > 0:
        out, flag = _bincount_op(input, weights, minlength, True)
        bits = int(flag.item())  # the one host sync
        if bits & 1:
            raise ValueError("input: bincount needs non-negative values, got a negative value")
        if not bits & 2:
            return out
    lo, hi = torch.stack(torch.aminmax(input)).tolist()  # the size needs the maximum: one sync
    if lo < 0:
        raise ValueError(f"input: bincount needs non-negative values, got {lo}")
    return _bincount_op(input, weights, max(hi + 1, minlength), False)[0]


FAMILY = {"name": "bincount", "ops": ["bincount"], "reason": triton_reason}
