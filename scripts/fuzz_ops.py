"""A random-shape sweep of fastpath's public ops against PyTorch (float64 where it applies):
random sizes, dtypes and layouts (strided and transposed inputs, channels-last, masks, GQA,
causal, non-finite and subnormal values), every mismatch printed with its configuration. Not a
test (the suite's tests are fixed and fast); a tool to run after a change to a kernel.

    TRITON_INTERPRET=1 PYTHONPATH=src python scripts/fuzz_ops.py [SEED] [SECONDS] [--only NAME,...]
    PYTHONPATH=src python scripts/fuzz_ops.py [SEED] [SECONDS] [--only NAME,...] --cuda

(``--tight``: the int32-offset and grid limits lowered, so that the wide and sliced paths of
inputs past 2**31 elements or 65535 blocks run on small shapes.)

(In the interpreter every load and store is checked to lie inside the kernel's tensors, ``tests/bounds.py``;
``FASTPATH_BOUNDS=0`` turns that off.)

(``--cuda``: every tensor on the GPU, the kernels compiled; the float64 references there too,
``logspace`` against PyTorch's CPU kernel, which fastpath's matches bit for bit.)

(CPU tensors: ``TRITON_INTERPRET=1`` runs the Triton kernels in the interpreter; without it the
ops take their PyTorch reference paths, and the sweep checks only those.)
Linear-algebra results are judged against torch's own float32 error or the n cond eps bound.
"""
import operator
import os
import random
import signal
import sys
import time
import traceback

import torch
import torch.nn.functional as F

import fastpath
from fastpath.bench.harness import rel_error

ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
ARGS = [a for a in sys.argv[1:] if not a.startswith("--") and (ONLY is None or a != ",".join(ONLY))]
SEED = int(ARGS[0]) if ARGS else 0
DEV = "cuda" if "--cuda" in sys.argv else "cpu"
if DEV != "cpu":
    torch.set_default_device(DEV)
BUDGET = float(ARGS[1]) if len(ARGS) > 1 else 600
if "--tight" in sys.argv:  # the limits of int32 offsets and CUDA grids lowered: every case takes
    # the wide / sliced paths that inputs past 2**31 elements or 65535 blocks take on a GPU
    from fastpath.ops import conv1d as _c1, gated_delta as _gd, norm as _nm, softmax as _sm
    from fastpath.ops.fp8 import quantize as _qz
    from fastpath.ops.linalg import tiles as _ti, triangular as _tr
    _sm.INT32_END, _nm.INT32_END, _qz.INT32_END, _ti.SPAN_COPY = 0, 4096, 256, 64
    _tr.INT32_END, _tr.GRID_Y_MAX, _gd.GRID_Y_MAX, _c1.GRID_Z_MAX = 512, 1, 2, 2
R = random.Random(SEED)
torch.manual_seed(SEED)


def noncontig(t):
    """Same values, a strided layout: every other element of a wider buffer in the last dim,
    or a transposed copy."""
    if t.dim() == 0:
        return t
    k = R.choice(["pad", "t", "same"])
    if k == "pad":
        buf = torch.zeros(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
        buf[..., ::2] = t
        return buf[..., ::2]
    if k == "t" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def rel(a, b):
    """The bench's ``||a - b|| / ||b||`` (complex tensors as their (re, im) pairs)."""
    if a.is_complex() or b.is_complex():
        a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
    return rel_error(a.detach(), b.detach())


def dt():
    return R.choice([torch.float32, torch.bfloat16, torch.float16])


TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 3e-3, torch.float64: 1e-10}


def case_linear():
    d = dt()
    K, N = R.randint(1, 300), R.randint(1, 300)
    lead = R.choice([(R.randint(1, 20),), (R.randint(1, 3), R.randint(1, 5)), (1, 1)])
    x = noncontig(torch.randn(*lead, K).to(d))
    w = noncontig(torch.randn(N, K).to(d))
    b = torch.randn(N).to(d) if R.random() < 0.5 else None
    out = fastpath.linear(x, w, b)
    ref = F.linear(x.double(), w.double(), None if b is None else b.double())
    tol = TOL[d] * 4 if d != torch.float32 else 1e-5
    return out.shape == ref.shape and out.dtype == d and rel(out, ref) <= tol, (d, lead, K, N, b is not None)


def case_softmax():
    d = dt()
    shape = [R.randint(1, 7) for _ in range(R.randint(1, 3))]
    shape[-1] = R.choice([1, 3, 67, 1000, 4099])
    x = noncontig(torch.randn(*shape).to(d) * R.choice([1, 10, 100]))
    dim = R.randrange(-len(shape), len(shape))
    log = R.random() < 0.5
    out = (fastpath.log_softmax if log else fastpath.softmax)(x, dim)
    ref = (torch.log_softmax if log else torch.softmax)(x.double(), dim)
    return out.shape == ref.shape and rel(out, ref) <= TOL[d] * 2, (d, shape, dim, log)


def case_pad():
    d = R.choice([torch.float32, torch.bfloat16, torch.int32])
    nd = R.randint(3, 5)
    shape = [R.randint(1, 6) for _ in range(nd)]
    mode = R.choice(["constant", "reflect", "replicate", "circular"])
    nspatial = nd - 2 if mode != "constant" else R.randint(1, nd)
    pads = []
    for i in range(nspatial):
        n = shape[-1 - i]
        lim = n - 1 if mode == "reflect" else n
        lo = R.randint(-min(1, n - 1) if mode == "constant" else 0, max(lim, 0))
        hi = R.randint(0, max(lim, 0))
        pads += [lo, hi]
    x = noncontig((torch.randn(*shape) * 10).to(d))
    if R.random() < 0.3 and nd in (4, 5):
        x = x.contiguous(memory_format=torch.channels_last if nd == 4 else torch.channels_last_3d)
    value = R.choice([0.0, 1.5, -2.0]) if mode == "constant" else None
    try:
        ref = F.pad(x, pads, mode=mode, value=value)
    except Exception:
        return True, None  # torch refuses: not compared
    out = fastpath.pad(x, pads, mode=mode, value=value)
    return out.shape == ref.shape and torch.equal(out, ref), (d, shape, mode, pads, value)


