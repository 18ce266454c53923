"""softmax and log_softmax over one dimension.

Two kernels:

* ``_rows_kernel``: a block holds ``BLOCK_M`` whole rows in registers (one read, one write).
* ``_split_kernel``: a row too wide for one block, or too few rows to fill the GPU, is
  split into ``S`` chunks held in registers by ``S`` blocks. Each block publishes its
  chunk's (max, sum of exp) and, in the fused variant (``PHASE=0``), waits at a per-row
  barrier for the other chunks of its row, combines the ``S`` partials and writes its
  chunk (its exponentials rescaled to the row's maximum): one read and one write of the
  data in a single launch. The barrier is either an arrival counter followed by a load of
  the partials, or (``FLAGGED``, few rows, where latency rules) a poll of the row's
  partials themselves, each packed with a ready flag in one 64-bit word. Blocks take their
  (row, chunk) from a ticket counter when the grid exceeds what is resident at once, so
  that a row's chunks are always started together (no deadlock). Where blocks cannot run
  concurrently (Triton's interpreter, or more chunks than multiprocessors) the same kernel
  runs as two launches: ``PHASE=1`` writes the partials, ``PHASE=2`` combines and writes.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.autocast import autocast_fp32
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import FLOAT_DTYPES, KERNEL_DTYPES, check_tensor, normalize_dim
from .._core.registry import register_op

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
INT32_END = 2**31  # offsets from here on need int64 arithmetic in the kernels (a knob for tests)


@triton.jit
def _rows_kernel(x_ptr, y_ptr, n_rows, N, sxr, sxn, syr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOG: tl.constexpr, WIDE: tl.constexpr = False):
    # WIDE: row or column offsets past int32 (a reduced dim that is not the last of a large tensor)
    if WIDE:
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N).to(tl.int64)
    else:
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < N)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxn, mask=mask,
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp2((x - m[:, None]) * 1.4426950408889634)
    s = tl.sum(e, axis=1)
    if LOG:
        y = x - (m + tl.log2(s) * 0.6931471805599453)[:, None]
    else:
        y = e * (1.0 / s)[:, None]
    tl.store(y_ptr + rows64[:, None] * syr + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _pack(m, s):
    """A chunk's (max, sum) as one int64 word: max's bits high; the sum's (never negative)
    low, with bit 31 set as the word's *ready* flag (a zeroed slot is empty)."""
    lo = (s.to(tl.int32, bitcast=True) & 0x7FFFFFFF).to(tl.int64) | 0x80000000
    return (m.to(tl.int32, bitcast=True).to(tl.int64) << 32) | lo


