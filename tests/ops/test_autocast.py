"""Inside ``torch.autocast`` the ops whose PyTorch counterparts autocast runs in lower precision
(``F.linear``, ``F.scaled_dot_product_attention``; ``linear_swiglu``'s projection) take their float
inputs in the region's dtype, as autocast casts them for PyTorch's op: the result has that dtype
and matches the float64 computation on the cast inputs. Those it runs in float32 on this device
type (softmax, log_softmax on CUDA; mse_loss on CUDA and the CPU) return what PyTorch's op returns
in the same region. Outside a region nothing is cast."""
import pytest
import torch
import torch.nn.functional as F

import fastpath
from fastpath.ops.linear import linear_swiglu
from tests.conftest import DEVICE, randn
from tests.tolerances import assert_close

DTYPES = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dt", DTYPES)
def test_linear_under_autocast(dt):
    x, w, b = randn(3, 40), randn(24, 40), randn(24)
    with torch.autocast(DEVICE.type, dtype=dt):
        out = fastpath.linear(x, w, b)
        assert out.dtype == F.linear(x, w, b).dtype == dt
        swi = linear_swiglu(x[:1], w)
    c = [t.to(dt).double() for t in (x, w, b)]
    assert_close(out, F.linear(*c), dt)
    g, u = F.linear(c[0][:1], c[1]).chunk(2, dim=-1)
    assert swi.dtype == dt
    assert_close(swi, F.silu(g) * u, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_fp8_weight_linear_under_autocast(dt):
    """The FP8 weight and its float32 scale stay as they are; the activations take the region's dtype."""
    x, w = randn(2, 64), randn(32, 64)
    q, s = fastpath.quantize_fp8(w, "rowwise")
    with torch.autocast(DEVICE.type, dtype=dt):
        out = fastpath.linear(x, q, weight_scale=s)
    assert out.dtype == dt
    assert_close(out, x.to(dt).double() @ (q.double() * s.double()).T, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_sdpa_under_autocast(dt):
    q, k, v = randn(1, 4, 3, 16), randn(1, 2, 9, 16), randn(1, 2, 9, 16)
    with torch.autocast(DEVICE.type, dtype=dt):
        out = fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert out.dtype == dt
    c = [t.to(dt).double() for t in (q, k, v)]
    assert_close(out, F.scaled_dot_product_attention(*c, enable_gqa=True), dt)


def test_no_cast_outside_a_region_or_for_float64():
    x, w = randn(2, 16), randn(8, 16)
    assert fastpath.linear(x, w).dtype == torch.float32
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=False):
        assert fastpath.linear(x, w).dtype == torch.float32
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        assert fastpath.linear(x.double(), w.double()).dtype == torch.float64  # float64 is left alone


@pytest.mark.parametrize("dt", DTYPES)
def test_float32_ops_under_autocast_as_torch(dt):
    """Each op against PyTorch's own in the same region: the same dtype (float32 where this device
    type's autocast runs the op in float32, else the input's) and the same values."""
    x, y = randn(3, 40, dtype=dt), randn(3, 40, dtype=dt)
    pairs = {"softmax": (fastpath.softmax, torch.softmax), "log_softmax": (fastpath.log_softmax, torch.log_softmax)}
    with torch.autocast(DEVICE.type, dtype=dt):
        for name, (ours, theirs) in pairs.items():
            out, ref = ours(x, -1), theirs(x, -1)
            assert out.dtype == ref.dtype, name
            assert_close(out, ref, out.dtype if out.dtype == torch.float32 else dt, tol=None)
        for reduction in ("mean", "none"):
            out, ref = fastpath.mse_loss(x, y, reduction=reduction), F.mse_loss(x, y, reduction=reduction)
            assert out.dtype == ref.dtype == torch.float32, reduction
            assert_close(out, F.mse_loss(x.double(), y.double(), reduction=reduction), torch.float32)
