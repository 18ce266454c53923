"""softmax / log_softmax against float64 references, on the Triton path (compiled on a GPU,
interpreted on the CPU) through the public API."""
import pytest
import torch

import fastpath
from fastpath._core import backend
from fastpath.ops import softmax as S
from tests.conftest import AWKWARD, noncontig, randn
from tests.tolerances import assert_close

FNS = {"softmax": (fastpath.softmax, torch.softmax), "log_softmax": (fastpath.log_softmax, torch.log_softmax)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def ref(name, x, dim, dtype=None):
    return FNS[name][1](x.double(), dim).to(dtype or x.dtype)


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,n", [(r, n) for r in (1, 3, 67) for n in AWKWARD] + [(1, 4097), (3, 4097)])
def test_rows(name, dtype, rows, n, device):
    x = randn(rows, n, dtype=dtype, device=device, scale=4.0)
    out = FNS[name][0](x, dim=-1)
    assert out.dtype == dtype and out.device == x.device
    assert_close(out, ref(name, x, -1))


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("shape,dim", [((2, 3, 67), 0), ((2, 3, 67), 1), ((5, 13, 7), -2), ((7,), 0),
                                       ((2, 1, 1000), -1)])
def test_any_dim(name, shape, dim, device):
    x = randn(*shape, device=device)
    assert_close(FNS[name][0](x, dim), ref(name, x, dim))


@pytest.mark.parametrize("name", FNS)
def test_wide_rows_split(name, device):
    """Rows much wider than one block: split over many blocks and combined."""
    for rows, n in [(1, 5003), (2, 12345)]:
        x = randn(rows, n, device=device, scale=10.0)
        assert_close(FNS[name][0](x), ref(name, x, -1))


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("n", [67, 1000])
def test_noncontiguous(name, n, device):
    x = noncontig(randn(5, n, device=device))
    assert not x.is_contiguous()
    assert_close(FNS[name][0](x), ref(name, x, -1))
    xt = randn(n, 6, device=device).t()  # reduced dim strided
    assert_close(FNS[name][0](xt, -1), ref(name, xt, -1))
    x4 = randn(4, 3, 2, n, device=device).permute(2, 0, 1, 3)[:, ::2]  # uncollapsible leading dims
    assert_close(FNS[name][0](x4), ref(name, x4, -1))


@pytest.mark.parametrize("name", FNS)
def test_wide_offsets_variant(name, device, monkeypatch):
    """The int64-offset variants (taken where a strided reduced dim or the rows reach 2**31,
    e.g. a softmax over the channels of a video tensor): every kernel form, the limit lowered."""
    monkeypatch.setattr(S, "INT32_END", 0)
    for shape, dim in [((3, 67, 5), 1), ((2, 5003), -1), ((5003, 2), 0), ((7, 40), -1)]:
        x = randn(*shape, device=device, scale=4.0)
        assert_close(FNS[name][0](x, dim), ref(name, x, dim))


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("in_dtype,out_dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.float16),
                                                (torch.float16, torch.bfloat16)])
def test_output_dtype(name, in_dtype, out_dtype, device):
    x = randn(3, 1000, dtype=in_dtype, device=device)
    out = FNS[name][0](x, -1, dtype=out_dtype)
    assert out.dtype == out_dtype
    assert_close(out, ref(name, x, -1, out_dtype))


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("n", [13, 1000])
def test_infinities_and_large_values(name, n, device):
    x = randn(4, n, device=device, scale=1e4)
    x[0] = -float("inf")  # all -inf: NaN like PyTorch
    x[1, ::2] = -float("inf")  # partly -inf: exact zeros / -inf
    x[2, n // 2] = float("inf")  # +inf: NaN like PyTorch
    x[3] *= 1e30  # huge but finite: stays finite
    out = FNS[name][0](x)
    expect = ref(name, x, -1)
    assert_close(out, expect)
    assert torch.isfinite(out[3]).sum() == torch.isfinite(expect[3]).sum()


@pytest.mark.parametrize("name", FNS)
def test_empty_and_scalar(name, device):
    for shape in [(0, 5), (3, 0), ()]:
        x = randn(*shape, device=device)
        out = FNS[name][0](x, -1 if shape else 0)
        assert out.shape == x.shape
        assert_close(out, ref(name, x, -1 if shape else 0))


@pytest.mark.parametrize("name", FNS)
def test_backward(name, device):
    x = randn(3, 1000, device=device).requires_grad_()
    g = randn(3, 1000, device=device)
    FNS[name][0](x).backward(g)
    x64 = x.detach().double().requires_grad_()
    FNS[name][1](x64, -1).backward(g.double())
    assert_close(x.grad, x64.grad, tol=1e-5)


def test_compile_fullgraph(device):
    def f(x):
        return fastpath.softmax(x * 2.0, dim=-1) + fastpath.log_softmax(x, dim=0)

    x = randn(7, 67, device=device)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    expect = torch.softmax(x.double() * 2, -1) + torch.log_softmax(x.double(), 0)
    assert_close(out, expect.float())


def test_errors(device):
    x = randn(2, 3, device=device)
    with pytest.raises(IndexError, match="dim"):
        fastpath.softmax(x, dim=2)
    with pytest.raises(TypeError, match="input"):
        fastpath.softmax(torch.arange(6, device=device), dim=0)
    with pytest.raises(TypeError, match="dtype"):
        fastpath.log_softmax(x, dim=0, dtype=torch.int32)
    with pytest.raises(TypeError, match="input"):
        fastpath.softmax([1.0, 2.0])
    ints = torch.arange(6, device=device)
    assert_close(fastpath.softmax(ints, 0, dtype=torch.float32), torch.softmax(ints.double(), 0).float())


def test_reference_fallback(monkeypatch, device):
    """With Triton disabled, the same call takes the reference path and gives the same answer."""
    monkeypatch.setattr(backend, "DISABLED", True)
    report = fastpath.info(device, file=False)
    assert report["ops"]["softmax"]["path"] == "reference"
    assert "FASTPATH_DISABLE_TRITON" in report["ops"]["softmax"]["why"]
    x = randn(3, 1000, device=device)
    assert_close(fastpath.softmax(x), ref("softmax", x, -1))



@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("flagged", [True, False])
def test_fused_one_launch_counters(name, flagged, monkeypatch, device):
    """The one-launch variant (per-row barrier, ticket-ordered blocks; flagged partial words
    or an arrival counter). With one chunk a row its barrier never waits, so it runs in the
    interpreter too; three calls check that the ticket, row counters and partial words
    return to zero after each launch."""
    from fastpath.ops import softmax as sm
    monkeypatch.setattr(sm, "FLAGGED", flagged)
    if device.type == "cpu":
        for knob, value in dict(FUSED=True, ROW_ALWAYS=16, MIN_CHUNK=256, CHUNK=256, MAX_CHUNK=256).items():
            monkeypatch.setattr(sm, knob, value)
    for rows in (13, 5, 13):
        x = randn(rows, 200, device=device, scale=5.0)
        assert_close(FNS[name][0](x), ref(name, x, -1))
