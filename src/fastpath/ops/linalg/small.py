"""Inverse and linear solve of batches of small matrices (n <= 16): ``inv_ex``, ``inv``,
``solve_ex``, ``solve``, with the semantics of ``torch.linalg``.

One kernel, ``_gj_kernel``: each program holds ``BLOCK_B`` matrices in registers as a
``[BLOCK_B, N_PAD, N_PAD]`` tile together with their right-hand sides
(``[BLOCK_B, N_PAD, K_PAD]``; the identity for the inverse, ``B`` for a solve) and runs
Gauss-Jordan elimination with partial pivoting on all of them at once: for each column
``j`` the pivot row is the argmax of ``|A[i, j]|`` over ``i >= j``; rows ``j`` and pivot are
swapped with masked selects, the pivot row is scaled and column ``j`` eliminated from every
other row. A pivot that is exactly zero records ``info = j + 1`` (the first one, 1-based,
as LAPACK's ``getrf`` does) and is replaced by one so that elimination carries on without
dividing by zero; the result of such a matrix is written as NaN (torch gives NaN/inf or
arbitrary numbers there), and ``info`` says why.
Padding rows/columns (``n < N_PAD``) and padding matrices (past the batch) are loaded as
the identity, so they never pivot and never divide by zero.

Arithmetic is in the input dtype (float32 or float64). Larger ``n`` or ``k``, complex
dtypes, inputs that need gradients, and devices Triton does not serve take the reference
path, ``torch.linalg`` itself.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, triton, use_triton
from ..._core.errors import check_tensor
from ..._core.launch import Launcher, cdiv, next_pow2
from ..._core.registry import register_op
from .tiles import LINALG_DTYPES, check_rhs, flat3, raise_singular

#: Largest n (and number of right-hand sides k) the kernel serves.
MAX_N = 16
#: Dtypes the kernel computes in; torch.linalg also takes complex64/complex128 (reference path).
KERNEL_DTYPES = (torch.float32, torch.float64)
#: Elements of A plus right-hand side per program (register budget of one block) and warps per
#: program, by padded n: measured on the H200 (scripts/tune_linalg.py, docs/perf-notes.md).
#: 1M 4x4 inverses: (2048, 4) 105 us, the old (4096, 4) 147 us; 100K 16x16: (4096, 1) 362 us,
#: (4096, 4) 2059 us: at 16x16 every warp added costs more cross-warp reductions per pivot.
TUNED = {2: (2048, 4), 4: (2048, 4)}
TUNED_LARGE = (4096, 1)
#: Overrides of the table (scripts/tune_linalg.py sets them); None: the table.
TILE_ELEMS = 8192 if INTERPRET else None
NUM_WARPS = 4 if INTERPRET else None


@triton.jit
def _div(x, y):
    """``x / y`` correctly rounded (float64 division already is)."""
    if x.dtype == tl.float32:
        return tl.div_rn(x, y)
    return x / y


@triton.jit
def _gj_kernel(a_ptr, b_ptr, x_ptr, info_ptr, nbatch, n, k,
               sab, sar, sac, sbb, sbr, sbc, sxb, sxr, sxc,
               BLOCK_B: tl.constexpr, N_PAD: tl.constexpr, K_PAD: tl.constexpr,
               INV: tl.constexpr):
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rows = tl.arange(0, N_PAD)
    cols = tl.arange(0, N_PAD)
    rcols = tl.arange(0, K_PAD)
    b3 = bidx[:, None, None]
    r3 = rows[None, :, None]
    c3 = cols[None, None, :]
    rc3 = rcols[None, None, :]
    b64 = b3.to(tl.int64)
    in_b = b3 < nbatch
    eye = (r3 == c3)
    a_mask = in_b & (r3 < n) & (c3 < n)
    a = tl.load(a_ptr + b64 * sab + r3 * sar + c3 * sac, mask=a_mask, other=0.0)
    zero = tl.zeros([BLOCK_B, N_PAD, N_PAD], dtype=a.dtype)
    a = tl.where(a_mask, a, tl.where(eye, zero + 1.0, zero))  # identity in the padding
    r_mask = in_b & (r3 < n) & (rc3 < k)
    if INV:
        rz = tl.zeros([BLOCK_B, N_PAD, K_PAD], dtype=a.dtype)
        r = tl.where(r3 == rc3, rz + 1.0, rz)
    else:
        r = tl.load(b_ptr + b64 * sbb + r3 * sbr + rc3 * sbc, mask=r_mask, other=0.0).to(a.dtype)
    info = tl.zeros([BLOCK_B], dtype=tl.int32)
    rows2 = rows[None, :]
    for j in range(0, n):
        # Column j of every matrix, and its pivot row among rows j..n-1.
        col = tl.sum(tl.where(c3 == j, a, 0.0), axis=2)  # [BLOCK_B, N_PAD]
        cand = tl.where((rows2 >= j) & (rows2 < n), tl.abs(col), -1.0)
        piv = tl.argmax(cand, axis=1)  # [BLOCK_B]
        is_p = rows2 == piv[:, None]
        pval = tl.sum(tl.where(is_p, col, 0.0), axis=1)  # [BLOCK_B], signed pivot
        singular = pval == 0.0
        info = tl.where(singular & (info == 0), j + 1, info)
        pval = tl.where(singular, 1.0, pval)
        # Swap rows j and piv (a no-op where piv == j).
        is_p3 = is_p[:, :, None]
        is_j3 = r3 == j
        a_j = tl.sum(tl.where(is_j3, a, 0.0), axis=1)  # [BLOCK_B, N_PAD]
        a_p = tl.sum(tl.where(is_p3, a, 0.0), axis=1)
        r_j = tl.sum(tl.where(is_j3, r, 0.0), axis=1)  # [BLOCK_B, K_PAD]
        r_p = tl.sum(tl.where(is_p3, r, 0.0), axis=1)
        # Column j after the swap: entry piv takes the old entry j, entry j the pivot.
        col_j = tl.sum(tl.where(rows2 == j, col, 0.0), axis=1)
        col = tl.where(is_p, col_j[:, None], col)
        col = tl.where(rows2 == j, pval[:, None], col)
        # The scaled pivot row, then eliminate column j from every other row.
        # Correctly rounded division of each element. On 1M 4x4 inverses (bench linalg, H200)
        # `row * (1 / p)` gave 3x torch's error against float64 (1.7e-3 vs 5.5e-4), with the
        # approximate `1 / p` and with a correctly rounded one alike; dividing each element
        # gives 1.6e-4 (3.4x more accurate than torch) at 1.5x the time.
        a_row = _div(a_p, pval[:, None])
        r_row = _div(r_p, pval[:, None])
        a = tl.where(is_p3, a_j[:, None, :], a)
        r = tl.where(is_p3, r_j[:, None, :], r)
        f = tl.where(rows2 == j, 0.0, col)[:, :, None]  # multipliers, 0 on the pivot row
        a = a - f * a_row[:, None, :]
        r = r - f * r_row[:, None, :]
        a = tl.where(is_j3, a_row[:, None, :], a)
        r = tl.where(is_j3, r_row[:, None, :], r)
    r = tl.where(info[:, None, None] != 0, float("nan"), r)  # a singular matrix gives NaN, never a number
    tl.store(x_ptr + b64 * sxb + r3 * sxr + rc3 * sxc, r.to(x_ptr.dtype.element_ty), mask=r_mask)
    tl.store(info_ptr + bidx, info, mask=bidx < nbatch)


_GJ = Launcher(_gj_kernel)


# ---------------------------------------------------------------------------- launcher

def _launch(A3: torch.Tensor, B3, X3: torch.Tensor, info: torch.Tensor, n: int, k: int) -> None:
    """A3 (nb, n, n), B3 (nb, n, k) or None for the inverse, X3 (nb, n, k) output views."""
    nb = A3.shape[0]
    if nb == 0:
        return
    n_pad, k_pad = next_pow2(n), next_pow2(k)
    per = n_pad * (n_pad + k_pad) * (2 if A3.dtype == torch.float64 else 1)
    tile, warps = TUNED.get(n_pad, TUNED_LARGE)
    tile, warps = TILE_ELEMS or tile, NUM_WARPS or warps
    cap = max(1, tile // per)
    block_b = min(next_pow2(nb), 1 << (cap.bit_length() - 1))  # powers of two (tl.arange)
    inv = B3 is None
    B3 = X3 if inv else B3
    _GJ[(cdiv(nb, block_b),)](
        A3, B3, X3, info, nb, n, k, *A3.stride(), *B3.stride(), *X3.stride(),
        BLOCK_B=block_b, N_PAD=n_pad, K_PAD=k_pad, INV=inv, num_warps=warps)


# ---------------------------------------------------------------------------- reference

def reference_inv_ex(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``torch.linalg.inv_ex`` on A's device."""
    return tuple(torch.linalg.inv_ex(A))


