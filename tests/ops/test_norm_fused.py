"""A decoder layer's RMSNorm inside the kernel that reads its output: ``rms_norm_linear`` (the
matrix-vector kernel normalises its rows as it streams the weights), ``rms_norm_router`` (the
one-launch router) and ``rms_norm_moe`` (with the experts routing each token themselves),
against PyTorch's norm (transformers' roundings) followed by a float64 projection / routing.
Compiled on a GPU, interpreted on the CPU."""
import pytest
import torch

from fastpath.ops import linear as L
from fastpath.ops import matvec, moe
from fastpath.ops.fp8 import quantize_fp8
from fastpath.ops.linear import rms_norm_linear
from fastpath.ops.norm import reference_rms_norm
from tests.conftest import noncontig, randn
from tests.ops.test_moe import experts64, route64
from tests.tolerances import assert_close


def normed_ref(x, nw, eps, residual, zero_centered):
    """``(x_normalised, h)`` of PyTorch's norm (``h``: x + residual, or x)."""
    out = reference_rms_norm(x, nw, eps, residual=residual, zero_centered=zero_centered)
    return out if residual is not None else (out, x)


def project64(xn, w, scale=None, swiglu=False):
    wd = w.double() if scale is None else w.double() * scale.double().reshape(-1, 1)
    y = xn.double() @ wd.t()
    if not swiglu:
        return y
    g, u = y.to(xn.dtype).double().chunk(2, -1)  # the gate / up sums as the separate ops round them
    return (torch.nn.functional.silu(g).to(xn.dtype).double() * u)


FLOATS = [torch.float32, torch.float16, torch.bfloat16]
RESIDUAL = [(True, False), (False, True)]  # (residual, zero_centered)
#: (defer, w_first): the rstd deferred to the sums; the row read for it first; or after the first weight tile
NORM_MODES = [(True, False), (False, False), (False, True)]
#: One row (the fused kernel): every mode, size and residual form, the dtypes in turn (each mode, size
#: and residual form meets all three). More rows (the norm, then ``linear``; the modes do not apply):
#: every size, residual form and dtype.
LINEAR_CASES = ([(FLOATS[(m + i + j) % 3], *size, *RESIDUAL[j], *NORM_MODES[m]) for m in range(3)
                 for i, size in enumerate([(1, 200, 1), (1, 1000, 3)]) for j in range(2)]
                + [(dtype, *size, *res, True, False) for dtype in FLOATS
                   for size in [(3, 130, 2), (16, 67, 1), (17, 67, 1)] for res in RESIDUAL])


