"""Triangular solves, ``solve_triangular`` with the semantics of ``torch.linalg``; the same
kernel runs the two substitutions of ``lu_solve`` (:mod:`.lu`).

One kernel, ``_trsm_kernel``, solving ``M X = B`` where ``M`` is a triangle of ``T`` (read
through its strides, so a transposed ``T`` is a view, not a copy), optionally conjugated:

* ``BLOCKED=False`` (n <= 32): a program holds ``BLOCK_B`` whole matrices and a chunk of
  ``KB`` right-hand-side columns in registers and substitutes row by row.
* ``BLOCKED=True`` (one matrix per program, a chunk of ``KB`` right-hand sides): rows in
  blocks of ``NB``; block ``i`` takes ``B_i - M_i,solved X_solved`` (in chunks of ``KC`` rows)
  and multiplies by ``M_ii^-1`` (``tl.dot``: float32 products exact, or as three TF32
  tensor-core passes, ``PREC``, where a program takes 32 right-hand sides; the diagonal blocks are inverted
  beforehand, all at once, by ``_diag_inv_kernel``, so the sweep has no row-by-row step, as
  GPU trsm implementations do), and writes ``X_i``, which later blocks read back (a barrier
  orders the write and the reads).
* ``LU=True``: two passes, ``M1`` then ``M2`` with the opposite triangle and unit flag, and
  the row interchanges of LAPACK's ``ipiv`` (``pivots``) applied to B on the way in
  (``PERM_OUT=False``: ``X = U^-1 L^-1 P^T B``) or to X on the way out (``PERM_OUT=True``:
  ``X = P M2^-1 M1^-1 B`` for the transposed systems). The interchanges are turned into a
  row map without any reduction: each row tracks its position backwards through the swaps.

Large triangular systems (n > ``HOST_BLOCK_N``) are solved block by block from the host:
the kernel on each diagonal block, ``torch.matmul`` for the update of the rows below.
"""
from __future__ import annotations

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, num_sms, tl, triton, use_triton
from ..._core.errors import check_tensor
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.registry import register_op
from .tiles import (_dot, _emb_ld, _ld, _st, _tri_solve, _vec_off, check_rhs, flat3, kernel_strides,
                    real_view)

#: Dtypes of the kernels (complex through view_as_real) and of torch.linalg.
KERNEL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: n up to this: whole matrices in registers; above: row blocks (``BLOCKED_PLAN``).
SMALL_N = 32
#: Software-pipeline stages of the blocked path's chunk loop.
STAGES = 1
#: Above this n, solve_triangular goes block by block from the host (kernel + torch.matmul).
HOST_BLOCK_N = 1024
#: The blocked path's plan by dtype: (NB rows a block, and the size of its inverted diagonal
#: blocks; KC rows of the solved part a tl.dot; KB right-hand sides a program at most; warps).
#: KB halves (down to 16) while the grid would have fewer programs than the GPU has SMs.
BLOCKED_PLAN = {torch.float32: (64, 64, 64, 4), torch.complex64: (32, 32, 64, 4),
                torch.float64: (32, 32, 32, 4), torch.complex128: (16, 16, 32, 4)}
#: float32 products of the blocked path when a program takes at least TF32X3_MIN_KB right-hand
#: sides: "tf32x3" (three TF32 tensor-core passes, float32-level accuracy) or "ieee" (exact
#: float32 on the FMA units). H200, complex64 lu_solve of 64 x 256x256 with 256 right-hand
#: sides: 1439 -> 945 us (relative error 3.8e-7 -> 2.9e-7); one right-hand side (16-column
#: tiles) 310 -> 378 us, so those stay exact; the blocked LU factorisation's updates 2959 ->
#: 3492 us, so it stays exact too (bench/results/tuning/2026-11-30-lu_tf32x3-7a5b2d6.log).
TF32X3_PREC = "ieee" if torch.version.hip is not None else "tf32x3"  # (NVIDIA's tensor cores)
TF32X3_MIN_KB = 32
#: Real components of matrix plus right-hand side per program (register budget of one block).
TILE_ELEMS = 8192 if INTERPRET else 4096