def case_sdpa():
    d = R.choice([torch.float32, torch.bfloat16])
    B, Hkv = R.randint(1, 2), R.choice([1, 2])
    G = R.choice([1, 2, 4])
    Lq = R.choice([1, 1, 3, 17])
    Lk = R.choice([1, 5, 67, 130])
    D = R.choice([16, 64, 80, 128])
    q = torch.randn(B, Hkv * G, Lq, D).to(d)
    k = torch.randn(B, Hkv, Lk, D).to(d)
    v = torch.randn(B, Hkv, Lk, D).to(d)
    causal = R.random() < 0.3 and Lq <= Lk
    mask = None
    if not causal and R.random() < 0.3:
        mask = torch.rand(B, 1, Lq, Lk) > 0.3
        mask[..., 0] = True
    out = fastpath.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
    kk, vv = k.double().repeat_interleave(G, 1), v.double().repeat_interleave(G, 1)
    if causal:  # torch's convention (the causal mask aligned top-left)
        ref = F.scaled_dot_product_attention(q.double(), kk, vv, is_causal=True)
    else:
        ref = F.scaled_dot_product_attention(q.double(), kk, vv, attn_mask=mask)
    tol = 1e-4 if d == torch.float32 else 2e-2
    return out.shape == ref.shape and rel(out, ref) <= tol, (d, B, Hkv, G, Lq, Lk, D, causal, mask is not None)


def case_unsigned():
    d = R.choice([torch.uint8, torch.uint16, torch.uint32, torch.uint64])
    info = torch.iinfo(d)
    n = R.randint(1, 3000)
    hi = min(info.max, 2 ** 63 - 1)

    def rnd():
        if d == torch.uint64:  # every 64-bit pattern, through int64's bits
            return torch.randint(-2 ** 63, 2 ** 63 - 1, (n,), dtype=torch.int64).view(torch.uint64)
        return torch.randint(0, hi, (n,), dtype=torch.int64).to(d)
    a, b = rnd(), rnd()
    b[: n // 3] = a[: n // 3]
    op = R.choice(["eq", "ne", "lt", "le", "gt", "ge", "minimum", "maximum"])
    out = getattr(fastpath, op)(a, b)
    if d == torch.uint64:
        au = [int(x) & (2 ** 64 - 1) for x in a.view(torch.int64).tolist()]
        bu = [int(x) & (2 ** 64 - 1) for x in b.view(torch.int64).tolist()]
    else:
        au, bu = a.to(torch.int64).tolist(), b.to(torch.int64).tolist()
    f = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
         "ge": operator.ge, "minimum": min, "maximum": max}[op]
    exp = [f(x, y) for x, y in zip(au, bu)]
    if op in ("minimum", "maximum"):
        as64 = out.view(torch.int64) if d == torch.uint64 else out.to(torch.int64)
        got = [int(x) & (2 ** 64 - 1) for x in as64.tolist()]
    else:
        got = out.tolist()
    return got == exp, (d, n, op)


def case_take():
    d = R.choice([torch.float32, torch.int64, torch.bool, torch.bfloat16])
    shape = [R.randint(1, 9) for _ in range(R.randint(0, 3))]
    x = noncontig((torch.randn(shape) * 5).to(d))
    n = x.numel()
    idx = torch.randint(-n, n, [R.randint(0, 6) for _ in range(R.randint(0, 2))])
    out = fastpath.take(x, idx)
    return torch.equal(out, torch.take(x, idx)), (d, shape, tuple(idx.shape))


def case_frexp():
    d = R.choice([torch.float32, torch.float16, torch.bfloat16, torch.float64])
    n = R.randint(1, 2000)
    x = torch.randn(n, dtype=torch.float64) * torch.exp2(torch.randint(-160, 160, (n,)).double())
    x = x.to(d)
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), torch.finfo(d).tiny / 4,
                             -torch.finfo(d).tiny / 3, torch.finfo(d).max], dtype=d)
    x = torch.cat([x, specials])
    m, e = fastpath.frexp(x)
    rm, re_ = torch.frexp(x)
    ok = torch.equal(e, re_) and torch.equal(m.isnan(), rm.isnan()) and torch.equal(m[~m.isnan()], rm[~rm.isnan()])
    return ok, (d, n)