@pytest.mark.parametrize("dtype,rows,k,split,residual,zero_centered,defer,w_first", LINEAR_CASES)
def test_rms_norm_linear(dtype, rows, k, split, residual, zero_centered, defer, w_first, monkeypatch, device):
    """One row: in the kernel (checked: the launch gets the norm), the rstd deferred to the
    sums (split-K: each share's sum of squares added by the last program) or the row read
    first (``w_first``: after each program's first weight tile, taken before its loop); more
    rows: the norm, then ``linear``. K of 1000: the row's sum of squares over several chunks
    (the interpreter reads 64 columns at a time), split over 3 programs; the residual stream
    is stored by every K share of the first column block."""
    monkeypatch.setattr(matvec, "SPLIT_K_OVERRIDE", split)
    monkeypatch.setattr(L, "NORM_DEFER", defer)
    monkeypatch.setattr(matvec, "NORM_W_FIRST", w_first)
    fused = []
    launch = L._launch
    monkeypatch.setattr(L, "_launch", lambda *a, **kw: fused.append(kw.get("norm") is not None) or launch(*a, **kw))
    x = randn(rows, k, dtype=dtype, device=device, scale=3.0)
    r = randn(rows, k, dtype=dtype, device=device) if residual else None
    nw = randn(k, dtype=dtype, device=device, scale=0.5)
    w = randn(45, k, dtype=dtype, device=device, scale=k ** -0.5)
    b = randn(45, dtype=dtype, device=device)
    y, h = rms_norm_linear(x, nw, 1e-5, w, b, residual=r, zero_centered=zero_centered)
    xn, href = normed_ref(x, nw, 1e-5, r, zero_centered)
    assert torch.equal(h, href)
    assert y.shape == (rows, 45) and y.dtype == dtype
    assert_close(y, project64(xn, w) + b.double())
    assert fused == ([True] if rows == 1 else [False] if rows <= 16 else [])


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("defer,w_first", NORM_MODES)
def test_rms_norm_linear_f32_one_row_plan(defer, w_first, split, monkeypatch, device):
    """One float32 row under each norm mode on the one-row product-and-sum (tiles summed over K
    at once; matvec.F32_ONE_ROW_NORM), with a residual, split over K, against the float64 product;
    and the SwiGLU gate/up projection under the norm."""
    monkeypatch.setattr(matvec, "F32_ONE_ROW_NORM", True)
    assert matvec.plan(1, 45, 1000, device, None, b_bytes=4, norm=not defer, deferred=defer).ksum
    test_rms_norm_linear(torch.float32, 1, 1000, split, True, False, defer, w_first, monkeypatch, device)
    # the gate/up projection (SwiGLU) in the same plan
    x, r = randn(1, 1000, device=device, scale=2.0), randn(1, 1000, device=device)
    nw, w = randn(1000, device=device), randn(80, 1000, device=device, scale=1000 ** -0.5)
    y, h = rms_norm_linear(x, nw, 1e-6, w, residual=r, swiglu=True)
    xn, href = normed_ref(x, nw, 1e-6, r, False)
    assert torch.equal(h, href) and y.shape == (1, 40)
    assert_close(y, project64(xn, w, None, swiglu=True))


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("fp8", [False, True])
def test_rms_norm_linear_swiglu(rows, fp8, device):
    """The MLP's gate/up projection with its norm: bf16 weights, and fp8 with per-row scales;
    strided x and residual (leading dims of a (B, 1, K) decode step)."""
    k, i = 96, 40
    x = noncontig(randn(rows, 1, k, dtype=torch.bfloat16, device=device, scale=2.0))
    r = noncontig(randn(rows, 1, k, dtype=torch.bfloat16, device=device))
    nw = randn(k, dtype=torch.bfloat16, device=device)
    w = randn(2 * i, k, device=device, scale=k ** -0.5)
    scale = None
    if fp8:
        w, scale = quantize_fp8(w, recipe="rowwise")
        scale = scale.reshape(-1, 1)
    else:
        w = w.bfloat16()
    y, h = rms_norm_linear(x, nw, 1e-6, w, residual=r, weight_scale=scale, swiglu=True)
    xn, href = normed_ref(x, nw, 1e-6, r, False)
    assert torch.equal(h, href) and y.shape == (rows, 1, i)
    assert_close(y, project64(xn, w if scale is None else w.float(), scale, swiglu=True))


@pytest.mark.parametrize("rows", [1, 4])
def test_rms_norm_linear_fp16_large(rows, device):
    """float16 rows near the format's limit times norm weights of 4. One row: the deferred
    norm's tiles of ``h * w`` (before the rstd) pass float16's range, so they are scaled before
    the float16 dot (compiled; the interpreter's dot is float32); four rows: the two calls. The
    result is the normalised projection, finite."""
    k = 256
    x = randn(rows, k, dtype=torch.float16, device=device, scale=2.0e4).clamp(-6.0e4, 6.0e4)
    nw = torch.full((k,), 4.0, dtype=torch.float16, device=device)
    w = randn(48, k, dtype=torch.float16, device=device, scale=k ** -0.5)
    y, _ = rms_norm_linear(x, nw, 1e-6, w)
    xn, _ = normed_ref(x, nw, 1e-6, None, False)
    assert bool(torch.isfinite(y).all())
    assert_close(y, project64(xn, w))


