"""The gated delta rule against a float64 token-by-token recurrence written here, and against
transformers' own PyTorch functions (Qwen3.5-MoE) as a second, independent check."""
import pytest
import torch
import torch.nn.functional as F

from fastpath.ops.gated_delta import (chunk_gated_delta_rule, gated_delta_rule_step,
                                      recurrent_gated_delta_rule, reference_gated_delta_rule)
from tests.conftest import DEVICE, randn
from tests.tolerances import assert_close

hf = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")

# Small shapes for the interpreter: GQA (2 value heads per key head), dims that are not powers
# of two, Dv over two blocks of the interpreter's 16.
B, HK, HV, DK, DV = 2, 1, 2, 20, 24


def f64_rule(q, k, v, g, beta, s0=None, scale=None, l2=True):
    """The recurrence in float64, one token at a time, written out independently of fastpath."""
    q, k, v, g, beta = (x.double().cpu() for x in (q, k, v, g, beta))
    Bq, T, hk, dk = q.shape
    hv, dv = v.shape[2:]
    S = torch.zeros(Bq, hv, dk, dv, dtype=torch.float64) if s0 is None else s0.double().cpu().clone()
    out = torch.zeros(Bq, T, hv, dv, dtype=torch.float64)
    for t in range(T):
        for h in range(hv):
            qt, kt = q[:, t, h // (hv // hk)], k[:, t, h // (hv // hk)]
            if l2:
                qt = qt / torch.sqrt((qt * qt).sum(-1, keepdim=True) + 1e-6)
                kt = kt / torch.sqrt((kt * kt).sum(-1, keepdim=True) + 1e-6)
            qt = qt * (dk ** -0.5 if scale is None else scale)
            Sh = S[:, h] * torch.exp(g[:, t, h])[:, None, None]
            delta = beta[:, t, h, None] * (v[:, t, h] - torch.einsum("bk,bkv->bv", kt, Sh))
            Sh = Sh + kt[:, :, None] * delta[:, None, :]
            out[:, t, h] = torch.einsum("bk,bkv->bv", qt, Sh)
            S[:, h] = Sh
    return out, S


def inputs(T, dtype=torch.float32, b=B, hk=HK, hv=HV, dk=DK, dv=DV):
    q, k = randn(b, T, hk, dk, dtype=dtype), randn(b, T, hk, dk, dtype=dtype)
    v = randn(b, T, hv, dv, dtype=dtype)
    g = F.logsigmoid(2 * torch.randn(b, T, hv) + 2).to(DEVICE)  # log-decays in (-inf, 0), most near 0
    beta = torch.sigmoid(torch.randn(b, T, hv)).to(dtype=dtype, device=DEVICE)
    return q, k, v, g, beta


def state0(b=B, hv=HV, dk=DK, dv=DV):
    return randn(b, hv, dk, dv, scale=0.3)


@pytest.mark.parametrize("T", [1, 7, 67, 130])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunk_against_float64_and_transformers(T, with_state):
    q, k, v, g, beta = inputs(T)
    s0 = state0() if with_state else None
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0, chunk_size=16)
    ro, rs = f64_rule(q, k, v, g, beta, s0)
    assert o.dtype == torch.float32 and s.dtype == torch.float32
    assert_close(o, ro)
    assert_close(s, rs)
    ho, hs = hf.torch_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=16, initial_state=s0,
                                             output_final_state=True, use_qk_l2norm_in_kernel=True)
    assert_close(o, ho)
    assert_close(s, hs)


