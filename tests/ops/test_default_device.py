"""The public ops under another default device (``torch.set_default_device`` / ``with
torch.device(...)``, as gpt-fast-style code and some Hugging Face loading paths set it) or
default dtype: with every input on the test device, each op must give what it gives without
the default set, on the inputs' device. A tensor the op makes without naming a device would
land on the default device ("meta" here): a kernel launched on it, a read back from it or an
output there fails the test; one made without a dtype would be float64. (The compiled sweep
found bincount's and take's validating read and pad's fill value made that way.)"""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import fastpath
from tests.conftest import DEVICE


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


def _ones(*shape):
    return torch.ones(*shape, device=DEVICE, dtype=torch.float32)


def _eye(n):
    return torch.eye(n, device=DEVICE, dtype=torch.float32)


def _ids(n, hi):
    return torch.randint(0, hi, (n,), device=DEVICE)


def _cases():
    x, w = _rand(3, 40), _rand(24, 40)
    h1 = _rand(1, 32)
    E, I = 4, 16
    gate_up, down = _rand(E, 2 * I, 32) / 6, _rand(E, 32, I) / 4
    wts, ids = fastpath.route(_rand(1, E), 2, norm_topk_prob=True)
    q = _rand(1, 4, 1, 16)
    kv = _rand(1, 2, 9, 16)
    vid = _rand(1, 3, 2, 5, 6)
    rm, rv = _rand(5).abs(), _rand(5).abs() + 1
    return {
        "linear": lambda: fastpath.linear(x[:1], w),
        "softmax": lambda: fastpath.softmax(x, -1),
        "rms_norm": lambda: fastpath.rms_norm(x, _ones(40), 1e-6),
        "pad value": lambda: fastpath.pad(vid, (1, 1, 1, 1, 2, 0), value=0.25),
        "pad replicate": lambda: fastpath.pad(vid, (1, 2, 0, 1, 1, 0), mode="replicate"),
        "bincount validated": lambda: fastpath.bincount(_ids(50, 7), minlength=9),
        "bincount weighted": lambda: fastpath.bincount(_ids(50, 7), _rand(50).double()),
        "take validated": lambda: fastpath.take(x, _ids(10, 120)),
        "frexp": lambda: fastpath.frexp(x),
        "heaviside": lambda: fastpath.heaviside(x, x[:1]),
        "eq uint8": lambda: fastpath.eq(_ids(30, 256).to(torch.uint8), 200),
        "mse_loss": lambda: fastpath.mse_loss(x, x.flip(0), reduction="sum"),
        "dropout": lambda: fastpath.dropout(x, 0.3, generator=_gen()),
        "batch_norm": lambda: fastpath.batch_norm(_rand(4, 5, 3), rm.clone(), rv.clone(), training=True),
        "route": lambda: fastpath.route(x[:, :8], 2, "sigmoid"),
        "fused_experts": lambda: fastpath.fused_experts(h1, ids, wts, gate_up, down),
        "grouped_mm": lambda: fastpath.grouped_mm(_rand(6, 32), gate_up[:2].transpose(1, 2),
                                                  offs=torch.tensor([2, 6], dtype=torch.int32, device=DEVICE)),
        "sdpa decode": lambda: fastpath.scaled_dot_product_attention(q, kv, kv, enable_gqa=True),
        "quantize_fp8 rowwise": lambda: fastpath.quantize_fp8(x, "rowwise"),
        "sample greedy": lambda: fastpath.sample(x, temperature=0.0),
        "causal_conv3d": lambda: fastpath.causal_conv3d(vid, _rand(2, 3, 2, 3, 3), padding=(1, 1, 1)),
        "causal_conv1d": lambda: fastpath.causal_conv1d(_rand(1, 6, 5), _rand(6, 3), activation="silu"),
        "inv": lambda: fastpath.linalg.inv(_rand(3, 4, 4) + 4 * _eye(4)),
        "solve_ex": lambda: fastpath.linalg.solve_ex(_rand(2, 5, 5) + 5 * _eye(5), _rand(2, 5, 2)),
        "lu_factor_ex": lambda: fastpath.linalg.lu_factor_ex(_rand(2, 6, 6)),
        "lu_solve": lambda: fastpath.linalg.lu_solve(*fastpath.linalg.lu_factor(_rand(2, 6, 6)), _rand(2, 6, 1)),
        "det": lambda: fastpath.linalg.det(_rand(3, 4, 4)),
        "slogdet": lambda: fastpath.linalg.slogdet(_rand(3, 4, 4)),
        "solve_triangular": lambda: fastpath.linalg.solve_triangular(
            _rand(2, 5, 5).triu() + 3 * _eye(5), _rand(2, 5, 3), upper=True),
        "qr": lambda: fastpath.linalg.qr(_rand(3, 6, 4)),
        "svd": lambda: fastpath.linalg.svd(_rand(3, 4, 4)),
        "pinv": lambda: fastpath.linalg.pinv(_rand(3, 5, 3)),
        "log_softmax": lambda: fastpath.log_softmax(x, -1),
        "minimum uint16": lambda: fastpath.minimum(_ids(20, 60000).to(torch.uint16), _ids(20, 60000).to(torch.uint16)),
        "scaled_mm rowwise": lambda: _scaled_mm(x, w),
        "quantize_fp8 blockwise": lambda: fastpath.quantize_fp8(_rand(4, 256), "blockwise"),
        "router": lambda: fastpath.router(h1, _rand(E, 32), 2),
        "gated_delta_rule_step": lambda: fastpath.gated_delta_rule_step(
            _rand(1, 2, 16), _rand(1, 2, 16), _rand(1, 4, 16), -_rand(1, 4).abs(), _rand(1, 4).sigmoid(),
            0 * _ones(1, 4, 16, 16)),
        "chunk_gated_delta_rule": lambda: fastpath.chunk_gated_delta_rule(
            _rand(1, 9, 2, 16), _rand(1, 9, 2, 16), _rand(1, 9, 4, 16), -_rand(1, 9, 4).abs(),
            _rand(1, 9, 4).sigmoid()),
        "channel_rms_norm": lambda: fastpath.channel_rms_norm(vid, _ones(3, 1, 1, 1), 0.0,
                                                              silu=True),
        "conv1d": lambda: fastpath.conv1d(_rand(1, 4, 9), _rand(6, 4, 3), padding=1),
        "mse_loss backward": lambda: _grads(lambda a: fastpath.mse_loss(a, x.flip(0)), x),
        "dropout backward": lambda: _grads(lambda a: fastpath.dropout(a, 0.3, generator=_gen()), x),
        "batch_norm backward": lambda: _grads(
            lambda a: fastpath.batch_norm(a, None, None, _ones(5), None, training=True),
            _rand(4, 5, 3)),
    }


