"""Host (Python) time of one eager ``fastpath.linear``, one decode-shaped
``fastpath.scaled_dot_product_attention`` and one one-token ``fastpath.fused_experts`` without a GPU: the launch module is made to believe
it runs on CUDA device 0 and every cached kernel is a no-op stub, so the figure is fastpath's
own Python path (checks, shapes, plans, argument lists, the Launcher) without Triton's driver
call. Runs on any machine; compare before and after a host-side change.

    PYTHONPATH=src python scripts/host_stub.py [--profile]
"""
import cProfile
import pstats
import sys
import time

import torch

import fastpath
from fastpath._core import launch as L
from fastpath.ops import attention as ATT
from fastpath.ops import linear as LIN
from fastpath.ops import matvec
from fastpath.ops import moe as MOE


class Stub:
    """A compiled kernel whose run() counts calls."""
    function, packed_metadata = 0, 0

    def __init__(self):
        self.calls = 0

    def run(self, *args):
        self.calls += 1


class StubCache(dict):
    def __init__(self, stub):
        super().__init__()
        self.stub = stub

    def get(self, key, default=None):
        return (self.stub, self.stub.run)


def main():
    stub = Stub()
    L.INTERPRET = False
    L._raw_stream = lambda index: 0
    L._hooks_set = lambda: False
    L.pdl_on = lambda index: True
    torch.cuda.current_device = lambda: 0
    matvec.num_sms = lambda device: 132
    LIN.use_triton = lambda t: True
    ATT.use_triton = lambda t: True
    ATT.num_sms = lambda device: 132
    MOE.use_triton = lambda t: True
    for mod in (MOE, MOE.K):
        if hasattr(mod, "num_sms"):
            mod.num_sms = lambda device: 132
    for launcher in (matvec._MV, ATT._DECODE, ATT._COMBINE, *vars(MOE).values()):
        if isinstance(launcher, L.Launcher):
            launcher.kernels = StubCache(stub)
    x = torch.randn(1, 4096).bfloat16()
    w = torch.randn(4096, 4096).bfloat16()
    q = torch.randn(1, 32, 1, 128).bfloat16()
    k = torch.randn(1, 8, 1024, 128).bfloat16()
    v = torch.randn(1, 8, 1024, 128).bfloat16()
    E, H, I = 16, 2048, 768  # 16 experts (the host path does not depend on E): Qwen3-30B-A3B's widths
    h = torch.randn(1, H).bfloat16()
    gate_up, down = torch.randn(E, 2 * I, H).bfloat16(), torch.randn(E, H, I).bfloat16()
    ids = torch.tensor([[0, 3, 5, 7, 9, 11, 13, 15]])
    tw = torch.full((1, 8), 0.125)
    cases = {"fastpath.linear 1x4096x4096": lambda: fastpath.linear(x, w),
             "fastpath.scaled_dot_product_attention decode 1K": (
                 lambda: fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
             "fastpath.fused_experts one token, top-8": lambda: fastpath.fused_experts(h, ids, tw, gate_up, down)}
    n = 5000
    for name, fn in cases.items():
        for _ in range(200):
            fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        print(f"{name}, Python path: {(time.perf_counter() - t0) / n * 1e6:.2f} us a call")
        if "--profile" in sys.argv:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(2000):
                fn()
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(20)
    print(f"({stub.calls} stub launches)")


if __name__ == "__main__":
    main()
