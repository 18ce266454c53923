"""What a host sync costs on this machine, and where an eager ``bincount`` call spends its host
time: wall clock per call (median of many) of the GPU work alone, then with each way of
reading a small flag back (``.item()``, a copy into pinned memory waited on by an event or by
the stream), next to ``torch.bincount`` on the same data.

    PYTHONPATH=src python3 scripts/sync_probe.py [--n 16777216] [--bins 1000] [--spec 1024 8192]
"""
import argparse
import statistics
import time

import torch

from fastpath.bench.harness import host_us, kernel_times
from fastpath.ops import bincount as bc
from fastpath.ops.bincount import bincount


def wall_us(fn, reps=60, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--bins", type=int, default=1000)
    ap.add_argument("--spec", type=int, nargs="*", default=[],
                    help="also time bincount(x) (no minlength) with these SPEC_BINS, wall and kernels")
    a = ap.parse_args()
    dev = torch.device("cuda")
    x = torch.randint(0, a.bins, (a.n,), device=dev)
    flag = torch.zeros(2, dtype=torch.int64, device=dev)
    pinned = torch.empty(2, dtype=torch.int64, pin_memory=True)
    ev = torch.cuda.Event()
    stream = torch.cuda.current_stream()

    def gpu_only():
        bincount(x, minlength=a.bins, validate=False)

    def item():
        bincount(x, minlength=a.bins, validate=False)
        return int(flag[0].item())

    def tolist():
        bincount(x, minlength=a.bins, validate=False)
        return flag.tolist()

    def pinned_event():
        bincount(x, minlength=a.bins, validate=False)
        pinned.copy_(flag, non_blocking=True)
        ev.record()
        ev.synchronize()
        return pinned.tolist()

    def pinned_stream():
        bincount(x, minlength=a.bins, validate=False)
        pinned.copy_(flag, non_blocking=True)
        stream.synchronize()
        return pinned.tolist()

    def sync_only():
        bincount(x, minlength=a.bins, validate=False)
        torch.cuda.synchronize()

    rows = [
        ("host only: ours validate=False (no sync)", host_us(gpu_only, n=200, warmup=20)),
        ("host only: torch.empty(1000) + zero_", host_us(lambda: torch.zeros(a.bins, device=dev), n=200)),
        ("wall: ours validate=False + synchronize", wall_us(sync_only)),
        ("wall: ours validate=False + flag.item()", wall_us(item)),
        ("wall: ours validate=False + flag.tolist()", wall_us(tolist)),
        ("wall: ours validate=False + pinned copy, event sync", wall_us(pinned_event)),
        ("wall: ours validate=False + pinned copy, stream sync", wall_us(pinned_stream)),
        ("wall: ours validate=True (minlength given)", wall_us(lambda: bincount(x, minlength=a.bins))),
        ("wall: ours validate=True (no minlength)", wall_us(lambda: bincount(x))),
        ("wall: torch.bincount(minlength)", wall_us(lambda: torch.bincount(x, minlength=a.bins))),
        ("wall: torch.bincount()", wall_us(lambda: torch.bincount(x))),
        ("wall: torch.aminmax + tolist", wall_us(lambda: torch.stack(torch.aminmax(x)).tolist())),
    ]
    for name, us in rows:
        print(f"{name:<56s} {us:8.1f} us", flush=True)
    for name, fn in (("validate=True", lambda: bincount(x, minlength=a.bins)), ("validate=False", gpu_only),
                     ("no minlength", lambda: bincount(x)), ("torch", lambda: torch.bincount(x, minlength=a.bins))):
        for kname, (us, calls) in kernel_times(fn, reps=20).items():
            print(f"kernels {name:<16s} {kname[:60]:<60s} {us:8.1f} us {calls:4.1f}x", flush=True)
    for spec in a.spec:  # the speculative bins' cost: wall clock and kernels of bincount(x)
        bc.SPEC_BINS = spec
        print(f"SPEC_BINS={spec}: wall {wall_us(lambda: bincount(x)):.1f} us", flush=True)
        for kname, (us, calls) in kernel_times(lambda: bincount(x), reps=20).items():
            print(f"kernels SPEC_BINS={spec:<6d} {kname[:60]:<60s} {us:8.1f} us {calls:4.1f}x", flush=True)


if __name__ == "__main__":
    main()
