"""Host (Python) time of eager fastpath calls without a GPU (``linear``, a decode-shaped
``scaled_dot_product_attention``, a one-token ``fused_experts``, elementwise ops, a loss with
its backward, small-matrix ``inv_ex`` and ``pinv``, greedy ``sample``, a video ``pad``, each
launch-memo user with and without a replay of its memo, the training ops' forward + backward
with and without theirs, interleaved rounds): every ops module is made to believe it runs on
CUDA device 0 and every cached kernel is a no-op stub, so the figure is fastpath's own Python
path (checks, shapes, plans, argument lists, the Launcher) without Triton's driver call. Runs
on any machine; compare before and after a host-side change.

    PYTHONPATH=src python scripts/host_stub.py [--profile] [NAME ...]
(NAME: only the cases whose name holds it; the training rounds always run)
"""
import cProfile
import importlib
import pstats
import sys
import time

import torch

import fastpath
from fastpath._core import launch as L


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


def _stub_everything(stub) -> None:
    """Make every ops module believe it runs on CUDA device 0 and stub every Launcher."""
    import pkgutil

    import fastpath.ops as ops
    L.INTERPRET = False
    L._raw_stream = lambda index: 0
    L._hooks_set = lambda: False
    L.pdl_on = lambda index: True
    torch.cuda.current_device = lambda: 0
    mods = [importlib.import_module(f"fastpath.ops.{m.name}") for m in pkgutil.iter_modules(ops.__path__)]
    lin = importlib.import_module("fastpath.ops.linalg")
    mods += [importlib.import_module(f"fastpath.ops.linalg.{m.name}") for m in pkgutil.iter_modules(lin.__path__)]
    for mod in mods:
        if hasattr(mod, "use_triton"):
            mod.use_triton = lambda t: True
        if hasattr(mod, "num_sms"):
            mod.num_sms = lambda device: 132
        for launcher in vars(mod).values():
            if isinstance(launcher, L.Launcher):
                launcher.kernels = StubCache(stub)