def reference_solve_ex(A: torch.Tensor, B: torch.Tensor, left: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``torch.linalg.solve_ex`` on A's device."""
    return tuple(torch.linalg.solve_ex(A, B, left=left))


# ---------------------------------------------------------------------------- shapes and checks

def _check_A(A, fname: str) -> int:
    check_tensor("A", A)
    if A.dtype not in LINALG_DTYPES:
        raise TypeError(f"A: {fname} supports float32, float64, complex64, complex128, got {A.dtype}")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A: {fname} expects a batch of square matrices (*, n, n), got shape {tuple(A.shape)}")
    return A.shape[-1]


def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    """torch's rule: B is a (batch of) vector(s) if it is 1-D or has exactly A's shape minus the last dim."""
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_shapes(A: torch.Tensor, B: torch.Tensor, left: bool):
    """(batch, n, k, vector) of the system, after torch.linalg.solve's checks (messages name B)."""
    n = A.shape[-1]
    vector = _is_vector_rhs(A, B)
    if vector and not left:
        raise ValueError(f"B: a vector right-hand side (shape {tuple(B.shape)}) needs left=True; "
                         "for left=False pass B of shape (*, k, n), as torch.linalg.solve does")
    if vector:
        rows, k, bbatch = B.shape[-1], 1, tuple(B.shape[:-1])
    else:
        if B.dim() < 2:
            raise ValueError(f"B: expected shape (*, n) or (*, n, k), got {tuple(B.shape)}")
        rows, k = (B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2])
        bbatch = tuple(B.shape[:-2])
    if rows != n:
        side = "B.shape[-2]" if left and not vector else "B.shape[-1]"
        raise ValueError(f"B: {side} must equal n = {n} (A has shape {tuple(A.shape)}, left={left}), "
                         f"got B of shape {tuple(B.shape)}")
    try:
        batch = tuple(torch.broadcast_shapes(tuple(A.shape[:-2]), bbatch))
    except RuntimeError:
        raise ValueError(f"B: batch dimensions {bbatch} do not broadcast with A's {tuple(A.shape[:-2])}") from None
    return batch, n, k, vector


