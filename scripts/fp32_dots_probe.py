"""float32 through the other kernels whose dots are exact (``matvec._mm``: ``ieee`` products on
the FMA units): ``linear`` at 1-64 rows and ``fused_experts`` at mixture-of-experts decode
shapes, against PyTorch on the same inputs (``F.linear``; for the experts, transformers'
default loop: each selected expert's tokens through two ``F.linear`` calls, since
``torch._grouped_mm`` takes 16-bit operands). Float32 attention was up to 23x slower than
PyTorch with exact dots and became 2.6-9x faster with ``tf32x3`` (scripts/decode_fp32_probe.py);
this says whether these need the same. Times: medians of CUDA-graph replays of 20 calls (us a
call); errors: relative (norm) to float64.

    FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=src:scripts [ROWS=1,4] [EXPERTS=0] [SWIGLU=1] python3 scripts/fp32_dots_probe.py

H100, 7b5b33b (exact dots at 9-16 rows): 16 x 4096 -> 4096 309.3 us against F.linear's 50.1,
16 x 4096 -> 14336 1068.7 against 153.2; 1-4 rows 0.93-1.01x bar 1 x 14336 -> 4096 (0.76x);
64 rows (F.linear itself) 1.00x; fused_experts 3.6-4.1x the transformers loop. Hence
``matvec.F32_DOT_PREC`` (rows 9-16) and the variants below (FMA_TILE: rows 1-8).
H200, fd9f751: one row on F32_ONE_ROW_FMA 1.01-1.23x; 2-4 rows pipelined (matvec.F32_FEW_ROWS,
since removed) 1.1-4x slower than FMA_TILE's blocks on every tile set, the tf32x3 dot from 2 rows
0.91-1.08x at 4 rows (FMA_TILE's 0.95-1.03x).
"""
import os

import torch
import torch.nn.functional as F

import fastpath
from fastpath.ops.linear import linear_swiglu
from fastpath.ops.moe import fused_experts

from decode_stages_probe import graph_us


ROWS = tuple(int(r) for r in os.environ.get("ROWS", "1,2,4,5,8,12,16,64").split(",") if r)
#: (BLOCK_N, BLOCK_K, programs per SM, stages) of the one-row product-and-sum summed over K
#: (matvec.F32_ONE_ROW_FMA); None: FMA_TILE's blocks
ONE_ROW = (None, (16, 256, 2, 3), (16, 512, 2, 3), (8, 512, 2, 3), (32, 256, 2, 3), (16, 256, 4, 3), (16, 256, 2, 4),
           (8, 1024, 2, 3), (32, 128, 4, 3))
#: (BLOCK_N, BLOCK_K, programs per SM) of the float32 16-row dot (matvec.F32_DOT_BLOCKS); None: as FMA_TILE gives
DOT_BLOCKS = (None, (32, 128, 2), (32, 64, 4), (64, 64, 2), (64, 128, 1), (16, 128, 4), (32, 256, 2))


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def row(name, ours, native, exact):
    e_o, e_t = rel(ours(), exact), rel(native(), exact)
    t_o, t_t = graph_us(ours), graph_us(native)
    print(f"{name:<40} ours {t_o:9.1f} us ({e_o:.0e})  torch {t_t:9.1f} us ({e_t:.0e})  torch/ours {t_t / t_o:5.2f}x",
          flush=True)


