"""Why batch_norm's channels-last reduce launch reads at ~1 TB/s (NCHW's at ~2.3): a column
reduction of a (rows, C) bf16 matrix with the reduce launch's structure, each suspect switched
off in turn, timed by CUDA events (cold L2), against a flat sum of the same bytes.

    PYTHONPATH=src python scripts/bn_reduce_probe.py [--ncu]

--ncu: run the real kernel once (NHWC 32x256x56x56 bf16 forward, two launches), for
``ncu --clock-control none`` to profile.
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _probe(x_ptr, part_ptr, R, C, K, TPK, BA: tl.constexpr, BB: tl.constexpr, PIVOT: tl.constexpr,
           FIRST: tl.constexpr, SPREAD: tl.constexpr, SCATTER: tl.constexpr, COLS: tl.constexpr):
    k = tl.program_id(0)
    n_tiles = tl.cdiv(R, BA)
    cols = tl.arange(0, BB)
    if PIVOT:  # every program reads row 0 (batch_norm's pivot)
        pivot = tl.load(x_ptr + cols).to(tl.float32)
    else:
        pivot = tl.zeros([BB], dtype=tl.float32)
    if SPREAD:
        t0, ts, nt = k, K, tl.cdiv(n_tiles - k, K)
    else:
        t0, ts, nt = k * TPK, 1, tl.minimum(TPK, n_tiles - k * TPK)
    rows = tl.arange(0, BA)
    sk = tl.zeros([BB], dtype=tl.float32)
    i0 = 0
    acc1 = tl.zeros([BA, BB], dtype=tl.float32)
    acc2 = tl.zeros([BA, BB], dtype=tl.float32)
    if FIRST:  # the first tile's column means centre the chunk
        a = (t0 * BA + rows).to(tl.int64)
        m = (a < R)[:, None]
        d = tl.where(m, tl.load(x_ptr + a[:, None] * C + cols[None, :], mask=m, other=0.0).to(tl.float32)
                     - pivot[None, :], 0.0)
        sk = tl.sum(d, axis=0) / BA
        e = tl.where(m, d - sk[None, :], 0.0)
        acc1 += e
        acc2 += e * e
        i0 = 1
    for i in range(i0, nt):
        a = ((t0 + i * ts) * BA + rows).to(tl.int64)
        m = (a < R)[:, None]
        xv = tl.load(x_ptr + a[:, None] * C + cols[None, :], mask=m, other=0.0).to(tl.float32)
        e = tl.where(m, (xv - pivot[None, :]) - sk[None, :], 0.0)
        acc1 += e
        acc2 += e * e
    if COLS:
        s1 = tl.sum(acc1, axis=0)
        s2 = tl.sum(acc2, axis=0)
        if SCATTER:  # (3, C, K) partials
            tl.store(part_ptr + cols * K + k, s1)
            tl.store(part_ptr + C * K + cols * K + k, s2)
        else:
            tl.store(part_ptr + k * 2 * BB + cols, s1)
            tl.store(part_ptr + k * 2 * BB + BB + cols, s2)
    else:
        tl.store(part_ptr + k, tl.sum(tl.sum(acc1, axis=1), axis=0) + tl.sum(tl.sum(acc2, axis=1), axis=0))


def main():
    from fastpath.streams import _flush_buffer, median_ms
    dev = torch.device("cuda")
    if "--ncu" in sys.argv:
        from fastpath.ops import batch_norm as bn
        bn.configure(FUSED_CL=False)
        x = torch.randn(32, 256, 56, 56, device=dev).bfloat16().to(memory_format=torch.channels_last)
        rm, rv = torch.zeros(256, device=dev), torch.ones(256, device=dev)
        for _ in range(2):
            bn.batch_norm(x, rm, rv, training=True)
        torch.cuda.synchronize()
        return
    buf = _flush_buffer(dev)
    flush = lambda: buf.sum()
    R, C = 32 * 56 * 56, 256
    x = torch.randn(R, C, device=dev).bfloat16()
    nbytes = x.numel() * 2
    part = torch.empty(3 * C * 8192, device=dev)
    t = median_ms(lambda: x.sum(dtype=torch.float32), 20, before=flush) * 1e3
    print(f"torch x.sum(): {t:.1f} us, {nbytes / t / 1e3:.0f} GB/s")
    base = dict(BA=16, BB=256, PIVOT=True, FIRST=True, SPREAD=True, SCATTER=True, COLS=True, warps=8, tpk=8)
    variants = [("as batch_norm", {}), ("no first tile", dict(FIRST=False)), ("one sum a program", dict(COLS=False)),
                ("none of the suspects", dict(PIVOT=False, FIRST=False, SCATTER=False)),
                ("one tile a program", dict(tpk=1))]
    variants += [(f"w{w} tpk{t} {ba}x256", dict(warps=w, tpk=t, BA=ba)) for w in (2, 4, 8) for t in (4, 8, 16, 32)
                 for ba in (8, 16, 32) if ba * 256 * 2 // (32 * w) <= 64]
    variants += [(f"none w{w} tpk{t} 16x256", dict(PIVOT=False, FIRST=False, SCATTER=False, COLS=False, warps=w,
                                                   tpk=t)) for w in (4, 8) for t in (8, 32)]
    for name, v in variants:
        cfg = {**base, **v}
        BA, BB, warps, tpk = cfg.pop("BA"), cfg.pop("BB"), cfg.pop("warps"), cfg.pop("tpk")
        T = triton.cdiv(R, BA)
        K = triton.cdiv(T, tpk)
        if 3 * C * K > part.numel():
            continue
        fn = lambda: _probe[(K,)](x, part, R, C, K, tpk, BA=BA, BB=BB, num_warps=warps, **cfg)
        fn()
        t = median_ms(fn, 20, before=flush) * 1e3
        print(f"{name:24s} K {K:5d}: {t:6.1f} us, {nbytes / t / 1e3:5.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
