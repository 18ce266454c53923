"""fastpath.ops.linalg (small): inv_ex / inv / solve_ex / solve against torch.linalg in
float64 on the CPU. The error of a result is judged relative to the condition number of A."""
import pytest
import torch

from fastpath.ops import linalg
from tests.conftest import DEVICE, noncontig
from tests.ops.linalg_common import EPS, TOL as REL_TOL, _hi

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def randn(*shape, dtype=torch.float32, device=DEVICE):
    """Normal data (complex: independent real and imaginary parts), drawn in float32 on the CPU."""
    x = torch.randn(shape)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape))
    return x.to(dtype=dtype, device=device)


def _hi_cpu(t):
    return t.to(_hi(t.dtype)).cpu()


def rel_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (complex128)."""
    out, ref = _hi_cpu(out), _hi_cpu(ref)
    denom = ref.norm().item()
    return (out - ref).norm().item() / (denom if denom > 0 else 1.0)


def _ref_inv(A):
    return torch.linalg.inv(_hi_cpu(A))


def _ref_solve(A, B, left=True):
    return torch.linalg.solve(_hi_cpu(A), _hi_cpu(B), left=left)


def _tol(A, dtype):
    """Forward error bound: a modest multiple of n * eps * cond(A) (worst matrix of the batch)."""
    n = A.shape[-1]
    if A.numel() == 0:
        return REL_TOL[dtype]
    cond = torch.linalg.cond(_hi_cpu(A)).max().item()
    return max(REL_TOL[dtype], 20 * n * EPS[dtype] * cond)


def _check(out, ref, A, dtype):
    assert out.shape == ref.shape and out.dtype == dtype
    assert not out.isnan().any(), "NaN in the result of a non-singular system"
    err = rel_error(out, ref)
    assert err <= _tol(A, dtype), f"relative error {err:.3e} > {_tol(A, dtype):.3e}"


def _with_cond(batch, n, cond, dtype, device):
    """Matrices U diag(s) V^H with singular values spread log-uniformly over [1/cond, 1]."""
    U, _ = torch.linalg.qr(randn(*batch, n, n, dtype=_hi(dtype), device="cpu"))
    V, _ = torch.linalg.qr(randn(*batch, n, n, dtype=_hi(dtype), device="cpu"))
    s = torch.logspace(0, -torch.log10(torch.tensor(float(cond))).item(), n, dtype=torch.float64)
    return ((U * s) @ V.mH).to(dtype=dtype, device=device)


@pytest.mark.parametrize("n,batch,dtype", [
    *[(n, batch, dtype) for n, batch in [(1, (5,)), (3, ()), (4, (2, 3))] for dtype in DTYPES],
    # the plans of n = 8 and 16 (16 real: test_permutation_needs_pivoting, float32 and float64); 13: its last
    # column group one column wide, an inverse's (groups of 4) and a complex one's (of 8) (GROUP_LOOPS)
    (7, (9,), torch.float32), (7, (9,), torch.complex128), (16, (3,), torch.complex64), (13, (5,), torch.float32),
    (13, (4,), torch.complex64)])
def test_inv_ex(n, batch, dtype, device):
    A = randn(*batch, n, n, dtype=dtype, device=device)
    X, info = linalg.inv_ex(A)
    assert info.shape == batch and info.dtype == torch.int32 and (info.cpu() == 0).all()
    _check(X, _ref_inv(A), A, dtype)
    _check(linalg.inv(A), _ref_inv(A), A, dtype)


@pytest.mark.parametrize("batch", [(0,), (2, 0), (0, 3)])
def test_empty_batch(batch, device):
    A = randn(*batch, 4, 4, device=device)
    X, info = linalg.inv_ex(A)
    assert X.shape == A.shape and info.shape == batch and info.dtype == torch.int32
    x = linalg.solve(A, randn(*batch, 4, 2, device=device))
    assert x.shape == (*batch, 4, 2)


@pytest.mark.parametrize("dtype,cond", [(torch.float32, 1e4), (torch.float64, 1e11), (torch.complex64, 1e4),
                                        (torch.complex128, 1e11)])
def test_ill_conditioned(dtype, cond, device):
    A = _with_cond((6,), 7, cond, dtype, device)
    X, info = linalg.inv_ex(A)
    assert (info.cpu() == 0).all()
    _check(X, _ref_inv(A), A, dtype)
    B = randn(6, 7, 3, dtype=dtype, device=device)
    x = linalg.solve(A, B)
    _check(x, _ref_solve(A, B), A, dtype)
    # backward-stable: the residual is small relative to ||A|| ||x||, whatever the condition
    r = _hi_cpu(A) @ _hi_cpu(x) - _hi_cpu(B)
    scale = torch.linalg.matrix_norm(_hi_cpu(A)) * torch.linalg.matrix_norm(_hi_cpu(x))
    assert (torch.linalg.matrix_norm(r) / scale).max().item() < 100 * 7 * EPS[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_singular(dtype, device):
    n = 5
    A = randn(6, n, n, dtype=dtype)
    A[1, :, 2] = 0  # zero column: the third pivot is exactly zero
    A[3, :, 0] = 0  # zero first column
    A[4] = 0
    A[5, 4] = A[5, 1]  # repeated row (with a zero column as well, to make the zero pivot exact)
    A[5, :, 3] = 0
    A = A.to(device)
    X, info = linalg.inv_ex(A)
    ref_info = torch.linalg.inv_ex(_hi_cpu(A)).info
    assert info.cpu().tolist() == ref_info.tolist() == [0, 3, 0, 1, 1, 4]
    ok = info.cpu() == 0
    assert X[~ok.to(X.device)].isnan().all(), "a singular matrix must not give numbers"
    _check(X[ok.to(X.device)], _ref_inv(A[ok.to(A.device)]), A[ok.to(A.device)], dtype)
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 1"):
        linalg.inv(A)
    with pytest.raises(torch.linalg.LinAlgError):
        linalg.inv_ex(A, check_errors=True)
    with pytest.raises(torch.linalg.LinAlgError):
        linalg.inv(A[4])
    x, sinfo = linalg.solve_ex(A, randn(6, n, dtype=dtype, device=device))
    assert sinfo.cpu().tolist() == info.cpu().tolist() and x[~ok.to(x.device)].isnan().all()
    with pytest.raises(torch.linalg.LinAlgError):
        linalg.solve(A, randn(6, n, 2, dtype=dtype, device=device))
    with pytest.raises(torch.linalg.LinAlgError):
        linalg.solve_ex(A, randn(6, n, dtype=dtype, device=device), check_errors=True)


@pytest.mark.parametrize("n", [3, 7, 16])
def test_permutation_needs_pivoting(n, device):
    perms = [torch.roll(torch.arange(n), 1), torch.randperm(n), torch.arange(n).flip(0)]
    P = torch.stack([torch.eye(n)[p] for p in perms]).to(device)
    X, info = linalg.inv_ex(P)
    assert (info.cpu() == 0).all()
    assert torch.equal(X.cpu(), P.mT.cpu())  # exact: the inverse of a permutation is its transpose
    # a permutation times a scaled well-conditioned matrix: zeros on the diagonal
    A = (P @ (torch.eye(n) + 0.1 * torch.randn(n, n)).to(device)).double()
    _check(linalg.inv(A), _ref_inv(A), A, torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_noncontiguous(dtype, device):
    A = randn(3, 4, 5, 5, dtype=dtype, device=device)
    lazy = (A.conj(), A.mH) if dtype.is_complex else ()  # conjugated views (conj bit): resolved first
    for view in (noncontig(A), A.mT, A.permute(1, 0, 2, 3), *lazy):
        _check(linalg.inv(view), _ref_inv(view), view, dtype)
    B = noncontig(randn(4, 3, 5, 2, dtype=dtype, device=device)).permute(1, 0, 2, 3)
    _check(linalg.solve(A.mT, B), _ref_solve(A.mT, B), A, dtype)


def test_batch_innermost_views_copied_past_the_span(device, monkeypatch):
    """Matrices whose offsets would pass int32 (a batch-innermost view of millions of matrices)
    are copied compact before the kernels: the limit lowered to one 5 x 5 matrix's span here."""
    from fastpath.ops.linalg import tiles
    monkeypatch.setattr(tiles, "SPAN_COPY", 20)
    X = randn(5, 5, 30, dtype=torch.float32, device=device) + 3 * torch.eye(5, device=device)[:, :, None]
    A = X.permute(2, 0, 1)  # strides (1, 150, 30): each matrix spans 4 * 150 + 4 * 30 elements
    assert tiles.flat3(A, (30,), (5, 5)).is_contiguous()
    C = A.contiguous()  # compact already: no copy even past the (lowered) span
    assert tiles.flat3(C, (30,), (5, 5)).data_ptr() == C.data_ptr()
    _check(linalg.inv(A), _ref_inv(A), A, torch.float32)
    B = randn(30, 5, 2, dtype=torch.float32, device=device)
    _check(linalg.solve(A, B), _ref_solve(A, B), A, torch.float32)


