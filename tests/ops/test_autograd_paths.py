"""Ops whose kernels have no backward, called with an input that requires grad while autograd
records: each takes its PyTorch path (or says it cannot), never an output that silently drops
the gradient. Gradients against float64 autograd of independent formulas written here."""
import pytest
import torch
import torch.nn.functional as F

import fastpath
from tests.conftest import DEVICE, randn
from tests.tolerances import assert_close


def _leaf(t):
    return t.detach().clone().requires_grad_()


def _grads(fn, *inputs):
    """``fn(*inputs)``'s value and the gradients of ``(value * fixed weights).sum()`` wrt inputs."""
    leaves = [_leaf(t) for t in inputs]
    out = fn(*leaves)
    torch.manual_seed(3)
    cot = torch.randn(out.shape, dtype=torch.float64).to(device=out.device, dtype=out.dtype)
    return (out.detach(), *torch.autograd.grad((out * cot).sum(), leaves))


def _check(ours, ref, *inputs, dtype=torch.float32):
    got, want = _grads(ours, *inputs), _grads(ref, *(t.double() for t in inputs))
    for g, w in zip(got, want):
        assert_close(g, w, dtype)


def test_rms_norm_gradients():
    x, w, r = randn(3, 40), randn(40), randn(3, 40)

    def ref(x, w, r):
        h = x + r
        return w * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    _check(lambda x, w, r: fastpath.rms_norm(x, w, 1e-6, residual=r)[0], ref, x, w, r)
    _check(lambda x, w: fastpath.rms_norm(x, w, 1e-6), lambda x, w: ref(x, w, torch.zeros_like(x)), x, w)


def test_channel_rms_norm_gradients():
    x, g = randn(1, 3, 2, 4, 4), randn(3, 1, 1, 1)

    def ref(x, g):
        return F.silu(F.normalize(x, dim=1, eps=1e-12) * 3 ** 0.5 * g)
    _check(lambda x, g: fastpath.channel_rms_norm(x, g, 0.0, silu=True), ref, x, g)


def test_take_and_frexp_gradients():
    x, i = randn(4, 5), torch.tensor([0, 7, 19, 7], device=DEVICE)
    _check(lambda x: fastpath.take(x, i), lambda x: x.flatten()[i], x)
    _check(lambda x: fastpath.frexp(x)[0], lambda x: x / torch.exp2(torch.frexp(x.detach())[1]), x)


def test_heaviside_says_it_has_no_derivative_as_torch():
    out = fastpath.heaviside(_leaf(randn(5)), torch.tensor([0.5], device=DEVICE))
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="not implemented"):
        out.sum().backward()


def test_route_and_router_gradients():
    logits = randn(3, 8)
    ids = fastpath.route(logits, 2, norm_topk_prob=True)[1]

    def ref(lg):
        p = torch.softmax(lg, -1).gather(-1, ids)
        return p / p.sum(-1, keepdim=True)
    _check(lambda lg: fastpath.route(lg, 2, norm_topk_prob=True)[0], ref, logits)
    x, w = randn(2, 16), randn(8, 16)
    rids = fastpath.router(x, w, 2)[1]
    _check(lambda x, w: fastpath.router(x, w, 2)[0],
           lambda x, w: torch.softmax(x @ w.T, -1).gather(-1, rids), x, w)


def test_fused_experts_gradients():
    E, I, H = 4, 8, 16
    x, gu, dn = randn(3, H), randn(E, 2 * I, H) / 4, randn(E, H, I) / 3
    tw, ids = fastpath.route(randn(3, E), 2)

    def ref(x, tw, gu, dn):
        out = []
        for t in range(x.shape[0]):
            acc = 0
            for j in range(ids.shape[1]):
                e = int(ids[t, j])
                g, u = (gu[e] @ x[t]).chunk(2)
                acc = acc + tw[t, j] * (dn[e] @ (F.silu(g) * u))
            out.append(acc)
        return torch.stack(out)
    _check(lambda x, tw, gu, dn: fastpath.fused_experts(x, ids, tw, gu, dn), ref, x, tw, gu, dn)


def _same_grads(ours, composed, *inputs):
    for g, w in zip(_grads(ours, *inputs), _grads(composed, *inputs)):
        assert torch.equal(g, w)


def test_fused_moe_layer_gradients():
    """The one-launch MoE layer (norm, router, experts) takes the separate calls' PyTorch paths
    (each checked against float64 above): the same values and gradients, bit for bit."""
    from fastpath.ops.moe import moe_layer, rms_norm_moe
    E, I, H = 4, 8, 16
    d, h, nw, rw = randn(1, H), randn(1, H), randn(H), randn(E, H)
    gu, dn = randn(E, 2 * I, H) / 4, randn(E, H, I) / 3

    def composed(d, h, nw, rw, gu, dn):
        xn, h2 = fastpath.rms_norm(d, nw, 1e-6, residual=h)
        w, ids = fastpath.router(xn, rw, 2)
        return fastpath.fused_experts(xn, ids, w, gu, dn) + h2
    _same_grads(lambda d, h, nw, rw, gu, dn: sum(rms_norm_moe(d, nw, 1e-6, rw, 2, gu, dn, residual=h)), composed,
                d, h, nw, rw, gu, dn)

    def routed(d, rw, gu, dn):
        w, ids = fastpath.router(d, rw, 2)
        return fastpath.fused_experts(d, ids, w, gu, dn)
    _same_grads(lambda d, rw, gu, dn: moe_layer(d, rw, 2, gu, dn), routed, d, rw, gu, dn)


def test_gated_delta_kernels_refuse_autograd():
    q, k, v = randn(1, 3, 2, 8), randn(1, 3, 2, 8), randn(1, 3, 2, 8)
    g, beta = -randn(1, 3, 2).abs(), randn(1, 3, 2).sigmoid()
    with pytest.raises(NotImplementedError, match="inference-only"):
        fastpath.chunk_gated_delta_rule(_leaf(q), k, v, g, beta)
    with pytest.raises(NotImplementedError, match="inference-only"):
        fastpath.recurrent_gated_delta_rule(q, k, v, g, _leaf(beta))
    with pytest.raises(NotImplementedError, match="inference-only"):
        fastpath.gated_delta_rule_step(q[:, 0], k[:, 0], _leaf(v[:, 0]), g[:, 0], beta[:, 0],
                                       torch.zeros(1, 2, 8, 8, device=DEVICE))
    with torch.no_grad():  # the same calls without autograd run
        assert fastpath.chunk_gated_delta_rule(_leaf(q), k, v, g, beta)[0].shape == v.shape
