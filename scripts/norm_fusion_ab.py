"""A/B of where a decoder layer's RMSNorm runs, inside the decode engine (one process,
alternating): its own kernel; inside the router only (``moe.FUSE_NORM``); inside the router
and the projections (``linear.FUSE_NORM``), the one-row projections on the 16-row dot or on the
float32 product-and-sum (``matvec.NORM_ONE_ROW_FMA``), up to a weight size
(``linear.NORM_FUSE_MAX_ELEMS``). Prints decode tok/s of each, twice.

    PYTHONPATH=src python3 scripts/norm_fusion_ab.py [--configs qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b] [--json OUT]
"""
import argparse
import json

import torch

from fastpath.engine import bench
from fastpath.models.config import named
from fastpath.ops import linear, matvec, moe

M = 2 ** 20
#: name: (linear.FUSE_NORM, moe.FUSE_NORM, matvec.NORM_ONE_ROW_FMA, linear.NORM_FUSE_MAX_ELEMS)
VARIANTS = {"own kernel": (False, False, None, 0), "router": (False, True, None, 0),
            "router+proj<=16M fma": (True, True, (16, 512, 2), 16 * M),
            "router+proj<=32M fma": (True, True, (16, 512, 2), 32 * M),
            "router+proj<=32M dot": (True, True, None, 32 * M)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name in args.configs.split(","):
        model = bench.random_model(named(name.split(":")[0]), device=torch.device("cuda"), dtype=torch.bfloat16,
                                   fp8=name.endswith(":fp8"))
        for rnd in range(args.rounds):
            for variant, (lin, rt, fma, most) in VARIANTS.items():
                linear.FUSE_NORM, moe.FUSE_NORM, matvec.NORM_ONE_ROW_FMA = lin, rt, fma
                linear.NORM_FUSE_MAX_ELEMS = most
                r = bench.run(model)
                rows.append(dict(config=name, variant=variant, round=rnd, decode_tps=r["decode_tps"]))
                print(f"{name:16s} {variant:24s} decode {r['decode_tps']:6.1f} tok/s", flush=True)
        del model
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
