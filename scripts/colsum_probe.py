"""GPU probe: how fast can a column reduction of an (8192, 1024) float32 matrix read its
33.5 MB cold (batch_norm 2-D's reduce phase, issue 10), against a one-row projection reading
as many bytes (``fastpath.linear`` 1x4096x4096 bf16) and ``torch.sum`` over the same bytes.

The reduce kernel below has batch_norm's rows plan's shape (tiles of BR rows x 1024 channels,
two float32 accumulators of the tile's shape summed after the loop, one partial row a program)
with the plan's knobs free: programs an SM, rows a tile, warps, pipeline stages, tiles taken
strided (p, p + P, ...: the rows plan's order) or as one contiguous run a program; ``TWO``
reads a second matrix as the backward's reduce does (g and x: 67 MB). Kernel times from the
profiler, the median of 5 calls each after an L2 flush (as ``tune_batch_norm.py --phases``).

    PYTHONPATH=src python3 scripts/colsum_probe.py [--features]

``--features``: only the forward reduce with batch_norm's features switched one at a time
(``bn_features``) and the rows plan's own reduce launch.
"""
import os
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


@triton.jit
def _ld(ptrs, m, EVICT: tl.constexpr):
    if EVICT:
        return tl.load(ptrs, mask=m, other=0.0, eviction_policy="evict_last")
    else:
        return tl.load(ptrs, mask=m, other=0.0)


@triton.jit
def _bnlike(x_ptr, part_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, STAGES: tl.constexpr, PIVOT: tl.constexpr,
            FIRST: tl.constexpr, CMASK: tl.constexpr, SCATTER: tl.constexpr, EVICT: tl.constexpr,
            OUTER: tl.constexpr, WHERE: tl.constexpr):
    # The forward reduce of batch_norm's rows plan (strided tiles, one program an SM), its features
    # switchable: PIVOT subtract row 0; FIRST the first tile outside the loop centring the rest on its
    # column means (a sum across warps), the loop from 1; CMASK the channel mask in the load's mask;
    # SCATTER the partials stored a channel's P values together (cols * P + p) as three rows; EVICT
    # evict_last loads; OUTER the loop inside a loop over channel blocks; WHERE masked values zeroed.
    p = tl.program_id(0)
    P = tl.num_programs(0)
    T = tl.cdiv(R, BR)
    nt = tl.cdiv(T - p, P)
    if OUTER:
        hi = C
    else:
        hi = BC
    for c0 in range(0, hi, BC):
        cols = c0 + tl.arange(0, BC)
        cm = cols < C
        if PIVOT:
            pivot = tl.load(x_ptr + cols, mask=cm, other=0.0)
        else:
            pivot = tl.zeros([BC], dtype=tl.float32)
        rows = (p * BR + tl.arange(0, BR)).to(tl.int64)
        m = (rows < R)[:, None] & cm[None, :] if CMASK else (rows < R)[:, None]
        sk = tl.zeros([BC], dtype=tl.float32)
        acc1 = tl.zeros([BR, BC], dtype=tl.float32)
        i0 = 0
        if FIRST:
            x = _ld(x_ptr + rows[:, None] * C + cols[None, :], m, EVICT)
            d = tl.where(m, x - pivot[None, :], 0.0)
            sk = tl.sum(d, axis=0) / BR
            acc1 = tl.where(m, d - sk[None, :], 0.0)
            i0 = 1
        acc2 = acc1 * acc1
        for i in tl.range(i0, nt, num_stages=STAGES):
            rows = ((p + i * P) * BR + tl.arange(0, BR)).to(tl.int64)
            m = (rows < R)[:, None] & cm[None, :] if CMASK else (rows < R)[:, None]
            x = _ld(x_ptr + rows[:, None] * C + cols[None, :], m, EVICT)
            e = (x - pivot[None, :]) - sk[None, :]
            if WHERE:
                e = tl.where(m, e, 0.0)
            acc1 += e
            acc2 += e * e
        s1 = tl.sum(acc1, axis=0)
        s2 = tl.sum(acc2, axis=0)
        if SCATTER:
            pp = part_ptr + cols.to(tl.int64) * P + p
            tl.store(pp, s1, mask=cm)
            tl.store(pp + C * P, sk + s1, mask=cm)
            tl.store(pp + 2 * C * P, s2 - s1 * s1, mask=cm)
        else:
            tl.store(part_ptr + p * BC + cols, s1)
            tl.store(part_ptr + (P + p) * BC + cols, s2)


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


def kernel_us(call, flush) -> float:
    """Kernel time of one call (profiler, cold L2): each launch's median of 5 calls, summed."""
    from tune_batch_norm import phases
    return sum(us for _, us in phases(call, flush))


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
    if "--features" in sys.argv:  # only the forward reduce's features (bn_features)
        bn_features(x, flush, sms)
        return 0
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
                      f"{'contig ' if contig else 'strided'} P {P:>4}: kernel {k:7.2f} us ({mb / k:5.2f} TB/s) "
                      f"graph {gr:7.2f} us  err {err:.1e}", flush=True)
            except Exception as exc:  # a plan that does not compile or fit: say so, go on
                print(f"colsum {per_sm}/SM BR {br} w{warps} s{stages} two={two}: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:100]}", flush=True)
    bn_features(x, flush, sms)
    return 0


FEATURES = ("PIVOT", "FIRST", "CMASK", "SCATTER", "EVICT", "OUTER", "WHERE")


def bn_features(x, flush, sms) -> None:
    """The forward reduce's features: none, each alone, all, all but each; then the rows plan's own
    forward reduce (ROWS_PHASES: its first launch)."""
    import torch.nn.functional as F

    from fastpath.ops import batch_norm_kernel as bnk
    R, C = x.shape
    part = torch.empty(3 * sms * C, device=x.device)
    sets = [()] + [(f,) for f in FEATURES] + [FEATURES] + [tuple(g for g in FEATURES if g != f) for f in FEATURES]
    for on in sets:
        def call():
            _bnlike[(sms,)](x, part, R, C, BR=4, BC=C, STAGES=4, num_warps=8, **{f: f in on for f in FEATURES})
        try:
            call()
            label = "none" if not on else ("all" if len(on) == len(FEATURES) else "+".join(on) if len(on) == 1
                                           else "all but " + next(f for f in FEATURES if f not in on))
            print(f"bn-like reduce {label:<20} kernel {kernel_us(call, flush):7.2f} us", flush=True)
        except Exception as exc:
            print(f"bn-like reduce {on}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
    w, b = torch.ones(C, device=x.device), torch.zeros(C, device=x.device)
    old = bnk.ROWS_PHASES
    bnk.ROWS_PHASES = True
    try:
        import fastpath
        call = lambda: fastpath.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
        call()
        ref = F.batch_norm(x, None, None, w, b, training=True)
        print(f"rows plan forward (3 launches) kernels {kernel_us(call, flush):7.2f} us, max err "
              f"{(call() - ref).abs().max().item():.1e}", flush=True)
    finally:
        bnk.ROWS_PHASES = old


if __name__ == "__main__":
    sys.exit(main())
