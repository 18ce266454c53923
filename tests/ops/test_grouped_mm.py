"""grouped_mm (2D x 3D, 3D x 2D, 2D x 2D, 3D x 3D; fp8 weights with per-column scales)
against float64 loops over the groups, through the public API (compiled on a GPU,
interpreted on the CPU). Outputs are poisoned with NaN, so an element the kernel forgets to
write fails."""
import pytest
import torch
import torch.nn.functional as F

from fastpath.ops import grouped_mm as GM
from tests.conftest import noncontig, randn
from tests.tolerances import assert_close

grouped_mm = GM.grouped_mm
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HAS_FP8 = hasattr(torch, "float8_e4m3fn")
needs_fp8 = pytest.mark.skipif(not HAS_FP8, reason="torch has no float8_e4m3fn")


def _offs(ends, device):
    return torch.tensor(ends, dtype=torch.int32, device=device)


def _bounds(ends, total):
    """(start, end) per group, ends clamped into [0, total] and made non-decreasing
    (the documented treatment of bad offs; the identity for valid ones)."""
    out, prev = [], 0
    for e in ends:
        e = max(prev, min(max(int(e), 0), total))
        out.append((prev, e))
        prev = e
    return out


def _b64(b, scale_b=None):
    b = b.double()
    return b if scale_b is None else b * scale_b.double()[:, None, :]


def ref_2d3d(a, b, ends, bias=None, scale_b=None):
    a, b = a.double().cpu(), _b64(b, scale_b).cpu()
    out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64)
    for g, (s, e) in enumerate(_bounds(ends, a.shape[0])):
        out[s:e] = a[s:e] @ b[g] + (bias[g].double().cpu() if bias is not None else 0)
    return out


def ref_3d2d(a, b, ends):
    a, b = a.double().cpu(), b.double().cpu()
    out = torch.zeros(a.shape[1], b.shape[1], dtype=torch.float64)
    for g, (s, e) in enumerate(_bounds(ends, b.shape[1])):
        out[:, s:e] = a[g] @ b[:, s:e]
    return out


def ref_2d2d(a, b, ends, bias=None):
    a, b = a.double().cpu(), b.double().cpu()
    out = torch.zeros(len(ends), a.shape[0], b.shape[1], dtype=torch.float64)
    for g, (s, e) in enumerate(_bounds(ends, a.shape[1])):
        out[g] = a[:, s:e] @ b[s:e] + (bias[g].double().cpu() if bias is not None else 0)
    return out


def ref_3d3d(a, b, bias=None, scale_b=None):
    out = a.double().cpu() @ _b64(b, scale_b).cpu()
    return out + bias.double().cpu()[:, None, :] if bias is not None else out


@pytest.fixture
def blocks(monkeypatch):
    def force(bm, bn, bk):
        monkeypatch.setattr(GM, "BLOCKS_OVERRIDE", (bm, bn, bk))
    return force


# ends over a jagged dimension of 50: empty groups (first, middle, last), a tail past offs[-1]
ENDS_50 = {
    "mixed": [3, 3, 20, 41, 50],
    "empty_first_last": [0, 17, 17, 50, 50],
    "one_group": [0, 0, 50, 50, 50],
    "tail": [5, 5, 12, 30, 30],
    "all_empty": [0, 0, 0, 0, 0],
}


# ---------------------------------------------------------------------------- 2D x 3D

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k,n", [(13, 67), (67, 13), (200, 7)])
def test_2d3d(dtype, k, n, device):
    a = randn(50, k, dtype=dtype, device=device)
    b = randn(5, k, n, dtype=dtype, device=device, scale=k ** -0.5)
    ends = ENDS_50["mixed"]
    out = grouped_mm(a, b, offs=_offs(ends, device))
    assert out.dtype == dtype and out.shape == (50, n)
    assert_close(out, ref_2d3d(a, b, ends))


