"""The blocked LU panel's pivot search and pivot row (:func:`.lu._lu_panel_rows`, a thread a row):
the search as a block reduction (``_search``), the pivot row's trip to every thread through
global memory or, on the GPU, shared memory declared by inline PTX (``_slot_pass``), and the
GPU's one-barrier form of both (``_warp_search_pass``: each warp's candidate found by
``redux.sync`` and written with its row, then every thread picks the best of the warps'), with
the 64-bit packing of complex64 entries they move."""
from __future__ import annotations

from ..._core.backend import tl, triton
from .tiles import _abs1

#: Most warps a launch that takes ``_warp_search_pass`` may have (its shared memory holds a slot a
#: warp).
SEARCH_WARPS = tl.constexpr(8)


@triton.jit
def _pivot_max(m1, p1, r1, m2, p2, r2):
    """The candidate of larger magnitude, on a tie the earlier place (i?amax takes the first)."""
    take = (m2 > m1) | ((m2 == m1) & (p2 < p1))
    return tl.where(take, m2, m1), tl.where(take, p2, p1), tl.where(take, r2, r1)


@triton.jit
def _pivot_max2(m1, p1, m2, p2):
    """:func:`_pivot_max` without the row."""
    take = (m2 > m1) | ((m2 == m1) & (p2 < p1))
    return tl.where(take, m2, m1), tl.where(take, p2, p1)


@triton.jit
def _ptr64(ptr):
    return ptr.to(tl.pointer_type(tl.int64))


