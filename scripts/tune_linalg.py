"""Sweep the plans of the register kernels (fastpath.ops.linalg.small: column group, systems per
thread, warps; svd: tile budget and warps) and of the blocked triangular solve (triangular:
rows a block, rows a chunk, right-hand sides a program, warps, stages) on the issue's batch
shapes, next to torch.linalg, cold L2. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/tune_linalg.py [--only inv] [--seconds 40] [--plans "[(4, 1, 2, False)]"]
"""
import argparse
import ast
import importlib
import time

import torch

small = importlib.import_module("fastpath.ops.linalg.small")
svd = importlib.import_module("fastpath.ops.linalg.svd")  # the package's svd is the function
tri = importlib.import_module("fastpath.ops.linalg.triangular")
lu = importlib.import_module("fastpath.ops.linalg.lu")
lanes = importlib.import_module("fastpath.ops.linalg.svd_lanes")
from fastpath.streams import _flush_buffer, median_ms  # noqa: E402
from fastpath._core import memo  # noqa: E402

memo.ENABLED = False  # a launch memo would replay the first plan's launches for every plan after it

dev = torch.device("cuda")
flush = _flush_buffer(dev)


def square(b, n, dtype=torch.float32):
    g = torch.Generator(device=dev).manual_seed(0)
    eye = torch.eye(n, device=dev)
    return (torch.randn(b, n, n, generator=g, device=dev) + 2 * n ** 0.5 * eye).to(dtype)


def timeit(fn):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, 20, before=lambda: flush.sum())


