"""Inputs with more than 2**31 elements (or offsets past 2**31): int32 index arithmetic in a
kernel wraps silently there, so each op is compared with PyTorch on the parts past the
boundary (first, middle and last rows or elements, the reference computed on those parts
alone). GPU only: the tensors take 2-17 GB each. ``FASTPATH_BIG_ELEMS=N`` runs the same checks
at N elements on any device (a dry run of this file's own code, no large offsets)."""
import os

import pytest
import torch
import torch.nn.functional as F

import fastpath
from fastpath.bench.harness import rel_error

ELEMS = int(os.environ.get("FASTPATH_BIG_ELEMS", 2**31 + 2**24))
DRY = "FASTPATH_BIG_ELEMS" in os.environ
pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() or DRY),
                                reason="tensors of 2**31+ elements: a GPU's memory (FASTPATH_BIG_ELEMS: a dry run)")
#: Row width of the row-wise cases (a vocabulary's logits on the GPU).
WIDTH = 131072 if not DRY else 64


def _free():
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@pytest.fixture(autouse=True)
def _release():
    yield
    _free()


def _rows(n: int) -> list:
    """Rows to check of an n-row tensor: the first, the middle, the last (past 2**31)."""
    return sorted({0, 1, n // 2, n - 2, n - 1} & set(range(n)))


def _spans(n: int) -> list:
    """Flat slices to check of an n-element tensor: the start, around 2**31 (or the middle in a
    dry run) and the end."""
    mid = 2**31 if n > 2**31 else n // 2
    w = min(4096, max(1, n // 8))
    return [slice(0, w), slice(max(0, mid - w), min(n, mid + w)), slice(n - w, n)]


def _close(out, ref, tol):
    err = rel_error(out.float(), ref.float())
    assert err <= tol, f"relative error {err:.2e} > {tol:.0e}"


def _randn(*shape, device, dtype=torch.bfloat16):
    return torch.randn(*shape, device=device, dtype=dtype)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_rows_past_2_31(fn, device):
    R = -(-ELEMS // WIDTH)
    x = _randn(R, WIDTH, device=device)
    out = getattr(fastpath, fn)(x, dim=-1)
    for r in _rows(R):
        _close(out[r], getattr(torch, fn)(x[r].double(), dim=-1), 1e-2)


def test_rms_norm_rows_past_2_31(device):
    R = -(-ELEMS // WIDTH)
    x, w = _randn(R, WIDTH, device=device), _randn(WIDTH, device=device)
    out = fastpath.rms_norm(x, w, 1e-6)
    for r in _rows(R):
        xr = x[r].double()
        _close(out[r], xr * torch.rsqrt(xr.pow(2).mean() + 1e-6) * w.double(), 1e-2)


def test_linear_output_past_2_31(device):
    """(T, K) x (N, K)^T with T * N past 2**31: the tiled matmul's output offsets."""
    K, N = (1024, WIDTH) if not DRY else (32, WIDTH)
    T = -(-ELEMS // N)
    x, w = _randn(T, K, device=device) / K**0.5, _randn(N, K, device=device)
    out = fastpath.linear(x, w)
    rows = torch.tensor(_rows(T), device=device)
    _close(out[rows], x[rows].double() @ w.double().T, 1e-2)


def test_scaled_mm_output_past_2_31(device):
    K, N = (1024, WIDTH) if not DRY else (32, WIDTH)
    T = -(-ELEMS // N)
    a, sa = fastpath.quantize_fp8(_randn(T, K, device=device), "rowwise")
    b, sb = fastpath.quantize_fp8(_randn(N, K, device=device), "rowwise")
    out = fastpath.scaled_mm(a, b.t(), sa, "rowwise", sb.t(), "rowwise", output_dtype=torch.bfloat16)
    rows = torch.tensor(_rows(T), device=device)
    ref = (a[rows].double() * sa[rows].double()) @ (b.double() * sb.double()).T
    _close(out[rows], ref, 1e-2)


def test_quantize_fp8_rows_past_2_31(device):
    R = -(-ELEMS // WIDTH)
    x = _randn(R, WIDTH, device=device)
    q, s = fastpath.quantize_fp8(x, "rowwise")
    for r in _rows(R):
        rq, rs = fastpath.reference_quantize_fp8(x[r:r + 1], "rowwise")
        assert torch.equal(s[r:r + 1], rs) and torch.equal(q[r:r + 1].view(torch.uint8), rq.view(torch.uint8))


def test_elementwise_past_2_31(device):
    """frexp, heaviside, minimum, mse_loss (none, and the mean over every element)."""
    x, y = _randn(ELEMS, device=device), _randn(ELEMS, device=device)
    m, e = fastpath.frexp(x)
    for sl in _spans(ELEMS):
        rm, re_ = torch.frexp(x[sl])
        assert torch.equal(m[sl], rm) and torch.equal(e[sl], re_)
    del m, e
    h = fastpath.heaviside(x, y)
    for sl in _spans(ELEMS):
        assert torch.equal(h[sl], torch.heaviside(x[sl], y[sl]))
    del h
    mn = fastpath.minimum(x, y)
    for sl in _spans(ELEMS):
        assert torch.equal(mn[sl], torch.minimum(x[sl], y[sl]))
    del mn
    sq = fastpath.mse_loss(x, y, reduction="none")
    for sl in _spans(ELEMS):
        _close(sq[sl], (x[sl].double() - y[sl].double()) ** 2, 1e-2)
    del sq
    mean = fastpath.mse_loss(x, y)
    total = sum(((x[i:i + 2**28].double() - y[i:i + 2**28].double()) ** 2).sum() for i in range(0, ELEMS, 2**28))
    _close(mean, total / ELEMS, 1e-2)


def test_unsigned_compare_past_2_31(device):
    a = torch.randint(0, 256, (ELEMS,), device=device, dtype=torch.uint8)
    b = torch.randint(0, 256, (ELEMS,), device=device, dtype=torch.uint8)
    for name in ("lt", "eq"):
        out = getattr(fastpath, name)(a, b)
        for sl in _spans(ELEMS):
            assert torch.equal(out[sl], getattr(torch, name)(a[sl], b[sl])), name
        del out
    mx = fastpath.maximum(a, b)
    for sl in _spans(ELEMS):
        assert torch.equal(mx[sl], torch.maximum(a[sl], b[sl]))


def test_take_index_past_2_31(device):
    x = torch.arange(ELEMS, device=device, dtype=torch.int32 if ELEMS < 2**31 else torch.int64)
    idx = torch.cat([torch.arange(s.start, s.stop, device=device) for s in _spans(ELEMS)])
    idx = idx[torch.randperm(idx.numel(), device=device)]
    assert torch.equal(fastpath.take(x, idx), idx.to(x.dtype))
    assert torch.equal(fastpath.take(x, idx - ELEMS), idx.to(x.dtype))  # negative indices


def test_dropout_past_2_31(device):
    """Every kept value is x / (1 - p); past 2**31 the zeros keep their rate and do not repeat
    the mask of the start (an offset that wrapped would reuse its random numbers)."""
    x = torch.ones(ELEMS, device=device, dtype=torch.bfloat16)
    g = torch.Generator(device=device).manual_seed(1)
    out = fastpath.dropout(x, 0.5, generator=g)
    spans = _spans(ELEMS)
    for sl in spans:
        part = out[sl]
        assert bool(((part == 0) | (part == 2)).all())
        assert 0.4 < (part == 0).float().mean().item() < 0.6
    w = spans[0].stop - spans[0].start
    assert not torch.equal(out[:w], out[spans[2]][:w])


def test_bincount_past_2_31(device):
    v = torch.randint(0, 256, (ELEMS,), device=device, dtype=torch.uint8)
    counts = fastpath.bincount(v, minlength=256)
    assert torch.equal(counts, torch.bincount(v.int(), minlength=256) if ELEMS < 2**31 else
                       sum(torch.bincount(v[i:i + 2**30].int(), minlength=256) for i in range(0, ELEMS, 2**30)))


def test_pad_video_past_2_31(device):
    """(1, C, T, H, W) bf16 video activations, every mode, output offsets past 2**31: output
    frames against the source frame each mode maps them to, padded in space by PyTorch."""
    C, T, H = (32, 33, 1440) if not DRY else (2, 3, 8)
    W = -(-ELEMS // (C * T * H))
    x = _randn(1, C, T, H, W, device=device)
    src = {"constant": lambda t: t - 2 if t >= 2 else None, "replicate": lambda t: max(t - 2, 0),
           "reflect": lambda t: abs(t - 2), "circular": lambda t: (t - 2) % T}
    for mode, frame in src.items():
        out = fastpath.pad(x, (1, 1, 1, 1, 2, 0), mode=mode)
        assert out.shape == (1, C, T + 2, H + 2, W + 2)
        for t in (0, 1, (T + 2) // 2, T + 1):
            f = frame(t)
            ref = (torch.zeros(1, C, H + 2, W + 2, device=device) if f is None
                   else F.pad(x[:, :, f].float(), (1, 1, 1, 1), mode=mode))
            assert torch.equal(out[:, :, t].float(), ref), (mode, t)
        del out


def test_channel_rms_norm_past_2_31(device):
    C, T, H = (32, 33, 1440) if not DRY else (2, 3, 8)
    W = -(-ELEMS // (C * T * H))
    x, gamma = _randn(1, C, T, H, W, device=device), _randn(C, device=device)
    out = fastpath.channel_rms_norm(x, gamma)
    for t in (0, T // 2, T - 1):
        xf = x[:, :, t].double()
        ref = xf / xf.norm(dim=1, keepdim=True).clamp_min(1e-12) * C**0.5 * gamma.double()[:, None, None]
        _close(out[:, :, t], ref, 1e-2)


def test_causal_conv3d_past_2_31(device):
    C, T, H = (16, 33, 1440) if not DRY else (2, 3, 8)
    W = -(-ELEMS // (C * T * H))
    x, w = _randn(1, C, T, H, W, device=device), _randn(C, C, 3, 3, 3, device=device) / (27 * C) ** 0.5
    out, _ = fastpath.causal_conv3d(x, w, padding=(2, 1, 1))
    for t in (0, T // 2, T - 1):
        window = F.pad(x[:, :, max(0, t - 2):t + 1].float(), (1, 1, 1, 1, 2 - min(t, 2), 0))
        _close(out[:, :, t:t + 1], F.conv3d(window, w.float()), 1e-2)


def test_batch_norm_training_past_2_31(device):
    C, H = (32, 1024) if not DRY else (2, 8)
    N, W = 64 if not DRY else 2, -(-ELEMS // ((64 if not DRY else 2) * C * H))
    x = _randn(N, C, H, W, device=device)
    rm, rv = torch.zeros(C, device=device), torch.ones(C, device=device)
    out = fastpath.batch_norm(x, rm, rv, training=True)
    s1 = torch.zeros(C, dtype=torch.float64, device=device)
    s2 = torch.zeros(C, dtype=torch.float64, device=device)
    for n in range(N):
        xn = x[n].double()
        s1 += xn.sum((1, 2))
        s2 += (xn * xn).sum((1, 2))
    cnt = N * H * W
    mean, var = s1 / cnt, s2 / cnt - (s1 / cnt) ** 2
    for n in (0, N - 1):
        ref = (x[n].double() - mean[:, None, None]) * torch.rsqrt(var + 1e-5)[:, None, None]
        _close(out[n], ref, 1e-2)
    _close(rm, 0.1 * mean, 1e-3)


def test_grouped_mm_weights_past_2_31(device):
    """(G, K, N) expert weights of 2**31+ elements; tokens routed to the first and last experts."""
    K, N = (4096, 8192) if not DRY else (16, 32)
    G = -(-ELEMS // (K * N))
    w = _randn(G, K, N, device=device) / K**0.5
    a = _randn(8, K, device=device)
    offs = torch.tensor([2] + [2] * (G - 2) + [8], device=device, dtype=torch.int32)
    out = fastpath.grouped_mm(a, w, offs=offs)
    _close(out[:2], a[:2].double() @ w[0].double(), 1e-2)
    _close(out[2:], a[2:].double() @ w[G - 1].double(), 1e-2)


def test_fused_experts_weights_past_2_31(device):
    E, H, Iw = (64, 4096, 4096) if not DRY else (8, 16, 16)
    E = max(E, -(-ELEMS // (2 * Iw * H)))
    gu, dn = _randn(E, 2 * Iw, H, device=device) / H**0.5, _randn(E, H, Iw, device=device) / Iw**0.5
    x = _randn(4, H, device=device)
    ids = torch.tensor([[0, E - 1], [E - 1, E - 2], [E // 2, 0], [E - 1, 1]], device=device)
    wts = torch.full((4, 2), 0.5, device=device)
    out = fastpath.fused_experts(x, ids, wts, gu, dn)
    ref = torch.zeros(4, H, dtype=torch.float64, device=device)
    for t in range(4):
        for j in range(2):
            e = int(ids[t, j])
            g, u = (x[t].double() @ gu[e].double().T).chunk(2)
            ref[t] += 0.5 * (F.silu(g) * u) @ dn[e].double().T
    _close(out, ref, 2e-2)


def test_decode_attention_cache_past_2_31(device):
    """One query token against a (B, Hkv, L, D) cache of 2**31+ elements, GQA."""
    Hkv, D, L = (8, 128, 32768) if not DRY else (2, 16, 32)
    B = -(-ELEMS // (Hkv * L * D))
    k, v = _randn(B, Hkv, L, D, device=device), _randn(B, Hkv, L, D, device=device)
    q = _randn(B, 4 * Hkv, 1, D, device=device)
    out = fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    for b in (0, B - 1):
        ref = F.scaled_dot_product_attention(q[b:b + 1].double(), k[b:b + 1].double(), v[b:b + 1].double(),
                                             enable_gqa=True)
        _close(out[b:b + 1], ref, 1e-2)


def test_softmax_over_channels_past_2_31(device):
    """A softmax over dim 1 of a (1, C, T, H, W) tensor: the reduced dim's stride times C passes
    2**31 (the kernels' int64 variant)."""
    C, T, H = (128, 32, 720) if not DRY else (4, 3, 8)
    W = -(-ELEMS // (C * T * H))
    x = _randn(1, C, T, H, W, device=device)
    out = fastpath.softmax(x, dim=1)
    for t in (0, T - 1):
        _close(out[:, :, t, -2:], torch.softmax(x[:, :, t, -2:].double(), dim=1), 1e-2)


def test_quantize_fp8_flat_past_2_31(device):
    x = _randn(ELEMS, device=device)
    q, s = fastpath.quantize_fp8(x)
    amax = max(x[i:i + 2**28].float().abs().max().item() for i in range(0, ELEMS, 2**28))
    assert s.item() == torch.tensor(amax / 448.0).item()
    for sl in _spans(ELEMS):
        assert torch.equal(q[sl].view(torch.uint8), (x[sl].float() / s).to(torch.float8_e4m3fn).view(torch.uint8))


@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_wide_right_hand_side_past_2_31(left, device):
    """(64, 64) lower-triangular systems with 2**31 / 64 right-hand sides: B's row term
    (left=True) or column term (left=False, B transposed) passes int32, and the column blocks
    pass the grid's limit of 65535."""
    n = 64 if not DRY else 8
    k = -(-ELEMS // n)
    A = (torch.randn(n, n, device=device) + 3 * n**0.5 * torch.eye(n, device=device)).tril()
    B = torch.randn((n, k) if left else (k, n), device=device)
    X = fastpath.linalg.solve_triangular(A, B, upper=False, left=left)
    for sl in _spans(k):
        if left:
            ref = torch.linalg.solve_triangular(A.double(), B[:, sl].double(), upper=False)
            _close(X[:, sl], ref, 1e-4)
        else:
            ref = torch.linalg.solve_triangular(A.double(), B[sl].double(), upper=False, left=False)
            _close(X[sl], ref, 1e-4)


def test_lu_solve_many_factors(device):
    """2**19 LU factors of 33 x 33 (blocked solve): the second triangle's block inverses start
    past int32 in the scratch buffer."""
    nb = 2**19 + 5 if not DRY else 3
    A = torch.randn(nb, 33, 33, device=device) + 10 * torch.eye(33, device=device)
    LU, piv = torch.linalg.lu_factor(A)
    B = torch.randn(nb, 33, 2, device=device)
    X = fastpath.linalg.lu_solve(LU, piv, B)
    for i in (0, nb // 2, nb - 1):
        _close(X[i], torch.linalg.solve(A[i].double(), B[i].double()), 1e-4)