def main():
    from fastpath.ops import matvec
    assert os.environ.get("FASTPATH_LAUNCH_MEMO") == "0", "run with FASTPATH_LAUNCH_MEMO=0 (knobs change between calls)"
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    print("float32 linear: default (F32_DOT_PREC / FMA_TILE as set) against F.linear; then the variants")
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
        w = torch.randn(n, k, device=dev, generator=g) / k ** 0.5
        for m in ROWS:
            x = torch.randn(m, k, device=dev, generator=g)
            exact = x.double() @ w.double().T
            row(f"linear {m}x{k}x{n}", lambda: fastpath.linear(x, w), lambda: F.linear(x, w), exact)
            if m == 1:
                variants = [{"F32_ONE_ROW_FMA": v} for v in ONE_ROW]
            elif m <= 4:
                variants = [{"FMA_TILE": t} for t in (4096, 16384)] + [{"F32_DOT_FROM": 2}]
            elif m < 64:
                variants = [{"F32_DOT_FROM": 5, "F32_DOT_BLOCKS": b} for b in DOT_BLOCKS]
            else:
                variants = []
            for var in variants:
                old = {kn: getattr(matvec, kn) for kn in var}
                for kn, val in var.items():
                    setattr(matvec, kn, val)
                try:
                    e = rel(fastpath.linear(x, w), exact)
                    print(f"    {var}: {graph_us(lambda: fastpath.linear(x, w)):9.1f} us ({e:.0e})", flush=True)
                finally:
                    for kn, val in old.items():
                        setattr(matvec, kn, val)
    if os.environ.get("SWIGLU", "0") == "1":  # one row through SwiGLU: 4096 -> 2 x 14336, 2048 -> 2 x 6144
        for n, k in ((14336, 4096), (6144, 2048)):
            w = torch.randn(2 * n, k, device=dev, generator=g) / k ** 0.5
            x = torch.randn(1, k, device=dev, generator=g)
            gg, uu = (x.double() @ w.double().T).chunk(2, dim=-1)
            exact = F.silu(gg) * uu

            def native(x=x, w=w, n=n):
                h = F.linear(x, w)
                return F.silu(h[:, :n]) * h[:, n:]
            row(f"linear_swiglu 1x{k}x(2x{n})", lambda: linear_swiglu(x, w), native, exact)
            for glu in (False, True):
                matvec.F32_ONE_ROW_GLU = glu
                e = rel(linear_swiglu(x, w), exact)
                print(f"    F32_ONE_ROW_GLU={glu}: {graph_us(lambda: linear_swiglu(x, w)):9.1f} us ({e:.0e})",
                      flush=True)
            matvec.F32_ONE_ROW_GLU = False
    if os.environ.get("EXPERTS", "1") == "0":
        return
    # Qwen3-30B-A3B's experts (128 of 768 x 2048), top-8, one token and 8 tokens
    E, H, I, top = 128, 2048, 768, 8
    gu = torch.randn(E, 2 * I, H, device=dev, generator=g) / H ** 0.5
    dn = torch.randn(E, H, I, device=dev, generator=g) / I ** 0.5
    for t in (1, 8):
        x = torch.randn(t, H, device=dev, generator=g)
        ids = torch.stack([torch.randperm(E, device=dev, generator=g)[:top] for _ in range(t)]).int()
        wts = torch.softmax(torch.randn(t, top, device=dev, generator=g), -1)

        # transformers' default experts loop: each selected expert's tokens through two F.linear calls
        plan = []
        for e in ids.unique().tolist():
            tok, slot = (ids == e).nonzero(as_tuple=True)
            plan.append((e, tok, slot))

        def native():
            out = torch.zeros(t, H, device=dev)
            for e, tok, slot in plan:
                h = F.linear(x[tok], gu[e])
                y = F.linear(F.silu(h[:, :I]) * h[:, I:], dn[e])
                out.index_add_(0, tok, y * wts[tok, slot, None])
            return out
        xs, gus, dns = x.double(), gu.double(), dn.double()
        hh = torch.bmm(gus[ids.flatten().long()], xs.repeat_interleave(top, 0)[:, :, None])[:, :, 0]
        yy = torch.bmm(dns[ids.flatten().long()], (F.silu(hh[:, :I]) * hh[:, I:])[:, :, None])[:, :, 0]
        ref = (yy.view(t, top, H) * wts.double()[:, :, None]).sum(1)
        row(f"fused_experts {t} token(s), 128 x 768 x 2048",
            lambda: fused_experts(x, ids, wts, gu, dn), native, ref)


if __name__ == "__main__":
    main()
