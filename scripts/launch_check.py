"""GPU check of the fast relaunch path (fastpath._core.launch.Launcher): every op is called
once to compile, then again on fresh data, which goes through the cached kernel, and that
second result is compared with the PyTorch reference. Exit code 1 on any mismatch.

    python scripts/launch_check.py
"""
import sys

import torch

import fastpath
from fastpath.ops import moe


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main() -> int:
    dev = torch.device("cuda")
    bad = 0

    def check(name, make, ours, ref, tol):
        nonlocal bad
        ours(*make())  # compile (Triton's own launch)
        args = make()  # fresh data: the cached kernel's launch
        err = rel(ours(*args), ref(*args))
        ok = err <= tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:<34} rel err {err:.1e} (bound {tol:.0e})", flush=True)

    bf = torch.bfloat16
    for m in (1, 4, 16):
        check(f"linear bf16 {m}x4096x4096", lambda m=m: (torch.randn(m, 4096, device=dev, dtype=bf),
                                                       torch.randn(4096, 4096, device=dev, dtype=bf) / 64),
              fastpath.linear, lambda x, w: x.float() @ w.float().t(), 1e-2)
    check("linear fp32 3x1000x67 (split-K)", lambda: (torch.randn(3, 1000, device=dev), torch.randn(67, 1000, device=dev)),
          fastpath.linear, lambda x, w: x.double() @ w.double().t(), 1e-5)

    def fp8w():
        q, s = fastpath.quantize_fp8(torch.randn(14336, 4096, device=dev) / 64, "rowwise")
        return torch.randn(1, 4096, device=dev, dtype=bf), q, s
    check("linear fp8 weights 1x4096x14336", fp8w, lambda x, q, s: fastpath.linear(x, q, weight_scale=s),
          lambda x, q, s: x.float() @ (q.float() * s).t(), 1e-2)

    def mm():
        a, sa = fastpath.quantize_fp8(torch.randn(16, 4096, device=dev), "rowwise")
        b, sb = fastpath.quantize_fp8(torch.randn(4096, 4096, device=dev), "rowwise")
        return a, b.t(), sa, sb.t()
    rw = fastpath.ScalingType.RowWise
    check("scaled_mm rowwise 16x4096x4096", mm, lambda a, b, sa, sb: fastpath.scaled_mm(a, b, sa, rw, sb, rw),
          lambda a, b, sa, sb: (a.float() * sa) @ (b.float() * sb), 1e-2)
    for shape in [(1, 128256), (64, 128256), (4096, 4096)]:
        check(f"softmax {shape}", lambda shape=shape: (torch.randn(shape, device=dev) * 3,),
              lambda x: fastpath.softmax(x, -1), lambda x: torch.softmax(x.double(), -1), 1e-5)
        check(f"log_softmax {shape}", lambda shape=shape: (torch.randn(shape, device=dev) * 3,),
              lambda x: fastpath.log_softmax(x, -1), lambda x: torch.log_softmax(x.double(), -1), 1e-5)
    check("sample greedy 4x151936", lambda: (torch.randn(4, 151936, device=dev),),
          lambda x: fastpath.sample(x, temperature=0.0).float(), lambda x: x.argmax(-1).float(), 0.0)

    def topk_ok(x):  # a top-k=50 draw must be one of the row's 50 largest logits
        tok = fastpath.sample(x, temperature=0.7, top_k=50, top_p=0.9)
        return (x.topk(50, -1).indices == tok[:, None]).any(-1).float()
    check("sample top-k 50 lands in the top 50", lambda: (torch.randn(4, 151936, device=dev),), topk_ok,
          lambda x: torch.ones(x.shape[0], device=dev), 0.0)
    H, NI, E, k = 2048, 768, 128, 8
    gu = torch.randn(E, 2 * NI, H, device=dev, dtype=bf) / 45
    dn = torch.randn(E, H, NI, device=dev, dtype=bf) / 28
    for T in (1, 8, 64):
        def layer_in(T=T):
            w, ids = fastpath.route(torch.randn(T, E, device=dev), k, norm_topk_prob=True)
            return torch.randn(T, H, device=dev, dtype=bf), ids, w
        check(f"route + fused_experts T={T}", layer_in,
              lambda x, ids, w: fastpath.fused_experts(x, ids, w, gu, dn),
              lambda x, ids, w: moe.reference_fused_experts(x.float(), ids, w, gu.float(), dn.float()), 1e-2)
    print(f"{bad} failed" if bad else "all passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
