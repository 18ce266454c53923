"""A/B of where a decoder layer's RMSNorm runs, inside the decode engine (one process,
alternating): its own kernel; inside the router only (``moe.FUSE_NORM``); inside the router
and the projections (``linear.FUSE_NORM``) up to a weight size (``linear.NORM_FUSE_MAX_ELEMS``).
Prints decode tok/s of each, twice. (Its first two runs, f807f63 and a85eb17, also timed the
one-row projections on the 16-row dot, since removed: 327 / 331 against 347 / 352 tok/s.)

    PYTHONPATH=src python3 scripts/norm_fusion_ab.py [--configs qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b]
        [--variants NAME,...] [--json OUT]
"""
import argparse
import json

import torch

from fastpath.engine import bench
from fastpath.models.config import named
from fastpath.ops import linear, moe

M = 2 ** 20
#: name: (linear.FUSE_NORM, moe.FUSE_NORM, linear.NORM_FUSE_MAX_ELEMS)
VARIANTS = {"own kernel": (False, False, 0), "router": (False, True, 0),
            "router+proj<=16M": (True, True, 16 * M), "router+proj<=32M": (True, True, 32 * M)}
ROUTER_ROWS = moe.ROUTER_BLOCK_N  # the default, for the variants that do not set it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="names of VARIANTS, comma-separated")
    ap.add_argument("--router-blocks", default="", help="moe.ROUTER_BLOCK_N values to A/B too, e.g. 2,4,8")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name in args.configs.split(","):
        model = bench.random_model(named(name.split(":")[0]), device=torch.device("cuda"), dtype=torch.bfloat16,
                                   fp8=name.endswith(":fp8"))
        for rnd in range(args.rounds):
            runs = [(v, None) for v in args.variants.split(",") if v]
            runs += [("router+proj<=16M", int(b)) for b in args.router_blocks.split(",") if b]
            for variant, block in runs:
                linear.FUSE_NORM, moe.FUSE_NORM, linear.NORM_FUSE_MAX_ELEMS = VARIANTS[variant]
                moe.ROUTER_BLOCK_N = block or ROUTER_ROWS
                r = bench.run(model)
                variant += f" router rows {block}" if block else ""
                rows.append(dict(config=name, variant=variant, round=rnd, decode_tps=r["decode_tps"]))
                print(f"{name:16s} {variant:24s} decode {r['decode_tps']:6.1f} tok/s", flush=True)
                if args.json:  # after every run: a call cut short keeps what it measured
                    with open(args.json, "w") as f:
                        json.dump(rows, f, indent=1)
        model = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
