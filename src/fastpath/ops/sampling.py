"""Token sampling from logits: greedy, temperature, top-k and top-p (nucleus), in one launch.

One kernel, ``_sample_kernel``, with ``tl.constexpr`` variants. A program handles ``BM``
rows by one chunk of columns; a row of a whole vocabulary is split into ``S`` chunks so
that it keeps many multiprocessors busy. A value and its column are packed into one int64
*key* (order-preserving integer image of the float, then ``2**31 - 1 - column``), so the
largest key is the largest value at its lowest column, and no two keys of a row are equal.

* ``MODE=0`` greedy: each program reduces its chunk to its largest key.
* ``MODE=1`` temperature only: the same argmax of ``logits / T + Gumbel noise`` (exact
  sampling from ``softmax(logits / T)``), noise from Philox keyed by a per-row seed.
* ``MODE=2`` top-k (and top-p): each program keeps its chunk's ``K_PAD`` (next power of
  two >= k) largest keys, descending, with a bitonic top-k (``_topk``).

With ``S > 1`` each program writes its candidates to a workspace ``[row blocks, S, BM,
K_PAD]`` and bumps its row block's counter (acq_rel atomic); the last to arrive merges the
candidates (top-k of sorted runs, softmax at T, top-p mask by cumsum, inverse CDF with a
per-row uniform) and re-zeroes the counter (zeroed once per (device, stream)). Nothing
waits for another program, so the interpreter runs it too. With ``S = 1`` a program
finishes its own rows.

Pruning (``PRUNE``, mode 2). A bitonic top-k costs ``log(K_PAD)**2`` stages over every
lane it holds, so it runs on a small buffer of ``CAP`` lanes instead of thousands of keys.
The k-th largest key of any *subset* of a row's keys is a lower bound of the row's k-th
largest key, so the row's top k are among the keys at or above it:

* chunk phase: ``t`` = the k-th largest of the maxima of ``2 * K_PAD`` strided groups of the
  chunk (group g holds columns g, g + 2 K_PAD, ...; a top-k of 2 K_PAD lanes);
* merge phase: ``T`` = the larger of (a) the largest rank-(k-1) key of any chunk and (b) the
  k-th largest of the top ``R`` keys of every chunk (``S * R >= MERGE_GROUPS * K_PAD``). Only
  ranks < k of each run can reach T; when no run has more than ``MERGE_DEPTH`` keys >= T
  (checked on rank MERGE_DEPTH of every run) only those ranks are read, in one step.

The keys at or above the bound are compacted (``tl.cumsum`` positions, per-program scratch
in the workspace) into ``CAP`` lanes and the top-k runs there; a chunk's candidates are then
exact at ranks < k, which is all the merge and ``_finish`` use. For random logits about
``1.2 k`` to ``1.5 k`` keys pass (sorted or all-equal logits: exactly k). If more than ``CAP``
pass in some row of the block (crafted or strongly clustered data), that phase takes its
exact fallback, chosen at run time: the full top-k of the chunk, or a merge of the sorted
runs ``MERGE_TILE`` lanes at a time. Either way ``_finish`` sees the row's top k in the same
order, so the tokens are those of the unpruned path. ``PRUNE = False`` selects the unpruned
path (one top-k over the whole chunk, one over all ``S * K_PAD`` candidates).

H200, [1, 151936] fp32, CUDA graph (``scripts/tune_sample.py``): top-k 50 + top-p 0.9 at
T 0.7 pruned 15.9 us a call (chunks of 2048, CAP 128), unpruned 39.3; top-k 8 unpruned
10.3 us, pruned 11.4, so pruning starts at K_PAD 16; [64, 151936] top-k 50 197 us against
482; greedy 5.7 us and temperature 7.2 us (modes 0 and 1).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from .._core import alloc
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .._core.memo import LaunchMemo
from .._core.backend import INTERPRET, num_sms, pdl_start, tl, triton, triton_reason, use_triton
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
          LOG_RUN: tl.constexpr):
    """The 2**LOG_K largest keys of each row of x [2**LOG_BM, 2**LOG_W], descending: the
    bitonic top-k of ``tl.topk`` with a ``tl.sum``-based compare-and-swap (``xor_sum`` runs
    element by element in the interpreter). ``LOG_RUN`` (<= LOG_K): x is already sorted runs
    of 2**LOG_RUN, ascending and descending in turn (even runs ascending), so the first
    LOG_RUN sorting stages are skipped (0: unsorted)."""
    N: tl.constexpr = LOG_BM + LOG_W
    h = tl.reshape(x, [2] * N)
    for i in tl.static_range(LOG_RUN + 1, LOG_K + 1):  # sort runs of 2**LOG_K
        h = _merge(h, i, 2 if i < LOG_W else 1, N)
    for i in tl.static_range(LOG_K + 1, LOG_W + 1):  # keep the larger half, re-sort
        h = tl.max(h, axis=N - (i - LOG_K) - LOG_K)
        h = _merge(h, LOG_K, 2 if i < LOG_W else 1, N - (i - LOG_K))
    return tl.reshape(h, [2 ** LOG_BM, 2 ** LOG_K])


@triton.jit
def _kth(top, top_k, LOG_K: tl.constexpr):
    """Rank ``top_k - 1`` of each row of descending keys [BM, 2**LOG_K]."""
    rank = tl.arange(0, 2 ** LOG_K)[None, :]
    return tl.max(tl.where(rank == top_k - 1, top, _SENT), axis=1)


@triton.jit
def _compact(keys, keep, count, scr, LOG_BM: tl.constexpr, LOG_CAP: tl.constexpr):
    """Append the kept keys of each row of keys [BM, W] to that row's list in the scratch
    ``[BM, CAP]`` (which holds ``count`` keys); return the new counts. Keys past CAP are
    counted but not stored."""
    CAP: tl.constexpr = 2 ** LOG_CAP
    pos = count[:, None] + tl.cumsum(keep.to(tl.int32), 1) - 1
    tl.store(scr + tl.arange(0, 2 ** LOG_BM)[:, None] * CAP + pos, keys, mask=keep & (pos < CAP))
    return count + tl.sum(keep.to(tl.int32), 1)


@triton.jit
def _compacted_top(count, scr, LOG_BM: tl.constexpr, LOG_K: tl.constexpr, LOG_CAP: tl.constexpr):
    """Top 2**LOG_K of the ``count`` (<= CAP) keys each row holds in the scratch."""
    CAP: tl.constexpr = 2 ** LOG_CAP
    c = tl.arange(0, CAP)[None, :]
    buf = tl.load(scr + tl.arange(0, 2 ** LOG_BM)[:, None] * CAP + c, mask=c < count[:, None],
                  other=_SENT)
    return _topk(buf, LOG_BM, LOG_CAP, LOG_K, 0)


@triton.jit
def _chunk_top(keys, scr, top_k, LOG_BM: tl.constexpr, LOG_CHUNK: tl.constexpr,
               LOG_K: tl.constexpr, LOG_CAP: tl.constexpr, PRUNE: tl.constexpr):
    """The chunk's candidates: [BM, K_PAD] keys, descending, exact at ranks < top_k (all
    ranks without pruning or in the fallback)."""
    if PRUNE:
        BM: tl.constexpr = 2 ** LOG_BM
        G: tl.constexpr = 2 ** (LOG_K + 1)
        # t: the k-th largest of the maxima of G strided groups (a subset of the keys)
        gmax = tl.max(tl.reshape(keys, [BM, 2 ** LOG_CHUNK // G, G]), axis=1)
        t = _kth(_topk(gmax, LOG_BM, LOG_K + 1, LOG_K, 0), top_k, LOG_K)
        keep = (keys >= t[:, None]) & (keys != _SENT)
        count = _compact(keys, keep, tl.zeros([BM], dtype=tl.int32), scr, LOG_BM, LOG_CAP)
        tl.debug_barrier()  # the scratch stores happen before the loads
        if tl.max(count, axis=0) <= 2 ** LOG_CAP:
            top = _compacted_top(count, scr, LOG_BM, LOG_K, LOG_CAP)
        else:  # too many keys >= t in some row: the full top-k
            top = _topk(keys, LOG_BM, LOG_CHUNK, LOG_K, 0)
    else:
        top = _topk(keys, LOG_BM, LOG_CHUNK, LOG_K, 0)
    return top


@triton.jit
def _merge_runs(ws, scr, rmask, S, LOG_BM: tl.constexpr, LOG_K: tl.constexpr,
                LOG_T: tl.constexpr, LOG_CAP: tl.constexpr):
    """Exact top K_PAD of the S sorted runs ws [S, BM, K_PAD], TILE = 2**LOG_T lanes at a
    time: the first TILE / K_PAD runs, then the running top K_PAD (kept in the scratch) with
    the next TILE / K_PAD - 1 runs, and so on."""
    BM: tl.constexpr = 2 ** LOG_BM
    K_PAD: tl.constexpr = 2 ** LOG_K
    P: tl.constexpr = 2 ** (LOG_T - LOG_K)  # runs per tile
    m = tl.arange(0, BM)[:, None]
    rm = rmask[:, None]
    j = tl.arange(0, 2 ** LOG_T)[None, :]
    q = j // K_PAD
    r = tl.where(q % 2 == 0, K_PAD - 1 - j % K_PAD, j % K_PAD)  # even runs read ascending
    x = tl.load(ws + (q * BM + m) * K_PAD + r, mask=(q < S) & rm, other=_SENT,
                cache_modifier=".cg")
    acc = _topk(x, LOG_BM, LOG_T, LOG_K, LOG_K)
    for c0 in range(P, S, P - 1):
        tl.debug_barrier()  # every thread has read the scratch
        tl.store(scr + m * 2 ** LOG_CAP + tl.arange(0, K_PAD)[None, :], acc)
        tl.debug_barrier()
        c = c0 + q - 1
        x = tl.load(ws + (c * BM + m) * K_PAD + r, mask=(q > 0) & (c < S) & rm, other=_SENT,
                    cache_modifier=".cg")
        prev = tl.load(scr + m * 2 ** LOG_CAP + r, mask=q == 0, other=_SENT)
        acc = _topk(tl.where(q == 0, prev, x), LOG_BM, LOG_T, LOG_K, LOG_K)
    return acc


@triton.jit
def _merge_top(ws, scr, rmask, S, top_k, LOG_BM: tl.constexpr, LOG_K: tl.constexpr,
               LOG_CAP: tl.constexpr, LOG_R: tl.constexpr, LOG_GM: tl.constexpr,
               LOG_T: tl.constexpr, LOG_S: tl.constexpr, LOG_D: tl.constexpr):
    """The row's top K_PAD keys (exact at ranks < top_k), descending, from the S sorted runs
    of candidates ws [S, BM, K_PAD]: prune at a lower bound T of the k-th largest key."""
    BM: tl.constexpr = 2 ** LOG_BM
    K_PAD: tl.constexpr = 2 ** LOG_K
    R: tl.constexpr = 2 ** LOG_R
    m = tl.arange(0, BM)[:, None]
    rm = rmask[:, None]
    g = tl.arange(0, 2 ** LOG_GM)[None, :]
    # (a) the largest rank-(k-1) key of a chunk (tight when one chunk holds the top keys)
    kth = tl.load(ws + (g * BM + m) * K_PAD + (top_k - 1), mask=(g < S) & rm, other=_SENT,
                  cache_modifier=".cg")
    T = tl.max(kth, axis=1)
    # (b) the k-th largest of the top R keys of every chunk (runs of R, even runs ascending)
    c = g // R
    i = tl.where(c % 2 == 0, R - 1 - g % R, g % R)
    heads = tl.load(ws + (c * BM + m) * K_PAD + i, mask=(c < S) & rm, other=_SENT,
                    cache_modifier=".cg")
    T = tl.maximum(T, _kth(_topk(heads, LOG_BM, LOG_GM, LOG_K, LOG_R), top_k, LOG_K))
    # compact the candidates >= T: at most k per run (T >= bound (a)), usually fewer than D
    count = tl.zeros([BM], dtype=tl.int32)
    deep = tl.load(ws + (g * BM + m) * K_PAD + 2 ** LOG_D, mask=(g < S) & rm, other=_SENT,
                   cache_modifier=".cg")  # rank D of every run (LOG_D < LOG_K)
    if tl.max(((tl.max(deep, axis=1) >= T) & rmask).to(tl.int32), axis=0) == 0:
        # no run has more than D keys >= T: ranks < D of every run
        jd = tl.arange(0, 2 ** (LOG_S + LOG_D))[None, :]
        cand = tl.load(ws + ((jd >> LOG_D) * BM + m) * K_PAD + (jd & (2 ** LOG_D - 1)),
                       mask=((jd >> LOG_D) < S) & rm, other=_SENT, cache_modifier=".cg")
        count = _compact(cand, (cand >= T[:, None]) & (cand != _SENT), count, scr, LOG_BM,
                         LOG_CAP)
    else:  # all ranks < k of every run, TILE lanes at a time
        j = tl.arange(0, 2 ** LOG_T)[None, :]
        for start in range(0, S * K_PAD, 2 ** LOG_T):
            jj = start + j
            cand = tl.load(ws + ((jj // K_PAD) * BM + m) * K_PAD + jj % K_PAD,
                           mask=(jj < S * K_PAD) & (jj % K_PAD < top_k) & rm, other=_SENT,
                           cache_modifier=".cg")
            count = _compact(cand, (cand >= T[:, None]) & (cand != _SENT), count, scr, LOG_BM,
                             LOG_CAP)
    tl.debug_barrier()  # the scratch stores happen before the loads
    if tl.max(count, axis=0) <= 2 ** LOG_CAP:
        top = _compacted_top(count, scr, LOG_BM, LOG_K, LOG_CAP)
    else:  # too many candidates >= T in some row: merge them all
        top = _merge_runs(ws, scr, rmask, S, LOG_BM, LOG_K, LOG_T, LOG_CAP)
    return top


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
            MODE: tl.constexpr, TOP_P: tl.constexpr, LOG_RUN: tl.constexpr):
    """Select each row's token from its candidate keys [BM, 2**LOG_W] and store it."""
    if MODE == 2:
        K_PAD: tl.constexpr = 2 ** LOG_K
        top = _topk(keys, LOG_BM, LOG_W, LOG_K, LOG_RUN)  # [BM, K_PAD], descending
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
def _sample_kernel(x_ptr, out_ptr, seed_ptr, ws_ptr, cnt_ptr, tmp_ptr, B, N, sxr, sxn, S,
                   top_k, inv_temp, top_p,
                   LOG_BM: tl.constexpr, LOG_CHUNK: tl.constexpr, LOG_K: tl.constexpr,
                   LOG_M: tl.constexpr, MODE: tl.constexpr, TOP_P: tl.constexpr,
                   SPLIT: tl.constexpr, PRUNE: tl.constexpr, LOG_CAP: tl.constexpr,
                   LOG_R: tl.constexpr, LOG_GM: tl.constexpr, LOG_S: tl.constexpr,
                   LOG_D: tl.constexpr, PDL: tl.constexpr = 0):
    """PRUNE (mode 2 only): LOG_CAP: the compaction buffer per row; LOG_R, LOG_GM: runs of
    the top R keys of every chunk and their lanes (merge bound (b)); LOG_S: next_pow2(S);
    LOG_D: the merge's one-step depth; LOG_M: lanes of a merge tile. Without PRUNE, LOG_M:
    lanes of all S * K_PAD candidates."""
    pdl_start(PDL)
    BM: tl.constexpr = 2 ** LOG_BM
    CHUNK: tl.constexpr = 2 ** LOG_CHUNK
    K_PAD: tl.constexpr = 2 ** LOG_K
    M_PAD: tl.constexpr = 2 ** LOG_M
    PRUNE_CHUNK: tl.constexpr = PRUNE and LOG_CAP < LOG_CHUNK  # PRUNE is set in mode 2 only
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
    scr = tmp_ptr + pid.to(tl.int64) * (BM * 2 ** LOG_CAP)  # this program's scratch [BM, CAP]
    if SPLIT:
        if MODE == 2:
            cand = _chunk_top(keys, scr, top_k, LOG_BM, LOG_CHUNK, LOG_K, LOG_CAP, PRUNE_CHUNK)
        else:
            cand = tl.max(keys, axis=1, keep_dims=True)
        # workspace [row blocks, S, BM, K_PAD]
        ws = ws_ptr + rb.to(tl.int64) * S * BM * K_PAD
        kk = tl.arange(0, K_PAD)[None, :]
        tl.store(ws + (chunk * BM + m[:, None]) * K_PAD + kk, cand)
        tl.debug_barrier()  # every thread's stores happen before the release below
        if tl.atomic_add(cnt_ptr + rb, 1, sem="acq_rel") == S - 1:
            tl.atomic_xchg(cnt_ptr + rb, 0)  # ready for the next launch
            if MODE == 2 and PRUNE:
                top = _merge_top(ws, scr, rmask, S, top_k, LOG_BM, LOG_K, LOG_CAP, LOG_R,
                                 LOG_GM, LOG_M, LOG_S, LOG_D)
                _finish(top, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                        LOG_BM, LOG_K, LOG_K, MODE, TOP_P, LOG_K)
            else:
                # candidate j = (chunk c, rank r); even chunks are read reversed, so that the
                # runs alternate ascending / descending as the bitonic top-k expects
                j = tl.arange(0, M_PAD)[None, :]
                c = j // K_PAD
                r = tl.where(c % 2 == 0, K_PAD - 1 - j % K_PAD, j % K_PAD)
                merged = tl.load(ws + (c * BM + m[:, None]) * K_PAD + r,
                                 mask=(j < S * K_PAD) & rmask[:, None], other=_SENT,
                                 cache_modifier=".cg")
                _finish(merged, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                        LOG_BM, LOG_M, LOG_K, MODE, TOP_P, LOG_K)
    else:
        if PRUNE_CHUNK:
            top = _chunk_top(keys, scr, top_k, LOG_BM, LOG_CHUNK, LOG_K, LOG_CAP, True)
            _finish(top, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                    LOG_BM, LOG_K, LOG_K, MODE, TOP_P, LOG_K)
        else:
            _finish(keys, out_ptr, rows, rmask, seed, top_k, inv_temp, top_p,
                    LOG_BM, LOG_CHUNK, LOG_K, MODE, TOP_P, 0)


