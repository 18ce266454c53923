"""The blocked LU's first step kernel (``lu_step._lu_step_kernel`` after the panel at column 0 of
a 64 x 256x256 batch) timed alone, replayed from a CUDA graph, per knob setting: the whole step
(interchanges, U12, the update of 240 rows), the same without rows below the panel (the
update skipped: interchanges and U12 alone), and the panel launch before it. Run on a GPU
machine:

    PYTHONPATH=src python3 scripts/lu_step_probe.py [--dtypes complex64,float32]
        [--set NAME=VALUE ...] [--variant "label:NAME=VALUE;NAME=VALUE" ...]
"""
import argparse
import ast

import torch

from fastpath._core.launch import cdiv
from fastpath.ops.linalg import lu
from fastpath.ops.linalg.tiles import kernel_strides, real_view
from fastpath.streams import median_ms

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="complex64,float32")
ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: a knob of fastpath.ops.linalg.lu")
ap.add_argument("--variant", action="append", default=[], help="label:NAME=VALUE;NAME=VALUE...")
args = ap.parse_args()


def knobs(spec):
    out = {}
    for kv in filter(None, spec.split(";")):
        name, value = kv.split("=", 1)
        out[name] = ast.literal_eval(value)
    return out


for kv in args.set:
    lu.__dict__.update(knobs(kv))
variants = [("default", {})] + [(v.split(":", 1)[0], knobs(v.split(":", 1)[1])) for v in args.variant]
dev = torch.device("cuda")


def graphed(fn):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return 1e3 * median_ms(g.replay, 50)


for dname in args.dtypes.split(","):
    dtype = getattr(torch, dname)
    g = torch.Generator(device=dev).manual_seed(0)
    A = torch.randn(64, 256, 256, generator=g, device=dev, dtype=dtype)
    nb, m, n = A.shape
    cplx = A.is_complex()
    W = 16
    for label, kn in variants:
        saved = {k: getattr(lu, k) for k in kn}
        lu.__dict__.update(kn)
        try:
            LU = A.clone()
            piv = torch.empty(nb, n, dtype=torch.int32, device=dev)
            info = torch.zeros(nb, dtype=torch.int32, device=dev)
            lu._launch(A, LU, piv, info)  # compiles; LU, piv: a real factorisation (then the panel again below)
            LU.copy_(A)
            scw = lu.BLOCKED_STEP_CW[cplx]
            row_bytes = real_view(LU)

            def panel():
                lu._LU[(nb,)](row_bytes, row_bytes, piv, info, row_bytes, row_bytes, row_bytes, nb, m, n,
                              *kernel_strides(LU), *kernel_strides(LU), piv.stride(0), 0, 1, 0, W,
                              BLOCK_B=1, M=256, W=W, CW=lu.BLOCKED_CW[cplx], BM=lu.BLOCKED_BM, BLOCKED=True,
                              PIVOT=True, DET=0, STORE_LU=True, CPLX=cplx, PREC=lu.BLOCKED_PREC, ROWS_PANEL=True,
                              HOST_UPDATE=2, NEUMANN=lu.BLOCKED_STEP_NEUMANN, PANEL_SMEM=False, WARPS=lu.BLOCKED_WARPS,
                              TRACK=lu.TRACK_UNROLLED, DEFER_LEFT=False, RCW=lu.BLOCKED_CW[cplx], UNIT=True,
                              PREFETCH=False, num_warps=lu.BLOCKED_WARPS)

            def step(rows):
                lu._STEP[(nb, cdiv(n - W, scw))](
                    row_bytes, piv, rows, n, *kernel_strides(LU), piv.stride(0), 0, W, W, n, 0,
                    W=W, CW=scw, BM=lu.BLOCKED_STEP_BM, CPLX=cplx, PREC=lu.BLOCKED_PREC,
                    NEUMANN=lu.BLOCKED_STEP_NEUMANN, TRACK=lu.TRACK_UNROLLED, UPDATE=True, UNIT=True,
                    num_warps=lu.BLOCKED_STEP_WARPS)
            t_panel = graphed(panel)
            t_step = graphed(lambda: step(m))
            t_u12 = graphed(lambda: step(W))
            print(f"{dname} {label:<24} panel {t_panel:7.1f} us  step {t_step:7.1f} us  "
                  f"step without the update {t_u12:7.1f} us", flush=True)
        except Exception as exc:  # one failing variant must not stop the others
            print(f"{dname} {label}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        finally:
            lu.__dict__.update(saved)