@pytest.mark.parametrize("T,one_tile", [(1, False), (1, True), (3, False), (3, True),
                                        (6, False)])  # 6: past ROUTER_MAX_T, the norm then the router (no tile)
@pytest.mark.parametrize("residual,zero_centered", RESIDUAL)
def test_rms_norm_router(T, residual, zero_centered, one_tile, monkeypatch, device):
    """float32: the routing of float64 logits of PyTorch's normalised rows (random logits:
    no near-ties in float32); the normalised rows (the experts' input) and the residual
    stream as PyTorch's norm gives them; twice (the ticket is reset). ``one_tile``: a tile
    holds the whole row, so the router rows load before the row (``ROUTER_W_FIRST``)."""
    if one_tile:
        monkeypatch.setattr(moe, "ROUTER_TILE", 1 << 14)
    H, E, k = 130, 21, 4
    x = randn(T, H, device=device, scale=3.0)
    r = randn(T, H, device=device) if residual else None
    nw = randn(H, device=device)
    W = randn(E + 1, H, device=device, scale=H ** -0.5)
    xn_ref, h_ref = normed_ref(x, nw, 1e-6, r, zero_centered)
    for _ in range(2):
        w, ids, xn, h = moe.rms_norm_router(x, nw, 1e-6, W, k, norm_topk_prob=True, residual=r,
                                            zero_centered=zero_centered, shared_gate=True)
        assert_close(xn, xn_ref)
        assert torch.equal(h, h_ref)
        logits = xn_ref.double() @ W.double().T
        rw, rids = route64(logits[:, :E], k, norm=True)
        assert torch.equal(ids[:, :k].cpu(), rids.cpu()) and bool((ids[:, k] == E).all())
        assert_close(w[:, :k], rw, torch.float32)
        assert_close(w[:, k], torch.sigmoid(logits[:, E]), torch.float32)


def test_rms_norm_router_bf16_equals_two_calls(device):
    """bfloat16, a residual: the normalised rows and the stream equal PyTorch's norm bit for
    bit, and the routing equals ``router`` of those rows (logits rounded to bfloat16 alike)."""
    T, H, E, k = 2, 256, 64, 8
    x = randn(T, H, dtype=torch.bfloat16, device=device, scale=2.0)
    r = randn(T, H, dtype=torch.bfloat16, device=device)
    nw = randn(H, dtype=torch.bfloat16, device=device)
    W = randn(E, H, dtype=torch.bfloat16, device=device, scale=H ** -0.5)
    w, ids, xn, h = moe.rms_norm_router(x, nw, 1e-6, W, k, residual=r)
    xn_ref, h_ref = normed_ref(x, nw, 1e-6, r, False)
    assert torch.equal(h, h_ref)
    assert torch.equal(xn, xn_ref)
    w2, ids2 = moe.router(xn_ref, W, k)
    assert torch.equal(ids, ids2)
    assert_close(w, w2, torch.float32)


def test_rms_norm_linear_no_outputs(device):
    """A projection to 0 features still returns the residual stream."""
    x, r = randn(1, 8, device=device), randn(1, 8, device=device)
    y, h = rms_norm_linear(x, torch.ones(8, device=device), 1e-6, randn(0, 8, device=device), residual=r)
    assert y.shape == (1, 0) and torch.equal(h, x + r)


