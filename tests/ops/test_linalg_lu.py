"""fastpath.ops.linalg (lu, triangular): lu_factor(_ex), lu_solve, det, slogdet and
solve_triangular against torch.linalg in float64 / complex128 on the CPU. Factorisations are
judged by reconstruction (P L U = A), solves by their error relative to the condition number."""
import pytest
import torch

from fastpath._core.backend import INTERPRET, tl, triton
from fastpath.ops.linalg import lu as L
from fastpath.ops.linalg import triangular as T
from fastpath.ops.linalg.tiles import _dot, _tf32_round
from tests.conftest import noncontig
from tests.ops.linalg_common import DTYPES, EPS, TOL, _hi, rand
from tests.tolerances import rel_error


#: Compiled kernels on a GPU (forms with inline PTX run only there)
_GPU = torch.cuda.is_available() and not INTERPRET


def _ref(x):
    return x.detach().cpu().to(_hi(x.dtype))


def _cond(A):
    return torch.linalg.cond(_ref(A)).max().item() if A.numel() else 1.0


def _check_solution(X, ref, A, dtype):
    """Forward error within a modest multiple of n * eps * cond(A) (worst matrix of the batch)."""
    assert X.shape == ref.shape and X.dtype == dtype
    assert not X.isnan().any()
    n = A.shape[-1]
    tol = max(TOL[dtype], 20 * n * EPS[dtype] * _cond(A))
    err = ((X.cpu().to(ref.dtype) - ref).abs().norm() / ref.abs().norm()).item()
    assert err <= tol, f"relative error {err:.3e} > {tol:.3e}"


def _pivoted_well_conditioned(b, n, dtype, device):
    """b matrices Q D (Q unitary from a random matrix's QR, D diagonal in [1, 2]): condition number
    at most 2, so a solve's tolerance stays tight, while partial pivoting still interchanges rows
    (a random Gaussian matrix's condition number, ~100-2500 at n = 40-70, left 1-20% errors passing)."""
    Q, _ = torch.linalg.qr(rand(b, n, n, dtype=_hi(dtype)))
    return (Q * torch.linspace(1.0, 2.0, n, dtype=torch.float64)).to(dtype=dtype, device=device)


def _reconstruct(LU, piv, A):
    """||P L U - A|| / ||A|| in float64 via torch.lu_unpack (LAPACK's pivot convention)."""
    P, Lm, U = torch.lu_unpack(_ref(LU), piv.cpu())
    R = P @ Lm @ U
    return ((R - _ref(A)).abs().norm() / _ref(A).abs().norm().clamp_min(1e-300)).item()


# ---------------------------------------------------------------------------- lu_factor

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,batch", [(1, 1, (5,)), (4, 4, (2, 3)), (7, 5, (3,)), (5, 7, (2,)),
                                       (13, 13, (3,)), (32, 32, (2,)), (45, 37, ())])
