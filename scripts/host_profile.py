"""Host time of one eager call of fastpath ops against the PyTorch op, on a GPU: wall clock
of many calls with no sync between them (``harness.host_us``), then a cProfile of ours (top
functions by own time). What the eager rows of the bench tables measure on a slow host. The
training ops run forward + backward; ``FASTPATH_LAUNCH_MEMO=0`` shows them (and the others)
without the launch memo's replays.

    PYTHONPATH=src python3 scripts/host_profile.py [--profile]
"""
import sys

import torch
import torch.nn.functional as F

import fastpath
from fastpath.bench.harness import host_us, print_profile
from fastpath.ops.fp8 import ScalingType

dev = torch.device("cuda")


def cases():
    x = torch.randn(1, 4096, device=dev).bfloat16()
    w = torch.randn(4096, 4096, device=dev).bfloat16()
    qa, sa = fastpath.quantize_fp8(x.float(), "tensorwise")
    qw, sw = fastpath.quantize_fp8(w.float(), "tensorwise")
    qb, sb = fastpath.quantize_fp8(torch.randn(4096, 4096, device=dev), "tensorwise")  # the tiled path
    q = torch.randn(1, 32, 1, 128, device=dev).bfloat16()
    k = torch.randn(1, 8, 1024, 128, device=dev).bfloat16()
    v = torch.randn(1, 8, 1024, 128, device=dev).bfloat16()
    h = torch.randn(1, 4096, device=dev).bfloat16()
    g = torch.ones(4096, device=dev).bfloat16()
    tw = ScalingType.TensorWise
    return [
        ("linear 1x4096x4096", lambda: fastpath.linear(x, w), lambda: F.linear(x, w)),
        ("scaled_mm 1x4096x4096", lambda: fastpath.scaled_mm(qa, qw.t(), sa, tw, sw, tw),
         lambda: torch._scaled_mm(qa, qw.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)),
        ("scaled_mm 4096^3", lambda: fastpath.scaled_mm(qb, qw.t(), sb, tw, sw, tw),
         lambda: torch._scaled_mm(qb, qw.t(), scale_a=sb, scale_b=sw, out_dtype=torch.bfloat16)),
        ("sdpa decode 1K", lambda: fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True),
         lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
        ("rms_norm 4096", lambda: fastpath.rms_norm(h, g, 1e-6), lambda: F.rms_norm(h, (4096,), g, 1e-6)),
        ("softmax 1x151936", lambda: fastpath.softmax(w[:1].repeat(1, 37), -1),
         lambda: torch.softmax(w[:1].repeat(1, 37), -1)),
        *training_cases(),
    ]


def training_cases():
    """Forward + backward (autograd.grad) of the training ops: what their eager bench rows pay."""
    x = torch.randn(64, 1024, device=dev, requires_grad=True)
    t, g = torch.randn(64, 1024, device=dev), torch.randn(64, 1024, device=dev)
    wb = torch.randn(1024, device=dev, requires_grad=True)
    bb = torch.randn(1024, device=dev, requires_grad=True)
    rm, rv = torch.zeros(1024, device=dev), torch.ones(1024, device=dev)

    def fwd_bwd(fn, *leaves):
        return lambda: torch.autograd.grad(fn(), leaves, g)
    return [
        ("mse_loss none fwd+bwd", fwd_bwd(lambda: fastpath.mse_loss(x, t, reduction="none"), x),
         fwd_bwd(lambda: F.mse_loss(x, t, reduction="none"), x)),
        ("dropout fwd+bwd", fwd_bwd(lambda: fastpath.dropout(x, 0.1), x), fwd_bwd(lambda: F.dropout(x, 0.1), x)),
        ("batch_norm 2-D fwd+bwd", fwd_bwd(lambda: fastpath.batch_norm(x, rm, rv, wb, bb, training=True), x, wb, bb),
         fwd_bwd(lambda: F.batch_norm(x, rm, rv, wb, bb, training=True), x, wb, bb)),
    ]


def main():
    prof = "--profile" in sys.argv
    for name, ours, theirs in cases():
        with torch.enable_grad() if "fwd+bwd" in name else torch.no_grad():
            o, t = host_us(ours, n=200, warmup=20), host_us(theirs, n=200, warmup=20)
            print(f"{name:<24} ours {o:7.1f} us host, torch {t:7.1f} us ({o / t:4.1f}x)", flush=True)
            if prof:
                print_profile(f"{name}: ours", ours)


if __name__ == "__main__":
    main()