def test_errors(device):
    x = randn(1, 8, device=device)
    w = randn(4, 8, device=device)
    with pytest.raises(ValueError, match="norm_weight"):
        rms_norm_linear(x, torch.ones(7, device=device), 1e-6, w)
    with pytest.raises(ValueError, match="residual"):
        rms_norm_linear(x, torch.ones(8, device=device), 1e-6, w, residual=x[:, :4])
    with pytest.raises(ValueError, match="weight"):
        rms_norm_linear(x, torch.ones(8, device=device), 1e-6, w[:, :7])
    with pytest.raises(ValueError, match="eps"):
        rms_norm_linear(x, torch.ones(8, device=device), -1.0, w)
    with pytest.raises(ValueError, match="even number"):
        rms_norm_linear(x, torch.ones(8, device=device), 1e-6, w[:3], swiglu=True)
    with pytest.raises(ValueError, match="norm_weight"):
        moe.rms_norm_router(x, torch.ones(9, device=device), 1e-6, w, 2)
    with pytest.raises(TypeError, match="residual"):
        moe.rms_norm_router(x, torch.ones(8, device=device), 1e-6, w, 2, residual=x.double())
    with pytest.raises(ValueError, match="top_k"):
        moe.rms_norm_router(x, torch.ones(8, device=device), 1e-6, w, 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows,G,heads,split", [(1, 16, 5, 1), (1, 64, 3, 2), (1, 16, 8, 3), (2, 16, 4, 1)])
def test_group_rms_norm_linear(dtype, rows, G, heads, split, monkeypatch, device):
    """Qwen3.5's gated norm per head, then the output projection: one row in the kernel (each
    K tile whole heads; split over programs), more rows the norm's kernel then ``linear``;
    against transformers' norm (PyTorch) and a float64 projection."""
    monkeypatch.setattr(matvec, "SPLIT_K_OVERRIDE", split)
    fused = []
    launch = L._launch
    monkeypatch.setattr(L, "_launch", lambda *a, **kw: fused.append(kw.get("norm") is not None) or launch(*a, **kw))
    K = G * heads
    x = randn(rows, 1, K, dtype=dtype, device=device, scale=2.0)
    z = noncontig(randn(rows, 1, K, dtype=dtype, device=device))
    nw = randn(G, dtype=dtype, device=device, scale=0.5)
    w = randn(40, K, dtype=dtype, device=device, scale=K ** -0.5)
    y = L.group_rms_norm_linear(x, nw, 1e-6, z, w)
    xn = reference_rms_norm(x.unflatten(-1, (heads, G)), nw, 1e-6, gate=z.unflatten(-1, (heads, G))).flatten(-2)
    assert y.shape == (rows, 1, 40) and y.dtype == dtype
    assert_close(y, project64(xn, w))
    assert fused == ([True] if rows == 1 else [False])


def test_group_rms_norm_linear_errors(device):
    x, z = randn(1, 48, device=device), randn(1, 48, device=device)
    w = randn(8, 48, device=device)
    with pytest.raises(ValueError, match="norm_weight"):
        L.group_rms_norm_linear(x, torch.ones(32, device=device), 1e-6, z, w)
    with pytest.raises(ValueError, match="gate"):
        L.group_rms_norm_linear(x, torch.ones(16, device=device), 1e-6, z[:, :32], w)
    with pytest.raises(ValueError, match="weight"):
        L.group_rms_norm_linear(x, torch.ones(16, device=device), 1e-6, z, w[:, :40])


def test_deferred_norm_only_where_it_fills_the_gpu(monkeypatch):
    """The deferred norm's wave rule on a 132-SM GPU (the plan outside the interpreter): one wave
    (3 programs a multiprocessor with SwiGLU, 396; 5 without, 660) or 4 waves and more, else the
    norm first; empty weights never reach the plan's division."""
    from fastpath.ops import linear as L
    from fastpath.ops import matvec
    monkeypatch.setattr(matvec, "INTERPRET", False)
    monkeypatch.setattr(matvec, "num_sms", lambda dev: 132)
    monkeypatch.setattr(L, "num_sms", lambda dev: 132)
    cuda, bf16 = torch.device("cuda"), torch.bfloat16
    assert L._defer_fills(12288, 4096, cuda, bf16, glu=True)  # Qwen3-8B's gate/up: 384 programs
    assert not L._defer_fills(14336, 4096, cuda, bf16, glu=True)  # Llama-3-8B's: 448
    assert L._defer_fills(14336, 4096, cuda, bf16)  # 448 without SwiGLU: one wave of 660
    assert not L._defer_fills(24576, 4096, cuda, bf16)  # 768: a wave and a sixth
    assert L._defer_fills(6144, 4096, cuda, bf16)  # 192 blocks, 2 splits: 384
    assert L._defer_fills(128256, 4096, cuda, bf16)  # an LM head, 4008 programs
    assert L._defer_fills(0, 4096, cuda, bf16) and L._defer_fills(64, 0, cuda, bf16)
    assert L._defer_fills(14336, 4096, torch.device("cpu"), bf16)


MOE_CASES = {  # scoring, norm_topk_prob, expert bias, stacked shared expert, scaling factor
    "softmax, renormalised": ("softmax", True, False, False, 1.0),
    "softmax, a stacked shared expert": ("softmax", False, False, True, 1.0),
    "sigmoid, expert bias, scaled": ("sigmoid", True, True, False, 2.5),
}


# each routing once: one token; three (a masked row of the router's block), with fp8 experts or not;
# and 5 tokens, past ROUTER_MAX_T: the two calls
@pytest.mark.parametrize("case,T,fp8", [("softmax, renormalised", 1, False),
                                        ("softmax, a stacked shared expert", 3, True),
                                        ("sigmoid, expert bias, scaled", 3, False),
                                        ("softmax, renormalised", 5, False)])
def test_rms_norm_moe(case, T, fp8, monkeypatch, device):
    """The norm, router and experts with the routing in the gate/up programs: equal to
    ``rms_norm_router`` then ``fused_experts`` (bit for bit: the same arithmetic), and, float32,
    close to the float64 norm, routing and experts; twice (nothing left over between calls).
    ``moe_layer`` (no norm) equals ``router`` then ``fused_experts``."""
    scoring, norm, has_bias, shared, scale = MOE_CASES[case]
    H, I, E, k = 40, 24, 9, 3
    x = randn(T, H, device=device, scale=3.0)
    r = randn(T, H, device=device)
    nw = randn(H, device=device)
    W = randn(E + shared, H, device=device, scale=H ** -0.5)
    bias = randn(E, device=device) if has_bias else None
    gu = randn(E + shared, 2 * I, H, device=device, scale=H ** -0.5)
    dn = randn(E + shared, H, I, device=device, scale=I ** -0.5)
    gs = ds = None
    if fp8:
        (gu, gs), (dn, ds) = moe.quantize_experts(gu), moe.quantize_experts(dn)
    kw = dict(norm_topk_prob=norm, expert_bias=bias, routed_scaling_factor=scale)
    xkw = dict(gate_up_scale=gs, down_scale=ds)
    w2, ids2, xn2, h2 = moe.rms_norm_router(x, nw, 1e-6, W, k, scoring, residual=r, shared_gate=shared, **kw)
    ref = moe.fused_experts(xn2, ids2, w2, gu, dn, **xkw)
    for _ in range(2):
        out, h = moe.rms_norm_moe(x, nw, 1e-6, W, k, gu, dn, scoring, residual=r, shared_gate=shared, **kw, **xkw)
        assert torch.equal(out, ref) and torch.equal(h, h2)
    w3, ids3 = moe.router(x, W, k, scoring, shared_gate=shared, **kw)  # moe_layer: no norm
    assert torch.equal(moe.moe_layer(x, W, k, gu, dn, scoring, shared_gate=shared, **kw, **xkw),
                       moe.fused_experts(x, ids3, w3, gu, dn, **xkw))
    xn64, h64 = normed_ref(x, nw, 1e-6, r, False)
    logits = xn64.double() @ W.double().T
    rw, rids = route64(logits[:, :E], k, scoring, norm=norm, bias=bias, scale=scale)
    if shared:
        rw = torch.cat([rw, torch.sigmoid(logits[:, E:])], 1)
        rids = torch.cat([rids, torch.full((T, 1), E, device=rids.device)], 1)
    gud = gu.double() * gs.double()[..., None] if fp8 else gu
    dnd = dn.double() * ds.double()[..., None] if fp8 else dn
    assert_close(out, experts64(xn64, rids, rw, gud, dnd), torch.float32)
    assert torch.equal(h, h64)


def test_rms_norm_moe_routing_off_and_errors(monkeypatch, device):
    """``ROUTE_IN_EXPERTS`` off gives the same values (the two calls); a router over more experts
    than the stack holds takes the two calls' semantics (ids past the stack add nothing); a bad
    expert stack is reported before any launch, naming the argument."""
    T, H, I, E, k = 2, 40, 24, 9, 3
    x, nw = randn(T, H, device=device), randn(H, device=device)
    W = randn(E, H, device=device, scale=H ** -0.5)
    gu, dn = randn(E, 2 * I, H, device=device), randn(E, H, I, device=device)
    out, h = moe.rms_norm_moe(x, nw, 1e-6, W, k, gu, dn)
    monkeypatch.setattr(moe, "ROUTE_IN_EXPERTS", False)
    out2, h2 = moe.rms_norm_moe(x, nw, 1e-6, W, k, gu, dn)
    assert torch.equal(out, out2) and torch.equal(h, h2)
    monkeypatch.setattr(moe, "ROUTE_IN_EXPERTS", True)
    W2 = randn(E + 3, H, device=device, scale=H ** -0.5)  # a router over 3 experts the stack lacks
    w2, ids2 = moe.router(x, W2, k)
    assert torch.equal(moe.moe_layer(x, W2, k, gu, dn), moe.fused_experts(x, ids2, w2, gu, dn))
    with pytest.raises(ValueError, match="down_proj"):
        moe.rms_norm_moe(x, nw, 1e-6, W, k, gu, randn(E, H, I + 1, device=device))
    with pytest.raises(TypeError, match="gate_up_proj"):
        moe.rms_norm_moe(x, nw, 1e-6, W, k, gu.double(), dn)


@pytest.mark.launch_memo
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch memo replays compiled CUDA kernels")
def test_moe_layer_memo_replay():
    """Eager ``moe_layer`` / ``rms_norm_moe`` calls after the first replay its launches (the
    routing and normalised rows in workspaces): fresh inputs give the two calls' values."""
    dev = torch.device("cuda")
    T, H, I, E, k = 2, 256, 64, 16, 4
    W = randn(E, H, dtype=torch.bfloat16, device=dev, scale=H ** -0.5)
    gu = randn(E, 2 * I, H, dtype=torch.bfloat16, device=dev, scale=H ** -0.5)
    dn = randn(E, H, I, dtype=torch.bfloat16, device=dev, scale=I ** -0.5)
    nw = randn(H, dtype=torch.bfloat16, device=dev)
    moe._LAYER_MEMO.entries.clear()
    for _ in range(3):
        x, r = randn(T, H, dtype=torch.bfloat16, device=dev), randn(T, H, dtype=torch.bfloat16, device=dev)
        w, ids = moe.router(x, W, k, norm_topk_prob=True)
        assert torch.equal(moe.moe_layer(x, W, k, gu, dn, norm_topk_prob=True), moe.fused_experts(x, ids, w, gu, dn))
        w, ids, xn, h = moe.rms_norm_router(x, nw, 1e-6, W, k, norm_topk_prob=True, residual=r)
        out, h2 = moe.rms_norm_moe(x, nw, 1e-6, W, k, gu, dn, norm_topk_prob=True, residual=r)
        assert torch.equal(out, moe.fused_experts(xn, ids, w, gu, dn)) and torch.equal(h2, h)
    assert sum(v is not None for v in moe._LAYER_MEMO.entries.values()) == 2  # both recorded, then replayed
