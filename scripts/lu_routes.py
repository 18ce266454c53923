"""Where fastpath's lu_factor_ex and lu_solve beat torch.linalg's: a grid of (n, batch) per dtype,
cold L2, eager, ratio torch / ours (above 1: ours faster), lu_solve with 1 and 16 right-hand sides.
The routing rules of ops/linalg/lu.py (``_path``, ``_solve_route``) are read off it. Run on a GPU:

    PYTHONPATH=src python3 scripts/lu_routes.py --dtype float32 [--ns 16,32,64] [--batches 1,64]

``--backends cusolver,magma``: torch's lu_factor_ex under each preferred linalg library too
(torch.backends.cuda.preferred_linalg_library; "default" is torch's own heuristic).
"""
import argparse

import torch

from fastpath import linalg as L
from fastpath.bench.__main__ import apply_knobs
from fastpath.streams import _flush_buffer, median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtype", default="float32")
ap.add_argument("--ns", default="16,24,32,48,64,128,256,512,1024")
ap.add_argument("--batches", default="1,8,64,512,4096")
ap.add_argument("--max-elems", type=float, default=2 ** 27, help="skip batch * n^3 above this (float32 n^3 units)")
ap.add_argument("--backends", default="", help="also time torch's lu_factor_ex under these linalg libraries")
ap.add_argument("--set", action="append", default=[], help="MODULE.KNOB=VALUE (module under fastpath)")
args = ap.parse_args()
apply_knobs(args.set)
dev = torch.device("cuda")
flush = _flush_buffer(dev)
dtype = getattr(torch, args.dtype)


def timed(fn):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, 10, before=lambda: flush.sum())


print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} {args.dtype} {args.set}",
      f"has_magma {torch.cuda.has_magma}")
backends = [b for b in args.backends.split(",") if b]


def under(backend, fn):
    """fn's time with torch's preferred linalg library set to backend (restored after)."""
    old = torch.backends.cuda.preferred_linalg_library()
    torch.backends.cuda.preferred_linalg_library(backend)
    try:
        return timed(fn)
    finally:
        torch.backends.cuda.preferred_linalg_library(old)


print("# n batch | lu_factor_ex ours torch ratio | lu_solve k=1 ours torch ratio | k=16 ours torch ratio")
for n in (int(s) for s in args.ns.split(",")):
    for b in (int(s) for s in args.batches.split(",")):
        if b * n ** 3 > args.max_elems * 64:
            continue
        g = torch.Generator(device=dev).manual_seed(0)
        A = torch.randn(b, n, n, generator=g, device=dev, dtype=dtype) + 2 * n ** 0.5 * torch.eye(n, device=dev)
        LU, piv, _ = torch.linalg.lu_factor_ex(A)
        row = [timed(lambda: L.lu_factor_ex(A)), timed(lambda: torch.linalg.lu_factor_ex(A))]
        for k in (1, 16):
            B = torch.randn(b, n, k, generator=g, device=dev, dtype=dtype)
            x, ref = L.lu_solve(LU, piv, B), torch.linalg.lu_solve(LU, piv, B)
            err = ((x - ref).norm() / ref.norm()).item()
            assert err < 1e-4, f"lu_solve n={n} batch={b} k={k}: relative difference {err:.1e}"
            row += [timed(lambda: L.lu_solve(LU, piv, B)), timed(lambda: torch.linalg.lu_solve(LU, piv, B))]
        cells = "  |  ".join(f"{row[i]:8.1f} {row[i + 1]:8.1f} {row[i + 1] / row[i]:5.2f}x" for i in (0, 2, 4))
        libs = "".join(f"  | torch {lib} {under(lib, lambda: torch.linalg.lu_factor_ex(A)):8.1f}" for lib in backends)
        print(f"{n:5d} {b:5d} | {cells}{libs}", flush=True)