def main():
    stub = Stub()
    _stub_everything(stub)
    x = torch.randn(1, 4096).bfloat16()
    w = torch.randn(4096, 4096).bfloat16()
    wg = torch.randn(8192, 4096).bfloat16()
    x4, w4 = torch.randn(4, 14336).bfloat16(), torch.randn(4096, 14336).bfloat16()
    q = torch.randn(1, 32, 1, 128).bfloat16()
    k = torch.randn(1, 8, 1024, 128).bfloat16()
    v = torch.randn(1, 8, 1024, 128).bfloat16()
    E, H, I = 16, 2048, 768  # 16 experts (the host path does not depend on E): Qwen3-30B-A3B's widths
    h = torch.randn(1, H).bfloat16()
    gate_up, down = torch.randn(E, 2 * I, H).bfloat16(), torch.randn(E, H, I).bfloat16()
    ids = torch.tensor([[0, 3, 5, 7, 9, 11, 13, 15]])
    tw = torch.full((1, 8), 0.125)
    h8 = h.expand(8, H).contiguous()
    offs8 = torch.bincount(ids.reshape(-1), minlength=E).cumsum(0).to(torch.int32)
    u8a = torch.randint(0, 255, (256, 256), dtype=torch.uint8)
    u8b = torch.randint(0, 255, (256, 256), dtype=torch.uint8)
    xb = torch.randn(256, 256).bfloat16()
    ya = torch.randn(64, 256, requires_grad=True)
    yb = torch.randn(64, 256)

    gy = torch.randn(64, 256)
    xb2 = torch.randn(64, 256, requires_grad=True)
    wb, bb = torch.randn(256, requires_grad=True), torch.randn(256, requires_grad=True)
    rmb, rvb = torch.zeros(256), torch.ones(256)

    def mse_fwd_bwd():
        fastpath.mse_loss(ya, yb, reduction="none").sum().backward()

    def training(name):  # forward + backward through the op's eager autograd path, the output gradient given
        if name == "mse_loss":
            y = fastpath.mse_loss(ya, yb, reduction="none")
            return torch.autograd.grad(y, ya, gy)
        if name == "dropout":
            y = fastpath.dropout(ya, 0.1)
            return torch.autograd.grad(y, ya, gy)
        y = fastpath.batch_norm(xb2, rmb, rvb, wb, bb, training=True)
        return torch.autograd.grad(y, (xb2, wb, bb), gy)

    from fastpath._core.memo import LaunchMemo
    from fastpath.ops import batch_norm as bn_mod
    from fastpath.ops import dropout as dropout_mod
    from fastpath.ops import loss as loss_mod
    training_memos = [m for mod in (loss_mod, dropout_mod, bn_mod) for m in vars(mod).values()
                      if isinstance(m, LaunchMemo)]

    def with_memo(name):  # the training ops' memos replaying on the CPU stand-ins
        for m in training_memos:
            m.device_types = ("cpu",)
        try:
            return training(name)
        finally:
            for m in training_memos:
                m.device_types = ("cuda",)

    from fastpath.ops import linear as linear_mod
    from fastpath.ops import attention as attention_mod
    from fastpath.ops import elementwise as ew_mod
    from fastpath.ops import pad as pad_mod
    from fastpath.ops import sampling as sampling_mod
    from fastpath.ops import bincount as bincount_mod

    from fastpath._core import memo as memo_mod

    class _Torch:  # bincount's range (two int64 words) reads back zeros, as after a real count
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def empty(*shape, dtype, device):
            return (torch.zeros if shape in ((2,), ((2,),)) and dtype == torch.int64 else torch.empty)(
                *shape, dtype=dtype, device=device)

        @staticmethod
        def empty_strided(shape, stride, dtype, device):  # the memo's replay allocates so
            if tuple(shape) == (2,) and dtype == torch.int64:
                return torch.zeros(2, dtype=dtype, device=device)
            return torch.empty_strided(shape, stride, dtype=dtype, device=device)

    bincount_mod.alloc = _Torch()

    def bincount_memo():  # the memo's replay allocates through the same stand-in
        memo_mod.torch = _Torch()
        try:
            return on_cpu(bincount_mod._MEMO, lambda: fastpath.bincount(vals))
        finally:
            memo_mod.torch = torch
    vid = torch.randn(1, 16, 1, 60, 104).bfloat16()
    logits = torch.randn(1, 151936)
    small_mod = importlib.import_module("fastpath.ops.linalg.small")
    svd_mod = importlib.import_module("fastpath.ops.linalg.svd")
    a3, p8 = torch.randn(1000, 3, 3), torch.randn(1000, 8, 8)
    vals = torch.randint(0, 1000, (1 << 16,))

    lu_mod = importlib.import_module("fastpath.ops.linalg.lu")
    lu_a = torch.randn(64, 256, 256, dtype=torch.complex64)
    lu_f, lu_p = torch.linalg.lu_factor(lu_a)
    lu_b = torch.randn(64, 256, 1, dtype=torch.complex64)

    def lu_solve_memo():  # lu.MEMO (off by default until its GPU check) on
        lu_mod.MEMO = True
        try:
            return on_cpu(lu_mod._LU_SOLVE_MEMO, lambda: fastpath.linalg.lu_solve(lu_f, lu_p, lu_b))
        finally:
            lu_mod.MEMO = False

    def inv3():
        return fastpath.linalg.inv_ex(a3)

    def pinv8():
        return fastpath.linalg.pinv(p8)

    def on_cpu(memo, fn):  # a memo replaying on the CPU stand-ins
        memo.device_types = ("cpu",)
        try:
            return fn()
        finally:
            memo.device_types = ("cuda",)

    def linear_memo(x=x, w=w):  # the launch memo (fastpath._core.memo) replaying: allowed on these CPU stand-ins
        return on_cpu(linear_mod._MEMO, lambda: fastpath.linear(x, w))

    cases = {"fastpath.linear 1x4096x4096": lambda: fastpath.linear(x, w),
             "fastpath.linear 1x4096x4096, a replay of the launch memo": linear_memo,
             "fastpath.linear_swiglu 1x4096x(2x4096)": lambda: linear_mod.linear_swiglu(x, wg),
             "fastpath.linear_swiglu 1x4096x(2x4096), a replay of the launch memo": (
                 lambda: on_cpu(linear_mod._MEMO, lambda: linear_mod.linear_swiglu(x, wg))),
             "fastpath.linear 4x14336x4096": lambda: fastpath.linear(x4, w4),
             "fastpath.linear 4x14336x4096, a replay of the launch memo": lambda: linear_memo(x4, w4),
             "fastpath.scaled_dot_product_attention decode 1K": (
                 lambda: fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
             "fastpath.scaled_dot_product_attention decode 1K, a replay of the launch memo": (
                 lambda: on_cpu(attention_mod._MEMO, lambda: fastpath.scaled_dot_product_attention(q, k, v,
                                                                                                  enable_gqa=True))),
             "fastpath.fused_experts one token, top-8": lambda: fastpath.fused_experts(h, ids, tw, gate_up, down),
             "fastpath.grouped_mm one token's 8 rows, 16 groups": (
                 lambda: fastpath.grouped_mm(h8, gate_up.transpose(1, 2), offs=offs8)),
             "fastpath.eq uint8": lambda: fastpath.eq(u8a, u8b),
             "fastpath.eq uint8, a replay of the launch memo": lambda: on_cpu(ew_mod._MEMO_CMP,
                                                                              lambda: fastpath.eq(u8a, u8b)),
             "fastpath.frexp bf16": lambda: fastpath.frexp(xb),
             "fastpath.frexp bf16, a replay of the launch memo": lambda: on_cpu(ew_mod._MEMO_FREXP,
                                                                                lambda: fastpath.frexp(xb)),
             "fastpath.mse_loss none, forward + backward (with torch's sum and autograd)": mse_fwd_bwd,
             "fastpath.mse_loss none, no autograd": lambda: fastpath.mse_loss(yb, gy, reduction="none"),
             "fastpath.mse_loss none, no autograd, a replay of the launch memo": (
                 lambda: on_cpu(loss_mod._MEMO_FWD, lambda: fastpath.mse_loss(yb, gy, reduction="none"))),
             "fastpath.sample greedy 1x151936": lambda: fastpath.sample(logits, temperature=0.0),
             "fastpath.sample greedy 1x151936, a replay of the launch memo": (
                 lambda: on_cpu(sampling_mod._MEMO, lambda: fastpath.sample(logits, temperature=0.0))),
             "fastpath.pad 1x16x1x60x104 causal": lambda: fastpath.pad(vid, (1, 1, 1, 1, 2, 0)),
             "fastpath.pad 1x16x1x60x104 causal, a replay of the launch memo": (
                 lambda: on_cpu(pad_mod._MEMO, lambda: fastpath.pad(vid, (1, 1, 1, 1, 2, 0)))),
             "fastpath.bincount 64K values, minlength 1000, validate=False": (
                 lambda: fastpath.bincount(vals, minlength=1000, validate=False)),
             "fastpath.bincount 64K values, validate=True (a range read back)": lambda: fastpath.bincount(vals),
             "fastpath.bincount 64K values, validate=True, a replay of the launch memo": bincount_memo,
             "fastpath.linalg.inv_ex 1000x3x3": lambda: fastpath.linalg.inv_ex(a3),
             "fastpath.linalg.inv_ex 1000x3x3, a replay of the launch memo": lambda: on_cpu(small_mod._INV_MEMO, inv3),
             "fastpath.linalg.pinv 1000x8x8": lambda: fastpath.linalg.pinv(p8),
             "fastpath.linalg.pinv 1000x8x8, a replay of the launch memo": lambda: on_cpu(svd_mod._PINV_MEMO, pinv8),
             "fastpath.linalg.lu_solve 64x256x256 complex64, k=1": lambda: fastpath.linalg.lu_solve(lu_f, lu_p, lu_b),
             "fastpath.linalg.lu_solve 64x256x256 complex64, k=1, a replay of the launch memo": lu_solve_memo}

    n = 5000
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    for name, fn in ((k, f) for k, f in cases.items() if not only or any(o in k for o in only)):
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
    # the training ops with and without their memos, interleaved (7 rounds of 1000 calls): min and median
    times: dict = {}
    for _ in range(7):
        for name in ("mse_loss", "dropout", "batch_norm"):
            for memo, fn in ((False, training), (True, with_memo)):
                for _ in range(100):
                    fn(name)
                t0 = time.perf_counter()
                for _ in range(1000):
                    fn(name)
                times.setdefault((name, memo), []).append((time.perf_counter() - t0) * 1e3)
    for (name, memo), v in times.items():
        v.sort()
        print(f"fastpath.{name} 64x256 forward + backward (autograd.grad){', launch memo replays' if memo else ''}, "
              f"Python path: min {v[0]:.1f} / median {v[3]:.1f} us a call")
    print(f"({stub.calls} stub launches)")


if __name__ == "__main__":
    main()
