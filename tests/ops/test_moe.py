"""route and fused_experts (decode kernels, grouped-GEMM prefill, FP8 experts, gpt-oss) against
float64 loops over tokens and slots written here, and against transformers' own modules,
through the public API (compiled on a GPU, interpreted on the CPU: sizes stay small)."""
import math

import pytest
import torch
import torch.nn.functional as F

from fastpath._core import backend
from fastpath._core.launch import workspace
from fastpath.ops import grouped_mm as GM
from fastpath.ops import moe
from fastpath.ops import moe_kernels as MK
from tests.conftest import noncontig, randn
from tests.tolerances import assert_close

HAS_FP8 = hasattr(torch, "float8_e4m3fn")
needs_fp8 = pytest.mark.skipif(not HAS_FP8, reason="torch has no float8_e4m3fn")
H, NI = 40, 24  # awkward: neither is a multiple of the 16-wide interpreter blocks


# ---------------------------------------------------------------------------- float64 references

def route64(logits, k, scoring="softmax", norm=False, bias=None, scale=1.0, eps=None):
    """transformers' routers, in float64: Qwen3-MoE / Mixtral / OLMoE (softmax) and
    LFM2-MoE / DeepSeek-V3 (sigmoid, bias for the choice only)."""
    x = logits.double()
    if scoring == "softmax":
        s = torch.softmax(x, -1)
        eps = 0.0 if eps is None else eps
    else:
        s = torch.sigmoid(x)
        eps = 1e-6 if eps is None else eps
    choice = s + bias.double() if bias is not None else s
    ids = torch.sort(choice, dim=-1, descending=True, stable=True).indices[..., :k]  # ties: lowest index first
    w = s.gather(-1, ids)
    if norm:
        w = w / (w.sum(-1, keepdim=True) + eps)
    return w * scale, ids


def act64(g, u, act, alpha=1.702, limit=7.0):
    if act == "silu":
        return F.silu(g) * u
    if act == "gelu":
        return F.gelu(g) * u
    if act == "gelu_tanh":
        return F.gelu(g, approximate="tanh") * u
    g = g.clamp(max=limit)
    u = u.clamp(-limit, limit)
    return (u + 1) * g * torch.sigmoid(alpha * g)