def _scaled_mm(x, w):
    qa, sa = fastpath.quantize_fp8(x, "rowwise")
    qw, sw = fastpath.quantize_fp8(w, "rowwise")
    return fastpath.scaled_mm(qa, qw.t(), sa, fastpath.ScalingType.RowWise, sw.t(), fastpath.ScalingType.RowWise,
                              output_dtype=torch.float32)


def _grads(fn, a):
    """``fn(a)`` and the gradient of its sum with respect to ``a`` (the backward run where the
    default device is set too)."""
    a = a.detach().requires_grad_()
    out = fn(a)
    (g,) = torch.autograd.grad(out.sum(), a)
    return out.detach(), g


def _gen():
    return torch.Generator(device=DEVICE).manual_seed(7)


CASES = _cases()


def _flat(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]


@contextlib.contextmanager
def _default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


DEFAULTS = {"device meta": lambda: torch.device("meta"), "dtype float64": lambda: _default_dtype(torch.float64)}


@pytest.mark.parametrize("default", list(DEFAULTS))
@pytest.mark.parametrize("name", list(CASES))
def test_ops_ignore_the_default_device_and_dtype(name, default):
    """Each case twice from the same seed (its random inputs alike), the second time with torch's
    default device "meta" (no data) or its default dtype float64 (an op's own float tensor made
    without a dtype would be float64)."""
    torch.manual_seed(0)
    ref = _flat(CASES[name]())
    torch.manual_seed(0)
    with DEFAULTS[default]():
        out = _flat(CASES[name]())
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.device == r.device, f"{name}: an output on {o.device}, expected {r.device}"
        assert o.shape == r.shape and o.dtype == r.dtype
        assert torch.equal(o, r) or torch.allclose(o.double(), r.double(), rtol=1e-6, atol=0), name


def test_pad_value_is_converted_on_the_host_whatever_the_default_device():
    from fastpath.ops.pad import _fill_bits
    _fill_bits.cache_clear()
    with torch.device("meta"):
        bits = _fill_bits(0.25, torch.float32)
    assert bits == torch.tensor([0.25]).view(torch.int32).item()
    assert torch.equal(fastpath.pad(torch.zeros(1, 1, 2, device=DEVICE), (1, 0), value=-2.0).cpu(),
                       F.pad(torch.zeros(1, 1, 2), (1, 0), value=-2.0))
