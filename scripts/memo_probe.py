"""Which eager linear calls replay the launch memo on a GPU (fastpath._core.memo), their host time, and
their event-timed time with an L2 flush before each (as the bench's eager rows) and without.

    PYTHONPATH=src python3 scripts/memo_probe.py
"""
import torch
import fastpath
from fastpath._core import memo
from fastpath.ops import linear as LIN
from fastpath.bench.harness import host_us
from fastpath.streams import _flush_buffer, median_ms

dev = torch.device("cuda")
flush = _flush_buffer(dev)
for m, k, n in [(1, 4096, 4096), (4, 4096, 4096), (1, 4096, 14336), (4, 4096, 14336), (4, 14336, 4096),
                (16, 4096, 14336), (16, 14336, 4096)]:
    x = torch.randn(m, k, device=dev).bfloat16()
    w = (torch.randn(n, k, device=dev) * k ** -0.5).bfloat16()
    for on in (True, False):
        memo.ENABLED = on
        LIN._MEMO.entries.clear()
        fn = lambda: fastpath.linear(x, w)
        fn(); fn()
        kinds = [type(v).__name__ for v in LIN._MEMO.entries.values()]
        with torch.no_grad():
            h = host_us(fn, n=200, warmup=20)
        cold = 1e3 * median_ms(fn, 50, before=lambda: flush.sum())
        hot = 1e3 * median_ms(fn, 50)
        tc = 1e3 * median_ms(lambda: torch.nn.functional.linear(x, w), 50, before=lambda: flush.sum())
        print(f"{m}x{k}x{n} memo={on}: entries {kinds}, host {h:6.1f} us, eager cold {cold:6.1f} us, "
              f"hot {hot:6.1f} us; F.linear cold {tc:6.1f} us", flush=True)
