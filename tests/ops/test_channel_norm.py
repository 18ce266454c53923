"""channel_rms_norm against a float64 evaluation of its formula and against the stock
diffusers composition (F.normalize(x.float(), dim=1).to(dtype) * scale * gamma + bias, F.silu)."""
import math

import pytest
import torch
import torch.nn.functional as F

from fastpath.ops import channel_norm as cn
from fastpath.ops.channel_norm import channel_rms_norm
from tests.conftest import randn
from tests.tolerances import assert_close, rel_error

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def _params(C, dtype, kind):
    gamma = (1.0 + 0.5 * randn(C, 1, 1, 1)).to(dtype)
    if kind == "tensor":
        return gamma, (0.3 * randn(C, 1, 1)).to(dtype)
    return gamma, {"none": None, "float": -0.25, "zero": 0.0}[kind]


def _exact(x, gamma, bias, scale=None, eps=1e-12, silu=False):
    """The formula in float64 on the same (rounded) inputs."""
    C = x.shape[1]
    shape = (1, C) + (1,) * (x.dim() - 2)
    h = x.double()
    norm = h.square().sum(1, keepdim=True).sqrt()
    norm = torch.where(norm < eps, torch.full_like(norm, eps), norm)
    y = h / norm * (math.sqrt(C) if scale is None else scale) * gamma.double().reshape(shape)
    if isinstance(bias, torch.Tensor):
        y = y + bias.double().reshape(shape)
    elif bias is not None:
        y = y + bias
    return y * torch.sigmoid(y) if silu else y


def _stock(x, gamma, bias, silu):
    """diffusers' WanRMS_norm (+ SiLU) as written there, in x's dtype."""
    C = x.shape[1]
    g = gamma.reshape((C,) + (1,) * (x.dim() - 2))
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = F.normalize(h, dim=1).to(x.dtype) * C ** 0.5 * g
    y = y + (bias.reshape(g.shape) if isinstance(bias, torch.Tensor) else (bias or 0.0))
    return F.silu(y) if silu else y


def _check_one_rounding(out, want64):
    """Every element within half an ulp of the exact value plus float32 noise."""
    fi = torch.finfo(out.dtype)
    err = (out.double() - want64).abs()
    bound = 0.5 * fi.eps * want64.abs() * 1.01 + 1e-6 * want64.abs().max()
    assert bool((err <= bound).all()), f"max excess {float((err - bound).max()):.3e}"


