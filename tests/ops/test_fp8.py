"""quantize_fp8 and scaled_mm on the Triton path (compiled on a GPU, interpreted on the CPU)
through the public API, against float64 references computed here, independently."""
import importlib
import itertools
import math

import pytest
import torch

from fastpath._core import backend
from fastpath.ops import fp8 as F8
from fastpath.ops import matvec
from fastpath.ops.fp8 import ScalingType, quantize_fp8, scaled_mm
from tests.conftest import noncontig, randn
from tests.tolerances import REL_TOL, assert_close, rel_error

MM = importlib.import_module("fastpath.ops.fp8.scaled_mm")  # the module (the package exports the function)

if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("this torch has no float8 dtypes", allow_module_level=True)

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
FP8 = [E4, E5]
FMAX = {E4: 448.0, E5: 57344.0}
#: Minimum SQNR (dB) of a quantised tensor: 3 mantissa bits (e4m3) give ~31 dB, 2 bits ~25 dB.
MIN_SQNR = {E4: 25.0, E5: 19.0}
RECIPES = {  # name -> (recipe, block)
    "tensorwise": ("tensorwise", 128),
    "rowwise": ("rowwise", 128),
    "block128": ("blockwise", 128),
    "block1x128": ("blockwise", (1, 128)),
}


def sqnr(x, approx) -> float:
    x, approx = x.double().cpu(), approx.double().cpu()
    noise = (x - approx).norm().item() ** 2
    return math.inf if noise == 0 else 10 * math.log10(x.norm().item() ** 2 / noise)