# ---------------------------------------------------------------------------- launcher

#: Tuning knobs, module-level so that tuning scripts can override them (the interpreter
#: uses small sizes so that tests exercise the split and pruned paths).
MIN_CHUNK = 64 if INTERPRET else 1024
MAX_CHUNK = 256 if INTERPRET else 16384
MAX_MERGE = 1024 if INTERPRET else 8192  # unpruned: candidates the merging program holds at once
BLOCK_ELEMS = 8192 if INTERPRET else 2048  # rows per program: BM * (widest tile) <= this
MAX_K = 256  # larger top_k (after clamping to V) takes the reference path
PRUNE = True  # mode 2: threshold pruning + compaction (False: the unpruned bitonic path)
PRUNE_MIN_K = 1 if INTERPRET else 16  # pruning from this K_PAD up (H200, top-k 8: 11.4 us pruned, 10.3 unpruned)
#: ... up to this K_PAD: compiled and measured on the H200 up to 64 (top-k 50); 128 and 256
#: keep the unpruned path there until they are (the interpreter prunes every size).
PRUNE_MAX_K = 1 << 30 if INTERPRET else 64
PRUNE_MIN_CHUNK = 64 if INTERPRET else 2048  # (H200, [1, 151936] top-k 50: 15.9 us; 1024: 17.0)
CAP = 32 if INTERPRET else 128  # compaction buffer lanes per row (at least 2 * K_PAD)
MERGE_GROUPS = 2  # merge bound (b) looks at >= MERGE_GROUPS * K_PAD of the chunks' top keys
MERGE_TILE = 128 if INTERPRET else 2048  # lanes per step of the merge's compaction / fallback
MERGE_DEPTH = 8  # the merge first tries ranks < MERGE_DEPTH of every run (one step)
NUM_WARPS = None  # None: by the widest tile; an int forces it (tuning)


