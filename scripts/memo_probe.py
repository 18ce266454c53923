"""Which eager calls replay the launch memo on a GPU (fastpath._core.memo), their host time with the
memo on and off, and their event-timed time with an L2 flush before each (as the bench's eager rows),
beside PyTorch's op on the same inputs: linear at 1-16 rows (bf16, fp8 weights, float32),
linear_swiglu, scaled_mm and a decode-shaped scaled_dot_product_attention.

    PYTHONPATH=src python3 scripts/memo_probe.py [NAME ...]   (only the calls whose name holds a NAME)
"""
import importlib
import sys

import torch
import torch.nn.functional as F

import fastpath
from fastpath._core import memo
from fastpath.bench.harness import host_us
from fastpath.ops import attention as ATT
from fastpath.ops import linear as LIN
from fastpath.ops.fp8 import ScalingType, quantize_fp8
from fastpath.streams import _flush_buffer, median_ms

SMM = importlib.import_module("fastpath.ops.fp8.scaled_mm")  # (the package re-exports the function by that name)
dev = torch.device("cuda")
flush = _flush_buffer(dev)
bf = torch.bfloat16


def calls():
    """(name, ours, torch's, the memo ours goes through)"""
    out = []
    for m, k, n in [(1, 4096, 4096), (4, 4096, 4096), (1, 4096, 14336), (4, 4096, 14336), (4, 14336, 4096),
                    (16, 4096, 14336), (16, 14336, 4096)]:
        x = torch.randn(m, k, device=dev).to(bf)
        w = (torch.randn(n, k, device=dev) * k ** -0.5).to(bf)
        out.append((f"linear {m}x{k}x{n}", lambda x=x, w=w: fastpath.linear(x, w), lambda x=x, w=w: F.linear(x, w),
                    LIN._MEMO))
    for m in (1, 16):
        x = torch.randn(m, 4096, device=dev)
        w = torch.randn(4096, 4096, device=dev) / 64
        out.append((f"linear float32 {m}x4096x4096", lambda x=x, w=w: fastpath.linear(x, w),
                    lambda x=x, w=w: F.linear(x, w), LIN._MEMO))
    w = (torch.randn(4096, 4096, device=dev) / 64).to(bf)
    wq, s = quantize_fp8(w, "rowwise")
    x = torch.randn(1, 4096, device=dev).to(bf)
    out.append(("linear fp8 weights 1x4096x4096", lambda: fastpath.linear(x, wq, weight_scale=s),
                lambda: F.linear(x, w), LIN._MEMO))
    wg = (torch.randn(2 * 14336, 4096, device=dev) / 64).to(bf)

    def swiglu_native():
        g, u = F.linear(x, wg).chunk(2, dim=-1)
        return F.silu(g) * u
    out.append(("linear_swiglu 1x4096x(2x14336)", lambda: LIN.linear_swiglu(x, wg), swiglu_native, LIN._MEMO))
    a8 = torch.randn(1, 4096, device=dev).to(torch.float8_e4m3fn)
    b8 = torch.randn(14336, 4096, device=dev).to(torch.float8_e4m3fn).t()
    sa, sb = torch.ones((), device=dev), torch.ones((), device=dev)  # (one tensor for both: aliasing, never replayed)
    tw = ScalingType.TensorWise
    out.append(("scaled_mm tensorwise 1x4096x14336",
                lambda: fastpath.scaled_mm(a8, b8, sa, tw, sb, tw, output_dtype=bf),
                lambda: torch._scaled_mm(a8, b8, sa, sb, out_dtype=bf), SMM._MEMO))
    q = torch.randn(1, 32, 1, 128, device=dev).to(bf)
    k, v = (torch.randn(1, 8, 1024, 128, device=dev).to(bf) for _ in range(2))  # (k is v: aliasing, never replayed)
    out.append(("sdpa decode 1 x 32/8 heads x 1024 keys",
                lambda: fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), ATT._MEMO))
    return out


only = sys.argv[1:]
for name, fn, native, mm in calls():
    if only and not any(o in name for o in only):
        continue
    for on in (True, False):
        memo.ENABLED = on
        mm.entries.clear()
        with torch.no_grad():
            fn()
            fn()
            kinds = sorted({type(v).__name__ for v in mm.entries.values()})
            h = host_us(fn, n=200, warmup=20)
            cold = 1e3 * median_ms(fn, 50, before=lambda: flush.sum())
            graph_free = 1e3 * median_ms(fn, 50)
            th = host_us(native, n=200, warmup=20)
            tc = 1e3 * median_ms(native, 50, before=lambda: flush.sum())
        print(f"{name} memo={on}: entries {kinds}, host {h:6.1f} us (torch {th:6.1f}), eager cold {cold:6.1f} us "
              f"(torch {tc:6.1f}), back to back {graph_free:6.1f} us", flush=True)
memo.ENABLED = True
