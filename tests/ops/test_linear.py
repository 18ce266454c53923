"""linear (GEMV path for <= 16 rows, F.linear beyond) and its FP8 weight-only variant, against
float64 references, through the public API (compiled on a GPU, interpreted on the CPU)."""
import math
import sys

import pytest
import torch

from fastpath._core import backend
from fastpath.ops import linear as L
from fastpath.ops import matvec
from tests.conftest import noncontig, randn
from tests.tolerances import assert_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HAS_FP8 = hasattr(torch, "float8_e4m3fn")
needs_fp8 = pytest.mark.skipif(not HAS_FP8, reason="torch has no float8_e4m3fn")


def ref64(x, w, b=None, scale=None):
    wd = w.double() if scale is None else w.double() * scale.double().reshape(-1, 1)
    y = x.double() @ wd.t()
    return y + b.double() if b is not None else y


def sqnr_db(out, ref):
    out, ref = out.double().cpu(), ref.double().cpu()
    return 10 * math.log10(ref.pow(2).sum().item() / max((out - ref).pow(2).sum().item(), 1e-300))


@pytest.fixture
def split_k(monkeypatch):
    def force(n):
        monkeypatch.setattr(matvec, "SPLIT_K_OVERRIDE", n)
    return force


def _rows_shape(rows, k):
    return {1: (1, 1, k), 3: (3, 1, k), 16: (16, k), 17: (17, k), 66: (3, 22, k), 300: (3, 100, k)}[rows]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,k,n", [(r, k, n) for r in (1, 3, 16) for k, n in ((13, 67), (200, 13), (1000, 67))]
                         + [(16, 5, 13), (17, 200, 13), (300, 67, 13)])  # > 16 rows: F.linear
