"""lu_solve of 64 LU factors of 256x256 against the number of right-hand sides k, ours and
torch.linalg.lu_solve, cold L2, eager; with ``--profile`` the kernel times of one call of ours
(torch profiler) so the diagonal-block inverses and the sweep can be read apart. ``--set
MODULE.KNOB=VALUE`` sets a knob (``ops.linalg.lu.MEMO=True``), ``--plan`` an entry
of one of triangular's plan tables. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/lu_solve_rhs.py [--dtypes complex64,float32] [--ks 1,2,4,16,64,256] [--profile]
"""
import argparse

import torch

from fastpath.bench.__main__ import apply_knobs
from fastpath.bench.harness import host_us, kernel_times, print_profile
from fastpath.ops.linalg import lu
from fastpath.streams import _flush_buffer, median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="complex64,float32")
ap.add_argument("--ks", default="1,2,4,8,16,32,64,256")
ap.add_argument("--n", type=int, default=256)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--profile", action="store_true")
ap.add_argument("--host", action="store_true", help="host time a call (no sync), graph replay time, cProfile")
ap.add_argument("--row-major", action="store_true", help="the factors made row-major (torch's are column-major)")
ap.add_argument("--set", action="append", default=[],
                help="MODULE.KNOB=VALUE (module under fastpath), e.g. ops.linalg.lu.MEMO=True")
ap.add_argument("--plan", action="append", default=[],
                help="TABLE:DTYPE=TUPLE: an entry of a plan table of triangular, "
                     "e.g. DIAG_PLAN:complex64=(True,1,None,8)")
args = ap.parse_args()
apply_knobs(args.set + [f"ops.linalg.triangular.{kv}" for kv in args.plan])
dev = torch.device("cuda")
flush = _flush_buffer(dev)


def timed(fn):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, 20, before=lambda: flush.sum())


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
            fn = lambda: lu.lu_solve(LU, piv, B)  # noqa: E731
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            print(f"    host {host_us(fn, n=50):.1f} us a call; graph replay {timed(graph.replay):.1f} us")
            print_profile(f"{dname} k={k}", fn, n=50, top=8)
        if args.profile:
            flush.sum()  # cold L2, outside the profile
            found = kernel_times(lambda: lu.lu_solve(LU, piv, B), reps=1)
            for name, (us, _) in sorted(found.items(), key=lambda kv: -kv[1][0])[:6]:
                print(f"    {us:8.1f} us  {name[:60]}")
