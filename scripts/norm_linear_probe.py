"""GPU probe of ``rms_norm_linear`` (a decoder layer's norm and the projection after it): the
norm's own kernel then ``linear``, the norm inside the projection with every program reading
the row first (``NORM_DEFER=False``), and with the rstd deferred to the sums (``NORM_DEFER``),
on the tuned plan and on the one-row product-and-sum; ``linear`` alone as the floor. CUDA
graphs, the weights rotated through more than 2x L2 (cold), microseconds a call.

    PYTHONPATH=src python3 scripts/norm_linear_probe.py [--fp8-plans | --dense] [--json PATH]

``--dense``: Llama-3-8B's and Qwen3-8B's projections, norm first against deferred.
``--fp8-plans``: the fp8 one-row shapes only, the fused norm under other blocks of its one-row
product-and-sum plan (``matvec.FP8_NORM_ONE_ROW_FMA``: BLOCK_N, BLOCK_K, programs per SM).
"""
import argparse
import json

import torch

from fastpath._core import memo
from fastpath.bench.harness import Timer, measure_ceilings
from fastpath.ops import linear as L
from fastpath.ops import matvec
from fastpath.ops.fp8 import quantize_fp8
from fastpath.ops.norm import reference_rms_norm

#: (rows, K, N, swiglu, fp8): LFM2.5's and Qwen3.6's projections, Qwen3-8B's q/k/v and MLP,
#: an LM head, four rows.
SHAPES = [(1, 2048, 6144, False, False), (1, 2048, 12352, False, False), (1, 4096, 6144, False, False),
          (1, 4096, 24576, True, False), (1, 2048, 151936, False, False), (4, 4096, 6144, False, False),
          (1, 2048, 12352, False, True), (1, 4096, 24576, True, True)]
FMA = (False, 16, 512, 2)
#: name: (FUSE_NORM, NORM_DEFER, TUNED one-row bf16 plan or None for the default)
VARIANTS = {"norm, then linear": (False, True, None), "row first": (True, False, None),
            "deferred": (True, True, None), "deferred, fma plan": (True, True, FMA)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--fp8-plans", action="store_true")
    ap.add_argument("--dense", action="store_true", help="Llama-3-8B's and Qwen3-8B's shapes, norm first or deferred")
    args = ap.parse_args()
    memo.ENABLED = False  # a replay would keep the first variant's launches
    shapes, plans, variants = SHAPES, [None], VARIANTS
    if args.dense:
        shapes = [(1, 4096, 6144, False, False), (1, 4096, 28672, True, False), (1, 4096, 24576, True, False),
                  (1, 4096, 128256, False, False), (1, 4096, 151936, False, False)]
        variants = {k: VARIANTS[k] for k in ("norm, then linear", "deferred")}
    if args.fp8_plans:
        shapes = [(1, 2048, 12352, False, True), (1, 2048, 5120, False, True), (1, 4096, 6144, False, True)]
        plans = [None, (32, 512, 2), (32, 256, 4), (64, 256, 2), (16, 1024, 2)]
        variants = {k: VARIANTS[k] for k in ("norm, then linear", "row first")}  # (fp8: never deferred)
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    dev, dt = torch.device("cuda"), torch.bfloat16
    saved = (L.FUSE_NORM, L.NORM_DEFER, L.NORM_FUSE_MAX_ELEMS, dict(matvec.TUNED), matvec.FP8_NORM_ONE_ROW_FMA)
    rows_out = []
    for (M, K, N, swiglu, fp8), fp8_plan in [(s, p) for s in shapes for p in plans]:
        w0 = torch.randn(N, K, device=dev) * K ** -0.5
        if fp8:
            w0, s0 = quantize_fp8(w0, recipe="rowwise")
            s0 = s0.reshape(-1, 1)
        else:
            w0, s0 = w0.to(dt), None
        copies = max(2, -(-3 * ceil["l2_bytes"] // (w0.numel() * w0.element_size())))
        sets = []
        for _ in range(copies):
            x = torch.randn(M, K, device=dev, dtype=dt) * 3
            sets.append((x, torch.randn(M, K, device=dev, dtype=dt), torch.rand(K, device=dev, dtype=dt) + 0.5,
                         w0.clone(), s0))
        x, r, nw, w, s = sets[0]
        ref = reference_rms_norm(x, nw, 1e-6, residual=r)[0].double() @ (
            w.double() if s is None else w.double() * s.double()).t()
        if swiglu:
            g, u = ref.chunk(2, -1)
            ref = torch.nn.functional.silu(g) * u
        line = {"rows": M, "K": K, "N": N, "swiglu": swiglu, "fp8": fp8, "fp8 plan": fp8_plan}
        matvec.FP8_NORM_ONE_ROW_FMA = fp8_plan
        est = timer.estimate_ms(lambda *a: L.linear(a[0], a[3], weight_scale=a[4]), sets[0])
        line["linear alone"] = timer.graph_us(lambda *a: L.linear(a[0], a[3], weight_scale=a[4]), sets, est)
        for name, (fuse, defer, tuned) in variants.items():
            L.FUSE_NORM, L.NORM_DEFER, L.NORM_FUSE_MAX_ELEMS = fuse, defer, 2 ** 40
            if tuned is not None:
                matvec.TUNED[(2, True)] = tuned
            try:
                def fn(x, r, nw, w, s):
                    return L.rms_norm_linear(x, nw, 1e-6, w, residual=r, weight_scale=s, swiglu=swiglu)[0]
                y = fn(*sets[0])
                err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
                line[name] = timer.graph_us(fn, sets, est)
                line[name + " error"] = err
            finally:
                L.FUSE_NORM, L.NORM_DEFER, L.NORM_FUSE_MAX_ELEMS, tuned0, _ = saved
                matvec.TUNED.clear()
                matvec.TUNED.update(tuned0)
        matvec.FP8_NORM_ONE_ROW_FMA = saved[4]
        rows_out.append(line)
        print(f"{M}x{K}x{N}{' swiglu' if swiglu else ''}{' fp8' if fp8 else ''} {fp8_plan or ''}: " + ", ".join(
            f"{k} {v:.2f}" if not k.endswith(" error") else f"({v:.1e})" for k, v in line.items()
            if isinstance(v, float)), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
