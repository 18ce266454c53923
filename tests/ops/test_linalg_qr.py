"""fastpath.ops.linalg (qr): Householder QR against torch.linalg.qr in float64 / complex128 on
the CPU: reconstruction (Q R = A), orthonormal Q, upper-triangular R, and LAPACK's sign
conventions (the same Q and R as torch up to rounding)."""
import importlib

import pytest
import torch

from tests.conftest import noncontig
from tests.ops.linalg_common import DTYPES, EPS, TOL, _hi, rand

# the module (fastpath.ops.linalg.qr is the function the package re-exports)
Q = importlib.import_module("fastpath.ops.linalg.qr")


def _rel(a, b):
    a, b = a.detach().cpu().to(b.dtype), b.cpu()
    return ((a - b).abs().norm() / b.abs().norm().clamp_min(1e-300)).item()


def _check(A, mode):
    Qm, R = Q.qr(A, mode=mode)
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    hi = _hi(A.dtype)
    rows = m if mode == "complete" else k
    assert R.shape == (*batch, rows, n) and R.dtype == A.dtype
    assert torch.equal(R.cpu(), R.cpu().triu()), "R is not upper triangular"
    tol = max(TOL[A.dtype], 10 * max(m, n) * EPS[A.dtype])
    rq, rr = torch.linalg.qr(A.cpu().to(hi), mode=mode)
    cond = torch.linalg.cond(A.cpu().to(hi)).max().item() if min(m, n) > 0 else 1.0
    assert _rel(R, rr) <= tol * max(1.0, cond), "R differs from LAPACK's"
    if mode == "r":
        assert Qm.shape == (0,)
        return
    assert Qm.shape == (*batch, m, rows) and Qm.dtype == A.dtype
    Qd = Qm.cpu().to(hi)
    eye = torch.eye(rows, dtype=hi)
    assert (Qd.mH @ Qd - eye).abs().max().item() <= tol, "Q is not orthonormal"
    assert _rel(Qd @ R.cpu().to(hi), A.cpu().to(hi)) <= tol, "Q R != A"
    if mode == "reduced" or m <= n:  # complete Q beyond the first k columns is any orthonormal basis
        assert _rel(Qm[..., :k], rq[..., :k]) <= tol * max(1.0, cond), "Q differs from LAPACK's"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,batch,mode", [
    (m, n, batch, mode) for m, n, batch in [(1, 1, (3,)), (4, 4, (2, 3)), (7, 5, (2,)), (5, 7, (2,)),
                                            (13, 13, (3,)), (32, 32, (2,)), (67, 9, ())]
    for mode in ["reduced", "complete", "r"] if mode != "complete" or m > n])  # (m <= n: complete is reduced)
def test_qr(m, n, batch, mode, dtype, device):
    _check(rand(*batch, m, n, dtype=dtype, device=device), mode)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_qr_tall_skinny(dtype, device):
    """One matrix per program, its whole height in registers (256 x 16 float32)."""
    m = 256 if dtype == torch.float32 else 128
    assert Q._fits(m, 13, "reduced", dtype)
    _check(rand(2, m, 13, dtype=dtype, device=device), "reduced")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="issue-sized batches only where the kernels run compiled")
@pytest.mark.parametrize("m,n,batch,dtype", [(32, 32, 10_000, torch.float32), (64, 64, 300, torch.float32),
                                             (256, 16, 500, torch.float32), (32, 32, 1000, torch.complex64)])
def test_qr_issue_sizes(m, n, batch, dtype, device):
    assert Q._fits(m, n, "reduced", dtype)
    for mode in ("reduced", "complete"):
        _check(rand(batch, m, n, dtype=dtype, device=device), mode)


def test_qr_degenerate_columns(device):
    """Zero columns and columns already zero below the diagonal: no reflection, as LAPACK."""
    A = rand(4, 6, 4, dtype=torch.float64)
    A[0, :, 0] = 0
    A[1, 1:, 0] = 0  # alpha only: tau = 0, R[0, 0] = alpha (may be negative)
    A[1, 0, 0] = -2.0
    A[2] = 0
    A[3, :, 2] = A[3, :, 1]  # rank-deficient
    for mode in ("reduced", "complete"):
        Qm, R = Q.qr(A.to(device), mode=mode)
        rr = torch.linalg.qr(A, mode=mode).R
        assert (R[1, 0, 0].item() == -2.0) and torch.isfinite(Qm).all()
        # A[3] is rank-deficient: below row 2, R is rounding noise reflected by whatever
        # Householder vector that noise gives, so only its first two rows are compared.
        assert _rel(R[:3], rr[:3]) <= 1e-13 and _rel(R[3, :2], rr[3, :2]) <= 1e-13
        Qd = Qm.cpu()
        assert (Qd.mT @ Qd - torch.eye(Qd.shape[-1], dtype=torch.float64)).abs().max() <= 1e-14
        assert _rel(Qd @ R.cpu(), A) <= 1e-14


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_qr_extreme_scales(scale, device):
    A = (rand(2, 9, 5, dtype=torch.float64) * scale).float().to(device)
    Qm, R = Q.qr(A)
    assert torch.isfinite(Qm).all() and torch.isfinite(R).all()
    rq, rr = torch.linalg.qr(A.double().cpu())
    assert _rel(R, rr) <= 1e-5 and _rel(Qm, rq) <= 1e-5


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_torch_qr_scaled_is_exact(mode, device):
    """The power-of-two scaling around torch's QR changes no bit where torch's own call neither
    overflows nor underflows: Q the same, R the same times the scale (any matrix, any device)."""
    A = rand(3, 37, 16, dtype=torch.complex64, device=device) * torch.tensor([1.0, 3e5, 1e-4], device=device)[:, None, None]
    Qs, Rs = Q.torch_qr_scaled(A, mode)
    Qt, Rt = torch.linalg.qr(A, mode=mode)
    assert torch.equal(Qs, Qt) and torch.equal(Rs, Rt)


