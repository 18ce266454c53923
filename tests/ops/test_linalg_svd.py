"""fastpath.ops.linalg (svd): svd, svdvals and pinv against torch.linalg in float64 on the CPU.
Singular vectors are judged by reconstruction (U S Vh = A) and orthonormality, singular values
one by one, relative to themselves where the input makes them well determined."""
import importlib

import pytest
import torch

from tests.conftest import noncontig
from tests.tolerances import REL_TOL, rel_error

# the module (fastpath.ops.linalg.svd is the function the package re-exports)
S = importlib.import_module("fastpath.ops.linalg.svd")

EPS = {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53}
DTYPES = [torch.float32, torch.float64]
#: Larger sizes only where the kernels run compiled (the interpreter is slow on Jacobi sweeps).
BIG = torch.cuda.is_available()


def _orth_error(Q):
    """max |Q^T Q - I| in float64 (columns of Q)."""
    Q = Q.detach().double().cpu()
    return (Q.mT @ Q - torch.eye(Q.shape[-1], dtype=torch.float64)).abs().max().item()


def _check_svd(A, U, Sv, Vh, full, tol_s=None):
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    assert U.shape == (*batch, m, m if full else k) and Vh.shape == (*batch, n if full else k, n)
    assert Sv.shape == (*batch, k) and Sv.dtype == A.dtype and U.dtype == A.dtype
    eps = EPS[A.dtype]
    assert _orth_error(U) <= 20 * max(m, n) * eps, "U is not orthonormal"
    assert _orth_error(Vh.mT) <= 20 * max(m, n) * eps, "Vh is not orthonormal"
    Sd = Sv.double().cpu()
    assert (Sd >= 0).all() and (Sd[..., :-1] >= Sd[..., 1:]).all(), "singular values not sorted descending"
    rec = (U[..., :k].double().cpu() * Sd[..., None, :]) @ Vh[..., :k, :].double().cpu()
    assert rel_error(rec, A) <= max(REL_TOL[A.dtype], 20 * max(m, n) * eps)
    ref = torch.linalg.svdvals(A.double().cpu())
    scale = ref[..., :1].clamp_min(1e-300)
    assert ((Sd - ref).abs() / scale).max().item() <= (tol_s or 20 * max(m, n) * eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,batch,full", [(1, 1, (3,), True), (4, 4, (2,), False), (7, 5, (), True),
                                            (5, 7, (2,), True), (6, 3, (2,), False), (3, 8, (), False),
                                            (8, 8, (2,), True),  # float32: the most the lanes kernel takes
                                            (16, 5, (), False)])  # tile kernel: float32 just past the lanes' limit
def test_svd(m, n, batch, full, dtype, device):
    A = torch.randn(*batch, m, n, dtype=torch.float64).to(dtype=dtype, device=device)
    U, Sv, Vh = S.svd(A, full_matrices=full)
    _check_svd(A, U, Sv, Vh, full)
    # the same sweeps without the vectors: equal up to the rounding of a compiler's fused ops
    eps = torch.finfo(Sv.dtype).eps
    assert ((S.svdvals(A) - Sv).abs() <= 4 * eps * Sv[..., :1]).all()


@pytest.mark.skipif(not BIG, reason="32 x 32 Jacobi sweeps take minutes in Triton's interpreter")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,batch", [(32, 32, (1000,)), (32, 13, (67,)), (16, 16, (10000,))])
def test_svd_large_batches(m, n, batch, dtype, device):
    A = torch.randn(*batch, m, n, dtype=torch.float64).to(dtype=dtype, device=device)
    for full in (True, False):
        _check_svd(A, *S.svd(A, full_matrices=full), full)


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_svd_extreme_scales(scale, device):
    """float32 inputs whose squares under/overflow: singular values keep their relative accuracy."""
    B = torch.randn(2, 6, 4, dtype=torch.float64)
    A = (B * scale).float().to(device)
    U, Sv, Vh = S.svd(A)
    assert torch.isfinite(U).all() and torch.isfinite(Vh).all()
    ref = torch.linalg.svdvals(A.double().cpu())
    cond = torch.linalg.cond(B).max().item()
    assert ((Sv.double().cpu() - ref).abs() / ref).max().item() <= 30 * 6 * EPS[torch.float32] * cond
    assert _orth_error(U) < 1e-5 and _orth_error(Vh.mT) < 1e-5
    rec = (U[..., :4].double().cpu() * Sv.double().cpu()[..., None, :]) @ Vh.double().cpu()
    assert rel_error(rec, A) < 1e-5