def case_heaviside():
    d = R.choice([torch.float32, torch.float16, torch.bfloat16])
    n = R.randint(1, 2000)
    x = torch.randn(n).to(d)
    x[: n // 4] = 0
    v = torch.randn(n).to(d) if R.random() < 0.5 else torch.randn(1).to(d)
    return torch.equal(fastpath.heaviside(x, v), torch.heaviside(x, v)), (d, n, tuple(v.shape))


def case_bincount():
    dtype = R.choice([torch.uint8, torch.int16, torch.int32, torch.int64])
    hi = R.choice([1, 2, 67, 255 if dtype == torch.uint8 else 3000])
    n = R.randint(0, 5000)
    x = torch.randint(0, hi, (n,)).to(dtype)
    w = torch.randn(n) if R.random() < 0.3 else None
    ml = R.choice([0, 1, hi, hi + 7])
    out = fastpath.bincount(x, w, minlength=ml)
    ref = torch.bincount(x.long(), None if w is None else w.double(), minlength=ml)
    if w is None:
        ok = out.shape == ref.shape and torch.equal(out, ref)
    else:  # float32 sums: within a few ulps of the sum of magnitudes per bin
        mag = torch.bincount(x.long(), w.double().abs(), minlength=ml)
        ok = out.shape == ref.shape and bool(((out.double() - ref).abs() <= 1e-6 * mag + 1e-30).all())
    return ok, (dtype, hi, n, w is not None, ml)


def case_rms_norm():
    d = dt()
    H = R.choice([1, 7, 67, 128, 2048, 3000])
    lead = [R.randint(1, 5) for _ in range(R.randint(1, 2))]
    x = noncontig(torch.randn(*lead, H).to(d))
    w = torch.randn(H).to(d)
    out = fastpath.rms_norm(x, w, 1e-6)
    ref = F.rms_norm(x.double(), (H,), w.double(), 1e-6)
    return rel(out, ref) <= TOL[d] * 2, (d, lead, H)


def case_norm_linear():
    """rms_norm_linear (one row in the kernel, more rows the two calls) against float64 norm
    and projection of ``x + residual`` rounded to the dtype."""
    from fastpath.ops.linear import rms_norm_linear
    d = dt()
    K, N = R.randint(1, 300), R.randint(1, 300)
    lead = R.choice([(1,), (1, 1), (R.randint(1, 4),)])
    x = noncontig(torch.randn(*lead, K).to(d))
    r = noncontig(torch.randn(*lead, K).to(d)) if R.random() < 0.7 else None
    nw = torch.randn(K).to(d)
    zc, glu = R.random() < 0.3, R.random() < 0.3
    w = torch.randn(2 * N if glu else N, K).to(d) * K ** -0.5
    y, h = rms_norm_linear(x, nw, 1e-6, w, residual=r, zero_centered=zc, swiglu=glu)
    href = x + r if r is not None else x
    n = href.double() * torch.rsqrt(href.double().pow(2).mean(-1, keepdim=True) + 1e-6)
    n = n * (1 + nw.double()) if zc else n * nw.double()
    ref = F.linear(n, w.double())
    if glu:
        g, u = ref.chunk(2, -1)
        ref = F.silu(g) * u
    return torch.equal(h, href) and rel(y, ref) <= TOL[d] * 8, (d, lead, K, N, r is not None, zc, glu)


def case_linalg():
    d = R.choice([torch.float32, torch.float64, torch.complex64])
    n = R.randint(1, 16)
    b = R.randint(1, 40)
    A = torch.randn(b, n, n, dtype=d) + (n ** 0.5) * torch.eye(n, dtype=d)
    which = R.choice(["inv", "solve", "det", "lu"])
    A64 = A.to(torch.complex128 if d.is_complex else torch.float64)
    eps = 1.2e-7 if d != torch.float64 else 2.3e-16
    cond = torch.linalg.cond(A64).max().item()

    def close(ours, torch32, ref):  # within 10x torch's own error, or of the n cond eps bound
        return rel(ours, ref) <= max(10 * rel(torch32, ref), 4 * n * cond * eps)
    if which == "inv":
        return close(fastpath.linalg.inv(A), torch.linalg.inv(A), torch.linalg.inv(A64)), (d, n, b, which)
    if which == "solve":
        k = R.randint(1, 16)
        B = torch.randn(b, n, k, dtype=d)
        return close(fastpath.linalg.solve(A, B), torch.linalg.solve(A, B),
                     torch.linalg.solve(A64, B.to(A64.dtype))), (d, n, b, k, which)
    if which == "det":
        return close(fastpath.linalg.det(A / 2), torch.linalg.det(A / 2), torch.linalg.det(A64 / 2)), (d, n, b, which)
    LU, piv = fastpath.linalg.lu_factor(A)
    rLU, rpiv = torch.linalg.lu_factor(A64)
    P, L, U = torch.lu_unpack(LU.to(A64.dtype), piv)
    return rel(P @ L @ U, A64) <= 50 * n * (1e-7 if d != torch.float64 else 1e-16), (d, n, b, which)


def case_mse():
    d = dt()
    shape = [R.randint(1, 9) for _ in range(R.randint(1, 3))]
    a = noncontig(torch.randn(*shape).to(d)).requires_grad_()
    t = torch.randn(*shape).to(d)
    red = R.choice(["none", "mean", "sum"])
    out = fastpath.mse_loss(a, t, reduction=red)
    g = torch.randn_like(out)
    (ga,) = torch.autograd.grad(out, a, g)
    a64 = a.detach().double().requires_grad_()
    ref = F.mse_loss(a64, t.double(), reduction=red)
    (ra,) = torch.autograd.grad(ref, a64, g.double())
    return rel(out, ref) <= TOL[d] * 2 and rel(ga, ra) <= TOL[d] * 2, (d, shape, red)


def case_grouped_mm():
    d = R.choice([torch.bfloat16, torch.float32])
    G, K, N = R.randint(1, 5), R.randint(1, 70), R.randint(1, 70)
    sizes = [R.randint(0, 20) for _ in range(G)]
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
    a = noncontig(torch.randn(sum(sizes), K).to(d))
    b = torch.randn(G, K, N).to(d)
    if R.random() < 0.5:
        b = b.transpose(1, 2).contiguous().transpose(1, 2)
    out = fastpath.grouped_mm(a, b, offs=offs)
    ref = torch.cat([a[s - n:s].double() @ b[g].double() for g, (n, s) in enumerate(zip(sizes, offs.tolist()))]) \
        if sum(sizes) else torch.zeros(0, N, dtype=torch.float64)
    tol = 1e-5 if d == torch.float32 else 2e-2
    return out.shape == ref.shape and rel(out, ref) <= tol, (d, G, K, N, sizes)


def case_fused_experts():
    d = torch.bfloat16
    E, H, I = R.choice([4, 8, 16]), R.choice([16, 64, 96]), R.choice([16, 32, 48])
    k = R.randint(1, min(4, E))
    T = R.choice([1, 2, 5, 17])
    x = torch.randn(T, H).to(d)
    ids = torch.stack([torch.randperm(E)[:k] for _ in range(T)]).to(torch.int32)
    w = torch.rand(T, k)
    gu = (torch.randn(E, 2 * I, H) * H ** -0.5).to(d)
    dn = (torch.randn(E, H, I) * I ** -0.5).to(d)
    out = fastpath.fused_experts(x, ids, w, gu, dn)
    ref = torch.zeros(T, H, dtype=torch.float64)
    for t in range(T):
        for j in range(k):
            e = int(ids[t, j])
            gate, up = (gu[e].double() @ x[t].double()).chunk(2)
            h = F.silu(gate) * up
            ref[t] += w[t, j].double() * (dn[e].double() @ h)
    return rel(out, ref) <= 3e-2, (E, H, I, k, T)


def case_scaled_mm():
    M, K, N = R.choice([1, 3, 16, 17, 40]), R.choice([16, 48, 130]), R.choice([16, 33, 100])
    recipe = R.choice(["tensorwise", "rowwise"])
    a = torch.randn(M, K) * 3
    bmat = torch.randn(N, K)
    qa, sa = fastpath.quantize_fp8(a, recipe)
    qb, sb = fastpath.quantize_fp8(bmat, recipe)
    kind = fastpath.ScalingType.TensorWise if recipe == "tensorwise" else fastpath.ScalingType.RowWise
    od = R.choice([torch.bfloat16, torch.float32])
    out = fastpath.scaled_mm(qa, qb.t(), sa, kind, sb.t() if recipe == "rowwise" else sb, kind, output_dtype=od)
    ref = (qa.double() * sa.double().reshape(-1, 1)) @ (qb.double() * sb.double().reshape(-1, 1)).t()
    # (float32 out: Hopper's fp8 tensor cores add inside an instruction with less than float32
    # precision, tests/ops/test_fp8.FP8_MMA_TOL; one row takes the product-and-sum)
    tol = (1e-5 if M == 1 or DEV == "cpu" else 3e-4) if od == torch.float32 else 1e-2
    return out.dtype == od and rel(out, ref) <= tol, (M, K, N, recipe, od)


def case_quantize():
    recipe = R.choice(["tensorwise", "rowwise", "blockwise"])
    shape = (R.randint(1, 300), R.randint(1, 300))
    x = torch.randn(shape) * R.choice([1e-3, 1, 1e3])
    if R.random() < 0.2:
        x[0] = 0
    kw = {"block": 128} if recipe == "blockwise" else {}
    try:
        q, s = fastpath.quantize_fp8(x, recipe, **kw)
    except ValueError:
        return True, None
    rq, rs = fastpath.reference_quantize_fp8(x, recipe, **kw)
    ok = torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and torch.allclose(s, rs)
    return ok, (recipe, shape)


def case_conv1d():
    d = R.choice([torch.float32, torch.bfloat16])
    B, C, L, K = R.randint(1, 3), R.choice([1, 4, 7, 16]), R.randint(1, 40), R.choice([1, 3, 4, 5])
    groups = R.choice([1, C])
    Cout = C if groups == C else R.choice([1, 5, 8])
    stride, dil = R.randint(1, 3), R.randint(1, 2)
    pad = R.choice([0, 1, 2, "same"]) if stride == 1 else R.choice([0, 1, 2])
    if (L + 2 * (pad if isinstance(pad, int) else K) - dil * (K - 1) - 1) < 0:
        return True, None
    x = noncontig(torch.randn(B, C, L).to(d))
    w = torch.randn(Cout, C // groups, K).to(d)
    b = torch.randn(Cout).to(d) if R.random() < 0.5 else None
    try:
        ref = F.conv1d(x.double(), w.double(), None if b is None else b.double(), stride, pad, dil, groups)
    except Exception:
        return True, None
    out = fastpath.conv1d(x, w, b, stride, pad, dil, groups)
    tol = 1e-5 if d == torch.float32 else 2e-2
    return out.shape == ref.shape and rel(out, ref) <= tol, (d, B, C, Cout, L, K, groups, stride, pad, dil)


def case_dropout():
    d = R.choice([torch.float32, torch.bfloat16])
    n = R.randint(1, 5000)
    p = R.choice([0.0, 0.1, 0.5, 0.9, 1.0])
    x = torch.randn(n).to(d).requires_grad_()
    y = fastpath.dropout(x, p, training=True, generator=torch.Generator(DEV).manual_seed(3))
    y2 = fastpath.dropout(x, p, training=True, generator=torch.Generator(DEV).manual_seed(3))
    keep = y != 0
    scale = 1.0 / (1 - p) if p < 1 else 0.0
    ok = torch.equal(y, y2) and (p < 1 or not keep.any())
    if p < 1:
        ok = ok and rel(y[keep], (x.detach()[keep].double() * scale)) <= TOL[d]
    g = torch.randn(n).to(d)
    (gx,) = torch.autograd.grad(y, x, g)
    if p < 1:
        m = (y.detach() != 0) | (x.detach() == 0)
        ok = ok and rel(gx[keep], g[keep].double() * scale) <= TOL[d] and bool((gx[~m] == 0).all())
    return ok, (d, n, p)


def case_batch_norm():
    d = R.choice([torch.float32, torch.bfloat16])
    shape = R.choice([(R.randint(2, 9), R.randint(1, 7)), (R.randint(1, 4), R.randint(1, 7), R.randint(1, 9)),
                      (R.randint(1, 3), R.randint(1, 5), R.randint(1, 5), R.randint(1, 6))])
    if shape[0] * (1 if len(shape) == 2 else torch.tensor(shape[2:]).prod().item()) < 2:
        return True, None
    C = shape[1]
    x = torch.randn(*shape).to(d)
    if len(shape) == 4 and R.random() < 0.5:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    w = torch.randn(C, requires_grad=True)
    b = torch.randn(C, requires_grad=True)
    rm, rv = torch.randn(C), torch.rand(C) + 0.5
    rm2, rv2 = rm.clone().double(), rv.clone().double()
    y = fastpath.batch_norm(x, rm, rv, w.to(d) if d != torch.float32 else w, b.to(d) if d != torch.float32 else b,
                            training=True)
    x64 = x.detach().double().requires_grad_()
    w64, b64 = w.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ref = F.batch_norm(x64, rm2, rv2, w64, b64, training=True)
    g = torch.randn(*shape)
    gx, = torch.autograd.grad(y, x, g.to(d))
    rgx, = torch.autograd.grad(ref, x64, g.double())
    tol = 1e-4 if d == torch.float32 else 3e-2
    xt = x.detach().clone().requires_grad_()
    yt = F.batch_norm(xt, None, None, w.detach().to(d), b.detach().to(d), training=True)
    tgx, = torch.autograd.grad(yt, xt, g.to(d))
    # dx against its scale |w| rstd |g| (two values a channel: dx is ~0 by cancellation, eps's share, so a
    # relative error of dx itself measures float32 rounding; torch's is as large, seed 81's (2, 1, 1, 1))
    dims = [0] + list(range(2, len(shape)))
    rstd = (x64.detach().var(dim=dims, unbiased=False) + 1e-5).rsqrt()
    scale = (w64.detach().abs() * rstd).max() * g.double().abs().max() * x.numel() ** 0.5
    err, terr = (gx.double() - rgx).norm(), (tgx.double() - rgx).norm()
    ok = (rel(y, ref) <= tol and err <= 10 * terr + tol * scale and rel(rm, rm2) <= 1e-4
          and rel(rv, rv2) <= 1e-4)
    return ok, (d, shape, x.is_contiguous())


def _gdr64(q, k, v, g, beta, scale, state, l2, a_log=None, dt_bias=None):
    """The gated delta rule token by token in float64 (transformers' recurrent form)."""
    q, k, v, g, beta = (t.double() for t in (q, k, v, g, beta))
    if a_log is not None:  # raw projections a, b: the models' gating
        g = -a_log.double().exp() * F.softplus(g + dt_bias.double())
        beta = torch.sigmoid(beta)
    if l2:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    rep = v.shape[2] // q.shape[2]
    q, k = q.repeat_interleave(rep, 2) * scale, k.repeat_interleave(rep, 2)
    B, T, HV, Dv = v.shape
    S = torch.zeros(B, HV, q.shape[-1], Dv, dtype=torch.float64) if state is None else state.double().clone()
    o = torch.zeros(B, T, HV, Dv, dtype=torch.float64)
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        delta = (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)) * beta[:, t][..., None]
        S = S + k[:, t][..., None] * delta[..., None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S)
    return o, S


def case_gated_delta():
    d = dt()
    which = R.choice(["chunk", "recurrent", "step"])
    B, HK, rep = R.randint(1, 2), R.randint(1, 2), R.choice([1, 2])
    HV, Dk, Dv = HK * rep, R.randint(2, 40), R.randint(2, 40)
    T = 1 if which == "step" else R.randint(1, 40)
    q, k = noncontig(torch.randn(B, T, HK, Dk).to(d)), noncontig(torch.randn(B, T, HK, Dk).to(d))
    v = noncontig(torch.randn(B, T, HV, Dv).to(d))
    raw = R.random() < 0.3
    a_log, dt_bias = (torch.randn(HV), torch.randn(HV)) if raw else (None, None)
    g = torch.randn(B, T, HV) if raw else -torch.rand(B, T, HV) * R.choice([0.1, 1.0, 5.0])
    beta = torch.randn(B, T, HV) if raw else torch.rand(B, T, HV)
    l2 = R.random() < 0.8
    if not l2:  # keep the state's growth bounded
        q, k = (q.float() / Dk ** 0.5).to(d), (k.float() / Dk ** 0.5).to(d)
    state = torch.randn(B, HV, Dk, Dv) * 0.1 if (which == "step" or R.random() < 0.5) else None
    scale = R.choice([None, 0.3])
    sc = Dk ** -0.5 if scale is None else scale
    ref_o, ref_s = _gdr64(q, k, v, g, beta, sc, state, l2, a_log, dt_bias)
    kw = dict(scale=scale, use_qk_l2norm=l2, A_log=a_log, dt_bias=dt_bias)
    if which == "step":
        st = state.clone()
        o = fastpath.gated_delta_rule_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], st, **kw)[:, None]
        s = st
    elif which == "chunk":
        o, s = fastpath.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state,
                                               chunk_size=R.choice([None, 16, 32, 64]), **kw)
    else:
        o, s = fastpath.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state, **kw)
    tol = 1e-4 if d == torch.float32 else TOL[d] * 2
    ok = o.shape == ref_o.shape and o.dtype == d and rel(o, ref_o) <= tol and rel(s, ref_s) <= max(tol, 1e-4)
    return ok, (d, which, B, T, HK, HV, Dk, Dv, raw, l2, state is not None, scale)


