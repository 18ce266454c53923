"""Eager replays of the launch memo (fastpath._core.memo) in the ops that use it, on a GPU:
after a recorded call, calls with fresh tensors of the same properties must give fresh,
correct results (the replay passes the new pointers). The mechanics are tested with fakes
on the CPU in tests/test_core.py; linear's replay in tests/ops/test_linear.py."""
import importlib

import pytest
import torch
import torch.nn.functional as F

from fastpath.ops import norm, softmax
from tests.ops.test_fp8 import FP8_MMA_TOL
from tests.ops.test_moe import experts64
from tests.tolerances import assert_close

pytestmark = [pytest.mark.launch_memo,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch memo replays compiled CUDA kernels")]


def _calls(fn, ref, make, memo, tol=None):
    memo.entries.clear()
    outs = []
    for _ in range(3):
        args = make()
        out = fn(*args)
        outs.append(out)
        assert_close(out, ref(*args), tol=tol)
    assert len({o.data_ptr() for o in outs}) == 3
    assert any(v is not None for v in memo.entries.values())  # recorded, then replayed


@pytest.mark.parametrize("shape", [(4, 1000), (1, 151936)])  # one-row kernel; split rows
@pytest.mark.parametrize("log", [False, True])
def test_softmax_replay(shape, log):
    fn = softmax.log_softmax if log else softmax.softmax
    ref = (lambda x: torch.log_softmax(x.double(), -1)) if log else (lambda x: torch.softmax(x.double(), -1))
    _calls(fn, ref, lambda: (torch.randn(shape, device="cuda", dtype=torch.bfloat16),), softmax._MEMO)


@pytest.mark.parametrize("gated", [False, True])
def test_rms_norm_replay(gated):
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)

    def make():
        x = torch.randn(3, 2048, device="cuda", dtype=torch.bfloat16)
        return (x, torch.randn_like(x) if gated else None)

    def ours(x, g):
        return norm.rms_norm(x, w, 1e-6, gate=g)

    def ref(x, g):
        y = F.rms_norm(x.double(), (2048,), w.double(), 1e-6)
        return y * F.silu(g.double()) if gated else y
    _calls(ours, ref, make, norm._MEMO)