@pytest.mark.parametrize("dtype,spread", [(torch.float32, 6), (torch.float64, 14)])
def test_svd_tiny_singular_values(dtype, spread, device):
    """A = B D with well-conditioned B and column scales down to 10^-spread: each singular
    value to a few eps * cond(B) of itself (one-sided Jacobi's relative accuracy)."""
    B = torch.randn(3, 7, 5, dtype=torch.float64)
    A = (B * torch.logspace(0, -spread, 5, dtype=torch.float64)).to(dtype=dtype, device=device)
    Sv = S.svdvals(A)
    ref = torch.linalg.svdvals(A.double().cpu())
    cond = torch.linalg.cond(B).max().item()
    assert ((Sv.double().cpu() - ref).abs() / ref).max().item() <= 30 * 7 * EPS[dtype] * cond


def test_svd_rank_deficient(device):
    """U stays orthonormal when singular values vanish (completed null-space columns)."""
    A = torch.randn(4, 8, 2, dtype=torch.float64) @ torch.randn(4, 2, 6, dtype=torch.float64)  # rank 2
    A[1] = 0  # rank 0
    A[2, :, 1] = 0
    A[2, 3:] = 0  # rank <= 3
    A[3, :, :4] = 0  # rank 2, zero columns
    A = A.float().to(device)
    for full in (True, False):
        U, Sv, Vh = S.svd(A, full_matrices=full)
        _check_svd(A, U, Sv, Vh, full, tol_s=20 * 8 * EPS[torch.float32])
    assert (Sv[1] == 0).all()


def test_svd_noncontiguous(device):
    A = torch.randn(3, 2, 6, 5, dtype=torch.float64).to(device)
    for view in (noncontig(A), A.mT, A.permute(1, 0, 2, 3)):
        _check_svd(view, *S.svd(view, full_matrices=False), False)


def test_fused_reductions(device, monkeypatch):
    """The multi-operand tl.reduce the GPU build uses (the interpreter takes separate sums)."""
    from triton import language as tl

    from fastpath.ops.linalg import tiles
    monkeypatch.setattr(tiles, "FUSED_REDUCE", tl.constexpr(True))
    A = torch.randn(2, 6, 4, dtype=torch.float64).float().to(device)
    _check_svd(A, *S.svd(A), True)


# ---------------------------------------------------------------------------- pinv

def _penrose(A, P, tol):
    A, P = A.double().cpu(), P.double().cpu()
    assert rel_error(A @ P @ A, A) <= tol and rel_error(P @ A @ P, P) <= tol


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,batch", [(1, 1, (2,)), (5, 3, (2,)), (3, 6, ()), (8, 8, (3,))])
def test_pinv(m, n, batch, dtype, device):
    A = torch.randn(*batch, m, n, dtype=torch.float64).to(dtype=dtype, device=device)
    P = S.pinv(A)
    assert P.shape == (*batch, n, m) and P.dtype == dtype
    ref = torch.linalg.pinv(A.double().cpu())
    cond = torch.linalg.cond(A.double().cpu()).max().item()
    assert rel_error(P, ref) <= max(REL_TOL[dtype], 20 * max(m, n) * EPS[dtype] * cond)
    _penrose(A, P, 20 * max(m, n) * EPS[dtype] * cond)


