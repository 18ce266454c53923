"""One fastpath lu_factor_ex call on a (batch, n, n) batch against torch's, in its own process (a
fault poisons the CUDA context): ``ok`` with the pivots' agreement and the largest difference of
the factors, or the error. With CUDA_LAUNCH_BLOCKING=1 the failing launch is the one named.

    CUDA_LAUNCH_BLOCKING=1 PYTHONPATH=src python3 scripts/lu_fault_probe.py N BATCH [DTYPE] [--set MODULE.KNOB=V]
"""
import argparse
import traceback

import torch

from fastpath import linalg as L
from fastpath.bench.__main__ import apply_knobs

ap = argparse.ArgumentParser()
ap.add_argument("n", type=int)
ap.add_argument("batch", type=int)
ap.add_argument("dtype", nargs="?", default="float32")
ap.add_argument("--set", action="append", default=[])
ap.add_argument("--shift", action="store_true", help="A + 2 sqrt(n) I (as scripts/lu_routes.py: few interchanges)")
ap.add_argument("--torch-first", action="store_true", help="torch's factorisation first, unsynchronised (as lu_routes)")
args = ap.parse_args()
apply_knobs(args.set)
dtype = getattr(torch, args.dtype)
g = torch.Generator(device="cuda").manual_seed(0)
A = torch.randn(args.batch, args.n, args.n, generator=g, device="cuda", dtype=dtype)
if args.shift:
    A += 2 * args.n ** 0.5 * torch.eye(args.n, device="cuda")
tag = f"n={args.n} batch={args.batch} {args.dtype} {args.set} shift={args.shift} torch first={args.torch_first}"
try:
    if args.torch_first:
        torch.linalg.lu_factor_ex(A)
    for _ in range(2):
        LU, piv, info = L.lu_factor_ex(A)
        torch.cuda.synchronize()
    ref = torch.linalg.lu_factor_ex(A)
    print(f"{tag}: ok, pivots equal {bool((piv == ref.pivots).all())}, "
          f"max |LU - torch| {(LU - ref.LU).abs().max().item():.1e}, info equal {bool((info == ref.info).all())}")
except Exception as exc:
    print(f"{tag}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0]}")
    print("".join(traceback.format_exc().splitlines(True)[-8:]))