SHAPES = [(2, 13, 7), (1, 40, 67), (3, 1, 13), (2, 3, 5, 7), (1, 13, 3, 7, 5), (1, 96, 1, 4, 5)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_float64(dtype, shape):
    x = randn(*shape, dtype=dtype, scale=3.0)
    for kind, silu in [("none", False), ("float", True), ("tensor", True), ("zero", False)]:
        gamma, bias = _params(shape[1], dtype, kind)
        out = channel_rms_norm(x, gamma, bias, silu=silu)
        want = _exact(x, gamma, bias, silu=silu)
        assert out.dtype == dtype and out.shape == x.shape and out.is_contiguous()
        assert_close(out, want, dtype=dtype)
        _check_one_rounding(out, want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("silu", [False, True])
def test_matches_stock_diffusers_expression(dtype, silu):
    shape = (1, 40, 2, 5, 7) if silu else (2, 24, 9, 11)
    x = randn(*shape, dtype=dtype)
    gamma, bias = _params(shape[1], dtype, "tensor" if silu else "zero")
    out = channel_rms_norm(x, gamma, bias, silu=silu)
    stock = _stock(x, gamma, bias, silu)
    want = _exact(x, gamma, bias, silu=silu)
    assert_close(out, stock, dtype=dtype)
    if dtype != torch.float32:
        # stock rounds after normalize, *scale, *gamma, +bias and silu: each step at most half
        # an ulp of a value no larger than |n*scale*gamma| + |bias| (silu' <= 1.1).
        C = shape[1]
        g = gamma.double().reshape((1, C) + (1,) * (x.dim() - 2))
        mag = (_exact(x, gamma, None).abs() + (bias.double().reshape(g.shape).abs()
                                                if isinstance(bias, torch.Tensor) else 0.0))
        bound = 3.5 * torch.finfo(dtype).eps * mag * 1.1 + 1e-6
        assert bool(((out.double() - stock.double()).abs() <= bound).all())
        # one rounding is closer to the exact value than the stock's several
        assert rel_error(out, want) < rel_error(stock, want)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_last_3d"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_channels_last_keeps_format(fmt, dtype):
    shape = (2, 13, 7, 9) if fmt == "channels_last" else (1, 40, 3, 7, 5)
    mf = getattr(torch, fmt)
    x = randn(*shape, dtype=dtype).contiguous(memory_format=mf)
    gamma, bias = _params(shape[1], dtype, "tensor")
    out = channel_rms_norm(x, gamma, bias, silu=True)
    assert out.is_contiguous(memory_format=mf) and not out.is_contiguous()
    want = _exact(x, gamma, bias, silu=True)
    assert_close(out, want, dtype=dtype)
    _check_one_rounding(out, want)


def _views():
    v5 = randn(2, 13, 4, 7, 6, dtype=torch.bfloat16)
    cl = randn(1, 40, 3, 5, 7, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    v4 = randn(2, 13, 9, 11, dtype=torch.bfloat16)
    return {
        "frame slice": (v5[:, :, 1:2], 1),
        "frame slice cl3d": (cl[:, :, 2:3], 1),
        "frames 1:3": (v5[:, :, 1:3], 1),
        "crop 4d": (v4[:, :, 1:-1, 2:], 2),
        "crop 5d": (v5[:, :, :, 1:-2, 1:], 3),
        "every other channel": (v4[:, ::2], 1),
        "transposed 3d": (randn(2, 67, 13, dtype=torch.bfloat16).transpose(1, 2), 1),
        "transposed hw": (v4.transpose(2, 3), 2),
    }


@pytest.mark.parametrize("name", list(_views()))
def test_non_contiguous_views(name):
    x, ndim = _views()[name]
    y_like = torch.empty_like(x)
    dims = cn._merge_spatial(x.shape[2:], x.stride()[2:], y_like.stride()[2:])
    assert len(dims) == ndim  # each NDIM variant of the kernel is really taken
    gamma, bias = _params(x.shape[1], x.dtype, "float")
    out = channel_rms_norm(x, gamma, bias, silu=True)
    assert out.stride() == y_like.stride()  # laid out as torch.empty_like(x)
    want = _exact(x, gamma, bias, silu=True)
    assert_close(out, want, dtype=x.dtype)
    _check_one_rounding(out, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_zero_vectors_give_bias(dtype):
    x = randn(2, 13, 3, 7, 5, dtype=dtype)
    x[0, :, 1, 2] = 0  # whole channel vectors of zeros
    x[1, :, :, :, 4] = 0
    zero = x.abs().sum(1) == 0
    gamma, bias = _params(13, dtype, "tensor")
    b = bias.reshape(1, 13, 1, 1, 1).expand_as(x)
    out = channel_rms_norm(x, gamma, bias)
    zm = zero[:, None].expand_as(x)
    assert torch.equal(out[zm], b[zm])
    out = channel_rms_norm(x, gamma, bias, silu=True)
    assert_close(out[zm], F.silu(b[zm].double()), dtype=dtype)
    _check_one_rounding(out[zm], F.silu(b[zm].double()))
    out = channel_rms_norm(x, gamma, None, silu=True)
    assert torch.equal(out[zm].double(), torch.zeros(int(zm.sum()), dtype=torch.float64, device=out.device))
    assert_close(out, _exact(x, gamma, None, silu=True), dtype=dtype)


def test_eps_scale_and_nan():
    x = randn(2, 7, 67, scale=1e-3)
    gamma, bias = _params(7, x.dtype, "tensor")
    for eps, scale in ((1e-12, 2.5), (1e-2, None), (0.5, -1.0)):  # eps clamps the small norms
        out = channel_rms_norm(x, gamma, bias, eps=eps, scale=scale)
        assert_close(out, _exact(x, gamma, bias, scale=scale, eps=eps))
    x[1, 3, 5] = math.nan  # a NaN poisons its whole channel vector, as in F.normalize
    out = channel_rms_norm(x, gamma, bias)
    assert torch.equal(out.isnan(), F.normalize(x, dim=1).isnan())
    assert_close(out, _exact(x, gamma, bias))


def test_int64_offsets(monkeypatch):
    monkeypatch.setattr(cn, "INT32_LIMIT", 0)
    x = randn(2, 13, 5, 67, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    gamma, bias = _params(13, x.dtype, "tensor")
    out = channel_rms_norm(x[:, :, 1:-1], gamma, bias, silu=True)
    assert_close(out, _exact(x[:, :, 1:-1], gamma, bias, silu=True))


def test_reference_paths_and_empty():
    x = randn(2, 13, 7, 5, dtype=torch.float64)
    gamma, bias = _params(13, torch.float64, "tensor")
    assert_close(channel_rms_norm(x, gamma, bias, silu=True), _exact(x, gamma, bias, silu=True))
    x = randn(1, 4097, 2)  # more channels than a tile holds: PyTorch path
    gamma, bias = _params(4097, x.dtype, "float")
    assert_close(channel_rms_norm(x, gamma, bias), _exact(x, gamma, bias))
    for shape in ((0, 5, 3), (2, 5, 0, 4), (2, 0, 3, 3)):
        x = randn(*shape)
        out = channel_rms_norm(x, torch.ones(shape[1], device=x.device), 1.0)
        assert out.shape == x.shape and out.numel() == 0


def test_bias_and_gamma_shapes():
    x = randn(1, 13, 2, 3, 5, dtype=torch.float16)
    gamma, bias = _params(13, x.dtype, "tensor")
    want = _exact(x, gamma, bias)
    for g, b in ((gamma.reshape(13), bias.reshape(13)), (gamma.reshape(13, 1, 1), bias.reshape(13, 1, 1, 1)),
                 (randn(13, 2, dtype=x.dtype)[:, 0], None)):
        out = channel_rms_norm(x, g, b)
        assert_close(out, _exact(x, g, b), dtype=x.dtype)
    assert_close(channel_rms_norm(x, gamma.reshape(13), bias), want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,fmt", [((2, 13, 7), None), ((1, 13, 3, 7, 5), None),
                                       ((1, 40, 2, 5, 67), torch.channels_last_3d), ((2, 9, 7, 5), torch.channels_last)])
def test_input_bias_is_added_before_the_norm(dtype, shape, fmt):
    """input_bias (a convolution's bias folded in): the norm of x + input_bias[c], exact in float64."""
    x = randn(*shape, dtype=dtype, scale=3.0)
    if fmt is not None:
        x = x.contiguous(memory_format=fmt)
    gamma, bias = _params(shape[1], dtype, "tensor")
    ib = (2.0 * randn(shape[1], 1, 1)).to(dtype)
    out = channel_rms_norm(x, gamma, bias, silu=True, input_bias=ib)
    want = _exact(x.double() + ib.double().reshape((1, -1) + (1,) * (x.dim() - 2)), gamma, bias, silu=True)
    assert out.shape == x.shape and (fmt is None or out.is_contiguous(memory_format=fmt))
    _check_one_rounding(out, want)
    with pytest.raises(ValueError, match="input_bias.*elements"):
        channel_rms_norm(x, gamma, bias, input_bias=ib[:-1])


def test_errors():
    x = randn(2, 4, 5)
    g = torch.ones(4, device=x.device)
    with pytest.raises(ValueError, match="x"):
        channel_rms_norm(randn(4, 5), g)
    with pytest.raises(ValueError, match="x"):
        channel_rms_norm(randn(1, 4, 1, 1, 1, 2), g)
    with pytest.raises(TypeError, match="x"):
        channel_rms_norm(torch.ones(2, 4, 5, dtype=torch.int32), g)
    with pytest.raises(TypeError, match="x"):
        channel_rms_norm([[1.0]], g)
    with pytest.raises(ValueError, match="gamma.*4 elements"):
        channel_rms_norm(x, torch.ones(5, device=x.device))
    with pytest.raises(TypeError, match="gamma.*dtype"):
        channel_rms_norm(x, torch.ones(4, dtype=torch.bfloat16, device=x.device))
    with pytest.raises(ValueError, match="gamma.*meta"):
        channel_rms_norm(x, torch.ones(4, device="meta"))
    with pytest.raises(ValueError, match="bias.*4 elements"):
        channel_rms_norm(x, g, torch.ones(3, device=x.device))
    with pytest.raises(TypeError, match="bias"):
        channel_rms_norm(x, g, "0.0")
    with pytest.raises(TypeError, match="bias.*dtype"):
        channel_rms_norm(x, g, torch.ones(4, dtype=torch.float64, device=x.device))
    with pytest.raises(TypeError, match="scale"):
        channel_rms_norm(x, g, scale="2")
    with pytest.raises(ValueError, match="eps"):
        channel_rms_norm(x, g, eps=-1.0)


def test_torch_compile_fullgraph_and_fake():
    x = randn(1, 13, 3, 4, 5, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    gamma, bias = _params(13, x.dtype, "tensor")
    fn = torch.compile(lambda t: channel_rms_norm(t, gamma, bias, silu=True) * 2, fullgraph=True,
                       backend="aot_eager")
    assert_close(fn(x), 2 * _exact(x, gamma, bias, silu=True), dtype=x.dtype)
    torch.library.opcheck(cn._channel_norm_op.op, (x, gamma, bias, 0.0, 2.0, 1e-12, True),
                          test_utils=("test_schema", "test_faketensor"))
