"""Qwen3.5's fused decode step (short conv on a ring state + gated delta rule) against a float64
oracle: the conv by F.conv1d over the whole sequence and the recurrence of test_gated_delta."""
import pytest
import torch
import torch.nn.functional as F

from fastpath.ops.gated_delta_conv import (gated_delta_conv_step, reference_gated_delta_conv_step, ring_history,
                                           ring_store)
from tests.conftest import DEVICE, randn
from tests.ops.test_gated_delta import f64_rule
from tests.tolerances import assert_close

# GQA (2 value heads per key head), dims that are not powers of two, Dv over two of the
# interpreter's 16-wide blocks; 4 conv taps and more steps than ring slots.
B, HK, HV, DK, DV, K, T, START = 2, 2, 4, 20, 24, 4, 6, 5
C = 2 * HK * DK + HV * DV


def _inputs(dtype):
    x = randn(B, START + T, C, dtype=dtype)  # the conv inputs of every token of both rows
    w = randn(C, K, dtype=dtype) * 0.5
    a, b = randn(B, T, HV), randn(B, T, HV)
    a_log, dt_bias = torch.rand(HV, device=DEVICE) - 0.5, randn(HV)
    s0 = randn(B, HV, DK, DV) * 0.1
    return x, w, a, b, a_log, dt_bias, s0


def _oracle(x, w, a, b, a_log, dt_bias, s0, dtype):
    """float64: silu(conv) over the whole sequence (rounded to dtype, as the conv stores it),
    the raw gates, the recurrence over the last T tokens from s0."""
    xx = x.double().cpu().transpose(1, 2)
    conv = F.silu(F.conv1d(F.pad(xx, (K - 1, 0)), w.double().cpu()[:, None], groups=C))[:, :, START:]
    mixed = conv.to(dtype).double().transpose(1, 2)
    kd = HK * DK
    q, k, v = (mixed[..., :kd].unflatten(-1, (HK, DK)), mixed[..., kd:2 * kd].unflatten(-1, (HK, DK)),
               mixed[..., 2 * kd:].unflatten(-1, (HV, DV)))
    g = -torch.exp(a_log.double().cpu()) * F.softplus(a.double().cpu() + dt_bias.double().cpu())
    return f64_rule(q, k, v, g, torch.sigmoid(b.double().cpu()), s0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("path", ["kernel", "reference", "slices"])
def test_conv_step_matches_float64(dtype, path, monkeypatch):
    """("slices": the kernel with the grid's limit lowered so that each batch row launches alone)"""
    if path == "slices":
        from fastpath.ops import gated_delta as G
        monkeypatch.setattr(G, "GRID_Y_MAX", HV)
    x, w, a, b, a_log, dt_bias, s0 = _inputs(dtype)
    ring = torch.zeros(B, C, K, dtype=dtype, device=DEVICE)  # (the values of the unused slot don't matter)
    ring_store(ring, x[:, START - (K - 1):START].transpose(1, 2), START)  # a prefill of START tokens
    assert torch.equal(ring_history(ring, START), x[:, START - (K - 1):START].transpose(1, 2))
    state = s0.clone()
    step = {"kernel": gated_delta_conv_step, "slices": gated_delta_conv_step,
            "reference": lambda *args, key_heads: reference_gated_delta_conv_step(*args, key_heads)}[path]
    outs = []
    for t in range(T):
        pos = torch.full((B,), START + t, dtype=torch.int64, device=DEVICE)
        outs.append(step(x[:, START + t], ring, w, pos, a[:, t], b[:, t], state, a_log, dt_bias, key_heads=HK))
    ref_o, ref_s = _oracle(x, w, a, b, a_log, dt_bias, s0, dtype)
    got = torch.stack(outs, 1)
    assert got.shape == (B, T, HV, DV) and got.dtype == dtype
    assert_close(got, ref_o, dtype)
    assert_close(state, ref_s, torch.float32)
    assert torch.equal(ring_history(ring, START + T), x[:, START + T - (K - 1):].transpose(1, 2))


def test_conv_step_errors():
    x, w, a, b, a_log, dt_bias, s0 = _inputs(torch.float32)
    ring, pos = torch.zeros(B, C, K, device=DEVICE), torch.zeros(B, dtype=torch.int64, device=DEVICE)
    args = (x[:, 0], ring, w, pos, a[:, 0], b[:, 0], s0, a_log, dt_bias)
    with pytest.raises(ValueError, match="key_heads"):
        gated_delta_conv_step(*args, key_heads=3)
    with pytest.raises(ValueError, match="qkv"):
        gated_delta_conv_step(x[:, 0, 1:], *args[1:], key_heads=HK)
    with pytest.raises(ValueError, match="conv_state"):
        gated_delta_conv_step(args[0], ring[:, :, 1:], *args[2:], key_heads=HK)
    with pytest.raises(TypeError, match="pos"):
        gated_delta_conv_step(*args[:3], pos.int(), *args[4:], key_heads=HK)
    with pytest.raises(TypeError, match="state"):
        gated_delta_conv_step(*args[:6], s0.double(), *args[7:], key_heads=HK)
    with pytest.raises(ValueError, match="conv_weight"):
        gated_delta_conv_step(args[0], ring, w[1:], *args[3:], key_heads=HK)
    with pytest.raises(TypeError, match="qkv"):
        gated_delta_conv_step(x[:, 0].long(), *args[1:], key_heads=HK)
    with pytest.raises(ValueError, match="dt_bias"):
        gated_delta_conv_step(*args[:8], dt_bias[1:], key_heads=HK)
    with pytest.raises(ValueError, match="A_log"):
        gated_delta_conv_step(*args[:7], a_log.long(), dt_bias, key_heads=HK)