@pytest.mark.parametrize("scale", [1e-20, 1e20])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_torch_path_extreme_scales(scale, mode, device):
    """complex64 matrices too large for the kernel's registers in complete mode (the torch path
    on a GPU, scaled) at scales whose squares leave float32's range: right to float32 rounding
    (the compiled fuzz sweep flagged complete 4 x 37 x 16 on an H200)."""
    A = rand(4, 37, 16, dtype=torch.complex64, device=device) * scale
    if mode == "complete":
        assert not Q._fits(37, 16, mode, A.dtype)
    _check(A, mode)


def test_qr_noncontiguous(device):
    A = rand(3, 2, 6, 5, dtype=torch.complex64, device=device)
    for view in (noncontig(A), A.mT, A.permute(1, 0, 2, 3), A.conj()):
        _check(view, "reduced")


@pytest.mark.parametrize("m,n,batch,mode,dtype", [
    (100, 80, (2,), "complete", torch.float32), (100, 80, (2,), "reduced", torch.float64),
    (70, 130, (), "reduced", torch.float32), (70, 130, (), "r", torch.float64),
    (130, 130, (), "r", torch.float32), (130, 130, (), "complete", torch.float64),
    (200, 33, (3,), "reduced", torch.float32), (200, 33, (3,), "complete", torch.float64)])
def test_qr_blocked(m, n, batch, mode, dtype, device):
    """Too large for one program's registers: panels of NB columns and compact-WY updates. Each
    shape with both dtypes, each mode with both (complete Q of a tall matrix for both)."""
    assert not Q._fits(m, n, mode, dtype)
    _check(rand(*batch, m, n, dtype=dtype, device=device), mode)


def test_qr_blocked_degenerate(device):
    """Zero columns, a column with nothing below the diagonal (tau = 0 inside a panel), a
    rank-deficient matrix, the identity, a zero matrix and extreme scales on the blocked path
    (float64: panels of 16, the last of 13 columns)."""
    m, n = 60, 45
    A = rand(6, m, n, dtype=torch.float64)
    A[0, :, 0] = 0
    A[0, :, 40] = 0
    A[1, :, :5] = A[1, :, :5].triu()  # nothing below the diagonal: no reflections (tau = 0)
    A[1, 3, 3] = -2.0
    A[2, :, 35] = A[2, :, 34]
    A[3] = torch.eye(m, n, dtype=torch.float64)
    A[4] = 0
    A[5] *= 2.0 ** 1000  # squares overflow float64: the blocked path scales by a power of two
    down = torch.ones(6, 1, 1, dtype=torch.float64)
    down[5] = 2.0 ** -1000  # the comparisons' norms in range
    for mode in ("reduced", "complete"):
        Qm, R = Q.qr(A.to(device), mode=mode)
        assert torch.isfinite(Qm).all() and torch.isfinite(R).all()
        Qd, Rd = Qm.cpu(), R.cpu()
        assert (Qd.mT @ Qd - torch.eye(Qd.shape[-1], dtype=torch.float64)).abs().max() <= 1e-13
        assert _rel(Qd @ (Rd * down), A * down) <= 1e-13
        assert torch.equal(Rd, Rd.triu())
        rr = torch.linalg.qr(A * down, mode=mode).R
        assert _rel((Rd * down)[[0, 1, 3, 4, 5]], rr[[0, 1, 3, 4, 5]]) <= 1e-12
        assert Rd[1, 3, 3].item() == -2.0 and torch.equal(Rd[1, :5, :5], A[1, :5, :5])
    for scale in (1e-30, 1e30):
        A = (rand(2, 70, 40, dtype=torch.float64) * scale).float().to(device)  # panels of 32 and 8
        Qm, R = Q.qr(A)
        assert torch.isfinite(Qm).all() and torch.isfinite(R).all()
        rq, rr = torch.linalg.qr(A.double().cpu())
        assert _rel(R, rr) <= 1e-5 and _rel(Qm, rq) <= 1e-5


