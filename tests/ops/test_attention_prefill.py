"""prefill_attention against a float64 reference written here (einsum and explicit masks),
and against torch's own ``F.scaled_dot_product_attention`` for the causal convention and
fully masked rows. Compiled on a GPU, interpreted on the CPU (16 x 16 tiles there, so every
case crosses tile edges). Outputs are poisoned with NaN, so an element the kernel forgets to
write fails."""
import pytest
import torch
import torch.nn.functional as F

from fastpath._core import backend
from fastpath.ops import attention_prefill as AP
from tests.conftest import randn
from tests.tolerances import assert_close

prefill_attention = AP.prefill_attention


def ref64(q, k, v, *, causal, scale, kv_len=None, window=None, q_offset=0):
    """float64 attention with the documented mask; rows with no visible key are zero."""
    q, k, v = q.double().cpu(), k.double().cpu(), v.double().cpu()
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    rep = Hq // Hkv
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    i = torch.arange(Lq)[:, None] + q_offset
    j = torch.arange(Lk)[None, :]
    vis = torch.ones(B, 1, Lq, Lk, dtype=torch.bool)
    if causal:
        vis &= j <= i
    if window is not None:
        vis &= j > i - window
    if kv_len is not None:
        vis &= j < kv_len.cpu().long().clamp(0, Lk)[:, None, None, None]
    s = s.masked_fill(~vis, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)  # all -inf rows -> NaN -> 0
    return torch.einsum("bhqk,bhkd->bhqd", p, v)


def make(B, Hq, Hkv, Lq, Lk, D, dtype, device, bshd=False):
    """q, k, v; with ``bshd`` they are transposed views of (B, L, H, D) tensors."""
    if bshd:
        q = randn(B, Lq, Hq, D, dtype=dtype, device=device).transpose(1, 2)
        k = randn(B, Lk, Hkv, D, dtype=dtype, device=device).transpose(1, 2)
        v = randn(B, Lk, Hkv, D, dtype=dtype, device=device).transpose(1, 2)
    else:
        q = randn(B, Hq, Lq, D, dtype=dtype, device=device)
        k = randn(B, Hkv, Lk, D, dtype=dtype, device=device)
        v = randn(B, Hkv, Lk, D, dtype=dtype, device=device)
    return q, k, v


def check(q, k, v, **kw):
    scale = kw.pop("scale", q.shape[-1] ** -0.5)
    out = prefill_attention(q, k, v, scale=scale, **kw)
    assert out.dtype == q.dtype and out.shape == q.shape
    assert_close(out, ref64(q, k, v, scale=scale, **kw), dtype=q.dtype)
    return out


# (dtype, D, causal, Lq, Lk, Hq, Hkv, bshd): every head dim, both directions of Lq != Lk,
# GQA ratios 1 / 4 / 8, both layouts, every dtype.
CASES = [
    (torch.float32, 64, True, 67, 67, 4, 1, False),
    (torch.float16, 64, True, 300, 300, 1, 1, True),
    (torch.float16, 80, False, 17, 100, 2, 2, True),
    (torch.bfloat16, 80, True, 67, 17, 4, 4, False),
    (torch.bfloat16, 96, True, 100, 17, 8, 1, True),
    (torch.float32, 96, False, 67, 100, 2, 1, False),
    (torch.float16, 128, True, 17, 67, 8, 2, False),
    (torch.float32, 128, False, 100, 67, 4, 1, True),
    (torch.bfloat16, 256, False, 67, 67, 2, 1, False),
    (torch.float32, 256, True, 17, 100, 2, 2, True),
]


