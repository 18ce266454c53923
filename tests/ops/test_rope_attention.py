"""qkv_rope_attention (q/k norm + rotary + cache write + decode attention in one launch)
against a float64 decode step written out here: per-head RMSNorm, rotate_half rotary, the
cache rows with the new key and value, softmax attention over positions 0..pos (or the last
``window``), the output gate."""
import math

import pytest
import torch

from fastpath.ops import attention as A
from fastpath.ops import rope_attention as R
from tests.conftest import DEVICE, randn
from tests.tolerances import assert_close


def step64(qkv, pos, inv_freq, nh, nkv, qw, kw, eps, ck, cv, window=None, gate=None, scale=None):
    """(out (B, 1, nh, D), k rows (B, nkv, D), v rows) in float64."""
    B, _, F = qkv.shape
    D = F // (nh + 2 * nkv)
    x = qkv.double().cpu()[:, 0]
    q, k, v = x[:, :nh * D].view(B, nh, D), x[:, nh * D:(nh + nkv) * D].view(B, nkv, D), x[:, (nh + nkv) * D:]
    v = v.reshape(B, nkv, D)

    def norm(t, w):
        return t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w.double().cpu()

    if qw is not None:
        q, k = norm(q, qw), norm(k, kw)
    p = pos.cpu()[:, 0].double()
    ang = p[:, None] * inv_freq.double().cpu()[None, :]
    cos, sin = torch.cat((ang.cos(), ang.cos()), -1)[:, None], torch.cat((ang.sin(), ang.sin()), -1)[:, None]
    half = D // 2

    def rot(t):
        return t * cos + torch.cat((-t[..., half:], t[..., :half]), -1) * sin

    q, k = rot(q), rot(k)
    scale = 1 / math.sqrt(D) if scale is None else scale
    out = torch.zeros(B, nh, D, dtype=torch.float64)
    for b in range(B):
        n = int(pos[b, 0]) + 1
        lo = max(0, n - window) if window else 0
        keys = ck.double().cpu()[b, lo:n].clone()
        vals = cv.double().cpu()[b, lo:n].clone()
        keys[-1], vals[-1] = k[b], v[b]
        for h in range(nh):
            g = h // (nh // nkv)
            s = (keys[:, g] @ q[b, h]) * scale
            out[b, h] = torch.softmax(s, 0) @ vals[:, g]
    if gate is not None:
        out = out * torch.sigmoid(gate.double().cpu()[:, 0])
    return out[:, None], k, v


@pytest.mark.parametrize("dtype,D,nh,nkv,norm,split,window,gated", [
    (torch.float32, 64, 4, 2, True, 1, None, False),
    (torch.float32, 32, 6, 3, False, 3, None, True),
    (torch.bfloat16, 128, 8, 1, True, 5, None, False),
    (torch.bfloat16, 16, 4, 4, True, 2, 7, False),
    (torch.float16, 64, 8, 2, False, 7, 20, True),
    (torch.bfloat16, 32, 2, 1, True, None, None, False),
])
def test_against_float64_step(dtype, D, nh, nkv, norm, split, window, gated, monkeypatch):
    if split is not None:
        monkeypatch.setattr(A, "SPLIT_OVERRIDE", split)
    B, S = 3, 67
    qkv = randn(B, 1, (nh + 2 * nkv) * D, dtype=dtype)
    pos = torch.tensor([[0], [40], [66]], device=DEVICE)
    inv = (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D)).to(DEVICE)
    qw = randn(D, dtype=dtype, scale=0.3) + 1 if norm else None
    kw = randn(D, dtype=dtype, scale=0.3) + 1 if norm else None
    gate = randn(B, 1, nh, D, dtype=dtype) if gated else None
    # rows 1..3 of a 5-row cache (a view, as the engine passes); earlier positions hold keys,
    # the token's own slot and everything after it NaN: read, they would poison the output
    ck_full = torch.full((5, S, nkv, D), float("nan"), dtype=dtype, device=DEVICE)
    cv_full = torch.full_like(ck_full, float("nan"))
    ck, cv = ck_full[1:4], cv_full[1:4]
    for b in range(B):
        n = int(pos[b, 0])
        ck[b, :n] = randn(n, nkv, D, dtype=dtype)
        cv[b, :n] = randn(n, nkv, D, dtype=dtype)
    before_k, before_v = ck_full.clone(), cv_full.clone()
    ref, rk, rv = step64(qkv, pos, inv, nh, nkv, qw, kw, 1e-6, before_k[1:4], before_v[1:4], window, gate)
    out = R.qkv_rope_attention(qkv, pos, inv, nh, nkv, ck, cv, qw, kw, 1e-6, window=window, out_gate=gate)
    tol = None if dtype == torch.float32 else 2e-2
    assert out.shape == (B, 1, nh, D) and out.dtype == dtype
    assert_close(out, ref, dtype, tol=tol)
    bidx = torch.arange(B)
    assert_close(ck.cpu()[bidx, pos.cpu()[:, 0]], rk, dtype, tol=tol)
    assert torch.equal(cv.cpu()[bidx, pos.cpu()[:, 0]], rv.to(dtype))
    written = torch.zeros(5, S, dtype=torch.bool)
    written[1 + bidx, pos.cpu()[:, 0]] = True
    for after, before in ((ck_full, before_k), (cv_full, before_v)):
        assert torch.equal(after.cpu()[~written].isnan(), before.cpu()[~written].isnan())
        keep = ~written[..., None, None].expand_as(after.cpu()) & ~before.cpu().isnan()
        assert torch.equal(after.cpu()[keep], before.cpu()[keep])


