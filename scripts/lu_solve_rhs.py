"""lu_solve of 64 LU factors of 256x256 against the number of right-hand sides k, ours and
torch.linalg.lu_solve, cold L2, eager; with ``--profile`` the kernel times of one call of ours
(torch profiler) so the diagonal-block inverses and the sweep can be read apart. ``--set
NAME=VALUE`` sets a knob of fastpath.ops.linalg.triangular. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/lu_solve_rhs.py [--dtypes complex64,float32] [--ks 1,2,4,16,64,256] [--profile]
"""
import argparse
import ast
import collections

import torch

from fastpath.ops.linalg import lu, triangular
from fastpath.streams import _flush_buffer, median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="complex64,float32")
ap.add_argument("--ks", default="1,2,4,8,16,32,64,256")
ap.add_argument("--n", type=int, default=256)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--profile", action="store_true")
ap.add_argument("--host", action="store_true", help="host time a call (no sync), graph replay time, cProfile")
ap.add_argument("--row-major", action="store_true", help="the factors made row-major (torch's are column-major)")
ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: a knob of fastpath.ops.linalg.triangular")
ap.add_argument("--plan", action="append", default=[],
                help="TABLE:DTYPE=TUPLE: an entry of a plan table of triangular, "
                     "e.g. DIAG_PLAN:complex64=(True,1,None,8)")
args = ap.parse_args()
for kv in args.set:
    name, value = kv.split("=", 1)
    setattr(triangular, name, ast.literal_eval(value))
for kv in args.plan:
    key, value = kv.split("=", 1)
    table, dname = key.split(":")
    getattr(triangular, table)[getattr(torch, dname)] = ast.literal_eval(value)
dev = torch.device("cuda")
flush = _flush_buffer(dev)


def timed(fn):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, 20, before=lambda: flush.sum())


def kernels(fn):
    """{kernel name: us} of one call (after a warm-up)."""
    fn()
    torch.cuda.synchronize()
    flush.sum()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out[e.name[:60]] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    return out


print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} batch {args.batch} n {args.n}",
      args.set, args.plan)
for dname in args.dtypes.split(","):
    dtype = getattr(torch, dname)
    g = torch.Generator(device=dev).manual_seed(0)
    A = torch.randn(args.batch, args.n, args.n, generator=g, device=dev, dtype=dtype) \
        + 2 * args.n ** 0.5 * torch.eye(args.n, device=dev)
    LU, piv = torch.linalg.lu_factor(A)
    if args.row_major:
        LU = LU.contiguous()
    for k in (int(s) for s in args.ks.split(",")):
        B = torch.randn(args.batch, args.n, k, generator=g, device=dev, dtype=dtype)
        ref = torch.linalg.lu_solve(LU, piv, B)
        x = lu.lu_solve(LU, piv, B)
        err = ((x - ref).norm() / ref.norm()).item()
        res = ((A @ x - B).norm() / B.norm()).item()
        t_ours = timed(lambda: lu.lu_solve(LU, piv, B))
        t_torch = timed(lambda: torch.linalg.lu_solve(LU, piv, B))
        print(f"{dname} k={k:4d}  ours {t_ours:8.1f} us  torch {t_torch:8.1f} us  {t_torch / t_ours:5.2f}x  "
              f"rel diff {err:.1e}  residual {res:.1e}", flush=True)
        if args.host:
            import cProfile
            import pstats
            import time
            fn = lambda: lu.lu_solve(LU, piv, B)  # noqa: E731
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(50):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            print(f"    host {1e6 * (t1 - t0) / 50:.1f} us a call; graph replay {timed(graph.replay):.1f} us")
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(50):
                fn()
            pr.disable()
            torch.cuda.synchronize()
            pstats.Stats(pr).sort_stats("tottime").print_stats(8)
        if args.profile:
            for name, us in kernels(lambda: lu.lu_solve(LU, piv, B)).most_common(6):
                print(f"    {us:8.1f} us  {name}")
