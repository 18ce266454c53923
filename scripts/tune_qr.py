"""Sweep the blocked QR's plan (fastpath.ops.linalg.qr_blocked: panel width NB, rows a panel
program, warps, the fused column sums, outer block columns, CUDA graphs kept, the smallest k
graphed) next to torch.linalg.qr, cold L2, and split one call's GPU time into panel kernels and
the rest (torch profiler). Run on a GPU machine:

    PYTHONPATH=src python3 scripts/tune_qr.py [--sizes 4096,2048] [--batch 1] [--plans "[(32, 64, 4, True, 256, 2, 512)]"]
"""
import argparse
import ast
import importlib

import torch

from fastpath.streams import _flush_buffer, median_ms

qb = importlib.import_module("fastpath.ops.linalg.qr_blocked")
qr = importlib.import_module("fastpath.ops.linalg.qr")
dev = torch.device("cuda")
flush = _flush_buffer(dev)


def timeit(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    return 1e3 * median_ms(fn, reps, before=lambda: flush.sum())


def set_plan(plan):
    qb.NB[4], qb.ROWS, qb.WARPS = plan[:3]
    qb.FUSE = plan[3] if len(plan) > 3 else True
    qb.OUTER = plan[4] if len(plan) > 4 else 256
    qb.GRAPHS = plan[5] if len(plan) > 5 else 2
    qb.GRAPH_MIN_K = plan[6] if len(plan) > 6 else 512


def split(fn):
    """(panel kernel us, everything else us) of one call, from the profiler's CUDA times."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    panel = other = 0.0
    for ev in prof.key_averages():
        t = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        if "_panel_kernel" in ev.key:
            panel += t
        else:
            other += t
    return panel, other


def profile(sizes, batch):
    """Top CUDA kernels of one call, and the host's time to issue a call (no sync inside)."""
    import time

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof_ctx
    for n in sizes:
        A = torch.randn(batch, n, n, device=dev)
        qr.qr(A)
        torch.cuda.synchronize()
        with prof_ctx(activities=[ProfilerActivity.CUDA]) as prof:
            qr.qr(A)
            torch.cuda.synchronize()
        print(f"{batch}x{n}x{n}:")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
        hosts = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            qr.qr(A)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            hosts.append(((t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3))
        print("host ms to issue one call / wall ms:", ", ".join(f"{h:.1f} / {w:.1f}" for h, w in hosts), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,2048")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--plans", default=None)
    ap.add_argument("--profile", action="store_true", help="the default plan's kernels and host time")
    args = ap.parse_args()
    if args.profile:
        return profile([int(s) for s in args.sizes.split(",")], args.batch)
    plans = ast.literal_eval(args.plans) if args.plans else [
        (32, rows, w, True, ob) for rows in (64, 32, 128) for w in (2, 4, 8) for ob in (128, 256, 64)]
    saved = (qb.NB[4], qb.ROWS, qb.WARPS, qb.FUSE, qb.OUTER, qb.GRAPHS, qb.GRAPH_MIN_K)
    for n in (int(s) for s in args.sizes.split(",")):
        A = torch.randn(args.batch, n, n, device=dev)
        t_ref = timeit(lambda: torch.linalg.qr(A))
        print(f"{args.batch}x{n}x{n} float32: torch.linalg.qr {t_ref:.0f} us", flush=True)
        for plan in plans:
            set_plan(plan)
            try:
                Qm, R = qr.qr(A)
                err = ((Qm @ R - A).norm() / A.norm()).item()
                orth = (Qm.mT @ Qm - torch.eye(n, device=dev)).abs().max().item()
                t = timeit(lambda: qr.qr(A))
                panel, other = split(lambda: qr.qr(A))
                print(f"  {plan}: {t:8.0f} us ({t_ref / t:.2f}x torch)"
                      f"  panels {panel:7.0f} us, rest {other:7.0f} us (GPU sums)  err {err:.1e} orth {orth:.1e}", flush=True)
            except Exception as exc:  # noqa: BLE001 - a plan that fails to build is reported
                print(f"  {plan}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        set_plan(saved)


if __name__ == "__main__":
    main()
