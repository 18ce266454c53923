"""Where a blocked lu_factor's time goes: the same 64 x 256-row batch with 16, 32, ... 256
columns (one panel, two, ...), ours and torch's, cold L2, so the panel's cost (the 16-column
case) and the update's growth can be read off. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/lu_breakdown.py [--dtypes complex64,float32] [--cols 16,32,64,128,256]
"""
import argparse

import torch

from fastpath.ops.linalg import lu
from fastpath.streams import _flush_buffer, median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="complex64,float32")
ap.add_argument("--cols", default="16,32,64,128,256")
ap.add_argument("--batch", type=int, default=64)
args = ap.parse_args()
dev = torch.device("cuda")
flush = _flush_buffer(dev)
for dname in args.dtypes.split(","):
    dtype = getattr(torch, dname)
    for n in map(int, args.cols.split(",")):
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn(args.batch, 256, n, generator=g, device=dev, dtype=dtype)
        times = []
        for fn in (lambda: lu.lu_factor(a), lambda: torch.linalg.lu_factor(a)):
            fn()
            torch.cuda.synchronize()
            times.append(1e3 * median_ms(fn, 20, before=lambda: flush.sum()))
        LU, piv = lu.lu_factor(a)
        P, L, U = torch.lu_unpack(LU, piv)
        err = float(((P @ L @ U) - a).norm() / a.norm())
        print(f"lu_factor {dname} {args.batch}x256x{n}: ours {times[0]:8.1f} us  torch {times[1]:8.1f} us  "
              f"{times[1] / times[0]:5.2f}x  ||PLU-A||/||A|| {err:.1e}", flush=True)
