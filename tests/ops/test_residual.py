"""add_bias_residual against x + h + bias evaluated in float64 on the same inputs."""
import pytest
import torch

from fastpath.ops import residual
from fastpath.ops.residual import add_bias_residual
from tests.conftest import randn

CASES = [((1, 7, 1, 5, 67), torch.channels_last_3d), ((2, 13, 3, 4, 5), torch.channels_last_3d),
         ((2, 13, 3, 4, 5), None), ((3, 6, 9, 11), torch.channels_last), ((1, 5, 67), None)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,fmt", CASES)
def test_matches_float64_sum_with_one_rounding(dtype, shape, fmt):
    x, h = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype)
    if fmt is not None:
        x, h = x.contiguous(memory_format=fmt), h.contiguous(memory_format=fmt)
    b = randn(shape[1], dtype=dtype)
    want = x.double() + h.double() + b.double().reshape((1, -1) + (1,) * (len(shape) - 2))
    ptr = x.data_ptr()
    out = add_bias_residual(x, h, b)
    assert out.data_ptr() == ptr and out.shape == want.shape  # written into x
    err = (out.double() - want).abs()
    assert bool((err <= 0.5 * torch.finfo(dtype).eps * want.abs() * 1.01 + 1e-6).all())


def test_mixed_layouts_and_views_take_the_pytorch_path():
    x = randn(2, 6, 3, 4, 5)
    h = randn(2, 6, 3, 4, 5).contiguous(memory_format=torch.channels_last_3d)  # another layout than x
    b = randn(6)
    want = x + h + b.reshape(1, -1, 1, 1, 1)
    torch.testing.assert_close(add_bias_residual(x.clone(), h, b), want)
    big = randn(2, 6, 3, 4, 10)
    view = big[..., ::2]  # not dense
    want = view + h + b.reshape(1, -1, 1, 1, 1)
    torch.testing.assert_close(add_bias_residual(view, h, b), want)


def test_int64_offsets_path(monkeypatch):
    """The int64 index variant (taken past 2**31 elements) on a small tensor."""
    monkeypatch.setattr(residual, "INT32_LIMIT", 0)
    x, h, b = randn(1, 5, 2, 3, 7), randn(1, 5, 2, 3, 7), randn(5)
    want = x + h + b.reshape(1, -1, 1, 1, 1)
    torch.testing.assert_close(add_bias_residual(x, h, b), want)


def test_errors():
    x = randn(1, 4, 5)
    with pytest.raises(ValueError, match="h.*shape"):
        add_bias_residual(x, randn(1, 4, 6), randn(4))
    with pytest.raises(ValueError, match="bias.*4 elements"):
        add_bias_residual(x, randn(1, 4, 5), randn(3))
    with pytest.raises(TypeError, match="h.*dtype"):
        add_bias_residual(x, randn(1, 4, 5, dtype=torch.bfloat16), randn(4))
    with pytest.raises(TypeError, match="bias"):
        add_bias_residual(x, randn(1, 4, 5), [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="bias.*meta"):
        add_bias_residual(x, randn(1, 4, 5), torch.ones(4, device="meta"))
