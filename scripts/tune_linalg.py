"""Sweep the register-tile kernels' tile budget and warps (fastpath.ops.linalg.small / svd) on
the issue's batch shapes, next to torch.linalg, cold L2. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/tune_linalg.py
"""
import importlib
import time

import torch

small = importlib.import_module("fastpath.ops.linalg.small")
svd = importlib.import_module("fastpath.ops.linalg.svd")  # the package's svd is the function
from fastpath.streams import _flush_buffer, median_ms  # noqa: E402

dev = torch.device("cuda")
flush = _flush_buffer(dev)


def square(b, n):
    g = torch.Generator(device=dev).manual_seed(0)
    return torch.randn(b, n, n, generator=g, device=dev) + 2 * n ** 0.5 * torch.eye(n, device=dev)


def timeit(fn):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, 20, before=lambda: flush.sum())


CASES = [  # (name, module, input, ours, torch, reference check)
    ("inv 4x4 1M", small, square(1_000_000, 4), lambda a: small.inv_ex(a).inverse, lambda a: torch.linalg.inv_ex(a).inverse),
    ("inv 16x16 100K", small, square(100_000, 16), lambda a: small.inv_ex(a).inverse, lambda a: torch.linalg.inv_ex(a).inverse),
    ("pinv 8x8 1000", svd, torch.randn(1000, 8, 8, device=dev), svd.pinv, torch.linalg.pinv),
]

for name, mod, a, ours, ref in CASES:
    deadline = time.time() + 14  # seconds per case: no new config after this
    t_ref = timeit(lambda: ref(a))
    want = ref(a.double()).float() if "inv" in name else ref(a)
    for tile in (512, 1024, 2048, 4096):
        for warps in (1, 2, 4, 8):
            if tile // 32 < warps * 8 or time.time() > deadline:
                continue
            mod.TILE_ELEMS, mod.NUM_WARPS = tile, warps
            try:
                got = ours(a)
                err = float((got - want).norm() / want.norm())
                t = timeit(lambda: ours(a))
                print(f"{name:<16} tile {tile:5d} warps {warps}: ours {t:9.1f} us  torch {t_ref:9.1f} us  "
                      f"{t_ref / t:6.2f}x  rel err {err:.1e}", flush=True)
            except Exception as exc:  # one failing config must not stop the sweep
                print(f"{name:<16} tile {tile:5d} warps {warps}: FAILED {type(exc).__name__}: {str(exc)[:120]}", flush=True)