_F32, _F64, _C64, _C128 = DTYPES


# each shape with a real and a complex dtype, every dtype with three or four of the shapes
@pytest.mark.parametrize("a_shape,b_shape,left,dtype", [
    *[((4, 5, 5), (4, 5), True, dtype) for dtype in (_F32, _C128)],  # batch of vectors (B.shape == A.shape[:-1])
    *[((4, 5, 5), (5,), True, dtype) for dtype in (_F64, _C64)],  # one vector, broadcast
    *[((4, 5, 5), (4, 5, 3), True, dtype) for dtype in (_F32, _C128)],
    *[((5, 5), (2, 3, 5, 16), True, dtype) for dtype in (_F64, _C64)],  # A broadcast over B's batch, k = 16
    *[((3, 1, 7, 7), (4, 7, 2), True, dtype) for dtype in (_F32, _C128)],  # batch dims broadcast both ways
    *[((4, 5, 5), (4, 3, 5), False, dtype) for dtype in (_F64, _C64)],  # X A = B
    *[((2, 1, 16, 16), (3, 1, 16), False, dtype) for dtype in (_F32, _C128)],
])
def test_solve(a_shape, b_shape, left, dtype, device):
    A = randn(*a_shape, dtype=dtype, device=device)
    B = randn(*b_shape, dtype=dtype, device=device)
    ref = _ref_solve(A, B, left)
    x, info = linalg.solve_ex(A, B, left=left)
    assert info.dtype == torch.int32 and (info.cpu() == 0).all()
    assert info.shape == torch.linalg.solve_ex(A.cpu(), B.cpu(), left=left).info.shape
    _check(x, ref, A, dtype)
    _check(linalg.solve(A, B, left=left), ref, A, dtype)