def case_causal_conv1d():
    d = dt()
    B, C, T, K = R.randint(1, 3), R.randint(1, 20), R.randint(1, 30), R.randint(1, 5)
    S = K - 1 + R.randint(0, 2)
    x = torch.randn(B, T, C).to(d).transpose(1, 2) if R.random() < 0.5 else noncontig(torch.randn(B, C, T).to(d))
    w = torch.randn(C, K).to(d)
    b = torch.randn(C).to(d) if R.random() < 0.5 else None
    act = R.choice([None, "silu"])
    state = torch.randn(B, C, S).to(d) if R.random() < 0.7 else None
    full = torch.cat([state.double() if state is not None else torch.zeros(B, C, S, dtype=torch.float64),
                      x.double()], 2)
    ref = F.conv1d(full[..., S - (K - 1):], w.double()[:, None], None if b is None else b.double(), groups=C)
    ref = F.silu(ref) if act else ref
    ref_state = full[..., full.shape[2] - S:]
    if state is not None and R.random() < 0.5:  # the in-place update (one token as (B, C) too)
        st = state.clone()
        xin = x[:, :, 0] if T == 1 and R.random() < 0.5 else x
        out = fastpath.causal_conv1d_update(xin, st, w, b, act).reshape(B, C, T)
        new, which = st, "update"
    else:
        out, new = fastpath.causal_conv1d(x, w, b, state, act, state_len=S if state is None else None)
        which = "conv"
    tol = 1e-5 if d == torch.float32 else TOL[d] * 2
    ok = out.shape == ref.shape and rel(out, ref) <= tol and torch.equal(new.double(), ref_state)
    return ok, (d, which, B, C, T, K, S, b is not None, act, state is not None)


