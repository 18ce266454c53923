"""scaled_dot_product_attention (decode kernel for query length <= 16, prefill / reference
beyond) against a float64 reference written here and against PyTorch's own SDPA (for the
broadcasting semantics), through the public API (compiled on a GPU, interpreted on the CPU)."""
import math

import pytest
import torch
import torch.nn.functional as F

from fastpath._core import backend
from fastpath.ops import attention as A
from tests.conftest import randn
from tests.tolerances import assert_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
sdpa = A.scaled_dot_product_attention


def ref64(q, k, v, mask=None, causal=False, scale=None, gqa=False, kv_len=None, window=None):
    """Attention in float64, written out: scores, -inf where not allowed, softmax (a row
    with nothing allowed gives zeros), weighted sum. kv_len is per leading batch entry."""
    q, k, v = q.double().cpu(), k.double().cpu(), v.double().cpu()
    if gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("...ld,...sd->...ls", q, k) * scale
    Lq, Lk = s.shape[-2:]
    allow = torch.ones(s.shape, dtype=torch.bool)
    if mask is not None:
        if mask.dtype == torch.bool:
            allow = allow & mask.cpu()
        else:
            s = s + mask.double().cpu()
    allow = allow.expand(s.shape).clone()
    lens = [Lk] * (s.shape[0] if s.dim() == 4 else 1) if kv_len is None else kv_len.tolist()
    for b, n in enumerate(lens):
        n = max(0, min(int(n), Lk))
        for i in range(Lq):
            hi = min(i + 1, n) if causal else n
            lo = max(0, (i + 1 if causal else n) - window) if window is not None else 0
            row = torch.zeros(Lk, dtype=torch.bool)
            row[lo:hi] = True
            if s.dim() == 4:
                allow[b, ..., i, :] &= row
            else:
                allow[..., i, :] &= row
    s = s.masked_fill(~allow, float("-inf"))
    m = s.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0) if Lk else 0
    p = (s - m).exp()
    den = p.sum(-1, keepdim=True)
    return (p / den.clamp_min(1e-300)) @ v


