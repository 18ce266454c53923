"""Where the host time of an eager fastpath call goes (GPU machine): the public call, the
planner + launcher without the checks, the bare Triton launch ``kernel[grid](...)`` with
prepared arguments, and PyTorch's F.linear, each as host microseconds per call over many
back-to-back calls (no synchronisation inside the timed loop).

    python scripts/launch_probe.py
"""

import torch
import torch.nn.functional as F

import fastpath
from fastpath.ops import linear as L
from fastpath._core.backend import TL_DTYPES
from fastpath.bench.harness import host_us
from fastpath.ops import matvec


def main():
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(1, 4096, device="cuda", dtype=torch.bfloat16)
    p = matvec.plan(1, 4096, 4096, x.device, torch.bfloat16)
    nb = -(-4096 // p.block_n)
    ws = torch.empty(p.split * 4096, device="cuda")
    cnt = torch.zeros(nb, device="cuda", dtype=torch.int32)
    args = (x, w.t(), y, y, y, y, ws, cnt, 1, 4096, 4096, p.k_chunk, p.split,
            4096, 1, 1, 4096, 0, 0, 0, 0, 4096, 1)
    flags = dict(A_MODE=0, B_MODE=0, A_E5M2=False, B_E5M2=False, SCALE_A=False, SCALE_B=False,
                 BLOCKWISE=False, HAS_BIAS=False, SPLIT=p.split > 1, DOT=True, DT=TL_DTYPES[torch.bfloat16],
                 BLOCK_M=p.block_m, BLOCK_N=p.block_n, BLOCK_K=p.block_k, num_warps=p.warps)
    grid = (nb, p.split)
    rows = [
        ("fastpath.linear (public)", lambda: fastpath.linear(x, w)),
        ("linear without checks", lambda: L._launch(x, w, None, None)),
        ("matvec.plan only", lambda: matvec.plan(1, 4096, 4096, x.device, torch.bfloat16)),
        ("bare _mv_kernel[grid](...)", lambda: matvec._mv_kernel[grid](*args, **flags)),
        ("F.linear", lambda: F.linear(x, w)),
        ("torch.empty", lambda: torch.empty(1, 4096, device="cuda", dtype=torch.bfloat16)),
        ("fastpath.softmax 1x128256", (lambda z: lambda: fastpath.softmax(z, -1))(torch.randn(1, 128256, device="cuda"))),
    ]
    for name, fn in rows:
        print(f"{name:<30} {host_us(fn, n=2000, warmup=50):7.1f} us host per call", flush=True)


if __name__ == "__main__":
    main()