def test_rms_norm_residual_replay():
    """The residual form's two outputs (the normalised sum and the sum) from a replay."""
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    norm._MEMO.entries.clear()
    for _ in range(3):
        x, r = (torch.randn(3, 2048, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out, new_r = norm.rms_norm(x, w, 1e-6, residual=r)
        h = x + r
        assert torch.equal(new_r, h)
        assert_close(out, F.rms_norm(h.double(), (2048,), w.double(), 1e-6))
    _recorded(norm._MEMO)


@pytest.mark.parametrize("tokens", [1, 3, 40])  # row kernels; the decode kernels (eager up to 48 tokens)
@pytest.mark.parametrize("fp8", [False, True])
def test_fused_experts_replay(tokens, fp8):
    from fastpath.ops import moe
    if fp8 and not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch has no float8_e4m3fn")
    E, H, I, k = 8, 256, 128, 2
    gate_up = torch.randn(E, 2 * I, H, device="cuda", dtype=torch.bfloat16) * H ** -0.5
    down = torch.randn(E, H, I, device="cuda", dtype=torch.bfloat16) * I ** -0.5
    scales = {}
    if fp8:
        (gate_up, gs), (down, ds) = moe.quantize_experts(gate_up), moe.quantize_experts(down)
        scales = {"gate_up_scale": gs, "down_scale": ds}

    def make():
        x = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16)
        ids = torch.stack([torch.randperm(E, device="cuda")[:k] for _ in range(tokens)]).to(torch.int32)
        return x, ids, torch.rand(tokens, k, device="cuda")

    def ours(x, ids, w):
        return moe.fused_experts(x, ids, w, gate_up, down, **scales)

    def ref(x, ids, w):
        return experts64(x, ids, w, gate_up, down, gu_s=scales.get("gate_up_scale"), d_s=scales.get("down_scale"))
    _calls(ours, ref, make, moe._MEMO)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("rows", [1, 5, 300])  # matrix-vector; tiled (tensor descriptors on Hopper)
def test_scaled_mm_replay(recipe, rows):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch has no float8_e4m3fn")
    from fastpath.ops.fp8 import ScalingType, quantize_fp8, scaled_mm
    kind = ScalingType.TensorWise if recipe == "tensorwise" else ScalingType.RowWise
    qw, sw = quantize_fp8(torch.randn(1000, 512, device="cuda"), recipe)

    def make():
        return quantize_fp8(torch.randn(rows, 512, device="cuda"), recipe)

    def ours(qa, sa):
        return scaled_mm(qa, qw.t(), sa, kind, sw.t() if recipe == "rowwise" else sw, kind,
                         output_dtype=torch.float32)

    def ref(qa, sa):
        a = qa.double() * sa.double().reshape(-1, 1)
        w = qw.double() * sw.double().reshape(-1, 1)
        return a @ w.t()
    mm = importlib.import_module("fastpath.ops.fp8.scaled_mm")
    # the tiled path's fp8 tensor cores accumulate with fewer bits (a wrong replay is off by ~1)
    tol = 2 * FP8_MMA_TOL if rows > mm.MV_MAX_M else 1e-5
    _calls(ours, ref, make, mm._MEMO, tol=tol)


@pytest.mark.parametrize("rows,args", [(1, (0.0, None, None)), (3, (0.7, 50, 0.9)), (2, (1.0, None, None))])
def test_sample_replay(rows, args):
    """Greedy, top-k/top-p (split over programs: a ticket counter in a workspace) and plain
    temperature sampling replayed: each call's tokens equal, with the same generator state,
    the reference path's (greedy, top-k: token for token by construction) or the op's own
    path's (full-vocabulary sampling, whose float32 CDF may round differently)."""
    from fastpath.ops import sampling
    sampling._MEMO.entries.clear()
    outs = []
    for _ in range(3):
        x = torch.randn(rows, 151936, device="cuda") * 3
        out = sampling.sample(x, *args, generator=torch.Generator("cuda").manual_seed(7))
        if args[1] is None and args[0] > 0:
            ref = sampling._sample_op(*sampling._checked(x, *args, torch.Generator("cuda").manual_seed(7)))
        else:
            ref = sampling.reference_sample(x, *args, generator=torch.Generator("cuda").manual_seed(7))
        assert torch.equal(out, ref)
        outs.append(out)
    assert len({o.data_ptr() for o in outs}) == 3
    _recorded(sampling._MEMO)


def test_pad_replay():
    """Constant (a float fill, then -0.0, NaN, int64 fills), reflect and channels-last pads
    replayed with fresh inputs, each against F.pad."""
    from fastpath.ops import pad
    pad._MEMO.entries.clear()
    cases = [(torch.float32, (1, 2, 3, 0), "constant", 1.5), (torch.float32, (1, 2, 3, 0), "constant", -0.0),
             (torch.float32, (0, 1, 2, 2), "constant", float("nan")), (torch.float32, (2, 2, 1, 3), "reflect", None),
             (torch.int64, (0, 3), "constant", 2 ** 40 + 1), (torch.int64, (0, 3), "constant", 2 ** 40)]
    for dtype, p, mode, value in cases:
        for _ in range(3):
            x = (torch.randn(2, 8, 5, 7, device="cuda") * 100).to(dtype)
            out = pad.pad(x, p, mode=mode, value=value)
            ref = F.pad(x, p, mode=mode, value=value)
            assert torch.equal(out, ref) if value == value else torch.equal(out.isnan(), ref.isnan())
            assert torch.equal(out.signbit(), ref.signbit())
    x = torch.randn(2, 8, 5, 7, device="cuda").to(memory_format=torch.channels_last)
    for _ in range(3):
        x = torch.randn_like(x)
        assert torch.equal(pad.pad(x, (1, 1, 1, 1)), F.pad(x, (1, 1, 1, 1)))
    _recorded(pad._MEMO)


def _recorded(*memos):
    assert all(any(v is not None for v in m.entries.values()) for m in memos)  # recorded, then replayed


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_mse_loss_replay(reduction):
    """Forward and backward of the eager autograd path, three calls with fresh tensors."""
    from fastpath.ops import loss
    loss._MEMO_FWD.entries.clear()
    loss._MEMO_BWD.entries.clear()
    for _ in range(3):
        x = torch.randn(64, 1000, device="cuda", requires_grad=True)
        t = torch.randn(64, 1000, device="cuda")
        g = torch.randn(64, 1000, device="cuda") if reduction == "none" else torch.tensor(0.7, device="cuda")
        y = loss.mse_loss(x, t, reduction=reduction)
        x64 = x.detach().double().requires_grad_()
        ref = F.mse_loss(x64, t.double(), reduction=reduction)
        assert_close(y, ref)
        assert_close(torch.autograd.grad(y, x, g)[0], torch.autograd.grad(ref, x64, g.double())[0])
    _recorded(loss._MEMO_FWD, loss._MEMO_BWD)


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_mse_loss_no_grad_replay(reduction):
    """Evaluation (no autograd): the forward alone replays, three calls with fresh tensors."""
    from fastpath.ops import loss
    _calls(lambda x, t: loss.mse_loss(x, t, reduction=reduction),
           lambda x, t: F.mse_loss(x.double(), t.double(), reduction=reduction),
           lambda: (torch.randn(64, 1000, device="cuda"), torch.randn(64, 1000, device="cuda")), loss._MEMO_FWD)


def test_dropout_replay():
    """Each replay takes the new call's seed: fresh masks, each output and gradient the input
    (and the output gradient) times its own mask / (1 - p)."""
    from fastpath.ops import dropout as D
    D._MEMO_FWD.entries.clear()
    D._MEMO_BWD.entries.clear()
    masks = []
    for _ in range(3):
        x = (torch.rand(4096, device="cuda") + 0.5).requires_grad_()
        g = torch.rand(4096, device="cuda") + 0.5
        y = D.dropout(x, 0.3)
        keep = y != 0
        assert_close(y, x.detach() * keep / 0.7)
        assert_close(torch.autograd.grad(y, x, g)[0], g * keep / 0.7)
        masks.append(keep)
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    _recorded(D._MEMO_FWD, D._MEMO_BWD)


def test_dropout_no_grad_replay():
    """Without autograd (no mask kept: an empty mask tensor, a null pointer, as the kernel's
    argument) the forward replays too, each call with its own seed."""
    from fastpath.ops import dropout as D
    D._MEMO_FWD.entries.clear()
    masks = []
    for _ in range(3):
        x = torch.rand(4096, device="cuda") + 0.5
        y = D.dropout(x, 0.3)
        keep = y != 0
        assert_close(y, x * keep / 0.7)
        masks.append(keep)
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    _recorded(D._MEMO_FWD)


@pytest.mark.parametrize("layout", ["2-D", "NCHW", "channels-last"])
def test_batch_norm_replay(layout):
    """Training forward + backward (y, running statistics, dx, dweight, dbias) three times."""
    from fastpath.ops import batch_norm as bn
    bn._MEMO_FWD.entries.clear()
    bn._MEMO_BWD.entries.clear()
    shape = (512, 64) if layout == "2-D" else (4, 64, 7, 9)
    w = torch.randn(64, device="cuda", requires_grad=True)
    b = torch.randn(64, device="cuda", requires_grad=True)
    rm, rv = torch.zeros(64, device="cuda"), torch.ones(64, device="cuda")
    rm64, rv64 = rm.double(), rv.double()
    for _ in range(3):
        x = torch.randn(shape, device="cuda") * 2 + 1
        if layout == "channels-last":
            x = x.to(memory_format=torch.channels_last)
        x.requires_grad_()
        g = torch.randn_like(x)
        y = bn.batch_norm(x, rm, rv, w, b, training=True)
        leaves64 = [t.detach().double().requires_grad_() for t in (x, w, b)]
        ref = F.batch_norm(leaves64[0], rm64, rv64, leaves64[1], leaves64[2], training=True)
        assert_close(y, ref)
        assert y.stride() == x.stride()
        assert_close(rm, rm64) and assert_close(rv, rv64)
        for got, want in zip(torch.autograd.grad(y, (x, w, b), g), torch.autograd.grad(ref, leaves64, g.double())):
            assert_close(got, want)
    _recorded(bn._MEMO_FWD, bn._MEMO_BWD)


def test_linalg_replays():
    """inv / inv_ex / solve / pinv, three calls each with fresh tensors: correct results, the
    singular check still raised after replays; a broadcast solve (its info copied by a torch op)
    is never recorded and stays correct."""
    small = importlib.import_module("fastpath.ops.linalg.small")
    svd = importlib.import_module("fastpath.ops.linalg.svd")

    def square(*batch, n=4):
        return torch.randn(*batch, n, n, device="cuda", dtype=torch.float64) + 3 * torch.eye(n, device="cuda")
    _calls(small.inv, lambda a: torch.linalg.inv(a), lambda: (square(300),), small._INV_MEMO, tol=1e-9)
    _calls(lambda a, b: small.solve(a, b, left=False), lambda a, b: torch.linalg.solve(a, b, left=False),
           lambda: (square(50, n=3), torch.randn(50, 2, 3, device="cuda", dtype=torch.float64)), small._SOLVE_MEMO,
           tol=1e-9)
    _calls(lambda a: svd.pinv(a, rtol=1e-6), lambda a: torch.linalg.pinv(a.double(), rtol=1e-6),
           lambda: (torch.randn(100, 8, 6, device="cuda"),), svd._PINV_MEMO, tol=1e-4)
    singular = square(300)
    singular[7] = 0
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 7"):
        small.inv(singular)  # the memo's replay, then the check
    small._SOLVE_MEMO.entries.clear()
    for _ in range(3):
        a, b = square(1, n=3), torch.randn(5, 3, 2, device="cuda", dtype=torch.float64)
        x, info = small.solve_ex(a, b)
        assert_close(x, torch.linalg.solve(a, b), tol=1e-9)
        assert info.shape == (1,) and int(info[0]) == 0
    assert all(v is None for v in small._SOLVE_MEMO.entries.values())


@pytest.mark.parametrize("case", ["decode gqa kv_len", "decode gate", "decode bool mask", "prefill causal"])
def test_attention_replay(case):
    """scaled_dot_product_attention's launches replayed with fresh tensors (the decode kernel
    and its split combine, keys and values through tensor descriptors on the H200, which a
    replay makes again on the new tensors): each result against float64 PyTorch."""
    from fastpath.ops import attention as A
    lq = 64 if case.startswith("prefill") else 1

    def make():
        q = torch.randn(1, 32, lq, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.bfloat16)
        extra = {}
        if case == "decode gqa kv_len":
            extra["kv_len"] = torch.randint(500, 1024, (1,), device="cuda", dtype=torch.int32)
        if case == "decode gate":
            extra["out_gate"] = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        if case == "decode bool mask":
            extra["attn_mask"] = torch.rand(1, 1, 1, 1024, device="cuda") > 0.3
        return q, k, v, extra

    def ours(q, k, v, extra):
        return A.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=case.startswith("prefill"), **extra)

    def ref(q, k, v, extra):
        kr, vr = (t.double().repeat_interleave(4, dim=1) for t in (k, v))
        mask = extra.get("attn_mask")
        if "kv_len" in extra:
            mask = torch.arange(1024, device="cuda")[None, None, None, :] < extra["kv_len"].view(-1, 1, 1, 1)
        out = F.scaled_dot_product_attention(q.double(), kr, vr, attn_mask=mask,
                                             is_causal=case.startswith("prefill"))
        return out * torch.sigmoid(extra["out_gate"].double()) if "out_gate" in extra else out
    _calls(lambda *a: ours(*a), ref, make, A._MEMO, tol=2e-2)