def case_causal_conv3d():
    d = dt()
    B, Ci, Co = R.randint(1, 2), R.randint(1, 6), R.randint(1, 6)
    kt, kh, kw = R.randint(1, 3), R.randint(1, 3), R.randint(1, 3)
    pt, ph, pw = R.randint(0, 2), R.randint(0, 1), R.randint(0, 1)
    T, H, W = R.randint(1, 4), R.randint(1, 7), R.randint(1, 7)
    if T + pt - kt < 0 or H + 2 * ph - kh < 0 or W + 2 * pw - kw < 0:
        return True, None
    x = torch.randn(B, Ci, T, H, W).to(d)
    if R.random() < 0.4:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    w = torch.randn(Co, Ci, kt, kh, kw).to(d)
    b = torch.randn(Co).to(d) if R.random() < 0.5 else None
    c = R.randint(0, 3) if R.random() < 0.5 else None
    cache = torch.randn(B, Ci, c, H, W).to(d) if c is not None else None
    full = torch.cat([cache, x], 2).double() if cache is not None else x.double()
    ref = F.conv3d(F.pad(full, (pw, pw, ph, ph, pt - (c or 0), 0)), w.double(), None if b is None else b.double())
    out, new = fastpath.causal_conv3d(x, w, b, padding=(pt, ph, pw), cache=cache)
    keep = min(pt, full.shape[2])
    tol = 1e-5 if d == torch.float32 else TOL[d] * 2
    if DEV != "cpu" and d == torch.float32:  # compiled GPUs take F.conv3d (conv3d.KERNEL_ON_GPU off): cuDNN's
        # float32 (TF32 under torch.backends.cudnn.allow_tf32, its default), judged against torch's own error
        own = F.conv3d(F.pad(full.float(), (pw, pw, ph, ph, pt - (c or 0), 0)), w, b)
        tol = max(tol, 2 * rel(own, ref))
    ok = (out.shape == ref.shape and rel(out, ref) <= tol
          and torch.equal(new.double(), full[:, :, full.shape[2] - keep:]))
    return ok, (d, B, Ci, Co, (kt, kh, kw), (pt, ph, pw), (T, H, W), c, b is not None, x.is_contiguous())


