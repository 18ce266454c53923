"""GPU probe of the matrix-vector kernel's split-K count: splits rounded up to the plan's
programs per SM or down (``matvec.SPLIT_FILL_OVERRIDE``, for every plan), one row (``--rows``), bf16 and
fp8 weights, the issue's shapes and the decode engine's; CUDA graphs, weights rotated through
more than 2x L2 (cold), the launch memo off, microseconds a call.

    PYTHONPATH=src python3 scripts/split_probe.py [--json PATH] [--splits 1,2,3,4 --shapes 4096x14336x0x1]
        [--rows 4 --variant "name:KNOB=VALUE;KNOB=VALUE" ...]

``--variant`` (repeatable): instead of the roundings, each shape under each variant's matvec knobs (its
plan's own rounding; "name:" alone is the defaults), two interleaved rounds, and ``F.linear`` (16-bit
weights, no SwiGLU) on the same inputs: the ratio torch / ours per variant.
"""
import argparse
import ast
import json

import torch

from fastpath._core import memo
from fastpath.bench.harness import Timer, measure_ceilings
from fastpath.ops import linear as L
from fastpath.ops import matvec
from fastpath.ops.fp8 import quantize_fp8

#: (K, N, swiglu): issue 3's shapes, then q/k/v, MoE o and DeltaNet projections, an MLP
SHAPES = [(4096, 4096, False), (4096, 14336, False), (14336, 4096, False), (2048, 4096, False),
          (4096, 2048, False), (2048, 151936, False), (4096, 128256, False), (4096, 6144, False),
          (2048, 5120, False), (2048, 12352, False), (4096, 28672, True), (12288, 4096, False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--splits", default=None, help="e.g. 1,2,3,4: time these split counts (SPLIT_K_OVERRIDE) "
                    "instead of the two roundings, on --shapes")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x14336x0x1 (K x N x swiglu x fp8), comma-separated")
    ap.add_argument("--rows", type=int, default=1, help="rows of x (the matrix-vector kernel serves up to 16)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:ATTR=VALUE;...",
                    help="compare knob settings in one process, with F.linear beside them")
    ap.add_argument("--set", action="append", default=[], metavar="ATTR=VALUE",
                    help="a matvec knob for the whole run, e.g. FP8_VIA_FP16=(64,128,4)")
    args = ap.parse_args()
    for kv in args.set:
        attr, _, value = kv.partition("=")
        setattr(matvec, attr.strip(), ast.literal_eval(value.strip()))
    memo.ENABLED = False  # a replay would keep the first variant's plan
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    dev, dt = torch.device("cuda"), torch.bfloat16
    rows = []
    cases = [(fp8, K, N, sw) for fp8 in (False, True) for K, N, sw in SHAPES]
    if args.shapes:
        cases = [(bool(int(f)), int(k), int(n), bool(int(sw))) for k, n, sw, f in
                 (c.split("x") for c in args.shapes.split(","))]
    for fp8, K, N, swiglu in cases:
        w0 = torch.randn(N, K, device=dev) * K ** -0.5
        w0, s0 = quantize_fp8(w0, recipe="rowwise") if fp8 else (w0.to(dt), None)
        s0 = s0.reshape(-1, 1) if s0 is not None else None
        copies = max(2, -(-3 * ceil["l2_bytes"] // (w0.numel() * w0.element_size())))
        sets = [(torch.randn(args.rows, K, device=dev, dtype=dt), w0.clone(), s0) for _ in range(copies)]
        fn = L.linear_swiglu if swiglu else L.linear

        def call(x, w, s):
            return fn(x, w, weight_scale=s)
        line = dict(M=args.rows, K=K, N=N, swiglu=swiglu, fp8=fp8)
        est = timer.estimate_ms(call, sets[0])
        if args.variant:
            line.update(_variants(args.variant, timer, call, sets, est, not (fp8 or swiglu)))
            rows.append(line)
            continue
        if args.splits:
            for n in [int(v) for v in args.splits.split(",")] * 2:
                matvec.SPLIT_K_OVERRIDE = n
                line.setdefault(f"split={n}", []).append(timer.graph_us(call, sets, est))
            matvec.SPLIT_K_OVERRIDE = None
            rows.append(line)
            print(f"{args.rows}x{K}x{N}{' swiglu' if swiglu else ''}{' fp8' if fp8 else ''}: " + ", ".join(
                f"{k} {min(v):.2f}" for k, v in line.items() if k.startswith("split")), flush=True)
            continue
        for fill in (False, True, False, True):
            matvec.SPLIT_FILL_OVERRIDE = fill
            line.setdefault(f"fill={fill}", []).append(timer.graph_us(call, sets, est))
        matvec.SPLIT_FILL_OVERRIDE = None
        rows.append(line)
        up, down = min(line["fill=False"]), min(line["fill=True"])
        print(f"{args.rows}x{K}x{N}{' swiglu' if swiglu else ''}{' fp8' if fp8 else ''}: splits up {up:7.2f} us, "
              f"down {down:7.2f} ({up / down:.3f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def _variants(variants, timer, call, sets, est, native: bool) -> dict:
    """{variant: [us, us], "torch": [us, us]}: each variant's knobs set (then restored) around its
    timing, two interleaved rounds; printed as the best of each and torch / ours."""
    out = {}
    for _ in range(2):
        if native:
            out.setdefault("torch", []).append(timer.graph_us(lambda x, w, s: torch.nn.functional.linear(x, w), sets,
                                                              est))
        for v in variants:
            name, _, knobs = v.partition(":")
            saved = {}
            for kv in filter(None, (k.strip() for k in knobs.split(";"))):
                attr, _, value = kv.partition("=")
                saved[attr.strip()] = getattr(matvec, attr.strip())
                setattr(matvec, attr.strip(), ast.literal_eval(value.strip()))
            try:
                out.setdefault(name, []).append(timer.graph_us(call, sets, est))
            finally:
                for attr, value in saved.items():
                    setattr(matvec, attr, value)
    x, w, s = sets[0]
    tag = f"{x.shape[0]}x{w.shape[1]}x{w.shape[0]}"
    t = min(out["torch"]) if "torch" in out else None
    print(tag + ": " + ", ".join(f"{k} {min(v):.2f} us" + (f" ({t / min(v):.2f}x)" if t and k != "torch" else "")
                                 for k, v in out.items()), flush=True)
    return out


if __name__ == "__main__":
    main()
