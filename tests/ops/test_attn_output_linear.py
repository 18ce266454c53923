"""One decode token's split attention combined inside the output projection
(``decode_partials`` + ``attention_output_linear``), against float64 attention and a float64
projection; and the unsplit / fallback paths. Compiled on a GPU, interpreted on the CPU."""
import math

import pytest
import torch

from fastpath.ops import attention as A
from fastpath.ops import linear as L
from fastpath.ops import matvec
from fastpath.ops.attn_partials import Partials
from tests.conftest import randn
from tests.tolerances import assert_close


def attention64(q, k, v, n, gate=None):
    """float64 softmax attention of q (1, H, 1, D) over the first n keys of k / v (1, Hkv, S, D)."""
    G = q.shape[1] // k.shape[1]
    kk = k[:, :, :n].double().repeat_interleave(G, 1)
    vv = v[:, :, :n].double().repeat_interleave(G, 1)
    w = torch.softmax(q.double() @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1)
    o = w @ vv
    return o if gate is None else o * torch.sigmoid(gate.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("H,Hkv,D,split,gated", [(8, 2, 16, 3, False), (6, 3, 32, 2, True), (4, 1, 16, 5, True),
                                                 (8, 2, 16, 1, False)])
@pytest.mark.parametrize("ksplit", [1, 2])
def test_attention_output_linear(dtype, H, Hkv, D, split, gated, ksplit, monkeypatch, device):
    """KV splits 1 (finished in the decode kernel), 2, 3, 5 (more splits than the interpreter's
    block of rows: masked split slots); GQA groups of 4, 2, 4 heads; an output gate; the
    projection's K split over programs (each K share combines its own heads)."""
    monkeypatch.setattr(A, "SPLIT_OVERRIDE", split)
    monkeypatch.setattr(matvec, "SPLIT_K_OVERRIDE", ksplit)
    S, n = 80, 71
    q = randn(1, H, 1, D, dtype=dtype, device=device)
    k = randn(1, Hkv, S, D, dtype=dtype, device=device)
    v = randn(1, Hkv, S, D, dtype=dtype, device=device)
    gate = randn(1, H, 1, D, dtype=dtype, device=device) if gated else None
    W = randn(24, H * D, dtype=dtype, device=device, scale=(H * D) ** -0.5)
    kv_len = torch.tensor([n], dtype=torch.int32, device=device)
    a = A.decode_partials(q, k, v, kv_len=kv_len, out_gate=gate)
    assert isinstance(a, Partials) == (split > 1)
    y = L.attention_output_linear(a, W) if isinstance(a, Partials) else L.linear(a.reshape(1, 1, -1), W)
    ref = attention64(q, k, v, n, gate).reshape(1, 1, -1) @ W.double().t()
    assert y.shape == (1, 1, 24) and y.dtype == dtype
    assert_close(y, ref)


@pytest.mark.parametrize("fuse", [True, False])
def test_partials_combine_matches(fuse, monkeypatch, device):
    """The fused projection equals the combine launch followed by ``linear`` (float32); with
    ``FUSE_COMBINE`` off it is that path."""
    monkeypatch.setattr(A, "SPLIT_OVERRIDE", 3)
    monkeypatch.setattr(L, "FUSE_COMBINE", fuse)
    q, k, v = randn(1, 4, 1, 16, device=device), randn(1, 2, 40, 16, device=device), randn(1, 2, 40, 16, device=device)
    W = randn(8, 64, device=device)
    kv_len = torch.tensor([33], dtype=torch.int32, device=device)
    y = L.attention_output_linear(A.decode_partials(q, k, v, kv_len=kv_len), W)
    two = L.linear(A.decode_partials(q, k, v, kv_len=kv_len).combine().reshape(1, 1, -1), W)
    assert_close(y, two.double(), torch.float32)


def test_decode_partials_fallbacks(monkeypatch, device):
    """Two batch entries, or DEFER_COMBINE off: the finished attention, as the public op."""
    monkeypatch.setattr(A, "SPLIT_OVERRIDE", 3)
    q, k, v = randn(2, 4, 1, 16, device=device), randn(2, 2, 40, 16, device=device), randn(2, 2, 40, 16, device=device)
    kv_len = torch.tensor([33, 40], dtype=torch.int32, device=device)
    out = A.decode_partials(q, k, v, kv_len=kv_len)
    assert torch.equal(out, A.scaled_dot_product_attention(q, k, v, enable_gqa=True, kv_len=kv_len))
    monkeypatch.setattr(A, "DEFER_COMBINE", False)
    one = A.decode_partials(q[:1], k[:1], v[:1], kv_len=kv_len[:1])
    assert isinstance(one, torch.Tensor)
    with pytest.raises(ValueError, match="kv_len"):
        monkeypatch.setattr(A, "DEFER_COMBINE", True)
        A.decode_partials(q[:1], k[:1], v[:1], kv_len=kv_len)


def test_attention_output_linear_errors(monkeypatch, device):
    monkeypatch.setattr(A, "SPLIT_OVERRIDE", 2)
    q, k, v = randn(1, 4, 1, 16, device=device), randn(1, 2, 40, 16, device=device), randn(1, 2, 40, 16, device=device)
    a = A.decode_partials(q, k, v, kv_len=torch.tensor([40], dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="weight"):
        L.attention_output_linear(a, randn(8, 60, device=device))