def test_lu_factor(m, n, batch, dtype, device):
    A = rand(*batch, m, n, dtype=dtype, device=device)
    LU, piv, info = L.lu_factor_ex(A)
    k = min(m, n)
    assert LU.shape == A.shape and LU.dtype == dtype
    assert piv.shape == (*batch, k) and piv.dtype == torch.int32
    assert info.shape == batch and info.dtype == torch.int32 and (info.cpu() == 0).all()
    assert _reconstruct(LU, piv, A) <= max(TOL[dtype], 8 * max(m, n) * EPS[dtype])
    # the pivots LAPACK picks on the same input (largest |re| + |im|, first on a tie)
    assert torch.equal(piv.cpu(), torch.linalg.lu_factor_ex(A.cpu()).pivots)
    Lm = torch.tril(LU.cpu(), -1)
    bound = 2 ** 0.5 if dtype.is_complex else 1.0  # pivots maximise |re| + |im|, not |.|
    assert (Lm.abs() <= bound + 1e-6).all(), "partial pivoting bounds the multipliers"
    LU2, piv2 = L.lu_factor(A)
    assert torch.equal(LU2, LU) and torch.equal(piv2, piv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_lu_factor_noncontiguous(dtype, device):
    A = rand(3, 2, 6, 6, dtype=dtype, device=device)
    for view in (noncontig(A), A.mT, A.permute(1, 0, 2, 3), A.conj()):
        LU, piv, _ = L.lu_factor_ex(view)
        assert _reconstruct(LU, piv, view) <= 8 * 6 * EPS[dtype]
    A = rand(2, 40, 40, dtype=dtype, device=device).mT  # blocked path, column-major input
    LU, piv, _ = L.lu_factor_ex(A)
    assert _reconstruct(LU, piv, A) <= 8 * 40 * EPS[dtype]


@pytest.fixture(params=["tile", "rows", "ahead", *(["warps"] if _GPU else [])])
def panel(request, monkeypatch):
    """The blocked path's panel: as a (1, M, W) tile (the interpreter's default) or a thread a row
    (``_lu_panel_rows``, the GPU's default), "ahead": complex64 rows with the columns rotated and
    each pivot search a step early (``lu.PANEL_ROTATE = 2``; real matrices: the row form), "warps"
    (compiled only: inline PTX) the search and pivot row in one barrier (``PANEL_ROTATE = 3``); the
    interpreter runs the row form 4-5x slower, so only some blocked tests take them, on fewer
    matrices."""
    monkeypatch.setattr(L, "ROW_PANEL", request.param != "tile")
    monkeypatch.setattr(L, "PANEL_ROTATE", {"ahead": 2, "warps": 3}.get(request.param, 0))
    return request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_lu_pivot_tie_blocked(dtype, device, panel):
    """A tie in the pivot search after an interchange (blocked path): LAPACK takes the first
    row in the interchanged order, not the first in memory. Column 0 (ones, 2 in row 5) swaps
    rows 0 and 5; column 1 is exact after the elimination (row 5 holds 0 there) and its largest
    |re| + |im| (7) is in rows 0 (now at place 5) and 3: pivot 4, 1-based, not 6. (40 x 10: the
    tie is in the first panel, which is all the row form need run; two matrices, the row form's
    batch of more than one.)"""
    batch = 2
    A = rand(batch, 40, 10, dtype=dtype)
    A[:, :, 0] = 1
    A[:, 5, 0] = 2
    A[:, :, 1] *= 0.1
    A[:, 5, 1] = 0
    A[:, 0, 1] = 7
    A[:, 3, 1] = 7 if dtype == torch.float32 else complex(3.5, -3.5)
    LU, piv, info = L.lu_factor_ex(A.to(device))
    ref = torch.linalg.lu_factor_ex(_ref(A))
    assert piv[:, :2].cpu().tolist() == ref.pivots[:, :2].tolist() == [[6, 4]] * batch
    assert torch.equal(piv.cpu(), ref.pivots)
    assert _reconstruct(LU, piv, A.to(device)) <= 8 * 40 * EPS[dtype]


def _singular_batch(n, dtype):
    A = rand(6, n, n, dtype=dtype)
    A[1, :, 2] = 0  # zero column: the third pivot is exactly zero
    A[3, :, 0] = 0
    A[4] = 0
    A[5, 4] = A[5, 1]  # a repeated row with a zero column, so that the zero pivot is exact
    A[5, :, 3] = 0
    return A


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_singular(dtype, device):
    n = 5
    A = _singular_batch(n, dtype).to(device)
    LU, piv, info = L.lu_factor_ex(A)
    ref = torch.linalg.lu_factor_ex(_ref(A))
    assert info.cpu().tolist() == ref.info.tolist() == [0, 3, 0, 1, 1, 4]
    assert torch.equal(piv.cpu(), ref.pivots)
    assert _reconstruct(LU, piv, A) <= 8 * n * EPS[dtype]  # the factorisation completes anyway
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 1"):
        L.lu_factor(A)
    with pytest.raises(torch.linalg.LinAlgError):
        L.lu_factor_ex(A, check_errors=True)
    d = L.det(A)
    s, la = L.slogdet(A)
    bad = (info.cpu() != 0).to(d.device)
    assert (d[bad] == 0).all() and (s[bad] == 0).all() and (la[bad] == float("-inf")).all()
    assert torch.isfinite(la[~bad]).all()


@pytest.mark.parametrize("m,n,dtype,rows", [(66, 66, torch.complex64, False), (40, 70, torch.float32, False),
                                            (70, 40, torch.float64, False), (34, 70, torch.float32, True),
                                            (70, 17, torch.float64, True), (33, 33, torch.complex64, True),
                                            (66, 17, torch.complex64, "unpacked"), (40, 9, torch.float32, True),
                                            (66, 17, torch.complex64, "rotate"), (33, 33, torch.complex64, "ahead"),
                                            (20, 40, torch.complex64, "rotate"), (20, 40, torch.complex64, "ahead"),
                                            *[(m, n, torch.complex64, "warps")
                                              for m, n in [(66, 66), (20, 40), (33, 33)] if _GPU]])
def test_lu_blocked_steps(m, n, dtype, rows, device, monkeypatch):
    """The blocked path with panels of 16 columns, two to a 32-column chunk of the update
    (complex 66 x 66: the last chunk and the last panel partial), a wide matrix (columns past
    the last panel) and a tall one: pivots as LAPACK's, the product P L U back to A, det /
    slogdet of the square ones; ``rows``: the row panel (the GPU's; elsewhere the tile form unless
    forced), complex64 entries and float32 pairs moved as 64-bit words (``lu.PANEL_PACK``; not
    for an odd number of float32 columns: 40 x 9, one panel) or, "unpacked", one float at a
    time, or, "rotate", complex64 columns rotated a place a step (``lu.PANEL_ROTATE``; 20 x 40:
    a panel of 32 columns factoring 20, the other 12 updated and put back), "ahead" and each
    pivot search a step early (``PANEL_ROTATE = 2``), "warps" (compiled only: inline PTX) the search
    and pivot row in one barrier (``PANEL_ROTATE = 3``); the other row-panel
    matrices just past a panel's width (32, or 16 from 65 rows of complex64 or float64 on): two
    panels, the second of one or two columns."""
    if rows:
        monkeypatch.setattr(L, "ROW_PANEL", True)
        monkeypatch.setattr(L, "PANEL_PACK", rows in (True, "rotate", "ahead", "warps"))
        monkeypatch.setattr(L, "PANEL_ROTATE", {"rotate": 1, "ahead": 2, "warps": 3}.get(rows, 0))
        if rows == "warps":  # the form runs, not its fallback
            assert L._rotation(torch.device(device), 128, 16, L.BLOCKED_WARPS) == 3
    # (the row panel and the square matrices, which det and slogdet factor twice more: one matrix, their cost)
    A = rand(1 if rows or m == n else 2, m, n, dtype=dtype, device=device)
    LU, piv, info = L.lu_factor_ex(A)
    assert (info.cpu() == 0).all()
    assert torch.equal(piv.cpu(), torch.linalg.lu_factor_ex(_ref(A)).pivots)
    assert _reconstruct(LU, piv, A) <= 8 * max(m, n) * EPS[dtype]
    if m == n:  # det of A / 3: A's own overflows float32 at n = 80
        d, (sg, la) = L.det(A / 3), L.slogdet(A)
        rd, (rs, rla) = torch.linalg.det(_ref(A) / 3), torch.linalg.slogdet(_ref(A))
        tol = max(TOL[dtype], 20 * n * EPS[dtype] * _cond(A))
        assert ((d.cpu().to(rd.dtype) - rd).abs() / rd.abs()).max().item() <= tol
        assert (la.cpu().double() - rla).abs().max().item() <= tol
        assert (sg.cpu().to(rs.dtype) - rs).abs().max().item() <= tol
        if dtype.is_complex:  # |sign|: a product of n float32 unit phases, within n roundings of one
            assert (sg.abs().cpu().double() - 1).abs().max().item() <= 4 * n * EPS[dtype]


@pytest.mark.parametrize("m,n,dtype,step", [
    # complex, tall (panels of 16; "inline" is det's and slogdet's form, test_lu_blocked_steps' square cases)
    (66, 40, torch.complex64, "matmul"), (66, 40, torch.complex64, "kernel,fused"),
    (66, 40, torch.complex64, "kernel,off"),
    # float32, wide (panels of 32)
    (40, 70, torch.float32, "matmul"), (40, 70, torch.float32, "kernel,fused"),
    (40, 70, torch.float32, "kernel,kernel"), (40, 70, torch.float32, "inline"),
    # float64, tall (panels of 16): the step launch with and without look-ahead
    (70, 40, torch.float64, "kernel,kernel"), (70, 40, torch.float64, "kernel,off")])
def test_lu_blocked_update_forms(step, m, n, dtype, device, monkeypatch):
    """The blocked path's step after each panel as a kernel over (matrix, chunk) programs (the
    real matrices' default; with look-ahead the next panel's columns first, by the next panel's
    launch or a step launch of their own, then the rest), or batched matmuls between one launch
    a panel (complex matrices' default; ``info`` then carried from launch to launch, a zero
    column past the first panel gives 37, a zero pivot in the first panel stays the first), or
    inside the one launch (det's form): pivots as LAPACK's, P L U back to A. Each launch form on
    complex and real matrices, wide and tall or square ("kernel,kernel" and "kernel,off" launch
    the same kernels, in another order; complex "inline": det and slogdet of
    test_lu_blocked_steps' square matrices)."""
    monkeypatch.setattr(L, "BLOCKED_STEP", step.split(",")[0])
    monkeypatch.setattr(L, "BLOCKED_LOOKAHEAD", (step + ",off").split(",")[1])
    A = rand(3, m, n, dtype=dtype)
    A[1, :, 36] = 0
    A[2, :, 1] = 0
    A[2, :, 36] = 0
    A = A.to(device)
    LU, piv, info = L.lu_factor_ex(A)
    ref = torch.linalg.lu_factor_ex(_ref(A))
    assert info.cpu().tolist() == ref.info.tolist() == [0, 37, 2]
    assert torch.equal(piv.cpu(), ref.pivots)
    assert _reconstruct(LU, piv, A) <= 8 * max(m, n) * EPS[dtype]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs of the blocked path: CUDA only")
def test_lu_blocked_graph_replays(device, monkeypatch):
    """From a shape's second call on, the one-launch-a-panel loop replays from a CUDA graph: each
    call's factors are its own input's (info, LAPACK's pivots, P L U = A), a replay does not
    overwrite an earlier call's results, and the graph's factorisation in place (in its private
    copy) leaves every input as it was."""
    monkeypatch.setattr(L, "_GRAPHS", L.GraphCache())
    inputs = [rand(8, 70, 70, dtype=torch.complex64, device=device) for _ in range(4)]
    inputs[2][3, :, 40] = 0
    kept = [A.clone() for A in inputs]
    outs = [L.lu_factor_ex(A) for A in inputs]
    assert any(isinstance(v, list) for v in L._GRAPHS.entries.values())
    assert all(torch.equal(A, B) for A, B in zip(inputs, kept))
    for A, (LU, piv, info) in zip(inputs, outs):
        ref = torch.linalg.lu_factor_ex(_ref(A))
        assert info.cpu().tolist() == ref.info.tolist()
        assert torch.equal(piv.cpu(), ref.pivots)
        assert _reconstruct(LU, piv, A) <= 8 * 70 * EPS[torch.complex64]


@pytest.mark.parametrize("knob,on,m,n,dtype,batch", [
    ("TRACK_UNROLLED", True, 40, 40, torch.complex64, 8), ("TRACK_UNROLLED", True, 70, 40, torch.float32, 8),
    ("DEFER_LEFT", True, 66, 66, torch.complex64, 8), ("DEFER_LEFT", True, 70, 40, torch.complex64, 8),
    ("DEFER_LEFT", True, 40, 70, torch.complex64, 2), ("PANEL_RIGHT_CW", 64, 40, 150, torch.complex64, 8),
    ("PANEL_RIGHT_CW", 128, 66, 66, torch.complex64, 8), ("MATMUL_AHEAD", True, 66, 66, torch.complex64, 8),
    ("MATMUL_AHEAD", True, 70, 40, torch.complex64, 8), ("MATMUL_AHEAD", 2, 40, 70, torch.complex64, 2),
    ("MATMUL_AHEAD", "defer", 66, 66, torch.complex64, 8), ("UNIT_ROWS", True, 66, 66, torch.complex64, 8),
    ("UNIT_ROWS", True, 70, 40, torch.float32, 8), ("UNIT_ROWS", True, 40, 70, torch.complex64, 8),
    ("PANEL_PREFETCH", True, 66, 66, torch.complex64, 8), ("PANEL_PREFETCH", True, 40, 150, torch.complex64, 8)])
def test_lu_step_orders_agree(knob, on, m, n, dtype, batch, device, monkeypatch):
    """Other orders of the blocked step's data movement give the default's factors bit for bit, and
    LAPACK's pivots, P L U = A: ``lu.TRACK_UNROLLED``, the interchanges tracked in an unrolled loop;
    ``lu.DEFER_LEFT``, complex64's interchanges on the columns left of each panel deferred to one
    launch at the end; ``lu.PANEL_RIGHT_CW``, wider chunks right of the panel (square, tall, wide;
    several panels); ``lu.UNIT_ROWS``, rows moved as contiguous words; ``lu.PANEL_PREFETCH``, each chunk's
    rows loaded while the one before is stored. ``lu.MATMUL_AHEAD`` (the
    "matmul" step with look-ahead: the update's matmuls split by columns, so equal to rounding, not
    bit for bit; "defer": with the left interchanges deferred to the end, not in the step kernel)."""
    A = rand(batch, m, n, dtype=dtype, device=device)
    monkeypatch.setattr(L, knob, None if knob == "PANEL_RIGHT_CW" else False)
    LU, piv, _ = L._factor(A, True)
    if on == "defer":
        on = True
        monkeypatch.setattr(L, "DEFER_LEFT", True)
    monkeypatch.setattr(L, knob, on)
    LU2, piv2, _ = L._factor(A, True)
    assert torch.equal(piv, piv2)
    if knob == "MATMUL_AHEAD":
        torch.testing.assert_close(LU2, LU, rtol=0, atol=16 * max(m, n) * EPS[dtype] * LU.abs().max().item())
    else:
        assert torch.equal(LU, LU2)
    assert torch.equal(piv2.cpu(), torch.linalg.lu_factor_ex(_ref(A)).pivots)
    assert _reconstruct(LU2, piv2, A) <= 8 * max(m, n) * EPS[dtype]


def test_lu_one_barrier_search_falls_back(monkeypatch):
    """The one-barrier search (``PANEL_ROTATE = 3``) is only chosen where it compiles and holds: a
    CUDA device of sm_80+ with shared memory by inline PTX, a slot a warp, one row a thread; else the
    rotated form 1 (the same pivots through the row's slot)."""
    monkeypatch.setattr(L, "PANEL_ROTATE", 3)
    monkeypatch.setattr(L, "PANEL_SMEM", True)
    assert L._rotation(torch.device("cpu"), 256, 16, 8) == 1
    monkeypatch.setattr(L, "PANEL_SMEM", False)
    assert L._rotation(torch.device("cuda"), 256, 16, 8) == 1
    if _GPU and torch.cuda.get_device_capability() >= (8, 0):
        monkeypatch.setattr(L, "PANEL_SMEM", True)
        assert L._rotation(torch.device("cuda"), 256, 16, 8) == 3
        assert L._rotation(torch.device("cuda"), 256, 16, 4) == 1  # two rows a thread
        assert L._rotation(torch.device("cuda"), 64, 64, 8) == 1  # a row of 64 words: past a slot


def test_lu_blocked_in_place(device):
    """The factorisation a CUDA graph captures (``_factor`` on its own input: the matrices factored
    where they lie, no copy) gives what the copying form gives, bit for bit, and torch's pivots."""
    A = rand(8, 40, 40, dtype=torch.complex64, device=device)
    LU, piv, info = L._factor(A, True)
    work = A.clone()
    LU2, piv2, info2 = L._factor(work, True, own_input=True)
    assert LU2.data_ptr() == work.data_ptr()
    assert torch.equal(LU, LU2) and torch.equal(piv, piv2) and torch.equal(info, info2)
    assert torch.equal(piv.cpu(), torch.linalg.lu_factor_ex(_ref(A)).pivots)
    assert _reconstruct(LU2, piv2, A) <= 8 * 40 * EPS[torch.complex64]


def test_lu_singular_blocked(device, panel):
    """Zero pivots in the blocked path (the row panel: the tile form's last matrix, a zero pivot
    that only the elimination makes exact, after regular ones; a regular matrix's sign through
    the row panel: test_lu_blocked_steps' square row-panel case)."""
    pick, infos = ([0, 1, 3, 5], [0, 3, 1, 4]) if panel == "tile" else ([5], [4])
    n = 33  # two panels, the second of one column
    A = _singular_batch(n, torch.complex64)[pick].to(device)
    LU, piv, info = L.lu_factor_ex(A)
    ref = torch.linalg.lu_factor_ex(_ref(A))
    assert info.cpu().tolist() == ref.info.tolist() == infos
    assert torch.equal(piv.cpu(), ref.pivots)
    assert _reconstruct(LU, piv, A) <= 8 * n * EPS[torch.complex64]
    s, la = L.slogdet(A)
    bad = torch.tensor(infos) != 0
    if panel == "tile":  # |sign| of a product of n float32 unit phases: within n roundings of one (1.3e-6 at 36, H200)
        assert s[0].abs().item() == pytest.approx(1.0, abs=4 * n * EPS[torch.complex64])
    assert (s.cpu()[bad] == 0).all() and (la.cpu()[bad] == float("-inf")).all()


@pytest.mark.parametrize("n,dtype,ahead", [(6, torch.float64, False), (40, torch.float64, False),
                                           (40, torch.complex64, 2), *([(40, torch.complex64, 3)] if _GPU else [])])
def test_lu_no_pivoting(n, dtype, ahead, device, monkeypatch):
    """pivot=False; ``ahead``: complex64's row panel rotated with the searches a step early
    (``lu.PANEL_ROTATE = 2``), where the pivot row's holder is found by its place, or (3, compiled
    only) the form whose pivoting search takes one barrier (without pivoting: the row's slot)."""
    if ahead:
        monkeypatch.setattr(L, "ROW_PANEL", True)
        monkeypatch.setattr(L, "PANEL_ROTATE", ahead)
    A = rand(3, n, n, dtype=dtype) + 4 * n ** 0.5 * torch.eye(n, dtype=dtype)
    LU, piv, info = L.lu_factor_ex(A.to(device), pivot=False)
    assert (info.cpu() == 0).all()
    assert torch.equal(piv.cpu(), torch.arange(1, n + 1, dtype=torch.int32).expand(3, n))
    Lm = torch.tril(LU.cpu(), -1) + torch.eye(n, dtype=dtype)
    assert rel_error(Lm @ torch.triu(LU.cpu()), A) <= 8 * n * EPS[dtype]


# ---------------------------------------------------------------------------- lu_solve

_F32, _F64, _C64 = torch.float32, torch.float64, torch.complex64
#: (left, adjoint): the kernel's four forms (A's triangles transposed or not, conjugated or not; real: two)
SIDES = [(True, False), (True, True), (False, False), (False, True)]


@pytest.mark.parametrize("n,k,dtype,left,adjoint", [
    *[(n, k, dtype, *side) for n, k, dtype in [(1, 1, _F32), (5, 3, _F32), (5, 3, _F64), (5, 3, _C64)]
      for side in SIDES],  # in registers: every form
    (16, 16, _F64, True, True), (16, 16, _F64, False, True), (16, 16, _C64, True, False), (16, 16, _C64, False, False),
    (17, 40, _C64, False, True),  # two programs of right-hand sides
    # blocked (n > 32): the complex forms over 40 x 3 and 70 x 20 (row blocks taking two KC chunks)
    (40, 3, _C64, True, False), (40, 3, _C64, True, True), (70, 20, _C64, False, False), (70, 20, _C64, False, True),
    (40, 36, _C64, True, True), (40, 36, _C64, False, False),  # 32-column tiles: tf32x3
    (40, 20, _F32, True, False), (40, 20, _F32, False, False),
    (70, 40, _F32, True, True), (70, 40, _F32, False, True),  # two row blocks, 32-column tiles (tf32x3)
    # full blocks, chunks and column tiles: the sweep without masks (triangular.EVEN_TILES)
    (64, 32, _C64, True, False), (64, 64, _C64, False, True), (128, 64, _F32, True, True),
    (70, 32, _C64, True, False), (40, 64, _F32, True, False),  # full column tiles, a partial row block
    (40, 36, _F64, True, False), (40, 36, torch.complex128, False, True)])  # 32-column tiles, 64-bit: plain products
def test_lu_solve(n, k, left, adjoint, dtype, device):
    A = _pivoted_well_conditioned(2, n, dtype, device)
    B = rand(2, n, k, dtype=dtype, device=device) if left else rand(2, k, n, dtype=dtype, device=device)
    # n > 32 (the blocked solve) with torch's factors: column-major LU, and quicker in the interpreter
    LU, piv = L.lu_factor(A) if n <= 32 else torch.linalg.lu_factor(A)
    X = L.lu_solve(LU, piv, B, left=left, adjoint=adjoint)
    Ah = _ref(A).mH if adjoint else _ref(A)
    ref = torch.linalg.solve(Ah, _ref(B), left=left)
    _check_solution(X, ref, A, dtype)


@triton.jit
def _tf32_probe(x_ptr, r_ptr, a_ptr, b_ptr, c_ptr, o_ptr, N: tl.constexpr, M: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(r_ptr + i, _tf32_round(tl.load(x_ptr + i)))
    m = tl.arange(0, M)
    offs = m[:, None] * M + m[None, :]
    tl.store(o_ptr + offs, tl.load(c_ptr + offs) - _dot(tl.load(a_ptr + offs), tl.load(b_ptr + offs), "tf32x3s"))


def test_tf32_round_and_split_products(device):
    """The blocked sweep's "tf32x3s" products (split by fastpath): the rounding to TF32 against one built from
    frexp in float64 (to nearest, ties away from zero: ties, both signs, zero, the largest finite
    float32 rounding up to inf), and c - a @ b against float64 (float32-level error)."""
    x = torch.randn(1000) * torch.logspace(-30, 30, 1000)
    bits = torch.randint(0, 2 ** 10, (24,), dtype=torch.int32) * 2 ** 13 + 0x1000 + 0x3F800000
    x = torch.cat([x, -x, bits.view(torch.float32), -bits.view(torch.float32), torch.zeros(2),
                   torch.tensor([torch.finfo(torch.float32).max, 1.0])])
    x = torch.cat([x, torch.ones(4096 - x.numel())])
    m, e = torch.frexp(x.double())
    s = m * 2048  # 11 significant bits
    ref = torch.ldexp(torch.sign(s) * torch.floor(s.abs() + 0.5), (e - 11).double()).float()
    M = 32
    a, b, c = (torch.randn(M, M, device=device) for _ in range(3))
    r, o = torch.empty_like(x, device=device), torch.empty_like(c)
    _tf32_probe[(1,)](x.to(device), r, a, b, c, o, N=x.numel(), M=M)
    assert torch.equal(r.cpu(), ref)
    exact = c.double() - a.double() @ b.double()
    assert ((o.double() - exact).abs().max() / exact.abs().max()).item() < 4 * M * 2.0 ** -24


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_lu_solve_torch_factors_and_broadcast(dtype, device):
    """LU from torch (column-major strides), B broadcast over LU's batch and the reverse."""
    A = rand(3, 1, 6, 6, dtype=dtype, device=device)
    LU, piv = torch.linalg.lu_factor(A)
    B = noncontig(rand(4, 6, 2, dtype=dtype, device=device))
    X = L.lu_solve(LU, piv, B)
    assert X.shape == (3, 4, 6, 2)
    _check_solution(X, torch.linalg.solve(_ref(A), _ref(B)), A, dtype)
    B1 = rand(6, 5, dtype=dtype, device=device)
    _check_solution(L.lu_solve(LU, piv, B1, adjoint=True), torch.linalg.solve(_ref(A).mH, _ref(B1)), A, dtype)


@pytest.mark.parametrize("n", [12, 40])
def test_lu_solve_ill_conditioned(n, device):
    """Backward stable: the residual is small relative to ||A|| ||x|| whatever the condition
    (n = 40: the blocked solve, which applies inverted 32 x 32 diagonal blocks)."""
    U, _ = torch.linalg.qr(torch.randn(4, n, n, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(4, n, n, dtype=torch.float64))
    A = ((U * torch.logspace(0, -5, n, dtype=torch.float64)) @ V.mT).float().to(device)
    B = rand(4, n, 3, device=device)
    X = L.lu_solve(*(L.lu_factor(A) if n <= 32 else torch.linalg.lu_factor(A)), B)
    _check_solution(X, torch.linalg.solve(_ref(A), _ref(B)), A, torch.float32)
    r = _ref(A) @ _ref(X) - _ref(B)
    scale = torch.linalg.matrix_norm(_ref(A)) * torch.linalg.matrix_norm(_ref(X))
    assert (torch.linalg.matrix_norm(r) / scale).max().item() < 50 * n * EPS[torch.float32]


# ---------------------------------------------------------------------------- det, slogdet

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,batch", [(1, (4,)), (3, (5,)), (4, (2, 3)), (9, (3,)), (32, (2,))])
def test_det_slogdet(n, batch, dtype, device):
    _check_det(n, batch, dtype, device)


def test_det_slogdet_blocked(device):
    """(The row panel's det / slogdet: test_lu_blocked_steps' square row-panel case.)"""
    _check_det(36, (2,), torch.complex64, device)


def _check_det(n, batch, dtype, device):
    A = rand(*batch, n, n, dtype=dtype, device=device)
    d = L.det(A)
    s, la = L.slogdet(A)
    rd = torch.linalg.det(_ref(A))
    rs, rla = torch.linalg.slogdet(_ref(A))
    assert d.shape == batch and d.dtype == dtype and s.dtype == dtype
    assert la.shape == batch and la.dtype == A.real.dtype
    tol = max(TOL[dtype], 20 * n * EPS[dtype] * _cond(A))
    assert ((d.cpu().to(rd.dtype) - rd).abs() / rd.abs()).max().item() <= tol
    assert (la.cpu().double() - rla).abs().max().item() <= tol
    assert (s.cpu().to(rs.dtype) - rs).abs().max().item() <= tol


def test_det_extreme_scales_and_empty(device):
    n = 20
    A = (1e-30 * (torch.eye(n) + 0.1 * torch.randn(3, n, n))).to(device)  # det underflows float32
    s, la = L.slogdet(A)
    rs, rla = torch.linalg.slogdet(_ref(A))
    assert torch.equal(s.cpu().double(), rs)
    assert ((la.cpu().double() - rla).abs() / rla.abs()).max().item() < 1e-6
    assert (L.det(A).cpu() == 0).all()
    E = torch.zeros(2, 0, 0, device=device)
    assert torch.equal(L.det(E).cpu(), torch.ones(2))
    s, la = L.slogdet(E)
    assert torch.equal(s.cpu(), torch.ones(2)) and torch.equal(la.cpu(), torch.zeros(2))
    P = torch.eye(5)[[1, 0, 3, 4, 2]].to(device)  # one swap and a 3-cycle: det = -1 exactly
    assert L.det(P).item() == -1.0


# ---------------------------------------------------------------------------- solve_triangular

def _triangular(batch, n, dtype, upper, device):
    A = rand(*batch, n, n, dtype=dtype) + 3 * n ** 0.5 * torch.eye(n)  # diagonal keeps cond modest
    A = A.triu() if upper else A.tril()
    return A.to(device)


#: (upper, left, unitriangular)
TRI_FORMS = [(True, True, False), (False, True, True), (True, False, True), (False, False, False)]


@pytest.mark.parametrize("n,k,upper,left,unit,dtype", [
    *[(n, k, *form, dtype) for n, k in [(1, 3), (7, 5), (16, 1)] for form in TRI_FORMS for dtype in DTYPES],
    # blocked (row blocks of 32, float32 64): each form with each dtype once, at 40 x 20 or 70 x 5
    (40, 20, *TRI_FORMS[0], _F64), (40, 20, *TRI_FORMS[0], _C64), (70, 5, *TRI_FORMS[0], _F32),
    (40, 20, *TRI_FORMS[1], _F32), (40, 20, *TRI_FORMS[1], _F64), (70, 5, *TRI_FORMS[1], _C64),
    (40, 20, *TRI_FORMS[2], _F32), (40, 20, *TRI_FORMS[2], _C64), (70, 5, *TRI_FORMS[2], _F64),
    (40, 20, *TRI_FORMS[3], _F64), (40, 20, *TRI_FORMS[3], _C64), (70, 5, *TRI_FORMS[3], _F32)])
def test_solve_triangular(n, k, upper, left, unit, dtype, device):
    _check_triangular_solve(2, n, k, upper, left, unit, dtype, device)


def _check_triangular_solve(nb, n, k, upper, left, unit, dtype, device, b_view=False):
    """solve_triangular of nb random systems against torch's in float64; ``b_view`` (left=False): B a
    transposed view of an (nb, n, k) tensor rather than a contiguous (nb, k, n) one."""
    A = _triangular((nb,), n, dtype, upper, device)
    if unit:  # off-diagonal entries as small against the unit diagonal (random ones: cond ~ 2^n, no test)
        A = A / (3 * n ** 0.5)
    other = rand(nb, n, n, dtype=dtype, device=device)
    A = A + (other.tril(-1) if upper else other.triu(1))  # the other triangle must never be read
    if left or b_view:
        B = rand(nb, n, k, dtype=dtype, device=device)
        B = B if left else B.mT
    else:
        B = rand(nb, k, n, dtype=dtype, device=device)
    X = T.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    ref = torch.linalg.solve_triangular(_ref(A), _ref(B), upper=upper, left=left, unitriangular=unit)
    Aeff = (A.triu() if upper else A.tril())
    if unit:
        Aeff = Aeff - torch.diag_embed(Aeff.diagonal(dim1=-2, dim2=-1)) + torch.eye(n, dtype=dtype, device=device)
    _check_solution(X, ref, Aeff, dtype)


def test_solve_triangular_broadcast_views(device):
    A = _triangular((3, 1), 9, torch.float64, False, device)
    B = noncontig(rand(4, 9, 3, dtype=torch.float64, device=device))
    X = T.solve_triangular(A.mT, B, upper=True)  # a transposed view of a lower triangle
    assert X.shape == (3, 4, 9, 3)
    _check_solution(X, torch.linalg.solve_triangular(_ref(A.mT), _ref(B), upper=True), A, torch.float64)


def test_solve_triangular_host_blocks(device, monkeypatch):
    """The large-n path with host blocks of 12 rows: 50 = 4 x 12 + 2 (a short last block), two
    matrices (the inverses a launch a matrix) or six (a launch a block), each triangle / side /
    unit form; complex64 and float32."""
    monkeypatch.setattr(T, "HOST_BLOCK_N", 24)
    monkeypatch.setattr(T, "HOST_BLOCK", 12)
    for (upper, left, unit), dtype, nb in zip(TRI_FORMS, [_C64, _F32, _C64, _F32], [2, 6, 6, 2]):
        _check_triangular_solve(nb, 50, 4, upper, left, unit, dtype, device, b_view=True)


def test_solve_triangular_host_blocks_blocked_inverses(device, monkeypatch):
    """Host blocks of 64 rows (the blocked kernel inverts them, identity right-hand sides of batch
    stride 0): 140 = 2 x 64 + 12, float32, lower, a transposed view of A."""
    monkeypatch.setattr(T, "HOST_BLOCK_N", 100)
    monkeypatch.setattr(T, "HOST_BLOCK", 64)
    A = _triangular((1,), 140, _F32, True, device)
    B = rand(1, 140, 3, dtype=_F32, device=device)
    X = T.solve_triangular(A.mT, B, upper=False)
    _check_solution(X, torch.linalg.solve_triangular(_ref(A.mT), _ref(B), upper=False), A.mT, _F32)


def test_solve_triangular_one_matrix_from_host(device, monkeypatch):
    """One matrix above HOST_ONE_N rows takes the host path (two or more: the kernel), each side."""
    monkeypatch.setattr(T, "HOST_ONE_N", 20)
    monkeypatch.setattr(T, "HOST_BLOCK", 12)
    calls = []
    host = T._host_blocked
    monkeypatch.setattr(T, "_host_blocked", lambda *a: calls.append(a[1].shape[0]) or host(*a))
    for nb, (upper, left, unit) in zip([1, 2, 1], TRI_FORMS):
        _check_triangular_solve(nb, 30, 5, upper, left, unit, _F32, device, b_view=nb == 2)
    assert calls == [1, 1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs of the host path: CUDA only")
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_host_graph_replays(left, device, monkeypatch):
    """From the second call on the same inputs on, the host path replays a CUDA graph that reads
    them where they lie: a replay follows what A and B hold now (changed in place), does not
    overwrite an earlier result, replays under inference mode and on another stream; other
    inputs get their own solutions."""
    monkeypatch.setattr(T, "_GRAPHS", T.GraphCache())
    monkeypatch.setattr(T, "HOST_BLOCK_N", 100)
    monkeypatch.setattr(T, "HOST_BLOCK", 64)
    A = _triangular((1,), 150, _F32, True, device)
    B = rand(1, 150, 9, dtype=_F32, device=device)
    B = B if left else B.mT.contiguous()
    solve = lambda: T.solve_triangular(A, B, upper=True, left=left)  # noqa: E731
    ref = lambda: torch.linalg.solve_triangular(_ref(A), _ref(B), upper=True, left=left)  # noqa: E731
    outs = [(solve(), ref())]
    with torch.inference_mode():
        outs.append((solve(), ref()))  # captured here
    assert any(isinstance(v, list) for v in T._GRAPHS.entries.values())
    B.mul_(-2)
    A.diagonal(dim1=-2, dim2=-1).add_(1)
    outs.append((solve(), ref()))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        B.add_(1)
        outs.append((solve(), ref()))
    torch.cuda.current_stream().wait_stream(side)
    B = rand(*B.shape, dtype=_F32, device=device)
    outs.append((solve(), ref()))
    for X, R in outs:
        _check_solution(X, R, A, _F32)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs: CUDA only")
def test_graph_cache_cycling_past_keep_does_not_capture_every_pass(device):
    """Three input sets cycled through a cache that keeps two graphs: a dropped graph's key runs
    directly for its next DROPPED_WAIT calls, so the captures are a few (4 in 12 passes; 10 when
    a dropped key was captured again on its next call but one); a waiting key called on its own
    is captured once more, then replays; every result right."""
    cache = T.GraphCache()
    captures = []

    def fn(a):
        captures.append(torch.cuda.is_current_stream_capturing())
        return (a * 2 + 1,)
    xs = [rand(64, device=device) for _ in range(3)]
    for _ in range(12):
        for x in xs:
            torch.testing.assert_close(cache("k", fn, x, 2, by_address=True)[0], x * 2 + 1)
    assert sum(captures) <= 6, sum(captures)
    waiting = [k for k, v in cache.entries.items() if isinstance(v, int)]
    assert len(waiting) == 1, cache.entries
    x = next(x for x in xs if x.data_ptr() == waiting[0][1][0][0])
    kinds = []
    for _ in range(cache.DROPPED_WAIT + 4):
        calls = len(captures)
        x.add_(1)
        torch.testing.assert_close(cache("k", fn, x, 2, by_address=True)[0], x * 2 + 1)
        kinds.append("replay" if len(captures) == calls else "capture" if captures[-1] else "direct")
    assert kinds[0] == "direct" and kinds.count("capture") == 1 and kinds[-1] == "replay", kinds


@pytest.mark.parametrize("n,left,lu", [(7, True, False), (7, False, True), (40, True, True), (40, False, True)])
def test_wide_right_hand_sides_in_column_slices(n, left, lu, device, monkeypatch):
    """Right-hand sides whose column offsets would pass int32 (left=False: B's column stride is
    n) or whose column blocks would pass the grid's limit are solved in column slices: the
    limits lowered so that 3 x n x 37 complex64 systems take several; T batch-innermost."""
    monkeypatch.setattr(T, "INT32_END", 16 * n)
    monkeypatch.setattr(T, "GRID_Y_MAX", 1)  # at most 16 columns a launch
    B = rand(3, *((n, 37) if left else (37, n)), dtype=torch.complex64, device=device)
    B3 = B if left else B.mT  # (what the kernels see: left=False solves the transposed system)
    assert 1 < T._columns_per_call(n, 37, B3, B3) <= (16 if left else 8)
    if lu:
        A = rand(3, n, n, dtype=torch.complex64, device=device) + 3 * n ** 0.5 * torch.eye(n, device=device)
        X = L.lu_solve(*torch.linalg.lu_factor(A), B, left=left)
        ref = torch.linalg.solve(_ref(A), _ref(B), left=left)
    else:
        A = _triangular((3,), n, torch.complex64, False, device)
        A_inner = A.permute(1, 2, 0).contiguous().permute(2, 0, 1)  # the batch stride is 1
        X = T.solve_triangular(A_inner, B, upper=False, left=left)
        ref = torch.linalg.solve_triangular(_ref(A), _ref(B), upper=False, left=left)
    _check_solution(X, ref, A, torch.complex64)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="issue-sized batches only where the kernels run compiled")
@pytest.mark.parametrize("dtype,n,batch", [(torch.complex64, 256, 64), (torch.float32, 500, 9),
                                           (torch.float64, 129, 3), (torch.float32, 4, 100_000)])
def test_issue_sizes(dtype, n, batch, device):
    A = rand(batch, n, n, dtype=dtype, device=device)
    LU, piv, info = L.lu_factor_ex(A)
    assert (info == 0).all()
    assert _reconstruct(LU, piv, A) <= 8 * n * EPS[dtype]
    B = rand(batch, n, 7, dtype=dtype, device=device)
    for adjoint in (False, True):
        X = L.lu_solve(LU, piv, B, adjoint=adjoint)
        ref = torch.linalg.solve(_ref(A).mH if adjoint else _ref(A), _ref(B))  # float64 on the CPU
        _check_solution(X, ref, A, dtype)
    T2 = _triangular((1,), 2100, torch.float32, True, device)[0]  # host blocks
    B2 = rand(2100, 300, device=device)
    X2 = T.solve_triangular(T2, B2, upper=True)
    _check_solution(X2, torch.linalg.solve_triangular(_ref(T2), _ref(B2), upper=True), T2, torch.float32)


def test_fused_reductions(device, monkeypatch):
    """The multi-operand tl.reduce the GPU build uses (the interpreter takes separate sums)."""
    from triton import language as tl

    from fastpath.ops.linalg import tiles
    A = rand(3, 7, 7, dtype=torch.complex64, device=device)
    ref = L.lu_factor_ex(A)
    monkeypatch.setattr(tiles, "FUSED_REDUCE", tl.constexpr(True))
    out = L.lu_factor_ex(A)
    assert all(torch.equal(a, b) for a, b in zip(out, ref))  # picks add zeros: bit-identical


# ---------------------------------------------------------------------------- paths, errors, ops

def test_reference_paths(device):
    """One large matrix and inputs that need gradients go to torch.linalg (autograd works)."""
    A = rand(300, 300, dtype=torch.float64, device=device)
    LU, piv, _ = L.lu_factor_ex(A)
    assert _reconstruct(LU, piv, A) < 1e-13
    A = rand(2, 4, 4, dtype=torch.float64, device=device).requires_grad_()
    L.det(A).sum().backward()
    assert A.grad is not None and A.grad.shape == A.shape
    A = rand(3, 3, dtype=torch.float64, device=device)
    torch.testing.assert_close(L.det(A.half().double()), torch.linalg.det(A.half().double()))


def test_errors(device):
    A = rand(3, 3, device=device)
    LU, piv = L.lu_factor(A)
    with pytest.raises(TypeError, match="A: .*float16"):
        L.lu_factor(A.half())
    with pytest.raises(TypeError, match="A: .*int64"):
        L.det(torch.ones(3, 3, dtype=torch.int64, device=device))
    with pytest.raises(TypeError, match="A: expected a torch.Tensor"):
        L.slogdet([[1.0]])
    with pytest.raises(ValueError, match="A: .*square"):
        L.det(rand(3, 4, device=device))
    with pytest.raises(ValueError, match="A: .*square"):
        T.solve_triangular(rand(3, 4, device=device), rand(3, 1, device=device), upper=True)
    with pytest.raises(ValueError, match="A: "):
        L.lu_factor(rand(3, device=device))
    with pytest.raises(ValueError, match="LU: .*square"):
        L.lu_solve(LU[:, :2], piv, rand(3, 1, device=device))
    with pytest.raises(TypeError, match="pivots: .*int32"):
        L.lu_solve(LU, piv.long(), rand(3, 1, device=device))
    with pytest.raises(ValueError, match="pivots: .*shape"):
        L.lu_solve(LU, piv[:2], rand(3, 1, device=device))
    with pytest.raises(TypeError, match="B: .*float64"):
        L.lu_solve(LU, piv, rand(3, 1, dtype=torch.float64, device=device))
    with pytest.raises(ValueError, match="B: .*n = 3"):
        L.lu_solve(LU, piv, rand(4, 1, device=device))
    with pytest.raises(ValueError, match="B: .*at least 2"):
        L.lu_solve(LU, piv, rand(3, device=device))
    with pytest.raises(ValueError, match="B: .*broadcast"):
        T.solve_triangular(rand(2, 3, 3, device=device), rand(4, 3, 1, device=device), upper=False)
    with pytest.raises(ValueError, match="B: .*n = 3"):
        T.solve_triangular(A, rand(2, 4, device=device), upper=False, left=False)
    with pytest.raises(TypeError, match="upper: expected a bool"):
        T.solve_triangular(A, A, upper=None)
    with pytest.raises(TypeError, match="pivot: expected a bool"):
        L.lu_factor(A, pivot=1)


def test_registered_ops(device):
    """The torch.library registrations (fake shapes, schema) pass torch's own op checks."""
    A = rand(2, 3, 3, dtype=torch.float64, device=device)
    B = rand(4, 1, 3, 2, dtype=torch.float64, device=device)
    LU, piv = L.lu_factor(A)
    utils = ("test_schema", "test_faketensor")
    torch.library.opcheck(L._lu_factor_ex_op.op, (A, True), test_utils=utils)
    torch.library.opcheck(L._lu_solve_op.op, (LU, piv, B, True, False), test_utils=utils)
    torch.library.opcheck(L._det_op.op, (A,), test_utils=utils)
    torch.library.opcheck(L._slogdet_op.op, (A,), test_utils=utils)
    torch.library.opcheck(T._solve_triangular_op.op, (A, B, True, True, False), test_utils=utils)


@pytest.mark.parametrize("n,dtype", [(4, torch.float32), (4, torch.complex64), (13, torch.float32),
                                     (13, torch.complex64), (40, torch.complex64)])  # in registers; blocked
def test_lu_nonfinite_propagates(n, dtype, device):
    """A NaN anywhere gives a NaN determinant and log|det| (sign 0) as torch.linalg does, and
    the pivots stay valid LAPACK pivots (i <= piv_i <= n). The in-register LU once picked a
    row above the diagonal when the candidates were NaN: det 0.9999 for a matrix with a NaN."""
    A = rand(4, n, n, dtype=dtype, device="cpu")
    A[0, 1, 1] = float("nan")
    A[1, n - 1, n - 1] = float("nan")
    A[2, :, 0] = float("nan")
    A[3, :, 1] = 0.0
    A[3, 2, 1] = float("nan")
    A = A.to(device)
    LU, piv, info = L.lu_factor_ex(A)
    i = torch.arange(1, n + 1, dtype=piv.dtype, device=piv.device)
    assert ((piv >= i) & (piv <= n)).all()
    assert L.det(A).isnan().all()
    sign, logabs = L.slogdet(A)
    assert logabs.isnan().all() and ((sign == 0) | sign.isnan()).all()
    B = rand(2, n, n, dtype=dtype, device=device)
    ok_det = L.det(B)  # finite neighbours unchanged
    assert torch.isfinite(torch.view_as_real(ok_det) if ok_det.is_complex() else ok_det).all()


# (from_mem, columns a program): the tile form (False) takes all of a block's columns
@pytest.mark.parametrize("from_mem,cb", [(2, None), (True, None), (False, None), (2, 4), (True, 4), (2, 16),
                                         (True, 16), (3, None), (3, 4)])
@pytest.mark.parametrize("n,k,form,dtype", [(40, 20, 0, _C64), (70, 5, 1, _F32), (40, 20, 2, _F64), (70, 5, 3, _C64)])
def test_solve_triangular_diag_inverses(n, k, form, dtype, from_mem, cb, device, monkeypatch):
    """The blocked path's diagonal-block inverses in each form (triangular.DIAG_PLAN: M's columns
    read from memory at each step, in one layout (2; 3: the block loaded first) or not, or picked out
    of the tile; one warp a program), from memory in column blocks of ``cb`` too (each starting at its
    first nonzero row; DIAG_PLAN's fourth entry), against the float64 solve: each form (upper / lower,
    left / right, unit or not), blocks padded past n."""
    monkeypatch.setitem(T.DIAG_PLAN, dtype, (from_mem, 1, None, cb))
    monkeypatch.setattr(T, "DIAG_FEW_BLOCKS", 0)  # (small test batches: the plan above, not the few-block one)
    test_solve_triangular(n, k, *TRI_FORMS[form], dtype, device)


@pytest.mark.parametrize("from_mem", [2, True])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_diag_inverses_two_blocks(adjoint, from_mem, device, monkeypatch):
    """Both triangles' diagonal-block inverses (lu_solve's two passes, conjugated for the
    adjoint) read from memory (in one layout or not), two blocks a program, against the float64
    solve (and the tile form in test_lu_solve)."""
    monkeypatch.setitem(T.DIAG_PLAN, _C64, (from_mem, 2, 2, None))
    monkeypatch.setattr(T, "DIAG_FEW_BLOCKS", 0)  # (small test batches: the plan above, not the few-block one)
    test_lu_solve(70, 20, True, adjoint, _C64, device)


@pytest.mark.parametrize("from_mem", [2, 3, True])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_diag_inverse_columns(adjoint, from_mem, device, monkeypatch):
    """lu_solve's two passes' inverses side by side in column blocks, two blocks a program."""
    monkeypatch.setitem(T.DIAG_PLAN, _C64, (from_mem, 1, 2, 8))
    monkeypatch.setitem(T.DIAG_PLAN, _F32, (from_mem, 1, None, 16))
    monkeypatch.setattr(T, "DIAG_FEW_BLOCKS", 0)  # (small test batches: the plans above, not the few-block one)
    test_lu_solve(70, 20, True, adjoint, _C64, device)
    test_lu_solve(70, 3, False, adjoint, _F32, device)


@pytest.mark.parametrize("words", [True, False])
@pytest.mark.parametrize("from_mem", [2, 3])
def test_diag_inverse_word_pairs(from_mem, words, device, monkeypatch):
    """Complex diagonal-block inverses moving (re, im) word pairs (``triangular.DIAG_WORDS``: a step's
    column one load a lane, the inverse's rows stored as runs of words) or not, in one layout with and
    without the block loaded first: each solve_triangular form (transposed views, unit or not, padded
    blocks) and lu_solve's two passes (conjugated for the adjoint) against the float64 solve."""
    monkeypatch.setattr(T, "DIAG_WORDS", words)
    monkeypatch.setitem(T.DIAG_PLAN, _C64, (from_mem, 1, None, 8))
    monkeypatch.setattr(T, "DIAG_FEW_BLOCKS", 0)  # (small test batches: the plan above, not the few-block one)
    for form in TRI_FORMS:
        test_solve_triangular(40, 20, *form, _C64, device)
    for adjoint in (False, True):
        test_lu_solve(70, 20, True, adjoint, _C64, device)


@pytest.mark.parametrize("few_form,trans", [(1, False), (1, True), (2, False)])
@pytest.mark.parametrize("n,k,form,dtype", [(70, 1, 0, _C64), (70, 3, 1, _F32), (140, 2, 2, _C64), (40, 1, 3, _F64)])
def test_solve_triangular_few_form(n, k, form, dtype, few_form, trans, device, monkeypatch):
    """The few-right-hand-side sweeps (triangular.FEW_PLAN: products and sums on the FMA units,
    complex entries as (re, im) pairs, k padded to a power of two; form 1 with M's chunks along
    rows or (FEW_TRANS_MIN_K, a column-major M: left=False's A^T, or A stored so) transposed, or
    form 2, every tensor 3-D) against the float64 solve: each form, blocks padded past n, several
    chunks a block."""
    monkeypatch.setitem(T.FEW_PLAN, _F32, (32, 32, 4, 4, few_form))
    monkeypatch.setitem(T.FEW_PLAN, _F64, (32, 16, 4, 4, few_form))
    monkeypatch.setitem(T.FEW_PLAN, _C64, (32, 64, 4, 4, few_form))
    monkeypatch.setattr(T, "FEW_TRANS_MIN_K", {dt: 1 if trans else 99 for dt in (_F32, _F64, _C64)})
    upper, left, unit = TRI_FORMS[form]
    test_solve_triangular(n, k, upper, left, unit, dtype, device)
    A = _triangular((2,), n, dtype, upper, device).mT.contiguous().mT  # column-major storage
    B = rand(2, n, k, dtype=dtype, device=device)
    X = T.solve_triangular(A, B, upper=upper)
    _check_solution(X, torch.linalg.solve_triangular(_ref(A), _ref(B), upper=upper), A, dtype)


@pytest.mark.parametrize("few_form,trans", [(1, False), (1, True), (2, False)])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_few_form(adjoint, few_form, trans, device, monkeypatch):
    """lu_solve's two sweeps (row map in and out, conjugated for the adjoint) in each few form,
    torch's column-major factors read along rows or transposed (form 1)."""
    monkeypatch.setattr(T, "FEW_TRANS_MIN_K", {_F32: 1 if trans else 99, _C64: 1 if trans else 99})
    for dt in (_F32, _C64):
        monkeypatch.setitem(T.FEW_PLAN, dt, T.FEW_PLAN[dt][:4] + (few_form,))
    test_lu_solve(70, 1, True, adjoint, _C64, device)
    test_lu_solve(70, 3, False, adjoint, _C64, device)
    test_lu_solve(70, 2, True, adjoint, _F32, device)


def _word_forms(monkeypatch, call):
    """``call()`` with the blocked sweep's (re, im) tiles, then with the right-hand sides' tiles as runs of
    words (``triangular.XW_LOADS``): the two results, which must agree bit for bit."""
    out = []
    for xw in (False, True):
        monkeypatch.setattr(T, "XW_LOADS", xw)
        out.append(call())
    assert torch.equal(out[0], out[1])
    return out[0]


@pytest.mark.parametrize("adjoint,own_factors", [(False, False), (True, False), (False, True), (True, True)])
def test_lu_solve_word_tiles(adjoint, own_factors, device, monkeypatch):
    """Complex tiles of the blocked sweep moved as runs of words (``triangular.XW_LOADS``: right-hand sides
    of unit stride along a row; our row-major factors or torch's column-major ones, and the adjoint's
    transposed view of each): the same solutions bit for bit as the (re, im) tiles, through the row map in
    and out (the adjoint), two row blocks with padding and two column blocks (k = 20 and 36); column-major B
    keeps the (re, im) form; solve_triangular's forms."""
    monkeypatch.setattr(T, "XW_MIN_KB", 16)
    A = _pivoted_well_conditioned(2, 70, _C64, device)
    LU, piv = L.lu_factor(A) if own_factors else torch.linalg.lu_factor(A)
    for B in (rand(2, 70, 20, dtype=_C64, device=device), rand(2, 70, 36, dtype=_C64, device=device),
              rand(2, 36, 70, dtype=_C64, device=device).mT):
        X = _word_forms(monkeypatch, lambda: L.lu_solve(LU, piv, B, adjoint=adjoint))
        Ah = _ref(A).mH if adjoint else _ref(A)
        _check_solution(X, torch.linalg.solve(Ah, _ref(B)), A, _C64)
    if adjoint or own_factors:
        return
    for upper, left, unit in TRI_FORMS:
        M = _triangular((2,), 40, _C64, upper, device) / (3 * 40 ** 0.5 if unit else 1)
        B = rand(2, 40, 20, dtype=_C64, device=device) if left else rand(2, 20, 40, dtype=_C64, device=device)
        _word_forms(monkeypatch, lambda: T.solve_triangular(M, B, upper=upper, left=left, unitriangular=unit))


@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")  # (the singular member, as torch)
@pytest.mark.parametrize("n,k,left,vector,dtype", [(40, 20, True, False, _C64), (40, 3, False, False, _F32),
                                                     (70, 1, True, True, _C64), (12, 24, True, False, _F32)])
def test_solve_via_lu(n, k, left, vector, dtype, device, monkeypatch):
    """``small.SOLVE_VIA_LU``: solve_ex past the small kernel (n or k above 16) through fastpath's
    lu_factor_ex and lu_solve: torch's solutions (left and right, a vector B, batches broadcast) and
    torch's ``info`` for a singular member."""
    from fastpath.ops.linalg import small as S
    monkeypatch.setattr(S, "SOLVE_VIA_LU", True)
    A = _pivoted_well_conditioned(2, n, dtype, device)
    shape = (2, n) if vector else ((3, 1, n, k) if left else (3, 1, k, n))  # (a vector: A.shape[:-1])
    B = rand(*shape, dtype=dtype, device=device)
    X, info = S.solve_ex(A, B, left=left)
    _check_solution(X, torch.linalg.solve(_ref(A), _ref(B), left=left), A, dtype)
    assert info.shape == (2,) and not info.any()
    A1 = A.clone()
    A1[1, :, n // 2] = 0  # singular: torch's info is the first zero pivot
    _, info1 = S.solve_ex(A1, B, left=left)
    assert torch.equal(info1.cpu(), torch.linalg.lu_factor_ex(_ref(A1)).info.to(torch.int32))
    assert info1[1] > 0


@pytest.mark.launch_memo
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch memo replays compiled CUDA kernels")
@pytest.mark.parametrize("k,dtype", [(1, _C64), (3, _F32), (40, _C64)])
def test_lu_solve_memo_replay(k, dtype, monkeypatch):
    """Eager lu_solve calls after the first with the same tensor properties replay its launches
    (lu.MEMO; the diagonal-block inverses and the sweep, with cached buffers): fresh factors and
    right-hand sides give fresh, correct solutions."""
    monkeypatch.setattr(L, "MEMO", True)
    dev = torch.device("cuda")
    L._LU_SOLVE_MEMO.entries.clear()
    outs = []
    for _ in range(3):
        A = _pivoted_well_conditioned(4, 70, dtype, dev)
        B = rand(4, 70, k, dtype=dtype, device=dev)
        LU, piv = torch.linalg.lu_factor(A)
        X = L.lu_solve(LU, piv, B)
        _check_solution(X, torch.linalg.solve(_ref(A), _ref(B)), A, dtype)
        outs.append(X)
    assert len({o.data_ptr() for o in outs}) == 3
    assert any(v is not None for v in L._LU_SOLVE_MEMO.entries.values())  # recorded, then replayed


def _spy_linalg(monkeypatch, *names):
    """The calls of these torch.linalg functions from here on, as (name, shape of the first argument)."""
    calls = []
    for name in names:
        def wrapped(*args, _fn=getattr(torch.linalg, name), _name=name, **kwargs):
            calls.append((_name, tuple(args[0].shape)))
            return _fn(*args, **kwargs)
        monkeypatch.setattr(torch.linalg, name, wrapped)
    return calls


@pytest.mark.route_by_speed
def test_torch_route_a_matrix_at_a_time(device, monkeypatch):
    """Small batches of large matrices on torch's path go a matrix at a time (LOOP_BATCHES: here up
    to 6 of 40 rows, 2 of 30; torch's lu_factor_ex on each, its factors bit for bit, info of a
    singular one included); a single matrix, more matrices, smaller or rectangular ones and
    pivot=False take one batched call."""
    monkeypatch.setattr(L, "LOOP_DEVICES", (device.type,))
    monkeypatch.setattr(L, "LOOP_BATCHES", ((40, 6), (30, 2)))
    factor_ex = torch.linalg.lu_factor_ex
    calls = _spy_linalg(monkeypatch, "lu_factor_ex")
    A = _pivoted_well_conditioned(6, 40, _C64, device).view(3, 2, 40, 40)
    A[1, 0, :, 7] = 0  # singular: info 8
    LU, piv, info = L.lu_factor_ex(A)
    assert calls == [("lu_factor_ex", (40, 40))] * 6
    refs = [factor_ex(a) for a in A.view(6, 40, 40)]
    for got, want in zip((LU, piv, info), zip(*refs)):
        assert torch.equal(got, torch.stack(want).view(got.shape))
    assert info[1, 0] == 8 and info.count_nonzero() == 1
    assert _reconstruct(LU.view(6, 40, 40), piv.view(6, 40), A.view(6, 40, 40)) <= 8 * 40 * EPS[_C64]
    C = A[:, :, :30, :30]
    calls.clear()
    L.lu_factor_ex(C[0])
    assert calls == [("lu_factor_ex", (30, 30))] * 2
    for B, kw in ((A[:1, :1], {}), (A[..., :39], {}), (A, {"pivot": False}), (torch.cat([A, A[:1]]), {}),
                  (C[:2], {}), (A[..., :29, :29], {})):
        calls.clear()
        if device.type == "cpu" and kw:  # (torch: pivot=False on CUDA only)
            continue
        out = L.lu_factor_ex(B, **kw)
        assert calls == [("lu_factor_ex", tuple(B.shape))]  # (pivot=False: the singular member's L holds 0/0)
        torch.testing.assert_close(out[0], factor_ex(B, **kw).LU, rtol=0, atol=0, equal_nan=True)


@pytest.mark.route_by_speed
def test_solve_ex_factors_a_matrix_at_a_time(device, monkeypatch):
    """solve_ex of 2 systems of 512 rows with 3 right-hand sides (torch's solve would be the faster):
    factored as lu_factor_ex does it, a matrix at a time (not torch's batched solve_ex), then
    torch's lu_solve; torch's solutions and info, a singular member included."""
    from fastpath.ops.linalg import small as S
    monkeypatch.setattr(L, "LOOP_DEVICES", (device.type,))
    A = _pivoted_well_conditioned(2, 512, _F32, device)
    A[0, :, 100] = 0
    B = rand(2, 512, 3, dtype=_F32, device=device)
    calls = _spy_linalg(monkeypatch, "lu_factor_ex", "lu_solve", "solve_ex")
    X, info = S.solve_ex(A, B)
    assert calls == [("lu_factor_ex", (512, 512))] * 2 + [("lu_solve", (2, 512, 512))]
    assert torch.equal(info.cpu(), torch.linalg.lu_factor_ex(_ref(A)).info.to(torch.int32)) and info[0] > 0
    _check_solution(X[1:], torch.linalg.solve(_ref(A[1:]), _ref(B[1:])), A[1:], _F32)


@pytest.mark.route_by_speed
def test_route_by_speed(device, monkeypatch):
    """``lu.ROUTE_BY_SPEED`` (on by default; the other tests turn it off to check the kernels on small
    shapes): lu_factor_ex, lu_solve and solve_ex past the small kernel take torch.linalg's path on the
    shapes where it was measured faster (``lu.factor_faster`` / ``lu.solve_faster``) and the kernels
    elsewhere; both give torch's answers."""
    from fastpath.ops.linalg import small as S
    factor_ex, solve = torch.linalg.lu_factor_ex, torch.linalg.lu_solve
    calls = _spy_linalg(monkeypatch, "lu_factor_ex", "lu_solve", "solve_ex")
    called = lambda: [name for name, _ in calls]  # noqa: E731
    # up to SMALL_N rows: torch's factorisation (0.14-0.90x); its factors, bit for bit
    A = _pivoted_well_conditioned(3, 12, _C64, device)
    LU, piv, info = L.lu_factor_ex(A)
    assert called() == ["lu_factor_ex"]
    ref = factor_ex(A)
    assert torch.equal(LU, ref.LU) and torch.equal(piv, ref.pivots) and not info.any()
    # ... and lu_factor there is torch's own call, its own check (no Python between its sync and the return)
    own = _spy_linalg(monkeypatch, "lu_factor")
    assert torch.equal(L.lu_factor(A).LU, ref.LU) and own == [("lu_factor", (3, 12, 12))]
    A1 = A.clone()
    A1[1, :, 4] = 0
    with pytest.raises(torch.linalg.LinAlgError, match=r"^torch.linalg.lu_factor: \(Batch element 1\): U\[5,5\] is "):
        L.lu_factor(A1)  # (torch raises a RuntimeError; fastpath's paths all the LinAlgError subclass)
    # a few systems of a few rows: fastpath's lu_solve (2.5x at one 16x16 system)
    B = rand(3, 12, 2, dtype=_C64, device=device)
    X = L.lu_solve(LU, piv, B)
    assert called() == ["lu_factor_ex"]
    _check_solution(X, torch.linalg.solve(_ref(A), _ref(B)), A, _C64)
    # 2048 systems or more: torch's lu_solve (4096: 0.29-0.98x), before fastpath's checks
    A2 = _pivoted_well_conditioned(2048, 3, _F32, device)
    LU2, piv2, _ = factor_ex(A2)
    B2 = rand(2048, 3, 1, dtype=_F32, device=device)
    X2 = L.lu_solve(LU2, piv2, B2)
    assert called() == ["lu_factor_ex", "lu_solve"] and torch.equal(X2, solve(LU2, piv2, B2))
    with pytest.raises(TypeError, match="left"):  # a non-bool left: fastpath's checks, not a routed call
        L.lu_solve(LU2, piv2, B2, left=1)
    assert called() == ["lu_factor_ex", "lu_solve"]
    # solve_ex past the small kernel where lu_solve's kernels serve: torch's factors, fastpath's solve
    del calls[:]
    A3 = _pivoted_well_conditioned(2, 20, _F32, device)
    B3 = rand(2, 20, 3, dtype=_F32, device=device)
    X3, info3 = S.solve_ex(A3, B3)
    assert called() == ["lu_factor_ex"] and not info3.any()
    _check_solution(X3, torch.linalg.solve(_ref(A3), _ref(B3)), A3, _F32)
    # ... and torch's solve_ex where neither would be ours (2048 systems)
    del calls[:]
    A4 = _pivoted_well_conditioned(2048, 20, _F32, device)
    B4 = rand(2048, 20, 1, dtype=_F32, device=device)
    X4 = S.solve_ex(A4, B4).result
    assert called() == ["solve_ex"]
    _check_solution(X4, torch.linalg.solve(_ref(A4), _ref(B4)), A4, _F32)
    # 16 complex systems of 1024 rows with 16 right-hand sides: torch's lu_solve (ours 0.54x)
    A5 = rand(16, 1024, 1024, dtype=_C64, device=device) + 64 * torch.eye(1024, device=device)
    LU5, piv5, _ = factor_ex(A5)
    B5 = rand(16, 1024, 16, dtype=_C64, device=device)
    del calls[:]
    X5 = L.lu_solve(LU5, piv5, B5)
    assert called() == ["lu_solve"] and torch.equal(X5, solve(LU5, piv5, B5))


@pytest.mark.skipif(INTERPRET, reason="the GPU's form of the fault; the interpreter's: the test below")
def test_lu_factor_last_panel_reads_no_row_past_m():
    """A last panel of fewer rows than the panel width (48 = 32 + 16) named, as the interchange
    sources of its 16 unused rows, rows 48-63, and the step kernel read them: past the tensor for the
    last matrix. 4096 float32 48x48 matrices (36 MiB: an allocation ending on the allocator's 2 MiB
    boundary) after 512 faulted twice on the H100 (illegal address, fifty-sixth session)."""
    for b in (512, 4096):
        A = torch.randn(b, 48, 48, device="cuda") + 2 * 48 ** 0.5 * torch.eye(48, device="cuda")
        LU, piv, info = L.lu_factor_ex(A)
        ref = torch.linalg.lu_factor_ex(A)
        torch.cuda.synchronize()
        assert torch.equal(piv, ref.pivots) and not info.any()
        assert (LU - ref.LU).abs().max().item() < 1e-4


@pytest.mark.skipif(not INTERPRET, reason="the interpreter's bounds checks (tests/bounds.py); on a GPU: the test above")
@pytest.mark.parametrize("n,dtype", [(48, _F32), (40, _C64)])
def test_lu_factor_reads_inside_its_tensors(n, dtype, device):
    """The blocked LU (its step kernel, its panels) of matrices whose last panel is partial touches
    nothing outside its tensors: every access of every program checked (tests/bounds.py). Before the
    fix the step read rows n..next panel of the last matrix (BoundsError: 4 bytes past the end)."""
    from tests.bounds import checking
    A = _pivoted_well_conditioned(8, n, dtype, device)
    with checking():
        LU, piv, info = L.lu_factor_ex(A)
    ref = torch.linalg.lu_factor_ex(A)
    assert torch.equal(piv, ref.pivots) and not info.any()
    assert (LU - ref.LU).abs().max().item() < 1e-4