@pytest.mark.parametrize("bias", [True, False])
def test_linear(dtype, rows, k, n, bias, device):
    x = randn(*_rows_shape(rows, k), dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k ** -0.5)
    b = randn(n, dtype=dtype, device=device) if bias else None
    out = L.linear(x, w, b)
    assert out.dtype == dtype and out.shape == (*x.shape[:-1], n)
    assert_close(out, ref64(x, w, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split", [1, 2, 5, 100])
def test_split_k_forced(dtype, split, split_k, device):
    """SPLIT_K 1 (no split, even where the heuristic splits), 2, 5 (uneven last share) and
    more than K allows (clamped)."""
    split_k(split)
    x = randn(4, 1000, dtype=dtype, device=device)
    w = randn(13, 1000, dtype=dtype, device=device, scale=0.03)
    b = randn(13, dtype=dtype, device=device)
    assert_close(L.linear(x, w, b), ref64(x, w, b))


def test_heuristic_splits_small_n(device):
    """Few output features and a long K: the heuristic splits K (and the result is right)."""
    M, N, K = 2, 13, 1000
    p = matvec.plan(M, N, K, device, None)
    split, k_per = p.split, p.k_chunk
    if device.type == "cpu":
        assert split > 1 and (split - 1) * k_per < K <= split * k_per
    x, w = randn(M, K, device=device), randn(N, K, device=device)
    assert_close(L.linear(x, w), ref64(x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_noncontiguous(dtype, device):
    x = noncontig(randn(3, 200, dtype=dtype, device=device))
    wt = randn(200, 67, dtype=dtype, device=device).t()  # transposed storage: strides (1, 67)
    assert not x.is_contiguous() and wt.stride() == (1, 67)
    b = randn(67, dtype=dtype, device=device)
    assert_close(L.linear(x, wt, b), ref64(x, wt, b))
    w = noncontig(randn(67, 200, dtype=dtype, device=device))  # row stride 400, column stride 2
    x4 = randn(4, 3, 2, 200, dtype=dtype, device=device).permute(2, 0, 1, 3)[:, ::2]  # uncollapsible
    assert_close(L.linear(x4, w), ref64(x4, w))


def test_deterministic(split_k, device):
    split_k(7)
    x, w = randn(5, 1000, device=device), randn(67, 1000, device=device)
    assert torch.equal(L.linear(x, w), L.linear(x, w))


def test_empty_and_k1(device):
    w = randn(13, 7, device=device)
    assert L.linear(randn(0, 7, device=device), w).shape == (0, 13)
    x1, w1, b1 = randn(2, 1, device=device), randn(67, 1, device=device), randn(67, device=device)
    assert_close(L.linear(x1, w1, b1), ref64(x1, w1, b1))


def test_backward(device):
    x = randn(3, 67, device=device).requires_grad_()
    w = randn(13, 67, device=device).requires_grad_()
    b = randn(13, device=device).requires_grad_()
    g = randn(3, 13, device=device)
    L.linear(x, w, b).backward(g)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    torch.nn.functional.linear(xr, wr, br).backward(g)
    for a, r in ((x, xr), (w, wr), (b, br)):
        assert_close(a.grad, r.grad, tol=1e-5)


# ---------------------------------------------------------------------------- FP8 weight-only

def _fp8_weight(n, k, device, scale_shape="col"):
    w = randn(n, k, device=device, scale=k ** -0.5)
    amax = w.abs().amax(1, keepdim=True)
    s = amax / 448.0
    q = (w / s).clamp(-448, 448).to(torch.float8_e4m3fn)
    return w, q, (s if scale_shape == "col" else s.reshape(-1))


@needs_fp8
@pytest.mark.parametrize("decode", ["native", "bits"])
@pytest.mark.parametrize("xdtype", DTYPES)
@pytest.mark.parametrize("rows,k,n", [(1, 1000, 13), (3, 200, 13), (16, 200, 67), (17, 200, 13)])
@pytest.mark.parametrize("route", ["float16", "float32"])  # matvec.FP8_VIA_FP16 on / off
def test_fp8_weight_only(decode, xdtype, rows, k, n, route, monkeypatch, device):
    monkeypatch.setattr(L, "FP8_DECODE", decode)
    if route == "float32":
        monkeypatch.setattr(matvec, "FP8_VIA_FP16", None)
    w, q, s = _fp8_weight(n, k, device, "col" if rows != 3 else "flat")
    x = randn(*_rows_shape(rows, k), dtype=xdtype, device=device)
    b = randn(n, dtype=xdtype, device=device)
    out = L.linear(x, q, b, weight_scale=s)
    assert out.dtype == xdtype and out.shape == (*x.shape[:-1], n)
    # tight: against the float64 product with the dequantised weight
    assert_close(out, ref64(x, q, b, s), tol=L_TOL[xdtype])
    # loose: against the original (unquantised) weight
    assert sqnr_db(out, ref64(x, w, b)) >= 25
    assert_close(L.reference_linear(x, q, b, weight_scale=s), ref64(x, q, b, s), tol=L_TOL[xdtype])


#: The >16-row FP8 path dequantises the weight to x.dtype before cuBLAS: one more rounding.
L_TOL = {torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.2e-2}


@needs_fp8
# 66: (3, 22, K), above scaled_mm.W8_FEW_ROWS = 64 (the many-row blocks, no float16 route, no split),
# three 32-row tiles in the interpreter, the last of 2 rows
@pytest.mark.parametrize("rows", [17, 66])
@pytest.mark.parametrize("xdtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("route", ["tiled", "tiled-bf16", "tiled-unswapped", "tiled-split", "tiled-dequant",
                                   "dequantise"])
def test_fp8_weight_only_many_rows(rows, xdtype, route, monkeypatch, device):
    """FP8 weights above MAX_GEMV_ROWS rows: the tiled kernel's 16-bit-activation mode
    (``scaled_mm.weight_mm``, K and N not multiples of its tiles, a non-contiguous input, bias),
    its one-kernel dequantisation for cuBLAS ("tiled-dequant") or the weight dequantised by
    PyTorch ops for cuBLAS, all against the float64 product."""
    S = sys.modules["fastpath.ops.fp8.scaled_mm"]
    monkeypatch.setattr(L, "FP8_MANY_ROWS", route.split("-")[0])
    monkeypatch.setattr(S, "W8_SWAP", route != "tiled-unswapped")
    monkeypatch.setattr(S, "W8_S16", route == "tiled")
    monkeypatch.setattr(S, "W8_DEQUANT_FROM", 17 if route == "tiled-dequant" else None)
    # split (up to 64 rows): K = 200 in two shares, 128 and 72 (32-wide tiles, a tail of 8)
    monkeypatch.setattr(S, "W8_SPLIT_PER_SM", 2 if route == "tiled-split" else None)
    calls, weight_mm = [], L.weight_mm
    monkeypatch.setattr(L, "weight_mm", lambda *a: calls.append(a[0].shape) or weight_mm(*a))
    w, q, s = _fp8_weight(67, 200, device)
    x = randn(*_rows_shape(rows, 2 * 200), dtype=xdtype, device=device)[..., ::2]  # every other column
    b = randn(67, dtype=xdtype, device=device)
    out = L.linear(x, q, b, weight_scale=s)
    assert calls == ([(rows, 200)] if route != "dequantise" else [])
    assert out.dtype == xdtype and out.shape == (*x.shape[:-1], 67)
    assert_close(out, ref64(x, q, b, s), tol=L_TOL[xdtype])
    assert sqnr_db(out, ref64(x, w, b)) >= 25
    x2 = randn(*x.shape, dtype=xdtype, device=device)  # again: the split's counters are back at zero
    assert_close(L.linear(x2, q, b, weight_scale=s), ref64(x2, q, b, s), tol=L_TOL[xdtype])
    if route == "tiled-dequant":  # the kernel's weight: PyTorch's float32 product, rounded once
        assert torch.equal(S.dequantize_rows(q, s, xdtype), L.dequantize_weight(q, s, xdtype))
        qt = q.t().contiguous().t()  # column-major storage
        assert torch.equal(S.dequantize_rows(qt, s.reshape(-1), xdtype), L.dequantize_weight(q, s, xdtype))


@needs_fp8
@pytest.mark.parametrize("decode", ["native", "bits"])
def test_fp8_every_code(decode, split_k, monkeypatch, device):
    """Every one of the 256 e4m3fn bit patterns through the kernel's decoding (NaN included),
    with K split over programs: row n of the weight repeats code n, so out[n] = 64 * value."""
    monkeypatch.setattr(L, "FP8_DECODE", decode)
    split_k(3)
    codes = torch.arange(256, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    q = codes[:, None].expand(256, 64)  # stride (1, 0): also a broadcast weight
    out = L.linear(torch.ones(1, 64, device=device), q, weight_scale=torch.ones(256, 1, device=device))
    expect = codes.float() * 64
    nan = expect.isnan()
    assert int(nan.sum()) == 2
    assert torch.equal(out[0][~nan], expect[~nan])
    if decode == "native" and backend.INTERPRET:
        return  # the interpreter's own float8 -> float32 conversion reads 0x7F as 480, not NaN
    assert torch.equal(out[0].isnan(), nan)


@needs_fp8
@pytest.mark.parametrize("decode", ["native", "bits"])
@pytest.mark.parametrize("xdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,split", [(1, 1), (1, 3), (3, 2), (16, 1)])
def test_fp8_via_float16(decode, xdtype, rows, split, split_k, monkeypatch, device):
    """The FP8_VIA_FP16 route (a float16 dot; bfloat16 activations scaled per row and tile by a
    power of two): bfloat16 rows whose magnitudes sit far below float16's normal range (2^-30)
    or above its largest value (2^24), spanning 2^12 within the row, and a row of zeros,
    give the float64 product of the dequantised weight (unscaled, they would lose their bits
    to float16 subnormals or overflow)."""
    monkeypatch.setattr(L, "FP8_DECODE", decode)
    monkeypatch.setattr(matvec, "FP8_VIA_FP16", (32, 64, 2))
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_FMA", None)  # one row takes this route too
    split_k(split)
    w, q, s = _fp8_weight(67, 200, device)
    spans = [-30.0, 0.0, 24.0] if xdtype == torch.bfloat16 else [-6.0, 0.0, 3.0]  # float16 x: its range
    row_exp = torch.tensor(spans * 6, device=device)[:rows]
    x = (randn(rows, 200, device=device) * torch.exp2(torch.linspace(-6, 6, 200, device=device))
         * torch.exp2(row_exp)[:, None])
    x = x.to(xdtype)
    if rows > 1:
        x[1] = 0
    plan = matvec.plan(rows, 67, 200, x.device, xdtype, b_bytes=1)
    assert plan.dot is not None and plan.s16 == (xdtype == torch.bfloat16)
    out = L.linear(x, q, weight_scale=s)
    assert_close(out, ref64(x, q, None, s), tol=L_TOL[xdtype])
    if rows > 1:
        assert torch.equal(out[1], torch.zeros_like(out[1]))


def test_fp8_one_row_plan(monkeypatch):
    """fp8 weights, one row: the product-and-sum up to FP8_ONE_ROW_MAX_ELEMS weights, the
    float16 dot above it and for more rows (the plan of a 132-SM GPU, outside the interpreter)."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    dev = torch.device("cuda")
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_BIG", False)
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_NARROW", None)
    small = matvec.plan(1, 5120, 2048, dev, torch.bfloat16, b_bytes=1)
    assert small.dot is None and (small.block_n, small.block_k) == matvec.FP8_ONE_ROW_FMA[:2]
    assert small.stages == matvec.FP8_ONE_ROW_STAGES and small.ksum == matvec.FP8_ONE_ROW_KSUM
    assert matvec.plan(1, 28672, 4096, dev, torch.bfloat16, b_bytes=1).s16
    assert matvec.plan(2, 5120, 2048, dev, torch.bfloat16, b_bytes=1).s16
    # FP8_ONE_ROW_BIG: above the limit too (tiles summed over K at once), never with SwiGLU
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_BIG", True)
    big = matvec.plan(1, 28672, 4096, dev, torch.bfloat16, b_bytes=1)
    assert big.dot is None and big.ksum and big.stages == matvec.FP8_ONE_ROW_STAGES
    assert matvec.plan(1, 28672, 4096, dev, torch.bfloat16, b_bytes=1, glu=True).s16
    assert matvec.plan(1, 5120, 2048, dev, torch.bfloat16, b_bytes=1) == small
    # a row normalised in the kernel: FP8_NORM_ONE_ROW_FMA when set, the plain plan's blocks otherwise
    normed = matvec.plan(1, 5120, 2048, dev, torch.bfloat16, b_bytes=1, norm=True)
    assert (normed.block_n, normed.block_k) == matvec.FP8_ONE_ROW_FMA[:2]
    assert normed.stages == matvec.FP8_NORM_ONE_ROW_STAGES
    monkeypatch.setattr(matvec, "FP8_NORM_ONE_ROW_FMA", (64, 256, 2))
    normed = matvec.plan(1, 5120, 2048, dev, torch.bfloat16, b_bytes=1, norm=True)
    assert normed.dot is None and (normed.block_n, normed.block_k) == (64, 256)
    assert matvec.plan(1, 5120, 2048, dev, torch.bfloat16, b_bytes=1) == small


def test_fp8_one_row_splits(monkeypatch):
    """The product-and-sum plan's split-K count on a 132-SM GPU: the column blocks times the
    count at most its programs per SM (whole waves: rounded down), each split at least
    FP8_ONE_ROW_MIN_K of K; rounded up instead (FP8_ONE_ROW_FILL False), the count that fills
    the GPU at least once."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(matvec, "MIN_K_PER_SPLIT", 512)
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_MIN_K", 1024)
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_NARROW", None)
    dev = torch.device("cuda")
    bn, bk, per_sm = matvec.FP8_ONE_ROW_FMA
    for fill in (True, False):
        monkeypatch.setattr(matvec, "FP8_ONE_ROW_FILL", fill)
        for K, N in ((4096, 2048), (2048, 4096), (4096, 4096), (2048, 5120), (2048, 2048), (4096, 1024), (7168, 2048)):
            blocks, target = -(-N // bn), per_sm * 132
            want = (target // blocks if fill else -(-target // blocks)) if blocks < target else 1
            split = max(1, min(want, K // 1024))
            chunk = -(-(-(-K // split)) // bk) * bk
            p = matvec.plan(1, N, K, dev, torch.bfloat16, b_bytes=1)
            assert (p.dot, p.block_n, p.split, p.k_chunk) == (None, bn, -(-K // chunk), chunk), (K, N, fill)
            assert p.split * blocks <= target or p.split == 1 or not fill


def test_fp8_one_row_narrow_plan(monkeypatch):
    """FP8_ONE_ROW_NARROW on a 132-SM GPU: where the product-and-sum plan's column blocks do not
    fill the GPU, narrower blocks and no split-K; where they do, and with SwiGLU, the plan as before."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_NARROW", (8, 1024))
    dev = torch.device("cuda")
    bn, _, per_sm = matvec.FP8_ONE_ROW_FMA
    for K, N in ((4096, 4096), (2048, 4096), (4096, 2048), (14336, 4096), (4096, 14336), (2048, 151936)):
        p = matvec.plan(1, N, K, dev, torch.bfloat16, b_bytes=1)
        if -(-N // bn) < per_sm * 132:
            assert (p.dot, p.block_n, p.block_k, p.split) == (None, 8, 1024, 1), (K, N)
        else:
            assert p.block_n == bn, (K, N)
    assert matvec.plan(1, 1536, 2048, dev, torch.bfloat16, b_bytes=1, glu=True).block_n == bn
    for on in (False, True):  # under a group norm only with FP8_ONE_ROW_NARROW_GROUP
        monkeypatch.setattr(matvec, "FP8_ONE_ROW_NARROW_GROUP", on)
        assert matvec.plan(1, 2048, 4096, dev, torch.bfloat16, b_bytes=1, group=128).block_n == (8 if on else bn)


@needs_fp8
@pytest.mark.parametrize("k,n", [(1000, 13), (2100, 67)])
def test_fp8_one_row_narrow(k, n, monkeypatch, device):
    """One row of fp8 weights under FP8_ONE_ROW_NARROW (no split-K; on a GPU 8 x 1024 blocks)."""
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_NARROW", (8, 1024))
    w, q, s = _fp8_weight(n, k, device, "col")
    x = randn(1, k, dtype=torch.bfloat16, device=device)
    b = randn(n, dtype=torch.bfloat16, device=device)
    assert_close(L.linear(x, q, b, weight_scale=s), ref64(x, q, b, s), tol=L_TOL[torch.bfloat16])


def test_fp8_via_float16_split_rounds_down(monkeypatch):
    """The float16 route's split-K count stays at or under its programs per SM (4096 -> 14336:
    224 column blocks of 64, 528 programs wanted: 2 splits, not 3; with SwiGLU half as many
    wanted); the 16-bit one-row plans round up, the 16-bit dot at 2-16 rows down (and leaves
    two splits of a short K unsplit)."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_BIG", False)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_FMA", None)
    dev = torch.device("cuda")
    p = matvec.plan(1, 14336, 4096, dev, torch.bfloat16, b_bytes=1)
    assert p.s16 and p.block_n == 64 and p.split == 2
    # with SwiGLU half the programs: 264 wanted, 1 split
    assert matvec.plan(1, 14336, 4096, dev, torch.bfloat16, b_bytes=1, glu=True).split == 1
    monkeypatch.setattr(matvec, "FP8_VIA_FP16_FILL", False)
    assert matvec.plan(1, 14336, 4096, dev, torch.bfloat16, b_bytes=1).split == 3
    bf16 = matvec.plan(1, 4096, 4096, dev, torch.bfloat16)  # 128 blocks of 32, 264 wanted: 3 splits
    assert bf16.split == 3
    monkeypatch.setattr(matvec, "SPLIT_FILL_OVERRIDE", True)
    assert matvec.plan(1, 4096, 4096, dev, torch.bfloat16).split == 2
    monkeypatch.setattr(matvec, "SPLIT_FILL_OVERRIDE", None)
    # 2-16 rows on the 16-bit dot: down (W16_ROWS_FILL), 128 blocks of 32 -> 2 splits; up: 3
    assert [matvec.plan(m, 4096, 4096, dev, torch.bfloat16).split for m in (4, 16)] == [2, 2]
    # ... but not 2 splits of K <= W16_ROWS_UNSPLIT_K (2048 -> 4096); 4 splits stay (2048 -> 2048)
    assert [matvec.plan(m, 4096, 2048, dev, torch.bfloat16).split for m in (2, 16)] == [1, 1]
    assert matvec.plan(4, 2048, 2048, dev, torch.bfloat16).split == 4
    monkeypatch.setattr(matvec, "W16_ROWS_UNSPLIT_K", None)
    assert matvec.plan(4, 4096, 2048, dev, torch.bfloat16).split == 2
    monkeypatch.setattr(matvec, "W16_ROWS_FILL", False)
    assert matvec.plan(4, 4096, 4096, dev, torch.bfloat16).split == 3


def test_w16_one_row_plan(monkeypatch):
    """16-bit weights, one row: the pipelined product-and-sum (W16_ONE_ROW_FMA) up to
    W16_ONE_ROW_MAX_ELEMS weights, without SwiGLU, a row-first norm or (unless
    W16_ONE_ROW_DEFERRED) a deferred one; the 16-row dot otherwise and for more rows."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_FMA", (16, 512, 2, 3))
    monkeypatch.setattr(matvec, "W16_ONE_ROW_MAX_ELEMS", 32 * 2 ** 20)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_DEFERRED", None)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_NARROW", None)
    dev = torch.device("cuda")
    p = matvec.plan(1, 4096, 4096, dev, torch.bfloat16)  # 256 column blocks, 264 wanted: no split
    assert (p.dot, p.block_n, p.block_k, p.stages, p.ksum, p.split) == (None, 16, 512, 3, True, 1)
    assert matvec.plan(1, 2048, 4096, dev, torch.float16).split == 2  # 128 blocks, 264 wanted
    for kw in (dict(glu=True), dict(norm=True), dict(deferred=True), dict(group=128), dict(w16_dot=True)):
        assert matvec.plan(1, 4096, 4096, dev, torch.bfloat16, **kw).stages is None, kw  # not this plan
    assert matvec.plan(1, 14336, 4096, dev, torch.bfloat16).dot is not None  # above the limit
    assert matvec.plan(2, 4096, 4096, dev, torch.bfloat16).dot is not None
    monkeypatch.setattr(matvec, "W16_ONE_ROW_DEFERRED", 2)  # 256 column blocks: within 2 a multiprocessor
    assert matvec.plan(1, 4096, 4096, dev, torch.bfloat16, deferred=True) == p
    assert matvec.plan(1, 5120, 4096, dev, torch.bfloat16, deferred=True).dot is not None  # 320 blocks
    # W16_ONE_ROW_NARROW: 8-column blocks, unsplit, where 16-column ones are fewer than 264
    monkeypatch.setattr(matvec, "W16_ONE_ROW_NARROW", (8, 512))
    q = matvec.plan(1, 2048, 4096, dev, torch.float16)
    assert (q.dot, q.block_n, q.block_k, q.split) == (None, 8, 512, 1)
    assert matvec.plan(1, 6144, 4096, dev, torch.bfloat16).block_n == 16  # 384 blocks: as before


def test_w16_dot_plan_waves(monkeypatch):
    """The plain 16-bit dot: 4 pipeline stages (W16_DOT_FEW) where the grid has at most 1.5
    programs a multiprocessor, 64 x 128 blocks (W16_DOT_WIDE) where 32-column blocks would make
    between one and 1.5 waves of W16_DOT_RESIDENT; neither under SwiGLU."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_FMA", None)
    dev, bf = torch.device("cuda"), torch.bfloat16

    def shape(m, n, k, **kw):
        p = matvec.plan(m, n, k, dev, bf, **kw)
        return p.block_n, p.block_k, p.split, p.stages

    assert shape(4, 14336, 4096) == (64, 128, 1, None)  # 448 blocks of 32 > 396 slots: 224 of 64
    assert shape(1, 14336, 4096)[:3] == (64, 128, 1)  # unsplit (one row rounds splits up: 2)
    assert shape(4, 12288, 4096) == (32, 256, 1, None)  # 384 blocks: one wave
    assert shape(16, 4096, 2048) == (32, 256, 1, 4)  # 128 programs
    assert shape(4, 6144, 4096) == (32, 256, 1, 4)  # 192 programs
    assert shape(4, 4096, 4096) == (32, 256, 2, None)  # 256 programs
    assert shape(4, 14336, 4096, glu=True)[:2] == (32, 256) and shape(4, 4096, 2048, glu=True)[3] is None
    monkeypatch.setattr(matvec, "W16_DOT_WIDE", None)
    monkeypatch.setattr(matvec, "W16_DOT_FEW", None)
    assert shape(4, 14336, 4096)[:2] == (32, 256) and shape(16, 4096, 2048)[3] is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled blocks: the interpreter takes its own small ones")
@pytest.mark.parametrize("rows", [1, 4])
def test_w16_dot_wide_blocks(rows, monkeypatch, device):
    """bf16 rows on the 16-bit dot in W16_DOT_WIDE's blocks (one program a multiprocessor as the
    residency, so that 5000 columns take them on the H200's 132 multiprocessors)."""
    monkeypatch.setattr(matvec, "W16_DOT_RESIDENT", 1)
    monkeypatch.setattr(matvec, "W16_ONE_ROW_FMA", None)
    w = randn(5000, 100, dtype=torch.bfloat16, device=device, scale=0.1)
    x = randn(rows, 100, dtype=torch.bfloat16, device=device)
    b = randn(5000, dtype=torch.bfloat16, device=device)
    assert_close(L.linear(x, w, b), ref64(x, w, b), tol=L_TOL[torch.bfloat16])


@pytest.mark.parametrize("k,n", [(1000, 13), (2100, 67)])
def test_w16_one_row_narrow(k, n, monkeypatch, device):
    """One bf16 row under W16_ONE_ROW_NARROW (no split-K; on a GPU 8 x 512 blocks)."""
    monkeypatch.setattr(matvec, "W16_ONE_ROW_NARROW", (8, 512))
    w = randn(n, k, dtype=torch.bfloat16, device=device, scale=k ** -0.5)
    x = randn(1, k, dtype=torch.bfloat16, device=device)
    assert_close(L.linear(x, w), ref64(x, w, None), tol=L_TOL[torch.bfloat16])


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("k,n", [(1000, 13), (67, 300)])
def test_f32_one_row_ksum(k, n, split, split_k, monkeypatch, device):
    """One float32 row on matvec.F32_ONE_ROW_FMA's product-and-sum (tiles summed over K at once,
    pipelined) against the float64 product, split over K; the plan takes it only for one row of
    float32 weights."""
    monkeypatch.setattr(matvec, "F32_ONE_ROW_FMA", (16, 512, 2, 3))
    split_k(split)
    p = matvec.plan(1, n, k, device, None, b_bytes=4)
    assert p.ksum and p.dot is None and not matvec.plan(2, n, k, device, None, b_bytes=4).ksum
    assert not matvec.plan(1, n, k, device, None, b_bytes=1).ksum  # fp8 weights, float32 rows: not this plan
    w = randn(n, k, device=device, scale=k ** -0.5)
    x, b = randn(1, k, device=device), randn(n, device=device)
    assert_close(L.linear(x, w, b), ref64(x, w, b))


@pytest.mark.parametrize("split", [1, 3])
def test_f32_one_row_swiglu(split, split_k, monkeypatch, device):
    """One float32 row through SwiGLU on the one-row product-and-sum (matvec.F32_ONE_ROW_GLU):
    gate and up summed alike, against silu(gate) * up of the float64 product."""
    monkeypatch.setattr(matvec, "F32_ONE_ROW_GLU", True)
    split_k(split)
    K, I = 1000, 67
    assert matvec.plan(1, I, K, device, None, b_bytes=4, glu=True).ksum
    w = randn(2 * I, K, device=device, scale=K ** -0.5)
    x = randn(1, K, device=device)
    g, u = ref64(x, w, None).chunk(2, dim=-1)
    assert_close(L.linear_swiglu(x, w), torch.nn.functional.silu(g) * u)


@needs_fp8
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("glu", [False, True])
def test_fp8_one_row_ksum(glu, split, split_k, monkeypatch, device):
    """The fp8 one-row product-and-sum with each K tile summed at once (``KSUM``: the plan above
    FP8_ONE_ROW_MAX_ELEMS, or matvec.FP8_ONE_ROW_KSUM) against the float64 product, split over K
    and with SwiGLU (gate and up summed alike)."""
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_KSUM", True)
    split_k(split)
    K, I = 1000, 13
    N = 2 * I if glu else I
    assert matvec.plan(1, I, K, device, torch.bfloat16, b_bytes=1, glu=glu).ksum
    x = randn(1, K, dtype=torch.bfloat16, device=device)
    _, q, s = _fp8_weight(N, K, device)
    if glu:
        g, u = ref64(x, q, None, s).to(torch.bfloat16).chunk(2, dim=-1)
        ref = torch.nn.functional.silu(g.double()).to(torch.bfloat16).double() * u.double()
        out = L.linear_swiglu(x, q, weight_scale=s)
    else:
        ref, out = ref64(x, q, None, s), L.linear(x, q, weight_scale=s)
    assert_close(out, ref, tol=L_TOL[torch.bfloat16])


@needs_fp8
def test_fp8_via_float16_nonfinite(monkeypatch, device):
    """An inf activation makes its row inf / NaN as the float32 path does; other rows are
    unaffected."""
    monkeypatch.setattr(matvec, "FP8_VIA_FP16", (32, 64, 2))
    monkeypatch.setattr(matvec, "FP8_ONE_ROW_FMA", None)
    w, q, s = _fp8_weight(13, 64, device)
    x = randn(2, 64, dtype=torch.bfloat16, device=device)
    x[0, 5] = float("inf")
    out = L.linear(x, q, weight_scale=s)
    monkeypatch.setattr(matvec, "FP8_VIA_FP16", None)
    expect = L.linear(x, q, weight_scale=s)
    assert torch.equal(out[0].isnan(), expect[0].isnan()) and torch.equal(out[0].isinf(), expect[0].isinf())
    assert_close(out[1], ref64(x[1:], q, None, s)[0], tol=L_TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,split", [(1, 1), (1, 3), (3, 2), (16, 1), (17, 1)])  # 17: linear + the two ops
@pytest.mark.parametrize("fp8", [False, True])
def test_linear_swiglu(dtype, rows, split, fp8, split_k, device):
    """``linear_swiglu(x, w)`` against ``silu(gate) * up`` of the float64 product rounded to
    the dtype as PyTorch's ops round it (gate/up to x.dtype, silu to x.dtype, the product)."""
    if fp8 and (not HAS_FP8 or dtype == torch.float32):
        return
    split_k(split)
    K, I = 200, 67
    x = randn(rows, 1, K, dtype=dtype, device=device)
    if fp8:
        _, w, scale = _fp8_weight(2 * I, K, device)
        b = None
    else:
        w, scale = randn(2 * I, K, dtype=dtype, device=device, scale=3 * K ** -0.5), None
        b = randn(2 * I, dtype=dtype, device=device)
    g, u = ref64(x, w, b, scale).to(dtype).chunk(2, dim=-1)
    ref = torch.nn.functional.silu(g.double()).to(dtype).double() * u.double()
    out = L.linear_swiglu(x, w, b, weight_scale=scale)
    assert out.shape == (rows, 1, I) and out.dtype == dtype
    assert_close(out, ref, tol=L_TOL[dtype] if fp8 else None)


def test_linear_swiglu_autograd(device):
    """Any argument that needs a gradient (the bias alone too) takes the differentiable path:
    gradients equal those of F.linear, silu and the product."""
    x, w = randn(1, 8, device=device), randn(6, 8, device=device)
    b = randn(6, device=device).requires_grad_()
    L.linear_swiglu(x, w, b).sum().backward()
    b2 = b.detach().clone().requires_grad_()
    g, u = torch.nn.functional.linear(x, w, b2).chunk(2, dim=-1)
    (torch.nn.functional.silu(g) * u).sum().backward()
    assert b.grad is not None and torch.allclose(b.grad, b2.grad, atol=1e-5)


def test_linear_swiglu_errors(device):
    with pytest.raises(ValueError, match="even number of rows"):
        L.linear_swiglu(randn(1, 4, device=device), randn(5, 4, device=device))
    with pytest.raises(ValueError, match="weight: expected shape"):
        L.linear_swiglu(randn(1, 6, device=device), randn(4, 4, device=device))


@needs_fp8
def test_fp8_nonfinite_free_and_scale_applied(device):
    w, q, s = _fp8_weight(67, 200, device)
    x = randn(2, 200, dtype=torch.bfloat16, device=device)
    out = L.linear(x, q, weight_scale=s * 2)
    assert_close(out, ref64(x, q, None, s * 2), tol=L_TOL[torch.bfloat16])


# ---------------------------------------------------------------------------- compile, errors

def test_compile_fullgraph(device):
    x = randn(2, 1, 67, device=device)
    w, b = randn(13, 67, device=device), randn(13, device=device)
    f = torch.compile(lambda x: L.linear(x, w, b) * 2, fullgraph=True, backend="aot_eager")
    assert_close(f(x), 2 * ref64(x, w, b))
    if HAS_FP8:
        _, q, s = _fp8_weight(13, 67, device)
        g = torch.compile(lambda x: L.linear(x, q, weight_scale=s), fullgraph=True, backend="aot_eager")
        assert_close(g(x), ref64(x, q, None, s), tol=1e-5)


def test_errors(device):
    x = randn(2, 67, device=device)
    w = randn(13, 67, device=device)
    with pytest.raises(ValueError, match="weight"):
        L.linear(x, randn(13, 66, device=device))
    with pytest.raises(ValueError, match="weight"):
        L.linear(x, randn(67, device=device))
    with pytest.raises(TypeError, match="weight"):
        L.linear(x, w.half())
    with pytest.raises(TypeError, match="bias"):
        L.linear(x, w, randn(13, device=device).half())
    with pytest.raises(ValueError, match="bias"):
        L.linear(x, w, randn(12, device=device))
    with pytest.raises(TypeError, match="input"):
        L.linear([1.0], w)
    with pytest.raises(TypeError, match="input"):
        L.linear(x.int(), w)
    if HAS_FP8:
        q = w.to(torch.float8_e4m3fn)
        with pytest.raises(TypeError, match="weight_scale"):
            L.linear(x, q)
        with pytest.raises(ValueError, match="weight_scale"):
            L.linear(x, q, weight_scale=torch.ones(12, 1, device=device))
        with pytest.raises(TypeError, match="weight_scale"):
            L.linear(x, q, weight_scale=torch.ones(13, 1, device=device, dtype=torch.float64))
        with pytest.raises(TypeError, match="weight"):
            L.linear(x, w, weight_scale=torch.ones(13, 1, device=device))


def test_family():
    assert L.FAMILY["name"] == "linear" and L.FAMILY["ops"] == ["linear"]
    assert L.FAMILY["reason"]("cpu") is None or isinstance(L.FAMILY["reason"]("cpu"), str)


@pytest.mark.launch_memo
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch memo replays compiled CUDA kernels")
@pytest.mark.parametrize("fp8,rows,k,n,bias", [
    (fp8, *shape) for fp8 in (False, True)
    for shape in ((1, 4096, 1024, False), (3, 1000, 67, True), (16, 256, 4096, True))
] + [(True, 40, 1024, 4096, True)])  # 40 rows, fp8: the tiled kernel and its tensor descriptors (weight_mm)
def test_eager_memo_replay(fp8, rows, k, n, bias):
    """Eager calls after the first with the same tensor properties replay its launch
    (``fastpath._core.memo``): fresh inputs give fresh, correct outputs."""
    if fp8 and not HAS_FP8:
        pytest.skip("torch has no float8_e4m3fn")
    dev = torch.device("cuda")
    w = randn(n, k, dtype=torch.bfloat16, device=dev, scale=k ** -0.5)
    scale = None
    if fp8:
        scale = (w.float().abs().amax(1, keepdim=True) / 448.0).clamp_min(1e-12)
        w = (w.float() / scale).to(torch.float8_e4m3fn)
    b = randn(n, dtype=torch.bfloat16, device=dev) if bias else None
    L._MEMO.entries.clear()
    outs = []
    for i in range(3):
        x = randn(rows, 1, k, dtype=torch.bfloat16, device=dev)
        y = L.linear(x, w, b, weight_scale=scale)
        outs.append(y)
        assert_close(y, ref64(x, w, b, scale), tol=L_TOL[torch.bfloat16])
    assert len({o.data_ptr() for o in outs}) == 3
    assert any(v is not None for v in L._MEMO.entries.values())  # recorded, then replayed


@pytest.mark.launch_memo
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch memo replays compiled CUDA kernels")
@pytest.mark.parametrize("fp8,rows", [(False, 1), (False, 5), (True, 1), (False, 20)])  # 20 rows: torch ops, no replay
def test_swiglu_memo_replay(fp8, rows):
    """linear_swiglu's eager calls replay the first one's launch (a memo key of its own beside
    linear's): fresh inputs give fresh, correct outputs, and linear on the same tensors is not
    served the SwiGLU launch."""
    if fp8 and not HAS_FP8:
        pytest.skip("torch has no float8_e4m3fn")
    dev = torch.device("cuda")
    k, i = 512, 384
    w = randn(2 * i, k, dtype=torch.bfloat16, device=dev, scale=k ** -0.5)
    scale = None
    if fp8:
        scale = (w.float().abs().amax(1, keepdim=True) / 448.0).clamp_min(1e-12)
        w = (w.float() / scale).to(torch.float8_e4m3fn)
    L._MEMO.entries.clear()
    outs = []
    for _ in range(3):
        x = randn(rows, k, dtype=torch.bfloat16, device=dev)
        y = L.linear_swiglu(x, w, weight_scale=scale)
        full = ref64(x, w, None, scale)
        g, u = full.to(torch.bfloat16).chunk(2, dim=-1)
        assert_close(y, torch.nn.functional.silu(g.double()).to(torch.bfloat16).double() * u.double(),
                     tol=L_TOL[torch.bfloat16])
        assert_close(L.linear(x, w, weight_scale=scale), full, tol=L_TOL[torch.bfloat16])
        outs.append(y)
    assert len({o.data_ptr() for o in outs}) == 3
    swiglu = [v for k, v in L._MEMO.entries.items() if k[0] != "skip" and k[2] == ("swiglu",)]
    assert (rows <= L.MAX_GEMV_ROWS) == any(v is not None for v in swiglu)  # its own entry, recorded


def test_plans_dot_k_tiles_compile(monkeypatch):
    """Every GPU plan whose tiles go through ``tl.dot`` takes K tiles Triton's GPU compiler accepts
    (16 or more, 32 for fp8 operands: triton 3.6's ``min_dot_size``, which the interpreter does not
    check), and its splits cover K. The float32 path at 9-16 rows once took K tiles of next_pow2(K)
    (a compile error on the GPU for K < 16; the fuzz sweep, compiled, found it)."""
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    dev = torch.device("cuda")
    for dot_dtype, b_bytes in ((None, 4), (torch.float16, 2), (torch.bfloat16, 2), (torch.bfloat16, 1),
                               (torch.float8_e4m3fn, 1)):
        for M in (1, 2, 5, 8, 9, 12, 16, 20, 64):
            for K in (1, 3, 7, 15, 16, 17, 31, 33, 300):
                for N in (1, 5, 67, 4096):
                    for glu in (False, True):
                        p = matvec.plan(M, N, K, dev, dot_dtype, b_bytes=b_bytes, glu=glu)
                        cfg = (dot_dtype, b_bytes, M, K, N, glu, p)
                        if p.dot is not None:
                            assert p.block_k >= (32 if p.dot.itemsize == 1 else 16), cfg
                        assert p.k_chunk % p.block_k == 0 and p.k_chunk * p.split >= K, cfg
                        assert p.k_chunk * (p.split - 1) < max(K, 1), cfg  # no empty split