def test_elementwise_replays():
    """frexp (two outputs), heaviside and an unsigned comparison replayed with fresh tensors,
    each against PyTorch (the comparison against Python's integers)."""
    from fastpath.ops import elementwise as ew
    for memo in (ew._MEMO_FREXP, ew._MEMO_HEAVISIDE, ew._MEMO_CMP):
        memo.entries.clear()
    for _ in range(3):
        x = torch.randn(4, 1000, device="cuda", dtype=torch.bfloat16) * 1e3
        m, e = ew.frexp(x)
        mt, et = torch.frexp(x)
        assert torch.equal(m, mt) and torch.equal(e, et)
        v = torch.randn(1000, device="cuda", dtype=torch.float32)
        xf = torch.randint(-1, 2, (4, 1000), device="cuda").float()
        assert torch.equal(ew.heaviside(xf, v), torch.heaviside(xf, v))
        a = torch.randint(0, 2**63 - 1, (3000,), device="cuda", dtype=torch.int64)
        b = torch.randint(0, 2**63 - 1, (3000,), device="cuda", dtype=torch.int64)
        au = (a * 2 + (a & 1)).view(torch.uint64)  # values above the signed range too
        bu = (b * 2 + (b & 1)).view(torch.uint64)
        got = ew.gt(au, bu).cpu()
        want = [x > y for x, y in zip(_u64(au), _u64(bu))]
        assert got.tolist() == want
    _recorded(ew._MEMO_FREXP, ew._MEMO_HEAVISIDE, ew._MEMO_CMP)


def _u64(t):
    return [v & (2**64 - 1) for v in t.view(torch.int64).cpu().tolist()]


def test_bincount_replays():
    """bincount's three eager forms replayed with fresh values, each against torch.bincount:
    validate=False, validate=True with minlength (a range read back) and without (counted into
    the speculative bins, cut to size); a replayed call's range flags a negative value too."""
    from fastpath.ops import bincount as bc
    bc._MEMO.entries.clear()
    for _ in range(3):
        x = torch.randint(0, 1000, (100_000,), device="cuda")
        w = torch.randn(100_000, device="cuda")
        assert torch.equal(bc.bincount(x, minlength=1000, validate=False), torch.bincount(x, minlength=1000))
        assert torch.equal(bc.bincount(x, minlength=1000), torch.bincount(x, minlength=1000))
        assert torch.equal(bc.bincount(x), torch.bincount(x))
        assert_close(bc.bincount(x, w), torch.bincount(x.cpu(), w.cpu().double()), dtype=torch.float32)
    x[7] = -2
    with pytest.raises(ValueError, match="got -2"):
        bc.bincount(x)
    _recorded(bc._MEMO)