@triton.jit
def _track(piv_ptr, poff, spc, pmask, pos, t0, t1, n):
    """Rows ``pos`` (BB, P) tracked backwards through the interchanges ``t <-> piv[t] - 1`` for
    t = t1-1 .. t0: afterwards ``pos[i]`` is the row that the interchanges applied in order
    bring to position i. Out-of-range pivots count as no interchange."""
    for s in range(t0, t1):
        t = t1 - 1 - (s - t0)
        p = tl.load(piv_ptr + poff + t * spc, mask=pmask, other=0) - 1
        p = tl.where((p >= 0) & (p < n), p, t)[:, None]
        pos = tl.where(pos == t, p, tl.where(pos == p, t, pos))
    return pos


@triton.jit
def _diag_inv_kernel(t_ptr, inv_ptr, total, nblk, n, stb, s_tr, s_tc,
                     BLOCK_B: tl.constexpr, NB: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
                     CONJ: tl.constexpr, LU: tl.constexpr, CPLX: tl.constexpr):
    """Inverses of the (NB, NB) diagonal blocks of M (and of the opposite triangle with the
    opposite unit flag, after them, if LU), BLOCK_B blocks per program, to ``inv`` as
    (pass, matrix, block, NB, NB), contiguous. Past n a block is padded with the identity."""
    idx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)  # (matrix, block) flattened
    valid = idx < total
    b3 = (idx // nblk).to(tl.int64)[:, None, None]
    i0 = ((idx % nblk) * NB)[:, None, None]
    r3 = tl.arange(0, NB)[None, :, None]
    c3 = tl.arange(0, NB)[None, None, :]
    mask = valid[:, None, None] & (i0 + r3 < n) & (i0 + c3 < n)
    tr, ti = _ld(t_ptr, b3 * stb + (i0 + r3) * s_tr + (i0 + c3) * s_tc, mask, CPLX)
    eye = (r3 == c3).to(tr.dtype) + tl.zeros([BLOCK_B, NB, NB], dtype=tr.dtype)
    tr = tl.where(mask, tr, eye)
    if not CPLX:
        ti = tr
    zero = tl.zeros([BLOCK_B, NB, NB], dtype=tr.dtype)
    C: tl.constexpr = 2 if CPLX else 1
    offs = (idx.to(tl.int64)[:, None, None] * NB * NB + r3 * NB + c3) * C
    xr, xi = _tri_solve(tr, ti, eye, zero, NB, LOWER, UNIT, CONJ, CPLX)
    _st(inv_ptr, offs, xr, xi, valid[:, None, None], CPLX)
    if LU:
        xr, xi = _tri_solve(tr, ti, eye, zero, NB, not LOWER, not UNIT, CONJ, CPLX)
        _st(inv_ptr + total * NB * NB * C, offs, xr, xi, valid[:, None, None], CPLX)


@triton.jit
def _sweep(t_ptr, s_tr, s_tc, inv, src, s_sr, s_sc, dst, s_dr, s_dc, perm, n, k, c0,
           SRC_PERM: tl.constexpr, DST_PERM: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
           CONJ: tl.constexpr, CPLX: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr,
           PREC: tl.constexpr):
    """One blocked substitution of one matrix: rows of ``src`` (through ``perm`` if SRC_PERM)
    -> rows of ``dst`` (through ``perm`` if DST_PERM), columns c0 .. c0+KB-1; ``inv``: the
    inverses of its diagonal blocks (``_diag_inv_kernel``), so that every step is a tl.dot.
    Block i of NB rows takes the rows solved before it in chunks of KC (one tl.dot each).
    Complex systems run as real ones of twice the size (:func:`.tiles._emb_ld`)."""
    C: tl.constexpr = 2 if CPLX else 1
    nblk = tl.cdiv(n, NB)
    r = tl.arange(0, NB * C)
    rp = r % C  # component of a row
    q = tl.arange(0, KC * C)
    qp = q % C  # component of a column of M / a row of X
    cc = c0 + tl.arange(0, KB)
    cmask = (cc < k)[None, :]
    for s in range(0, nblk):
        if LOWER:
            i0 = s * NB
        else:
            i0 = (nblk - 1 - s) * NB
        rows = i0 + r // C
        rmask = rows < n
        if SRC_PERM:
            srows = tl.load(perm + rows, mask=rmask, other=0)
        else:
            srows = rows
        xmask = rmask[:, None] & cmask
        acc = tl.load(src + _vec_off(srows, rp, cc, s_sr, s_sc), mask=xmask, other=0.0)
        if LOWER:  # the rows solved so far, in chunks of KC
            lo = 0
            hi = i0
        else:
            lo = i0 + NB
            hi = n
        for k0 in range(lo, hi, KC):
            qc = k0 + q // C  # column of M, row of X
            qmask = qc < hi
            a = _emb_ld(t_ptr, rows, rp, qc, qp, s_tr, s_tc, rmask[:, None] & qmask[None, :], CPLX, CONJ)
            if DST_PERM:
                drows = tl.load(perm + qc, mask=qmask, other=0)
            else:
                drows = qc
            x = tl.load(dst + _vec_off(drows, qp, cc, s_dr, s_dc), mask=qmask[:, None] & cmask, other=0.0)
            acc -= _dot(a, x, PREC)
        # the inverse blocks (NB, NB) contiguous, of the conjugated blocks already
        lr = (i0 // NB) * NB + r // C
        acc = _dot(_emb_ld(inv, lr, rp, r // C, rp, NB * C, C, r[:, None] >= 0, CPLX, False), acc, PREC)
        if DST_PERM:
            drows = tl.load(perm + rows, mask=rmask, other=0)
        else:
            drows = rows
        tl.store(dst + _vec_off(drows, rp, cc, s_dr, s_dc), acc.to(dst.dtype.element_ty), mask=xmask)
        tl.debug_barrier()  # X_i is read back by the next blocks


@triton.jit
def _trsm_kernel(t_ptr, b_ptr, w_ptr, x_ptr, piv_ptr, perm_ptr, inv_ptr, nbatch, n, k,
                 stb, s_tr, s_tc, sbb, sbr, sbc, swb, swr, swc, sxb, sxr, sxc, spb, spc,
                 BLOCK_B: tl.constexpr, NB: tl.constexpr, KC: tl.constexpr, KB: tl.constexpr, P: tl.constexpr,
                 LOWER: tl.constexpr, UNIT: tl.constexpr, CONJ: tl.constexpr, LU: tl.constexpr,
                 PERM_OUT: tl.constexpr, CPLX: tl.constexpr, BLOCKED: tl.constexpr, PREC: tl.constexpr = "ieee"):
    c0 = tl.program_id(1) * KB
    if not BLOCKED:
        bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        r = tl.arange(0, NB)
        b3 = bidx[:, None, None].to(tl.int64)
        r3 = r[None, :, None]
        c3 = r[None, None, :]
        k3 = (c0 + tl.arange(0, KB))[None, None, :]
        in_b = b3 < nbatch
        tmask = in_b & (r3 < n) & (c3 < n)
        tr, ti = _ld(t_ptr, b3 * stb + r3 * s_tr + c3 * s_tc, tmask, CPLX)
        tr = tl.where(tmask, tr, (r3 == c3).to(tr.dtype))  # identity padding
        if not CPLX:
            ti = tr
        xmask = in_b & (r3 < n) & (k3 < k)
        rows_in = r3
        rows_out = r3
        if LU:
            pos = tl.arange(0, NB)[None, :] + tl.zeros([BLOCK_B, NB], dtype=tl.int32)
            pos = _track(piv_ptr, bidx.to(tl.int64) * spb, spc, bidx < nbatch, pos, 0, n, n)
            if PERM_OUT:
                rows_out = pos[:, :, None]
            else:
                rows_in = pos[:, :, None]
        xr, xi = _ld(b_ptr, b3 * sbb + rows_in * sbr + k3 * sbc, xmask, CPLX)
        xr, xi = _tri_solve(tr, ti, xr, xi, n, LOWER, UNIT, CONJ, CPLX)
        if LU:
            xr, xi = _tri_solve(tr, ti, xr, xi, n, not LOWER, not UNIT, CONJ, CPLX)
        _st(x_ptr, b3 * sxb + rows_out * sxr + k3 * sxc, xr, xi, xmask, CPLX)
    else:
        b = tl.program_id(0).to(tl.int64)
        tb = t_ptr + b * stb
        C: tl.constexpr = 2 if CPLX else 1
        blk = tl.cdiv(n, NB) * NB * NB * C  # one matrix's inverse blocks
        inv1 = inv_ptr + b * blk
        inv2 = inv_ptr + (nbatch + b) * blk
        perm = perm_ptr + (b * tl.num_programs(1) + tl.program_id(1)) * P
        if LU:
            one = tl.arange(0, 1)
            pos = tl.arange(0, P)[None, :] + tl.zeros([1, P], dtype=tl.int32)
            pos = _track(piv_ptr, b * spb + one, spc, one < 1, pos, 0, n, n)
            tl.store(perm + tl.arange(0, P)[None, :], pos)
            tl.debug_barrier()
            if PERM_OUT:  # B -> W (M1), W -> X scattered (M2)
                _sweep(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, w_ptr + b * swb, swr, swc, perm, n, k,
                       c0, False, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC)
                _sweep(tb, s_tr, s_tc, inv2, w_ptr + b * swb, swr, swc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                       c0, False, True, not LOWER, not UNIT, CONJ, CPLX, NB, KC, KB, PREC)
            else:  # B gathered -> X (M1), X -> X (M2)
                _sweep(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                       c0, True, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC)
                _sweep(tb, s_tr, s_tc, inv2, x_ptr + b * sxb, sxr, sxc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                       c0, False, False, not LOWER, not UNIT, CONJ, CPLX, NB, KC, KB, PREC)
        else:
            _sweep(tb, s_tr, s_tc, inv1, b_ptr + b * sbb, sbr, sbc, x_ptr + b * sxb, sxr, sxc, perm, n, k,
                   c0, False, False, LOWER, UNIT, CONJ, CPLX, NB, KC, KB, PREC)


_TRSM = Launcher(_trsm_kernel)
_DIAG_INV = Launcher(_diag_inv_kernel)


# ---------------------------------------------------------------------------- launcher

def trsm(T3: torch.Tensor, B3: torch.Tensor, X3: torch.Tensor, *, lower: bool, unit: bool,
         conj: bool = False, piv: torch.Tensor = None, perm_out: bool = False) -> None:
    """X3 = M^-1 B3 for the (nb, n, n) matrices T3 (any strides: pass ``T.mT`` for a transpose),
    M the lower or upper triangle of T3 (conjugated if ``conj``). With ``piv`` (nb, n) int32,
    LU mode: X3 = M2^-1 M1^-1 P^T B3 (``perm_out=False``) or P M2^-1 M1^-1 B3 (``perm_out=True``),
    M1 = (lower, unit) as given, M2 the opposite triangle with the opposite unit flag.
    B3, X3 (nb, n, k); X3 may be B3 (in place) when piv is None."""
    nb, n, k = B3.shape
    if nb == 0 or n == 0 or k == 0:
        return
    cplx = T3.is_complex()
    comps = (2 if cplx else 1) * (2 if T3.dtype in (torch.float64, torch.complex128) else 1)
    lu = piv is not None
    blocked = n > SMALL_N
    kc = 0
    if blocked:
        nb_rows, kc, kb, warps = BLOCKED_PLAN[T3.dtype]
        block_b = 1
        while kb > 16 and (kb >= 2 * k or nb * cdiv(k, kb) < num_sms(T3.device)):
            kb //= 2
    else:
        warps = 4
        nb_rows = next_pow2(n)
        kb = min(next_pow2(k), 32)
        fit = max(1, TILE_ELEMS // (nb_rows * (nb_rows + kb) * comps))
        block_b = min(next_pow2(nb), 1 << (fit.bit_length() - 1))  # a power of two
    p = next_pow2(n)
    grid = (cdiv(nb, block_b), cdiv(k, kb))
    W3 = X3
    perm = real_view(X3)  # stand-in pointer where no row map is needed
    if blocked and lu:
        perm = torch.empty(grid[0] * grid[1] * p, dtype=torch.int32, device=X3.device)
        if perm_out:
            W3 = torch.empty(nb, n, k, dtype=X3.dtype, device=X3.device)
    pv = piv if lu else perm
    inv = perm
    conj = conj and cplx
    if blocked:  # the inverses of the diagonal blocks, all in parallel
        nblk = cdiv(n, nb_rows)
        total = nb * nblk
        inv = real_view(torch.empty((2 if lu else 1) * total * nb_rows * nb_rows, dtype=T3.dtype, device=T3.device))
        ib = max(1, min(next_pow2(total), TILE_ELEMS // (2 * nb_rows * nb_rows * comps)))
        _DIAG_INV[(cdiv(total, ib),)](
            real_view(T3), inv, total, nblk, n, *kernel_strides(T3),
            BLOCK_B=ib, NB=nb_rows, LOWER=lower, UNIT=unit, CONJ=conj, LU=lu, CPLX=cplx, num_warps=4)
    _TRSM[grid](
        real_view(T3), real_view(B3), real_view(W3), real_view(X3), pv, perm, inv, nb, n, k,
        *kernel_strides(T3), *kernel_strides(B3), *kernel_strides(W3), *kernel_strides(X3),
        *(pv.stride() if lu else (0, 0)),
        BLOCK_B=block_b, NB=nb_rows, KC=kc, KB=kb, P=p, LOWER=lower, UNIT=unit, CONJ=conj, LU=lu,
        PERM_OUT=perm_out, CPLX=cplx, BLOCKED=blocked, PREC=TF32X3_PREC if blocked and kb >= TF32X3_MIN_KB else "ieee",
        num_warps=warps, num_stages=STAGES)


def _host_blocked(T3, B3, X3, lower: bool, unit: bool) -> None:
    """Right-looking block substitution for large n: the kernel on each diagonal block
    (in place in X3), torch.matmul for the update of the remaining rows."""
    n = T3.shape[-1]
    X3.copy_(B3)
    hb = HOST_BLOCK_N // 2
    starts = list(range(0, n, hb))
    for i0 in (starts if lower else starts[::-1]):
        i1 = min(i0 + hb, n)
        Xi = X3[:, i0:i1]
        trsm(T3[:, i0:i1, i0:i1], Xi, Xi, lower=lower, unit=unit)
        rest = slice(i1, n) if lower else slice(0, i0)
        if (rest.stop - rest.start) > 0:
            X3[:, rest].sub_(torch.matmul(T3[:, rest, i0:i1], Xi))


# ---------------------------------------------------------------------------- reference

def reference_solve_triangular(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool = True,
                               unitriangular: bool = False) -> torch.Tensor:
    """PyTorch path: ``torch.linalg.solve_triangular`` on A's device."""
    return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


# ---------------------------------------------------------------------------- checks

def check_square(name: str, A, fname: str, dtypes=KERNEL_DTYPES) -> int:
    """A is a tensor of a supported dtype with shape (*, n, n); returns n."""
    check_tensor(name, A)
    if A.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: {fname} supports {names}, got {A.dtype}")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{name}: {fname} expects a batch of square matrices (*, n, n), got shape {tuple(A.shape)}")
    return A.shape[-1]


def rhs_shapes(A: torch.Tensor, B: torch.Tensor, left: bool, fname: str, aname: str = "A"):
    """(batch, k) of a matrix right-hand side B of (*, n, k) (left) or (*, k, n) (right),
    with messages naming B; A (*, n, n)."""
    check_rhs(A, B, left, fname, aname)
    n = A.shape[-1]
    if B.dim() < 2:
        raise ValueError(f"B: {fname} expects B of shape (*, n, k) with at least 2 dimensions, got {tuple(B.shape)}")
    rows, k = (B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2])
    if rows != n:
        side = "B.shape[-2]" if left else "B.shape[-1]"
        raise ValueError(f"B: {side} must equal n = {n} ({aname} has shape {tuple(A.shape)}, left={left}), "
                         f"got B of shape {tuple(B.shape)}")
    try:
        batch = tuple(torch.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    except RuntimeError:
        raise ValueError(f"B: batch dimensions {tuple(B.shape[:-2])} do not broadcast with "
                         f"{aname}'s {tuple(A.shape[:-2])}") from None
    return batch, k


def kernel_ok(*ts) -> bool:
    """The kernels serve these tensors: a kernel dtype, a Triton device, no autograd."""
    if ts[0].dtype not in KERNEL_DTYPES or not use_triton(ts[0]):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in ts))


# ---------------------------------------------------------------------------- op

def _st_fake(A, B, upper, left, unitriangular):
    batch, k = rhs_shapes(A, B, left, "solve_triangular")
    n = A.shape[-1]
    return A.new_empty((*batch, n, k) if left else (*batch, k, n))


@register_op("linalg_solve_triangular", fake=_st_fake)
def _solve_triangular_op(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool,
                         unitriangular: bool) -> torch.Tensor:
    if not kernel_ok(A, B):
        return reference_solve_triangular(A, B, upper, left, unitriangular)
    batch, k = rhs_shapes(A, B, left, "solve_triangular")
    n = A.shape[-1]
    X = alloc.empty(*batch, *((n, k) if left else (k, n)), dtype=A.dtype, device=A.device)
    T3 = flat3(A, batch, (n, n))
    if left:  # A X = B
        B3, X3, lower = flat3(B, batch, (n, k)), X.view(-1, n, k), not upper
    else:  # X A = B  <=>  A^T X^T = B^T: transposed views, the other triangle
        T3, B3, X3, lower = T3.mT, flat3(B, batch, (k, n)).mT, X.view(-1, k, n).mT, upper
    if n > HOST_BLOCK_N:
        _host_blocked(T3, B3, X3, lower, unitriangular)
    else:
        trsm(T3, B3, X3, lower=lower, unit=unitriangular)
    return X


def solve_triangular(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> torch.Tensor:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``) for triangular A, like
    ``torch.linalg.solve_triangular``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32, float64, complex64 or complex128, any strides. Only the
        upper (``upper=True``) or lower triangle is read.
    B : Tensor (*, n, k) (``(*, k, n)`` with ``left=False``) of A's dtype and device; batch
        dimensions broadcast with A's (a copy only where they cannot be collapsed).
    upper : A is upper (True) or lower (False) triangular (keyword, required as in torch).
    left : solve ``A X = B`` (True) or ``X A = B`` (False).
    unitriangular : take A's diagonal as all ones (it is not read).

    Returns
    -------
    X, contiguous, of the broadcast shape ``(*, n, k)`` (``(*, k, n)`` for left=False).
    A zero on the diagonal gives inf/NaN, as in torch (no error is raised, no sync).

    Paths: n <= 32, whole matrices in registers, many per program; n <= 1024, one matrix per
    program in blocks of 32 rows (16 complex), all tl.dot (diagonal blocks inverted up front,
    in parallel); larger n block by block
    from the host (the kernel on 512-row diagonal blocks, ``torch.matmul`` for the updates).
    Devices Triton does not serve and inputs that need gradients take torch.linalg.

    Raises
    ------
    TypeError for unsupported or mismatched dtypes; ValueError for non-square A, B whose
    rows (columns with left=False) do not match n, or batch dimensions that do not broadcast.

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> fastpath.linalg.solve_triangular(A, torch.tensor([[3.0], [4.0]]), upper=True)
    tensor([[1.],
            [1.]])
    """
    check_square("A", A, "solve_triangular")
    rhs_shapes(A, B, left, "solve_triangular")
    for name, v in (("upper", upper), ("unitriangular", unitriangular)):
        if not isinstance(v, bool):
            raise TypeError(f"{name}: expected a bool, got {type(v).__name__}")
    return _solve_triangular_op(A, B, upper, left, unitriangular)
