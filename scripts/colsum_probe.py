"""GPU probe: how fast can a column reduction of an (8192, 1024) float32 matrix read its
33.5 MB cold (batch_norm 2-D's reduce phase, issue 10), against a one-row projection reading
as many bytes (``fastpath.linear`` 1x4096x4096 bf16) and ``torch.sum`` over the same bytes.

The reduce kernel below has batch_norm's rows plan's shape (tiles of BR rows x 1024 channels,
two float32 accumulators of the tile's shape summed after the loop, one partial row a program)
with the plan's knobs free: programs an SM, rows a tile, warps, pipeline stages, tiles taken
strided (p, p + P, ...: the rows plan's order) or as one contiguous run a program; ``TWO``
reads a second matrix as the backward's reduce does (g and x: 67 MB). Kernel times from the
profiler, the median of 5 calls each after an L2 flush (as ``tune_batch_norm.py --phases``).

    PYTHONPATH=src python3 scripts/colsum_probe.py
"""
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@triton.jit
def _colsum(x_ptr, g_ptr, part_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, TWO: tl.constexpr,
            STAGES: tl.constexpr, CONTIG: tl.constexpr):
    p = tl.program_id(0)
    P = tl.num_programs(0)
    T = tl.cdiv(R, BR)
    if CONTIG:
        per = tl.cdiv(T, P)
        t0 = p * per
        nt = tl.minimum(per, T - t0)
        step = 1
    else:
        t0 = p
        nt = tl.cdiv(T - p, P)
        step = P
    cols = tl.arange(0, BC)
    acc1 = tl.zeros([BR, BC], dtype=tl.float32)
    acc2 = tl.zeros([BR, BC], dtype=tl.float32)
    for i in tl.range(0, nt, num_stages=STAGES):
        rows = ((t0 + i * step) * BR + tl.arange(0, BR)).to(tl.int64)
        m = (rows < R)[:, None]
        x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
        if TWO:
            g = tl.load(g_ptr + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
            acc1 += g
            acc2 += g * x
        else:
            acc1 += x
            acc2 += x * x
    tl.store(part_ptr + p * BC + cols, tl.sum(acc1, axis=0))
    tl.store(part_ptr + (P + p) * BC + cols, tl.sum(acc2, axis=0))


#: (programs an SM, rows a tile, warps, stages, contiguous runs)
VARIANTS = [
    (1, 4, 8, 4, False),  # the rows plan's own
    (1, 4, 8, 4, True),
    (1, 8, 8, 3, False),
    (1, 16, 8, 2, False),
    (2, 4, 8, 3, False),
    (2, 4, 4, 4, False),
    (4, 4, 4, 3, False),
    (4, 2, 4, 4, False),
    (4, 4, 4, 3, True),
    (8, 2, 4, 3, False),
    (8, 1, 2, 4, False),
    (16, 1, 2, 3, True),
]


def kernel_us(call, flush, calls=5) -> float:
    """Summed kernel time of one call (profiler), the median over ``calls`` cold-L2 calls."""
    from torch.profiler import ProfilerActivity, profile
    runs = []
    for _ in range(calls):
        flush()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        runs.append(sum(e.device_time for e in prof.events() if e.device_time > 0 and e.device_type.name == "CUDA"))
    return statistics.median(runs)


def main() -> int:
    from tune_batch_norm import graph_us

    import fastpath
    from fastpath.streams import _flush_buffer
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    buf = _flush_buffer(dev)
    flush = lambda: buf.sum()  # noqa: E731
    R, C = 8192, 1024
    x = torch.randn(R, C, device=dev)
    g = torch.randn(R, C, device=dev)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    a = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    for name, call in (("fastpath.linear 1x4096x4096 bf16 (33.6 MB)", lambda: fastpath.linear(a, w)),
                       ("torch.sum 8192x1024 fp32 (33.6 MB)", lambda: x.sum()),
                       ("torch.sum(0) 8192x1024 fp32", lambda: x.sum(0))):
        call()
        print(f"{name:<48} kernel {kernel_us(call, flush):7.2f} us  graph {graph_us(call, flush, 20):7.2f} us",
              flush=True)
    want1, want2 = x.sum(0).double(), (x * x).sum(0).double()
    wg1, wg2 = g.sum(0).double(), (g * x).sum(0).double()
    for per_sm, br, warps, stages, contig in VARIANTS:
        for two in (False, True):
            P = min(sms * per_sm, R // br)
            part = torch.empty(2 * P, C, device=dev)

            def call():
                _colsum[(P,)](x, g, part, R, C, BR=br, BC=C, TWO=two, STAGES=stages, CONTIG=contig,
                              num_warps=warps)
            try:
                call()
                s1, s2 = part[:P].double().sum(0), part[P:].double().sum(0)
                e1, e2 = (wg1, wg2) if two else (want1, want2)
                err = max(((s - e).abs().max() / e.abs().max()).item() for s, e in ((s1, e1), (s2, e2)))
                k, gr = kernel_us(call, flush), graph_us(call, flush, 20)
                mb = (2 if two else 1) * x.nbytes / 1e6
                print(f"colsum {'x,g' if two else 'x  '} {per_sm:>2}/SM BR {br:>2} w{warps} s{stages} "
                      f"{'contig ' if contig else 'strided'} P {P:>4}: kernel {k:7.2f} us ({mb / k:5.0f} GB/s) "
                      f"graph {gr:7.2f} us  err {err:.1e}", flush=True)
            except Exception as exc:  # a plan that does not compile or fit: say so, go on
                print(f"colsum {per_sm}/SM BR {br} w{warps} s{stages} two={two}: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:100]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
