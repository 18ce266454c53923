"""What the blocked LU does to the columns outside a panel once the panel is factored, one
chunk of ``CW`` columns at a time: the panel's row interchanges, and right of the panel
``U12 = L11^-1 A12`` and ``A22 -= L21 U12``.

``_lu_chunk`` is the step for one chunk of one matrix; the one-program-a-matrix path of
:mod:`.lu` loops it over the columns, and ``_lu_step_kernel`` runs it with a program a
(matrix, chunk), so that the step after a panel spreads over the whole GPU (``lu.BLOCKED_STEP``).
"""
from __future__ import annotations

from ..._core.backend import tl, triton
from .tiles import _cdot, _dot, _ld, _st, _tri_solve
from .triangular import _track


@triton.jit
def _track_unrolled(pb, k0, jcnt, m, src, W: tl.constexpr):
    """:func:`.triangular._track` through one panel's interchanges (pivots ``pb[k0 .. k0+jcnt-1]``,
    jcnt <= W) in an unrolled loop: the W pivot loads are in flight together, not one a trip."""
    for i in tl.static_range(W):
        t = k0 + (W - 1 - i)
        p = tl.load(pb + t, mask=W - 1 - i < jcnt, other=0) - 1
        p = tl.where((W - 1 - i < jcnt) & (p >= 0) & (p < m), p, t)
        src = tl.where(src == t, p, tl.where(src == p, t, src))
    return src


@triton.jit
def _swap_sources(pb, k0, jcnt, m, W: tl.constexpr, UNROLL: tl.constexpr):
    """The panel's interchanges (pivots ``pb[k0 .. k0+jcnt-1]``, 1-based rows) as moves: returns
    ``pj`` (W,), the rows the panel rows were interchanged with (a panel row's own row past
    jcnt), and the sources of the rows that end up at ``k0 + i`` (``st``) and at ``pj[i]``
    (``sb``), tracked backwards through the interchanges (:func:`.triangular._track`; UNROLL: the
    same in an unrolled loop, whose W pivot loads are in flight together rather than one a trip;
    not for float64 tiles, where Triton 3.6 then fails to lower the kernel's float64 dots)."""
    wv = tl.arange(0, W)
    pj = tl.load(pb + k0 + wv, mask=wv < jcnt, other=0) - 1
    pj = tl.where((wv < jcnt) & (pj >= 0) & (pj < m), pj, k0 + wv)
    dst = tl.reshape(tl.join(k0 + wv, pj), [1, 2 * W])
    if UNROLL:
        src = _track_unrolled(pb, k0, jcnt, m, dst, W)
    else:
        src = _track(pb, tl.zeros([1], dtype=tl.int64), 1, tl.full([1], True, tl.int1), dst, k0, k0 + jcnt, m)
    st, sb = tl.split(tl.reshape(src, [W, 2]))
    return pj, st, sb


@triton.jit
def _l11_inv(base, k0, jcnt, m, n, slr, slc, W: tl.constexpr, CPLX: tl.constexpr, NEUMANN: tl.constexpr,
             PREC: tl.constexpr):
    """``L11^-1`` (W, W) of the panel at k0 (unit lower; the identity past jcnt): by forward
    substitution in registers, or with ``NEUMANN`` as products: L11 = I + N with N strictly
    lower, so N^W = 0 and L11^-1 = (I - N)(I + N^2)(I + N^4)...(I + N^(W/2)), 2 log2(W) - 2
    matmuls and no reductions."""
    dt = base.dtype.element_ty
    if NEUMANN:
        wr = tl.arange(0, W)[:, None]
        wc = tl.arange(0, W)[None, :]
        eye = (wr == wc).to(dt) + tl.zeros([W, W], dtype=dt)
        nr, ni = _ld(base, (k0 + wr) * slr + (k0 + wc) * slc, (wr > wc) & (wr < jcnt) & (k0 + wr < m), CPLX)
        xr = eye - nr
        xi = -ni
        for s in tl.static_range(1, 7):  # W = 2^k <= 64: the factors I + N^2 .. I + N^(W/2)
            if (1 << s) < W:
                nr, ni = _cdot(nr, ni, nr, ni, CPLX, PREC)
                xr, xi = _cdot(xr, xi, eye + nr, ni, CPLX, PREC)
        return xr, xi
    else:
        wr = tl.arange(0, W)[None, :, None]
        wc = tl.arange(0, W)[None, None, :]
        eye = (wr == wc).to(dt) + tl.zeros([1, W, W], dtype=dt)
        lr, li = _ld(base, (k0 + wr) * slr + (k0 + wc) * slc, (k0 + wr < m) & (k0 + wc < n), CPLX)
        ir, ii = _tri_solve(lr, li, eye, tl.zeros([1, W, W], dtype=dt), jcnt, True, True, False, CPLX)
        return tl.reshape(ir, [W, W]), tl.reshape(ii, [W, W])


