"""What the blocked LU does to the columns outside a panel once the panel is factored, one
chunk of ``CW`` columns at a time: the panel's row interchanges, and right of the panel
``U12 = L11^-1 A12`` and ``A22 -= L21 U12``.

``_lu_chunk`` is the step for one chunk of one matrix; the one-program-a-matrix path of
:mod:`.lu` loops it over the columns, and ``_lu_step_kernel`` runs it with a program a
(matrix, chunk), so that the step after a panel spreads over the whole GPU (``lu.BLOCKED_STEP``).
"""
from __future__ import annotations

from ..._core.backend import tl, triton
from .tiles import _cdot, _dot, _dot_sub, _ld, _st, _tri_solve


@triton.jit
def _swap_sources(pb, k0, jcnt, m, W: tl.constexpr):
    """The panel's interchanges (pivots ``pb[k0 .. k0+jcnt-1]``, 1-based rows) as moves: returns
    ``pj`` (W,), the rows the panel rows were interchanged with (a panel row's own row past
    jcnt), and the sources of the rows that end up at ``k0 + i`` (``st``) and at ``pj[i]``
    (``sb``): rows tracked backwards through the interchanges, all pivots loaded at once."""
    wv = tl.arange(0, W)
    pj = tl.load(pb + k0 + wv, mask=wv < jcnt, other=0) - 1
    pj = tl.where((wv < jcnt) & (pj >= 0) & (pj < m), pj, k0 + wv)
    st = k0 + wv
    sb = pj
    for s in tl.static_range(W):
        t = W - 1 - s
        g = k0 + t
        p = tl.load(pb + g, mask=t < jcnt, other=0) - 1
        p = tl.where((p >= 0) & (p < m) & (t < jcnt), p, g)
        st = tl.where(st == g, p, tl.where(st == p, g, st))
        sb = tl.where(sb == g, p, tl.where(sb == p, g, sb))
    return pj, st, sb