def experts64(x, ids, w, gu, dn, act="silu", gu_b=None, d_b=None, gu_s=None, d_s=None, interleaved=False):
    """Loop over tokens and slots in float64; ids outside [0, E) contribute nothing."""
    x, w = x.double().cpu(), w.double().cpu()
    gu, dn = gu.double().cpu(), dn.double().cpu()
    if gu_s is not None:
        gu = gu * gu_s.double().cpu().reshape(gu.shape[0], -1, 1)
    if d_s is not None:
        dn = dn * d_s.double().cpu().reshape(dn.shape[0], -1, 1)
    E = gu.shape[0]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if not 0 <= e < E:
                continue
            z = gu[e] @ x[t] + (gu_b[e].double().cpu() if gu_b is not None else 0)
            g, u = (z[0::2], z[1::2]) if interleaved else (z[: z.shape[0] // 2], z[z.shape[0] // 2:])
            y = dn[e] @ act64(g, u, act) + (d_b[e].double().cpu() if d_b is not None else 0)
            out[t] += w[t, j] * y
    return out


def make_experts(E, dtype, device, h=H, i=NI, gate_scale=1.0):
    gu = randn(E, 2 * i, h, dtype=dtype, device=device, scale=gate_scale * h ** -0.5)
    dn = randn(E, h, i, dtype=dtype, device=device, scale=i ** -0.5)
    return gu, dn


def routing(T, E, k, device):
    w, ids = route64(torch.randn(T, E), k, norm=True)
    return w.float().to(device), ids.to(device)


def poison_workspaces(device, T, k, dtype, h=H, i=NI):
    """NaN in the decode workspaces, so that a row the kernels forget to write cannot pass."""
    workspace(device, f"moe.h.{dtype}", T * k * i, dtype).fill_(float("nan"))
    workspace(device, "moe.y", T * k * h, torch.float32).fill_(float("nan"))


@pytest.fixture
def path(monkeypatch):
    """Force a path for every token count: "rows" (the row kernels, up to ROWS_MAX_T tokens by
    default), "decode" (gate/up + down + combine) or "prefill" (sort + grouped GEMMs)."""
    def force(p):
        monkeypatch.setattr(MK, "ROWS_MAX_T", 64 if p == "rows" else 0)
        monkeypatch.setattr(moe, "FORCE_PATH", "decode" if p == "rows" else p)
    return force


# ---------------------------------------------------------------------------- route

@pytest.fixture(params=["bitonic", "argmax"])
def topk(request, monkeypatch):
    """Both top-k methods of the routing kernels: one bitonic network, or TOPK rounds of arg-max."""
    monkeypatch.setattr(MK, "TOPK_BITONIC", request.param == "bitonic")
    return request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm", [False, True])
def test_route_softmax(dtype, norm, device, topk):
    logits = randn(7, 13, dtype=dtype, device=device)
    w, ids = moe.route(logits, 3, norm_topk_prob=norm)
    rw, rids = route64(logits, 3, norm=norm)
    assert w.dtype == torch.float32 and ids.dtype == torch.int64 and ids.shape == (7, 3)
    assert torch.equal(ids.cpu(), rids.cpu())
    assert_close(w, rw, torch.float32)


@pytest.mark.parametrize("bias", [False, True])
def test_route_sigmoid(bias, device, topk):
    """LFM2-MoE / DeepSeek-V3: the bias changes the choice (it is large here) but not the weights."""
    E = 67
    # float32 logits: bf16 ones tie often, and a float32 tie that float64 breaks reorders the top-k
    logits = randn(5, E, device=device)
    b = randn(E, device=device, scale=0.5) if bias else None
    w, ids = moe.route(logits, 8, "sigmoid", True, b, 2.5)
    rw, rids = route64(logits, 8, "sigmoid", True, b, 2.5)
    assert torch.equal(ids.cpu(), rids.cpu())
    assert_close(w, rw, torch.float32)
    w, ids = moe.route(logits, 8, "sigmoid", False, b, norm_eps=1e-20)  # no renormalisation
    rw, rids = route64(logits, 8, "sigmoid", False, b)
    assert torch.equal(ids.cpu(), rids.cpu())
    assert_close(w, rw, torch.float32)


@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
def test_route_shared_gate(scoring, device, topk):
    """Qwen3.5-MoE: logit E is the shared expert's gate: the first E are routed as without it,
    and slot k + 1 is (E, sigmoid(gate)); the reference path agrees."""
    E, k = 19, 4
    logits = randn(6, E + 1, device=device)
    w, ids = moe.route(logits, k, scoring, norm_topk_prob=True, shared_gate=True)
    rw, rids = route64(logits[:, :E], k, scoring, norm=True)
    assert w.shape == ids.shape == (6, k + 1)
    assert torch.equal(ids[:, :k].cpu(), rids.cpu()) and bool((ids[:, k] == E).all())
    assert_close(w[:, :k], rw, torch.float32)
    assert_close(w[:, k], torch.sigmoid(logits[:, E].double()), torch.float32)
    rw2, rids2 = moe.route(logits.double(), k, scoring, norm_topk_prob=True, shared_gate=True)  # reference path
    assert torch.equal(rids2.cpu(), ids.cpu())
    assert_close(w, rw2, torch.float32)
    with pytest.raises(ValueError, match="top_k"):
        moe.route(logits[:, :3], 3, shared_gate=True)


# T 6: past ROUTER_MAX_T, linear + route; each T in both tile modes, with one dtype each (alternated)
@pytest.mark.parametrize("T,dtype,one_tile", [(T, (torch.float32, torch.float16)[(i + one) % 2], bool(one))
                                              for one in (0, 1) for i, T in enumerate((1, 3, 4, 6))])
def test_router(T, dtype, one_tile, monkeypatch, device, topk):
    """router(x, W) = route of the logits x W^T, with a shared gate, sigmoid scoring and an
    expert bias; twice in a row (the kernel's ticket is reset). x and W hold multiples of 1/4
    and 1/16 so that every logit is exact in float16 and in any summation order: equal logits
    are true ties (lowest index first), and no rounding can reorder near-equal ones.
    ``one_tile``: the whole row in one tile, its router rows loaded first (``ROUTER_W_FIRST``)."""
    if one_tile:
        monkeypatch.setattr(moe, "ROUTER_TILE", 1 << 14)
    E, Hr, k = 21, 70, 3
    g = torch.Generator().manual_seed(T)
    x = (torch.randint(-2, 3, (T, Hr), generator=g) / 4).to(device, dtype)
    W = (torch.randint(-4, 5, (E + 1, Hr), generator=g) / 16).to(device, dtype)
    logits = x.double() @ W.double().T
    b = randn(E, device=device, scale=0.3)
    lg = workspace(device, "moe.router.logits", T * (E + 1), torch.float32)
    for _ in range(2):
        lg.fill_(float("nan"))  # routing before every logit is written cannot pass
        w, ids = moe.router(x, W[:E], k, norm_topk_prob=True)
        rw, rids = route64(logits[:, :E], k, norm=True)
        assert torch.equal(ids.cpu(), rids.cpu())
        assert_close(w, rw, torch.float32)
    lg.fill_(float("nan"))
    w, ids = moe.router(x, W, k, "sigmoid", True, b, 2.0, shared_gate=True)
    rw, rids = route64(logits[:, :E], k, "sigmoid", True, b, 2.0)
    assert w.shape == (T, k + 1) and torch.equal(ids[:, :k].cpu(), rids.cpu()) and bool((ids[:, k] == E).all())
    assert_close(w[:, :k], rw, torch.float32)
    assert_close(w[:, k], torch.sigmoid(logits[:, E]), torch.float32)


def test_router_errors(device):
    x = randn(2, 8, device=device)
    W = randn(5, 8, device=device)
    with pytest.raises(TypeError, match="weight"):
        moe.router(x, W.double(), 2)
    with pytest.raises(ValueError, match="weight"):
        moe.router(x, W[:, :7], 2)
    with pytest.raises(ValueError, match="hidden_states"):
        moe.router(x[0], W, 2)
    with pytest.raises(ValueError, match="top_k"):
        moe.router(x, W, 5, shared_gate=True)
    with pytest.raises(ValueError, match="expert_bias"):
        moe.router(x, W, 2, "sigmoid", expert_bias=torch.zeros(4, device=device))


def test_route_ties_and_shapes(device, topk):
    """Equal scores go to the lowest index (k = E included); leading dims are kept."""
    logits = torch.zeros(2, 3, 6, device=device)
    logits[1, 2, 4] = 1.0
    w, ids = moe.route(logits, 6)
    assert ids.shape == (2, 3, 6)
    assert ids[0, 0].tolist() == [0, 1, 2, 3, 4, 5]
    assert ids[1, 2].tolist() == [4, 0, 1, 2, 3, 5]
    assert_close(w[0, 0], torch.full((6,), 1 / 6), torch.float32)
    w, ids = moe.route(logits.transpose(0, 1), 1, "sigmoid")  # non-contiguous
    assert ids.shape == (3, 2, 1) and bool((ids[2, 1] == 4).all())


@pytest.mark.parametrize("E,k", [(100, 8), (128, 10), (600, 4)])
def test_route_many_experts_nonfinite(E, k, device, topk):
    """Many experts (E not a power of two, k not one), with +-inf and NaN logits:
    NaN ranks first and +inf next, as torch.topk orders them; equal bf16 scores go to the
    lowest index."""
    logits = randn(4, E, device=device)
    logits[0, 7], logits[0, 3], logits[1, E - 1], logits[1, 0] = float("inf"), float("nan"), float("inf"), -float("inf")
    logits[2] = logits[2].to(torch.bfloat16).float().round()  # many ties
    w, ids = moe.route(logits, k, "sigmoid", False)
    s = torch.sigmoid(logits.double().cpu())
    rids = torch.sort(s, dim=-1, descending=True, stable=True).indices[:, :k]  # torch.topk's ties are unspecified
    assert torch.equal(ids.cpu(), rids)
    assert ids[0, :2].tolist() == [3, 7]
    assert_close(w, s.gather(-1, rids), torch.float32)


def test_route_matches_transformers(device, topk):
    transformers = pytest.importorskip("transformers")
    from transformers.models.lfm2_moe.modeling_lfm2_moe import Lfm2MoeTopKRouter
    from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    x = randn(6, 32, device="cpu")  # the transformers modules run on the CPU
    for norm in (False, True):
        cfg = transformers.Qwen3MoeConfig(hidden_size=32, num_experts=16, num_experts_per_tok=4, norm_topk_prob=norm)
        r = Qwen3MoeTopKRouter(cfg)
        torch.nn.init.normal_(r.weight)
        logits, scores, idx = r(x)
        w, ids = moe.route(logits.to(device), 4, norm_topk_prob=norm)
        assert torch.equal(ids.cpu(), idx)
        assert_close(w, scores, torch.float32)
    cfg = transformers.MixtralConfig(hidden_size=32, num_local_experts=8, num_experts_per_tok=2)
    r = MixtralTopKRouter(cfg)
    torch.nn.init.normal_(r.weight)
    logits, scores, idx = r(x)
    w, ids = moe.route(logits.to(device), 2, norm_topk_prob=True)
    assert torch.equal(ids.cpu(), idx)
    assert_close(w, scores, torch.float32)
    cfg = transformers.Lfm2MoeConfig(hidden_size=32, num_experts=16, num_experts_per_tok=4, use_expert_bias=True,
                                     routed_scaling_factor=1.7, norm_topk_prob=True)
    r = Lfm2MoeTopKRouter(cfg)
    torch.nn.init.normal_(r.weight)
    bias = torch.randn(16) * 0.3
    logits, scores, idx = r(x, bias)
    w, ids = moe.route(logits.to(device), 4, "sigmoid", True, bias.to(device), 1.7)
    assert torch.equal(ids.cpu(), idx)
    assert_close(w, scores, torch.float32)


# ---------------------------------------------------------------------------- fused_experts: decode

DECODE_CASES = [
    (1, 16, 8, torch.bfloat16),   # fewer pairs than experts: the grid runs over pairs
    (5, 8, 1, torch.float32),
    (5, 8, 4, torch.float16),
    (13, 8, 8, torch.float32),    # every expert active
    (64, 8, 2, torch.bfloat16),   # the largest decode tile (of the three kernels; the row kernels have none)
]


@pytest.mark.parametrize("T,E,k,dtype,p", [c + ("rows",) for c in DECODE_CASES[:4]]
                         + [c + ("decode",) for c in DECODE_CASES])
def test_decode(T, E, k, dtype, p, path, device):
    path(p)
    x = randn(T, H, dtype=dtype, device=device)
    gu, dn = make_experts(E, dtype, device)
    w, ids = routing(T, E, k, device)
    poison_workspaces(device, T, k, dtype)
    out = moe.fused_experts(x, ids, w, gu, dn)
    assert out.dtype == dtype and out.shape == (T, H)
    assert_close(out, experts64(x, ids, w, gu, dn))


@pytest.mark.parametrize("p", ["rows", "decode"])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
def test_decode_activations(act, p, path, device):
    path(p)
    x = randn(3, H, device=device)
    gu, dn = make_experts(8, torch.float32, device)
    w, ids = routing(3, 8, 2, device)
    assert_close(moe.fused_experts(x, ids, w, gu, dn, activation=act), experts64(x, ids, w, gu, dn, act))


def test_decode_plan_fills_h200(monkeypatch):
    """The three-kernel decode plan (Qwen3-30B-A3B: top-8 of 128 experts, H = 2048, I = 768) on a
    132-SM H200: both weight-streaming kernels run at least two programs per SM. (One to 8
    tokens take the row kernels by default.)"""
    monkeypatch.setattr(MK, "INTERPRET", False)
    monkeypatch.setattr(MK, "num_sms", lambda dev: 132)
    for T in (1, 4):
        p = MK.decode_plan(T, 8, 128, 2048, 768, torch.device("cuda"), 2)
        active = min(128, 8 * T)
        assert active * math.ceil(768 / p.block_i) >= 264 and active * math.ceil(2048 / p.block_n) >= 264
        assert p.by_pair == (8 * T < 128) and p.block_t == 16
    p = MK.decode_plan(64, 8, 128, 2048, 768, torch.device("cuda"), 2)
    assert p.block_t == 64 and not p.by_pair


def test_decode_limit_by_capture(monkeypatch):
    """The decode kernels take up to MAX_DECODE_TOKENS tokens while a CUDA graph is captured (GPU
    time counts), MAX_DECODE_TOKENS_EAGER otherwise (host time counts); the grouped path more."""
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert moe._decode_max(cuda) == moe.MAX_DECODE_TOKENS
    assert moe._decode_max(torch.device("cpu")) == moe.MAX_DECODE_TOKENS_EAGER  # nothing captured there
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert moe._decode_max(cuda) == moe.MAX_DECODE_TOKENS_EAGER > moe.MAX_DECODE_TOKENS
    calls = []
    monkeypatch.setattr(moe, "_launch_decode", lambda *a: calls.append("decode") or a[0])
    monkeypatch.setattr(moe, "_launch_prefill", lambda *a: calls.append("grouped") or a[0])
    monkeypatch.setattr(moe, "use_triton", lambda t: True)
    gu, dn = make_experts(8, torch.float32, "cpu")
    for T in (moe.MAX_DECODE_TOKENS_EAGER, moe.MAX_DECODE_TOKENS_EAGER + 1):
        w, ids = routing(T, 8, 2, "cpu")
        moe._fused_experts_op(randn(T, H), ids, w, gu, dn, None, None, None, None, 0, False, 1.0, 7.0)
    assert calls == ["decode", "grouped"]


# ---------------------------------------------------------------------------- fused_experts: prefill

@pytest.mark.parametrize("T,k,dtype", [(80, 2, torch.bfloat16), (100, 1, torch.float32)])
def test_prefill(T, k, dtype, device):
    E = 8
    x = randn(T, H, dtype=dtype, device=device)
    gu, dn = make_experts(E, dtype, device)
    w, ids = routing(T, E, k, device)
    out = moe.fused_experts(x, ids, w, gu, dn)
    assert out.dtype == dtype and out.shape == (T, H)
    assert_close(out, experts64(x, ids, w, gu, dn))


@pytest.mark.parametrize("T,k,E", [(1, 1, 8), (37, 2, 8), (150, 7, 128), (53, 4, 257)])
def test_align_sorts_pairs_by_expert(T, k, E, monkeypatch, device):
    """The one-program sort of the prefill's (token, slot) pairs equals a stable torch.sort
    (ids out of range last), including ties, empty experts and a pair count that is not a
    power of two; above ALIGN_MAX_PAIRS the torch path gives the same."""
    g = torch.Generator().manual_seed(T * 100 + E)
    ids = torch.randint(-1, E + 2, (T, k), generator=g).to(device)  # some ids out of range
    ids[: T // 2, 0] = E // 3  # many ties
    if k == 1:  # a (T, 1) view of a wider tensor: flattened with a stride
        ids = torch.cat([ids, ids + 1, ids], 1)[:, 1:2]
    ids[-1, -1] = 2 ** 32 + 1  # out of range, but 1 in the low 32 bits
    flat = ids.reshape(-1).cpu()
    key = torch.where((flat >= 0) & (flat < E), flat, E)
    order = torch.sort(key, stable=True).indices
    want_offs = torch.tensor([(key <= e).sum().item() for e in range(E)])
    want_pos = torch.empty_like(order)
    want_pos[order] = torch.arange(order.numel())
    for limit in (moe.ALIGN_MAX_PAIRS, 0):
        monkeypatch.setattr(moe, "ALIGN_MAX_PAIRS", limit)
        offs, src, pos = moe._align(ids, E)
        assert torch.equal(offs.cpu().long(), want_offs)
        assert torch.equal(src.cpu().long(), order // k)
        assert torch.equal(pos.cpu().long(), want_pos)


def test_prefill_chunks_and_decode_tiles(monkeypatch, path, device):
    """Prefill in several rounds (PREFILL_CHUNK), and the decode kernels over several 64-token
    tiles (the path taken where grouped_mm is unavailable) give the same result."""
    T, E, k = 150, 8, 2
    x = randn(T, H, dtype=torch.float16, device=device)
    gu, dn = make_experts(E, torch.float16, device)
    w, ids = routing(T, E, k, device)
    ref = experts64(x, ids, w, gu, dn)
    monkeypatch.setattr(moe, "PREFILL_CHUNK", 64)
    assert_close(moe.fused_experts(x, ids, w, gu, dn), ref)
    path("decode")
    poison_workspaces(device, T, k, torch.float16)
    assert_close(moe.fused_experts(x, ids, w, gu, dn), ref)


@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
def test_nan_stays_in_its_token(p, path, device):
    """A NaN in one token's activations makes that token's output NaN and no other."""
    path(p)
    T, E, k = 6, 8, 2
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    x[2, 5] = float("nan")
    gu, dn = make_experts(E, torch.bfloat16, device)
    w, ids = routing(T, E, k, device)
    out = moe.fused_experts(x, ids, w, gu, dn)
    assert bool(out[2].isnan().all()) and not bool(out[[0, 1, 3, 4, 5]].isnan().any())
    assert_close(out, experts64(x, ids, w, gu, dn))


def test_no_tokens(device):
    gu, dn = make_experts(8, torch.float32, device)
    out = moe.fused_experts(randn(0, H, device=device), torch.zeros(0, 2, dtype=torch.int64, device=device),
                            torch.zeros(0, 2, device=device), gu, dn)
    assert out.shape == (0, H)
    w, ids = moe.route(randn(0, 8, device=device), 2)
    assert w.shape == ids.shape == (0, 2)


@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
def test_empty_and_crowded_experts(p, path, device):
    """All tokens on expert 3 (k = 1), then every token on experts 5 and 3 (the others empty)."""
    path(p)
    T, E = 9, 8
    x = randn(T, H, device=device)
    gu, dn = make_experts(E, torch.float32, device)
    w = torch.rand(T, 2, device=device) + 0.1
    ids = torch.tensor([[3, 5]] * T, device=device)
    for kk in (1, 2):
        i, ww = ids[:, :kk], w[:, :kk]
        assert_close(moe.fused_experts(x, i, ww, gu, dn), experts64(x, i, ww, gu, dn))


@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
def test_strided_views(p, path, device):
    """Weights stored (E, H, 2I) / (E, I, H) and passed as transposed views; strided activations,
    ids and weights; int32 ids; bfloat16 weights."""
    path(p)
    T, E, k = 6, 8, 3
    x = noncontig(randn(T, H, dtype=torch.bfloat16, device=device))
    gu_t = randn(E, H, 2 * NI, dtype=torch.bfloat16, device=device, scale=H ** -0.5)
    dn_t = randn(E, NI, H, dtype=torch.bfloat16, device=device, scale=NI ** -0.5)
    w, ids = routing(T, E, k, device)
    ids32 = noncontig(ids.int())
    wb = noncontig(w.bfloat16())
    gu, dn = gu_t.transpose(1, 2), dn_t.transpose(1, 2)
    assert_close(moe.fused_experts(x, ids32, wb, gu, dn), experts64(x, ids32, wb, gu, dn))


# ---------------------------------------------------------------------------- gpt-oss, FP8

@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
def test_gpt_oss(p, path, device):
    """Interleaved gate/up, biases, the clamped activation (gate/up values reach the limit)."""
    path(p)
    T, E, k = 7, 8, 4
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    gu_t = randn(E, H, 2 * NI, dtype=torch.bfloat16, device=device, scale=6 * H ** -0.5)
    dn_t = randn(E, NI, H, dtype=torch.bfloat16, device=device, scale=NI ** -0.5)
    gb = randn(E, 2 * NI, dtype=torch.bfloat16, device=device)
    db = randn(E, H, dtype=torch.bfloat16, device=device)
    w, ids = routing(T, E, k, device)
    gu, dn = gu_t.transpose(1, 2), dn_t.transpose(1, 2)
    out = moe.fused_experts(x, ids, w, gu, dn, activation="gpt_oss", interleaved=True, gate_up_bias=gb,
                            down_bias=db)
    assert float((x.double() @ gu_t[0].double()).abs().max()) > 7  # the clamp is exercised
    assert_close(out, experts64(x, ids, w, gu, dn, "gpt_oss", gb, db, interleaved=True))


def test_matches_transformers_modules(device):
    """Same weights, same routing: Qwen3MoeExperts and GptOssExperts (float32)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    T, E, k = 5, 8, 2
    x = randn(T, H, device="cpu")  # the transformers modules run on the CPU
    w, ids = routing(T, E, k, "cpu")
    cfg = transformers.Qwen3MoeConfig(hidden_size=H, moe_intermediate_size=NI, num_experts=E, num_experts_per_tok=k)
    m = Qwen3MoeExperts(cfg)
    with torch.no_grad():
        m.gate_up_proj.copy_(torch.randn(m.gate_up_proj.shape) * H ** -0.5)
        m.down_proj.copy_(torch.randn(m.down_proj.shape) * NI ** -0.5)
        ref = m(x, ids, w)
    d = device
    out = moe.fused_experts(x.to(d), ids.to(d), w.to(d), m.gate_up_proj.detach().to(d), m.down_proj.detach().to(d))
    assert_close(out, ref, tol=1e-5)
    cfg = transformers.GptOssConfig(hidden_size=H, intermediate_size=NI, num_local_experts=E, num_experts_per_tok=k)
    m = GptOssExperts(cfg)
    with torch.no_grad():
        for p, s in ((m.gate_up_proj, 6 * H ** -0.5), (m.down_proj, NI ** -0.5), (m.gate_up_proj_bias, 1.0),
                     (m.down_proj_bias, 1.0)):
            p.copy_(torch.randn(p.shape) * s)
        ref = m(x, ids, w)
    t = {n: p.detach().to(d) for n, p in m.named_parameters()}
    out = moe.fused_experts(x.to(d), ids.to(d), w.to(d), t["gate_up_proj"].transpose(1, 2),
                            t["down_proj"].transpose(1, 2), activation="gpt_oss", interleaved=True,
                            gate_up_bias=t["gate_up_proj_bias"], down_bias=t["down_proj_bias"])
    assert_close(out, ref, tol=1e-5)


def _fp8_native_ok(device) -> bool:
    return device.type == "cuda" and not backend.INTERPRET and torch.cuda.get_device_capability(device) >= (8, 9)


@needs_fp8
@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
@pytest.mark.parametrize("decode", ["bits", "native"])
def test_fp8_experts(p, decode, path, monkeypatch, device):
    """fp8 decoded from its bits (everywhere) or converted by the hardware (NVIDIA 8.9+)."""
    if decode == "native" and not _fp8_native_ok(device):
        pytest.skip("native fp8 loads need an NVIDIA GPU of compute capability 8.9+ (not the interpreter)")
    path(p)
    monkeypatch.setattr(moe, "FP8_DECODE", decode)
    monkeypatch.setattr(GM, "FP8_DECODE", decode)
    T, E, k = 5, 8, 2
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    gu, dn = make_experts(E, torch.bfloat16, device)
    q1, s1 = moe.quantize_experts(gu)
    q2, s2 = moe.quantize_experts(dn)
    assert q1.dtype == torch.float8_e4m3fn and s1.shape == (E, 2 * NI) and s2.shape == (E, H)
    w, ids = routing(T, E, k, device)
    out = moe.fused_experts(x, ids, w, q1, q2, gate_up_scale=s1, down_scale=s2)
    assert_close(out, experts64(x, ids, w, q1, q2, gu_s=s1, d_s=s2))  # exact dequantisation
    # fp8 gate/up only, 16-bit down projection
    out = moe.fused_experts(x, ids, w, q1, dn, gate_up_scale=s1)
    assert_close(out, experts64(x, ids, w, q1, dn, gu_s=s1))


@pytest.mark.parametrize("i", [24, 20, 16])
@pytest.mark.parametrize("tail,slot_sum", [(True, 1), (True, 0), (False, 1), (False, 2), (False, 0)])
def test_rows_down_tail(i, tail, slot_sum, path, monkeypatch, device):
    """The down row kernel with I as two tiles a step (``DOWN_TAIL``: 24 = 16 + 8, 20 = 16 + 8
    with the last 4 columns masked; 16 a power of two: one tile) or as 16-wide steps with a
    masked last one; each step's products summed before their scale where I takes at most
    ``slot_sum`` steps (``DOWN_SLOT_SUM_STEPS``; 0: scaled one by one); fp8 with scales and bf16,
    float64 reference."""
    path("rows")
    monkeypatch.setattr(MK, "DOWN_TAIL", tail)
    monkeypatch.setattr(MK, "DOWN_SLOT_SUM_STEPS", slot_sum)
    if backend.INTERPRET:
        p = MK.rows_plan(2, i, 2)
        assert p.block_k2 == (8 if tail and i != 16 else 0)
        assert p.slot_sum == ((1 if tail or i == 16 else 2) <= slot_sum)
    T, E, k = 3, 8, 2
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    gu, dn = make_experts(E, torch.bfloat16, device, i=i)
    w, ids = routing(T, E, k, device)
    poison_workspaces(device, T, k, torch.bfloat16, i=i)
    assert_close(moe.fused_experts(x, ids, w, gu, dn), experts64(x, ids, w, gu, dn))
    if HAS_FP8:
        (gu, s1), (dn, s2) = moe.quantize_experts(gu), moe.quantize_experts(dn)
        out = moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=s1, down_scale=s2)
        assert_close(out, experts64(x, ids, w, gu, dn, gu_s=s1, d_s=s2))


@pytest.mark.parametrize("act", ["silu", "gelu"])
@pytest.mark.parametrize("row_sum", [True, False])
def test_rows_gate_up_row_sum(row_sum, act, path, monkeypatch, device):
    """The gate/up row kernel summing each step's products at once (``GATE_UP_ROW_SUM``) or
    keeping per-column partial sums; H = 40 in 16-wide steps (the last masked), bf16 and fp8 with
    scales, gpt-oss's interleaved rows with biases; float64 reference."""
    path("rows")
    monkeypatch.setattr(MK, "GATE_UP_ROW_SUM", (1, 2, 4) if row_sum else ())
    assert all(MK.rows_plan(2, NI, wb).row_sum == row_sum for wb in (1, 2))  # the knob reaches both plans
    T, E, k = 3, 8, 2
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    gu, dn = make_experts(E, torch.bfloat16, device)
    w, ids = routing(T, E, k, device)
    poison_workspaces(device, T, k, torch.bfloat16)
    assert_close(moe.fused_experts(x, ids, w, gu, dn, activation=act), experts64(x, ids, w, gu, dn, act))
    gu_b = randn(E, 2 * NI, dtype=torch.bfloat16, device=device)
    out = moe.fused_experts(x, ids, w, gu, dn, gate_up_bias=gu_b, interleaved=True, activation=act)
    assert_close(out, experts64(x, ids, w, gu, dn, act, gu_b=gu_b, interleaved=True))
    if HAS_FP8:
        (gu, s1), (dn, s2) = moe.quantize_experts(gu), moe.quantize_experts(dn)
        out = moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=s1, down_scale=s2, activation=act)
        assert_close(out, experts64(x, ids, w, gu, dn, act, gu_s=s1, d_s=s2))


@pytest.mark.parametrize("fp8,prescale", [(False, True), (True, True), (True, False)])
def test_decode_widest_tiles(fp8, prescale, path, monkeypatch, device):
    """64 tokens on the three decode kernels with the plan's widest blocks (one SM pretended,
    so the plan needs few programs: 64 token rows x 64 I columns, 128 outputs a program on a
    GPU), fp8 weights through float16 (S16) too, with x scaled to float16 once per call
    (``_prescale_kernel``) or in every tile; I = 80 leaves a masked column tail. Rows of x far
    apart in magnitude (one scale per row)."""
    path("decode")
    monkeypatch.setattr(MK, "num_sms", lambda dev: 1)
    monkeypatch.setattr(moe, "PRESCALE_MIN_BLOCK_T", 64 if prescale else 128)
    if not backend.INTERPRET and device.type == "cuda":
        p = MK.decode_plan(64, 2, 8, H, 80, device, 1 if fp8 else 2)
        assert (p.block_t, p.block_i) == (64, 64)
    T, E, k = 64, 8, 2
    x = randn(T, H, dtype=torch.bfloat16, device=device)
    x = (x * torch.logspace(-6, 6, T, base=2.0, device=device)[:, None]).to(torch.bfloat16)
    gu, dn = make_experts(E, torch.bfloat16, device, i=80)
    w, ids = routing(T, E, k, device)
    if fp8:
        (gu, s1), (dn, s2) = moe.quantize_experts(gu), moe.quantize_experts(dn)
        out = moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=s1, down_scale=s2)
        assert_close(out, experts64(x, ids, w, gu, dn, gu_s=s1, d_s=s2))
    else:
        assert_close(moe.fused_experts(x, ids, w, gu, dn), experts64(x, ids, w, gu, dn))


# ---------------------------------------------------------------------------- bad ids, errors

@pytest.mark.parametrize("p", ["rows", "decode", "prefill"])
def test_ids_out_of_range(p, path, device):
    """Ids outside [0, E) (transformers masks slots with id E) and repeated ids never crash:
    the former add nothing, the latter count once per slot."""
    path(p)
    T, E, k = 4, 8, 3
    x = randn(T, H, device=device)
    gu, dn = make_experts(E, torch.float32, device)
    w, ids = routing(T, E, k, device)
    ids[0, 0], ids[1, 2], ids[2, 1], ids[3, 1] = -1, E, 1 << 40, ids[3, 0]
    for i in (ids, ids.clamp(-5, 100).int()):
        assert_close(moe.fused_experts(x, i, w, gu, dn), experts64(x, i, w, gu, dn))
    with pytest.raises(ValueError, match="topk_ids"):
        moe.fused_experts(x, ids, w, gu, dn, validate=True)
    moe.fused_experts(x, ids.clamp(0, E - 1), w, gu, dn, validate=True)


def test_errors(device):
    T, E, k = 3, 4, 2
    x = randn(T, H, device=device)
    gu, dn = make_experts(E, torch.float32, device)
    w, ids = routing(T, E, k, device)
    fe = moe.fused_experts
    with pytest.raises(TypeError, match="topk_ids"):
        fe(x, ids.float(), w, gu, dn)
    with pytest.raises(ValueError, match="topk_ids"):
        fe(x, ids[:2], w, gu, dn)
    with pytest.raises(ValueError, match="topk_weights"):
        fe(x, ids, w[:, :1], gu, dn)
    with pytest.raises(ValueError, match="gate_up_proj"):
        fe(x, ids, w, gu[:, :, :-1], dn)
    with pytest.raises(ValueError, match="gate_up_proj"):
        fe(x, ids, w, gu[:, :-1], dn)
    with pytest.raises(ValueError, match="down_proj"):
        fe(x, ids, w, gu, dn[:, :, :-1])
    with pytest.raises(ValueError, match="down_proj"):
        fe(x, ids, w, gu, dn.transpose(1, 2))
    with pytest.raises(TypeError, match="gate_up_proj"):
        fe(x, ids, w, gu.double(), dn)
    with pytest.raises(TypeError, match="hidden_states"):
        fe(x.int(), ids, w, gu, dn)
    with pytest.raises(ValueError, match="hidden_states"):
        fe(x[None], ids, w, gu, dn)
    with pytest.raises(NotImplementedError, match="silu"):
        fe(x, ids, w, gu, dn, activation="relu2")
    with pytest.raises(ValueError, match="gate_up_bias"):
        fe(x, ids, w, gu, dn, gate_up_bias=torch.zeros(E, H, device=device))
    with pytest.raises(TypeError, match="gate_up_scale"):
        fe(x, ids, w, gu, dn, gate_up_scale=torch.ones(E, 2 * NI, device=device))
    if HAS_FP8:
        q, s = moe.quantize_experts(gu)
        with pytest.raises(TypeError, match="gate_up_scale"):
            fe(x, ids, w, q, dn)
        with pytest.raises(ValueError, match="gate_up_scale"):
            fe(x, ids, w, q, dn, gate_up_scale=s[:, :-1])
        with pytest.raises(TypeError, match="gate_up_scale"):
            fe(x, ids, w, q, dn, gate_up_scale=s.double())
    logits = randn(T, E, device=device)
    with pytest.raises(ValueError, match="top_k"):
        moe.route(logits, E + 1)
    with pytest.raises(ValueError, match="scoring"):
        moe.route(logits, 2, "relu")
    with pytest.raises(ValueError, match="expert_bias"):
        moe.route(logits, 2, "sigmoid", expert_bias=torch.zeros(E + 1, device=device))
    with pytest.raises(TypeError, match="router_logits"):
        moe.route(logits.int(), 2)


# ---------------------------------------------------------------------------- compile, fallback

def test_compile_fullgraph(device):
    E, k = 8, 2
    gu, dn = make_experts(E, torch.float32, device)

    def f(x, logits):
        w, ids = moe.route(logits, k, norm_topk_prob=True)
        return moe.fused_experts(x, ids, w, gu, dn) * 2

    x, logits = randn(3, H, device=device), randn(3, E, device=device)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x, logits)
    assert_close(out, f(x, logits))


def test_reference_paths(monkeypatch, device):
    """float64 inputs and a disabled Triton take the PyTorch paths, with the same results."""
    T, E, k = 4, 8, 2
    x = randn(T, H, dtype=torch.float64, device=device)
    gu, dn = make_experts(E, torch.float64, device)
    logits = randn(T, E, dtype=torch.float64, device=device)
    w, ids = moe.route(logits, k, norm_topk_prob=True)
    rw, rids = route64(logits, k, norm=True)
    assert torch.equal(ids.cpu(), rids.cpu()) and w.dtype == torch.float32
    assert_close(moe.fused_experts(x, ids, w, gu, dn), experts64(x, ids, w, gu, dn))
    monkeypatch.setattr(backend, "DISABLED", True)
    x32, gu32, dn32 = x.float(), gu.float(), dn.float()
    w2, ids2 = moe.route(logits.float(), k, norm_topk_prob=True)
    assert torch.equal(ids2, ids)
    ids2[0, 0] = E  # masked slot
    assert_close(moe.fused_experts(x32, ids2, w2, gu32, dn32), experts64(x32, ids2, w2, gu32, dn32))
