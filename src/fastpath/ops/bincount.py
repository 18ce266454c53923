"""bincount with privatised histograms, as ``torch.bincount`` (weights, minlength).

A counting launch and a finishing one. Programs walk the input in tiles (the next tile's loads
issued before the current one is counted) and count into private copies of the bins in global
memory (program ``p`` uses copy ``p % copies``: the atomics spread over many L2 lines and
slices instead of queueing on one copy's few lines). The finishing launch, parallel over the
bins, adds the copies up (and zeroes them) and hands out the values' range. (Finishing inside the
counting launch, with acq_rel tickets for the last user of each copy, gave wrong counts on the
H200 at 1000 bins: removed.)

* few bins (``nbins < HIST_MAX``, no weights): a register histogram per program
  (``tl.histogram``), added to its copy once at the end; indifferent to skew.
* more bins, on NVIDIA GPUs, when the counters fit ``SMEM_SIZES`` (up to 8192 bins of counts or
  float32 sums, 4096 of float64 sums): a histogram in shared memory per program, one shared
  atomic per value, added to one of ``SMEM_COPIES`` copies at the end (one global atomic per
  bin a program). Triton 3.6 has no shared-memory atomics, so this path declares the array and
  adds to it through inline PTX (``_smem_*``); the interpreter cannot run it. H200: 16M values
  counted in 33 us (95% of the copy bandwidth); a whole ``validate=False`` call 53 us eager
  against 236 us through global atomics; skewed data as fast as uniform (a hot value's
  atomics queue on one shared bank, not on L2).
* otherwise (the interpreter, more bins, int64 counts), no weights: one relaxed atomic (a
  fire-and-forget RED) per value into ``COPIES`` global copies. Skew (``WINDOW``): 1 counts
  the values equal to the tile's first value with one reduction and adds them with one atomic;
  ``W >= 32`` counts the values in a W-bin window (from the tile's minimum, or half a window
  below its first value when that is higher) with ``tl.histogram``, one atomic per non-empty
  bin; 0 does neither. A hot value then costs a few atomics per tile instead of queueing on one
  address. (A ``tl.histogram`` over all the bins would need no atomics, but triton 3.6 lowers
  it with warp ballots whose cost per value grows with the bins: about 6 warp instructions per
  value for 1024 bins.)
* weights: one float atomic per value (shared or global as above).

Counts are exact (int32 copies, int64 when the input has 2**31 values or more); weighted sums
use float atomics (order-dependent rounding, as PyTorch's CUDA kernel).

Sizes and syncs: the output has ``max(max(input) + 1, minlength)`` bins. ``validate=True``
counts into ``minlength`` bins (``SPEC_BINS`` when ``minlength`` is 0) and the kernel keeps the
values' range (two int64 words: an atomic min of the negative values, an atomic max); one host
sync reads it back (``torch.bincount`` syncs too; on CUDA into page-locked words: ``_core.readback``) to
raise on a negative value, to cut the counted bins to size, or, when a value lies past them, to
count again with all of them.
``validate=False`` skips that read: no sync, CUDA-graph capturable, the size is ``minlength``
and values outside ``[0, minlength)`` are skipped unchecked. Eager calls like an earlier one
replay its launches (:mod:`fastpath._core.memo`).
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import alert_nondeterministic, check_tensor, require_no_capture
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.readback import read_back
from .._core.registry import register_op

# Tuning knobs (scripts/tune_bincount.py sweeps them on a GPU). The interpreter uses small
# tiles and few copies so that CI runs every path, several tiles per program included.
#: Values per tile, warps per program, programs per SM.
BLOCK = 128 if INTERPRET else 1024
NUM_WARPS = 4
PROGS_PER_SM = 2 if INTERPRET else 8
#: Private copies of the bins (at most; never more than the programs). Many copies also spread
#: skewed data, whose atomics crowd into a few lines of each copy.
COPIES = 3 if INTERPRET else 128
#: Skew handling of the atomic path: 0 none, 1 the tile's first value, W >= 32 a W-bin window.
WINDOW = 1
#: Bins below which a program keeps the whole histogram in registers.
HIST_MAX = 256
#: The finishing launch's tile (copies x bins).
SUM_TILE = (4, 16) if INTERPRET else (8, 128)
#: Most counters all copies may hold together (fewer copies for many bins).
COPY_BUDGET = 1 << 22
#: Count in shared memory (a private histogram per program, through inline PTX: NVIDIA GPUs only,
#: not ROCm, never the interpreter) when the counters fit one of SMEM_SIZES bytes; then these
#: tile, warps and programs per SM.
SMEM = not INTERPRET and torch.version.hip is None
SMEM_SIZES = (4096, 16384, 32768)
SMEM_PLAN = (2048, 8, 2)
#: Private copies in global memory the shared histograms are added into at the end (fewer than
#: COPIES: one atomic per bin a program, not per value; H200: 16 copies 2.0 us to sum, one per
#: program 24.6 us).
SMEM_COPIES = 16
#: Bins counted by ``validate=True`` without ``minlength``, before the maximum is known (the
#: values' range comes back with the counts, in the one sync; counted again with all the bins
#: only when a value lies past them). 0: as many as the largest shared histogram holds (8192
#: counts or float32 sums, 4096 float64 sums).
SPEC_BINS = 64 if INTERPRET else 0
#: Element offsets from which the kernel indexes in int64 (tests lower it).
I64_FROM = 2**31
INDEX_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _unsigned(v):
    """The values as unsigned integers: negative ones become larger than any bin index."""
    if v.dtype == tl.int64:
        u = v.to(tl.uint64, bitcast=True)
    else:
        u = v.to(tl.int32).to(tl.uint32, bitcast=True)
    return u


# Shared-memory histograms through inline PTX (triton 3.6 exposes no shared-memory atomics):
# _smem_declare declares the array fp_hist at function scope (a scalar operand: emitted once);
# the other helpers are elementwise and address it by name. Counters are 4-byte words (counts,
# float32 sums) or 8-byte ones (float64 sums).

@triton.jit
def _smem_declare(NBYTES: tl.constexpr):
    one = tl.program_id(0)
    if NBYTES == 4096:
        tl.inline_asm_elementwise(".shared .align 16 .b8 fp_hist[4096]; mov.u32 $0, 0;", "=r,r", [one],
                                  dtype=tl.int32, is_pure=False, pack=1)
    elif NBYTES == 16384:
        tl.inline_asm_elementwise(".shared .align 16 .b8 fp_hist[16384]; mov.u32 $0, 0;", "=r,r", [one],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.static_assert(NBYTES == 32768, "SMEM_SIZES: 4096, 16384 or 32768 bytes")
        tl.inline_asm_elementwise(".shared .align 16 .b8 fp_hist[32768]; mov.u32 $0, 0;", "=r,r", [one],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_zero(word, ok):
    """Zero the 4-byte words ``word`` where ``ok``."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 4, a; "
        "@p st.shared.u32 [a], 0; mov.u32 $0, 0; }",
        "=r,r,r", [word, ok.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_count(b, ok):
    """Count bin ``b`` where ``ok``: one shared atomic a value. (Matching a warp's equal bins
    first, match.any, made the 16M-value count 2.7x slower on the H200 and skew no faster.)"""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 4, a; "
        "@p red.shared.add.u32 [a], 1; mov.u32 $0, 0; }",
        "=r,r,r", [b, ok.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_add(b, ok, v):
    """Add the float ``v`` to bin ``b`` where ``ok`` (float32, or float64 counters)."""
    if v.dtype == tl.float64:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 8, a; "
            "@p red.shared.add.f64 [a], $3; mov.u32 $0, 0; }",
            "=r,r,r,d", [b, ok.to(tl.int32), v], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 4, a; "
            "@p red.shared.add.f32 [a], $3; mov.u32 $0, 0; }",
            "=r,r,r,f", [b, ok.to(tl.int32), v.to(tl.float32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_read(b, ok, cdt: tl.constexpr):
    """The counters of bins ``b`` (0 where not ``ok``) as ``cdt`` (int32, float32, float64)."""
    if cdt == tl.float64:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 8, a; "
            "mov.f64 $0, 0d0000000000000000; @p ld.shared.f64 $0, [a]; }",
            "=d,r,r", [b, ok.to(tl.int32)], dtype=tl.float64, is_pure=False, pack=1)
    elif cdt == tl.float32:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 4, a; "
            "mov.f32 $0, 0f00000000; @p ld.shared.f32 $0, [a]; }",
            "=f,r,r", [b, ok.to(tl.int32)], dtype=tl.float32, is_pure=False, pack=1)
    else:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_hist; mad.lo.u32 a, $1, 4, a; "
            "mov.u32 $0, 0; @p ld.shared.u32 $0, [a]; }",
            "=r,r,r", [b, ok.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)
    return r


@triton.jit(do_not_specialize=["sx", "sw"])  # one value a thread per load: no layout change for the atomics
def _bincount_kernel(x_ptr, w_ptr, copies_ptr, range_ptr, n, sx, sw, nbins,
                     num_tiles, n_copies, BLOCK: tl.constexpr, W: tl.constexpr, MODE: tl.constexpr,
                     CHECK: tl.constexpr, I64: tl.constexpr, SMEM: tl.constexpr = 0):
    """MODE 0: register histogram of W bins (nbins < W); 1: atomics, skew handling W (0, 1 or
    a window of W >= 32 bins); 2: weighted atomics. CHECK: the values' range into the two
    int64 words at range_ptr (atomic min of the negative ones, atomic max), zero between
    launches as the copies.
    SMEM (modes 1 and 2): the atomics go to a shared histogram of SMEM bytes, added to the copy
    at the end."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cdt = copies_ptr.dtype.element_ty
    copy = pid % n_copies
    dst = copies_ptr + copy.to(tl.int64) * nbins
    idx = tl.arange(0, BLOCK)
    if MODE == 0:
        hist = tl.zeros([W], dtype=tl.int32)
    if CHECK:  # lanes' running minimum and maximum (from 0: masked lanes load 0)
        vmin = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
        vmax = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
    if SMEM:
        _smem_declare(SMEM)
        words = nbins * (2 if cdt == tl.float64 else 1)
        for c0 in range(0, words, BLOCK):
            _smem_zero(c0 + idx, c0 + idx < words)
        tl.debug_barrier()
    # the next tile's loads are issued before this one is counted: two tiles in flight a program
    # (H200: 2M values 98 -> 87 us, 16M weighted 192 -> 130 us)
    step = nprog * BLOCK
    if I64:
        start = tl.cast(pid, tl.int64) * BLOCK
    else:
        start = pid * BLOCK
    v_next = tl.load(x_ptr + (start + idx) * sx, mask=start + idx < n, other=0)
    if MODE == 2:
        w_next = tl.load(w_ptr + (start + idx) * sw, mask=start + idx < n, other=0)
    for t in range(pid, num_tiles, nprog):
        offs = start + idx
        valid = offs < n
        v = v_next
        v_next = tl.load(x_ptr + (offs + step) * sx, mask=offs + step < n, other=0)
        if MODE == 2:
            wv = w_next
            w_next = tl.load(w_ptr + (offs + step) * sw, mask=offs + step < n, other=0)
        inside = _unsigned(v) < nbins  # masked lanes load 0: inside
        ok = valid & inside
        if CHECK:
            vmin = tl.minimum(vmin, v)
            vmax = tl.maximum(vmax, v)
        b = tl.where(ok, v, 0).to(tl.int32)
        if MODE == 0:
            hist += tl.histogram(tl.where(ok, b, W - 1), W)
        elif SMEM:
            if MODE == 1:
                _smem_count(b, ok)
            else:
                _smem_add(b, ok, wv.to(cdt))
        elif MODE == 1:
            if W == 1:
                first = tl.load(x_ptr + start * sx).to(tl.int32)
                same = ok & (b == first)
                cnt = tl.sum(same.to(tl.int32), axis=0)
                if cnt > 0:
                    tl.atomic_add(dst + first, cnt.to(cdt), sem="relaxed")
                ok = ok & ~same
            elif W >= 32:
                # W - 1 bins from the tile's minimum or, when higher, from half a window below its
                # first value (the hot value of skewed data, often)
                first = tl.load(x_ptr + start * sx).to(tl.int64)
                low = tl.min(tl.where(ok, b, nbins), axis=0)
                lo = tl.maximum(tl.minimum(first - (W // 2 - 1), nbins - (W - 1)), low)
                lo = tl.maximum(tl.minimum(lo, nbins - (W - 1)), 0).to(tl.int32)
                rel = b - lo
                win = ok & (rel >= 0) & (rel < W - 1)
                h = tl.histogram(tl.where(win, rel, W - 1), W)
                lanes = tl.arange(0, W)
                tl.atomic_add(dst + lo + lanes, h.to(cdt), mask=(lanes < W - 1) & (h > 0), sem="relaxed")
                ok = ok & ~win
            tl.atomic_add(dst + b, tl.full([BLOCK], 1, dtype=cdt), mask=ok, sem="relaxed")
        else:
            tl.atomic_add(dst + b, wv.to(cdt), mask=ok, sem="relaxed")
        start += step
    if MODE == 0:
        lanes = tl.arange(0, W)
        tl.atomic_add(dst + lanes, hist.to(cdt), mask=(lanes < nbins) & (hist > 0), sem="relaxed")
    if SMEM:
        tl.debug_barrier()
        for c0 in range(0, nbins, BLOCK):
            bins = c0 + idx
            h = _smem_read(bins, bins < nbins, cdt)
            tl.atomic_add(dst + bins, h, mask=(bins < nbins) & (h != 0), sem="relaxed")
    if CHECK:
        low = tl.min(vmin, axis=0).to(tl.int64)
        if low < 0:
            tl.atomic_min(range_ptr, low, sem="relaxed")
        high = tl.max(vmax, axis=0).to(tl.int64)
        if high > 0:
            tl.atomic_max(range_ptr + 1, high, sem="relaxed")


@triton.jit
def _sum_copies_kernel(copies_ptr, out_ptr, span_ptr, range_ptr, nbins, n_copies,
                       CHECK: tl.constexpr, FC: tl.constexpr, FB: tl.constexpr):
    """The finishing step as a launch of its own (many bins): out[b] = the sum of the copies
    of bin b, FC copies x FB bins a step; the copies are zeroed, the range handed out (and
    zeroed)."""
    b = tl.program_id(0) * FB + tl.arange(0, FB)
    c = tl.arange(0, FC)
    total = tl.zeros([FB], dtype=out_ptr.dtype.element_ty)  # int64 counts, float sums
    for c0 in range(0, n_copies, FC):
        m = ((c0 + c) < n_copies)[:, None] & (b < nbins)[None, :]
        p = copies_ptr + (c0 + c).to(tl.int64)[:, None] * nbins + b[None, :]
        total += tl.sum(tl.load(p, mask=m, other=0).to(total.dtype), axis=0)
        tl.store(p, tl.zeros([FC, FB], dtype=copies_ptr.dtype.element_ty), mask=m)
    tl.store(out_ptr + b, total, mask=b < nbins)
    if CHECK:
        if tl.program_id(0) == 0:
            tl.store(span_ptr, tl.atomic_xchg(range_ptr, 0))
            tl.store(span_ptr + 1, tl.atomic_xchg(range_ptr + 1, 0))


_COUNT, _SUM = Launcher(_bincount_kernel), Launcher(_sum_copies_kernel)


def _out_dtype(weights: Optional[torch.Tensor]) -> torch.dtype:
    if weights is None:
        return torch.int64
    return torch.float32 if weights.dtype == torch.float32 else torch.float64


def _smem_bytes(nbins: int, copy_dtype: torch.dtype) -> int:
    """The smallest of SMEM_SIZES that holds the counters, 0 when none does (or int64 counts)."""
    if copy_dtype == torch.int64:
        return 0
    need = nbins * copy_dtype.itemsize
    return next((size for size in SMEM_SIZES if size >= need), 0)


def _launch(x: torch.Tensor, w: Optional[torch.Tensor], nbins: int, check: bool):
    n, dev, out_dtype = x.numel(), x.device, _out_dtype(w)
    if n == 0:
        return (torch.zeros(nbins, dtype=out_dtype, device=dev),
                torch.zeros(2 if check else 0, dtype=torch.int64, device=dev))
    out = alloc.empty(nbins, dtype=out_dtype, device=dev)
    span = alloc.empty(2 if check else 0, dtype=torch.int64, device=dev)
    if w is None:
        mode = 0 if nbins < HIST_MAX else 1
        copy_dtype = torch.int32 if n < 2**31 else torch.int64
    else:
        mode, copy_dtype = 2, out_dtype
    smem = _smem_bytes(nbins, copy_dtype) if mode and SMEM and x.is_cuda else 0
    block, warps, per_sm = SMEM_PLAN if smem else (BLOCK, NUM_WARPS, PROGS_PER_SM)
    tiles = cdiv(n, block)
    progs = min(tiles, per_sm * num_sms(dev))
    width = max(32, next_pow2(nbins + 1)) if mode == 0 else (WINDOW if mode == 1 and not smem else 0)
    n_copies = max(1, min(progs, SMEM_COPIES if smem else COPIES, COPY_BUDGET // nbins))
    copies = workspace(dev, f"bincount.copies.{copy_dtype}", n_copies * nbins, copy_dtype, zeroed=True)
    lohi = workspace(dev, "bincount.range", 2, torch.int64, zeroed=True)
    sw = w.stride(0) if w is not None else 0
    wide = (n + (progs + 1) * block) * max(x.stride(0), sw, 1) >= I64_FROM
    _COUNT[(progs,)](x, x if w is None else w, copies, lohi, n, x.stride(0), sw, nbins, tiles, n_copies,
                     BLOCK=block, W=width, MODE=mode, CHECK=check, I64=wide, SMEM=smem, num_warps=warps)
    fc, fb = min(next_pow2(n_copies), SUM_TILE[0]), min(next_pow2(nbins), SUM_TILE[1])
    _SUM[(cdiv(nbins, fb),)](copies, out, span if check else out, lohi, nbins, n_copies, CHECK=check,
                             FC=fc, FB=fb, num_warps=4)
    return out, span


# ---------------------------------------------------------------------------- reference

def reference_bincount(input: torch.Tensor, weights: Optional[torch.Tensor], nbins: int, check: bool = True):
    """PyTorch path: ``(counts, span)`` over ``nbins`` bins; values outside ``[0, nbins)`` are
    skipped; ``span`` (with ``check``, else empty) is the int64 pair ``(min(values, 0),
    max(values, 0))`` as the kernel's. A ``scatter_add_`` (no data-dependent shapes)."""
    out_dtype = _out_dtype(weights)
    x = input.to(torch.int64)
    ok = (x >= 0) & (x < nbins)
    vals = torch.ones_like(x, dtype=out_dtype) if weights is None else weights.to(out_dtype)
    vals = torch.where(ok, vals, torch.zeros((), dtype=out_dtype, device=x.device))
    out = torch.zeros(nbins, dtype=out_dtype, device=x.device).scatter_add_(0, torch.where(ok, x, 0), vals)
    if not check:
        return out, torch.zeros(0, dtype=torch.int64, device=x.device)
    return out, torch.stack(torch.aminmax(torch.cat([x, x.new_zeros(1)])))


# ---------------------------------------------------------------------------- op

def _fake(x: torch.Tensor, w: Optional[torch.Tensor], nbins: int, check: bool):
    return (torch.empty(nbins, dtype=_out_dtype(w), device=x.device),
            torch.empty(2 if check else 0, dtype=torch.int64, device=x.device))


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
        syncs too), after counting into ``minlength`` bins (when 0: 8192, 4096 for float64
        sums), which reads
        the values' range back; a value past those bins has them counted again, all of them.
        The result may be a view of the first ``size`` counted bins. False: no sync, no
        check, capturable in a CUDA graph; needs
        ``minlength > 0``, which is then the size: the caller guarantees the values lie in
        ``[0, minlength)``; values outside are skipped (never written out of bounds).

    Returns
    -------
    A 1-D tensor: int64 counts, or the weights' sums in float32 (float32 weights) or
    float64 (other weights), as PyTorch. An empty input gives ``minlength`` zeros.

    Raises
    ------
    TypeError naming ``input`` / ``weights`` for a non-tensor or an unsupported dtype;
    ValueError naming ``input`` for a non-1-D tensor or a negative value (validate=True),
    ``weights`` for another shape or device, ``minlength`` for a negative value or for
    ``validate=False`` with ``minlength == 0``; RuntimeError for ``validate=True`` (on a
    non-empty input) inside a CUDA graph capture, where its host sync cannot run; with
    weights on a GPU under ``torch.use_deterministic_algorithms(True)``, RuntimeError (a
    warning with ``warn_only=True``), as ``torch.bincount`` (the sums' order varies).

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
    if weights is not None and not INTERPRET and use_triton(input):  # float sums through atomics, in
        alert_nondeterministic("fastpath.bincount with weights on a GPU")  # the order they land
    if not validate:
        if minlength == 0:
            raise ValueError("minlength: validate=False needs minlength > 0, the output size "
                             "(without it the size depends on the data and needs a host sync)")
        return _MEMO.call(lambda: _bincount_op(input, weights, minlength, False), (input, weights),
                          (minlength, False))[0]
    if input.numel() == 0:
        return torch.zeros(minlength, dtype=_out_dtype(weights), device=input.device)
    require_no_capture(input.device, "bincount", "validate=True reads the values' range back to the host",
                       "pass validate=False with minlength set to the number of bins")
    guess = minlength or _spec_bins(weights)
    out, span = _MEMO.call(lambda: _bincount_op(input, weights, guess, True), (input, weights), (guess, True))
    low, high = read_back(span)  # the one host sync
    if low < 0:
        raise ValueError(f"input: bincount needs non-negative values, got {low}")
    size = max(high + 1, minlength)
    if size <= guess:
        return out if size == guess else out[:size]
    return _bincount_op(input, weights, size, False)[0]  # a value past the bins counted: again, with all


def _spec_bins(weights: Optional[torch.Tensor]) -> int:
    """Bins counted when no minlength fixes the size (SPEC_BINS, or the largest shared histogram)."""
    if SPEC_BINS:
        return SPEC_BINS
    return SMEM_SIZES[-1] // (8 if _out_dtype(weights) == torch.float64 else 4)


#: Eager calls like an earlier one replay its launches (fastpath._core.memo).
_MEMO = LaunchMemo()

FAMILY = {"name": "bincount", "ops": ["bincount"], "reason": triton_reason}
