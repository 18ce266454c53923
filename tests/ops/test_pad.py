"""pad against PyTorch's own F.pad (run on a CPU copy: independent code) and a float64
oracle built from per-dimension source indices, through the public API (the kernel is
compiled on a GPU, interpreted on the CPU). Padding copies values, so every comparison is
bit-exact, strides (memory format) included."""
import math
import random

import pytest
import torch
import torch.nn.functional as F

import fastpath.ops.pad as padmod
from fastpath.ops.pad import FAMILY, pad, reference_pad
from tests.conftest import DEVICE, noncontig, randn

MODES = ["constant", "reflect", "replicate", "circular"]
_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def torch_pad(x, p, mode="constant", value=None):
    """F.pad on a CPU copy; where PyTorch lacks the mode for the dtype, on the same bits."""
    xc = x.cpu()
    try:
        return F.pad(xc, list(p), mode, value)
    except NotImplementedError:
        bits = _BITS[xc.element_size()]
        return F.pad(xc.view(bits), list(p), mode, value).view(xc.dtype)


def index_pad(x, p, mode="constant", value=0.0):
    """float64 oracle: one gather per padded dimension from its source indices (circular
    crops by the negative pads first, as PyTorch)."""
    y = x.detach().double().cpu()
    for k in range(len(p) // 2):
        d, lo, hi = y.dim() - 1 - k, p[2 * k], p[2 * k + 1]
        if mode == "circular":
            y = y.narrow(d, max(-lo, 0), y.shape[d] - max(-lo, 0) - max(-hi, 0))
            lo, hi = max(lo, 0), max(hi, 0)
        n = y.shape[d]
        j = torch.arange(n + lo + hi) - lo
        if mode == "constant":
            ok = (j >= 0) & (j < n)
            shape = [1] * y.dim()
            shape[d] = -1
            y = y.index_select(d, j.clamp(0, max(n - 1, 0))) if n else y.new_zeros(
                [len(j) if i == d else s for i, s in enumerate(y.shape)])
            y = torch.where(ok.view(shape), y, torch.tensor(value, dtype=torch.float64))
            continue
        if mode == "reflect":
            j = j.abs()
            j = torch.where(j >= n, 2 * (n - 1) - j, j)
        elif mode == "replicate":
            j = j.clamp(0, n - 1)
        else:
            j = j.remainder(n)
        y = y.index_select(d, j)
    return y


def assert_same(out, ref):
    """Same shape, dtype and strides, and the same bits."""
    ref = ref.to(out.device)
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert out.dtype == ref.dtype, f"dtype {out.dtype} != {ref.dtype}"
    if out.numel() > 1:
        assert out.stride() == ref.stride(), f"strides {out.stride()} != {ref.stride()}"
    if out.dtype == torch.complex128:
        out, ref = torch.view_as_real(out), torch.view_as_real(ref)
    bits = _BITS[out.element_size()]
    assert torch.equal(out.contiguous().view(bits), ref.contiguous().view(bits)), "values differ"


def check(x, p, mode="constant", value=None):
    out = pad(x, p, mode, value)
    assert_same(out, torch_pad(x, p, mode, value))
    if x.dtype.is_floating_point:
        v = torch.tensor(0.0 if value is None else value, dtype=torch.float64).to(x.dtype).item()
        torch.testing.assert_close(out.double().cpu(), index_pad(x, p, mode, v), rtol=0, atol=0,
                                   equal_nan=True)
    return out


# ---------------------------------------------------------------------------- modes, shapes

CASES = [((2, 7, 13), (3, 5)), ((2, 7, 13), (0, 2, 3, 1)), ((13, 67), (6, 2)),
         ((1, 3, 13, 67), (6, 2, 1, 4)), ((3, 7, 13, 5), (1, 1, 1, 1, 2, 0)),
         ((2, 3, 5, 7, 13), (1, 1, 1, 1, 2, 0)), ((2, 3, 5, 7, 13), (2, 3, 0, 1, 4, 1)),
         ((1, 1, 7, 1, 67), (0, 0, 0, 0, 2, 0)), ((3, 1, 3, 4), (1, 2, 0, 2)),
         ((2, 3, 300), (5, 7, 1, 2))]  # 312 columns: three column blocks


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,p", CASES)
def test_modes_3d_4d_5d(mode, shape, p):
    check(randn(*shape), p, mode)


def _valid(mode, shape, p):
    """PyTorch's rules, written out here independently of the module (circular: a pad may
    not exceed what is left after cropping, where PyTorch reads uninitialised memory)."""
    outs = []
    for k in range(len(p) // 2):
        n, lo, hi = shape[-1 - k], p[2 * k], p[2 * k + 1]
        kept = n + min(lo, 0) + min(hi, 0)
        outs.append(n + lo + hi)
        if kept < 0 and mode in ("constant", "circular") or outs[-1] < 0:
            return False
        if mode == "reflect" and (lo >= n or hi >= n):
            return False
        if mode == "circular" and (max(lo, 0) > kept or max(hi, 0) > kept):
            return False
    # reflect / replicate: some padded output size must be at least 1
    return mode in ("constant", "circular") or max(outs) >= 1


@pytest.mark.parametrize("mode", MODES)
def test_negative_pads_random(mode):
    """Random pads, cropping included, on 3-D/4-D/5-D inputs: valid ones equal F.pad, the
    others raise ValueError (and F.pad raises too, except for circular's garbage cases)."""
    rng = random.Random(f"pad-{mode}")
    done = bad = 0
    while done < 12:
        if mode == "constant":
            dim = rng.randint(3, 5)
            k = rng.randint(1, dim)
        else:  # the ranks PyTorch supports: k padded dims of a (k+1)-D or (k+2)-D input
            k = rng.randint(1, 3)
            dim = k + rng.randint(1, 2)
        shape = [rng.randint(1, 7) for _ in range(dim)]
        p = [rng.randint(-shape[-1 - i // 2] - 1, shape[-1 - i // 2]) for i in range(2 * k)]
        if not _valid(mode, shape, p):
            if bad < 6:
                bad += 1
                with pytest.raises(ValueError, match="pad"):
                    pad(randn(*shape), p, mode)
                if mode != "circular":
                    with pytest.raises(RuntimeError):
                        F.pad(torch.zeros(shape), p, mode)
            continue
        check(randn(*shape), p, mode)
        done += 1


def test_constant_any_rank():
    check(randn(13), (2, 3), value=1.5)
    check(randn(7, 13), (1, 2, 3, 0), value=-2.0)
    check(torch.tensor(3.0), ())
    check(randn(3, 5), ())
    x6 = randn(2, 1, 3, 2, 4, 5)
    check(x6, (1, 0, 0, 2, 1, 1, 0, 1, 2, 2, 1, 1), value=0.25)
    x7 = randn(2, 3, 2, 1, 2, 3, 4)  # every dim padded: more than MAX_DIMS, reference path
    check(x7, (1,) * 14, value=7.0)
    x7p = randn(3, 2, 4, 3, 5, 2, 2).permute(1, 0, 3, 2, 5, 4, 6)  # 7 unmergeable dims: reference
    check(x7p, (1, 1), value=-1.0)
    check(x7p[:, :, :, :, :, 0], (1, 1, 0, 2), value=-1.0)  # 6 dims: the kernel


def test_large_plane_temporal_5d():
    """Temporal (causal) padding of a video whose planes hold H*W = 65536 values, where
    32-bit index products overflow in naive kernels; also spatial, replicate and reflect."""
    x = randn(1, 1, 3, 256, 256)
    check(x, (0, 0, 0, 0, 2, 0))
    check(x.to(torch.bfloat16), (1, 1, 1, 1, 2, 0))
    check(x, (1, 1, 1, 1, 2, 0), "replicate")
    check(x, (0, 0, 0, 0, 2, 1), "reflect")
    check(x, (0, 0, 0, 0, -1, 2), "circular")


def test_int64_row_index(monkeypatch):
    """The kernel's int64 row arithmetic (taken from 2**30 rows on), forced on small shapes."""
    monkeypatch.setattr(padmod, "WIDE_ROWS", 0)
    x = randn(2, 3, 5, 7, 13)
    for mode in MODES:
        check(x, (2, 1, 1, 3, 2, 0), mode)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="more than 2**31 elements need a GPU")
def test_more_than_2_31_elements_gpu():
    x = torch.randn(1, 2, 3, 32768, 16384, device="cuda", dtype=torch.bfloat16)
    out = pad(x, (1, 1, 1, 1, 2, 0))
    assert out.numel() > 2**31
    assert torch.equal(out, F.pad(x, (1, 1, 1, 1, 2, 0)))
    assert torch.equal(out[0, 1, 4, 1:-1, 1:-1], x[0, 1, 2]) and not out[0, 1, 4, -1].any()


# ---------------------------------------------------------------------------- layouts

@pytest.mark.parametrize("mode", MODES)
def test_layouts(mode):
    x = randn(2, 3, 7, 13)
    check(noncontig(x), (2, 1, 1, 3), mode)
    check(noncontig(x), (0, 0, 1, 3), mode)  # unpadded strided column dim
    check(x.transpose(2, 3), (2, 1, 1, 3), mode)
    check(x.transpose(2, 3), (0, 0, 2, 1), mode)
    check(x.to(memory_format=torch.channels_last), (2, 1, 1, 3), mode)  # strides follow PyTorch
    check(x[:, 1:, 2:, 3:], (1, 2, 2, 1), mode)  # storage offset
    check(randn(1, 3, 1, 13).expand(4, 3, 5, 13), (1, 2, 0, 3), mode)  # stride-0 dims
    x5 = randn(1, 5, 3, 7, 6)
    check(x5.to(memory_format=torch.channels_last_3d), (1, 1, 1, 1, 2, 0), mode)
    check(x5.permute(0, 1, 4, 3, 2), (1, 0, 2, 1, 1, 1), mode)


# ---------------------------------------------------------------------------- dtypes, value

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.uint8,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32,
          torch.uint64, torch.complex64, torch.complex128]
if hasattr(torch, "float8_e4m3fn"):
    DTYPES += [torch.float8_e4m3fn, torch.float8_e5m2]


def _data(shape, dtype):
    """Random values of ``dtype`` on the test device (integers over the whole signed range)."""
    if dtype == torch.bool:
        return (torch.rand(shape) > 0.5).to(DEVICE)
    if dtype.is_floating_point or dtype.is_complex:
        return randn(*shape, scale=20.0).to(dtype)
    hi = 2**(8 * torch.empty((), dtype=dtype).element_size() - 1) - 1
    return torch.randint(-min(hi, 2**62), min(hi, 2**62), shape, dtype=torch.int64).to(dtype).to(DEVICE)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtypes(dtype):
    x = _data((2, 3, 7, 5), dtype)
    for mode in MODES:
        check(x, (1, 2, 3, 1), mode)
    out = pad(x, (2, 1, 0, 3), value=1.0)
    assert_same(out, torch_pad(x, (2, 1, 0, 3), value=1.0))


def test_value_conversion():
    x = _data((2, 5), torch.int32)
    assert (pad(x, (1, 1), value=2.7)[:, 0] == 2).all()  # truncated, as PyTorch converts
    check(_data((2, 5), torch.int8), (1, 2), value=-1)
    check(_data((2, 5), torch.bool), (1, 1), value=0.5)
    check(_data((2, 5), torch.int64), (1, 1), value=2.0**62)
    for v in (math.nan, math.inf, -math.inf, 1e-40, 65504.0):
        check(randn(3, 5, dtype=torch.float16), (2, 1, 1, 0), value=v)
    check(randn(3, 5, dtype=torch.bfloat16), (1, 1), value=1e30)
    overflow = ((torch.uint8, -1.0), (torch.int8, 1000.0), (torch.float16, 1e6), (torch.int32, math.nan))
    for dtype, v in overflow:
        with pytest.raises(ValueError, match="value"):
            pad(_data((2, 5), dtype), (1, 1), value=v)


def test_empty():
    check(torch.zeros(0, 3, 5, device=DEVICE), (1, 2, 1, 1), "constant")
    for mode in MODES:
        check(torch.zeros(0, 3, 5, device=DEVICE), (1, 2), mode)  # batch of 0
    check(randn(2, 0, 5), (1, 1, 2, 3), value=3.0)  # an empty dim padded: all `value`
    check(randn(2, 5), (-3, -2))  # cropped to nothing
    check(randn(2, 0, 5), (1, 1), "circular")


# ---------------------------------------------------------------------------- errors

def test_errors():
    x = randn(2, 3, 5)
    with pytest.raises(ValueError, match="pad: needs an even number"):
        pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="pad: 8 entries"):
        pad(x, (1,) * 8)
    with pytest.raises(ValueError, match="pad: reflect padding must be smaller"):
        pad(x, (5, 0), "reflect")
    with pytest.raises(ValueError, match="pad: reflect padding must be smaller"):
        pad(randn(1, 2, 3, 5), (1, 1, 0, 3), "reflect")
    with pytest.raises(ValueError, match="mode: expected one of"):
        pad(x, (1, 1), "wrap")
    with pytest.raises(ValueError, match="value: padding mode 'reflect' takes no value"):
        pad(x, (1, 1), "reflect", 1.0)
    assert_same(pad(x, (1, 1), "reflect", 0.0), F.pad(x, (1, 1), "reflect"))  # 0 is accepted
    for mode in ("reflect", "replicate", "circular"):
        with pytest.raises(NotImplementedError, match="pad: mode"):
            pad(randn(5), (1, 1), mode)  # 1-D
        with pytest.raises(NotImplementedError, match="pad: mode"):
            pad(randn(2, 2, 2, 2, 2), (1, 1, 1, 1), mode)  # 2-D padding of a 5-D input
        with pytest.raises(NotImplementedError, match="pad: mode"):
            pad(x, (), mode)
    with pytest.raises(ValueError, match="pad: .* crops more than"):
        pad(x, (-6, 2))
    with pytest.raises(ValueError, match="pad: mode 'replicate' needs an output size of at least 1"):
        pad(x, (-3, -2), "replicate")
    with pytest.raises(ValueError, match="pad: .* negative output size -1"):
        pad(randn(1, 4, 2, 3), (-2, -2, 0, 0), "reflect")
    check(randn(1, 4, 2, 3), (-2, -1, 0, 0), "reflect")  # one empty padded dim is allowed
    with pytest.raises(ValueError, match="pad: circular padding wraps around more than once"):
        pad(x, (6, 0), "circular")
    with pytest.raises(ValueError, match="pad: circular padding .* after cropping"):
        pad(x, (4, -2), "circular")
    with pytest.raises(ValueError, match="input: mode 'replicate' needs non-empty"):
        pad(torch.zeros(2, 0, 5), (1, 1), "replicate")
    with pytest.raises(TypeError, match="pad: expected ints"):
        pad(x, (1.0, 1))
    with pytest.raises(TypeError, match="pad: expected ints"):
        pad(x, (True, 1))
    with pytest.raises(TypeError, match="pad: expected a tuple or list"):
        pad(x, torch.tensor([1, 1]))
    with pytest.raises(TypeError, match="value: expected a real number"):
        pad(x, (1, 1), value=1j)
    with pytest.raises(TypeError, match="input"):
        pad([1.0, 2.0], (1, 1))


# ---------------------------------------------------------------------------- autograd, compile, paths

@pytest.mark.parametrize("mode", MODES)
def test_autograd(mode):
    p = (2, -1, -1, 2, 1, 0)
    x = randn(2, 3, 4, 5, dtype=torch.float64).requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    g = randn(*F.pad(x_ref, p, mode).shape, dtype=torch.float64)
    (gx,) = torch.autograd.grad(pad(x, p, mode), x, g)
    (gr,) = torch.autograd.grad(F.pad(x_ref, p, mode), x_ref, g)
    torch.testing.assert_close(gx, gr, rtol=1e-12, atol=1e-12)


def test_compile_fullgraph():
    x = randn(1, 2, 3, 5, 7)
    f = torch.compile(lambda t: pad(t, (1, 1, 1, 1, 2, 0)) * 2, fullgraph=True, backend="aot_eager")
    assert_same(f(x), F.pad(x, (1, 1, 1, 1, 2, 0)) * 2)


def test_reference_path(monkeypatch):
    """Where Triton does not serve the device, ``pad`` is F.pad (bits for dtypes it lacks)."""
    monkeypatch.setattr(padmod, "use_triton", lambda t: False)
    x = randn(2, 3, 7)
    for mode in MODES:
        assert_same(pad(x, (2, 1), mode), F.pad(x, (2, 1), mode))
    b = _data((2, 3, 7), torch.bool)
    assert_same(pad(b, (2, 1), "reflect"), F.pad(b.view(torch.int8), (2, 1), "reflect").view(torch.bool))
    assert_same(reference_pad(x, (1, 1), "constant", 2.0), F.pad(x, (1, 1), value=2.0))


def test_family():
    assert FAMILY["name"] == "pad" and FAMILY["ops"] == ["pad"]
    assert FAMILY["reason"](DEVICE) is None or isinstance(FAMILY["reason"](DEVICE), str)
