"""solve_triangular's large-n host path (``triangular.HOST_BLOCK``, ``HOST_BLOCK_N``) against torch:
by default the issue's 4096x4096 upper system with 512 right-hand sides (the benchmark's inputs), each variant
eager (cold L2), in a CUDA graph, and its host time a call (no sync), rounds alternated in one
process; relative error against a float64 solve; then the kernel times of each variant's call.

    PYTHONPATH=src python3 scripts/solve_tri_host.py [--n 4096] [--k 512] [--batch 1] [--rounds 2] \
        [--variant "host 256:linalg.triangular.HOST_BLOCK=256"]...
(a variant as in knob_ab.py: ``NAME:module.KNOB=value;...``, modules under ``fastpath.ops``)
"""
import argparse

import torch
from knob_ab import apply, knob_defaults, parse

from fastpath._core import memo
from fastpath.bench.harness import Timer, host_us, kernel_times
from fastpath.ops.linalg import triangular as T

M = "linalg.triangular"
DEFAULT = [f"host 256:{M}.HOST_BLOCK=256", f"host 512:{M}.HOST_BLOCK=512"]
ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=4096)
ap.add_argument("--k", type=int, default=512)
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--variant", action="append", default=[])
args = ap.parse_args()
memo.ENABLED = False

variants = [parse(spec) for spec in args.variant or DEFAULT]
base = knob_defaults(variants)

g = torch.Generator(device="cuda").manual_seed(0)
n, k, nb = args.n, args.k, args.batch
A = torch.randn(nb, n, n, generator=g, device="cuda") * n ** -0.5
A = A.triu() + 2 * torch.eye(n, device="cuda")
B = torch.randn(nb, n, k, generator=g, device="cuda")
ref = torch.linalg.solve_triangular(A.double(), B.double(), upper=True)
timer = Timer(torch.cuda.get_device_properties(0).L2_cache_size)
torch_fn = lambda: torch.linalg.solve_triangular(A, B, upper=True)  # noqa: E731


def ours():
    return T.solve_triangular(A, B, upper=True)


print(f"{torch.cuda.get_device_name()} torch {torch.__version__} batch={nb} n={n} k={k}")
for name, sets in variants:
    apply(base, sets)
    X = ours()
    err = ((X.double() - ref).norm() / ref.norm()).item()
    print(f"{name:14s} rel err {err:.2e}")
for rnd in range(args.rounds):
    for name, sets in [("torch", None)] + variants:
        fn = torch_fn
        if sets is not None:
            apply(base, sets)
            fn = ours
        est = timer.estimate_ms(fn, ())
        eager = timer.eager_us(fn, (), False, est)
        graph = timer.graph_us(fn, [()], est)
        host = host_us(fn, 20, 3)
        print(f"round {rnd} {name:14s} eager {eager:8.1f} us  graph {graph:8.1f} us  host {host:7.1f} us")
for name, sets in variants:
    apply(base, sets)
    err = ((ours().double() - ref).norm() / ref.norm()).item()  # (a graph's replay, where the variant keeps one)
    print(f"{name:14s} rel err after the rounds {err:.2e}")
    times = kernel_times(ours, 5, timer.flush)
    rows = sorted(times.items(), key=lambda kv: -kv[1][0])
    print(f"== {name}: " + "; ".join(f"{key[:60]} {us:.1f} us x{cnt:g}" for key, (us, cnt) in rows[:8]))
apply(base)