def groups(shape, recipe, block):
    """(scale index, slice of x) for every scaling group, enumerated independently of fastpath."""
    if recipe == "tensorwise":
        return [((), (Ellipsis,))]
    if recipe == "rowwise":
        return [(idx + (0,), idx + (slice(None),)) for idx in itertools.product(*map(range, shape[:-1]))]
    bm, bk = (block, block) if isinstance(block, int) else block
    M, K = shape
    return [((i, j), (slice(i * bm, (i + 1) * bm), slice(j * bk, (j + 1) * bk)))
            for i in range(-(-M // bm)) for j in range(-(-K // bk))]


def expected_scale(x, recipe, block, dtype):
    """float64 amax / fp8_max per group (1 for an all-zero group), then rounded to float32."""
    x64 = x.double().cpu()
    g = groups(tuple(x.shape), recipe, block)
    out = {}
    for idx, sl in g:
        amax = x64[sl].abs().max().item() if x64[sl].numel() else 0.0
        out[idx] = 1.0 if amax == 0 else amax / FMAX[dtype]
    return out


def dequant(q, scale, recipe, block):
    qf = q.double().cpu()
    s = scale.double().cpu()
    if recipe == "blockwise":
        bm, bk = (block, block) if isinstance(block, int) else block
        s = s.repeat_interleave(bm, 0).repeat_interleave(bk, 1)[:q.shape[0], :q.shape[1]]
    return qf * s


def check_quantized(x, q, scale, recipe, block, dtype):
    assert q.dtype == dtype and q.shape == x.shape and q.is_contiguous()
    assert scale.dtype == torch.float32
    qf = q.float()
    assert torch.isfinite(qf).all() and qf.abs().max() <= FMAX[dtype]
    exp = expected_scale(x, recipe, block, dtype)
    s = scale.cpu()
    for idx, want in exp.items():
        assert s[idx].item() == torch.tensor(want, dtype=torch.float64).float().item(), f"scale{idx}"
    # q is x / scale rounded to nearest even (PyTorch's own fp8 conversion as the oracle)
    full = dequant(torch.ones_like(q, dtype=torch.float32), scale, recipe, block).float()
    want_q = (x.float().cpu() / full).clamp(-FMAX[dtype], FMAX[dtype]).to(dtype)
    assert torch.equal(q.cpu().view(torch.uint8), want_q.view(torch.uint8))
    assert sqnr(x, dequant(q, scale, recipe, block)) >= MIN_SQNR[dtype]


# ---------------------------------------------------------------------------- quantize_fp8

@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("name", RECIPES)
@pytest.mark.parametrize("shape", [(1, 13), (7, 200), (67, 300), (130, 13)])
def test_quantize(name, dtype, shape, device):
    recipe, block = RECIPES[name]
    x = randn(*shape, device=device, scale=3.0)
    x[0, 0] = 1000.0  # one outlier: its group's scale differs from the others'
    q, scale = quantize_fp8(x, recipe, block=block, dtype=dtype)
    rows = -(-shape[0] // (128 if name == "block128" else 1))
    want_shape = {"tensorwise": (), "rowwise": (shape[0], 1)}.get(name, (rows, -(-shape[1] // 128)))
    assert tuple(scale.shape) == want_shape
    check_quantized(x, q, scale, recipe, block, dtype)


@pytest.mark.parametrize("in_dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_quantize_input_dtypes(in_dtype, device):
    x = randn(7, 200, dtype=in_dtype, device=device)
    for recipe, block in RECIPES.values():
        q, scale = quantize_fp8(x, recipe, block=block)
        check_quantized(x, q, scale, recipe, block, E4)


@pytest.mark.parametrize("name", RECIPES)
def test_quantize_zero_groups(name, device):
    recipe, block = RECIPES[name]
    x = randn(67, 300, device=device)
    x[3] = 0.0
    x[:, 128:256] = 0.0  # a zero 128x128 block column (and zero 1x128 blocks)
    q, scale = quantize_fp8(x, recipe, block=block)
    check_quantized(x, q, scale, recipe, block, E4)
    assert (q[3].float() == 0).all()
    if name == "rowwise":
        assert scale[3, 0].item() == 1.0
    elif name != "tensorwise":
        assert (scale[:, 1] == 1.0).all()
    q0, s0 = quantize_fp8(torch.zeros(5, 13, device=device), recipe, block=block)
    assert (s0 == 1.0).all() and (q0.float() == 0).all()


def test_quantize_noncontiguous_and_nd(device):
    x = noncontig(randn(67, 200, device=device))
    for recipe, block in RECIPES.values():
        q, scale = quantize_fp8(x, recipe, block=block)
        check_quantized(x, q, scale, recipe, block, E4)
    xt = randn(200, 7, device=device).t()  # column-major
    q, scale = quantize_fp8(xt, "blockwise", block=(1, 128), dtype=E5)
    check_quantized(xt, q, scale, "blockwise", (1, 128), E5)
    x4 = randn(4, 3, 2, 13, device=device).permute(2, 0, 1, 3)[:, ::2]  # uncollapsible leading dims
    for recipe in ("tensorwise", "rowwise"):
        q, scale = quantize_fp8(x4, recipe)
        assert tuple(scale.shape) == ((2, 2, 3, 1) if recipe == "rowwise" else ())
        check_quantized(x4, q, scale, recipe, 128, E4)
    x1 = randn(1000, device=device)  # 1-D, tensor-wise split over many programs
    q, scale = quantize_fp8(x1)
    check_quantized(x1, q, scale, "tensorwise", 128, E4)
    q, scale = quantize_fp8(torch.tensor(-3.0, device=device))
    assert scale.item() == torch.tensor(3.0 / 448).item() and q.float().item() == -448.0
    q, scale = quantize_fp8(randn(0, 5, device=device), "rowwise")
    assert q.shape == (0, 5) and scale.shape == (0, 1)


def test_quantize_past_int32_columns(device, monkeypatch):
    """A last dim of 2**31+ values takes the PyTorch path, a strided last dim whose offsets would
    pass int32 a compact copy (the limit lowered: 1000 values, a column stride of 200)."""
    Q = importlib.import_module("fastpath.ops.fp8.quantize")
    monkeypatch.setattr(Q, "INT32_END", 1000)
    x1 = randn(1000, device=device)
    q, scale = quantize_fp8(x1)
    check_quantized(x1, q, scale, "tensorwise", 128, E4)
    xt = randn(200, 7, device=device).t()  # (6 * 200 past the limit)
    for recipe, block in RECIPES.values():
        q, scale = quantize_fp8(xt, recipe, block=block)
        check_quantized(xt, q, scale, recipe, block, E4)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("name", RECIPES)
def test_quantize_nonfinite(name, bad, device):
    """A group holding NaN or +-inf gets a NaN scale and NaN q; other groups are exact."""
    recipe, block = RECIPES[name]
    x = randn(7, 300, device=device)
    x[2, 140] = bad
    q, scale = quantize_fp8(x, recipe, block=block)
    ref_q, ref_s = F8.reference_quantize_fp8(x, recipe, block=block)
    deq = dequant(q, scale, recipe, block)
    if name == "tensorwise":
        assert scale.isnan().item() and q.float().isnan().all()
        return
    hit = {"rowwise": (2, 0), "block128": (0, 1), "block1x128": (2, 1)}[name]
    assert scale[hit].isnan().item() and scale.isnan().sum().item() == 1
    bad_mask = deq.isnan()
    assert bad_mask[2, 140] and bad_mask.sum() == {"rowwise": 300, "block128": 7 * 128, "block1x128": 128}[name]
    good = ~bad_mask
    assert torch.equal(q.cpu().view(torch.uint8)[good], ref_q.cpu().view(torch.uint8)[good])
    assert torch.equal(scale.isnan(), ref_s.isnan()) and torch.equal(scale[~scale.isnan()], ref_s[~ref_s.isnan()])
    assert sqnr(x[good], deq[good]) >= MIN_SQNR[E4]


def test_quantize_errors(device):
    x = randn(4, 8, device=device)
    with pytest.raises(ValueError, match="recipe"):
        quantize_fp8(x, "columnwise")
    with pytest.raises(ValueError, match="block"):
        quantize_fp8(x, "blockwise", block=(1, 0))
    with pytest.raises(ValueError, match="x: blockwise"):
        quantize_fp8(randn(2, 3, 4, device=device), "blockwise")
    with pytest.raises(TypeError, match="dtype"):
        quantize_fp8(x, dtype=torch.float16)
    with pytest.raises(TypeError, match="x"):
        quantize_fp8(torch.arange(4, device=device))


# ---------------------------------------------------------------------------- scaled_mm

MM_RECIPES = {  # name -> (a recipe, a block, b recipe, b block, ScalingType a, ScalingType b)
    "tensorwise": ("tensorwise", 128, "tensorwise", 128, ScalingType.TensorWise, ScalingType.TensorWise),
    "rowwise": ("rowwise", 128, "rowwise", 128, ScalingType.RowWise, ScalingType.RowWise),
    "blockwise": ("blockwise", (1, 128), "blockwise", 128, ScalingType.BlockWise1x128, ScalingType.BlockWise128x128),
}


def make_mm(name, M, N, K, device, a_dtype=E4, b_dtype=E4):
    """x (M, K), weight w (N, K), quantised; mat_b = q_w.t() is column-major, scale_b = s_w.t()."""
    ra, ba, rb, bb, sa_t, sb_t = MM_RECIPES[name]
    x = randn(M, K, device=device)
    w = randn(N, K, device=device, scale=0.05)
    qa, sa = quantize_fp8(x, ra, block=ba, dtype=a_dtype)
    qw, sw = quantize_fp8(w, rb, block=bb, dtype=b_dtype)
    sb = sw if name == "tensorwise" else sw.t()
    deq_a = dequant(qa, sa, ra, ba)
    deq_b = dequant(qw, sw, rb, bb).t()
    return dict(x=x, w=w, qa=qa, qb=qw.t(), sa=sa, sb=sb, ta=sa_t, tb=sb_t, deq_a=deq_a, deq_b=deq_b,
                blockwise=name == "blockwise")


#: Hopper's fp8 tensor-core instructions (capability 8.9+, both operands of one fp8 dtype)
#: add products with less than float32 precision inside each instruction, as cuBLAS's do:
#: measured 5e-5..1.2e-4 relative error on an H200 against the float64 product.
FP8_MMA_TOL = 3e-4


def _fp8_mma(qa, qb, blockwise=False):
    """True where scaled_mm feeds these operands to fp8 tensor cores (tiled path, or the
    matrix-vector path's native fp8 dot; not one row under ``ONE_ROW_FMA``)."""
    M = qa.shape[0]
    if M == 1 and MM.ONE_ROW_FMA and not blockwise:
        return False
    return F8.bits._native_fp8(qa, qb) and (M > MM.MV_MAX_M or matvec.FP8_DOT is not None)


def check_mm(d, out, bias, out_dtype):
    ref = d["deq_a"] @ d["deq_b"]
    mma = _fp8_mma(d["qa"], d["qb"], d["blockwise"])
    exact = d["x"].double().cpu() @ d["w"].double().cpu().t()
    if bias is not None:
        ref = ref + bias.double().cpu()
        exact = exact + bias.double().cpu()
    assert out.dtype == out_dtype and out.shape == ref.shape
    tol = (FP8_MMA_TOL if mma else 1e-5) if out_dtype == torch.float32 else REL_TOL[out_dtype]
    assert_close(out, ref.to(out_dtype), tol=tol + REL_TOL[out_dtype])
    assert rel_error(out, ref) <= tol
    assert sqnr(exact, out) >= 20.0


@pytest.mark.parametrize("name", MM_RECIPES)
@pytest.mark.parametrize("M,N", [(1, 300), (3, 13), (16, 67), (17, 13), (67, 300), (67, 13)])
def test_scaled_mm(name, M, N, device):
    """M <= 16 takes the matrix-vector kernel (split over K when N is small), larger M the
    tiled kernel; K = 200 and N cross block edges with masked tails."""
    d = make_mm(name, M, N, 200, device)
    bias = randn(N, device=device)
    out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"], bias=bias, output_dtype=torch.float32)
    check_mm(d, out, bias, torch.float32)


@pytest.mark.parametrize("fma", [False, True])
@pytest.mark.parametrize("name", MM_RECIPES)
@pytest.mark.parametrize("N", [13, 67])
def test_scaled_mm_one_row(name, N, fma, monkeypatch, device):
    """One row both ways (``ONE_ROW_FMA``: the product-and-sum plan or the fp8 dot; blockwise
    keeps the dot), K = 300 (split over K, a masked K tail; on a GPU the narrow unsplit blocks)."""
    monkeypatch.setattr(MM, "ONE_ROW_FMA", fma)
    d = make_mm(name, 1, N, 300, device)
    bias = randn(N, device=device)
    out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"], bias=bias, output_dtype=torch.float32)
    check_mm(d, out, bias, torch.float32)


@pytest.mark.parametrize("K", [1, 16, 24])
@pytest.mark.parametrize("M", [1, 3, 16, 17])
def test_scaled_mm_short_k(M, K, device):
    """K shorter than any K tile (the fp8 dot's tile is 32 wide at least: a short K is masked
    within one), each row class, each recipe but blockwise (whose K block is 128)."""
    for name in ("tensorwise", "rowwise"):
        d = make_mm(name, M, 33, K, device)
        out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"], output_dtype=torch.float32)
        check_mm(d, out, None, torch.float32)


def test_scaled_mm_tensor_descriptors(device):
    """The tiled kernel through tensor descriptors (K-contiguous, 16-byte aligned operands:
    K = 208 is not a multiple of the 32-wide K tile, so the last tile is zero-filled past
    the edge; M and N cross tile edges too)."""
    for name in MM_RECIPES:
        d = make_mm(name, 67, 130, 208, device)
        if backend.tma_on(device):
            assert MM._tma_ok(d["qa"].view(torch.uint8), d["qb"].view(torch.uint8))
        bias = randn(130, device=device)
        out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"], bias=bias, output_dtype=torch.float32)
        check_mm(d, out, bias, torch.float32)


#: Every (output dtype, recipe) pair once; each output dtype with both row counts (the
#: matrix-vector kernel, the tiled one) and with and without a bias.
_OUT_CASES = [(dt, name, (2, 33)[(i + j) % 2], (i + j) % 3 != 0)
              for i, dt in enumerate((torch.float32, torch.float16, torch.bfloat16))
              for j, name in enumerate(MM_RECIPES)]


@pytest.mark.parametrize("out_dtype,name,M,with_bias", _OUT_CASES)
def test_scaled_mm_output_dtypes(out_dtype, name, M, with_bias, device):
    d = make_mm(name, M, 45, 160, device)
    bias = randn(45, dtype=out_dtype, device=device) if with_bias else None
    out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"], bias=bias, output_dtype=out_dtype)
    check_mm(d, out, bias, out_dtype)
    if name == "rowwise":  # the default output dtype: bfloat16
        out = scaled_mm(d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"])
        check_mm(d, out, None, torch.bfloat16)


@pytest.mark.parametrize("M", [5, 40])
def test_scaled_mm_layouts_and_mixed_dtypes(M, device):
    """Row-major and strided mat_b, strided mat_a and scales, e4m3 x e5m2."""
    for name in MM_RECIPES:
        d = make_mm(name, M, 70, 200, device, a_dtype=E4, b_dtype=E5)
        qa = noncontig(d["qa"].view(torch.uint8)).view(E4)  # every other column of a wider buffer
        qb = d["qb"].contiguous()  # row-major (K, N)
        sa = noncontig(d["sa"]) if name != "tensorwise" else d["sa"].reshape(1, 1)
        assert not qa.is_contiguous()
        out = scaled_mm(qa, qb, sa, d["ta"], d["sb"], d["tb"], output_dtype=torch.float32)
        check_mm(d, out, None, torch.float32)
        wide = torch.zeros(200, 140, dtype=torch.uint8, device=device)  # strided columns of mat_b
        wide[:, ::2] = d["qb"].view(torch.uint8)
        out = scaled_mm(d["qa"], wide[:, ::2].view(E5), d["sa"], d["ta"], d["sb"], d["tb"], output_dtype=torch.float32)
        check_mm(d, out, None, torch.float32)


def test_scaled_mm_split_k_deterministic(device):
    d = make_mm("rowwise", 4, 13, 1000, device)
    args = (d["qa"], d["qb"], d["sa"], d["ta"], d["sb"], d["tb"])
    first = scaled_mm(*args, output_dtype=torch.float32)
    check_mm(d, first, None, torch.float32)
    for _ in range(2):
        assert torch.equal(scaled_mm(*args, output_dtype=torch.float32), first)


def test_scaled_mm_recipe_spellings_and_edges(device):
    d = make_mm("rowwise", 3, 13, 200, device)
    want = scaled_mm(d["qa"], d["qb"], d["sa"], ScalingType.RowWise, d["sb"], ScalingType.RowWise)
    tf = torch.nn.functional
    if hasattr(tf, "ScalingType"):
        got = scaled_mm(d["qa"], d["qb"], [d["sa"]], [tf.ScalingType.RowWise], [d["sb"]], tf.ScalingType.RowWise,
                        tf.SwizzleType.NO_SWIZZLE, None)
        assert torch.equal(got, want)
    assert torch.equal(scaled_mm(d["qa"], d["qb"], d["sa"], "RowWise", d["sb"], 1), want)
    # empty M, N and K = 0 (the output is the bias)
    qa0 = torch.zeros(0, 200, device=device).to(E4)
    assert scaled_mm(qa0, d["qb"], torch.ones(0, 1, device=device), 1, d["sb"], 1).shape == (0, 13)
    bias = randn(13, device=device)
    z = scaled_mm(torch.zeros(3, 0, device=device).to(E4), torch.zeros(0, 13, device=device).to(E4),
                  torch.ones(3, 1, device=device), 1, torch.ones(1, 13, device=device), 1, bias=bias,
                  output_dtype=torch.float32)
    assert torch.equal(z, bias.expand(3, 13))


def test_scaled_mm_nonfinite_scales_propagate(device):
    for M in (3, 20):
        d = make_mm("rowwise", M, 13, 64, device)
        sa = d["sa"].clone()
        sa[1, 0] = float("nan")
        out = scaled_mm(d["qa"], d["qb"], sa, d["ta"], d["sb"], d["tb"], output_dtype=torch.float32)
        assert out[1].isnan().all() and torch.isfinite(out[[0, 2]]).all()


def test_scaled_mm_matches_torch(device):
    """PyTorch's own scaled_mm where this build implements it."""
    tf = torch.nn.functional
    if not hasattr(tf, "scaled_mm"):
        pytest.skip("torch.nn.functional.scaled_mm is not in this torch")
    d = make_mm("tensorwise", 20, 48, 208, device)  # cuBLAS wants K and N divisible by 16
    args = (d["qa"], d["qb"], d["sa"], tf.ScalingType.TensorWise, d["sb"], tf.ScalingType.TensorWise)
    try:
        want = tf.scaled_mm(*args, output_dtype=torch.float32)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch's scaled_mm does not run here: {exc}")
    ours = scaled_mm(*args, output_dtype=torch.float32)
    assert_close(ours, want, tol=2 * FP8_MMA_TOL if _fp8_mma(d["qa"], d["qb"]) else 1e-6)


def test_scaled_mm_errors(device):
    d = make_mm("rowwise", 4, 13, 64, device)
    qa, qb, sa, sb = d["qa"], d["qb"], d["sa"], d["sb"]
    RW, TW = ScalingType.RowWise, ScalingType.TensorWise
    B1, B128 = ScalingType.BlockWise1x128, ScalingType.BlockWise128x128
    with pytest.raises(TypeError, match="mat_a"):
        scaled_mm(qa.float(), qb, sa, RW, sb, RW)
    with pytest.raises(TypeError, match="mat_b"):
        scaled_mm(qa, qb.to(torch.bfloat16), sa, RW, sb, RW)
    with pytest.raises(ValueError, match="mat_a"):
        scaled_mm(qa[0], qb, sa, RW, sb, RW)
    with pytest.raises(ValueError, match="mat_b.*64"):
        scaled_mm(qa, qb[:60], sa, RW, sb, RW)
    with pytest.raises(TypeError, match="output_dtype"):
        scaled_mm(qa, qb, sa, RW, sb, RW, output_dtype=torch.float64)
    with pytest.raises(TypeError, match="bias"):
        scaled_mm(qa, qb, sa, RW, sb, RW, bias=torch.zeros(13, device=device), output_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bias"):
        scaled_mm(qa, qb, sa, RW, sb, RW, bias=torch.zeros(12, device=device), output_dtype=torch.float32)
    with pytest.raises(ValueError, match=r"scale_a: RowWise.*\(4, 1\)"):
        scaled_mm(qa, qb, sa.t(), RW, sb, RW)
    with pytest.raises(ValueError, match=r"scale_b: RowWise.*\(1, 13\)"):
        scaled_mm(qa, qb, sa, RW, sb.reshape(13), RW)
    with pytest.raises(TypeError, match="scale_b"):
        scaled_mm(qa, qb, sa, RW, sb.double(), RW)
    with pytest.raises(ValueError, match="scale_a: TensorWise"):
        scaled_mm(qa, qb, sa, TW, sb[:, :1], TW)
    with pytest.raises(ValueError, match="scale_b: TensorWise"):
        scaled_mm(qa, qb, sa[:1], TW, sb, TW)
    with pytest.raises(NotImplementedError, match="scale_recipe_a.*RowWise, RowWise"):
        scaled_mm(qa, qb, sa, TW, sb, RW)
    with pytest.raises(NotImplementedError, match="BlockWise1x16"):
        scaled_mm(qa, qb, sa, ScalingType.BlockWise1x16, sb, ScalingType.BlockWise1x16)
    with pytest.raises(ValueError, match="scale_recipe_b"):
        scaled_mm(qa, qb, sa, RW, sb, "columnwise")
    with pytest.raises(ValueError, match=r"scale_a: BlockWise1x128.*\(4, 1\)"):
        scaled_mm(qa, qb, torch.ones(4, 2, device=device), B1, torch.ones(1, 1, device=device), B128)
    with pytest.raises(ValueError, match=r"scale_b: BlockWise128x128.*\(1, 1\)"):
        scaled_mm(qa, qb, torch.ones(4, 1, device=device), B1, torch.ones(1, 2, device=device), B128)
    with pytest.raises(TypeError, match="swizzle_a"):  # bias passed where PyTorch has swizzle_a
        scaled_mm(qa, qb, sa, RW, sb, RW, torch.zeros(13, device=device))
    with pytest.raises(NotImplementedError, match="contraction_dim"):
        scaled_mm(qa, qb, sa, RW, sb, RW, contraction_dim=(0, 1))
    with pytest.raises(TypeError, match="scale_a"):
        scaled_mm(qa, qb, 1.0, TW, sb, TW)


# ---------------------------------------------------------------------------- compile, fallback

def test_compile_fullgraph(device):
    def f(x, w, bias):
        qa, sa = quantize_fp8(x, "rowwise")
        qw, sw = quantize_fp8(w, "rowwise")
        return scaled_mm(qa, qw.t(), sa, ScalingType.RowWise, sw.t(), ScalingType.RowWise, bias=bias,
                         output_dtype=torch.float32)

    x, w, bias = randn(20, 64, device=device), randn(13, 64, device=device), randn(13, device=device)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, bias)
    assert_close(out, f(x, w, bias), tol=1e-6)
    assert sqnr(x.double() @ w.double().t() + bias.double(), out) >= 20.0


def test_reference_fallback(monkeypatch, device):
    """With Triton disabled, the same calls take the reference path and agree with the kernels."""
    x = randn(20, 200, device=device)
    w = randn(13, 200, device=device)
    q, s = quantize_fp8(x, "blockwise", block=(1, 128))
    qw, sw = quantize_fp8(w, "blockwise")
    out = scaled_mm(q, qw.t(), s, 4, sw.t(), 5, output_dtype=torch.float32)
    monkeypatch.setattr(backend, "DISABLED", True)
    assert "FASTPATH_DISABLE_TRITON" in F8.FAMILY["reason"](device)
    q2, s2 = quantize_fp8(x, "blockwise", block=(1, 128))
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s2, s)
    out2 = scaled_mm(q, qw.t(), s, 4, sw.t(), 5, output_dtype=torch.float32)
    assert_close(out2, out, tol=FP8_MMA_TOL if _fp8_mma(q, qw) else 1e-6)


@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
def test_quantize_every_code_and_tie(dtype, device):
    """Every finite fp8 value and every midpoint between neighbours (ties round to even,
    subnormals included), with amax = fp8 max so that the scale is exactly 1."""
    codes = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    vals = codes[torch.isfinite(codes)].unique()
    pos = vals[vals >= 0]
    mids = (pos[:-1].double() + pos[1:].double()) / 2
    x = torch.cat([vals.double(), mids, -mids, pos.double() * 0.75]).float().to(device)
    q, scale = quantize_fp8(x, dtype=dtype)
    assert scale.item() == 1.0
    assert torch.equal(q.cpu().view(torch.uint8), x.cpu().to(dtype).view(torch.uint8))