@triton.jit
def _split_kernel(x_ptr, y_ptr, part_ptr, sync_ptr, N, sxr, sxn, syr, S, total,
                  CHUNK: tl.constexpr, S_PAD: tl.constexpr, LOG: tl.constexpr,
                  PHASE: tl.constexpr, TICKET: tl.constexpr, FLAGGED: tl.constexpr, WIDE: tl.constexpr = False):
    # sync_ptr (int32): [0] ticket, [1] unused, then per row: arrived, departed.
    # PHASE 0 with FLAGGED: part_ptr holds one int64 word a chunk (_pack), polled until
    # every word of the row is ready (the partials arrive with their flags: one round trip).
    if TICKET:
        t = tl.atomic_add(sync_ptr, 1, sem="relaxed")  # a count: it orders nothing
        if t == total - 1:  # the last ticket: every block has drawn one, reset for the next launch
            tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
    else:
        t = tl.program_id(0)
    row = t // S
    chunk = t % S
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offs < N
    if WIDE:  # (N - 1) * sxn past int32
        offs = offs.to(tl.int64)
    x = tl.load(x_ptr + row.to(tl.int64) * sxr + offs * sxn, mask=mask,
                other=-float("inf")).to(tl.float32)
    j = tl.arange(0, S_PAD)
    if FLAGGED and PHASE == 0:
        slots = part_ptr + row.to(tl.int64) * S
    else:
        part = part_ptr + row.to(tl.int64) * S * 2
    if PHASE != 2:
        m = tl.max(x, axis=0)
        m_safe = tl.where(m == -float("inf"), 0.0, m)  # an all -inf chunk has sum 0
        e = tl.exp2((x - m_safe) * 1.4426950408889634)
        if FLAGGED and PHASE == 0:
            tl.atomic_xchg(slots + chunk, _pack(m, tl.sum(e, axis=0)), sem="relaxed")
        else:
            tl.store(part + chunk * 2, m)
            tl.store(part + chunk * 2 + 1, tl.sum(e, axis=0))
    if PHASE == 0:
        if FLAGGED:  # padding lanes read as ready (-inf, 0)
            w = tl.load(slots + j, mask=j < S, other=-36028794871480320, volatile=True)
            while tl.min((w >> 31) & 1, axis=0) == 0:
                w = tl.load(slots + j, mask=j < S, other=-36028794871480320, volatile=True)
            mj = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
            sj = (w & 0x7FFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
        else:
            arrived = sync_ptr + 2 + row * 2
            tl.atomic_add(arrived, 1, sem="release")
            while tl.atomic_add(arrived, 0, sem="acquire") < S:
                pass
    if PHASE == 2 or (PHASE == 0 and not FLAGGED):
        mj = tl.load(part + j * 2, mask=j < S, other=-float("inf"), cache_modifier=".cg")
        sj = tl.load(part + j * 2 + 1, mask=j < S, other=0.0, cache_modifier=".cg")
    if PHASE != 1:
        big = tl.max(mj, axis=0)
        total_sum = tl.sum(sj * tl.exp2((mj - big) * 1.4426950408889634), axis=0)
        if LOG:
            y = x - (big + tl.log2(total_sum) * 0.6931471805599453)
        elif PHASE == 0:  # this chunk's exponentials, rescaled to the row's maximum
            y = e * (tl.exp2((m_safe - big) * 1.4426950408889634) / total_sum)
        else:
            y = tl.exp2((x - big) * 1.4426950408889634) * (1.0 / total_sum)
        tl.store(y_ptr + row.to(tl.int64) * syr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    if PHASE == 0:
        # The last block of the row to leave resets its counters (or slots) for the next launch.
        departed = sync_ptr + 3 + row * 2
        if tl.atomic_add(departed, 1, sem="acq_rel") == S - 1:
            if FLAGGED:
                tl.store(slots + j, tl.zeros([S_PAD], dtype=tl.int64), mask=j < S)
            else:
                tl.atomic_xchg(sync_ptr + 2 + row * 2, 0)
            tl.atomic_xchg(departed, 0)

# ---------------------------------------------------------------------------- launcher

#: Tuning knobs, measured on the H200 (docs/perf-notes.md, scripts/tune_softmax.py); the
#: interpreter uses small blocks so that CI exercises every path.
ROW_MAX = 256 if INTERPRET else 8192  # widest row held by one block
ROW_ALWAYS = 64 if INTERPRET else 8192  # rows up to this width never split
CHUNK = 128 if INTERPRET else 8192  # chunk of a split row when rows alone fill the GPU
MIN_CHUNK = 64 if INTERPRET else 4096  # smallest chunk when splitting few rows
MAX_CHUNK = 256 if INTERPRET else 16384  # widest chunk held in registers
FUSED = not INTERPRET  # one launch with a per-row barrier; False: two launches (tuning knob)
#: Few rows (under 2 per SM): the one launch polls flagged partial words (one round trip
#: to L2 fewer: [1, 128256] 4.7 us against 5.3); many rows keep the arrival counter, which
#: measured 2% faster at 16384 x 131072. False: always the counter (tuning knob).
FLAGGED = True


_ROWS, _SPLIT = Launcher(_rows_kernel), Launcher(_split_kernel)
#: Eager calls with the properties of an earlier call replay its launches (fastpath._core.memo).
_MEMO = LaunchMemo()


def _num_warps(block: int) -> int:
    return max(4, min(16, block // 2048))


def _plan(n_rows: int, N: int, sms: int):
    """(chunk, S): S chunks of ``chunk`` columns a row, each held in registers by one block."""
    want = min(sms, max(1, (2 * sms) // n_rows))  # chunks per row to give every SM work
    chunk = min(CHUNK, max(MIN_CHUNK, next_pow2(cdiv(N, want))))
    chunk = max(chunk, next_pow2(cdiv(N, sms)))  # at most `sms` chunks a row
    chunk = min(chunk, MAX_CHUNK)  # wider rows than sms * MAX_CHUNK take two launches
    return chunk, cdiv(N, chunk)


def _launch(x: torch.Tensor, log: bool, out_dtype: torch.dtype, plan=None) -> torch.Tensor:
    """x: (..., N) with N the reduced dimension; returns a new (..., N) tensor. ``plan``
    ((chunk, S) or (chunk, S, num_warps)) overrides :func:`_plan` (tuning scripts)."""
    N = x.shape[-1]
    if x.numel() == 0:
        return alloc.empty(x.shape, dtype=out_dtype, device=x.device)
    try:
        x2 = x.view(-1, N)
    except RuntimeError:  # leading dims that cannot be collapsed: one documented copy
        x2 = x.reshape(-1, N)
    n_rows = x2.shape[0]
    wide = (N - 1) * abs(x2.stride(1)) >= INT32_END  # a strided reduced dim (not the last one)
    y = alloc.empty(n_rows, N, dtype=out_dtype, device=x.device)
    sms = num_sms(x.device)
    if plan is None and (N <= ROW_ALWAYS or (N <= ROW_MAX and n_rows >= 2 * sms)):
        block_n = next_pow2(N)
        block_m = min(next_pow2(n_rows), max(1, 2048 // block_n))
        _ROWS[(cdiv(n_rows, block_m),)](
            x2, y, n_rows, N, x2.stride(0), x2.stride(1), y.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, LOG=log, num_warps=4 if block_n * block_m <= 2048 else 8,
            WIDE=wide or n_rows + block_m >= INT32_END)
        return y.view(x.shape)
    chunk, S = (plan or _plan(n_rows, N, sms))[:2]
    warps = plan[2] if plan and len(plan) > 2 else _num_warps(chunk)
    total = n_rows * S
    common = {"CHUNK": chunk, "S_PAD": next_pow2(S), "LOG": log, "num_warps": warps, "WIDE": wide}
    strides = (x2.stride(0), x2.stride(1), y.stride(0))
    if not FUSED or S > sms:
        part = workspace(x.device, "softmax.partials", n_rows * S * 2, torch.float32)
        for phase in (1, 2):
            _SPLIT[(total,)](x2, y, part, part, N, *strides, S, total,
                             PHASE=phase, TICKET=False, FLAGGED=False, **common)
        return y.view(x.shape)
    sync = workspace(x.device, "softmax.counters", 2 + 2 * n_rows, torch.int32, zeroed=True)
    flagged = FLAGGED and n_rows < 2 * sms
    if flagged:  # one flagged int64 word a chunk, zero between launches
        part = workspace(x.device, "softmax.slots", n_rows * S, torch.int64, zeroed=True)
    else:
        part = workspace(x.device, "softmax.partials", n_rows * S * 2, torch.float32)
    _SPLIT[(total,)](x2, y, part, sync, N, *strides, S, total,
                     PHASE=0, TICKET=total > sms, FLAGGED=flagged, **common)
    return y.view(x.shape)


# ---------------------------------------------------------------------------- reference

def reference_softmax(x: torch.Tensor, dim: int = -1, dtype: Optional[torch.dtype] = None,
                      log: bool = False) -> torch.Tensor:
    """PyTorch path: the oracle in tests and the path on devices Triton does not serve."""
    fn = torch.log_softmax if log else torch.softmax
    return fn(x, dim, dtype=dtype)


# ---------------------------------------------------------------------------- op

def _fake(x: torch.Tensor, dim: int, log: bool, dtype: Optional[torch.dtype]) -> torch.Tensor:
    return torch.empty_like(x, dtype=dtype or x.dtype)


def _setup(ctx, inputs, output):
    x, dim, log, dtype = inputs
    ctx.dim, ctx.log, ctx.in_dtype = dim, log, x.dtype
    ctx.save_for_backward(output)


def _backward(ctx, grad):
    (y,) = ctx.saved_tensors
    g, yf = grad.float(), y.float()
    if ctx.log:
        gx = g - yf.exp() * g.sum(ctx.dim, keepdim=True)
    else:
        gx = yf * (g - (g * yf).sum(ctx.dim, keepdim=True))
    return gx.to(ctx.in_dtype), None, None, None


@register_op("softmax", fake=_fake, backward=_backward, setup_context=_setup)
def _softmax_op(x: torch.Tensor, dim: int, log: bool, dtype: Optional[torch.dtype]) -> torch.Tensor:
    out_dtype = dtype or x.dtype
    if (x.dim() == 0 or not use_triton(x) or x.dtype not in KERNEL_DTYPES
            or out_dtype not in KERNEL_DTYPES):
        return reference_softmax(x, dim, dtype, log)
    last = dim == x.dim() - 1
    y = _launch(x if last else x.movedim(dim, -1), log, out_dtype)
    return y if last else y.movedim(-1, dim)


def _checked(x, dim, dtype, fname: str):
    check_tensor("input", x)
    if not (x.dtype.is_floating_point or dtype is not None):
        raise TypeError(f"input: {fname} needs a floating-point tensor (or dtype=...), got {x.dtype}")
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise TypeError(f"dtype: expected one of float16, bfloat16, float32, float64, got {dtype}")
    dim = normalize_dim("dim", dim, x.dim())
    if dtype is not None and not x.dtype.is_floating_point:
        x = x.to(dtype)
    return x, dim


def softmax(input: torch.Tensor, dim: int = -1, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Softmax over ``dim``, with the semantics of ``torch.softmax``.

    Parameters
    ----------
    input : Tensor of any shape, float16 / bfloat16 / float32 (float64 takes the reference path).
    dim : the dimension to normalise over (negative counts from the end).
    dtype : output dtype; the input is read as is and converted, arithmetic is float32.

    Returns
    -------
    Tensor of ``input``'s shape and ``dtype`` (or ``input.dtype``). A row of all ``-inf``
    gives NaN, as in PyTorch. Rows of any width, also a whole vocabulary, are split over
    many blocks when there are too few rows to fill the GPU. Autograd and
    ``torch.compile(fullgraph=True)`` are supported.

    Raises
    ------
    IndexError if ``dim`` is out of range; TypeError for integer input without ``dtype``.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.softmax(torch.tensor([[1.0, 2.0, 3.0]]), dim=-1)
    tensor([[0.0900, 0.2447, 0.6652]])
    """
    if dtype is None and autocast_fp32("softmax", input):  # as autocast runs torch.softmax: in float32
        dtype = torch.float32
    return _MEMO.call(lambda: _softmax_op(*_checked(input, dim, dtype, "softmax"), False, dtype), (input,),
                      (dim, dtype, False))


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Log-softmax over ``dim``, with the semantics of ``torch.log_softmax``.

    Same arguments, dtypes, errors and paths as :func:`softmax`; computed as
    ``x - max - log(sum(exp(x - max)))`` so that large magnitudes stay finite.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.log_softmax(torch.tensor([0.0, 0.0]), dim=0)
    tensor([-0.6931, -0.6931])
    """
    if dtype is None and autocast_fp32("log_softmax", input):  # as autocast runs torch.log_softmax
        dtype = torch.float32
    return _MEMO.call(lambda: _softmax_op(*_checked(input, dim, dtype, "log_softmax"), True, dtype), (input,),
                      (dim, dtype, True))


FAMILY = {"name": "softmax", "ops": ["softmax", "log_softmax"], "reason": triton_reason}
