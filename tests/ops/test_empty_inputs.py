"""Inputs with a zero-sized dimension give what PyTorch gives (shape, dtype, values, and the
running statistics batch_norm leaves alone), through every public op that takes them: the
kernels' shape arithmetic must not divide by, reshape around or index into a zero. (A
K = 0 linear, an n = 0 inverse, k = 0 right-hand sides and an empty batch_norm once raised
internal errors here.)"""
import pytest
import torch
import torch.nn.functional as F

import fastpath
from fastpath import ScalingType

BF = torch.bfloat16


def _scaled_mm_no_rows():
    a, sa = fastpath.quantize_fp8(torch.randn(4, 16), "tensorwise")
    b, sb = fastpath.quantize_fp8(torch.randn(8, 16), "tensorwise")
    return fastpath.scaled_mm(a[:0], b.t(), sa, ScalingType.TensorWise, sb, ScalingType.TensorWise,
                              output_dtype=torch.float32)


def _cases():
    x0, w0 = torch.randn(2, 0).to(BF), torch.randn(4, 0).to(BF)
    b4 = torch.randn(4).to(BF)
    tri = torch.randn(2, 40, 40).triu() + 10 * torch.eye(40)
    A = torch.randn(2, 4, 4) + 4 * torch.eye(4)
    LU, piv = torch.linalg.lu_factor(A)
    E, H, I = 4, 8, 6
    gu, dn = torch.randn(E, 2 * I, H), torch.randn(E, H, I)
    return {
        "softmax rows 0": (lambda: fastpath.softmax(torch.zeros(0, 5), -1), lambda: torch.zeros(0, 5)),
        "log_softmax width 0": (lambda: fastpath.log_softmax(torch.zeros(5, 0), -1), lambda: torch.zeros(5, 0)),
        "linear K 0 with bias": (lambda: fastpath.linear(x0, w0, b4), lambda: F.linear(x0, w0, b4)),
        "linear M 0": (lambda: fastpath.linear(torch.randn(0, 8).to(BF), torch.randn(4, 8).to(BF)),
                       lambda: torch.zeros(0, 4, dtype=BF)),
        "linear N 0": (lambda: fastpath.linear(torch.randn(2, 8).to(BF), torch.randn(0, 8).to(BF)),
                       lambda: torch.zeros(2, 0, dtype=BF)),
        "rms_norm rows 0": (lambda: fastpath.rms_norm(torch.zeros(0, 16), torch.ones(16), 1e-6),
                            lambda: torch.zeros(0, 16)),
        "sdpa keys 0": (lambda: fastpath.scaled_dot_product_attention(torch.ones(1, 4, 3, 16), torch.ones(1, 4, 0, 16),
                                                                      torch.ones(1, 4, 0, 16)),
                        lambda: F.scaled_dot_product_attention(torch.ones(1, 4, 3, 16), torch.ones(1, 4, 0, 16),
                                                               torch.ones(1, 4, 0, 16))),
        "mse_loss mean of nothing": (lambda: fastpath.mse_loss(torch.zeros(0, 3), torch.zeros(0, 3)),
                                     lambda: F.mse_loss(torch.zeros(0, 3), torch.zeros(0, 3))),
        "bincount empty": (lambda: fastpath.bincount(torch.zeros(0, dtype=torch.long), minlength=3),
                           lambda: torch.bincount(torch.zeros(0, dtype=torch.long), minlength=3)),
        "scaled_mm M 0": (_scaled_mm_no_rows, lambda: torch.zeros(0, 8)),
        "fused_experts tokens 0": (lambda: fastpath.fused_experts(torch.zeros(0, H), torch.zeros(0, 2,
                                                                                                 dtype=torch.long),
                                                                  torch.zeros(0, 2), gu, dn),
                                   lambda: torch.zeros(0, H)),
        "inv n 0": (lambda: fastpath.linalg.inv(torch.zeros(3, 0, 0)), lambda: torch.zeros(3, 0, 0)),
        "inv_ex n 0 info": (lambda: fastpath.linalg.inv_ex(torch.zeros(3, 0, 0)).info,
                            lambda: torch.zeros(3, dtype=torch.int32)),
        "solve k 0": (lambda: fastpath.linalg.solve(A, torch.zeros(2, 4, 0)), lambda: torch.zeros(2, 4, 0)),
        "solve_triangular k 0": (lambda: fastpath.linalg.solve_triangular(tri, torch.zeros(2, 40, 0), upper=True),
                                 lambda: torch.zeros(2, 40, 0)),
        "solve_triangular right k 0": (lambda: fastpath.linalg.solve_triangular(tri, torch.zeros(2, 0, 40), upper=True,
                                                                                left=False),
                                       lambda: torch.zeros(2, 0, 40)),
        "lu_solve k 0": (lambda: fastpath.linalg.lu_solve(LU, piv, torch.zeros(2, 4, 0)), lambda: torch.zeros(2, 4, 0)),
        "det n 0": (lambda: fastpath.linalg.det(torch.zeros(3, 0, 0)), lambda: torch.ones(3)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_empty_input_gives_what_pytorch_gives(name):
    ours, ref = CASES[name]
    got, want = ours(), ref()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("shape", [(1, 4, 0), (0, 4)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_without_values_leaves_the_running_statistics(shape, training):
    x = torch.randn(shape, requires_grad=True)
    w, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    y = fastpath.batch_norm(x, rm, rv, w, b, training=training)
    assert y.shape == x.shape and y.dtype == x.dtype
    gx, gw, gb = torch.autograd.grad(y.sum(), (x, w, b), allow_unused=True)
    assert gx.shape == x.shape
    for g in (gw, gb):  # nothing flows back to the affine parameters (zero or no gradient)
        assert g is None or torch.equal(g, torch.zeros(4))
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)