def test_reference_paths(device):
    """n or k > 16 go to torch.linalg on A's device."""
    A = randn(3, 20, 20, dtype=torch.float64, device=device)
    _check(linalg.inv(A), _ref_inv(A), A, torch.float64)
    B = randn(3, 20, dtype=torch.float64, device=device)
    _check(linalg.solve(A, B), _ref_solve(A, B), A, torch.float64)
    A = randn(2, 4, 4, dtype=torch.float64, device=device)
    B = randn(2, 4, 17, dtype=torch.float64, device=device)
    _check(linalg.solve(A, B), _ref_solve(A, B), A, torch.float64)
    C = randn(2, 17, 17, dtype=torch.complex64, device=device)
    torch.testing.assert_close(linalg.inv(C), torch.linalg.inv(C))
    # inputs that need gradients use torch.linalg (autograd works)
    A = randn(2, 3, 3, dtype=torch.float64, device=device).requires_grad_()
    linalg.inv(A).sum().backward()
    assert A.grad is not None and A.grad.shape == A.shape


def test_errors(device):
    A = randn(3, 3, device=device)
    with pytest.raises(ValueError, match="A: .*square"):
        linalg.inv(randn(3, 4, device=device))
    with pytest.raises(ValueError, match="A: "):
        linalg.inv_ex(randn(3, device=device))
    with pytest.raises(TypeError, match="A: .*int64"):
        linalg.inv(torch.ones(3, 3, dtype=torch.int64, device=device))
    with pytest.raises(TypeError, match="A: .*float16"):
        linalg.solve(A.half(), A.half())
    with pytest.raises(TypeError, match="A: expected a torch.Tensor"):
        linalg.inv([[1.0]])
    with pytest.raises(TypeError, match="B: .*float64"):
        linalg.solve(A, A.double())
    with pytest.raises(ValueError, match="B: .*n = 3"):
        linalg.solve(A, randn(4, 2, device=device))
    with pytest.raises(ValueError, match="B: .*n = 3"):
        linalg.solve(A, randn(2, 4, device=device), left=False)
    with pytest.raises(ValueError, match="B: .*broadcast"):
        linalg.solve(randn(2, 3, 3, device=device), randn(4, 3, 1, device=device))
    with pytest.raises(ValueError, match="B: .*left=True"):
        linalg.solve(A, randn(3, device=device), left=False)
    with pytest.raises(ValueError, match="B: .*left=True"):
        linalg.solve(randn(1, 1, device=device), randn(1, device=device), left=False)


def test_solve_singular_broadcast(device):
    A = randn(2, 1, 4, 4, dtype=torch.float64)
    A[1, 0, :, 1] = 0
    A = A.to(device)
    B = randn(3, 4, 2, dtype=torch.float64, device=device)
    x, info = linalg.solve_ex(A, B)
    assert info.shape == (2, 1) and info.cpu().flatten().tolist() == [0, 2]
    assert x[1].isnan().all() and not x[0].isnan().any()
    _check(x[0], _ref_solve(A[0], B), A[0], torch.float64)


