"""Blocked Householder QR of matrices too large for one program's registers (``qr`` of a
4096 x 4096 float32 matrix), real dtypes: float32 and float64 (float64 tested on the H200,
not timed).

Right-looking, with panels of ``NB`` columns and the compact WY form ``Q_p = I - V T V^T``:

* ``_panel_kernel`` factors one panel in place. Its rows are split over ``nprog`` programs
  (``ROWS`` rows each, the (ROWS, NB) tile in registers) that run at the same time and meet
  at a grid barrier once per column: each program adds up ``x^T P`` over its rows (x the
  column below the diagonal, P the panel), writes that row of partial sums, the owner of the
  diagonal row writes the row itself, and after the barrier every program sums the partial
  rows in the same order, so all of them build the same reflector (LAPACK's ``?larfg``:
  ``beta = -sign(alpha) ||(alpha, x)||``, ``tau = (beta - alpha) / beta``, no reflection where
  ``x`` is zero) and update their own rows: ``v^T P_c = P_jc + (x^T P_c) / (alpha - beta)``.
  At the end each program writes its rows of ``V`` (unit lower trapezoid) and its partial
  ``V^T V``; the last to arrive sums those and forms ``T`` (``?larft``'s recurrence). Columns
  without a reflection (``tau = 0``) get a zero column in ``V``.
* The host loop works in outer blocks of ``OUTER`` columns: after each panel, ``Q_p^T`` is
  applied (three batched matmuls) to the block's later columns only; once a block is done, its
  ``T`` is formed from ``V^T V`` and the panels' T (``_t_kernel``), and the rest of the matrix takes
  the whole block's ``Q^T`` in one pass (float32 matmuls with TF32 off). Q (``?orgqr``) is
  formed backwards from the blocks' V and T the same way.

The barrier needs every program of a matrix resident at once: grids are at most one program
per multiprocessor (batches are launched in slices), and a wait that never ends (it should
not happen) gives up after ``SPIN`` polls and fills the panel with NaN instead of hanging.
Triton's interpreter runs programs one after another, so there one program takes all rows.

The matrix is scaled by a power of two (exact) so that its largest entry is in [0.5, 1):
no squared entry overflows for inputs near the format's limits.
"""
from __future__ import annotations

import torch

from ..._core.backend import INTERPRET, num_sms, tl, triton
from ..._core.launch import Launcher, cdiv, next_pow2
from .graphs import GraphCache, exact_matmuls
from .tiles import _dot, _sum2

#: Panel width (columns a panel kernel factors) by dtype itemsize, and the rows a program
#: holds (doubled, up to 4x, where the panel would need more programs than multiprocessors).
NB = {4: 32, 8: 16}
ROWS = 64
#: Polls of the barrier counter before a program gives up (seconds on a GPU).
SPIN = 1 << 22
WARPS = 4
#: The column's two sums over a program's rows in one multi-operand reduction (the
#: interpreter runs a generic reduce element by element, slowly).
FUSE = not INTERPRET
#: CUDA graphs of whole factorisations kept (the most recently used shapes; each holds its
#: input, outputs and workspace: ~6x the matrix) for matrices of at least GRAPH_MIN_K rows and
#: columns; 0: no graphs.
GRAPHS = 2
GRAPH_MIN_K = 512
#: Columns of an outer block: its panels update only the block's own columns; the rest of the
#: matrix (and Q) is updated once a block, with the block's V and T.
OUTER = 256


@triton.jit
def _barrier(cnt_ptr, target, broken, SPIN: tl.constexpr):
    """Arrive at the batch element's counter and wait until it reaches ``target``."""
    tl.debug_barrier()
    seen = tl.atomic_add(cnt_ptr, 1, sem="acq_rel") + 1  # the last to arrive need not poll
    limit = tl.where(broken, 0, SPIN)
    spins = 0
    while (seen < target) & (spins < limit):
        seen = tl.atomic_add(cnt_ptr, 0, sem="acquire")
        spins += 1
    tl.debug_barrier()
    return broken | (seen < target)