def _out_shape(batch, n, k, vector, left):
    if vector:
        return (*batch, n)
    return (*batch, n, k) if left else (*batch, k, n)


def _kernel_ok(*ts, n: int, k: int = 1) -> bool:
    if n > MAX_N or k > MAX_N or ts[0].dtype not in KERNEL_DTYPES or not use_triton(ts[0]):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in ts))


# ---------------------------------------------------------------------------- ops

def _inv_fake(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(A, memory_format=torch.contiguous_format),
            A.new_empty(A.shape[:-2], dtype=torch.int32))


@register_op("linalg_inv_ex", fake=_inv_fake)
def _inv_ex_op(A: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not _kernel_ok(A, n=n):
        return reference_inv_ex(A)
    batch = tuple(A.shape[:-2])
    X = alloc.empty(*batch, n, n, dtype=A.dtype, device=A.device)
    info = alloc.empty(batch, dtype=torch.int32, device=A.device)
    _launch(flat3(A, batch, (n, n)), None, X.view(-1, n, n), info.view(-1), n, n)
    return X, info


def _solve_fake(A: torch.Tensor, B: torch.Tensor, left: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    batch, n, k, vector = _solve_shapes(A, B, left)
    return (A.new_empty(_out_shape(batch, n, k, vector, left)), A.new_empty(A.shape[:-2], dtype=torch.int32))


@register_op("linalg_solve_ex", fake=_solve_fake)
def _solve_ex_op(A: torch.Tensor, B: torch.Tensor, left: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    batch, n, k, vector = _solve_shapes(A, B, left)
    if not _kernel_ok(A, B, n=n, k=k):
        return reference_solve_ex(A, B, left)
    X = alloc.empty(_out_shape(batch, n, k, vector, left), dtype=A.dtype, device=A.device)
    info = alloc.empty(batch, dtype=torch.int32, device=A.device)
    Bm = B.unsqueeze(-1) if vector else B
    Xm = X.unsqueeze(-1) if vector else X
    if left:  # A X = B
        A3, B3, X3 = flat3(A, batch, (n, n)), flat3(Bm, batch, (n, k)), Xm.view(-1, n, k)
    else:  # X A = B  <=>  A^T X^T = B^T: transposed views, no copies
        A3 = flat3(A, batch, (n, n)).mT
        B3 = flat3(Bm, batch, (k, n)).mT
        X3 = Xm.view(-1, k, n).mT
    _launch(A3, B3, X3, info.view(-1), n, k)
    abatch = tuple(A.shape[:-2])
    if abatch != batch:  # torch's info has A's batch shape: every copy of a broadcast A has the same
        lead = len(batch) - len(abatch)
        idx = (0,) * lead + tuple(slice(0, 1) if a == 1 else slice(None) for a in abatch)
        info = info[idx].contiguous()
    return X, info


# ---------------------------------------------------------------------------- public API

class InvEx(NamedTuple):
    inverse: torch.Tensor
    info: torch.Tensor


class SolveEx(NamedTuple):
    result: torch.Tensor
    info: torch.Tensor


def _raise_singular(info: torch.Tensor, fname: str, what: str) -> None:
    raise_singular(info, fname, f"The diagonal element {{j}} is zero, the {what} could not be completed "
                                "because the input matrix is singular.")


def inv_ex(A: torch.Tensor, *, check_errors: bool = False) -> InvEx:
    """Inverse of a batch of square matrices with an error code, like ``torch.linalg.inv_ex``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32 or float64, any strides (batch dimensions that cannot be
        collapsed into one stride are copied once). n <= 16 runs the Triton kernel
        (Gauss-Jordan with partial pivoting, in A's dtype); larger n, complex64/complex128
        and inputs that need gradients take ``torch.linalg.inv_ex``.
    check_errors : raise ``torch.linalg.LinAlgError`` if a matrix is singular. This reads
        ``info`` on the host (a sync); with the default False the call never syncs and is
        capturable in a CUDA graph.

    Returns
    -------
    (inverse, info): ``inverse`` (*, n, n) contiguous, of A's dtype; ``info`` int32 of shape
    (*): 0 where the inverse was computed, ``i`` (1-based) where the i-th pivot of the LU
    factorisation with partial pivoting is exactly zero; the inverse of such a matrix is all
    NaN on the kernel path (NaN/inf or arbitrary on torch's path): check ``info``.

    Raises
    ------
    TypeError if A is not a float32/float64/complex tensor; ValueError if A is not (*, n, n).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.inv_ex(torch.tensor([[0.0, 2.0], [4.0, 0.0]]))
    InvEx(inverse=tensor([[0.0000, 0.2500],
            [0.5000, 0.0000]]), info=tensor(0, dtype=torch.int32))
    """
    _check_A(A, "inv_ex")
    X, info = _inv_ex_op(A)
    if check_errors:
        _raise_singular(info, "linalg.inv_ex", "inversion")
    return InvEx(X, info)


def inv(A: torch.Tensor) -> torch.Tensor:
    """Inverse of a batch of square matrices, like ``torch.linalg.inv``.

    Same arguments, dtypes and paths as :func:`inv_ex`. Raises
    ``torch.linalg.LinAlgError`` for a singular matrix, which needs ``info`` on the host:
    every call syncs once (use :func:`inv_ex` where that must not happen).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    _check_A(A, "inv")
    X, info = _inv_ex_op(A)
    _raise_singular(info, "linalg.inv", "inversion")
    return X


def _check_solve(A, B, left, fname):
    _check_A(A, fname)
    check_rhs(A, B, left, fname)
    _solve_shapes(A, B, left)


def solve_ex(A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False) -> SolveEx:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``) with an error code, like
    ``torch.linalg.solve_ex``.

    Parameters
    ----------
    A : Tensor (*, n, n), float32 or float64; n <= 16 runs the Triton kernel (Gauss-Jordan
        with partial pivoting on [A | B]); larger n, complex dtypes and inputs that need
        gradients take ``torch.linalg.solve_ex``.
    B : Tensor of A's dtype and device: a batch of vectors (*, n) when B is 1-D or its shape
        is exactly ``A.shape[:-1]`` (torch's rule), else a batch of matrices (*, n, k)
        (``(*, k, n)`` when ``left=False``); k <= 16 for the kernel. Batch dimensions
        broadcast as in torch; broadcast batches that cannot be collapsed into one stride
        are copied once.
    left : solve ``A X = B`` (True) or ``X A = B`` (False; a vector B raises then, as in torch).
    check_errors : raise ``torch.linalg.LinAlgError`` for a singular A (a host sync); with the
        default False the call never syncs.

    Returns
    -------
    (result, info): ``result`` of B's broadcast shape, A's dtype; ``info`` int32 of A's
    batch shape ``A.shape[:-2]`` (as torch), 0 or the 1-based index of the first exactly-zero pivot (the
    result of such a system is NaN on the kernel path).

    Raises
    ------
    TypeError for unsupported or mismatched dtypes; ValueError for non-square A, B whose
    rows do not match n, or batch dimensions that do not broadcast.

    Example
    -------
    >>> import torch, fastpath
    >>> A = torch.tensor([[0.0, 1.0], [2.0, 0.0]]); B = torch.tensor([3.0, 4.0])
    >>> fastpath.linalg.solve_ex(A, B).result
    tensor([2., 3.])
    """
    _check_solve(A, B, left, "solve_ex")
    X, info = _solve_ex_op(A, B, left)
    if check_errors:
        _raise_singular(info, "linalg.solve_ex", "solve")
    return SolveEx(X, info)


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True) -> torch.Tensor:
    """Solve ``A X = B`` (or ``X A = B``), like ``torch.linalg.solve``.

    Same arguments, dtypes and paths as :func:`solve_ex`. Raises
    ``torch.linalg.LinAlgError`` for a singular A, which reads ``info`` on the host: every
    call syncs once (use :func:`solve_ex` where that must not happen).

    Example
    -------
    >>> import torch, fastpath
    >>> fastpath.linalg.solve(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.tensor([2.0, 2.0]))
    tensor([1.0000, 0.5000])
    """
    _check_solve(A, B, left, "solve")
    X, info = _solve_ex_op(A, B, left)
    _raise_singular(info, "linalg.solve", "solve")
    return X