@pytest.mark.parametrize("case", list(ENDS_50))
def test_2d3d_offs_patterns(case, device):
    """Empty groups, all rows in one group, rows past offs[-1] (zero-filled), no rows at all."""
    a = randn(50, 67, device=device)
    b = randn(5, 67, 13, device=device)
    ends = ENDS_50[case]
    out = grouped_mm(a, b, offs=_offs(ends, device))
    assert_close(out, ref_2d3d(a, b, ends))
    assert torch.equal(out[ends[-1]:], torch.zeros_like(out[ends[-1]:]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_2d3d_transposed_weights(dtype, device):
    """Experts stored (G, N, K) as in transformers, passed as .transpose(1, 2) (K contiguous);
    also a non-contiguous mat_a and a weight with a padded group stride."""
    w = randn(5, 67, 200, dtype=dtype, device=device, scale=0.07)  # (G, N, K)
    a = noncontig(randn(50, 200, dtype=dtype, device=device))
    ends = ENDS_50["mixed"]
    out = grouped_mm(a, w.transpose(1, 2), offs=_offs(ends, device))
    assert_close(out, ref_2d3d(a, w.transpose(1, 2), ends))
    padded = torch.full((5, 80, 67), float("nan"), dtype=dtype, device=device)[:, 3:70]
    padded.copy_(randn(5, 67, 67, dtype=dtype, device=device, scale=0.1))
    assert_close(grouped_mm(a[:, :67], padded, offs=_offs(ends, device)), ref_2d3d(a[:, :67], padded, ends))


@pytest.mark.parametrize("bm,bn,bk", [(16, 16, 16), (32, 16, 32), (16, 64, 16)])
def test_2d3d_block_sizes(bm, bn, bk, blocks, device):
    """Groups spanning several row tiles, tiles straddling group boundaries, many groups."""
    blocks(bm, bn, bk)
    sizes = [0, 1, 37, 0, 16, 17, 2, 0, 64, 5]
    ends = torch.tensor(sizes).cumsum(0).tolist()
    T = ends[-1] + 3
    a = randn(T, 67, dtype=torch.bfloat16, device=device)
    b = randn(len(sizes), 67, 70, dtype=torch.bfloat16, device=device, scale=0.1)
    bias = randn(len(sizes), 70, dtype=torch.bfloat16, device=device)
    assert_close(grouped_mm(a, b, offs=_offs(ends, device), bias=bias), ref_2d3d(a, b, ends, bias))


def test_2d3d_decode_routing(device):
    """Decode shape: 3 tokens x top-8 of 64 experts: most groups empty, the rest one or two rows."""
    E, top, tokens = 64, 8, 3
    experts = torch.stack([torch.randperm(E)[:top] for _ in range(tokens)]).flatten()
    counts = torch.bincount(experts, minlength=E)
    ends = counts.cumsum(0).tolist()
    a = randn(tokens * top, 67, dtype=torch.bfloat16, device=device)
    w = randn(E, 40, 67, dtype=torch.bfloat16, device=device, scale=0.1)
    out = grouped_mm(a, w.transpose(1, 2), offs=_offs(ends, device))
    assert_close(out, ref_2d3d(a, w.transpose(1, 2), ends))


#: Group ends over 12 rows for the ROWS mode (a program per row: the interpreter's cost grows
#: with the rows).
ENDS_12 = {
    "mixed": [2, 2, 5, 10, 12],
    "empty_first_last": [0, 4, 4, 12, 12],
    "tail": [1, 1, 3, 8, 8],
    "all_empty": [0, 0, 0, 0, 0],
}


@pytest.mark.parametrize("case", ["decode", "mixed", "tail", "empty_first_last", "all_empty"])
def test_2d3d_rows_mode(case, monkeypatch, device):
    """The kernel's ROWS mode (a program per row and column block, its group looked up in
    offs; ``ROWS_UP_TO`` raised to every size here): decode routing (2 tokens x top-8 of 64
    experts, transposed weights, bias), empty groups, rows past offs[-1] (zeros), no rows in any
    group."""
    monkeypatch.setattr(GM, "ROWS_UP_TO", 10 ** 6)
    if case == "decode":
        E, top, tokens = 64, 8, 2
        experts = torch.stack([torch.randperm(E)[:top] for _ in range(tokens)]).flatten()
        ends = torch.bincount(experts, minlength=E).cumsum(0).tolist()
    else:
        E, ends = 5, ENDS_12[case]
    T = ends[-1] if case == "decode" else 12
    a = randn(T, 37, dtype=torch.bfloat16, device=device)
    w = randn(E, 24, 37, dtype=torch.bfloat16, device=device, scale=0.1)
    bias = randn(E, 24, dtype=torch.bfloat16, device=device)
    out = grouped_mm(a, w.transpose(1, 2), offs=_offs(ends, device), bias=bias)
    assert_close(out, ref_2d3d(a, w.transpose(1, 2), ends, bias))
    assert torch.equal(out[ends[-1]:], torch.zeros_like(out[ends[-1]:]))


@needs_fp8
def test_2d3d_rows_mode_fp8(monkeypatch, device):
    monkeypatch.setattr(GM, "ROWS_UP_TO", 10 ** 6)
    w, q, s = _fp8_experts(5, 24, 100, device)
    a = randn(12, 100, dtype=torch.bfloat16, device=device)
    ends = ENDS_12["mixed"]
    out = grouped_mm(a, q.transpose(1, 2), offs=_offs(ends, device), scale_b=s, out_dtype=torch.float32)
    assert_close(out, ref_2d3d(a, q.transpose(1, 2), ends, None, s), tol=2e-6)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_2d3d_bias_out_dtype(out_dtype, device):
    a = randn(50, 67, dtype=torch.bfloat16, device=device)
    b = randn(5, 67, 13, dtype=torch.bfloat16, device=device, scale=0.1)
    bias = randn(5, 13, dtype=out_dtype, device=device)
    ends = ENDS_50["tail"]
    out = grouped_mm(a, b, offs=_offs(ends, device), bias=bias, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    assert_close(out, ref_2d3d(a, b, ends, bias))
    assert torch.equal(out[30:], torch.zeros_like(out[30:]))  # the tail gets no bias


def test_2d3d_bad_offs_clamped(device):
    """Decreasing, negative and too-large ends: no out-of-bounds access, every row written
    once, the documented result (ends clamped, then a running maximum)."""
    a = randn(30, 13, device=device)
    b = randn(6, 13, 7, device=device)
    for ends in ([10, 4, 20, -3, 1000, 25], [-5, 40, 2, 2, 2, 2], [2 ** 31 - 1] * 6):
        out = grouped_mm(a, b, offs=_offs(ends, device))
        assert_close(out, ref_2d3d(a, b, ends))
        assert_close(GM.reference_grouped_mm(a, b, offs=_offs(ends, device)), ref_2d3d(a, b, ends))


def test_other_forms_bad_offs_clamped(device):
    ends = [10, 4, 60, -3, 45]
    a, b = randn(7, 50, device=device), randn(50, 13, device=device)
    assert_close(grouped_mm(a, b, offs=_offs(ends, device)), ref_2d2d(a, b, ends))
    a, b = randn(5, 7, 13, device=device), randn(13, 50, device=device)
    assert_close(grouped_mm(a, b, offs=_offs(ends, device)), ref_3d2d(a, b, ends))


def test_reference_path_dispatch(monkeypatch, device):
    """Where Triton does not serve the device, the public function runs reference_grouped_mm."""
    monkeypatch.setattr(GM, "use_triton", lambda t: False)
    a = randn(50, 13, dtype=torch.bfloat16, device=device)
    b = randn(5, 13, 7, dtype=torch.bfloat16, device=device)
    bias = randn(5, 7, dtype=torch.bfloat16, device=device)
    ends = ENDS_50["tail"]
    out = grouped_mm(a, b, offs=_offs(ends, device), bias=bias)
    assert out.dtype == torch.bfloat16
    assert_close(out, ref_2d3d(a, b, ends, bias))
    a3 = randn(5, 7, 13, dtype=torch.bfloat16, device=device)
    bt = randn(50, 13, dtype=torch.bfloat16, device=device).t()
    assert_close(grouped_mm(a3, bt, offs=_offs(ends, device)), ref_3d2d(a3, bt, ends))


def test_2d3d_empty_dims(device):
    b = randn(3, 13, 7, device=device)
    offs = _offs([0, 0, 0], device)
    assert grouped_mm(randn(0, 13, device=device), b, offs=offs).shape == (0, 7)
    assert grouped_mm(randn(4, 13, device=device), randn(3, 13, 0, device=device), offs=offs).shape == (4, 0)
    # K = 0: zero products, plus the bias of each row's group
    bias = randn(3, 7, device=device)
    out = grouped_mm(randn(4, 0, device=device), randn(3, 0, 7, device=device), offs=_offs([1, 1, 3], device),
                     bias=bias)
    assert_close(out, torch.stack([bias[0], bias[2], bias[2], torch.zeros(7, device=device)]))
    # no groups at all: every row is past offs[-1]
    out = grouped_mm(randn(4, 13, device=device), randn(0, 13, 7, device=device), offs=_offs([], device))
    assert torch.equal(out, torch.zeros(4, 7, device=device))


# ---------------------------------------------------------------------------- fp8 weights

def _fp8_experts(G, N, K, device):
    """(G, N, K) weights quantised per output column: float8_e4m3fn and float32 (G, N) scales."""
    w = randn(G, N, K, device=device, scale=K ** -0.5)
    s = w.abs().amax(-1).clamp_min(1e-12) / 448
    q = (w / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return w, q, s


@needs_fp8
@pytest.mark.parametrize("decode", ["native", "bits"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_fp8_weights(decode, dtype, monkeypatch, device):
    monkeypatch.setattr(GM, "FP8_DECODE", decode)
    w, q, s = _fp8_experts(5, 40, 100, device)
    a = randn(50, 100, dtype=dtype, device=device)
    ends = ENDS_50["mixed"]
    bias = randn(5, 40, dtype=dtype, device=device)
    qt = q.transpose(1, 2)  # (G, K, N) view of (G, N, K) storage
    # tight: float32 output against the float64 product with the dequantised weight
    out = grouped_mm(a, qt, offs=_offs(ends, device), scale_b=s, bias=bias, out_dtype=torch.float32)
    assert_close(out, ref_2d3d(a, qt, ends, bias, s), tol=2e-6)
    out = grouped_mm(a, qt, offs=_offs(ends, device), scale_b=s)
    assert out.dtype == dtype
    assert_close(out, ref_2d3d(a, qt, ends, None, s))
    # loose: against the unquantised weight (e4m3 keeps 3 mantissa bits)
    ref = ref_2d3d(a, w.transpose(1, 2), ends)
    assert (out.double().cpu() - ref).norm() / ref.norm() < 0.05
    assert_close(GM.reference_grouped_mm(a, qt, offs=_offs(ends, device), scale_b=s, bias=bias,
                                         out_dtype=torch.float32), ref_2d3d(a, qt, ends, bias, s), tol=2e-6)


@needs_fp8
@pytest.mark.parametrize("decode", ["native", "bits"])
def test_fp8_every_code(decode, monkeypatch, device):
    """All 256 e4m3fn codes through the kernel's conversion: column n of expert 1 repeats code n,
    so out[row, n] = 16 * value * scale; NaN codes give NaN (except the interpreter's native load,
    which reads 0x7F as 480)."""
    monkeypatch.setattr(GM, "FP8_DECODE", decode)
    codes = torch.arange(256, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    q = torch.zeros(2, 16, 256, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    q[1] = codes[None, :].expand(16, 256)
    s = torch.full((2, 256), 0.5, device=device)
    a = torch.ones(3, 16, dtype=torch.bfloat16, device=device)
    out = grouped_mm(a, q, offs=_offs([1, 3], device), scale_b=s, out_dtype=torch.float32)
    expect = codes.float() * 8
    nan = expect.isnan()
    assert torch.equal(out[0], torch.zeros(256, device=device))
    for row in (1, 2):
        assert torch.equal(out[row][~nan], expect[~nan])
        if not (decode == "native" and GM.INTERPRET):
            assert torch.equal(out[row].isnan(), nan)


@needs_fp8
def test_fp8_3d3d(device):
    _, q, s = _fp8_experts(3, 13, 67, device)
    a = randn(3, 20, 67, dtype=torch.bfloat16, device=device)
    bias = randn(3, 13, dtype=torch.bfloat16, device=device)
    out = grouped_mm(a, q.transpose(1, 2), scale_b=s, bias=bias, out_dtype=torch.float32)
    assert_close(out, ref_3d3d(a, q.transpose(1, 2), bias, s), tol=2e-6)


# ---------------------------------------------------------------------------- other forms

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["mixed", "tail", "one_group", "empty_first_last"])
def test_3d2d(dtype, case, device):
    """Jagged columns: (G, M, K) x (K, total_N); mat_b as the transpose of a (total_N, K) weight."""
    ends = ENDS_50[case]
    a = randn(5, 13, 67, dtype=dtype, device=device)
    b = randn(50, 67, dtype=dtype, device=device, scale=0.1).t()
    out = grouped_mm(a, b, offs=_offs(ends, device))
    assert out.dtype == dtype and out.shape == (13, 50)
    assert_close(out, ref_3d2d(a, b, ends))
    assert torch.equal(out[:, ends[-1]:], torch.zeros_like(out[:, ends[-1]:]))


def test_3d2d_strides(blocks, device):
    blocks(16, 32, 16)
    ends = [0, 33, 33, 70]
    a = noncontig(randn(4, 7, 200, device=device)).transpose(1, 2).contiguous().transpose(1, 2)
    b = noncontig(randn(200, 70, device=device))
    assert_close(grouped_mm(a, b, offs=_offs(ends, device)), ref_3d2d(a, b, ends))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["mixed", "tail", "empty_first_last", "all_empty"])
def test_2d2d(dtype, case, device):
    """Jagged K: (M, total_K) x (total_K, N) -> (G, M, N); empty groups give zero matrices."""
    ends = ENDS_50[case]
    a = randn(13, 50, dtype=dtype, device=device)
    b = randn(50, 67, dtype=dtype, device=device, scale=0.2)
    out = grouped_mm(a, b, offs=_offs(ends, device))
    assert out.dtype == dtype and out.shape == (5, 13, 67)
    assert_close(out, ref_2d2d(a, b, ends))
    for g, (s, e) in enumerate(_bounds(ends, 50)):
        if s == e:
            assert torch.equal(out[g], torch.zeros_like(out[g]))


def test_2d2d_weight_grad_shape(device):
    """The MoE weight-gradient use: x.T (K, T) x grad (T, N) per group, with bias and float32 out."""
    ends = [10, 10, 45, 200]
    x = randn(200, 13, dtype=torch.bfloat16, device=device)
    g = randn(200, 67, dtype=torch.bfloat16, device=device)
    bias = randn(4, 67, dtype=torch.float32, device=device)
    out = grouped_mm(x.t(), g, offs=_offs(ends, device), bias=bias, out_dtype=torch.float32)
    assert_close(out, ref_2d2d(x.t(), g, ends, bias), tol=2e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_3d3d(dtype, device):
    a = randn(3, 37, 67, dtype=dtype, device=device)
    b = randn(3, 13, 67, dtype=dtype, device=device, scale=0.1).transpose(1, 2)
    bias = randn(3, 13, dtype=dtype, device=device)
    out = grouped_mm(a, b, bias=bias)
    assert out.shape == (3, 37, 13)
    assert_close(out, ref_3d3d(a, b, bias))


def test_float64_takes_reference(device):
    a = randn(50, 13, dtype=torch.float64, device=device)
    b = randn(5, 13, 7, dtype=torch.float64, device=device)
    ends = ENDS_50["tail"]
    assert_close(grouped_mm(a, b, offs=_offs(ends, device)), ref_2d3d(a, b, ends))


@pytest.mark.skipif(not hasattr(F, "grouped_mm"), reason="torch has no torch.nn.functional.grouped_mm")
def test_matches_torch_grouped_mm(device):
    """Same semantics as PyTorch's own op where it runs (bf16, 16-byte aligned strides); PyTorch
    leaves rows past offs[-1] uninitialised, so only the grouped rows are compared."""
    ends = [3, 3, 20, 41]
    a = randn(48, 64, dtype=torch.bfloat16, device=device)
    b = randn(4, 32, 64, dtype=torch.bfloat16, device=device).transpose(1, 2)
    offs = _offs(ends, device)
    try:
        want = F.grouped_mm(a, b, offs=offs)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch.nn.functional.grouped_mm does not run here: {exc}")
    out = grouped_mm(a, b, offs=offs)
    assert_close(out[:41], want[:41].float(), dtype=torch.bfloat16)


# ---------------------------------------------------------------------------- autograd

def _form(name, device):
    """(mat_a, mat_b, offs ends or None, bias or None, float64 reference function) of a form."""
    if name == "2d3d":
        ends = ENDS_50["tail"]
        return (randn(50, 13, device=device), randn(5, 13, 7, device=device), ends, randn(5, 7, device=device),
                lambda a, b, x: ref_2d3d(a, b, ends, x))
    if name == "3d2d":
        ends = ENDS_50["mixed"]
        return (randn(5, 7, 13, device=device), randn(50, 13, device=device).t(), ends, None,
                lambda a, b, x: ref_3d2d(a, b, ends))
    if name == "2d2d":
        ends = ENDS_50["empty_first_last"]
        return (randn(7, 50, device=device), randn(50, 13, device=device), ends, randn(5, 13, device=device),
                lambda a, b, x: ref_2d2d(a, b, ends, x))
    return (randn(3, 7, 13, device=device), randn(3, 13, 5, device=device), None, randn(3, 5, device=device),
            lambda a, b, x: ref_3d3d(a, b, x))


@pytest.mark.parametrize("form", ["2d3d", "3d2d", "2d2d", "3d3d"])
def test_autograd(form, device):
    a, b, ends, bias, ref = _form(form, device)
    offs = _offs(ends, device) if ends is not None else None
    leaves = [t.requires_grad_() for t in (a, b, bias) if t is not None]
    out = grouped_mm(a, b, offs=offs, bias=bias)
    w = randn(*out.shape, device=device)
    got = torch.autograd.grad((out * w).sum(), leaves)
    leaves64 = [t.detach().double().cpu().requires_grad_() for t in leaves]  # the float64 oracle on the CPU
    a64, b64 = leaves64[:2]
    want = torch.autograd.grad((ref(a64, b64, leaves64[2] if bias is not None else None) * w.double().cpu()).sum(),
                               leaves64)
    for g, r in zip(got, want):
        assert_close(g, r)


@needs_fp8
def test_autograd_fp8_weights(device):
    _, q, s = _fp8_experts(5, 7, 13, device)
    a = randn(50, 13, dtype=torch.bfloat16, device=device).requires_grad_()
    ends = ENDS_50["mixed"]
    out = grouped_mm(a, q.transpose(1, 2), offs=_offs(ends, device), scale_b=s)
    (ga,) = torch.autograd.grad(out.float().sum(), [a])
    a64 = a.detach().double().requires_grad_()
    (want,) = torch.autograd.grad(ref_2d3d(a64, q.transpose(1, 2), ends, None, s).sum(), [a64])
    assert_close(ga, want, tol=1.2e-2)  # the weight is dequantised to bfloat16 for the gradient


# ---------------------------------------------------------------------------- op, validate_offs, errors

def test_fake_shapes_without_reading_offs():
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = torch.ops.fastpath.grouped_mm
    with FakeTensorMode():
        offs = torch.empty(4, dtype=torch.int32)
        bf = torch.bfloat16
        cases = [((10, 8), (4, 8, 6), offs, (10, 6)), ((4, 5, 8), (8, 30), offs, (5, 30)),
                 ((5, 30), (30, 6), offs, (4, 5, 6)), ((4, 5, 8), (4, 8, 6), None, (4, 5, 6))]
        for sa, sb, o, want in cases:
            out = op(torch.empty(sa, dtype=bf), torch.empty(sb, dtype=bf), o, None, None, torch.float32)
            assert tuple(out.shape) == want and out.dtype == torch.float32


def test_compile_fullgraph(device):
    a = randn(50, 13, device=device)
    b = randn(5, 13, 7, device=device)
    ends = ENDS_50["mixed"]
    offs = _offs(ends, device)
    f = torch.compile(lambda a: grouped_mm(a, b, offs=offs) * 2, fullgraph=True, backend="aot_eager")
    assert_close(f(a), 2 * ref_2d3d(a, b, ends))


def test_validate_offs(device):
    GM.validate_offs(_offs([0, 3, 3, 10], device), 10)
    GM.validate_offs(_offs([], device), 0)
    with pytest.raises(ValueError, match=r"offs: expected non-decreasing .*offs\[1\] = 5 > offs\[2\] = 4"):
        GM.validate_offs(_offs([1, 5, 4], device), 10)
    with pytest.raises(ValueError, match=r"offs: expected non-negative .*offs\[0\] = -1"):
        GM.validate_offs(_offs([-1, 5], device), 10)
    with pytest.raises(ValueError, match=r"offs: expected group ends at most 10.*offs\[-1\] = 11"):
        GM.validate_offs(_offs([1, 11], device), 10)
    with pytest.raises(TypeError, match="offs"):
        GM.validate_offs(torch.tensor([1, 2], device=device), 10)
    with pytest.raises(ValueError, match="offs"):
        GM.validate_offs(_offs([[1, 2]], device), 10)


def test_errors(device):
    a = randn(10, 8, device=device)
    b = randn(3, 8, 6, device=device)
    offs = _offs([2, 5, 10], device)
    cases = [
        (TypeError, "offs: expected dtype int32", dict(offs=offs.long())),
        (ValueError, "offs: expected length 3", dict(offs=_offs([2, 10], device))),
        (ValueError, "offs: expected a 1-D", dict(offs=offs[None])),
        (ValueError, "offs: required", dict(offs=None)),
        (ValueError, "mat_b: expected the contraction size 8", dict(mat_b=randn(3, 7, 6, device=device))),
        (TypeError, "mat_b: expected dtype torch.float32 like mat_a", dict(mat_b=b.half())),
        (ValueError, r"bias: expected shape \(3, 6\)", dict(bias=randn(6, device=device))),
        (TypeError, "bias: expected dtype", dict(bias=randn(3, 6, device=device).half())),
        (TypeError, "out_dtype", dict(out_dtype=torch.int32)),
        (ValueError, "mat_a: expected a 2-D or 3-D", dict(mat_a=randn(8, device=device))),
        (TypeError, "mat_a", dict(mat_a=[1.0])),
    ]
    if HAS_FP8:
        q = b.to(torch.float8_e4m3fn)
        s = torch.ones(3, 6, device=device)
        cases += [
            (TypeError, "mat_b: a torch.float8_e4m3fn mat_b needs scale_b", dict(mat_b=q)),
            (ValueError, r"scale_b: expected shape \(3, 6\)", dict(mat_b=q, scale_b=s[:, :5])),
            (TypeError, "scale_b: expected dtype float32", dict(mat_b=q, scale_b=s.half())),
            (TypeError, "mat_b: scale_b needs a float8", dict(scale_b=s)),
            (NotImplementedError, "mat_a: float8", dict(mat_a=a.to(torch.float8_e4m3fn), mat_b=q, scale_b=s)),
        ]
    for exc, msg, kw in cases:
        args = dict(mat_a=a, mat_b=b, offs=offs)
        args.update(kw)
        with pytest.raises(exc, match=msg):
            grouped_mm(args.pop("mat_a"), args.pop("mat_b"), **args)
    a3 = randn(3, 4, 8, device=device)
    with pytest.raises(ValueError, match="offs: must be None"):
        grouped_mm(a3, b, offs=offs)
    with pytest.raises(ValueError, match="mat_b: expected 3 groups"):
        grouped_mm(a3, randn(2, 8, 6, device=device))
    with pytest.raises(ValueError, match="offs: expected length 3"):
        grouped_mm(a3, randn(8, 20, device=device), offs=_offs([5, 20], device))
    with pytest.raises(NotImplementedError, match="bias"):
        grouped_mm(a3, randn(8, 20, device=device), offs=offs, bias=randn(3, 20, device=device))
    elsewhere = torch.empty(3, dtype=torch.int32, device="meta" if device.type == "cpu" else "cpu")
    with pytest.raises(ValueError, match="offs: expected a tensor on"):
        grouped_mm(a, b, offs=elsewhere)
