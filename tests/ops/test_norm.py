"""rms_norm against transformers' own norm modules (bit for bit up to the order of a float32
sum) and against float64."""
import pytest
import torch

from fastpath.ops.norm import reference_rms_norm, rms_norm
from tests.conftest import DEVICE, noncontig, randn
from tests.tolerances import assert_close

q35 = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
lfm2 = pytest.importorskip("transformers.models.lfm2_moe.modeling_lfm2_moe")

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
# In the interpreter rows up to 64 wide take the one-pass kernel, wider ones the two-pass loop.
SHAPES = [(4, 7), (3, 5, 64), (2, 3, 128), (3, 1000)]


def assert_matches_module(out, ref, max_frac=0.01):
    """Close for the dtype; 16-bit results also equal bit for bit but for rare last-bit
    differences (float32 results differ in their last bits with the order of the sum)."""
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert_close(out, ref)
    if out.dtype == torch.float32:
        return
    frac = (out != ref).float().mean().item()
    assert frac <= max_frac, f"{frac:.2%} of the elements differ from transformers"


def module(cls, n, dtype, weight):
    m = cls(n, eps=1e-6).to(device=DEVICE, dtype=dtype)
    m.weight.data.copy_(weight)
    return m


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_zero_centered_with_residual_equals_qwen35(dtype, shape):
    n = shape[-1]
    x, r = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype)
    m = module(q35.Qwen3_5MoeRMSNorm, n, dtype, randn(n, scale=0.5))
    out, new_r = rms_norm(x, m.weight, 1e-6, residual=r, zero_centered=True)
    with torch.no_grad():
        assert torch.equal(new_r, r + x)  # transformers: hidden = residual + hidden
        assert_matches_module(out, m(r + x))
        assert_matches_module(rms_norm(x, m.weight, 1e-6, zero_centered=True), m(x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_gated_equals_qwen35_rmsnorm_gated(dtype, shape):
    n = shape[-1]
    x, z = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype, scale=2.0)
    m = module(q35.Qwen3_5MoeRMSNormGated, n, dtype, 1 + randn(n, scale=0.3))
    with torch.no_grad():
        assert_matches_module(rms_norm(x, m.weight, 1e-6, gate=z), m(x, z))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_plain_equals_llama_style(dtype, shape):
    n = shape[-1]
    x = randn(*shape, dtype=dtype)
    m = module(lfm2.Lfm2MoeRMSNorm, n, dtype, 1 + randn(n, scale=0.3))
    with torch.no_grad():
        assert_matches_module(rms_norm(x, m.weight, 1e-6), m(x))
        r = randn(*shape, dtype=dtype)
        out, new_r = rms_norm(x, m.weight, 1e-6, residual=r)
        assert torch.equal(new_r, x + r)
        assert_matches_module(out, m(x + r))


def test_float32_weight_with_16bit_input():
    """transformers returns promote(w, x) = float32 here; fastpath returns x's dtype, the
    float32 product rounded once."""
    x = randn(5, 96, dtype=torch.bfloat16)
    m = module(lfm2.Lfm2MoeRMSNorm, 96, torch.float32, 1 + randn(96, scale=0.3))
    with torch.no_grad():
        assert_matches_module(rms_norm(x, m.weight), m(x).to(torch.bfloat16))
        g = randn(5, 96, dtype=torch.bfloat16)
        mg = module(q35.Qwen3_5MoeRMSNormGated, 96, torch.float32, m.weight)
        assert_matches_module(rms_norm(x, m.weight, gate=g), mg(x, g).to(torch.bfloat16))


def f64_norm(x, w, eps, zero_centered=False, gate=None, act="silu", residual=None):
    h = x.double() + (residual.double() if residual is not None else 0)
    y = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + eps) * ((1 + w.double()) if zero_centered else w.double())
    if gate is not None:
        gd = gate.double()
        y = y * (torch.sigmoid(gd) * (gd if act == "silu" else 1))
    return y