def inv_plans(n_pad):
    """(group, systems a thread, warps, steps unrolled); up to 4x4 both loop forms, the
    unrolled ones first."""
    # 16x16 in groups of 2 spilled and took 198 s to compile; widest groups (fastest to build) first
    groups = [g for g in (16, 8, 4, 2, 1) if g <= n_pad and n_pad * n_pad // g <= (64 if n_pad <= 4 else 32)]
    return [(g, per, w, u) for u in ((True, False) if n_pad <= 4 else (False,)) for g in groups for per in (1, 2)
            for w in (1, 2, 4, 8) if (per, w) != (2, 1)]


def set_small(plan):
    """(group, systems a thread, warps, steps unrolled [, small.GROUP_LOOPS (default True)])"""
    small.PLAN = plan and plan[:3]
    small.UNROLL_MAX_N = 4 if plan is None else 16 if plan[3] else 0
    if hasattr(small, "GROUP_LOOPS"):
        small.GROUP_LOOPS = True if plan is None or len(plan) < 5 else plan[4]


def square_c64(b, n):
    g = torch.Generator(device=dev).manual_seed(0)
    z = torch.complex(torch.randn(b, n, n, generator=g, device=dev), torch.randn(b, n, n, generator=g, device=dev))
    return z + 2 * n ** 0.5 * torch.eye(n, device=dev)


def set_svd(plan):
    """(tile budget, warps) of the tile kernel; (LANE_WORDS: 0 keeps every matrix on the tile
    kernel, LANE_WARPS) of the one-matrix-a-thread kernel"""
    svd.TILE_ELEMS, svd.NUM_WARPS, lanes.LANE_WORDS, lanes.LANE_WARPS = plan


SVD_PLANS = ([(2048, 4, 256, w) for w in (1, 2, 4)]
             + [(t, w, 0, 1) for t in (1024, 2048, 4096) for w in (1, 2, 4) if t // 32 >= w * 8])


def set_trsm(dtype):
    """(NB, KC, KB, warps, stages [, diagonal inverses from memory, their warps, blocks a
    program (triangular.DIAG_PLAN)]) of the blocked triangular solve for ``dtype``"""
    default = (dict(getattr(tri, "BLOCKED_PLAN", {})), getattr(tri, "STAGES", None),
               dict(getattr(tri, "DIAG_PLAN", {})))

    def set_plan(plan):
        if not default[0]:  # an older tree (--baseline)
            return
        tri.BLOCKED_PLAN.clear()
        tri.BLOCKED_PLAN.update(default[0])
        if default[1] is not None:
            tri.STAGES = default[1]
        if default[2]:
            tri.DIAG_PLAN.update(default[2])
        if plan is not None:
            tri.BLOCKED_PLAN[dtype] = plan[:4]
            tri.STAGES = plan[4]
            if len(plan) > 5:
                tri.DIAG_PLAN[dtype] = (tuple(plan[5:9]) + (None,) * 4)[:4]
    return set_plan


def lu_solve_case(k, dtype):
    def make():
        g = torch.Generator(device=dev).manual_seed(0)
        A = torch.randn(64, 256, 256, generator=g, device=dev, dtype=dtype) + 32 * torch.eye(256, device=dev)
        LU, piv = torch.linalg.lu_factor(A)
        return LU, piv, torch.randn(64, 256, k, device=dev, dtype=dtype)
    return make


C64, F32 = torch.complex64, torch.float32
TRSM_C64 = [(32, 32, 64, 4, 1), (16, 16, 64, 4, 1), (32, 16, 64, 4, 1), (32, 32, 32, 4, 1), (32, 32, 64, 8, 1),
            (16, 32, 64, 4, 1), (32, 64, 64, 4, 1), (64, 32, 64, 8, 1), (16, 16, 32, 4, 1), (32, 32, 64, 4, 2)]
TRSM_F32 = [(64, 64, 64, 4, 1), (32, 64, 64, 4, 1), (64, 32, 64, 4, 1), (128, 64, 64, 8, 1), (64, 64, 64, 8, 1),
            (64, 64, 32, 4, 1), (32, 32, 64, 4, 1), (64, 64, 64, 4, 2)]
LU_PLANS = [(32, (64, 32), 8, "ieee"), (32, 32, 8, "ieee"), (64, 64, 8, "ieee"), (32, 64, 8, "tf32x3"),
            (32, 64, 8, "ieee")]


def set_lu(plan):
    """(BM, CW, warps, float32 products) of the blocked LU's in-kernel trailing update [, panel
    width (None: the default) [, lu.BLOCKED_STEP [, (step kernel CW, BM, warps) [, look-ahead]]]] (plans of the
    thirty-first session's gpu_pending 16/17 had a bool for BLOCKED_HOST_UPDATE, since replaced
    by BLOCKED_STEP: True was "matmul", False "inline")"""
    if not hasattr(lu, "BLOCKED_BM"):  # an older tree (--baseline)
        return
    plan = plan or LU_PLANS[0]
    lu.BLOCKED_BM, cw, lu.BLOCKED_WARPS, lu.BLOCKED_PREC = plan[:4]
    lu.BLOCKED_CW = (cw, cw) if isinstance(cw, int) else cw
    lu.BLOCKED_W = plan[4] if len(plan) > 4 else None
    if hasattr(lu, "BLOCKED_STEP"):
        lu.BLOCKED_STEP = plan[5] if len(plan) > 5 else "kernel"
        cw, lu.BLOCKED_STEP_BM, lu.BLOCKED_STEP_WARPS = plan[6] if len(plan) > 6 else ((32, 16), 32, 4)
        lu.BLOCKED_STEP_CW = (cw, cw) if isinstance(cw, int) else cw
        lu.BLOCKED_LOOKAHEAD = plan[7] if len(plan) > 7 else "fused"


def lu_factor_case(dtype):
    def make():
        g = torch.Generator(device=dev).manual_seed(0)
        return torch.randn(64, 256, 256, generator=g, device=dev, dtype=dtype)
    return make


lu_ours, lu_torch = (lambda a: lu.lu_solve(*a)), (lambda a: torch.linalg.lu_solve(*a))
inv_ours, inv_torch = (lambda a: small.inv_ex(a).inverse), (lambda a: torch.linalg.inv_ex(a).inverse)
CASES = [  # (name, input, ours, torch, plans, set plan)
    ("lu_factor c64 64x256", lu_factor_case(C64), lambda a: lu.lu_factor(a).LU,
     lambda a: torch.linalg.lu_factor(a).LU, LU_PLANS, set_lu),
    ("lu_factor f32 64x256", lu_factor_case(F32), lambda a: lu.lu_factor(a).LU,
     lambda a: torch.linalg.lu_factor(a).LU, LU_PLANS, set_lu),
    ("lu_solve c64 k=256", lu_solve_case(256, C64), lu_ours, lu_torch, TRSM_C64, set_trsm(C64)),
    ("lu_solve c64 k=1", lu_solve_case(1, C64), lu_ours, lu_torch,
     TRSM_C64 + [(32, 32, 64, 2, 1), (32, 32, 64, 1, 1), (16, 16, 64, 2, 1)], set_trsm(C64)),
    ("lu_solve f32 k=256", lu_solve_case(256, F32), lu_ours, lu_torch, TRSM_F32, set_trsm(F32)),
    ("solve_triangular 4096x512", lambda: (torch.randn(4096, 4096, device=dev).triu() * 4096 ** -0.5
                                           + 2 * torch.eye(4096, device=dev), torch.randn(4096, 512, device=dev)),
     lambda a: tri.solve_triangular(*a, upper=True), lambda a: torch.linalg.solve_triangular(*a, upper=True),
     TRSM_F32, set_trsm(F32)),
    ("inv 4x4 1M", lambda: square(1_000_000, 4), inv_ours, inv_torch, inv_plans(4), set_small),
    ("inv 3x3 1M", lambda: square(1_000_000, 3), inv_ours, inv_torch, inv_plans(4), set_small),
    ("inv 4x4 fp64 1M", lambda: square(1_000_000, 4, torch.float64), inv_ours, inv_torch, inv_plans(4), set_small),
    ("inv 8x8 100K", lambda: square(100_000, 8), inv_ours, inv_torch, inv_plans(8), set_small),
    ("inv 16x16 100K", lambda: square(100_000, 16), inv_ours, inv_torch, inv_plans(16), set_small),
    ("inv 16x16 c64 100K", lambda: square_c64(100_000, 16), inv_ours, inv_torch, inv_plans(16), set_small),
    ("pinv 8x8 1000", lambda: torch.randn(1000, 8, 8, device=dev), svd.pinv, torch.linalg.pinv, SVD_PLANS, set_svd),
    ("svd 8x8 10000", lambda: torch.randn(10000, 8, 8, device=dev), lambda a: svd.svd(a).S,
     lambda a: torch.linalg.svdvals(a), SVD_PLANS, set_svd),
    ("svd 8x8 fp64 10000", lambda: torch.randn(10000, 8, 8, device=dev, dtype=torch.float64), lambda a: svd.svd(a).S,
     lambda a: torch.linalg.svdvals(a), SVD_PLANS, set_svd),
    ("svd 4x4 100000", lambda: torch.randn(100_000, 4, 4, device=dev), lambda a: svd.svd(a).S,
     lambda a: torch.linalg.svdvals(a), SVD_PLANS, set_svd),
]

ap = argparse.ArgumentParser()
ap.add_argument("--only", default="", help="cases whose name contains this")
ap.add_argument("--seconds", type=float, default=40, help="no new plan after this many seconds a case")
ap.add_argument("--plans", default=None, help="a Python list of plans to time instead of each case's own, or a dict "
                "{text in a case's name: list}")
ap.add_argument("--baseline", action="store_true", help="time the default plan only (e.g. an older tree)")
args = ap.parse_args()
for name, make, ours, ref, plans, set_plan in CASES:
    if args.only not in name:
        continue
    a = make()
    deadline = time.time() + args.seconds
    t_ref = timeit(lambda: ref(a))
    hi = torch.complex128 if isinstance(a, torch.Tensor) and a.is_complex() else torch.float64
    want = ref(a.to(hi)) if "inv" in name or "svd" in name else ref(a)
    if args.baseline:  # the tree on PYTHONPATH as it is, no plan set
        plans = [None]
    given = ast.literal_eval(args.plans) if args.plans and not args.baseline else plans
    if isinstance(given, dict):
        given = next((v for k, v in given.items() if k in name), plans)
    for plan in given:
        if time.time() > deadline:
            print(f"{name:<16} {plan}: skipped (time)", flush=True)
            continue
        set_plan(plan)
        try:
            t0 = time.time()
            got = ours(a)
            torch.cuda.synchronize()
            first = time.time() - t0
            err = float((got.double() - want.double()).norm() / want.double().norm())
            t = timeit(lambda: ours(a))
            print(f"{name:<16} {str(plan):<20}: ours {t:9.1f} us  torch {t_ref:9.1f} us  {t_ref / t:6.2f}x  "
                  f"rel err {err:.1e}  first call {first:5.1f} s", flush=True)
        except Exception as exc:  # one failing plan must not stop the sweep
            print(f"{name:<16} {plan}: FAILED {type(exc).__name__}: {str(exc)[:160]}", flush=True)
    set_plan(None if set_plan in (set_small, set_lu) or name.startswith(("lu_", "solve_")) else (2048, 4, 128, 1))
