"""Token sampling from logits: greedy, temperature, top-k and top-p (nucleus), in one launch.

One kernel, ``_sample_kernel``, with ``tl.constexpr`` variants. A program handles ``BM``
rows by one chunk of columns; a row of a whole vocabulary is split into ``S`` chunks so
that it keeps many multiprocessors busy. A value and its column are packed into one int64
*key* (order-preserving integer image of the float, then ``2**31 - 1 - column``), so the
largest key is the largest value at its lowest column.

* ``MODE=0`` greedy: each program reduces its chunk to its largest key.
* ``MODE=1`` temperature only: the same argmax of ``logits / T + Gumbel noise`` (exact
  sampling from ``softmax(logits / T)``), noise from Philox keyed by a per-row seed.
* ``MODE=2`` top-k (and top-p): each program keeps its chunk's ``K_PAD`` (next power of
  two >= k) largest keys with a bitonic top-k.

With ``S > 1`` each program writes its candidates to a workspace ``[row blocks, S, BM,
K_PAD]`` and bumps its row block's counter (acq_rel atomic); the last to arrive merges the
candidates (top-k of sorted runs, softmax at T, top-p mask by cumsum, inverse CDF with a
per-row uniform) and re-zeroes the counter (zeroed once per (device, stream)). Nothing
waits for another program, so the interpreter runs it too. With ``S = 1`` a program
finishes its own rows.

H200, [1, 151936] fp32, CUDA graph: greedy 5.7 us, temperature 7.2 us, top-k 8 10.5 us,
top-k 50 + top-p 39.5 us (the bitonic stages dominate; cost grows with log(K_PAD)**2).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from .._core import alloc
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.registry import register_op

_SENT = tl.constexpr(-(2 ** 63) + 1)  # key of a padding lane: below every real key


@triton.jit
def _pack(x, offs, mask):
    b = x.to(tl.int32, bitcast=True)
    b = b ^ ((b >> 31) & 0x7FFFFFFF)  # signed-integer order == float order
    key = (b.to(tl.int64) << 32) | (0x7FFFFFFF - offs).to(tl.int64)
    return tl.where(mask, key, _SENT)


@triton.jit
def _indicator(N_DIMS: tl.constexpr, J: tl.constexpr):
    return tl.reshape(tl.arange(0, 2), [1] * (N_DIMS - J - 1) + [2] + [1] * J)


@triton.jit
def _cas(h, flip, I: tl.constexpr, N_DIMS: tl.constexpr):
    """Compare-and-swap along the I-th innermost axis of a [2] * N_DIMS hypercube."""
    y = tl.sum(h, axis=N_DIMS - 1 - I, keep_dims=True) - h  # the partner (wrapping int64)
    return tl.where((h > y) != (flip ^ _indicator(N_DIMS, I)).to(tl.int1), y, h)


@triton.jit
def _merge(h, STAGE: tl.constexpr, ORDER: tl.constexpr, N_DIMS: tl.constexpr):
    if ORDER == 2:  # alternating
        flip = _indicator(N_DIMS, STAGE)
    else:
        flip = ORDER  # 0 ascending, 1 descending
    for i in tl.static_range(STAGE):
        h = _cas(h, flip, STAGE - 1 - i, N_DIMS)
    return h


@triton.jit
def _topk(x, LOG_BM: tl.constexpr, LOG_W: tl.constexpr, LOG_K: tl.constexpr,
          RUNS: tl.constexpr):
    """The 2**LOG_K largest keys of each row of x [2**LOG_BM, 2**LOG_W], descending: the
    bitonic top-k of ``tl.topk`` with a ``tl.sum``-based compare-and-swap (``xor_sum`` runs
    element by element in the interpreter). ``RUNS``: x is already sorted runs of 2**LOG_K
    in alternating directions, so the sorting stages are skipped."""
    N: tl.constexpr = LOG_BM + LOG_W
    h = tl.reshape(x, [2] * N)
    if not RUNS:
        for i in tl.static_range(1, LOG_K + 1):  # sort runs of 2**LOG_K
            h = _merge(h, i, 2 if i < LOG_W else 1, N)
    for i in tl.static_range(LOG_K + 1, LOG_W + 1):  # keep the larger half, re-sort
        h = tl.max(h, axis=N - (i - LOG_K) - LOG_K)
        h = _merge(h, LOG_K, 2 if i < LOG_W else 1, N - (i - LOG_K))
    return tl.reshape(h, [2 ** LOG_BM, 2 ** LOG_K])


@triton.jit
def _gumbel(seed, offs):
    """Gumbel noise -log(E), E = -log(1 - W) ~ Exp(1), W uniform in (0, 1); small E (which
    decides the argmax) by a series in W, not log(U) near U = 1, which float32 cannot resolve."""
    r = tl.randint(seed, offs)
    w = tl.minimum(r.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10, 0.99999994)
    z = w / (2.0 - w)  # -log(1 - w) = 2 atanh(z)
    z2 = z * z
    poly = 1.0 + z2 * (0.3333333333 + z2 * (0.2 + z2 * (0.1428571429 + z2 * (
        0.1111111111 + z2 * (0.0909090909 + z2 * 0.0769230769)))))
    e = tl.where(w < 0.5, 2.0 * z * poly, -tl.log(1.0 - w))
    return -tl.log(e)


@triton.jit
def _finish(keys, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
            LOG_BM: tl.constexpr, LOG_W: tl.constexpr, LOG_K: tl.constexpr,
            MODE: tl.constexpr, TOP_P: tl.constexpr, RUNS: tl.constexpr):
    """Select each row's token from its candidate keys [BM, 2**LOG_W] and store it."""
    if MODE == 2:
        K_PAD: tl.constexpr = 2 ** LOG_K
        top = _topk(keys, LOG_BM, LOG_W, LOG_K, RUNS)  # [BM, K_PAD], descending
        rank = tl.arange(0, K_PAD)[None, :]
        valid = (top != _SENT) & (rank < top_k)
        hi = (top >> 32).to(tl.int32)
        v = (hi ^ ((hi >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
        idx = 0x7FFFFFFF - top.to(tl.int32)
        m = tl.max(tl.where(valid, v, -float("inf")), axis=1)
        e = tl.where(valid, tl.exp2((v - m[:, None]) * (inv_temp * 1.4426950408889634)), 0.0)
        n_keep = tl.sum(valid.to(tl.int32), axis=1)
        if TOP_P:
            p = e / tl.sum(e, axis=1)[:, None]
            excl = tl.cumsum(p, 1) - p  # probability mass strictly before each token
            keep = valid & ((excl < top_p) | (rank == 0))
            e = tl.where(keep, e, 0.0)
            n_keep = tl.sum(keep.to(tl.int32), axis=1)
        c = tl.cumsum(e, 1)
        u = (seed & 0xFFFFFF).to(tl.float32) * 5.960464477539063e-08  # [0, 1), 24 bits
        below = (c <= (u * tl.sum(e, axis=1))[:, None]).to(tl.int32)
        r = tl.minimum(tl.sum(below, axis=1), n_keep - 1)
        tok = tl.sum(tl.where(rank == r[:, None], idx, 0), axis=1)
    else:
        tok = 0x7FFFFFFF - tl.max(keys, axis=1).to(tl.int32)
    tl.store(out_ptr + rows, tok.to(tl.int64), mask=rmask)


@triton.jit
def _sample_kernel(x_ptr, out_ptr, seed_ptr, ws_ptr, cnt_ptr, B, N, sxr, sxn, S,
                   top_k, inv_temp, top_p,
                   LOG_BM: tl.constexpr, LOG_CHUNK: tl.constexpr, LOG_K: tl.constexpr,
                   LOG_M: tl.constexpr, MODE: tl.constexpr, TOP_P: tl.constexpr,
                   SPLIT: tl.constexpr):
    BM: tl.constexpr = 2 ** LOG_BM
    CHUNK: tl.constexpr = 2 ** LOG_CHUNK
    K_PAD: tl.constexpr = 2 ** LOG_K
    M_PAD: tl.constexpr = 2 ** LOG_M
    # Program (row block rb, chunk): rows rb*BM .. rb*BM+BM-1, columns of chunk `chunk`.
    pid = tl.program_id(0)
    rb = pid // S
    chunk = pid % S
    m = tl.arange(0, BM)
    rows = rb * BM + m
    rmask = rows < B
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = rmask[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * sxr + cols.to(tl.int64)[None, :] * sxn,
                mask=mask, other=0.0).to(tl.float32)
    seed = tl.load(seed_ptr + rows, mask=rmask, other=0)
    cols2 = cols[None, :] + tl.zeros([BM, CHUNK], dtype=tl.int32)
    if MODE == 1:
        x = x * inv_temp + _gumbel(seed[:, None], cols2)
    keys = _pack(x, cols2, mask)
    if SPLIT:
        if MODE == 2:
            cand = _topk(keys, LOG_BM, LOG_CHUNK, LOG_K, False)  # descending
        else:
            cand = tl.max(keys, axis=1, keep_dims=True)
        # workspace [row blocks, S, BM, K_PAD]
        ws = ws_ptr + rb.to(tl.int64) * S * BM * K_PAD
        kk = tl.arange(0, K_PAD)[None, :]
        tl.store(ws + (chunk * BM + m[:, None]) * K_PAD + kk, cand)
        tl.debug_barrier()  # every thread's stores happen before the release below
        if tl.atomic_add(cnt_ptr + rb, 1, sem="acq_rel") == S - 1:
            tl.atomic_xchg(cnt_ptr + rb, 0)  # ready for the next launch
            # candidate j = (chunk c, rank r); even chunks are read reversed, so that the
            # runs alternate ascending / descending as the bitonic top-k expects
            j = tl.arange(0, M_PAD)[None, :]
            c = j // K_PAD
            r = tl.where(c % 2 == 0, K_PAD - 1 - j % K_PAD, j % K_PAD)
            merged = tl.load(ws + (c * BM + m[:, None]) * K_PAD + r,
                             mask=(j < S * K_PAD) & rmask[:, None], other=_SENT,
                             cache_modifier=".cg")
            _finish(merged, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                    LOG_BM, LOG_M, LOG_K, MODE, TOP_P, True)
    else:
        _finish(keys, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                LOG_BM, LOG_CHUNK, LOG_K, MODE, TOP_P, False)


# ---------------------------------------------------------------------------- launcher

#: Tuning knobs (the interpreter uses small chunks so that tests exercise the split path).
MIN_CHUNK = 64 if INTERPRET else 1024
MAX_CHUNK = 256 if INTERPRET else 16384
MAX_MERGE = 1024 if INTERPRET else 8192  # candidates the merging program holds at once
BLOCK_ELEMS = 8192 if INTERPRET else 2048  # rows per program: BM * max(chunk, merge) <= this
MAX_K = 256  # larger top_k (after clamping to V) takes the reference path


_SAMPLE = Launcher(_sample_kernel)


def _plan(n_rows: int, V: int, k_pad: int, mode: int, device: torch.device):
    """(chunk, S, BM) for a launch, or None when no chunking fits the merge budget."""
    want = max(1, cdiv(2 * num_sms(device), n_rows))  # chunks per row to fill the GPU
    chunk = next_pow2(cdiv(V, want))
    if mode == 2:  # balance the per-chunk top-k (~chunk) against the merge (~S * k_pad)
        chunk = max(chunk, next_pow2(math.isqrt(V * k_pad)))
    chunk = max(min(max(chunk, MIN_CHUNK), MAX_CHUNK, next_pow2(V)), k_pad)
    S = cdiv(V, chunk)
    while S > 1 and next_pow2(S * k_pad) > MAX_MERGE:
        chunk *= 2
        S = cdiv(V, chunk)
    if chunk > max(MAX_CHUNK, k_pad):
        return None
    width = max(chunk, next_pow2(S * k_pad) if S > 1 else 0)
    return chunk, S, min(next_pow2(n_rows), max(1, BLOCK_ELEMS // width))


def _mode(V: int, temperature: float, top_k: int, top_p: float):
    """(MODE, effective k) for the kernel."""
    k = V if top_k == 0 else min(top_k, V)
    if temperature == 0.0 or k == 1:
        return 0, 1
    if k == V and top_p >= 1.0:
        return 1, 1
    return 2, k


def _launch(x: torch.Tensor, seeds: torch.Tensor, temperature: float, top_k: int,
            top_p: float, plan) -> torch.Tensor:
    n_rows, V = x.shape
    mode, k = _mode(V, temperature, top_k, top_p)
    k_pad = next_pow2(k)
    out = alloc.empty(n_rows, dtype=torch.int64, device=x.device)
    chunk, S, bm = plan
    split = S > 1
    n_rb = cdiv(n_rows, bm)
    ws = workspace(x.device, "sample.candidates", n_rb * S * bm * k_pad if split else 1, torch.int64)
    cnt = workspace(x.device, "sample.counters", n_rb, torch.int32, zeroed=True) if split else ws
    m_pad = next_pow2(S * k_pad)
    width = bm * max(chunk, m_pad if split else 0)
    # bitonic stages want every thread (H200, 4096 keys: 16 warps 43 us, 32 warps 37 us)
    num_warps = max(4, min(32, width // 128)) if mode == 2 else max(4, min(16, width // 256))
    _SAMPLE[(n_rb * S,)](
        x, out, seeds, ws, cnt, n_rows, V, x.stride(0), x.stride(1), S, k,
        1.0 / temperature if temperature > 0 else 1.0, top_p,
        LOG_BM=bm.bit_length() - 1, LOG_CHUNK=chunk.bit_length() - 1, LOG_K=k_pad.bit_length() - 1,
        LOG_M=m_pad.bit_length() - 1, MODE=mode, TOP_P=mode == 2 and top_p < 1.0, SPLIT=split,
        num_warps=num_warps)
    return out


# ---------------------------------------------------------------------------- reference

def _reference(x: torch.Tensor, seeds: torch.Tensor, temperature: float, top_k: int,
               top_p: float) -> torch.Tensor:
    """x: (B, V). Inverse-CDF sampling with the per-row uniform held in ``seeds``' low 24 bits."""
    V = x.shape[-1]
    x = x if x.dtype == torch.float64 else x.float()
    mode, k = _mode(V, temperature, top_k, top_p)
    if mode == 0:
        return x.argmax(-1)
    vals, idx = (x, None) if mode == 1 else torch.topk(x, k, dim=-1)  # sorted, largest first
    e = torch.exp((vals - vals.max(-1, keepdim=True).values) / temperature)
    n_keep = torch.full_like(seeds, e.shape[-1])
    if mode == 2 and top_p < 1.0:
        p = e / e.sum(-1, keepdim=True)
        keep = (p.cumsum(-1) - p) < top_p
        keep[:, 0] = True
        e = e * keep
        n_keep = keep.sum(-1)
    c = e.cumsum(-1)
    u = (seeds & 0xFFFFFF).to(x.dtype) * 2.0 ** -24
    r = (c <= (u * e.sum(-1)).unsqueeze(-1)).sum(-1)
    r = torch.minimum(r, n_keep - 1).unsqueeze(-1)
    return (r if idx is None else idx.gather(-1, r)).squeeze(-1)


# ---------------------------------------------------------------------------- op

def _fake(logits, seeds, temperature, top_k, top_p):
    return logits.new_empty(logits.shape[:-1], dtype=torch.int64)


@register_op("sample", fake=_fake)
def _sample_op(logits: torch.Tensor, seeds: torch.Tensor, temperature: float, top_k: int,
               top_p: float) -> torch.Tensor:
    n_rows, V = logits.shape
    if n_rows == 0:
        return alloc.empty(0, dtype=torch.int64, device=logits.device)
    if use_triton(logits) and logits.dtype in KERNEL_DTYPES:
        mode, k = _mode(V, temperature, top_k, top_p)
        plan = _plan(n_rows, V, next_pow2(k), mode, logits.device) if k <= MAX_K else None
        if plan is not None:
            return _launch(logits, seeds, temperature, top_k, top_p, plan)
    return _reference(logits, seeds, temperature, top_k, top_p)


def _checked(logits, temperature, top_k, top_p, generator):
    check_tensor("logits", logits)
    if not logits.dtype.is_floating_point or logits.dtype.is_complex:
        raise TypeError(f"logits: expected a floating-point tensor, got {logits.dtype}")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits: expected shape (V,) or (B, V), got {tuple(logits.shape)}")
    if logits.shape[-1] == 0:
        raise ValueError(f"logits: the vocabulary dimension is empty, shape {tuple(logits.shape)}")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature: expected a float, got {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature: expected a finite value >= 0, got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral)
                              or top_k < 1):
        raise ValueError(f"top_k: expected None or an int >= 1, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p: expected None or a float in (0, 1], got {top_p!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    if generator is not None and generator.device.type != logits.device.type:
        raise ValueError(f"generator: is on {generator.device}, logits on {logits.device}")
    x = logits.unsqueeze(0) if logits.dim() == 1 else logits
    if temperature == 0 or top_k == 1:  # greedy: no random numbers, no extra launch
        seeds = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    else:
        seeds = torch.randint(0, 2 ** 62, (x.shape[0],), generator=generator, device=x.device)
    return x, seeds, float(temperature), int(top_k or 0), float(1.0 if top_p is None else top_p)


def sample(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
           top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Sample one token id per row of ``logits``, with Hugging Face's sampling semantics.

    ``temperature == 0`` is greedy (``argmax``, first index on ties). Otherwise the logits are
    divided by ``temperature``, the ``top_k`` largest kept, then the smallest prefix (in
    descending order) of the renormalised distribution whose mass reaches ``top_p`` (a token
    is kept iff the mass strictly before it is below ``top_p``; the top token always is),
    and one token is drawn from what is left.

    Parameters
    ----------
    logits : (V,) or (B, V) float16 / bfloat16 / float32, any strides (float64: reference path).
    temperature : finite float >= 0. top_k : None or int >= 1 (clamped to V).
    top_p : None or float in (0, 1]; 1 disables it.
    generator : torch.Generator on logits' device; the same state gives the same tokens.

    Returns
    -------
    int64 tensor of shape (B,) (or () for 1-D logits) on logits' device. No host-device
    synchronisation (CUDA-graph capturable); ``torch.compile(fullgraph=True)`` traces it.
    The randomness is one int64 per row drawn from ``generator`` on the device (greedy
    calls draw none and leave the generator untouched). A Triton
    kernel serves CUDA (and interpreted CPU) tensors; ``top_k`` above 256 after clamping,
    and ``top_p`` without ``top_k`` on a vocabulary wider than 256, take the PyTorch
    reference path on the same device (a full sort). NaN logits give an unspecified token.

    Raises
    ------
    TypeError for a non-tensor or non-float ``logits`` or a non-Generator ``generator``;
    ValueError for a bad shape, an empty vocabulary, or a ``temperature``, ``top_k`` or
    ``top_p`` out of range.

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.sample(torch.tensor([[0.1, 2.0, -1.0]]), temperature=0.0)
    tensor([1])
    """
    x, seeds, t, k, p = _checked(logits, temperature, top_k, top_p, generator)
    out = _sample_op(x, seeds, t, k, p)
    return out.squeeze(0) if logits.dim() == 1 else out


def reference_sample(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                     top_p: Optional[float] = None, generator: Optional[torch.Generator] = None):
    """PyTorch path of :func:`sample` (topk / softmax / cumsum / inverse CDF), same arguments.
    It draws the same random numbers; with top-k or top-p both paths use them as the same
    inverse-CDF uniform, so they agree token for token up to float rounding and ties."""
    x, seeds, t, k, p = _checked(logits, temperature, top_k, top_p, generator)
    out = _reference(x, seeds, t, k, p)
    return out.squeeze(0) if logits.dim() == 1 else out


FAMILY = {"name": "sampling", "ops": ["sample"], "reason": triton_reason}