@pytest.mark.parametrize("tma", [True, False])
@pytest.mark.parametrize("dtype,D,causal,Lq,Lk,Hq,Hkv,bshd", CASES)
def test_against_float64(dtype, D, causal, Lq, Lk, Hq, Hkv, bshd, tma, device, monkeypatch):
    """Keys and values through tensor descriptors or masked pointer loads."""
    monkeypatch.setattr(AP, "reference_prefill_attention", None)  # the kernel, not the fallback
    monkeypatch.setattr(AP, "USE_TMA", tma)
    q, k, v = make(2 if Lq < 300 else 1, Hq, Hkv, Lq, Lk, D, dtype, device, bshd)
    if backend.tma_on(device):
        assert (AP.USE_TMA and AP.tma_ok(k, v)) == tma
    out = check(q, k, v, causal=causal)
    if bshd:  # the output keeps q's (B, L, H, D) layout
        assert out.transpose(1, 2).is_contiguous()
    else:
        assert out.is_contiguous()


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("scale", [0.125, -0.2])
def test_softmax_variants(mode, scale, device, monkeypatch):
    """Scaled scores and the scale folded into the exponent, with keys whose scores grow along
    the sequence (row maxima that keep rising) and a negative scale (the folded variant needs
    scale > 0: the kernel falls back)."""
    monkeypatch.setattr(AP, "SOFTMAX_MODE", mode)
    q, k, v = make(1, 4, 2, 67, 100, 64, torch.float32, device)
    k = k * torch.linspace(0.05, 20.0, 100, device=device)[:, None]
    check(q, k, v, causal=True, scale=scale)
    check(q, k, v, causal=False, scale=scale, kv_len=torch.tensor([71], dtype=torch.int32, device=device))