@pytest.mark.parametrize("chunk_size", [None, 32, 64])
def test_chunk_sizes_bf16_strided_views(chunk_size):
    """bf16 q/k/v as the model has them: views into one mixed projection, here transposed
    (no unit stride anywhere), with a chunk that is partly padding."""
    T = 75
    mixed = randn(B, 2 * HK * DK + HV * DV, T, dtype=torch.bfloat16).transpose(1, 2)
    q = mixed[..., :HK * DK].view(B, T, HK, DK)
    k = mixed[..., HK * DK:2 * HK * DK].view(B, T, HK, DK)
    v = mixed[..., 2 * HK * DK:].view(B, T, HV, DV)
    _, _, _, g, beta = inputs(T)
    g = g.transpose(0, 1).contiguous().transpose(0, 1)  # strided g as well
    s0 = state0()
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0.to(torch.bfloat16), chunk_size=chunk_size)
    ro, rs = f64_rule(q, k, v, g, beta, s0.to(torch.bfloat16))
    assert o.dtype == torch.bfloat16 and o.is_contiguous()
    assert_close(o, ro, dtype=torch.bfloat16)
    assert_close(s, rs, dtype=torch.float32, tol=1e-5)


def test_chunk_correlated_keys_and_strong_writes():
    """Nearly equal keys with beta ~ 1 and no decay: the worst case for solving I + A."""
    T = 64
    q, k, v, g, beta = inputs(T)
    k = randn(B, 1, HK, DK) + 0.05 * k
    g = torch.zeros_like(g) - 1e-3
    beta = torch.full_like(beta, 0.99)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64)
    ro, rs = f64_rule(q, k, v, g, beta)
    assert_close(o, ro, tol=1e-5)
    assert_close(s, rs, tol=1e-5)


def test_no_l2norm_custom_scale_and_no_final_state():
    T = 19
    q, k, v, g, beta = inputs(T, hk=2, hv=2)
    k = k * 0.2  # without the norm, keys of moderate length keep the recurrence stable
    for fn in (chunk_gated_delta_rule, recurrent_gated_delta_rule):
        o, s = fn(q, k, v, g, beta, scale=0.3, use_qk_l2norm=False, output_final_state=False)
        assert s is None
        assert_close(o, f64_rule(q, k, v, g, beta, scale=0.3, l2=False)[0])


@pytest.mark.parametrize("T", [1, 7, 33])
def test_recurrent_against_float64_and_transformers(T):
    q, k, v, g, beta = inputs(T)
    s0 = state0()
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    ro, rs = f64_rule(q, k, v, g, beta, s0)
    assert_close(o, ro)
    assert_close(s, rs)
    ho, hs = hf.torch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0, output_final_state=True,
                                                 use_qk_l2norm_in_kernel=True)
    assert_close(o, ho)
    assert_close(s, hs)


def test_prefill_in_pieces_then_decode_equals_one_pass():
    T1, T2, steps = 23, 41, 3
    q, k, v, g, beta = inputs(T1 + T2 + steps)
    s0 = state0()
    o_all, s_all = chunk_gated_delta_rule(q[:, :T1 + T2], k[:, :T1 + T2], v[:, :T1 + T2], g[:, :T1 + T2],
                                          beta[:, :T1 + T2], initial_state=s0, chunk_size=16)
    o1, s1 = chunk_gated_delta_rule(q[:, :T1], k[:, :T1], v[:, :T1], g[:, :T1], beta[:, :T1],
                                    initial_state=s0, chunk_size=16)
    sl = slice(T1, T1 + T2)
    o2, s2 = chunk_gated_delta_rule(q[:, sl], k[:, sl], v[:, sl], g[:, sl], beta[:, sl], initial_state=s1,
                                    chunk_size=32)
    assert_close(torch.cat([o1, o2], 1), o_all)
    assert_close(s2, s_all)
    state = s2.clone()
    outs = [gated_delta_rule_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1],
                                  beta[:, t:t + 1], state) for t in range(T1 + T2, T1 + T2 + steps)]
    ro, rs = f64_rule(q, k, v, g, beta, s0)
    assert outs[0].shape == (B, 1, HV, DV)
    assert_close(torch.cat([o1, o2] + outs, 1), ro)
    assert_close(state, rs)


