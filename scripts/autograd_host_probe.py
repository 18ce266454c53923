"""Where the host time of an eager forward + backward goes on a GPU host: PyTorch's own op,
an empty ``torch.autograd.Function`` (the Python forward / backward round trip alone), and
fastpath's training ops piece by piece (the seed draw, the forward's memo replay, the whole
forward, forward + backward). Small tensors (64 x 1024 float32), so the GPU is never the bound:
host microseconds a call from ``harness.host_us`` (many calls, no sync between them).

    PYTHONPATH=src python3 scripts/autograd_host_probe.py [--profile]
"""
import sys

import torch
import torch.nn.functional as F

import fastpath
from fastpath.bench.harness import host_us, print_profile
from fastpath.ops import dropout as dropout_mod

dev = torch.device("cuda")


class Empty(torch.autograd.Function):
    """No work: one output allocated in the forward, one in the backward."""

    @staticmethod
    def forward(ctx, x):
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, g):
        return torch.empty_like(g)


def split(x, g, t, n=300):
    """The forward + backward loop of dropout and mse_loss timed piece by piece (wall clock
    around each step, no sync): the seed draw, the op's forward, autograd.grad; and the
    backward's own memo replay called from the main thread."""
    import time
    from fastpath.ops import loss as loss_mod
    seed_fn = dropout_mod.draw_seed
    for name, fwd in (("torch x * 2", lambda: x * 2), ("empty autograd.Function", lambda: Empty.apply(x)),
                      ("torch mse_loss none", lambda: F.mse_loss(x, t, reduction="none")),
                      ("dropout", lambda: fastpath.dropout(x, 0.1)),
                      ("mse_loss none", lambda: fastpath.mse_loss(x, t, reduction="none"))):
        parts = {"forward": 0.0, "autograd.grad": 0.0}
        for i in range(n + 30):
            t0 = time.perf_counter()
            y = fwd()
            t1 = time.perf_counter()
            torch.autograd.grad(y, x, g)
            t2 = time.perf_counter()
            if i >= 30:
                parts["forward"] += t1 - t0
                parts["autograd.grad"] += t2 - t1
        split_us = ", ".join(f"{k} {v / n * 1e6:.1f} us" for k, v in parts.items())
        print(f"{name:<24} fwd+bwd split: {split_us}", flush=True)
    torch.cuda.synchronize()
    xd = x.detach()
    bits = dropout_mod._forward(xd, 0.1, seed_fn(dev, None), True)[1]
    call = lambda: dropout_mod._MEMO_BWD.call(lambda: dropout_mod._dropout_bwd_op(g, bits, 0.1), (g, bits), (0.1,))
    print(f"dropout backward's replay on the main thread {host_us(call, n=300, warmup=30):.1f} us", flush=True)
    call = lambda: loss_mod._MEMO_BWD.call(
        lambda: loss_mod._mse_bwd_op(g, xd, t, "none", True, False), (g, xd, t), ("none", True, False))
    print(f"mse_loss backward's replay on the main thread {host_us(call, n=300, warmup=30):.1f} us", flush=True)
    print(f"torch.randint alone {host_us(lambda: seed_fn(dev, None), n=300, warmup=30):.1f} us", flush=True)


def main():
    x = torch.randn(64, 1024, device=dev, requires_grad=True)
    t, g = torch.randn(64, 1024, device=dev), torch.randn(64, 1024, device=dev)
    xd = x.detach()

    def grad_of(fn):
        return lambda: torch.autograd.grad(fn(), x, g)
    cases = [
        ("torch.empty_like", lambda: torch.empty_like(xd)),
        ("torch x * 2 (no grad)", lambda: xd * 2),
        ("torch x * 2 fwd+bwd", grad_of(lambda: x * 2)),
        ("empty autograd.Function fwd only", lambda: Empty.apply(x)),
        ("empty autograd.Function fwd+bwd", grad_of(lambda: Empty.apply(x))),
        ("torch dropout fwd+bwd", grad_of(lambda: F.dropout(x, 0.1))),
        ("fastpath draw_seed", lambda: dropout_mod.draw_seed(dev, None)),
        ("fastpath dropout fwd (no grad)", lambda: fastpath.dropout(xd, 0.1)),
        ("fastpath dropout fwd (grad)", lambda: fastpath.dropout(x, 0.1)),
        ("fastpath dropout fwd+bwd", grad_of(lambda: fastpath.dropout(x, 0.1))),
        ("torch mse_loss none fwd+bwd", grad_of(lambda: F.mse_loss(x, t, reduction="none"))),
        ("fastpath mse_loss none fwd (no grad)", lambda: fastpath.mse_loss(xd, t, reduction="none")),
        ("fastpath mse_loss none fwd (grad)", lambda: fastpath.mse_loss(x, t, reduction="none")),
        ("fastpath mse_loss none fwd+bwd", grad_of(lambda: fastpath.mse_loss(x, t, reduction="none"))),
    ]
    for name, fn in cases:
        with torch.enable_grad():
            us = sorted(host_us(fn, n=300, warmup=30) for _ in range(3))[1]
        print(f"{name:<40} {us:7.1f} us host", flush=True)
    split(x, g, t)
    if "--profile" in sys.argv:
        for name, fn in cases[-5:]:
            print_profile(name, fn, 300, 12)


if __name__ == "__main__":
    main()
