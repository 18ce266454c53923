"""The kernel, plans and launchers of :mod:`fastpath.ops.batch_norm` (its tuning knobs too:
:func:`configure`).

The input is read as (N, C, S) through its strides (S: the spatial dimensions merged; a
layout whose spatial dimensions do not merge is copied once). One kernel, ``_bn_kernel``,
walks tiles of (a, b) elements, read with vector loads along a contiguous dimension:

* NCHW mode: a group is one channel, a tile is (n, s) with s contiguous: N runs of S values.
* channels-last mode (channels-last 4-D/5-D and 2-D (N, C) inputs, whenever rows of C
  channels are evenly strided): a group is ``GC`` adjacent channels, a tile is (row, channel)
  with channels contiguous, rows = (n, s) flattened.

Each group's tiles are split into ``K`` chunks, one program each, so that few channels still
fill the GPU. A program reduces its chunk to a partial: forward (count, mean, M2) of
``x - pivot`` (pivot: the channel's first value, so differences are exact and means small;
the chunk is centred on its first tile's mean, so squares do not cancel), backward
(sum g, sum g * xhat). Per-element accumulators, one tree reduction per chunk, a tree over
chunks: no long serial float32 sum. The last program of a group to arrive (an acq_rel
counter) combines the ``K`` partials (Chan's formula), writes the statistics (and updates the
running statistics) or dweight / dbias, and resets the counter. Then the normalise pass:

* ``PHASE=0`` (fused, one launch): the other programs of the group wait for the combined
  statistics (the combining program bumps the group's generation counter, which each
  program read before arriving), then write their chunk of y / dx. A chunk of one tile
  (``ONE``) stays in registers: x (and g) are read from memory once; longer chunks are re-read,
  mostly from L2. Programs take (group, chunk) from a ticket counter in the order they start,
  so a group's chunks always run together: deadlock-free for ``K`` <= the SM count.
* ``PHASE=1`` then ``PHASE=2`` (two launches): reduce, then normalise (no barrier; any ``K``;
  also what Triton's interpreter runs, where programs run one after another). NCHW and
  channels-last 4-D/5-D inputs take this mode on the GPU too (``FUSED_NCHW``, ``FUSED_CL``).
  The reduce launch's programs take every K-th tile (``SPREAD``); the normalising launch walks
  the chunks from the last (``REVERSE``), so its first reads hit what the reduce left in L2.
  Channels-last inputs reduce on a grid of their own (``red``: rows of up to 256 channels, few
  warps, long chunks: a program's sums per channel across warps cost more than its loads)
  and write only partials (``ARRIVE=False``); ``_bn_combine_kernel`` then merges them, a few
  channels a program, from partials laid out (3, C, K) so that a channel's are contiguous.

Host side: per (shape, strides, dtypes) the plan and the launch arguments are cached, and
the eager autograd path is a plain ``torch.autograd.Function`` (no dispatcher), so a training
step costs two to six launches and little Python. ``torch.compile`` goes through the
registered ops. Tile sizes, warps and the fused/two-launch choice are module-level knobs
(:func:`configure`); ``scripts/tune_batch_norm.py`` sweeps them on a GPU.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, cooperative_launch, num_sms, tl, triton, use_triton
from .._core.errors import KERNEL_DTYPES
from .._core.launch import Launcher, cdiv, next_pow2, workspace

# Tuning knobs (``scripts/tune_batch_norm.py`` sweeps them on a GPU; call :func:`configure`
# to change them, which also drops the cached plans). The interpreter uses small tiles so that
# CI exercises multi-tile, multi-chunk and multi-group paths.
#: Bytes of input per tile (elements: TILE_BYTES // itemsize) and warps per program when a
#: program's chunk is one tile held in registers; LOOP_* when it loops over several tiles
#: (with accumulators).
TILE_BYTES = 512 if INTERPRET else 16384
LOOP_TILE_BYTES = 512 if INTERPRET else 8192
WARPS = 16
LOOP_WARPS = 4
#: Most channels per tile (channels-last mode); longest spatial run per tile (NCHW mode).
MAX_BC = 8 if INTERPRET else 64
MAX_BS = 16 if INTERPRET else 1024
#: 2-D (N, C) input (BatchNorm1d), fused one-tile mode: wider tiles of fewer channels, so that
#: each group has few chunks to wait for, and few warps (a program's per-channel sums across
#: warps are costly). H200, 8192 x 1024 fp32 forward + backward, kernel times summed: 84 us in
#: 256x32 tiles of 4 warps, 95 in 512x32 tiles of 16 warps, 440 with the defaults above (16
#: groups of 128 chunks); cuDNN 97.
TILE_BYTES_2D = 512 if INTERPRET else 32768
MAX_BC_2D = 8 if INTERPRET else 32
WARPS_2D = 4
#: Two-launch mode: tiles per program, shrunk until there are WAVES * SMs programs.
CHUNK_TILES = 2 if INTERPRET else 8
WAVES = 1 if INTERPRET else 4
#: Fused mode (one launch per direction) where a group's chunks fit the SM count: one tile
#: each, else at most FUSED_MAX_TILES loop tiles each; else two launches.
FUSED = not INTERPRET
FUSED_MAX_TILES = 16
#: Fused mode for NCHW inputs too. Off: on the H200 (bench, graph mode, forward + backward)
#: NCHW runs faster in two launches with REVERSE (32x256x56x56 bf16 132 us against 190 fused;
#: 256x64x112x112 fp16 855 against 989); channels-last and 2-D inputs faster fused (209 / 100
#: us against 219 / 129).
FUSED_NCHW = False
#: Two-launch mode: the normalising launch walks the chunks from the last (meets the reduce
#: launch's last reads in L2).
REVERSE = True
#: Polls of the group barrier before a program gives up (NaN outputs instead of a hang;
#: not expected with K <= SMs, every chunk of a group being resident).
SPIN_LIMIT = 1 << 22
#: Channels-last inputs, two launches: channels per tile (wide tiles: whole rows of up to this
#: many channels, so that reads run along memory), and the combine in a launch of its own
#: (``_bn_combine_kernel``, COMBINE_BC channels a program) instead of in each group's last
#: arriving chunk. FUSED_CL / FUSED_2D: channels-last 4-D/5-D / 2-D (N, C) inputs take the fused
#: mode where it fits. H200, forward + backward, kernel times summed (profiler, cold L2;
#: ``tune_batch_norm.py --phases``): 32x256x56x56 bf16 channels-last 140 us in two launches
#: (reduce 27, combine 5, normalise 25; backward 42, 3.5, 38) against 169-188 fused, cuDNN
#: 220; 8192 x 1024 fp32 85 us fused (WARPS_2D), 93-104 in two launches, cuDNN 97.
MAX_BC_TWO = 8 if INTERPRET else 256
SPLIT_COMBINE = True
COMBINE_BC = 4
FUSED_CL = False
FUSED_2D = True
#: Channels-last inputs, two launches: the reduce launch's tiles (bytes), tiles a program (shrunk
#: until there are WAVES * SMs programs) and warps. H200 (``scripts/bn_reduce_probe.py``): a
#: program's per-channel sums across warps cost far more than its loads, so few warps and
#: long chunks; 32x256x56x56 bf16, a column reduction: 56 us in 8 warps x 8 tiles of 16x256,
#: 26 us in 2 warps x 16 tiles of 8x256.
RED_TILE_BYTES = 512 if INTERPRET else 4096
RED_TILES = 2 if INTERPRET else 16
RED_WARPS = 2
RED_WAVES = 1 if INTERPRET else 4
#: Two launches: the reduce launch's programs take every K-th tile instead of a run of
#: CHUNK_TILES, so that the programs running together stream neighbouring memory.
SPREAD = True
#: Training with channels-last and 2-D (N, C) inputs: the grid-wide plan of
#: :mod:`.batch_norm_rows` (one program a multiprocessor over every channel of every P-th tile
#: of rows, two grid barriers) instead of the fused / two-launch plans above. Its tiles
#: (elements, at most ROWS_MAX_BC channels) and warps; ROWS_COOP: a cooperative launch where
#: Triton has one (the driver starts every program at once or refuses the launch, so the
#: barriers cannot wait on a program that is not resident; the same time on the H200, in CUDA
#: graphs too).
#: H200 (bench, graphs, docs/perf-notes.md): 8192x1024 fp32 85.8 -> 82.7 us (tiles of 8192),
#: 32x256x56x56 bf16 channels-last 145.8 -> 136.1 us; tiles of 4096: 89.3 / 159.3, 2048:
#: 107.0 / 226.8, 4 warps: 92.0 / 167.5 (and spills at 8192). Two programs a multiprocessor
#: of 8 warps do not fit (the cooperative launch refuses them, tiles of 8192 and 4096); two of 4
#: warps do and were slower (H100, fifty-ninth session: 2-D 103.6 -> 110.3 us; the reduce phases
#: are not short of loads in flight).
ROWS_2D = True
ROWS_CL = True
ROWS_TILE = 64 if INTERPRET else 8192
#: ... and at most this many bytes (None: no cap): with ROWS_STAGES, 16 KB tiles 4 deep won on
#: both bench rows (fp32 tiles of 4096, bf16 of 8192; thirty-seventh session, below).
ROWS_TILE_BYTES = None if INTERPRET else 16384
ROWS_MAX_BC = 8 if INTERPRET else 1024
ROWS_WARPS = 8
ROWS_COOP = True
#: The grid-wide plan's loops: 0 holds the next tile in registers (the next tile's loads issued
#: before the current one is used); >= 2 pipelines them through shared memory, STAGES - 1 tiles
#: ahead (``tl.range(num_stages=...)``; shared memory: (STAGES - 1) x tile bytes x (1 forward, 2
#: backward) must fit in 227 KB). H200 (bench graphs, two rounds, docs/perf-notes.md): NHWC bf16
#: 32x256x56x56 136.8 -> 124.1-124.4 us with 4 (8192-element tiles; 3: 126.9-127.2), 2-D fp32
#: 8192x1024 82.7-83.1 -> 81.5-82.1 with 4 or 5 on 4096-element tiles (8192-element fp32 tiles
#: 83.3-83.9: 255 registers, they spill from 3 on).
ROWS_STAGES = 4
#: The grid-wide plan's L2 eviction policies: the reduce's loads "evict_last" (the normalise
#: reads them again), the normalise's loads and stores "evict_first" (their last use). H100, bench
#: graph rows, two rounds (fifty-ninth session): 2-D fp32 103.0 / 102.9 -> 101.5 / 100.8 us, NHWC
#: bf16 156.3 / 156.7 -> 155.3 / 155.3. (The 2-D forward reduce's 18.1 us for 33.5 MB was not a
#: cold-read floor: a column sum of the same reads takes 12.7, scripts/colsum_probe.py; see
#: ROWS_PART_BY_CHUNK.)
ROWS_EVICT = True
#: The grid-wide plan's partials stored a program's row of C channels at a time ((3, P, C)), not a
#: channel's P values together ((3, C, P), a program's stores P apart): in that layout every L2 line
#: of the partials was written by 32 programs at once, 4 bytes each, and the forward reduce took
#: 18.1 us where the same loop with contiguous stores took 12.4 (H100, colsum_probe --features).
#: Bench graph rows, H100, alternated twice (sixty-sixth session, gpu_pending.sh 156): 2-D fp32
#: 101.4 / 101.4 -> 93.1 / 93.1 us (1.19x -> 1.30x cuDNN), channels-last unchanged (156.2 -> 155.7 /
#: 156.0). (Loops over whole tiles without masks or selects, 156 -> 133 instructions an iteration,
#: timed the same and removed.)
ROWS_PART_BY_CHUNK = True
#: The grid-wide plan as three launches (reduce, combine, normalise; no barriers), as in the
#: interpreter: for timing its phases apart (H100, 2-D fp32: 18.1 + 3.9 + 15.9 us forward against
#: 37.6 in one launch; the barriers cost next to nothing).
ROWS_PHASES = False
#: The plan only where its row tiles fill every multiprocessor at least this many times (few
#: rows of many channels, e.g. a BatchNorm1d batch of 64, keep the plans above, parallel over
#: channels; not measured, a guard against one program doing a whole small batch).
ROWS_MIN_FILL = 0 if INTERPRET else 1
#: Partials the combining program loads at once (chunks x group channels; more costs
#: registers in every program of the kernel).
COMBINE_ELEMS = 64 if INTERPRET else 2048


def configure(**knobs) -> None:
    """Set tuning knobs by name (``TILE_BYTES``, ``LOOP_TILE_BYTES``, ``WARPS``, ``LOOP_WARPS``,
    ``MAX_BC``, ``MAX_BS``, ``CHUNK_TILES``, ``WAVES``, ``FUSED``, ``FUSED_MAX_TILES``, ``FUSED_NCHW``,
    ``COMBINE_ELEMS``, ``TILE_BYTES_2D``, ``MAX_BC_2D``, ``WARPS_2D``, ``REVERSE``, ``MAX_BC_TWO``, ``SPLIT_COMBINE``,
    ``COMBINE_BC``, ``FUSED_CL``, ``FUSED_2D``, ``SPREAD``, ``RED_TILE_BYTES``, ``RED_TILES``, ``RED_WARPS``,
    ``RED_WAVES``) and drop the cached plans."""
    for name, value in knobs.items():
        if name not in _KNOBS:
            raise ValueError(f"configure: unknown knob {name!r}; expected one of {', '.join(_KNOBS)}")
        globals()[name] = value
    _ENTRIES.clear()


def knobs() -> dict:
    """The current tuning knobs."""
    return {name: globals()[name] for name in _KNOBS}


_ENTRIES: dict = {}  # (shapes, strides, dtypes) -> (copy x, copy g, output layout, plan)
_KNOBS = ("TILE_BYTES", "LOOP_TILE_BYTES", "WARPS", "LOOP_WARPS", "MAX_BC", "MAX_BS", "CHUNK_TILES", "WAVES", "FUSED",
          "FUSED_MAX_TILES", "FUSED_NCHW", "COMBINE_ELEMS", "TILE_BYTES_2D", "MAX_BC_2D", "WARPS_2D", "REVERSE",
          "MAX_BC_TWO", "SPLIT_COMBINE", "COMBINE_BC", "FUSED_CL", "FUSED_2D", "SPREAD", "RED_TILE_BYTES", "RED_TILES",
          "RED_WARPS", "RED_WAVES", "ROWS_2D", "ROWS_CL", "ROWS_TILE", "ROWS_MAX_BC", "ROWS_WARPS",
          "ROWS_COOP", "ROWS_STAGES", "ROWS_TILE_BYTES", "ROWS_MIN_FILL", "ROWS_EVICT", "ROWS_PHASES",
          "ROWS_PART_BY_CHUNK")


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _coords(t, g, LA, LB, BA: tl.constexpr, BB: tl.constexpr, NCHW: tl.constexpr):
    """Rows ``a``, columns ``b``, mask and element count (per column in channels-last mode)
    of tile ``t`` of group ``g``."""
    if NCHW:
        nsb = tl.cdiv(LB, BB)
        ta = t // nsb
        a0 = ta * BA
        b0 = (t - ta * nsb) * BB
        cnt = tl.minimum(LA - a0, BA) * tl.minimum(LB - b0, BB)
    else:
        a0 = t * BA
        b0 = g * BB
        cnt = tl.minimum(LA - a0, BA)
    a = (a0 + tl.arange(0, BA)).to(tl.int64)
    b = b0 + tl.arange(0, BB)
    m = (a < LA)[:, None] & (b < LB)[None, :]
    return a, b, m, cnt


@triton.jit
def _ld(ptr, a, b, m, sa, sb, EV: tl.constexpr):
    """The tile of rows ``a``, columns ``b`` (strides ``sa``, ``sb``) under ``m``, with the L2 eviction
    policy EV ("" the default; no default value: Triton 3.6 does not make a helper's default string a
    constexpr)."""
    return tl.load(ptr + a[:, None] * sa + b[None, :] * sb, mask=m, other=0.0, eviction_policy=EV)


@triton.jit
def _colsum(v, NCHW: tl.constexpr):
    """Sum of a tile per group channel: all of it (NCHW, shape [1]) or per column."""
    if NCHW:
        return tl.sum(tl.sum(v, axis=1, keep_dims=True), axis=0)
    else:
        return tl.sum(v, axis=0)


@triton.jit
def _part_offsets(cols, ks, K, C, BY_CHUNK: tl.constexpr):
    """Offsets of chunks ``ks`` of channels ``cols`` (broadcast against each other) in a (C, K) or,
    BY_CHUNK, (K, C) plane of partials."""
    if BY_CHUNK:
        return ks.to(tl.int64) * C + cols
    else:
        return cols.to(tl.int64) * K + ks


@triton.jit
def _combine(part_ptr, fin_ptr, st_ptr, rm_ptr, rv_ptr, dw_ptr, db_ptr, cols, cmask, pivot, K, C, rf, eps, momentum,
             unbias, KB: tl.constexpr, GC: tl.constexpr, BWD: tl.constexpr, UPDATE: tl.constexpr,
             STORE_DW: tl.constexpr, STORE_DB: tl.constexpr, BY_CHUNK: tl.constexpr):
    """Merge the ``K`` chunk partials of channels ``cols``, three planes of C x K, each (C, K) (a
    channel's K values contiguous) or, BY_CHUNK, (K, C) (a chunk's C values contiguous): backward,
    sum g and sum g * xhat into fin (and dweight / dbias); forward, Chan's formula into the
    statistics (and the running statistics)."""
    ks = tl.arange(0, KB)
    ck = C * K  # (3 C K < 2**31: the workspace)
    if BWD:
        sum_g = tl.zeros([GC], dtype=tl.float32)
        sum_gx = tl.zeros([GC], dtype=tl.float32)
        for k0 in range(0, K, KB):
            pm = ((k0 + ks) < K)[:, None] & cmask[None, :]
            qp = part_ptr + _part_offsets(cols[None, :], (k0 + ks)[:, None], K, C, BY_CHUNK)
            sum_g += tl.sum(tl.load(qp, mask=pm, other=0.0, cache_modifier=".cg"), axis=0)
            sum_gx += tl.sum(tl.load(qp + ck, mask=pm, other=0.0, cache_modifier=".cg"), axis=0)
        tl.store(fin_ptr + cols, sum_g, mask=cmask)
        tl.store(fin_ptr + C + cols, sum_gx, mask=cmask)
        if STORE_DW:
            tl.store(dw_ptr + cols, sum_gx.to(dw_ptr.dtype.element_ty), mask=cmask)
        if STORE_DB:
            tl.store(db_ptr + cols, sum_g.to(db_ptr.dtype.element_ty), mask=cmask)
    else:
        n_all = tl.zeros([GC], dtype=tl.float32)
        mean_d = tl.zeros([GC], dtype=tl.float32)
        m2 = tl.zeros([GC], dtype=tl.float32)
        for k0 in range(0, K, KB):  # Chan's merge, KB chunks at a time
            pm = ((k0 + ks) < K)[:, None] & cmask[None, :]
            qp = part_ptr + _part_offsets(cols[None, :], (k0 + ks)[:, None], K, C, BY_CHUNK)
            nk = tl.load(qp, mask=pm, other=0.0, cache_modifier=".cg")
            mk = tl.load(qp + ck, mask=pm, other=0.0, cache_modifier=".cg")
            nb = tl.sum(nk, axis=0)
            mb = tl.sum(nk * mk, axis=0) / tl.maximum(nb, 1.0)
            dk = mk - mb[None, :]
            m2b = tl.sum(tl.load(qp + 2 * ck, mask=pm, other=0.0, cache_modifier=".cg") + nk * dk * dk, axis=0)
            tot = n_all + nb
            delta = mb - mean_d
            mean_d += delta * (nb / tl.maximum(tot, 1.0))
            m2 += m2b + delta * delta * (n_all * (nb / tl.maximum(tot, 1.0)))
            n_all = tot
        var = m2 / rf
        mean = pivot + mean_d
        tl.store(st_ptr + cols, mean, mask=cmask)
        tl.store(st_ptr + C + cols, 1.0 / tl.sqrt(var + eps), mask=cmask)
        tl.store(st_ptr + 2 * C + cols, var, mask=cmask)
        tl.store(st_ptr + 3 * C + cols, mean_d, mask=cmask)
        if UPDATE:
            rm = tl.load(rm_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            rv = tl.load(rv_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            tl.store(rm_ptr + cols, ((1.0 - momentum) * rm + momentum * mean).to(rm_ptr.dtype.element_ty),
                     mask=cmask)
            tl.store(rv_ptr + cols, ((1.0 - momentum) * rv + momentum * (var * unbias)).to(
                rv_ptr.dtype.element_ty), mask=cmask)


@triton.jit
def _bn_kernel(x_ptr, g_ptr, o_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, st_ptr, dw_ptr, db_ptr, ws_ptr,
               sync_ptr, LA, LB, C, TPK, K, rf, eps, momentum, unbias, sxa, sxb, sxc, sga, sgb, sgc, soa, sob, soc,
               BA: tl.constexpr, BB: tl.constexpr, GC: tl.constexpr, KB: tl.constexpr, NCHW: tl.constexpr,
               BWD: tl.constexpr, PHASE: tl.constexpr, ONE: tl.constexpr, TRAINING: tl.constexpr,
               HAS_W: tl.constexpr, HAS_B: tl.constexpr, UPDATE: tl.constexpr, STORE_OUT: tl.constexpr,
               STORE_DW: tl.constexpr, STORE_DB: tl.constexpr, SPIN: tl.constexpr, REVERSE: tl.constexpr = False,
               ARRIVE: tl.constexpr = True, SPREAD: tl.constexpr = False):
    """stats (st, fp32 (4, C)): mean, rstd, biased var, mean - pivot. ws (fp32): (2, C) sum g,
    sum g * xhat (backward), then (3, C, K) partials. sync (int32): [0] ticket, then per
    group (chunks arrived, generation). Counters return to 0 by the end of a launch; a group's
    generation only grows (one step per fused launch). REVERSE (two launches, PHASE=2): programs
    take the chunks from the last, so the first to start re-read what the reduce launch read
    last, still in L2. ARRIVE=False (PHASE=1): only the partials; ``_bn_combine_kernel``
    merges them in a launch of its own. SPREAD: a program's tiles are k, k + K, ... instead of
    a run of TPK (any subset of a group's tiles is a valid chunk for Chan's formula)."""
    fin_ptr = ws_ptr
    part_ptr = ws_ptr + 2 * C
    if PHASE == 0:  # (group, chunk) in the order programs start: a group's chunks run together
        t = tl.atomic_add(sync_ptr, 1, sem="relaxed")  # a count: it orders nothing
        if t == tl.num_programs(0) - 1:
            tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
    else:
        t = tl.program_id(0)
        if REVERSE:
            t = tl.num_programs(0) - 1 - t
    g = t // K
    k = t - g * K
    if NCHW:
        n_tiles = tl.cdiv(LA, BA) * tl.cdiv(LB, BB)
        x_ptr += g.to(tl.int64) * sxc
        g_ptr += g.to(tl.int64) * sgc
        o_ptr += g.to(tl.int64) * soc
    else:
        n_tiles = tl.cdiv(LA, BA)
    if SPREAD:  # tiles k, k + K, k + 2K, ...: the programs running together read neighbouring tiles
        t0 = k
        ts = K
        nt = tl.cdiv(n_tiles - k, K)
    else:  # tiles k * TPK, ... (k + 1) * TPK - 1
        t0 = k * TPK
        ts = 1
        nt = tl.minimum(TPK, n_tiles - t0)
    cols = g * GC + tl.arange(0, GC)  # the group's channels
    cmask = cols < C
    if TRAINING:  # the channel's first value: x[0, c, 0]
        if NCHW:
            pivot = tl.load(x_ptr + cols * 0).to(tl.float32)
        else:
            pivot = tl.load(x_ptr + cols * sxc, mask=cmask, other=0.0).to(tl.float32)
    else:
        pivot = tl.zeros([GC], dtype=tl.float32)
    if BWD:
        rstd = tl.load(st_ptr + C + cols, mask=cmask, other=0.0)
        shifted = tl.load(st_ptr + 3 * C + cols, mask=cmask, other=0.0)
    if ONE:  # the chunk is one tile, kept in registers for both passes
        a, b, m, cnt = _coords(t0, g, LA, LB, BA, BB, NCHW)
        if BWD:
            gr = _ld(g_ptr, a, b, m, sga, sgb, "")
            if TRAINING or PHASE != 2:
                xr = _ld(x_ptr, a, b, m, sxa, sxb, "")
            else:  # inference dx = g * w * rstd: x is not read
                xr = gr
        else:
            xr = _ld(x_ptr, a, b, m, sxa, sxb, "")
            gr = xr
    if PHASE == 0:  # the group's generation before this launch combines (read while the tile loads)
        gen = sync_ptr + 2 + 2 * g
        gen0 = tl.atomic_add(gen, 0, sem="acquire")

    # ------------------------------------------------------------ reduce, combine
    if PHASE != 2:
        if BWD:
            if ONE:
                gv = gr.to(tl.float32)
                s1 = _colsum(gv, NCHW)
                s2 = _colsum(gv * (((xr.to(tl.float32) - pivot[None, :]) - shifted[None, :]) * rstd[None, :]), NCHW)
            else:
                acc1 = tl.zeros([BA, BB], dtype=tl.float32)
                acc2 = tl.zeros([BA, BB], dtype=tl.float32)
                for i in range(0, nt):
                    a, b, m, cnt = _coords(t0 + i * ts, g, LA, LB, BA, BB, NCHW)
                    gv = _ld(g_ptr, a, b, m, sga, sgb, "").to(tl.float32)
                    xv = _ld(x_ptr, a, b, m, sxa, sxb, "").to(tl.float32)
                    acc1 += gv
                    acc2 += gv * (((xv - pivot[None, :]) - shifted[None, :]) * rstd[None, :])
                s1 = _colsum(acc1, NCHW)
                s2 = _colsum(acc2, NCHW)
            pp = part_ptr + cols.to(tl.int64) * K + k
            tl.store(pp, s1, mask=cmask)
            tl.store(pp + C * K, s2, mask=cmask)
        else:  # statistics of d = x - pivot, centred on the first tile's mean sk
            if not ONE:
                a, b, m, cnt = _coords(t0, g, LA, LB, BA, BB, NCHW)
                xr = _ld(x_ptr, a, b, m, sxa, sxb, "")
            d = tl.where(m, xr.to(tl.float32) - pivot[None, :], 0.0)
            sk = _colsum(d, NCHW) / (cnt * 1.0)
            e = tl.where(m, d - sk[None, :], 0.0)
            acc1 = e
            acc2 = e * e
            n = cnt
            if not ONE:
                for i in range(1, nt):
                    a, b, m, cnt = _coords(t0 + i * ts, g, LA, LB, BA, BB, NCHW)
                    xv = _ld(x_ptr, a, b, m, sxa, sxb, "").to(tl.float32)
                    e = tl.where(m, (xv - pivot[None, :]) - sk[None, :], 0.0)
                    acc1 += e
                    acc2 += e * e
                    n += cnt
            s1 = _colsum(acc1, NCHW)
            s2 = _colsum(acc2, NCHW)
            nf = n * 1.0
            pp = part_ptr + cols.to(tl.int64) * K + k
            ck = C * K
            tl.store(pp, s1 * 0.0 + nf, mask=cmask)
            tl.store(pp + ck, sk + s1 / nf, mask=cmask)
            tl.store(pp + 2 * ck, tl.maximum(s2 - s1 * (s1 / nf), 0.0), mask=cmask)
        tl.debug_barrier()  # every thread's partial is written before the release below
        if ARRIVE:
            arrive = sync_ptr + 1 + 2 * g
            if tl.atomic_add(arrive, 1, sem="acq_rel") == K - 1:  # the last chunk of the group combines
                _combine(part_ptr, fin_ptr, st_ptr, rm_ptr, rv_ptr, dw_ptr, db_ptr, cols, cmask, pivot, K, C, rf, eps,
                         momentum, unbias, KB, GC, BWD, UPDATE, STORE_DW, STORE_DB, False)
                tl.debug_barrier()  # the combined values are written before they are published
                tl.atomic_xchg(arrive, 0)  # every chunk has arrived: ready for the next launch
                if PHASE == 0:
                    tl.atomic_add(gen, 1, sem="release")  # publish

    # ------------------------------------------------------------ normalise
    if PHASE != 1:
        if PHASE == 0:  # wait until the group's generation moves on: its statistics are written
            seen = tl.atomic_add(gen, 0, sem="acquire")
            spins = 0
            while (seen == gen0) & (spins < SPIN):
                seen = tl.atomic_add(gen, 0, sem="acquire")
                spins += 1
        if HAS_W:
            w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        else:
            w = tl.full([GC], 1.0, dtype=tl.float32)
        c1 = pivot
        c2 = pivot
        shift = pivot
        if BWD:
            if TRAINING:
                c1 = tl.load(fin_ptr + cols, mask=cmask, other=0.0, cache_modifier=".cg") / rf
                c2 = tl.load(fin_ptr + C + cols, mask=cmask, other=0.0, cache_modifier=".cg") / rf
        else:
            if TRAINING:
                rstd = tl.load(st_ptr + C + cols, mask=cmask, other=0.0, cache_modifier=".cg")
                shifted = tl.load(st_ptr + 3 * C + cols, mask=cmask, other=0.0, cache_modifier=".cg")
            else:  # inference: the running statistics
                shifted = tl.load(rm_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
                var = tl.load(rv_ptr + cols, mask=cmask, other=1.0).to(tl.float32)
                rstd = 1.0 / tl.sqrt(var + eps)
                if k == 0:
                    tl.store(st_ptr + cols, shifted, mask=cmask)
                    tl.store(st_ptr + C + cols, rstd, mask=cmask)
                    tl.store(st_ptr + 2 * C + cols, var, mask=cmask)
                    tl.store(st_ptr + 3 * C + cols, shifted, mask=cmask)
            if HAS_B:
                shift = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            else:
                shift = tl.zeros([GC], dtype=tl.float32)
        scale = w * rstd
        if PHASE == 0:  # the barrier gave up waiting (not expected with K <= SMs): NaN outputs,
            scale = tl.where(seen == gen0, float("nan"), scale)  # never silently wrong values
        if STORE_OUT:
            if ONE:
                _out(o_ptr, xr, gr, a, b, m, soa, sob, pivot, shifted, rstd, scale, shift, c1, c2, BWD, TRAINING, "")
            else:
                for i in range(0, nt):
                    a, b, m, cnt = _coords(t0 + i * ts, g, LA, LB, BA, BB, NCHW)
                    if BWD:
                        gt = _ld(g_ptr, a, b, m, sga, sgb, "")
                        if TRAINING:
                            xt = _ld(x_ptr, a, b, m, sxa, sxb, "")
                        else:
                            xt = gt
                    else:
                        xt = _ld(x_ptr, a, b, m, sxa, sxb, "")
                        gt = xt
                    _out(o_ptr, xt, gt, a, b, m, soa, sob, pivot, shifted, rstd, scale, shift, c1, c2, BWD, TRAINING,
                         "")


@triton.jit
def _out(o_ptr, xr, gr, a, b, m, soa, sob, pivot, shifted, rstd, scale, shift, c1, c2, BWD: tl.constexpr,
         TRAINING: tl.constexpr, EVICT: tl.constexpr):
    """Write one tile of y (forward) or dx (backward), with the L2 eviction policy EVICT ("" the default;
    no default value: Triton 3.6 does not make a helper's default string a constexpr)."""
    if BWD:
        gv = gr.to(tl.float32)
        if TRAINING:
            xhat = ((xr.to(tl.float32) - pivot[None, :]) - shifted[None, :]) * rstd[None, :]
            y = scale[None, :] * ((gv - c1[None, :]) - xhat * c2[None, :])
        else:
            y = scale[None, :] * gv
    else:
        y = ((xr.to(tl.float32) - pivot[None, :]) - shifted[None, :]) * scale[None, :] + shift[None, :]
    tl.store(o_ptr + a[:, None] * soa + b[None, :] * sob, y.to(o_ptr.dtype.element_ty), mask=m, eviction_policy=EVICT)


@triton.jit
def _bn_update_kernel(rm_ptr, rv_ptr, mean_ptr, var_ptr, C, momentum, unbias, BLOCK: tl.constexpr):
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = c < C
    rm = tl.load(rm_ptr + c, mask=m, other=0.0).to(tl.float32)
    rv = tl.load(rv_ptr + c, mask=m, other=0.0).to(tl.float32)
    rm = (1.0 - momentum) * rm + momentum * tl.load(mean_ptr + c, mask=m, other=0.0)
    rv = (1.0 - momentum) * rv + momentum * (tl.load(var_ptr + c, mask=m, other=0.0) * unbias)
    tl.store(rm_ptr + c, rm.to(rm_ptr.dtype.element_ty), mask=m)
    tl.store(rv_ptr + c, rv.to(rv_ptr.dtype.element_ty), mask=m)


@triton.jit
def _bn_combine_kernel(x_ptr, g_ptr, o_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, st_ptr, dw_ptr, db_ptr, ws_ptr,
                       sync_ptr, LA, LB, C, TPK, K, rf, eps, momentum, unbias, sxa, sxb, sxc, sga, sgb, sgc, soa, sob,
                       soc, GC: tl.constexpr, KB: tl.constexpr, BWD: tl.constexpr, TRAINING: tl.constexpr,
                       UPDATE: tl.constexpr, STORE_DW: tl.constexpr, STORE_DB: tl.constexpr):
    """The combine of a reduce launch run with ARRIVE=False, ``GC`` channels a program (the
    same arguments as ``_bn_kernel``): parallel over channels, where one arriving program per
    channel group would merge every chunk of many channels alone."""
    cols = tl.program_id(0) * GC + tl.arange(0, GC)
    cmask = cols < C
    if TRAINING:  # the channel's first value: x[0, c, 0] (sxc: the channel stride either way)
        pivot = tl.load(x_ptr + cols.to(tl.int64) * sxc, mask=cmask, other=0.0).to(tl.float32)
    else:
        pivot = tl.zeros([GC], dtype=tl.float32)
    _combine(ws_ptr + 2 * C, ws_ptr, st_ptr, rm_ptr, rv_ptr, dw_ptr, db_ptr, cols, cmask, pivot, K, C, rf, eps,
             momentum, unbias, KB, GC, BWD, UPDATE, STORE_DW, STORE_DB, False)


_BN, _UPDATE, _COMBINE = Launcher(_bn_kernel), Launcher(_bn_update_kernel), Launcher(_bn_combine_kernel)


# ---------------------------------------------------------------------------- plans

def _strides3(t: torch.Tensor):
    """(stride N, stride C, stride S) of ``t`` read as (N, C, S), or None if the spatial
    dimensions do not merge into one."""
    sp = [(t.size(i), t.stride(i)) for i in range(2, t.dim()) if t.size(i) != 1]
    for (_, st0), (s1, st1) in zip(sp, sp[1:]):
        if st0 != st1 * s1:
            return None
    return t.stride(0), t.stride(1), sp[-1][1] if sp else 1


def _dense_order(t: torch.Tensor):
    """Dimensions of ``t`` from outermost to innermost if it is dense (no gaps, no overlap),
    else None."""
    order = sorted(range(t.dim()), key=lambda i: (-t.stride(i), i))
    expect = 1
    for i in reversed(order):
        if t.size(i) != 1 and t.stride(i) != expect:
            return None
        expect *= t.size(i)
    return order


def _layout(x: torch.Tensor):
    """The dimension order of outputs shaped like ``x``: x's own when x is dense, else
    channels-last where x is channels-last, else contiguous."""
    order = _dense_order(x)
    if order is None and x.dim() in (4, 5):
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        if x.is_contiguous(memory_format=fmt):
            order = [0, *range(2, x.dim()), 1]
    if order is None or order == sorted(order):
        return None
    return tuple(order), tuple(order.index(i) for i in range(x.dim()))


def _new_like(x: torch.Tensor, layout) -> torch.Tensor:
    if layout is None:
        return alloc.empty(x.shape, dtype=x.dtype, device=x.device)
    order, inv = layout
    return alloc.empty(*[x.shape[i] for i in order], dtype=x.dtype, device=x.device).permute(*inv)


def _rows(N: int, S: int, st):
    """Channels-last reading of strides ``st``: (row stride, 1, 1) when channels are
    contiguous and rows (n, s) evenly strided, else None."""
    sn, sc, ss = st
    if sc != 1:
        return None
    if S == 1 or N == 1:
        return (sn if S == 1 else ss), 1, 1
    return (ss, 1, 1) if sn == S * ss else None


def _pick_bs(S: int, top: int) -> int:
    """The longest power-of-two run (<= top) whose masked tail wastes at most 7% of a channel."""
    top = min(next_pow2(S), top)
    for bs in (top, top >> 1, top >> 2, top >> 3):
        if bs >= min(top, 32) and cdiv(S, bs) * bs <= 1.07 * S:
            return bs
    return top


class _Grid(NamedTuple):
    """One launch shape: tile (ba, bb), channels per group, groups, tiles per program, chunks
    per group, chunks combined per step, warps."""
    ba: int
    bb: int
    gc: int
    groups: int
    tpk: int
    k: int
    kb: int
    warps: int


class _Plan(NamedTuple):
    nchw: bool
    LA: int  # tile rows extent: N (NCHW) or N * S
    LB: int  # tile columns extent: S (NCHW) or C
    strides: tuple  # per tensor (x, g, out): (a stride, b stride, channel stride)
    fused: Optional[_Grid]  # training: statistics and normalise in one launch, or None
    two: _Grid  # two launches (and inference: normalise only)
    red: _Grid  # two launches: the reduce launch (channels-last: its own tiles and warps; NCHW: two)
    split: Optional[tuple]  # two launches: (channels a program, chunks a step) of a combine launch, or None
    rows: Optional[RowsGrid]  # training, rows of channels: the grid-wide plan (batch_norm_rows), or None


def _grid(nchw: bool, N: int, C: int, S: int, tile: int, tpk: Optional[int], kmax: int, sms: int,
          max_bc: int = 0, warps: int = 0, waves: int = -1) -> Optional[_Grid]:
    """Tiles of ``tile`` elements (at most ``max_bc`` channels, 0: MAX_BC); ``tpk`` tiles a
    program (None: as many as fit K <= kmax, None if that exceeds FUSED_MAX_TILES); ``warps``
    a program (0: WARPS for one tile, else LOOP_WARPS); ``waves``: at least waves * sms programs
    where tiles a program allow (-1: WAVES)."""
    if nchw:
        bb = _pick_bs(S, max(MAX_BS, tile // next_pow2(N)))
        ba = max(1, min(tile // bb, next_pow2(N)))
        gc, groups, T = 1, C, cdiv(N, ba) * cdiv(S, bb)
    else:
        bb = min(next_pow2(C), max_bc or MAX_BC)
        ba = max(1, min(tile // bb, next_pow2(N * S)))
        gc, groups, T = bb, cdiv(C, bb), cdiv(N * S, ba)
    if tpk is None:
        tpk = cdiv(T, kmax)
        if tpk > FUSED_MAX_TILES:
            return None
    else:
        tpk = max(1, min(tpk, T))
        waves = WAVES if waves < 0 else waves
        while tpk > 1 and groups * cdiv(T, tpk) < waves * sms:  # enough programs to fill the GPU
            tpk = cdiv(tpk, 2)
    k = cdiv(T, tpk)
    return _Grid(ba, bb, gc, groups, tpk, k, max(1, min(next_pow2(k), COMBINE_ELEMS // gc)),
                 warps or (WARPS if tpk == 1 else LOOP_WARPS))


def _make_plan(N: int, C: int, S: int, strides: tuple, itemsize: int, device: torch.device) -> _Plan:
    cl = [_rows(N, S, st) for st in strides]
    if C > 1 and all(c is not None for c in cl):  # channels-last: tiles (rows, channels)
        nchw, LA, LB, strides = False, N * S, C, tuple(cl)
    else:  # NCHW: one channel per group, tiles (n, s)
        nchw, LA, LB, strides = True, N, S, tuple((sn, ss, sc) for sn, sc, ss in strides)
    sms = num_sms(device)
    kmax = 1 if INTERPRET else sms  # the interpreter runs programs one by one: no barrier
    fused = None
    # fused: one tile a program, in registers; else several, at most FUSED_MAX_TILES
    if FUSED and (FUSED_NCHW if nchw else FUSED_2D if S == 1 else FUSED_CL):
        two_d = not nchw and S == 1
        one = _grid(nchw, N, C, S, max(1, (TILE_BYTES_2D if two_d else TILE_BYTES) // itemsize), None, kmax, sms,
                    MAX_BC_2D if two_d else 0, WARPS_2D if two_d else 0)
        fused = one if one is not None and one.tpk == 1 else _grid(
            nchw, N, C, S, max(1, LOOP_TILE_BYTES // itemsize), None, kmax, sms)
    two = _grid(nchw, N, C, S, max(1, LOOP_TILE_BYTES // itemsize), CHUNK_TILES, kmax, sms, MAX_BC_TWO)
    red = two if nchw else _grid(nchw, N, C, S, max(1, RED_TILE_BYTES // itemsize), RED_TILES, kmax, sms, MAX_BC_TWO,
                                 RED_WARPS, RED_WAVES)
    split = None
    if SPLIT_COMBINE and not nchw:
        bc = min(COMBINE_BC, next_pow2(C))
        split = (bc, max(1, min(next_pow2(red.k), COMBINE_ELEMS // bc)))
    rows = None
    if not nchw and (ROWS_2D if S == 1 else ROWS_CL):
        tile = ROWS_TILE if ROWS_TILE_BYTES is None else max(1, min(ROWS_TILE, ROWS_TILE_BYTES // itemsize))
        rows = rows_grid(LA, C, sms, tile, ROWS_MAX_BC, ROWS_WARPS, COMBINE_ELEMS)
        if cdiv(LA, rows.br) < ROWS_MIN_FILL * sms:
            rows = None
    return _Plan(nchw, LA, LB, strides, fused, two, red, split, rows)


def _merged(t: torch.Tensor):
    """``t`` and its (N, C, S) strides; spatial dimensions that do not merge: one copy."""
    st = _strides3(t)
    if st is None:
        t = t.contiguous()
        st = _strides3(t)
    return t, st


def _prepare(key, x: torch.Tensor, g: Optional[torch.Tensor]):
    """(x, g, output layout, plan, launch cache), cached by shapes, strides and dtypes; x and g
    copied where their spatial dimensions do not merge."""
    e = _ENTRIES.get(key)
    if e is None:
        xc, sx = _merged(x)
        gc, sg = _merged(g) if g is not None else (None, sx)
        lay = _layout(xc)
        meta = torch.empty(xc.shape, device="meta")
        so = _strides3(meta if lay is None else meta.permute(*lay[0]).contiguous().permute(*lay[1]))
        N, C = xc.shape[0], xc.shape[1]
        p = _make_plan(N, C, xc.numel() // (N * C), (sx, sg, so), xc.element_size(), xc.device)
        e = _ENTRIES[key] = (xc is not x, gc is not g, lay, p, {})
        return xc, gc, lay, p, e[4]
    copy_x, copy_g, lay, p, steps = e
    return (x.contiguous() if copy_x else x), (g.contiguous() if copy_g else g), lay, p, steps


def _steps(p: _Plan, C: int, eps: float, momentum: float, fused: bool, reduce: bool, out: bool, **flags):
    """The launches of one call: [(launcher, grid, arguments after the pointers, keyword arguments)]."""
    R = p.LA * p.LB if p.nchw else p.LA

    def launch(gr: _Grid, phase: int, store: bool):
        tail = (p.LA, p.LB, C, gr.tpk, gr.k, float(R), eps, momentum, R / max(R - 1, 1), *sum(p.strides, ()))
        kw = dict(BA=gr.ba, BB=gr.bb, GC=gr.gc, KB=gr.kb, NCHW=p.nchw, PHASE=phase, ONE=gr.tpk == 1,
                  STORE_OUT=store, SPIN=SPIN_LIMIT, REVERSE=REVERSE and phase == 2, SPREAD=SPREAD and phase == 1,
                  ARRIVE=phase != 1 or p.split is None, num_warps=gr.warps, **flags)
        return _BN, (gr.groups * gr.k,), tail, kw

    if fused and p.rows is not None:  # one launch; three in the interpreter (no barrier there)
        r = p.rows
        tail = (p.LA, C, *(st[0] for st in p.strides), float(R), eps, momentum, R / max(R - 1, 1))
        kw = dict(BR=r.br, BC=r.bc, CC=r.cc, KB=r.kb, SPIN=SPIN_LIMIT, num_warps=r.warps, STAGES=ROWS_STAGES,
                  BY_CHUNK=ROWS_PART_BY_CHUNK,
                  **({"launch_cooperative_grid": True} if ROWS_COOP and cooperative_launch() else {}),
                  **({"EV_RED": "evict_last", "EV_OUT": "evict_first"} if ROWS_EVICT else {}),
                  **{n: flags[n] for n in ("BWD", "HAS_W", "HAS_B", "UPDATE", "STORE_DW", "STORE_DB")})
        return [(ROWS, (r.programs,), tail, dict(kw, PHASE=ph))
                for ph in ((1, 2, 3) if INTERPRET or ROWS_PHASES else (0,))]
    if fused:
        return [launch(p.fused, 0, True)]
    # reduce: the last chunk of each group to arrive combines, or a combine launch parallel over channels
    steps = [launch(p.red, 1, False)] if reduce else []
    if reduce and p.split is not None:
        bc, kb = p.split
        ckw = dict(GC=bc, KB=kb, **{n: flags[n] for n in ("BWD", "TRAINING", "UPDATE", "STORE_DW", "STORE_DB")})
        steps.append((_COMBINE, (cdiv(C, bc),), steps[0][2], ckw))
    if out:
        steps.append(launch(p.two, 2, True))
    return steps


def _workspaces(p: _Plan, C: int, device: torch.device, steps):
    """fp32 (2, C) sums then (3, C, K) partials; int32 counters: the ticket and per-group ones,
    or the grid-wide plan's three (``steps`` launch its kernel)."""
    gr = p.fused or p.two
    k = max(gr.k, p.red.k, p.rows.programs if p.rows else 0)
    ws = workspace(device, "batch_norm.ws", (2 + 3 * k) * C, torch.float32)
    if steps[0][0] is ROWS:
        return ws, workspace(device, "batch_norm.rows_sync", 3, torch.int32, zeroed=True)
    return ws, workspace(device, "batch_norm.sync", 1 + 2 * max(gr.groups, p.red.groups), torch.int32, zeroed=True)


def _forward_kernel(x, w, b, rm, rv, training, momentum, eps, update):
    x, _, lay, p, cache = _prepare(("f", x.shape, x.stride(), x.dtype, x.device), x, None)
    C = x.shape[1]
    y = _new_like(x, lay)
    stats = alloc.empty(4, C, dtype=torch.float32, device=x.device)
    upd = bool(update and training and rm is not None)
    key = (training, w is not None, b is not None, upd, eps, momentum)
    steps = cache.get(key)
    if steps is None:
        steps = cache[key] = _steps(p, C, eps, momentum, training and (p.fused or p.rows) is not None, training, True,
                                    BWD=False, TRAINING=training, HAS_W=w is not None, HAS_B=b is not None,
                                    UPDATE=upd, STORE_DW=False, STORE_DB=False)
    ws, sync = _workspaces(p, C, x.device, steps) if training else (stats, stats)
    d = stats
    ptrs = (x, x, y, d if w is None else w, d if b is None else b, d if rm is None else rm, d if rv is None else rv,
            stats, d, d, ws, sync)
    for kernel, grid, tail, kw in steps:
        kernel[grid](*ptrs, *tail, **kw)
    return y, stats


def _backward_kernel(g, x, w, stats, training, need_dx, need_dw, need_db, b_dtype):
    x, g, lay, p, cache = _prepare(("b", x.shape, x.stride(), g.stride(), x.dtype, g.dtype, x.device), x, g)
    C = x.shape[1]
    d = stats
    dx = _new_like(x, lay) if need_dx else None
    dw = alloc.empty(C, dtype=w.dtype, device=x.device) if need_dw else None
    db = alloc.empty(C, dtype=b_dtype, device=x.device) if need_db else None
    reduce = training or need_dw or need_db
    key = (training, w is not None, need_dx, need_dw, need_db)
    steps = cache.get(key)
    if steps is None:
        fused = reduce and need_dx and training and (p.fused or p.rows) is not None
        steps = cache[key] = _steps(p, C, 0.0, 0.0, fused, reduce, need_dx, BWD=True, TRAINING=training,
                                    HAS_W=w is not None, HAS_B=False, UPDATE=False, STORE_DW=need_dw,
                                    STORE_DB=need_db)
    ws, sync = _workspaces(p, C, x.device, steps) if reduce else (d, d)
    ptrs = (x, g, d if dx is None else dx, d if w is None else w, d, d, d, stats, d if dw is None else dw,
            d if db is None else db, ws, sync)
    for kernel, grid, tail, kw in steps:
        kernel[grid](*ptrs, *tail, **kw)
    return dx, dw, db


def _kernel_ok(x, *params) -> bool:
    """Kernel dtypes, contiguous parameters, and tile indices that fit int32 (values a channel)."""
    return (x.dtype in KERNEL_DTYPES and x.numel() > 0 and use_triton(x)
            and (x.dim() < 2 or x.numel() // x.shape[1] < 2**31 - 2**20)
            and all(p is None or (p.dtype in KERNEL_DTYPES and p.is_contiguous()) for p in params))


# the grid-wide plan's kernel uses _combine and _out above
from .batch_norm_rows import ROWS, RowsGrid, rows_grid  # noqa: E402