def test_step_in_place_strided_and_gqa():
    """3-D form, q/k/v strided views, 4 value heads per key head, state a strided view."""
    b, hk, hv = 3, 2, 8
    mixed = randn(b, 2 * hk * DK + hv * DV)
    q = mixed[:, :hk * DK].view(b, hk, DK)
    k = mixed[:, hk * DK:2 * hk * DK].view(b, hk, DK)
    v = mixed[:, 2 * hk * DK:].view(b, hv, DV)
    _, _, _, g, beta = inputs(1, b=b, hv=hv)
    g, beta = g[:, 0], beta[:, 0]
    s0 = state0(b, hv)
    buf = torch.full((b, hv, DV, DK), float("nan"), device=DEVICE)
    state = buf.transpose(2, 3)  # (b, hv, DK, DV) with a transposed inner layout
    state.copy_(s0)
    ptr = state.data_ptr()
    o = gated_delta_rule_step(q, k, v, g, beta, state)
    ro, rs = f64_rule(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], s0)
    assert o.shape == (b, hv, DV) and state.data_ptr() == ptr
    assert_close(o, ro[:, 0])
    assert_close(state, rs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_step_with_raw_gates(dtype):
    """A_log / dt_bias: the kernel computes g = -exp(A_log) softplus(a + dt_bias) and
    beta = sigmoid(b) from the raw projections itself (softplus across its thresholds)."""
    b, hk, hv = 2, 1, 4
    q, k = randn(b, hk, DK, dtype=dtype), randn(b, hk, DK, dtype=dtype)
    v = randn(b, hv, DV, dtype=dtype)
    a = torch.tensor([[-30.0, -16.0, 0.3, 25.0], [-2.0, 1.5, 19.0, -14.0]]).to(dtype=dtype, device=DEVICE)
    braw = randn(b, hv, dtype=dtype, scale=2.0)
    a_log, dt_bias = randn(hv, scale=0.5), randn(hv, scale=0.5)
    s0 = state0(b, hv)
    state = s0.clone()
    o = gated_delta_rule_step(q, k, v, a, braw, state, A_log=a_log, dt_bias=dt_bias)
    x = a.double().cpu() + dt_bias.double().cpu()
    g = -torch.exp(a_log.double().cpu()) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    beta = torch.sigmoid(braw.double().cpu())
    ro, rs = f64_rule(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], s0)
    tol = None if dtype == torch.float32 else 2e-2
    assert_close(o, ro[:, 0], dtype, tol=tol)
    assert_close(state, rs, torch.float32, tol=1e-5)
    with pytest.raises(ValueError, match="A_log"):
        gated_delta_rule_step(q, k, v, a, braw, s0.clone(), A_log=a_log)
    with pytest.raises(ValueError, match="dt_bias"):
        gated_delta_rule_step(q, k, v, a, braw, s0.clone(), A_log=a_log, dt_bias=dt_bias[:2])


@pytest.mark.parametrize("T,chunk_size", [(37, 16), (37, 32), (5, 0)])  # 0: recurrent_gated_delta_rule
def test_sequence_with_raw_gates(T, chunk_size):
    """A_log / dt_bias over a sequence (prefill): the gates from the raw projections a, b in
    the kernels, against float64; T = 37 leaves a padded last chunk (its tokens must not decay
    the state)."""
    q, k, v, _, _ = inputs(T, dtype=torch.bfloat16)
    a = randn(B, T, HV, dtype=torch.bfloat16, scale=3.0)
    braw = randn(B, T, HV, dtype=torch.bfloat16, scale=2.0)
    a_log, dt_bias, s0 = randn(HV, scale=0.5), randn(HV, scale=0.5), state0()
    kw = dict(initial_state=s0, A_log=a_log, dt_bias=dt_bias)
    if chunk_size:
        o, s = chunk_gated_delta_rule(q, k, v, a, braw, chunk_size=chunk_size, **kw)
    else:
        o, s = recurrent_gated_delta_rule(q, k, v, a, braw, **kw)
    x = a.double().cpu() + dt_bias.double().cpu()
    g = -torch.exp(a_log.double().cpu()) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    ro, rs = f64_rule(q, k, v, g, torch.sigmoid(braw.double().cpu()), s0)
    assert_close(o, ro, torch.bfloat16)
    assert_close(s, rs, torch.float32, tol=1e-5)
    with pytest.raises(ValueError, match="A_log"):
        chunk_gated_delta_rule(q, k, v, a, braw, A_log=a_log)