@pytest.mark.parametrize("Lq,Lk", [(67, 67), (17, 100), (100, 17)])
def test_matches_torch_sdpa_causal(Lq, Lk, device):
    """The causal convention (top-left aligned for Lq != Lk) is PyTorch's is_causal."""
    q, k, v = make(1, 4, 2, Lq, Lk, 64, torch.float32, device)
    out = prefill_attention(q, k, v, causal=True, scale=0.125)
    rep = 2
    want = F.scaled_dot_product_attention(q.cpu(), k.cpu().repeat_interleave(rep, 1),
                                          v.cpu().repeat_interleave(rep, 1), is_causal=True, scale=0.125)
    assert_close(out, want, tol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_kv_len(causal, device):
    """kv_len per batch: 0 (rows of zeros), short, not a tile multiple, beyond Lk (clamped)."""
    q, k, v = make(4, 4, 2, 67, 100, 64, torch.float16, device, bshd=True)
    kv_len = torch.tensor([0, 5, 45, 1000], dtype=torch.int32, device=device)
    out = check(q, k, v, causal=causal, kv_len=kv_len)
    assert (out[0] == 0).all()
    # rows of zeros are PyTorch's answer for fully masked rows too
    mask = torch.arange(100)[None, :] < kv_len.cpu().long().clamp(max=100)[:, None]
    want = F.scaled_dot_product_attention(q.float().cpu(), k.float().cpu().repeat_interleave(2, 1),
                                          v.float().cpu().repeat_interleave(2, 1),
                                          attn_mask=mask[:, None, None, :] & (torch.ones(67, 100).tril().bool()
                                                                              if causal else True))
    assert_close(out, want, tol=1e-3)
    for b, n in enumerate(kv_len.tolist()):  # NaN past kv_len (a static cache's unused rows) changes nothing
        k[b, :, n:], v[b, :, n:] = float("nan"), float("nan")
    assert torch.equal(prefill_attention(q, k, v, causal=causal, scale=64 ** -0.5, kv_len=kv_len), out)


@pytest.mark.parametrize("window,Lq,Lk", [(1, 67, 67), (2, 67, 67), (18, 100, 100), (33, 100, 40)])
def test_window(window, Lq, Lk, device):
    """Sliding window i - window < j <= i; with Lq > Lk late rows can see no key (zeros)."""
    q, k, v = make(2, 2, 1, Lq, Lk, 128, torch.bfloat16, device)
    out = check(q, k, v, causal=True, window=window)
    if Lq - window >= Lk:
        assert (out[:, :, Lk + window - 1:] == 0).all()


def test_window_and_kv_len(device):
    q, k, v = make(3, 4, 4, 100, 100, 80, torch.float32, device, bshd=True)
    kv_len = torch.tensor([100, 30, 71], dtype=torch.int32, device=device)
    check(q, k, v, causal=True, window=25, kv_len=kv_len)


@pytest.mark.parametrize("Lq,Lk,window", [(17, 67, None), (40, 100, None), (33, 100, 25), (67, 67, None)])
def test_q_offset_chunk_after_a_cached_prefix(Lq, Lk, window, device):
    """A prompt chunk of Lq queries after Lk - Lq cached keys (bottom-right causal), with and
    without a window; equal to the rows of one causal pass over the whole sequence."""
    q, k, v = make(2, 4, 2, Lq, Lk, 64, torch.float32, device)
    out = check(q, k, v, causal=True, window=window, q_offset=Lk - Lq)
    qf = torch.cat([randn(2, 4, Lk - Lq, 64, device=device), q], dim=2)
    whole = prefill_attention(qf, k, v, causal=True, scale=64 ** -0.5, window=window)
    assert_close(out, whole[:, :, Lk - Lq:], dtype=torch.float32)
    with pytest.raises(ValueError, match="q_offset"):
        prefill_attention(q, k, v, causal=True, scale=1.0, q_offset=-1)


@pytest.mark.parametrize("blocks", [(32, 16), (16, 32)])
def test_other_tile_shapes(blocks, device, monkeypatch):
    """BLOCK_M != BLOCK_N: the masked / unmasked key ranges around the diagonal and window."""
    monkeypatch.setattr(AP, "BLOCKS_OVERRIDE", blocks)
    q, k, v = make(1, 2, 1, 100, 100, 64, torch.float32, device)
    check(q, k, v, causal=True, window=37, kv_len=torch.tensor([90], dtype=torch.int32, device=device))
    check(q, k, v, causal=True)


@pytest.mark.parametrize("heads_first", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_launch_orders(heads_first, causal, device, monkeypatch):
    """Grid (Hq, B, tiles) or (tiles, Hq, B): each program finds its head, batch and query tile
    (GQA 3:1, two batches with different kv_len, tiles counted backwards under causal)."""
    monkeypatch.setattr(AP, "HEADS_FIRST", heads_first)
    q, k, v = make(2, 6, 2, 67, 67, 64, torch.float32, device)
    check(q, k, v, causal=causal, kv_len=torch.tensor([67, 40], dtype=torch.int32, device=device))


def test_empty_keys_and_queries(device):
    q, k, v = make(2, 2, 1, 17, 0, 64, torch.float16, device)
    out = prefill_attention(q, k, v, causal=False, scale=0.1)
    assert (out == 0).all()
    assert_close(out, F.scaled_dot_product_attention(q.float().cpu(), k.float().cpu().repeat_interleave(2, 1),
                                                     v.float().cpu().repeat_interleave(2, 1)), tol=0.0)
    q, k, v = make(2, 2, 1, 0, 17, 64, torch.float16, device)
    assert prefill_attention(q, k, v, causal=True, scale=0.1).shape == (2, 2, 0, 64)


def test_reference_paths(device):
    """float64 and unsupported head dims run the PyTorch reference."""
    q, k, v = make(1, 2, 1, 20, 30, 32, torch.float64, device)
    check(q, k, v, causal=True, window=5)
    q, k, v = make(1, 2, 1, 20, 30, 48, torch.float32, device)
    check(q, k, v, causal=False, kv_len=torch.tensor([11], dtype=torch.int32, device=device))
    q, k, v = make(2, 4, 2, 33, 21, 64, torch.float32, device)
    kv_len = torch.tensor([0, 13], dtype=torch.int32, device=device)
    ref = AP.reference_prefill_attention(q, k, v, causal=True, scale=0.2, kv_len=kv_len, window=9)
    assert_close(ref, ref64(q, k, v, causal=True, scale=0.2, kv_len=kv_len, window=9))


def test_errors(device):
    q, k, v = make(1, 4, 2, 20, 20, 64, torch.float32, device)
    with pytest.raises(NotImplementedError, match="window"):
        prefill_attention(q, k, v, causal=False, scale=0.1, window=4)
    with pytest.raises(ValueError, match="window"):
        prefill_attention(q, k, v, causal=True, scale=0.1, window=0)
    with pytest.raises(ValueError, match="kv_len"):
        prefill_attention(q, k, v, causal=True, scale=0.1, kv_len=torch.ones(1, dtype=torch.int64, device=device))
    with pytest.raises(ValueError, match="kv_len"):
        prefill_attention(q, k, v, causal=True, scale=0.1, kv_len=torch.ones(2, dtype=torch.int32, device=device))
    k3 = randn(1, 3, 20, 64, device=device)
    with pytest.raises(ValueError, match="k:"):  # 3 KV heads do not divide 4 query heads
        prefill_attention(q, k3, k3, causal=True, scale=0.1)
    with pytest.raises(ValueError, match="v:"):
        prefill_attention(q, k, v[:, :, :5], causal=True, scale=0.1)
    with pytest.raises(TypeError, match="k:"):
        prefill_attention(q, k.half(), v, causal=True, scale=0.1)