def torch64(q, k, v, **kw):
    """PyTorch's own SDPA on float64 CPU copies."""
    kw = {n: (t.cpu().double() if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else
              t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    return F.scaled_dot_product_attention(q.double().cpu(), k.double().cpu(), v.double().cpu(), **kw)


def qkv(B, Hq, Hkv, Lq, Lk, D, dtype, device, Dv=None):
    return (randn(B, Hq, Lq, D, dtype=dtype, device=device),
            randn(B, Hkv, Lk, D, dtype=dtype, device=device),
            randn(B, Hkv, Lk, Dv or D, dtype=dtype, device=device))


@pytest.fixture
def split(monkeypatch):
    def force(n):
        monkeypatch.setattr(A, "SPLIT_OVERRIDE", n)
    return force


# ---------------------------------------------------------------------------- semantics

@pytest.mark.parametrize("shapes", [
    ((1, 1, 64), (2, 1, 1, 64), (2, 1, 1, 64)),  # 3-D query broadcast against a batch of 2
    ((2, 1, 3, 16), (1, 4, 5, 16), (2, 4, 5, 16)),  # batch and heads broadcast both ways
    ((3, 16), (5, 16), (5, 24)),  # 2-D, value head dim differs
    ((2, 3, 4, 2, 16), (3, 4, 7, 16), (3, 1, 7, 16)),  # 5-D, value heads broadcast
    ((2, 4, 2, 16), (2, 1, 9, 16), (2, 1, 9, 16)),  # MQA by broadcasting (no enable_gqa)
])
def test_broadcasting_like_torch(shapes, device):
    q, k, v = (randn(*s, device=device) for s in shapes)
    out = sdpa(q, k, v)
    want = torch64(q, k, v)
    assert out.shape == want.shape
    assert_close(out, want)
    assert_close(out, ref64(q, k, v))


# Every (ratio, lq) once, the dtypes in turn (float16 twice). Rows of a group (ratio x lq) up to
# 32: one row block of 16 or 32, the 67 keys in two splits; 64 and 128 rows: 2 and 4 row blocks
# of 32, one split. Each dtype has both.
@pytest.mark.parametrize("dtype,ratio,lq", [
    (torch.float32, 1, 1), (torch.float32, 4, 3), (torch.float32, 8, 16),
    (torch.float16, 4, 1), (torch.float16, 8, 3), (torch.float16, 1, 16), (torch.float16, 8, 16),
    (torch.bfloat16, 8, 1), (torch.bfloat16, 1, 3), (torch.bfloat16, 4, 16)])
def test_gqa(dtype, ratio, lq, device):
    q, k, v = qkv(2, 2 * ratio, 2, lq, 67, 32, dtype, device)
    out = sdpa(q, k, v, enable_gqa=True)
    assert out.dtype == dtype and out.shape == (2, 2 * ratio, lq, 32)
    assert_close(out, ref64(q, k, v, gqa=True))


def test_gqa_against_torch(device):
    q, k, v = qkv(1, 8, 2, 3, 13, 16, torch.float32, device)
    assert_close(sdpa(q, k, v, enable_gqa=True), torch64(q, k, v, enable_gqa=True))
    k1, v1 = k[:, :1], randn(1, 4, 13, 16, device=device)  # different key / value head counts
    assert_close(sdpa(q, k1, v1, enable_gqa=True), torch64(q, k1, v1, enable_gqa=True))


@pytest.mark.parametrize("dtype,lk", [(torch.float32, 1), (torch.float16, 7), (torch.float32, 67),
                                      (torch.float16, 1000)])  # each dtype a short and a long (split) cache
def test_kv_lengths(dtype, lk, device):
    q, k, v = qkv(2, 4, 1, 1, lk, 64, dtype, device)
    assert_close(sdpa(q, k, v, enable_gqa=True), ref64(q, k, v, gqa=True))


def test_long_kv(device):
    q, k, v = qkv(1, 2, 1, 2, 4097, 16, torch.bfloat16, device)
    assert_close(sdpa(q, k, v, enable_gqa=True), ref64(q, k, v, gqa=True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 80, 96, 128, 256])
def test_head_dims(dtype, d, device):
    q, k, v = qkv(1, 2, 1, 3, 37, d, dtype, device)
    assert_close(sdpa(q, k, v, enable_gqa=True, scale=0.3), ref64(q, k, v, gqa=True, scale=0.3))


@pytest.mark.parametrize("d,dv", [(24, 24), (40, 200), (8, 1)])
def test_odd_head_dims(d, dv, device):
    q, k, v = qkv(2, 3, 3, 2, 13, d, torch.float32, device, Dv=dv)
    assert_close(sdpa(q, k, v), torch64(q, k, v))


@pytest.mark.parametrize("lq,lk", [(1, 7), (3, 67), (16, 7), (16, 40), (20, 33)])
def test_causal_top_left(lq, lk, device):
    """PyTorch aligns the causal mask top-left: token i sees keys 0..i, also when Lq != Lk."""
    q, k, v = qkv(1, 2, 2, lq, lk, 32, torch.float32, device)
    out = sdpa(q, k, v, is_causal=True)
    assert_close(out, torch64(q, k, v, is_causal=True))
    assert_close(out, ref64(q, k, v, causal=True))


@pytest.mark.parametrize("mshape,kind", [
    ((3, 67), "bool"), ((2, 4, 3, 67), "bool"),  # broadcast over batch and heads; a full mask
    ((2, 1, 3, 67), "float32"), ((2, 4, 1, 67), "float32"),  # broadcast over heads; over query rows
    ((1, 4, 3, 67), "qdtype"), ((2, 4, 3, 67), "qdtype")])  # broadcast over the batch; a full mask
def test_masks(mshape, kind, device):
    dtype = torch.float16 if kind == "qdtype" else torch.float32
    q, k, v = qkv(2, 4, 2, 3, 67, 32, dtype, device)
    if kind == "bool":
        mask = torch.rand(mshape, device=device) > 0.3
    else:
        mask = randn(*mshape, dtype=torch.float32 if kind == "float32" else dtype, device=device)
        mask = mask.masked_fill(torch.rand(mshape, device=device) > 0.8, float("-inf"))
    out = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    assert_close(out, ref64(q, k, v, mask=mask, gqa=True))
    assert_close(out, torch64(q, k, v, attn_mask=mask, enable_gqa=True), dtype=dtype)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("lq", [3, 20])  # decode kernel, reference
def test_fully_masked_rows_give_zeros(kind, lq, device):
    """Like PyTorch: a query row that may attend to nothing gives zeros, not NaN."""
    q, k, v = qkv(1, 2, 2, lq, 67, 32, torch.float32, device)
    keep = torch.rand(lq, 67, device=device) > 0.5
    keep[1] = False
    mask = keep if kind == "bool" else torch.zeros(lq, 67, device=device).masked_fill(~keep, float("-inf"))
    out = sdpa(q, k, v, attn_mask=mask)
    assert torch.equal(out[:, :, 1].cpu(), torch.zeros(1, 2, 32))
    assert_close(out, torch64(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_len(dtype, device):
    """Static cache: keys at positions >= kv_len[b] are ignored (0 gives zeros, > S clamps)."""
    q, k, v = qkv(4, 4, 2, 2, 67, 64, dtype, device)
    lens = torch.tensor([0, 1, 37, 500], dtype=torch.int32, device=device)
    out = sdpa(q, k, v, enable_gqa=True, kv_len=lens)
    assert_close(out, ref64(q, k, v, gqa=True, kv_len=lens))
    assert torch.equal(out[0].cpu().float(), torch.zeros(4, 2, 64))
    assert_close(out[2:3], ref64(q[2:3], k[2:3, :, :37], v[2:3, :, :37], gqa=True))
    for b, n in enumerate(lens.tolist()):  # NaN past kv_len (a static cache's unused rows) changes nothing
        k[b, :, n:], v[b, :, n:] = float("nan"), float("nan")
    assert torch.equal(sdpa(q, k, v, enable_gqa=True, kv_len=lens), out)


@pytest.mark.parametrize("tma", [True, False])
def test_decode_load_paths(tma, device, monkeypatch):
    """Keys and values through tensor descriptors or masked pointer loads, against float64,
    with head dims below their power-of-two tile (40 of 64), several splits and a kv_len."""
    monkeypatch.setattr(A, "USE_TMA", tma)
    monkeypatch.setattr(A, "SPLIT_OVERRIDE", 3)
    q, k, v = qkv(2, 8, 2, 3, 150, 40, torch.float32, device)
    lens = torch.tensor([150, 71], dtype=torch.int32, device=device)
    if backend.tma_on(device):
        assert A.tma_ok(k, v)
    assert_close(sdpa(q, k, v, enable_gqa=True), ref64(q, k, v, gqa=True))
    assert_close(sdpa(q, k, v, enable_gqa=True, kv_len=lens), ref64(q, k, v, gqa=True, kv_len=lens))


class _RecordingLaunch:
    """Stands in for the decode kernel's launcher: records what a launch is specialised on
    (grid, every non-tensor argument, constexprs and options), then launches."""

    def __init__(self, real):
        self.real, self.seen = real, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            scalars = tuple((tuple(a.shape), tuple(a.strides), tuple(a.block_shape)) if hasattr(a, "block_shape")
                            else a for a in args if not isinstance(a, torch.Tensor))  # descriptors by layout
            self.seen.append((tuple(grid), scalars, tuple(sorted(kwargs.items(), key=lambda kv: kv[0]))))
            return self.real[grid](*args, **kwargs)
        return launch


def test_kv_len_grows_without_recompiling(device, monkeypatch):
    """A growing static cache changes no launch parameter (same grid, scalars and
    constexprs: no recompilation, no host read of kv_len) and stays correct."""
    rec = _RecordingLaunch(A._DECODE)
    monkeypatch.setattr(A, "_DECODE", rec)
    q, k, v = qkv(2, 8, 2, 1, 200, 32, torch.float16, device)
    lens = torch.tensor([1, 3], dtype=torch.int32, device=device)
    sdpa(q, k, v, enable_gqa=True, kv_len=lens)
    for _ in range(3):
        lens += torch.tensor([50, 60], dtype=torch.int32, device=device)  # on the device, in place
        out = sdpa(q, k, v, enable_gqa=True, kv_len=lens)
        assert_close(out, ref64(q, k, v, gqa=True, kv_len=lens))
    assert len(rec.seen) == 4 and len(set(rec.seen)) == 1


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq", [1, 5, 20])
def test_window(causal, lq, device):
    q, k, v = qkv(2, 4, 2, lq, 67, 32, torch.float32, device)
    lens = torch.tensor([67, 30], dtype=torch.int32, device=device)
    for kw in (dict(window=9), dict(window=1, kv_len=lens), dict(window=40, kv_len=lens), dict(window=1000)):
        out = sdpa(q, k, v, is_causal=causal, enable_gqa=True, **kw)
        assert_close(out, ref64(q, k, v, causal=causal, gqa=True, **kw))


def test_window_and_mask(device):
    q, k, v = qkv(1, 2, 1, 4, 67, 32, torch.float32, device)
    mask = torch.rand(4, 67, device=device) > 0.5
    out = sdpa(q, k, v, attn_mask=mask, enable_gqa=True, window=20)
    assert_close(out, ref64(q, k, v, mask=mask, gqa=True, window=20))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_noncontiguous(dtype, device):
    """q/k/v transposed from (B, L, H, D) storage, and a value sliced from a wider buffer."""
    q = randn(2, 3, 8, 32, dtype=dtype, device=device).transpose(1, 2)
    k = randn(2, 67, 2, 32, dtype=dtype, device=device).transpose(1, 2)
    v = randn(2, 67, 2, 64, dtype=dtype, device=device).transpose(1, 2)[..., ::2]
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    out = sdpa(q, k, v, enable_gqa=True)
    assert_close(out, ref64(q, k, v, gqa=True))
    assert_close(sdpa(q, k, v[:, :1], enable_gqa=True), ref64(q, k, v[:, :1], gqa=True))


def test_many_rows_per_group(device):
    """More query heads x tokens per KV head than one program's rows: several row blocks."""
    q, k, v = qkv(1, 16, 1, 7, 67, 32, torch.float32, device)
    assert_close(sdpa(q, k, v, enable_gqa=True), ref64(q, k, v, gqa=True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", ["bool", "float", "gated"])
def test_many_rows_masked(dtype, kind, device):
    """64-row decode programs (on a GPU) with a mask, or causal + kv_len + window + gate, at head dim
    256: at three stages they needed more shared memory than an sm_90 block may take."""
    q, k, v = qkv(1, 16, 1, 8, 67, 256, dtype, device)
    if kind == "gated":
        kv_len, gate = torch.tensor([60], dtype=torch.int32, device=device), randn(1, 16, 8, 256, dtype=dtype,
                                                                                   device=device)
        out = sdpa(q, k, v, is_causal=True, enable_gqa=True, kv_len=kv_len, window=40, out_gate=gate)
        att = ref64(q, k, v, causal=True, gqa=True, kv_len=kv_len, window=40).to(dtype).double()
        ref = att * torch.sigmoid(gate.double().cpu()).to(dtype).double()
    else:
        mask = torch.rand(1, 16, 8, 67, device=device) > 0.3
        if kind == "float":
            mask = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, float("-inf"))
        out = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
        ref = ref64(q, k, v, mask=mask, gqa=True)
    assert_close(out, ref)


@pytest.mark.parametrize("n", [1, 3, 100])  # 100: 19 splits (the most 300 keys allow)
def test_split_forced_and_deterministic(n, split, device):
    split(n)
    q, k, v = qkv(1, 4, 2, 3, 300, 32, torch.float16, device)
    out = sdpa(q, k, v, enable_gqa=True)
    assert_close(out, ref64(q, k, v, gqa=True))
    assert torch.equal(out, sdpa(q, k, v, enable_gqa=True))


# decode (one split: the gate in the decode kernel; three: in the combine), prefill; each dtype every path
@pytest.mark.parametrize("dtype,lq,n", [(torch.bfloat16, 1, 1), (torch.float32, 2, 1), (torch.float32, 1, 3),
                                        (torch.bfloat16, 1, 3), (torch.float32, 20, 1), (torch.bfloat16, 20, 1)])
def test_out_gate(dtype, lq, n, split, device):
    """``out_gate``: the output times sigmoid(gate) (Qwen3.5's gated attention), against float64
    attention rounded to the dtype times the float64 sigmoid rounded to the dtype; a strided
    gate (a view of a wider projection, as the model passes it)."""
    split(n)
    q, k, v = qkv(2, 4, 2, lq, 300, 40, dtype, device)
    wide = randn(2, lq, 4, 2 * 40, dtype=dtype, device=device)
    gate = wide[..., :40].transpose(1, 2)  # (2, 4, lq, 40), not contiguous
    lens = torch.tensor([300, 77], dtype=torch.int32, device=device)
    out = sdpa(q, k, v, enable_gqa=True, kv_len=lens, out_gate=gate)
    att = ref64(q, k, v, gqa=True, kv_len=lens).to(dtype).double()
    assert out.shape == (2, 4, lq, 40) and out.dtype == dtype
    assert_close(out, att * torch.sigmoid(gate.double().cpu()).to(dtype).double())
    with pytest.raises(ValueError, match="out_gate"):
        sdpa(q, k, v, enable_gqa=True, out_gate=gate[..., 1:])
    with pytest.raises(ValueError, match="out_gate"):
        sdpa(q, k, v, enable_gqa=True, out_gate=gate.float() if dtype != torch.float32 else gate.half())


def test_split_heuristic(device):
    """Few (batch, KV head) programs and a long cache: the KV range is split."""
    if device.type == "cpu":
        assert A.decode_split(1000, 2, device, 16) > 1
        assert A.decode_split(1000, 1000, device, 16) == 1
        assert A.decode_split(7, 1, device, 16) == 1


# ---------------------------------------------------------------------------- other paths

def test_empty(device):
    q, k, v = qkv(1, 2, 2, 3, 0, 16, torch.float32, device)
    assert torch.equal(sdpa(q, k, v).cpu(), torch.zeros(1, 2, 3, 16))
    q, k, v = qkv(1, 2, 2, 0, 5, 16, torch.float32, device)
    assert sdpa(q, k, v).shape == (1, 2, 0, 16)


def test_float64_reference_path(device):
    q, k, v = qkv(1, 4, 2, 3, 13, 16, torch.float64, device)
    out = sdpa(q, k, v, enable_gqa=True)
    assert out.dtype == torch.float64
    assert_close(out, ref64(q, k, v, gqa=True))


def test_dropout(device):
    q, k, v = qkv(1, 2, 2, 3, 13, 16, torch.float32, device)
    assert torch.equal(sdpa(q, k, v, dropout_p=1.0).cpu(), torch.zeros(1, 2, 3, 16))
    out = sdpa(q, k, v, dropout_p=0.5)
    assert out.shape == (1, 2, 3, 16) and torch.isfinite(out).all()


def test_reference_against_ref64(device):
    q, k, v = qkv(2, 4, 2, 5, 30, 16, torch.float32, device)
    lens = torch.tensor([30, 12], dtype=torch.int32, device=device)
    got = A.reference_scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, kv_len=lens, window=3)
    assert_close(got, ref64(q, k, v, causal=True, gqa=True, kv_len=lens, window=3))


def test_autograd_takes_reference(device):
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 2, 3, 13, 16, torch.float32, device))
    g = randn(1, 2, 3, 16, device=device)
    sdpa(q, k, v).backward(g)
    qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(qr, kr, vr).backward(g)
    for a, r in ((q, qr), (k, kr), (v, vr)):
        assert_close(a.grad, r.grad, tol=1e-5)


@pytest.mark.skipif(not backend.INTERPRET and not torch.cuda.is_available(), reason="needs the Triton path")
def test_decode_path_is_taken(monkeypatch, device):
    """The decode kernel (not the reference) serves query lengths <= 16."""
    def boom(*a, **kw):
        raise AssertionError("reference path taken")
    monkeypatch.setattr(A, "reference_scaled_dot_product_attention", boom)
    q, k, v = qkv(1, 4, 2, 16, 13, 16, torch.float32, device)
    sdpa(q, k, v, enable_gqa=True, attn_mask=torch.ones(16, 13, dtype=torch.bool, device=device))


# ---------------------------------------------------------------------------- errors

def test_errors(device):
    q, k, v = qkv(1, 8, 2, 1, 5, 16, torch.float32, device)
    with pytest.raises(ValueError, match="key:.*head dim"):
        sdpa(q, randn(1, 2, 5, 8, device=device), v, enable_gqa=True)
    with pytest.raises(ValueError, match="value:.*keys"):
        sdpa(q, k, randn(1, 2, 6, 16, device=device), enable_gqa=True)
    with pytest.raises(ValueError, match="key:.*enable_gqa"):
        sdpa(q, k, v)
    with pytest.raises(ValueError, match="key:.*multiple"):
        sdpa(q, randn(1, 3, 5, 16, device=device), randn(1, 3, 5, 16, device=device), enable_gqa=True)
    with pytest.raises(ValueError, match="attn_mask:.*broadcast"):
        sdpa(q, k, v, attn_mask=torch.ones(3, 1, 5, dtype=torch.bool, device=device), enable_gqa=True)
    with pytest.raises(ValueError, match="attn_mask:.*is_causal"):
        sdpa(q, k, v, attn_mask=torch.ones(1, 5, dtype=torch.bool, device=device), is_causal=True,
             enable_gqa=True)
    with pytest.raises(TypeError, match="attn_mask:.*dtype"):
        sdpa(q, k, v, attn_mask=torch.ones(1, 5, dtype=torch.int32, device=device), enable_gqa=True)
    with pytest.raises(TypeError, match="key:.*dtype"):
        sdpa(q, k.half(), v, enable_gqa=True)
    with pytest.raises(ValueError, match="key/value:.*batch"):
        sdpa(randn(2, 8, 1, 16, device=device), randn(3, 2, 5, 16, device=device),
             randn(3, 2, 5, 16, device=device), enable_gqa=True)
    with pytest.raises(TypeError, match="kv_len:.*int32"):
        sdpa(q, k, v, enable_gqa=True, kv_len=torch.tensor([3], device=device))
    with pytest.raises(ValueError, match=r"kv_len:.*\(1,\)"):
        sdpa(q, k, v, enable_gqa=True, kv_len=torch.tensor([3, 4], dtype=torch.int32, device=device))
    for w in (0, -1, 2.0):
        with pytest.raises(ValueError, match="window"):
            sdpa(q, k, v, enable_gqa=True, window=w)
    with pytest.raises(ValueError, match="dropout_p"):
        sdpa(q, k, v, enable_gqa=True, dropout_p=1.5)
    with pytest.raises(ValueError, match="query:.*2 dimensions"):
        sdpa(randn(16, device=device), k, v)