_SAMPLE = Launcher(_sample_kernel, pdl=True)


def _pruned(mode: int, k_pad: int, prune) -> bool:
    return (PRUNE if prune is None else prune) and mode == 2 and PRUNE_MIN_K <= k_pad <= PRUNE_MAX_K


def _plan(n_rows: int, V: int, k_pad: int, mode: int, device: torch.device, prune=None):
    """(chunk, S, BM) for a launch, or None when no chunking fits the merge budget."""
    prune = _pruned(mode, k_pad, prune)
    want = max(1, cdiv(2 * num_sms(device), n_rows))  # chunks per row to fill the GPU
    chunk = next_pow2(cdiv(V, want))
    if mode == 2 and not prune:  # balance the chunk's top-k (~chunk) against the merge (~S * k_pad)
        chunk = max(chunk, next_pow2(math.isqrt(V * k_pad)))
    if prune:
        chunk = max(chunk, PRUNE_MIN_CHUNK)
    chunk = max(min(max(chunk, MIN_CHUNK), MAX_CHUNK, next_pow2(V)), k_pad)
    S = cdiv(V, chunk)
    while not prune and S > 1 and next_pow2(S * k_pad) > MAX_MERGE:
        chunk *= 2
        S = cdiv(V, chunk)
    if chunk > max(MAX_CHUNK, k_pad):
        return None
    width = max(chunk, _merge_tile(S, k_pad, prune) if S > 1 else 0)
    return chunk, S, min(next_pow2(n_rows), max(1, BLOCK_ELEMS // width))


def _merge_tile(S: int, k_pad: int, prune: bool) -> int:
    """Lanes of the merging program's widest tile: all S * K_PAD candidates, or (pruned) a
    tile of at least 2 runs."""
    m_pad = next_pow2(S * k_pad)
    return max(min(m_pad, next_pow2(MERGE_TILE)), 2 * k_pad) if prune else m_pad


def _mode(V: int, temperature: float, top_k: int, top_p: float):
    """(MODE, effective k) for the kernel."""
    k = V if top_k == 0 else min(top_k, V)
    if temperature == 0.0 or k == 1:
        return 0, 1
    if k == V and top_p >= 1.0:
        return 1, 1
    return 2, k


def _meta(n_rows: int, mode: int, k: int, top_p: float, plan, prune=None) -> dict:
    """The kernel's constexprs and ``num_warps`` for a launch (also the tuning script's and
    the offline compile check's view of a configuration)."""
    k_pad = next_pow2(k)
    prune = _pruned(mode, k_pad, prune)
    chunk, S, bm = plan
    cap = max(next_pow2(CAP), 2 * k_pad)
    m_pad = _merge_tile(S, k_pad, prune)
    r = min(k_pad, next_pow2(cdiv(MERGE_GROUPS * k_pad, S)))  # merge bound (b): top r of each run
    depth = max(1, min(next_pow2(MERGE_DEPTH), k_pad // 2))
    width = bm * max(chunk, m_pad if S > 1 else 0)
    if NUM_WARPS is not None:
        num_warps = NUM_WARPS
    elif mode == 2 and not prune:  # bitonic stages want every thread (H200, 4096 keys:
        num_warps = max(4, min(32, width // 128))  # 16 warps 43 us, 32 warps 37 us)
    else:
        num_warps = max(4, min(16, width // 256))
    return dict(LOG_BM=_log2(bm), LOG_CHUNK=_log2(chunk), LOG_K=_log2(k_pad), LOG_M=_log2(m_pad),
                MODE=mode, TOP_P=mode == 2 and top_p < 1.0, SPLIT=S > 1, PRUNE=prune,
                LOG_CAP=_log2(cap), LOG_R=_log2(r), LOG_GM=_log2(next_pow2(S * r)),
                LOG_S=_log2(next_pow2(S)), LOG_D=_log2(depth), num_warps=num_warps)


def _log2(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1


def _launch(x: torch.Tensor, seeds: torch.Tensor, temperature: float, top_k: int,
            top_p: float, plan, prune=None) -> torch.Tensor:
    n_rows, V = x.shape
    mode, k = _mode(V, temperature, top_k, top_p)
    meta = _meta(n_rows, mode, k, top_p, plan, prune)
    k_pad = next_pow2(k)
    out = alloc.empty(n_rows, dtype=torch.int64, device=x.device)
    chunk, S, bm = plan
    n_rb = cdiv(n_rows, bm)
    split = S > 1
    ws = workspace(x.device, "sample.candidates", n_rb * S * bm * k_pad if split else 1, torch.int64)
    cnt = workspace(x.device, "sample.counters", n_rb, torch.int32, zeroed=True) if split else ws
    cap = 2 ** meta["LOG_CAP"]
    if meta["PRUNE"] and (split or chunk > cap):  # per-program compaction scratch [BM, CAP]
        tmp = workspace(x.device, "sample.scratch", n_rb * S * bm * cap, torch.int64)
    else:
        tmp = ws
    _SAMPLE[(n_rb * S,)](
        x, out, seeds, ws, cnt, tmp, n_rows, V, x.stride(0), x.stride(1), S, k,
        1.0 / temperature if temperature > 0 else 1.0, top_p, **meta)
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
    if mode == 1:
        vals, idx = x, None
    else:  # largest first, ties at the lower column first as the kernel's keys order them (torch.topk's
        # order of ties is unspecified: a tie across the top-p boundary kept another token than the kernel)
        vals, idx = torch.sort(x, dim=-1, descending=True, stable=True)
        vals, idx = vals[..., :k], idx[..., :k]
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
    check_params(temperature, top_k, top_p)
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


def check_params(temperature, top_k, top_p) -> None:
    """The sampling parameters' checks (``sample``'s, also made by ``SamplingParams`` when built,
    so a command line says a bad one before loading any weight)."""
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
    out = _MEMO.call(lambda: _sample_op(x, seeds, t, k, p), (x, seeds), (t, k, p))
    return out.squeeze(0) if logits.dim() == 1 else out


_MEMO = LaunchMemo()


def reference_sample(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                     top_p: Optional[float] = None, generator: Optional[torch.Generator] = None):
    """PyTorch path of :func:`sample` (topk / softmax / cumsum / inverse CDF), same arguments.
    It draws the same random numbers; with top-k or top-p both paths use them as the same
    inverse-CDF uniform, so they agree token for token up to float rounding and ties."""
    x, seeds, t, k, p = _checked(logits, temperature, top_k, top_p, generator)
    out = _reference(x, seeds, t, k, p)
    return out.squeeze(0) if logits.dim() == 1 else out


FAMILY = {"name": "sampling", "ops": ["sample"], "reason": triton_reason}
