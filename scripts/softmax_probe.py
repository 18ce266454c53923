"""Quick GPU probe for the softmax kernels: correctness of every path and event timings
against torch.softmax (eager, cold L2, and CUDA-graph). Used while tuning; the benchmark
harness (python -m fastpath.bench) is what records results."""
import sys
import torch
import triton
import triton.language as tl
import fastpath
from fastpath.ops import softmax as sm

print("triton", triton.__version__, "torch", torch.__version__, "has tl.topk", hasattr(tl, "topk"))
dev = torch.device("cuda")
flush = torch.ones(64 * 2**20, dtype=torch.float32, device=dev)  # 256 MB, read (not written) to flush L2


def t_us(fn, reps=50, cold=True):
    ts = []
    for _ in range(reps + 5):
        if cold:
            flush.sum()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    ts = sorted(ts[5:])
    return ts[len(ts) // 2]


def t_graph(fn, n=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay(); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(10):
        g.replay()
    b.record(); b.synchronize()
    return a.elapsed_time(b) * 1e3 / (10 * n)


import time
x = torch.randn(1, 128256, device=dev)
for fn in (fastpath.softmax, torch.softmax):
    for _ in range(10): fn(x, -1)
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(200): fn(x, -1)
    t1 = time.perf_counter(); torch.cuda.synchronize()
    print(f"CPU time per call {fn.__module__}.{fn.__name__}: {(t1 - t0) / 200 * 1e6:.1f} us")
sm.FUSED = True
sm.CHUNK = 16384
for shape in [(1, 128256), (1, 151936), (1, 248320), (64, 128256), (16384, 131072), (4096, 4096), (32, 32000), (1, 4096)]:
    x = torch.randn(shape, device=dev) * 3
    for log in (False, True):
        ours = (fastpath.log_softmax if log else fastpath.softmax)
        theirs = (torch.log_softmax if log else torch.softmax)
        for rep in range(3):  # repeated launches reuse the sync counters
            y = ours(x, -1)
            r = theirs(x.double(), -1)
            err = ((y.double() - r).norm() / r.norm()).item()
            if not err < 1e-5:
                print("WRONG", shape, log, rep, err); sys.exit(1)
        nbytes = 2 * x.numel() * 4
        a, b = t_us(lambda: ours(x, -1)), t_us(lambda: theirs(x, -1))
        line = f"{str(shape):>16} log={int(log)} ours {a:8.1f} us torch {b:8.1f} us x{b/a:5.2f}  {nbytes/a/1e3:7.0f} GB/s"
        if x.numel() < 2**24:
            ga, gb = t_graph(lambda: ours(x, -1)), t_graph(lambda: theirs(x, -1))
            line += f" | graph(hot) ours {ga:6.1f} torch {gb:6.1f} x{gb/ga:5.2f}"
        print(line, flush=True)
print("copy", end=" ")
big = torch.empty(2**31 // 4, device=dev); big2 = torch.empty_like(big)
c = t_us(lambda: big2.copy_(big), reps=10, cold=False)
print(f"{2 * big.numel() * 4 / c / 1e3:.0f} GB/s")

for fused, chunk in [(True, 16384), (True, 8192), (False, 16384)]:  # the knobs that exist
    sm.FUSED, sm.CHUNK = fused, chunk
    for shape in [(64, 128256), (16384, 131072)]:
        x = torch.randn(shape, device=dev)
        y = fastpath.softmax(x, -1); r = torch.softmax(x.double(), -1)
        assert ((y.double() - r).norm() / r.norm()).item() < 1e-5
        a = t_us(lambda: fastpath.softmax(x, -1), reps=20)
        line = f"fused={int(fused)} CHUNK {chunk} {shape}: cold {a:.1f} us {2 * x.numel() * 4 / a / 1e3:.0f} GB/s"
        if shape[0] == 64:
            line += f" | graph {t_graph(lambda: fastpath.softmax(x, -1)):.1f} us"
        print(line, flush=True)
sm.FUSED, sm.CHUNK = True, 16384