@triton.jit
def _l11_inv(base, k0, jcnt, m, n, slr, slc, W: tl.constexpr, CPLX: tl.constexpr, NEUMANN: tl.constexpr = False,
             PREC: tl.constexpr = "ieee"):
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
def _lu_chunk(base, k0, jcnt, c0, c_hi, m, n, slr, slc, pj, st, sb, ir, ii, RIGHT: tl.constexpr,
              UPDATE: tl.constexpr, W: tl.constexpr, CW: tl.constexpr, BM: tl.constexpr, CPLX: tl.constexpr,
              PREC: tl.constexpr, EMBED: tl.constexpr = False):
    """Columns c0 .. min(c0+CW, c_hi)-1 of one matrix at ``base``, none of them in the panel
    k0 .. k0+W-1: the panel's interchanges (``pj, st, sb`` from :func:`_swap_sources`: only the
    rows they touch move); with ``RIGHT`` (columns right of the panel) the moved panel rows
    become ``U12 = L11^-1 A12`` (``ir, ii``) and, with ``UPDATE``, the rows below ``A22 - L21 U12``;
    complex with ``EMBED``: each row block's product as one real one, (BM, 2W) @ (2W, 2CW), the
    tiles as they lie in memory (re, im interleaved) and U12 read back as 2x2 real blocks."""
    e0 = k0 + W
    wv = tl.arange(0, W)[:, None]
    wc = tl.arange(0, W)[None, :]
    cc = c0 + tl.arange(0, CW)[None, :]
    colm = (cc < c_hi) & (cc < n) & ((cc < k0) | (cc >= e0))
    st2 = st[:, None]
    sb2 = sb[:, None]
    pj2 = pj[:, None]
    tr, ti = _ld(base, st2 * slr + cc * slc, (k0 + wv < m) & colm, CPLX)
    br, bi = _ld(base, sb2 * slr + cc * slc, colm, CPLX)
    tl.debug_barrier()  # every moved row read before any is written
    # the pivot rows below the panel rows (those inside it are panel rows: written next)
    _st(base, pj2 * slr + cc * slc, br, bi, (pj2 >= e0) & colm, CPLX)
    if RIGHT:
        tr, ti = _cdot(ir, ii, tr, ti, CPLX, PREC)
    _st(base, (k0 + wv) * slr + cc * slc, tr, ti, (k0 + wv < m) & colm, CPLX)
    if RIGHT and UPDATE and CPLX and EMBED:
        tl.debug_barrier()  # U12 and the pivot rows in place before the rows below are updated
        q2 = tl.arange(0, 2 * W)[:, None]  # rows 2k + q of the real U12
        p2 = tl.arange(0, 2 * CW)[None, :]  # real columns 2j + p of the chunk
        col = c0 + p2 // 2
        cm = (col < c_hi) & (col < n) & (col >= e0)
        # [re im] @ [[ur, ui], [-ui, ur]]: row 2k holds U[k] as it lies, row 2k+1 its pairs swapped, re negated
        sgn = tl.where((q2 % 2 == 1) & (p2 % 2 == 0), -1.0, 1.0)
        comp = tl.where(q2 % 2 == 0, p2 % 2, 1 - p2 % 2)
        u = tl.load(base + (k0 + q2 // 2) * slr + col * slc + comp, mask=(k0 + q2 // 2 < m) & cm, other=0.0) * sgn
        lq = tl.arange(0, 2 * W)[None, :]
        for i0 in range(e0, m, BM):
            ri = i0 + tl.arange(0, BM)[:, None]
            lt = tl.load(base + ri * slr + (k0 + lq // 2) * slc + lq % 2, mask=(ri < m) & (lq // 2 < jcnt), other=0.0)
            am = (ri < m) & cm
            a = tl.load(base + ri * slr + col * slc + p2 % 2, mask=am, other=0.0)
            tl.store(base + ri * slr + col * slc + p2 % 2, a - _dot(lt, u, PREC), mask=am)
    elif RIGHT and UPDATE:
        tl.debug_barrier()  # the pivot rows in place before the rows below are updated
        for i0 in range(e0, m, BM):
            ri = i0 + tl.arange(0, BM)[:, None]
            lr, li = _ld(base, ri * slr + (k0 + wc) * slc, (ri < m) & (wc < jcnt), CPLX)
            am = (ri < m) & colm
            ar, ai = _ld(base, ri * slr + cc * slc, am, CPLX)
            ar, ai = _dot_sub(ar, ai, lr, li, tr, ti, CPLX, PREC)
            _st(base, ri * slr + cc * slc, ar, ai, am, CPLX)


@triton.jit
def _lu_step_kernel(lu_ptr, piv_ptr, m, n, slb, slr, slc, spb, k0, jcnt, c_lo, c_hi, n_left,
                    W: tl.constexpr, CW: tl.constexpr, BM: tl.constexpr, CPLX: tl.constexpr, PREC: tl.constexpr,
                    NEUMANN: tl.constexpr, EMBED: tl.constexpr):
    """The step after the panel at k0 for matrix ``program_id(0)``: programs 0 .. n_left-1 of
    axis 1 interchange rows in chunks of the columns left of the panel, the others take chunks
    of columns c_lo .. c_hi-1 (right of it) through interchanges, U12 and the update."""
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    base = lu_ptr + b * slb
    pj, st, sb = _swap_sources(piv_ptr + b * spb, k0, jcnt, m, W)
    if c < n_left:
        _lu_chunk(base, k0, jcnt, c * CW, k0, m, n, slr, slc, pj, st, sb, None, None, False, False, W, CW,
                  BM, CPLX, PREC)
    else:
        ir, ii = _l11_inv(base, k0, jcnt, m, n, slr, slc, W, CPLX, NEUMANN, PREC)
        _lu_chunk(base, k0, jcnt, c_lo + (c - n_left) * CW, c_hi, m, n, slr, slc, pj, st, sb, ir, ii, True,
                  True, W, CW, BM, CPLX, PREC, EMBED)
