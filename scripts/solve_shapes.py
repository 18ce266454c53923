"""solve_ex past the small kernel (n or k above 16) over a spread of shapes: fastpath's against
torch.linalg.solve_ex, cold L2, eager, the solution's relative difference to torch's. Run once a
process for each setting of ``small.SOLVE_VIA_LU`` (lu_factor_ex + lu_solve, or torch's path);
``--parts``: fastpath's and torch's lu_factor_ex and lu_solve of each shape too:

    PYTHONPATH=src python3 scripts/solve_shapes.py [--set ops.linalg.small.SOLVE_VIA_LU=True] [--parts]
"""
import argparse

import torch

from fastpath import linalg as L
from fastpath.bench.__main__ import apply_knobs
from fastpath.streams import _flush_buffer, median_ms

#: (batch, n, k, dtype): square systems, k right-hand sides
SHAPES = [(64, 256, 256, "complex64"), (64, 256, 1, "complex64"), (64, 64, 64, "complex64"),
          (1000, 32, 32, "complex64"), (1, 1024, 64, "complex64"),
          (64, 256, 256, "float32"), (64, 256, 1, "float32"), (64, 64, 64, "float32"),
          (10_000, 24, 1, "float32"), (1000, 32, 32, "float32"), (8, 512, 16, "float32"),
          (1, 1024, 1, "float32"), (1, 1024, 1024, "float32"),
          (2, 256, 16, "float32"), (4, 256, 16, "complex64"), (16, 128, 8, "float32"), (1000, 48, 1, "float32"),
          (1000, 64, 1, "float32"), (1000, 64, 1, "complex64"), (10_000, 32, 1, "float32"),
          (2, 1024, 16, "complex64"), (2, 2048, 1, "float32"), (4, 1024, 64, "float32")]

ap = argparse.ArgumentParser()
ap.add_argument("--set", action="append", default=[], help="MODULE.KNOB=VALUE (module under fastpath)")
ap.add_argument("--parts", action="store_true", help="lu_factor_ex and lu_solve of each shape, ours and torch's")
args = ap.parse_args()
apply_knobs(args.set)
dev = torch.device("cuda")
flush = _flush_buffer(dev)
print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}", args.set)
for b, n, k, dname in SHAPES:
    dtype = getattr(torch, dname)
    g = torch.Generator(device=dev).manual_seed(0)
    A = torch.randn(b, n, n, generator=g, device=dev, dtype=dtype) + 2 * n ** 0.5 * torch.eye(n, device=dev)
    B = torch.randn(b, n, k, generator=g, device=dev, dtype=dtype)
    ref = torch.linalg.solve_ex(A, B).result
    x = L.solve_ex(A, B).result
    err = ((x - ref).norm() / ref.norm()).item()
    pairs = [("solve_ex", lambda: L.solve_ex(A, B), lambda: torch.linalg.solve_ex(A, B), err)]
    if args.parts:
        LU, piv, _ = torch.linalg.lu_factor_ex(A)
        x = L.lu_solve(LU, piv, B)
        pairs += [("lu_factor_ex", lambda: L.lu_factor_ex(A), lambda: torch.linalg.lu_factor_ex(A), float("nan")),
                  ("lu_solve", lambda: L.lu_solve(LU, piv, B), lambda: torch.linalg.lu_solve(LU, piv, B),
                   ((x - ref).norm() / ref.norm()).item())]
    for what, ours, theirs, e in pairs:
        ts = []
        for fn in (ours, theirs):
            fn()
            torch.cuda.synchronize()
            ts.append(1e3 * median_ms(fn, 20, before=lambda: flush.sum()))
        print(f"{what:12s} {dname:9s} {b:6d}x{n:4d}x{k:4d}  ours {ts[0]:9.1f} us  torch {ts[1]:9.1f} us  "
              f"{ts[1] / ts[0]:5.2f}x  rel diff {e:.1e}", flush=True)
