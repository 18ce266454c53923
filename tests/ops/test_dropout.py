"""dropout: the RNG against Philox's published answer, mask statistics, exact scaling,
reproducibility, backward, edge cases and errors."""
import math

import pytest
import torch

from fastpath._core.backend import INTERPRET
from fastpath.ops import dropout as dropout_module
from fastpath.ops.dropout import draw_seed, dropout, dropout_bits, philox4x32, reference_dropout
from tests.conftest import AWKWARD, DEVICE, noncontig, randn

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _gen(seed):
    return torch.Generator(device=DEVICE).manual_seed(seed)


def _expected(x, keep, p):
    """x * keep / (1 - p) computed independently: float32 (float64 for float64), then rounded."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    scale = torch.tensor(1.0 / (1.0 - p), dtype=acc)
    return (x.to(acc).cpu() * keep.cpu().to(acc) * scale).to(x.dtype)


def _assert_same(out, ref):
    """Equal, zeros at the same places. Triton's interpreter rounds float32 -> bfloat16 by
    truncation (the GPU rounds to nearest even), so there bfloat16 may differ by one ulp."""
    out, ref = out.cpu(), ref.cpu()
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert torch.equal(out == 0, ref == 0)
    if out.dtype == torch.bfloat16 and INTERPRET:
        assert ((out.float() - ref.float()).abs() <= ref.float().abs() * 2.0**-7).all()
    else:
        assert torch.equal(out, ref)


def test_philox_known_answers():
    # Random123's known-answer vectors for philox4x32-10 with counter (0, 0, 0, 0)
    z = torch.zeros(1, dtype=torch.int64)
    got = [int(v) for v in philox4x32(torch.tensor(0), z, z)]
    assert got == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_statistics(p):
    n = 1 << 16
    x = randn(n)
    y = dropout(x, p, generator=_gen(7))
    keep = (y != 0).cpu()
    q = 1.0 - p
    sigma = math.sqrt(p * q / n)
    assert abs(keep.double().mean().item() - q) < 5 * sigma
    # every position within a byte / within a Philox lane set is unbiased
    per_lane = keep.reshape(-1, 8).double().mean(0)
    assert (per_lane - q).abs().max().item() < 5 * math.sqrt(p * q / (n / 8))
    # neighbours are independent: P(keep_i and keep_i+1) = q^2
    both = (keep[:-1] & keep[1:]).double().mean().item()
    assert abs(both - q * q) < 5 * math.sqrt(q * q * (1 - q * q) / n)
    _assert_same(y, _expected(x, keep, p))  # kept entries scaled by exactly 1/(1-p)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", AWKWARD)
def test_forward_matches_the_reference_mask(dtype, n):
    x = randn(3, n, dtype=dtype)
    seed = draw_seed(DEVICE, _gen(n))
    y = dropout(x, 0.3, generator=_gen(n))
    ref, bits = reference_dropout(x.cpu(), 0.3, seed.cpu())
    assert y.dtype == dtype and y.shape == x.shape
    _assert_same(y, ref)
    keep = (y != 0).cpu().reshape(-1)
    _assert_same(y, _expected(x, keep.reshape(x.shape), 0.3))
    # the reference's bits are the mask the output shows
    shifts = torch.arange(8)
    assert torch.equal(((bits[:, None].int() >> shifts) & 1).reshape(-1)[:x.numel()].bool(), keep)
    # strided views give the same result as their contiguous copy
    for view in (noncontig(x), x.t()):
        got = dropout(view, 0.3, generator=_gen(n))
        assert torch.equal(got.cpu(), dropout(view.contiguous(), 0.3, generator=_gen(n)).cpu())


def test_reproducible_and_fresh():
    x = randn(5, 67)
    a = dropout(x, 0.5, generator=_gen(3))
    b = dropout(x, 0.5, generator=_gen(3))
    assert torch.equal(a, b)
    g = _gen(3)
    c, d = dropout(x, 0.5, generator=g), dropout(x, 0.5, generator=g)
    assert torch.equal(c, a) and not torch.equal(c, d)  # the generator advances
    assert not torch.equal(a, dropout(x, 0.5, generator=_gen(4)))
    torch.manual_seed(11)
    e = dropout(x, 0.5)
    torch.manual_seed(11)
    assert torch.equal(e, dropout(x, 0.5))  # the default generator
    # the mask depends on the seed and position only: float64 (reference path) agrees
    f = dropout(x.double(), 0.5, generator=_gen(3))
    assert torch.equal(f != 0, a != 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_backward_is_mask_times_grad_over_keep(dtype):
    x = randn(7, 13, dtype=dtype).requires_grad_()
    y = dropout(x, 0.25, generator=_gen(5))
    g = noncontig(randn(7, 13, dtype=dtype))
    (dx,) = torch.autograd.grad(y, x, g)
    keep = (y != 0).detach()
    _assert_same(dx, _expected(g, keep, 0.25))
    # with grad the forward stores bits; the output is the same as without
    with torch.no_grad():
        assert torch.equal(dropout(x, 0.25, generator=_gen(5)), y.detach())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("blocks", [(64, 128), (4096, 256)])
@pytest.mark.parametrize("int64", [False, True])
def test_stored_bits_and_block_sizes(dtype, blocks, int64, monkeypatch):
    """Many programs (small blocks) or one, 32- and 64-bit index paths: the bits the forward
    stores equal the plain-PyTorch Philox's, and forward and backward match the reference."""
    monkeypatch.setattr(dropout_module, "FWD_BLOCK", blocks[0])
    monkeypatch.setattr(dropout_module, "BWD_BLOCK", blocks[1])
    monkeypatch.setattr(dropout_module, "FORCE_INT64", int64)
    n, p = 1003, 0.3
    x = randn(n, dtype=dtype)
    seed = draw_seed(DEVICE, _gen(21))
    out, bits = dropout_module._dropout_op(x, p, seed, True)
    ref, ref_bits = reference_dropout(x.cpu(), p, seed.cpu())
    assert bits.shape == (126,) and torch.equal(bits.cpu(), ref_bits)
    _assert_same(out, ref)
    xr = x.clone().requires_grad_()
    y = dropout(xr, p, generator=_gen(21))  # the same seed: the eager autograd path
    _assert_same(y.detach(), ref)
    g = randn(n, dtype=dtype)
    (dx,) = torch.autograd.grad(y, xr, g)
    _assert_same(dx, _expected(g, ref.cpu() != 0, p))


