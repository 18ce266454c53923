"""Complex64 QR of 4 x 37 x 16 matrices (too large for the in-register kernel: torch.linalg.qr
on the GPU) at scales 1, 1e-20, 1e20, full rank and rank-deficient: reconstruction,
orthogonality and lower-triangle residuals of fastpath.linalg.qr ("complete", "reduced") and
of torch.linalg.qr, against the fuzz sweep's bound (``fuzz_ops.py 44 --cuda`` failed one such
case on an H200, not reproduced on the CPU).

    PYTHONPATH=src python3 scripts/qr_scale_probe.py [cpu]
"""
import itertools
import sys

import torch

import fastpath

dev = "cpu" if "cpu" in sys.argv else "cuda"
tol = 40 * 37 * 1.2e-7
for scale, rank in itertools.product([1.0, 1e-20, 1e20], [False, True]):
    for seed in range(3):
        torch.manual_seed(seed)
        A = torch.randn(4, 37, 16, dtype=torch.complex64) * scale
        if rank:
            A[..., -1] = A[..., 0]
        for mode, fn in (("complete", fastpath.linalg.qr), ("reduced", fastpath.linalg.qr),
                         ("complete", torch.linalg.qr)):
            Q, R = fn(A.to(dev), mode=mode)
            Q, R, A64 = Q.cpu().to(torch.complex128), R.cpu().to(torch.complex128), A.to(torch.complex128)
            k = Q.shape[-1]
            rec = ((Q @ R - A64).norm() / A64.norm()).item()
            orth = ((Q.mH @ Q - torch.eye(k, dtype=Q.dtype)).norm() / torch.eye(k).norm()).item()
            tri = (R.tril(-1).abs().max() / A64.abs().max()).item()
            flag = "ok" if all(v <= tol for v in (rec, orth, tri)) else "BAD"
            who = "torch" if fn is torch.linalg.qr else "ours"
            print(f"{who:5s} {mode:8s} scale {scale:g} rank-deficient {rank} seed {seed}: rec {rec:.2e} "
                  f"orth {orth:.2e} tril {tri:.2e} {flag}", flush=True)
