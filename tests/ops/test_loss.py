"""mse_loss against torch.nn.functional.mse_loss in float64 (forward and backward), gradcheck."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from fastpath.ops import loss as loss_module
from fastpath.ops.loss import mse_loss
from tests.conftest import DEVICE, noncontig, randn
from tests.tolerances import REL_TOL, assert_close

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
REDUCTIONS = ["mean", "sum", "none"]


def _check(a, b, reduction, out_dtype=None):
    """Forward and both gradients against PyTorch on float64 copies of the same values."""
    a = a.detach().requires_grad_()
    b = b.detach().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = mse_loss(a, b, reduction)
        a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
        ref = F.mse_loss(a64, b64, reduction=reduction)
    out_dtype = out_dtype or torch.result_type(a, b)
    assert out.dtype == out_dtype and out.shape == ref.shape
    assert_close(out, ref, dtype=out_dtype)
    g = randn(*ref.shape, dtype=out_dtype)
    ga, gb = torch.autograd.grad(out, (a, b), g)
    ra, rb = torch.autograd.grad(ref, (a64, b64), g.double())
    assert ga.dtype == a.dtype and gb.dtype == b.dtype and ga.shape == a.shape and gb.shape == b.shape
    assert_close(ga, ra, dtype=a.dtype)
    assert_close(gb, rb, dtype=b.dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(1,), (7,), (13, 67), (3, 1000)])
def test_matches_torch(dtype, reduction, shape):
    _check(randn(*shape, dtype=dtype), randn(*shape, dtype=dtype), reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_broadcast_and_strided(reduction):
    a = randn(3, 1, 7, 5)
    b = randn(4, 1, 5)
    _check(a, b, reduction)  # both operands broadcast
    _check(randn(67, 100), randn(100), reduction)  # more tiles than programs
    _check(noncontig(randn(13, 67)), randn(67, 13).t(), reduction)
    _check(randn(2, 3, 4, 5, 6)[:, :, ::2], randn(2, 3, 2, 5, 6), reduction)  # 5-D strided
    with pytest.warns(UserWarning, match="target size"):
        mse_loss(randn(3, 4), randn(4))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mixed_dtypes_promote(reduction):
    _check(randn(7, 13, dtype=torch.float16), randn(7, 13), reduction, torch.float32)
    _check(randn(7, 13, dtype=torch.bfloat16), randn(7, 13, dtype=torch.float64), reduction, torch.float64)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("int64", [False, True])
def test_many_tiles_per_program(reduction, int64, monkeypatch):
    """Small tiles and one program a multiprocessor: each reducing program loops over many
    tiles (contiguous and broadcast operands); also the 64-bit index path."""
    monkeypatch.setattr(loss_module, "RED_BLOCK", 64)
    monkeypatch.setattr(loss_module, "MAP_BLOCK", 64)
    monkeypatch.setattr(loss_module, "PROGRAMS_PER_SM", 1)
    monkeypatch.setattr(loss_module, "FORCE_INT64", int64)
    _check(randn(5, 1001, dtype=torch.bfloat16), randn(5, 1001, dtype=torch.bfloat16), reduction)
    _check(randn(13, 67), randn(67), reduction)


@pytest.mark.parametrize("dtype", FLOATS)
def test_none_with_strided_grad(dtype):
    a, b = randn(13, 67, dtype=dtype).requires_grad_(), randn(13, 67, dtype=dtype)
    g = noncontig(randn(13, 67, dtype=dtype))
    (ga,) = torch.autograd.grad(mse_loss(a, b, "none"), a, g)
    assert_close(ga, 2 * (a.detach().double() - b.double()) * g.double(), dtype=dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_registered_op_autograd_matches_eager(reduction):
    """Tensor subclasses and compiled graphs use the registered op's autograd: same results."""
    a, b = randn(7, 13).requires_grad_(), randn(7, 13).requires_grad_()
    g = randn(7, 13) if reduction == "none" else randn()
    out_op = loss_module._mse_op(a, b, reduction)
    grads_op = torch.autograd.grad(out_op, (a, b), g)
    out = mse_loss(a, b, reduction)
    grads = torch.autograd.grad(out, (a, b), g)
    assert torch.equal(out_op, out)
    assert all(torch.equal(x, y) for x, y in zip(grads_op, grads))


def test_half_inputs_accumulate_in_float32():
    # squares up to ~1e5 overflow float16 elementwise; the float32 arithmetic keeps the mean exact
    a = randn(4096, dtype=torch.float16, scale=100.0)
    b = randn(4096, dtype=torch.float16)
    out = mse_loss(a, b)
    assert out.dtype == torch.float16
    assert_close(out, F.mse_loss(a.double(), b.double()), dtype=torch.float16)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_float64(reduction):
    a = torch.randn(3, 1, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradcheck(lambda x, y: mse_loss(x, y, reduction), (a, b))


def test_empty_and_only_one_gradient():
    e = torch.empty(0, 3, device=DEVICE)
    assert torch.isnan(mse_loss(e, e)) and mse_loss(e, e, "sum").item() == 0.0
    assert mse_loss(e, e, "none").shape == (0, 3)
    for reduction in REDUCTIONS:
        er = e.clone().requires_grad_()
        (g,) = torch.autograd.grad(mse_loss(er, e, reduction).sum(), er)
        assert g.shape == (0, 3)
    a = randn(5, 7).requires_grad_()
    b = randn(5, 7)
    (ga,) = torch.autograd.grad(mse_loss(a, b), a)
    assert_close(ga, 2 * (a.detach().double() - b.double()) / 35)


def test_errors():
    x = randn(3)
    with pytest.raises(ValueError, match="reduction"):
        mse_loss(x, x, "avg")
    with pytest.raises(TypeError, match="target"):
        mse_loss(x, torch.arange(3))
    with pytest.raises(TypeError, match="input"):
        mse_loss(torch.arange(3), x)
    with pytest.raises(TypeError, match="input"):
        mse_loss([1.0], x)
    with pytest.raises(ValueError, match="target"):
        mse_loss(randn(3, 4), randn(5))
    if DEVICE.type == "cuda":
        with pytest.raises(ValueError, match="target"):
            mse_loss(x, x.cpu())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="large sizes only on a GPU")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_large_gpu(reduction):
    _check(randn(1 << 22, dtype=torch.bfloat16), randn(1 << 22, dtype=torch.bfloat16), reduction)
    assert REL_TOL[torch.bfloat16] > 0


def test_compiles_fullgraph():
    a, b = randn(7, 13).requires_grad_(), randn(13)
    fn = torch.compile(lambda x, y: mse_loss(x, y, "sum"), fullgraph=True, backend="aot_eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(a, b)
    (ga,) = torch.autograd.grad(out, a)
    assert_close(out, F.mse_loss(a.double(), b.double().expand(7, 13), reduction="sum"))
    assert_close(ga, 2 * (a.detach().double() - b.double()))