@triton.jit
def _chunk_words(c0, c_hi, n, k0, W: tl.constexpr, CW: tl.constexpr, CPLX: tl.constexpr):
    """Word offsets along a row (1, C*CW) of columns c0 .. c0+CW-1 of unit stride, and their mask
    (columns below c_hi and n, none in the panel k0 .. k0+W-1)."""
    C: tl.constexpr = 2 if CPLX else 1
    jw = tl.arange(0, C * CW)[None, :]
    cw = c0 + jw // C
    return c0 * C + jw, (cw < c_hi) & (cw < n) & ((cw < k0) | (cw >= k0 + W))


@triton.jit
def _chunk_ld(base, k0, c0, c_hi, m, n, slr, st, sb, W: tl.constexpr, CW: tl.constexpr, CPLX: tl.constexpr):
    """The rows a chunk's interchanges move (UNIT form): those that end up at the panel rows
    (``st``) and at the pivot rows (``sb``), (W, C*CW) words each. A last panel of fewer than W rows
    names rows past m for the rest (their own, never stored): those are not read (the last matrix's
    would lie past the tensor: an illegal address on the H100, 4096 float32 48x48, fifty-sixth session)."""
    woff, colw = _chunk_words(c0, c_hi, n, k0, W, CW, CPLX)
    wv = tl.arange(0, W)[:, None]
    xt = tl.load(base + st[:, None] * slr + woff, mask=(k0 + wv < m) & colw, other=0.0)
    xb = tl.load(base + sb[:, None] * slr + woff, mask=(sb[:, None] < m) & colw, other=0.0)
    return xt, xb


@triton.jit
def _chunk_st(base, k0, c0, c_hi, m, n, slr, pj, xt, xb, ir, ii, RIGHT: tl.constexpr, W: tl.constexpr,
              CW: tl.constexpr, CPLX: tl.constexpr, PREC: tl.constexpr):
    """... and their stores (after a barrier: every moved row read before any is written): the
    pivot rows below the panel rows, then the panel rows, as U12 = L11^-1 A12 with RIGHT. Returns
    the panel rows' (re, im)."""
    woff, colw = _chunk_words(c0, c_hi, n, k0, W, CW, CPLX)
    wv = tl.arange(0, W)[:, None]
    tl.store(base + pj[:, None] * slr + woff, xb, mask=(pj[:, None] >= k0 + W) & colw)
    tr = xt
    ti = xt
    if RIGHT:
        if CPLX:
            tr, ti = tl.split(tl.reshape(xt, [W, CW, 2]))
        tr, ti = _cdot(ir, ii, tr, ti, CPLX, PREC)
        xt = tr
        if CPLX:
            xt = tl.reshape(tl.join(tr, ti), [W, 2 * CW])
    tl.store(base + (k0 + wv) * slr + woff, xt, mask=(k0 + wv < m) & colw)
    return tr, ti


