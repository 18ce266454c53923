"""GPU sweep of the chunked gated delta rule (the prefill of Qwen3.5 / Qwen3.6's Gated DeltaNet
layers): chunk size, dot precision, value columns per program and warps of the two kernels,
and the recurrent kernel over the whole sequence (``chunk_size`` 0), at Qwen3.6-35B-A3B's
shapes (16 q/k heads and 32 value heads of 128). Each variant is checked against a float64
reference (relative error of the output and of the final state), then timed (median of CUDA
events over repeated calls).

    PYTHONPATH=src python3 scripts/tune_gated_delta.py [--tokens 512 4096] [--json OUT] [--variants JSON]
"""
import argparse
import json

import torch

from fastpath.bench.harness import knobs
from fastpath.ops import gated_delta as G

#: (chunk size, knobs); chunk size 0: the recurrent kernel.
VARIANTS = [
    (64, {}),
    (32, {}),
    (32, {"CHUNK_WARPS": 8}),
    (16, {"CHUNK_WARPS": 4}),
    (32, {"CHUNK_PREC": "tf32x3", "CHUNK_WARPS": 8}),
    (32, {"CHUNK_PREC": "tf32x3", "SCAN_BV": 16, "PREP_BV": 32, "CHUNK_WARPS": 4}),
    (16, {"CHUNK_PREC": "tf32x3", "CHUNK_WARPS": 4}),
    (64, {"CHUNK_PREC": "tf32x3", "SCAN_BV": 16, "PREP_BV": 32, "CHUNK_WARPS": 8}),
    (0, {}),
]


def timed_us(fn, reps: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        t0.record()
        fn()
        t1.record()
        t1.synchronize()
        times.append(t0.elapsed_time(t1) * 1e3)
    return sorted(times)[reps // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 4096])
    ap.add_argument("--json", default=None)
    ap.add_argument("--variants", help='a JSON list of [chunk, knobs] pairs instead of VARIANTS, e.g. '
                    '\'[[16, {"CHUNK_WARPS": 8}]]\'')
    args = ap.parse_args()
    variants = json.loads(args.variants) if args.variants else VARIANTS
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    rows = []
    for T in args.tokens:
        B, HK, HV, D = 1, 16, 32, 128
        q = torch.randn(B, T, HK, D, device=dev, generator=gen).bfloat16()
        k = torch.randn(B, T, HK, D, device=dev, generator=gen).bfloat16()
        v = torch.randn(B, T, HV, D, device=dev, generator=gen).bfloat16()
        g = -torch.rand(B, T, HV, device=dev, generator=gen) * 0.5
        beta = torch.rand(B, T, HV, device=dev, generator=gen)
        ro, rs = G.reference_gated_delta_rule(q.double(), k.double(), v.double(), g.double(), beta.double())
        print(f"T={T}, 16/32 heads of 128, bf16:", flush=True)
        for C, kn in variants:
            rec = {"tokens": T, "chunk": C, "knobs": kn}
            try:
                with knobs(G, **kn):
                    def fn():
                        return G._chunk_op(q, k, v, g, beta, None, D ** -0.5, True, C)
                    o, s = fn()
                    rec["err_o"] = ((o.double() - ro).norm() / ro.norm()).item()
                    rec["err_state"] = ((s.double() - rs).norm() / rs.norm()).item()
                    rec["us"] = timed_us(fn)
                print(f"  chunk {C:2d} {kn}: {rec['us']:9.1f} us  err o {rec['err_o']:.1e} state "
                      f"{rec['err_state']:.1e}", flush=True)
            except Exception as exc:  # noqa: BLE001 - a variant that fails is reported
                rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                print(f"  chunk {C:2d} {kn}: FAILED {rec['error']}", flush=True)
                torch.cuda.synchronize()
            rows.append(rec)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