def case_channel_rms_norm():
    d = dt()
    C = R.randint(1, 40)
    spatial = [R.randint(1, 6) for _ in range(R.randint(1, 3))]
    x = torch.randn(R.randint(1, 2), C, *spatial).to(d)
    if len(spatial) in (2, 3) and R.random() < 0.4:
        x = x.contiguous(memory_format=torch.channels_last if len(spatial) == 2 else torch.channels_last_3d)
    elif R.random() < 0.3:
        x = x[..., : max(1, spatial[-1] - 1)]  # a crop, read in place
    if R.random() < 0.1:
        x = x.clone()
        x[:, :, ...] = 0  # all-zero vectors: the eps floor
    shape = (C,) + (1,) * R.choice([0, len(spatial)])
    gamma = torch.randn(shape).to(d)
    bias = R.choice([None, 0.25, torch.randn(shape).to(d)])
    ib = torch.randn(shape).to(d) if R.random() < 0.3 else None
    scale, eps, silu = R.choice([None, 2.0]), R.choice([1e-12, 1e-3]), R.random() < 0.5
    out = fastpath.channel_rms_norm(x, gamma, bias, scale=scale, eps=eps, silu=silu, input_bias=ib)
    cv = [1, C] + [1] * len(spatial)
    x64 = x.double() + (ib.double().reshape(cv) if ib is not None else 0)
    y = x64 / x64.norm(dim=1, keepdim=True).clamp_min(eps) * (C ** 0.5 if scale is None else scale)
    y = y * gamma.double().reshape(cv) + (bias.double().reshape(cv) if isinstance(bias, torch.Tensor) else bias or 0)
    ref = F.silu(y) if silu else y
    tol = 1e-5 if d == torch.float32 else TOL[d] * 2
    return out.shape == ref.shape and out.dtype == d and rel(out, ref) <= tol, (d, C, spatial, x.stride(), bias is None,
                                                                                 ib is not None, scale, eps, silu)


def _routes_ok(w, ids, logits64, top_k, scoring, norm, bias, rsf, eps, shared, tol_score, tol_w):
    """fastpath's (weights, ids) against float64 routing of ``logits64`` (T, E[+1]): each chosen
    expert within ``tol_score`` of the k-th best score (ties may go either way), distinct, in
    decreasing order, and the weights of the chosen ones as float64 computes them."""
    E = logits64.shape[-1] - shared
    lg = logits64[:, :E]
    s = lg.softmax(-1) if scoring == "softmax" else lg.sigmoid()
    choose = s + (bias.double() if bias is not None else 0)
    kth = choose.topk(top_k, dim=-1).values[:, -1:]
    sel = ids[:, :top_k]
    if any(len(set(r.tolist())) != top_k for r in sel):
        return False
    cs = choose.gather(1, sel)
    if not bool((cs >= kth - tol_score).all()) or not bool((cs[:, 1:] <= cs[:, :-1] + tol_score).all()):
        return False
    ref_w = s.gather(1, sel)
    if norm:
        ref_w = ref_w / (ref_w.sum(-1, keepdim=True) + (eps if eps is not None else (0.0 if scoring == "softmax"
                                                                                       else 1e-6)))
    ref_w = ref_w * rsf
    if shared:
        if not bool((ids[:, top_k] == E).all()):
            return False
        ref_w = torch.cat([ref_w, logits64[:, E:].sigmoid()], 1)
    return rel(w, ref_w) <= tol_w


def case_route():
    d = dt()
    T, E = R.randint(1, 6), R.randint(2, 70)
    top_k = R.randint(1, min(E, 8))
    scoring, norm = R.choice(["softmax", "sigmoid"]), R.random() < 0.5
    bias = torch.randn(E) * 0.1 if R.random() < 0.4 else None
    rsf, eps, shared = R.choice([1.0, 2.5]), R.choice([None, 1e-20]), R.random() < 0.3
    kw = dict(norm_topk_prob=norm, expert_bias=bias, routed_scaling_factor=rsf, norm_eps=eps, shared_gate=shared)
    if R.random() < 0.5:
        logits = noncontig(torch.randn(T, E + shared).to(d))
        w, ids = fastpath.route(logits, top_k, scoring, **kw)
        logits64, which = logits.double(), "route"
        tol_score = 1e-6
    else:
        H = R.randint(1, 200)
        h, rw = torch.randn(T, H).to(d), (torch.randn(E + shared, H) / H ** 0.5).to(d)
        w, ids = fastpath.router(h, rw, top_k, scoring, **kw)
        logits64, which = (h.double() @ rw.double().T).to(d).double(), "router"
        tol_score = 4 * TOL[d] if d != torch.float32 else 1e-5  # the logits' rounding to d may differ
    tol_w = 1e-5 if which == "route" or d == torch.float32 else 4 * TOL[d]
    ok = w.dtype == torch.float32 and ids.dtype == torch.int64 and _routes_ok(
        w, ids, logits64, top_k, scoring, norm, bias, rsf, eps, shared, tol_score, tol_w)
    return ok, (d, which, T, E, top_k, scoring, norm, bias is not None, rsf, eps, shared)