@triton.jit
def _panel_kernel(a_ptr, v_ptr, t_ptr, x_ptr, cnt_ptr, k0, m, w, b0, nprog, base,
                  sab, sar, sac, svb, svr, svc, stb, stt, sxb,
                  ROWS: tl.constexpr, NB: tl.constexpr, NPP: tl.constexpr, SPIN: tl.constexpr,
                  FUSE: tl.constexpr):
    pid = tl.program_id(0)
    b = (tl.program_id(1) + b0).to(tl.int64)
    r = tl.arange(0, ROWS)
    c = tl.arange(0, NB)
    c2 = c[None, :]
    gi = pid * ROWS + r  # row in the panel (0: row k0 of A)
    g2 = gi[:, None]
    mp = m - k0
    inside = (g2 < mp) & (c2 < w)
    a_off = b * sab + (k0 + g2).to(tl.int64) * sar + (k0 + c2) * sac
    P = tl.load(a_ptr + a_off, mask=inside, other=0.0)
    xb = x_ptr + b * sxb  # exchange: 2 slots of (NPP partial rows + 1 diagonal row), then NPP Grams
    cnt = cnt_ptr + b
    pp = tl.arange(0, NPP)[:, None]
    taus = tl.zeros([NB], dtype=P.dtype)
    broken = pid < 0
    for j in range(0, w):
        xj = tl.sum(tl.where(c2 == j, P, 0.0), axis=1)  # column j: (ROWS,)
        below = gi > j
        xp = tl.where(below, xj, 0.0)[:, None] * P
        hp = tl.where(g2 == j, P, 0.0)
        if FUSE:  # x^T P over my rows, and row j if I hold it: one pass through shared memory
            part, head = tl.reduce((xp, hp), 0, _sum2)
        else:
            part, head = tl.sum(xp, axis=0), tl.sum(hp, axis=0)
        slot = xb + (j % 2) * (NPP + 1) * NB
        tl.store(slot + pid * NB + c, part)
        tl.store(slot + NPP * NB + c, head, mask=(c * 0 + j // ROWS) == pid)
        broken = _barrier(cnt, base + (j + 1) * nprog, broken, SPIN)
        g = tl.sum(tl.load(slot + pp * NB + c2, mask=(pp < nprog) & (c2 < NB), other=0.0, cache_modifier=".cg"),
                   axis=0)
        h = tl.load(slot + NPP * NB + c, cache_modifier=".cg")
        alpha = tl.sum(tl.where(c == j, h, 0.0))
        xn2 = tl.sum(tl.where(c == j, g, 0.0))
        trivial = xn2 == 0.0
        bmag = tl.sqrt(alpha * alpha + xn2)
        beta = tl.where(alpha >= 0, -bmag, bmag)
        tau = tl.where(trivial, 0.0, (beta - alpha) / tl.where(trivial, 1.0, beta))
        s = tl.where(trivial, 0.0, 1.0 / tl.where(trivial, 1.0, alpha - beta))
        wv = h + s * g  # v^T P_c
        d = tl.where(trivial, alpha, beta)
        # one pass: v (1 at row j, s x below it, 0 above), P - tau v wv^T right of column j
        u = tl.where(gi == j, 1.0, tl.where(below, s * xj, 0.0))
        col = tl.where(trivial, P, tl.where(g2 == j, d, tl.where(below[:, None], u[:, None], P)))
        P = tl.where(c2 > j, P - (tau * u)[:, None] * wv[None, :], tl.where(c2 == j, col, P))
        taus = tl.where(c == j, tau, taus)
    V = tl.where(g2 > c2, P, tl.where(g2 == c2, 1.0, 0.0))
    V = tl.where(inside & (taus != 0.0)[None, :], V, 0.0)  # no reflection: a zero column
    if broken:
        P = P * float("nan")
    tl.store(a_ptr + a_off, P, mask=inside)
    tl.store(v_ptr + b * svb + (k0 + g2).to(tl.int64) * svr + (k0 + c2) * svc, V, mask=inside)
    # T from V^T V: partial Grams, and the last program to arrive sums them
    gram = xb + 2 * (NPP + 1) * NB
    rr = c[:, None]
    tl.store(gram + pid * NB * NB + rr * NB + c2, _dot(tl.trans(V), V, "ieee"))
    tl.debug_barrier()
    last = tl.atomic_add(cnt, 1, sem="acq_rel") == base + (w + 1) * nprog - 1
    if last:
        G = tl.zeros([NB, NB], dtype=P.dtype)
        for p in range(0, nprog):
            G += tl.load(gram + p * NB * NB + rr * NB + c2, cache_modifier=".cg")
        T = tl.zeros([NB, NB], dtype=P.dtype)
        for j in range(0, w):  # T[:j, j] = T[:j, :j] (-tau_j V[:, :j]^T v_j), T[j, j] = tau_j
            tj = tl.sum(tl.where(c == j, taus, 0.0))
            gj = tl.sum(tl.where(c2 == j, G, 0.0), axis=1)  # G[:, j]
            gj = tl.where(c < j, -tj * gj, 0.0)
            tcol = tl.sum(T * gj[None, :], axis=1)
            tcol = tl.where(c == j, tj, tcol)
            T = tl.where(c2 == j, tcol[:, None], T)
        tl.store(t_ptr + b * stb + rr * stt + c2, T, mask=(rr < w) & (c2 < w))


_PANEL = Launcher(_panel_kernel)


@triton.jit
def _t_kernel(t_ptr, g_ptr, ow, stb, stt, sgb, sgt, NB: tl.constexpr):
    """Row block ``i`` (``NB`` rows) of an outer block's T, whose diagonal blocks hold the
    panels' T. T is the inverse of ``striu(G) + diag(1 / tau)`` (G = V^T V), so its row block i
    needs only itself and the diagonal: ``T_iq = -(sum_{i <= l < q} T_il G_lq) T_qq`` for
    q = i+1, i+2, ... (``?larft``'s recursive form, block by block)."""
    b = tl.program_id(0).to(tl.int64)  # batch on axis 0: more than 65535 matrices can come
    i = tl.program_id(1)
    r = tl.arange(0, NB)[:, None]
    c = tl.arange(0, NB)[None, :]
    tb = t_ptr + b * stb
    gb = g_ptr + b * sgb
    ri = i * NB + r
    for q in range(i + 1, tl.cdiv(ow, NB)):
        cq = q * NB + c
        acc = tl.zeros([NB, NB], dtype=t_ptr.dtype.element_ty)
        for l in range(i, q):
            til = tl.load(tb + ri * stt + l * NB + c, mask=(ri < ow) & (l * NB + c < ow), other=0.0)
            glq = tl.load(gb + (l * NB + r) * sgt + cq, mask=(l * NB + r < ow) & (cq < ow), other=0.0)
            acc += _dot(til, glq, "ieee")
        tqq = tl.load(tb + (q * NB + r) * stt + cq, mask=(q * NB + r < ow) & (cq < ow), other=0.0)
        tl.store(tb + ri * stt + cq, -_dot(acc, tqq, "ieee"), mask=(ri < ow) & (cq < ow))
        tl.debug_barrier()  # the next q reads this block back (other threads)


_TBLOCK = Launcher(_t_kernel)


def rows_per_program(mp: int, device) -> int:
    """Rows a panel program holds for a panel of ``mp`` rows, or 0 where the panel would need
    more programs than the device runs at once."""
    if INTERPRET:
        return max(16, next_pow2(mp))
    rows = ROWS
    while cdiv(mp, rows) > num_sms(device):
        rows *= 2
        if rows > 4 * ROWS:
            return 0
    return rows


def fits(m: int, dtype, device) -> bool:
    """Whether matrices of ``m`` rows and ``dtype`` take this path on ``device``."""
    return dtype in (torch.float32, torch.float64) and rows_per_program(m, device) > 0


def _apply(X, Vb, Tb, transpose: bool) -> None:
    """X <- (I - Vb Tb Vb^T)^T X (``transpose``) or (I - Vb Tb Vb^T) X, in place."""
    X.baddbmm_(Vb, torch.bmm(Tb.mT if transpose else Tb, torch.bmm(Vb.mT, X)), alpha=-1)


def _merge_t(Vb, Tb, nb: int) -> None:
    """Tb (holding each panel's T on its diagonal) <- the block's T, from G = V^T V (the UT
    transform: T^-1 = striu(G) + diag(1 / tau)), by ``_t_kernel``: one program a row block."""
    G = torch.bmm(Vb.mT, Vb)
    _TBLOCK[(Tb.shape[0], cdiv(Tb.shape[-1], nb))](
        Tb, G, Tb.shape[-1], Tb.stride(0), Tb.stride(1), G.stride(0), G.stride(1), NB=nb)


def _blocks(k: int, ob: int, nb: int):
    """[(K0, OW, [(k0, w), ...])]: outer blocks of ``ob`` columns, each in panels of ``nb``."""
    return [(K0, min(ob, k - K0), [(k0, min(nb, k - k0)) for k0 in range(K0, min(K0 + ob, k), nb)])
            for K0 in range(0, k, ob)]


def qr_blocked(A3: torch.Tensor, mode: str):
    """(Q3 or None, R3) of A3 (nbatch, m, n), float32/float64, on a Triton device: from a CUDA
    graph of the whole factorisation from the second call of a shape on (its host loop issues
    hundreds of launches and matmuls: 29 ms of host time for a 4096 x 4096 matrix on the H200's
    host, against 21 ms of GPU work), directly otherwise."""
    if min(A3.shape[1:]) < GRAPH_MIN_K:
        return _qr(A3, mode)
    key = (tuple(A3.shape), A3.dtype, A3.device, mode, NB[A3.element_size()], ROWS, WARPS, FUSE, OUTER)
    return _GRAPHS(key, lambda A: _qr(A, mode), A3, GRAPHS)


_GRAPHS = GraphCache()


def _qr(A3: torch.Tensor, mode: str):
    nbatch, m, n = A3.shape
    k = min(m, n)
    dev = A3.device
    nb = NB[A3.element_size()]
    ob = max(nb, OUTER // nb * nb)
    amax = A3.abs().amax(dim=(1, 2))
    emax = 1022 if A3.dtype == torch.float64 else 126
    scale = torch.ldexp(torch.ones_like(amax), -torch.frexp(amax)[1].clamp(-emax, emax))
    work = A3 * scale[:, None, None]
    V = torch.zeros(nbatch, m, k, dtype=A3.dtype, device=dev)  # zero above each panel's diagonal
    blocks = _blocks(k, ob, nb)
    T = torch.zeros(nbatch, len(blocks), ob, ob, dtype=A3.dtype, device=dev)
    npp = next_pow2(max(cdiv(m - k0, rows_per_program(m - k0, dev)) for _, _, ps in blocks for k0, _ in ps))
    xbuf = torch.empty(nbatch, 2 * (npp + 1) * nb + npp * nb * nb, dtype=A3.dtype, device=dev)
    cnt = torch.zeros(nbatch, dtype=torch.int32, device=dev)
    base = 0
    with exact_matmuls():
        for blk, (K0, OW, panels) in enumerate(blocks):
            Tk = T[:, blk]
            for k0, w in panels:
                j0 = k0 - K0
                rows = rows_per_program(m - k0, dev)
                nprog = cdiv(m - k0, rows)
                chunk = nbatch if INTERPRET else max(1, num_sms(dev) // nprog)
                Tp = Tk[:, j0:, j0:]
                for b0 in range(0, nbatch, chunk):
                    _PANEL[(nprog, min(chunk, nbatch - b0))](
                        work, V, Tp, xbuf, cnt, k0, m, w, b0, nprog, base,
                        *work.stride(), *V.stride(), Tp.stride(0), Tp.stride(1), xbuf.stride(0),
                        ROWS=rows, NB=nb, NPP=npp, SPIN=SPIN, FUSE=FUSE, num_warps=WARPS)
                base += (w + 1) * nprog
                Vp = V[:, k0:, k0:k0 + w]
                if j0 + w < OW:  # the block's later panels
                    _apply(work[:, k0:, k0 + w:K0 + OW], Vp, Tk[:, j0:j0 + w, j0:j0 + w], True)
            if len(panels) > 1:
                _merge_t(V[:, K0:, K0:K0 + OW], Tk[:, :OW, :OW], nb)
            if K0 + OW < n:
                _apply(work[:, K0:, K0 + OW:], V[:, K0:, K0:K0 + OW], Tk[:, :OW, :OW], True)
        rows_r = m if mode == "complete" else k
        R = torch.triu(work[:, :rows_r]).div_(scale[:, None, None])
        if mode == "r":
            return None, R
        qc = m if mode == "complete" else k
        Q = torch.zeros(nbatch, m, qc, dtype=A3.dtype, device=dev)
        Q.diagonal(dim1=1, dim2=2).fill_(1)
        for blk, (K0, OW, _) in reversed(list(enumerate(blocks))):
            _apply(Q[:, K0:, K0:], V[:, K0:, K0:K0 + OW], T[:, blk, :OW, :OW], False)
    return Q, R