def test_strided_input_with_grad():
    base = randn(6, 40)
    x = base[:, ::3].t().requires_grad_()  # a transposed, strided leaf view
    y = dropout(x, 0.5, generator=_gen(4))
    ref, _ = reference_dropout(x.detach().contiguous().cpu(), 0.5, draw_seed(DEVICE, _gen(4)).cpu())
    _assert_same(y.detach(), ref)
    (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    _assert_same(dx, _expected(torch.ones_like(ref), ref != 0, 0.5))


def test_registered_op_autograd_matches_eager():
    """Tensor subclasses and compiled graphs use the registered op's autograd: same results."""
    x = randn(5, 13).requires_grad_()
    g = randn(5, 13)
    seed = draw_seed(DEVICE, _gen(8))
    y_op = dropout_module._dropout_op(x, 0.4, seed, True)[0]
    (dx_op,) = torch.autograd.grad(y_op, x, g)
    y = dropout(x, 0.4, generator=_gen(8))
    (dx,) = torch.autograd.grad(y, x, g)
    assert torch.equal(y_op, y) and torch.equal(dx_op, dx)


def test_gradcheck_float64():
    x = torch.randn(4, 9, dtype=torch.float64, device=DEVICE, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: dropout(t, 0.4, generator=_gen(9)), (x,))


def test_edge_cases():
    x = randn(4, 7)
    x[0, 0] = math.inf
    assert dropout(x, 0.0) is x and dropout(x, 0.7, training=False) is x
    empty = torch.empty(0, 3, device=DEVICE)
    assert dropout(empty, 0.5) is empty
    y = dropout(x, 1.0)
    assert torch.isnan(y[0, 0]) and torch.equal(y[1:], torch.zeros_like(y[1:]))  # x * 0, as torch
    xr = randn(3, 5).requires_grad_()
    (gx,) = torch.autograd.grad(dropout(xr, 1.0), xr, torch.ones(3, 5, device=DEVICE))
    assert torch.equal(gx, torch.zeros_like(gx))
    (gx,) = torch.autograd.grad(dropout(xr, 0.0), xr, torch.full((3, 5), 2.0, device=DEVICE))
    assert torch.equal(gx, torch.full_like(gx, 2.0))
    one = dropout(torch.tensor([3.0], device=DEVICE), 0.5, generator=_gen(1))
    assert one.item() in (0.0, 6.0)
    # the bit count is ceil(n / 8), fully written (outputs are poisoned)
    bits = dropout_bits(torch.tensor(5), 13, 0.5)
    assert bits.shape == (2,)


def test_errors():
    with pytest.raises(ValueError, match="p"):
        dropout(randn(3), 1.5)
    with pytest.raises(ValueError, match="p"):
        dropout(randn(3), -0.1)
    with pytest.raises(TypeError, match="input"):
        dropout(torch.arange(3), 0.5)
    with pytest.raises(TypeError, match="input"):
        dropout([1.0], 0.5)
    with pytest.raises(TypeError, match="generator"):
        dropout(randn(3), 0.5, generator=3)
    if DEVICE.type == "cuda":
        with pytest.raises(ValueError, match="generator"):
            dropout(randn(3), 0.5, generator=torch.Generator())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="large sizes only on a GPU")
def test_large_gpu_statistics():
    n = 1 << 24
    x = randn(n, dtype=torch.bfloat16)
    y = dropout(x, 0.2, generator=_gen(1))
    q = (y != 0).double().mean().item()
    assert abs(q - 0.8) < 5 * math.sqrt(0.16 / n)
    seed = draw_seed(DEVICE, _gen(1))
    bits = dropout_bits(seed.cpu(), n, 0.2)  # the plain-PyTorch Philox on the CPU
    keep = ((bits[:, None].int() >> torch.arange(8)) & 1).reshape(-1).bool()
    assert torch.equal((y != 0).cpu(), keep)


def test_compiles_fullgraph():
    x = randn(6, 13).requires_grad_()
    fn = torch.compile(lambda t: dropout(t, 0.3) * 2, fullgraph=True, backend="aot_eager")
    torch.manual_seed(2)
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    torch.manual_seed(2)
    want = dropout(x.detach(), 0.3) * 2  # the same default-generator draw
    _assert_same(y.detach(), want)
    _assert_same(gx, (want != 0) * torch.tensor(2 / 0.7, device=DEVICE).to(gx.dtype))
