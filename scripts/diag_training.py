"""Where the time of a training op's forward+backward goes on a GPU: for dropout, mse_loss
and batch_norm (ours and PyTorch's, at the training bench's shapes), one eager call timed
with events (cold L2, as the bench does), the host time of a call (wall clock of 20 calls
with no sync between them, divided), the same call replayed from a CUDA graph, and the
profiler's kernel list of one call. The gap between eager and graph is host time the GPU
waited for.

Usage (repo root, GPU machine): PYTHONPATH=src python3 scripts/diag_training.py [--host]
(``--host``: instead, the Python profile of 50 of our calls, top functions by own time.)
"""
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from fastpath.bench.harness import Timer, host_us, print_profile
from fastpath.ops.batch_norm import batch_norm
from fastpath.ops.dropout import dropout
from fastpath.ops.loss import mse_loss


def cases(dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(1 << 26, device=dev, generator=g).bfloat16().requires_grad_()
    gx = torch.randn(1 << 26, device=dev, generator=g).bfloat16()
    t = torch.randn(1 << 26, device=dev, generator=g).bfloat16()
    xb = torch.randn(32, 256, 56, 56, device=dev, generator=g).bfloat16().requires_grad_()
    gb = torch.randn(32, 256, 56, 56, device=dev, generator=g).bfloat16()
    w = torch.ones(256, device=dev, requires_grad=True)
    b = torch.zeros(256, device=dev, requires_grad=True)
    rm, rv = torch.zeros(256, device=dev), torch.ones(256, device=dev)

    def drop(fn):
        return lambda: torch.autograd.grad(fn(x, 0.1), x, gx)

    def mse(fn, red):
        def go():
            y = fn(x, t, reduction=red)
            return torch.autograd.grad(y, x, torch.ones_like(y) if red != "none" else t)
        return go

    def bn(fn):
        def go():
            y = fn(xb, rm, rv, w, b, training=True)
            return torch.autograd.grad(y, (xb, w, b), gb)
        return go
    return [("dropout 64M bf16", drop(dropout), drop(F.dropout)),
            ("mse mean 64M bf16", mse(mse_loss, "mean"), mse(F.mse_loss, "mean")),
            ("mse none 64M bf16", mse(mse_loss, "none"), mse(F.mse_loss, "none")),
            ("batch_norm 32x256x56x56 bf16", bn(batch_norm), bn(F.batch_norm))]


def host_profile(dev):
    for name, ours, _ in cases(dev):
        for _ in range(3):
            ours()
        torch.cuda.synchronize()
        print_profile(f"{name}: ours", ours, 50)


def main():
    dev = torch.device("cuda")
    if "--host" in sys.argv:
        return host_profile(dev)
    timer = Timer(torch.cuda.get_device_properties(0).L2_cache_size)
    for name, ours, theirs in cases(dev):
        for who, fn in (("ours", ours), ("torch", theirs)):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            eager = timer.eager_us(fn, (), False, 1.0)
            host = host_us(fn, n=20, warmup=0)
            try:
                graph = f"{timer.graph_us(fn, [()], eager / 1e3):8.1f}"
            except Exception as exc:  # noqa: BLE001 - report and go on
                graph = f"({type(exc).__name__})"
                torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            kernels = [(e.name[:40], round(e.device_time, 1)) for e in prof.events()
                       if e.device_time > 0 and e.device_type.name == "CUDA"]
            print(f"{name:30s} {who:5s} eager {eager:8.1f} us  host/call {host:8.1f} us  graph {graph} us  "
                  f"kernels {kernels}", flush=True)


if __name__ == "__main__":
    main()