@triton.jit
def _unpack64(v):
    """The two float32 halves (low, high) of int64 words."""
    lo = (v & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return lo, (v >> 32).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _pack64(lo, hi):
    return lo.to(tl.int32, bitcast=True).to(tl.uint32).to(tl.int64) | (hi.to(tl.int32, bitcast=True).to(tl.int64) << 32)


@triton.jit
def _search(xr, xi, live, pos, r, g, CPLX: tl.constexpr, PLACE_ONLY: tl.constexpr):
    """Step g's pivot: its place and the thread (row) holding it (PLACE_ONLY: the place twice, one
    operand less in the reduction; the holder is the thread whose ``pos`` is it), the column (xr,
    xi) a row a thread; the first largest |re| + |im| at places g.. (as i?amax)."""
    mag = _abs1(xr, xi, CPLX)
    # NaN ranks below every number but above the rows out of play (an argmax never picks
    # NaN: a pivot row above g would corrupt the factorisation); NaN then propagates
    mag = tl.where(live & (pos >= g), tl.where(mag == mag, mag, -0.5), -1.0)
    if PLACE_ONLY:
        _, pp = tl.reduce((mag, pos), 0, _pivot_max2)
        prow = pp
    else:
        _, pp, prow = tl.reduce((mag, pos, r), 0, _pivot_max)
    return pp, prow


# The pivot row through shared memory (inline PTX: triton 3.6 has no shared-memory tensors a thread
# can address): ``_smem_row_declare`` declares fp_lurow at the kernel's scope (a scalar operand:
# emitted once), two slots of up to 32 words that the steps take in turn (a step's reads end before
# the next step's barrier, so the slot two steps on is free); 128-bit stores and loads, two words each.

@triton.jit
def _smem_row_declare():
    tl.inline_asm_elementwise(".shared .align 16 .b8 fp_lurow[4224]; mov.u32 $0, 0;", "=r,r", [tl.program_id(0)],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_st2(off, ok, w0, w1, WIDE: tl.constexpr):
    """Words w0, w1 (64-bit; not WIDE: 32-bit) at byte ``off`` of fp_lurow where ``ok``."""
    if WIDE:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_lurow; add.u32 a, a, $1; "
            "@p st.shared.v2.u64 [a], {$3, $4}; mov.u32 $0, 0; }",
            "=r,r,r,l,l", [off, ok, w0, w1], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 a; setp.ne.s32 p, $2, 0; mov.u32 a, fp_lurow; add.u32 a, a, $1; "
            "@p st.shared.v2.u32 [a], {$3, $4}; mov.u32 $0, 0; }",
            "=r,r,r,r,r", [off, ok, w0, w1], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _smem_ld2(off):
    """The two words at byte ``off`` of fp_lurow."""
    return tl.inline_asm_elementwise(
        "{ .reg .u32 a; mov.u32 a, fp_lurow; add.u32 a, a, $2; ld.shared.v2.u64 {$0, $1}, [a]; }",
        "=l,=l,r", [off], dtype=(tl.int64, tl.int64), is_pure=False, pack=1)


@triton.jit
def _smem_put_row(off, ok, cr, ci, W: tl.constexpr):
    """A row's W complex64 entries (re, im tuples) as 64-bit words at byte ``off`` of fp_lurow where ``ok``."""
    for c in tl.static_range(W // 2):
        _smem_st2(off + 16 * c, ok, _pack64(cr[2 * c], ci[2 * c]), _pack64(cr[2 * c + 1], ci[2 * c + 1]), True)


@triton.jit
def _smem_row(off, W: tl.constexpr):
    """The W complex64 entries at byte ``off`` of fp_lurow, as (re, im) tuples."""
    prr = ()
    pri = ()
    for c in tl.static_range(W // 2):
        w0, w1 = _smem_ld2(off + 16 * c)
        y_r, y_i = _unpack64(w0)
        z_r, z_i = _unpack64(w1)
        prr = prr + (y_r, z_r)
        pri = pri + (y_i, z_i)
    return prr, pri


@triton.jit
def _slot_pass(ws, j, cr, ci, own, W: tl.constexpr, SMEM: tl.constexpr):
    """The row of the thread(s) where ``own`` (one), complex64 entries as 64-bit words, to every
    thread as (re, im) tuples: through slot j of ``ws`` (W words a slot), or with SMEM through
    shared memory (slot j mod 2 of fp_lurow)."""
    prr = ()
    pri = ()
    if SMEM:
        off = (j & 1) * (W * 8)  # bytes; stored by a thread each (the owner), loaded as one value
        ok = own.to(tl.int32)
        _smem_put_row(off + ok * 0, ok, cr, ci, W)
        tl.debug_barrier()
        prr, pri = _smem_row(off, W)
    else:
        at = ws + j * W  # stored through a pointer a thread (the owner's), loaded as one value
        for c in tl.static_range(W):
            tl.store(_ptr64(at + own.to(tl.int32) * 0 + c), _pack64(cr[c], ci[c]), mask=own)
        tl.debug_barrier()
        for c in tl.static_range(W):
            y_r, y_i = _unpack64(tl.load(_ptr64(at + c)))
            prr = prr + (y_r,)
            pri = pri + (y_i,)
    return prr, pri


# The one-barrier search (``lu.PANEL_ROTATE`` 3, sm_80+): fp_lurow holds two buffers (the steps
# take them in turn: a thread can only be a step ahead of another, the barrier between) of
# 8 (key, place) pairs (64 bytes), then 8 rows of W <= 32 words: 2 x (64 + 2048) = 4224 bytes.

@triton.jit
def _thread_id(like):
    """The thread's index in the block (%tid.x), shaped as ``like``."""
    return tl.inline_asm_elementwise("mov.u32 $0, %tid.x;", "=r,r", [like], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _warp_max(x):
    """The largest int32 x over the thread's warp (every lane)."""
    return tl.inline_asm_elementwise("redux.sync.max.s32 $0, $1, 0xffffffff;", "=r,r", [x], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _warp_min(x):
    """The smallest int32 x over the thread's warp (every lane)."""
    return tl.inline_asm_elementwise("redux.sync.min.s32 $0, $1, 0xffffffff;", "=r,r", [x], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _fold(ks, ps, ws, N: tl.constexpr):
    """N candidates (key, place, warp) -> N / 2, pairwise by :func:`_pivot_max`."""
    nk = ()
    np_ = ()
    nw = ()
    for h in tl.static_range(N // 2):
        k, p, w = _pivot_max(ks[2 * h], ps[2 * h], ws[2 * h], ks[2 * h + 1], ps[2 * h + 1], ws[2 * h + 1])
        nk = nk + (k,)
        np_ = np_ + (p,)
        nw = nw + (w,)
    return nk, np_, nw


@triton.jit
def _warp_search_pass(xr, xi, live, pos, g, j, cr, ci, tid, W: tl.constexpr, CPLX: tl.constexpr,
                      WARPS: tl.constexpr):
    """Step g's pivot (as ``_search``: the first largest |re| + |im| at places g..) and its row, in
    one barrier: a key a row (0 out of play, 1 NaN, else the magnitude's bits + 2: non-negative
    floats order as their bits), each warp's best (``redux.sync``: the largest key, then the
    least place among those) written by its lane with the lane's row (complex64 words, the
    rotated order) to the warp's slot of buffer j mod 2, then every thread reads the ``WARPS``
    pairs (<= 8) and the best warp's row. Returns the pivot's place and row (re, im tuples)."""
    mag = _abs1(xr, xi, CPLX)
    key = tl.where(live & (pos >= g), tl.where(mag == mag, mag.to(tl.int32, bitcast=True) + 2, 1), 0)
    wk = _warp_max(key)
    wp = _warp_min(tl.where(key == wk, pos, 0x7FFFFFFF))
    win = ((key == wk) & (pos == wp)).to(tl.int32)
    buf = (j & 1) * (64 + SEARCH_WARPS * W * 8)
    warp = tid >> 5
    _smem_st2(buf + warp * 8, win, key, pos, False)  # one 64-bit word: key low, place high
    _smem_put_row(buf + 64 + warp * (W * 8), win, cr, ci, W)
    tl.debug_barrier()
    ks = ()  # scalars: every thread reads the same words
    ps = ()
    ws = ()
    for h in tl.static_range(SEARCH_WARPS // 2):
        w1, w2 = _smem_ld2(buf + 16 * h)
        k1 = (w1 & 0xFFFFFFFF).to(tl.int32)
        p1 = (w1 >> 32).to(tl.int32)
        k2 = (w2 & 0xFFFFFFFF).to(tl.int32)
        p2 = (w2 >> 32).to(tl.int32)
        k1 = tl.where(2 * h < WARPS, k1, -1)  # slots of no warp: never written, never taken
        k2 = tl.where(2 * h + 1 < WARPS, k2, -1)
        ks = ks + (k1, k2)
        ps = ps + (p1, p2)
        ws = ws + (p1 * 0 + 2 * h, p1 * 0 + 2 * h + 1)
    # the best of the warps' pairs (a tree), and which warp holds it
    tl.static_assert(SEARCH_WARPS == 8, "the tree and fp_lurow's 64-byte key region are for 8 slots")
    ks, ps, ws = _fold(ks, ps, ws, 8)
    ks, ps, ws = _fold(ks, ps, ws, 4)
    ks, ps, ws = _fold(ks, ps, ws, 2)
    prr, pri = _smem_row(buf + 64 + ws[0] * (W * 8), W)
    return ps[0], prr, pri