def test_step_bf16_and_state_pool_with_padding():
    b, n_slots = 3, 5
    q, k, v, g, beta = (x[:, 0] for x in inputs(1, dtype=torch.bfloat16, b=b))
    pool = randn(n_slots, HV, DK, DV, scale=0.3)
    before = pool.clone()
    idx = torch.tensor([3, -1, 0], device=DEVICE)
    o = gated_delta_rule_step(q, k, v, g, beta, pool, state_indices=idx)
    assert o.dtype == torch.bfloat16
    for row, slot in ((0, 3), (2, 0)):
        ro, rs = f64_rule(q[row:row + 1, None], k[row:row + 1, None], v[row:row + 1, None],
                          g[row:row + 1, None], beta[row:row + 1, None], before[slot:slot + 1])
        assert_close(o[row], ro[0, 0], dtype=torch.bfloat16)
        assert_close(pool[slot], rs[0], tol=1e-5)
    assert torch.equal(o[1], torch.zeros_like(o[1]))  # padding: zeros, no slot touched
    for slot in (1, 2, 4):
        assert torch.equal(pool[slot], before[slot])


def test_batches_past_the_grid_limit_in_slices(monkeypatch):
    """Batch x value heads past the grid's second dimension (65535 programs) launch in batch
    slices: the limit lowered to HV, so every row of a batch of 3 is its own launch; the
    sequence forms, the in-place step and a state pool (shared by the slices, not sliced)."""
    from fastpath.ops import gated_delta as G
    monkeypatch.setattr(G, "GRID_Y_MAX", HV)
    assert len(G._batch_slices(3, HV)) == 3
    q, k, v, g, beta = inputs(7, b=3)
    s0 = state0(b=3)
    ro, rs = f64_rule(q, k, v, g, beta, s0)
    for fn in (chunk_gated_delta_rule, recurrent_gated_delta_rule):
        o, s = fn(q, k, v, g, beta, initial_state=s0)
        assert_close(o, ro)
        assert_close(s, rs)
    pool = randn(5, HV, DK, DV, scale=0.3)
    before = pool.clone()
    idx = torch.tensor([4, -1, 1], device=DEVICE)
    o = gated_delta_rule_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], pool, state_indices=idx)
    for row, slot in ((0, 4), (2, 1)):
        ro, rs = f64_rule(q[row:row + 1, :1], k[row:row + 1, :1], v[row:row + 1, :1], g[row:row + 1, :1],
                          beta[row:row + 1, :1], before[slot:slot + 1])
        assert_close(o[row], ro[0, 0])
        assert_close(pool[slot], rs[0], tol=1e-5)
    assert torch.equal(pool[[0, 2, 3]], before[[0, 2, 3]])


def test_reference_path_matches_float64():
    """The PyTorch path (CPU without the interpreter, other devices) on float64 input."""
    q, k, v, g, beta = (x.double() for x in inputs(9))
    s0 = state0().double()
    o, s = reference_gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    ro, rs = f64_rule(q, k, v, g, beta, s0)
    assert_close(o, ro, dtype=torch.float64, tol=1e-12)
    assert_close(s, rs, dtype=torch.float64, tol=1e-12)
    o2, s2 = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0)  # float64: reference path
    assert o2.dtype == torch.float64 and s2.dtype == torch.float32
    assert_close(o2, ro, dtype=torch.float64, tol=1e-12)
    pool = torch.stack([s0[1], s0[0], s0[0]]).float()  # the step's PyTorch path, with slots
    idx = torch.tensor([1, -1], device=DEVICE)
    o3 = gated_delta_rule_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], pool, state_indices=idx)
    r3, rs3 = f64_rule(q[:1, :1], k[:1, :1], v[:1, :1], g[:1, :1], beta[:1, :1], s0[:1].float())
    assert_close(o3[0], r3[0, 0], dtype=torch.float32)
    assert_close(pool[1], rs3[0])
    assert torch.equal(o3[1], torch.zeros_like(o3[1])) and torch.equal(pool[0], s0[1].float())