def case_sample():
    d = dt()
    B, V = R.randint(1, 4), R.choice([R.randint(1, 300), R.randint(300, 5000)])
    logits = noncontig((torch.randn(B, V) * R.choice([1.0, 4.0])).to(d))
    if R.random() < 0.3:
        logits = logits.clone()
        logits[:, R.randrange(V)] = logits.max()  # a tie for the maximum
    temp = R.choice([0.0, 0.7, 1.0, 1.5])
    top_k = R.choice([None, 1, R.randint(1, 300)])
    top_p = R.choice([None, 1.0, R.uniform(0.05, 0.99)])
    gen = torch.Generator(DEV).manual_seed(R.randrange(1 << 30))
    tok = fastpath.sample(logits, temp, top_k, top_p, gen)
    if tok.shape != (B,) or tok.dtype != torch.int64:
        return False, (d, B, V, temp, top_k, top_p, "shape/dtype")
    x = logits.double()
    if temp == 0.0:
        return torch.equal(tok, x.argmax(-1)), (d, B, V, temp, top_k, top_p)
    ok = True
    for r in range(B):  # the drawn token lies in the allowed set (its boundary taken loosely)
        lr = x[r] / temp
        t = tok[r].item()
        if not 0 <= t < V:
            return False, (d, B, V, temp, top_k, top_p, "token", t)
        k = min(top_k or V, V)
        order = lr.argsort(descending=True, stable=True)
        kth = lr[order[k - 1]]
        ok = ok and bool(lr[t] >= kth - 1e-6 * kth.abs() - 1e-9)
        if top_p is not None and top_p < 1:
            p = (lr[order[:k]] - lr.max()).exp()
            p = p / p.sum()
            before = dict(zip(order[:k].tolist(), (p.cumsum(0) - p).tolist()))
            ok = ok and (t == order[0].item() or before.get(t, 0.0) < top_p + 1e-4)
    return ok, (d, B, V, temp, top_k, top_p)


def case_minmax_logspace():
    if R.random() < 0.4:
        dtype = R.choice([torch.float32, torch.bfloat16, torch.float16])
        start, end, steps = R.uniform(-5, 5), R.uniform(-5, 5), R.choice([0, 1, 2, R.randint(3, 300), 2000])
        base = R.choice([10.0, 2.0, 2.718281828459045, 0.5])
        out = fastpath.logspace(start, end, steps, base, dtype=dtype)
        ref = torch.logspace(start, end, steps, base, dtype=dtype, device="cpu")
        return out.shape == ref.shape and torch.equal(out.cpu(), ref), ("logspace", start, end, steps, base, dtype)
    da, db = dt(), R.choice([dt(), torch.int32])
    sa = [R.randint(1, 5) for _ in range(R.randint(0, 3))]
    sb = [1 if R.random() < 0.3 else n for n in sa][R.randint(0, len(sa)):] if sa else []
    a = torch.randn(sa).to(da)
    b = (torch.randn(sb) * 3).to(db)
    if a.numel() and R.random() < 0.5:
        a.view(-1)[R.randrange(a.numel())] = float("nan")
    fn = R.choice(["maximum", "minimum"])
    out = getattr(fastpath, fn)(noncontig(a) if a.dim() else a, b)
    ref = getattr(torch, fn)(a, b)
    ok = out.shape == ref.shape and out.dtype == ref.dtype and torch.equal(out.isnan(), ref.isnan()) and torch.equal(
        out.nan_to_num(0), ref.nan_to_num(0))
    return ok, (fn, da, db, sa, sb)


def case_linalg_more():
    d = R.choice([torch.float32, torch.float64, torch.complex64])
    b = R.randint(1, 6)
    which = R.choice(["qr", "svd", "pinv", "lu_solve", "solve_triangular", "slogdet"])
    c64 = torch.complex128 if d.is_complex else torch.float64
    eps = 1.2e-7 if d != torch.float64 else 2.3e-16
    if which in ("qr", "svd", "pinv"):
        if which != "qr" and d.is_complex:
            d, c64 = torch.float32, torch.float64
        m, n = R.randint(1, 40 if which == "qr" else 32), R.randint(1, 32)
        A = torch.randn(b, m, n, dtype=d) * R.choice([1.0, 1e-20, 1e20])
        if R.random() < 0.3 and min(m, n) > 1:  # rank-deficient
            A[..., -1] = A[..., 0]
        A64 = A.to(c64)
        scale = A64.abs().amax().item() or 1.0
        tol = 40 * max(m, n) * eps
        if which == "qr":
            mode = R.choice(["reduced", "complete"])
            Q, Rm = fastpath.linalg.qr(A, mode=mode)
            k = Q.shape[-1]
            I = torch.eye(k, dtype=c64)
            ok = (rel(Q.to(c64) @ Rm.to(c64), A64) <= tol and rel(Q.to(c64).mH @ Q.to(c64), I.expand(b, k, k)) <= tol
                  and bool((Rm.to(c64).tril(-1).abs() <= tol * scale).all()))
            return ok, (d, which, mode, b, m, n)
        if which == "svd":
            full = R.random() < 0.5
            U, S, Vh = fastpath.linalg.svd(A, full_matrices=full)
            kk = min(m, n)
            rec = (U[..., :kk].to(c64) * S.to(c64)[..., None, :]) @ Vh[..., :kk, :].to(c64)
            ok = (rel(rec, A64) <= tol and rel(S.to(c64), torch.linalg.svdvals(A64)) <= tol
                  and rel(U.to(c64).mH @ U.to(c64), torch.eye(U.shape[-1], dtype=c64).expand(b, -1, -1)) <= tol)
            return ok, (d, which, full, b, m, n)
        rtol = R.choice([None, 1e-3])
        P = fastpath.linalg.pinv(A, rtol=rtol)
        ref = torch.linalg.pinv(A64, rtol=rtol if rtol is not None else max(m, n) * eps)
        return rel(P, ref) <= 1e3 * tol, (d, which, b, m, n, rtol)
    n = R.choice([R.randint(1, 40), R.randint(60, 140)])
    A = torch.randn(b, n, n, dtype=d) + (n ** 0.5) * torch.eye(n, dtype=d)
    A64 = A.to(c64)
    cond = torch.linalg.cond(A64).max().item()
    bound = 8 * n * cond * eps
    if which == "slogdet":
        sgn, ld = fastpath.linalg.slogdet(A)
        rs, rl = torch.linalg.slogdet(A64)
        return rel(sgn, rs) <= bound and rel(ld, rl) <= bound + 1e-6, (d, which, b, n)
    k = R.choice([R.randint(1, 20), R.randint(30, 80)])  # (32+ columns a program: the word tiles, complex64)
    Bm = torch.randn(b, n, k, dtype=d)
    if R.random() < 0.3:
        Bm = noncontig(Bm)
    if which == "lu_solve":
        factor = fastpath.linalg.lu_factor if R.random() < 0.5 else torch.linalg.lu_factor  # torch's: column-major
        LU, piv = factor(A)
        adj = R.random() < 0.3
        X = fastpath.linalg.lu_solve(LU, piv, Bm, adjoint=adj)
        ref = torch.linalg.solve(A64.mH if adj else A64, Bm.to(c64))
        return rel(X, ref) <= bound, (d, which, adj, b, n, k)
    upper, left, unit = R.random() < 0.5, R.random() < 0.7, R.random() < 0.3
    T = A.triu() if upper else A.tril()
    if unit:  # off-diagonal entries small against the unit diagonal (random ones: cond ~ 2^n, a vacuous bound)
        T = T / (3 * n ** 0.5)
    rhs = Bm if left else Bm.mT.contiguous()
    X = fastpath.linalg.solve_triangular(T, rhs, upper=upper, left=left, unitriangular=unit)
    ref = torch.linalg.solve_triangular(T.to(c64), rhs.to(c64), upper=upper, left=left, unitriangular=unit)
    Tu = T.to(c64)
    if unit:  # the unit diagonal the solve assumes
        Tu = Tu - torch.diag_embed(Tu.diagonal(0, -2, -1)) + torch.eye(n, dtype=c64)
    tcond = torch.linalg.cond(Tu).max().item()
    return rel(X, ref) <= 8 * n * tcond * eps, (d, which, upper, left, unit, b, n, k)