def test_pinv_tolerances(device):
    """Singular values (1, 0.5, 1e-3, 1e-9): the cut lands where torch's does, per atol/rtol."""
    U, _ = torch.linalg.qr(torch.randn(3, 6, 4, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(3, 4, 4, dtype=torch.float64))
    A = (U * torch.tensor([1.0, 0.5, 1e-3, 1e-9], dtype=torch.float64)) @ V.mT
    A64 = A.to(device)
    for kw in [{}, {"atol": 1e-6}, {"rtol": 1e-2}, {"atol": 1e-12, "rtol": 0.0},
               {"atol": torch.tensor([1e-2, 1e-6, 0.0]), "rtol": torch.tensor(0.0)}, {"rtol": torch.tensor(2e-3)}]:
        kw_dev = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        P = S.pinv(A64, **kw_dev)
        ref = torch.linalg.pinv(A, **kw)
        assert rel_error(P, ref) <= 1e-6, kw  # cond up to 1e9 after the cut in float64
    P32 = S.pinv(A.float().to(device))  # default rtol = eps32 * 6 cuts 1e-9 and keeps 1e-3
    ref = torch.linalg.pinv(A.float()).double()
    assert rel_error(P32, ref) <= 1e-4
    # float32 with float tolerances: two kernel scalars, no tolerance tensors; the same cut as
    # the tensor path and as torch in float64
    A32 = A.float()
    for kw in [{"atol": 1e-6}, {"rtol": 1e-2}, {"atol": 1e-4, "rtol": 0.0}, {"atol": 0.0}]:
        P = S.pinv(A32.to(device), **kw)
        ref_kw = kw if "rtol" in kw or kw["atol"] > 0 else {**kw, "rtol": EPS[torch.float32] * 2 * 6}
        ref = torch.linalg.pinv(A32.double(), **ref_kw)  # float32's default rtol in float64
        assert rel_error(P, ref) <= 2e-3, kw  # cond up to 1e3 after the cut, in float32
        P_t = S.pinv(A32.to(device), **{k: torch.tensor(v, device=device) for k, v in kw.items()})
        assert rel_error(P, P_t) <= 1e-6, kw


def test_pinv_rank_deficient_and_scaled(device):
    A = torch.randn(3, 6, 2, dtype=torch.float64) @ torch.randn(3, 2, 5, dtype=torch.float64)
    A[1] = 0
    P = S.pinv(A.float().to(device))
    ref = torch.linalg.pinv(A)
    assert rel_error(P, ref) <= 1e-5 and (P[1] == 0).all()
    B = torch.randn(2, 5, 4, dtype=torch.float64)
    for scale in (1e-30, 1e30):
        A = (B * scale).float().to(device)
        P = S.pinv(A)
        assert torch.isfinite(P).all()
        ref = torch.linalg.pinv(A.double().cpu())
        assert rel_error(P, ref) <= 30 * 5 * EPS[torch.float32] * torch.linalg.cond(B).max().item()


# ---------------------------------------------------------------------------- paths, errors, ops

def test_reference_paths(device):
    """Complex dtypes, matrices over 32 and inputs that need gradients take torch.linalg."""
    C = torch.complex(torch.randn(2, 4, 3), torch.randn(2, 4, 3)).to(device)
    torch.testing.assert_close(S.svdvals(C), torch.linalg.svdvals(C))
    U, Sv, Vh = S.svd(C, full_matrices=False)
    torch.testing.assert_close((U * Sv.to(C.dtype)[..., None, :]) @ Vh, C, atol=1e-5, rtol=1e-5)
    A = torch.randn(40, 33, dtype=torch.float64, device=device)
    torch.testing.assert_close(S.pinv(A), torch.linalg.pinv(A))
    A = torch.randn(2, 3, 3, dtype=torch.float64, device=device).requires_grad_()
    S.svdvals(A).sum().backward()
    assert A.grad is not None
    H = torch.randn(4, 4, dtype=torch.float64, device=device)
    torch.testing.assert_close(S.pinv(H, hermitian=True), torch.linalg.pinv(H, hermitian=True))
    E = torch.randn(2, 0, 3, device=device)
    assert S.pinv(E).shape == (2, 3, 0) and S.svdvals(E).shape == (2, 0)


def test_errors(device):
    A = torch.randn(3, 3, device=device)
    with pytest.raises(TypeError, match="A: .*float16"):
        S.svd(A.half())
    with pytest.raises(TypeError, match="A: .*int64"):
        S.svdvals(torch.ones(3, 3, dtype=torch.int64, device=device))
    with pytest.raises(TypeError, match="A: expected a torch.Tensor"):
        S.pinv([[1.0]])
    with pytest.raises(ValueError, match="A: "):
        S.svd(torch.randn(3, device=device))
    with pytest.raises(TypeError, match="full_matrices: expected a bool"):
        S.svd(A, full_matrices="yes")
    with pytest.raises(TypeError, match="atol: expected"):
        S.pinv(A, atol="big")
    with pytest.raises(ValueError, match="atol/rtol: .*broadcast"):
        S.pinv(torch.randn(2, 3, 3, device=device), atol=torch.ones(5, device=device))


def test_registered_ops(device):
    A = torch.randn(2, 5, 3, dtype=torch.float64, device=device)
    utils = ("test_schema", "test_faketensor")
    torch.library.opcheck(S._svd_op.op, (A, True), test_utils=utils)
    torch.library.opcheck(S._svdvals_op.op, (A,), test_utils=utils)
    torch.library.opcheck(S._pinv_op.op, (A, None, None, None, None), test_utils=utils)
    torch.library.opcheck(S._pinv_op.op, (A, None, None, 1e-3, None), test_utils=utils)


# ---------------------------------------------------------------------------- kernel paths

@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_kernel_small(dtype, device, monkeypatch):
    """The tile kernel, which the small shapes above leave for the one-matrix-a-thread kernel
    of ``svd_lanes``, on the checks above: the shapes up to 8 columns that the lanes kernel
    takes in float64 too, split between the dtypes (7 x 5, 5 x 7 and 8 x 8 reach the tile
    kernel in test_svd's and test_pinv's float64 cases), extreme scales, tiny and vanishing
    singular values, pinv's cut."""
    lanes = importlib.import_module("fastpath.ops.linalg.svd_lanes")
    assert not any(lanes.lanes_fit(r, k, True) for r, k in [(7, 5), (8, 8)])
    monkeypatch.setattr(lanes, "LANE_WORDS", 0)
    svd_shapes, pinv_shapes = {torch.float32: ([(2, 2, (3,), True), (6, 3, (2,), False)], [(5, 3, (2,))]),
                               torch.float64: ([(4, 4, (2,), False), (3, 8, (), False)], [(3, 6, ())])}[dtype]
    for m, n, batch, full in svd_shapes:
        test_svd(m, n, batch, full, dtype, device)
    for m, n, batch in pinv_shapes:
        test_pinv(m, n, batch, dtype, device)
    if dtype == torch.float32:
        for scale in (1e-30, 1e30):
            test_svd_extreme_scales(scale, device)
        test_svd_tiny_singular_values(dtype, 6, device)
        test_svd_rank_deficient(device)
        test_pinv_rank_deficient_and_scaled(device)
    else:
        test_svd_tiny_singular_values(dtype, 14, device)
        test_pinv_tolerances(device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(3, 3), (3, 7), (24, 9)])  # lanes kernel (A and A^T); tile kernel
def test_nonfinite_matrices_give_nan(m, n, dtype, device):
    """A matrix holding a NaN or an infinity gets all-NaN U, S, Vh, svdvals and pinv (torch
    raises: no host sync here); its batch neighbours are computed as usual. (The tile kernel
    once returned finite values, completed bases, for such matrices.)"""
    A = torch.randn(3, m, n, dtype=dtype)
    A[1, m // 2, n // 3] = float("nan")
    A[2, m - 1, n - 1] = float("inf")
    A = A.to(device)
    U, Sv, Vh = S.svd(A)
    outs = (U, Sv, Vh, S.svdvals(A), S.pinv(A))
    for t in outs:
        assert t[1:].isnan().all() and not t[0].isnan().any()
    _check_svd(A[:1], U[:1], Sv[:1], Vh[:1], True)
