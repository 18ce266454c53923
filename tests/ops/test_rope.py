"""qkv_rope (split heads, per-head q/k RMSNorm, rotary embedding, KV-cache write) against
transformers' own rotary and norm code on the same numbers."""
import pytest
import torch

from fastpath.ops.rope import qkv_rope
from tests.conftest import DEVICE, randn
from tests.tolerances import assert_close

transformers = pytest.importorskip("transformers")
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb  # noqa: E402


def _reference(qkv, pos, inv_freq, nh, nkv, qw, kw, eps):
    """transformers' Qwen3 attention prologue in float64."""
    B, T, F = qkv.shape
    D = F // (nh + 2 * nkv)
    x = qkv.double().cpu()
    q, k, v = x.split([nh * D, nkv * D, nkv * D], -1)
    q, k, v = q.view(B, T, nh, D), k.view(B, T, nkv, D), v.view(B, T, nkv, D)
    if qw is not None:
        for t, w in ((0, qw), (1, kw)):
            n = Qwen3RMSNorm(D, eps).double()
            n.weight.data.copy_(w.double().cpu())
            if t == 0:
                q = n(q)
            else:
                k = n(k)
    f = pos.cpu().double()[..., None] * inv_freq.double().cpu()
    emb = torch.cat((f, f), -1)
    q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), emb.cos(), emb.sin())
    return q.transpose(1, 2), k.transpose(1, 2), v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("D,nh,nkv,norm,T", [(64, 4, 2, True, 1), (128, 8, 1, False, 1), (64, 6, 3, True, 13),
                                              (32, 2, 2, False, 7)])
def test_qkv_rope_matches_transformers(dtype, D, nh, nkv, norm, T):
    B, S = 3, 67
    qkv = randn(B, T, (nh + 2 * nkv) * D, dtype=dtype)
    pos = torch.stack([torch.randperm(S)[:T] for _ in range(B)]).to(DEVICE)
    inv_freq = (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D)).to(DEVICE)
    qw = randn(D, dtype=dtype, scale=0.3) + 1 if norm else None
    kw = randn(D, dtype=dtype, scale=0.3) + 1 if norm else None
    # cache rows 1..3 of a 5-row cache: a view, as the engine passes for one sequence
    ck_full = torch.full((5, S, nkv, D), float("nan"), dtype=dtype, device=DEVICE)
    cv_full = torch.full_like(ck_full, float("nan"))
    ck, cv = ck_full[1:4], cv_full[1:4]
    q = qkv_rope(qkv, pos, inv_freq, nh, nkv, ck, cv, qw, kw, 1e-6)
    rq, rk, rv = _reference(qkv, pos, inv_freq, nh, nkv, qw, kw, 1e-6)
    tol = None if dtype == torch.float32 else 2e-2
    assert_close(q, rq, dtype, tol=tol)
    bidx = torch.arange(B)[:, None].expand(B, T)
    assert_close(ck.cpu()[bidx, pos.cpu()], rk, dtype, tol=tol)
    assert torch.equal(cv.cpu()[bidx, pos.cpu()], rv.to(dtype))
    # nothing else written
    written = torch.zeros(5, S, dtype=torch.bool)
    written[1:4][bidx, pos.cpu()] = True
    assert ck_full.cpu()[~written].isnan().all() and cv_full.cpu()[~written].isnan().all()


def test_qkv_rope_errors():
    qkv = randn(1, 1, 64)
    ck = torch.zeros(1, 8, 1, 16, device=DEVICE)
    pos = torch.zeros(1, 1, dtype=torch.int64, device=DEVICE)
    inv = torch.ones(8, device=DEVICE)
    with pytest.raises(ValueError, match="qkv"):
        qkv_rope(randn(1, 1, 70), pos, inv, 2, 1, ck, ck)
    with pytest.raises(ValueError, match="positions"):
        qkv_rope(qkv, pos.int(), inv, 2, 1, ck, ck)
    with pytest.raises(ValueError, match="positions"):
        qkv_rope(qkv, pos.cpu() if DEVICE.type != "cpu" else pos[:, :0], inv, 2, 1, ck, ck)
    with pytest.raises(ValueError, match="inv_freq"):
        qkv_rope(qkv, pos, inv[:4], 2, 1, ck, ck)
    with pytest.raises(ValueError, match="cache_k"):
        qkv_rope(qkv, pos, inv, 2, 1, torch.zeros(1, 8, 2, 16, device=DEVICE), ck)
    with pytest.raises(ValueError, match="q_norm"):
        qkv_rope(qkv, pos, inv, 2, 1, ck, ck, q_norm=torch.ones(16, device=DEVICE))
    with pytest.raises(ValueError, match="k_norm"):
        qkv_rope(qkv, pos, inv, 2, 1, ck, ck, q_norm=torch.ones(16, device=DEVICE),
                 k_norm=torch.ones(8, device=DEVICE))