def case_linalg_nonfinite():
    """One batch member holds a NaN or an infinity: its det / log|det| / singular values are NaN
    (as torch's, whose SVD raises instead), its LU pivots stay valid, the other member is as torch."""
    d = R.choice([torch.float32, torch.complex64])
    n = R.randint(1, 40)
    A = torch.randn(2, n, n, dtype=d) + n ** 0.5 * torch.eye(n, dtype=d)
    A[1, R.randrange(n), R.randrange(n)] = R.choice([float("nan"), float("inf")])
    which = R.choice(["det", "slogdet", "lu", "svdvals"] if not d.is_complex and n <= 32 else ["det", "slogdet", "lu"])
    if which == "lu":
        LU, piv, _ = fastpath.linalg.lu_factor_ex(A)
        i = torch.arange(1, n + 1, dtype=piv.dtype)
        rLU, _, _ = torch.linalg.lu_factor_ex(A[:1])
        return bool(((piv >= i) & (piv <= n)).all()) and rel(LU[:1], rLU) <= 1e-4, (d, n, which)
    if which == "svdvals":
        sv = fastpath.linalg.svdvals(A)
        return bool(sv[1].isnan().all()) and rel(sv[:1], torch.linalg.svdvals(A[:1])) <= 1e-5, (d, n, which)
    if which == "det":
        got, want = fastpath.linalg.det(A), torch.linalg.det(A)
    else:
        got, want = fastpath.linalg.slogdet(A).logabsdet, torch.linalg.slogdet(A).logabsdet
    # member 1: NaN for a NaN input; non-finite where torch's is (an infinity may give +-inf, not NaN)
    nan_in = bool(A[1].isnan().any())
    bad_ok = (not nan_in or bool(got[1].isnan())) and (bool(torch.isfinite(want[1])) or not bool(
        torch.isfinite(got[1])))
    # member 0 against float64: det's relative error (log|det|'s absolute) is up to ~n eps cond(A) for a
    # backward-stable LU; a random member can be ill-conditioned (cond 4.7e5: ours 1.2e-3, torch 2.4e-4)
    A64 = A[:1].to(torch.complex128 if d.is_complex else torch.float64)
    cond = float(torch.linalg.cond(A64).abs().max())
    tol = max(1e-3, 4 * n * torch.finfo(d).eps * cond)
    if which == "det":
        err = rel(got[:1], torch.linalg.det(A64))
    else:
        ref = torch.linalg.slogdet(A64).logabsdet
        err = float((got[:1].double() - ref).abs().max()) / max(1.0, float(ref.abs().max()))
    return bad_ok and err <= tol, (d, n, which, nan_in)


CASES = [case_linear, case_softmax, case_pad, case_sdpa, case_unsigned, case_take, case_frexp, case_heaviside,
         case_bincount, case_rms_norm, case_norm_linear, case_linalg, case_mse, case_grouped_mm, case_fused_experts,
         case_scaled_mm, case_quantize, case_conv1d, case_dropout, case_batch_norm, case_gated_delta,
         case_causal_conv1d, case_causal_conv3d, case_channel_rms_norm, case_route, case_sample,
         case_minmax_logspace, case_linalg_more, case_linalg_nonfinite]


class _OverBudget(BaseException):
    """Raised by the alarm at the end of the run's budget (a BaseException: the cases' own
    ``except Exception`` does not take it)."""


def _over_budget(signum, frame):
    raise _OverBudget()


def main():
    from fastpath.ops.linalg import lu
    lu.ROUTE_BY_SPEED = False  # the LU kernels on every shape they serve (not torch's where it was faster)
    if os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("FASTPATH_BOUNDS", "1") == "1":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from tests.bounds import install  # every access of every kernel inside its tensors (a mismatch if not)
        install()
    todo = [c for c in CASES if ONLY is None or any(o in c.__name__ for o in ONLY)]
    fails, counts = [], {}
    t0, i = time.time(), 0
    # the budget holds inside a case too (an interpreted 32x32 pinv with the bounds checker ran >10 minutes):
    # a case still running at the end is stopped and reported as unfinished, not as a mismatch
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(max(1, int(BUDGET)))
    while todo and time.time() - t0 < BUDGET:
        c = todo[i % len(todo)]
        i += 1
        counts[c.__name__] = counts.get(c.__name__, 0) + 1
        try:
            ok, cfg = c()
        except _OverBudget:
            counts[c.__name__] -= 1
            print("unfinished at the budget:", c.__name__, flush=True)
            break
        except Exception as exc:  # noqa: BLE001 - an error where torch gave an answer
            where = traceback.format_exc().splitlines()[-3][:160]
            msg = str(exc) if len(str(exc)) <= 400 else f"{str(exc)[:120]} ... {str(exc)[-280:]}"  # (the cause
            ok, cfg = False, f"raised {type(exc).__name__}: {msg} / {where}"  # of a CompilationError ends it)
        if not ok:
            print("FAIL", c.__name__, cfg, flush=True)
            fails.append((c.__name__, cfg))
    signal.alarm(0)
    print("cases", counts, "mismatches", len(fails), flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