@pytest.mark.parametrize("zero_centered", [False, True])
@pytest.mark.parametrize("act", ["silu", "sigmoid"])
def test_float32_against_float64_noncontiguous(zero_centered, act):
    x, r, z = randn(6, 67), randn(6, 67), randn(6, 67, scale=3.0)
    w = randn(134)[::2]  # strided weight
    out, new_r = rms_norm(noncontig(x), w, 1e-5, residual=noncontig(r), zero_centered=zero_centered,
                          gate=z.t().contiguous().t(), gate_activation=act)
    assert_close(out, f64_norm(x, w, 1e-5, zero_centered, z, act, residual=r))
    assert_close(new_r, x.double() + r.double())


def test_head_dim_rows_and_wide_hidden():
    """(B, H, 128) head-dim norms as views of a wider projection, and one 2048-wide row."""
    proj = randn(3, 4, 2 * 128, dtype=torch.bfloat16)
    q = proj[..., :128]  # every row strided by 256
    w = randn(128, dtype=torch.bfloat16, scale=0.2)
    out = rms_norm(q, w, zero_centered=True)
    assert out.shape == q.shape
    assert_close(out, f64_norm(q, w, 1e-6, zero_centered=True), dtype=torch.bfloat16)
    x = randn(1, 2048, dtype=torch.bfloat16)
    w = randn(2048, dtype=torch.bfloat16)
    assert_close(rms_norm(x, w), f64_norm(x, w, 1e-6), dtype=torch.bfloat16)


def test_reference_path_float64_and_empty():
    x, w = randn(3, 13, dtype=torch.float64), randn(13, dtype=torch.float64)
    assert_close(rms_norm(x, w, 1e-6), f64_norm(x, w, 1e-6), dtype=torch.float64, tol=1e-12)
    assert_close(reference_rms_norm(x, w, 1e-6, zero_centered=True), f64_norm(x, w, 1e-6, True),
                 dtype=torch.float64, tol=1e-12)
    e = torch.empty(0, 8, device=DEVICE)
    out, res = rms_norm(e, torch.ones(8, device=DEVICE), residual=e)
    assert out.shape == (0, 8) and res.shape == (0, 8)


def test_offsets_past_int32_take_the_pytorch_path(monkeypatch):
    """More rows than the kernel's int32 row index holds, or a strided last dim whose offsets
    would pass int32, go to PyTorch (the limit lowered to 2100: 53 rows x 40 past it with the
    2048-row margin, a column stride of 67 x 39 past it); below the limit the kernel runs."""
    from fastpath.ops import norm as N
    launches = []
    monkeypatch.setattr(N._KERNEL, "launch", lambda grid, args, kwargs: launches.append(grid))
    monkeypatch.setattr(N, "INT32_END", 2100)
    w = randn(40)
    for x in (randn(53, 40), randn(40, 67).t()):
        assert_close(rms_norm(x, w), f64_norm(x, w, 1e-6))
    assert launches == []
    monkeypatch.setattr(N, "INT32_END", 2**31)
    rms_norm(randn(53, 40), w)
    assert len(launches) == 1


def test_extreme_rows():
    """A row of large values (the float32 sum of squares must not overflow in 16 bits) and a
    zero row (eps keeps it finite)."""
    x = torch.zeros(2, 40, device=DEVICE, dtype=torch.float16)
    x[0] = 6e4 * torch.sign(randn(40))
    w = randn(40, dtype=torch.float16)
    out = rms_norm(x, w)
    assert torch.isfinite(out).all() and torch.equal(out[1], torch.zeros_like(out[1]))
    assert_close(out, f64_norm(x, w, 1e-6), dtype=torch.float16)


def test_errors():
    x, w = randn(4, 8), randn(8)
    with pytest.raises(ValueError, match="weight"):
        rms_norm(x, randn(9))
    with pytest.raises(TypeError, match="x"):
        rms_norm(torch.ones(4, 8, dtype=torch.int32), w)
    with pytest.raises(ValueError, match="residual"):
        rms_norm(x, w, residual=randn(4, 9))
    with pytest.raises(TypeError, match="residual"):
        rms_norm(x, w, residual=randn(4, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="gate"):
        rms_norm(x, w, gate=randn(8))
    with pytest.raises(NotImplementedError, match="gate_activation"):
        rms_norm(x, w, gate=x, gate_activation="gelu")
    with pytest.raises(ValueError, match="eps"):
        rms_norm(x, w, -1.0)
    with pytest.raises(ValueError, match="x"):
        rms_norm(torch.tensor(1.0), w)
