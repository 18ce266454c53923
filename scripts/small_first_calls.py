"""The small-matrix kernel's first call (the compile, with an empty Triton cache) and its speed
against torch.linalg, inverse and solve, by n and dtype: what a user's first call of a shape costs
and whether a plan that is faster a call compiles in reasonable time. Run on a GPU machine:

    TRITON_CACHE_DIR=$(mktemp -d) PYTHONPATH=src python3 scripts/small_first_calls.py [--batch 100000] [--ns 8,12,16]
"""
import argparse
import time

import torch

import fastpath
from fastpath._core import memo

memo.ENABLED = False
ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=100_000)
ap.add_argument("--ns", default="8,12,16")
args = ap.parse_args()
dev = torch.device("cuda")


def timeit(fn):
    """Microseconds a call, as the benchmark harness measures (cold L2)."""
    return 1e3 * fastpath.timed(fn, iters=20, device=dev)


def rel(x, ref):
    return float((x.to(ref.dtype) - ref).norm() / ref.norm())


for dt in (torch.float32, torch.complex64):
    hi = torch.complex128 if dt.is_complex else torch.float64
    for n in (int(v) for v in args.ns.split(",")):
        g = torch.Generator(device=dev).manual_seed(n)
        A = torch.randn(args.batch, n, n, generator=g, device=dev, dtype=dt) + 2 * n ** 0.5 * torch.eye(n, device=dev)
        B = torch.randn(args.batch, n, n, generator=g, device=dev, dtype=dt)
        for name, ours, ref in (("inv", lambda: fastpath.linalg.inv(A), lambda: torch.linalg.inv(A)),
                                ("solve k=n", lambda: fastpath.linalg.solve(A, B), lambda: torch.linalg.solve(A, B))):
            t0 = time.time()
            x = ours()
            torch.cuda.synchronize()
            first = time.time() - t0
            want = (torch.linalg.inv(A.to(hi)) if name == "inv" else torch.linalg.solve(A.to(hi), B.to(hi)))
            t, tr = timeit(ours), timeit(ref)
            print(f"{name:<9} n={n:<2} {str(dt):<15} first call {first:5.1f} s  ours {t:8.1f} us  torch {tr:8.1f} us "
                  f"{tr / t:5.2f}x  rel err {rel(x, want):.1e} (torch {rel(ref(), want):.1e})", flush=True)