def test_empty_sequence_keeps_state():
    q, k, v, g, beta = inputs(0)
    s0 = state0()
    for fn in (chunk_gated_delta_rule, recurrent_gated_delta_rule):
        o, s = fn(q, k, v, g, beta, initial_state=s0)
        assert o.shape == (B, 0, HV, DV) and torch.equal(s, s0)
        _, s = fn(q, k, v, g, beta)
        assert torch.equal(s, torch.zeros_like(s0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-graph capture needs a CUDA GPU")
def test_step_captured_in_cuda_graph():
    q, k, v, g, beta = (x[:, 0] for x in inputs(1))
    state = state0()
    s0 = state.clone()
    gated_delta_rule_step(q, k, v, g, beta, state.clone())  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = gated_delta_rule_step(q, k, v, g, beta, state)
    state.copy_(s0)
    graph.replay()
    graph.replay()  # two tokens through the same captured step
    ro, rs = f64_rule(torch.stack([q, q], 1), torch.stack([k, k], 1), torch.stack([v, v], 1),
                      torch.stack([g, g], 1), torch.stack([beta, beta], 1), s0)
    assert_close(o, ro[:, 1])
    assert_close(state, rs)


def test_errors():
    q, k, v, g, beta = inputs(5)
    with pytest.raises(ValueError, match="k"):
        chunk_gated_delta_rule(q, k[:, :4], v, g, beta)
    q2 = randn(B, 5, 2, DK)
    with pytest.raises(ValueError, match="value heads .3. must be a multiple"):
        chunk_gated_delta_rule(q2, q2, v[:, :, :1].expand(B, 5, 3, DV), g, beta)
    with pytest.raises(ValueError, match="g"):
        chunk_gated_delta_rule(q, k, v, g[..., :1], beta)
    with pytest.raises(ValueError, match="initial_state"):
        chunk_gated_delta_rule(q, k, v, g, beta, initial_state=torch.zeros(B, HV, DV, DK))
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=48)
    with pytest.raises(ValueError, match="chunk_size"):  # the registered op called directly (K-8 dots)
        torch.ops.fastpath.chunk_gated_delta_rule(q, k, v, g, beta, None, 1.0, True, 8, None, None)
    with pytest.raises(TypeError, match="beta"):
        chunk_gated_delta_rule(q, k, v, g, beta.to(torch.int32))
    with pytest.raises(ValueError, match="q"):
        chunk_gated_delta_rule(q[0], k, v, g, beta)
    state = state0()
    q1, k1, v1, g1, b1 = (x[:, 0] for x in (q, k, v, g, beta))
    with pytest.raises(TypeError, match="state"):
        gated_delta_rule_step(q1, k1, v1, g1, b1, state.double())
    with pytest.raises(ValueError, match="state"):
        gated_delta_rule_step(q1, k1, v1, g1, b1, state[:1])
    with pytest.raises(ValueError, match="one token"):
        gated_delta_rule_step(q[:, :2], k[:, :2], v[:, :2], g[:, :2], beta[:, :2], state)
    with pytest.raises(TypeError, match="state_indices"):
        gated_delta_rule_step(q1, k1, v1, g1, b1, state, state_indices=torch.zeros(B))
    with pytest.raises(ValueError, match="state_indices"):
        gated_delta_rule_step(q1, k1, v1, g1, b1, state, state_indices=torch.zeros(B + 1, dtype=torch.int64))
