"""Where a blocked lu_factor's time goes. (1) The same 64 x 256-row batch with 16, 32, ... 256
columns (one panel, two, ...), ours and torch's, cold L2, so the panel's cost (the 16-column
case) and the update's growth can be read off. (2) ``--parts``: the one-launch-a-panel path
(``lu.BLOCKED_STEP`` "kernel" or "matmul") whole and its panel launches alone (the steps after
them skipped: the numbers are wrong, the time is the panels'), each replayed from a CUDA graph.
Run on a GPU machine:

    PYTHONPATH=src python3 scripts/lu_breakdown.py [--dtypes complex64,float32] [--cols 16,32,64,128,256] [--parts]
        [--batch 64] [--rows 256] [--set BLOCKED_STEP='"matmul"']
"""
import argparse
import ast
import collections

import torch

from fastpath.ops.linalg import lu
from fastpath.streams import _flush_buffer, median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="complex64,float32")
ap.add_argument("--cols", default="16,32,64,128,256")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--rows", type=int, default=256)
ap.add_argument("--parts", action="store_true")
ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: a knob of fastpath.ops.linalg.lu")
args = ap.parse_args()
for kv in args.set:
    name, value = kv.split("=", 1)
    setattr(lu, name, ast.literal_eval(value))
dev = torch.device("cuda")
flush = _flush_buffer(dev)


def timed(fn, graph=False):
    fn()
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        fn = g.replay
    return 1e3 * median_ms(fn, 20, before=lambda: flush.sum())


def parts(a):
    """(all, panel launches alone) of the one-launch-a-panel path (``lu.BLOCKED_STEP`` "kernel" or
    "matmul"), the steps after the panels skipped for the second, graphs, us."""
    nb, m, n = a.shape
    LU = a.clone()
    piv = torch.empty(nb, min(m, n), dtype=torch.int32, device=dev)
    info = torch.empty(nb, dtype=torch.int32, device=dev)
    t_all = timed(lambda: lu._launch(a, LU, piv, info), graph=True)
    saved = lu._STEP, torch.Tensor.baddbmm_
    try:
        lu._STEP = collections.defaultdict(lambda: lambda *a, **k: None)  # lu._STEP[grid](...) does nothing
        torch.Tensor.baddbmm_ = lambda self, *a, **k: self
        t_panels = timed(lambda: lu._launch(a, LU, piv, info), graph=True)
    finally:
        lu._STEP, torch.Tensor.baddbmm_ = saved
    return t_all, t_panels


for dname in args.dtypes.split(","):
    dtype = getattr(torch, dname)
    for n in map(int, args.cols.split(",")):
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn(args.batch, args.rows, n, generator=g, device=dev, dtype=dtype)
        times = [timed(lambda: lu.lu_factor(a)), timed(lambda: torch.linalg.lu_factor(a))]
        LU, piv = lu.lu_factor(a)
        P, L, U = torch.lu_unpack(LU, piv)
        err = float(((P @ L @ U) - a).norm() / a.norm())
        extra = ""
        if args.parts and lu._path(args.rows, n, args.batch, dtype) != "blocked":
            extra = "  (torch's path at this size: no parts)"
        elif args.parts:
            extra = "  (graphs) all %.1f us, the panel launches alone %.1f us" % parts(a)
        print(f"lu_factor {dname} {args.batch}x{args.rows}x{n}: ours {times[0]:8.1f} us  torch {times[1]:8.1f} us  "
              f"{times[1] / times[0]:5.2f}x  ||PLU-A||/||A|| {err:.1e}{extra}", flush=True)
