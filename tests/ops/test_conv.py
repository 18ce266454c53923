"""causal_conv3d, causal_conv1d(_update), short_conv and conv1d against float64 F.pad + F.conv
references."""
import pytest
import torch
import torch.nn.functional as F

import fastpath.ops.conv1d as c1
import fastpath.ops.conv3d as c3
from fastpath.ops.conv import causal_conv1d, causal_conv1d_update, causal_conv3d, conv1d, short_conv
from tests.conftest import DEVICE, noncontig, randn
from tests.tolerances import assert_close

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _no_tf32(monkeypatch):
    """float32 on a GPU: the PyTorch path runs cuDNN, whose default for float32 convolutions
    is TF32 (10-bit mantissas); the float64 comparisons here need exact float32."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


def _oracle3d(x, w, b, pad, cache=None):
    """F.pad + F.conv3d in float64 over [cache, x] (Wan's CausalConv3d)."""
    pt, ph, pw = pad
    xx, c = x.double(), 0
    if cache is not None and pt > 0:
        xx, c = torch.cat([cache.double(), xx], 2), cache.shape[2]
    xx = F.pad(xx, (pw, pw, ph, ph, pt - c, 0))
    return F.conv3d(xx, w.double(), None if b is None else b.double())


def _cl(t):
    return t.contiguous(memory_format=torch.channels_last_3d)


# ---------------------------------------------------------------------------- causal_conv3d

CASES_3D = [  # (B, C_in, C_out, T, H, W, kernel, padding, cache frames, layout)
    (1, 5, 7, 3, 5, 6, (3, 3, 3), (2, 1, 1), 0, "contiguous"),
    (2, 16, 20, 2, 4, 5, (3, 3, 3), (2, 1, 1), 2, "channels_last"),
    (1, 17, 3, 1, 3, 9, (3, 1, 1), (2, 0, 0), 1, "contiguous"),  # Wan's time_conv, one cached frame
    (1, 19, 33, 2, 3, 3, (1, 1, 1), (0, 0, 0), 0, "channels_last"),  # 1x1x1 shortcut
    (1, 6, 5, 1, 4, 4, (3, 3, 3), (2, 1, 1), 3, "noncontig"),  # more cache frames than pt
    (1, 7, 13, 4, 3, 7, (2, 3, 1), (3, 2, 0), 2, "contiguous"),  # uneven kernel, wide padding
]


@pytest.mark.parametrize("case", CASES_3D)
def test_causal_conv3d_matches_pad_conv3d_float32(case):
    B, C, N, T, H, W, k, pad, nc, layout = case
    x, w, b = randn(B, C, T, H, W), randn(N, C, *k), randn(N)
    cache = randn(B, C, nc, H, W) if nc else None
    if layout == "channels_last":
        x, cache = _cl(x), (_cl(cache) if cache is not None else None)
    elif layout == "noncontig":
        x, cache = noncontig(x), noncontig(cache)
    out, new = causal_conv3d(x, w, b, pad, cache)
    assert_close(out, _oracle3d(x, w, b, pad, cache), torch.float32)
    if layout == "channels_last":
        assert out.is_contiguous(memory_format=torch.channels_last_3d)
    hist = torch.cat([cache, x], 2) if cache is not None else x
    assert torch.equal(new, hist[:, :, max(hist.shape[2] - pad[0], 0):])


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("k,pad", [((3, 3, 3), (2, 1, 1)), ((3, 1, 1), (2, 0, 0)), ((2, 3, 3), (1, 1, 1)), ((3, 3, 3), (3, 1, 1))])
def test_reference_single_frame_without_cache(k, pad, layout):
    """One frame after causal zeros takes a single temporal tap (wider padding: the general path)."""
    x, w, b = randn(1, 6, 1, 4, 5), randn(7, 6, *k), randn(7)
    x = _cl(x) if layout == "channels_last" else x
    out = c3.reference_causal_conv3d(x, w, b, pad, None)
    assert_close(out, _oracle3d(x, w, b, pad), torch.float32)
    assert out.is_contiguous(memory_format=torch.channels_last_3d if layout == "channels_last"
                             else torch.contiguous_format)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_tap_sum_single_frame_with_history(layout):
    x, cache = randn(2, 6, 1, 4, 5), randn(2, 6, 3, 4, 5)
    w, b = randn(7, 6, 3, 3, 3), randn(7)
    if layout == "channels_last":
        x, cache = _cl(x), _cl(cache)
    out = c3.tap_sum_conv3d(x, w, b, (2, 1, 1), cache)
    assert_close(out, _oracle3d(x, w, b, (2, 1, 1), cache), torch.float32)
    assert out.is_contiguous(memory_format=torch.channels_last_3d if layout == "channels_last"
                             else torch.contiguous_format)
    # not served: two frames, no cache, a short cache, non-causal padding
    assert c3.tap_sum_conv3d(randn(2, 6, 2, 4, 5), w, b, (2, 1, 1), cache) is None
    assert c3.tap_sum_conv3d(x, w, b, (2, 1, 1), None) is None
    assert c3.tap_sum_conv3d(x, w, b, (2, 1, 1), cache[:, :, :1]) is None
    assert c3.tap_sum_conv3d(x, w, b, (1, 1, 1), cache) is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_causal_conv3d_16bit_and_weight_layouts(dtype):
    x, cache = _cl(randn(1, 24, 2, 4, 5, dtype=dtype)), _cl(randn(1, 24, 2, 4, 5, dtype=dtype))
    w, b = randn(16, 24, 3, 3, 3, dtype=dtype, scale=0.2), randn(16, dtype=dtype)
    ref = _oracle3d(x, w, b, (2, 1, 1), cache)
    for wt in (w, _cl(w)):  # default layout (transposed into a workspace) and C_in-contiguous (in place)
        out, _ = causal_conv3d(x, wt, b, (2, 1, 1), cache)
        assert out.dtype == dtype
        assert_close(out, ref, dtype)


def test_causal_conv3d_chunks_with_cache_equal_whole_video():
    """Decoding chunk by chunk, passing the returned cache, equals one call on the whole video."""
    x, w, b = randn(1, 8, 7, 3, 4), randn(6, 8, 3, 3, 3), randn(6)
    whole = _oracle3d(x, w, b, (2, 1, 1))
    outs, cache = [], None
    for lo, hi in ((0, 1), (1, 2), (2, 5), (5, 7)):  # chunks of 1, 1, 3, 2 frames
        out, cache = causal_conv3d(x[:, :, lo:hi], w, b, (2, 1, 1), cache)
        outs.append(out)
    assert_close(torch.cat(outs, 2), whole, torch.float32)


def test_causal_conv3d_tile_edges(monkeypatch):
    monkeypatch.setattr(c3, "BLOCKS_OVERRIDE", (16, 16, 16))
    x, w = randn(2, 21, 2, 3, 5), randn(19, 21, 3, 1, 3)
    cache = randn(2, 21, 2, 3, 5)
    out, _ = causal_conv3d(x, w, None, (2, 0, 1), cache)
    assert_close(out, _oracle3d(x, w, None, (2, 0, 1), cache), torch.float32)


def test_causal_conv3d_reference_paths():
    x, w, b = randn(1, 3, 2, 4, 4, dtype=torch.float64), randn(4, 3, 3, 3, 3, dtype=torch.float64), None
    cache = randn(1, 3, 1, 4, 4, dtype=torch.float64)
    out, new = causal_conv3d(x, w, b, 1, cache)  # an int padding is (1, 1, 1)
    assert_close(out, _oracle3d(x, w, b, (1, 1, 1), cache), torch.float64)
    assert torch.equal(new, x[:, :, -1:])
    # autograd takes the PyTorch path and gradients flow
    xg = randn(1, 3, 2, 4, 4).requires_grad_()
    wg = randn(4, 3, 3, 3, 3)
    out, _ = causal_conv3d(xg, wg, None, (2, 1, 1))
    out.square().sum().backward()
    xr = xg.detach().double().requires_grad_()
    _oracle3d(xr, wg, None, (2, 1, 1)).square().sum().backward()
    assert_close(xg.grad, xr.grad, torch.float32, tol=1e-5)


def test_reference_window_keeps_channels_last_for_odd_strided_frames(monkeypatch):
    """A channels-last frame seen through a view of a 2-D output (its size-1 dims carry odd
    strides, which torch.cat reads as contiguous): the window handed to cuDNN is channels-last,
    so it is not converted on every call, and the result equals the oracle."""
    C, H, W = 6, 4, 5
    img = randn(1, C, H, W).contiguous(memory_format=torch.channels_last)  # (B * T, C, H, W)
    x = img.view(1, 1, C, H, W).permute(0, 2, 1, 3, 4)  # (B, C, 1, H, W), as the upsamplers return
    assert x.stride(2) == 1 * C and x.is_contiguous(memory_format=torch.channels_last_3d)
    cache = randn(1, C, 2, H, W).contiguous(memory_format=torch.channels_last_3d)
    w = randn(7, C, 3, 3, 3)
    windows, real = [], F.conv3d
    monkeypatch.setattr(c3.F, "conv3d", lambda inp, *a, **k: windows.append(inp) or real(inp, *a, **k))
    with torch.no_grad():
        out = c3.reference_causal_conv3d(x, w, None, (2, 1, 1), cache)
    assert len(windows) == 1 and windows[0].is_contiguous(memory_format=torch.channels_last_3d)
    assert_close(out, _oracle3d(x.double(), w.double(), None, (2, 1, 1), cache.double()), torch.float32)


def test_causal_conv3d_errors():
    x, w = torch.randn(1, 4, 2, 5, 5), torch.randn(3, 4, 3, 3, 3)
    with pytest.raises(ValueError, match="x"):
        causal_conv3d(x[0], w, padding=(2, 1, 1))
    with pytest.raises(ValueError, match="weight"):
        causal_conv3d(x, w[0], padding=(2, 1, 1))
    with pytest.raises(ValueError, match="input channels"):
        causal_conv3d(x, torch.randn(3, 5, 3, 3, 3), padding=(2, 1, 1))
    with pytest.raises(TypeError, match="weight"):
        causal_conv3d(x, w.double(), padding=(2, 1, 1))
    with pytest.raises(ValueError, match="padding"):
        causal_conv3d(x, w, padding=(2, -1, 1))
    with pytest.raises(TypeError, match="padding"):
        causal_conv3d(x, w, padding=(2, 1))
    with pytest.raises(TypeError, match="padding"):
        causal_conv3d(x, w, padding=(2.0, 1, 1))
    with pytest.raises(ValueError, match="padding"):  # no output frames
        causal_conv3d(x, w, padding=(0, 1, 1))
    with pytest.raises(ValueError, match="cache"):
        causal_conv3d(x, w, padding=(2, 1, 1), cache=torch.randn(1, 4, 2, 5, 4))
    with pytest.raises(ValueError, match="cache"):
        causal_conv3d(x, w, padding=(2, 1, 1), cache=torch.randn(1, 4, 2, 5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="bias"):
        causal_conv3d(x, w, torch.randn(4), padding=(2, 1, 1))
    with pytest.raises(TypeError, match="x"):
        causal_conv3d(x.long(), w.long(), padding=(2, 1, 1))


# ---------------------------------------------------------------------------- causal conv1d

def _oracle_causal1d(x, w, b, state, silu):
    """float64: F.conv1d over [state (or zeros), x] (transformers' causal_conv1d_update)."""
    B, C, T = x.shape
    K = w.shape[-1]
    hist = state.double() if state is not None else torch.zeros(B, C, K - 1, dtype=torch.float64)
    full = torch.cat([hist.to(x.device), x.double()], 2)
    out = F.conv1d(full[:, :, full.shape[2] - T - K + 1:], w.double().reshape(C, 1, K),
                   None if b is None else b.double(), groups=C)
    return (F.silu(out) if silu else out), full


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["btc", "contiguous", "noncontig"])
def test_causal_conv1d_prefill(dtype, layout):
    B, C, T, K = 2, 67, 13, 4
    x = {"btc": randn(B, T, C, dtype=dtype).transpose(1, 2), "contiguous": randn(B, C, T, dtype=dtype),
         "noncontig": noncontig(randn(B, C, T, dtype=dtype))}[layout]
    w, b, state = randn(C, K, dtype=dtype), randn(C, dtype=dtype), randn(B, C, K, dtype=dtype)
    out, new = causal_conv1d(x, w, b, state, "silu")
    ref, full = _oracle_causal1d(x, w, b, state, True)
    assert out.dtype == dtype and out.is_contiguous()
    assert_close(out, ref, dtype)
    assert torch.equal(new, full[:, :, -K:].to(dtype))
    out, new = causal_conv1d(x, w[:, None, :], None)  # nn.Conv1d weight, no state, no activation
    assert_close(out, _oracle_causal1d(x, w, None, None, False)[0], dtype)
    assert torch.equal(new, x[:, :, -(K - 1):])


def test_causal_conv1d_long_sequence_wider_blocks(monkeypatch):
    """Past the grid's 65535 blocks of L the blocks widen (the limit lowered to 2: 300 columns
    in two blocks of 256)."""
    monkeypatch.setattr(c1, "GRID_Z_MAX", 2)
    x, w, b = randn(2, 20, 300), randn(20, 4), randn(20)
    out, _ = causal_conv1d(x, w, b, None, "silu")
    assert_close(out, _oracle_causal1d(x, w, b, None, True)[0], torch.float32)


def test_causal_conv1d_chunked_prefill_and_decode_equal_whole():
    B, C, T, K = 3, 40, 11, 4
    x, w, b = randn(B, C, T), randn(C, K), randn(C)
    whole, _ = _oracle_causal1d(x, w, b, None, True)
    out1, st = causal_conv1d(x[:, :, :5], w, b, None, "silu", state_len=K)  # transformers keeps K columns
    assert st.shape == (B, C, K)
    out2, st = causal_conv1d(x[:, :, 5:8], w, b, st, "silu")
    steps = [causal_conv1d_update(x[:, :, t], st, w, b, "silu") for t in range(8, T)]  # in place
    got = torch.cat([out1, out2] + [s[:, :, None] for s in steps], 2)
    assert_close(got, whole, torch.float32)
    assert torch.equal(st, x[:, :, -K:])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_causal_conv1d_update_multi_token_and_long(dtype, monkeypatch):
    B, C, K = 2, 13, 3
    w, b = randn(C, K, dtype=dtype), randn(C, dtype=dtype)
    for T, max_t in ((3, 64), (7, 4)):  # one in-place launch; longer than UPDATE_MAX_T
        monkeypatch.setattr(c1, "UPDATE_MAX_T", max_t)
        x = randn(B, T, C, dtype=dtype).transpose(1, 2)
        state = randn(B, C, 5, dtype=torch.float32)  # a longer float32 state
        before = state.clone()
        out = causal_conv1d_update(x, state, w, b)
        ref, full = _oracle_causal1d(x, w, b, before, False)
        assert out.shape == x.shape and out.dtype == dtype
        assert_close(out, ref, dtype)
        assert torch.equal(state, full[:, :, -5:].float())


def _oracle_short(bcx, w, b, state):
    """float64: c * conv(b * x) over [state, b * x]; the product rounded to bcx's dtype first,
    as PyTorch's separate multiply (transformers' LFM2) rounds it."""
    bb, cc, xx = bcx.double().chunk(3, -1)
    bx = (bb * xx).to(bcx.dtype)
    out, full = _oracle_causal1d(bx.transpose(1, 2), w, b, state, False)
    return cc * out.transpose(1, 2), full


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("T", [1, 5, 70])  # a decode step, a chunk in place, longer than UPDATE_MAX_T
def test_short_conv(dtype, T):
    B, C, K = 2, 67, 3
    bcx = noncontig(randn(B, T, 3 * C, dtype=dtype)) if T != 5 else randn(B, T, 3 * C, dtype=dtype)
    w, b = randn(C, 1, K, dtype=dtype), (randn(C, dtype=dtype) if T != 5 else None)
    state = randn(B, C, K - 1, dtype=dtype)
    before = state.clone()
    out = short_conv(bcx, state, w, b)
    ref, full = _oracle_short(bcx, w[:, 0], b, before)
    assert out.shape == (B, T, C) and out.dtype == dtype
    assert_close(out, ref, dtype)
    assert torch.equal(state, full[:, :, -(K - 1):].to(dtype))


def test_short_conv_chunks_and_steps_equal_whole():
    B, C, T, K = 2, 24, 9, 3
    bcx, w = randn(B, T, 3 * C), randn(C, K)
    whole, _ = _oracle_short(bcx, w, None, torch.zeros(B, C, K - 1))
    state = torch.zeros(B, C, K - 1, device=DEVICE)
    got = [short_conv(bcx[:, :4], state, w)] + [short_conv(bcx[:, t:t + 1], state, w) for t in range(4, T)]
    assert_close(torch.cat(got, 1), whole, torch.float32)


def test_short_conv_errors():
    w, state = torch.randn(8, 3), torch.randn(2, 8, 2)
    with pytest.raises(ValueError, match="bcx"):
        short_conv(torch.randn(2, 1, 23), state, w)
    with pytest.raises(ValueError, match="bcx"):
        short_conv(torch.randn(2, 24), state, w)
    with pytest.raises(ValueError, match="state"):
        short_conv(torch.randn(2, 1, 24), torch.randn(2, 8, 1), w)
    with pytest.raises(ValueError, match="weight"):
        short_conv(torch.randn(2, 1, 24), state, torch.randn(7, 3))
    with pytest.raises(TypeError, match="bcx"):
        short_conv(torch.ones(2, 1, 24, dtype=torch.long), state, w)


def test_causal_conv1d_errors():
    x, w = torch.randn(2, 8, 5), torch.randn(8, 4)
    with pytest.raises(ValueError, match="weight"):
        causal_conv1d(x, torch.randn(7, 4))
    with pytest.raises(ValueError, match="weight"):
        causal_conv1d(x, torch.randn(8, 2, 4))
    with pytest.raises(ValueError, match="state"):
        causal_conv1d(x, w, state=torch.randn(2, 8, 2))  # shorter than K - 1
    with pytest.raises(ValueError, match="state"):
        causal_conv1d_update(x[:, :, 0], torch.randn(2, 9, 4), w)
    with pytest.raises(NotImplementedError, match="activation"):
        causal_conv1d(x, w, activation="gelu")
    with pytest.raises(ValueError, match="x"):
        causal_conv1d(x[0], w)
    with pytest.raises(ValueError, match="bias"):
        causal_conv1d(x, w, bias=torch.randn(4))
    with pytest.raises(TypeError, match="state"):
        causal_conv1d_update(x[:, :, 0], [0.0], w)


# ---------------------------------------------------------------------------- conv1d

CONV1D_CASES = [  # (C_in, C_out, L, K, stride, padding, dilation, groups, layout)
    (20, 33, 50, 3, 1, 1, 1, 1, "contiguous"),  # Whisper conv1-like (dense)
    (17, 16, 41, 3, 2, 1, 1, 1, "channels_last"),  # Whisper conv2-like (stride 2)
    (24, 24, 30, 31, 1, 15, 1, 24, "contiguous"),  # Conformer depthwise
    (16, 16, 40, 5, 2, 2, 2, 16, "noncontig"),  # depthwise, stride and dilation
    (20, 20, 30, 4, 1, "same", 1, 1, "contiguous"),  # asymmetric 'same'
    (6, 9, 30, 3, 1, 1, 1, 3, "contiguous"),  # grouped: F.conv1d path
    (1, 8, 37, 7, 1, "valid", 1, 1, "contiguous"),  # waveform input: F.conv1d path
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", CONV1D_CASES)
def test_conv1d_matches_torch(case):
    Cin, Cout, L, K, s, p, d, g, layout = case
    x = randn(2, Cin, L)
    if layout == "channels_last":
        x = randn(2, L, Cin).transpose(1, 2)
    elif layout == "noncontig":
        x = noncontig(x)
    w, b = randn(Cout, Cin // g, K), randn(Cout)
    out = conv1d(x, w, b, s, p, d, g)
    ref = F.conv1d(x.double(), w.double(), b.double(), s, p, d, g)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_conv1d_16bit_and_unbatched(dtype):
    x, w, b = randn(32, 29, dtype=dtype), randn(48, 32, 3, dtype=dtype, scale=0.3), randn(48, dtype=dtype)
    out = conv1d(x, w, b, padding=1)
    assert out.shape == (48, 29) and out.dtype == dtype
    assert_close(out, F.conv1d(x.double(), w.double(), b.double(), padding=1), dtype)
    wd = randn(32, 1, 4, dtype=dtype)
    assert_close(conv1d(x[None], wd, None, 1, 3, 1, 32), F.conv1d(x[None].double(), wd.double(), None, 1, 3, 1, 32),
                 dtype)


def test_conv1d_errors():
    x, w = torch.randn(2, 8, 10), torch.randn(4, 8, 3)
    with pytest.raises(ValueError, match="groups"):
        conv1d(x, torch.randn(4, 3, 3), groups=2)
    with pytest.raises(ValueError, match="groups"):
        conv1d(x, w, groups=0)
    with pytest.raises(ValueError, match="padding"):
        conv1d(x, w, padding=-1)
    with pytest.raises(ValueError, match="padding"):
        conv1d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="stride"):
        conv1d(x, w, stride=0)
    with pytest.raises(ValueError, match="input"):
        conv1d(x[:, :, :2], w, dilation=2)
    with pytest.raises(ValueError, match="input"):
        conv1d(x[None], w)
    with pytest.raises(TypeError, match="weight"):
        conv1d(x, w.half())
    with pytest.raises(ValueError, match="bias"):
        conv1d(x, w, torch.randn(5))


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA graphs need a GPU")
def test_causal_conv1d_update_is_graph_capturable():
    C, K = 2048, 4
    x, w, b = randn(4, C), randn(C, K), randn(C)
    state = randn(4, C, K)
    causal_conv1d_update(x, state, w, b, "silu")  # compile outside the capture
    s0 = state.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = causal_conv1d_update(x, state, w, b, "silu")
    state.copy_(s0)
    g.replay()
    ref, full = _oracle_causal1d(x[:, :, None], w, b, s0, True)
    assert_close(out, ref[:, :, 0], torch.float32)
    assert torch.equal(state, full[:, :, -K:].float())