@triton.jit
def _lu_chunk(base, k0, jcnt, c0, c_hi, m, n, slr, slc, pj, st, sb, ir, ii, RIGHT: tl.constexpr,
              UPDATE: tl.constexpr, W: tl.constexpr, CW: tl.constexpr, BM: tl.constexpr, CPLX: tl.constexpr,
              PREC: tl.constexpr, UNIT: tl.constexpr):
    """Columns c0 .. min(c0+CW, c_hi)-1 of one matrix at ``base``, none of them in the panel
    k0 .. k0+W-1: the panel's interchanges (``pj, st, sb`` from :func:`_swap_sources`: only the
    rows they touch move); with ``RIGHT`` (columns right of the panel) the moved panel rows
    become ``U12 = L11^-1 A12`` (``ir, ii``) and, with ``UPDATE``, the rows below ``A22 - L21 U12``
    in blocks of BM rows, each block's loads issued before the previous block's product. A
    complex product is one real one, (BM, 2W) @ (2W, 2CW): L21 and A22 as they lie in memory
    (re, im interleaved), U12 as 2x2 real blocks [[re, im], [-im, re]]. UNIT (entries of unit
    stride along a row, ``slc`` = C words): a row's C*CW words are loaded and stored as one
    contiguous run (a warp's accesses along rows; the (re, im) form strided by 2 words lays a warp
    down the rows, a sector an entry: the H100 timeline's panel launches, fifty-fourth session)."""
    e0 = k0 + W
    C: tl.constexpr = 2 if CPLX else 1
    if UNIT:
        xt, xb = _chunk_ld(base, k0, c0, c_hi, m, n, slr, st, sb, W, CW, CPLX)
        tl.debug_barrier()  # every moved row read before any is written
        tr, ti = _chunk_st(base, k0, c0, c_hi, m, n, slr, pj, xt, xb, ir, ii, RIGHT, W, CW, CPLX, PREC)
    else:
        wv = tl.arange(0, W)[:, None]
        st2 = st[:, None]
        sb2 = sb[:, None]
        pj2 = pj[:, None]
        cc = c0 + tl.arange(0, CW)[None, :]
        colm = (cc < c_hi) & (cc < n) & ((cc < k0) | (cc >= e0))
        tr, ti = _ld(base, st2 * slr + cc * slc, (k0 + wv < m) & colm, CPLX)
        br, bi = _ld(base, sb2 * slr + cc * slc, (sb2 < m) & colm, CPLX)  # (rows past m: _chunk_ld)
        tl.debug_barrier()  # every moved row read before any is written
        # the pivot rows below the panel rows (those inside it are panel rows: written next)
        _st(base, pj2 * slr + cc * slc, br, bi, (pj2 >= e0) & colm, CPLX)
        if RIGHT:
            tr, ti = _cdot(ir, ii, tr, ti, CPLX, PREC)
        _st(base, (k0 + wv) * slr + cc * slc, tr, ti, (k0 + wv < m) & colm, CPLX)
    if RIGHT and UPDATE:
        if CPLX:  # rows 2k: U[k] as it lies (re, im); 2k+1: (-im, re)
            even = tl.reshape(tl.join(tr, ti), [W, 2 * CW])
            odd = tl.reshape(tl.join(-ti, tr), [W, 2 * CW])
            u = tl.reshape(tl.permute(tl.join(even, odd), [0, 2, 1]), [2 * W, 2 * CW])
        else:
            u = tr
        lq = tl.arange(0, C * W)[None, :]
        p2 = tl.arange(0, C * CW)[None, :]
        loff = (k0 + lq // C) * slc + lq % C
        aoff = (c0 + p2 // C) * slc + p2 % C
        if UNIT:  # (the same offsets, contiguous to the compiler)
            loff = k0 * C + lq
            aoff = c0 * C + p2
        cm = (c0 + p2 // C < c_hi) & (c0 + p2 // C < n) & (c0 + p2 // C >= e0)
        tl.debug_barrier()  # the pivot rows in place before the rows below are read
        ri = e0 + tl.arange(0, BM)[:, None]
        lt = tl.load(base + ri * slr + loff, mask=(ri < m) & (lq // C < jcnt), other=0.0)
        a = tl.load(base + ri * slr + aoff, mask=(ri < m) & cm, other=0.0)
        for i0 in range(e0, m, BM):
            ri = i0 + tl.arange(0, BM)[:, None]
            rn = ri + BM
            lt_next = tl.load(base + rn * slr + loff, mask=(rn < m) & (lq // C < jcnt), other=0.0)
            a_next = tl.load(base + rn * slr + aoff, mask=(rn < m) & cm, other=0.0)
            tl.store(base + ri * slr + aoff, a - _dot(lt, u, PREC), mask=(ri < m) & cm)
            lt = lt_next
            a = a_next


@triton.jit
def _lu_step_kernel(lu_ptr, piv_ptr, m, n, slb, slr, slc, spb, k0, jcnt, c_lo, c_hi, n_left,
                    W: tl.constexpr, CW: tl.constexpr, BM: tl.constexpr, CPLX: tl.constexpr, PREC: tl.constexpr,
                    NEUMANN: tl.constexpr, TRACK: tl.constexpr, UPDATE: tl.constexpr, UNIT: tl.constexpr):
    """The step after the panel at k0 for matrix ``program_id(0)``: programs 0 .. n_left-1 of
    axis 1 interchange rows in chunks of the columns left of the panel, the others take chunks
    of columns c_lo .. c_hi-1 (right of it) through interchanges, U12 and (UPDATE) the update."""
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    base = lu_ptr + b * slb
    if c < n_left:
        pj, st, sb = _swap_sources(piv_ptr + b * spb, k0, jcnt, m, W, TRACK)
        _lu_chunk(base, k0, jcnt, c * CW, k0, m, n, slr, slc, pj, st, sb, None, None, False, False, W, CW,
                  BM, CPLX, PREC, UNIT)
    else:  # L11^-1 first: its loads and products beside the pivots' loads
        ir, ii = _l11_inv(base, k0, jcnt, m, n, slr, slc, W, CPLX, NEUMANN, PREC)
        pj, st, sb = _swap_sources(piv_ptr + b * spb, k0, jcnt, m, W, TRACK)
        _lu_chunk(base, k0, jcnt, c_lo + (c - n_left) * CW, c_hi, m, n, slr, slc, pj, st, sb, ir, ii, True,
                  UPDATE, W, CW, BM, CPLX, PREC, UNIT)


@triton.jit
def _lu_left_swaps_kernel(lu_ptr, piv_ptr, m, kmax, slb, slr, slc, spb, W: tl.constexpr, M: tl.constexpr,
                          CPLX: tl.constexpr, UNIT: tl.constexpr):
    """The row interchanges that the panel launches left for the end (``lu.DEFER_LEFT``): program
    (matrix, p) gives panel p's W columns those of every later panel, each row's source tracked
    backwards through the later panels' pivots a panel at a time (:func:`_track_unrolled`, a
    panel's W pivot loads in flight together), the rows gathered into registers, then written back
    in place (the programs' columns are disjoint). UNIT (entries of unit stride along a row): a
    row's W entries as C*W contiguous words, so that a warp's loads and stores cover whole rows
    (the (re, im) form, a thread a row, wrote 4 bytes a 32-byte sector: 148 us for 64 x 256x256
    complex64 on the H100, fifty-fourth session)."""
    b = tl.program_id(0).to(tl.int64)
    e0 = (tl.program_id(1) + 1) * W
    base = lu_ptr + b * slb
    pb = piv_ptr + b * spb
    rows = tl.arange(0, M)
    src = rows
    for s in range(0, tl.cdiv(kmax - e0, W)):  # the later panels, last first
        q0 = e0 + (tl.cdiv(kmax - e0, W) - 1 - s) * W
        src = _track_unrolled(pb, q0, tl.minimum(kmax - q0, W), m, src, W)
    src = tl.reshape(src, [M, 1])
    if UNIT:
        C: tl.constexpr = 2 if CPLX else 1
        j = tl.arange(0, C * W)[None, :]
        mask = (rows[:, None] < m) & (e0 - W + j // C < kmax)
        x = tl.load(base + src * slr + ((e0 - W) * C + j), mask=mask)
        tl.debug_barrier()  # every row read before any is written
        tl.store(base + rows[:, None] * slr + ((e0 - W) * C + j), x, mask=mask)
    else:
        cols = e0 - W + tl.arange(0, W)[None, :]
        mask = (rows[:, None] < m) & (cols < kmax)
        xr, xi = _ld(base, src * slr + cols * slc, mask, CPLX)
        tl.debug_barrier()  # every row read before any is written
        _st(base, rows[:, None] * slr + cols * slc, xr, xi, mask, CPLX)