def test_same_as_the_two_calls(monkeypatch):
    """The fused launch against qkv_rope + scaled_dot_product_attention on the same inputs
    (bfloat16, several splits): equal up to the float32 summation order of one key."""
    B, S, D, nh, nkv = 2, 300, 64, 8, 2
    qkv = randn(B, 1, (nh + 2 * nkv) * D, dtype=torch.bfloat16)
    pos = torch.tensor([[130], [299]], device=DEVICE)
    inv = (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D)).to(DEVICE)
    w = randn(D, dtype=torch.bfloat16, scale=0.3) + 1
    ck, cv = randn(B, S, nkv, D, dtype=torch.bfloat16), randn(B, S, nkv, D, dtype=torch.bfloat16)
    ck2, cv2 = ck.clone(), cv.clone()
    out = R.qkv_rope_attention(qkv, pos, inv, nh, nkv, ck, cv, w, w, 1e-6)
    monkeypatch.setattr(R, "FUSED", False)
    two = R.qkv_rope_attention(qkv, pos, inv, nh, nkv, ck2, cv2, w, w, 1e-6)
    assert torch.equal(ck, ck2) and torch.equal(cv, cv2)
    assert_close(out, two, torch.bfloat16, tol=4e-3)


def test_errors():
    qkv = randn(1, 1, 64)
    ck = torch.zeros(1, 8, 1, 16, device=DEVICE)
    pos = torch.zeros(1, 1, dtype=torch.int64, device=DEVICE)
    inv = torch.ones(8, device=DEVICE)
    f = R.qkv_rope_attention
    with pytest.raises(ValueError, match="qkv"):
        f(randn(1, 2, 64), torch.zeros(1, 2, dtype=torch.int64, device=DEVICE), inv, 2, 1, ck, ck)
    with pytest.raises(ValueError, match="num_heads"):
        f(randn(1, 1, 112), pos, inv, 3, 2, *[torch.zeros(1, 8, 2, 16, device=DEVICE)] * 2)
    with pytest.raises(ValueError, match="positions"):
        f(qkv, pos.int(), inv, 2, 1, ck, ck)
    with pytest.raises(ValueError, match="inv_freq"):
        f(qkv, pos, torch.ones(4, device=DEVICE), 2, 1, ck, ck)
    with pytest.raises(ValueError, match="q_norm"):
        f(qkv, pos, inv, 2, 1, ck, ck, q_norm=torch.ones(8, device=DEVICE), k_norm=torch.ones(8, device=DEVICE))
    with pytest.raises(ValueError, match="window"):
        f(qkv, pos, inv, 2, 1, ck, ck, window=0)
    with pytest.raises(ValueError, match="out_gate"):
        f(qkv, pos, inv, 2, 1, ck, ck, out_gate=randn(1, 1, 2, 8))