@pytest.mark.parametrize("fuse", [False, True])
def test_qr_blocked_reductions(fuse, device, monkeypatch):
    """The panel's two column sums as separate reductions or one two-operand reduction (the
    GPU's form; the interpreter runs that one slowly, a column at a time, so a small matrix:
    one partial panel, blocked for its complete Q)."""
    qb = importlib.import_module("fastpath.ops.linalg.qr_blocked")
    monkeypatch.setattr(qb, "FUSE", fuse)
    assert not Q._fits(70, 9, "complete", torch.float32)
    _check(rand(70, 9, device=device), "complete")


@pytest.mark.parametrize("outer", [32, 64])
def test_qr_blocked_outer(outer, device, monkeypatch):
    """Outer blocks of one panel (T straight from the panel kernel) and of two, the last block
    partial (70 columns: blocks of 32, 32, 6 or of 64, 6)."""
    qb = importlib.import_module("fastpath.ops.linalg.qr_blocked")
    monkeypatch.setattr(qb, "OUTER", outer)
    _check(rand(90, 70, device=device), "complete")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="several programs a panel only where kernels run compiled")
@pytest.mark.parametrize("rows,outer", [(16, 128), (64, 32), (64, 256)])
@pytest.mark.parametrize("m,n,batch,dtype", [(300, 257, (3,), torch.float32), (257, 300, (2,), torch.float64),
                                             (1000, 1000, (), torch.float32), (70, 80, (200,), torch.float32)])
def test_qr_blocked_programs(m, n, batch, dtype, rows, outer, device, monkeypatch):
    """Panels split over many programs meeting at a grid barrier (16-row programs: up to 63 of
    them, batches launched in slices of the multiprocessor count), outer blocks of one panel
    and of several."""
    qb = importlib.import_module("fastpath.ops.linalg.qr_blocked")
    monkeypatch.setattr(qb, "ROWS", rows)
    monkeypatch.setattr(qb, "OUTER", outer)
    _check(rand(*batch, m, n, dtype=dtype, device=device), "reduced")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs of the blocked path: CUDA only")
@pytest.mark.parametrize("mode", ["reduced", "r"])
def test_qr_blocked_graph_replays(mode, device, monkeypatch):
    """From the second call of a shape on, a CUDA graph of the whole factorisation replays:
    each call's result is its own input's, and earlier results are not overwritten (the graph
    captured under inference mode replays outside it, on another stream too)."""
    qb = importlib.import_module("fastpath.ops.linalg.qr_blocked")
    monkeypatch.setattr(qb, "_GRAPHS", qb.GraphCache())
    inputs = [rand(600, 520, device=device) for _ in range(5)]
    outs = [Q.qr(inputs[0], mode=mode)]
    with torch.inference_mode():
        outs.append(Q.qr(inputs[1], mode=mode))
    outs += [Q.qr(A, mode=mode) for A in inputs[2:4]]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        outs.append(Q.qr(inputs[4], mode=mode))
    torch.cuda.current_stream().wait_stream(side)
    assert any(isinstance(v, list) for v in qb._GRAPHS.entries.values())
    for A, (Qm, R) in zip(inputs, outs):
        rr = torch.linalg.qr(A.cpu().double(), mode=mode).R
        assert _rel(R, rr) <= 1e-4
        if mode != "r":
            assert _rel(Qm.double() @ R.double(), A.double()) <= 1e-5


def test_reference_paths(device):
    """A complex matrix too large for one program and inputs that need gradients take
    torch.linalg.qr."""
    A = rand(300, 200, dtype=torch.complex128, device=device)
    Qm, R = Q.qr(A)
    torch.testing.assert_close(Qm @ R, A)
    A = rand(2, 4, 3, dtype=torch.float64, device=device).requires_grad_()
    Q.qr(A).R.sum().backward()
    assert A.grad is not None
    E = rand(2, 0, 3, device=device)
    assert Q.qr(E).R.shape == torch.linalg.qr(E).R.shape


def test_errors(device):
    A = rand(3, 3, device=device)
    with pytest.raises(TypeError, match="A: .*float16"):
        Q.qr(A.half())
    with pytest.raises(TypeError, match="A: expected a torch.Tensor"):
        Q.qr([[1.0]])
    with pytest.raises(ValueError, match="A: "):
        Q.qr(rand(3, device=device))
    with pytest.raises(ValueError, match="mode: .*'x'"):
        Q.qr(A, mode="x")


def test_registered_op(device):
    A = rand(2, 5, 3, dtype=torch.float64, device=device)
    for mode in ("reduced", "complete", "r"):
        torch.library.opcheck(Q._qr_op.op, (A, mode), test_utils=("test_schema", "test_faketensor"))