def test_registered_ops(device):
    """The torch.library registrations (fake shapes, schema) pass torch's own op checks."""
    A = randn(2, 3, 3, dtype=torch.float64, device=device)
    B = randn(4, 1, 3, 2, dtype=torch.float64, device=device)
    torch.library.opcheck(linalg.small._inv_ex_op.op, (A,), test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(linalg.small._solve_ex_op.op, (A, B, True),
                          test_utils=("test_schema", "test_faketensor"))


def _check_each(out, ref, A, dtype):
    """Per system i: ||out_i - ref_i|| <= max(REL_TOL, 20 n eps cond(A_i)) ||ref_i||."""
    out, ref = _hi_cpu(out).flatten(1), ref.flatten(1)
    err = (out - ref).norm(dim=1) / ref.norm(dim=1)
    tol = (20 * A.shape[-1] * EPS[dtype] * torch.linalg.cond(_hi_cpu(A))).clamp(min=REL_TOL[dtype])
    assert not out.isnan().any() and (err <= tol).all(), f"worst error / bound {(err / tol).max():.2f}"


@pytest.mark.parametrize("n,dtype", [(1, _F32), (1, _C128), (2, _F64), (2, _C64), (3, _F32), (3, _C128),
                                     (4, _F64), (4, _C64)])
def test_tiny_systems(n, dtype, device):
    """n = 1..4: strided views, pivoting, singular matrices, right-hand sides, per system
    against float64 (each n real and complex, each dtype at two of them)."""
    nb = 100
    A = randn(nb, n, n, dtype=dtype)
    A[1] = torch.eye(n, dtype=dtype)[torch.roll(torch.arange(n), 1)]  # zero diagonal for n > 1
    A[2, :, n - 1] = 0  # zero last column: info n
    A[3] = 0  # info 1
    A[4, :, 0] = 0  # info 1
    A = noncontig(A.mT.to(device)).mT  # no unit row or column stride
    info_ref = torch.linalg.inv_ex(_hi_cpu(A)).info
    assert info_ref[:5].tolist() == [0, 0, n, 1, 1] and (info_ref[5:] == 0).all()
    ok = info_ref == 0
    X, info = linalg.inv_ex(A)
    assert info.dtype == torch.int32 and torch.equal(info.cpu(), info_ref)
    assert X[~ok].isnan().all(), "a singular matrix must not give numbers"
    assert torch.equal(X[1].cpu(), A[1].mT.cpu())  # a permutation's inverse is exact
    _check_each(X[ok], _ref_inv(A[ok]), A[ok], dtype)
    for B, left in ((noncontig(randn(nb, n, 3, dtype=dtype, device=device)), True),
                    (randn(nb, n, dtype=dtype, device=device), True),
                    (randn(nb, 2, n, dtype=dtype, device=device), False)):
        x, sinfo = linalg.solve_ex(A, B, left=left)
        # left=False factors A^T: the index of its first zero pivot may differ from A's
        assert torch.equal(sinfo.cpu(), info_ref) if left else torch.equal(sinfo.cpu() != 0, ~ok)
        assert x[~ok].isnan().all()
        _check_each(x[ok], _ref_solve(A[ok], B[ok], left), A[ok], dtype)


@pytest.mark.parametrize("plan, unroll", [((1, 1, 1), 0), ((2, 2, 1), 16), ((16, 1, 2), 4)])
def test_plans(plan, unroll, device, monkeypatch):
    """Plans other than the table's (scripts/tune_linalg.py tries them): a thread per system,
    pairs of columns with 2 systems a thread, whole rows; inverse and solve, with pivoting,
    real (n = 5) and complex (n = 3); the steps unrolled up to ``unroll`` (n = 3 and 5 on both sides)."""
    monkeypatch.setattr(linalg.small, "PLAN", plan)
    monkeypatch.setattr(linalg.small, "UNROLL_MAX_N", unroll)
    for n, dtype in ((3, torch.complex128), (5, torch.float64)):
        A = randn(5, n, n, dtype=dtype, device=device)
        A[0] = torch.eye(n, dtype=dtype)[torch.roll(torch.arange(n), 1)]  # zero diagonal
        _check_each(linalg.inv_ex(A).inverse, _ref_inv(A), A, dtype)
        B = randn(5, n, 3, dtype=dtype, device=device)
        _check_each(linalg.solve(A, B), _ref_solve(A, B), A, dtype)
